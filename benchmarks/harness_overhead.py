"""Harness overhead: steps per second through ``polar_bench.make`` against the native API.

For one task of each family, the same pre-generated action sequence is stepped through the harness
and through the native API a user would otherwise call, resetting whenever an episode ends:

    gym      gym/CartPole-v1     gymnasium.make("CartPole-v1")
    dmc      dmc/cheetah-run     dm_control.suite.load("cheetah", "run")
    procgen  procgen/coinrun     gym.make("procgen:procgen-coinrun-v0", start_level=0, num_levels=0,
                                          distribution_mode="easy")
    nethack  nethack/Score       gymnasium.make("NetHackScore-v0")
    babyai   babyai/GoToRedBall  gymnasium.make("BabyAI-GoToRedBall-v0")
    atari    atari/Pong          gymnasium.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0)
                                 in gymnasium's AtariPreprocessing (4-frame skip with max-pooling,
                                 84x84 grayscale, 30 no-ops) and FrameStackObservation(4): the same
                                 protocol, when OpenCV (which AtariPreprocessing needs) is installed;
                                 without it, gymnasium.make("ALE/Pong-v5", frameskip=4,
                                 repeat_action_probability=0, obs_type="grayscale"), which skips
                                 frames but neither max-pools, resizes nor stacks (the table says which)
    minihack minihack/MazeWalk-9x9  gymnasium.make("MiniHack-MazeWalk-9x9-v0")
    crafter  crafter/Reward      crafter.Env() (its own 4-tuple API; seeded per episode like the harness)
    textworld textworld/Custom-Small  textworld.start(game), stepping the admissible command the
                                 action indexes (games pre-generated for seeds 0-99, outside the timing)
    mujoco   mujoco/Hopper-v5    gymnasium.make("Hopper-v5")
    bullet   bullet/HalfCheetah  pybullet_envs' HalfCheetahBulletEnv() (its own 4-tuple API, one physics
                                 client for all episodes, seeded per episode with env.seed)

Continuous actions reach the harness in [-1, 1] (float32) and the native env already rescaled to its
bounds, as an agent of each would send them. Procgen's native env restarts levels by itself, so
only the harness is reset there. ale-py's env reloads the ROM (65 ms) whenever ``reset`` gets a seed,
so the native Atari env is seeded at its first reset only (the harness never reloads).

Method: the two variants step alternately, one step each (the order swapping every step), each
step (with the reset that follows an episode's end) timed with ``time.perf_counter``. Interleaving
at the step level makes both variants share the machine's state, which matters on a busy shared
machine. Steps are grouped into chunks of about ``--chunk-seconds`` of native time; each chunk gives
one ratio (native time / harness time = harness steps per second / native steps per second) and the
table shows the median over chunks, which preemption by other processes barely moves. The target is
a ratio of at least 0.90 (harness overhead at most about 10 %).

Usage: python benchmarks/harness_overhead.py [--families gym,dmc,babyai] [--seconds 2]
       [--chunk-seconds 0.005] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

TARGET = 0.90


class _Sink(io.TextIOBase):
    """A text stream that drops what is written (BabyAI's level generator prints while it retries)."""

    def write(self, text: str) -> int:
        return len(text)


SINK = _Sink()


# ----------------------------------------------------------------------------- steppers
# Each variant is a pair (reset(seed), step(action) -> episode over?). Harness and native pay the
# same closure call per step, so the comparison measures what happens inside.

def _harness_stepper(h):
    h_step, h_reset = h.step, h.reset

    def step(a):
        _, _, term, trunc, _ = h_step(a)
        return term or trunc

    return (lambda seed: h_reset(seed=seed)), step


def _gymnasium_stepper(env):
    e_step, e_reset = env.step, env.reset

    def step(a):
        _, _, term, trunc, _ = e_step(a)
        return term or trunc

    return (lambda seed: e_reset(seed=seed)), step


def _dm_control_stepper(env):
    # dm_control seeds a task once, at load time. So that both variants simulate the same
    # episodes (physics costs depend on the state), the native env gets the harness's per-episode
    # random state before each reset (one RandomState per 1000 steps: negligible).
    import numpy as np

    e_step, e_reset, task = env.step, env.reset, env.task

    def reset(seed):
        task._random = np.random.RandomState(seed)  # noqa: SLF001 - dm_control seeds only at load time
        return e_reset()

    def step(a):
        return e_step(a).last()

    return reset, step


def _procgen_stepper(env):
    # Procgen restarts a level by itself inside the step that ends an episode (a reset() then is
    # ignored with a warning printed from C++), so the native side never needs a reset.
    e_step = env.step

    def step(a):
        e_step(a)
        return False

    return (lambda seed: env.reset()), step


def _seeded_once_stepper(env):
    # ale-py's AtariEnv reloads the ROM on every seeded reset; seed the first episode only.
    e_step, e_reset = env.step, env.reset
    seeded = [False]

    def reset(seed):
        if seeded[0]:
            return e_reset()
        seeded[0] = True
        return e_reset(seed=seed)

    def step(a):
        _, _, term, trunc, _ = e_step(a)
        return term or trunc

    return reset, step


def _crafter_stepper(env):
    # Crafter's own API (old Gym, 4-tuple); seeded per episode the way the harness seeds it.
    e_step = env.step

    def reset(seed):
        env._seed, env._episode = seed, 0  # noqa: SLF001 - crafter's reset() takes no seed
        return env.reset()

    def step(a):
        return e_step(a)[2]

    return reset, step


def _bullet_stepper(env):
    # pybullet_envs' own API (old Gym, 4-tuple), its physics client reused across episodes, as a user of
    # pybullet_envs runs it; the harness builds a client per episode (docs/families/bullet.md).
    from polar_bench.harness.bullet import quiet_stdout

    e_step = env.step

    def reset(seed):
        env.seed(seed)
        with quiet_stdout():
            return env.reset()

    def step(a):
        return e_step(a)[2]

    return reset, step


def _textworld_stepper(games, limit: int = 100):
    # TextWorld's own API: a user who wants discrete actions picks from the admissible commands, as
    # the harness does; episode seed s plays the game generated from s (pre-generated, as the harness
    # finds them in its cache), and an episode ends after ``limit`` commands (the harness's default).
    import textworld

    infos = textworld.EnvInfos(admissible_commands=True, objective=True, max_score=True, won=True, lost=True)
    state: dict[str, Any] = {"env": None, "commands": [], "steps": 0}

    def reset(seed):
        if state["env"] is not None:
            state["env"].close()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state["env"] = textworld.start(str(games[seed]), request_infos=infos)
        game_state = state["env"].reset()
        state["commands"] = sorted(game_state["admissible_commands"])
        state["steps"] = 0

    def step(a):
        game_state, _, done = state["env"].step(state["commands"][a % len(state["commands"])])
        state["commands"] = sorted(game_state["admissible_commands"] or ["look"])
        state["steps"] += 1
        return done or state["steps"] >= limit

    return reset, step


class _Closer:
    def __init__(self, close):
        self.close = close


# ----------------------------------------------------------------------------- native envs

def _gymnasium(env_id: str, module: str | None = None):
    def build():
        import importlib

        import gymnasium

        if module:
            importlib.import_module(module)  # registers the ids
        return gymnasium.make(env_id), _gymnasium_stepper
    return build


def _dm_control(domain: str, task: str):
    def build():
        from dm_control import suite

        return suite.load(domain, task, task_kwargs={"random": 0}), _dm_control_stepper
    return build


def _procgen(game: str):
    def build():
        import gym
        import gym.logger

        gym.logger.set_level(gym.logger.ERROR)  # the old-API warnings of gym's checker
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = gym.make(f"procgen:procgen-{game}-v0", start_level=0, num_levels=0,
                           distribution_mode="easy")
        return env, _procgen_stepper
    return build


def _atari(game: str):
    def build():
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        try:
            import cv2  # noqa: F401 - AtariPreprocessing's resize
        except ImportError:
            env = gymnasium.make(f"ALE/{game}-v5", frameskip=4, repeat_action_probability=0.0, obs_type="grayscale")
            return env, _seeded_once_stepper
        from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

        env = gymnasium.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
        env = FrameStackObservation(AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                                       grayscale_obs=True), 4)
        return env, _seeded_once_stepper
    return build


def _atari_api() -> str:
    try:
        import cv2  # noqa: F401
    except ImportError:
        return 'gymnasium.make("ALE/Pong-v5", frameskip=4, obs_type="grayscale") (no OpenCV: no max-pool/resize/stack)'
    return 'FrameStack(AtariPreprocessing(gymnasium.make("ALE/Pong-v5", frameskip=1)), 4)'
def _crafter():
    def build():
        import crafter

        return crafter.Env(length=10_000, seed=0), _crafter_stepper
    return build


def _bullet(cls: str):
    def build():
        from polar_bench.harness.bullet import locomotion_module, quiet_stdout

        with quiet_stdout((1, 2)):
            env = getattr(locomotion_module(), cls)()
        return _Closer(env.close), lambda _: _bullet_stepper(env)
    return build


def _textworld(task: str, games: int = 100):
    def build():
        from polar_bench.harness.textworld import game_file

        paths = [game_file(task, seed) for seed in range(games)]  # generated once, then cached
        return _Closer(lambda: None), lambda _: _textworld_stepper(paths)
    return build


@dataclass
class Case:
    family: str
    task_id: str
    native: Callable[[], tuple[Any, Callable]]
    native_api: str


CASES = [
    Case("gym", "gym/CartPole-v1", _gymnasium("CartPole-v1"), 'gymnasium.make("CartPole-v1")'),
    Case("dmc", "dmc/cheetah-run", _dm_control("cheetah", "run"), 'dm_control.suite.load("cheetah", "run")'),
    Case("procgen", "procgen/coinrun", _procgen("coinrun"), 'gym.make("procgen:procgen-coinrun-v0")'),
    Case("nethack", "nethack/Score", _gymnasium("NetHackScore-v0", "nle"), 'gymnasium.make("NetHackScore-v0")'),
    Case("babyai", "babyai/GoToRedBall", _gymnasium("BabyAI-GoToRedBall-v0", "minigrid"),
         'gymnasium.make("BabyAI-GoToRedBall-v0")'),
    Case("atari", "atari/Pong", _atari("Pong"), _atari_api()),
    Case("minihack", "minihack/MazeWalk-9x9", _gymnasium("MiniHack-MazeWalk-9x9-v0", "minihack"),
         'gymnasium.make("MiniHack-MazeWalk-9x9-v0")'),
    Case("crafter", "crafter/Reward", _crafter(), "crafter.Env()"),
    Case("textworld", "textworld/Custom-Small", _textworld("Custom-Small"),
         "textworld.start(game).step(admissible command)"),
    Case("mujoco", "mujoco/Hopper-v5", _gymnasium("Hopper-v5"), 'gymnasium.make("Hopper-v5")'),
    Case("bullet", "bullet/HalfCheetah", _bullet("HalfCheetahBulletEnv"), "HalfCheetahBulletEnv()"),
]


@dataclass
class Row:
    family: str
    task_id: str
    native_api: str
    steps: int = 0
    native_sps: float = 0.0
    harness_sps: float = 0.0
    ratio: float = 0.0
    overall_ratio: float = 0.0
    ratios: list = field(default_factory=list)
    error: str = ""

    @property
    def meets(self) -> bool:
        return not self.error and self.ratio >= TARGET


def _actions(harness, n: int, seed: int = 0) -> tuple[list, list]:
    """The same action sequence for the harness ([-1, 1], float32) and the native env (its units)."""
    rng = np.random.default_rng(seed)
    space = harness.task_info.action_space
    if isinstance(space, spaces.Discrete):
        acts = [int(space.start + rng.integers(space.n)) for _ in range(n)]
        return acts, list(acts)
    ours = [rng.uniform(-1.0, 1.0, size=space.shape).astype(np.float32) for _ in range(n)]
    # The native env gets exactly what the harness would send it (rescaled, in its dtype),
    # computed here, outside the timed loop.
    native = [harness._convert_action(a) for a in ours]  # noqa: SLF001 - the exact native action, untimed
    return ours, native


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


def _paired(ours, theirs, harness, native, chunk: int):
    """Step both variants alternately, one step each (the order swapping every step), and return
    the (native seconds, harness seconds) of every chunk of ``chunk`` steps."""
    (h_reset, h_step), (n_reset, n_step) = harness, native
    clock = time.perf_counter
    h_seed = n_seed = 0
    h_reset(h_seed)
    n_reset(n_seed)
    out = []
    t_h = t_n = 0.0
    for i in range(len(ours)):
        if i & 1:
            t0 = clock()
            if h_step(ours[i]):
                h_seed += 1
                h_reset(h_seed)
            t1 = clock()
            if n_step(theirs[i]):
                n_seed += 1
                n_reset(n_seed)
            t2 = clock()
            t_h += t1 - t0
            t_n += t2 - t1
        else:
            t0 = clock()
            if n_step(theirs[i]):
                n_seed += 1
                n_reset(n_seed)
            t1 = clock()
            if h_step(ours[i]):
                h_seed += 1
                h_reset(h_seed)
            t2 = clock()
            t_n += t1 - t0
            t_h += t2 - t1
        if (i + 1) % chunk == 0:
            out.append((t_n, t_h))
            t_h = t_n = 0.0
    return out


def measure(case: Case, seconds: float, chunk_seconds: float) -> Row:
    import polar_bench

    row = Row(case.family, case.task_id, case.native_api)
    try:
        harness = polar_bench.make(case.task_id)
    except Exception as exc:  # noqa: BLE001 - any failure is reported in the table
        row.error = f"not available: {_one_line(exc)}"
        return row
    try:
        native, stepper = case.native()
    except Exception as exc:  # noqa: BLE001
        harness.close()
        row.error = f"not available: native env: {_one_line(exc)}"
        return row
    gc_was_enabled = gc.isenabled()
    try:
        h, nat = _harness_stepper(harness), stepper(native)
        # Level generators that print (BabyAI's rejection sampling) write to a sink in both
        # variants, so that neither pays for terminal output and the table stays readable.
        with contextlib.redirect_stdout(SINK):
            probe_ours, probe_native = _actions(harness, 300, seed=99)
            _paired(probe_ours, probe_native, h, nat, 300)  # warm-up
            t_n, _ = _paired(probe_ours, probe_native, h, nat, 300)[0]
            per_step = t_n / 300
            n = int(min(100_000, max(2_000, seconds / max(per_step, 1e-7))))
            chunk = int(max(10, chunk_seconds / max(per_step, 1e-7)))
            ours, theirs = _actions(harness, n, seed=0)
            gc.collect()
            gc.disable()
            chunks = _paired(ours, theirs, h, nat, chunk)
    except Exception as exc:  # noqa: BLE001
        row.error = f"failed: {_one_line(exc)}"
        return row
    finally:
        if gc_was_enabled:
            gc.enable()
        harness.close()
        try:
            native.close()
        except Exception:  # noqa: BLE001
            pass
    row.steps = len(chunks) * chunk
    row.ratios = sorted(tn / th for tn, th in chunks)
    row.ratio = statistics.median(row.ratios)
    total_n = sum(tn for tn, _ in chunks)
    total_h = sum(th for _, th in chunks)
    row.overall_ratio = total_n / total_h
    row.native_sps = row.steps / total_n
    row.harness_sps = row.steps / total_h
    return row


def print_table(rows: list[Row], out=sys.stdout) -> None:
    header = (f"{'family':<8} {'task':<20} {'native steps/s':>14} {'harness steps/s':>15} "
              f"{'ratio':>6} {'IQR':>11} {'overall':>7}  target >= {TARGET:.2f}")
    print(header, file=out)
    print("-" * len(header), file=out)
    for r in rows:
        if r.error:
            print(f"{r.family:<8} {r.task_id:<20} {r.error}", file=out)
            continue
        q = r.ratios
        iqr = f"{q[len(q) // 4]:.2f}-{q[(3 * len(q)) // 4]:.2f}"
        print(f"{r.family:<8} {r.task_id:<20} {r.native_sps:>14,.0f} {r.harness_sps:>15,.0f} "
              f"{r.ratio:>6.3f} {iqr:>11} {r.overall_ratio:>7.3f}  {'yes' if r.meets else 'NO'}", file=out)
    print(f"\nratio = harness steps/s / native steps/s: the median over chunks of interleaved steps "
          f"(IQR: its interquartile range; overall: total native time / total harness time, which "
          f"preemption by other processes can skew). Target: ratio >= {TARGET:.2f}.", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(c.family for c in CASES),
                        help="comma-separated families to measure (default: all)")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="approximate native stepping time per family, in seconds (default 2)")
    parser.add_argument("--chunk-seconds", type=float, default=0.005,
                        help="approximate native time per chunk whose ratio is one sample (default 0.005)")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    wanted = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(wanted) - {c.family for c in CASES})
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {[c.family for c in CASES]}")
    rows = []
    for case in CASES:
        if case.family in wanted:
            print(f"measuring {case.task_id} ...", file=sys.stderr, flush=True)
            rows.append(measure(case, args.seconds, args.chunk_seconds))
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{**r.__dict__, "meets_target": r.meets} for r in rows], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
