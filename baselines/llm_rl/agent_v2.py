"""The RL-trained LLM agent on suite v2 (issue #42's leaderboard entry): `agent.py`'s agent, played with
the weights of the `babyai5-group` experiment, run R with training seed R's.

    python -m baselines.llm_rl.evaluate --agent baselines/llm_rl/agent_v2.py --pinned baselines/llm_rl/agent_v2.py \\
        --dtype bfloat16 --replicas 2 --out OUT.json -- --suite v2 --workers 2

It plays as `agent.py` plays (its agent, subclassed: the LLM on BabyAI, seeded uniformly random actions
on every other task), but keeps within the evaluation's LLM budget: suite v2 allows 1000 calls per
episode, and a BabyAI Synth episode runs up to 1152 steps, so once an episode has made as many calls
as ``POLAR_BENCH_LLM_CALLS_PER_EPISODE`` says (or its tokens come within two calls' worth of
``POLAR_BENCH_LLM_TOKENS_PER_EPISODE``), it plays the rest without the LLM, uniformly random actions
of its menu seeded by (episode seed, run), counted in its record as ``steps_without_llm``.

The weights it is played with are pinned in `agent_v2.artifacts.json` (one file per run, by SHA-256),
served by ``server.py --pinned`` or ``evaluate.py --pinned``. Its training budget is read from the
committed curves of the experiment's seeds (curves/babyai5-group-seed<R>.csv: environment steps per
level and iteration), so that the declared budget is the one the trained runs spent.
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # so that baselines.llm_rl imports when evaluate loads this file

from baselines.llm_rl import agent as v1  # noqa: E402
from baselines.llm_rl.agent import LLM_FAMILIES, Agent, UniformRandom  # noqa: E402

HERE = Path(__file__).resolve().parent
EXPERIMENT = "babyai5-group"
LEVELS = ("babyai/GoToRedBall", "babyai/GoToLocal", "babyai/PickupLoc", "babyai/PutNextLocal", "babyai/Synth")
DOMAINS = ("classic", "dmc", "procgen", "nethack", "babyai", "atari100k")


def training_steps(curves: Iterable[Path]) -> dict[str, int]:
    """Environment steps of training per BabyAI level, the most of the seeds: each curve (a seed's
    metrics.csv) gives its steps per level as the sum of its ``env_steps:<level>`` column over its
    iterations. A curve without those columns is refused rather than counted as no training."""
    most: dict[str, int] = {}
    for path in curves:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        for level in LEVELS:
            col = f"env_steps:{level}"
            if not rows or col not in rows[0]:
                raise ValueError(f"{path} has no {col} column: it predates per-level step counts")
            steps = sum(int(float(r[col] or 0)) for r in rows)
            most[level] = max(most.get(level, 0), steps)
    return most


_PER_TASK = training_steps(sorted(HERE.glob(f"curves/{EXPERIMENT}-seed[0-9].csv")))
AGENT_INFO = {
    **v1.AGENT_INFO,
    "name": f"llm-rl {EXPERIMENT} (SmolLM2-135M-Instruct, RL-trained on 5 BabyAI levels with a curriculum)",
    # environment steps per level, the most of the trained seeds (above); per domain, the largest level's;
    # every domain outside BabyAI is played at random and was never trained on
    "training_steps": {d: (max(_PER_TASK.values(), default=0) if d == "babyai" else 0) for d in DOMAINS},
    "training_steps_per_task": dict(_PER_TASK),
    "llm": {"model": f"SmolLM2-135M-Instruct, two top layers RL-trained by baselines/llm_rl ({EXPERIMENT}.yaml)",
            "provider": "baselines/llm_rl/server.py (transformers, bfloat16)"},
    "description": "The LLM picks each BabyAI action from the text view, within the suite's per-episode LLM budget "
                   "(past it, seeded random menu actions); on every task outside BabyAI the agent plays uniformly "
                   "random actions (seeded by episode seed and run), not the LLM.",
}


class BudgetedAgent(Agent):
    """`agent.py`'s LLM agent, held within the per-episode LLM budget that the evaluation tells it (module
    docstring): over budget, seeded uniformly random actions of its menu, no call."""

    def __init__(self, task, run):
        super().__init__(task, run)
        self.rng = np.random.default_rng([0, self.run])
        self.last_tokens = 0

    def reset(self, seed):
        super().reset(seed)
        self.rng = np.random.default_rng([int(seed), self.run])
        self.last_tokens = 0
        self.usage["steps_without_llm"] = 0

    def over_budget(self) -> bool:
        calls = os.environ.get("POLAR_BENCH_LLM_CALLS_PER_EPISODE")
        tokens = os.environ.get("POLAR_BENCH_LLM_TOKENS_PER_EPISODE")
        used = self.usage["prompt_tokens"] + self.usage["completion_tokens"]
        return (calls is not None and self.usage["calls"] >= int(calls)) or (
            tokens is not None and used + 2 * self.last_tokens >= int(tokens))

    def act(self, observation, info):
        if self.over_budget():
            self.step += 1
            self.usage["steps_without_llm"] = self.usage.get("steps_without_llm", 0) + 1
            return self.names.index(self.menu[int(self.rng.integers(len(self.menu)))])
        before = self.usage["prompt_tokens"] + self.usage["completion_tokens"]
        action = super().act(observation, info)
        self.last_tokens = self.usage["prompt_tokens"] + self.usage["completion_tokens"] - before
        return action


def make_agent(task, run):
    if str(task.id).startswith(LLM_FAMILIES):
        return BudgetedAgent(task, run)
    return UniformRandom(task, run)
