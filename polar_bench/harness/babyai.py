"""`babyai/<Level>`: the BabyAI levels of Minigrid (``BabyAI-<Level>-v<N>``).

One task per registered level (its latest version). The observation is Minigrid's dict (heading,
7x7 egocentric view, mission), the 7 actions are Minigrid's, the level sets its own step limit at
every reset and ``reset(seed=s)`` seeds the level generator; `describe_view` renders what the
agent sees as text. See docs/families/babyai.md.
"""

from __future__ import annotations

import contextlib
import re
import string
from collections.abc import Iterable
from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from .._optional import require, version_of
from ..task_info import Component, TaskInfo
from .base import COMMON_OPTIONS, Harness
from .gym_family import constructor_options

__all__ = ["BabyAIHarness", "MISSION_CHARSET", "MISSION_MAX_LENGTH"]

C = Component

# Every character of the BabyAI grammar's sentences (minigrid/envs/babyai/core/verifier.py uses
# lowercase words, spaces and ", then").
MISSION_CHARSET = string.ascii_lowercase + " ,"
# The longest mission: an object description is at most "the purple object in front of you" (33);
# "put X next to Y" is 4 + 33 + 9 + 33 = 79; "A and B" is 79 + 5 + 79 = 163; "A after you B" is
# 163 + 11 + 163 = 337.
MISSION_MAX_LENGTH = 337

_ID = re.compile(r"^BabyAI-(?P<level>[A-Za-z0-9_]+)-v(?P<version>\d+)$")

_ACTIONS = (
    C("turn left", "turn 90 degrees to the left"),
    C("turn right", "turn 90 degrees to the right"),
    C("move forward", "move one cell forward if the cell ahead is free or an open door"),
    C("pick up", "pick up the object in the cell ahead (one object can be carried at a time)"),
    C("drop", "drop the carried object into the empty cell ahead"),
    C("toggle", "open or close the door ahead (a locked door needs the key of its colour) or open the box ahead"),
    C("done", "declare the mission complete (no effect in most levels)"),
)

_OBS_COMPONENTS = (
    C("direction", "the direction the agent faces: 0 east, 1 south, 2 west, 3 north"),
    C("image", "the 7x7 egocentric view; image[i, j] is the cell (3 - i) to the left and (6 - j) ahead "
               "of the agent (the agent is at [3, 6] facing j = 0), encoded as (object, colour, state) "
               "with object 0 unseen, 1 empty, 2 wall, 3 floor, 4 door, 5 key, 6 ball, 7 box, 8 goal, "
               "9 lava; colour 0 red, 1 green, 2 blue, 3 purple, 4 yellow, 5 grey; door state 0 open, "
               "1 closed, 2 locked. The cell of the agent shows the carried object, if any"),
    C("mission", "the instruction in the BabyAI language, e.g. 'go to the red ball'"),
)

_OBJECTS = ("unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal", "lava", "agent")
_COLORS = ("red", "green", "blue", "purple", "yellow", "grey")
_DOOR_STATES = ("open", "closed", "locked")
_DIRECTIONS = ("east", "south", "west", "north")
_PASSABLE = (1, 3, 8)  # empty, floor, goal; open doors are checked separately


class _Sink:
    """A write-only stream that drops everything (cheaper than io.StringIO)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


_SINK = _Sink()


def _level_ids() -> dict[str, str]:
    """Level name -> the latest registered env id (worked out again only when the registry grew)."""
    require("minigrid", "babyai", "the BabyAI levels")
    import gymnasium

    global _LEVELS
    if _LEVELS is None or _LEVELS[0] != len(gymnasium.registry):
        _LEVELS = (len(gymnasium.registry), _latest_levels(gymnasium.registry))
    return dict(_LEVELS[1])


_LEVELS: tuple[int, dict[str, str]] | None = None


def _latest_levels(registry: Iterable[str]) -> dict[str, str]:
    best: dict[str, tuple[int, str]] = {}
    for env_id in registry:
        m = _ID.match(env_id)
        if m:
            level, version = m["level"], int(m["version"])
            if level not in best or version > best[level][0]:
                best[level] = (version, env_id)
    return {level: env_id for level, (_, env_id) in best.items()}


def _level_description(env: Any) -> str:
    """The '## Description' section of the level class's docstring, on one line."""
    doc = type(env).__doc__ or ""
    m = re.search(r"##\s*Description\s*(.*?)(?:\n\s*##|\Z)", doc, re.S)
    return " ".join(m.group(1).split()) if m else ""


def _max_steps_bound(env: Any, max_steps_after_reset: int) -> int:
    """The largest per-episode step limit the level can set."""
    if getattr(env, "fixed_max_steps", True):
        return int(env.max_steps)
    from minigrid.envs.babyai.core.levelgen import LevelGen

    if isinstance(env, LevelGen):
        # num_navs_needed: 1 per action, 2 for "put next"; "and" doubles it, "seq" (before/after
        # of two "and"s) quadruples it.
        navs = 2 if "putnext" in env.action_kinds else 1
        navs *= 4 if "seq" in env.instr_kinds else 2 if "and" in env.instr_kinds else 1
        return navs * env.room_size ** 2 * env.num_rows * env.num_cols
    # Hand-written levels always build the same instruction shape, so one reset tells.
    return int(max_steps_after_reset)


def _article(words: str) -> str:
    return ("an " if words[0] in "aeiou" else "a ") + words


def _steps(n: int) -> str:
    return f"{n} step{'s' if n != 1 else ''}"


def _where(ahead: int, right: int) -> str:
    side = "" if right == 0 else f"{abs(right)} to the {'right' if right > 0 else 'left'}"
    if ahead == 0:
        return f"{_steps(abs(right))} to the {'right' if right > 0 else 'left'}"
    return f"{_steps(ahead)} ahead" + (f" and {side}" if side else "")


def _thing(obj: int, color: int, state: int) -> str:
    name = _OBJECTS[obj] if obj < len(_OBJECTS) else f"object {obj}"
    col = _COLORS[color] if color < len(_COLORS) else ""
    if obj == 4:
        return _article(f"{_DOOR_STATES[state] if state < 3 else ''} {col} door".replace("  ", " ").strip())
    if obj == 8:
        return "the goal square"
    if obj == 9:
        return "lava"
    return _article(f"{col} {name}".strip())


def describe_view(image: np.ndarray, direction: int, mission: str) -> str:
    """The observation in words: mission, heading, what is carried, the objects in view with
    their position relative to the agent, the path straight ahead and walls beside the agent."""
    img = np.asarray(image)
    obj = img[:, :, 0].tolist()
    col = img[:, :, 1].tolist()
    st = img[:, :, 2].tolist()
    parts = [f"Mission: {mission}." if mission else "Mission: (none).",
             f"You face {_DIRECTIONS[int(direction) % 4]}."]
    carried = obj[3][6]
    parts.append(f"You carry {_thing(carried, col[3][6], st[3][6])}." if carried > 3 else "You carry nothing.")
    seen = []
    for i in range(7):
        for j in range(7):
            o = obj[i][j]
            if o < 4 or o == 10 or (i == 3 and j == 6):
                continue  # unseen, empty, wall, floor, the agent's own cell
            ahead, right = 6 - j, i - 3
            seen.append((abs(ahead) + abs(right), ahead, right, _thing(o, col[i][j], st[i][j])))
    seen.sort()
    if seen:
        parts.append("You see " + "; ".join(f"{what} {_where(a, r)}" for _, a, r, what in seen) + ".")
    else:
        parts.append("You see no objects.")
    # The path straight ahead (column i = 3, from j = 5 away from the agent).
    free = 0
    blocker = "the edge of your view"
    for j in range(5, -1, -1):
        o = obj[3][j]
        if o in _PASSABLE or (o == 4 and st[3][j] == 0):
            free += 1
            continue
        blocker = "unexplored space" if o == 0 else ("a wall" if o == 2 else _thing(o, col[3][j], st[3][j]))
        break
    if free == 0:
        parts.append(f"Directly in front of you: {blocker}.")
    else:
        parts.append(f"Ahead: {free} free cell{'s' if free != 1 else ''}, then {blocker}.")
    walls = [side for side, i in (("left", 2), ("right", 4)) if obj[i][6] == 2]
    if walls:
        parts.append(f"A wall is right beside you on your {' and '.join(walls)}.")
    return " ".join(parts)


class BabyAIHarness(Harness):
    """Harness over one BabyAI level (``babyai/GoToRedBall``, ``babyai/BossLevel``, ...).

    Options are passed to the level's constructor through ``gymnasium.make`` (e.g. ``room_size``).
    """

    family = "babyai"
    # MiniGrid pays 1 - 0.9 * steps / limit once, on the step that reaches the goal, which ends the
    # episode; every other step pays 0.
    episode_return_range = (0.0, 1.0)

    @staticmethod
    def task_names() -> list[str]:
        return sorted(_level_ids())

    @classmethod
    def accepted_options(cls, name: str) -> list[str] | None:
        """``text``, ``max_episode_steps`` and the level constructor's arguments (``room_size``, ...)."""
        env_id = _level_ids().get(name)
        if env_id is None:
            return list(COMMON_OPTIONS)  # the constructor reports the unknown level
        native = constructor_options(env_id)
        return None if native is None else [*COMMON_OPTIONS, *native]

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None,
                 **options: Any) -> None:
        super().__init__(text=text)
        require("minigrid", "babyai", "the BabyAI levels")
        import gymnasium
        from minigrid.minigrid_env import MiniGridEnv

        env_id = _level_ids().get(name)
        if env_id is None:
            raise ValueError(f"babyai/{name}: no registered BabyAI-{name}-v* level")
        env = gymnasium.make(env_id, disable_env_checker=True, **options).unwrapped
        if not isinstance(env, MiniGridEnv):
            raise TypeError(f"babyai/{name}: {env_id} is not a Minigrid environment")
        self._env = env
        with contextlib.redirect_stdout(_SINK):
            example: dict[str, Any] = self._env.reset(seed=0)[0]
        steps = int(max_episode_steps or _max_steps_bound(self._env, self._env.max_steps))
        rows, cols = getattr(self._env, "num_rows", None), getattr(self._env, "num_cols", None)
        rooms = f"{rows}x{cols} rooms" if rows is not None else "a grid"
        level_text = _level_description(self._env) or f"The BabyAI level {name}."
        goal = (f"{level_text} Carry out the natural-language mission in observation['mission'] "
                f"(e.g. '{example['mission']}') in a grid world of {rooms} of "
                f"{getattr(self._env, 'room_size', '?')}x{getattr(self._env, 'room_size', '?')} cells, "
                f"seen through a 7x7 egocentric view. Reward 1 - 0.9 x (steps taken / step limit) on "
                f"success, 0 otherwise; the episode ends on success, on a failed instruction or at the "
                f"level's step limit (info['max_steps'] at reset).")
        observation_space = spaces.Dict({
            "direction": spaces.Discrete(4),
            "image": spaces.Box(0, 255, shape=(7, 7, 3), dtype=np.uint8),
            "mission": spaces.Text(max_length=MISSION_MAX_LENGTH, min_length=1, charset=MISSION_CHARSET),
        })
        info = TaskInfo(
            id=f"babyai/{name}",
            domain="babyai",
            description=goal,
            observation_space=observation_space,
            action_space=spaces.Discrete(7),
            observation_components=_OBS_COMPONENTS,
            action_components=_ACTIONS,
            reward_range=(0.0, 1.0),
            max_episode_steps=steps,
            package="minigrid",
            package_version=version_of("minigrid"),
            has_text=True,
            text_note=("the mission, the heading, the carried object, every object in view with its "
                       "colour, state and position relative to the agent, the path straight ahead "
                       "and walls beside the agent"),
            native_id=env_id,
            options=dict(options),
        )
        self._finish_setup(info)

    def _native_reset(self, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        with contextlib.redirect_stdout(_SINK):
            obs: dict[str, Any]
            obs, native_info = self._env.reset(seed=seed)
        info = dict(native_info)
        info["max_steps"] = int(self._env.max_steps)
        return obs, info

    def _native_step(self, action: int) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        return self._env.step(action)

    def _native_close(self) -> None:
        self._env.close()

    def _render_text(self, observation: dict[str, Any]) -> str:
        return describe_view(observation["image"], observation["direction"], observation["mission"])
