"""Point metrics (rliable's, operation for operation) and their batched forms over bootstrap replicates (`Metric`)."""


from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ScoringError
from .base import check_scores, check_tau

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


def pairwise_comparisons(a: np.ndarray, b: np.ndarray) -> np.ndarray:
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
    per_task = pairwise_comparisons(a, b).sum(axis=(1, 2)) / (a.shape[0] * b.shape[0])
    return float(np.mean(per_task))


def score_distribution(x: Any, tau: Any) -> np.ndarray:
    """Run-score distribution: for each threshold in ``tau`` (shape ``(K,)``), the fraction of all
    runs × tasks scores of ``x`` strictly above it. Returns shape ``(K,)``."""
    a, t = check_scores(x), check_tau(tau)
    return np.array([np.mean(a > v) for v in t])


def average_score_distribution(x: Any, tau: Any) -> np.ndarray:
    """Average-score distribution: for each threshold in ``tau`` (shape ``(K,)``), the fraction of
    tasks whose mean score over runs is strictly above it. Returns shape ``(K,)``."""
    a, t = check_scores(x), check_tau(tau)
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
    # Σ value × count over the cells, added cell by cell: the same bits on every CPU. A matrix product
    # (vals @ end) goes to the BLAS numpy links, whose kernels (chosen per CPU) sum in other orders: an
    # Intel Xeon's intervals differed from an AMD EPYC's in the last digit.
    total = np.zeros(end.shape[1])
    term = np.empty(end.shape[1])
    for value, row in zip(vals[order], end, strict=True):
        np.multiply(row, value, out=term)
        np.add(total, term, out=total)
    return total / (high - low)


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

POI = "probability_of_improvement"


def profile_metric(tau: np.ndarray, kind: str) -> Metric:
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


def resolve_metrics(metric: Any, matrix_function: bool | None = None) -> tuple[list[Metric], bool]:
    """Return the metrics and whether a single one was asked for (scalar results)."""

    def one(m: Any) -> Metric:
        if isinstance(m, Metric):
            return m
        if isinstance(m, str):
            if m in METRICS:
                return METRICS[m]
            raise ScoringError(
                f"unknown metric {m!r}; choose from {', '.join(METRICS)} or {POI}, "
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


