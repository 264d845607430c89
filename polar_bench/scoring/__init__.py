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
