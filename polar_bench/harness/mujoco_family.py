"""`mujoco/<id>`: Gymnasium's MuJoCo v5 locomotion tasks (HalfCheetah, Hopper, Walker2d, Ant, Humanoid).

The same environments as ``gym/<id>`` (built by `GymHarness` with ``gymnasium.make``), under a
family of their own so that a suite can name the locomotion set and a later ``bullet/`` family can
be compared with it task by task. These tasks have no text observations: their observations are
joint positions and velocities without per-component names in Gymnasium.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .gym_family import GymHarness

__all__ = ["MujocoHarness", "TASKS"]

#: Task name -> what the agent must do (Gymnasium's v5 reward: forward velocity, a healthy bonus
#: where the body can fall, minus control and contact costs).
TASKS: dict[str, str] = {
    "HalfCheetah-v5": "Make a planar two-legged cheetah run forward (+x) as fast as possible; reward is forward "
                      "velocity minus 0.1 x squared action. It cannot fall, so episodes last 1000 steps.",
    "Hopper-v5": "Make a planar one-legged hopper hop forward; reward is forward velocity plus 1 per step while "
                 "healthy minus 0.001 x squared action. The episode ends when it falls.",
    "Walker2d-v5": "Make a planar two-legged walker walk forward; reward is forward velocity plus 1 per step "
                   "while healthy minus 0.001 x squared action. The episode ends when it falls.",
    "Ant-v5": "Make a four-legged ant walk forward (+x) in 3-D; reward is forward velocity plus 1 per step while "
              "healthy minus control and contact costs. The episode ends when the torso leaves its height range.",
    "Humanoid-v5": "Make a 3-D humanoid walk forward without falling; reward is 1.25 x forward velocity plus 5 "
                   "per step while healthy minus control and contact costs. The episode ends when it falls.",
}


class MujocoHarness(GymHarness):
    """Harness over Gymnasium's MuJoCo v5 locomotion tasks (``mujoco/HalfCheetah-v5``, ...)."""

    family = "mujoco"
    bitwise_across_machines = False  # MuJoCo's compiled kernels round differently on another CPU

    @staticmethod
    def task_names() -> list[str]:
        return sorted(TASKS)

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(name, text=text, max_episode_steps=max_episode_steps, **kwargs)
        self.task_info = dataclasses.replace(
            self.task_info, id=f"mujoco/{name}", domain="mujoco", description=TASKS[name],
            text_note="MuJoCo observations are unnamed joint positions and velocities")
