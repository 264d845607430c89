"""The third-party path end to end: examples/plugin_family installed by pip, found through the
``polar_bench.harnesses`` entry point group, passing its own conformance test, and evaluated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples" / "plugin_family"

SUITE = """
[suite]
name = "toytext-demo"
version = "0.1.0"
seed = 5
runs = 2
episodes = 3

[[domains]]
name = "toytext"
description = "Gymnasium toy-text games through the polar-bench-toytext plugin."
training = "any seeds"
budget = "none"

[[tasks]]
id = "toytext/FrozenLake"
domain = "toytext"
low = { value = 0.0, source = "no success", measured = false }
high = { value = 1.0, source = "success in every episode", measured = false }

[[tasks]]
id = "toytext/Taxi"
domain = "toytext"
low = { value = -200.0, source = "200 steps without a delivery", measured = false }
high = { value = 8.0, source = "a short delivery", measured = false }
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    # Installed the way a user installs a plugin (no network here: no dependencies, no build isolation).
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(PLUGIN)], check=True, capture_output=True, cwd=target)
    return target


def _env(site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_installed_plugin_is_listed_built_and_conforms(site, tmp_path):
    code = ("import polar_bench\nprint(polar_bench.harness.task_names('toytext'))\n"
            "h = polar_bench.make('toytext/Taxi', text=True)\n_, info = h.reset(seed=1)\n"
            "print(h.task_info.id, h.task_info.action_components[4].name, h.task_info.has_text)\n"
            "print(info['text'].splitlines()[0])\n")
    done = subprocess.run([sys.executable, "-c", code], env=_env(site), capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['FrozenLake', 'Taxi', 'CliffWalking']"
    assert lines[1] == "toytext/Taxi pick up True" and lines[2] == "+---------+"
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(PLUGIN / "tests")],
                           env=_env(site), capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "passed" in tests.stdout and "failed" not in tests.stdout


def test_an_agent_is_evaluated_on_the_plugin_family(site, tmp_path):
    suite = tmp_path / "toytext.toml"
    suite.write_text(SUITE)
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "polar_bench", "evaluate", str(ROOT / "examples" / "random_agent.py"),
                           "--suite", str(suite), "--out", str(out), "--workers", "1", "--no-progress"],
                          env=_env(site), capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(out.read_text())
    episodes = data["episodes"]
    assert len(episodes) == 2 * 2 * 3 and {e["status"] for e in episodes} == {"ok"}
    assert {e["task"] for e in episodes} == {"toytext/FrozenLake", "toytext/Taxi"}
    assert all(e["return"] <= 1.0 for e in episodes if e["task"] == "toytext/FrozenLake")
