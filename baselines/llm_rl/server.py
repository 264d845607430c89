"""A transformers-backed OpenAI-compatible upstream: ``POST /v1/chat/completions`` (non-streaming) and
``GET /v1/models``, serving the base model or the RL-trained weights.

    python -m baselines.llm_rl.server --model smollm2 --port 8080                       # base weights
    python -m baselines.llm_rl.server --model smollm2 --weights runs/llm_rl/NAME/checkpoint.pt --port 8080
    python -m baselines.llm_rl.server --pinned baselines/llm_rl/agent.py --port 8080  # a leaderboard entry's weights

Requests honour ``temperature`` (0: greedy), ``seed`` and ``max_tokens``; ``guided_choice`` (a list of
strings, as vLLM's extra field) restricts the answer to one of them, sampled token by token under a
mask, so every answer is a valid action. Replies carry, besides ``usage``, the token ids the LLM proxy
copies into its trajectory lines: a top-level ``prompt_token_ids``, and per choice ``token_ids`` (the
sampled completion ids) and ``token_logprobs`` (their log-probabilities under the sampling
distribution), plus the same log-probabilities as OpenAI ``logprobs.content``.
"""

from __future__ import annotations

import argparse
import copy
import json
import queue
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from polar_bench.errors import UserError
from polar_bench.llm.proxy import JSONHandler, QuietHTTPServer

from .model import DTYPES, Policy, Sampled, load_model, load_trained_state, pick_device, prompt_ids

_RUN = re.compile(r"-run(\d+)$")
# In a list of weights, a run whose episodes an earlier session already journaled (its checkpoint need not
# exist any more): nothing is served for it, and `baselines.llm_rl.evaluate` checks that it is complete.
JOURNALED = "journaled"


class Stats:
    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self.lock:
            self.calls += 1
            self.seconds += seconds

    def ms_per_call(self) -> float:
        return 1000.0 * self.seconds / self.calls if self.calls else 0.0


class Replicas:
    """Identical copies of one policy answering in parallel: a request takes whichever copy is free, so
    that evaluation workers playing the same run do not queue behind one model's lock. An answer depends
    only on the request (its seed) and the weights, and the copies are bit-identical (``deepcopy`` of the
    loaded, cast model), so which copy answers does not change it (tests/test_llm_rl.py)."""

    def __init__(self, copies: list[Policy]) -> None:
        if not copies:
            raise ValueError("Replicas needs at least one policy")
        self.copies = copies
        self.tokenizer = copies[0].tokenizer
        self._free: queue.SimpleQueue[Policy] = queue.SimpleQueue()
        for p in copies:
            self._free.put(p)

    def complete(self, ids: list[int], **kwargs: Any) -> Sampled:
        policy = self._free.get()
        try:
            return policy.complete(ids, **kwargs)
        finally:
            self._free.put(policy)


Served = Policy | Replicas


class NotServed:
    """The place of a run whose weights are `JOURNALED`: asking for it is an error, never an answer."""

    def __init__(self, run: int) -> None:
        self.run = run


def chat_completion(policy: Served, body: dict, model_name: str) -> dict:
    """The reply to one chat/completions request body (raises ValueError on a bad request)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    if body.get("stream"):
        raise ValueError("stream is not supported by this server")
    choices = body.get("guided_choice")
    if choices is not None and not isinstance(choices, list):
        raise ValueError("guided_choice must be a list of strings")
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    seed = body.get("seed")
    ids = prompt_ids(policy.tokenizer, [{"role": m["role"], "content": m.get("content") or ""} for m in messages])
    out = policy.complete(ids, choices=choices, temperature=temperature, max_tokens=max_tokens,
                          seed=int(seed) if seed is not None else None)
    tok = policy.tokenizer
    content = [{"token": tok.decode([t]), "logprob": lp, "bytes": None, "top_logprobs": []}
               for t, lp in zip(out.token_ids, out.token_logprobs, strict=True)]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
        "model": model_name,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": out.text},
                     "finish_reason": out.finish_reason, "token_ids": out.token_ids,
                     "token_logprobs": out.token_logprobs, "logprobs": {"content": content}}],
        "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out.token_ids),
                  "total_tokens": len(ids) + len(out.token_ids)},
        "prompt_token_ids": ids,
    }


def pick_policy(policies: Sequence[Served | NotServed], body: dict) -> Served:
    """The policy that answers ``body``: the only one, or with several (independently trained instances,
    one per evaluation run, as vLLM serves adapters by model name) the one whose index the requested
    model names: ``<anything>-run<R>``, as baselines/llm_rl/agent.py asks for run R."""
    if len(policies) == 1 and not isinstance(policies[0], NotServed):
        return policies[0]
    m = _RUN.search(str(body.get("model", "")))
    if m is None or int(m.group(1)) >= len(policies):
        raise ValueError(f"this server serves {len(policies)} trained instances, one per run: ask for the model "
                         f"'<name>-run<R>' with R below {len(policies)} (got model {body.get('model')!r})")
    picked = policies[int(m.group(1))]
    if isinstance(picked, NotServed):
        raise ValueError(f"run {picked.run}'s weights were given as {JOURNALED!r} (its episodes are journaled): "
                         f"this server does not serve it")
    return picked


def pinned_weights(agent: str | Path, store: str | None = None) -> list[str]:
    """The checkpoints that the artifacts manifest of ``agent`` (an agent file of this folder) pins, one
    per run in run order, each checked by its SHA-256 and fetched from the artifact store when missing
    (``store``, else polar_bench's setting: docs/artifacts.md); nothing is retrained. So the server
    answers with the very weights a leaderboard entry was made with."""
    from polar_bench.artifacts import ensure_artifacts, load_manifest

    manifest = load_manifest(agent)
    if manifest is None:
        raise ValueError(f"{agent} has no artifacts manifest beside it: it pins no weights (use --weights)")
    ensure_artifacts(agent, rebuild=False, store=store, log=lambda line: print(line, file=sys.stderr))
    runs = sorted((a.run, str(manifest.file(a))) for a in manifest.artifacts if a.run is not None)
    if not runs or [r for r, _ in runs] != list(range(len(runs))):
        raise ValueError(f"the manifest of {agent} must pin one checkpoint per run 0, 1, ..., each with its 'run'")
    return [path for _, path in runs]


def load_policies(model_spec: str, weights: list[str], *, instances: int = 1, dtype: str = "float32",
                  salt: int = 0, replicas: int = 1, device: str = "cpu") -> list[Served | NotServed]:
    """Policies to serve: the base model (``instances`` copies, so that runs served in parallel do not
    queue behind one lock), or one per checkpoint in ``weights`` (run R gets ``weights[R]``; `JOURNALED`
    serves nothing for run R: `NotServed`), cast to
    ``dtype`` after loading (the trained layers are saved in float32) and moved to ``device`` (`pick_device`:
    ``cpu``, ``cuda[:N]`` or ``auto``). With ``replicas`` above 1 each is `Replicas` of that many
    identical copies, so that requests for the same run answer in parallel."""
    import torch

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    if weights and all(w == JOURNALED for w in weights):
        raise ValueError(f"every run's weights are {JOURNALED!r}: there is nothing to serve")
    dev = pick_device(device)
    base, tok = load_model(model_spec)
    out: list[Served | NotServed] = []
    first = True
    for k in range(len(weights) or instances):
        if weights and weights[k] == JOURNALED:
            out.append(NotServed(k))
            continue
        model, first = (base if first else copy.deepcopy(base)), False
        if weights:
            load_trained_state(model, torch.load(weights[k], map_location="cpu", weights_only=False)["trained"])
        model = model.to(device=dev, dtype=getattr(torch, dtype))
        if replicas == 1:
            out.append(Policy(model, tok, salt=salt))
        else:   # copies of the cast model: bit-identical weights
            out.append(Replicas([Policy(model if r == 0 else copy.deepcopy(model), tok, salt=salt)
                                 for r in range(replicas)]))
    return out


def policies_from_args(args: argparse.Namespace, salt: int = 0) -> list[Served | NotServed]:
    """The policies a command line names (``--model``, ``--weights`` or ``--pinned``, ``--instances``,
    ``--dtype``, ``--replicas``, ``--device``); ``args.weights`` becomes the pinned files' paths. A bad
    choice is a one-line error and exit code 2."""
    try:
        if args.pinned:
            if args.weights:
                raise ValueError("give --weights or --pinned, not both")
            args.weights = pinned_weights(args.pinned, args.artifact_store)
        return load_policies(args.model, args.weights, instances=args.instances, dtype=args.dtype, salt=salt,
                             replicas=args.replicas, device=args.device)
    except (ValueError, UserError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def make_server(policy: Served | Sequence[Served | NotServed], host: str = "127.0.0.1", port: int = 0,
                model_name: str = "smollm2-rl") -> tuple[ThreadingHTTPServer, Stats]:
    """An HTTP server (not yet serving: call ``serve_forever``, e.g. in a thread) and its statistics.
    With a list of policies, each request goes to the one its model name picks (`pick_policy`)."""
    stats = Stats()
    policies = [policy] if isinstance(policy, (Policy, Replicas)) else list(policy)

    class Handler(JSONHandler):
        def _reply(self, status: int, obj: dict) -> None:
            self._send(status, json.dumps(obj).encode())

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/").endswith("/models"):
                self._reply(200, {"object": "list", "data": [{"id": model_name, "object": "model",
                                                             "owned_by": "polar_bench"}]})
            else:
                self._reply(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.close_connection = True  # the body stays unread: this connection cannot go on
                self._reply(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                t0 = time.perf_counter()
                reply = chat_completion(pick_policy(policies, body), body, model_name)
                stats.add(time.perf_counter() - t0)
            except (ValueError, KeyError, TypeError) as exc:
                self._reply(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
                return
            self._reply(200, reply)

    server = QuietHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server, stats


def serve_in_thread(policy: Served | Sequence[Served | NotServed], port: int = 0, model_name: str = "smollm2-rl",
                    ) -> tuple[ThreadingHTTPServer, Stats, str]:
    """Start serving in a daemon thread; returns (server, stats, base URL ending in /v1)."""
    server, stats = make_server(policy, port=port, model_name=model_name)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, stats, f"http://127.0.0.1:{server.server_address[1]}/v1"


def main(argv: list[str] | None = None) -> None:
    import torch

    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.server", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2", help="'smollm2', a .gguf file or a save_pretrained folder")
    ap.add_argument("--weights", nargs="+", default=[], help="checkpoints of baselines.llm_rl.train (their trained "
                    "layers); several: one per run, picked by the requested model's -run<R> suffix")
    ap.add_argument("--pinned", metavar="AGENT", help="serve the checkpoints that AGENT's artifacts manifest "
                    "pins (one per run), checked by SHA-256 and fetched from the artifact store when missing")
    ap.add_argument("--artifact-store", help="where --pinned fetches missing checkpoints (docs/artifacts.md)")
    ap.add_argument("--instances", type=int, default=1, help="copies of the base model (no --weights) "
                    "answering in parallel, picked like several --weights")
    ap.add_argument("--replicas", type=int, default=1, help="identical copies of each served model, answering "
                    "requests for the same run in parallel (answers do not change; memory grows)")
    ap.add_argument("--dtype", choices=DTYPES, default="float32", help="the serving precision (bfloat16: "
                    "about 1.7x faster per call on this AVX-512 CPU, a slightly different distribution: "
                    "benchmarks/llm_rl_serving.py)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, or auto (a CUDA GPU where torch sees "
                    "one); answers on a GPU differ from the CPU's in the last bits, so evaluate and verify alike")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--salt", type=int, default=0, help="mixed into every request seed (0 for evaluation)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--name", default=None, help="the model id to answer with")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    policies = policies_from_args(args, salt=args.salt)
    name = args.name or ("smollm2-135m-rl" if args.weights else "smollm2-135m-base")
    server, stats = make_server(policies, port=args.port, model_name=name)

    def _stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    print(f"serving {name} at http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print(f"{stats.calls} calls, {stats.ms_per_call():.1f} ms per call", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
