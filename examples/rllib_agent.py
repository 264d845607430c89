"""An RLlib checkpoint as a polar_bench agent, through the `RLlibAgent` adapter.

Train first: python -m baselines.rllib.train --config baselines/rllib/experiments/cartpole.yaml
Then: python -m polar_bench evaluate examples/rllib_agent.py --suite v1 --tasks gym/CartPole-v1
(RLLIB_CHECKPOINTS points elsewhere than runs/rllib/checkpoints.)
"""

import os
from pathlib import Path

from polar_bench.agent import RLlibAgent

AGENT_INFO = {
    "name": "rllib",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench",
    "training_steps": {"classic": 20_000},
    "llm": None,
    "license": "MIT",
}
CHECKPOINTS = Path(os.environ.get("RLLIB_CHECKPOINTS", Path(__file__).resolve().parents[1] / "runs/rllib/checkpoints"))


def make_agent(task, run):
    return RLlibAgent(CHECKPOINTS / task.id.replace("/", "_") / f"run{run}")
