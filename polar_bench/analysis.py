"""From results files to normalized score matrices, and from those to the tables of `score`,
`compare` and `report`.

Normalization: the score of one episode is ``(return - low) / (high - low)`` with the task's
references from the suite embedded in the results file; the score of (run, task) is the mean over
that run's episodes. Per domain this gives a ``(runs, tasks)`` matrix.

Domain weighting: the overall aggregate weighs every domain equally, whatever its number of tasks.
Inside every bootstrap replicate the metric is computed on each domain's resampled matrix (runs
resampled within each task) and the per-domain values are averaged. The overall IQM is therefore the
mean of the per-domain IQMs, not the IQM of the pooled matrix (with one domain they coincide).

Incomplete domains: an errored (``env_error``, ``agent_error``, ``timeout``) or missing episode is never
counted as zero and never silently dropped. A domain with any of them is *incomplete*; it gets no
estimate, and neither does the overall aggregate, unless ``allow_incomplete=True``. Then each
(run, task) score is the mean of that run's successful episodes, a task where some run has none is
left out of its domain (and named), and every such row says so.

One run: with fewer than two runs there is no variability between runs to resample; the bootstrap
then resamples the single run's episodes within each task, and every interval is labelled
"episodes (evaluation noise only)".

Sample-efficiency curves: several results files of the same agent name whose ``agent.info`` carries
``training_steps`` (an integer; ``training_budget`` is accepted as well) are one agent evaluated at
several training budgets. `sample_efficiency` returns its aggregate at each budget; the tables use
the largest budget.
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import scoring
from .errors import ResultsError, ScoringError
from .results.model import Episode, Status
from .suite import METRICS

__all__ = [
    "STATUSES",
    "episode_value",
    "published_agents",
    "PUBLISHED_NOTE",
    "DEFAULT_METRICS",
    "OVERALL",
    "Estimate",
    "TaskScores",
    "DomainEntry",
    "AgentScores",
    "ScopeEstimates",
    "agent_scores",
    "load_agents",
    "check_same_tasks",
    "aggregate",
    "improvement",
    "profiles",
    "sample_efficiency",
]

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


def _load(source: Any) -> tuple[dict, str | None]:
    """The raw results dict and its path, from a path, a `polar_bench.results.Results` or a dict."""
    if isinstance(source, (str, os.PathLike)):
        from .results import read_results

        results = read_results(source)
        return results.data, results.path
    if isinstance(source, Mapping):
        return dict(source), None
    data = getattr(source, "data", None)
    if isinstance(data, Mapping):
        return dict(data), getattr(source, "path", None)
    raise ResultsError(f"expected a results file path, a Results or a dict; got {type(source).__name__}")


def _where(path: str | None) -> str:
    return path if path else "results"


def _field(mapping: Any, key: str, kind: Any, where: str) -> Any:
    if not isinstance(mapping, Mapping) or key not in mapping:
        raise ResultsError(f"{where}: missing {key!r}")
    value = mapping[key]
    if kind is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise ResultsError(f"{where}: {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _training_steps(info: Any) -> int | None:
    if not isinstance(info, Mapping):
        return None
    for key in ("training_steps", "training_budget"):
        value = info.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return int(value)
    return None


def episode_value(ep: Mapping[str, Any], metric: str = "return", where: str = "episode") -> float:
    """What one episode scores under a suite task's ``metric`` (`polar_bench.suite.METRICS`): its
    ``return``, or ``harness[metric]`` (a success counts 1, a failure 0). The ``harness`` record is
    written by the trusted worker, never by the agent, and `verify` re-runs and compares it.
    `ResultsError` when the value is absent or not a finite number."""
    if metric == "return":
        return float(ep["return"])
    record = ep.get("harness")
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
    """Normalize the episodes of one results file (a path, a `Results` or the raw dict).

    ``domains`` keeps only the tasks of those domains (e.g. to compare agents on the domains they
    share); the scores are then marked non-standard.

    Raises `ResultsError` for a file that is not consistent with its own suite: unknown task, run out
    of range, duplicate episode, non-finite return of a successful episode, ``high == low``.
    """
    data, path = _load(source)
    where = _where(path)
    suite = _field(data, "suite", Mapping, where)
    agent: Mapping[str, Any] = data["agent"] if isinstance(data.get("agent"), Mapping) else {}
    config: Mapping[str, Any] = data["config"] if isinstance(data.get("config"), Mapping) else {}
    specs = _field(suite, "tasks", list, f"{where}: suite")
    episodes = _field(data, "episodes", list, where)
    if not specs:
        raise ResultsError(f"{where}: the suite lists no tasks")

    order: list[str] = []
    refs: dict[str, tuple[str, float, float, int]] = {}
    metrics: dict[str, str] = {}
    for i, spec in enumerate(specs):
        w = f"{where}: suite task {i}"
        tid = _field(spec, "id", str, w)
        domain = _field(spec, "domain", str, f"{w} ({tid})")
        low = _field(spec, "low", (int, float), f"{w} ({tid})")
        high = _field(spec, "high", (int, float), f"{w} ({tid})")
        if not (math.isfinite(low) and math.isfinite(high)) or high == low:
            raise ResultsError(f"{where}: task {tid} has unusable normalization references "
                               f"low={low!r}, high={high!r} (they must be finite and differ)")
        n_ep = spec.get("episodes")
        if not isinstance(n_ep, int) or isinstance(n_ep, bool) or n_ep < 1:
            seeds = spec.get("seeds")
            n_ep = len(seeds) if isinstance(seeds, list) and seeds else 0
        if tid in refs:
            raise ResultsError(f"{where}: the suite lists task {tid} twice")
        metric = spec.get("metric", "return")
        if metric not in METRICS:
            raise ResultsError(f"{where}: task {tid} has unknown metric {metric!r}; expected one of "
                               f"{', '.join(METRICS)}")
        refs[tid] = (domain, float(low), float(high), n_ep)
        metrics[tid] = metric
        order.append(tid)

    if domains is not None:
        present = list(dict.fromkeys(refs[t][0] for t in order))
        unknown = [d for d in domains if d not in present]
        if unknown:
            raise ScoringError(f"{where}: the results' suite has no domain {', '.join(map(repr, unknown))}; "
                               f"its domains: {', '.join(present)}")
        order = [t for t in order if refs[t][0] in domains]
        episodes = [e for e in episodes if isinstance(e, Mapping) and e.get("task") in set(order)]

    runs = config.get("runs")
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        runs = 1 + max((e.get("run", 0) for e in episodes if isinstance(e, Mapping)
                        and isinstance(e.get("run"), int)), default=0)

    cells: dict[tuple[str, int], dict[int, dict]] = defaultdict(dict)
    failures = []
    for i, ep in enumerate(episodes):
        w = f"{where}: episode {i}"
        record = Episode.from_json(ep, w)  # the structure, checked once; what needs the suite, here
        tid, run, status = record.task, record.run, record.status.value
        if tid not in refs:
            raise ResultsError(f"{w} is of task {tid!r}, which the results' suite does not list")
        if not 0 <= run < runs:
            raise ResultsError(f"{w} ({tid}) has run {run}, outside 0..{runs - 1} (config.runs = {runs})")
        index = record.index
        if index is None:
            index = len(cells[(tid, run)])  # files without an index: episodes in order
        if index in cells[(tid, run)]:
            raise ResultsError(f"{w}: task {tid} run {run} has episode {index} twice")
        if status == "ok":
            episode_value(ep, metrics[tid], f"{w} ({tid}, run {run})")  # checked before any arithmetic
        else:
            failures.append({"task": tid, "run": run, "index": index, "seed": ep.get("seed"),
                             "status": status, "error": str(ep.get("error") or "")})
        cells[(tid, run)][index] = ep

    tasks = []
    for tid in order:
        domain, low, high, n_ep = refs[tid]
        counts = Counter({k: 0 for k in (*STATUSES, "missing")})
        run_scores = np.full(runs, np.nan)
        per_run = []
        returns = []
        expected = n_ep or max((len(cells[(tid, r)]) for r in range(runs)), default=0)
        for r in range(runs):
            recorded = cells.get((tid, r), {})
            if len(recorded) > expected:
                raise ResultsError(f"{where}: task {tid} run {r} has {len(recorded)} episodes but the suite "
                                   f"expects {expected}")
            counts["missing"] += expected - len(recorded)
            for idx in range(expected):
                if idx not in recorded and n_ep:
                    failures.append({"task": tid, "run": r, "index": idx, "seed": None,
                                     "status": "missing", "error": "episode absent from the results file"})
            ok = []
            for idx in sorted(recorded):
                ep = recorded[idx]
                counts[ep["status"]] += 1
                if ep["status"] == "ok":
                    ok.append(episode_value(ep, metrics[tid]))
            returns.extend(ok)
            scores = (np.array(ok) - low) / (high - low)
            per_run.append(scores)
            if ok:
                run_scores[r] = np.mean(scores)
        tasks.append(TaskScores(tid, domain, low, high, expected, run_scores, tuple(per_run),
                                float(np.mean(returns)) if returns else math.nan, dict(counts)))

    subset = domains is not None  # before `domains` names the domains present
    domains = tuple(dict.fromkeys(t.domain for t in tasks))
    name = str(agent.get("name") or (agent.get("info") or {}).get("name") or
               (Path(path).stem if path else "agent"))
    return AgentScores(
        name=name, label=label or name, path=path, runs=runs, tasks=tuple(tasks), domains=domains,
        suite={k: suite.get(k) for k in ("name", "version", "hash")},
        training_steps=_training_steps(agent.get("info")),
        comparable=bool(data.get("comparable", True)),
        standard=bool(data.get("standard", True)) and not subset,
        failures=tuple(failures), llm=_llm_usage(episodes), timing=_timing(episodes))


def _llm_usage(episodes: list) -> dict | None:
    used = [e["llm"] for e in episodes if isinstance(e, Mapping) and isinstance(e.get("llm"), Mapping)]
    if not used:
        return None
    keys = ("calls", "prompt_tokens", "completion_tokens", "seconds")
    totals = {k: float(sum(u.get(k) or 0 for u in used)) for k in keys}
    return {"episodes": len(used), "total": totals,
            "per_episode": {k: totals[k] / len(used) for k in keys}}


def _timing(episodes: list) -> dict:
    out = {}
    for key in ("wall_seconds", "agent_seconds"):
        values = [e[key] for e in episodes if isinstance(e, Mapping)
                  and isinstance(e.get(key), (int, float)) and not isinstance(e.get(key), bool)]
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
                label = f"{a.name} @ {_steps_text(a.training_steps)}"
            else:
                stems = [Path(s.path).name if s.path else str(i) for i, s in enumerate(same)]
                label = f"{a.name} ({stems[same.index(a)]})"
        out.append(_relabel(a, label))
    return out


def _relabel(a: AgentScores, label: str) -> AgentScores:
    return AgentScores(**{**a.__dict__, "label": label})


def _steps_text(steps: int | None) -> str:
    if steps is None:
        return "?"
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if steps >= size and steps % (size // 10 or 1) == 0:
            return f"{steps / size:g}{unit} steps"
    return f"{steps} steps"


PUBLISHED_NOTE = "published, not re-run"


def published_agents(name: str, domain: str = "atari100k", family: str = "atari") -> list[AgentScores]:
    """The published per-run scores of table ``name`` (`polar_bench.published.TABLES`) as reference
    entries: one `AgentScores` per published algorithm, its tasks ``{family}/{game}`` in ``domain``,
    normalized with the table's own random and human scores (which suite v2's atari100k domain uses as
    its low and high references, so `check_same_tasks` holds). Their label says "published, not re-run":
    nobody here re-ran these agents, and their protocol is the papers', which docs/families/atari.md
    compares with ours."""
    from .published import get_table

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


def _overall_entries(agent: AgentScores, entries: list[DomainEntry], allow_incomplete: bool):
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
                out.append(_relabel(a, a.name))
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
