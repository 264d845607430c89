"""The LLM layer: one client protocol, two backends, a recorder and a disk cache.

    from polar_bench.llm import Choices, make_client

    llm = make_client()                       # embedded SmolLM2-135M-Instruct (offline), or env vars
    llm.reset(seed=episode_seed)              # from the agent's reset(seed)
    out = llm.complete([{"role": "user", "content": "..."}],
                       constraint=Choices(["explore", "descend", "fight"]),
                       seed=llm.seed_for(step))
    out.value                                 # always one of the choices
    llm.episode_info()                        # {"llm": {"calls", "prompt_tokens", ...}}

Backends: `EmbeddedBackend` (llama.cpp in-process, grammar-constrained decoding) and `OpenAIBackend`
(any OpenAI-compatible endpoint, standard library only). See docs/llm.md.

Nothing here imports llama-cpp-python until an embedded model is used; without it that raises
`polar_bench.errors.MissingDependencyError` naming ``pip install "polar_bench[llm]"``.
"""

from __future__ import annotations

from ..errors import LLMError, LLMTimeoutError
from .cache import DiskCache, cache_key
from .client import LLMClient, make_client
from .embedded import EmbeddedBackend, default_model_path, file_sha256
from .http import OpenAIBackend, ProxyBackend
from .proxy import LLMBudget, LLMProxy
from .recorder import USAGE_KEYS, Recorder
from .server import EmbeddedServer
from .types import (
    LLM,
    Backend,
    Choices,
    Completion,
    Constraint,
    Grammar,
    Message,
    Request,
    call_seed,
    choices_grammar,
    parse_choice,
)

__all__ = [
    "LLM", "Backend", "LLMClient", "make_client", "Message", "Request", "Completion",
    "Choices", "Grammar", "Constraint", "choices_grammar", "parse_choice", "call_seed",
    "EmbeddedBackend", "OpenAIBackend", "ProxyBackend", "default_model_path", "file_sha256",
    "LLMProxy", "LLMBudget", "EmbeddedServer",
    "Recorder", "USAGE_KEYS", "DiskCache", "cache_key", "LLMError", "LLMTimeoutError",
]
