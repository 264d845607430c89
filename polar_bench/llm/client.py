"""`LLMClient`: the one entry point of LLM agents (backend + cache + recorder + constraint handling)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import UserError
from .cache import DiskCache
from .embedded import EmbeddedBackend
from .http import PROXY_ENV, OpenAIBackend, ProxyBackend
from .recorder import Recorder
from .server import MODEL_ALIAS
from .types import Backend, Choices, Completion, Constraint, Grammar, Message, Request, call_seed

__all__ = ["LLMClient", "make_client"]


class LLMClient:
    """Messages in, `Completion` out, every call recorded.

    ``complete(messages, constraint=..., seed=..., temperature=..., max_tokens=...)``:

    1. A deterministic request (temperature 0 or a seed) is looked up in the cache, if any.
    2. Else the backend generates; with grammar support it decodes under the constraint's grammar.
       Without, the constraint's instruction is appended to the last user message.
    3. The answer is checked: `Choices` are parsed (`polar_bench.llm.parse_choice`), a `Grammar`
       with ``parse`` is parsed. An invalid answer gets one retry, with the bad answer and a
       correction in the conversation; if that fails too the constraint's fallback is returned
       (``valid=False``, ``fallback=True``), and the recorder counts it.
    4. Backend failures raise `polar_bench.errors.LLMError` (`LLMTimeoutError` for timeouts): inside
       ``agent.act`` that fails the episode with its message, not the evaluation.

    For an agent: call ``reset(seed)`` from the agent's ``reset``, pass ``seed=client.seed_for(step)``,
    and return ``client.episode_info()`` from the agent's ``episode_info``.
    """

    def __init__(self, backend: Backend | None = None, *, recorder: Recorder | None = None,
                 cache: DiskCache | str | os.PathLike | None = None):
        self.backend = backend if backend is not None else EmbeddedBackend()
        self.recorder = recorder if recorder is not None else Recorder()
        self.cache = DiskCache(cache) if isinstance(cache, (str, os.PathLike)) else cache
        self.episode_seed: int | None = None
        self._cache_warned = False

    # -- episode plumbing
    def reset(self, seed: int | None = None, **meta: Any) -> None:
        """Start an episode: zero the recorder's sums and remember ``seed`` for `seed_for`."""
        self.episode_seed = seed
        self.recorder.start_episode(seed, **meta)

    def seed_for(self, step: int, salt: int | str = 0) -> int:
        """`call_seed` of the current episode's seed (0 before any ``reset``) and ``step``."""
        return call_seed(self.episode_seed if self.episode_seed is not None else 0, step, salt)

    def episode_info(self) -> dict:
        """``{"llm": {...}}`` for the agent's ``episode_info()`` (see `Recorder.usage`)."""
        return self.recorder.episode_info()

    @property
    def identity(self) -> dict:
        return self.backend.identity

    def fork(self) -> LLMClient:
        """A client with this one's backend and cache and a recorder of its own (same tracing and
        trace file), for an agent whose objects play interleaved episodes in one process (several
        lanes, docs/evaluate.md): each object keeps its own episode seed and usage sums, while the
        loaded model or the endpoint connection is shared."""
        recorder = Recorder(trace=self.recorder.tracing, path=self.recorder.path)
        return LLMClient(self.backend, recorder=recorder, cache=self.cache)

    # -- calls
    def complete(self, messages: Sequence[Message], *, constraint: Constraint | None = None,
                 seed: int | None = None, temperature: float = 0.0, max_tokens: int = 64) -> Completion:
        request = Request(tuple(messages), constraint, seed, temperature, max_tokens)
        decision = self.recorder.begin_decision()
        if constraint is None:
            out = self._call(request)
            self.recorder.record(request, out, decision=decision, attempt=1, valid=None, value=out.text)
            return _with(out, value=out.text, valid=None)
        sent = request if self.backend.supports_grammar else _with_instruction(request)
        first = self._call(sent)
        value, valid = _check(constraint, first.text)
        if valid is not False:
            self.recorder.record(sent, first, decision=decision, attempt=1, valid=valid, value=value)
            return _with(first, value=value, valid=valid)
        self.recorder.record(sent, first, decision=decision, attempt=1, valid=False, value=None)
        retry = Request(sent.messages + (
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": f"{first.text.strip()[:200]!r} is not a valid answer. "
                                        f"{constraint.instruction()}"}),
            constraint, seed, temperature, max_tokens)
        second = self._call(retry)
        value, valid = _check(constraint, second.text)
        fallback = valid is False
        if fallback:
            value = constraint.fallback_value if isinstance(constraint, Choices) else constraint.fallback
            if isinstance(constraint, Grammar) and constraint.parse is not None and value is not None:
                value, _ = _check(constraint, value)
        self.recorder.record(retry, second, decision=decision, attempt=2, valid=valid, value=value,
                             fallback=fallback)
        return Completion(text=second.text, prompt_tokens=first.prompt_tokens + second.prompt_tokens,
                          completion_tokens=first.completion_tokens + second.completion_tokens,
                          seconds=first.seconds + second.seconds, model=second.model,
                          finish_reason=second.finish_reason, value=value, valid=not fallback,
                          fallback=fallback, attempts=2, cached=first.cached and second.cached)

    def choose(self, messages: Sequence[Message], options: Sequence[str] | Choices, **kwargs: Any) -> str:
        """``complete`` with `Choices` and return the chosen option (the fallback if none was valid)."""
        constraint = options if isinstance(options, Choices) else Choices(tuple(options))
        return self.complete(messages, constraint=constraint, **kwargs).value

    def _call(self, request: Request) -> Completion:
        identity = self.backend.identity
        if self.cache is not None:
            hit = self.cache.get(identity, request)
            if hit is not None:
                return hit
        out = self.backend.generate(request)
        if self.cache is not None:
            try:
                self.cache.put(identity, request, out)
            except OSError as exc:
                if not self._cache_warned:
                    warnings.warn(f"the LLM cache in {self.cache.directory} cannot be written ({exc}); "
                                  f"continuing without storing", RuntimeWarning, stacklevel=3)
                    self._cache_warned = True
        return out


def _with(c: Completion, **changes: Any) -> Completion:
    from dataclasses import replace
    return replace(c, **changes)


def _with_instruction(request: Request) -> Request:
    """The request with the constraint's instruction added to its last user message (or a new one)."""
    if request.constraint is None:
        return request
    msgs = [dict(m) for m in request.messages]
    text = request.constraint.instruction()
    for m in reversed(msgs):
        if m["role"] == "user":
            m["content"] = (m["content"].rstrip() + "\n\n" + text).lstrip()
            break
    else:
        msgs.append({"role": "user", "content": text})
    return Request(tuple(msgs), request.constraint, request.seed, request.temperature, request.max_tokens)


def _check(constraint: Constraint, text: str) -> tuple[Any, bool | None]:
    """(value, valid): valid is None when the answer cannot be checked."""
    if isinstance(constraint, Choices):
        choice = constraint.parse(text)
        return (choice, True) if choice is not None else (None, False)
    if constraint.parse is None:
        return text, None
    try:
        value = constraint.parse(text)
    except Exception:  # noqa: BLE001 - a parser that raises rejects the answer
        value = None
    return (value, True) if value is not None else (None, False)


def make_client(backend: str | None = None, *, model: str | None = None, base_url: str | None = None,
                api_key_env: str | None = None, grammar: bool | None = None, timeout: float | None = None,
                cache: str | os.PathLike | None = None, trace: bool | None = None,
                trace_path: str | os.PathLike | None = None, n_threads: int | None = None) -> LLMClient:
    """An `LLMClient` from arguments, falling back on environment variables, then on defaults.

    ============  ==============================  ==========================================
    argument      environment variable            default
    ============  ==============================  ==========================================
    backend       POLAR_BENCH_LLM_BACKEND         ``proxy`` behind evaluate's LLM proxy, else
                                                  ``embedded`` (or ``openai``)
    model         POLAR_BENCH_LLM_MODEL           SmolLM2-135M-Instruct / ``default``
    base_url      POLAR_BENCH_LLM_BASE_URL        (required for ``openai``)
    api_key_env   POLAR_BENCH_LLM_API_KEY_ENV     ``OPENAI_API_KEY``
    grammar       POLAR_BENCH_LLM_GRAMMAR (0/1)   False (True for llama.cpp servers)
    timeout       POLAR_BENCH_LLM_TIMEOUT         60 s
    cache         POLAR_BENCH_LLM_CACHE           no cache
    trace         POLAR_BENCH_LLM_TRACE (0/1)     on (in memory)
    trace_path    POLAR_BENCH_LLM_TRACE_PATH      none (``{pid}`` is replaced by the process id)
    n_threads     POLAR_BENCH_LLM_THREADS         1
    ============  ==============================  ==========================================

    The variables reach evaluate's worker processes, so one agent file runs with the embedded model
    or a larger one behind an endpoint without a change.
    """
    env = os.environ.get
    # inside an agent that evaluate runs behind its LLM proxy, the default is the proxy: one recording path
    kind = (backend or env("POLAR_BENCH_LLM_BACKEND") or ("proxy" if env(PROXY_ENV) else "embedded")).lower()
    model = model or env("POLAR_BENCH_LLM_MODEL") or None
    if trace is None:
        trace = _flag("POLAR_BENCH_LLM_TRACE", True)
    recorder = Recorder(trace=trace, path=trace_path or env("POLAR_BENCH_LLM_TRACE_PATH") or None)
    cache = cache or env("POLAR_BENCH_LLM_CACHE") or None
    if kind == "embedded":
        b: Backend = EmbeddedBackend(model, n_threads=n_threads)
    elif kind == "proxy":
        b = ProxyBackend(model or MODEL_ALIAS)
    elif kind in ("openai", "http"):
        url = base_url or env("POLAR_BENCH_LLM_BASE_URL")
        if not url:
            raise UserError("the openai LLM backend needs a base URL: pass base_url= or set "
                            "POLAR_BENCH_LLM_BASE_URL (e.g. http://127.0.0.1:8000/v1)")
        if timeout is None:
            t = env("POLAR_BENCH_LLM_TIMEOUT")
            try:
                timeout = float(t) if t else 60.0
            except ValueError:
                raise UserError(f"POLAR_BENCH_LLM_TIMEOUT must be a number of seconds, got {t!r}") from None
        if grammar is None:
            grammar = _flag("POLAR_BENCH_LLM_GRAMMAR", False)
        b = OpenAIBackend(url, model or "default",
                          api_key_env=api_key_env or env("POLAR_BENCH_LLM_API_KEY_ENV") or "OPENAI_API_KEY",
                          timeout=timeout, grammar=grammar)
    else:
        raise UserError(f"unknown LLM backend {kind!r}; use 'embedded', 'openai' or 'proxy'")
    return LLMClient(b, recorder=recorder, cache=cache)


def _flag(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise UserError(f"{name} must be 0 or 1, got {v!r}")
