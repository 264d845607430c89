"""From results files to normalized scores: `agent_scores` reads a results file (through the typed
model) into an `AgentScores` of per-task, per-run normalized scores, under the rules for errored and
missing episodes; `load_agents` labels several. See docs/scoring.md.
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import scoring
from ..errors import ResultsError, ScoringError
from ..results.model import Episode, ResultsFile, Status, SuiteTask

__all__ = ["STATUSES", "FAILURES", "DEFAULT_METRICS", "OVERALL", "INCOMPLETE_NOTE", "ALLOW_HINT", "Estimate",
           "TaskScores", "DomainEntry", "AgentScores", "as_results", "episode_value", "agent_scores",
           "load_agents", "relabel", "steps_text", "step_count", "PUBLISHED_NOTE", "published_agents",
           "check_same_tasks"]

STATUSES = tuple(s.value for s in Status)
FAILURES = ("env_error", "agent_error", "timeout", "missing")
DEFAULT_METRICS = ("iqm", "mean", "median", "optimality_gap")
OVERALL = "overall"
INCOMPLETE_NOTE = "incomplete: errored and missing episodes left out of their run's mean"
ALLOW_HINT = ("pass --allow-incomplete to aggregate over it anyway (errored and missing episodes are "
              "then left out of their run's mean)")


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval ``[low, high]``."""

    point: float
    low: float
    high: float

    def to_json(self) -> dict:
        return {"point": _num(self.point), "low": _num(self.low), "high": _num(self.high)}


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


# ---------------------------------------------------------------------------------------------------
# Results → scores


@dataclass(frozen=True, eq=False)
class TaskScores:
    """The normalized scores of one task of one results file.

    ``run_scores`` has shape ``(runs,)``: the mean normalized score of each run's successful episodes,
    NaN for a run without any. ``episode_scores[r]`` holds run ``r``'s successful episodes' normalized
    scores in episode order. ``counts`` maps ``ok``, ``env_error``, ``agent_error``, ``timeout`` and
    ``missing`` to numbers of episodes (``missing``: expected by the suite, absent from the file).
    """

    task_id: str
    domain: str
    low: float
    high: float
    episodes: int
    run_scores: np.ndarray
    episode_scores: tuple[np.ndarray, ...]
    mean_return: float
    counts: dict[str, int]

    @property
    def runs(self) -> int:
        return len(self.run_scores)

    @property
    def complete(self) -> bool:
        return all(self.counts[k] == 0 for k in FAILURES)

    @property
    def scoreable(self) -> bool:
        """Whether every run has at least one successful episode."""
        return bool(np.isfinite(self.run_scores).all())

    @property
    def failed(self) -> int:
        return sum(self.counts[k] for k in FAILURES)


@dataclass(frozen=True, eq=False)
class DomainEntry:
    """What a domain contributes to an aggregate: ``scores`` is a ``(runs, tasks)`` matrix, an
    `scoring.EpisodeScores` (one run), or None when the domain cannot be aggregated (``note`` says why)."""

    domain: str
    scores: Any
    task_ids: tuple[str, ...]
    excluded: tuple[str, ...]
    complete: bool
    note: str


@dataclass(frozen=True, eq=False)
class AgentScores:
    """Everything scoring needs from one results file.

    ``tasks`` are in suite order; ``domains`` in order of first appearance. ``label`` is the display
    name (the agent name, made unique by the commands when two files share it).
    """

    name: str
    label: str
    path: str | None
    runs: int
    tasks: tuple[TaskScores, ...]
    domains: tuple[str, ...]
    suite: dict
    training_steps: int | None
    comparable: bool
    standard: bool
    failures: tuple[dict, ...]
    llm: dict | None
    timing: dict
    results: ResultsFile | None = None  # the file scored (None for published tables): what the commands show

    def task(self, task_id: str) -> TaskScores:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise ScoringError(f"{self.label} has no task {task_id!r}")

    def domain_tasks(self, domain: str) -> list[TaskScores]:
        return [t for t in self.tasks if t.domain == domain]

    @property
    def evaluation_noise_only(self) -> bool:
        """True with fewer than two runs: intervals then come from resampling episodes."""
        return self.runs < 2

    def incomplete_domains(self) -> list[str]:
        return [d for d in self.domains if not all(t.complete for t in self.domain_tasks(d))]

    def status_counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for t in self.tasks:
            total.update(t.counts)
        return {k: int(total[k]) for k in (*STATUSES, "missing")}

    def domain_entry(self, domain: str, allow_incomplete: bool = False,
                     task_ids: Sequence[str] | None = None) -> DomainEntry:
        """The scores of ``domain`` (restricted to ``task_ids`` when given), under the incomplete rule."""
        tasks = self.domain_tasks(domain)
        if task_ids is not None:
            wanted = set(task_ids)
            tasks = [t for t in tasks if t.task_id in wanted]
        complete = all(t.complete for t in tasks)
        if not complete and not allow_incomplete:
            failed = sum(t.failed for t in tasks)
            expected = sum(t.runs * t.episodes for t in tasks)
            return DomainEntry(domain, None, (), (), False,
                               f"incomplete: {failed} of {expected} episodes errored or missing; {ALLOW_HINT}")
        kept = [t for t in tasks if t.scoreable]
        excluded = tuple(t.task_id for t in tasks if not t.scoreable)
        notes = []
        if not complete:
            notes.append(INCOMPLETE_NOTE)
        if excluded:
            notes.append(f"left out (a run without any successful episode): {', '.join(excluded)}")
        if not kept:
            return DomainEntry(domain, None, (), excluded, complete,
                               "; ".join(notes) or "no task to score")
        if self.evaluation_noise_only:
            scores = scoring.EpisodeScores(tuple(t.episode_scores[0] for t in kept))
        else:
            scores = np.stack([t.run_scores for t in kept], axis=1)
        return DomainEntry(domain, scores, tuple(t.task_id for t in kept), excluded, complete,
                           "; ".join(notes))


def as_results(source: Any) -> ResultsFile:
    """The typed results of a path (read and checked), a `ResultsFile`, or a raw dict (checked)."""
    if isinstance(source, ResultsFile):
        return source
    if isinstance(source, (str, os.PathLike)):
        from ..results import read_results

        return read_results(source)
    if isinstance(source, Mapping):
        return ResultsFile.from_json(dict(source))
    raise ResultsError(f"expected a results file path, a ResultsFile or a dict; got {type(source).__name__}")


def step_count(value: object) -> int | None:
    """A number of environment steps as AGENT_INFO gives one: a finite non-negative number (as an
    integer), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return int(value)
    return None


def _training_steps(info: Any) -> int | None:
    if not isinstance(info, Mapping):
        return None
    for key in ("training_steps", "training_budget"):
        steps = step_count(info.get(key))
        if steps is not None:
            return steps
    return None


def episode_value(ep: Episode | Mapping[str, Any], metric: str = "return", where: str = "episode") -> float:
    """What one episode scores under a suite task's ``metric`` (`polar_bench.suite.METRICS`): its
    ``return``, or ``harness[metric]`` (a success counts 1, a failure 0). The ``harness`` record is
    written by the trusted worker, never by the agent, and `verify` re-runs and compares it.
    `ResultsError` when the value is absent or not a finite number."""
    if metric == "return":
        value = ep.ret if isinstance(ep, Episode) else ep["return"]
        if value is None:
            raise ResultsError(f"{where} has no return")
        return float(value)
    record = ep.harness if isinstance(ep, Episode) else ep.get("harness")
    value = record.get(metric) if isinstance(record, Mapping) else None
    if metric == "success" and isinstance(value, bool):
        return float(value)
    if metric == "depth" and isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return float(value)
    if value is None:
        raise ResultsError(f"{where} is scored by its {metric}, but its record has no harness.{metric}; "
                           "results made before polar_bench recorded it must be re-run with python -m "
                           "polar_bench evaluate")
    want = "true or false" if metric == "success" else "a dungeon level, an integer of at least 1"
    raise ResultsError(f"{where} is scored by its {metric}, but its harness.{metric} is {value!r}, not {want} "
                       "(the harness writes it; a results file with another value was altered)")


def agent_scores(source: Any, label: str | None = None, domains: Sequence[str] | None = None) -> AgentScores:
    """Normalize the episodes of one results file (a path, a `ResultsFile` or the raw dict).

    ``domains`` keeps only the tasks of those domains (e.g. to compare agents on the domains they
    share); the scores are then marked non-standard. The file's structure is checked by
    `ResultsFile.from_json`; what scoring adds (`ResultsError`): a successful episode's metric value,
    and no more episodes per run than its task has.
    """
    results = as_results(source)
    where = results.path or "results"
    specs = list(results.suite.tasks)
    episodes = results.episodes
    if domains is not None:
        present = list(dict.fromkeys(t.domain for t in specs))
        unknown = [d for d in domains if d not in present]
        if unknown:
            raise ScoringError(f"{where}: the results' suite has no domain {', '.join(map(repr, unknown))}; "
                               f"its domains: {', '.join(present)}")
        specs = [t for t in specs if t.domain in domains]
        kept = {t.id for t in specs}
        episodes = tuple(e for e in episodes if e.task in kept)
    metrics = {t.id: t.metric for t in specs}
    runs = results.runs
    cells: dict[tuple[str, int], dict[int, Episode]] = defaultdict(dict)
    failures = []
    for i, ep in enumerate(episodes):
        cell = cells[(ep.task, ep.run)]
        index = len(cell) if ep.index is None else ep.index  # files without an index: episodes in order
        if ep.status is Status.OK:  # checked before any arithmetic
            episode_value(ep, metrics[ep.task], f"{where}: episode {i} ({ep.task}, run {ep.run})")
        else:
            failures.append({"task": ep.task, "run": ep.run, "index": index, "seed": ep.seed,
                             "status": ep.status.value, "error": ep.error or ""})
        cell[index] = ep

    tasks = [_task_scores(where, spec, runs, cells, failures) for spec in specs]
    subset = domains is not None  # before `domains` names the domains present
    domains = tuple(dict.fromkeys(t.domain for t in tasks))
    agent = results.agent
    name = str(agent.get("name") or results.agent_info.get("name") or
               (Path(results.path).stem if results.path else "agent"))
    return AgentScores(
        name=name, label=label or name, path=results.path, runs=runs, tasks=tuple(tasks), domains=domains,
        suite={"name": results.suite.name, "version": results.suite.version, "hash": results.suite.hash},
        training_steps=_training_steps(agent.get("info")),
        comparable=results.comparable, standard=results.standard and not subset,
        failures=tuple(failures), llm=_llm_usage(episodes), timing=_timing(episodes), results=results)


def _task_scores(where: str, spec: SuiteTask, runs: int, cells: Mapping[tuple[str, int], dict[int, Episode]],
                 failures: list[dict]) -> TaskScores:
    """One task's normalized scores per run and per episode, its status counts; each episode the suite
    expects but the file lacks is added to ``failures`` as missing."""
    counts = Counter({k: 0 for k in (*STATUSES, "missing")})
    run_scores = np.full(runs, np.nan)
    per_run, returns = [], []
    n_ep = spec.episodes
    expected = n_ep or max((len(cells.get((spec.id, r), {})) for r in range(runs)), default=0)
    for r in range(runs):
        recorded = cells.get((spec.id, r), {})
        if len(recorded) > expected:
            raise ResultsError(f"{where}: task {spec.id} run {r} has {len(recorded)} episodes but the suite "
                               f"expects {expected}")
        counts["missing"] += expected - len(recorded)
        for idx in range(expected):
            if idx not in recorded and n_ep:
                failures.append({"task": spec.id, "run": r, "index": idx, "seed": None,
                                 "status": "missing", "error": "episode absent from the results file"})
        ok = []
        for idx in sorted(recorded):
            ep = recorded[idx]
            counts[ep.status.value] += 1
            if ep.status is Status.OK:
                ok.append(episode_value(ep, spec.metric))
        returns.extend(ok)
        scores = (np.array(ok) - spec.low) / (spec.high - spec.low)
        per_run.append(scores)
        if ok:
            run_scores[r] = np.mean(scores)
    return TaskScores(spec.id, spec.domain, float(spec.low), float(spec.high), expected, run_scores,
                      tuple(per_run), float(np.mean(returns)) if returns else math.nan, dict(counts))


def _llm_usage(episodes: Sequence[Episode]) -> dict | None:
    used = [e.llm for e in episodes if isinstance(e.llm, Mapping)]
    if not used:
        return None
    keys = ("calls", "prompt_tokens", "completion_tokens", "seconds")
    totals = {k: float(sum(u.get(k) or 0 for u in used)) for k in keys}
    return {"episodes": len(used), "total": totals,
            "per_episode": {k: totals[k] / len(used) for k in keys}}


def _timing(episodes: Sequence[Episode]) -> dict:
    out = {}
    for key in ("wall_seconds", "agent_seconds"):
        values = [getattr(e, key) for e in episodes if getattr(e, key) is not None]
        out[key] = {"total": float(sum(values)), "per_episode": float(np.mean(values)) if values else None}
    return out


def load_agents(paths: Sequence[Any], domains: Sequence[str] | None = None) -> list[AgentScores]:
    """`agent_scores` of every file (only ``domains``, if given), with labels made unique: an agent
    name shared by several files gets its training steps (when they differ) or the file name appended."""
    agents = [agent_scores(p, domains=domains) for p in paths]
    by_name = defaultdict(list)
    for a in agents:
        by_name[a.name].append(a)
    out = []
    for a in agents:
        same = by_name[a.name]
        label = a.name
        if len(same) > 1:
            steps = [s.training_steps for s in same]
            if None not in steps and len(set(steps)) == len(steps):
                label = f"{a.name} @ {steps_text(a.training_steps, exact=True)} steps"
            else:
                stems = [Path(s.path).name if s.path else str(i) for i, s in enumerate(same)]
                label = f"{a.name} ({stems[same.index(a)]})"
        out.append(relabel(a, label))
    return out


def relabel(a: AgentScores, label: str) -> AgentScores:
    return AgentScores(**{**a.__dict__, "label": label})


def steps_text(steps: int | None, exact: bool = False) -> str:
    """A step count in short form: 1500000 -> '1.5M', 0 -> '0', None -> '?'. ``exact``: only a short
    form that gives the number back (1234567 stays '1234567'), for labels that must stay distinct."""
    if steps is None:
        return "?"
    if steps <= 0 and not exact:
        return "0"
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if steps >= size and not exact:
            return f"{steps / size:.3g}{unit}"
        if steps >= size and steps % (size // 10 or 1) == 0:
            return f"{steps / size:g}{unit}"
    return str(steps)


PUBLISHED_NOTE = "published, not re-run"


def published_agents(name: str, domain: str = "atari100k", family: str = "atari") -> list[AgentScores]:
    """The published per-run scores of table ``name`` (`polar_bench.published.TABLES`) as reference
    entries: one `AgentScores` per published algorithm, its tasks ``{family}/{game}`` in ``domain``,
    normalized with the table's own random and human scores (which suite v2's atari100k domain uses as
    its low and high references, so `check_same_tasks` holds). Their label says "published, not re-run":
    nobody here re-ran these agents, and their protocol is the papers', which docs/families/atari.md
    compares with ours."""
    from ..published import get_table

    table = get_table(name)
    games, low, high = table.references()
    out = []
    for label, matrix in table.normalized_scores().items():
        tasks = []
        for j, game in enumerate(games):
            column = np.asarray(matrix[:, j], dtype=float)
            counts = {k: 0 for k in (*STATUSES, "missing")}
            counts["ok"] = int(column.size)
            tasks.append(TaskScores(f"{family}/{game}", domain, float(low[j]), float(high[j]), 1, column,
                                    tuple(np.array([v]) for v in column),
                                    float(low[j] + column.mean() * (high[j] - low[j])), counts))
        out.append(AgentScores(
            name=label, label=f"{label} ({PUBLISHED_NOTE})", path=None, runs=int(matrix.shape[0]),
            tasks=tuple(tasks), domains=(domain,), suite={"name": f"published:{table.name}", "version": None,
                                                          "hash": None},
            training_steps=None, comparable=True, standard=True, failures=(), llm=None, timing={}))
    return out


def _listed(items: Sequence[str], shown: int = 5) -> str:
    """The first ``shown`` items, then how many more."""
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def _shared_domains(a: Mapping[str, tuple], b: Mapping[str, tuple]) -> list[str]:
    """Domains whose tasks (with their references) are the same in both task maps (id -> (domain, ...))."""
    def by_domain(tasks: Mapping[str, tuple]) -> dict[str, set]:
        out: dict[str, set] = {}
        for tid, value in tasks.items():
            out.setdefault(value[0], set()).add((tid, value))
        return out
    da, db = by_domain(a), by_domain(b)
    return [d for d in da if d in db and da[d] == db[d]]


def check_same_tasks(agents: Sequence[AgentScores]) -> list[str]:
    """Raise `ScoringError` unless every agent was evaluated on the same tasks with the same
    domains and normalization references. Returns notes (e.g. different suite hashes)."""
    if not agents:
        raise ScoringError("no results to compare")
    first = agents[0]
    ref = {t.task_id: (t.domain, t.low, t.high) for t in first.tasks}
    for other in agents[1:]:
        mine = {t.task_id: (t.domain, t.low, t.high) for t in other.tasks}
        only_a, only_b = sorted(set(ref) - set(mine)), sorted(set(mine) - set(ref))
        if only_a or only_b:
            parts = []
            if only_a:
                parts.append(f"only in {first.label}: {_listed(only_a)}")
            if only_b:
                parts.append(f"only in {other.label}: {_listed(only_b)}")
            shared = _shared_domains(ref, mine)
            fix = (f"both have every task of {', '.join(shared)}: pass --domains {' '.join(shared)} to compare "
                   "them there" if shared else "no domain has the same tasks in both: evaluate the same tasks")
            raise ScoringError(f"{first.label} and {other.label} were evaluated on different tasks "
                               f"({'; '.join(parts)}); {fix}")
        for tid, value in ref.items():
            if mine[tid] != value:
                raise ScoringError(
                    f"task {tid} has different domain or normalization references in {first.label} "
                    f"{value} and {other.label} {mine[tid]}; their scores are not comparable")
    notes = []
    suites = {(a.suite.get("name"), a.suite.get("version"), a.suite.get("hash")) for a in agents}
    if len(suites) > 1:
        notes.append("the results come from different suite files (name, version or hash differ) "
                     "with the same tasks and references")
    return notes
