"""The Atari 100k preview: PPO's end-of-training evaluations beside the published agents."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from baselines.ppo.atari100k_preview import main, ppo_matrix, report
from polar_bench.errors import UserError

SIDECARS = Path(__file__).resolve().parents[1] / "baselines" / "ppo" / "checkpoints" / "atari"


def test_committed_sidecars_normalize_by_the_human_and_random_scores():
    scores, runs = ppo_matrix(SIDECARS)
    assert runs == [0, 1] and scores.shape == (2, 26)  # run 2 exists for 14 games only: left out
    alien = json.loads((SIDECARS / "Alien" / "run1.json").read_text())["eval_return_mean"]
    assert scores[1, 0] == pytest.approx((alien - 227.8) / (7127.7 - 227.8))  # Alien: first, alphabetically
    assert np.isfinite(scores).all()


def test_the_table_puts_ppo_beside_the_published_aggregates():
    text = report(SIDECARS, reps=200, seed=0)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["SPR"].split(" | ")[2].startswith("0.337 ")  # rliable's published IQM
    assert rows["DER"].split(" | ")[2].startswith("0.183 ")
    assert rows["PPO 100k (training-time evaluation, runs 0-1)"].split(" | ")[1] == "2"


def test_a_sidecar_that_is_not_final_or_over_budget_is_refused(tmp_path, capsys):
    folder = tmp_path / "atari"
    shutil.copytree(SIDECARS, folder, ignore=shutil.ignore_patterns("*.pt"))
    side = folder / "Pong" / "run0.json"
    data = json.loads(side.read_text())
    side.write_text(json.dumps(dict(data, env_steps=400_000)))
    with pytest.raises(UserError, match="Pong/run0.json: not a finished run within 100,000 steps"):
        ppo_matrix(folder)
    side.write_text(json.dumps(dict(data, final=False)))
    assert main(["--checkpoints", str(folder), "--reps", "100"]) == 2
    assert "retrain it or remove the sidecar" in capsys.readouterr().err
    shutil.rmtree(folder / "Pong")
    with pytest.raises(UserError, match="missing Pong"):
        ppo_matrix(folder)
