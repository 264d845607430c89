"""A hand-written controller for the classic-control tasks that reads `TaskInfo`.

It looks up observation components by name (so it does not depend on their order) and picks
discrete actions by their names. Other tasks fall back to random actions.
"""

import numpy as np
from gymnasium import spaces

AGENT_INFO = {
    "name": "classic-heuristic",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench",
    "training_steps": {},
    "llm": None,
    "license": "MIT",
    "description": "Hand-written rules for CartPole, Acrobot, MountainCar and Pendulum; random elsewhere.",
}


class ClassicHeuristic:
    def __init__(self, task, run):
        self.task = task
        self.run = run
        self.obs_index = {c.name: i for i, c in enumerate(task.observation_components)}
        self.action_index = {c.name: i for i, c in enumerate(task.action_components)}
        self.kind = task.native_id.split("-v")[0]

    def reset(self, seed):
        self.rng = np.random.default_rng([seed, self.run])

    def _obs(self, observation, name):
        return float(observation[self.obs_index[name]])

    def act(self, observation, info):
        if self.kind == "CartPole":
            # Push toward the side the pole is falling to (angle plus a share of its velocity).
            lean = self._obs(observation, "pole angle") + 0.5 * self._obs(observation, "pole angular velocity")
            return self.action_index["push cart to the right" if lean > 0 else "push cart to the left"]
        if self.kind == "MountainCar":
            # Accelerate in the direction of motion to pump energy into the swing.
            v = self._obs(observation, "car velocity")
            return self.action_index["accelerate to the right" if v >= 0 else "accelerate to the left"]
        if self.kind == "Acrobot":
            # Torque along the second link's swing: pumps energy into the chain.
            w2 = self._obs(observation, "theta2 angular velocity")
            return self.action_index["apply +1 torque to the actuated joint" if w2 > 0 else
                                     "apply -1 torque to the actuated joint"]
        if self.kind == "Pendulum":
            cos, sin = self._obs(observation, "cos(theta)"), self._obs(observation, "sin(theta)")
            w = self._obs(observation, "angular velocity")
            theta = np.arctan2(sin, cos)
            if cos > 0.85:  # near upright: PD control
                u = -(10.0 * theta + 2.0 * w) / 2.0
            else:  # energy shaping: pump (or brake) toward the energy of the upright rest state
                energy = w * w / 6.0 + 5.0 * cos  # rod of mass 1, length 1, g = 10
                u = np.sign(w * (5.0 - energy)) or 1.0
            return np.array([np.clip(u, -1.0, 1.0)], dtype=np.float32)
        space = self.task.action_space
        if isinstance(space, spaces.Discrete):
            return int(self.rng.integers(space.n))
        return self.rng.uniform(-1, 1, size=space.shape).astype(np.float32)


def make_agent(task, run):
    return ClassicHeuristic(task, run)
