"""What one evaluation runs: the configuration, its units of work, the pins it checks."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .._optional import version_of
from ..errors import OptionError
from ..suite import Suite, TaskSpec, episode_seed

__all__ = ["EvalConfig", "RunOutcome", "Unit", "journal_path", "check_pins", "PIN_FAMILIES"]

# Which families a pinned package matters to ("*" = every family; a tuple when several use it).
PIN_FAMILIES: dict[str, str | tuple[str, ...]] = {
    "numpy": "*", "gymnasium": "*", "mujoco": ("dmc", "mujoco"), "dm-control": "dmc", "procgen-mirror": "procgen",
    "nle": ("nethack", "minihack"), "minigrid": "babyai", "minihack": "minihack", "crafter": "crafter",
    "textworld": "textworld", "ale-py": "atari",
}


@dataclass(frozen=True)
class Unit:
    """One episode of the evaluation: a task, a run (trained instance) and an episode seed."""

    task: str
    run: int
    index: int
    seed: int

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.task, self.run, self.index)


@dataclass
class RunOutcome:
    """What happened while the episodes were played, returned beside them (never written into the
    configuration): the workers used, and the ones lost and replaced."""

    workers: int | None = None
    replaced_workers: int = 0  # workers (processes or actors) that died or were killed and replaced
    worker_losses: list[dict] = field(default_factory=list)  # why each was lost and what it was playing


MAX_AGENT_THREADS = 256  # numeric libraries' threads per agent process (evaluate --agent-threads)
MAX_AGENT_PROCESSES = 16  # agent processes per worker (evaluate --agent-processes)


@dataclass(frozen=True)
class EvalConfig:
    """Everything one evaluation is asked to do, read and never written: what happens while it runs
    comes back in a `RunOutcome`."""

    suite: Suite
    agent_path: str
    out: str
    tasks: list[TaskSpec]
    runs: int
    episodes_override: int | None = None
    workers: int | None = field(default_factory=lambda: os.cpu_count() or 1)
    step_timeout: float | None = 60.0
    episode_timeout: float | None = 1800.0
    allow_version_mismatch: bool = False
    standard: bool = True
    progress: bool | None = None  # None: a bar on a terminal, plain lines otherwise
    command: str = ""
    backend: str = "local"  # "local" (worker processes) or "ray"
    address: str | None = None  # Ray: None starts a local Ray; "auto" or "ray://HOST:PORT" joins a cluster
    # episodes each worker plays at once, stepped together: one request to the agent process per step for
    # all of them, which amortizes the round trip (results do not depend on it)
    envs_per_worker: int = 8
    in_process: bool = False  # debugging only: the agent runs inside the workers; results not submittable
    agent_memory_mb: int | None = None  # memory of each agent process tree (None: the default, 8 GiB)
    agent_disk_mb: int | None = None  # size of each agent process's private folder (None: the default, 1 GiB)
    agent_network: bool = False  # keep the host network for the agent; recorded
    agent_threads: int = 1  # numeric libraries' threads in each agent process (agents.agent_thread_env); recorded
    # agent processes per worker (an AgentPool when over 1: each serves its share of the lanes, on its own
    # core); recorded, and results do not depend on it
    agent_processes: int = 1
    llm_endpoint: tuple[str, int] | None = None  # (host, port) the agent may reach at 127.0.0.1:port
    # the LLM proxy (polar_bench.llm.proxy) forwards to this upstream: "embedded" (the SmolLM2 that each
    # worker serves at its first LLM call) or a URL; None: no proxy (--no-llm-proxy, --llm-endpoint)
    llm_upstream: str | None = "embedded"
    llm_budget: dict | None = None  # {"calls_per_episode": N | None, "tokens_per_episode": M | None}
    trajectories: str | None = None  # folder of the per-episode trajectory files
    harness_plugins: tuple[str, ...] = ()  # trusted files imported in the workers (harness families)
    # fresh seeds (polar_bench.generalization): task id -> the seeds played instead of the suite's, and the
    # OS entropy they were drawn from; results on them are marked and never a leaderboard entry
    fresh_seeds: dict[str, tuple[int, ...]] | None = None
    fresh_entropy: int | None = None
    retry_failed: bool = False  # play again the journaled episodes that did not end ok (attempts counted)
    def check(self) -> None:
        """Every setting in its range, checked once, before anything starts: `OptionError` naming the field."""
        for name in ("runs", "episodes_override", "workers", "envs_per_worker", "agent_memory_mb", "agent_disk_mb"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise OptionError(name, f"must be at least 1, got {value}")
        for name, most in (("agent_threads", MAX_AGENT_THREADS), ("agent_processes", MAX_AGENT_PROCESSES)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise OptionError(name, f"must be at least 1, got {value!r}")
            if value > most:
                raise OptionError(name, f"must be at most {most}, got {value}")
        if self.agent_processes > 1 and self.in_process:
            raise OptionError("agent_processes", "needs agent processes; drop in_process or agent_processes")
        if self.address and self.backend != "ray":
            raise OptionError("address", "only applies to backend ray; choose backend ray")
        for name in ("step_timeout", "episode_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise OptionError(name, f"must be a positive number of seconds, got {value}")

    def makes_standard_results(self) -> bool:
        """Whether these settings make a standard result, the one place that decides it: the suite's
        tasks, runs, episodes and seeds, no harness plugin, and no non-standard option (``standard``
        false: an LLM budget of one's own)."""
        return (self.standard and not self.episodes_override and len(self.tasks) == len(self.suite.tasks)
                and self.runs >= self.suite.runs and not self.harness_plugins and self.fresh_seeds is None)

    def plugin_files(self) -> dict[str, bytes]:
        """The harness-plugin files, resolved path -> bytes, read once: the parent imports, the workers
        import and the results hash the same bytes, whatever happens to the files meanwhile."""
        cached = self.__dict__.get("_plugin_bytes")
        if cached is None:  # the one value read lazily, kept beside the (frozen) fields
            cached = {str(Path(p).resolve()): Path(p).read_bytes() for p in self.harness_plugins}
            self.__dict__["_plugin_bytes"] = cached
        return cached

    def units(self) -> list[Unit]:
        out = []
        for t in self.tasks:
            seeds = t.seeds[: self.episodes_override] if self.episodes_override else t.seeds
            if self.fresh_seeds is not None:
                seeds = self.fresh_seeds[t.id]
            elif self.episodes_override and self.episodes_override > len(t.seeds):
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
        users = {fam} if isinstance(fam, str) else set(fam)
        if fam != "*" and not users & families:
            continue
        have = version_of(pkg)
        if have != wanted:
            diffs[pkg] = {"pinned": wanted, "installed": have or "not installed"}
    return diffs
