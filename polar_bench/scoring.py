"""Aggregate metrics and stratified-bootstrap confidence intervals over score matrices.

A *score matrix* is a float array of shape ``(runs, tasks)``: ``x[r, t]`` is the normalized score of
run ``r`` (one independently trained instance of the agent) on task ``t``. Every function here is pure
and takes its randomness from an explicit seed, so the same input always gives the same intervals.

Point estimates follow rliable (Agarwal et al., 2021) exactly, operation for operation:

- `iqm`: the 25 % trimmed mean of all runs × tasks scores (``scipy.stats.trim_mean(x, 0.25, axis=None)``).
- `mean`: the mean over tasks of the per-task mean over runs.
- `median`: the median over tasks of the per-task mean over runs.
- `optimality_gap`: ``gamma - mean(min(x, gamma))``.
- `probability_of_improvement`: for each task the Mann-Whitney statistic ``P(X > Y) + P(X = Y) / 2``
  between the runs of X and the runs of Y, averaged over tasks.
- `score_distribution` / `average_score_distribution`: the fraction of scores (or of per-task mean
  scores) strictly above each threshold τ: the two performance profiles.

Intervals come from the stratified bootstrap: each replicate resamples, with replacement and
independently within every task, as many runs as the task has (and, with ``task_bootstrap=True``,
resamples the tasks too). ``method`` chooses the interval (`INTERVAL_METHODS`):

- ``"percentile"`` (the default, rliable's): the percentile interval of the metric over the replicates
  (``numpy.percentile``, linear interpolation, as `arch` does for rliable). Use it to reproduce
  published tables. With few runs it is too narrow: resampling ``n`` runs reproduces only
  ``(n - 1) / n`` of the variance of a task's mean (2/3 at 3 runs).
- ``"rescaled"``: the same percentile interval, from a bootstrap of runs whose deviations from their
  task's mean are first stretched by ``sqrt(n / (n - 1))`` (the bootstrap variance of every task's mean
  is then the unbiased ``s² / n``). The point estimate is unchanged. Measured coverage:
  docs/scoring.md (``benchmarks/interval_coverage.py``).
- ``"bca"``: the bias-corrected and accelerated percentile interval (Efron 1987): the bias correction
  from the fraction of replicates below the point estimate, the acceleration from a leave-one-run-out
  jackknife.

Where we deliberately differ from rliable:

- Vectorized: replicates are drawn in chunks of at most `CHUNK_ELEMENTS` resampled scores and every
  metric is computed over a whole chunk at once (no Python loop per replicate), so memory is bounded
  whatever ``reps`` is.
- The seed is honoured (rliable draws from numpy's global state whatever ``random_state`` says), and
  each entry of ``score_dict`` uses its own generator derived from the seed, so adding an entry never
  changes the interval of another one.
- Inputs are checked before any arithmetic (`check_scores`), raising `ScoringError`.
- An entry may be a mapping ``{domain: matrix}``: the metric is computed per domain and averaged over
  domains with equal weights inside every replicate (runs resampled within each task of each domain).
- An entry may be an `EpisodeScores` (a single run): the bootstrap then resamples the run's episodes
  within each task. Such intervals reflect evaluation noise only, never the variability of training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from .errors import ScoringError

__all__ = [
    "AGGREGATE_REPS",
    "PROFILE_REPS",
    "CHUNK_ELEMENTS",
    "METRICS",
    "Metric",
    "EpisodeScores",
    "IntervalEstimates",
    "ProfileEstimates",
    "check_scores",
    "iqm",
    "mean",
    "median",
    "optimality_gap",
    "optimality_gap_metric",
    "probability_of_improvement",
    "score_distribution",
    "average_score_distribution",
    "performance_profile",
    "stratified_bootstrap",
    "interval_estimates",
    "percentile_interval",
    "bca_interval",
    "INTERVAL_METHODS",
    "matrix_metric",
    "RunCounts",
]

AGGREGATE_REPS = 50_000
"""Default number of bootstrap replicates for the aggregate metrics (IQM, mean, median, gap)."""
PROFILE_REPS = 2_000
"""Default number of replicates for performance profiles and probability of improvement."""
CHUNK_ELEMENTS = 1 << 21
"""At most this many resampled scores (about 16 MiB of float64) are held per chunk of replicates."""

COUNTS_MAX_RUNS = 64
"""Up to this many runs the built-in metrics are computed from run counts (`RunCounts`); with more,
the gathered scores are faster (measured: 100 runs × 26 tasks)."""

RESAMPLED_RUNS = "runs"
RESAMPLED_RUNS_AND_TASKS = "runs and tasks"
RESAMPLED_EPISODES = "episodes (evaluation noise only)"

SeedLike = int | np.random.SeedSequence | np.random.Generator


# ---------------------------------------------------------------------------------------------------
# Input checks


def check_scores(x: Any, name: str = "scores") -> np.ndarray:
    """Return ``x`` as a float64 ``(runs, tasks)`` array (no copy when it is one), or raise `ScoringError`.

    Rejects anything that is not a 2-D array of numbers with at least one run and one task, and any
    NaN (a missing cell; ``None`` counts as missing) or infinite cell, naming the first offending cell.
    """
    if isinstance(x, EpisodeScores):
        raise ScoringError(f"{name} is an EpisodeScores; this function needs a (runs × tasks) matrix")
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"{name} must be a (runs × tasks) array of numbers: {exc}") from None
    if a.ndim != 2:
        hint = " (for one task, pass x[:, None])" if a.ndim == 1 else ""
        raise ScoringError(f"{name} must be a 2-D (runs × tasks) array; got shape {a.shape}{hint}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ScoringError(f"{name} must have at least one run and one task; got shape {a.shape}")
    _check_finite(a, name, lambda i: f"run {i[0]}, task {i[1]}")
    return a  # memory layout kept: summation order, hence the last bit, follows it as in rliable


def _check_finite(a: np.ndarray, name: str, where: Callable[[tuple], str]) -> None:
    if np.isfinite(a).all():
        return
    nan = np.isnan(a)
    if nan.any():
        first = tuple(int(i) for i in np.argwhere(nan)[0])
        raise ScoringError(
            f"{name} has {int(nan.sum())} missing (NaN) cell(s), the first at {where(first)}; "
            "every cell needs a score")
    inf = np.argwhere(np.isinf(a))
    first = tuple(int(i) for i in inf[0])
    raise ScoringError(f"{name} has {len(inf)} infinite cell(s), the first at {where(first)}")


def _check_tau(tau: Any) -> np.ndarray:
    try:
        t = np.asarray(tau, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"tau must be a 1-D array of thresholds: {exc}") from None
    if t.ndim != 1 or t.size == 0:
        raise ScoringError(f"tau must be a non-empty 1-D array of thresholds; got shape {t.shape}")
    _check_finite(t, "tau", lambda i: f"index {i[0]}")
    return t


def _check_confidence(confidence: float) -> float:
    if not isinstance(confidence, (int, float, np.floating)) or not 0.0 < float(confidence) < 1.0:
        raise ScoringError(f"confidence must be a number strictly between 0 and 1; got {confidence!r}")
    return float(confidence)


def _check_reps(reps: Any) -> int:
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 1:
        raise ScoringError(f"reps must be a positive integer; got {reps!r}")
    return int(reps)


# ---------------------------------------------------------------------------------------------------
# Episode scores of a single run


@dataclass(frozen=True, eq=False)
class EpisodeScores:
    """The normalized scores of the episodes of a single run, task by task.

    ``per_task[t]`` is a 1-D array with one normalized score per episode of task ``t`` (tasks may have
    different numbers of episodes). The score of the run on a task is the mean over its episodes, so
    `matrix` is the ``(1, tasks)`` score matrix. Bootstrapping an `EpisodeScores` resamples episodes
    within each task: the intervals reflect evaluation noise only (seeds of the evaluation episodes),
    never the variability between training runs. Use it only when fewer than two runs exist.
    """

    per_task: tuple[np.ndarray, ...]

    def __post_init__(self) -> None:
        if len(self.per_task) == 0:
            raise ScoringError("EpisodeScores needs at least one task")
        arrays = []
        for t, values in enumerate(self.per_task):
            try:
                a = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ScoringError(f"episode scores of task {t} must be numbers: {exc}") from None
            if a.ndim != 1 or a.size == 0:
                raise ScoringError(
                    f"episode scores of task {t} must be a non-empty 1-D array; got shape {a.shape}")
            _check_finite(a, f"episode scores of task {t}", lambda i: f"episode {i[0]}")
            arrays.append(np.ascontiguousarray(a))
        object.__setattr__(self, "per_task", tuple(arrays))

    @property
    def num_tasks(self) -> int:
        return len(self.per_task)

    def matrix(self) -> np.ndarray:
        """The ``(1, tasks)`` score matrix: the mean over episodes of each task."""
        return np.array([[np.mean(a) for a in self.per_task]], dtype=np.float64)


# ---------------------------------------------------------------------------------------------------
# Point estimates (rliable's definitions, operation for operation)


def _trim_bounds(n: int) -> tuple[int, int]:
    low = int(0.25 * n)
    return low, n - low


def iqm(x: Any) -> float:
    """Interquartile mean of a ``(runs, tasks)`` matrix: the mean of the middle 50 % of all its scores.

    Equal to rliable's ``aggregate_iqm`` (``scipy.stats.trim_mean(x, 0.25, axis=None)``): with ``n``
    scores, ``int(0.25 n)`` are cut at each end.
    """
    flat = check_scores(x).ravel()
    low, high = _trim_bounds(flat.size)
    return float(np.mean(np.partition(flat, (low, high - 1))[low:high]))


def mean(x: Any) -> float:
    """Mean over tasks of the per-task mean over runs of a ``(runs, tasks)`` matrix."""
    return float(np.mean(np.mean(check_scores(x), axis=0)))


def median(x: Any) -> float:
    """Median over tasks of the per-task mean over runs of a ``(runs, tasks)`` matrix."""
    return float(np.median(np.mean(check_scores(x), axis=0)))


def optimality_gap(x: Any, gamma: float = 1.0) -> float:
    """Optimality gap of a ``(runs, tasks)`` matrix: ``gamma - mean(min(x, gamma))`` (lower is better).

    The amount by which the scores fall short of ``gamma``, scores above ``gamma`` counting as ``gamma``.
    """
    gamma = _check_gamma(gamma)
    return float(gamma - np.mean(np.minimum(check_scores(x), gamma)))


def _check_gamma(gamma: Any) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(gamma)):
        raise ScoringError(f"gamma must be a finite number; got {gamma!r}")
    return float(gamma)


def _check_pair(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = check_scores(x, "x"), check_scores(y, "y")
    if a.shape[1] != b.shape[1]:
        raise ScoringError(
            f"x and y must have the same number of tasks; got {a.shape[1]} and {b.shape[1]} "
            f"(shapes {a.shape} and {b.shape})")
    return a, b


def _comparisons(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``c[t, i, j] = 1, 0.5 or 0`` as run ``i`` of X beats, ties or loses to run ``j`` of Y on task t."""
    left = a.T[:, :, None]
    right = b.T[:, None, :]
    return (left > right) + 0.5 * (left == right)


def probability_of_improvement(x: Any, y: Any) -> float:
    """Probability that X improves on Y: ``P(X > Y) + P(X = Y) / 2`` per task, averaged over tasks.

    ``x`` is ``(runs_x, tasks)``, ``y`` is ``(runs_y, tasks)``; the run counts may differ. Per task this
    is the Mann-Whitney U statistic of X over Y divided by ``runs_x * runs_y``, as in rliable.
    """
    a, b = _check_pair(x, y)
    per_task = _comparisons(a, b).sum(axis=(1, 2)) / (a.shape[0] * b.shape[0])
    return float(np.mean(per_task))


def score_distribution(x: Any, tau: Any) -> np.ndarray:
    """Run-score distribution: for each threshold in ``tau`` (shape ``(K,)``), the fraction of all
    runs × tasks scores of ``x`` strictly above it. Returns shape ``(K,)``."""
    a, t = check_scores(x), _check_tau(tau)
    return np.array([np.mean(a > v) for v in t])


def average_score_distribution(x: Any, tau: Any) -> np.ndarray:
    """Average-score distribution: for each threshold in ``tau`` (shape ``(K,)``), the fraction of
    tasks whose mean score over runs is strictly above it. Returns shape ``(K,)``."""
    a, t = check_scores(x), _check_tau(tau)
    task_means = np.mean(a, axis=0)
    return np.array([np.mean(task_means > v) for v in t])


# ---------------------------------------------------------------------------------------------------
# Metrics over chunks of replicates


def _iqm_batch(block: np.ndarray) -> np.ndarray:
    flat = block.reshape(block.shape[0], -1)
    low, high = _trim_bounds(flat.shape[1])
    return np.mean(np.partition(flat, (low, high - 1), axis=1)[:, low:high], axis=1)


def _mean_batch(block: np.ndarray) -> np.ndarray:
    return np.mean(np.mean(block, axis=1), axis=1)


def _median_rows(a: np.ndarray) -> np.ndarray:
    """``numpy.median(a, axis=1)`` to the bit for finite ``a``, from one sort of every row: for the
    short rows of per-task means, several times faster than the partition inside `numpy.median`."""
    s = np.sort(a, axis=1)
    k = a.shape[1] // 2
    return s[:, k] if a.shape[1] % 2 else (s[:, k - 1] + s[:, k]) / 2


def _median_batch(block: np.ndarray) -> np.ndarray:
    return _median_rows(np.mean(block, axis=1))


class RunCounts:
    """Replicates of a ``(runs, tasks)`` matrix given by how often each run of each task was drawn,
    not by the resampled values: ``counts`` has shape ``(tasks, runs, replicates)`` (replicates last,
    so that sums over cells run along contiguous rows), holds small integers (``uint8``: a run is drawn
    at most ``runs`` <= `COUNTS_MAX_RUNS` times) and sums to ``runs`` over its second axis; ``values``
    is the ``(runs, tasks)`` matrix the runs are drawn from.

    Metrics with a ``counts`` function compute from this without gathering the resampled values
    (the IQM without a partition of every replicate), which is what makes the built-in metrics fast.
    """

    def __init__(self, counts: np.ndarray, values: np.ndarray):
        self.counts = counts
        self.values = values
        self.runs, self.tasks = values.shape
        self._task_means: np.ndarray | None = None
        self._float_counts: np.ndarray | None = None

    @property
    def float_counts(self) -> np.ndarray:
        """``counts`` as float64 (made once, for the weighted sums)."""
        if self._float_counts is None:
            self._float_counts = self.counts.astype(np.float64)
        return self._float_counts

    @property
    def task_means(self) -> np.ndarray:
        """The mean over resampled runs of every task: ``(replicates, tasks)``."""
        if self._task_means is None:
            self._task_means = np.einsum("trn,tr->nt", self.float_counts, self.values.T) / self.runs
        return self._task_means

    def weighted_sum(self, cell_values: np.ndarray) -> np.ndarray:
        """``Σ count × value`` over every (task, run) cell, for ``cell_values`` of shape ``(runs, tasks)``."""
        return np.einsum("trn,tr->n", self.float_counts, cell_values.T)


def _iqm_counts(rc: RunCounts) -> np.ndarray:
    """The IQM of every replicate: the mean of sorted positions ``low .. high - 1`` of its
    ``runs × tasks`` resampled scores, from the cells' counts in sorted order of their values.

    Positions are counted in the narrowest integer type that holds ``runs × tasks`` (int16 for up to
    32,767 cells): the passes over ``cells × replicates`` then move a quarter of the bytes of float64."""
    vals = rc.values.T.ravel()  # cell t * runs + r holds values[r, t], as counts.reshape(-1, n) orders them
    order = np.argsort(vals, kind="stable")
    kind: type[np.signedinteger] = np.int16 if vals.size <= np.iinfo(np.int16).max else np.int32
    counts: np.ndarray = rc.counts.reshape(vals.size, -1)[order].astype(kind)  # (cells in sorted order, replicates)
    end: np.ndarray = np.empty_like(counts)  # the running sum row by row: numpy's cumsum along axis 0 is a strided
    end[0] = counts[0]  # loop, several times slower than adding contiguous rows
    for i in range(1, len(counts)):
        np.add(end[i - 1], counts[i], out=end[i])
    low, high = _trim_bounds(vals.size)
    start = end - counts
    np.maximum(start, low, out=start)
    np.minimum(end, high, out=end)
    end -= start  # how many of each cell's draws fall inside the trimmed positions low .. high - 1
    np.maximum(end, 0, out=end)
    return vals[order] @ end.astype(np.float64) / (high - low)


def _mean_counts(rc: RunCounts) -> np.ndarray:
    return np.mean(rc.task_means, axis=1)


def _median_counts(rc: RunCounts) -> np.ndarray:
    return _median_rows(rc.task_means)


@dataclass(frozen=True)
class Metric:
    """An aggregate metric that the bootstrap can evaluate on many replicates at once.

    ``batch`` maps a block of resampled matrices, shape ``(replicates, runs, tasks)``, to shape
    ``(replicates,)`` (or ``(replicates, k)`` for a vector-valued metric). ``point``, when given, computes
    the point estimate from one ``(runs, tasks)`` matrix (otherwise ``batch(x[None])[0]`` is used).
    ``counts``, when given, computes the same as ``batch`` from a `RunCounts` (the faster path, used
    for resampled runs without task bootstrap).
    """

    name: str
    label: str
    batch: Callable[[np.ndarray], np.ndarray]
    point: Callable[[np.ndarray], Any] | None = None
    higher_is_better: bool = True
    counts: Callable[[RunCounts], np.ndarray] | None = None

    def estimate(self, x: np.ndarray) -> np.ndarray:
        if self.point is not None:
            return np.asarray(self.point(x), dtype=np.float64)
        return np.asarray(self.batch(x[None]), dtype=np.float64)[0]


def optimality_gap_metric(gamma: float = 1.0) -> Metric:
    """The optimality gap at threshold ``gamma`` as a `Metric` (lower is better)."""
    gamma = _check_gamma(gamma)

    def batch(block: np.ndarray) -> np.ndarray:
        return gamma - np.mean(np.minimum(block, gamma).reshape(block.shape[0], -1), axis=1)

    def from_counts(rc: RunCounts) -> np.ndarray:
        return gamma - rc.weighted_sum(np.minimum(rc.values, gamma)) / rc.values.size

    label = "Optimality gap" if gamma == 1.0 else f"Optimality gap (γ={gamma:g})"
    return Metric("optimality_gap", label, batch, lambda x: optimality_gap(x, gamma),
                  higher_is_better=False, counts=from_counts)


METRICS: dict[str, Metric] = {
    "iqm": Metric("iqm", "IQM", _iqm_batch, iqm, counts=_iqm_counts),
    "mean": Metric("mean", "Mean", _mean_batch, mean, counts=_mean_counts),
    "median": Metric("median", "Median", _median_batch, median, counts=_median_counts),
    "optimality_gap": optimality_gap_metric(1.0),
}
"""The built-in aggregate metrics by name."""

_POI = "probability_of_improvement"


def _profile_metric(tau: np.ndarray, kind: str) -> Metric:
    if kind == "runs":
        def batch(block: np.ndarray) -> np.ndarray:
            flat = block.reshape(block.shape[0], -1)
            return np.stack([np.mean(flat > v, axis=1) for v in tau], axis=1)

        return Metric("score_distribution", "Fraction of runs with score > τ", batch,
                      lambda x: score_distribution(x, tau))
    if kind == "average":
        def batch(block: np.ndarray) -> np.ndarray:
            task_means = np.mean(block, axis=1)
            return np.stack([np.mean(task_means > v, axis=1) for v in tau], axis=1)

        return Metric("average_score_distribution", "Fraction of tasks with mean score > τ", batch,
                      lambda x: average_score_distribution(x, tau))
    raise ScoringError(f"kind must be 'runs' or 'average'; got {kind!r}")


def matrix_metric(fn: Callable[[np.ndarray], Any], name: str | None = None) -> Metric:
    """A `Metric` from a function of one ``(runs, tasks)`` matrix, as rliable's
    ``get_interval_estimates`` takes it (e.g. ``lambda x: np.array([metrics.aggregate_iqm(x)])``).

    The function is called once per replicate, in a Python loop: correct, but slower than the
    built-in batched metrics (pass those by name where they fit).
    """
    label = str(name or getattr(fn, "__name__", "custom"))

    def batch(block: np.ndarray) -> np.ndarray:
        return np.stack([np.asarray(fn(m), dtype=np.float64) for m in block])

    return Metric(label, label, batch, fn)


class _DetectedMetric:
    """A plain function given as a metric: batched (``(replicates, runs, tasks) -> (replicates,)``) or
    rliable-style (one ``(runs, tasks)`` matrix -> a number or ``(k,)`` array), told apart on first use
    by a probe whose replicate count differs from the run and task counts."""

    def __init__(self, fn: Callable[[np.ndarray], Any]):
        self.fn = fn
        self.per_matrix: bool | None = None

    def _detect(self, block: np.ndarray) -> bool:
        n = max(block.shape[1], block.shape[2]) + 2
        probe = np.repeat(block[:1], n, axis=0)
        try:
            out = np.asarray(self.fn(probe), dtype=np.float64)
        except Exception:  # a function of one matrix may fail on a 3-D block in any way it likes
            return True
        return not (out.ndim in (1, 2) and out.shape[0] == n)

    def __call__(self, block: np.ndarray) -> np.ndarray:
        if self.per_matrix is None:
            self.per_matrix = self._detect(block)
        if self.per_matrix:
            return np.stack([np.asarray(self.fn(m), dtype=np.float64) for m in block])
        return np.asarray(self.fn(block), dtype=np.float64)


def _resolve_metrics(metric: Any, matrix_function: bool | None = None) -> tuple[list[Metric], bool]:
    """Return the metrics and whether a single one was asked for (scalar results)."""

    def one(m: Any) -> Metric:
        if isinstance(m, Metric):
            return m
        if isinstance(m, str):
            if m in METRICS:
                return METRICS[m]
            raise ScoringError(
                f"unknown metric {m!r}; choose from {', '.join(METRICS)} or {_POI}, "
                "or pass a Metric or a function over (replicates, runs, tasks) blocks")
        if callable(m):
            if matrix_function:
                return matrix_metric(m)
            name = getattr(m, "__name__", "custom")
            if matrix_function is None:
                detected = _DetectedMetric(m)
                return Metric(name, name, detected, lambda x: detected(x[None])[0])
            return Metric(name, name, m)
        raise ScoringError(f"a metric must be a name, a Metric or a function; got {m!r}")

    if isinstance(metric, (str, Metric)) or callable(metric):
        metrics = [one(metric)]
        return metrics, True
    if isinstance(metric, Sequence) and len(metric) > 0:
        return [one(m) for m in metric], False
    raise ScoringError(f"metric must be a name, a Metric, a function or a list of them; got {metric!r}")


# ---------------------------------------------------------------------------------------------------
# Resampling


def _generators(seed: SeedLike, n: int) -> list[np.random.Generator]:
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


def _count_draws(draws: np.ndarray, runs: int, tasks: int, layout: str = "trn") -> np.ndarray:
    """How often each run was drawn: ``draws`` ``(n, runs, tasks)`` of run indices to counts (``uint8``
    up to 255 runs)
    ``(tasks, runs, n)`` (``layout="trn"``) or ``(n, tasks, runs)`` (``"ntr"``).

    Up to 15 runs, each draw adds ``16 ** run`` to a 64-bit code per (replicate, task): four bits per
    run hold its count (at most ``runs`` <= 15), and the counts are shifted out of the sum of ``runs``
    codes. That is one gather and one sum over the draws where `numpy.bincount` scatters into a table
    as large as the counts (0.026 s against 0.076 s for 50,000 replicates of 10 x 20, timed once while writing
    it). More runs: `numpy.bincount`."""
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


class _Runs:
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
        return RunCounts(_count_draws(runs, self.runs, self.tasks), self.pool)


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


def _source(x: Any, name: str, task_bootstrap: bool, rescale: bool = False) -> _Runs | _Episodes:
    if isinstance(x, EpisodeScores):
        return _Episodes(x, task_bootstrap, rescale)
    return _Runs(check_scores(x, name), task_bootstrap, rescale)


def _chunk_size(elements_per_replicate: int, reps: int) -> int:
    return max(1, min(reps, CHUNK_ELEMENTS // max(1, elements_per_replicate)))


def _chunks(reps: int, size: int) -> Iterator[tuple[int, int]]:
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
    reps = _check_reps(reps)
    source = _source(x, "x", task_bootstrap)
    (rng,) = _generators(seed, 1)
    for _, n in _chunks(reps, _chunk_size(source.size, reps)):
        yield source.sample(rng, n)


def percentile_interval(values: np.ndarray, confidence: float = 0.95) -> np.ndarray:
    """Percentile interval of bootstrap replicates ``values`` (shape ``(reps,)`` or ``(reps, k)``):
    returns ``[lower, upper]`` with shape ``(2,)`` or ``(2, k)``, computed as `arch` does for rliable."""
    alpha = (1.0 - _check_confidence(confidence)) / 2
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
    alpha = (1.0 - _check_confidence(confidence)) / 2
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


def _jackknife_runs(sources: Sequence[Any], metrics: Sequence[Metric]) -> np.ndarray | None:
    """The aggregate with each run left out (of every task of every domain): ``(runs, k)``, or None
    when the domains have fewer than 3 runs, different run counts, or single runs' episodes."""
    if not all(isinstance(s, _Runs) for s in sources):
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


def _interval(method: str, values: np.ndarray, points: np.ndarray,
              jackknife: Callable[[], np.ndarray | None], confidence: float) -> np.ndarray:
    """The interval of ``method``; ``jackknife`` (computed only for BCa) gives the leave-one-run-out values."""
    if method == "bca":
        return bca_interval(values, points, jackknife(), confidence)
    return percentile_interval(values, confidence)


def _check_method(method: Any) -> str:
    if method not in INTERVAL_METHODS:
        raise ScoringError(f"unknown interval method {method!r}; choose from {', '.join(INTERVAL_METHODS)}")
    return str(method)


# ---------------------------------------------------------------------------------------------------
# Interval estimates


@dataclass(frozen=True)
class IntervalEstimates:
    """Point estimates and intervals (``method``: `INTERVAL_METHODS`) for every entry of a ``score_dict``.

    ``points[key]`` is a float (one metric) or an array ``(k,)`` (a list of ``k`` metrics, or a
    profile over ``k`` thresholds); ``intervals[key]`` is ``[lower, upper]``: shape ``(2,)`` or
    ``(2, k)``. ``resampled[key]`` says what the bootstrap resampled: ``"runs"``, ``"runs and tasks"``
    or ``"episodes (evaluation noise only)"``. ``replicates[key]`` (only with ``keep_replicates``)
    holds the bootstrap values, shape ``(reps,)`` or ``(reps, k)``. Unpacks like rliable's result:
    ``points, intervals = interval_estimates(...)``.
    """

    points: dict[str, Any]
    intervals: dict[str, np.ndarray]
    reps: int
    confidence: float
    resampled: dict[str, str]
    metrics: tuple[str, ...]
    replicates: dict[str, np.ndarray] = field(default_factory=dict)
    method: str = "percentile"

    def __iter__(self):
        yield self.points
        yield self.intervals


def _entry_groups(entry: Any, key: str) -> list[tuple[str, Any]]:
    """The domain groups of one entry: a mapping gives one group per domain, anything else one group."""
    if isinstance(entry, Mapping):
        if len(entry) == 0:
            raise ScoringError(f"entry {key!r} is an empty mapping of domains")
        return [(f"{key}/{domain}", value) for domain, value in entry.items()]
    return [(key, entry)]


def _resampled_label(sources: Sequence[Any]) -> str:
    labels = {s.resampled for s in sources}
    return RESAMPLED_EPISODES if RESAMPLED_EPISODES in labels else labels.pop()


def _bootstrap_aggregate(groups: list[tuple[str, Any]], metrics: list[Metric], reps: int,
                         seed: SeedLike, task_bootstrap: bool, rescale: bool = False):
    sources = [_source(value, name, task_bootstrap, rescale) for name, value in groups]
    points = np.mean([np.concatenate([np.atleast_1d(m.estimate(s.matrix())) for m in metrics])
                      for s in sources], axis=0)
    rngs = _generators(seed, len(sources))
    size = _chunk_size(max(s.size for s in sources), reps)
    values = None
    by_counts = not task_bootstrap and all(m.counts is not None for m in metrics)
    for start, n in _chunks(reps, size):
        outs = []
        for source, rng in zip(sources, rngs, strict=True):  # each source draws from its own generator
            if by_counts and isinstance(source, _Runs) and source.runs <= COUNTS_MAX_RUNS:
                rc = source.run_counts(rng, n)  # the same draws as sample(), counted instead of gathered
                outs.append(np.concatenate([np.asarray(m.counts(rc), dtype=np.float64).reshape(n, -1)
                                            for m in metrics if m.counts is not None], axis=1))
                continue
            block = source.sample(rng, n)  # every metric on the same replicates
            outs.append(np.concatenate([np.asarray(m.batch(block), dtype=np.float64).reshape(n, -1)
                                        for m in metrics], axis=1))
        total = outs[0]
        for out in outs[1:]:  # summed in domain order, as before (the last bit of the result depends on it)
            total = total + out
        if values is None:
            values = np.empty((reps, total.shape[1]))
        values[start:start + n] = total / len(sources)
    return points, values, _resampled_label(sources), lambda: _jackknife_runs(sources, metrics)


def _poi_batch_runs(a: _Runs, b: _Runs, comparisons: np.ndarray, rng_a, rng_b, n: int) -> np.ndarray:
    """Probability of improvement for ``n`` replicates from run counts: ``U = cx · C · cy`` per task."""
    counts = []
    for source, rng in ((a, rng_a), (b, rng_b)):
        runs, _ = source.indices(rng, n)  # (n, runs, tasks)
        counts.append(_count_draws(runs, source.runs, source.tasks, layout="ntr").astype(np.float64))
    cx, cy = counts
    u = np.einsum("tnj,ntj->nt", np.matmul(cx.transpose(1, 0, 2), comparisons), cy)
    return np.mean(u / (a.runs * b.runs), axis=1)


def _poi_batch_values(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
    """Probability of improvement for blocks ``(n, runs_x, tasks)`` and ``(n, runs_y, tasks)``."""
    left, right = xb[:, :, None, :], yb[:, None, :, :]
    u = (left > right).sum(axis=(1, 2)) + 0.5 * (left == right).sum(axis=(1, 2))
    return np.mean(u / (xb.shape[1] * yb.shape[1]), axis=1)


def _bootstrap_poi(groups: list[tuple[str, Any]], reps: int, seed: SeedLike, task_bootstrap: bool,
                   rescale: bool = False):
    if task_bootstrap:
        raise ScoringError("task_bootstrap is not supported for probability_of_improvement "
                           "(as in rliable): X and Y are resampled independently within each task")
    pairs = []
    for name, value in groups:
        if not (isinstance(value, Sequence) and not isinstance(value, (str, np.ndarray))
                and len(value) == 2):
            raise ScoringError(f"entry {name!r} of probability_of_improvement must be a pair (x, y) "
                               f"of score matrices; got {type(value).__name__}")
        a = _source(value[0], f"{name} x", False, rescale)
        b = _source(value[1], f"{name} y", False, rescale)
        if a.tasks != b.tasks:
            raise ScoringError(f"entry {name!r}: x and y must have the same number of tasks; "
                               f"got {a.tasks} and {b.tasks}")
        pairs.append((a, b))
    points = float(np.mean([probability_of_improvement(a.matrix(), b.matrix()) for a, b in pairs]))
    rngs = _generators(seed, 2 * len(pairs))
    values = np.zeros(reps)
    for i, (a, b) in enumerate(pairs):
        rng_a, rng_b = rngs[2 * i], rngs[2 * i + 1]
        runs_path = isinstance(a, _Runs) and isinstance(b, _Runs) and not rescale
        # scores held per replicate: run counts and products (runs path) or all pairwise comparisons
        per_rep = (3 * a.tasks * (a.runs + b.runs) if runs_path
                   else a.size + b.size + a.tasks * a.runs * b.runs)
        for start, n in _chunks(reps, _chunk_size(per_rep, reps)):
            if runs_path and isinstance(a, _Runs) and isinstance(b, _Runs):
                comparisons = _comparisons(a.x, b.x)
                values[start:start + n] += _poi_batch_runs(a, b, comparisons, rng_a, rng_b, n)
            else:
                values[start:start + n] += _poi_batch_values(a.sample(rng_a, n), b.sample(rng_b, n))
    values /= len(pairs)
    label = _resampled_label([s for pair in pairs for s in pair])
    return np.array([points]), values[:, None], label, lambda: _jackknife_poi(pairs)


def _jackknife_poi(pairs: Sequence[tuple[Any, Any]]) -> np.ndarray | None:
    """Probability of improvement with each run of X, then each run of Y, left out: ``(n, 1)``."""
    if not all(isinstance(s, _Runs) and s.runs >= 3 for pair in pairs for s in pair):
        return None
    out = []
    for side in (0, 1):
        n = {pair[side].runs for pair in pairs}
        if len(n) != 1:
            return None
        for i in range(n.pop()):
            vals = []
            for a, b in pairs:
                x, y = (np.delete(a.x, i, axis=0), b.x) if side == 0 else (a.x, np.delete(b.x, i, axis=0))
                vals.append(probability_of_improvement(x, y))
            out.append([float(np.mean(vals))])
    return np.array(out)


def interval_estimates(score_dict: Mapping[str, Any], metric: Any, reps: int | None = None,
                       seed: SeedLike = 0, confidence: float = 0.95, *, task_bootstrap: bool = False,
                       keep_replicates: bool = False, method: str = "percentile",
                       matrix_function: bool | None = None) -> IntervalEstimates:
    """Point estimates and stratified-bootstrap percentile intervals for every entry of ``score_dict``.

    Args:
        score_dict: ``{name: entry}``. For an aggregate metric an entry is a ``(runs, tasks)`` matrix,
            an `EpisodeScores` (a single run; episodes are resampled, evaluation noise only), or a
            mapping ``{domain: matrix or EpisodeScores}``: the metric is then computed per domain and
            averaged over domains, each weighted equally, inside every replicate. For
            ``metric="probability_of_improvement"`` an entry is a pair ``(x, y)`` (run counts may
            differ) or a mapping ``{domain: (x, y)}``.
        metric: ``"iqm"``, ``"mean"``, ``"median"``, ``"optimality_gap"``, ``"probability_of_improvement"``,
            a `Metric`, a function, or a list of aggregate metrics (evaluated on the same replicates;
            results are then arrays). A function either maps ``(replicates, runs, tasks)`` blocks to
            ``(replicates,)`` (fast) or, as in rliable, one ``(runs, tasks)`` matrix to a number or a
            ``(k,)`` array (called once per replicate); ``matrix_function`` says which, or (None)
            it is detected on a probe.
        reps: bootstrap replicates; None gives `AGGREGATE_REPS` (50,000) for aggregates and
            `PROFILE_REPS` (2,000) for the probability of improvement.
        seed: an integer (or SeedSequence) from which every entry derives its own generators, or a
            numpy Generator. The same input and seed always give the same intervals.
        confidence: coverage of the two-sided percentile interval.
        task_bootstrap: also resample tasks (within each domain), which estimates the sensitivity of
            the aggregate to the choice of tasks. Not available for probability of improvement.
        keep_replicates: keep the bootstrap values in ``result.replicates``.
        method: ``"percentile"`` (rliable's, the default), ``"rescaled"`` or ``"bca"``
            (`INTERVAL_METHODS`; the module docstring defines them).
        matrix_function: for a function ``metric``: True for a function of one matrix (rliable's
            convention), False for a batched function, None to detect which.
    """
    confidence = _check_confidence(confidence)
    method = _check_method(method)
    rescale = method == "rescaled"
    if not isinstance(score_dict, Mapping) or len(score_dict) == 0:
        raise ScoringError("score_dict must be a non-empty mapping {name: scores}")
    is_poi = isinstance(metric, str) and metric == _POI
    metrics: list[Metric] = []
    if is_poi:
        single = True
        names: tuple[str, ...] = (_POI,)
    else:
        metrics, single = _resolve_metrics(metric, matrix_function)
        names = tuple(m.name for m in metrics)
    reps = _check_reps((PROFILE_REPS if is_poi else AGGREGATE_REPS) if reps is None else reps)
    result = IntervalEstimates({}, {}, reps, confidence, {}, names, method=method)
    for key, entry in score_dict.items():
        groups = _entry_groups(entry, str(key))
        if is_poi:
            points, values, label, jack = _bootstrap_poi(groups, reps, seed, task_bootstrap, rescale)
        else:
            points, values, label, jack = _bootstrap_aggregate(groups, metrics, reps, seed, task_bootstrap,
                                                               rescale)
        interval = _interval(method, values, points, jack, confidence)
        if single and values.shape[1] == 1:
            result.points[key] = float(points[0])
            result.intervals[key] = interval[:, 0]
            values = values[:, 0]
        else:
            result.points[key] = points
            result.intervals[key] = interval
        result.resampled[key] = label
        if keep_replicates:
            result.replicates[key] = values
    return result


# ---------------------------------------------------------------------------------------------------
# Performance profiles


@dataclass(frozen=True)
class ProfileEstimates:
    """Performance profiles with pointwise percentile bands.

    ``tau`` has shape ``(K,)``; ``points[key]`` has shape ``(K,)`` (fraction above each τ);
    ``intervals[key]`` has shape ``(2, K)`` (lower and upper band); ``kind`` is ``"runs"`` (run-score
    distribution) or ``"average"`` (average-score distribution).
    """

    tau: np.ndarray
    points: dict[str, np.ndarray]
    intervals: dict[str, np.ndarray]
    kind: str
    reps: int
    confidence: float
    resampled: dict[str, str]

    def __iter__(self):
        yield self.points
        yield self.intervals


def default_tau(score_dict: Mapping[str, Any], num: int = 101) -> np.ndarray:
    """A τ grid from ``min(0, lowest score)`` to the highest score over every entry, ``num`` points."""
    values = []

    def collect(entry: Any) -> None:
        if isinstance(entry, Mapping):
            for value in entry.values():
                collect(value)
        elif isinstance(entry, EpisodeScores):
            values.append(entry.matrix().ravel())
        else:
            values.append(check_scores(entry).ravel())

    for entry in score_dict.values():
        collect(entry)
    allv = np.concatenate(values)
    low, high = min(0.0, float(allv.min())), float(allv.max())
    if high <= low:
        high = low + 1.0
    return np.linspace(low, high, num)


def performance_profile(score_dict: Mapping[str, Any], tau: Any = None, kind: str = "runs",
                        reps: int = PROFILE_REPS, seed: SeedLike = 0, confidence: float = 0.95, *,
                        task_bootstrap: bool = False) -> ProfileEstimates:
    """Performance profiles of every entry of ``score_dict`` over the thresholds ``tau``, with bands.

    ``kind="runs"`` gives the run-score distribution (fraction of all runs × tasks scores above τ),
    ``kind="average"`` the average-score distribution (fraction of tasks whose mean score over runs
    is above τ), both as in rliable. Entries are as in `interval_estimates` (matrices, `EpisodeScores`,
    or ``{domain: ...}`` mappings, whose profile is the equal-weight average of the domains'
    profiles). ``tau`` defaults to `default_tau` (101 points). Bands are pointwise percentile intervals
    from ``reps`` stratified-bootstrap replicates.
    """
    t = default_tau(score_dict) if tau is None else _check_tau(tau)
    estimates = interval_estimates(score_dict, [_profile_metric(t, kind)], reps, seed, confidence,
                                   task_bootstrap=task_bootstrap)
    return ProfileEstimates(t, estimates.points, estimates.intervals, kind, estimates.reps,
                            estimates.confidence, estimates.resampled)
