"""``evaluate --in-process``: the agent objects called directly in the worker, no isolation (debugging;
results made this way are marked not submittable)."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any, NoReturn

from ..agent import build_agent, load_agent_module
from ..llm.proxy import LLMProxy
from ..task_info import TaskInfo
from .agent_process import act_all, enter_slot, format_exception, reset_all
from .backend import AgentGone, Slot


class _SignalTimeout(BaseException):
    """Raised by SIGALRM inside an in-process agent call; a BaseException so that an agent's
    ``except Exception`` cannot swallow it."""


def _on_alarm(signum: int, frame: FrameType | None) -> NoReturn:
    raise _SignalTimeout()


class InProcessAgents:
    """Agents imported into the calling process (``evaluate --in-process``): no isolation at all."""

    mode = "in-process"
    members = 1
    can_pipeline = False  # the worker itself computes the actions

    def __init__(self, agent_path: str, proxy: LLMProxy | None = None, module: Any = None):
        """``module``: anything with ``make_agent(task, run)``, used instead of importing ``agent_path``."""
        self.agent_path = agent_path
        self.module: Any = module  # the agent module, imported at the first make() when not given
        self.info: dict = {}
        self.agents: dict[int, Any] = {}
        self.proxy = proxy
        self.bases: dict[int, tuple[str, bool, dict]] = {}  # slot -> LLM proxy address, grammar, budget (enter_slot)
        self._proxy_port = int(proxy.serve().server_address[1]) if proxy is not None else None
        self.layers: dict[str, str] = {"process": "none: the agent runs inside the evaluation worker"}
        self.generation = 0
        self._next = 0
        if hasattr(signal, "SIGALRM"):
            signal.signal(signal.SIGALRM, _on_alarm)

    def make(self, task: TaskInfo, run: int, member: int = 0) -> Slot:
        if self.module is None:
            self.module = load_agent_module(self.agent_path)
        self._next += 1
        token = None
        if self.proxy is not None:
            token = self.proxy.new_token()
            self.bases[self._next] = (f"http://127.0.0.1:{self._proxy_port}/a/{token}/v1", self.proxy.grammar,
                                      self.proxy.budget.to_json())
        enter_slot(self.bases, self._next)
        agent = build_agent(self.module, task, run, self.agent_path)
        self.agents[self._next] = agent
        return Slot(self._next, bool(getattr(agent, "wants_text", False)),
                    callable(getattr(agent, "act_batch", None)), self.generation, hasattr(agent, "episode_info"),
                    token)

    def reset(self, slots: list[Slot], seeds: list[int]) -> list[str | None]:
        return reset_all(self.agents, [s.id for s in slots], seeds, self.bases)

    def act(self, slots: list[Slot], observations: list, infos: list,
            timeout: float | None) -> tuple[list, list[str | None]]:
        use_alarm = timeout is not None and hasattr(signal, "setitimer")
        if timeout is not None and use_alarm:
            signal.setitimer(signal.ITIMER_REAL, max(timeout, 1e-3))
        try:
            return self._act(slots, observations, infos)
        except _SignalTimeout:
            raise AgentGone("timeout", "timeout") from None
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)

    def act_send(self, slots: list[Slot], observations: list, infos: list,
                 timeout: float | None) -> tuple[list, list[str | None]] | AgentGone:
        """Computes the actions now (there is no other process): the ticket is the answer."""
        try:
            return self.act(slots, observations, infos, timeout)
        except AgentGone as gone:
            return gone

    def act_receive(self, ticket: tuple[list, list[str | None]] | AgentGone, lanes: int,
                    deadline: float) -> tuple[list, list[str | None]]:
        if isinstance(ticket, AgentGone):
            raise ticket
        return ticket

    def _act(self, slots: list[Slot], observations: list, infos: list) -> tuple[list, list[str | None]]:
        return act_all(self.agents, [s.id for s in slots], observations, infos, self.bases)

    def episode_info(self, slot: Slot) -> tuple[dict | None, str | None]:
        agent = self.agents[slot.id]
        if not hasattr(agent, "episode_info"):
            return None, None
        try:
            return agent.episode_info() or None, None
        except Exception as exc:  # noqa: BLE001
            return None, "episode_info() raised " + format_exception(exc)

    def close_slot(self, slot: Slot) -> None:
        agent = self.agents.pop(slot.id, None)
        if agent is not None and hasattr(agent, "close"):
            try:
                agent.close()
            except Exception:  # noqa: BLE001
                pass

    def current(self, slot: Slot) -> bool:
        """Whether ``slot`` still lives (not dropped by a restart)."""
        return slot.generation == self.generation

    def restart(self) -> None:
        for agent in self.agents.values():
            if hasattr(agent, "close"):
                try:
                    agent.close()
                except Exception:  # noqa: BLE001 - a failing close() loses nothing
                    pass
        self.agents.clear()

    def close(self) -> None:
        self.restart()
        if self.proxy is not None:
            self.proxy.shutdown()


