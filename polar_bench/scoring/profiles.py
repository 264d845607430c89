"""Performance profiles (score distributions) with pointwise bootstrap bands."""


from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import PROFILE_REPS, EpisodeScores, SeedLike, check_scores, check_tau
from .estimates import interval_estimates
from .metrics import profile_metric

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

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
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
    t = default_tau(score_dict) if tau is None else check_tau(tau)
    estimates = interval_estimates(score_dict, [profile_metric(t, kind)], reps, seed, confidence,
                                   task_bootstrap=task_bootstrap)
    return ProfileEstimates(t, estimates.points, estimates.intervals, kind, estimates.reps,
                            estimates.confidence, estimates.resampled)
