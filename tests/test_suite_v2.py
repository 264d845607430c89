"""Suite v2 is released: its content hash is pinned, it is exactly what scripts/make_suite_v2.py makes
from the committed measurements, and its constants say where they come from. v1 stays the default."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from polar_bench.leaderboard.checks import released_suites
from polar_bench.suite import available_suites, load_suite

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "polar_bench" / "suites" / "v2-measurements"
V2_HASH = "sha256:22bb18a208f9ded493695b638d681c21b511bdf566f404073d13d0cac97ae2f4"
V1_HASH = "sha256:dc7fa51d27688ad96f0d7bb5fd7796b7f669d543d746fc30e85de459687027b4"


def test_v2_hash_is_pinned_and_both_suites_are_released():
    # A released suite never changes. If this fails, you edited suites/v2.toml: revert it and make v3.
    assert load_suite("v2").hash == V2_HASH
    assert {"v1", "v2"} <= set(available_suites())
    assert {V1_HASH, V2_HASH} <= set(released_suites())


def test_v1_is_still_the_default_suite():
    from polar_bench.cli import build_parser

    args = build_parser().parse_args(["evaluate", "agent.py"])
    assert args.suite == "v1"


def test_v2_is_what_the_script_makes_from_the_committed_measurements(tmp_path):
    out = tmp_path / "v2.toml"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_suite_v2.py"),
                           "--random", str(MEASURED / "random-success.json"),
                           "--bot", str(MEASURED / "babyai-bot.json"),
                           "--strong", str(MEASURED / "nethack-strong.json"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (ROOT / "polar_bench" / "suites" / "v2.toml").read_text()


def test_v2_constants_measure_what_each_task_asks():
    v1, v2 = load_suite("v1"), load_suite("v2")
    assert [t.id for t in v2.tasks][:len(v1.tasks)] == [t.id for t in v1.tasks] and len(v2.tasks) == 64
    assert v2.seed == v1.seed and v2.runs == 5 and v2.pins["ale-py"] == "0.12.1"
    assert v2.llm == {"calls_per_episode": 1000, "tokens_per_episode": 1000000}
    strong = json.loads((MEASURED / "nethack-strong.json").read_text())
    bot = json.loads((MEASURED / "babyai-bot.json").read_text())
    for t in v2.tasks:
        assert t.low.source and t.high.source and t.high.value > t.low.value, t.id
        assert "placeholder" not in t.low.source + t.high.source, t.id
        if t.id in ("nethack/Staircase", "nethack/StaircasePet", "nethack/Oracle"):
            assert t.metric == "success" and t.high.value == 1.0 and 0 <= t.low.value < 0.25
        elif t.domain == "nethack":
            assert t.metric == "return" and t.low == v1.task(t.id).low
            assert t.high.value == strong[t.id]["value"] > v1.task(t.id).high.value  # above random's best 5%
            assert "baselines/nethack_bot/agent.py" in t.high.source
        elif t.domain == "babyai":
            assert t.high.value == round(bot[t.id]["mean_return"], 4) < 1.0 and "BabyAI bot" in t.high.source
        elif t.domain == "atari100k":
            assert t.id.startswith("atari/") and "rliable" in t.low.source
        else:  # classic, dmc, procgen: v1's tables as they were
            v1t = v1.task(t.id)
            assert (t.low, t.high, t.options, t.seeds) == (v1t.low, v1t.high, v1t.options, v1t.seeds)
