"""`procgen/<game>`: the 16 games of the Procgen Benchmark (Cobbe et al., 2020).

``procgen/bigfish`` ... ``procgen/starpilot``. The episode seed chooses the level (the level rule,
`level_for_seed`, over ``start_level`` and ``num_levels``), which a reset puts into one native env
by loading its saved state with the level's seed bounds. The game's timeout is the harness's
truncation, every observation of an episode belongs to it, and there is no text rendering. See
docs/families/procgen.md.
"""

from __future__ import annotations

import contextlib
import io
import struct
import warnings
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces

from .._optional import require, version_of
from ..task_info import Component, TaskInfo
from .base import Harness, keyword_parameters

__all__ = ["ProcgenHarness", "GAMES", "level_for_seed"]

C = Component

#: procgen's level seeds lie in [0, 2**31 - 1) (its C++ draws them with randint(0, INT32_MAX)).
LEVEL_SEED_BOUND = 2**31 - 1

# Goal of each game (after the Procgen README) and the meaning of its special buttons (from the
# game sources; a special button also stops the agent's movement for that step).
_FIRE_D = {"D": "fire"}
GAMES: dict[str, dict[str, Any]] = {
    "bigfish": {
        "goal": "Swim as a small fish and grow by eating fish smaller than yourself (+1 each); touching "
                "a larger fish ends the episode. Eating 30 fish completes the level (+10).",
        "special": {},
    },
    "bossfight": {
        "goal": "Pilot a small starship against a much bigger boss ship. Dodge its projectiles (meteors "
                "give cover); when its shields drop, fire at it. Each round of damage gives a reward; "
                "destroying the boss gives a large reward and ends the episode, being hit ends it too.",
        "special": _FIRE_D,
    },
    "caveflyer": {
        "goal": "Navigate a starship through a network of caves to the exit (most of the reward). The "
                "ship rotates and thrusts like in Asteroids; destroying targets with its laser gives extra "
                "reward. Walls and the stationary and moving obstacles are lethal.",
        "special": {"D": "fire laser"},
    },
    "chaser": {
        "goal": "A MsPacman-like maze: collect every green orb (small reward each, large reward for the "
                "last). Large stars make the enemies vulnerable for a short time; touching an enemy that "
                "is not vulnerable ends the episode.",
        "special": {},
    },
    "climber": {
        "goal": "Climb a sequence of platforms collecting stars (small reward each, a larger reward and "
                "the end of the episode when all are collected) while avoiding lethal flying monsters.",
        "special": {},
    },
    "coinrun": {
        "goal": "A platformer: run from the far left to the coin at the far right of the level (+10), "
                "avoiding saws, pacing enemies and chasms, which end the episode.",
        "special": {},
    },
    "dodgeball": {
        "goal": "In a room of walls and enemies that throw balls, hit every enemy with balls thrown in the "
                "direction you face, then step onto the unlocked platform for a large completion bonus. "
                "Touching a wall or being hit ends the episode.",
        "special": {"D": "throw ball"},
    },
    "fruitbot": {
        "goal": "A vertical scroller: steer a robot through gaps in walls, collecting fruit (+1) and "
                "avoiding other food (-4); reaching the end of the level gives +10. Keys thrown at locks "
                "open gates; hitting a wall or a gate ends the episode.",
        "special": {"D": "throw key"},
    },
    "heist": {
        "goal": "Steal the gem hidden behind a maze of colored locks; collect keys of a lock's color to "
                "open it. The gem is the only reward and ends the episode.",
        "special": {},
    },
    "jumper": {
        "goal": "An open-world platformer: a double-jumping bunny must find the carrot (the only reward, "
                "ends the episode), guided by an on-screen compass; spikes are lethal.",
        "special": {},
    },
    "leaper": {
        "goal": "Frogger: cross lanes of cars, then hop from log to log across a river, to reach the "
                "finish line (the only reward). Cars and falling in the river end the episode.",
        "special": {},
    },
    "maze": {
        "goal": "A mouse must navigate a maze (3x3 to 25x25) to the single piece of cheese, the only "
                "reward, which ends the episode.",
        "special": {},
    },
    "miner": {
        "goal": "BoulderDash: dig through dirt, collect every diamond (small reward each), then reach the "
                "exit (large reward). A falling boulder or diamond landing on the robot ends the episode.",
        "special": {},
    },
    "ninja": {
        "goal": "A platformer: jump across ledges (jumps charge while up is held) to the mushroom at the "
                "end of the level (the only reward, ends the episode), avoiding bombs and fire; throwing "
                "stars clear bombs.",
        "special": {"D": "throw star forward", "A": "throw star up-forward", "W": "throw star up",
                    "S": "throw star down-forward", "Q": "throw star forward", "E": "throw star forward"},
    },
    "plunder": {
        "goal": "Fire cannonballs from your ship at the bottom of the screen to sink the enemy pirate "
                "ships (+1 each; the target in the bottom-left corner shows their color, 20 complete the "
                "level for +10) and spare friendly ships. A countdown timer ends the episode; firing and "
                "hitting friendly ships shorten it.",
        "special": {"D": "fire cannonball"},
    },
    "starpilot": {
        "goal": "A side-scrolling shooter: destroy enemy ships and turrets for reward and survive until "
                "the finish line; all enemies fire at you, clouds hide them and meteors block the way. "
                "Being hit ends the episode.",
        "special": {"D": "fire forward", "A": "fire backward", "W": "fire forward", "S": "fire forward",
                    "Q": "fire forward", "E": "fire forward"},
    },
}

_MODES_ONLY = {"extreme": {"chaser", "dodgeball", "leaper", "starpilot"},
               "memory": {"caveflyer", "dodgeball", "heist", "jumper", "maze", "miner"}}
_RENDER_OPTIONS = {"center_agent": True, "use_backgrounds": True, "use_monochrome_assets": False,
                   "restrict_themes": False, "use_generated_assets": False, "paint_vel_info": False}


def level_for_seed(seed: int, start_level: int = 0, num_levels: int = 0) -> int:
    """The procgen level seed that the episode with seed ``seed`` plays (the level rule)."""
    offset = seed if num_levels == 0 else seed % num_levels
    return (start_level + offset) % LEVEL_SEED_BOUND


def _button_name(combo: tuple[str, ...], special: dict[str, str]) -> str:
    if not combo:
        return "noop"
    if len(combo) == 1 and combo[0] in "DAWSQE":
        key = combo[0]
        return f"{special[key]} ({key})" if key in special else f"{key} (no effect: stand still)"
    return "+".join(k.lower() for k in combo)


def _import_procgen() -> ModuleType:
    """Import procgen without its deprecation chatter (old gym prints a notice on stderr)."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        require("procgen", "procgen", "the procgen tasks")
        from procgen import env as procgen_env
    return procgen_env


class _StateLayout:
    """Byte offsets of the fields the harness patches in procgen's serialized game state.

    The layout is ``Game::serialize`` of procgen 0.10 (SERIALIZE_VERSION 0): version, game name,
    12 option ints, grid_step, level_seed_low, level_seed_high, game_type, game_n, two random
    generators (an int and a string each), reward, done, level_complete, action, timeout, ...
    """

    def __init__(self, state: bytes, game: str):
        def read_int(pos: int) -> int:
            return struct.unpack_from("=i", state, pos)[0]

        version = read_int(0)
        name_len = read_int(4)
        name = state[8:8 + name_len].decode("ascii", "replace")
        if version != 0 or name != game:
            raise RuntimeError(f"unexpected procgen state layout (version {version}, game {name!r}); "
                               f"the procgen harness supports procgen 0.10")
        pos = 8 + name_len + 12 * 4 + 4  # options, grid_step
        self.level_low = pos
        pos += 4 * 4  # level_seed_low, level_seed_high, game_type, game_n
        self.rngs = []  # (start, end) of the text of level_seed_rand_gen's and rand_gen's states
        for _ in range(2):  # each: is_seeded, then the engine's state as a string
            pos += 4
            self.rngs.append((pos + 4, pos + 4 + read_int(pos)))
            pos += 4 + read_int(pos)
        pos += 4 * 4  # reward, done, level_complete, action
        self.timeout = pos
        self.timeout_value = read_int(pos)

    def without_rng_states(self, state: bytes) -> bytes:
        """``state`` with both random generators' states cut to empty strings.

        Parsing them (two mt19937 states as decimal text) is half the cost of ``set_state``. An empty
        state fails to parse and leaves each engine as it is, which is harmless here: the forced
        reset draws the level from ``level_seed_rand_gen`` as ``randint(level, level + 1)``, which is
        ``level`` whatever the engine's state, and then re-seeds ``rand_gen`` with the level seed
        before generating the level.
        """
        (a0, a1), (b0, b1) = self.rngs
        empty = struct.pack("=i", 0)
        return state[:a0 - 4] + empty + state[a1:b0 - 4] + empty + state[b1:]


#: Games whose only reward is one bonus on reaching the goal, which ends the episode, so that an
#: episode returns 0 or the bonus (openai/procgen src/games/*.cpp: coinrun, jumper, leaper, ninja
#: GOAL_REWARD, maze REWARD, heist COMPLETION_BONUS, each 10; every other game pays for events that
#: can repeat).
GOAL_ONLY = {"coinrun": 10.0, "heist": 10.0, "jumper": 10.0, "leaper": 10.0, "maze": 10.0, "ninja": 10.0}


class ProcgenHarness(Harness):
    """Harness over one Procgen game (``procgen/coinrun``, ...); see the module docstring."""

    family = "procgen"

    @staticmethod
    def task_names() -> list[str]:
        return sorted(GAMES)

    @classmethod
    def accepted_options(cls, name: str) -> list[str]:
        """The constructor's options and procgen's rendering options (which pass through unchanged)."""
        return [*keyword_parameters(cls.__init__)[0], *_RENDER_OPTIONS]

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None,
                 distribution_mode: str = "easy", start_level: int = 0, num_levels: int = 0,
                 **options: Any) -> None:
        super().__init__(text=text)
        task_id = f"procgen/{name}"
        if name not in GAMES:
            raise ValueError(f"{task_id}: unknown procgen game; known: {', '.join(sorted(GAMES))}")
        if distribution_mode not in ("easy", "hard", "extreme", "memory"):
            hint = (" (for the exploration level use distribution_mode='hard', start_level=<its "
                    "seed>, num_levels=1)" if distribution_mode == "exploration" else "")
            raise ValueError(f"{task_id}: distribution_mode must be 'easy', 'hard', 'extreme' or "
                             f"'memory', got {distribution_mode!r}{hint}")
        if distribution_mode in _MODES_ONLY and name not in _MODES_ONLY[distribution_mode]:
            raise ValueError(f"{task_id}: distribution_mode {distribution_mode!r} exists only for "
                             f"{', '.join(sorted(_MODES_ONLY[distribution_mode]))}")
        for key, value in (("start_level", start_level), ("num_levels", num_levels)):
            is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            if not is_int or not 0 <= value < LEVEL_SEED_BOUND:
                raise ValueError(f"{task_id}: {key} must be an int in [0, 2**31 - 1), got {value!r}")
        for key, value in options.items():
            if not isinstance(value, bool):
                raise ValueError(f"{task_id}: option {key} must be True or False, got {value!r}")
        self._start_level = int(start_level)
        self._num_levels = int(num_levels)

        procgen_env = _import_procgen()
        render = {**_RENDER_OPTIONS, **options}
        self._env = procgen_env.ProcgenGym3Env(
            num=1, env_name=name, distribution_mode=distribution_mode, start_level=0, num_levels=1,
            num_threads=0, rand_seed=0, **render)
        state = bytearray(self._env.callmethod("get_state")[0])
        layout = _StateLayout(bytes(state), name)
        native_timeout = layout.timeout_value
        steps = native_timeout if max_episode_steps is None else int(max_episode_steps)
        if steps > native_timeout:
            self._env.close()
            raise ValueError(f"{task_id}: max_episode_steps must be at most {native_timeout} (the game's "
                             f"own time limit), got {max_episode_steps!r}")
        # One step past procgen's own limit: the harness truncates at `steps`, with the true frame.
        struct.pack_into("=i", state, layout.timeout, native_timeout + 1)
        self._state = bytearray(layout.without_rng_states(bytes(state)))
        self._level_offset = layout.level_low
        self._force_reset = np.array([-1], dtype=np.int32)
        self._action = np.zeros(1, dtype=np.int32)
        self._last_obs = np.zeros((64, 64, 3), dtype=np.uint8)  # the frame of the latest reset or step

        special = GAMES[name]["special"]
        combos = [tuple(c) for c in self._env.combos]
        action_components = tuple(C(_button_name(c, special), "buttons: " + ("+".join(c) or "none"))
                                  for c in combos)
        level_rule = (f"level seed = {self._start_level} + episode seed" if self._num_levels == 0 else
                      f"level seed = {self._start_level} + (episode seed mod {self._num_levels})")
        recorded = {"distribution_mode": distribution_mode, "start_level": self._start_level,
                    "num_levels": self._num_levels,
                    **{k: v for k, v in options.items() if v != _RENDER_OPTIONS[k]}}
        info = TaskInfo(
            id=task_id,
            domain="procgen",
            description=(f"{GAMES[name]['goal']} (Procgen {name}, {distribution_mode} levels; {level_rule}; "
                         f"observations are 64x64 RGB frames; at most {steps} steps.)"),
            observation_space=spaces.Box(0, 255, shape=(64, 64, 3), dtype=np.uint8),
            action_space=spaces.Discrete(len(combos)),
            observation_components=(C("rgb", "the 64x64 RGB frame procgen renders: rows top to bottom, "
                                             "columns left to right, channels R, G, B, values 0-255"),),
            action_components=action_components,
            reward_range=(-np.inf, np.inf) if name == "fruitbot" else (0.0, np.inf),
            max_episode_steps=steps,
            package="procgen-mirror",
            package_version=version_of("procgen-mirror") or version_of("procgen"),
            has_text=False,
            text_note="procgen observations are rendered sprite images with no symbolic form to "
                      "describe faithfully in text",
            native_id=f"procgen-{name}-v0",
            options=recorded,
        )
        if name in GOAL_ONLY:
            self.episode_return_range = (0.0, GOAL_ONLY[name])
        self._finish_setup(info)

    # ----------------------------------------------------------------- hooks
    def level_for_seed(self, seed: int) -> int:
        """The procgen level seed the episode with ``seed`` plays (see the level rule)."""
        return level_for_seed(seed, self._start_level, self._num_levels)

    def _native_reset(self, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        level = self.level_for_seed(seed)
        struct.pack_into("=ii", self._state, self._level_offset, level, level + 1)
        self._env.callmethod("set_state", [bytes(self._state)])
        self._env.act(self._force_reset)
        _, ob, _ = self._env.observe()
        played = int(self._env.get_info()[0]["level_seed"])
        if played != level:
            raise RuntimeError(f"procgen started level {played} instead of {level}")
        self._last_obs = ob["rgb"][0]
        return self._last_obs, {"level": level}

    def _native_step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._action[0] = action
        self._env.act(self._action)
        reward, ob, first = self._env.observe()
        if first[0]:  # the game ended the episode and has already restarted the level
            complete = bool(self._env.get_info()[0]["prev_level_complete"])
            return self._last_obs.copy(), float(reward[0]), True, False, {"level_complete": complete}
        self._last_obs = ob["rgb"][0]
        return self._last_obs, float(reward[0]), False, False, {}

    def _native_close(self) -> None:
        self._env.close()
