"""Suites: versioned, pinned sets of tasks with seeds and normalization constants.

A suite file is TOML (see suites/v1.toml and docs/suites.md). `load_suite` finds it by name (in
the installed package and in a checkout's ``suites/`` folder) or by path, validates every field
once, and computes its content hash: the SHA-256 of the canonical JSON form of the parsed file.
Results carry that hash; a released suite never changes (a change makes a new version).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SuiteError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["METRICS", "Reference", "TaskSpec", "Domain", "Suite", "load_suite", "available_suites",
           "episode_seed", "SUITES_DIR", "DEFAULT_SUITE"]

# The suite that `evaluate` runs when none is named and that the leaderboard shows first. Changing it
# is a release decision (docs/suites.md): the suite becomes the default once its baselines are verified.
DEFAULT_SUITE = "v1"

SUITES_DIR = Path(__file__).parent / "suites"
SEED_BOUND = 2**30
# What one episode of a task scores (a suite task's ``metric``): its return (the default, all of
# suite v1), or a value the trusted harness records about the episode (the episode record's
# ``harness`` object): ``success`` (1 when the task's goal was reached, else 0) or ``depth`` (the
# deepest dungeon level reached). Scoring reads them through `polar_bench.analysis.episode_value`.
METRICS = ("return", "success", "depth")


def episode_seed(suite_seed: int, task_id: str, index: int) -> int:
    """The documented rule for evaluation seeds: the first 8 hex digits of
    SHA-256(f"{suite_seed}/{task_id}/{index}") as an integer, modulo 2**30.

    Every run of an agent is evaluated on the same seeds, so runs differ only by the agent."""
    digest = hashlib.sha256(f"{suite_seed}/{task_id}/{index}".encode()).hexdigest()
    return int(digest[:8], 16) % SEED_BOUND


@dataclass(frozen=True)
class Reference:
    """A normalization reference: its value, where it comes from, and whether it was measured here."""

    value: float
    source: str
    measured: bool


@dataclass(frozen=True)
class TaskSpec:
    id: str
    domain: str
    episodes: int
    seeds: tuple[int, ...]
    low: Reference
    high: Reference
    options: Mapping[str, Any] = field(default_factory=dict)
    metric: str = "return"  # what an episode scores: its return, or a field of its harness record

    def normalize(self, ret: float) -> float:
        """(return - low) / (high - low)."""
        return (ret - self.low.value) / (self.high.value - self.low.value)


@dataclass(frozen=True)
class Domain:
    name: str
    description: str
    training: str
    budget: str


@dataclass(frozen=True)
class Suite:
    name: str
    version: str
    released: str
    description: str
    seed: int
    runs: int
    pins: Mapping[str, str]
    domains: tuple[Domain, ...]
    tasks: tuple[TaskSpec, ...]
    hash: str
    path: str
    raw: Mapping[str, Any] = field(repr=False, default_factory=dict)
    # the optional [llm] table: per-episode LLM budget enforced by the LLM proxy
    # ({"calls_per_episode": N | None, "tokens_per_episode": M | None}); None: unlimited
    llm: Mapping[str, int | None] | None = None

    def task(self, task_id: str) -> TaskSpec:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise SuiteError(f"suite {self.name} has no task {task_id!r}." + did_you_mean(task_id, self.task_ids))

    @property
    def task_ids(self) -> list[str]:
        return [t.id for t in self.tasks]

    def select(self, tasks: list[str] | None = None, domains: list[str] | None = None) -> list[TaskSpec]:
        """Tasks matching any of the globs in ``tasks`` and any of ``domains`` (all when None)."""
        chosen = list(self.tasks)
        if domains:
            unknown = [d for d in domains if d not in {x.name for x in self.domains}]
            if unknown:
                names = [x.name for x in self.domains]
                raise SuiteError(f"suite {self.name} has no domain {unknown[0]!r}; its domains are "
                                 f"{', '.join(names)}." + did_you_mean(unknown[0], names))
            chosen = [t for t in chosen if t.domain in domains]
        if tasks:
            chosen = [t for t in chosen if any(fnmatch.fnmatchcase(t.id, g) for g in tasks)]
        if not chosen:
            plain = [g for g in tasks or [] if not any(c in g for c in "*?[")]
            hint = did_you_mean(plain[0], [t.id for t in self.tasks]) if plain else ""
            raise SuiteError(
                f"no task of suite {self.name} matches --tasks {' '.join(tasks or [])!r}"
                f"{' in domains ' + ','.join(domains) if domains else ''}; list its tasks with "
                f"'python -m polar_bench describe {self.name}'." + hint)
        return chosen

    def summary_json(self, tasks: list[TaskSpec] | None = None) -> dict:
        """The part of the suite a results file embeds (enough to score without the suite file)."""
        return {
            "name": self.name,
            "version": self.version,
            "hash": self.hash,
            "seed": self.seed,
            "pins": dict(self.pins),
            "domains": [d.name for d in self.domains],
            "tasks": [{"id": t.id, "domain": t.domain, "low": t.low.value, "high": t.high.value,
                       "episodes": t.episodes, "seeds": list(t.seeds),
                       **({"metric": t.metric} if t.metric != "return" else {})} for t in (tasks or self.tasks)],
        }


def canonical_hash(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _search_dirs() -> list[Path]:
    dirs = [SUITES_DIR, Path.cwd() / "suites"]
    return [d for i, d in enumerate(dirs) if d.is_dir() and d.resolve() not in {x.resolve() for x in dirs[:i]}]


def available_suites() -> dict[str, Path]:
    """Suite name -> file, from the installed package and ./suites (the package wins on a clash)."""
    found: dict[str, Path] = {}
    for d in reversed(_search_dirs()):
        for p in sorted(d.glob("*.toml")):
            found[p.stem] = p
    return dict(sorted(found.items()))


def load_suite(name_or_path: str | Path) -> Suite:
    """Load and validate a suite by name (``"v1"``) or path (``"suites/v1.toml"``)."""
    path = Path(name_or_path)
    if not (path.suffix in (".toml",) or path.exists()):
        suites = available_suites()
        if str(name_or_path) not in suites:
            raise SuiteError(f"unknown suite {str(name_or_path)!r}; available: {', '.join(suites) or 'none'}."
                             + did_you_mean(str(name_or_path), suites)
                             + " Pass a suite name or the path of a .toml suite file.")
        path = suites[str(name_or_path)]
    if not path.is_file():
        raise SuiteError(f"suite file {str(path)!r} does not exist; pass a suite name "
                         f"({', '.join(available_suites())}) or an existing .toml file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: not valid TOML ({exc}); fix the file's syntax") from None
    return parse_suite(data, str(path))


def _req(table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in table:
        raise SuiteError(f"{where}: missing required field {key!r}")
    value = table[key]
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SuiteError(f"{where}: field {key!r} must be a finite number, got {value!r}")
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SuiteError(f"{where}: field {key!r} must be of type {kind.__name__}, got {value!r}")
    return value


def _reference(table: Any, where: str) -> Reference:
    if not isinstance(table, dict):
        raise SuiteError(f"{where}: must be a table with value, source and measured")
    unknown = set(table) - {"value", "source", "measured"}
    if unknown:
        raise SuiteError(f"{where}: unknown field {sorted(unknown)[0]!r} (allowed: value, source, measured)")
    source = _req(table, "source", str, where)
    if not source.strip():
        raise SuiteError(f"{where}: 'source' must say where the value comes from")
    return Reference(_req(table, "value", float, where), source, _req(table, "measured", bool, where))


_LLM_KEYS = ("calls_per_episode", "tokens_per_episode")


def _llm_budget(table: Any, path: str) -> dict[str, int | None] | None:
    """The optional [llm] table: positive integers ``calls_per_episode`` and ``tokens_per_episode``."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise SuiteError(f"{path} [llm]: must be a table with calls_per_episode and/or tokens_per_episode")
    unknown = set(table) - set(_LLM_KEYS)
    if unknown:
        raise SuiteError(f"{path} [llm]: unknown field {sorted(unknown)[0]!r}; allowed: {', '.join(_LLM_KEYS)}")
    for key, value in table.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SuiteError(f"{path} [llm]: {key} must be a positive integer, got {value!r}")
    if not table:
        raise SuiteError(f"{path} [llm]: name calls_per_episode and/or tokens_per_episode, or leave the table out")
    return {k: table.get(k) for k in _LLM_KEYS}


_SUITE_KEYS = {"name", "version", "released", "description", "seed", "runs", "episodes"}
_TASK_KEYS = {"id", "domain", "episodes", "seeds", "low", "high", "options", "metric"}


def parse_suite(data: Mapping[str, Any], path: str = "<memory>") -> Suite:
    """Validate parsed suite data and build the `Suite`. Every problem is a `SuiteError`."""
    head = data.get("suite")
    if not isinstance(head, dict):
        raise SuiteError(f"{path}: missing the [suite] table (name, version, seed, runs, episodes)")
    unknown = set(head) - _SUITE_KEYS
    if unknown:
        raise SuiteError(f"{path}: [suite] has unknown field {sorted(unknown)[0]!r}; "
                         f"allowed: {', '.join(sorted(_SUITE_KEYS))}")
    where = f"{path} [suite]"
    name = _req(head, "name", str, where)
    version = _req(head, "version", str, where)
    seed = _req(head, "seed", int, where)
    runs = _req(head, "runs", int, where)
    default_episodes = _req(head, "episodes", int, where)
    if runs < 1 or default_episodes < 1:
        raise SuiteError(f"{where}: runs and episodes must be at least 1")
    pins = data.get("pins", {})
    if not isinstance(pins, dict) or not all(isinstance(v, str) for v in pins.values()):
        raise SuiteError(f"{path} [pins]: must map package names to exact version strings")
    domains = _parse_domains(data.get("domains"), path)
    domain_names = [d.name for d in domains]
    tasks_raw = data.get("tasks")
    if not isinstance(tasks_raw, list) or not tasks_raw:
        raise SuiteError(f"{path}: needs at least one [[tasks]] table")
    tasks = []
    seen: set[str] = set()
    for i, t in enumerate(tasks_raw):
        tasks.append(_parse_task(t, f"{path} [[tasks]] #{i + 1}", path, seen, domain_names, default_episodes, seed))
    return Suite(
        name=name, version=version, released=str(head.get("released", "")),
        description=str(head.get("description", "")), seed=seed, runs=runs, pins=dict(pins),
        domains=tuple(domains), tasks=tuple(tasks), hash=canonical_hash(data), path=path, raw=data,
        llm=_llm_budget(data.get("llm"), path))


def _parse_domains(domains_raw: Any, path: str) -> list[Domain]:
    """The [[domains]] tables: at least one, each with a distinct name."""
    if not isinstance(domains_raw, list) or not domains_raw:
        raise SuiteError(f"{path}: needs at least one [[domains]] table")
    domains = []
    for i, d in enumerate(domains_raw):
        w = f"{path} [[domains]] #{i + 1}"
        if not isinstance(d, dict):
            raise SuiteError(f"{w}: must be a table")
        domains.append(Domain(_req(d, "name", str, w), _req(d, "description", str, w),
                              _req(d, "training", str, w), _req(d, "budget", str, w)))
    domain_names = [d.name for d in domains]
    if len(set(domain_names)) != len(domain_names):
        raise SuiteError(f"{path}: duplicate domain names in {domain_names}")
    return domains


def _parse_task(t: Any, w: str, path: str, seen: set[str], domain_names: list[str], default_episodes: int,
                seed: int) -> TaskSpec:
    """One [[tasks]] table (``w`` names it in errors); its id joins ``seen``, the ids before it."""
    if not isinstance(t, dict):
        raise SuiteError(f"{w}: must be a table")
    unknown = set(t) - _TASK_KEYS
    if unknown:
        raise SuiteError(f"{w}: unknown field {sorted(unknown)[0]!r}; allowed: {', '.join(sorted(_TASK_KEYS))}")
    tid = _req(t, "id", str, w)
    w = f"{path} task {tid}"
    if "/" not in tid:
        raise SuiteError(f"{w}: task ids look like 'family/name'")
    if tid in seen:
        raise SuiteError(f"{w}: listed twice")
    seen.add(tid)
    dom = _req(t, "domain", str, w)
    if dom not in domain_names:
        raise SuiteError(f"{w}: domain {dom!r} is not declared in [[domains]]" + did_you_mean(dom, domain_names))
    episodes = t.get("episodes", default_episodes)
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise SuiteError(f"{w}: episodes must be a positive integer, got {episodes!r}")
    if "seeds" in t:
        seeds = t["seeds"]
        if (not isinstance(seeds, list) or len(seeds) != episodes
                or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**31 for s in seeds)
                or len(set(seeds)) != len(seeds)):
            raise SuiteError(f"{w}: seeds must be {episodes} distinct integers in [0, 2**31)")
        seeds = tuple(seeds)
    else:
        seeds = tuple(episode_seed(seed, tid, k) for k in range(episodes))
    low = _reference(t.get("low"), f"{w} low")
    high = _reference(t.get("high"), f"{w} high")
    if not high.value > low.value:
        raise SuiteError(f"{w}: high reference ({high.value}) must be above low ({low.value})")
    options = t.get("options", {})
    if not isinstance(options, dict):
        raise SuiteError(f"{w}: options must be a table")
    metric = t.get("metric", "return")
    if metric not in METRICS:
        raise SuiteError(f"{w}: metric must be one of {', '.join(METRICS)}, got {metric!r}")
    return TaskSpec(tid, dom, episodes, seeds, low, high, options, metric)
