"""From results files to scores and their aggregates: `scores` normalizes a results file's episodes
(`agent_scores`), `aggregates` estimates IQM and the other metrics with stratified-bootstrap
intervals, profiles and sample-efficiency curves. The rules (domain weighting, incomplete domains,
one run) are in docs/scoring.md.
"""

from __future__ import annotations

from .. import scoring
from .aggregates import (
    ScopeEstimates,
    aggregate,
    error_summary,
    final_budget,
    improvement,
    iter_pairs,
    profiles,
    sample_efficiency,
    task_rows,
)
from .scores import (
    ALLOW_HINT,
    DEFAULT_METRICS,
    FAILURES,
    INCOMPLETE_NOTE,
    OVERALL,
    PUBLISHED_NOTE,
    STATUSES,
    AgentScores,
    DomainEntry,
    Estimate,
    TaskScores,
    agent_scores,
    as_results,
    check_same_tasks,
    episode_value,
    load_agents,
    published_agents,
    relabel,
    step_count,
    steps_text,
)

__all__ = ["scoring", "STATUSES", "FAILURES", "DEFAULT_METRICS", "OVERALL", "INCOMPLETE_NOTE", "ALLOW_HINT",
           "Estimate", "TaskScores", "DomainEntry", "AgentScores", "as_results", "episode_value", "agent_scores",
           "load_agents", "relabel", "steps_text", "step_count", "PUBLISHED_NOTE", "published_agents",
           "check_same_tasks",
           "ScopeEstimates", "aggregate", "improvement", "profiles", "sample_efficiency", "final_budget",
           "task_rows", "error_summary", "iter_pairs"]
