"""Aggregates of `AgentScores`: per-domain and overall estimates with stratified-bootstrap intervals,
probability of improvement, performance profiles, sample-efficiency curves and the per-task and
error tables. See docs/scoring.md.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import scoring
from ..errors import ScoringError
from .scores import (
    ALLOW_HINT,
    DEFAULT_METRICS,
    OVERALL,
    STATUSES,
    AgentScores,
    DomainEntry,
    Estimate,
    check_same_tasks,
    relabel,
)

__all__ = ["ScopeEstimates", "aggregate", "improvement", "profiles", "sample_efficiency", "final_budget",
           "task_rows", "error_summary", "iter_pairs"]



# ---------------------------------------------------------------------------------------------------
# Aggregates


@dataclass(frozen=True)
class ScopeEstimates:
    """The estimates of one scope (a domain, or ``"overall"``) of one agent or pair of agents.

    ``estimates`` maps metric names to `Estimate` and is empty when the scope could not be
    aggregated; ``note`` says why, or what was left out. ``resampled`` is what the bootstrap resampled.
    """

    scope: str
    tasks: int
    complete: bool
    estimates: dict[str, Estimate]
    resampled: str | None
    note: str = ""

    def to_json(self) -> dict:
        return {"scope": self.scope, "tasks": self.tasks, "complete": self.complete,
                "resampled": self.resampled, "note": self.note,
                "metrics": {k: v.to_json() for k, v in self.estimates.items()}}


def _metrics(names: Sequence[str], gamma: float) -> list[scoring.Metric]:
    out = []
    for n in names:
        if n == "optimality_gap":
            out.append(scoring.optimality_gap_metric(gamma))
        elif n in scoring.METRICS:
            out.append(scoring.METRICS[n])
        else:
            raise ScoringError(f"unknown metric {n!r}; choose from {', '.join(scoring.METRICS)}")
    return out


def _estimates(result: scoring.IntervalEstimates, key: str, names: Sequence[str]) -> dict[str, Estimate]:
    points = np.atleast_1d(result.points[key])
    intervals = np.asarray(result.intervals[key]).reshape(2, -1)
    return {n: Estimate(float(points[i]), float(intervals[0, i]), float(intervals[1, i]))
            for i, n in enumerate(names)}


def _overall_entries(agent: AgentScores, entries: list[DomainEntry],
                     allow_incomplete: bool) -> tuple[list[DomainEntry] | None, str]:
    blocked = [e.domain for e in entries if e.scores is None and not e.complete and not allow_incomplete]
    if blocked:
        return None, (f"not computed: incomplete domain(s) {', '.join(blocked)}; {ALLOW_HINT}")
    usable = [e for e in entries if e.scores is not None]
    notes = []
    missing = [e.domain for e in entries if e.scores is None]
    if missing:
        notes.append(f"without domain(s) {', '.join(missing)} (nothing to score)")
    if any(not e.complete for e in usable):
        notes.append("includes incomplete domain(s) "
                     + ", ".join(e.domain for e in usable if not e.complete))
    if not usable:
        return None, "; ".join(notes) or "nothing to score"
    return usable, "; ".join(notes)


def aggregate(agent: AgentScores, metrics: Sequence[str] = DEFAULT_METRICS, *, gamma: float = 1.0,
              reps: int = scoring.AGGREGATE_REPS, seed: int = 0, confidence: float = 0.95,
              allow_incomplete: bool = False, task_bootstrap: bool = False,
              method: str = "percentile") -> list[ScopeEstimates]:
    """Per-domain and overall (equal domain weights) estimates of ``metrics`` for one agent, with
    intervals of ``method`` (`scoring.INTERVAL_METHODS`)."""
    ms = _metrics(metrics, gamma)
    names = [m.name for m in ms]
    entries = [agent.domain_entry(d, allow_incomplete) for d in agent.domains]
    out = []
    for e in entries:
        if e.scores is None:
            out.append(ScopeEstimates(e.domain, len(e.task_ids), e.complete, {}, None, e.note))
            continue
        r = scoring.interval_estimates({e.domain: e.scores}, ms, reps, seed, confidence,
                                       task_bootstrap=task_bootstrap, method=method)
        out.append(ScopeEstimates(e.domain, len(e.task_ids), e.complete, _estimates(r, e.domain, names),
                                  r.resampled[e.domain], e.note))
    usable, note = _overall_entries(agent, entries, allow_incomplete)
    complete = all(e.complete for e in entries)
    if usable is None:
        out.append(ScopeEstimates(OVERALL, 0, complete, {}, None, note))
        return out
    if len(usable) == 1:  # one domain: the overall is that domain (the same draws, so no new bootstrap)
        only = next(s for s in out if s.scope == usable[0].domain)
        out.append(ScopeEstimates(OVERALL, only.tasks, complete, only.estimates, only.resampled, note))
        return out
    r = scoring.interval_estimates({OVERALL: {e.domain: e.scores for e in usable}}, ms, reps, seed,
                                   confidence, task_bootstrap=task_bootstrap, method=method)
    out.append(ScopeEstimates(OVERALL, sum(len(e.task_ids) for e in usable), complete,
                              _estimates(r, OVERALL, names), r.resampled[OVERALL], note))
    return out


def improvement(x: AgentScores, y: AgentScores, *, reps: int = scoring.PROFILE_REPS, seed: int = 0,
                confidence: float = 0.95, allow_incomplete: bool = False,
                method: str = "percentile") -> list[ScopeEstimates]:
    """Probability of improvement of ``x`` over ``y``, per domain and overall (equal domain weights),
    on the tasks that both can score, with intervals of ``method``. The metric key is
    ``"probability_of_improvement"``."""
    check_same_tasks([x, y])
    key = "probability_of_improvement"
    out, usable, blocked = [], {}, []
    for d in x.domains:
        ex, ey = x.domain_entry(d, allow_incomplete), y.domain_entry(d, allow_incomplete)
        complete = ex.complete and ey.complete
        if ex.scores is None or ey.scores is None:
            note = "; ".join(f"{a.label}: {e.note}" for a, e in ((x, ex), (y, ey)) if e.scores is None)
            out.append(ScopeEstimates(d, 0, complete, {}, None, note))
            if not complete and not allow_incomplete:
                blocked.append(d)
            continue
        common = [t for t in ex.task_ids if t in set(ey.task_ids)]
        if common != list(ex.task_ids) or common != list(ey.task_ids):
            ex, ey = x.domain_entry(d, allow_incomplete, common), y.domain_entry(d, allow_incomplete, common)
        if not common:
            out.append(ScopeEstimates(d, 0, complete, {}, None, "no task that both can score"))
            continue
        note = "; ".join(dict.fromkeys(n for n in (ex.note, ey.note) if n))
        r = scoring.interval_estimates({d: (ex.scores, ey.scores)}, key, reps, seed, confidence, method=method)
        out.append(ScopeEstimates(d, len(common), complete, _estimates(r, d, [key]), r.resampled[d], note))
        usable[d] = (ex.scores, ey.scores)
    complete = all(s.complete for s in out)
    if blocked:
        out.append(ScopeEstimates(OVERALL, 0, complete, {}, None,
                                  f"not computed: incomplete domain(s) {', '.join(blocked)}; {ALLOW_HINT}"))
    elif not usable:
        out.append(ScopeEstimates(OVERALL, 0, complete, {}, None, "nothing to score"))
    else:
        left_out = [s.scope for s in out if not s.estimates]
        note = f"without domain(s) {', '.join(left_out)}" if left_out else ""
        if len(usable) == 1:  # one domain: the overall is that domain (the same draws)
            only = next(s for s in out if s.scope in usable)
            out.append(ScopeEstimates(OVERALL, only.tasks, complete, only.estimates, only.resampled, note))
        else:
            r = scoring.interval_estimates({OVERALL: usable}, key, reps, seed, confidence, method=method)
            out.append(ScopeEstimates(OVERALL, sum(s.tasks for s in out), complete,
                                      _estimates(r, OVERALL, [key]), r.resampled[OVERALL], note))
    return out


def profiles(agents: Sequence[AgentScores], tau: Any = None, kind: str = "runs", *,
             reps: int = scoring.PROFILE_REPS, seed: int = 0, confidence: float = 0.95,
             allow_incomplete: bool = False) -> tuple[scoring.ProfileEstimates | None, list[str]]:
    """Performance profiles over all domains (the equal-weight average of per-domain profiles) of
    every agent that can be aggregated, keyed by label; and notes naming the agents left out."""
    entries, notes = {}, []
    for a in agents:
        usable, note = _overall_entries(a, [a.domain_entry(d, allow_incomplete) for d in a.domains],
                                        allow_incomplete)
        if usable is None:
            notes.append(f"{a.label}: {note}")
        else:
            entries[a.label] = {e.domain: e.scores for e in usable}
    if not entries:
        return None, notes
    return scoring.performance_profile(entries, tau, kind, reps, seed, confidence), notes


def sample_efficiency(agents: Sequence[AgentScores], metric: str = "iqm", *, gamma: float = 1.0,
                      reps: int = scoring.AGGREGATE_REPS, seed: int = 0, confidence: float = 0.95,
                      allow_incomplete: bool = False,
                      method: str = "percentile") -> dict[str, list[tuple[int, Estimate]]]:
    """For every agent name evaluated at two or more distinct training budgets, the overall
    ``metric`` at each budget, in increasing order of training steps."""
    by_name: dict[str, list[AgentScores]] = defaultdict(list)
    for a in agents:
        if a.training_steps is not None:
            by_name[a.name].append(a)
    out = {}
    for name, group in by_name.items():
        if len({a.training_steps for a in group}) < 2:
            continue
        points = []
        for a in sorted(group, key=lambda a: a.training_steps or 0):  # (every one has steps: see above)
            overall = aggregate(a, [metric], gamma=gamma, reps=reps, seed=seed, confidence=confidence,
                                allow_incomplete=allow_incomplete, method=method)[-1]
            if metric in overall.estimates:
                points.append((int(a.training_steps or 0), overall.estimates[metric]))
        if len(points) >= 2:
            out[name] = points
    return out


def final_budget(agents: Sequence[AgentScores]) -> list[AgentScores]:
    """The agents to tabulate: of several files of one agent name at different training budgets, only
    the largest budget (relabelled with the plain name); everything else unchanged, in order."""
    by_name: dict[str, list[AgentScores]] = defaultdict(list)
    for a in agents:
        by_name[a.name].append(a)
    out = []
    for a in agents:
        group = by_name[a.name]
        steps = [g.training_steps for g in group]
        known = [s for s in steps if s is not None]
        if len(group) > 1 and len(known) == len(steps) and len(set(known)) == len(known):
            if a.training_steps == max(known):
                out.append(relabel(a, a.name))
        else:
            out.append(a)
    return out


def task_rows(agent: AgentScores) -> list[dict]:
    """One row per task: normalized score (mean, sd, min and max over runs), mean return, counts."""
    rows = []
    for t in agent.tasks:
        finite = t.run_scores[np.isfinite(t.run_scores)]
        rows.append({
            "task": t.task_id, "domain": t.domain, "low": t.low, "high": t.high,
            "mean": float(np.mean(finite)) if finite.size else math.nan,
            "sd": float(np.std(finite, ddof=1)) if finite.size > 1 else math.nan,
            "min": float(np.min(finite)) if finite.size else math.nan,
            "max": float(np.max(finite)) if finite.size else math.nan,
            "runs_scored": int(finite.size), "mean_return": t.mean_return,
            "episodes_expected": t.runs * t.episodes, "complete": t.complete,
            **{k: t.counts[k] for k in (*STATUSES, "missing")},
        })
    return rows


def error_summary(agent: AgentScores, limit: int = 5) -> dict:
    """Counts of failed and missing episodes, by status and by task, and the most common messages."""
    by_task: defaultdict[str, Counter[str]] = defaultdict(Counter)
    messages: Counter[tuple[str, str]] = Counter()
    for f in agent.failures:
        by_task[f["task"]][f["status"]] += 1
        if f["status"] != "missing":
            first_line = (f["error"].strip().splitlines() or [""])[-1][:200]
            messages[(f["status"], first_line)] += 1
    common = sorted(messages.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return {
        "counts": agent.status_counts(),
        "by_task": {t: dict(sorted(c.items())) for t, c in by_task.items()},
        "messages": [{"status": s, "message": m, "count": n} for (s, m), n in common],
        "incomplete_domains": agent.incomplete_domains(),
    }


def iter_pairs(items: Sequence[Any]) -> Iterable[tuple[Any, Any]]:
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            yield items[i], items[j]
