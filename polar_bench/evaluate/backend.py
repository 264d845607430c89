"""What every agent backend shares: the `AgentBackend` protocol that the episode loop
(`polar_bench.evaluate.episodes`) talks to, the `Slot` an agent lives in, `AgentGone`, and the
settings of an agent process (memory, disk, threads, timeouts).

The backends: `InProcessAgents` (``--in-process``, debugging), `IsolatedAgents` (a locked-down agent
process) and `AgentPool` (several of them behind one worker). docs/evaluate.md says what each
guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..lockdown.limits import DEFAULT_DISK_MB
from ..task_info import TaskInfo

DEFAULT_AGENT_MEMORY_MB = 8192
DEFAULT_AGENT_DISK_MB = DEFAULT_DISK_MB
# what an agent process (and what it starts) may print to the evaluation's stderr; the rest is dropped,
# so that an agent cannot fill the disk that a redirected stderr (a log file) is written to
AGENT_OUTPUT_BYTES = 1 << 20
DEFAULT_AGENT_PROCESSES = 256
# The numeric libraries' thread count in the agent process. It changes the order of floating-point
# sums (a torch CNN's sampled actions differ between one and two threads), so it is fixed and
# recorded rather than left to the machine's core count: a verifier with more cores re-runs the agent
# with the same count. One also keeps `workers` agent processes from fighting over the cores.
DEFAULT_AGENT_THREADS = 1
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                     "NUMEXPR_NUM_THREADS")
START_TIMEOUT_S = 300.0  # importing the agent file (torch, a model) may take a while on a loaded machine
MAX_REPLY_BYTES = 64 << 20


def agent_thread_env(threads: int) -> dict[str, str]:
    """The environment variables that set the thread count of torch (its intra-op pool), OpenMP, MKL,
    OpenBLAS, Accelerate and numexpr in an agent process: the same for all of them, whatever the
    evaluating shell had (an agent may still call ``torch.set_num_threads`` itself). The range is
    checked where the user gives it (`run_evaluation`)."""
    return {name: str(int(threads)) for name in _THREAD_VARIABLES}



TimeoutLimit = Literal["step", "episode"]


class AgentGone(Exception):
    """The agent process died, hung past its deadline or broke the protocol; it was killed.

    ``kind`` is ``timeout`` or ``agent_error``; ``message`` says what happened; ``limit``, for a
    timeout, which deadline passed: ``"step"`` or ``"episode"`` (None until the caller knows)."""

    def __init__(self, kind: str, message: str, limit: TimeoutLimit | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.limit = limit


@dataclass
class Slot:
    id: int
    wants_text: bool
    batch: bool
    generation: int  # the agent process it lives in; a restarted process invalidates its slots
    info: bool = True  # the agent has episode_info() (looked up when it was built): asked after each episode
    llm_token: str | None = None  # its attribution token at the LLM proxy (when there is one)
    owner: int = 0  # the agent process of an `AgentPool` it lives in




class AgentBackend(Protocol):
    """The agents of one worker, as the episode loop uses them. A request carries the lanes of one
    agent process (``members`` of them answer at once); `act_send` puts a request in flight and returns
    a ticket that `act_receive` redeems, so that the worker steps environments meanwhile."""

    mode: str  # "process" or "in-process", recorded in the results

    @property
    def members(self) -> int:
        """Agent processes that answer at once (1 but for a pool)."""

    @property
    def can_pipeline(self) -> bool:
        """Whether a request in flight leaves the worker free (the agent computes in another process)."""

    @property
    def layers(self) -> dict[str, str]: ...

    @property
    def info(self) -> dict: ...

    def make(self, task: TaskInfo, run: int, member: int = 0) -> Slot: ...

    def reset(self, slots: list[Slot], seeds: list[int]) -> list[str | None]: ...

    def act(self, slots: list[Slot], observations: list, infos: list,
            timeout: float | None) -> tuple[list, list[str | None]]: ...

    def act_send(self, slots: list[Slot], observations: list, infos: list, timeout: float | None) -> Any: ...

    def act_receive(self, ticket: Any, lanes: int, deadline: float) -> tuple[list, list[str | None]]: ...

    def episode_info(self, slot: Slot) -> tuple[dict | None, str | None]: ...

    def close_slot(self, slot: Slot) -> None: ...

    def current(self, slot: Slot) -> bool: ...

    def restart(self) -> None: ...

    def close(self) -> None: ...
