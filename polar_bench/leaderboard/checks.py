"""The checks a submission must pass before it joins the leaderboard.

`check_submission` runs every check on a results file and returns every problem it finds (never only
the first). The results format's own rules (version, schema) come from `polar_bench.results`; the
rest are the leaderboard's: a released suite, its pins, completeness, statuses, finite numbers,
episodes the task can produce, a summary that the episodes give, string sizes and ``AGENT_INFO``.
SUBMISSION.md documents every rule; tests/test_leaderboard_checks.py has a crafted bad file for each.

The module stays over 500 lines on purpose: one function per rule of SUBMISSION.md's table, run in
order by `check_data`, so that the table and the code can be read side by side.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np

from .. import scoring
from ..report import CONTROL_CHARS
from ..results import FORMAT_VERSION, ResultsFile, format_version_problem, results_schema, schema_problems
from ..suite import SUITES_DIR, Suite, load_suite

__all__ = ["Problem", "check_submission", "check_data", "released_suites", "recompute_summary",
           "CHECKS", "MAX_FILE_BYTES", "MAX_STRING", "MAX_INFO_STRING", "MAX_NAME", "SUMMARY_KEYS"]

MAX_FILE_BYTES = 64 * 2**20  # a full v1 evaluation with 3 runs is about 0.4 MiB
MAX_STRING = 20_000          # any string (the schema's largest bound, an episode's error text)
MAX_KEY = 200                # any object key
MAX_INFO_STRING = 2_000      # a string in AGENT_INFO (description, authors, license, ...)
MAX_NAME = 100               # AGENT_INFO["name"]
SUMMARY_TOLERANCE = 1e-6     # relative, for numbers of a summary in the file

# The checks, in the order they run and are reported.
CHECKS = ("file", "format", "schema", "suite", "pins", "complete", "status", "finite", "bounds", "summary",
          "strings", "agent_info", "isolation")

# Keys of an optional top-level "summary" object, each recomputed from the episodes.
SUMMARY_KEYS = ("episodes", "tasks", "domains", "overall")
SUMMARY_METRICS = ("iqm", "mean", "median", "optimality_gap")


@dataclass(frozen=True)
class Problem:
    """One reason to reject a submission: the check that found it, where (a JSON path or an
    episode), and what is wrong, with the fix where there is one."""

    check: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.where}: {self.message}" if self.where else f"[{self.check}] {self.message}"


# ---------------------------------------------------------------------------------------------------
# Released suites


@cache
def _released() -> tuple[Suite, ...]:
    return tuple(load_suite(p) for p in sorted(SUITES_DIR.glob("*.toml")))


def released_suites() -> dict[str, Suite]:
    """Content hash -> suite, for every suite shipped inside the polar_bench package (a suite in a
    checkout's or the user's ``suites/`` folder does not count: a leaderboard ranks released suites)."""
    return {s.hash: s for s in _released()}


# ---------------------------------------------------------------------------------------------------
# Helpers


def _walk(obj: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """Every value in ``obj`` with its JSON path; the bool is True for object keys."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            sub = f"{path}/{k}" if path else str(k)
            yield sub, k, True
            yield from _walk(v, sub)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}/{i}" if path else str(i))
    else:
        yield path, obj, False


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _episode_where(i: int, ep: Any) -> str:
    if isinstance(ep, dict):
        return f"episodes/{i} ({ep.get('task')}, run {ep.get('run')}, seed {ep.get('seed')})"
    return f"episodes/{i}"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Context:
    """What the checks share: the data, the matched released suite, the problems."""

    def __init__(self, data: dict):
        self.data = data
        self.problems: list[Problem] = []
        self.schema_paths: set[str] = set()
        self.suite: Suite | None = None

    def add(self, check: str, where: str, message: str) -> None:
        self.problems.append(Problem(check, where, message))

    def get(self, *keys: str, default: Any = None) -> Any:
        obj: Any = self.data
        for k in keys:
            if not isinstance(obj, dict) or k not in obj:
                return default
            obj = obj[k]
        return obj


# ---------------------------------------------------------------------------------------------------
# The checks


def _check_format(ctx: _Context) -> None:
    if format_version_problem(ctx.data) is not None:
        ctx.add("format", "format_version",
                f"format version {_short(ctx.data.get('format_version'))} is not accepted; the leaderboard takes "
                f"results format {FORMAT_VERSION} (written by 'python -m polar_bench evaluate' of this polar_bench)")


def _check_schema(ctx: _Context) -> None:
    for path, message in schema_problems(ctx.data):  # the results format's own rules, every one of them
        if path == "format_version":
            continue  # reported by the format check
        ctx.schema_paths.add(path)
        ctx.add("schema", path or "(top level)", message)
    known = set(results_schema()["properties"]) | {"summary"}
    for key in ctx.data:
        if key not in known:
            ctx.add("schema", str(key)[:MAX_KEY],
                    "unknown top-level key; a submission holds the results format's keys only (and an "
                    "optional 'summary', checked against the episodes), so that nothing in it is unchecked")


def _check_suite(ctx: _Context) -> None:
    suite = ctx.get("suite")
    if not isinstance(suite, dict):
        ctx.add("suite", "suite", "missing; a results file embeds its suite")
        return
    released = released_suites()
    match = released.get(str(suite.get("hash")))
    if match is None:
        names = ", ".join(f"{s.name} ({h})" for h, s in released.items())
        ctx.add("suite", "suite/hash",
                f"{_short(suite.get('hash'), 80)} is not the hash of a released suite (released: {names}); "
                f"evaluate on a released suite, e.g. --suite v1, without editing its file")
        return
    ctx.suite = match
    want = match.summary_json()
    for key in ("name", "version", "seed", "pins", "domains"):
        if key in suite and suite[key] != want[key] or key not in suite and key != "domains":
            ctx.add("suite", f"suite/{key}", f"{_short(suite.get(key))} differs from released suite "
                    f"{match.name}'s {_short(want[key])}")
    tasks = suite.get("tasks")
    if not isinstance(tasks, list):
        return
    by_id = {t.get("id"): t for t in tasks if isinstance(t, dict)}
    want_tasks = {t["id"]: t for t in want["tasks"]}
    for tid in want_tasks:
        if tid not in by_id:
            ctx.add("suite", "suite/tasks", f"task {tid} of suite {match.name} is missing")
    for i, t in enumerate(tasks):
        tid = t.get("id") if isinstance(t, dict) else None
        if tid not in want_tasks:
            ctx.add("suite", f"suite/tasks/{i}", f"task {_short(tid)} is not in suite {match.name}")
            continue
        for key in ("domain", "low", "high", "episodes", "seeds"):
            if t.get(key) != want_tasks[tid][key]:
                ctx.add("suite", f"suite/tasks/{i}/{key}",
                        f"{tid}: {_short(t.get(key))} differs from the released suite's "
                        f"{_short(want_tasks[tid][key])}")
    if [t.get("id") for t in tasks if isinstance(t, dict)] != list(want_tasks) and set(by_id) == set(want_tasks):
        ctx.add("suite", "suite/tasks", f"tasks are not in suite {match.name}'s order")


def _check_pins(ctx: _Context) -> None:
    if ctx.get("comparable") is not True:
        ctx.add("pins", "comparable", "is not true: installed versions differed from the suite's pins "
                "(--allow-version-mismatch); re-run evaluate with the pinned versions installed")
    mismatches = ctx.get("version_mismatches")
    if mismatches:
        for pkg, v in (mismatches.items() if isinstance(mismatches, dict) else []):
            ctx.add("pins", f"version_mismatches/{pkg}", f"recorded mismatch {_short(v, 120)}")
    if ctx.suite is None:
        return
    versions = ctx.get("versions")
    if not isinstance(versions, dict):
        ctx.add("pins", "versions", "missing: the installed versions of the pinned packages")
        return
    for pkg, wanted in ctx.suite.pins.items():
        have = versions.get(pkg)
        if have != wanted:
            ctx.add("pins", f"versions/{pkg}", f"{_short(have)} installed; suite {ctx.suite.name} pins {wanted}")


def _check_complete(ctx: _Context) -> None:
    suite = ctx.suite
    if ctx.get("seeds") is not None:
        ctx.add("complete", "seeds", "the episodes were played on fresh seeds (evaluate --fresh-seeds), not the "
                "suite's: they measure generalisation and cannot be an entry; evaluate without --fresh-seeds")
    if ctx.get("standard") is not True:
        ctx.add("complete", "standard", "is not true: the evaluation used non-standard settings (a subset of "
                "tasks, --episodes or fewer runs); run the full suite")
    if ctx.get("config", "episodes_override") is not None:
        ctx.add("complete", "config/episodes_override",
                f"is {_short(ctx.get('config', 'episodes_override'))}; run the suite's own number of episodes")
    runs = ctx.get("config", "runs")
    if suite is None:
        ctx.add("complete", "", "not checked: the suite is not a released one (see the suite problems)")
        return
    if not _is_int(runs):
        ctx.add("complete", "config/runs", f"{_short(runs)} is not a number of runs")
        return
    if runs < suite.runs:
        ctx.add("complete", "config/runs", f"{runs} run(s); suite {suite.name} asks for at least {suite.runs} "
                "independently trained runs (evaluate --runs)")
    tasks = ctx.get("config", "tasks")
    if isinstance(tasks, list) and tasks != suite.task_ids:
        missing = [t for t in suite.task_ids if t not in tasks]
        ctx.add("complete", "config/tasks", "not the suite's tasks" +
                (f" (missing {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''})" if missing else ""))
    specs = {t.id: t for t in suite.tasks}
    expected = {(t.id, r, s) for t in suite.tasks for r in range(runs) for s in t.seeds}
    seen: Counter = Counter()
    episodes = ctx.get("episodes")
    for i, ep in enumerate(episodes if isinstance(episodes, list) else []):
        if not isinstance(ep, dict):
            continue
        key: tuple[Any, Any, Any] = (ep.get("task"), ep.get("run"), ep.get("seed"))
        seen[key] += 1
        where = _episode_where(i, ep)
        if key not in expected:
            tid, run, seed = key
            if tid not in specs:
                why = f"task {_short(tid)} is not in suite {suite.name}"
            elif not _is_int(run) or not 0 <= run < int(runs):
                why = f"run {_short(run)} is outside 0..{runs - 1} (config/runs = {runs})"
            else:
                why = f"seed {_short(seed)} is not one of {tid}'s evaluation seeds"
            ctx.add("complete", where, f"unexpected episode: {why}")
            continue
        index = ep.get("index")
        seeds = specs[key[0]].seeds
        if index is not None and (not _is_int(index) or not 0 <= index < len(seeds) or seeds[index] != key[2]):
            ctx.add("complete", where, f"index {_short(index)} does not match its seed "
                    f"(seed {key[2]} is episode {seeds.index(key[2])} of {key[0]})")
    for key, n in sorted(seen.items(), key=lambda kv: str(kv[0])):
        if n > 1 and key in expected:
            ctx.add("complete", f"{key[0]}, run {key[1]}, seed {key[2]}", f"recorded {n} times; exactly once expected")
    absent = sorted(expected - set(seen), key=lambda k: (suite.task_ids.index(k[0]), k[1],
                                                          specs[k[0]].seeds.index(k[2])))
    for tid, run, seed in absent:
        ctx.add("complete", f"{tid}, run {run}, seed {seed}", "missing: every task × run × seed must be "
                "in the file once")


def _check_status(ctx: _Context) -> None:
    episodes = ctx.get("episodes")
    for i, ep in enumerate(episodes if isinstance(episodes, list) else []):
        if not isinstance(ep, dict):
            continue
        status = ep.get("status")
        if status != "ok":
            lines = str(ep.get("error") or "").strip().splitlines()
            last = lines[-1][:200] if lines else "no error text"
            ctx.add("status", _episode_where(i, ep), f"status {_short(status)} ({last}); a submission has "
                    "every episode ok: fix the cause and play the failed episodes again with the same evaluate "
                    "command and --retry-failed (a changed agent file starts afresh)")
        elif not _is_num(ep.get("return")):
            ctx.add("status", _episode_where(i, ep), f"status ok without a numeric return ({_short(ep.get('return'))})")


def _check_finite(ctx: _Context) -> None:
    for path, value, is_key in _walk(ctx.data):
        if not is_key and isinstance(value, float) and not math.isfinite(value):
            ctx.add("finite", path, f"{value} is not a finite number (NaN and infinities are not allowed)")


@dataclass(frozen=True)
class _Limits:
    max_steps: int
    reward_range: tuple[float, float]
    bounds: Callable[[int], tuple[float, float]]


@cache
def _task_limits(suite_hash: str, task_id: str) -> _Limits | str:
    """The step limit and return bounds of one task of a released suite, from its harness (built
    with the suite's options, never reset), or why the harness could not be built."""
    from ..harness import make

    spec = next(t for t in released_suites()[suite_hash].tasks if t.id == task_id)
    try:
        harness = make(task_id, **dict(spec.options))
    except Exception as exc:  # noqa: BLE001 - reported as a problem, with the fix
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    harness.close()  # return_bounds reads only the task's description, not the native env
    info = harness.task_info
    lo, hi = info.reward_range
    return _Limits(int(info.max_episode_steps), (float(lo), float(hi)), harness.return_bounds)


def _within(value: float, lo: float, hi: float) -> bool:
    """Within [lo, hi] with the slack the harness allows a step's reward (`reward_slack`)."""
    from ..harness.base import reward_slack

    return lo - reward_slack(lo) <= value <= hi + reward_slack(hi)


def _check_bounds(ctx: _Context) -> None:
    """Every successful episode must be one the task can produce: its length within the task's step
    limit, its return within the per-step reward range times the length (and the family's bound on
    a whole episode, where it has one). The harness enforces that range on every step it plays."""
    if ctx.suite is None:
        return
    from ..analysis import episode_value
    from ..errors import ResultsError

    episodes = ctx.get("episodes")
    metrics = {t.id: t.metric for t in ctx.suite.tasks}
    unbuildable: set[str] = set()
    for i, ep in enumerate(episodes if isinstance(episodes, list) else []):
        if not isinstance(ep, dict) or ep.get("status") != "ok" or ep.get("task") not in metrics:
            continue
        if metrics[ep["task"]] != "return":
            try:
                episode_value(ep, metrics[ep["task"]], "it")
            except ResultsError as exc:
                ctx.add("bounds", _episode_where(i, ep), str(exc).replace("it is scored", f"{ep['task']} is scored", 1))
        length, ret = ep.get("length"), ep.get("return")
        if not isinstance(length, int) or isinstance(length, bool) or \
                not isinstance(ret, (int, float)) or isinstance(ret, bool):
            continue
        limits = _task_limits(ctx.suite.hash, ep["task"])
        if isinstance(limits, str):
            if ep["task"] not in unbuildable:
                unbuildable.add(ep["task"])
                ctx.add("bounds", ep["task"], f"cannot build the task to check its episodes ({limits}); "
                        "install the suite's packages (README, Install) and check again")
            continue
        if not 1 <= length <= limits.max_steps:
            ctx.add("bounds", _episode_where(i, ep), f"length {length} is impossible: {ep['task']} ends "
                    f"episodes within 1 to {limits.max_steps} steps")
            continue
        lo, hi = limits.bounds(length)
        if not _within(ret, lo, hi):
            ctx.add("bounds", _episode_where(i, ep), f"return {_short(ret)} is impossible: an episode of "
                    f"{length} steps of {ep['task']} returns {lo:.6g} to {hi:.6g} (per step "
                    f"{limits.reward_range[0]:g} to {limits.reward_range[1]:g})")


def _close(a: Any, b: float) -> bool:
    return _is_num(a) and math.isfinite(a) and math.isfinite(b) and \
        abs(a - b) <= SUMMARY_TOLERANCE * max(1.0, abs(b))


def recompute_summary(data: dict) -> dict:
    """The summary of a results file, computed from its episodes (the form SUBMISSION.md documents):
    ``episodes`` (the count), ``tasks`` (per task: ``mean_return`` over all episodes and
    ``normalized_score``, the mean over runs of each run's mean normalized score), ``domains`` (per
    domain: the point estimates of IQM, mean, median and optimality gap over the runs × tasks
    matrix) and ``overall`` (the equal-weight mean over domains of each of those)."""
    from .. import analysis

    agent = analysis.agent_scores(ResultsFile.from_json(data, schema=False))  # the schema check ran already
    tasks = {t.task_id: {"mean_return": t.mean_return, "normalized_score": float(np.mean(t.run_scores))}
             for t in agent.tasks}
    domains = {}
    for d in agent.domains:
        x = np.stack([t.run_scores for t in agent.domain_tasks(d)], axis=1)
        domains[d] = {"iqm": scoring.iqm(x), "mean": scoring.mean(x), "median": scoring.median(x),
                      "optimality_gap": scoring.optimality_gap(x)}
    overall = {m: float(np.mean([domains[d][m] for d in domains])) for m in SUMMARY_METRICS}
    return {"episodes": len(data["episodes"]), "tasks": tasks, "domains": domains, "overall": overall}


def _compare_summary(ctx: _Context, given: Any, want: Any, path: str) -> None:
    if isinstance(want, dict):
        if not isinstance(given, dict):
            ctx.add("summary", path, f"{_short(given)} should be an object")
            return
        for key, value in given.items():
            if key not in want:
                ctx.add("summary", f"{path}/{key}", "cannot be recomputed from the episodes; remove it "
                        f"(a summary may hold {', '.join(want) if path != 'summary' else ', '.join(SUMMARY_KEYS)})")
            else:
                _compare_summary(ctx, value, want[key], f"{path}/{key}")
        return
    if _is_int(want):
        if given != want:
            ctx.add("summary", path, f"{_short(given)} but the episodes give {want}")
    elif not _close(given, want):
        ctx.add("summary", path, f"{_short(given)} but the episodes give {want!r}")


def _check_summary(ctx: _Context) -> None:
    if "summary" not in ctx.data:
        return
    given = ctx.data["summary"]
    if not isinstance(given, dict):
        ctx.add("summary", "summary", "must be an object (see SUBMISSION.md) or absent")
        return
    if any(p.check in ("schema", "complete", "status", "finite") for p in ctx.problems):
        ctx.add("summary", "summary", "not recomputed: the episodes have problems (listed above)")
        return
    _compare_summary(ctx, given, recompute_summary(ctx.data), "summary")


def _check_strings(ctx: _Context) -> None:
    for path, value, is_key in _walk(ctx.data):
        if not isinstance(value, str):
            continue
        limit = MAX_KEY if is_key else (MAX_INFO_STRING if path.startswith("agent/info/") else MAX_STRING)
        if len(value) > limit and path not in ctx.schema_paths:
            what = "key" if is_key else "string"
            ctx.add("strings", path if not is_key else path.rsplit("/", 1)[0] + "/" + value[:40] + "...",
                    f"{what} of {len(value):,} characters; at most {limit:,} allowed here")


_URL = re.compile(r"^https?://[^\s<>\"'`]+$")


def _text(ctx: _Context, value: Any, where: str, what: str, limit: int = MAX_INFO_STRING) -> bool:
    if not isinstance(value, str) or not value.strip():
        ctx.add("agent_info", where, f"{what} missing or empty ({_short(value)})")
        return False
    if CONTROL_CHARS.search(value):
        ctx.add("agent_info", where, f"{what} contains a control character (a line break, tab, ...); "
                "keep it on one line")
        return False
    if len(value) > limit:
        ctx.add("agent_info", where, f"{what} has {len(value):,} characters; at most {limit:,}")
        return False
    return True


def _check_agent_info(ctx: _Context) -> None:
    path = ctx.get("agent", "path")
    if isinstance(path, str) and (PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute()
                                  or ".." in PurePosixPath(path).parts):
        ctx.add("agent_info", "agent/path", f"{_short(path)} is not a path inside the repository that holds the "
                "agent; evaluate from that repository's root with a relative path (e.g. agent.py)")
    info = ctx.get("agent", "info")
    w = "agent/info"
    if not isinstance(info, dict):
        ctx.add("agent_info", w, "AGENT_INFO is missing; define it in agent.py (see SUBMISSION.md)")
        return
    _text(ctx, info.get("name"), f"{w}/name", "name", MAX_NAME)
    authors = info.get("authors")
    if not isinstance(authors, list) or not authors:
        ctx.add("agent_info", f"{w}/authors", f"must be a non-empty list of names ({_short(authors)})")
    else:
        for i, a in enumerate(authors):
            _text(ctx, a, f"{w}/authors/{i}", "author")
    url = info.get("url")
    if _text(ctx, url, f"{w}/url", "url") and not _URL.match(str(url)):
        ctx.add("agent_info", f"{w}/url", f"{_short(url)} is not an http(s) URL (where the code and "
                "weights can be found)")
    _text(ctx, info.get("license"), f"{w}/license", "license (of the agent's code, e.g. an SPDX id such as MIT)")
    _check_budget(ctx, info.get("training_steps", info.get("training_budget")), f"{w}/training_steps")
    _check_llm(ctx, info)


def _check_budget(ctx: _Context, steps: Any, where: str) -> None:
    domains = [d.name for d in ctx.suite.domains] if ctx.suite else None
    if not isinstance(steps, dict):
        ctx.add("agent_info", where, f"must map every domain to the environment steps used for training "
                f"(e.g. {{{', '.join(repr(d) + ': 1000000' for d in (domains or ['classic'])[:2])}, ...}}; "
                f"{{}} for an agent without training); got {_short(steps)}")
        return
    # an agent trained for several suites names the domains of all of them (a v1 submission of an agent
    # that also trained for v2's atari100k); a name no released suite has is a mistake
    known = {d.name for suite in _released() for d in suite.domains}
    for key, value in steps.items():
        if ctx.suite is not None and domains is not None and key not in domains and key not in known:
            ctx.add("agent_info", f"{where}/{key}", f"is not a domain of suite {ctx.suite.name} "
                    f"({', '.join(domains)}) or of any other released suite")
        if not _is_int(value) or value < 0:
            ctx.add("agent_info", f"{where}/{key}", f"{_short(value)} is not a non-negative integer number of "
                    "environment steps")
    if steps and domains is not None:
        for d in domains:
            if d not in steps:
                ctx.add("agent_info", f"{where}/{d}", "missing; give every domain's training budget "
                        "(0 for a domain not trained on)")


def _check_llm(ctx: _Context, info: dict) -> None:
    where = "agent/info/llm"
    if "llm" not in info:
        ctx.add("agent_info", where, "missing; None for an agent without an LLM, else the model "
                "(e.g. {'model': 'qwen2.5-0.5b-instruct-q4', 'provider': 'llama.cpp'})")
        return
    llm = info["llm"]
    if isinstance(llm, dict):
        _text(ctx, llm.get("model"), f"{where}/model", "LLM model")
    elif llm is not None and not isinstance(llm, str):
        ctx.add("agent_info", where, f"{_short(llm)} must be None, a model name or {{'model': ..., ...}}")
    elif isinstance(llm, str):
        _text(ctx, llm, where, "LLM model")
    episodes = ctx.get("episodes")
    episodes = [e for e in episodes if isinstance(e, dict)] if isinstance(episodes, list) else []
    with_usage = sum(1 for e in episodes if isinstance(e.get("llm"), dict))
    if llm is not None and with_usage < len(episodes):
        ctx.add("agent_info", "episodes", f"AGENT_INFO names an LLM but {len(episodes) - with_usage} of "
                f"{len(episodes)} episodes have no 'llm' token counts; report them from episode_info()")
    if llm is None and any(isinstance(e.get("llm"), dict) and e["llm"].get("calls") for e in episodes):
        ctx.add("agent_info", where, "is None but episodes record LLM calls; name the model")


def _check_isolation(ctx: _Context) -> None:
    """The agent ran in a process of its own. A file without ``isolation`` predates isolation and is
    accepted for now (the committed entries); ``in-process`` (evaluate --in-process) is refused. The
    schema check reports any other mode."""
    if ctx.get("isolation", "mode") == "in-process":
        ctx.add("isolation", "isolation/mode", "the agent ran inside the evaluation workers (--in-process, for "
                "debugging only, not isolated); run evaluate again without --in-process")


_RUNNERS: dict[str, Callable[[_Context], None]] = {
    "format": _check_format, "schema": _check_schema, "suite": _check_suite, "pins": _check_pins,
    "complete": _check_complete, "status": _check_status, "finite": _check_finite, "bounds": _check_bounds,
    "summary": _check_summary, "strings": _check_strings, "agent_info": _check_agent_info,
    "isolation": _check_isolation,
}


def root_cause(data: Any) -> str | None:
    """Why a results file is not a submittable result at all, in one line with the command that makes
    one, or None: a subset of the tasks, fewer runs, an episodes override, fresh seeds or no isolation
    (each makes many problems of the other checks, which this line explains)."""
    if not isinstance(data, dict):
        return None
    config: dict = data["config"] if isinstance(data.get("config"), dict) else {}
    suite_data: dict = data["suite"] if isinstance(data.get("suite"), dict) else {}
    suite = released_suites().get(str(suite_data.get("hash")))
    why = []
    if data.get("seeds") is not None:
        why.append("its episodes were played on fresh seeds")
    if suite is not None and isinstance(config.get("tasks"), list) and config["tasks"] != suite.task_ids:
        why.append(f"it has {len(config['tasks'])} of the suite's {len(suite.task_ids)} tasks")
    if suite is not None and _is_int(config.get("runs")) and config["runs"] < suite.runs:
        why.append(f"it has {config['runs']} run(s) of the {suite.runs} the suite asks")
    if config.get("episodes_override") is not None:
        why.append(f"it played {_short(config.get('episodes_override'))} episodes per task (--episodes)")
    isolation: dict = data["isolation"] if isinstance(data.get("isolation"), dict) else {}
    if isolation.get("mode") == "in-process":
        why.append("the agent ran in-process (--in-process)")
    if not why:
        return None
    agent = (data.get("agent") or {}).get("path") if isinstance(data.get("agent"), dict) else None
    name = suite.name if suite is not None else suite_data.get("name", "v1")
    return (f"not a submittable result: {'; '.join(why)}. Make one with: python -m polar_bench evaluate "
            f"{agent or 'agent.py'} --suite {name} --out results.json (the problems below follow from this)")


def check_data(data: Any) -> list[Problem]:
    """Every problem of parsed results data (an empty list: it may join the leaderboard)."""
    if not isinstance(data, dict):
        return [Problem("file", "", f"a results file is a JSON object, got {type(data).__name__}")]
    ctx = _Context(data)
    for name, run in _RUNNERS.items():
        try:
            run(ctx)
        except (TypeError, KeyError, AttributeError, ValueError, IndexError) as exc:
            ctx.add(name, "", f"could not be completed on this malformed file ({type(exc).__name__}: "
                    f"{str(exc)[:120]}); fix the problems above first")
    return ctx.problems


def check_submission(path: str | Path) -> tuple[dict | None, list[Problem]]:
    """Read a results file and run every check: ``(data, problems)``; ``data`` is None when the file
    could not be read as JSON at all."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        return None, [Problem("file", str(p), f"cannot be read ({exc.strerror})")]
    if size > MAX_FILE_BYTES:
        return None, [Problem("file", str(p), f"{size:,} bytes; at most {MAX_FILE_BYTES:,} allowed")]
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, [Problem("file", str(p), f"not UTF-8 text ({exc})")]
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        return None, [Problem("file", str(p), f"not valid JSON ({str(exc)[:200]})")]
    return data, check_data(data)
