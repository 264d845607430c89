"""Run an untrusted policy program (``act(observation) -> action``) in a locked-down process.

`SandboxedPolicy` runs the program in a fresh interpreter (spawned, never forked from the caller's
memory) that stays loaded across calls; observations and actions cross pipes in the plain-data
format of `polar_bench.lockdown.wire`, never pickled. Every failure of the program raises
`SandboxViolation`, and `SandboxedPolicy.layers` says which layers took effect on this machine.
See docs/sandbox.md for how to use it, what confines the program and what does not.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

from polar_bench.errors import PolarBenchError, describe_value

from ..lockdown import module_file, wire
from ..lockdown.limits import TreeLimits
from ..lockdown.process import close_quietly, end_tree, kill_process_group, signal_name

__all__ = ["SandboxedPolicy", "SandboxViolation", "SandboxError", "DEFAULT_ALLOWED_IMPORTS", "kill_process_group"]

#: Modules a policy program may import (with their submodules). A first filter, not the boundary.
DEFAULT_ALLOWED_IMPORTS: frozenset[str] = frozenset({
    "math", "cmath", "random", "numpy", "collections", "itertools", "functools", "heapq",
    "statistics", "bisect", "array", "dataclasses", "enum", "typing", "operator", "string", "re",
    "fractions", "decimal", "copy", "time", "abc", "numbers", "__future__",
})

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")
_KILL_KINDS = frozenset({"import", "forbidden", "timeout", "cpu", "memory", "crash", "exit",
                         "protocol", "output"})


class SandboxError(PolarBenchError):
    """The sandbox itself could not be set up (not Linux, the interpreter failed to start, ...)."""


class SandboxViolation(PolarBenchError):
    """The untrusted program broke a rule, failed, or returned an unusable action.

    Attributes:
        reason: one line for people and for the refinement prompt, e.g. ``refused import 'socket'``,
            ``timeout after 1.0 s``, ``crashed with signal 11 (SIGSEGV)``.
        kind: ``import``, ``forbidden`` (a refused operation), ``timeout``, ``cpu``, ``memory``,
            ``crash``, ``exit`` (the program ended its process), ``error`` (an exception in the
            program), ``invalid_action``, ``protocol`` (unreadable reply), ``closed``.
        traceback: the program's traceback for ``error`` and ``memory``, else ``""``.
        output: what the program printed so far (capped).
        fatal: whether the process was stopped (then `SandboxedPolicy.restart` starts afresh);
            ``error`` and ``invalid_action`` leave the program loaded with its state.
    """

    def __init__(self, kind: str, reason: str, *, traceback: str = "", output: str = "",
                 fatal: bool = True):
        self.kind = kind
        self.reason = reason
        self.traceback = traceback
        self.output = output
        self.fatal = fatal
        super().__init__(reason)

    def __reduce__(self) -> tuple[Callable[..., SandboxViolation], tuple[str, str, str, str, bool]]:  # picklable
        return (_rebuild_violation, (self.kind, self.reason, self.traceback, self.output, self.fatal))


def _rebuild_violation(kind: str, reason: str, traceback: str, output: str, fatal: bool) -> SandboxViolation:
    return SandboxViolation(kind, reason, traceback=traceback, output=output, fatal=fatal)


def _module_paths() -> list[str]:
    """The directory the child needs on sys.path: numpy's (the toolkit's modules it loads by file)."""
    import numpy
    return [os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))]


class SandboxedPolicy:
    """An untrusted policy program, loaded once in a sandboxed process and called step by step.

    Args:
        source: Python source that defines ``act(observation)`` (and optionally ``reset(seed)``).
        cpu_seconds: CPU time for the whole life of the process (the kernel's RLIMIT_CPU), on top of
            the interpreter's start-up.
        memory_mb: address space the program may add to the started interpreter (RLIMIT_AS).
        step_timeout: wall-clock seconds per `act` / `reset` call; the parent then kills the process.
        start_timeout: wall-clock seconds to start the interpreter and run the program's top level.
        max_output_bytes: what is kept of the program's stdout and stderr together.
        max_action_bytes: the largest reply accepted from the program.
        action_space: optional Gymnasium space; each action must satisfy ``action_space.contains``
            (Box actions may be lists: they are converted to arrays of the space's dtype first).
        validate_action: optional ``f(action) -> action`` run in the parent after the space check;
            it returns the action to use or raises (any exception becomes ``invalid_action``).
        allowed_imports: top-level module names the program may import (`DEFAULT_ALLOWED_IMPORTS`).
        python_guards: the Python-level first filter (import allow-list, audit hook). Turning it off
            is only for testing that the kernel layers hold on their own.
    """

    def __init__(self, source: str, *, cpu_seconds: float = 60.0, memory_mb: int = 512,
                 step_timeout: float = 1.0, start_timeout: float = 30.0,
                 max_output_bytes: int = 64 * 1024, max_action_bytes: int = 16 << 20,
                 action_space: Any = None, validate_action: Callable[[Any], Any] | None = None,
                 allowed_imports: Iterable[str] = DEFAULT_ALLOWED_IMPORTS,
                 python_guards: bool = True, _disable: Iterable[str] = ()):
        if not isinstance(source, str):
            raise TypeError(f"source must be a str of Python code, got {type(source).__name__}")
        for name, value in (("cpu_seconds", cpu_seconds), ("memory_mb", memory_mb),
                            ("step_timeout", step_timeout), ("start_timeout", start_timeout),
                            ("max_output_bytes", max_output_bytes),
                            ("max_action_bytes", max_action_bytes)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not sys.platform.startswith("linux"):
            raise SandboxError(f"the sandbox needs Linux; this is {sys.platform}")
        self.source = source
        self.cpu_seconds = float(cpu_seconds)
        self.memory_mb = int(memory_mb)
        self.step_timeout = float(step_timeout)
        self.start_timeout = float(start_timeout)
        self.max_output_bytes = int(max_output_bytes)
        self.max_action_bytes = int(max_action_bytes)
        self.action_space = action_space
        self.validate_action = validate_action
        self.allowed_imports = frozenset(allowed_imports)
        self.python_guards = bool(python_guards)
        self._disable = tuple(_disable)
        self._proc: subprocess.Popen | None = None
        self._workdir: str | None = None
        self._req = self._resp = self._out = -1
        self._rbuf = bytearray()
        self._poller: Any = None
        self._limits: TreeLimits | None = None
        self._output = bytearray()
        self._output_dropped = 0
        self._dead: SandboxViolation | None = None
        self._closed = False
        #: The protection layers that took effect in the current process, as the child reported.
        self.layers: dict[str, str] = {}
        #: Number of successful `act` calls since the last start.
        self.calls = 0

    # ------------------------------------------------------------------------- life cycle
    def __enter__(self) -> SandboxedPolicy:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    @property
    def pid(self) -> int | None:
        """The process id of the sandboxed interpreter, while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    @property
    def alive(self) -> bool:
        """Whether the program is loaded and can be called."""
        return self._proc is not None and self._dead is None

    @property
    def output(self) -> str:
        """What the program printed (stdout and stderr together), capped at ``max_output_bytes``."""
        self._drain_output()
        text = self._output.decode("utf-8", "replace")
        if self._output_dropped:
            text += f"\n[{self._output_dropped} more bytes of output dropped]"
        return text

    def start(self) -> SandboxedPolicy:
        """Start the interpreter and load the program; raise `SandboxViolation` if loading fails."""
        if self._closed:
            raise SandboxError("this SandboxedPolicy was closed; make a new one")
        if self._proc is not None:
            raise SandboxError("already started; call restart() to start afresh")
        self._dead = None
        self.calls = 0
        self._rbuf.clear()
        self._output.clear()
        self._output_dropped = 0
        self._workdir = tempfile.mkdtemp(prefix="polar_sandbox_")
        os.chmod(self._workdir, 0o555)  # the program's (empty, read-only) root
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        out_r, out_w = os.pipe()
        cfg = {
            "req_fd": req_r, "resp_fd": resp_w, "workdir": self._workdir,
            "paths": _module_paths(), "preload": sorted(self.allowed_imports),
            "toolkit": {name: module_file(name) for name in ("wire", "seccomp", "kernel")},
            "allowed": sorted(self.allowed_imports), "guards": self.python_guards,
            "cpu_seconds": self.cpu_seconds, "memory_mb": self.memory_mb,
            "max_output": self.max_output_bytes, "disable": list(self._disable),
        }
        # the memory the program adds, counted by the kernel (a memory cgroup) where it can: the same
        # limits code as the agent process of `evaluate`
        self._limits = TreeLimits(None if "memory_limit" in self._disable else self.memory_mb, None,
                                  who="sandboxed program")
        cfg["limits"] = self._limits.child_config()
        env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "LC_ALL": "C.UTF-8"}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", _CHILD, json.dumps(cfg)],
                stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=env, cwd=self._workdir,
                pass_fds=(req_r, resp_w), close_fds=True, start_new_session=True)
            self._limits.watch(self._proc.pid)
        except OSError as exc:
            for fd in (req_r, req_w, resp_r, resp_w, out_r, out_w):
                os.close(fd)
            self._cleanup_workdir()
            self._limits.close()
            self._limits = None
            raise SandboxError(f"could not start the sandbox interpreter: {exc}") from exc
        for fd in (req_r, resp_w, out_w):
            os.close(fd)
        self._req, self._resp, self._out = req_w, resp_r, out_r
        os.set_blocking(self._req, False)
        os.set_blocking(self._out, False)
        os.set_blocking(self._resp, False)
        self._poller = select.poll()
        self._poller.register(self._resp, select.POLLIN)
        self._poller.register(self._out, select.POLLIN)
        self.layers = {}
        deadline = time.monotonic() + self.start_timeout
        kind, hello = self._receive(deadline, "start")
        if kind != b"H" or not isinstance(hello, dict):
            self._fail("protocol", "the sandbox did not start", fatal=True)
        self.layers = {"memory_limit": self._limits.memory_layer(), **{str(k): str(v) for k, v in hello.items()}}
        self._send(b"L", self.source, deadline, "start")
        kind, value = self._receive(deadline, "start")
        self._check_reply(kind, value, loading=True)  # a failure to load is fatal
        return self

    def restart(self) -> SandboxedPolicy:
        """Stop the current process (if any) and start the program afresh, with fresh state."""
        self._kill()
        self._dead = None
        return self.start()

    def close(self) -> None:
        """Stop the process and remove its directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._kill()

    # ------------------------------------------------------------------------- calls
    def act(self, observation: Any) -> Any:
        """Call the program's ``act(observation)`` and return its (validated) action.

        Observations may be numbers, strings, bytes, lists, tuples, dicts and numeric numpy arrays.
        Raises `SandboxViolation` for every failure of the program.
        """
        if self._proc is None and not self._closed and self._dead is None:
            self.start()
        value = self._call(b"A", observation)
        action = self._validate(value)
        self.calls += 1
        return action

    def reset(self, seed: int | None = None) -> None:
        """Call the program's ``reset(seed)`` if it defines one (its state is otherwise kept)."""
        if self._proc is None and not self._closed and self._dead is None:
            self.start()
        self._call(b"S", seed)

    def _call(self, op: bytes, arg: Any) -> Any:
        if self._dead is not None:
            raise SandboxViolation(self._dead.kind, f"the program was stopped earlier: {self._dead.reason}",
                                   traceback=self._dead.traceback, output=self.output)
        if self._closed:
            raise SandboxViolation("closed", "the sandbox was closed", fatal=True)
        deadline = time.monotonic() + self.step_timeout
        self._send(op, arg, deadline, "step")
        kind, value = self._receive(deadline, "step")
        return self._check_reply(kind, value, loading=False)

    def _check_reply(self, kind: bytes, value: Any, *, loading: bool) -> Any:
        if kind == b"O":
            return value
        if kind in (b"E", b"V") and isinstance(value, dict):
            vkind = str(value.get("kind", "error"))
            reason = str(value.get("reason", "unknown failure"))
            if vkind == "memory":
                reason = f"memory limit of {self.memory_mb} MB exceeded ({reason})"
            elif vkind == "invalid_action":
                reason = f"invalid action: {reason}"
            elif loading and vkind == "error":
                reason = f"the program failed to load: {reason}"
            fatal = kind == b"V" or vkind in _KILL_KINDS or loading
            self._fail(vkind, reason, traceback=str(value.get("traceback", "")), fatal=fatal)
        self._fail("protocol", f"unexpected reply {kind!r} from the sandbox", fatal=True)

    def _validate(self, action: Any) -> Any:
        space = self.action_space
        if space is not None:
            candidate = action
            try:
                import numpy as np
                from gymnasium import spaces
                if isinstance(space, spaces.Box) and not isinstance(action, np.ndarray):
                    candidate = np.asarray(action, dtype=space.dtype)
                elif isinstance(space, spaces.Box) and action.dtype != space.dtype \
                        and action.dtype.kind in "iuf":
                    candidate = action.astype(space.dtype)
                ok = bool(space.contains(candidate))
            except Exception:  # noqa: BLE001 - a malformed action is just not contained
                ok = False
            if not ok:
                self._fail("invalid_action", f"invalid action {describe_value(action)}: not in {space}",
                           fatal=False)
            action = candidate
        if self.validate_action is not None:
            try:
                action = self.validate_action(action)
            except Exception as exc:  # noqa: BLE001
                self._fail("invalid_action", f"invalid action {describe_value(action)}: {exc}", fatal=False)
        return action

    # ------------------------------------------------------------------------- plumbing
    def _fail(self, kind: str, reason: str, *, traceback: str = "", fatal: bool) -> None:
        if fatal:
            self._kill()
        violation = SandboxViolation(kind, reason, traceback=traceback, output=self.output,
                                     fatal=fatal)
        if fatal:
            self._dead = violation
        raise violation

    def _send(self, op: bytes, arg: Any, deadline: float, phase: str) -> None:
        try:
            payload = op + wire.encode(arg)
        except TypeError as exc:
            raise TypeError(f"cannot send this observation to the sandbox: {exc}") from None
        data = memoryview(len(payload).to_bytes(4, "little") + payload)
        while data:
            try:
                data = data[os.write(self._req, data):]
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, OSError):
                self._died(phase)
            self._wait(select.POLLOUT, self._req, deadline, phase)

    def _receive(self, deadline: float, phase: str) -> tuple[bytes, Any]:
        buf = self._rbuf
        while True:
            if len(buf) >= 4:
                n = int.from_bytes(buf[:4], "little")
                if n > self.max_action_bytes + 64:
                    self._fail("protocol", f"reply of {n} bytes exceeds max_action_bytes "
                                           f"({self.max_action_bytes})", fatal=True)
                if len(buf) >= 4 + n:
                    frame = bytes(buf[4:4 + n])
                    del buf[:4 + n]
                    if not frame:
                        self._fail("protocol", "empty reply frame", fatal=True)
                    try:
                        return frame[:1], wire.decode(frame, 1)
                    except wire.WireError as exc:
                        self._fail("protocol", f"unreadable reply from the program: {exc}", fatal=True)
            try:  # the reply is often there already (the write woke the child): skip poll()
                chunk = os.read(self._resp, 1 << 20)
            except BlockingIOError:
                self._wait(select.POLLIN, self._resp, deadline, phase)
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._died(phase)
            buf += chunk

    def _wait(self, event: int, fd: int, deadline: float, phase: str) -> None:
        """Wait until ``fd`` is ready for ``event``, draining output meanwhile; enforce the deadline."""
        if fd == self._resp and event == select.POLLIN:
            poller = self._poller
        else:
            poller = select.poll()
            poller.register(fd, event)
            if self._out >= 0:
                poller.register(self._out, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                limit = self.step_timeout if phase == "step" else self.start_timeout
                what = "" if phase == "step" else " while starting (loading the program)"
                self._fail("timeout", f"timeout after {limit:g} s{what}", fatal=True)
            hit = False
            for rfd, _revents in poller.poll(int(left * 1000) + 1):
                if rfd == fd:
                    hit = True
                elif not self._drain_output():  # the output pipe closed: stop watching it
                    poller.unregister(rfd)
            if hit:
                return

    def _drain_output(self) -> bool:
        """Read what is waiting on the output pipe; False once it is closed."""
        if self._out < 0:
            return False
        while True:
            try:
                chunk = os.read(self._out, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            room = self.max_output_bytes + 64 - len(self._output)  # + the child's marker
            if room > 0:
                self._output += chunk[:room]
            self._output_dropped += max(0, len(chunk) - max(room, 0))

    def _died(self, phase: str) -> None:
        """The child closed its pipe: find out why and raise."""
        proc = self._proc
        if proc is None:
            self._fail("protocol", "the sandbox is not running", fatal=True)
            return
        cpu = 0.0
        give_up = time.monotonic() + 2.0
        while proc.returncode is None:
            try:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:  # pragma: no cover - reaped elsewhere
                proc.wait()
                break
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu = usage.ru_utime + usage.ru_stime
            elif time.monotonic() > give_up:
                self._fail("protocol", "the sandbox closed its pipe but did not exit", fatal=True)
            else:
                time.sleep(0.005)
        rc = int(proc.returncode or 0)
        over = self._limits.check() if self._limits is not None else None
        if over is not None:
            self._fail("memory", over, fatal=True)  # "sandboxed program memory limit of 512 MiB exceeded"
        if rc < 0:
            sig = -rc
            # RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL one second later (the hard one).
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.cpu_seconds):
                self._fail("cpu", f"cpu time limit of {self.cpu_seconds:g} s exceeded", fatal=True)
            if sig == signal.SIGSYS:
                self._fail("forbidden", "a refused system call (seccomp, SIGSYS)", fatal=True)
            self._fail("crash", f"crashed with signal {sig} ({signal_name(sig)})", fatal=True)
        if phase == "start" and not self.layers:
            self._fail("crash", f"the sandbox failed to start (exit code {rc}): "
                                f"{self.output[-2000:].strip()}", fatal=True)
        self._fail("exit", f"the program ended its process (exit code {rc})", fatal=True)

    def _kill(self) -> None:
        end_tree(self._proc, self._limits)
        self._proc, self._limits = None, None
        self._drain_output()
        self._req, self._resp, self._out = close_quietly(self._req, self._resp, self._out)
        self._rbuf.clear()
        self._poller = None
        self._cleanup_workdir()

    def _cleanup_workdir(self) -> None:
        if self._workdir is not None:
            try:
                os.chmod(self._workdir, 0o700)
            except OSError:
                pass
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

