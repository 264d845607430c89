"""Aggregate metrics and stratified-bootstrap confidence intervals over score matrices.

A *score matrix* is a float array of shape ``(runs, tasks)``: ``x[r, t]`` is the normalized score of
run ``r`` on task ``t``. Every function is pure and takes its randomness from an explicit seed.
Point estimates follow rliable (Agarwal et al., 2021) operation for operation (`metrics`); intervals
come from the stratified bootstrap (`bootstrap`), by the methods in `INTERVAL_METHODS`;
`interval_estimates` and `performance_profile` put them together (`estimates`, `profiles`).
docs/scoring.md defines each metric and interval and says where and why we differ from rliable
(bounded memory, an honoured seed, domains weighted equally, `EpisodeScores` for a single run).
"""

from __future__ import annotations

from .base import (
    AGGREGATE_REPS,
    CHUNK_ELEMENTS,
    COUNTS_MAX_RUNS,
    PROFILE_REPS,
    RESAMPLED_EPISODES,
    RESAMPLED_RUNS,
    RESAMPLED_RUNS_AND_TASKS,
    EpisodeScores,
    SeedLike,
    check_scores,
)
from .bootstrap import (
    FEW_RUNS,
    INTERVAL_METHODS,
    MEASURED_COVERAGE,
    bca_interval,
    percentile_interval,
    stratified_bootstrap,
)
from .estimates import IntervalEstimates, interval_estimates
from .metrics import (
    METRICS,
    Metric,
    RunCounts,
    average_score_distribution,
    iqm,
    matrix_metric,
    mean,
    median,
    optimality_gap,
    optimality_gap_metric,
    probability_of_improvement,
    score_distribution,
)
from .profiles import ProfileEstimates, default_tau, performance_profile

__all__ = [
    "AGGREGATE_REPS", "PROFILE_REPS", "CHUNK_ELEMENTS", "METRICS", "Metric", "EpisodeScores",
    "IntervalEstimates", "ProfileEstimates", "check_scores", "iqm", "mean", "median", "optimality_gap",
    "optimality_gap_metric", "probability_of_improvement", "score_distribution", "average_score_distribution",
    "performance_profile", "stratified_bootstrap", "interval_estimates", "percentile_interval",
    "bca_interval", "INTERVAL_METHODS", "matrix_metric", "RunCounts", "FEW_RUNS", "MEASURED_COVERAGE",
    "RESAMPLED_RUNS", "RESAMPLED_RUNS_AND_TASKS", "RESAMPLED_EPISODES", "COUNTS_MAX_RUNS", "SeedLike",
    "default_tau",
]
