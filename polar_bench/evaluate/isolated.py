"""`IsolatedAgents`: the agent file loaded in a locked-down process of its own
(`polar_bench.evaluate.agent_process`), reached over two pipes: observations go down pickled (plain
data and numeric arrays only, `polar_bench.evaluate.plain.dumps_request`), actions come back in the
wire format (never unpickled), every frame's size bounded, every call under a wall-clock deadline
past which the process group is killed."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from ..errors import AgentLoadError
from ..llm.proxy import PROXY_PORT, LLMProxy
from ..lockdown import wire
from ..lockdown.limits import TreeLimits
from ..lockdown.process import close_quietly, end_tree, signal_name
from ..task_info import TaskInfo
from .backend import (
    AGENT_OUTPUT_BYTES,
    DEFAULT_AGENT_DISK_MB,
    DEFAULT_AGENT_MEMORY_MB,
    DEFAULT_AGENT_PROCESSES,
    DEFAULT_AGENT_THREADS,
    MAX_REPLY_BYTES,
    START_TIMEOUT_S,
    AgentGone,
    Slot,
    agent_thread_env,
)
from .lockdown import AGENT_UID
from .plain import NotPlain, dumps_request, plain_copy


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Forwarder:
    """Accepts the agent's connections on the listening socket it handed over (127.0.0.1:PORT inside
    its network namespace) and joins each to the LLM endpoint the user named, byte for byte."""

    def __init__(self, listener: socket.socket, target: tuple[str, int]):
        self.listener = listener
        self.target = target
        threading.Thread(target=self._accept, daemon=True, name="polar_bench-llm-forward").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=30)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)
        client.close()
        upstream.close()

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the other thread
        except OSError:
            pass
        self.listener.close()


# The agent process's command: ``-m polar_bench.evaluate.agent_process`` would run a module that the
# package has imported already, and Python warns about that on every start.
AGENT_MAIN = "from polar_bench.evaluate.agent_process import main; main()"
PIPE_BYTES = 1 << 20


def _forward_output(fd: int, budget: int = AGENT_OUTPUT_BYTES) -> None:
    """Copy what the agent process prints (read from the pipe ``fd``) to this process's stderr, up to
    ``budget`` bytes; drop the rest with one line saying so. Ends when every writer has closed the pipe."""
    dropped = False
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            if budget > 0:
                part = chunk[:budget]
                budget -= len(part)
                try:
                    os.write(2, part)
                except OSError:
                    budget = 0
            elif not dropped:
                dropped = True
                try:
                    os.write(2, f"\n[polar_bench: the agent process printed over {AGENT_OUTPUT_BYTES >> 20} MiB; "
                                f"the rest of its output is dropped]\n".encode())
                except OSError:
                    pass
    finally:
        os.close(fd)


def _widen(fd: int) -> None:
    """Give the request pipe up to 1 MiB of buffer (Linux's default 64 KiB holds five Procgen frames:
    a request for 8 lanes of Procgen would be written in pieces, each waiting for the agent process
    to read the last). Where the system allows less, the default stays."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is None:
        return
    try:
        fcntl.fcntl(fd, setpipe, PIPE_BYTES)
    except OSError:
        pass



class IsolatedAgents:
    """The agent file loaded in a locked-down process of its own (see `agent_process`)."""

    mode = "process"
    members = 1
    can_pipeline = True

    def __init__(self, agent_path: str, *, memory_mb: int | None = DEFAULT_AGENT_MEMORY_MB,
                 disk_mb: int | None = DEFAULT_AGENT_DISK_MB, max_processes: int = DEFAULT_AGENT_PROCESSES,
                 network: bool = False,
                 llm_endpoint: tuple[str, int] | None = None, start_timeout: float = START_TIMEOUT_S,
                 proxy: LLMProxy | None = None, threads: int = DEFAULT_AGENT_THREADS):
        self.agent_path = os.path.abspath(agent_path)
        self.proxy = proxy
        # with a proxy, the port of the agent's namespace that the worker serves is the proxy's
        self.llm_endpoint = ("127.0.0.1", PROXY_PORT) if proxy is not None else llm_endpoint
        self._forwarder: _Forwarder | None = None
        self._proxy_server: Any = None
        self._proxy_port = PROXY_PORT  # where the agent reaches the proxy (see start)
        self._channel: socket.socket | None = None
        self.memory_mb = memory_mb
        self.disk_mb = disk_mb
        self._limits: TreeLimits | None = None
        self.max_processes = max_processes
        self.network = network
        self.threads = int(threads)
        self.start_timeout = start_timeout
        self.layers: dict[str, str] = {}
        self.info: dict = {}
        self.generation = 0
        self._proc: subprocess.Popen | None = None
        self._workdir: str | None = None
        self._req = self._resp = -1
        self._poll: Any = None
        self._buf = bytearray()
        self._next = 0
        self._seq = 0
        self._outstanding: set[int] = set()  # requests sent and not answered yet
        self._stash: dict[int, tuple[bytes, Any]] = {}  # answers read while waiting for another
        self.starts = 0

    # ------------------------------------------------------------------ life cycle
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        self.kill()
        self.generation += 1
        self.starts += 1
        self._seq = 0  # the greeting comes as the answer to request 0
        self._workdir = tempfile.mkdtemp(prefix="polar_bench_agent_")
        if os.geteuid() == 0:
            os.chown(self._workdir, AGENT_UID, AGENT_UID)  # the agent's uid after it drops root
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        _widen(req_w)
        cfg = {"req_fd": req_r, "resp_fd": resp_w, "workdir": self._workdir, "agent_path": self.agent_path,
               "memory_mb": self.memory_mb, "max_processes": self.max_processes, "network": self.network}
        self._limits = TreeLimits(self.memory_mb, self.disk_mb)
        cfg["limits"] = self._limits.child_config()
        passed = [req_r, resp_w]
        child_channel = None
        if self.llm_endpoint is not None and not self.network:
            self._channel, child_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            cfg["forward_port"] = int(self.llm_endpoint[1])
            cfg["forward_fd"] = child_channel.fileno()
            passed.append(child_channel.fileno())
        # PYTHONHASHSEED: str hashes, and with them the order of a set of strings, are the same in every
        # agent process, so an agent that iterates over one plays the same on every run and machine
        env = dict(os.environ, HOME=self._workdir, TMPDIR=self._workdir, PYTHONDONTWRITEBYTECODE="1",
                   PYTHONHASHSEED="0", **agent_thread_env(self.threads))
        out_r, out_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-B", "-c", AGENT_MAIN, json.dumps(cfg)],
                stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=env, cwd=self._workdir,
                pass_fds=tuple(passed), close_fds=True, start_new_session=True)
            self._limits.watch(self._proc.pid)
        except BaseException:
            os.close(out_r)
            raise
        else:
            threading.Thread(target=_forward_output, args=(out_r,), name="agent-output", daemon=True).start()
        finally:
            os.close(out_w)
            os.close(req_r)
            os.close(resp_w)
            if child_channel is not None:
                child_channel.close()
        self._req, self._resp = req_w, resp_r
        os.set_blocking(self._resp, False)
        self._poll = select.poll()
        self._poll.register(self._resp, select.POLLIN)
        hello = self._greeting()
        self.layers = {"memory_limit": self._limits.memory_layer(),
                       **{str(k): str(v) for k, v in hello["layers"].items()}}
        if self.disk_mb and not self.layers.get("disk_limit", "").startswith("tmpfs"):
            self._limits.watch_folder(self._workdir)
        self._serve_llm()
        info = hello.get("info")
        self.info = info if isinstance(info, dict) else {}

    def _greeting(self) -> dict:
        """The agent process's first frame, once the agent file imported: its layers and AGENT_INFO.
        `AgentLoadError` (the agent process killed) when the file failed to load or the frame is junk."""
        tag, hello = self._receive(time.monotonic() + self.start_timeout, "start")
        if tag == b"E" and isinstance(hello, dict):
            self.kill()
            raise AgentLoadError(str(hello.get("error", "the agent file failed to load")))
        if tag != b"H" or not isinstance(hello, dict) or not isinstance(hello.get("layers"), dict):
            self.kill()
            raise AgentLoadError("the agent process sent an unreadable greeting; it must not write to its "
                                 "protocol pipes")
        return hello

    def _serve_llm(self) -> None:
        """Serve the agent's way to an LLM, given the layers that took effect: the LLM proxy (on a port of
        the host, or on the loopback listener the agent process handed over), or the --llm-endpoint forwarder."""
        netns = self.layers.get("network_namespace", "").startswith("on")
        if self.proxy is not None and not netns:
            # the host's network (--agent-network, or a kernel without network namespaces): the proxy
            # listens on a free 127.0.0.1 port of the host, still reached with the slot's token only
            self._proxy_server = self.proxy.serve()
            self._proxy_port = int(self._proxy_server.server_address[1])
        elif self._channel is not None and self.llm_endpoint is not None:
            self._proxy_port = PROXY_PORT
            self._channel.settimeout(10)
            try:
                _, fds, _, _ = socket.recv_fds(self._channel, 16, 1)
            except OSError:
                fds = []
            if len(fds) != 1:
                self.kill()
                raise AgentLoadError("the agent process did not hand over its loopback listener for the LLM "
                                     "endpoint; run without --llm-endpoint to see whether the agent starts")
            listener = socket.socket(fileno=fds[0])
            if self.proxy is not None:
                self._proxy_server = self.proxy.serve(listener)
            else:
                self._forwarder = _Forwarder(listener, self.llm_endpoint)

    def kill(self) -> None:
        end_tree(self._proc, self._limits)
        self._proc, self._limits = None, None
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self._proxy_server is not None and self.proxy is not None:
            self.proxy.stop(self._proxy_server)
            self._proxy_server = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._req, self._resp = close_quietly(self._req, self._resp)
        self._buf.clear()
        self._outstanding.clear()
        self._stash.clear()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def restart(self) -> None:
        self.kill()

    def close(self) -> None:
        if self.alive():
            try:
                self._send(b"Q", None, time.monotonic() + 5)
                self._proc.wait(timeout=5)  # type: ignore[union-attr]  # alive() checked it
            except (AgentGone, subprocess.TimeoutExpired):
                pass
        self.kill()

    # ------------------------------------------------------------------ plumbing
    def _died(self, phase: str) -> AgentGone:
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
        over = self._limits.check() if self._limits is not None else None
        self.kill()
        if over is not None:  # "agent memory limit of 8 GiB exceeded"
            return AgentGone("agent_error", f"{over} {phase}")
        if code is not None and code < 0:
            how = f"was killed by {signal_name(-code)}" + (" (out of memory?)" if -code == signal.SIGKILL else "")
        elif code is not None:
            how = f"ended itself (exit code {code})"
        else:
            how = "closed its pipe"
        return AgentGone("agent_error", f"the agent process {how} {phase}")

    def _send(self, tag: bytes, value: Any, deadline: float) -> int:
        """Send a request; return its sequence number."""
        self._seq += 1
        payload = tag + dumps_request([self._seq, value])
        self._outstanding.add(self._seq)
        data = memoryview(len(payload).to_bytes(4, "little") + payload)
        while data:
            try:
                data = data[os.write(self._req, data):]
            except BrokenPipeError:
                raise self._died("while receiving a request") from None
            except BlockingIOError:  # pragma: no cover - the request pipe is blocking
                pass
            if data and time.monotonic() > deadline:
                self.kill()
                raise AgentGone("timeout", "timeout")
        return self._seq

    def _receive(self, deadline: float, phase: str, seq: int | None = None) -> tuple[bytes, Any]:
        """The answer to request ``seq`` (default: the latest). The agent process answers in order;
        an answer to another outstanding request read meanwhile is kept for its own `_receive`, and a
        frame that answers nothing outstanding (a forked child's, one given after a timeout) is skipped."""
        wanted = self._seq if seq is None else seq
        if wanted in self._stash:
            self._outstanding.discard(wanted)
            return self._stash.pop(wanted)
        buf = self._buf
        while True:
            if len(buf) >= 4:
                n = int.from_bytes(buf[:4], "little")
                if n > MAX_REPLY_BYTES or n == 0:
                    self.kill()
                    raise AgentGone("agent_error", f"the agent process sent a reply of {n} bytes "
                                                   f"(at most {MAX_REPLY_BYTES} allowed)")
                if len(buf) >= 4 + n:
                    frame = bytes(buf[4:4 + n])
                    del buf[:4 + n]
                    try:
                        seq, value = wire.decode(frame, 1)
                    except (wire.WireError, TypeError, ValueError) as exc:
                        self.kill()
                        raise AgentGone("agent_error", f"the agent process sent an unreadable reply: {exc}") from None
                    got = seq
                    if got == wanted:
                        self._outstanding.discard(wanted)
                        return frame[:1], value
                    if not isinstance(got, int) or got > self._seq:
                        self.kill()
                        raise AgentGone("agent_error", "the agent process answered a request it was not sent")
                    if got in self._outstanding:
                        self._outstanding.discard(got)
                        self._stash[got] = (frame[:1], value)
                    continue
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise AgentGone("timeout", "timeout")
            if not self._poll.poll(min(left, 1e6) * 1000 + 1):
                continue
            try:
                chunk = os.read(self._resp, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                if phase == "start":
                    err = self._died("while importing the agent file")
                    raise AgentLoadError(f"{err.message}; check that {self.agent_path} imports and runs in a "
                                         f"fresh process") from None
                raise self._died(f"while {phase}")
            buf += chunk

    def _call(self, tag: bytes, value: Any, timeout: float | None, phase: str) -> Any:
        if not self.alive():
            self.start()
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        self._send(tag, value, deadline)
        kind, reply = self._receive(deadline, phase)
        if kind == b"O":
            return reply
        if kind == b"E" and isinstance(reply, dict):
            if reply.get("load"):
                raise AgentLoadError(str(reply.get("error")))
            raise _RequestFailed(str(reply.get("error", "the request failed")))
        self.kill()
        raise AgentGone("agent_error", f"the agent process sent an unexpected reply {kind!r}")

    # ------------------------------------------------------------------ the interface
    def current(self, slot: Slot) -> bool:
        """Whether ``slot`` still lives: its process is the one running now."""
        return slot.generation == self.generation and self.alive()

    def make(self, task: TaskInfo, run: int, member: int = 0) -> Slot:
        if not self.alive():
            self.start()
        self._next += 1
        token = self.proxy.new_token() if self.proxy is not None else None
        base = f"http://127.0.0.1:{self._proxy_port}/a/{token}/v1" if token is not None else None
        try:
            reply = self._call(b"M", {"slot": self._next, "task": task.to_json(), "run": int(run), "llm_base": base,
                                      "llm_grammar": self.proxy is not None and self.proxy.grammar,
                                      "llm_budget": self.proxy.budget.to_json() if self.proxy is not None else None},
                               self.start_timeout, "building the agent (make_agent)")
        except AgentGone as gone:
            raise AgentLoadError(f"make_agent({task.id!r}, run={run}) in {self.agent_path}: {gone.message}") from None
        except _RequestFailed as exc:
            raise AgentLoadError(str(exc)) from None
        if not isinstance(reply, dict):
            raise AgentLoadError("the agent process answered make_agent with junk")
        return Slot(self._next, bool(reply.get("wants_text")), bool(reply.get("batch")), self.generation,
                    bool(reply.get("info", True)), token)

    def reset(self, slots: list[Slot], seeds: list[int]) -> list[str | None]:
        reply = self._call(b"R", {"slots": [s.id for s in slots], "seeds": [int(s) for s in seeds]},
                           self.start_timeout, "resetting the agent")
        errors = reply.get("errors") if isinstance(reply, dict) else None
        if not isinstance(errors, list) or len(errors) != len(slots):
            self.kill()
            raise AgentGone("agent_error", "the agent process answered reset() with junk")
        return [None if e is None else str(e)[:8000] for e in errors]

    def act(self, slots: list[Slot], observations: list, infos: list,
            timeout: float | None) -> tuple[list, list[str | None]]:
        seq = self.act_send(slots, observations, infos, timeout)
        return self.act_receive(seq, len(slots), time.monotonic() + (timeout if timeout is not None else 1e9))

    def act_send(self, slots: list[Slot], observations: list, infos: list, timeout: float | None) -> int:
        """Send an act request without waiting for its answer (`act_receive`); return its number. The
        episode loop keeps two in flight, so that the worker steps one half of its lanes while the
        agent process computes the other half's actions."""
        if not self.alive():
            self.start()
        request = {"slots": [s.id for s in slots], "observations": observations, "infos": infos}
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        try:
            return self._send(b"A", request, deadline)
        except NotPlain:  # an info value that is not plain data: send a plain copy
            request["infos"] = [plain_copy(i) for i in infos]
            request["observations"] = [plain_copy(o) for o in observations]
            return self._send(b"A", request, deadline)

    def act_receive(self, seq: int, lanes: int, deadline: float) -> tuple[list, list[str | None]]:
        kind, reply = self._receive(deadline, "acting", seq)
        if kind != b"O":
            if kind == b"E" and isinstance(reply, dict) and not reply.get("load"):
                self.kill()
                raise AgentGone("agent_error", str(reply.get("error", "act failed"))[:8000])
            self.kill()
            raise AgentGone("agent_error", f"the agent process sent an unexpected reply {kind!r}")
        actions = reply.get("actions") if isinstance(reply, dict) else None
        errors = reply.get("errors") if isinstance(reply, dict) else None
        if not isinstance(actions, list) or not isinstance(errors, list) or len(actions) != lanes \
                or len(errors) != lanes:
            self.kill()
            raise AgentGone("agent_error", "the agent process answered act() with junk")
        return actions, [None if e is None else str(e)[:8000] for e in errors]

    def episode_info(self, slot: Slot) -> tuple[dict | None, str | None]:
        try:
            reply = self._call(b"I", slot.id, self.start_timeout, "in episode_info()")
        except _RequestFailed as exc:
            return None, str(exc)[:8000]
        if reply is None:
            return None, None
        if not isinstance(reply, dict):
            return None, f"episode_info() must return a dict, got {type(reply).__name__}"
        return reply, None

    def close_slot(self, slot: Slot) -> None:
        if not self.current(slot):
            return
        try:
            self._call(b"C", slot.id, 30.0, "in close()")
        except (_RequestFailed, AgentGone):
            pass


class _RequestFailed(Exception):
    """The agent process answered a request with an error (the process itself is fine)."""


