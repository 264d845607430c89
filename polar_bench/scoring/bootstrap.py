"""The stratified bootstrap (runs resampled within tasks, in chunks of bounded memory) and the interval methods."""


from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from ..errors import ScoringError
from .base import (
    CHUNK_ELEMENTS,
    RESAMPLED_EPISODES,
    RESAMPLED_RUNS,
    RESAMPLED_RUNS_AND_TASKS,
    EpisodeScores,
    SeedLike,
    check_confidence,
    check_reps,
    check_scores,
)
from .metrics import Metric, RunCounts

# ---------------------------------------------------------------------------------------------------
# Resampling


def generators(seed: SeedLike, n: int) -> list[np.random.Generator]:
    if isinstance(seed, np.random.Generator):
        return list(seed.spawn(n))
    if isinstance(seed, np.random.SeedSequence):
        sequence = seed
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        sequence = np.random.SeedSequence(int(seed))
    else:
        raise ScoringError(f"seed must be a non-negative integer or a numpy Generator; got {seed!r}")
    return [np.random.default_rng(child) for child in sequence.spawn(n)]


def _rescaled(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Deviations from the mean along ``axis`` stretched by ``sqrt(n / (n - 1))`` (``n`` values)."""
    n = x.shape[axis]
    if n < 2:
        return x
    m = np.mean(x, axis=axis, keepdims=True)
    return m + math.sqrt(n / (n - 1)) * (x - m)


_NIBBLES = np.left_shift(np.uint64(1), np.arange(16, dtype=np.uint64) * np.uint64(4))


def count_draws(draws: np.ndarray, runs: int, tasks: int, layout: str = "trn") -> np.ndarray:
    """How often each run was drawn: ``draws`` ``(n, runs, tasks)`` of run indices to counts (``uint8``
    up to 255 runs)
    ``(tasks, runs, n)`` (``layout="trn"``) or ``(n, tasks, runs)`` (``"ntr"``).

    Up to 15 runs, each draw adds ``16 ** run`` to a 64-bit code per (replicate, task): four bits per
    run hold its count (at most ``runs`` <= 15), and the counts are shifted out of the sum of ``runs``
    codes. That is one gather and one sum over the draws where `numpy.bincount` scatters into a table
    as large as the counts (faster: docs/scoring.md). More runs: `numpy.bincount`."""
    n = draws.shape[0]
    if runs <= 15:
        code = _NIBBLES[draws].sum(axis=1)  # (n, tasks)
        if layout == "trn":
            code = np.ascontiguousarray(code.T)
            out = np.empty((tasks, runs, n), np.uint8)
            for r in range(runs):
                np.bitwise_and(code >> np.uint64(4 * r), np.uint64(15), out=out[:, r, :], casting="unsafe")
        else:
            out = np.empty((n, tasks, runs), np.uint8)
            for r in range(runs):
                np.bitwise_and(code >> np.uint64(4 * r), np.uint64(15), out=out[:, :, r], casting="unsafe")
        return out
    if layout == "trn":
        flat = draws * n  # the index of (task, run, replicate) in a (tasks, runs, n) array, in place
        flat += (np.arange(tasks) * (runs * n))[None, None, :] + np.arange(n)[:, None, None]
        shape: tuple[int, ...] = (tasks, runs, n)
    else:
        flat = (np.arange(n)[:, None, None] * tasks + np.arange(tasks)) * runs + draws
        shape = (n, tasks, runs)
    counts = np.bincount(flat.ravel(), minlength=n * tasks * runs).reshape(shape)
    return counts.astype(np.uint8) if runs <= 255 else counts


class RunsSource:
    """Stratified resampling of the runs of a ``(runs, tasks)`` matrix within each task. With
    ``rescale``, the resampled values are `_rescaled` (the point estimate still uses ``x``)."""

    def __init__(self, x: np.ndarray, task_bootstrap: bool, rescale: bool = False):
        self.x = x
        self.pool = _rescaled(x) if rescale else x
        self.runs, self.tasks = x.shape
        self.task_bootstrap = task_bootstrap
        self.size = x.size
        self.resampled = RESAMPLED_RUNS_AND_TASKS if task_bootstrap else RESAMPLED_RUNS

    def matrix(self) -> np.ndarray:
        return self.x

    def indices(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Run indices ``(n, runs, tasks)`` and task indices (``(n, 1, tasks)`` or ``(tasks,)``)."""
        runs = rng.integers(0, self.runs, size=(n, self.runs, self.tasks))
        if self.task_bootstrap:
            tasks = rng.integers(0, self.tasks, size=(n, 1, self.tasks))
        else:
            tasks = np.arange(self.tasks)
        return runs, tasks

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        runs, tasks = self.indices(rng, n)
        return self.pool[runs, tasks]

    def run_counts(self, rng: np.random.Generator, n: int) -> RunCounts:
        """The draws of `sample` (without task bootstrap) as counts per (replicate, task, run)."""
        runs, _ = self.indices(rng, n)
        return RunCounts(count_draws(runs, self.runs, self.tasks), self.pool)


class _Episodes:
    """Resampling of the episodes of a single run within each task (evaluation noise only)."""

    def __init__(self, e: EpisodeScores, task_bootstrap: bool, rescale: bool = False):
        self.e = e
        self.pool = tuple(_rescaled(a) for a in e.per_task) if rescale else e.per_task
        self.runs, self.tasks = 1, e.num_tasks
        self.task_bootstrap = task_bootstrap
        self.size = sum(a.size for a in e.per_task)
        self.resampled = RESAMPLED_EPISODES

    def matrix(self) -> np.ndarray:
        return self.e.matrix()

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        means = np.empty((n, self.tasks))
        for t, a in enumerate(self.pool):  # a loop over tasks, not over replicates
            means[:, t] = np.mean(a[rng.integers(0, a.size, size=(n, a.size))], axis=1)
        if self.task_bootstrap:
            means = np.take_along_axis(means, rng.integers(0, self.tasks, size=(n, self.tasks)), axis=1)
        return means[:, None, :]


def score_source(x: Any, name: str, task_bootstrap: bool, rescale: bool = False) -> RunsSource | _Episodes:
    if isinstance(x, EpisodeScores):
        return _Episodes(x, task_bootstrap, rescale)
    return RunsSource(check_scores(x, name), task_bootstrap, rescale)


def chunk_size(elements_per_replicate: int, reps: int) -> int:
    return max(1, min(reps, CHUNK_ELEMENTS // max(1, elements_per_replicate)))


def chunk_bounds(reps: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, reps, size):
        yield start, min(size, reps - start)


def stratified_bootstrap(x: Any, reps: int, seed: SeedLike = 0,
                         task_bootstrap: bool = False) -> Iterator[np.ndarray]:
    """Yield ``reps`` stratified-bootstrap replicates of ``x`` in chunks.

    ``x`` is a ``(runs, tasks)`` matrix (runs resampled with replacement within each task; with
    ``task_bootstrap``, tasks resampled too) or an `EpisodeScores` (episodes resampled within each task;
    the replicates are ``(1, tasks)`` matrices). Each chunk has shape ``(n, runs, tasks)`` with at most
    `CHUNK_ELEMENTS` scores; the ``n`` sum to ``reps``. The draws are exactly those that
    `interval_estimates` makes for an entry ``x`` with the same seed.
    """
    reps = check_reps(reps)
    source = score_source(x, "x", task_bootstrap)
    (rng,) = generators(seed, 1)
    for _, n in chunk_bounds(reps, chunk_size(source.size, reps)):
        yield source.sample(rng, n)


def percentile_interval(values: np.ndarray, confidence: float = 0.95) -> np.ndarray:
    """Percentile interval of bootstrap replicates ``values`` (shape ``(reps,)`` or ``(reps, k)``):
    returns ``[lower, upper]`` with shape ``(2,)`` or ``(2, k)``, computed as `arch` does for rliable."""
    alpha = (1.0 - check_confidence(confidence)) / 2
    return np.percentile(values, [100 * alpha, 100 * (1.0 - alpha)], axis=0)


INTERVAL_METHODS = ("percentile", "rescaled", "bca")
"""The interval methods of `interval_estimates` (see the module docstring)."""

FEW_RUNS = 5
"""Below this many runs, `score` and `compare` warn with the coverage measured for the run count."""

MEASURED_COVERAGE: dict[str, dict[int, float]] = {
    "percentile": {2: 0.810, 3: 0.896, 4: 0.920, 5: 0.932, 10: 0.938},
    "rescaled": {2: 0.916, 3: 0.928, 4: 0.948, 5: 0.948, 10: 0.950},
    "bca": {2: 0.796, 3: 0.876, 4: 0.892, 5: 0.918, 10: 0.942},
}
"""Measured coverage of nominal 95 % intervals of the overall IQM, by method and run count:
``python benchmarks/interval_coverage.py --runs 2 3 4 5 10`` (500 simulated experiments in suite v1's
layout, 2,000 replicates each; the table and its setting are in docs/scoring.md)."""

_NORMAL = NormalDist()


def _acceleration(jackknife: np.ndarray) -> np.ndarray:
    """BCa acceleration from jackknife values of shape ``(n, k)``: ``Σd³ / (6 (Σd²)^1.5)`` per column."""
    d = np.mean(jackknife, axis=0) - jackknife
    den = 6.0 * np.sum(d ** 2, axis=0) ** 1.5
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, np.sum(d ** 3, axis=0) / np.where(den > 0, den, 1.0), 0.0)


def bca_interval(values: np.ndarray, point: Any, jackknife: np.ndarray | None = None,
                 confidence: float = 0.95) -> np.ndarray:
    """Bias-corrected and accelerated interval (Efron 1987) of bootstrap replicates ``values``
    (``(reps,)`` or ``(reps, k)``) around the point estimate ``point`` (a number or ``(k,)``).

    ``jackknife`` (``(n,)`` or ``(n, k)``: the estimate with each of ``n`` units left out) gives the
    acceleration; without it the acceleration is 0 (the bias-corrected interval). Returns
    ``[lower, upper]`` with shape ``(2,)`` or ``(2, k)``.
    """
    alpha = (1.0 - check_confidence(confidence)) / 2
    v = np.asarray(values, dtype=np.float64)
    vec = v.ndim == 2
    v2 = v if vec else v[:, None]
    p = np.broadcast_to(np.asarray(point, dtype=np.float64).reshape(-1), (v2.shape[1],))
    below = (np.sum(v2 < p, axis=0) + 0.5 * np.sum(v2 == p, axis=0)) / v2.shape[0]
    eps = 0.5 / v2.shape[0]
    z0 = np.array([_NORMAL.inv_cdf(min(max(b, eps), 1.0 - eps)) for b in below])
    if jackknife is None:
        a = np.zeros_like(z0)
    else:
        j = np.asarray(jackknife, dtype=np.float64)
        a = _acceleration(j if j.ndim == 2 else j[:, None])
    out = np.empty((2, v2.shape[1]))
    for i, q in enumerate((alpha, 1.0 - alpha)):
        z = _NORMAL.inv_cdf(q)
        adj = z0 + (z0 + z) / (1.0 - a * (z0 + z))
        levels = np.array([_NORMAL.cdf(x) for x in adj])
        out[i] = [np.percentile(v2[:, c], 100 * levels[c]) for c in range(v2.shape[1])]
    return out if vec else out[:, 0]


def jackknife_runs(sources: Sequence[Any], metrics: Sequence[Metric]) -> np.ndarray | None:
    """The aggregate with each run left out (of every task of every domain): ``(runs, k)``, or None
    when the domains have fewer than 3 runs, different run counts, or single runs' episodes."""
    if not all(isinstance(s, RunsSource) for s in sources):
        return None
    runs = {s.runs for s in sources}
    if len(runs) != 1 or min(runs) < 3:
        return None
    (n,) = runs
    out = []
    for i in range(n):
        keep = [r for r in range(n) if r != i]
        out.append(np.mean([np.concatenate([np.atleast_1d(m.estimate(s.x[keep])) for m in metrics])
                            for s in sources], axis=0))
    return np.array(out)


def interval_of(method: str, values: np.ndarray, points: np.ndarray,
              jackknife: Callable[[], np.ndarray | None], confidence: float) -> np.ndarray:
    """The interval of ``method``; ``jackknife`` (computed only for BCa) gives the leave-one-run-out values."""
    if method == "bca":
        return bca_interval(values, points, jackknife(), confidence)
    return percentile_interval(values, confidence)


def check_method(method: Any) -> str:
    if method not in INTERVAL_METHODS:
        raise ScoringError(f"unknown interval method {method!r}; choose from {', '.join(INTERVAL_METHODS)}")
    return str(method)


