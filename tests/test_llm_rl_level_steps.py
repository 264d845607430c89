"""baselines/llm_rl/level_steps.py: per-level training steps rebuilt from a run's rollouts (no torch)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from baselines.llm_rl import level_steps

LEVELS = ["babyai/GoToRedBall", "babyai/Synth"]
# (task, length) of each iteration's training episodes
ROLLOUTS = [[("babyai/GoToRedBall", 40), ("babyai/GoToRedBall", 64), ("babyai/Synth", 128)],
            [("babyai/Synth", 90), ("babyai/Synth", 128)]]


def _run(tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "run"
    for it, eps in enumerate(ROLLOUTS):
        folder = run / "rollouts" / f"iter{it:03d}"
        folder.mkdir(parents=True)
        episodes = [{"task": t, "run": 0, "index": i, "length": n, "return": 0.0} for i, (t, n) in enumerate(eps)]
        (folder / "results.json").write_text(json.dumps({"episodes": episodes}))
    per_level = [f"{k}:{lv}" for lv in LEVELS for k in ("episodes", "success_rate")]
    fields = ["iteration", "episodes", "env_steps", *per_level]
    rows = [{"iteration": it, "episodes": len(eps), "env_steps": sum(n for _, n in eps),
             **{f"episodes:{lv}": sum(t == lv for t, _ in eps) for lv in LEVELS},
             **{f"success_rate:{lv}": 0.0 for lv in LEVELS}} for it, eps in enumerate(ROLLOUTS)]
    out = tmp_path / "seed0.csv"
    _write(out, fields, rows)
    return run, out


def _write(path: Path, fields: list[str], rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        r = csv.DictReader(f)
        return list(r.fieldnames or []), list(r)


def test_rebuilds_the_columns_in_train_py_order_and_checks_them(tmp_path, capsys):
    run, path = _run(tmp_path)
    assert level_steps.main([str(run), str(path), "--check"]) == 1  # no columns yet
    assert level_steps.main([str(run), str(path)]) == 0
    fields, rows = _read(path)
    assert fields[-3:] == ["episodes:babyai/Synth", "success_rate:babyai/Synth", "env_steps:babyai/Synth"]
    assert fields.index("env_steps:babyai/GoToRedBall") == fields.index("success_rate:babyai/GoToRedBall") + 1
    assert [(r["env_steps:babyai/GoToRedBall"], r["env_steps:babyai/Synth"]) for r in rows] == [("104", "128"),
                                                                                              ("0", "218")]
    assert level_steps.main([str(run), str(path), "--check"]) == 0
    assert "GoToRedBall 104, Synth 346" in capsys.readouterr().out
    rows[1]["env_steps:babyai/Synth"] = "217"  # a hand-edited cell is found
    _write(path, fields, rows)
    assert level_steps.main([str(run), str(path), "--check"]) == 1
    assert "iteration 1: env_steps:babyai/Synth differs" in capsys.readouterr().err


def test_refuses_a_csv_of_another_run(tmp_path):
    run, path = _run(tmp_path)
    fields, rows = _read(path)
    rows[0]["env_steps"] = "233"  # the rollout's episodes have 232 steps
    _write(path, fields, rows)
    with pytest.raises(SystemExit, match="232 steps.*not this run's CSV"):
        level_steps.main([str(run), str(path)])
    _, rows = _read(path)
    assert "env_steps:babyai/Synth" not in rows[0]  # nothing written
    (run / "rollouts" / "iter001" / "results.json").unlink()
    rows[0]["env_steps"] = "232"
    _write(path, fields, rows)
    with pytest.raises(SystemExit, match="iter001.*cannot read"):
        level_steps.main([str(run), str(path)])
