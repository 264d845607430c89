"""The OpenAI-compatible HTTP backend: ``POST {base_url}/chat/completions``, standard library only.

Works with OpenAI, vLLM, llama.cpp's servers, Ollama's ``/v1``, LM Studio and anything else that
speaks the Chat Completions API. The key is read from an environment variable at every call, never
from an argument, so it cannot reach a trace or a results file; with ``grammar=True`` a constraint's
GBNF goes in the request's ``grammar`` field (llama.cpp), otherwise it is told in words and the answer
parsed. See docs/llm.md#backends.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

from ..errors import LLMError, LLMTimeoutError
from .types import Completion, Request

__all__ = ["OpenAIBackend"]

_TRANSIENT = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """An OpenAI-compatible Chat Completions endpoint.

    base_url: e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``.
    model: the model name sent in every request. api_key_env: the environment variable holding the key.
    timeout: seconds allowed for connecting and for each read of the reply. max_retries: further
    attempts after a connection failure, a timeout, HTTP 429 or a 5xx (backing off 0.5 s, 1 s, ...).
    grammar: send ``constraint.grammar`` as the ``grammar`` field (llama.cpp servers).
    model_sha256: the served weights' hash where you know it (goes into traces and cache keys).
    """

    def __init__(self, base_url: str, model: str = "default", *, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 60.0, max_retries: int = 2, grammar: bool = False,
                 model_sha256: str | None = None, extra_body: dict | None = None):
        parsed = urlparse(base_url or "")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.supports_grammar = bool(grammar)
        self.extra_body = dict(extra_body or {})
        self.identity = {"backend": "openai", "model": model, "base_url": self.base_url,
                         "sha256": model_sha256}

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def body(self, request: Request) -> dict:
        body = {"model": self.model, "messages": [dict(m) for m in request.messages],
                "temperature": float(request.temperature), "max_tokens": request.max_tokens, "stream": False}
        if request.seed is not None:
            body["seed"] = request.seed
        if request.constraint is not None and self.supports_grammar:
            body["grammar"] = request.constraint.grammar
        body.update(self.extra_body)
        return body

    def current_base_url(self) -> str:
        """The base URL of the next request."""
        return self.base_url

    def generate(self, request: Request) -> Completion:
        url = self.current_base_url() + "/chat/completions"
        data = json.dumps(self.body(request)).encode()
        t0 = time.perf_counter()
        attempt = 0
        while True:
            try:
                reply = self._post(url, data)
                break
            except _Transient as exc:
                if attempt >= self.max_retries:
                    raise exc.error from exc.__cause__
                time.sleep(0.5 * 2 ** attempt)
                attempt += 1
        seconds = time.perf_counter() - t0
        try:
            choice = reply["choices"][0]
            text = choice["message"].get("content") or ""
            usage = reply.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise LLMError(f"{url} answered with something that is not a chat completion "
                           f"({type(exc).__name__}: {exc}): {json.dumps(reply)[:300]}") from None
        identity = self.identity
        served = reply.get("model")
        if served and served != self.model:
            identity = {**identity, "served_model": served}
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          seconds=seconds, model=identity, finish_reason=str(choice.get("finish_reason") or "stop"))

    def _post(self, url: str, data: bytes) -> dict:
        req = urllib.request.Request(url, data=data, headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = _read_detail(exc)
            err = LLMError(f"{url} answered HTTP {exc.code} {exc.reason}: {detail}")
            if exc.code in _TRANSIENT:
                raise _Transient(err) from exc
            raise err from None
        except TimeoutError as exc:
            raise _Transient(LLMTimeoutError(f"{url} did not answer within the {self.timeout:g} s timeout")) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise _Transient(LLMTimeoutError(
                    f"{url} did not answer within the {self.timeout:g} s timeout")) from exc
            raise _Transient(LLMError(f"cannot reach the LLM server at {url}: {exc.reason}; "
                                      f"is it running, and is base_url right?")) from exc
        except (ConnectionError, OSError) as exc:
            raise _Transient(LLMError(f"the connection to the LLM server at {url} failed: "
                                      f"{type(exc).__name__}: {exc}")) from exc
        try:
            return json.loads(raw)
        except ValueError:
            raise LLMError(f"{url} answered with something that is not JSON: {raw[:300]!r}") from None


class _Transient(Exception):
    def __init__(self, error: LLMError):
        super().__init__(str(error))
        self.error = error


def _read_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read()[:500].decode("utf-8", "replace")
    except Exception:  # noqa: BLE001
        return ""
    try:
        msg = json.loads(body).get("error")
        if isinstance(msg, dict):
            msg = msg.get("message")
        return str(msg)[:300] if msg else body[:300]
    except (ValueError, AttributeError):
        return body[:300]


PROXY_ENV = "POLAR_BENCH_LLM_PROXY"
PROXY_GRAMMAR_ENV = "POLAR_BENCH_LLM_PROXY_GRAMMAR"


class ProxyBackend(OpenAIBackend):
    """The LLM proxy of `evaluate` (`polar_bench.llm.proxy`), which `make_client()` picks by default
    inside an evaluated agent when the proxy runs: the base URL is read from ``POLAR_BENCH_LLM_PROXY``
    at every call, since the agent process points it at the proxy address of the slot whose agent
    runs (one client may serve several episodes), and grammars are sent when the upstream is
    llama.cpp (``POLAR_BENCH_LLM_PROXY_GRAMMAR=1``, the embedded upstream)."""

    def __init__(self, model: str = "smollm2", *, timeout: float = 60.0):
        super().__init__(os.environ.get(PROXY_ENV) or "http://127.0.0.1/v1", model, timeout=timeout,
                         grammar=os.environ.get(PROXY_GRAMMAR_ENV) == "1")
        self.identity = {"backend": "proxy", "model": model, "sha256": None}

    def current_base_url(self) -> str:
        url = os.environ.get(PROXY_ENV)
        if not url:
            raise LLMError(f"{PROXY_ENV} is not set: the proxy backend runs only inside an agent that "
                           f"evaluate runs behind its LLM proxy")
        return url.rstrip("/")
