"""The trusted side's handle on agents, one module per backend (`AgentBackend` in `backend`):
`isolated` (a locked-down agent process), `pool` (several), `inprocess` (``--in-process``), and the
values that cross (`plain`). This module gathers their public names and `probe_agent`.

An agent lives in a *slot*: one per lane for agents with ``act`` only; one per (task, run), shared
by its lanes, for agents with ``act_batch``.
"""

from __future__ import annotations

from ..agent import agent_info, load_agent_module
from ..errors import AgentLoadError
from .backend import (
    AGENT_OUTPUT_BYTES,
    DEFAULT_AGENT_DISK_MB,
    DEFAULT_AGENT_MEMORY_MB,
    DEFAULT_AGENT_PROCESSES,
    DEFAULT_AGENT_THREADS,
    START_TIMEOUT_S,
    AgentBackend,
    AgentGone,
    Slot,
    TimeoutLimit,
    agent_thread_env,
)
from .config import MAX_AGENT_PROCESSES, MAX_AGENT_THREADS
from .inprocess import InProcessAgents
from .isolated import IsolatedAgents
from .plain import AGENT_INFO_BYTES, dumps_request, plain_json, small_json
from .pool import AgentPool

__all__ = ["AgentBackend", "AgentGone", "Slot", "TimeoutLimit", "IsolatedAgents", "InProcessAgents", "AgentPool",
           "probe_agent", "plain_json", "small_json", "dumps_request", "agent_thread_env", "AGENT_OUTPUT_BYTES",
           "DEFAULT_AGENT_MEMORY_MB", "DEFAULT_AGENT_DISK_MB", "DEFAULT_AGENT_PROCESSES", "DEFAULT_AGENT_THREADS",
           "MAX_AGENT_PROCESSES", "MAX_AGENT_THREADS", "START_TIMEOUT_S"]


def probe_agent(agent_path: str, *, in_process: bool = False, memory_mb: int | None = DEFAULT_AGENT_MEMORY_MB,
                disk_mb: int | None = DEFAULT_AGENT_DISK_MB, network: bool = False,
                threads: int = DEFAULT_AGENT_THREADS) -> tuple[dict, dict[str, str]]:
    """Import an agent file the way `evaluate` will and return its ``AGENT_INFO`` and the isolation
    layers that took effect; `AgentLoadError` (one line) when it does not load. Isolated unless
    ``in_process``: the trusted process never imports the agent file."""
    if in_process:
        module = load_agent_module(agent_path)
        info, layers = agent_info(module), InProcessAgents(agent_path).layers
    else:
        agents = IsolatedAgents(agent_path, memory_mb=memory_mb, disk_mb=disk_mb, network=network, threads=threads)
        try:
            agents.start()
            info, layers = dict(agents.info), dict(agents.layers)
        finally:
            agents.close()
    try:
        return small_json(info, "AGENT_INFO", AGENT_INFO_BYTES), layers
    except ValueError as exc:
        raise AgentLoadError(f"{agent_path}: {exc}; keep AGENT_INFO to JSON values (numbers, strings, lists, "
                             f"dicts), at most {AGENT_INFO_BYTES >> 10} KiB") from None
