"""Reproduce the rliable paper's Atari 100k analysis from its per-run scores (polar_bench/data/atari100k,
see its README for provenance), and guard the table that `report` renders from them."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from polar_bench import scoring
from polar_bench.cli import main

DATA = Path(__file__).parent.parent / "polar_bench" / "data" / "atari100k"
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("POLAR_BENCH_UPDATE_GOLDEN") == "1"

# Agarwal et al. (2021), Figure A.17 / the rliable colab: IQM of human-normalized scores.
PAPER_IQM = {"SPR": 0.337, "DrQ(ε)": 0.280, "DrQ": 0.224, "DER": 0.183, "OTRainbow": 0.117,
             "CURL": 0.113, "SimPLe": 0.130}
FILES = {"SPR": "SPR", "DrQ(ε)": "DrQ_eps", "DrQ": "DrQ", "DER": "DER", "OTRainbow": "OTRainbow",
         "SimPLe": "SimPLe"}


def _load(name: str):
    return json.loads((DATA / f"{name}.json").read_text())


def references() -> tuple[list[str], dict[str, float], dict[str, float]]:
    human, rand = _load("HUMAN"), _load("RANDOM")
    games = sorted(human)
    return games, {g: rand[g][0] for g in games}, {g: human[g][0] for g in games}


def raw_scores() -> dict[str, np.ndarray]:
    """Raw scores, ``(runs, games)`` per algorithm, games in alphabetical order. CURL's file holds
    human-normalized scores; they are mapped back to raw scores with the same references."""
    games, low, high = references()
    out = {}
    for label, name in FILES.items():
        data = _load(name)
        out[label] = np.array([data[g] for g in games], dtype=float).T
    by_game: defaultdict[str, dict[int, float]] = defaultdict(dict)
    for rec in _load("CURL_10_evals"):
        by_game[rec["game"]][rec["seed"]] = rec["HNS"]
    curl = np.array([[by_game[g][s] for s in sorted(by_game[g])] for g in games]).T
    out["CURL"] = curl * np.array([high[g] - low[g] for g in games]) + np.array([low[g] for g in games])
    return {k: out[k] for k in PAPER_IQM}


def normalized_scores() -> dict[str, np.ndarray]:
    """Human-normalized scores ``(runs, 26)``: (score - random) / (human - random); CURL's as published."""
    games, low, high = references()
    lo = np.array([low[g] for g in games])
    hi = np.array([high[g] for g in games])
    out = {}
    for label, name in FILES.items():
        data = _load(name)
        out[label] = (np.array([data[g] for g in games], dtype=float).T - lo) / (hi - lo)
    by_game: defaultdict[str, dict[int, float]] = defaultdict(dict)
    for rec in _load("CURL_10_evals"):
        by_game[rec["game"]][rec["seed"]] = rec["HNS"]
    out["CURL"] = np.array([[by_game[g][s] for s in sorted(by_game[g])] for g in games]).T
    return {k: out[k] for k in PAPER_IQM}


def test_data_shapes():
    scores = normalized_scores()
    assert {k: v.shape for k, v in scores.items()} == {
        "SPR": (100, 26), "DrQ(ε)": (100, 26), "DrQ": (100, 26), "DER": (100, 26),
        "OTRainbow": (100, 26), "CURL": (100, 26), "SimPLe": (5, 26)}


def test_point_estimates_reproduce_the_paper():
    scores = normalized_scores()
    assert {k: round(scoring.iqm(v), 3) for k, v in scores.items()} == PAPER_IQM
    assert round(scoring.median(scores["SPR"]), 3) == 0.396
    assert round(scoring.mean(scores["SPR"]), 3) == 0.616
    rliable = pytest.importorskip("rliable.metrics")
    for v in scores.values():  # and exactly rliable's numbers
        assert scoring.iqm(v) == rliable.aggregate_iqm(v)
        assert scoring.median(v) == rliable.aggregate_median(v)
        assert scoring.mean(v) == rliable.aggregate_mean(v)
        assert scoring.optimality_gap(v) == rliable.aggregate_optimality_gap(v)


def test_intervals_are_sane_and_reproducible():
    scores = normalized_scores()
    metrics = ["iqm", "median", "mean", "optimality_gap"]
    est = scoring.interval_estimates(scores, metrics, reps=2000, seed=0)
    for k, points in est.points.items():
        low, high = est.intervals[k]
        assert np.all(low <= points) and np.all(points <= high), k
        assert np.all(high - low < 0.5), k
    # SPR beats OTRainbow on IQM with non-overlapping intervals, as in the paper
    assert est.intervals["SPR"][0, 0] > est.intervals["OTRainbow"][1, 0]
    again = scoring.interval_estimates({"SPR": scores["SPR"]}, metrics, reps=2000, seed=0)
    np.testing.assert_array_equal(again.intervals["SPR"], est.intervals["SPR"])


def atari_results(label: str, raw: np.ndarray) -> dict:
    """The per-run scores as a polar_bench results file: one domain, one episode per run and game."""
    games, low, high = references()
    tasks = [{"id": f"atari/{g}", "domain": "atari", "low": low[g], "high": high[g], "episodes": 1,
              "seeds": [0]} for g in games]
    episodes = [{"task": f"atari/{g}", "run": r, "index": 0, "seed": 0, "return": float(raw[r, j]),
                 "length": 0, "status": "ok"} for r in range(raw.shape[0]) for j, g in enumerate(games)]
    return {
        "format_version": 1,
        "polar_bench": {"version": "0.1.0", "git_commit": None, "git_dirty": None},
        "suite": {"name": "atari100k", "version": "rliable-2021", "hash": "sha256:" + "0" * 64, "seed": 0,
                  "pins": {}, "tasks": tasks},
        "agent": {"path": f"{label}.py", "sha256": "0" * 64, "name": label,
                  "info": {"name": label, "training_steps": 100_000}},
        "config": {"runs": raw.shape[0], "episodes_override": None, "tasks": [t["id"] for t in tasks]},
        "environment": {}, "command": "tests/test_atari100k.py", "started": "", "finished": "",
        "comparable": True, "standard": True, "episodes": episodes,
    }


def test_report_renders_the_paper_table(tmp_path, capsys):
    paths = []
    for i, (label, raw) in enumerate(raw_scores().items()):
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(atari_results(label, raw)))
        paths.append(str(path))
    out = tmp_path / "report"
    code = main(["report", *paths, "--out", str(out), "--no-plots", "--reps", "2000", "--poi-reps", "100",
                 "--seed", "0"])
    _, err = capsys.readouterr()
    assert code == 0, err
    md = (out / "tables" / "aggregates.md").read_text()
    for label, value in PAPER_IQM.items():
        assert f"| {label} " in md and f"{value:.3f}" in md
    assert "**0.337**" in md  # SPR is the best IQM
    for ext in ("md", "tex", "csv"):
        rendered = (out / "tables" / f"aggregates.{ext}").read_bytes()
        golden = GOLDEN / f"atari100k_aggregates.{ext}"
        if UPDATE:
            golden.write_bytes(rendered)
        assert golden.is_file(), f"missing {golden}; run with POLAR_BENCH_UPDATE_GOLDEN=1"
        assert rendered == golden.read_bytes(), f"aggregates.{ext} differs from {golden}"


def test_reproduce_command_checks_the_published_values(tmp_path, capsys):
    from polar_bench.published import ATARI100K

    assert {k: v["iqm"] for k, v in ATARI100K.published.items()} == PAPER_IQM
    for label, matrix in ATARI100K.normalized_scores().items():  # the package's copy, read its own way
        np.testing.assert_array_equal(matrix, normalized_scores()[label])
    code = main(["reproduce", "atari100k", "--reps", "200", "--out", str(tmp_path)])
    out, _ = capsys.readouterr()
    assert code == 0 and "reproduced: all 9 published values" in out
    assert "SPR        100   IQM             0.337 [" in out and out.count(" yes") == 9
    assert (tmp_path / "atari100k_aggregates.png").stat().st_size > 10_000


def test_reproduce_refuses_an_unknown_table_and_reports_a_mismatch(capsys, monkeypatch):
    code = main(["reproduce", "atari200k"])
    assert code == 2 and "no published table 'atari200k'; choose from atari100k" in capsys.readouterr().err
    from polar_bench import published

    wrong = published.PublishedTable(**{**published.ATARI100K.__dict__,
                                        "published": {**published.ATARI100K.published, "DER": {"iqm": 0.190}}})
    monkeypatch.setitem(published.TABLES, "atari100k", wrong)
    code = main(["reproduce", "atari100k", "--reps", "50"])
    out = capsys.readouterr().out
    assert code == 1 and "NOT REPRODUCED: 1 of 9 published values differ: DER iqm: 0.183 vs published 0.19" in out
