"""`run_evaluation`: from a configuration to a results file, through the journal."""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import __version__
from .._optional import version_of
from ..agent import agent_file_hash
from ..artifacts import played_pins
from ..clock import utc_now
from ..errors import AgentLoadError, UserError
from ..harness import check_options
from ..numerics import cpu_name
from ..results import FORMAT_VERSION, write_results
from ..results.model import Episode, ResultsFile, ResultsSuite, Status
from .agents import DEFAULT_AGENT_DISK_MB, DEFAULT_AGENT_MEMORY_MB, probe_agent
from .config import EvalConfig, RunOutcome, check_pins, journal_path
from .dispatch import ProcessTransport, RayTransport, dispatch, load_harness_plugins
from .journal import Journal, Progress
from .lockdown import protect_trusted_process

__all__ = ["run_evaluation"]


def _git_state() -> tuple[str | None, bool | None]:
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return None, None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "."],
                               capture_output=True, text=True, timeout=10)
        return commit.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a batch scheduler's time limit) stops the evaluation as Ctrl-C does: workers and
    agent processes stopped, the journal closed with every finished episode, a line saying how to resume.
    Only where SIGTERM has its default action and in the main thread (where Python runs handlers)."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _interrupt(signum: int, frame: Any) -> None:
        # once: a second SIGTERM (a scheduler that signals again, a parent's death signal arriving with
        # the user's kill) must not cut the clean-up short and end the process without its closing line
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _drive(cfg: EvalConfig, todo: deque, options: dict, record: Callable[[dict], None],
           on_reply: Callable[[dict], None], outcome: RunOutcome) -> str | None:
    if cfg.backend != "ray":
        n = max(1, min(cfg.workers or 1, -(-len(todo) // cfg.envs_per_worker)))
        transport = ProcessTransport(cfg, options, n)
        fatal = None
        try:
            fatal = dispatch(cfg, todo, transport, record, on_reply, outcome)
        except BaseException:
            transport.close(kill=True)
            raise
        transport.close(kill=fatal is not None)
        return fatal
    from .._optional import require

    ray = require("ray", "ray", "--backend ray")
    started_here = False
    if not ray.is_initialized():
        # no address: a Ray of its own, never a cluster that `ray start` runs on this machine
        ray.init(address=cfg.address or "local", include_dashboard=False, log_to_driver=True,
                 **({"num_cpus": cfg.workers} if cfg.address is None and cfg.workers else {}))
        started_here = True
    outcome.workers = cfg.workers or int(ray.cluster_resources().get("CPU", 1))
    n = max(1, min(outcome.workers, -(-len(todo) // cfg.envs_per_worker)))
    ray_transport = RayTransport(cfg, options, n, ray)
    try:
        return dispatch(cfg, todo, ray_transport, record, on_reply, outcome)
    finally:
        ray_transport.close(kill=True)
        if started_here:
            ray.shutdown()


def _recorded_path(path: str | Path) -> str:
    """The agent path as results record it: relative to the working folder when the file is under it
    (a results file names no folder of the machine that made it; submit refuses absolute paths)."""
    resolved, here = Path(path).resolve(), Path.cwd().resolve()
    return resolved.relative_to(here).as_posix() if resolved.is_relative_to(here) else str(Path(path))


def _preflight(cfg: EvalConfig) -> dict:
    """The checks that need no process (settings, the output path, pins, plugins, task options): a
    user error here starts nothing. Returns the suite's version mismatches (allowed by the settings)."""
    cfg.check()  # every setting in its range before anything starts
    out = Path(cfg.out)
    if out.parent and not out.parent.exists():
        raise UserError(f"the folder of --out {str(out)!r} does not exist; create it or choose another path")
    if not os.access(out.parent or Path("."), os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise UserError(f"cannot write {str(out)!r}; choose a writable --out")
    mismatches = check_pins(cfg.suite, cfg.tasks)
    if mismatches and not cfg.allow_version_mismatch:
        listing = ", ".join(f"{k} {v['installed']} (suite pins {v['pinned']})" for k, v in mismatches.items())
        fix = " ".join(f'"{k}=={v["pinned"]}"' for k, v in mismatches.items())
        raise UserError(f"installed versions differ from suite {cfg.suite.name}'s pins: {listing}; to fix: pip "
                        f"install {fix}, or pass --allow-version-mismatch (results marked not comparable, "
                        f"not submittable)")
    for plugin in cfg.harness_plugins:
        if not Path(plugin).is_file():
            raise UserError(f"harness plugin {plugin!r} not found; pass the path of a Python file that registers "
                            f"harness families")
    load_harness_plugins(cfg.plugin_files())
    for task in cfg.tasks:  # a bad option is the suite's error (exit 2), not an env_error per episode
        check_options(task.id, dict(task.options))
    return mismatches


def _play(cfg: EvalConfig, journal: Journal, units: list, outcome: RunOutcome) -> list[dict]:
    """Play every unit the journal lacks (or holds failed, with --retry-failed); return the isolation
    layers the agent processes reported. Ctrl-C and SIGTERM leave the journal closed and resumable."""
    retry = journal.failed() if cfg.retry_failed else set()
    todo = deque(u for u in units if u.key not in journal.done or u.key in retry)
    options = {t.id: dict(t.options) for t in cfg.tasks}
    progress = Progress(len(units), len(units) - len(todo), cfg.progress)
    layers_seen: list[dict] = []

    def record(rec: dict) -> None:
        journal.append(rec)
        progress.update(rec["status"])

    def on_reply(reply: dict) -> None:
        layers = reply.get("layers") or {}
        if layers and layers not in layers_seen:
            layers_seen.append(layers)

    fatal: str | None = None
    interrupted = False
    with _terminate_as_interrupt():  # until the journal is closed
        try:
            if todo:
                fatal = _drive(cfg, todo, options, record, on_reply, outcome)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            journal.close()
            progress.close()
    if fatal is not None:
        raise AgentLoadError(fatal)
    if interrupted:
        saved = sum(u.key in journal.done for u in units)  # the journal may hold more (a wider evaluation's)
        raise KeyboardInterrupt(f"{saved} of {len(units)} episodes are saved in {journal.path}; "
                                f"run the same command again to resume")
    return layers_seen


def _isolation(cfg: EvalConfig, layers_seen: list[dict], probe_layers: dict, memory: int, disk: int) -> dict:
    """What the results record of how the agent was isolated (the layers its processes reported)."""
    isolation: dict[str, Any] = {
        "mode": "in-process" if cfg.in_process else "process",
        "layers": layers_seen[0] if len(layers_seen) == 1 else (layers_seen or [probe_layers])[0],
        "submittable": not cfg.in_process,
        "agent_memory_mb": None if cfg.in_process else memory,
        "agent_disk_mb": None if cfg.in_process else disk,
        "agent_network": bool(cfg.agent_network),
        "agent_threads": None if cfg.in_process else cfg.agent_threads,
        "agent_processes": None if cfg.in_process else cfg.agent_processes,
        "llm_endpoint": f"{cfg.llm_endpoint[0]}:{cfg.llm_endpoint[1]}" if cfg.llm_endpoint else None,
    }
    if cfg.llm_upstream is not None:
        isolation["llm_proxy"] = {"upstream": cfg.llm_upstream, "budget": cfg.llm_budget,
                                  "trajectories": cfg.trajectories is not None}
    if len(layers_seen) > 1:
        isolation["layers_by_worker"] = layers_seen  # workers on machines with different kernels
    return isolation


def _episodes(units: list, journal: Journal) -> tuple[Episode, ...]:
    """The journal's records in the suite's order, each with its unit's keys (and its plays, when more than one)."""
    out = []
    for u in units:
        rec = journal.done[u.key]
        out.append(Episode.from_json(
            {"task": u.task, "run": u.run, "index": u.index, "seed": u.seed,
             **{k: v for k, v in rec.items() if k not in ("task", "run", "index", "seed", "attempts")},
             **({"attempts": journal.attempts[u.key]} if journal.attempts.get(u.key, 1) > 1 else {})},
            f"{journal.path}: {u.task} run {u.run} episode {u.index}"))
    return tuple(out)


def _suite_record(cfg: EvalConfig, units: list) -> ResultsSuite:
    tasks_json = cfg.suite.summary_json(cfg.tasks)
    if cfg.episodes_override:
        for t in tasks_json["tasks"]:
            t["seeds"] = [u.seed for u in units if u.task == t["id"] and u.run == 0]
            t["episodes"] = cfg.episodes_override
    return ResultsSuite.from_json(tasks_json, f"suite {cfg.suite.name}")


def run_evaluation(cfg: EvalConfig) -> tuple[ResultsFile, int]:
    """Run (or resume) the evaluation; write and return the results and the exit code (0: every episode
    ok, 1: some episode failed). User errors raise `UserError` before any process starts."""
    mismatches = _preflight(cfg)
    agent_path = _recorded_path(cfg.agent_path)
    protect_trusted_process()  # this process writes the journal: no agent may trace it
    # Import the agent file the way the workers will (isolated: never in this process), so that a broken
    # file fails fast, in one line, and AGENT_INFO is read as plain data.
    memory = cfg.agent_memory_mb or DEFAULT_AGENT_MEMORY_MB
    disk = cfg.agent_disk_mb or DEFAULT_AGENT_DISK_MB
    info, probe_layers = probe_agent(agent_path, in_process=cfg.in_process, memory_mb=memory, disk_mb=disk,
                                     network=cfg.agent_network, threads=cfg.agent_threads)
    agent_sha = agent_file_hash(agent_path)
    units = cfg.units()
    # the bytes its manifest pins: a journal of other bytes under the same paths is not resumed
    pins = played_pins(agent_path, [(u.task, u.run) for u in units])
    identity = {"suite": cfg.suite.hash, "agent_sha256": agent_sha, "artifacts": pins, "runs": cfg.runs,
                "episodes_override": cfg.episodes_override, "tasks": [t.id for t in cfg.tasks]}
    if cfg.fresh_seeds is not None:  # a journal of fresh seeds resumes only with the same draw
        identity["fresh_entropy"] = cfg.fresh_entropy
    journal = Journal(journal_path(Path(cfg.out)), identity)
    if journal.set_aside is not None:
        print(f"note: the agent file changed since {journal.path} was written; its episodes were another "
              f"agent's and are set aside as {journal.set_aside}: this evaluation starts afresh", file=sys.stderr)
    started = utc_now()
    outcome = RunOutcome()  # what happened while playing: returned in the results, never written into cfg
    layers_seen = _play(cfg, journal, units, outcome)
    episodes = _episodes(units, journal)
    commit, dirty = _git_state()
    plugins = None
    if cfg.harness_plugins:
        files = cfg.plugin_files()
        plugins = [{"path": str(p), "sha256": hashlib.sha256(files[str(Path(p).resolve())]).hexdigest()}
                   for p in cfg.harness_plugins]
    results = ResultsFile(
        format_version=FORMAT_VERSION,
        polar_bench={"version": __version__, "git_commit": commit, "git_dirty": dirty},
        suite=_suite_record(cfg, units),
        versions={pkg: version_of(pkg) or "not installed" for pkg in sorted(set(cfg.suite.pins) | {"polar_bench"})},
        version_mismatches=mismatches, comparable=not mismatches, standard=cfg.makes_standard_results(),
        environment={"python": platform.python_version(), "os": platform.platform(), "cpu": cpu_name(),
                     "cpu_count": os.cpu_count() or 1},
        agent={"path": agent_path, "sha256": agent_sha, "name": str(info.get("name", Path(agent_path).stem)),
               "info": info},
        isolation=_isolation(cfg, layers_seen, probe_layers, memory, disk),
        config={"runs": cfg.runs, "episodes_override": cfg.episodes_override,
                "tasks": [t.id for t in cfg.tasks], "workers": outcome.workers or cfg.workers,
                "step_timeout": cfg.step_timeout, "episode_timeout": cfg.episode_timeout,
                "backend": cfg.backend, "envs_per_worker": cfg.envs_per_worker,
                "replaced_workers": outcome.replaced_workers, "worker_losses": outcome.worker_losses},
        command=cfg.command or " ".join(shlex.quote(a) for a in sys.argv),
        started=journal.started or started, finished=utc_now(), episodes=episodes,
        seeds={"kind": "fresh", "entropy": cfg.fresh_entropy} if cfg.fresh_seeds is not None else None,
        harness_plugins=plugins, path=str(cfg.out))
    write_results(results, cfg.out)
    return results, 0 if all(e.status is Status.OK for e in episodes) else 1
