"""`interval_estimates`: aggregate metrics and probability of improvement with their bootstrap intervals."""


from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..errors import ScoringError
from .base import (
    AGGREGATE_REPS,
    COUNTS_MAX_RUNS,
    PROFILE_REPS,
    RESAMPLED_EPISODES,
    SeedLike,
    check_confidence,
    check_reps,
)
from .bootstrap import (
    RunsSource,
    check_method,
    chunk_bounds,
    chunk_size,
    count_draws,
    generators,
    interval_of,
    jackknife_runs,
    score_source,
)
from .metrics import (
    POI,
    Metric,
    pairwise_comparisons,
    probability_of_improvement,
    resolve_metrics,
)

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

    def __iter__(self) -> Iterator[dict[str, Any]]:
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


# a group's point estimates, its bootstrap replicates (reps, k), what was resampled, and its jackknife (BCa)
_Bootstrap = tuple[np.ndarray, np.ndarray, str, Callable[[], np.ndarray | None]]


def _bootstrap_aggregate(groups: list[tuple[str, Any]], metrics: list[Metric], reps: int,
                         seed: SeedLike, task_bootstrap: bool, rescale: bool = False) -> _Bootstrap:
    sources = [score_source(value, name, task_bootstrap, rescale) for name, value in groups]
    points = np.mean([np.concatenate([np.atleast_1d(m.estimate(s.matrix())) for m in metrics])
                      for s in sources], axis=0)
    rngs = generators(seed, len(sources))
    size = chunk_size(max(s.size for s in sources), reps)
    values = None
    by_counts = not task_bootstrap and all(m.counts is not None for m in metrics)
    for start, n in chunk_bounds(reps, size):
        outs = []
        for source, rng in zip(sources, rngs, strict=True):  # each source draws from its own generator
            if by_counts and isinstance(source, RunsSource) and source.runs <= COUNTS_MAX_RUNS:
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
    replicates = cast(np.ndarray, values)  # set by the first chunk: reps >= 1 (check_reps)
    return points, replicates, _resampled_label(sources), lambda: jackknife_runs(sources, metrics)


def _poi_batch_runs(a: RunsSource, b: RunsSource, comparisons: np.ndarray, rng_a: np.random.Generator,
                    rng_b: np.random.Generator, n: int) -> np.ndarray:
    """Probability of improvement for ``n`` replicates from run counts: ``U = cx · C · cy`` per task."""
    counts = []
    for source, rng in ((a, rng_a), (b, rng_b)):
        runs, _ = source.indices(rng, n)  # (n, runs, tasks)
        counts.append(count_draws(runs, source.runs, source.tasks, layout="ntr").astype(np.float64))
    cx, cy = counts
    u = np.einsum("tnj,ntj->nt", np.matmul(cx.transpose(1, 0, 2), comparisons), cy)
    return np.mean(u / (a.runs * b.runs), axis=1)


def _poi_batch_values(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
    """Probability of improvement for blocks ``(n, runs_x, tasks)`` and ``(n, runs_y, tasks)``."""
    left, right = xb[:, :, None, :], yb[:, None, :, :]
    u = (left > right).sum(axis=(1, 2)) + 0.5 * (left == right).sum(axis=(1, 2))
    return np.mean(u / (xb.shape[1] * yb.shape[1]), axis=1)


def _bootstrap_poi(groups: list[tuple[str, Any]], reps: int, seed: SeedLike, task_bootstrap: bool,
                   rescale: bool = False) -> _Bootstrap:
    if task_bootstrap:
        raise ScoringError("task_bootstrap is not supported for probability_of_improvement "
                           "(as in rliable): X and Y are resampled independently within each task")
    pairs = []
    for name, value in groups:
        if not (isinstance(value, Sequence) and not isinstance(value, (str, np.ndarray))
                and len(value) == 2):
            raise ScoringError(f"entry {name!r} of probability_of_improvement must be a pair (x, y) "
                               f"of score matrices; got {type(value).__name__}")
        a = score_source(value[0], f"{name} x", False, rescale)
        b = score_source(value[1], f"{name} y", False, rescale)
        if a.tasks != b.tasks:
            raise ScoringError(f"entry {name!r}: x and y must have the same number of tasks; "
                               f"got {a.tasks} and {b.tasks}")
        pairs.append((a, b))
    points = float(np.mean([probability_of_improvement(a.matrix(), b.matrix()) for a, b in pairs]))
    rngs = generators(seed, 2 * len(pairs))
    values = np.zeros(reps)
    for i, (a, b) in enumerate(pairs):
        rng_a, rng_b = rngs[2 * i], rngs[2 * i + 1]
        runs_path = isinstance(a, RunsSource) and isinstance(b, RunsSource) and not rescale
        # scores held per replicate: run counts and products (runs path) or all pairwise comparisons
        per_rep = (3 * a.tasks * (a.runs + b.runs) if runs_path
                   else a.size + b.size + a.tasks * a.runs * b.runs)
        for start, n in chunk_bounds(reps, chunk_size(per_rep, reps)):
            if runs_path and isinstance(a, RunsSource) and isinstance(b, RunsSource):
                comparisons = pairwise_comparisons(a.x, b.x)
                values[start:start + n] += _poi_batch_runs(a, b, comparisons, rng_a, rng_b, n)
            else:
                values[start:start + n] += _poi_batch_values(a.sample(rng_a, n), b.sample(rng_b, n))
    values /= len(pairs)
    label = _resampled_label([s for pair in pairs for s in pair])
    return np.array([points]), values[:, None], label, lambda: _jackknife_poi(pairs)


def _jackknife_poi(pairs: Sequence[tuple[Any, Any]]) -> np.ndarray | None:
    """Probability of improvement with each run of X, then each run of Y, left out: ``(n, 1)``."""
    if not all(isinstance(s, RunsSource) and s.runs >= 3 for pair in pairs for s in pair):
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
    confidence = check_confidence(confidence)
    method = check_method(method)
    rescale = method == "rescaled"
    if not isinstance(score_dict, Mapping) or len(score_dict) == 0:
        raise ScoringError("score_dict must be a non-empty mapping {name: scores}")
    is_poi = isinstance(metric, str) and metric == POI
    metrics: list[Metric] = []
    if is_poi:
        single = True
        names: tuple[str, ...] = (POI,)
    else:
        metrics, single = resolve_metrics(metric, matrix_function)
        names = tuple(m.name for m in metrics)
    reps = check_reps((PROFILE_REPS if is_poi else AGGREGATE_REPS) if reps is None else reps)
    result = IntervalEstimates({}, {}, reps, confidence, {}, names, method=method)
    for key, entry in score_dict.items():
        groups = _entry_groups(entry, str(key))
        if is_poi:
            points, values, label, jack = _bootstrap_poi(groups, reps, seed, task_bootstrap, rescale)
        else:
            points, values, label, jack = _bootstrap_aggregate(groups, metrics, reps, seed, task_bootstrap,
                                                               rescale)
        interval = interval_of(method, values, points, jack, confidence)
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


