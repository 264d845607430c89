"""Which BabyAI levels, and which of their training seeds, the trainer plays in each iteration (issue #42).

Every kind splits an iteration's ``episodes`` (seeds, each played by every run of the group) over the
experiment's tasks, then draws each task's seeds from its pool of training seeds without replacement
(the trainer checks the pools against the evaluation suite):

- ``all``: every seed of every task in every iteration (the loop before curricula; the default);
- ``uniform``: the episodes split evenly over the tasks;
- ``progress``: in proportion to each task's absolute learning progress, the change of its success
  rate between the last ``window`` iterations it was played and the ``window`` before (Portelas et
  al. 2019, "Teacher algorithms for curriculum learning of Deep RL"); a task not yet played twice
  counts as the most promising;
- ``band``: the tasks whose last success rate lies inside ``band`` (neither hopeless nor solved)
  weigh 1, the others ``outside``; with ``band_window`` N > 1 the rate is pooled over the last N
  iterations that played the task (successes over episodes), so that one unlucky small batch does not
  push a level out;
- ``planner``: an LLM reads a summary of the per-level results and names the level to train on next
  (the seed design's section 4.3); ``planner_weight`` of the episodes go to it, the rest as
  ``progress`` would give them. An answer outside the level names cannot happen (a constrained
  choice); a planner that fails leaves the iteration to ``progress`` and says so.

Every kind but ``all`` spreads ``epsilon`` of the episodes evenly, so that no level is starved.
The choice depends only on the training history, the experiment's seed and the iteration, so a
resumed training chooses as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["CurriculumConfig", "Curriculum", "KINDS", "known_settings", "allocate", "learning_progress",
           "success_rates", "pooled_success", "planner_prompt", "llm_planner"]

KINDS = ("all", "uniform", "progress", "band", "planner")

Planner = Callable[[str, Sequence[str]], str]
"""(a summary of the per-level results, the level names) -> the name of the level to train next."""


@dataclass(frozen=True)
class CurriculumConfig:
    kind: str = "all"
    episodes: int = 8  # seeds per iteration over all tasks, each played by every run of the group ("all": every seed)
    window: int = 2  # iterations per side of the learning-progress difference
    band: tuple[float, float] = (0.1, 0.9)
    band_window: int = 1  # iterations pooled (by episodes) for the band's success rate; 1: the last one
    outside: float = 0.1  # weight of a task outside the band
    epsilon: float = 0.2  # share of the episodes spread evenly over the tasks
    planner_weight: float = 0.5  # share of the episodes the planner's level gets
    planner_base_url: str | None = None  # an OpenAI-compatible endpoint; None: the embedded SmolLM2

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"curriculum kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.episodes < 1 or self.window < 1 or self.band_window < 1:
            raise ValueError("curriculum episodes, window and band_window must be at least 1")
        lo, hi = self.band
        if not 0.0 <= lo < hi <= 1.0:
            raise ValueError(f"curriculum band {self.band} must satisfy 0 <= low < high <= 1")
        for name in ("outside", "epsilon", "planner_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"curriculum {name} must lie in [0, 1]")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> CurriculumConfig:
        raw = known_settings(cls, raw, "curriculum")
        if "band" in raw:
            raw["band"] = tuple(float(x) for x in raw["band"])
        return cls(**raw)


def known_settings(cls: type, raw: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """``raw`` as a dict, refused (`ValueError`) when it names a setting the dataclass ``cls`` lacks."""
    import dataclasses

    raw = dict(raw or {})
    known = sorted(f.name for f in dataclasses.fields(cls))
    unknown = set(raw) - set(known)
    if unknown:
        raise ValueError(f"unknown {what} setting(s) {sorted(unknown)}; known: {known}")
    return raw


def allocate(weights: Mapping[str, float], episodes: int, epsilon: float = 0.0) -> dict[str, int]:
    """Split ``episodes`` over the tasks of ``weights`` in proportion to ``(1 - epsilon) * w / sum(w) +
    epsilon / n`` (an even split where every weight is 0), by largest remainders, ties to the earlier
    task: deterministic, and the counts add up to ``episodes``."""
    tasks = list(weights)
    if not tasks:
        return {}
    w = np.array([max(0.0, float(weights[t])) for t in tasks])
    share = w / w.sum() if w.sum() > 0 else np.full(len(tasks), 1.0 / len(tasks))
    share = (1.0 - epsilon) * share + epsilon / len(tasks)
    exact = share * episodes
    counts = np.floor(exact + 1e-12).astype(int)
    order = sorted(range(len(tasks)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: episodes - int(counts.sum())]:
        counts[i] += 1
    return {t: int(c) for t, c in zip(tasks, counts, strict=True)}


def allocate_within(weights: Mapping[str, float], episodes: int, epsilon: float, sizes: Mapping[str, int]
                    ) -> dict[str, int]:
    """`allocate`, with no task given more episodes than its pool has seeds (``sizes``): what a full task
    cannot take goes to the others by the same rule, so an iteration plays ``episodes`` whenever the
    pools together hold that many (the budget stays the same for every curriculum kind)."""
    counts = allocate(weights, episodes, epsilon)
    while True:
        excess = sum(max(0, n - sizes[t]) for t, n in counts.items())
        room = {t: weights[t] for t, n in counts.items() if n < sizes[t]}
        if not excess or not room:
            return {t: min(n, sizes[t]) for t, n in counts.items()}
        counts = {t: min(n, sizes[t]) for t, n in counts.items()}
        for t, extra in allocate(room, excess, epsilon).items():
            counts[t] += extra


def _played(history: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Each task's (episodes, success rate) in every iteration that played it, in order, from the rows'
    columns ``episodes:<task>`` and ``success_rate:<task>`` (the trainer's metrics.csv has them)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for row in history:
        for key, n in row.items():
            if key.startswith("episodes:") and n:
                task = key.split(":", 1)[1]
                out.setdefault(task, []).append((float(n), float(row[f"success_rate:{task}"])))
    return out


def success_rates(history: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each task's success rate in every iteration that played it, in order (see `_played`)."""
    return {task: [r for _, r in seen] for task, seen in _played(history).items()}


def pooled_success(history: Sequence[Mapping[str, Any]], window: int) -> dict[str, float]:
    """Each played task's success rate over the last ``window`` iterations that played it: successes
    (rate x episodes) over episodes; one iteration's rate as it was recorded."""
    out = {}
    for task, seen in _played(history).items():
        recent = seen[-window:]
        out[task] = recent[0][1] if len(recent) == 1 else sum(n * r for n, r in recent) / sum(n for n, _ in recent)
    return out


def learning_progress(rates: Sequence[float], window: int) -> float:
    """|mean of the last ``window`` rates - mean of the ``window`` before| (fewer: what there is); 1.0,
    the most, for a task played fewer than twice."""
    if len(rates) < 2:
        return 1.0
    recent = rates[-window:]
    before = rates[-2 * window:-window] or rates[:1]
    return abs(float(np.mean(recent)) - float(np.mean(before)))


def planner_prompt(rates: Mapping[str, Sequence[float]], tasks: Sequence[str]) -> str:
    """The summary the planner reads: each level's success rate in its recent training iterations."""
    lines = ["An agent is being trained by reinforcement learning on these BabyAI levels. Its success rate on "
             "each level over its recent training iterations (oldest first):"]
    for t in tasks:
        seen = rates.get(t, [])
        recent = ", ".join(f"{r:.2f}" for r in seen[-4:]) if seen else "not trained yet"
        lines.append(f"- {t.split('/', 1)[-1]}: {recent}")
    lines.append("Which level should it train on next to improve fastest? Prefer a level it sometimes solves "
                 "but has not mastered. Answer with the level's name only.")
    return "\n".join(lines)


def llm_planner(base_url: str | None = None, seed: int = 0) -> Planner:
    """A planner backed by ``polar_bench.llm``: the embedded SmolLM2 (``base_url`` None) or an
    OpenAI-compatible endpoint, its answer restricted to the level names."""
    from polar_bench.llm import Choices, make_client

    client = make_client("openai" if base_url else "embedded", base_url=base_url)

    def plan(summary: str, tasks: Sequence[str]) -> str:
        names = [t.split("/", 1)[-1] for t in tasks]
        out = client.complete([{"role": "user", "content": summary}], constraint=Choices(tuple(names)),
                              seed=seed, temperature=0.0, max_tokens=16)
        return tasks[names.index(str(out.value))]

    return plan


@dataclass
class Curriculum:
    """Chooses each iteration's tasks and seeds. ``pools``: each task's training seeds, in order."""

    config: CurriculumConfig
    pools: Mapping[str, Sequence[int]]
    seed: int = 0
    planner: Planner | None = None
    notes: list[str] = field(default_factory=list)  # what happened to the planner, per iteration

    def weights(self, iteration: int, history: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Each task's weight for ``iteration`` under the configured kind."""
        tasks = list(self.pools)
        rates = success_rates(history)
        kind = self.config.kind
        if kind in ("all", "uniform"):
            return {t: 1.0 for t in tasks}
        progress = {t: learning_progress(rates.get(t, []), self.config.window) for t in tasks}
        if kind == "progress":
            return progress
        if kind == "band":
            lo, hi = self.config.band
            last = pooled_success(history, self.config.band_window)
            return {t: 1.0 if t not in last or lo <= last[t] <= hi else self.config.outside for t in tasks}
        chosen = self._ask_planner(iteration, rates, tasks)  # kind == "planner"
        if chosen is None:
            return progress
        total = sum(progress.values())
        rest = {t: (1.0 - self.config.planner_weight) * (p / total if total > 0 else 1.0 / len(tasks))
                for t, p in progress.items()}
        return {t: rest[t] + (self.config.planner_weight if t == chosen else 0.0) for t in tasks}

    def _ask_planner(self, iteration: int, rates: Mapping[str, Sequence[float]], tasks: list[str]) -> str | None:
        if self.planner is None:
            self.planner = llm_planner(self.config.planner_base_url, seed=self.seed)
        try:
            chosen = self.planner(planner_prompt(rates, tasks), tasks)
        except Exception as exc:  # noqa: BLE001 - a failed planner falls back, and the note says why
            self.notes.append(f"iteration {iteration}: planner failed ({type(exc).__name__}: {str(exc)[:120]}); "
                              "learning progress chose")
            return None
        if chosen not in tasks:
            self.notes.append(f"iteration {iteration}: planner answered {chosen!r}, not a level; "
                              "learning progress chose")
            return None
        self.notes.append(f"iteration {iteration}: planner chose {chosen}")
        return chosen

    def plan(self, iteration: int, history: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
        """The seeds of each task to play in ``iteration`` (tasks with none left out)."""
        if self.config.kind == "all":
            return {t: list(pool) for t, pool in self.pools.items()}
        epsilon = 0.0 if self.config.kind == "uniform" else self.config.epsilon
        # a seed is played once per iteration (by every run of the group): no task gets more than its pool
        counts = allocate_within(self.weights(iteration, history), self.config.episodes, epsilon,
                                 {t: len(pool) for t, pool in self.pools.items()})
        rng = np.random.default_rng([self.seed, iteration, 42])
        out = {}
        for task, n in counts.items():
            pool = list(self.pools[task])
            if n <= 0:
                continue
            out[task] = sorted(pool[i] for i in rng.choice(len(pool), size=n, replace=False))
        return out
