"""The typed model of a results file: `ResultsFile`, its embedded `ResultsSuite` of `SuiteTask`s, and
its `Episode` records with their `Status`.

Producers (evaluate, a worker that failed a unit, verify) build these and write ``to_json``; consumers
read with ``from_json``, which makes every structural check once (types, statuses, references, each
episode's task and run against the file's own suite). Scoring rules (a task's metric value) stay with
scoring, and the leaderboard adds only its own rules. The JSON Schema (``schemas/results-v1.json``)
lists the same fields; tests/test_results_model.py holds the two together. See docs/results.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import PurePath
from typing import Any, TypeGuard

from ..errors import ResultsError
from ..suite import METRICS

__all__ = ["Status", "Episode", "EPISODE_FIELDS", "EPISODE_REQUIRED", "SuiteTask", "ResultsSuite", "ResultsFile",
           "RESULTS_FIELDS"]


class Status(str, Enum):
    """How an episode ended."""

    OK = "ok"
    ENV_ERROR = "env_error"  # the environment raised
    AGENT_ERROR = "agent_error"  # the agent raised, died, broke a limit or returned an invalid action
    TIMEOUT = "timeout"  # past the step or episode deadline


# what every record has (the schema's "required")
EPISODE_REQUIRED = ("task", "run", "seed", "return", "length", "status")
# the fields of an episode record, in the order a record is written; any other key is the agent's
# own (``episode_info()``), kept as given after these
EPISODE_FIELDS = ("task", "run", "index", "seed", "return", "length", "status", "error", "wall_seconds",
                  "agent_seconds", "clipped_actions", "harness", "digest", "llm", "attempts")


def _int(rec: Mapping[str, Any], key: str, where: str, required: bool = True) -> int | None:
    value = rec.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ResultsError(f"{where}: {key!r} must be an integer, got {value!r}")
    return value


def _number(rec: Mapping[str, Any], key: str, where: str) -> float | None:
    value = rec.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ResultsError(f"{where}: {key!r} must be a number, got {value!r}")
    return value


# An episode record's fields other than return and status: written always, or only when set (index first).
_ALWAYS_WRITTEN = ("task", "run", "seed", "length", "error")
_WRITTEN_WHEN_SET = ("index", "wall_seconds", "agent_seconds", "clipped_actions", "harness", "digest", "llm",
                     "attempts")


@dataclass(frozen=True)
class Episode:
    """One episode record. ``ret`` is the record's ``return``; ``extra``, the agent's own keys."""

    task: str
    run: int
    seed: int
    ret: float | None
    length: int
    status: Status
    index: int | None = None  # absent in files made before it was recorded: the episodes' order
    error: str | None = None
    wall_seconds: float | None = None
    agent_seconds: float | None = None
    clipped_actions: int | None = None
    harness: dict | None = None  # what the harness reports about the episode (its metrics)
    digest: str | None = None  # the trajectory digest of a successful episode
    llm: dict | None = None  # LLM calls and tokens counted by the proxy (or the agent's own count)
    attempts: int | None = None  # plays of the unit, when more than one
    extra: dict = field(default_factory=dict)

    @classmethod
    def failed(cls, task: str, run: int, index: int, seed: int, status: Status | str, error: str) -> Episode:
        """The record of a unit that could not be played (its worker was lost, a harness failed to start)."""
        return cls(task=task, run=run, index=index, seed=seed, ret=None, length=0, status=Status(status),
                   error=error, wall_seconds=0.0, agent_seconds=0.0)

    @classmethod
    def from_json(cls, rec: Any, where: str = "episode") -> Episode:
        """Read a record, checking its structure; `ResultsError` naming ``where`` and the field."""
        if not isinstance(rec, Mapping):
            raise ResultsError(f"{where}: an episode must be an object, got {type(rec).__name__}")
        task = rec.get("task")
        if not isinstance(task, str):
            raise ResultsError(f"{where}: 'task' must be a string, got {task!r}")
        status_text = rec.get("status")
        try:
            status = Status(status_text)
        except ValueError:
            raise ResultsError(f"{where} ({task}) has unknown status {status_text!r}; expected one of "
                               f"{', '.join(s.value for s in Status)}") from None
        run = _int(rec, "run", where)
        assert run is not None  # required
        ret = _number(rec, "return", where)
        if status is Status.OK and (ret is None or not math.isfinite(ret)):
            raise ResultsError(f"{where} ({task}, run {run}) has status ok but return {rec.get('return')!r}; "
                               "a successful episode needs a finite return")
        seed, length = _int(rec, "seed", where), _int(rec, "length", where)
        assert seed is not None and length is not None  # required
        index = rec.get("index")  # anything but an integer: absent (the episodes' order)
        return cls(task=task, run=run, seed=seed, ret=ret, length=length, status=status,
                   index=index if isinstance(index, int) and not isinstance(index, bool) else None,
                   error=None if rec.get("error") is None else str(rec.get("error")),
                   wall_seconds=_number(rec, "wall_seconds", where), agent_seconds=_number(rec, "agent_seconds", where),
                   clipped_actions=_int(rec, "clipped_actions", where, required=False),
                   harness=dict(rec["harness"]) if isinstance(rec.get("harness"), Mapping) else None,
                   digest=rec.get("digest") if isinstance(rec.get("digest"), str) else None,
                   llm=dict(rec["llm"]) if isinstance(rec.get("llm"), Mapping) else None,
                   attempts=_int(rec, "attempts", where, required=False),
                   extra={k: v for k, v in rec.items() if k not in EPISODE_FIELDS})

    def __getitem__(self, key: str) -> Any:
        """The record's value under its results-file key (``episode["return"]``), for scripts written
        against the JSON records before the model existed; `KeyError` for a key the record lacks. The
        same value as ``to_json()[key]``, read without building the record."""
        if key in self.extra:   # last in to_json: the agent's own keys win
            return self.extra[key]
        if key == "return":
            return self.ret
        if key == "status":
            return self.status.value
        if key in _ALWAYS_WRITTEN or (key in _WRITTEN_WHEN_SET and getattr(self, key) is not None):
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """Like ``dict.get`` on the record as written."""
        try:
            return self[key]
        except KeyError:
            return default

    def to_json(self) -> dict:
        """The record as written: the fields in `EPISODE_FIELDS` order (the optional ones only when set),
        then the agent's own keys."""
        rec: dict[str, Any] = {"task": self.task, "run": self.run}
        if self.index is not None:
            rec["index"] = self.index
        rec.update({"seed": self.seed, "return": self.ret, "length": self.length, "status": self.status.value,
                    "error": self.error})
        for key in _WRITTEN_WHEN_SET[1:]:
            value = getattr(self, key)
            if value is not None:
                rec[key] = value
        rec.update(self.extra)
        return rec


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _need(mapping: Any, key: str, kind: Any, where: str) -> Any:
    if not isinstance(mapping, Mapping) or key not in mapping:
        raise ResultsError(f"{where}: missing {key!r}")
    value = mapping[key]
    if kind is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise ResultsError(f"{where}: {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


SUITE_TASK_FIELDS = ("id", "domain", "low", "high", "episodes", "seeds", "metric")


@dataclass(frozen=True)
class SuiteTask:
    """One task of the suite a results file embeds: its normalization references, episode count,
    seeds and metric. ``low`` and ``high`` keep the JSON's number type (an integer stays one)."""

    id: str
    domain: str
    low: float
    high: float
    episodes: int  # 0 when the record gives neither a positive count nor seeds
    seeds: tuple[int, ...] = ()
    metric: str = "return"
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, spec: Any, where: str) -> SuiteTask:
        tid = _need(spec, "id", str, where)
        domain = _need(spec, "domain", str, f"{where} ({tid})")
        low = _need(spec, "low", (int, float), f"{where} ({tid})")
        high = _need(spec, "high", (int, float), f"{where} ({tid})")
        outer = where.split(": suite task")[0]
        if not (math.isfinite(low) and math.isfinite(high)) or high == low:
            raise ResultsError(f"{outer}: task {tid} has unusable normalization references "
                               f"low={low!r}, high={high!r} (they must be finite and differ)")
        seeds = spec.get("seeds")
        seeds = tuple(seeds) if isinstance(seeds, list) else ()
        n_ep = spec.get("episodes")
        if not _is_int(n_ep) or n_ep < 1:
            n_ep = len(seeds)
        metric = spec.get("metric", "return")
        if metric not in METRICS:
            raise ResultsError(f"{outer}: task {tid} has unknown metric {metric!r}; expected one of "
                               f"{', '.join(METRICS)}")
        return cls(id=tid, domain=domain, low=low, high=high, episodes=n_ep, seeds=seeds, metric=metric,
                   extra={k: v for k, v in spec.items() if k not in SUITE_TASK_FIELDS})

    def to_json(self) -> dict:
        return {"id": self.id, "domain": self.domain, "low": self.low, "high": self.high,
                "episodes": self.episodes, "seeds": list(self.seeds),
                **({"metric": self.metric} if self.metric != "return" else {}), **self.extra}


SUITE_FIELDS = ("name", "version", "hash", "seed", "pins", "domains", "tasks")


@dataclass(frozen=True)
class ResultsSuite:
    """The part of the suite a results file embeds: enough to score it without the suite file."""

    name: str
    version: str
    hash: str
    tasks: tuple[SuiteTask, ...]
    seed: int | None = None
    pins: dict = field(default_factory=dict)
    domains: tuple[str, ...] | None = None  # absent in files made before it was recorded
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, suite: Any, where: str) -> ResultsSuite:
        if not isinstance(suite, Mapping):
            raise ResultsError(f"{where}: 'suite' must be an object, got {suite!r}"[:300])
        specs = _need(suite, "tasks", list, f"{where}: suite")
        if not specs:
            raise ResultsError(f"{where}: the suite lists no tasks")
        tasks, seen = [], set()
        for i, spec in enumerate(specs):
            task = SuiteTask.from_json(spec, f"{where}: suite task {i}")
            if task.id in seen:
                raise ResultsError(f"{where}: the suite lists task {task.id} twice")
            seen.add(task.id)
            tasks.append(task)
        domains = suite.get("domains")
        return cls(name=str(suite.get("name", "")), version=str(suite.get("version", "")),
                   hash=str(suite.get("hash", "")), tasks=tuple(tasks),
                   seed=suite.get("seed") if _is_int(suite.get("seed")) else None,
                   pins=dict(suite["pins"]) if isinstance(suite.get("pins"), Mapping) else {},
                   domains=tuple(domains) if isinstance(domains, list) else None,
                   extra={k: v for k, v in suite.items() if k not in SUITE_FIELDS})

    def task(self, task_id: str) -> SuiteTask | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "version": self.version, "hash": self.hash}
        if self.seed is not None:
            out["seed"] = self.seed
        out["pins"] = dict(self.pins)
        if self.domains is not None:
            out["domains"] = list(self.domains)
        out["tasks"] = [t.to_json() for t in self.tasks]
        out.update(self.extra)
        return out


# the top-level keys of a results file, in the order evaluate writes them (``seeds`` and
# ``harness_plugins`` only when used); any other key is kept after them
RESULTS_FIELDS = ("format_version", "polar_bench", "suite", "versions", "version_mismatches", "comparable",
                  "standard", "environment", "agent", "isolation", "config", "command", "started", "finished",
                  "episodes", "seeds", "harness_plugins")
_OPTIONAL = ("versions", "version_mismatches", "isolation", "seeds", "harness_plugins")


@dataclass(frozen=True)
class ResultsFile:
    """A results file: what was evaluated (suite, agent, settings, environment) and every episode.

    ``from_json`` checks the structure once (`ResultsError` naming the file and the field); ``to_json``
    gives the object evaluate writes. ``path`` is where it was read from (not part of the file)."""

    format_version: int
    suite: ResultsSuite
    agent: dict
    config: dict
    episodes: tuple[Episode, ...]
    polar_bench: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    comparable: bool = True
    standard: bool = True
    command: str = ""
    started: str = ""
    finished: str = ""
    versions: dict | None = None
    version_mismatches: dict | None = None
    isolation: dict | None = None
    seeds: dict | None = None  # {"kind": "fresh", "entropy": ...}: played on fresh seeds, not the suite's
    harness_plugins: list | None = None
    extra: dict = field(default_factory=dict)
    path: str | None = field(default=None, compare=False)

    @classmethod
    def from_json(cls, data: Any, source: str | None = None, *, schema: bool = True) -> ResultsFile:
        """Check and read results data: the format version, the JSON Schema (``schema=False`` skips it, for
        data this polar_bench has just validated), then what the schema cannot say: finite, distinct
        references, a task listed once, each episode's task and run in the file's own suite, no
        episode twice."""
        where = source or "results"
        if not isinstance(data, Mapping):
            raise ResultsError(f"{where}: a results file is a JSON object, got {type(data).__name__}")
        from . import check_format_version, validate_results_data

        check_format_version(data, where)
        if schema:
            validate_results_data(data, where)
        suite = ResultsSuite.from_json(data.get("suite"), where)
        config = data["config"] if isinstance(data.get("config"), Mapping) else {}
        raw = _need(data, "episodes", list, where)
        runs = config.get("runs")
        if not _is_int(runs) or runs < 1:
            runs = 1 + max((e["run"] for e in raw if isinstance(e, Mapping) and _is_int(e.get("run"))), default=0)
        known = {t.id for t in suite.tasks}
        episodes: list[Episode] = []
        positions: dict[tuple[str, int], set[int]] = {}  # (task, run) -> the indexes seen
        for i, rec in enumerate(raw):
            w = f"{where}: episode {i}"
            ep = Episode.from_json(rec, w)
            if ep.task not in known:
                raise ResultsError(f"{w} is of task {ep.task!r}, which the results' suite does not list")
            if not 0 <= ep.run < runs:
                raise ResultsError(f"{w} ({ep.task}) has run {ep.run}, outside 0..{runs - 1} (config.runs = {runs})")
            seen = positions.setdefault((ep.task, ep.run), set())
            index = len(seen) if ep.index is None else ep.index  # files without an index: episodes in order
            if index in seen:
                raise ResultsError(f"{w}: task {ep.task} run {ep.run} has episode {index} twice")
            seen.add(index)
            episodes.append(ep)
        agent = data.get("agent")
        return cls(format_version=int(data["format_version"]), suite=suite,
                   agent=dict(agent) if isinstance(agent, Mapping) else {}, config=dict(config),
                   episodes=tuple(episodes),
                   polar_bench=dict(data.get("polar_bench") or {}), environment=dict(data.get("environment") or {}),
                   comparable=bool(data.get("comparable", True)), standard=bool(data.get("standard", True)),
                   command=str(data.get("command") or ""), started=str(data.get("started") or ""),
                   finished=str(data.get("finished") or ""),
                   **{k: data[k] for k in _OPTIONAL if k in data},
                   extra={k: v for k, v in data.items() if k not in RESULTS_FIELDS}, path=source)

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        for key in RESULTS_FIELDS:
            if key == "suite":
                out[key] = self.suite.to_json()
            elif key == "episodes":
                out[key] = [e.to_json() for e in self.episodes]
            elif key not in _OPTIONAL or getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(self.extra)
        return out

    @property
    def data(self) -> dict:
        """The file's JSON object (`to_json`), for scripts written before the model existed."""
        return self.to_json()

    @property
    def runs(self) -> int:
        """The number of runs (``config.runs``; else one more than the highest run recorded)."""
        runs = self.config.get("runs")
        if _is_int(runs) and runs >= 1:
            return int(runs)
        return 1 + max((e.run for e in self.episodes), default=0)

    @property
    def agent_name(self) -> str:
        stem = PurePath(str(self.agent.get("path") or self.path or "agent")).stem
        return str(self.agent.get("name") or self.agent_info.get("name") or stem)

    @property
    def agent_info(self) -> dict:
        info = self.agent.get("info")
        return dict(info) if isinstance(info, Mapping) else {}

    @property
    def fresh(self) -> bool:
        """Whether the episodes were played on fresh seeds (evaluate --fresh-seeds), not the suite's."""
        return self.seeds is not None

    def status_counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        for ep in self.episodes:
            counts[ep.status.value] += 1
        return counts
