"""The OpenAI-compatible LLM proxy that `evaluate` puts in front of every agent process.

Each evaluation worker runs one `LLMProxy` in a thread; the agent process reaches it at its slot's
``OPENAI_BASE_URL`` (a random token per agent slot), and the proxy forwards the chat, completions and
models routes to the upstream (``evaluate --llm-upstream``; by default the embedded server it starts
at the first call). It attributes each call to its episode and step, counts it from the upstream's
own usage, applies the budgets (`LLMBudget`) and caches identical requests of an episode seed.
See docs/llm.md#any-agent-framework-the-llm-proxy.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import secrets
import socket
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LLMProxy", "LLMBudget", "EpisodeCalls", "PROXY_PORT", "MAX_BODY_BYTES", "parse_budget"]

PROXY_PORT = 8089  # the proxy's port inside the agent's network namespace
MAX_BODY_BYTES = 4 << 20
UPSTREAM_TIMEOUT_S = 300.0
CACHE_ENTRIES = 4096
MAX_CONNECTIONS = 64  # open connections per served address; more are closed at once (a thread each)
ENDPOINTS = ("chat/completions", "completions")
EMBEDDED = "embedded"  # the upstream name of the SmolLM2 that polar_bench serves (polar_bench.llm.server)


@dataclass(frozen=True)
class LLMBudget:
    """Per-episode limits; None: unlimited. ``tokens_per_episode`` counts prompt plus completion tokens."""

    calls_per_episode: int | None = None
    tokens_per_episode: int | None = None

    def to_json(self) -> dict:
        return {"calls_per_episode": self.calls_per_episode, "tokens_per_episode": self.tokens_per_episode}

    def exceeded(self, calls: int, tokens: int) -> str | None:
        if self.calls_per_episode is not None and calls >= self.calls_per_episode:
            return f"LLM budget exceeded: {calls} calls made, at most {self.calls_per_episode} per episode"
        if self.tokens_per_episode is not None and tokens >= self.tokens_per_episode:
            return f"LLM budget exceeded: {tokens} tokens used, at most {self.tokens_per_episode} per episode"
        return None


def parse_budget(text: str) -> LLMBudget:
    """``calls=N,tokens=M`` (either may be left out) as an `LLMBudget`; ValueError with the fix."""
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if key not in ("calls", "tokens") or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"--llm-budget {text!r}: give calls=N,tokens=M with positive integers, "
                             f"e.g. calls=50,tokens=20000")
        values[key] = int(value)
    if not values:
        raise ValueError(f"--llm-budget {text!r}: give calls=N,tokens=M, e.g. calls=50,tokens=20000")
    return LLMBudget(values.get("calls"), values.get("tokens"))


@dataclass
class EpisodeCalls:
    """The LLM calls of one episode, counted by the proxy: ``usage()`` is the results file's ``llm``
    record, ``lines`` the trajectory lines (when the proxy keeps them)."""

    task: str
    run: int
    index: int
    seed: int
    step: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cache_hits: int = 0
    refused: int = 0
    exceeded: str | None = None
    lines: list[dict] = field(default_factory=list)

    def usage(self) -> dict:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 6),
                "cache_hits": self.cache_hits, "source": "proxy"}


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


class LLMProxy:
    """One worker's proxy. ``upstream``: the base URL of an OpenAI-compatible server (``.../v1``).
    ``trace``: keep each call's trajectory line in its `EpisodeCalls`. ``grammar``: the upstream takes
    llama.cpp's ``grammar`` field (``polar_bench.llm`` clients in the agent are told so)."""

    def __init__(self, upstream: str, *, budget: LLMBudget | None = None, trace: bool = False,
                 cache: bool = True, timeout: float = UPSTREAM_TIMEOUT_S, grammar: bool = False):
        self._embedded: Any = None  # the EmbeddedServer of upstream "embedded", started at the first call
        self.model_sha256: str | None = None  # the sha256 of the embedded upstream's model file
        if upstream == EMBEDDED:  # stays EMBEDDED until the first call starts it (then its URL)
            grammar = True  # llama.cpp takes the grammar field
            self.upstream = EMBEDDED
        else:
            self._target(upstream)
        self.budget = budget or LLMBudget()
        self._start_lock = threading.Lock()
        self.grammar = grammar  # the upstream takes llama.cpp's "grammar" field (told to polar_bench.llm clients)
        self.trace = trace
        self.timeout = timeout
        self._cache: OrderedDict[str, tuple[dict, int, int]] | None = OrderedDict() if cache else None
        self._lock = threading.Lock()
        self._tokens: dict[str, set] = {}  # token -> keys of its episodes in progress
        self._episodes: dict[Any, EpisodeCalls] = {}
        self._local = threading.local()
        self._servers: list[ThreadingHTTPServer] = []

    def _target(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"LLM upstream {upstream!r} is not an http(s) URL; give one such as "
                             f"http://127.0.0.1:8080/v1, or 'embedded'")
        self.upstream = upstream.rstrip("/")
        self._scheme, self._host = parts.scheme, parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")

    def _ensure_upstream(self) -> None:
        """Start the embedded upstream at the first call that needs it (an agent that never calls an
        LLM costs no model load)."""
        if self.upstream != EMBEDDED:
            return
        with self._start_lock:
            if self.upstream != EMBEDDED:
                return
            from .server import EmbeddedServer

            server = EmbeddedServer()
            try:
                url = server.start()
            except Exception as exc:  # noqa: BLE001 - any failure is the upstream's, told to the agent
                raise _HTTPError(502, f"the embedded LLM upstream could not start: {exc}"[:600],
                                 "upstream_error") from None
            self._embedded = server
            self.model_sha256 = server.model_sha256  # the served file's identity, for the trajectory lines
            self._target(url)

    # ------------------------------------------------------------------ the worker's side
    def new_token(self) -> str:
        token = secrets.token_hex(16)
        with self._lock:
            self._tokens[token] = set()
        return token

    def knows(self, token: str) -> bool:
        return token in self._tokens

    def open(self, token: str, key: Any, task: str, run: int, index: int, seed: int) -> None:
        """An episode starts on ``token``; ``key`` names it (the worker's lane)."""
        with self._lock:
            for keys in self._tokens.values():
                keys.discard(key)
            self._episodes[key] = EpisodeCalls(task, run, index, seed)
            self._tokens.setdefault(token, set()).add(key)

    def step(self, key: Any, step: int) -> None:
        ep = self._episodes.get(key)
        if ep is not None:
            ep.step = step

    def exceeded(self, key: Any) -> str | None:
        ep = self._episodes.get(key)
        return ep.exceeded if ep is not None else None

    def close(self, key: Any) -> EpisodeCalls | None:
        """End the episode ``key``; its calls (None if it was never opened)."""
        with self._lock:
            for keys in self._tokens.values():
                keys.discard(key)
            return self._episodes.pop(key, None)

    def serve(self, listener: socket.socket | None = None) -> ThreadingHTTPServer:
        """Serve on ``listener`` (a listening socket handed over from the agent's namespace), or on a
        fresh 127.0.0.1 port (``server.server_address``); `stop` ends it."""
        proxy = self

        class Handler(_Handler):
            owner = proxy

        server = _BoundedServer(("127.0.0.1", 0), Handler, bind_and_activate=listener is None)
        if listener is not None:
            server.socket.close()
            server.socket = listener
        server.daemon_threads = True
        self._servers.append(server)
        server.server_address = server.socket.getsockname()[:2]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
                         name="polar_bench-llm-proxy").start()
        return server

    def stop(self, server: ThreadingHTTPServer) -> None:
        if server in self._servers:
            self._servers.remove(server)
            server.shutdown()
            server.server_close()

    def shutdown(self) -> None:
        for server in list(self._servers):
            self.stop(server)
        with self._start_lock:
            embedded, self._embedded = self._embedded, None
        if embedded is not None:
            embedded.stop()

    # ------------------------------------------------------------------ the calls
    def _episode_of(self, token: str) -> EpisodeCalls:
        with self._lock:
            keys = self._tokens.get(token)
            if keys is None:
                raise _HTTPError(403, "unknown proxy token: use OPENAI_BASE_URL as the agent process was given it")
            if not keys:
                raise _HTTPError(409, "no episode is in progress for this agent: LLM calls are accepted from "
                                      "reset() and act() (not from make_agent or at import time)")
            if len(keys) > 1:
                raise _HTTPError(409, "this agent's act_batch serves several episodes at once, so a call cannot "
                                      "be attributed to one; evaluate with --envs-per-worker 1")
            return self._episodes[next(iter(keys))]

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _upstream(self, method: str, endpoint: str, body: bytes | None, headers: dict) -> tuple[int, bytes]:
        self._ensure_upstream()
        for attempt in (1, 2):  # a kept-alive connection the upstream closed meanwhile: one fresh try
            conn = self._connection()
            try:
                conn.request(method, f"{self._prefix}/{endpoint}", body=body, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, OSError) as exc:
                conn.close()
                self._local.conn = None
                death = self._embedded.death(wait=1.0) if self._embedded is not None else None
                if death is not None:  # no retry: a crashed server is not coming back (no restart either:
                    raise _HTTPError(502, death[:1500], "upstream_error") from None  # it would crash again)
                if attempt == 2 or isinstance(exc, TimeoutError):
                    raise _HTTPError(502, f"the LLM upstream {self.upstream} did not answer: {exc}",
                                     "upstream_error") from None
        raise AssertionError("unreachable")

    def models(self, headers: dict) -> tuple[int, bytes]:
        return self._upstream("GET", "models", None, headers)

    def call(self, token: str, endpoint: str, raw: bytes, headers: dict) -> tuple[int, bytes, str]:
        """One POST from the agent: (status, body, content type)."""
        ep = self._episode_of(token)
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _HTTPError(400, f"the request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _HTTPError(400, "the request body must be a JSON object")
        with self._lock:
            over = ep.exceeded or self.budget.exceeded(ep.calls, ep.prompt_tokens + ep.completion_tokens)
            if over:
                ep.exceeded = over
                ep.refused += 1
                raise _HTTPError(429, over, "budget_exceeded")
        stream = bool(body.pop("stream", False))
        stream_options = body.pop("stream_options", None)
        body.setdefault("seed", ep.seed)
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        key = hashlib.sha256(f"{endpoint}\0{ep.seed}\0".encode() + data).hexdigest()
        hit = None
        if self._cache is not None:
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
        t0 = time.perf_counter()
        if hit is not None:
            reply, prompt_tokens, completion_tokens = hit
        else:
            status, payload = self._upstream("POST", endpoint, data, headers)
            if status != 200:
                return status, payload, "application/json"
            try:
                reply = json.loads(payload)
                usage = reply["usage"]
                prompt_tokens, completion_tokens = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
            except (ValueError, KeyError, TypeError):
                raise _HTTPError(502, f"the LLM upstream {self.upstream} answered without a usage record; the "
                                      f"proxy counts tokens from it", "upstream_error") from None
            if self._cache is not None:
                with self._lock:
                    self._cache[key] = (reply, prompt_tokens, completion_tokens)
                    if len(self._cache) > CACHE_ENTRIES:
                        self._cache.popitem(last=False)
        seconds = time.perf_counter() - t0
        with self._lock:
            ep.calls += 1
            ep.prompt_tokens += prompt_tokens
            ep.completion_tokens += completion_tokens
            ep.seconds += seconds
            ep.cache_hits += hit is not None
            if self.trace:
                ep.lines.append(_line(ep, endpoint, body, reply, prompt_tokens, completion_tokens, seconds,
                                      hit is not None, self.model_sha256))
        if stream:
            return 200, sse_events(endpoint, reply, stream_options), "text/event-stream"
        return 200, json.dumps(reply).encode(), "application/json"


def _line(ep: EpisodeCalls, endpoint: str, body: dict, reply: dict, prompt_tokens: int, completion_tokens: int,
          seconds: float, cached: bool, model_sha256: str | None = None) -> dict:
    """One trajectory line (see docs/llm.md for the schema)."""
    choice = (reply.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    text = message.get("content") if endpoint == "chat/completions" else choice.get("text")
    request = {k: v for k, v in body.items() if k not in ("messages", "prompt")}
    return {"type": "call", "task": ep.task, "run": ep.run, "index": ep.index, "seed": ep.seed, "step": ep.step,
            "call": ep.calls - 1, "endpoint": endpoint, "messages": body.get("messages"), "prompt": body.get("prompt"),
            "params": request, "completion": text, "finish_reason": choice.get("finish_reason"),
            "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "prompt_token_ids": reply.get("prompt_token_ids") or choice.get("prompt_token_ids"),
            "completion_token_ids": choice.get("token_ids"), "completion_logprobs": choice.get("token_logprobs"),
            "logprobs": choice.get("logprobs"),
            "model": reply.get("model"), "model_sha256": model_sha256, "seconds": round(seconds, 6),
            "cached": cached}


def sse_events(endpoint: str, reply: dict, stream_options: Any) -> bytes:
    """A complete answer as the server-sent events of a streamed one: one chunk with the text, one
    with the finish reason, the usage chunk if ``stream_options.include_usage``, then [DONE]."""
    chat = endpoint == "chat/completions"
    base = {"id": reply.get("id", "proxy"), "created": reply.get("created", int(time.time())),
            "model": reply.get("model", ""), "object": "chat.completion.chunk" if chat else "text_completion"}
    chunks = []
    for i, choice in enumerate(reply.get("choices") or []):
        index = choice.get("index", i)
        if chat:
            message = choice.get("message") or {}
            delta = {"role": message.get("role", "assistant"), "content": message.get("content") or ""}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{**c, "index": j} for j, c in enumerate(message["tool_calls"])]
            first = {"index": index, "delta": delta, "finish_reason": None, "logprobs": choice.get("logprobs")}
            last = {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}
        else:
            first = {"index": index, "text": choice.get("text", ""), "finish_reason": None,
                     "logprobs": choice.get("logprobs")}
            last = {"index": index, "text": "", "finish_reason": choice.get("finish_reason")}
        chunks += [{**base, "choices": [first]}, {**base, "choices": [last]}]
    if isinstance(stream_options, dict) and stream_options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": reply.get("usage")})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


class QuietHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that stays silent when a client goes away mid-request (an agent process
    killed at its step timeout, a connection reset or timed out): that is the client's business, and a
    20-line traceback per dropped connection on the evaluation's terminal would let an agent flood it.
    Any other error in a request is still printed."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _BoundedServer(QuietHTTPServer):
    """At most `MAX_CONNECTIONS` connections served at once: a hostile agent opening thousands of
    connections gets the extra ones closed, not a thread each in the trusted worker."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class JSONHandler(BaseHTTPRequestHandler):
    """The HTTP/1.1 handler base of the proxy and of the embedded upstream: silent, no Nagle delay,
    `_send` of one whole body."""

    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a client may take to send its request

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body leave in two writes: without this, Nagle's algorithm holds the body back
        # until the client's delayed ACK of the headers (~40 ms a call)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Handler(JSONHandler):
    owner: LLMProxy

    def _route(self) -> tuple[str, str]:
        parts = self.path.split("?", 1)[0].split("/")
        # /a/<token>/v1/<endpoint...>
        if len(parts) < 5 or parts[1] != "a" or parts[3] != "v1":
            raise _HTTPError(404, f"no such path {self.path[:200]!r}: use OPENAI_BASE_URL as given", "not_found")
        return parts[2], "/".join(parts[4:])

    def _fail(self, err: _HTTPError) -> None:
        self._send(err.status, json.dumps({"error": {"message": err.message, "type": err.kind,
                                                     "code": err.status}}).encode())

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        try:
            token, endpoint = self._route()
            if not self.owner.knows(token):
                raise _HTTPError(403, "unknown proxy token: use OPENAI_BASE_URL as the agent process was given it")
            if endpoint != "models":
                raise _HTTPError(404, f"GET /v1/{endpoint[:100]} is not served; the proxy serves GET /v1/models",
                                 "not_found")
            status, body = self.owner.models(self._forwarded_headers())
            self._send(status, body)
        except _HTTPError as err:
            self._fail(err)

    def _forwarded_headers(self) -> dict:
        headers = {"Content-Type": "application/json"}
        auth = self.headers.get("Authorization")
        if auth:
            headers["Authorization"] = auth
        return headers

    def do_POST(self) -> None:  # noqa: N802
        keep = self.close_connection
        self.close_connection = True  # until the body is read: an answer before it ends the connection
        try:
            token, endpoint = self._route()
            if endpoint not in ENDPOINTS:
                raise _HTTPError(404, f"POST /v1/{endpoint[:100]} is not served; the proxy serves "
                                      f"/v1/chat/completions and /v1/completions", "not_found")
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise _HTTPError(411, "send the request with a Content-Length header")
            if int(length) > MAX_BODY_BYTES:
                raise _HTTPError(413, f"request body of {length} bytes; at most {MAX_BODY_BYTES} allowed")
            raw = self.rfile.read(int(length))
            self.close_connection = keep
            status, body, content_type = self.owner.call(token, endpoint, raw, self._forwarded_headers())
            self._send(status, body, content_type)
        except _HTTPError as err:
            self._fail(err)
