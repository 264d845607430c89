"""Synthetic, valid submissions of suite v1 for the leaderboard tests (and tests of that generator).

`synthetic_results` writes what ``evaluate`` would for an agent of a given skill: every task × run ×
seed of the released suite v1, returns drawn from a seeded generator around ``skill`` (a normalized
score), pins, AGENT_INFO complete. Every episode is one the task can produce (the ``bounds`` check):
it lasts the task's step limit and its return is clipped to what that many steps can pay. The other
leaderboard test modules import these helpers.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path

import numpy as np

import polar_bench
from polar_bench.leaderboard import check_data, content_id, submit
from polar_bench.suite import SUITES_DIR, load_suite

XSS_NAME = "<script>alert(1)</script>"
XSS_INFO = {
    "name": XSS_NAME,
    "authors": ['<img src=x onerror="window.__pwned=1;document.title=\'pwned\'">', "A & B"],
    "url": "https://example.org/agent?x=1&y=2",
    "license": "MIT</td><script>window.__pwned=1</script>",
    "description": '"><script>window.__pwned=1;document.title="pwned"</script><b>bold</b>',
}


@cache
def suite_v1():
    return load_suite(SUITES_DIR / "v1.toml")


@cache
def _length_and_bounds(task_id: str) -> tuple[int, tuple[float, float]]:
    """A task's step limit and the least and greatest return of an episode that long."""
    spec = next(t for t in suite_v1().tasks if t.id == task_id)
    harness = polar_bench.make(task_id, **dict(spec.options))
    harness.close()
    length = harness.task_info.max_episode_steps
    return length, harness.return_bounds(length)


def synthetic_results(name: str, skill: float, *, seed: int = 0, runs: int = 3, info: dict | None = None,
                      llm: bool = False, run_sd: float = 0.05, episode_sd: float = 0.1) -> dict:
    """A complete, valid results dict of suite v1 whose normalized scores are about ``skill``."""
    suite = suite_v1()
    rng = np.random.default_rng(seed)
    domains = [d.name for d in suite.domains]
    episodes = []
    for t in suite.tasks:
        length, (least, most) = _length_and_bounds(t.id)
        offsets = rng.normal(0.0, run_sd, size=runs)
        for r in range(runs):
            scores = skill + offsets[r] + rng.normal(0.0, episode_sd, size=len(t.seeds))
            for i, s in enumerate(t.seeds):
                ret = min(max(round(float(t.low.value + (t.high.value - t.low.value) * scores[i]), 6), least), most)
                ep = {"task": t.id, "run": r, "index": i, "seed": s, "return": ret, "length": length,
                      "status": "ok", "error": None, "wall_seconds": 0.01, "agent_seconds": 0.005}
                if llm:
                    ep["llm"] = {"calls": 10, "prompt_tokens": 1200 + i, "completion_tokens": 40, "seconds": 2.5}
                episodes.append(ep)
    agent_info = {"name": name, "authors": ["Test Author"], "url": f"https://example.org/{name}",
                  "training_steps": {d: 1_000_000 for d in domains},
                  "llm": {"model": "tiny-llm", "provider": "llama.cpp"} if llm else None, "license": "MIT"}
    agent_info.update(info or {})
    return {
        "format_version": 1,
        "polar_bench": {"version": "0.1.0", "git_commit": "0" * 40, "git_dirty": False},
        "suite": suite.summary_json(),
        "versions": {**dict(suite.pins), "polar_bench": "0.1.0"},
        "version_mismatches": {},
        "comparable": True,
        "standard": True,
        "environment": {"python": "3.11.7", "os": "Linux", "cpu": "test", "cpu_count": 2},
        "agent": {"path": f"agents/{seed}.py", "sha256": f"{seed:064x}", "name": str(agent_info["name"]),
                  "info": agent_info},
        "config": {"runs": runs, "episodes_override": None, "tasks": suite.task_ids, "workers": 2,
                   "step_timeout": 60.0, "episode_timeout": 1800.0, "backend": "local"},
        "command": "python -m polar_bench evaluate agent.py --suite v1",
        "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T01:00:00+00:00",
        "episodes": episodes,
    }


@cache
def _cached(name: str, skill: float, seed: int, llm: bool) -> str:
    return json.dumps(synthetic_results(name, skill, seed=seed, llm=llm))


def valid_results(name: str = "good", skill: float = 0.5, seed: int = 1, llm: bool = False) -> dict:
    """A fresh (deep) copy of a cached synthetic file."""
    return json.loads(_cached(name, skill, seed, llm))


def write_json(path: Path, data: dict, **kwargs) -> str:
    path.write_text(json.dumps(data, **kwargs))
    return str(path)


# Entries of the fixture leaderboard: (name or AGENT_INFO update, skill, seed, llm, date).
FIXTURE_ENTRIES = [
    ("strong", 0.60, 11, False, "2026-01-10"),
    ("close-second", 0.59, 12, True, "2026-01-11"),
    ("xss", 0.30, 13, False, "2026-01-12"),
    ("weak", 0.10, 14, False, "2026-01-13"),
]


def make_leaderboard(folder: Path) -> Path:
    """A leaderboard folder with the four `FIXTURE_ENTRIES` (one of them named `XSS_NAME`)."""
    src = folder / "submissions"
    src.mkdir(parents=True)
    for name, skill, seed, llm, date in FIXTURE_ENTRIES:
        data = synthetic_results(name, skill, seed=seed, llm=llm, info=XSS_INFO if name == "xss" else None)
        submit(write_json(src / f"{name}.json", data), folder / "board", date=date)
    return folder / "board"


# ---------------------------------------------------------------------------------------------------


def test_synthetic_results_pass_every_check():
    assert check_data(valid_results()) == []
    assert check_data(valid_results("llm", llm=True)) == []
    xss = synthetic_results("xss", 0.3, seed=13, info=XSS_INFO)
    assert check_data(xss) == []


def test_content_id_ignores_formatting_but_not_content():
    data = valid_results()
    same = json.loads(json.dumps(data, indent=4))
    assert content_id(data) == content_id(same)
    other = copy.deepcopy(data)
    other["episodes"][0]["return"] += 1.0
    assert content_id(other) != content_id(data)


def add_verification(board: Path, name: str, passed: bool) -> None:
    """Record a (synthetic) verification outcome on the entry of agent ``name``."""
    from polar_bench.leaderboard import load_entries
    from polar_bench.leaderboard.entries import record_verification

    entry = next(e for e in load_entries(board) if e.name == name)
    record_verification(entry, {"date": "2026-02-01T00:00:00+00:00", "passed": passed, "sample": 10,
                                "population": 1770, "seed": 0, "mode": "exact", "tolerance": 0.0,
                                "matched": 10 if passed else 7, "mismatched": 0 if passed else 3,
                                "episodes": []})
