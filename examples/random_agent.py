"""The random agent: uniformly random actions, reproducible from the episode seed.

    python -m polar_bench evaluate examples/random_agent.py --suite v1
"""

import numpy as np
from gymnasium import spaces

AGENT_INFO = {
    "name": "random",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench",
    "training_steps": {},  # no training
    "llm": None,
    "license": "MIT",
    "description": "Uniformly random actions; the lower reference of several tasks.",
}


class RandomAgent:
    def __init__(self, task, run):
        self.space = task.action_space
        self.run = run

    def reset(self, seed):
        # Mix the run in, so that runs are independent instances; derive all randomness from here.
        self.rng = np.random.default_rng([seed, self.run])

    def act(self, observation, info):
        if isinstance(self.space, spaces.Discrete):
            return int(self.rng.integers(self.space.n))
        return self.rng.uniform(-1.0, 1.0, size=self.space.shape).astype(np.float32)


def make_agent(task, run):
    return RandomAgent(task, run)
