"""Handing batches of episodes to workers and collecting their records: one loop, two transports.

`dispatch` keeps every worker busy with a batch of episodes, journals each record, and replaces a
worker that dies or stops answering, retrying its episodes once. A `Transport` carries the batches:
`ProcessTransport` (spawned processes, ``--backend local``) or `RayTransport` (Ray actors,
``--backend ray``). Workers are trusted: their agents run in agent processes of their own.
docs/evaluate.md ("How it runs", "The code") says how.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from multiprocessing.context import SpawnContext
from pathlib import Path
from typing import Any, Protocol

from ..errors import UserError
from ..results.model import Episode
from .agent_process import die_with_parent
from .config import EvalConfig, RunOutcome, Unit, journal_path
from .episodes import EpisodeRunner
from .lockdown import protect_trusted_process

__all__ = ["dispatch", "Transport", "ProcessTransport", "RayTransport", "pack_agent_folder"]

BACKSTOP_GRACE_S = 30.0
SHIP_LIMIT_BYTES = 512 * 2**20
_SHIP_SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}

Batch = list[tuple[Unit, int]]  # units with their attempt numbers (1, or 2 for a retry)


class Transport(Protocol):
    """Where batches run. Worker ``i`` is a process or an actor; ``finished[i]`` counts its batches."""

    size: int
    finished: list[int]
    streams: bool  # the worker reports each record as it comes and waits for `top_up`'s answer

    def submit(self, i: int, units: list[tuple]) -> None: ...

    def top_up(self, i: int, units: list[tuple]) -> None:
        """Answer a streaming worker's record: the units to play next (an empty list: none)."""
        ...

    def wait(self, timeout: float) -> list[tuple[int, Any, str]]:
        """(worker, reply, why) for each worker that answered (reply is its dict) or was lost
        (reply None; ``why`` says how)."""
        ...

    def replace(self, i: int) -> None: ...

    def close(self, kill: bool) -> None: ...


# ----------------------------------------------------------------------------- the worker's side
def load_harness_plugins(files: dict[str, bytes]) -> None:
    """Import trusted harness-plugin files (which register harness families) in a worker."""
    folder = Path(tempfile.mkdtemp(prefix="polar_bench_plugins_"))
    for i, (name, data) in enumerate(sorted(files.items())):
        path = folder / f"plugin{i}_{Path(name).name}"
        path.write_bytes(data)
        spec = importlib.util.spec_from_file_location(f"polar_bench_plugin_{i}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import the harness plugin {name}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker needs from the evaluation's settings to play its units (picklable: it crosses to
    worker processes and Ray actors)."""

    options: dict  # task id -> the task's harness options
    step_timeout: float | None
    episode_timeout: float | None
    lanes: int
    in_process: bool
    agent_memory_mb: int | None
    agent_disk_mb: int | None
    network: bool
    llm_endpoint: tuple[str, int] | None
    agent_threads: int
    agent_processes: int
    llm_proxy: dict | None  # {"upstream", "budget", "trajectories"}, or None without the proxy
    pipeline: bool
    plugins: dict[str, bytes] = field(default_factory=dict)
    stream: bool = False  # the parent answers every record with the units that fill the lanes again


def make_runner(agent_path: str, settings: WorkerSettings) -> EpisodeRunner:
    """The worker's `EpisodeRunner` (after the plugins it needs are imported)."""
    protect_trusted_process()
    load_harness_plugins(settings.plugins)
    return EpisodeRunner(agent_path, settings.options, settings.step_timeout, settings.episode_timeout,
                         settings.lanes, in_process=settings.in_process, agent_memory_mb=settings.agent_memory_mb,
                         agent_disk_mb=settings.agent_disk_mb, network=settings.network,
                         llm_endpoint=settings.llm_endpoint, pipeline=settings.pipeline,
                         llm_proxy=settings.llm_proxy, agent_threads=settings.agent_threads,
                         agent_processes=settings.agent_processes)


def worker_settings(cfg: EvalConfig, options: dict, stream: bool = False) -> WorkerSettings:
    return WorkerSettings(
        options=options, step_timeout=cfg.step_timeout, episode_timeout=cfg.episode_timeout,
        lanes=cfg.envs_per_worker, in_process=cfg.in_process, agent_memory_mb=cfg.agent_memory_mb,
        agent_disk_mb=cfg.agent_disk_mb, network=cfg.agent_network, llm_endpoint=cfg.llm_endpoint,
        agent_threads=cfg.agent_threads, agent_processes=cfg.agent_processes,
        llm_proxy=None if cfg.llm_upstream is None else {
            "upstream": cfg.llm_upstream, "budget": cfg.llm_budget, "trajectories": cfg.trajectories},
        # Overlap a worker's environment steps with its agent process's acting only where there is a
        # core for each: with every core running a worker already, two requests in flight per step
        # only halve the lanes each request carries.
        pipeline=cfg.backend == "local" and 2 * (cfg.workers or 1) <= (os.cpu_count() or 1),
        plugins=cfg.plugin_files(), stream=stream)


def _worker_main(conn: Connection, agent_path: str, settings: WorkerSettings, parent: int | None = None) -> None:
    """Serve batches of units from the parent until it sends None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    if parent is not None:  # a parent killed outright (SIGKILL, the OOM killer) takes its workers along
        die_with_parent(parent)
    runner = make_runner(agent_path, settings)
    stream = settings.stream

    def on_record(rec: dict) -> list:
        conn.send({"records": [rec], "partial": True})
        if not stream:
            return []
        answer = conn.recv()  # the parent answers every record: the units that fill the lanes again
        return list(answer.get("more", [])) if isinstance(answer, dict) else []

    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                break
            if msg is None:
                break
            records = runner.run_batch(msg, on_record=on_record)
            if records and "fatal" in records[0]:
                conn.send({"records": records, "layers": runner.layers, "mode": runner.agents.mode})
            else:  # every record went as its episode ended
                conn.send({"records": [], "layers": runner.layers, "mode": runner.agents.mode})
    finally:
        runner.close()


# ----------------------------------------------------------------------------- local processes
class _Process:
    def __init__(self, ctx: SpawnContext, agent_path: str, settings: WorkerSettings) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, agent_path, settings, os.getpid()), daemon=True)
        self.proc.start()
        child.close()

    def stop(self, kill: bool = False) -> None:
        if kill and self.proc.is_alive():
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


class ProcessTransport:
    """Worker processes on this machine, started with ``spawn`` (nothing of this process inherited)."""

    streams = True

    def __init__(self, cfg: EvalConfig, options: dict, size: int):
        self.ctx = mp.get_context("spawn")
        self.agent_path = cfg.agent_path
        self.settings = worker_settings(cfg, options, stream=True)
        self.size = size
        self.workers = [_Process(self.ctx, self.agent_path, self.settings) for _ in range(size)]
        self.busy = [False] * size
        self.finished = [0] * size

    def submit(self, i: int, units: list[tuple]) -> None:
        self.busy[i] = True
        try:
            self.workers[i].conn.send(units)
        except (BrokenPipeError, OSError):
            pass  # noticed by wait()'s liveness check

    def top_up(self, i: int, units: list[tuple]) -> None:
        try:
            self.workers[i].conn.send({"more": units})
        except (BrokenPipeError, OSError):
            pass  # noticed by wait()'s liveness check

    def wait(self, timeout: float) -> list[tuple[int, Any, str]]:
        busy = [w for w, b in zip(self.workers, self.busy, strict=True) if b]
        ready = mp_wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=timeout)
        events = []
        for i, w in enumerate(self.workers):
            if not self.busy[i]:
                continue
            if w.conn in ready:
                try:
                    reply = w.conn.recv()
                except (EOFError, OSError):
                    reply = None
                if reply is not None:
                    self.finished[i] += 1  # a batch, or an episode of one: this worker did start
                    if not reply.get("partial"):
                        self.busy[i] = False
                    events.append((i, reply, ""))
                    continue
            if not w.proc.is_alive():
                self.busy[i] = False
                events.append((i, None, f"exit code {w.proc.exitcode}"))
        return events

    def replace(self, i: int) -> None:
        self.workers[i].stop(kill=True)
        self.workers[i] = _Process(self.ctx, self.agent_path, self.settings)
        self.busy[i] = False
        self.finished[i] = 0

    def close(self, kill: bool) -> None:
        for w in self.workers:
            w.stop(kill=kill)


# ----------------------------------------------------------------------------- Ray actors
def pack_agent_folder(agent_path: str, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """The agent file's folder as {relative path: bytes}, for shipping to Ray workers (which may be on
    other machines). Skips VCS and cache folders, journals and the paths in ``skip``."""
    folder = Path(agent_path).resolve().parent
    skipped = {Path(p).resolve() for p in skip}
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part in _SHIP_SKIP_DIRS for part in rel.parts) or path.name.endswith(".episodes.jsonl"):
            continue
        if not path.is_file() or path.resolve() in skipped:
            continue
        total += path.stat().st_size
        if total > SHIP_LIMIT_BYTES:
            raise UserError(f"the agent's folder {folder} holds more than {SHIP_LIMIT_BYTES // 2**20} MiB; "
                            f"everything beside the agent file is shipped to the Ray workers: move the agent "
                            f"file and what it needs into a folder of their own")
        files[str(rel)] = path.read_bytes()
    return files


class _RayActor:
    """A Ray actor holding one `EpisodeRunner`; it unpacks the shipped agent folder into a temporary
    folder on its own node first. Its agents run in agent processes on that node."""

    def __init__(self, files: dict, agent_name: str, settings: WorkerSettings):
        self.folder = Path(tempfile.mkdtemp(prefix="polar_bench_agent_"))
        for rel, data in files.items():
            target = self.folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        self.runner = make_runner(str(self.folder / agent_name), settings)

    def run_batch(self, units: list) -> dict:
        records = self.runner.run_batch(units)
        return {"records": records, "layers": self.runner.layers, "mode": self.runner.agents.mode}


class RayTransport:
    """Long-lived Ray actors, one CPU each; an actor (or its node) that dies is replaced. An actor
    answers with its whole batch at the end (no streaming)."""

    streams = False

    def __init__(self, cfg: EvalConfig, options: dict, size: int, ray: Any):
        self.ray = ray
        self.size = size
        self.finished = [0] * size
        remote_cls = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=1)(_RayActor)
        files = ray.put(pack_agent_folder(cfg.agent_path, skip=(cfg.out, str(journal_path(cfg.out)))))
        settings = worker_settings(cfg, options)
        agent_name = Path(cfg.agent_path).name
        self.new_actor: Callable[[], Any] = lambda: remote_cls.remote(files, agent_name, settings)
        self.actors = [self.new_actor() for _ in range(size)]
        self.inflight: dict[Any, int] = {}

    def submit(self, i: int, units: list[tuple]) -> None:
        self.inflight[self.actors[i].run_batch.remote(units)] = i

    def wait(self, timeout: float) -> list[tuple[int, Any, str]]:
        from ray.exceptions import RayError, RayTaskError

        if not self.inflight:
            time.sleep(min(timeout, 0.05))
            return []
        ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=timeout)
        events = []
        for ref in ready:
            i = self.inflight.pop(ref)
            try:
                reply = self.ray.get(ref)
            except RayTaskError:
                raise  # an exception inside EpisodeRunner is a bug: keep its traceback
            except RayError as exc:  # the actor, its worker process or its node died
                events.append((i, None, type(exc).__name__))
                continue
            self.finished[i] += 1
            events.append((i, reply, ""))
        return events

    def top_up(self, i: int, units: list[tuple]) -> None:
        raise NotImplementedError("Ray actors do not stream")

    def replace(self, i: int) -> None:
        for ref, j in list(self.inflight.items()):
            if j == i:
                del self.inflight[ref]
        try:
            self.ray.kill(self.actors[i], no_restart=True)
        except Exception:  # noqa: BLE001 - gone with its node
            pass
        self.actors[i] = self.new_actor()
        self.finished[i] = 0

    def close(self, kill: bool) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - the actor may be gone with its node
                pass


# ----------------------------------------------------------------------------- the loop
class _Queue:
    """The units still to play, grouped by task in their order. A worker keeps to one task while it
    has units (each lane builds a task's environment once: 8 lanes on two workers playing the same
    task build 16 where 8 would do), then takes the first task no other worker is on, or failing
    that, shares the task with the most units left."""

    def __init__(self, todo: deque):
        self.by_task: dict[str, deque[Unit]] = {}
        for unit in todo:
            self.by_task.setdefault(unit.task, deque()).append(unit)
        self.current: dict[int, str] = {}

    def __bool__(self) -> bool:
        return any(self.by_task.values())

    def take(self, worker: int, size: int) -> list[Unit]:
        task = self.current.get(worker, "")
        if not self.by_task.get(task):
            busy = {t for w, t in self.current.items() if w != worker}
            free = [t for t, q in self.by_task.items() if q and t not in busy]
            task = free[0] if free else max(self.by_task, key=lambda t: len(self.by_task[t]))
            self.current[worker] = task
        queue = self.by_task[task]
        return [queue.popleft() for _ in range(min(size, len(queue)))]


def next_batch(size: int, retry: deque, todo: _Queue, worker: int = 0) -> Batch:
    """Up to ``size`` new units for ``worker``; a retried unit (second attempt) goes alone."""
    if retry:
        return [(retry.popleft(), 2)]
    return [(unit, 1) for unit in todo.take(worker, size)]


def failed_record(unit: Unit, status: str, error: str) -> dict:
    return Episode.failed(unit.task, unit.run, unit.index, unit.seed, status, error).to_json()


def _lost_unit(cfg: EvalConfig, unit: Unit, attempt: int, overdue: bool, why: str, retry: deque) -> dict | None:
    """A unit whose worker was killed (overdue) or died: the record to journal, or None if it is retried."""
    if overdue:
        return failed_record(unit, "timeout", f"the episode exceeded the {cfg.episode_timeout:g} s episode "
                                              f"timeout and did not respond; its worker was killed")
    if attempt == 1:
        retry.append(unit)
        return None
    return failed_record(unit, "env_error", f"the worker died twice on this episode ({why}); the environment "
                                            f"crashed the process, or its machine was lost")


def _note_loss(outcome: RunOutcome, batch: Batch, why: str) -> None:
    """Count a lost worker, keep why and what it was playing for the results' ``config.worker_losses``,
    and say so on stderr: a retried episode leaves no other trace, and a loss that recurs is a bug to find."""
    outcome.replaced_workers += 1
    playing = [f"{u.task} run {u.run} episode {u.index}" + (" (its retry)" if attempt > 1 else "")
               for u, attempt in batch]
    outcome.worker_losses.append({"why": why, "playing": playing, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    print(f"[polar_bench] a worker was lost ({why}) while playing {len(playing)} episode(s), "
          f"{', '.join(playing[:3])}{' ...' if len(playing) > 3 else ''}; a new worker replaces it, and an "
          f"episode lost for the first time is played again", file=sys.stderr, flush=True)


def dispatch(cfg: EvalConfig, todo: deque, transport: Transport, record: Callable[[dict], None],
             on_reply: Callable[[dict], None], outcome: RunOutcome) -> str | None:
    """Play ``todo`` on the transport's workers; ``record`` each finished episode and pass each reply
    to ``on_reply`` (isolation layers); count lost workers in ``outcome``. Return a fatal agent error
    (the agent cannot be built), if any."""
    return _Dispatch(cfg, transport, record, on_reply, outcome, _Queue(todo)).run()


class _Dispatch:
    """The state of one `dispatch` loop: the idle workers, each busy worker's batch with the time of
    its last record, the units waiting for their retry, and the records held while workers die at start."""

    def __init__(self, cfg: EvalConfig, transport: Transport, record: Callable[[dict], None],
                 on_reply: Callable[[dict], None], outcome: RunOutcome, queue: _Queue) -> None:
        self.cfg = cfg
        self.transport = transport
        self.record = record
        self.on_reply = on_reply
        self.outcome = outcome
        self.idle = list(range(transport.size))
        self.queue = queue
        self.inflight: dict[int, tuple[Batch, float]] = {}
        self.retry: deque[Unit] = deque()
        self.startup_deaths = 0
        # An episode lost twice to workers that died before finishing any episode is held, not journalled: if
        # the start-up itself keeps failing (a broken plugin, a missing library), the episode is not to blame,
        # and a journalled env_error would stay in the results after the fix (resume skips journalled episodes).
        # Once a worker finishes an episode, the environments do start: the held records are journalled.
        self.held: list[dict] = []

    def journal_held(self) -> None:
        while self.held:
            self.record(self.held.pop(0))

    def run(self) -> str | None:
        fatal = None
        while (self.queue or self.retry or self.inflight) and fatal is None:
            while self.idle and (self.retry or self.queue):
                i = self.idle.pop()
                batch = next_batch(self.cfg.envs_per_worker, self.retry, self.queue, i)
                self.transport.submit(i, [(u.task, u.run, u.index, u.seed) for u, _ in batch])
                self.inflight[i] = (batch, time.monotonic())
            for i, reply, why in self.transport.wait(1.0):
                if reply is not None and reply.get("partial"):  # an episode of a batch still playing
                    self.on_episode(i, reply)
                    continue
                batch, _t0 = self.inflight.pop(i)
                if reply is None:
                    self.on_lost(i, batch, why)
                    continue
                self.idle.append(i)
                records = reply["records"]
                if records and "fatal" in records[0]:
                    fatal = records[0]["fatal"]
                    break
                self.startup_deaths = 0
                self.journal_held()
                self.on_reply(reply)
                for rec in records:  # Ray actors answer with the whole batch at its end
                    self.record(rec)
            if self.cfg.episode_timeout is not None:
                self.kill_overdue(self.cfg.episode_timeout)
        self.journal_held()  # the evaluation went on after them: the environments start
        return fatal

    def on_episode(self, i: int, reply: dict) -> None:
        """Worker ``i`` sent the record of an episode of its batch (which plays on): top its lanes up from
        the queue (a streaming worker waits for that answer), then journal."""
        batch, _t0 = self.inflight[i]
        keys = {(rec["task"], rec["run"], rec["index"]) for rec in reply["records"]}
        batch = [(u, a) for u, a in batch if u.key not in keys]
        if self.transport.streams:  # answer first (the worker waits), then journal
            # a batch holding a retry stays alone; a waiting retry gets the next worker to run dry
            alone = bool(self.retry) or any(a > 1 for _, a in batch)
            room = self.cfg.envs_per_worker - len(batch)  # refill to K: after a retry alone, all K lanes
            more = self.queue.take(i, room) if self.queue and not alone and room > 0 else []
            self.transport.top_up(i, [(u.task, u.run, u.index, u.seed) for u in more])
            batch += [(u, 1) for u in more]
        self.inflight[i] = (batch, time.monotonic())  # progress: the backstop counts from here
        for rec in reply["records"]:
            self.record(rec)
        self.journal_held()

    def on_lost(self, i: int, batch: Batch, why: str) -> None:
        """Worker ``i`` died playing ``batch``: replace it and retry (or fail) the batch's episodes."""
        at_startup = self.transport.finished[i] == 0
        if at_startup:
            self.startup_deaths += 1
            if self.startup_deaths >= 3:
                raise UserError(f"worker processes keep dying before finishing any episode ({why}); their "
                                f"own error, if any, is printed above; check the harness plugins and that "
                                f"the suite's environments start")
        self.transport.replace(i)
        _note_loss(self.outcome, batch, why or "it died")
        self.idle.append(i)
        for unit, attempt in batch:
            failed = _lost_unit(self.cfg, unit, attempt, False, why, self.retry)
            if failed is not None:
                (self.held.append if at_startup else self.record)(failed)

    def kill_overdue(self, episode_timeout: float) -> None:
        """Replace the workers silent for too long, failing their episodes as timeouts."""
        now = time.monotonic()
        for i, (batch, t0) in list(self.inflight.items()):
            # since the worker's last record: an episode's own limit, times the episodes it holds (its
            # lanes share the wall clock), and once more for retries alone
            if now - t0 > 2 * episode_timeout * len(batch) + BACKSTOP_GRACE_S:
                del self.inflight[i]
                self.transport.replace(i)
                _note_loss(self.outcome, batch, f"killed: no answer for {now - t0:.0f} s, past twice the "
                                                f"{episode_timeout:g} s episode timeout per episode of its batch")
                self.idle.append(i)
                for unit, attempt in batch:
                    rec = _lost_unit(self.cfg, unit, attempt, True, "", self.retry)
                    if rec is not None:
                        self.record(rec)
