"""The LLM layer without a model: constraints, seeds, the cache, the recorder, the HTTP backend's
failure handling (against a tiny local stub server), retry-then-fallback, failing episodes."""

from __future__ import annotations

import json
import multiprocessing as mp
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from polar_bench.errors import LLMError, LLMTimeoutError
from polar_bench.llm import (
    Choices,
    Completion,
    DiskCache,
    Grammar,
    LLMClient,
    OpenAIBackend,
    Recorder,
    Request,
    cache_key,
    call_seed,
    choices_grammar,
    make_client,
    parse_choice,
)

USER = [{"role": "user", "content": "Which way?"}]


# --------------------------------------------------------------------------- fakes
class FakeBackend:
    """Answers from a list (cycling), counting calls; no grammar support unless told."""

    def __init__(self, answers, supports_grammar=False, sha="f" * 64):
        self.answers = list(answers)
        self.supports_grammar = supports_grammar
        self.identity = {"backend": "fake", "model": "fake", "sha256": sha}
        self.requests: list[Request] = []

    def generate(self, request):
        self.requests.append(request)
        text = self.answers[(len(self.requests) - 1) % len(self.answers)]
        return Completion(text=text, prompt_tokens=10, completion_tokens=len(text.split()), seconds=0.01,
                          model=self.identity)


class Stub:
    """A local OpenAI-compatible stub: answers ``texts`` in turn (or HTTP ``status``, or sleeps)."""

    def __init__(self, texts=("garbage",), status=200, delay=0.0):
        self.texts, self.status, self.delay = list(texts), status, delay
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                stub.bodies.append(json.loads(self.rfile.read(n)))
                stub.headers.append(dict(self.headers))
                if stub.delay:
                    time.sleep(stub.delay)
                if stub.status != 200:
                    payload = json.dumps({"error": {"message": "stub says no"}}).encode()
                    self.send_response(stub.status)
                else:
                    text = stub.texts[(len(stub.bodies) - 1) % len(stub.texts)]
                    payload = json.dumps({
                        "id": "x", "object": "chat.completion", "model": "stub-model",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- constraints and seeds
def test_choices_grammar_escapes_and_lists_every_option():
    g = choices_grammar(["go", 'say "hi"', "back\\slash", "two\nlines"])
    assert g == 'root ::= "go" | "say \\"hi\\"" | "back\\\\slash" | "two\\nlines"\n'


@pytest.mark.parametrize("text, expected", [
    ("pick up", "pick up"), ('  "Pick up."  ', "pick up"), ("**drop**", "drop"),
    ("open door, because it is closed", "open door"), ("I would open door now", "open door"),
    ("go to red ball", "go to red ball"), ("nothing useful", None), ("pick up or drop", None),
    ("dropped", None),
])
def test_parse_choice(text, expected):
    assert parse_choice(text, ["go to red ball", "pick up", "open door", "drop"]) == expected


def test_parse_choice_prefers_longer_overlapping_option():
    assert parse_choice("I say go to it", ["go", "go to"]) == "go to"


def test_choices_and_grammar_reject_bad_arguments():
    with pytest.raises(ValueError, match="duplicate"):
        Choices(["a", "A"])
    with pytest.raises(ValueError, match="not one of"):
        Choices(["a", "b"], fallback="c")
    with pytest.raises(ValueError, match="sequence of strings"):
        Choices("ab")
    with pytest.raises(ValueError, match="root"):
        Grammar('answer ::= "x"')
    assert Choices(["a", "b"]).fallback_value == "a"


def test_call_seed_is_stable_and_documented():
    import hashlib
    assert call_seed(7, 3) == int.from_bytes(hashlib.sha256(b"7:3:0").digest()[:4], "big") & 0x7FFFFFFF
    assert call_seed(7, 3) == call_seed(7, 3) != call_seed(7, 4) != call_seed(8, 3)
    assert call_seed(7, 3, salt="critic") != call_seed(7, 3)
    assert all(0 <= call_seed(s, t) < 2**31 for s in range(20) for t in range(20))


def test_request_validation():
    with pytest.raises(ValueError, match="role"):
        Request(({"role": "robot", "content": "x"},))
    with pytest.raises(ValueError, match="at least one"):
        Request(())
    with pytest.raises(ValueError, match="temperature"):
        Request(tuple(USER), temperature=-1)
    assert Request(tuple(USER)).deterministic and Request(tuple(USER), temperature=0.7, seed=3).deterministic
    assert not Request(tuple(USER), temperature=0.7).deterministic


# --------------------------------------------------------------------------- client, recorder
def test_unconstrained_backend_gets_instruction_and_parse():
    fake = FakeBackend(["I think left is best."])
    client = LLMClient(fake)
    out = client.complete(USER, constraint=Choices(["left", "right"]))
    assert out.value == "left" and out.valid is True and not out.fallback and out.attempts == 1
    assert "Answer with exactly one of: left, right" in fake.requests[0].messages[-1]["content"]


def test_grammar_backend_gets_request_unchanged():
    fake = FakeBackend(["right"], supports_grammar=True)
    out = LLMClient(fake).complete(USER, constraint=Choices(["left", "right"]))
    assert out.value == "right" and fake.requests[0].messages == tuple(USER)


def test_retry_with_feedback_then_success():
    fake = FakeBackend(["banana", "right"])
    client = LLMClient(fake)
    out = client.complete(USER, constraint=Choices(["left", "right"]))
    assert out.value == "right" and out.valid and out.attempts == 2 and not out.fallback
    retry = fake.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": "banana"}
    assert "'banana' is not a valid answer" in retry[-1]["content"]
    u = client.episode_info()["llm"]
    assert (u["calls"], u["decisions"], u["retries"], u["invalid"], u["fallbacks"]) == (2, 1, 1, 1, 0)


def test_grammar_constraint_with_parser_falls_back():
    g = Grammar('root ::= [0-9]+', parse=lambda t: int(t.strip()) if t.strip().isdigit() else None,
                fallback="0", description="Answer with a number.")
    out = LLMClient(FakeBackend(["many", "lots"])).complete(USER, constraint=g)
    assert out.fallback and out.value == 0 and out.valid is False
    out = LLMClient(FakeBackend(["42"])).complete(USER, constraint=g)
    assert out.value == 42 and out.valid
    out = LLMClient(FakeBackend(["whatever"])).complete(USER, constraint=Grammar('root ::= "x"'))
    assert out.valid is None and out.value == "whatever"  # nothing to check it with


def test_recorder_sums_and_trace_file(tmp_path):
    path = tmp_path / "trace-{pid}.jsonl"
    rec = Recorder(path=path)
    client = LLMClient(FakeBackend(["left", "zzz", "zzz", "right"]), recorder=rec)
    client.reset(seed=5, task="gym/CartPole-v1")
    a = client.complete(USER, constraint=Choices(["left", "right"]), seed=client.seed_for(0))
    b = client.complete(USER, constraint=Choices(["left", "right"], fallback="right"), seed=client.seed_for(1))
    c = client.complete(USER, max_tokens=5)
    assert (a.value, b.value, b.fallback, c.value, c.valid) == ("left", "right", True, "right", None)
    u = client.episode_info()["llm"]
    assert u == {"calls": 4, "prompt_tokens": 40, "completion_tokens": 4, "seconds": 0.04, "decisions": 3,
                 "cache_hits": 0, "retries": 1, "invalid": 2, "fallbacks": 1}
    lines = [json.loads(x) for x in Path(str(path).replace("{pid}", str(__import__("os").getpid())))
             .read_text().splitlines()]
    assert len(lines) == 4 == len(rec.trace)
    assert [(x["decision"], x["attempt"], x["valid"], x["fallback"]) for x in lines] == [
        (0, 1, True, False), (1, 1, False, False), (1, 2, False, True), (2, 1, None, False)]
    assert lines[0]["episode"] == {"seed": 5, "task": "gym/CartPole-v1"}
    assert lines[0]["seed"] == call_seed(5, 0) and lines[0]["constraint"]["options"] == ["left", "right"]
    assert lines[0]["model"]["sha256"] == "f" * 64 and lines[0]["completion"] == "left"
    client.reset(seed=6)
    assert client.episode_info()["llm"]["calls"] == 0 and rec.trace == [] and rec.totals["calls"] == 4


def test_traces_off_keeps_sums_only(tmp_path):
    rec = Recorder(trace=False, path=tmp_path / "t.jsonl")
    client = LLMClient(FakeBackend(["left"]), recorder=rec)
    client.complete(USER, constraint=Choices(["left", "right"]))
    assert rec.trace == [] and not (tmp_path / "t.jsonl").exists() and client.episode_info()["llm"]["calls"] == 1


def test_forked_clients_share_the_backend_but_not_the_episode(tmp_path):
    """Two agent objects in one process (two lanes) play interleaved episodes: each keeps its own seed
    and sums, while the model is loaded once."""
    backend = FakeBackend(["left", "right"])
    base = LLMClient(backend, recorder=Recorder(path=tmp_path / "t.jsonl"), cache=tmp_path / "cache")
    a, b = base.fork(), base.fork()
    assert a.backend is b.backend is backend and a.cache is b.cache is base.cache
    assert a.recorder is not b.recorder and a.recorder.path == base.recorder.path
    a.reset(seed=1, task="t")
    b.reset(seed=2, task="t")            # lane b starts its episode while lane a's is in progress
    assert (a.seed_for(3), b.seed_for(3)) == (call_seed(1, 3), call_seed(2, 3))
    a.complete(USER, constraint=Choices(["left", "right"]), seed=a.seed_for(0))
    a.complete(USER, constraint=Choices(["left", "right"]), seed=a.seed_for(1))
    b.complete(USER, constraint=Choices(["left", "right"]), seed=b.seed_for(0), temperature=0.5)
    assert (a.episode_info()["llm"]["calls"], b.episode_info()["llm"]["calls"]) == (2, 1)
    assert [r.seed for r in backend.requests] == [call_seed(1, 0), call_seed(1, 1), call_seed(2, 0)]
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [x["episode"]["seed"] for x in lines] == [1, 1, 2]   # one trace file, each line its episode


# --------------------------------------------------------------------------- cache
def test_cache_hits_on_repeat_misses_on_change(tmp_path):
    fake = FakeBackend(["left"])
    client = LLMClient(fake, cache=tmp_path / "cache")
    ch = Choices(["left", "right"])
    first = client.complete(USER, constraint=ch)
    again = client.complete(USER, constraint=ch)
    assert not first.cached and again.cached and again.value == "left" and len(fake.requests) == 1
    client.complete(USER, constraint=ch, max_tokens=9)                       # changed request
    client.complete(USER, constraint=Choices(["left", "right", "up"]))       # changed constraint
    client.complete(USER, constraint=ch, temperature=0.8, seed=1)            # seeded: cached too
    client.complete(USER, constraint=ch, temperature=0.8, seed=1)
    client.complete(USER, constraint=ch, temperature=0.8)                    # random: never cached
    client.complete(USER, constraint=ch, temperature=0.8)
    assert len(fake.requests) == 6
    assert client.cache.stats() == {"hits": 2, "misses": 4, "hit_rate": 2 / 6}
    u = client.episode_info()["llm"]
    assert u["cache_hits"] == 2 and u["calls"] == 8 and u["prompt_tokens"] == 80  # hits count their tokens
    # Another model (hash) never sees these entries.
    other = LLMClient(FakeBackend(["right"], sha="e" * 64), cache=tmp_path / "cache")
    assert other.complete(USER, constraint=ch).value == "right"


def test_cache_key_covers_model_and_request():
    r = Request(tuple(USER))
    ident = {"backend": "embedded", "sha256": "a" * 64, "path": "/x"}
    assert cache_key(ident, r) == cache_key({**ident, "path": "/elsewhere"}, r)  # same file, moved
    assert cache_key(ident, r) != cache_key({**ident, "sha256": "b" * 64}, r)
    assert cache_key(ident, r) != cache_key(ident, Request(tuple(USER), seed=1))


def _writer(directory, n, text):
    cache = DiskCache(directory)
    ident = {"backend": "fake", "model": "m", "sha256": "0" * 64}
    for i in range(n):
        r = Request(({"role": "user", "content": f"q{i % 5}"},))
        cache.put(ident, r, Completion(text=text, prompt_tokens=1, completion_tokens=1, seconds=0.0, model=ident))
        got = cache.get(ident, r)
        assert got is not None and got.text == text


def test_cache_is_safe_for_concurrent_processes(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 200, "same")) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(list(tmp_path.glob("*/*.json"))) == 5 and not list(tmp_path.glob("*/*.tmp"))


def test_unreadable_cache_entry_is_a_miss(tmp_path):
    fake = FakeBackend(["left"])
    client = LLMClient(fake, cache=tmp_path)
    client.complete(USER)
    for p in tmp_path.glob("*/*.json"):
        p.write_text("{torn")
    assert not client.complete(USER).cached and len(fake.requests) == 2


# --------------------------------------------------------------------------- HTTP backend
def test_http_retry_then_fallback_against_a_garbage_server():
    with Stub(texts=["Bananas are yellow."]) as stub:
        client = LLMClient(OpenAIBackend(stub.url, "stub"))
        out = client.complete(USER, constraint=Choices(["left", "right"], fallback="right"), seed=3)
    assert out.fallback and out.value == "right" and out.valid is False and out.attempts == 2
    assert out.prompt_tokens == 24 and out.completion_tokens == 6
    assert len(stub.bodies) == 2 and stub.bodies[0]["seed"] == 3 and "grammar" not in stub.bodies[0]
    assert stub.bodies[1]["messages"][-2]["content"] == "Bananas are yellow."
    u = client.episode_info()["llm"]
    assert (u["calls"], u["fallbacks"], u["retries"], u["invalid"]) == (2, 1, 1, 2)
    assert client.recorder.trace[0]["model"] == {"backend": "openai", "model": "stub", "base_url": stub.url,
                                                 "sha256": None, "served_model": "stub-model"}


def test_http_sends_grammar_and_key_when_asked(monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", "sk-test")
    with Stub(texts=["left"]) as stub:
        client = LLMClient(OpenAIBackend(stub.url, "m", api_key_env="MY_LLM_KEY", grammar=True))
        assert client.complete(USER, constraint=Choices(["left", "right"]), max_tokens=4).value == "left"
    body = stub.bodies[0]
    assert body["grammar"] == 'root ::= "left" | "right"\n' and body["max_tokens"] == 4
    assert body["messages"] == USER and stub.headers[0]["Authorization"] == "Bearer sk-test"


def test_http_server_down_raises_typed_error():
    port = free_port()
    backend = OpenAIBackend(f"http://127.0.0.1:{port}/v1", timeout=2, max_retries=1)
    t0 = time.monotonic()
    with pytest.raises(LLMError, match="cannot reach the LLM server"):
        LLMClient(backend).complete(USER)
    assert time.monotonic() - t0 < 5


def test_http_timeout_raises_typed_error():
    with Stub(delay=1.5) as stub:
        with pytest.raises(LLMTimeoutError, match="did not answer within the 0.3 s timeout"):
            LLMClient(OpenAIBackend(stub.url, timeout=0.3, max_retries=0)).complete(USER)


def test_http_error_status_raises_typed_error():
    with Stub(status=400) as stub:
        with pytest.raises(LLMError, match="HTTP 400.*stub says no"):
            LLMClient(OpenAIBackend(stub.url, max_retries=3)).complete(USER)
        assert len(stub.bodies) == 1  # a 400 is not retried


def test_make_client_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("POLAR_BENCH_LLM_BACKEND", "openai")
    monkeypatch.setenv("POLAR_BENCH_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("POLAR_BENCH_LLM_MODEL", "big-model")
    monkeypatch.setenv("POLAR_BENCH_LLM_GRAMMAR", "1")
    monkeypatch.setenv("POLAR_BENCH_LLM_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("POLAR_BENCH_LLM_TRACE", "0")
    c = make_client()
    assert isinstance(c.backend, OpenAIBackend) and c.backend.model == "big-model" and c.backend.supports_grammar
    assert c.cache is not None and not c.recorder.tracing
    monkeypatch.delenv("POLAR_BENCH_LLM_BASE_URL")
    from polar_bench.errors import UserError
    with pytest.raises(UserError, match="POLAR_BENCH_LLM_BASE_URL"):
        make_client()


def test_llm_failure_fails_the_episode_not_the_process():
    """An agent whose LLM server is down: the episode gets agent_error with the LLMError message."""
    import polar_bench
    from polar_bench.evaluate import run_episode

    class Agent:
        def __init__(self):
            self.llm = LLMClient(OpenAIBackend(f"http://127.0.0.1:{free_port()}/v1", max_retries=0))

        def act(self, obs, info):
            return 0 if self.llm.choose(USER, ["left", "right"]) == "left" else 1

    harness = polar_bench.make("gym/CartPole-v1")
    try:
        rec = run_episode(harness, Agent(), seed=1, step_timeout=10, episode_timeout=30)
    finally:
        harness.close()
    assert rec["status"] == "agent_error" and "LLMError: cannot reach the LLM server" in rec["error"]


DOWN_AGENT = """
from polar_bench.llm import LLMClient, OpenAIBackend
AGENT_INFO = {"name": "llm-down", "llm": {"model": "none", "provider": "a dead port"}}

def make_agent(task, run):
    class A:
        wants_text = True
        def __init__(self):
            self.llm = LLMClient(OpenAIBackend("http://127.0.0.1:%d/v1", max_retries=0, timeout=2))
        def reset(self, seed):
            self.llm.reset(seed)
        def act(self, obs, info):
            return 0 if self.llm.choose([{"role": "user", "content": info["text"]}], ["left", "right"]) == "left" else 1
        def episode_info(self):
            return self.llm.episode_info()
    return A()
"""


def test_evaluate_with_the_llm_server_down_fails_episodes_not_the_run(tmp_path, capsys):
    from polar_bench.cli import main
    from polar_bench.results import read_results

    agent = tmp_path / "agent.py"
    agent.write_text(DOWN_AGENT % free_port())
    out = tmp_path / "r.json"
    suite = str(Path(__file__).parent / "data" / "suites" / "tiny.toml")
    code = main(["evaluate", str(agent), "--suite", suite, "--tasks", "gym/CartPole-v1", "--runs", "1",
                 "--episodes", "2", "--workers", "1", "--no-progress", "--out", str(out)])
    capsys.readouterr()
    assert code == 1
    episodes = read_results(out).to_json()["episodes"]
    assert [e["status"] for e in episodes] == ["agent_error", "agent_error"]
    assert all("LLMError: cannot reach the LLM server" in e["error"] for e in episodes)
