"""Running an agent on a suite: worker processes, the journal, resume, timeouts, the results file.

Work is split into episodes ``(task, run, index)``. Worker processes (started with ``spawn``) build
the agent once per (task, run) and the harness once per task and reuse them. The parent appends
every finished episode to the journal ``<out stem>.episodes.jsonl`` (flushed and fsynced), so after
Ctrl-C, a crash or ``kill -9`` the same command resumes and ends with exactly the episodes an
uninterrupted run would have. Only the parent writes the journal, so nothing is duplicated; a
worker that dies is replaced and its episode retried once.
"""

from __future__ import annotations

import datetime as _dt
import json
import multiprocessing as mp
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from pathlib import Path

from . import __version__
from ._optional import version_of
from .agent import agent_file_hash, agent_info, build_agent, load_agent_module
from .errors import AgentLoadError, HarnessError, InvalidActionError, UserError
from .results import write_results
from .suite import Suite, TaskSpec

__all__ = ["EvalConfig", "Unit", "journal_path", "run_evaluation", "check_pins", "run_episode"]

# Which families a pinned package matters to ("*" = every family).
PIN_FAMILIES = {
    "numpy": "*", "gymnasium": "*", "mujoco": "dmc", "dm-control": "dmc", "procgen-mirror": "procgen",
    "nle": "nethack", "minigrid": "babyai",
}
BACKSTOP_GRACE_S = 30.0


@dataclass(frozen=True)
class Unit:
    task: str
    run: int
    index: int
    seed: int

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.task, self.run, self.index)


@dataclass
class EvalConfig:
    suite: Suite
    agent_path: str
    out: str
    tasks: list[TaskSpec]
    runs: int
    episodes_override: int | None = None
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    step_timeout: float | None = 60.0
    episode_timeout: float | None = 1800.0
    allow_version_mismatch: bool = False
    standard: bool = True
    progress: bool | None = None  # None: a bar on a terminal, plain lines otherwise
    command: str = ""
    backend: str = "local"  # "local" (worker processes) or "ray"
    address: str | None = None  # Ray: None starts a local Ray; "auto" or "ray://HOST:PORT" joins a cluster
    replaced_workers: int = 0  # workers (processes or actors) that died or were killed and replaced
    envs_per_worker: int = 1  # episodes each worker plays at once, interleaved a step at a time

    def units(self) -> list[Unit]:
        out = []
        for t in self.tasks:
            seeds = t.seeds[: self.episodes_override] if self.episodes_override else t.seeds
            if self.episodes_override and self.episodes_override > len(t.seeds):
                from .suite import episode_seed
                seeds = tuple(t.seeds) + tuple(episode_seed(self.suite.seed, t.id, k)
                                               for k in range(len(t.seeds), self.episodes_override))
            for run in range(self.runs):
                for i, s in enumerate(seeds):
                    out.append(Unit(t.id, run, i, s))
        return out


def journal_path(out: str | Path) -> Path:
    p = Path(out)
    return p.with_name(p.stem + ".episodes.jsonl")


def check_pins(suite: Suite, tasks: list[TaskSpec]) -> dict[str, dict[str, str]]:
    """Installed versions that differ from the suite's pins, for the packages the tasks use."""
    families = {t.id.split("/")[0] for t in tasks}
    diffs = {}
    for pkg, wanted in suite.pins.items():
        fam = PIN_FAMILIES.get(pkg, "*")
        if fam != "*" and fam not in families:
            continue
        have = version_of(pkg)
        if have != wanted:
            diffs[pkg] = {"pinned": wanted, "installed": have or "not installed"}
    return diffs


# ----------------------------------------------------------------------------- worker side
class _StepTimeout(BaseException):
    """Raised by SIGALRM inside agent.act; a BaseException so that `except Exception` in an agent
    cannot swallow it."""


def _on_alarm(signum, frame):
    raise _StepTimeout()


def _fmt_exc(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tb[-6:])
    return f"{type(exc).__name__}: {exc}\n{text}"[:8000]


def run_episode(harness, agent, seed: int, step_timeout: float | None, episode_timeout: float | None) -> dict:
    """Play one episode; never raises for agent or environment failures (they become the status)."""
    steps = play_episode(harness, agent, seed, step_timeout, episode_timeout)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def play_episode(harness, agent, seed: int, step_timeout: float | None, episode_timeout: float | None):
    """A generator that plays one episode a step per ``next()`` and returns its record.

    Several of them interleave the episodes of one worker (``envs_per_worker``). Times are the
    episode's own (the time between its resumptions), so a neighbour's steps never count against
    its timeouts or its ``wall_seconds``."""
    own = 0.0  # seconds spent on this episode so far, excluding the current stretch
    t = time.perf_counter()
    agent_s = 0.0
    ret = 0.0
    length = 0
    status, error = "ok", None
    use_alarm = hasattr(signal, "setitimer") and (step_timeout or episode_timeout)
    info: dict = {}
    try:
        if hasattr(agent, "reset"):
            try:
                agent.reset(seed)
            except Exception as exc:  # noqa: BLE001
                raise _AgentFailure(exc) from exc
        obs, info = harness.reset(seed=seed)
        while True:
            ta = time.perf_counter()
            if use_alarm:
                limit = step_timeout or float("inf")
                if episode_timeout:
                    limit = min(limit, episode_timeout - (own + ta - t))
                if limit <= 0:
                    raise _StepTimeout()
                signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                action = agent.act(obs, info)
            except _StepTimeout:
                raise
            except Exception as exc:  # noqa: BLE001
                raise _AgentFailure(exc) from exc
            finally:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            agent_s += time.perf_counter() - ta
            try:
                obs, reward, terminated, truncated, info = harness.step(action)
            except InvalidActionError as exc:
                raise _AgentFailure(exc) from exc
            ret += reward
            length += 1
            if terminated or truncated:
                break
            now = time.perf_counter()
            own += now - t
            if episode_timeout and own > episode_timeout:
                t = now
                raise _StepTimeout()
            yield
            t = time.perf_counter()
    except _StepTimeout:
        limit = f"step timeout of {step_timeout:g} s" if step_timeout else "episode timeout"
        if episode_timeout and own + time.perf_counter() - t >= episode_timeout - 1e-3:
            limit = f"episode timeout of {episode_timeout:g} s"
        status, error = "timeout", f"the agent exceeded the {limit} at step {length}"
    except _AgentFailure as failure:
        status, error = "agent_error", _fmt_exc(failure.original)
    except HarnessError as exc:
        status, error = "env_error", f"{exc}\n{exc.native_traceback[-4000:]}"
    record = {
        "return": ret, "length": length, "status": status, "error": error,
        "wall_seconds": round(own + time.perf_counter() - t, 6), "agent_seconds": round(agent_s, 6),
    }
    if "clipped_actions" in info:
        record["clipped_actions"] = int(info["clipped_actions"])
    return record


class _AgentFailure(Exception):
    def __init__(self, original: BaseException):
        super().__init__(str(original))
        self.original = original


class _Lane:
    """One environment slot of a worker: its harness (per task) and agent (per (task, run))."""

    def __init__(self):
        self.harness = None
        self.harness_task = None
        self.agent = None
        self.agent_key = None

    def drop_agent(self) -> None:
        _close_agent(self.agent)
        self.agent, self.agent_key = None, None

    def drop_harness(self) -> None:
        if self.harness is not None:
            self.harness.close()
        self.harness, self.harness_task = None, None


class EpisodeRunner:
    """Plays episodes for one worker (a process or a Ray actor). Each of its lanes keeps the agent per
    (task, run) and the harness per task, rebuilding both after an episode that failed; a batch of
    episodes plays one per lane, interleaved a step at a time."""

    def __init__(self, agent_path: str, options: dict, step_timeout, episode_timeout, lanes: int = 1):
        self.agent_path = agent_path
        self.options = options
        self.step_timeout = step_timeout
        self.episode_timeout = episode_timeout
        self.module = None
        self.lanes = [_Lane() for _ in range(max(1, lanes))]
        if hasattr(signal, "SIGALRM"):
            signal.signal(signal.SIGALRM, _on_alarm)

    def run(self, task: str, run: int, index: int, seed: int) -> dict:
        """The episode's record, or ``{"fatal": message}`` when the agent cannot be built."""
        return self.run_batch([(task, run, index, seed)])[0]

    def run_batch(self, units: list) -> list[dict]:
        """Records of the episodes ``(task, run, index, seed)`` played at once (at most one per lane),
        or ``[{"fatal": message}]``."""
        if len(units) > len(self.lanes):
            raise ValueError(f"{len(units)} episodes for {len(self.lanes)} lanes")
        out: list = [None] * len(units)
        steps = {}
        for i, unit in enumerate(units):
            ready = self._prepare(self.lanes[i], *unit)
            if ready is not None:
                if "fatal" in ready:
                    return [ready]
                out[i] = ready
                continue
            lane = self.lanes[i]
            steps[i] = play_episode(lane.harness, lane.agent, unit[3], self.step_timeout, self.episode_timeout)
        while steps:
            for i in list(steps):
                try:
                    next(steps[i])
                except StopIteration as done:
                    del steps[i]
                    out[i] = self._finish(self.lanes[i], units[i], done.value)
        return out

    def _prepare(self, lane: _Lane, task: str, run: int, index: int, seed: int) -> dict | None:
        from . import make

        try:
            if self.module is None:
                self.module = load_agent_module(self.agent_path)
            if lane.harness_task != task:
                lane.drop_harness()
                lane.harness = make(task, **self.options.get(task, {}))
                lane.harness_task = task
            if lane.agent_key != (task, run):
                lane.drop_agent()
                lane.agent = build_agent(self.module, lane.harness.task_info, run, self.agent_path)
                lane.agent_key = (task, run)
                wants = bool(getattr(lane.agent, "wants_text", False)) and lane.harness.task_info.has_text
                lane.harness.request_text(wants)
        except AgentLoadError as exc:
            return {"fatal": str(exc)}
        except HarnessError as exc:
            lane.drop_harness()
            return {"task": task, "run": run, "index": index, "seed": seed, "return": None, "length": 0,
                    "status": "env_error", "error": str(exc), "wall_seconds": 0.0, "agent_seconds": 0.0}
        return None

    def _finish(self, lane: _Lane, unit, record: dict) -> dict:
        task, run, index, seed = unit
        if record["status"] == "ok" and hasattr(lane.agent, "episode_info"):
            try:
                record.update(lane.agent.episode_info() or {})
            except Exception as exc:  # noqa: BLE001
                record["status"], record["error"] = "agent_error", "episode_info() raised " + _fmt_exc(exc)
        if record["status"] != "ok":
            # The agent's or the harness's state may be inconsistent now: rebuild both.
            lane.drop_agent()
            lane.drop_harness()
        return {"task": task, "run": run, "index": index, "seed": seed, **record}

    def close(self) -> None:
        for lane in self.lanes:
            lane.drop_agent()
            lane.drop_harness()


def _worker_main(conn, agent_path: str, options: dict, step_timeout, episode_timeout, lanes: int = 1) -> None:
    """Serve batches of units from the parent until it sends None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    runner = EpisodeRunner(agent_path, options, step_timeout, episode_timeout, lanes)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        if msg is None:
            break
        conn.send(runner.run_batch(msg))
    runner.close()


def _close_agent(agent) -> None:
    if agent is not None and hasattr(agent, "close"):
        try:
            agent.close()
        except Exception:  # noqa: BLE001
            pass


# ----------------------------------------------------------------------------- parent side
class _Worker:
    def __init__(self, ctx, cfg: EvalConfig, options: dict):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main,
                                args=(child, cfg.agent_path, options, cfg.step_timeout, cfg.episode_timeout,
                                      cfg.envs_per_worker),
                                daemon=True)
        self.proc.start()
        child.close()
        self.batch: list[tuple[Unit, int]] = []  # the units in flight, with their attempt numbers
        self.started = 0.0
        self.finished = 0  # batches completed; a worker that dies with none finished died at start-up

    def send(self, batch: list[tuple[Unit, int]]) -> None:
        """Hand a batch over; a worker that already died is noticed by the main loop's liveness check."""
        self.batch, self.started = batch, time.monotonic()
        try:
            self.conn.send([(u.task, u.run, u.index, u.seed) for u, _ in batch])
        except (BrokenPipeError, OSError):
            pass

    def stop(self, kill: bool = False) -> None:
        if kill and self.proc.is_alive():
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


def _next_batch(size: int, retry: deque, todo: deque) -> list[tuple[Unit, int]]:
    """Up to ``size`` new units; a retried unit (second attempt) goes alone, so that an episode that
    crashes its worker cannot take the episodes that shared a batch with it down twice."""
    if retry:
        return [(retry.popleft(), 2)]
    batch = []
    while len(batch) < size and todo:
        batch.append((todo.popleft(), 1))
    return batch


def _extends(old: dict | None, new: dict) -> bool:
    """Whether a journal written for identity ``old`` may be resumed by the evaluation ``new``: the
    same agent file, suite, runs and episode count, and every task of ``old`` among ``new``'s."""
    if not isinstance(old, dict) or set(old) != set(new):
        return False
    same = all(old[k] == new[k] for k in new if k != "tasks")
    return same and set(old.get("tasks") or ()) <= set(new.get("tasks") or ())


class Journal:
    """Append-only JSONL of finished episodes; the first line identifies the evaluation."""

    def __init__(self, path: Path, identity: dict):
        self.path = path
        self.identity = identity
        self.done: dict[tuple, dict] = {}
        self.started: str | None = None
        self._has_header = False
        self._last_sync = 0.0
        if path.exists():
            self._load()
        try:
            self.fh = open(path, "a", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write the journal {path} ({exc.strerror}); choose a writable --out") from None
        if not self._has_header:
            # A new journal, or one of an evaluation of fewer tasks that this one extends (evaluate a
            # domain first, then the whole suite with the same --out: the finished episodes are kept).
            self.started = self.started or _now()
            self._write({"journal": 1, "identity": identity, "started": self.started})

    def _load(self) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        complete = raw.endswith(b"\n")
        good_bytes = 0
        self._has_header = False
        for i, line in enumerate(lines):
            if not line:
                continue
            if i == len(lines) - 1 and not complete:
                break  # torn last line from a kill: drop it
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break
            if "journal" in rec:
                if not _extends(rec.get("identity"), self.identity):
                    raise UserError(
                        f"the journal {self.path} belongs to a different evaluation (another agent file, "
                        f"suite, run count or tasks that are not all in this selection); delete it to "
                        f"start afresh, or choose another --out")
                self._has_header = rec.get("identity") == self.identity
                self.started = self.started or rec.get("started")
            else:
                self.done.setdefault((rec["task"], rec["run"], rec["index"]), rec)
            good_bytes += len(line) + 1
        if good_bytes < len(raw):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_bytes)

    def _write(self, rec: dict) -> None:
        # flush() puts the line in the OS page cache, which survives Ctrl-C, crashes and kill -9 of
        # this process; fsync (durability across an OS crash) at most once a second, so that a
        # slow disk does not stall the parent and leave workers waiting for their next episode.
        self.fh.write(json.dumps(rec, allow_nan=False) + "\n")
        self.fh.flush()
        now = time.monotonic()
        if now - self._last_sync >= 1.0:
            os.fsync(self.fh.fileno())
            self._last_sync = now

    def append(self, rec: dict) -> None:
        key = (rec["task"], rec["run"], rec["index"])
        if key in self.done:
            return
        self.done[key] = rec
        self._write(rec)

    def close(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()


class _Progress:
    def __init__(self, total: int, done: int, enabled: bool | None):
        self.total, self.done, self.errors = total, done, 0
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty() if enabled is None else enabled
        self.bar = None
        self.last_line = 0.0
        if self.tty:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, initial=done, unit="ep", dynamic_ncols=True, file=sys.stderr)
            except ImportError:
                self.bar = None

    def update(self, status: str) -> None:
        self.done += 1
        if status != "ok":
            self.errors += 1
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(errors=self.errors, refresh=False)
            return
        now = time.monotonic()
        if now - self.last_line >= 10 or self.done == self.total:
            self.last_line = now
            rate = (self.done) / max(now - self.t0, 1e-9)
            left = (self.total - self.done) / rate if rate > 0 else float("inf")
            print(f"[polar_bench] {self.done}/{self.total} episodes, {self.errors} errors, "
                  f"ETA {left:.0f} s", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


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


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _drive_local(cfg: EvalConfig, todo: deque, options: dict, record) -> str | None:
    """Play ``todo`` in spawned worker processes; return a fatal agent error, if any."""
    ctx = mp.get_context("spawn")
    n = max(1, min(cfg.workers, -(-len(todo) // cfg.envs_per_worker)))
    workers = [_Worker(ctx, cfg, options) for _ in range(n)]
    retry: deque[Unit] = deque()
    startup_deaths = 0
    fatal = None
    try:
        while (todo or retry or any(w.batch for w in workers)) and fatal is None:
            for w in workers:
                if not w.batch and (retry or todo):
                    w.send(_next_batch(cfg.envs_per_worker, retry, todo))
            busy = [w for w in workers if w.batch]
            ready = mp_wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=1.0)
            for i, w in enumerate(list(workers)):
                if not w.batch:
                    continue
                if w.conn in ready:
                    try:
                        recs = w.conn.recv()
                    except (EOFError, OSError):
                        recs = None
                    if recs is not None:
                        if "fatal" in recs[0]:
                            fatal = recs[0]["fatal"]
                            break
                        for rec in recs:
                            record(rec)
                        w.batch = []
                        w.finished += 1
                        startup_deaths = 0
                        continue
                dead = not w.proc.is_alive()
                overdue = (cfg.episode_timeout is not None
                           and time.monotonic() - w.started > cfg.episode_timeout * len(w.batch) + BACKSTOP_GRACE_S)
                if dead or overdue:
                    batch = w.batch
                    code = w.proc.exitcode
                    w.stop(kill=True)
                    if dead and w.finished == 0:
                        startup_deaths += 1
                        if startup_deaths >= 3:
                            raise UserError(
                                f"worker processes keep dying before finishing any episode (exit code {code}); "
                                f"their own error, if any, is printed above; check that the agent file imports "
                                f"and runs in a fresh process")
                    workers[i] = _Worker(ctx, cfg, options)
                    cfg.replaced_workers += 1
                    for unit, attempt in batch:
                        failed = _lost_unit(cfg, unit, attempt, overdue and not dead, f"exit code {code}", retry)
                        if failed is not None:
                            record(failed)
    except BaseException:
        for w in workers:
            w.stop(kill=True)
        raise
    for w in workers:
        w.stop(kill=fatal is not None)
    return fatal


def _lost_unit(cfg: EvalConfig, unit: Unit, attempt: int, overdue: bool, why: str, retry: deque) -> dict | None:
    """A unit whose worker was killed (overdue) or died: the record to journal, or None if it is retried."""
    if overdue:
        return _failed(unit, "timeout", f"the episode exceeded the {cfg.episode_timeout:g} s episode timeout "
                       f"and did not respond; its worker was killed")
    if attempt == 1:
        retry.append(unit)
        return None
    return _failed(unit, "env_error", f"the worker died twice on this episode ({why}); the environment or "
                   f"the agent crashed the process, or its machine was lost")


SHIP_LIMIT_BYTES = 512 * 2**20
_SHIP_SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}


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
    """A Ray actor holding one `EpisodeRunner` (its lanes keep an agent and a harness each); it
    unpacks the shipped agent folder into a temporary folder on its own node first."""

    def __init__(self, files: dict, agent_name: str, options: dict, step_timeout, episode_timeout, lanes: int):
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="polar_bench_agent_"))
        for rel, data in files.items():
            target = self.folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        self.runner = EpisodeRunner(str(self.folder / agent_name), options, step_timeout, episode_timeout, lanes)

    def run_batch(self, units: list) -> list[dict]:
        return self.runner.run_batch(units)


def _drive_ray(cfg: EvalConfig, todo: deque, options: dict, record) -> str | None:
    """Play ``todo`` as tasks on long-lived Ray actors; an actor (or node) that dies is replaced and
    its episodes retried once elsewhere. Return a fatal agent error, if any."""
    from ._optional import require

    ray = require("ray", "ray", "--backend ray")
    from ray.exceptions import RayError, RayTaskError

    started_here = False
    if not ray.is_initialized():
        ray.init(address=cfg.address, include_dashboard=False, log_to_driver=True,
                 **({"num_cpus": cfg.workers} if cfg.address is None and cfg.workers else {}))
        started_here = True
    cfg.workers = cfg.workers or int(ray.cluster_resources().get("CPU", 1))
    n = max(1, min(cfg.workers, -(-len(todo) // cfg.envs_per_worker)))
    remote_cls = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=1)(_RayActor)
    files = ray.put(pack_agent_folder(cfg.agent_path, skip=(cfg.out, str(journal_path(cfg.out)))))
    agent_name = Path(cfg.agent_path).name

    def new_actor():
        return remote_cls.remote(files, agent_name, options, cfg.step_timeout, cfg.episode_timeout,
                                 cfg.envs_per_worker)

    def replace(i: int) -> None:
        try:
            ray.kill(actors[i], no_restart=True)
        except Exception:  # noqa: BLE001 - gone with its node
            pass
        actors[i] = new_actor()
        cfg.replaced_workers += 1
        idle.append(i)

    actors = [new_actor() for _ in range(n)]
    idle = list(range(n))
    inflight: dict = {}  # ObjectRef -> (actor index, batch of (unit, attempt), start time)
    retry: deque[Unit] = deque()
    fatal = None
    try:
        while (todo or retry or inflight) and fatal is None:
            while idle and (retry or todo):
                i = idle.pop()
                batch = _next_batch(cfg.envs_per_worker, retry, todo)
                ref = actors[i].run_batch.remote([(u.task, u.run, u.index, u.seed) for u, _ in batch])
                inflight[ref] = (i, batch, time.monotonic())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                i, batch, _t0 = inflight.pop(ref)
                try:
                    recs = ray.get(ref)
                except RayTaskError:
                    raise  # an exception inside EpisodeRunner is a bug: keep its traceback
                except RayError as exc:  # the actor, its worker process or its node died
                    replace(i)
                    for unit, attempt in batch:
                        failed = _lost_unit(cfg, unit, attempt, False, type(exc).__name__, retry)
                        if failed is not None:
                            record(failed)
                    continue
                idle.append(i)
                if "fatal" in recs[0]:
                    fatal = recs[0]["fatal"]
                    break
                for rec in recs:
                    record(rec)
            if cfg.episode_timeout is not None:
                now = time.monotonic()
                for ref, (i, batch, t0) in list(inflight.items()):
                    if now - t0 > cfg.episode_timeout * len(batch) + BACKSTOP_GRACE_S:
                        del inflight[ref]
                        replace(i)
                        for unit, attempt in batch:
                            record(_lost_unit(cfg, unit, attempt, True, "", retry))
    finally:
        for a in actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - the actor may be gone with its node
                pass
        if started_here:
            ray.shutdown()
    return fatal


def run_evaluation(cfg: EvalConfig) -> tuple[dict, int]:
    """Run (or resume) the evaluation; return the results data and the exit code (0: every episode
    ok, 1: some episode failed). User errors raise `UserError`."""
    mismatches = check_pins(cfg.suite, cfg.tasks)
    if mismatches and not cfg.allow_version_mismatch:
        listing = ", ".join(f"{k} {v['installed']} (suite pins {v['pinned']})" for k, v in mismatches.items())
        raise UserError(f"installed versions differ from suite {cfg.suite.name}'s pins: {listing}; install "
                        f"the pinned versions, or pass --allow-version-mismatch (results marked not comparable)")
    agent_path = str(Path(cfg.agent_path))
    module = load_agent_module(agent_path)  # fails fast, in one line, on a broken agent file
    out = Path(cfg.out)
    if out.parent and not out.parent.exists():
        raise UserError(f"the folder of --out {str(out)!r} does not exist; create it or choose another path")
    if not os.access(out.parent or Path("."), os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise UserError(f"cannot write {str(out)!r}; choose a writable --out")
    agent_sha = agent_file_hash(agent_path)
    units = cfg.units()
    identity = {"suite": cfg.suite.hash, "agent_sha256": agent_sha, "runs": cfg.runs,
                "episodes_override": cfg.episodes_override, "tasks": [t.id for t in cfg.tasks]}
    journal = Journal(journal_path(out), identity)
    started = _now()
    todo = deque(u for u in units if u.key not in journal.done)
    options = {t.id: dict(t.options) for t in cfg.tasks}
    progress = _Progress(len(units), len(units) - len(todo), cfg.progress)

    def record(rec: dict) -> None:
        journal.append(rec)
        progress.update(rec["status"])

    drive = _drive_ray if cfg.backend == "ray" else _drive_local
    fatal: str | None = None
    interrupted = False
    try:
        if todo:
            fatal = drive(cfg, todo, options, record)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        journal.close()
        progress.close()
    if fatal is not None:
        raise AgentLoadError(fatal)
    if interrupted:
        raise KeyboardInterrupt(f"{len(journal.done)} of {len(units)} episodes are saved in {journal.path}; "
                                f"run the same command again to resume")
    episodes = []
    for u in units:
        rec = journal.done[u.key]
        episodes.append({"task": u.task, "run": u.run, "index": u.index, "seed": u.seed,
                         **{k: v for k, v in rec.items() if k not in ("task", "run", "index", "seed")}})
    info = agent_info(module)
    commit, dirty = _git_state()
    tasks_json = cfg.suite.summary_json(cfg.tasks)
    if cfg.episodes_override:
        for t in tasks_json["tasks"]:
            t["seeds"] = [u.seed for u in units if u.task == t["id"] and u.run == 0]
            t["episodes"] = cfg.episodes_override
    data = {
        "format_version": 1,
        "polar_bench": {"version": __version__, "git_commit": commit, "git_dirty": dirty},
        "suite": tasks_json,
        "versions": {pkg: version_of(pkg) or "not installed" for pkg in sorted(set(cfg.suite.pins) | {"polar_bench"})},
        "version_mismatches": mismatches,
        "comparable": not mismatches,
        "standard": cfg.standard and not cfg.episodes_override and len(cfg.tasks) == len(cfg.suite.tasks)
                    and cfg.runs >= cfg.suite.runs,
        "environment": {"python": platform.python_version(), "os": platform.platform(), "cpu": _cpu_name(),
                        "cpu_count": os.cpu_count() or 1},
        "agent": {"path": agent_path, "sha256": agent_sha, "name": str(info.get("name", Path(agent_path).stem)),
                  "info": info},
        "config": {"runs": cfg.runs, "episodes_override": cfg.episodes_override,
                   "tasks": [t.id for t in cfg.tasks], "workers": cfg.workers,
                   "step_timeout": cfg.step_timeout, "episode_timeout": cfg.episode_timeout,
                   "backend": cfg.backend, "envs_per_worker": cfg.envs_per_worker,
                   "replaced_workers": cfg.replaced_workers},
        "command": cfg.command or " ".join(shlex.quote(a) for a in sys.argv),
        "started": journal.started or started,
        "finished": _now(),
        "episodes": episodes,
    }
    write_results(data, out)
    code = 0 if all(e["status"] == "ok" for e in episodes) else 1
    return data, code


def _failed(unit: Unit, status: str, error: str) -> dict:
    return {"task": unit.task, "run": unit.run, "index": unit.index, "seed": unit.seed, "return": None,
            "length": 0, "status": status, "error": error, "wall_seconds": 0.0, "agent_seconds": 0.0}
