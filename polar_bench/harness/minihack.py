"""`minihack/<task>`: MiniHack navigation and skill tasks (Samvelyan et al., 2021) with text observations.

MiniHack builds small NetHack levels on top of NLE, so the family reuses the NetHack harness
(`polar_bench.harness.nethack`): its observation keys, action names, text rendering, seeding and
options. Task ids are MiniHack's without ``MiniHack-`` and ``-v0`` (`TASKS`). See
docs/families/minihack.md.
"""

from __future__ import annotations

from typing import Any

from .._optional import require, version_of
from ..task_info import TaskInfo
from .nethack import REQUIRED_KEYS, NetHackHarness, checked_observation_keys

__all__ = ["MiniHackHarness", "TASKS"]

_WIN = "+1 and the episode ends"
_PENALTY = "; -0.01 on every step on which the in-game clock does not advance (menus, bumping into walls)"
#: Task name -> (MiniHack id, the goal in words). Navigation tasks first, then skill tasks.
TASKS: dict[str, tuple[str, str]] = {
    "Room-5x5": ("MiniHack-Room-5x5-v0",
                 f"Navigation: reach the staircase down (>) in a lit 5x5 room: {_WIN}"),
    "Room-Monster-5x5": ("MiniHack-Room-Monster-5x5-v0",
                         f"Navigation: reach the staircase down (>) in a 5x5 room with monsters; "
                         f"dying ends the episode with 0: {_WIN}"),
    "Corridor-R2": ("MiniHack-Corridor-R2-v0",
                    f"Navigation: reach the staircase down (>) in another of two rooms joined by corridors: "
                    f"{_WIN}"),
    "MazeWalk-9x9": ("MiniHack-MazeWalk-9x9-v0",
                     f"Navigation: find the staircase down (>) in a 9x9 maze that is revealed as you walk: "
                     f"{_WIN}"),
    "River-Narrow": ("MiniHack-River-Narrow-v0",
                     f"Navigation: cross a narrow river by pushing a boulder into it, then reach the staircase "
                     f"down (>): {_WIN}"),
    "KeyRoom-S5": ("MiniHack-KeyRoom-S5-v0",
                   "Skill: pick up the key, walk to the locked room, apply the key to unlock the door and "
                   f"reach the staircase down (>) inside: {_WIN}"),
    "Eat": ("MiniHack-Eat-v0",
            f"Skill: pick up or stand on the apple lying in a lit 5x5 room and eat it: {_WIN}"),
    "LockedDoor": ("MiniHack-LockedDoor-v0",
                   f"Skill: kick open the locked door and reach the staircase down (>) behind it: {_WIN}"),
}


class MiniHackHarness(NetHackHarness):
    """Harness over one MiniHack task (``minihack/Room-5x5``, ...); see the module docstring."""

    family = "minihack"

    @staticmethod
    def task_names() -> list[str]:
        return list(TASKS)

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None,
                 observation_keys: tuple[str, ...] | list[str] = REQUIRED_KEYS,
                 fixed_levels: bool = False) -> None:
        super(NetHackHarness, self).__init__(text=text)  # Harness.__init__: NetHack's builds an NLE task
        task_id = f"minihack/{name}"
        if name not in TASKS:
            raise ValueError(f"{task_id}: unknown MiniHack task; known: {', '.join(TASKS)}")
        require("minihack", "minihack", "the MiniHack tasks", quiet=True)
        import gymnasium
        from gymnasium.envs.registration import load_env_creator
        keys = checked_observation_keys(task_id, observation_keys)
        if not isinstance(fixed_levels, bool):
            raise ValueError(f"{task_id}: fixed_levels must be True or False, got {fixed_levels!r}")
        native_id, goal = TASKS[name]
        creator = load_env_creator(str(gymnasium.spec(native_id).entry_point))
        kwargs: dict[str, Any] = dict(observation_keys=keys, save_ttyrec_every=0, savedir=None,
                                      fix_moon_phase=True)
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(max_episode_steps)
        parts = self._adopt(creator(**kwargs), keys, fixed_levels)
        steps = int(self._env._max_episode_steps)  # noqa: SLF001 - NLE keeps its step limit only there
        info = TaskInfo(
            id=task_id,
            domain="minihack",
            description=f"{goal}{_PENALTY}. (MiniHack {native_id} on NetHack 3.6 via NLE, playing "
                        f"{self._env.character}; {parts['action_space'].n} actions; at most {steps} steps.)",
            **parts,
            reward_range=(-0.01, 1.0),
            max_episode_steps=steps,
            package="minihack",
            package_version=version_of("minihack"),
            has_text=True,
            text_note="the message, the terminal screen (map, menus, prompts) without trailing blanks, "
                      "and the two bottom status lines (as the NetHack family)",
            native_id=native_id,
            options={"observation_keys": list(keys), "fixed_levels": fixed_levels},
        )
        self._finish_setup(info)
