"""The agent process: the only place where an agent file's code runs during ``evaluate`` and ``verify``.

Started by `polar_bench.evaluate.isolated.IsolatedAgents` with two pipes (requests on fd 3, replies on
fd 4), it locks itself down (`polar_bench.evaluate.lockdown.lock_down`), imports the agent file, and
then only builds, resets and asks its agents for actions on request: it holds no environment, journal
or results. The frames and their tags: docs/evaluate.md, "The agent process's protocol".
"""

from __future__ import annotations

import io
import json
import os
import pickle
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

REQ_FD, RESP_FD = 3, 4
MAX_REQUEST = 1 << 30


def format_exception(exc: BaseException) -> str:
    """An exception and the last frames of its traceback, at most 8,000 characters."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tb[-6:])
    return f"{type(exc).__name__}: {exc}\n{text}"[:8000]


class _RequestUnpickler(pickle.Unpickler):
    """Requests rebuild only plain data and numpy arrays, dtypes and scalars (the worker's
    ``_PlainPickler`` refuses anything else): no other class is ever looked up."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.numeric", "_frombuffer"),
               ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
               ("numpy._core.numeric", "_frombuffer"), ("builtins", "bytearray")}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"a request may not hold {module}.{name}")
        return super().find_class(module, name)


def loads_request(frame: bytes) -> Any:
    """``[sequence number, value]`` of a request frame without its tag byte."""
    return _RequestUnpickler(io.BytesIO(frame)).load()


class _Pipe:
    def __init__(self, wire: ModuleType) -> None:
        self.wire = wire
        self.buf = bytearray()

    def _read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = os.read(REQ_FD, max(n - len(self.buf), 1 << 16))
            if not chunk:
                raise EOFError
            self.buf += chunk
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def read(self) -> tuple[bytes, Any]:
        n = int.from_bytes(self._read_exact(4), "little")
        if n > MAX_REQUEST:
            raise EOFError
        frame = self._read_exact(n)
        seq, value = loads_request(frame[1:])
        self.seq = seq
        return frame[:1], value

    seq = 0  # the number of the request being answered

    def write(self, tag: bytes, value: Any) -> None:
        try:
            payload = tag + self.wire.encode([self.seq, value])
        except TypeError as exc:
            error = {"error": f"the agent returned a value that cannot be sent: {exc}"}
            payload = b"E" + self.wire.encode([self.seq, error])
        data = memoryview(len(payload).to_bytes(4, "little") + payload)
        while data:
            data = data[os.write(RESP_FD, data):]


def _as_list(actions: Any, n: int) -> list:
    """``act_batch``'s result as a list of ``n`` per-lane actions (a sequence, or an array with a
    leading lane axis)."""
    import numpy as np

    if isinstance(actions, np.ndarray):
        if actions.ndim == 0 or actions.shape[0] != n:
            raise ValueError(f"act_batch returned an array of shape {actions.shape} for {n} observations; "
                             f"return one action per observation (a leading axis of length {n})")
        return [actions[i] for i in range(n)]
    actions = list(actions)
    if len(actions) != n:
        raise ValueError(f"act_batch returned {len(actions)} actions for {n} observations")
    return actions


# the proxy's per-episode LLM budget, told to the agent (docs/llm.md, "Budgets"); unset: unlimited
BUDGET_ENV = {"calls_per_episode": "POLAR_BENCH_LLM_CALLS_PER_EPISODE",
              "tokens_per_episode": "POLAR_BENCH_LLM_TOKENS_PER_EPISODE"}


def enter_slot(bases: dict, slot: int) -> None:
    """Point the OpenAI environment variables (and ``POLAR_BENCH_LLM_PROXY``, which `polar_bench.llm`
    clients follow) at the LLM proxy address of ``slot`` (its own token), if it has one, before its
    agent runs: clients made or called now reach the proxy as this slot. ``bases``: slot -> (address,
    whether the upstream takes llama.cpp grammars, the proxy's budget as `LLMBudget.to_json` gives it),
    the budget told in `BUDGET_ENV`'s variables, so that an agent can keep within it."""
    entry = bases.get(slot)
    if entry is not None:
        base, grammar, budget = entry
        os.environ["OPENAI_BASE_URL"] = os.environ["OPENAI_API_BASE"] = os.environ["POLAR_BENCH_LLM_PROXY"] = base
        os.environ["POLAR_BENCH_LLM_PROXY_GRAMMAR"] = "1" if grammar else "0"
        os.environ.setdefault("OPENAI_API_KEY", "polar_bench-proxy")
        for key, var in BUDGET_ENV.items():
            limit = (budget or {}).get(key)
            if limit is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = str(int(limit))


def reset_all(agents: dict, slots: list, seeds: list, bases: dict | None = None) -> list[str | None]:
    """``reset(seed)`` of the agent in each slot; the error text of each that raised, else None.
    ``bases``: slot -> its LLM proxy address (`enter_slot`)."""
    errors: list[str | None] = []
    for slot, seed in zip(slots, seeds, strict=True):
        agent = agents[slot]
        enter_slot(bases or {}, slot)
        try:
            if hasattr(agent, "reset"):
                agent.reset(seed)
            errors.append(None)
        except Exception as exc:  # noqa: BLE001 - the agent's failure is reported, not raised
            errors.append(format_exception(exc))
    return errors


def act_all(agents: dict, slots: list, observations: list, infos: list,
            bases: dict | None = None) -> tuple[list, list[str | None]]:
    """The actions for entries ``(slot, observation, info)``: one ``act_batch`` call per slot whose
    agent has it, one ``act`` per entry otherwise; the error text of each entry whose call raised.
    The agent process and ``evaluate --in-process`` both act through this."""
    actions: list = [None] * len(slots)
    errors: list[str | None] = [None] * len(slots)
    groups: dict = {}
    for i, slot in enumerate(slots):
        groups.setdefault(slot, []).append(i)
    for slot, idx in groups.items():
        agent = agents[slot]
        enter_slot(bases or {}, slot)
        batch = getattr(agent, "act_batch", None)
        if callable(batch):
            try:
                out = _as_list(batch([observations[i] for i in idx], [infos[i] for i in idx]), len(idx))
                for i, a in zip(idx, out, strict=True):
                    actions[i] = a
            except Exception as exc:  # noqa: BLE001 - the agent's failure is reported, not raised
                for i in idx:
                    errors[i] = format_exception(exc)
            continue
        for i in idx:
            try:
                actions[i] = agent.act(observations[i], infos[i])
            except Exception as exc:  # noqa: BLE001
                errors[i] = format_exception(exc)
    return actions, errors


class _Server:
    def __init__(self, module: ModuleType, path: str, pipe: _Pipe) -> None:
        from polar_bench.task_info import TaskInfo

        self.module = module
        self.path = path
        self.pipe = pipe
        self.agents: dict = {}
        self.bases: dict = {}  # slot -> (its LLM proxy address, grammar, budget), see enter_slot
        self.task_info = TaskInfo

    def make(self, req: dict) -> tuple[bytes, dict]:
        from polar_bench.agent import build_agent
        from polar_bench.errors import AgentLoadError

        task = self.task_info.from_json(req["task"])
        if req.get("llm_base"):
            budget = req.get("llm_budget")
            self.bases[req["slot"]] = (str(req["llm_base"]), bool(req.get("llm_grammar")),
                                       budget if isinstance(budget, dict) else None)
        enter_slot(self.bases, req["slot"])
        try:
            agent = build_agent(self.module, task, int(req["run"]), self.path)
        except AgentLoadError as exc:
            return b"E", {"error": str(exc), "load": True}
        self.agents[req["slot"]] = agent
        return b"O", {"wants_text": bool(getattr(agent, "wants_text", False)),
                      "batch": callable(getattr(agent, "act_batch", None)), "info": hasattr(agent, "episode_info")}

    def reset(self, req: dict) -> tuple[bytes, dict]:
        return b"O", {"errors": reset_all(self.agents, req["slots"], req["seeds"], self.bases)}

    def act(self, req: dict) -> tuple[bytes, dict]:
        actions, errors = act_all(self.agents, req["slots"], req["observations"], req["infos"], self.bases)
        return b"O", {"actions": actions, "errors": errors}

    def episode_info(self, slot: int) -> tuple[bytes, Any]:
        agent = self.agents[slot]
        enter_slot(self.bases, slot)
        try:
            info = agent.episode_info() if hasattr(agent, "episode_info") else None
        except Exception as exc:  # noqa: BLE001
            return b"E", {"error": "episode_info() raised " + format_exception(exc)}
        return b"O", info

    def close(self, slot: int) -> tuple[bytes, None]:
        agent = self.agents.pop(slot, None)
        enter_slot(self.bases, slot)
        self.bases.pop(slot, None)
        if agent is not None and hasattr(agent, "close"):
            try:
                agent.close()
            except Exception:  # noqa: BLE001 - a failing close() loses nothing
                pass
        return b"O", None

    def serve(self) -> None:
        handlers: dict[bytes, Callable[[Any], tuple[bytes, Any]]] = {
            b"M": self.make, b"R": self.reset, b"A": self.act, b"I": self.episode_info, b"C": self.close}
        while True:
            try:
                tag, value = self.pipe.read()
            except EOFError:
                return
            if tag == b"Q":
                return
            handler = handlers.get(tag)
            if handler is None:
                self.pipe.write(b"E", {"error": f"unknown request {tag!r}"})
                continue
            try:
                reply = handler(value)
            except Exception as exc:  # noqa: BLE001 - e.g. a request for a slot that is gone
                reply = b"E", {"error": format_exception(exc)}
            self.pipe.write(*reply)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent ``parent`` dies, or exit now if it already has (Linux; the
    agent process calls it after the uid change, which clears it; an evaluation worker at its start)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _guard_group() -> None:
    """Fork a guardian that SIGKILLs this process group when this process ends, however it ends (its
    worker's death, a crash, a normal exit): what the agent starts stays in the group (its setsid and
    setpgid do nothing, `lockdown`), so nothing of it outlives the agent process even when no worker
    is left to kill the group. Forked after the lockdown, as the kernel delivers a parent-death signal
    only where the dying parent may send one (its uid, its Landlock domain); so the agent could kill
    its guardian, which costs only this second line of defence (the worker kills the group whenever
    it ends an agent process). It holds no file descriptor and only waits."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent, group = os.getpid(), os.getpgrp()
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, so the child only calls it
    if os.fork():
        return
    try:
        os.closerange(0, 1 << 16)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # waited for below, never lost
        pr_set_pdeathsig = 1
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() == parent:  # else the agent process is already gone
            signal.sigwait({signal.SIGTERM})
        os.killpg(group, signal.SIGKILL)  # the guardian is in the group too
    finally:
        os._exit(0)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    parent = os.getppid()
    req, resp = int(cfg["req_fd"]), int(cfg["resp_fd"])
    fwd = cfg.get("forward_fd")
    hi_req, hi_resp = os.dup(req), os.dup(resp)
    hi_fwd = os.dup(int(fwd)) if fwd is not None else None
    os.dup2(hi_req, REQ_FD)
    os.dup2(hi_resp, RESP_FD)
    if hi_fwd is not None:
        os.dup2(hi_fwd, RESP_FD + 1)
    os.closerange(RESP_FD + 1 + (hi_fwd is not None), 1 << 16)

    from polar_bench.evaluate.lockdown import lock_down
    from polar_bench.lockdown import wire

    pipe = _Pipe(wire)
    try:
        layers = lock_down(cfg["workdir"], memory_mb=cfg.get("memory_mb"),
                           max_processes=int(cfg["max_processes"]), network=bool(cfg.get("network")),
                           forward_port=cfg.get("forward_port"), forward_fd=RESP_FD + 1 if fwd is not None else None,
                           limits=cfg.get("limits"))
    except Exception as exc:  # noqa: BLE001 - report, never run the agent half locked down
        pipe.write(b"E", {"error": f"the agent process could not lock itself down: {format_exception(exc)}"})
        return
    die_with_parent(parent)
    _guard_group()

    from polar_bench.agent import agent_info, load_agent_module
    from polar_bench.errors import AgentLoadError

    try:
        module = load_agent_module(cfg["agent_path"])
        info = agent_info(module)
        json.dumps(info, allow_nan=False)
    except AgentLoadError as exc:
        pipe.write(b"E", {"error": str(exc), "load": True})
        return
    except (TypeError, ValueError) as exc:
        pipe.write(b"E", {"error": f"{cfg['agent_path']}: AGENT_INFO must hold only JSON values (strings, "
                                   f"numbers, lists, dicts): {exc}", "load": True})
        return
    pipe.write(b"H", {"layers": layers, "info": info, "pid": os.getpid()})
    _Server(module, cfg["agent_path"], pipe).serve()


if __name__ == "__main__":
    main()
