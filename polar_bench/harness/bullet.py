"""`bullet/<name>`: PyBullet's locomotion tasks for the morphologies Gymnasium's MuJoCo tasks also have.

``bullet/HalfCheetah``, ``Hopper``, ``Walker2d``, ``Ant`` and ``Humanoid`` (pybullet_envs'
``*BulletEnv-v0``), the counterparts of ``mujoco/<name>-v5``. The harness loads pybullet_envs'
locomotion modules without the package's old-gym ``__init__``, silences PyBullet's C output, and
builds a new physics client at every ``reset(seed=s)``, so that the seed fully determines the
episode. See docs/families/bullet.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
from gymnasium import spaces

from .._optional import require, version_of
from ..task_info import Component, TaskInfo
from .base import Harness

__all__ = ["BulletHarness", "TASKS", "locomotion_module", "quiet_stdout"]

C = Component
_LIBC = ctypes.CDLL(None)

#: name -> (pybullet_envs class, its gym id, the MuJoCo counterpart, the goal in words).
TASKS: dict[str, tuple[str, str, str, str]] = {
    "HalfCheetah": ("HalfCheetahBulletEnv", "HalfCheetahBulletEnv-v0", "mujoco/HalfCheetah-v5",
                    "Make a planar two-legged cheetah run forward (+x) as fast as possible."),
    "Hopper": ("HopperBulletEnv", "HopperBulletEnv-v0", "mujoco/Hopper-v5",
               "Make a planar one-legged hopper hop forward without falling."),
    "Walker2d": ("Walker2DBulletEnv", "Walker2DBulletEnv-v0", "mujoco/Walker2d-v5",
                 "Make a planar two-legged walker walk forward without falling."),
    "Ant": ("AntBulletEnv", "AntBulletEnv-v0", "mujoco/Ant-v5",
            "Make a four-legged ant walk forward (+x) in 3-D."),
    "Humanoid": ("HumanoidBulletEnv", "HumanoidBulletEnv-v0", "mujoco/Humanoid-v5",
                 "Make a 3-D humanoid walk forward without falling."),
}

REWARD_WORDS = ("Reward per step (pybullet_envs' WalkerBase): the progress toward a target 1 km ahead "
                "(the change of the potential -distance / dt), plus an alive bonus (+1 while upright, "
                "-1 when the body falls, which ends the episode; the cheetah's episode never ends early, "
                "and its bonus is -1 while it lies tipped over or touches the ground with a thigh or "
                "shin), minus an "
                "electricity cost (torque x joint speed and squared torque), minus 0.1 per joint at its "
                "limit, minus a cost for feet colliding with each other.")

_STATE = (C("z_offset", "torso height above its initial height, m"),
          C("sin_angle_to_target", "sine of the heading angle to the target (+x)"),
          C("cos_angle_to_target", "cosine of the heading angle to the target"),
          C("vx", "0.3 x torso velocity along x in the torso's yaw frame, m/s"),
          C("vy", "0.3 x torso velocity along y in the torso's yaw frame, m/s"),
          C("vz", "0.3 x torso vertical velocity, m/s"),
          C("roll", "torso roll, rad"),
          C("pitch", "torso pitch, rad"))


@contextlib.contextmanager
def quiet_stdout(fds: tuple[int, ...] = (1,)) -> Iterator[None]:
    """Send file descriptors ``fds`` (1: stdout) to /dev/null, C code's prints included, restoring them
    afterwards."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(fd) for fd in fds]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            os.dup2(devnull, fd)
        yield
    finally:
        _LIBC.fflush(None)  # C's buffered prints go to /dev/null too, not to the restored descriptors
        for fd, copy in zip(fds, saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


def locomotion_module() -> types.ModuleType:
    """pybullet_envs.gym_locomotion_envs, imported without pybullet_envs/__init__.py (module docstring)."""
    if "pybullet_envs.gym_locomotion_envs" in sys.modules:
        return sys.modules["pybullet_envs.gym_locomotion_envs"]
    spec = importlib.util.find_spec("pybullet_envs")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("pybullet_envs is not installed (it comes with pybullet)")
    if "pybullet_envs" not in sys.modules:
        package = types.ModuleType("pybullet_envs")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["pybullet_envs"] = package
    import warnings

    with warnings.catch_warnings(), quiet_stdout():
        warnings.simplefilter("ignore")  # gym's and pkg_resources' deprecation notices
        import pybullet_envs.gym_locomotion_envs as module  # noqa: PLC0415
    return module


class BulletHarness(Harness):
    """Harness over PyBullet's locomotion tasks (``bullet/HalfCheetah``, ...)."""

    family = "bullet"

    @staticmethod
    def task_names() -> list[str]:
        return sorted(TASKS)

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None) -> None:
        super().__init__(text=text)
        task_id = f"bullet/{name}"
        if name not in TASKS:
            raise ValueError(f"{task_id}: unknown PyBullet locomotion task; known: {', '.join(sorted(TASKS))}")
        with quiet_stdout((1, 2)):  # pybullet's build-time line and gym's deprecation notice, at import
            require("pybullet", "bullet", "the PyBullet tasks", quiet=True)
            self._cls = getattr(locomotion_module(), TASKS[name][0])
        self._env: Any = None
        steps = 1000 if max_episode_steps is None else int(max_episode_steps)
        probe = self._build(0)
        try:
            robot = probe.robot
            joints = [j.joint_name for j in robot.ordered_joints]
            feet = list(robot.foot_list)
            limits = [(float(j.lowerLimit), float(j.upperLimit)) for j in robot.ordered_joints]
            # Humanoid scales each joint by its own motor power; the other robots by the robot's power
            # times the joint's gear (power_coef), as their apply_action does.
            if hasattr(robot, "motors"):  # Humanoid: its action order is its motor list's
                actuated = [m.joint_name for m in robot.motors]
                torques = [float(robot.power) * float(p) for p in robot.motor_power]
            else:
                actuated = list(joints)
                torques = [float(robot.power) * float(j.power_coef) for j in robot.ordered_joints]
            native_obs, native_act = probe.observation_space, probe.action_space
        finally:
            self._close_env(probe)
        observation_components = [*_STATE]
        for joint, (low, high) in zip(joints, limits, strict=True):
            observation_components.append(C(f"{joint}_position", f"joint angle of {joint} mapped from its "
                                            f"limits [{low:.3g}, {high:.3g}] rad to [-1, 1]"))
            observation_components.append(C(f"{joint}_speed", f"0.1 x angular speed of {joint}, rad/s"))
        observation_components += [C(f"{foot}_contact", f"1 when {foot} touches the ground, else 0") for foot in feet]
        action_components = tuple(C(joint, f"torque of {joint}, as a fraction in [-1, 1] of its maximum "
                                           f"{torque:g} (PyBullet torque units)")
                                  for joint, torque in zip(actuated, torques, strict=True))
        goal, counterpart = TASKS[name][3], TASKS[name][2]
        info = TaskInfo(
            id=task_id,
            domain="bullet",
            description=(f"{goal} (PyBullet {TASKS[name][1]}, the counterpart of {counterpart}; "
                         f"{len(joints)} torque-controlled joints; at most {steps} steps.) {REWARD_WORDS}"),
            observation_space=spaces.Box(-np.inf, np.inf, shape=native_obs.shape, dtype=np.float32),
            action_space=spaces.Box(-1.0, 1.0, shape=native_act.shape, dtype=np.float32),
            observation_components=tuple(observation_components),
            action_components=action_components,
            max_episode_steps=steps,
            package="pybullet",
            package_version=version_of("pybullet"),
            has_text=False,
            text_note="PyBullet locomotion observations are joint positions, speeds and foot contacts",
            native_id=TASKS[name][1],
            options={},
        )
        if len(observation_components) != native_obs.shape[0]:
            raise RuntimeError(f"{task_id}: {len(observation_components)} named observation components for "
                               f"{native_obs.shape[0]} entries")
        self._finish_setup(info, spaces.Box(-1.0, 1.0, shape=native_act.shape, dtype=np.float32))

    def _build(self, seed: int) -> Any:
        """A new env with its own physics client, reset with the robot's noise drawn from ``seed``."""
        env = self._cls()
        env.np_random = np.random.Generator(np.random.PCG64(seed))
        env.robot.np_random = env.np_random
        with quiet_stdout():
            obs = env.reset()
        env._polar_first_obs = obs  # noqa: SLF001 - kept for _native_reset
        return env

    @staticmethod
    def _close_env(env: Any) -> None:
        if env is not None and getattr(env, "ownsPhysicsClient", False) and env.physicsClientId >= 0:
            env._p.disconnect()  # noqa: SLF001
            env.physicsClientId = -1

    # ----------------------------------------------------------------- hooks
    def _native_reset(self, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        self._close_env(self._env)
        self._env = self._build(seed)
        return np.asarray(self._env._polar_first_obs, dtype=np.float32), {}  # noqa: SLF001

    def _native_step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, done, _ = self._env.step(action)
        # pybullet_envs ends an episode only when the body falls (never for the cheetah): a termination.
        return np.asarray(obs, dtype=np.float32), float(reward), bool(done), False, {}

    def _native_close(self) -> None:
        self._close_env(self._env)
        self._env = None
