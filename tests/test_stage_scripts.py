"""The staging scripts that spread long experiments over sessions call what they say, in order, resumably
(run with a stand-in python that records its arguments)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _stage(tmp_path: Path, *steps: str, **extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "calls.log"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "RUNS": str(tmp_path / "runs"), "OUT": str(tmp_path / "out"),
           "BASE_OUT": str(tmp_path / "base" / "base.json"), "BASE_POINT": str(tmp_path / "base-point"), **extra}
    proc = subprocess.run(["bash", str(ROOT / "baselines" / "llm_rl" / "stage_babyai5.sh"), *steps], env=env,
                          capture_output=True, text=True, timeout=120)
    return proc, log.read_text().splitlines() if log.exists() else []


def _trained(runs: Path, name: str, seeds) -> None:
    """Checkpoints where the stand-in's training would have left them."""
    for r in seeds:
        (runs / f"{name}-seed{r}").mkdir(parents=True, exist_ok=True)
        (runs / f"{name}-seed{r}" / "checkpoint.pt").write_bytes(b"weights")


def test_the_babyai5_stage_trains_every_seed_resumably_then_evaluates_and_compares(tmp_path):
    runs = tmp_path / "runs"
    (runs / "babyai5-seed0").mkdir(parents=True)   # seed 0 has its base-model point to share
    _trained(runs, "babyai5", range(5))
    _trained(runs, "babyai5-uniform", range(3))
    proc, calls = _stage(tmp_path)
    assert proc.returncode == 0, proc.stderr
    train = [c for c in calls if c.startswith("-m baselines.llm_rl.train")]
    plan = [(c.split("--config ")[1].split()[0].rsplit("/", 1)[1], c.split("--seed ")[1].split()[0]) for c in train]
    assert plan == [("babyai5.yaml", str(r)) for r in range(5)] + [("babyai5-uniform.yaml", str(r)) for r in range(3)]
    assert all("--resume" in c and f"--out-dir {runs}/babyai5" in c for c in train)
    reuse = [f"--reuse-validation {runs}/babyai5-seed0" in c for c in train]
    assert reuse == [False, True, True, True, True, True, True, True]   # every run but seed 0's own
    evals = [c for c in calls if c.startswith("-m baselines.llm_rl.evaluate")]
    assert len(evals) == 3 and "--weights" not in evals[0] and "--runs 5" in evals[0]
    assert all("--suite v1 --domains babyai" in c and "--dtype bfloat16" in c for c in evals)
    assert evals[1].split("--weights ")[1].split()[:5] == [f"{runs}/babyai5-seed{r}/checkpoint.pt" for r in range(5)]
    assert "--runs 5" in evals[1]
    outs = [c.split("--out ")[1].split()[0] for c in evals]
    assert outs == [f"{tmp_path}/base/base.json", f"{tmp_path}/out/trained.json", f"{tmp_path}/out/uniform.json"]
    uniform = evals[2].split("--weights ")[1].split()[:3]
    assert uniform == [f"{runs}/babyai5-uniform-seed{r}/checkpoint.pt" for r in range(3)]
    assert "--runs 3" in evals[2]
    compares = [c for c in calls if c.startswith("-m polar_bench compare")]
    assert compares == [f"-m polar_bench compare {tmp_path}/base/base.json {tmp_path}/out/trained.json",
                        f"-m polar_bench compare {tmp_path}/out/uniform.json {tmp_path}/out/trained.json"]
    assert (tmp_path / "out" / "compare.txt").exists()


def test_the_probe_step_plays_the_held_out_levels_for_base_and_both_arms_then_compares(tmp_path):
    _trained(tmp_path / "runs", "babyai5-group", range(5))
    _trained(tmp_path / "runs", "babyai5-group-uniform", range(3))
    proc, calls = _stage(tmp_path, "probe", EXPERIMENT="babyai5-group", PROBE_BASE=str(tmp_path / "p" / "base.json"))
    assert proc.returncode == 0, proc.stderr
    evals = [c for c in calls if c.startswith("-m baselines.llm_rl.evaluate")]
    assert all("--suite baselines/llm_rl/experiments/probe-learnable.toml --runs" in c for c in evals)
    assert not any("--domains" in c or "--suite v1" in c for c in evals)
    outs = [(c.split("--out ")[1].split()[0], c.split("--runs ")[1].split()[0]) for c in evals]
    assert outs == [(f"{tmp_path}/p/base.json", "5"), (f"{tmp_path}/out/probe-trained.json", "5"),
                    (f"{tmp_path}/out/probe-uniform.json", "3")]
    assert "--weights" not in evals[0]
    assert evals[1].split("--weights ")[1].split()[:5] == \
        [f"{tmp_path}/runs/babyai5-group-seed{r}/checkpoint.pt" for r in range(5)]
    assert evals[2].split("--weights ")[1].split()[:3] == \
        [f"{tmp_path}/runs/babyai5-group-uniform-seed{r}/checkpoint.pt" for r in range(3)]
    compares = [c for c in calls if c.startswith("-m polar_bench compare")]
    assert compares == [f"-m polar_bench compare {tmp_path}/p/base.json {tmp_path}/out/probe-trained.json",
                        f"-m polar_bench compare {tmp_path}/out/probe-uniform.json {tmp_path}/out/probe-trained.json"]
    assert (tmp_path / "out" / "probe-compare.txt").exists()
    # and the other steps still evaluate on suite v1, whatever the caller's environment holds
    (tmp_path / "d").mkdir()
    _, default = _stage(tmp_path / "d", "base", SUITE="v2")
    assert len(default) == 1 and "--suite v1 --domains babyai --runs 5" in default[0]


def test_an_unknown_stage_step_is_refused_before_anything_runs(tmp_path):
    proc, calls = _stage(tmp_path, "base", "evaluat")
    assert proc.returncode == 2 and "unknown step evaluat" in proc.stderr and calls == []


def test_another_design_stages_its_own_yaml_and_uniform_twin_against_the_same_base(tmp_path):
    _trained(tmp_path / "runs", "babyai5-step", [4])
    proc, calls = _stage(tmp_path, "train", "trained", EXPERIMENT="babyai5-step")
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "runs" / "babyai5-seed0").mkdir()   # the first design's seed 0 lends its base point
    proc, again = _stage(tmp_path, "train", EXPERIMENT="babyai5-step")
    again = again[len(calls):]   # the stand-in's log holds both stagings
    assert len(again) == 8 and all(f"--reuse-validation {tmp_path}/runs/babyai5-seed0" in c for c in again)
    assert proc.returncode == 0, proc.stderr
    configs = [c.split("--config ")[1].split()[0].rsplit("/", 1)[1] for c in calls if "llm_rl.train" in c]
    assert configs == ["babyai5-step.yaml"] * 5 + ["babyai5-step-uniform.yaml"] * 3
    assert "--reuse-validation" not in calls[0]   # no design's seed 0 folder exists here
    (trained,) = [c for c in calls if "llm_rl.evaluate" in c]
    # seeds 0-3 have no checkpoint here (gone with an earlier session): their runs must be in the results already
    assert trained.split("--weights ")[1].split()[:5] == ["journaled"] * 4 + \
        [f"{tmp_path}/runs/babyai5-step-seed4/checkpoint.pt"]
    (tmp_path / "x").mkdir()
    proc, calls = _stage(tmp_path / "x", EXPERIMENT="babyai5-nothing")
    assert proc.returncode == 2 and "babyai5-nothing.yaml" in proc.stderr and calls == []


def test_a_session_trains_one_seed_on_its_cores_and_plays_it_as_its_run_keeping_its_curves(tmp_path):
    runs, curves = tmp_path / "runs", tmp_path / "curves"
    _trained(runs, "babyai5-group", [1])   # seed 0's folder went with its session; seed 1 trains now
    for f, text in (("metrics.csv", "iteration\n0\n"), ("validation.csv", "iteration\n0\n"), ("config.json", "{}")):
        (runs / "babyai5-group-seed1" / f).write_text(text)
    proc, calls = _stage(tmp_path, "seed:1", EXPERIMENT="babyai5-group", CORES="2", CURVES=str(curves))
    assert proc.returncode == 0, proc.stderr
    train, evaluate = calls
    assert "--seed 1 " in train and "--cores 2" in train and train.split("--config ")[1].startswith(
        "baselines/llm_rl/experiments/babyai5-group.yaml")
    assert evaluate.split("--weights ")[1].split()[:2] == ["journaled", f"{runs}/babyai5-group-seed1/checkpoint.pt"]
    assert "--replicas 2" in evaluate and "--runs 2 --workers 2" in evaluate
    assert "--reuse-validation" not in train   # no seed 0 folder and no committed base point here
    assert f"--out {tmp_path}/out/trained.json" in evaluate
    assert sorted(p.name for p in curves.iterdir()) == [
        "babyai5-group-seed1.config.json", "babyai5-group-seed1.csv", "babyai5-group-seed1.validation.csv"]
    (tmp_path / "base-point").mkdir()   # the committed base point is offered to every seed
    proc, calls = _stage(tmp_path, "uniform:0", EXPERIMENT="babyai5-group", CURVES=str(curves))
    assert f"--reuse-validation {tmp_path}/base-point" in calls[-2]
    assert proc.returncode != 0   # the stand-in trained nothing: no metrics.csv to keep is an error, not a skip
    assert f"--out {tmp_path}/out/uniform.json" in calls[-1] and "--weights journaled" in calls[-1]
    proc, calls = _stage(tmp_path, "seed:5")
    assert proc.returncode == 2 and "unknown step seed:5" in proc.stderr


def test_the_v2_step_pins_the_sessions_seed_as_its_run_and_plays_that_run_of_the_whole_suite_v2(tmp_path):
    runs = tmp_path / "runs"
    _trained(runs, "babyai5-group", [2])   # seeds 0 and 1 went with their sessions; their v2 runs are journaled
    manifest = tmp_path / "entry" / "agent_v2.artifacts.json"
    proc, calls = _stage(tmp_path, "v2:2", EXPERIMENT="babyai5-group", CORES="2", V2_MANIFEST=str(manifest),
                         V2_OUT=str(tmp_path / "v2.json"))
    assert proc.returncode == 0, proc.stderr
    pin, evaluate = calls
    assert pin.split() == ["-m", "baselines.llm_rl.pin", f"{runs}/babyai5-group-seed2/checkpoint.pt", "--name",
                           "babyai5-group", "--first-run", "2", "--manifest", str(manifest)]
    assert evaluate.split("--weights ")[1].split()[:3] == [
        "journaled", "journaled", f"{tmp_path}/entry/checkpoints/babyai5-group-run2.pt"]
    assert "--agent baselines/llm_rl/agent_v2.py" in evaluate and f"--out {tmp_path}/v2.json" in evaluate
    assert evaluate.endswith("-- --suite v2 --runs 3 --workers 2") and "--replicas 2" in evaluate
    proc, again = _stage(tmp_path, "v2:3", EXPERIMENT="babyai5-group")   # no seed 3 trained here: nothing runs
    assert proc.returncode == 2 and "train seed 3 in this session first" in proc.stderr and again == calls
