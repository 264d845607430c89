"""`AgentPool`: several agent processes behind one worker (``evaluate --agent-processes N``)."""

from __future__ import annotations

from dataclasses import replace

from ..task_info import TaskInfo
from .backend import Slot
from .isolated import IsolatedAgents


class AgentPool:
    """Several agent processes behind one worker (``evaluate --agent-processes N``), each an
    `IsolatedAgents` with the same settings and layers. A slot lives in the process ``member`` names
    when it is made; the episode loop gives lane ``i`` the process ``i % N``, so each process computes
    the actions of its own lane group while the others compute theirs, on other cores. An agent
    object never serves lanes of two processes, so the agent sees what it sees with one process, as
    long as its actions do not depend on the other lanes (the contract of ``act_batch``)."""

    mode = "process"
    can_pipeline = True

    def __init__(self, processes: list[IsolatedAgents]):
        if len(processes) < 2:
            raise ValueError("an AgentPool needs at least two agent processes")
        self.processes = processes

    @property
    def members(self) -> int:
        return len(self.processes)

    @property
    def layers(self) -> dict[str, str]:
        return next((m.layers for m in self.processes if m.layers), {})

    @property
    def info(self) -> dict:
        return next((m.info for m in self.processes if m.info), {})

    def current(self, slot: Slot) -> bool:
        return self.processes[slot.owner].current(slot)

    def make(self, task: TaskInfo, run: int, member: int = 0) -> Slot:
        owner = member % len(self.processes)
        return replace(self.processes[owner].make(task, run), owner=owner)

    def reset(self, slots: list[Slot], seeds: list[int]) -> list[str | None]:
        errors: list[str | None] = [None] * len(slots)
        for owner, member in enumerate(self.processes):
            mine = [k for k, s in enumerate(slots) if s.owner == owner]
            if mine:
                for k, err in zip(mine, member.reset([slots[k] for k in mine], [seeds[k] for k in mine]),
                                  strict=True):
                    errors[k] = err
        return errors

    def _owner(self, slots: list[Slot]) -> IsolatedAgents:
        owners = {s.owner for s in slots}
        if len(owners) != 1:
            raise ValueError(f"one request goes to one agent process; these slots live in {sorted(owners)}")
        return self.processes[owners.pop()]

    def act(self, slots: list[Slot], observations: list, infos: list,
            timeout: float | None) -> tuple[list, list[str | None]]:
        return self._owner(slots).act(slots, observations, infos, timeout)

    def act_send(self, slots: list[Slot], observations: list, infos: list,
                 timeout: float | None) -> tuple[int, int]:
        return slots[0].owner, self._owner(slots).act_send(slots, observations, infos, timeout)

    def act_receive(self, seq: tuple[int, int], lanes: int, deadline: float) -> tuple[list, list[str | None]]:
        owner, number = seq
        return self.processes[owner].act_receive(number, lanes, deadline)

    def episode_info(self, slot: Slot) -> tuple[dict | None, str | None]:
        return self.processes[slot.owner].episode_info(slot)

    def close_slot(self, slot: Slot) -> None:
        self.processes[slot.owner].close_slot(slot)

    def restart(self) -> None:
        for member in self.processes:
            member.restart()

    def close(self) -> None:
        for member in self.processes:
            member.close()


