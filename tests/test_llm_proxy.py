"""The OpenAI-compatible LLM proxy (polar_bench.llm.proxy) against a small fake upstream, and through
`evaluate` with an agent written against the official `openai` SDK (no polar_bench import)."""

from __future__ import annotations

import http.client
import json
import sys
import textwrap
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from polar_bench.cli import main
from polar_bench.errors import SuiteError
from polar_bench.llm.proxy import MAX_BODY_BYTES, LLMBudget, LLMProxy, parse_budget
from polar_bench.results import read_results
from polar_bench.suite import load_suite, parse_suite

HERE = Path(__file__).parent
TINY = HERE / "data" / "suites" / "tiny.toml"


class _Upstream(BaseHTTPRequestHandler):
    """Answers like an OpenAI server: the completion is the word count of the prompt, usage says
    prompt tokens = characters // 4 + 1 and completion tokens = 3."""

    protocol_version = "HTTP/1.1"
    bodies: list[dict] = []

    def log_message(self, *args):
        pass

    def _send(self, body: dict, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        self._send({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "test"}]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        text = json.dumps(body.get("messages") or body.get("prompt"))
        usage = {"prompt_tokens": len(text) // 4 + 1, "completion_tokens": 3,
                 "total_tokens": len(text) // 4 + 4}
        if self.path.endswith("/chat/completions"):
            choice = {"index": 0, "message": {"role": "assistant", "content": f"words {len(text.split())}"},
                      "finish_reason": "stop", "logprobs": {"content": [{"token": "words", "logprob": -0.5}]},
                      "token_ids": [4, 5, 6], "token_logprobs": [-0.5, -0.25, -0.125]}
            self._send({"id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
                        "choices": [choice], "usage": usage, "prompt_token_ids": [1, 2, 3]})
        else:
            self._send({"id": "c2", "object": "text_completion", "created": 1, "model": "fake",
                        "choices": [{"index": 0, "text": " left", "finish_reason": "length", "logprobs": None}],
                        "usage": usage})


@pytest.fixture(scope="module")
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _post(url: str, body: bytes | dict, headers: dict | None = None) -> tuple[int, dict | bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return r.status, json.loads(raw) if r.headers["Content-Type"] == "application/json" else raw
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def proxy(upstream):
    p = LLMProxy(upstream, budget=LLMBudget(calls_per_episode=3), trace=True)
    port = p.serve().server_address[1]
    token = p.new_token()
    yield p, f"http://127.0.0.1:{port}/a/{token}/v1", token
    p.shutdown()


CHAT = {"model": "fake", "messages": [{"role": "user", "content": "go to the red ball"}], "max_tokens": 3}


def test_calls_are_counted_per_episode_from_the_upstream_usage(proxy):
    p, base, token = proxy
    p.open(token, "lane0", "babyai/GoToRedBall", 0, 1, 42)
    p.step("lane0", 5)
    status, reply = _post(base + "/chat/completions", CHAT)
    assert status == 200 and reply["choices"][0]["message"]["content"].startswith("words")
    status, reply2 = _post(base + "/completions", {"model": "fake", "prompt": "the door is", "max_tokens": 3})
    assert status == 200 and reply2["choices"][0]["text"] == " left"
    calls = p.close("lane0")
    assert calls is not None
    assert calls.calls == 2
    assert calls.prompt_tokens == reply["usage"]["prompt_tokens"] + reply2["usage"]["prompt_tokens"]
    assert calls.completion_tokens == 6
    line = calls.lines[0]
    assert (line["task"], line["run"], line["index"], line["seed"], line["step"]) == ("babyai/GoToRedBall", 0, 1, 42, 5)
    assert line["messages"] == CHAT["messages"] and line["logprobs"]["content"][0]["logprob"] == -0.5
    assert line["model"] == "fake" and line["params"]["seed"] == 42  # the episode seed, sent upstream
    assert _Upstream.bodies[-1]["seed"] == 42 and "stream" not in _Upstream.bodies[-1]


def test_a_call_outside_an_episode_or_with_a_forged_token_is_refused(proxy):
    p, base, token = proxy
    status, reply = _post(base + "/chat/completions", CHAT)
    assert status == 409 and "no episode" in reply["error"]["message"]
    status, reply = _post(base.replace(token, "0" * 32) + "/chat/completions", CHAT)
    assert status == 403 and "unknown proxy token" in reply["error"]["message"]


def test_hostile_requests_get_clear_errors(proxy):
    p, base, token = proxy
    p.open(token, "lane0", "t/x", 0, 0, 1)
    assert _post(base + "/chat/completions", b"{not json")[0] == 400
    assert _post(base + "/chat/completions", b"[1, 2]")[0] == 400
    # a body announced too large is refused before it is read
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.putrequest("POST", parts.path + "/chat/completions")
    conn.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "at most" in json.loads(resp.read())["error"]["message"]
    conn.close()
    assert _post(base + "/embeddings", CHAT)[0] == 404
    assert _post(base.replace("/a/", "/b/") + "/chat/completions", CHAT)[0] == 404
    assert p.close("lane0").calls == 0  # type: ignore[union-attr]


def test_over_budget_the_proxy_answers_429_and_marks_the_episode(proxy):
    p, base, token = proxy
    p.open(token, "lane0", "t/x", 0, 0, 1)
    for i in range(3):
        assert _post(base + "/chat/completions", {**CHAT, "max_tokens": i + 1})[0] == 200
    status, reply = _post(base + "/chat/completions", CHAT)
    assert status == 429 and "LLM budget exceeded" in reply["error"]["message"]
    assert p.exceeded("lane0") and "at most 3 per episode" in p.exceeded("lane0")  # type: ignore[operator]
    assert p.close("lane0").calls == 3  # type: ignore[union-attr]


def test_identical_requests_in_an_episode_seed_come_from_the_cache(proxy):
    p, base, token = proxy
    p.open(token, "lane0", "t/x", 0, 0, 9)
    n = len(_Upstream.bodies)
    first = _post(base + "/chat/completions", CHAT)[1]
    second = _post(base + "/chat/completions", CHAT)[1]
    assert first == second and len(_Upstream.bodies) == n + 1
    calls = p.close("lane0")
    assert calls.calls == 2 and calls.cache_hits == 1  # type: ignore[union-attr]
    assert calls.prompt_tokens == 2 * first["usage"]["prompt_tokens"]  # type: ignore[union-attr,index]
    p.open(token, "lane0", "t/x", 0, 1, 10)  # another seed: asked again
    _post(base + "/chat/completions", CHAT)
    assert len(_Upstream.bodies) == n + 2
    p.close("lane0")


def test_the_openai_sdk_streams_through_the_proxy(proxy):
    openai = pytest.importorskip("openai")
    p, base, token = proxy
    p.open(token, "lane0", "t/x", 0, 0, 3)
    client = openai.OpenAI(base_url=base, api_key="x")
    assert [m.id for m in client.models.list()] == ["fake"]
    chunks = list(client.chat.completions.create(model="fake", messages=CHAT["messages"], max_tokens=3, stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    usage = [c.usage for c in chunks if c.usage]
    calls = p.close("lane0")
    assert text.startswith("words") and len(usage) == 1
    assert calls.prompt_tokens == usage[0].prompt_tokens and calls.completion_tokens == 3  # type: ignore[union-attr]


def test_budget_flag_and_suite_table_parse():
    assert parse_budget("calls=5,tokens=100") == LLMBudget(5, 100)
    assert parse_budget("tokens=7") == LLMBudget(None, 7)
    for bad in ("", "calls=0", "calls=x", "steps=4"):
        with pytest.raises(ValueError, match="calls=N,tokens=M"):
            parse_budget(bad)
    data = json.loads(json.dumps(load_suite(str(TINY)).raw))
    assert load_suite(str(TINY)).llm is None
    suite = parse_suite({**data, "llm": {"calls_per_episode": 4}})
    assert suite.llm == {"calls_per_episode": 4, "tokens_per_episode": None}
    assert suite.hash != load_suite(str(TINY)).hash
    for bad in ({"calls_per_episode": 0}, {"calls": 3}, {}, 5):
        with pytest.raises(SuiteError, match=r"\[llm\]"):
            parse_suite({**data, "llm": bad})


OPENAI_AGENT = '''
    """An agent on the official openai SDK; it knows nothing of polar_bench."""
    import os

    from openai import OpenAI

    AGENT_INFO = {"name": "openai-sdk", "llm": "whatever OPENAI_BASE_URL serves"}


    class Agent:
        def __init__(self, task, run):
            self.client = OpenAI()
            self.n = task.action_space.n

        def act(self, observation, info):
            reply = self.client.chat.completions.create(
                model=os.environ.get("MODEL", "smollm2"), max_tokens=2, temperature=0.0,
                messages=[{"role": "user", "content": "Pick a number: 0 or 1."}])
            digits = [c for c in reply.choices[0].message.content or "" if c.isdigit()]
            return int(digits[0]) % self.n if digits else 0


    def make_agent(task, run):
        return Agent(task, run)
'''


def _evaluate_on_cartpole(agent: Path, out: Path, upstream: str, mode: str, *extra: str) -> int:
    """``evaluate`` of ``agent`` on the tiny suite's CartPole, 2 episodes of one run behind the proxy."""
    return main(["evaluate", str(agent), "--suite", str(TINY), "--tasks", "gym/CartPole-v1", "--runs", "1",
                 "--episodes", "2", "--workers", "1", "--no-progress", "--out", str(out), "--llm-upstream", upstream,
                 *extra] + (["--in-process"] if mode == "in-process" else []))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the agent process layers are Linux's")
@pytest.mark.parametrize("mode", ["isolated", "in-process"])
def test_an_openai_sdk_agent_is_counted_by_the_proxy_under_evaluate(mode, tmp_path, capsys, upstream):
    pytest.importorskip("openai")
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(OPENAI_AGENT))
    out = tmp_path / "r.json"
    before = len(_Upstream.bodies)
    code = _evaluate_on_cartpole(agent, out, upstream, mode, "--envs-per-worker", "2", "--llm-budget", "calls=5",
                                 "--trajectories", str(tmp_path / "traj"))
    err = capsys.readouterr().err
    data = read_results(out).to_json()
    if not data["isolation"]["layers"].get("network_namespace", "on").startswith("on"):
        pytest.skip("no network namespace on this machine")
    assert code in (0, 1), err
    sent = _Upstream.bodies[before:]
    for ep in data["episodes"]:
        llm = ep["llm"]
        assert llm["source"] == "proxy" and llm["calls"] >= 1
        # one call per step; a constant action ends CartPole after about 9 steps, so the 6th call is over
        # the budget of 5: refused with 429, and the episode ends there
        assert ep["status"] == "agent_error" and "LLM budget exceeded" in ep["error"], ep["error"]
        assert llm["calls"] == ep["length"] == 5
        lines = [json.loads(x) for x in (tmp_path / "traj" / "gym__CartPole-v1" / f"run0-ep{ep['index']}.jsonl")
                 .read_text().splitlines()]
        calls, end = lines[:-1], lines[-1]
        assert end["type"] == "episode" and end["return"] == ep["return"] and end["llm"] == llm
        assert [c["step"] for c in calls] == list(range(len(calls)))  # attributed to their steps
        assert sum(c["prompt_tokens"] for c in calls) == llm["prompt_tokens"]
        assert sum(c["completion_tokens"] for c in calls) == llm["completion_tokens"] == 3 * llm["calls"]
    # all calls but cache hits reached the upstream; each episode's first call carried its seed
    assert len(sent) == sum(e["llm"]["calls"] - e["llm"]["cache_hits"] for e in data["episodes"])
    assert {b["seed"] for b in sent} == {e["seed"] for e in data["episodes"]}
    assert data["isolation"]["llm_proxy"] == {"upstream": upstream, "budget": {"calls_per_episode": 5,
                                                                               "tokens_per_episode": None},
                                              "trajectories": True}
    assert data["standard"] is False
    # the loading example of docs/llm.md, run as it is written there
    doc = (HERE.parent / "docs" / "llm.md").read_text()
    code_block = doc.split("def load_trajectories", 1)[0].rsplit("```python", 1)[1] + "def load_trajectories" + \
        doc.split("def load_trajectories", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(code_block, scope)  # noqa: S102 - our own documentation
    samples = scope["load_trajectories"](tmp_path / "traj")
    assert len(samples) == sum(e["llm"]["calls"] for e in data["episodes"])
    prompt_ids, completion_ids, logprobs, ret, status, step = samples[0]
    assert (prompt_ids, completion_ids) == ([1, 2, 3], [4, 5, 6]) and logprobs == [-0.5, -0.25, -0.125]
    assert ret == data["episodes"][0]["return"] and status == "agent_error" and step == 0


BUDGET_AGENT = '''
    """An LLM agent that keeps within the budget the evaluation tells it, then plays on without the LLM."""
    import os

    from openai import OpenAI

    AGENT_INFO = {"name": "budget-aware", "llm": "whatever OPENAI_BASE_URL serves"}


    class Agent:
        def __init__(self, task, run):
            self.client = OpenAI()
            self.calls = 0

        def reset(self, seed):
            self.calls = 0

        def act(self, observation, info):
            limit = os.environ.get("POLAR_BENCH_LLM_CALLS_PER_EPISODE")
            if limit is not None and self.calls >= int(limit):
                return int(observation[2] > 0)   # out of calls: lean with the pole
            self.calls += 1
            self.client.chat.completions.create(model="smollm2", max_tokens=2,
                                                messages=[{"role": "user", "content": "0 or 1?"}])
            return 0

        def episode_info(self):
            return {"told": {k: os.environ.get(k) for k in ("POLAR_BENCH_LLM_CALLS_PER_EPISODE",
                                                            "POLAR_BENCH_LLM_TOKENS_PER_EPISODE")}}


    def make_agent(task, run):
        return Agent(task, run)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the agent process layers are Linux's")
@pytest.mark.parametrize("mode", ["isolated", "in-process"])
def test_the_agent_is_told_its_llm_budget_and_can_keep_within_it(mode, tmp_path, capsys, upstream):
    pytest.importorskip("openai")
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(BUDGET_AGENT))

    def evaluate(out, *budget):
        code = _evaluate_on_cartpole(agent, out, upstream, mode, *budget)
        return code, read_results(out).to_json()

    code, data = evaluate(tmp_path / "r.json", "--llm-budget", "calls=4")
    if not data["isolation"]["layers"].get("network_namespace", "on").startswith("on"):
        pytest.skip("no network namespace on this machine")
    assert code == 0, capsys.readouterr().err
    for ep in data["episodes"]:   # 4 calls, then the pole-leaning policy plays on: no episode cut short
        assert ep["status"] == "ok" and ep["llm"]["calls"] == 4 < ep["length"], ep
        assert ep["told"] == {"POLAR_BENCH_LLM_CALLS_PER_EPISODE": "4", "POLAR_BENCH_LLM_TOKENS_PER_EPISODE": None}
    code, data = evaluate(tmp_path / "t.json", "--llm-budget", "tokens=900")
    assert code == 0 and all(ep["told"] == {"POLAR_BENCH_LLM_CALLS_PER_EPISODE": None,
                                            "POLAR_BENCH_LLM_TOKENS_PER_EPISODE": "900"} for ep in data["episodes"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the agent process layers are Linux's")
def test_with_the_host_network_the_proxy_listens_on_a_host_port(tmp_path, capsys, upstream):
    """--agent-network: no namespace to hand a listener over from, so the worker serves the proxy on a
    free port of the host's 127.0.0.1; the agent's calls are still counted there."""
    pytest.importorskip("openai")
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(OPENAI_AGENT))
    out = tmp_path / "r.json"
    code = main(["evaluate", str(agent), "--suite", str(TINY), "--tasks", "gym/CartPole-v1", "--runs", "1",
                 "--episodes", "1", "--workers", "1", "--no-progress", "--out", str(out),
                 "--llm-upstream", upstream, "--agent-network"])
    err = capsys.readouterr().err
    data = read_results(out).to_json()
    assert code == 0, err
    assert data["isolation"]["agent_network"] and data["isolation"]["layers"]["network_namespace"].startswith("off")
    (ep,) = data["episodes"]
    assert ep["llm"]["source"] == "proxy" and ep["llm"]["calls"] == ep["length"] > 0


def test_the_episode_record_takes_the_proxy_count_over_the_agents_claim(upstream, tmp_path):
    from polar_bench.evaluate.episodes import EpisodeRunner
    from polar_bench.llm.proxy import EpisodeCalls

    runner = EpisodeRunner("agent.py", {}, None, None, in_process=True,
                           llm_proxy={"upstream": upstream, "trajectories": str(tmp_path)})
    try:
        base = {"task": "t/x", "run": 0, "index": 0, "seed": 1, "return": 1.0, "length": 2, "status": "ok",
                "error": None, "digest": "sha256:" + "0" * 64}
        claim = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "source": "proxy"}
        rec = {**base, "llm": claim}
        runner._llm_record(rec, EpisodeCalls("t/x", 0, 0, 1))  # the proxy saw no call: the claim stays, marked
        assert rec["llm"] == {**claim, "source": "agent"}
        rec = {**base, "llm": claim}
        runner._llm_record(rec, EpisodeCalls("t/x", 0, 0, 1, calls=2, prompt_tokens=30, completion_tokens=4))
        assert rec["llm"]["calls"] == 2 and rec["llm"]["source"] == "proxy" and rec["status"] == "ok"
        rec = dict(base)
        runner._llm_record(rec, EpisodeCalls("t/x", 0, 0, 1, calls=3, exceeded="LLM budget exceeded: 3 calls"))
        assert rec["status"] == "agent_error" and rec["error"].startswith("LLM budget exceeded") and "digest" not in rec
        end = json.loads((tmp_path / "t__x" / "run0-ep0.jsonl").read_text().splitlines()[-1])
        assert end["status"] == "agent_error" and end["llm"]["calls"] == 3
    finally:
        runner.close()


def test_a_token_serving_several_episodes_at_once_is_refused(proxy):
    """An act_batch slot plays several lanes: a call on its token cannot be attributed to one."""
    p, base, token = proxy
    p.open(token, "lane0", "t/x", 0, 0, 1)
    p.open(token, "lane1", "t/x", 0, 1, 2)
    status, reply = _post(base + "/chat/completions", CHAT)
    assert status == 409 and "--envs-per-worker 1" in reply["error"]["message"]
    p.close("lane1")
    assert _post(base + "/chat/completions", CHAT)[0] == 200
    assert p.close("lane0").calls == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("flags, message", [
    (["--llm-upstream", "ftp://x"], "not an http(s) URL"),
    (["--llm-budget", "calls=0"], "calls=N,tokens=M"),
    (["--llm-upstream", "embedded", "--llm-endpoint", "http://127.0.0.1:8080/v1"], "exclude each other"),
])
def test_bad_proxy_flags_are_one_line_errors(flags, message, tmp_path, capsys):
    code = main(["evaluate", str(tmp_path / "agent.py"), "--suite", str(TINY), "--out", str(tmp_path / "r.json"),
                 *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_connections_beyond_the_cap_are_closed_not_served(proxy):
    import socket
    import time

    from polar_bench.llm.proxy import MAX_CONNECTIONS

    p, base, token = proxy
    p.open(token, "lane0", "t/x", 0, 0, 1)
    parts = urllib.parse.urlsplit(base)
    idle = [socket.create_connection((parts.hostname, parts.port)) for _ in range(MAX_CONNECTIONS)]
    time.sleep(0.5)  # let the server accept them all
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        _post(base + "/chat/completions", CHAT)
    for s in idle:
        s.close()
    deadline = time.monotonic() + 10
    while True:  # the idle connections' threads see EOF and give their places back
        try:
            assert _post(base + "/chat/completions", CHAT)[0] == 200
            break
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException):
            assert time.monotonic() < deadline
            time.sleep(0.1)
    p.close("lane0")


def test_a_client_that_drops_its_connection_prints_nothing_and_the_server_goes_on(capfd):
    """An agent process killed mid-request (its step timeout) resets its connection to the proxy: no
    traceback per dropped connection on the evaluation's terminal (an agent could flood it), the next
    request is answered, and an error of another kind is still printed."""
    import socket
    import struct
    import time

    from polar_bench.llm.proxy import JSONHandler, QuietHTTPServer

    class Handler(JSONHandler):
        def do_POST(self):  # noqa: N802
            if self.path == "/fail":
                raise ValueError("a bug in a handler")
            self._send(200, b"{}")

    server = QuietHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for _ in range(3):
            s = socket.create_connection(server.server_address)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Len")  # cut mid-header
            time.sleep(0.1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            s.close()
        time.sleep(0.5)
        assert "Traceback" not in capfd.readouterr().err
        conn = http.client.HTTPConnection(*server.server_address, timeout=10)
        conn.request("POST", "/ok", body=b"{}")
        assert conn.getresponse().status == 200
        conn.close()
        conn = http.client.HTTPConnection(*server.server_address, timeout=10)
        conn.request("POST", "/fail", body=b"{}")
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            conn.getresponse()
        conn.close()
        time.sleep(0.3)
        assert "ValueError: a bug in a handler" in capfd.readouterr().err
    finally:
        server.shutdown()
        server.server_close()
