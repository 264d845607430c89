"""A Gymnasium-style environment that polar_bench has never seen (it stands for yours).

A room's temperature drifts towards the outside temperature; each step the agent turns the heater
off, low or high. Reward: minus the distance to 21 degrees. 200 steps.
"""

import gymnasium
import numpy as np
from gymnasium import spaces


class ThermostatEnv(gymnasium.Env):
    def __init__(self, outside=5.0):
        self.outside = outside
        self.observation_space = spaces.Box(-50.0, 50.0, (2,), np.float32)  # room, outside (deg C)
        self.action_space = spaces.Discrete(3)  # heater off, low, high

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.room = float(self.np_random.uniform(10.0, 25.0))
        return self._obs(), {}

    def step(self, action):
        heat = (0.0, 0.8, 1.6)[int(action)]
        noise = float(self.np_random.normal(0.0, 0.1))
        self.room += 0.05 * (self.outside - self.room) + heat + noise
        self.room = float(np.clip(self.room, -50.0, 50.0))
        return self._obs(), -abs(self.room - 21.0), False, False, {}

    def _obs(self):
        return np.array([self.room, self.outside], dtype=np.float32)
