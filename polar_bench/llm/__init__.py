"""The LLM layer: one client protocol, two backends, a recorder and a disk cache.

`make_client` gives an `LLMClient` (the embedded SmolLM2-135M-Instruct by default, or what the
``POLAR_BENCH_LLM_*`` variables name) whose ``complete`` takes messages and an optional constraint
(`Choices`, `Grammar`) and records every call for the episode's ``episode_info()``. Backends:
`EmbeddedBackend` (llama.cpp in-process) and `OpenAIBackend` (any OpenAI-compatible endpoint).
Nothing imports llama-cpp-python until an embedded model is used. See docs/llm.md.
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
