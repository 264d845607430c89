"""What a researcher gets in the environment they already have: numpy 1 or 2, any Gymnasium 1.x.

These run in both legs of .ci/run: the main one (the suites' pinned versions) and the second one
(numpy 2 and the newest Gymnasium 1.x that installs here), where polar_bench is installed with the
extras whose packages support numpy 2 (dmc, mujoco, babyai, plot)."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from polar_bench._optional import version_of
from polar_bench.cli import main
from polar_bench.results import read_results

ROOT = Path(__file__).resolve().parents[1]
RANDOM = str(ROOT / "examples" / "random_agent.py")

SUITE = """
[suite]
name = "installed"
version = "0.0.1"
description = "Classic control, pinned to whatever is installed."
seed = 11
runs = 1
episodes = 2

[pins]
numpy = "{numpy}"
gymnasium = "{gymnasium}"

[[domains]]
name = "classic"
description = "Gymnasium classic control."
training = "anything"
budget = "none"

[[tasks]]
id = "gym/CartPole-v1"
domain = "classic"
low = {{ value = 22.0, source = "test", measured = false }}
high = {{ value = 500.0, source = "test", measured = false }}

[[tasks]]
id = "gym/Pendulum-v1"
domain = "classic"
low = {{ value = -1200.0, source = "test", measured = false }}
high = {{ value = -150.0, source = "test", measured = false }}
"""


def _suite(tmp_path: Path, numpy: str | None = None) -> str:
    path = tmp_path / "installed.toml"
    path.write_text(SUITE.format(numpy=numpy or version_of("numpy"), gymnasium=version_of("gymnasium")))
    return str(path)


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    _, err = capsys.readouterr()
    return code, err


def test_the_installed_versions_are_in_the_supported_ranges():
    assert 1 <= int(gymnasium.__version__.split(".")[0]) < 2
    assert (1, 24) <= tuple(int(x) for x in np.__version__.split(".")[:2]) < (3, 0)


def test_evaluate_and_score_classic_control_under_the_installed_versions(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, err = _run(["evaluate", RANDOM, "--suite", _suite(tmp_path), "--out", str(out), "--workers", "1",
                      "--no-progress"], capsys)
    assert code == 0, err
    data = read_results(out).to_json()
    assert [e["status"] for e in data["episodes"]] == ["ok"] * 4
    assert data["comparable"] is True
    assert data["versions"]["numpy"] == np.__version__
    code, err = _run(["score", str(out), "--json"], capsys)
    assert code == 0, err


def test_a_pin_mismatch_names_both_versions_and_the_command_that_fixes_it(tmp_path, capsys):
    suite = _suite(tmp_path, numpy="1.0.0")
    out = tmp_path / "r.json"
    code, err = _run(["evaluate", RANDOM, "--suite", suite, "--out", str(out), "--workers", "1", "--no-progress"],
                     capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"numpy {np.__version__} (suite pins 1.0.0)" in err
    assert 'pip install "numpy==1.0.0"' in err and "--allow-version-mismatch" in err
    assert not out.exists()
    code, err = _run(["evaluate", RANDOM, "--suite", suite, "--out", str(out), "--workers", "1", "--no-progress",
                      "--allow-version-mismatch"], capsys)
    assert code == 0, err
    data = read_results(out).to_json()
    assert data["comparable"] is False
    assert data["version_mismatches"] == {"numpy": {"pinned": "1.0.0", "installed": np.__version__}}


@pytest.mark.parametrize("command", [["compare"], ["report", "--format", "markdown"]])
def test_the_committed_baseline_results_compare_and_report_here(command, tmp_path, capsys):
    """Scoring needs no environment package: a numpy 2 user compares and reports published files."""
    argv = command + [str(ROOT / "baselines" / "random" / "results-v1.json"),
                      str(ROOT / "baselines" / "codegen" / "results" / "codegen-v1.json")]
    if command[0] == "report":
        argv += ["--out", str(tmp_path / "report"), "--no-plots", "--reps", "500", "--poi-reps", "200",
                 "--profile-reps", "100"]
    code, err = _run(argv, capsys)
    assert code == 0, err


def test_scoring_the_random_v1_entry_gives_the_same_numbers_on_any_numpy(capsys):
    """The bootstrap draws from numpy's PCG64 Generator, whose streams numpy keeps across versions: the
    random v1 entry's scores, intervals included, are the same to the last digit on numpy 1.26 and 2.x
    (the golden file was written on numpy 1.26.4)."""
    code = main(["score", str(ROOT / "baselines" / "random" / "results-v1.json"), "--json", "--reps", "2000"])
    out, _ = capsys.readouterr()
    assert code == 0
    got, golden = json.loads(out), json.loads((ROOT / "tests" / "golden" / "score_random_v1.json").read_text())
    assert Path(got.pop("path")).resolve() == Path(ROOT / golden.pop("path")).resolve()
    assert got == golden
