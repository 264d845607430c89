"""Verification: re-run a random sample of a submission's episodes and compare the returns.

The sample is drawn with ``numpy.random.default_rng(seed)`` from the file's episodes (optionally only
those of tasks matching ``--tasks`` globs) and re-run with `polar_bench.evaluate.run_evaluation`, the
very machinery of ``evaluate`` (worker processes, timeouts, pins checked) restricted to the sampled
(task, run, episode) units. The agent file must be the one evaluated (same SHA-256).

Comparison: a deterministic agent (``AGENT_INFO["deterministic"]`` absent or true: it draws all its
randomness from ``reset(seed)``) must reproduce every sampled episode exactly: the same return and
length, to the last bit. For an agent that declares ``"deterministic": False`` (sampling LLMs,
nondeterministic GPU kernels) each return may differ by at most ``tolerance`` in normalized-score
units, ``|Δ return| / (high - low)`` (default `STOCHASTIC_TOLERANCE`); the tolerance used is recorded.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import __version__
from ..agent import agent_file_hash, load_agent_module
from ..errors import UserError
from ..evaluate import EvalConfig, Unit, run_evaluation
from ..results import read_results
from .checks import released_suites
from .entries import DEFAULT_DIR, Entry, find_entry, record_verification

__all__ = ["verify", "STOCHASTIC_TOLERANCE"]

STOCHASTIC_TOLERANCE = 0.05  # normalized-score units, per episode


@dataclass
class _SampleConfig(EvalConfig):
    """An `EvalConfig` whose units are only the sampled ones."""

    sample: frozenset = frozenset()

    def units(self) -> list[Unit]:
        return [u for u in super().units() if u.key in self.sample]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def verify(results_path: str | Path, agent_path: str | Path, sample: int, *, seed: int = 0,
           leaderboard: str | Path | None = DEFAULT_DIR, tolerance: float | None = None,
           tasks: Sequence[str] | None = None, workers: int | None = None,
           progress: bool | None = None) -> tuple[dict, Entry | None]:
    """Re-run ``sample`` random episodes of a results file with ``agent_path`` and compare.

    Returns the verification record and the leaderboard entry it was recorded on (None when the
    results are not on the leaderboard, or ``leaderboard`` is None)."""
    if sample < 1:
        raise UserError(f"--sample must be at least 1; got {sample}")
    if seed < 0:
        raise UserError(f"--seed must be a non-negative integer; got {seed}")
    if tolerance is not None and not tolerance >= 0:
        raise UserError(f"--tolerance must be a non-negative number; got {tolerance}")
    results = read_results(results_path)
    data = results.data
    suite = released_suites().get(data["suite"]["hash"])
    if suite is None:
        raise UserError(f"{results_path} is not of a released suite (hash {data['suite']['hash']}); only "
                        "leaderboard submissions can be verified")
    load_agent_module(agent_path)  # one clear line for a broken agent file
    sha = agent_file_hash(agent_path)
    if sha != data["agent"]["sha256"]:
        raise UserError(f"{agent_path} is not the agent file that was evaluated (SHA-256 {sha[:12]}... differs "
                        f"from the results' {data['agent']['sha256'][:12]}...); pass the exact file")
    specs = {t.id: t for t in suite.tasks}
    order = {tid: i for i, tid in enumerate(suite.task_ids)}
    pool = [e for e in data["episodes"] if e.get("status") == "ok" and e.get("task") in specs
            and e.get("seed") in specs[e["task"]].seeds
            and (not tasks or any(fnmatch.fnmatchcase(e["task"], g) for g in tasks))]
    if not pool:
        raise UserError(f"no successful episode of {results_path} matches --tasks {' '.join(tasks or [])!r}")
    pool.sort(key=lambda e: (order[e["task"]], e["run"], specs[e["task"]].seeds.index(e["seed"])))
    n = min(sample, len(pool))
    rng = np.random.default_rng(seed)
    picked = [pool[i] for i in sorted(rng.choice(len(pool), size=n, replace=False).tolist())]
    keys = frozenset((e["task"], e["run"], specs[e["task"]].seeds.index(e["seed"])) for e in picked)
    info = data["agent"].get("info") or {}
    deterministic = info.get("deterministic", True) is not False
    if tolerance is None:
        tolerance = 0.0 if deterministic else STOCHASTIC_TOLERANCE
    config = data.get("config", {})
    chosen_tasks = [t for t in suite.tasks if any(k[0] == t.id for k in keys)]
    with tempfile.TemporaryDirectory(prefix="polar_bench_verify_") as tmp:
        cfg = _SampleConfig(
            suite=suite, agent_path=str(agent_path), out=str(Path(tmp) / "rerun.json"), tasks=chosen_tasks,
            runs=1 + max(k[1] for k in keys), workers=max(1, min(workers or 2, n)),
            step_timeout=config.get("step_timeout", 60.0), episode_timeout=config.get("episode_timeout", 1800.0),
            progress=progress, command=f"verify {results_path} --sample {sample} --seed {seed}", sample=keys)
        rerun, _ = run_evaluation(cfg)
    by_key = {(e["task"], e["run"], e["seed"]): e for e in rerun["episodes"]}
    rows = []
    for e in picked:
        again = by_key[(e["task"], e["run"], e["seed"])]
        spec = specs[e["task"]]
        if again["status"] != "ok" or again.get("return") is None:
            diff, match = None, False
        else:
            diff = abs(float(again["return"]) - float(e["return"])) / (spec.high.value - spec.low.value)
            if tolerance == 0:
                match = again["return"] == e["return"] and again["length"] == e["length"]
            else:
                match = diff <= tolerance
        rows.append({"task": e["task"], "run": e["run"], "seed": e["seed"], "submitted_return": e["return"],
                     "rerun_return": again.get("return"), "submitted_length": e["length"],
                     "rerun_length": again.get("length"), "rerun_status": again["status"],
                     "normalized_difference": diff, "match": match})
    matched = sum(r["match"] for r in rows)
    record = {
        "date": _now(), "passed": matched == len(rows), "sample": len(rows), "population": len(pool),
        "seed": seed, "tasks": list(tasks or []), "mode": "exact" if tolerance == 0 else "tolerance",
        "tolerance": tolerance, "deterministic": deterministic, "matched": matched,
        "mismatched": len(rows) - matched, "agent_sha256": sha, "polar_bench": __version__,
        "versions": rerun.get("versions"), "environment": rerun.get("environment"), "episodes": rows,
    }
    entry = find_entry(leaderboard, data) if leaderboard is not None else None
    if entry is not None:
        record_verification(entry, record)
    return record, entry
