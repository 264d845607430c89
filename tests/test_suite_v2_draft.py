"""Suite v2 as scripts/make_suite_v2.py builds it: the draft's structure, and the release refusing to
be written until every constant it needs has a measured or published value with its source."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from polar_bench import analysis
from polar_bench.published import ATARI100K
from polar_bench.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "make_suite_v2.py"


def _script(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    out = tmp_path_factory.mktemp("v2") / "v2-draft.toml"
    done = _script("--draft", str(out), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return load_suite(out)


def test_draft_keeps_v1_adds_atari100k_and_scores_goal_tasks_by_success(draft):
    v1 = load_suite("v1")
    assert draft.name == "v2" and draft.runs == 5 and draft.seed == v1.seed
    assert draft.pins["ale-py"] == "0.12.1" and all(draft.pins[k] == v for k, v in v1.pins.items())
    assert [d.name for d in draft.domains] == [*(d.name for d in v1.domains), "atari100k"]
    assert draft.task_ids[:len(v1.tasks)] == v1.task_ids and len(draft.tasks) == len(v1.tasks) + 26
    metrics = {t.id: t.metric for t in draft.tasks if t.metric != "return"}
    assert metrics == {"nethack/Staircase": "success", "nethack/StaircasePet": "success",
                       "nethack/Oracle": "success"}
    for t in v1.tasks:  # shared tasks play the same seeds; untouched domains keep v1's constants
        again = draft.task(t.id)
        assert again.seeds == t.seeds and again.options == t.options
        if t.domain in ("classic", "dmc", "procgen"):
            assert (again.low, again.high) == (t.low, t.high)
    assert draft.task("nethack/Oracle").high.value == 1.0


def test_atari100k_references_are_the_published_tables_so_published_runs_compare(draft):
    games, low, high = ATARI100K.references()
    mine = {t.id: (t.low.value, t.high.value) for t in draft.tasks if t.domain == "atari100k"}
    assert mine == {f"atari/{g}": (lo, hi) for g, lo, hi in zip(games, low.tolist(), high.tolist(), strict=True)}
    published = analysis.published_agents("atari100k")
    assert {t.task_id: (t.low, t.high) for t in published[0].tasks} == mine


def test_release_refuses_missing_constants(tmp_path):
    results = tmp_path / "r.json"
    results.write_text("{}")
    done = _script("--random", str(results), "--bot", str(results), "--out", str(tmp_path / "v2.toml"), cwd=ROOT)
    assert done.returncode != 0 and "--out needs --random, --bot and --strong" in done.stderr
    bot = tmp_path / "bot.json"
    bot.write_text(json.dumps({}))
    strong = tmp_path / "strong.json"
    strong.write_text(json.dumps({}))
    random = ROOT / "suites" / "v2-measurements" / "random-success.json"
    done = _script("--random", str(random), "--bot", str(bot), "--strong", str(strong),
                   "--out", str(tmp_path / "v2.toml"), cwd=ROOT)
    assert done.returncode != 0 and not (tmp_path / "v2.toml").exists()
    assert "no strong upper reference for nethack/Score" in done.stderr


def test_babyai_bot_reaches_the_goal_with_a_reward_below_one():
    sys.path.insert(0, str(ROOT / "scripts"))
    from babyai_bot_references import bot_episode

    seed = load_suite("v1").task("babyai/GoToLocal").seeds[0]
    ret, length, ok = bot_episode("babyai/GoToLocal", seed)
    assert ok and 0.5 < ret < 1.0 and length >= 1
    assert ret == pytest.approx(1 - 0.9 * length / 64)  # GoToLocal: 64 steps at most, 1 - 0.9 * steps / limit
    recorded = json.loads((ROOT / "suites" / "v2-measurements" / "babyai-bot.json").read_text())
    assert recorded["babyai/GoToLocal"]["seeds"][0] == seed
