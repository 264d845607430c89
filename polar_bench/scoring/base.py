"""The shared settings of `polar_bench.scoring` and its input checks: score matrices, `EpisodeScores`."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ScoringError

AGGREGATE_REPS = 50_000
"""Default number of bootstrap replicates for the aggregate metrics (IQM, mean, median, gap)."""
PROFILE_REPS = 2_000
"""Default number of replicates for performance profiles and probability of improvement."""
CHUNK_ELEMENTS = 1 << 21
"""At most this many resampled scores (about 16 MiB of float64) are held per chunk of replicates."""

COUNTS_MAX_RUNS = 64
"""Up to this many runs the built-in metrics are computed from run counts (`RunCounts`); with more,
the gathered scores are faster (docs/scoring.md)."""

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


def check_tau(tau: Any) -> np.ndarray:
    try:
        t = np.asarray(tau, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"tau must be a 1-D array of thresholds: {exc}") from None
    if t.ndim != 1 or t.size == 0:
        raise ScoringError(f"tau must be a non-empty 1-D array of thresholds; got shape {t.shape}")
    _check_finite(t, "tau", lambda i: f"index {i[0]}")
    return t


def check_confidence(confidence: float) -> float:
    if not isinstance(confidence, (int, float, np.floating)) or not 0.0 < float(confidence) < 1.0:
        raise ScoringError(f"confidence must be a number strictly between 0 and 1; got {confidence!r}")
    return float(confidence)


def check_reps(reps: Any) -> int:
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


