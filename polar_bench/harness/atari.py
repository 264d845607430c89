"""`atari/<Game>`: the 26 games of the Atari 100k benchmark through ale-py, under its published protocol.

Task ids are the benchmark's game names (``atari/Alien`` ... ``atari/UpNDown``). By default: no
sticky actions, the minimal action set, 4 frames per step max-pooled over the last two, 84x84
grayscale, the last 4 frames stacked, 1-30 no-op frames drawn from the episode seed, a lost life
does not end the episode, and 27,000 steps at most; ``reset(seed=s)`` fully determines the episode.
See docs/families/atari.md for every setting, its source and the checks.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from gymnasium import spaces

from .._optional import require, version_of
from ..errors import HarnessOptionError
from ..task_info import Component, TaskInfo
from .base import Harness

__all__ = ["AtariHarness", "GAMES", "rom_id", "noop_count", "resize_84"]

C = Component

#: Atari 100k: 100,000 agent steps (400,000 frames) of interaction per game (Kaiser et al. 2019).
BUDGET_STEPS = 100_000
#: The episode cap: 108,000 emulator frames = 27,000 agent steps (Machado et al. 2018; Dopamine,
#: SPR's ``horizon=27000``).
MAX_EPISODE_STEPS = 27_000
FRAME_SKIP = 4
SCREEN = (210, 160)
SIZE = 84

# What each game asks, in our words after the games' manuals (AtariAge) and ALE's game list.
GAMES: dict[str, str] = {
    "Alien": "Run through the corridors of a space ship destroying the alien eggs that line them while "
             "avoiding the aliens; the flamethrower (fire) holds them off for a moment and pulsars let you "
             "destroy them.",
    "Amidar": "Move along the edges of a grid, painting the outline of every box, while avoiding the warriors "
              "that patrol it; painting the four corner boxes lets you destroy them for a while.",
    "Assault": "Command a ground cannon against a mother ship that releases attack ships: shoot them (up, "
               "left or right) and do not let the cannon overheat.",
    "Asterix": "Guide Asterix (or Obelix) up and down between lanes to collect the magic cauldrons and other "
               "objects that scroll past, avoiding the lyres.",
    "BankHeist": "Drive a getaway car through the mazes of a city robbing banks, dropping dynamite behind you "
                 "on the police cars that chase you, and watch the fuel.",
    "BattleZone": "A first-person tank battle: find enemy tanks, saucers and fighters on the radar and destroy "
                  "them while dodging their shots.",
    "Boxing": "A boxing match seen from above against a computer opponent: land punches (a point each; 100 "
              "points is a knockout that ends the bout) within the two-minute round.",
    "Breakout": "Bounce a ball off a paddle to knock the bricks out of a wall at the top of the screen; a life "
                "is lost whenever the ball gets past the paddle.",
    "ChopperCommand": "Fly a helicopter that protects a convoy of trucks, shooting down the enemy jets and "
                      "helicopters that attack it.",
    "CrazyClimber": "Climb the face of a skyscraper to its roof, window by window, avoiding closing windows and "
                    "falling objects.",
    "DemonAttack": "Move a laser cannon along a planet's surface and shoot the waves of demons that attack "
                   "from above, dodging their fire.",
    "Freeway": "Guide a chicken across ten lanes of traffic; every crossing scores a point and a hit by a car "
               "pushes it back. The game lasts 2 minutes 16 seconds.",
    "Frostbite": "Build an igloo by jumping across rows of floating ice floes, avoiding the hazards of the "
                 "arctic, before the temperature falls to zero, then go inside.",
    "Gopher": "Protect three carrots from a gopher that tunnels underground: fill its holes and bonk it when it "
              "surfaces.",
    "Hero": "Rescue miners trapped deep in a mine, flying with a helicopter backpack and clearing walls and "
            "creatures with a helmet laser and dynamite, before the power runs out.",
    "Jamesbond": "Drive James Bond's multi-purpose vehicle across desert, sea and air, jumping over craters and "
                 "shooting enemies, to complete the missions.",
    "Kangaroo": "Climb ladders and platforms as a mother kangaroo to rescue her joey at the top, punching the "
                "monkeys that throw apples at her.",
    "Krull": "Follow the film Krull: defend the wedding against the Slayers, ride to the Iron Desert, find the "
             "Glaive, and rescue the princess from the Black Fortress.",
    "KungFuMaster": "Fight through the floors of a temple, kicking and punching the enemies that come from both "
                    "sides, to rescue the princess.",
    "MsPacman": "Eat every dot of the maze while avoiding the four ghosts; power pills make the ghosts edible "
                "for a short time.",
    "Pong": "Table tennis against the computer: hit the ball past its paddle. A point won is +1, a point lost "
            "-1; the game ends when one side reaches 21, so returns lie in [-21, 21].",
    "PrivateEye": "Drive a detective through the city to find clues and return stolen items to where they "
                  "belong, within a time limit.",
    "Qbert": "Hop Q*bert from cube to cube of a pyramid, changing each cube's color, while avoiding the enemies "
             "and not jumping off the pyramid.",
    "RoadRunner": "Run along the road as the Road Runner, eating bird seed and escaping Wile E. Coyote, the "
                  "trucks and his traps.",
    "Seaquest": "Pilot a submarine that shoots enemy subs and killer sharks, rescues divers, and surfaces before "
                "its oxygen runs out.",
    "UpNDown": "Drive a buggy along a winding road, collecting flags and jumping onto other vehicles to destroy "
               "them.",
}

# ALE's action names (ale_py.Action) in words: the joystick direction and the fire button.
_DIRECTIONS = {"UP": "up", "DOWN": "down", "LEFT": "left", "RIGHT": "right", "UPRIGHT": "up-right",
               "UPLEFT": "up-left", "DOWNRIGHT": "down-right", "DOWNLEFT": "down-left"}


def rom_id(game: str) -> str:
    """The ALE ROM id of a task name: ``MsPacman`` -> ``ms_pacman``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower()


def noop_count(seed: int, noop_max: int) -> int:
    """How many no-op frames start the episode with seed ``seed``: uniform in [1, noop_max] (0 when
    ``noop_max`` is 0), drawn from ``numpy.random.default_rng(seed)``."""
    if noop_max <= 0:
        return 0
    return int(np.random.default_rng(seed).integers(1, noop_max + 1))


def action_component(ale_name: str) -> Component:
    """An ALE action (``UPRIGHTFIRE``) as a named component (``up-right+fire``)."""
    if ale_name == "NOOP":
        return C("noop", "ALE action NOOP: joystick centred, fire button up")
    fire = ale_name.endswith("FIRE")
    direction = ale_name[:-4] if fire else ale_name
    words = [w for w in (_DIRECTIONS.get(direction, ""), "fire" if fire else "") if w]
    text = (f"joystick {_DIRECTIONS[direction]}" if direction else "joystick centred") + \
        (", fire button pressed" if fire else "")
    return C("+".join(words), f"ALE action {ale_name}: {text}")


def _area_weights(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) weights of area averaging: output pixel i averages input span [i, i+1) * n_in/n_out."""
    scale = n_in / n_out
    weights = np.zeros((n_out, n_in))
    for i in range(n_out):
        lo, hi = i * scale, (i + 1) * scale
        for j in range(int(np.floor(lo)), int(np.ceil(hi))):
            weights[i, j] = (min(hi, j + 1) - max(lo, j)) / scale
    return weights


class _Resizer:
    """210x160 -> 84x84 by area averaging (what OpenCV's ``INTER_AREA`` computes when shrinking).

    Rows: 210/84 = 2.5 input rows per output row, so output rows 2k and 2k+1 are (r0 + r1 + r2/2) / 2.5
    and (r2/2 + r3 + r4) / 2.5 of input rows 5k..5k+4. Columns: 160/84 input columns per output column,
    at most three of them, gathered with fixed indices and weights. Rounded to the nearest integer.
    """

    def __init__(self) -> None:
        cols = _area_weights(SCREEN[1], SIZE)
        self._idx = []
        self._w = []
        for k in range(3):
            idx = np.zeros(SIZE, np.intp)
            w = np.zeros(SIZE, np.float32)
            for i in range(SIZE):
                nz = np.flatnonzero(cols[i])
                if k < len(nz):
                    idx[i], w[i] = nz[k], cols[i, nz[k]] / 2.5  # the row average's 1/2.5 folded in
            self._idx.append(idx)
            self._w.append(w)
        self._rows = np.empty((SCREEN[0] // 5, 2, SCREEN[1]), np.float32)

    def __call__(self, frame: np.ndarray, out: np.ndarray) -> None:
        f = frame.reshape(SCREEN[0] // 5, 5, SCREEN[1]).astype(np.float32)
        rows = self._rows
        half = f[:, 2] * 0.5
        np.add(f[:, 0], f[:, 1], out=rows[:, 0])
        rows[:, 0] += half
        np.add(f[:, 3], f[:, 4], out=rows[:, 1])
        rows[:, 1] += half
        r = rows.reshape(SIZE, SCREEN[1])
        (i0, i1, i2), (w0, w1, w2) = self._idx, self._w
        np.rint(r[:, i0] * w0 + r[:, i1] * w1 + r[:, i2] * w2, out=out, casting="unsafe")


def resize_84(frame: np.ndarray) -> np.ndarray:
    """A 210x160 uint8 frame resized to 84x84 by area averaging (the harness's resize)."""
    out = np.empty((SIZE, SIZE), np.uint8)
    _Resizer()(np.ascontiguousarray(frame, dtype=np.uint8), out)
    return out


def _check_family_options(task_id: str, name: str, frame_stack: Any, noop_max: Any, terminal_on_life_loss: Any,
                          full_action_space: Any) -> None:
    """`HarnessOptionError` for an unknown game or a bad value of one of the family's options."""
    if name not in GAMES:
        raise HarnessOptionError(task_id, f"{task_id}: unknown Atari 100k game; known: {', '.join(sorted(GAMES))}")
    for key, value, low in (("frame_stack", frame_stack, 1), ("noop_max", noop_max, 0)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or value < low:
            raise HarnessOptionError(task_id, f"{task_id}: {key} must be an integer >= {low}, got {value!r}")
    for key, flag in (("terminal_on_life_loss", terminal_on_life_loss),
                      ("full_action_space", full_action_space)):
        if not isinstance(flag, (bool, np.bool_)):
            raise HarnessOptionError(task_id, f"{task_id}: {key} must be True or False, got {flag!r}")


class AtariHarness(Harness):
    """Harness over one Atari 100k game (``atari/Pong``, ...); see the module docstring."""

    family = "atari"

    @staticmethod
    def task_names() -> list[str]:
        return sorted(GAMES)

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None,
                 frame_stack: int = 4, noop_max: int = 30, terminal_on_life_loss: bool = False,
                 full_action_space: bool = False) -> None:
        super().__init__(text=text)
        task_id = f"atari/{name}"
        _check_family_options(task_id, name, frame_stack, noop_max, terminal_on_life_loss, full_action_space)
        self._stack_n = int(frame_stack)
        self._noop_max = int(noop_max)
        self._life_loss_ends = bool(terminal_on_life_loss)
        steps = MAX_EPISODE_STEPS if max_episode_steps is None else int(max_episode_steps)

        ale_py = require("ale_py", "atari", "the Atari tasks")
        action_set = self._start_emulator(ale_py, name, full_action_space)
        self._screens = np.zeros((2, *SCREEN), np.uint8)
        self._pooled = np.zeros(SCREEN, np.uint8)
        self._resize = _Resizer()
        self._stack = np.zeros((SIZE, SIZE, self._stack_n), np.uint8)
        self._frame = np.zeros((SIZE, SIZE), np.uint8)
        self._lives_left = 0
        self._game_steps = 0          # agent steps since the game started (across life-loss episodes)
        self._resume = False          # the last episode ended by a life loss with the game still on
        self._explicit_seed = True
        self._max_game_steps = steps
        self._finish_setup(self._task_info(task_id, name, steps, action_set, bool(full_action_space), ale_py))

    def _start_emulator(self, ale_py: Any, name: str, full_action_space: bool) -> list[Any]:
        """Load the game's ROM into a new ALE at its power-on state; returns the action set."""
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        ale = ale_py.ALEInterface()
        ale.setFloat("repeat_action_probability", 0.0)  # no sticky actions
        ale.setInt("frame_skip", 1)                     # the harness repeats actions itself
        ale.setInt("random_seed", 0)                    # unused without sticky actions; fixed anyway
        ale.loadROM(ale_py.roms.get_rom_path(rom_id(name)))
        ale.reset_game()
        self._ale = ale
        self._start = ale.cloneState()  # the power-on state every episode starts from
        # Some emulator state is not in a cloned state: a restore keeps it from before. Straight after
        # loadROM it differs from its value once any frame has run, so without this frame the first
        # episode of a harness played differently from every later one on the same seed (Qbert did;
        # the other 25 games did not).
        ale.act(ale_py.Action.NOOP)
        ale.restoreState(self._start)
        action_set = list(ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet())
        self._actions = action_set
        self._noop = ale_py.Action.NOOP
        self._act = ale.act
        self._grab = ale.getScreenGrayscale
        self._game_over = ale.game_over
        self._lives = ale.lives
        return action_set

    def _task_info(self, task_id: str, name: str, steps: int, action_set: list[Any], full_action_space: bool,
                   ale_py: Any) -> TaskInfo:
        """The task's `TaskInfo`, whose description states the protocol under this harness's options."""
        noop_words = (f"1-{self._noop_max} no-op frames at the start drawn from the episode seed"
                      if self._noop_max else "no no-op frames at the start")
        stack_words = "the last frame" if self._stack_n == 1 else f"the last {self._stack_n} frames, oldest first"
        life_rule = ("losing a life ends the episode (training option; reset() without a seed continues the "
                     "game)" if self._life_loss_ends else "losing a life does not end the episode")
        recorded = {"frame_stack": self._stack_n, "noop_max": self._noop_max,
                    "terminal_on_life_loss": self._life_loss_ends, "full_action_space": bool(full_action_space)}
        return TaskInfo(
            id=task_id,
            domain="atari100k",
            description=(
                f"{GAMES[name]} The reward is the game's score. (Atari 2600 {name} through the Arcade Learning "
                f"Environment, Atari 100k protocol: no sticky actions, each action repeated for {FRAME_SKIP} "
                f"frames, {noop_words}, "
                f"{life_rule}, at most {steps} agent steps per episode. Observations: {stack_words}, "
                f"84x84 grayscale. The benchmark's training budget is {BUDGET_STEPS:,} agent steps "
                f"({BUDGET_STEPS * FRAME_SKIP:,} frames) per game.)"),
            observation_space=spaces.Box(0, 255, shape=(SIZE, SIZE, self._stack_n), dtype=np.uint8),
            action_space=spaces.Discrete(len(action_set)),
            observation_components=(C(
                "frames", f"{stack_words} (channel k is frame k): each the pixel-wise maximum of the ALE "
                          f"grayscale screens of the last two of the step's {FRAME_SKIP} emulator frames, "
                          f"resized from 210x160 to 84x84 by area averaging; rows top to bottom, values 0-255; "
                          f"frames before the episode's first are zeros"),),
            action_components=tuple(action_component(a.name) for a in action_set),
            reward_range=(-np.inf, np.inf),
            max_episode_steps=steps,
            package="ale-py",
            package_version=version_of("ale-py") or str(getattr(ale_py, "__version__", "")),
            has_text=False,
            text_note="Atari observations are rendered screens with no symbolic form to describe faithfully "
                      "in text (the ALE exposes only pixels and the console's 128 bytes of RAM)",
            native_id=f"ALE/{name}-v5",
            options=recorded,
        )

    # ----------------------------------------------------------------- episodes
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._explicit_seed = seed is not None
        return super().reset(seed=seed, options=options)

    def noop_count(self, seed: int) -> int:
        """How many no-op frames start the episode with ``seed`` (see `noop_count`)."""
        return noop_count(seed, self._noop_max)

    def _native_reset(self, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        if self._resume and not self._explicit_seed:
            # terminal_on_life_loss: the previous episode was one life of a game that goes on.
            self._resume = False
            return self._stack.copy(), {"lives": self._lives_left, "continued": True}
        self._resume = False
        ale = self._ale
        ale.restoreState(self._start)
        noops = self.noop_count(seed)
        for _ in range(noops):
            ale.act(self._noop)
            if ale.game_over():
                raise RuntimeError(f"the game ended during the {noops} no-op frames of the start")
        self._grab(self._screens[1])
        self._stack[:] = 0
        self._resize(self._screens[1], self._frame)
        self._stack[:, :, -1] = self._frame
        self._lives_left = self._lives()
        self._game_steps = 0
        return self._stack.copy(), {"lives": self._lives_left, "noops": noops}

    def _native_step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        act, grab, game_over, screens = self._act, self._grab, self._game_over, self._screens
        native = self._actions[action]
        reward = 0.0
        life_lost = over = False
        lives = self._lives_left
        for t in range(FRAME_SKIP):
            reward += act(native)
            over = game_over()
            if self._life_loss_ends:
                now = self._lives()
                life_lost = 0 < now < lives
            if over or life_lost:  # the step ends early: its observation is this last frame
                grab(screens[1])
                if t < FRAME_SKIP - 1:
                    screens[0] = screens[1]
                break
            if t == FRAME_SKIP - 2:
                grab(screens[0])
            elif t == FRAME_SKIP - 1:
                grab(screens[1])
        np.maximum(screens[0], screens[1], out=self._pooled)
        self._resize(self._pooled, self._frame)
        stack = self._stack
        if self._stack_n > 1:
            stack[:, :, :-1] = stack[:, :, 1:]
        stack[:, :, -1] = self._frame
        self._lives_left = self._lives()
        self._game_steps += 1
        terminated = over or life_lost
        truncated = not terminated and self._game_steps >= self._max_game_steps
        self._resume = life_lost and not over
        info: dict[str, Any] = {"lives": self._lives_left}
        if terminated:
            info["game_over"] = over
        return stack.copy(), reward, terminated, truncated, info
