"""The codegen baseline (baselines/codegen): templates, the search loop with its feedback, saving the
chosen program, and evaluating it through the CLI with no LLM involved."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polar_bench  # noqa: E402
from baselines.codegen import search as cg  # noqa: E402
from baselines.codegen.templates import Template  # noqa: E402
from polar_bench.errors import LLMError  # noqa: E402
from polar_bench.llm import Completion, LLMClient, make_client  # noqa: E402
from polar_bench.suite import load_suite  # noqa: E402

SUITE = ROOT / "tests" / "data" / "suites" / "codegen_tiny.toml"
GOOD = "    if pole_angle + 0.5 * pole_angular_velocity > 0.0:\n        return 1\n    return 0\n"
BAD = "    return 0\n"


class FakeBackend:
    """Answers from a list in turn (cycling), keeping the requests; no grammar support."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.supports_grammar = False
        self.identity = {"backend": "fake", "model": "fake", "sha256": "f" * 64}
        self.requests = []

    def generate(self, request):
        self.requests.append(request)
        text = self.answers[(len(self.requests) - 1) % len(self.answers)]
        return Completion(text=text, prompt_tokens=100, completion_tokens=20, seconds=0.01,
                          model=self.identity)


def cartpole():
    h = polar_bench.make("gym/CartPole-v1")
    info = h.task_info
    h.close()
    return info


def test_template_grammar_names_the_observation_and_assembles_a_program():
    t = Template(cartpole())
    assert t.kind == "rules"
    g = t.grammar()
    assert '"pole_angle"' in g and "root ::=" in g and 'action ::= "0" | "1"' in g
    program = t.parse(GOOD)
    assert program.startswith("def act(observation):\n")
    assert "pole_angle" in program.splitlines()[1]
    assert t.parse("    if pole_angle >:\n") is None          # not Python: rejected without running
    pend = polar_bench.make("gym/Pendulum-v1")
    tp = Template(pend.task_info)
    pend.close()
    assert tp.kind == "linear" and "clip(a0)" in tp.parse("    a0 = -2.0 * sin_theta\n")


def test_training_seeds_are_disjoint_from_the_evaluation_seeds():
    v1 = load_suite("v1")
    for spec in v1.select(domains=["classic"]):
        seeds = cg.train_seeds(spec.id, 5, exclude=set(spec.seeds))
        assert len(set(seeds)) == 5 and not set(seeds) & set(spec.seeds)
    # an evaluation seed is skipped even if the salted rule produced it
    first = cg.train_seeds("gym/CartPole-v1", 1)[0]
    assert first not in cg.train_seeds("gym/CartPole-v1", 3, exclude={first})


def test_the_seeds_kept_out_of_training_are_every_shipped_suites():
    """A search excludes the evaluation seeds of every released suite, not only v1's: an Atari game
    exists only in v2, and a program searched once is evaluated under both."""
    v2 = load_suite("v2")
    assert cg.evaluation_seeds("atari/Pong") == set(v2.task("atari/Pong").seeds)
    assert cg.evaluation_seeds("atari/Pong", ("v1",)) == set()
    both = set(load_suite("v1").task("nethack/Score").seeds) | set(v2.task("nethack/Score").seeds)
    assert cg.evaluation_seeds("nethack/Score") == both


def test_no_committed_program_trained_on_an_evaluation_seed():
    """Every program under baselines/codegen/programs (v1's and v2's) was searched on training seeds
    that no shipped suite evaluates its task on, and its file is the program its record names."""
    import hashlib

    records = sorted((ROOT / "baselines" / "codegen" / "programs").glob("*/*/run*.json"))
    assert len(records) >= 244
    for path in records:
        rec = json.loads(path.read_text())
        assert not set(rec["train_seeds"]) & cg.evaluation_seeds(rec["task"]), path
        program = path.with_suffix(".py").read_text()
        assert hashlib.sha256(rec["program"].encode()).hexdigest() == rec["program_sha256"], path
        assert program.endswith(rec["program"]) and program.startswith("# polar_bench codegen"), path


def test_search_saves_the_best_program_and_the_evaluation_needs_no_llm(tmp_path, monkeypatch):
    backend = FakeBackend([BAD, GOOD])
    client = LLMClient(backend)
    rec = cg.search_task(client, "gym/CartPole-v1", 0, candidates=2, rounds=1, episodes=2,
                         options={"max_episode_steps": 50})
    assert [t["mean"] for t in rec["tried"]][1] == 50.0 > rec["tried"][0]["mean"]
    assert rec["train"]["candidate"] == 1 and GOOD.strip() in rec["program"]
    assert rec["llm"]["calls"] == 2 and rec["llm"]["prompt_tokens"] == 200
    path = cg.save(rec, tmp_path / "programs")
    assert path == tmp_path / "programs" / "gym" / "CartPole-v1" / "run0.py"
    saved = json.loads(path.with_suffix(".json").read_text())
    assert saved["train"]["returns"] == [50.0, 50.0] and saved["llm"]["completion_tokens"] == 40

    # Evaluate through the CLI: the agent loads the saved program; any LLM use would fail loudly.
    monkeypatch.setenv("POLAR_BENCH_CODEGEN_PROGRAMS", str(tmp_path / "programs"))
    monkeypatch.setenv("POLAR_BENCH_LLM_BACKEND", "openai")
    monkeypatch.setenv("POLAR_BENCH_LLM_BASE_URL", "http://127.0.0.1:9/v1")   # nothing listens
    out = tmp_path / "results.json"
    from polar_bench.cli import main
    rc = main(["evaluate", str(ROOT / "baselines" / "codegen" / "agent.py"), "--suite", str(SUITE),
               "--out", str(out), "--workers", "1", "--no-progress"])
    assert rc == 0
    res = json.loads(out.read_text())
    eps = res["episodes"]
    assert len(eps) == 2 and all(e["status"] == "ok" and e["return"] == 50.0 for e in eps)
    # every episode says it used no LLM (an entry of an LLM agent needs token counts on each episode)
    assert all(e["llm"]["calls"] == 0 and e["llm"]["prompt_tokens"] == 0 for e in eps)
    info = res["agent"]["info"]["llm"]
    assert info["search_usage"]["calls"] == 2 and info["candidates"] == [2] and info["rounds"] == [1]
    assert info["programs"]["gym/CartPole-v1/run0"] == rec["program_sha256"]
    # the training budget is the search's environment steps: 2 candidates x 2 episodes
    steps = sum(t["steps"] for t in rec["tried"])
    assert res["agent"]["info"]["training_steps"] == {"classic": steps}
    assert res["agent"]["info"]["training_steps_per_task"] == {"gym/CartPole-v1": steps}


def test_a_sandbox_violation_is_fed_back_into_the_next_prompt():
    bad = "```python\nimport socket\n\ndef act(observation):\n    return 0\n```"
    good = "```python\ndef act(observation):\n    return 1 if observation[2] > 0 else 0\n```"
    backend = FakeBackend([bad, good])
    rec = cg.search_task(LLMClient(backend), "gym/CartPole-v1", 0, candidates=1, rounds=2, episodes=1,
                         mode="free", options={"max_episode_steps": 30})
    first, second = rec["tried"]
    assert first["error"].startswith("import: ") and "socket" in first["error"]
    assert "refused import 'socket'" in second["prompt"]
    assert "Fix the error" in second["prompt"] and "import socket" in second["prompt"]
    assert backend.requests[1].messages[-1]["content"] == second["prompt"]
    assert rec["train"]["error"] is None and rec["train"]["round"] == 1


def test_the_refinement_prompt_contains_the_previous_returns():
    backend = FakeBackend([BAD, GOOD])
    rec = cg.search_task(LLMClient(backend), "gym/CartPole-v1", 0, candidates=1, rounds=2, episodes=2,
                         options={"max_episode_steps": 50})
    first, second = rec["tried"]
    rets = ", ".join(f"{r:.1f}" for r in first["returns"])
    assert f"Returns on the training episodes: {rets}" in second["prompt"]
    assert "return 0" in second["prompt"] and "higher return" in second["prompt"]
    assert first["prompt"] != second["prompt"] and "previous program" not in first["prompt"]


def test_search_with_the_embedded_model_writes_valid_programs():
    client = make_client("embedded", n_threads=1, trace=False)
    rec = cg.search_task(client, "gym/CartPole-v1", 0, candidates=1, rounds=1, episodes=1,
                         options={"max_episode_steps": 20})
    t = rec["tried"][0]
    assert t["error"] is None, t["program"]        # the grammar makes every answer a valid program
    assert 0 < t["mean"] <= 20
    assert rec["llm"]["calls"] == 1 and rec["llm"]["completion_tokens"] > 0
    assert rec["llm"]["model"]["model"].startswith("SmolLM2-135M")


@pytest.mark.slow
def test_search_through_the_openai_compatible_backend(server, tmp_path):
    from baselines.codegen.search import main
    out = tmp_path / "programs"
    rc = main(["--suite", str(SUITE), "--runs", "1", "-K", "1", "-N", "2", "--episodes", "1",
               "--backend", "http", "--base-url", server, "--model", "smollm2", "--grammar",
               "--out", str(out), "--quiet"])
    assert rc == 0
    rec = json.loads((out / "gym" / "CartPole-v1" / "run0.json").read_text())
    assert rec["llm"]["model"]["backend"] == "openai" and rec["llm"]["calls"] == 2
    assert all(t["error"] is None for t in rec["tried"])       # the server enforced the grammar
    assert "Returns on the training episodes" in rec["tried"][1]["prompt"]


try:  # the llama.cpp server fixture (skips the module's server tests without the server extra)
    from test_llm_server import server  # noqa: E402,F401
except BaseException:  # pytest.skip at import time raises a BaseException subclass
    @pytest.fixture
    def server():
        pytest.skip("llama_cpp.server is not available")


def test_example_observations_of_dict_tasks_are_json():
    import json

    from baselines.codegen.search import example_observations

    for task in ("babyai/GoToRedBall", "nethack/Staircase"):
        examples = example_observations(task, 5, options={"max_episode_steps": 50} if "nethack" in task else None)
        assert examples and json.loads(json.dumps(examples))


class FailingOnceBackend(FakeBackend):
    """Refuses its second request as llama.cpp refuses a prompt longer than the context."""

    def generate(self, request):
        if len(self.requests) == 1:
            self.requests.append(request)
            raise LLMError("the embedded model refused the request: Requested tokens (2124) exceed "
                           "context window of 2048")
        return super().generate(request)


def test_an_llm_failure_fails_that_candidate_and_the_search_goes_on():
    backend = FailingOnceBackend([GOOD])
    rec = cg.search_task(LLMClient(backend), "gym/CartPole-v1", 0, candidates=1, rounds=3, episodes=1,
                         options={"max_episode_steps": 20})
    tried = rec["tried"]
    assert len(tried) == 3 and tried[1]["program"] is None and "exceed context window" in tried[1]["error"]
    assert tried[0]["mean"] == tried[2]["mean"] == 20.0 and rec["train"]["mean"] == 20.0
    # after the failure the candidate starts afresh: round 2's prompt is a first prompt, not a refinement
    assert backend.requests[2].messages == backend.requests[0].messages


def test_answers_have_room_for_every_action_component():
    """The linear template writes one line per action component: 96 tokens cannot hold six."""
    backend = FakeBackend(["    a0 = 0.5 * x0\n"])
    rec = cg.search_task(LLMClient(backend), "dmc/cheetah-run", 0, candidates=1, rounds=1, episodes=1,
                         max_tokens=96, max_steps=5)
    assert backend.requests[0].max_tokens >= 6 * 48 and rec["llm"]["max_tokens"] >= 6 * 48


def test_the_action_cycle_hint_names_the_action_range_and_gives_no_list_to_copy():
    """With a concrete example list in the hint the 135M model copied it in 9 of 15 BabyAI searches."""
    import re

    h = polar_bench.make("nethack/Score")
    t = Template(h.task_info)
    h.close()
    assert t.kind == "sequence"
    hint = t.format_hint()
    assert "from 0 to 22" in hint and not re.search(r"\[\d", hint)
    program = t.parse("    actions = [1, 18, 22]\n")
    assert program.rstrip().endswith("return actions[t % len(actions)]")
    assert '"22"' in t.grammar()


class AlwaysFailingBackend(FakeBackend):
    def generate(self, request):
        self.requests.append(request)
        raise LLMError("the server is down")


def test_a_search_whose_every_llm_call_fails_is_one_clear_error():
    backend = AlwaysFailingBackend([GOOD])
    with pytest.raises(LLMError, match=r"gym/CartPole-v1 run 0: all 4 LLM calls .* the server is down"):
        cg.search_task(LLMClient(backend), "gym/CartPole-v1", 0, candidates=2, rounds=2, episodes=1,
                       options={"max_episode_steps": 20})
    assert len(backend.requests) == 4


def test_the_search_budget_is_reported_under_the_suites_domain_names(tmp_path):
    from baselines.codegen.agent import _search_steps

    for task, steps in (("atari/Pong", [900, 1100]), ("gym/CartPole-v1", [40]), ("nethack/Score", [1000])):
        (tmp_path / task).mkdir(parents=True)
        (tmp_path / task / "run0.json").write_text(json.dumps({"task": task, "tried": [{"steps": s} for s in steps]}))
    per_domain, per_task = _search_steps(tmp_path)
    assert per_domain == {"atari100k": 2000, "classic": 40, "nethack": 1000}
    assert per_task["atari/Pong"] == 2000


def test_skip_existing_continues_a_search_cut_short(tmp_path, monkeypatch, capsys):
    """With --skip-existing a (task, run) whose record is saved is not searched again; the others are."""
    backend = FakeBackend([GOOD])
    monkeypatch.setattr(cg, "make_llm", lambda args: LLMClient(backend))
    out = tmp_path / "programs"
    (out / "gym" / "CartPole-v1").mkdir(parents=True)
    (out / "gym" / "CartPole-v1" / "run0.json").write_text("{}")
    args = ["--suite", str(SUITE), "--tasks", "gym/CartPole-v1", "--runs", "2", "-K", "1", "-N", "1",
            "--episodes", "1", "--out", str(out), "--quiet", "--skip-existing"]
    assert cg.main(args) == 0
    assert "gym/CartPole-v1 run 0: already searched, skipped" in capsys.readouterr().out
    assert (out / "gym" / "CartPole-v1" / "run0.json").read_text() == "{}"  # left as it was
    assert json.loads((out / "gym" / "CartPole-v1" / "run1.json").read_text())["run"] == 1
    assert len(backend.requests) == 1  # run 1's one candidate only
