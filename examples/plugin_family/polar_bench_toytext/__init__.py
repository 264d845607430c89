"""`toytext/<game>`: Gymnasium's toy-text games as a polar_bench family, shipped as a plugin package.

The package registers the family through the ``polar_bench.harnesses`` entry point group (see its
pyproject.toml), which is all a third-party family needs: after ``pip install``,
``polar_bench.make("toytext/FrozenLake")`` works, ``polar_bench.harness.task_names("toytext")`` lists
the games, and a suite file can name them. The text observation is the game's own ANSI rendering
with the colour codes removed, so language agents can play too.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium

from polar_bench.harness.adapter import GymnasiumAdapter

__all__ = ["ToyTextHarness"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _game(env_id: str, **kwargs: Any):
    def build():
        return gymnasium.make(env_id, render_mode="ansi", **kwargs).unwrapped
    return build


class ToyTextHarness(GymnasiumAdapter):
    family = "toytext"
    tasks = {"FrozenLake": _game("FrozenLake-v1", is_slippery=True),
             "Taxi": _game("Taxi-v3"),
             "CliffWalking": _game("CliffWalking-v1", is_slippery=True)}
    description = {
        "FrozenLake": "Cross a frozen 4x4 lake from S to the goal G without falling into a hole H; the ice "
                      "is slippery, so a move goes sideways two times in three. Reward 1 on reaching G.",
        "Taxi": "Drive the taxi to the passenger, pick them up and drop them at their destination in a 5x5 "
                "grid. Reward -1 per step, +20 for a delivery, -10 for an illegal pick-up or drop-off.",
        "CliffWalking": "Walk from the bottom-left corner to the bottom-right one along a 4x12 grid without "
                        "stepping off the cliff between them; the ground is slippery (a move may go "
                        "sideways). Reward -1 per step, -100 for falling (back to the start).",
    }
    action_names = {"FrozenLake": ("left", "down", "right", "up"),
                    "Taxi": ("south", "north", "east", "west", "pick up", "drop off"),
                    "CliffWalking": ("up", "right", "down", "left")}
    observation_names = ()
    max_episode_steps = 200
    package = "gymnasium"

    def observation_text(self, observation: Any) -> str:
        return _ANSI.sub("", self._env.render()).strip("\n")
