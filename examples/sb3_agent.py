"""A Stable-Baselines3 model as a polar_bench agent, through the `SB3Agent` adapter.

Train the models first (one per task and run): python examples/train_sb3.py --task gym/CartPole-v1 --run 0
Then: python -m polar_bench evaluate examples/sb3_agent.py --suite v1 --tasks gym/CartPole-v1
"""

import os
from pathlib import Path

from stable_baselines3 import PPO

from polar_bench.agent import SB3Agent

AGENT_INFO = {
    "name": "sb3-ppo",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench",
    "training_steps": {"classic": 50_000},
    "llm": None,
    "license": "MIT",
}
MODELS = Path(os.environ.get("SB3_MODELS", Path(__file__).parent / "models"))


def make_agent(task, run):
    path = MODELS / f"sb3_ppo_{task.id.replace('/', '_')}_run{run}.zip"
    if not path.exists():
        raise FileNotFoundError(f"no model at {path}; train it with "
                                f"python examples/train_sb3.py --task {task.id} --run {run}")
    return SB3Agent(PPO.load(path, device="cpu"))
