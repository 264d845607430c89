"""Every submission check, each with a crafted bad file; and a rejection lists every problem."""

from __future__ import annotations

import json

import pytest
from test_leaderboard_fixtures import valid_results, write_json

from polar_bench.cli import main
from polar_bench.leaderboard import check_data, check_submission, recompute_summary


def problems_of(data, check=None):
    found = check_data(data)
    return [p for p in found if check is None or p.check == check]


def messages(problems):
    return "\n".join(str(p) for p in problems)


def test_file_not_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format_version": 1, ')
    data, problems = check_submission(path)
    assert data is None and [p.check for p in problems] == ["file"]
    assert "not valid JSON" in problems[0].message


def test_file_too_large(tmp_path, monkeypatch):
    from polar_bench.leaderboard import checks

    monkeypatch.setattr(checks, "MAX_FILE_BYTES", 100)
    _, problems = check_submission(write_json(tmp_path / "big.json", valid_results()))
    assert [p.check for p in problems] == ["file"] and "at most 100" in problems[0].message


def test_format_version():
    data = valid_results()
    data["format_version"] = 2
    found = problems_of(data, "format")
    assert len(found) == 1 and "format version 2" in found[0].message
    assert not problems_of(data, "schema"), "the schema check does not report the version twice"


def test_schema():
    data = valid_results()
    data["episodes"][3]["length"] = -1
    del data["agent"]["sha256"]
    data["extra_scores"] = {"iqm": 1.0}
    found = problems_of(data, "schema")
    text = messages(found)
    assert "episodes/3/length" in text and "'sha256' is a required property" in text
    assert "extra_scores: unknown top-level key" in text


def test_suite_hash_not_released():
    data = valid_results()
    data["suite"]["hash"] = "sha256:" + "1" * 64
    found = problems_of(data, "suite")
    assert len(found) == 1 and "not the hash of a released suite" in found[0].message


def test_suite_edited_references_and_seeds():
    data = valid_results()
    data["suite"]["tasks"][0]["high"] = 10.0       # a softer reference would inflate the scores
    data["suite"]["tasks"][1]["seeds"][0] += 1
    data["suite"]["tasks"].pop()                   # a task left out
    text = messages(problems_of(data, "suite"))
    assert "suite/tasks/0/high" in text and "suite/tasks/1/seeds" in text
    assert "task babyai/Synth of suite v1 is missing" in text


def test_pins():
    data = valid_results()
    data["versions"]["gymnasium"] = "0.29.1"
    data["comparable"] = False
    data["version_mismatches"] = {"gymnasium": {"pinned": "1.2.0", "installed": "0.29.1"}}
    text = messages(problems_of(data, "pins"))
    assert "comparable" in text and "versions/gymnasium: '0.29.1' installed; suite v1 pins 1.2.0" in text
    assert "version_mismatches/gymnasium" in text


def test_complete_missing_duplicate_unexpected():
    data = valid_results()
    eps = data["episodes"]
    missing = eps.pop(5)
    eps.append(dict(eps[0]))                                   # a duplicate
    eps.append({**eps[1], "seed": 12345})                      # a seed not the suite's
    eps.append({**eps[2], "run": 7})                           # a run beyond config.runs
    text = messages(problems_of(data, "complete"))
    assert f"{missing['task']}, run {missing['run']}, seed {missing['seed']}: missing" in text
    assert "recorded 2 times" in text
    assert "seed 12345 is not one of" in text and "run 7 is outside 0..2" in text


def test_complete_needs_the_suites_runs():
    data = valid_results()
    data["episodes"] = [e for e in data["episodes"] if e["run"] < 2]
    data["config"]["runs"] = 2
    data["standard"] = False
    text = messages(problems_of(data, "complete"))
    assert "2 run(s); suite v1 asks for at least 3" in text and "standard" in text


def test_status_not_ok():
    data = valid_results()
    data["episodes"][7].update(status="env_error", **{"return": None},
                               error="Traceback ...\nHarnessError: boom at step 3")
    data["episodes"][8].update(status="timeout", error="the agent exceeded the step timeout")
    found = problems_of(data, "status")
    assert len(found) == 2
    assert "status 'env_error' (HarnessError: boom at step 3)" in found[0].message


def test_finite():
    data = valid_results()
    data["episodes"][0]["return"] = float("nan")
    data["episodes"][1]["wall_seconds"] = float("inf")
    found = problems_of(data, "finite")
    assert [p.where for p in found] == ["episodes/0/return", "episodes/1/wall_seconds"]


def test_finite_from_the_file(tmp_path):
    data = valid_results()
    text = json.dumps(data).replace('"return": ' + json.dumps(data["episodes"][0]["return"]), '"return": NaN', 1)
    path = tmp_path / "nan.json"
    path.write_text(text)
    _, problems = check_submission(path)
    assert any(p.check == "finite" and p.where == "episodes/0/return" for p in problems)


def _first(data, task, run=0):
    return next(i for i, e in enumerate(data["episodes"]) if e["task"] == task and e["run"] == run)


def test_bounds_impossible_returns_and_lengths():
    """Values no episode of the task can have: a handful of them can escape verify's sample, so the
    check caps what each may claim (every committed results file passes it; see below)."""
    data = valid_results()
    cart, synth = _first(data, "gym/CartPole-v1"), _first(data, "babyai/Synth", run=1)
    cheetah, coinrun = _first(data, "dmc/cheetah-run", run=2), _first(data, "procgen/coinrun")
    data["episodes"][cart].update(length=12, **{"return": 1e308})   # CartPole pays at most 1 per step
    data["episodes"][synth]["return"] = 1.5                         # BabyAI: one reward <= 1 per episode
    data["episodes"][cheetah]["return"] = 1000.5                    # DMC: [0, 1] per step, 1000 steps
    data["episodes"][coinrun]["length"] = 1001                      # past the step limit
    data["episodes"][coinrun + 1]["return"] = -0.5                  # coinrun never pays less than 0
    data["episodes"][coinrun + 2]["return"] = 20.0                  # ... nor more than its goal's 10
    found = problems_of(data, "bounds")
    assert [p.where.split(" ")[0] for p in found] == [
        f"episodes/{i}" for i in sorted((cart, synth, cheetah, coinrun, coinrun + 1, coinrun + 2))]
    text = messages(found)
    assert "return 1e+308 is impossible: an episode of 12 steps of gym/CartPole-v1 returns 0 to 12" in text
    assert "an episode of 1000 steps of babyai/Synth" not in text and "babyai/Synth returns 0 to 1 " in text
    assert "length 1001 is impossible: procgen/coinrun ends episodes within 1 to 1000 steps" in text


def test_bounds_accept_the_edges_and_rounding():
    data = valid_results()
    cart, pend = _first(data, "gym/CartPole-v1"), _first(data, "gym/Pendulum-v1")
    data["episodes"][cart].update(length=500, **{"return": 500.0})
    # Pendulum's worst step, -(pi^2 + 0.1 * 8^2 + 0.001 * 2^2), is 1.1e-9 below the declared -16.2736044
    data["episodes"][pend].update(length=200, **{"return": -200 * (3.141592653589793 ** 2 + 6.4 + 0.004)})
    assert problems_of(data, "bounds") == []
    data["episodes"][cart]["return"] = 500.01
    assert len(problems_of(data, "bounds")) == 1


def test_bounds_of_a_task_scored_by_success():
    """v2 scores NetHack Oracle by harness.success: a forged 1000 there passed every check and scored
    400 on the task; now it is refused, and the committed random v2 entry still passes."""
    from pathlib import Path

    entry = Path(__file__).parent.parent / "leaderboard" / "entries" / "a09d59eafe96b993" / "results.json"
    data = json.loads(entry.read_text())
    assert problems_of(data, "bounds") == []
    oracle = next(i for i, e in enumerate(data["episodes"]) if e["task"] == "nethack/Oracle")
    data["episodes"][oracle]["harness"]["success"] = 1000
    [found] = problems_of(data, "bounds")
    assert found.where.startswith(f"episodes/{oracle} (nethack/Oracle")
    assert "nethack/Oracle is scored by its success, but its harness.success is 1000, not true or false" \
        in found.message


def test_bounds_need_the_suites_packages(monkeypatch):
    from polar_bench import harness
    from polar_bench.leaderboard import checks

    def missing(task_id, **options):
        raise ImportError(f"No module named 'nle' ({task_id})")

    checks._task_limits.cache_clear()
    monkeypatch.setattr(harness, "make", missing)
    try:
        found = problems_of(valid_results(), "bounds")
    finally:
        checks._task_limits.cache_clear()
    assert len(found) == 38, "one problem per task, not per episode"
    assert "cannot build the task to check its episodes (ImportError: No module named 'nle'" in found[0].message
    assert "install the suite's packages" in found[0].message


def test_summary_equal_is_accepted_and_wrong_is_not():
    data = valid_results()
    data["summary"] = recompute_summary(data)
    assert check_data(data) == []
    data["summary"]["overall"]["iqm"] += 0.01
    data["summary"]["tasks"]["gym/CartPole-v1"]["normalized_score"] = 0.99
    data["summary"]["episodes"] = 1
    data["summary"]["rank"] = 1
    text = messages(problems_of(data, "summary"))
    assert "summary/overall/iqm" in text and "summary/tasks/gym/CartPole-v1/normalized_score" in text
    assert "summary/episodes: 1 but the episodes give 1770" in text
    assert "summary/rank: cannot be recomputed" in text


def test_strings_bounded():
    data = valid_results()
    data["agent"]["info"]["description"] = "x" * 5000
    data["environment"]["os"] = "y" * 30_000
    data["episodes"][0]["note"] = "z" * 25_000
    text = messages(problems_of(data, "strings"))
    assert "agent/info/description: string of 5,000 characters; at most 2,000" in text
    assert "environment/os: string of 30,000 characters" in text and "episodes/0/note" in text


def test_agent_info_incomplete():
    data = valid_results()
    info = data["agent"]["info"]
    info["name"] = "two\nlines"
    info["authors"] = []
    info["url"] = "javascript:alert(1)"
    del info["license"]
    info["training_steps"] = {"classic": 100, "atari": -5}
    del info["llm"]
    found = problems_of(data, "agent_info")
    text = messages(found)
    for needle in ("agent/info/name: name contains a control character", "agent/info/authors: must be a non-empty",
                   "javascript:alert(1)' is not an http(s) URL", "agent/info/license: license",
                   "training_steps/atari: is not a domain", "training_steps/atari: -5 is not a non-negative",
                   "training_steps/dmc: missing", "agent/info/llm: missing"):
        assert needle in text, needle


@pytest.mark.parametrize("path, refused", [("baselines/ppo/agent.py", False), ("agent.py", False),
                                           ("/work/main/baselines/llm_rl/agent.py", True),
                                           ("../elsewhere/agent.py", True), ("C:\\Users\\me\\agent.py", True)])
def test_the_agent_path_is_relative_to_the_repository(path, refused):
    data = valid_results()
    data["agent"]["path"] = path
    found = [p for p in problems_of(data, "agent_info") if p.where == "agent/path"]
    assert bool(found) == refused
    if refused:
        assert "evaluate from that repository's root with a relative path" in messages(found)


def test_evaluate_records_the_agent_path_relative_to_the_working_folder(tmp_path, monkeypatch):
    from polar_bench.evaluate.run import _recorded_path

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "agent.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert _recorded_path(tmp_path / "sub" / "agent.py") == "sub/agent.py"
    assert _recorded_path("sub/agent.py") == "sub/agent.py"
    assert _recorded_path("/elsewhere/agent.py") == "/elsewhere/agent.py"  # outside: submit says what to do


def test_agent_info_budget_per_domain_and_llm_tokens():
    data = valid_results()
    data["agent"]["info"]["training_steps"] = 1_000_000
    data["agent"]["info"]["llm"] = {"model": "qwen"}
    text = messages(problems_of(data, "agent_info"))
    assert "must map every domain" in text and "1770 of 1770 episodes have no 'llm' token counts" in text
    untrained = valid_results()
    untrained["agent"]["info"]["training_steps"] = {}
    assert problems_of(untrained, "agent_info") == []


def test_a_budget_may_name_the_domains_of_other_released_suites():
    """One agent trained for v1 and v2 (the PPO baseline: atari100k is v2's) submits to v1 with the
    same AGENT_INFO; a name that no released suite has is still an error."""
    data = valid_results()
    assert data["suite"]["name"] == "v1"
    data["agent"]["info"]["training_steps"] = {**data["agent"]["info"]["training_steps"], "atari100k": 100_000}
    assert problems_of(data, "agent_info") == []
    data["agent"]["info"]["training_steps"]["atari100"] = 5
    assert "training_steps/atari100: is not a domain of suite v1" in messages(problems_of(data, "agent_info"))


def test_every_check_passes_on_a_valid_file():
    assert check_data(valid_results()) == []


def test_malformed_structure_does_not_crash():
    data = valid_results()
    data["episodes"] = "many"
    data["suite"]["tasks"] = {"not": "a list"}
    data["agent"] = []
    found = check_data(data)
    assert found and {p.check for p in found} >= {"schema"}


def test_submit_lists_every_problem_exit_2(tmp_path, capsys):
    data = valid_results()
    data["format_version"] = 7
    data["suite"]["tasks"][0]["low"] = -1e9
    data["versions"]["numpy"] = "2.0.0"
    data["episodes"][0]["status"] = "agent_error"
    data["episodes"][1]["return"] = float("inf")
    data["agent"]["info"]["url"] = "ftp://x"
    data["episodes"][2]["length"] = "long"
    data["episodes"][200]["length"] = 10**6
    for i in range(30):
        data["episodes"][100 + i]["seed"] = 10**6 + i
    path = write_json(tmp_path / "bad.json", data)
    code = main(["submit", path, "--leaderboard", str(tmp_path / "lb")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines()[0].startswith(f"error: {path} was rejected:")
    for check in ("format", "schema", "suite", "pins", "complete", "status", "finite", "bounds", "agent_info"):
        assert f"[{check}]" in err, check
    assert "more complete problem(s)" in err  # 60 complete problems: 20 shown, then a count
    assert not (tmp_path / "lb" / "entries").exists()
    code = main(["submit", path, "--leaderboard", str(tmp_path / "lb"), "--max-problems", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "more complete problem" not in err and err.count("[complete]") == 60


@pytest.mark.parametrize("flag", ["--check-only"])
def test_check_only(tmp_path, capsys, flag):
    path = write_json(tmp_path / "ok.json", valid_results())
    assert main(["submit", path, flag, "--leaderboard", str(tmp_path / "lb")]) == 0
    assert "every check passed" in capsys.readouterr().out
    assert not (tmp_path / "lb").exists()
