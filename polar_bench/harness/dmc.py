"""`dmc/<domain>-<task>`: the DeepMind Control Suite (``dm_control.suite``) from state.

Every suite task but LQR's. The state observation dict is flattened into one named float32 vector
and actions are ``Box(-1, 1)`` over the actuators. The harness steps the task and physics directly
(no native auto-reset), and ``reset(seed=s)`` replaces ``task.random`` with ``RandomState(s)``,
which gives the episode of a fresh ``suite.load`` with that seed. See docs/families/dmc.md.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from .._optional import require, version_of
from ..task_info import Component, TaskInfo
from .base import Harness

__all__ = ["DMCHarness"]

# Domains left out of the family, with the reason (shown when one of their ids is asked for).
_EXCLUDED_DOMAINS = {
    "lqr": "its actuators are unbounded, so no [-1, 1] action mapping exists; its reward is unbounded "
           "below, it has no time limit and its model is drawn from the seed at load time",
}

_GOALS = {
    "cartpole-swingup": (
        "Swing up a pole hinged on a cart that slides along a rail, starting with the pole hanging "
        "down, and keep it balanced upright with the cart near the centre. The reward per step, in "
        "[0, 1], is highest with the pole upright, the cart centred, small control and a slow pole."),
    "cheetah-run": (
        "Make a planar two-legged 'cheetah' (a torso with a back and a front leg, six actuated "
        "joints) run forward as fast as possible. The reward per step grows linearly with forward "
        "speed and reaches 1 at 10 m/s."),
    "walker-walk": (
        "Make a planar bipedal walker (a torso with two three-joint legs) stand up and walk forward. "
        "The reward per step, in [0, 1], rewards a torso above 1.2 m and upright, times a term that "
        "reaches its best at a forward speed of at least 1 m/s."),
    "reacher-easy": (
        "Move a planar two-link arm (shoulder and wrist joints) so that its fingertip reaches a "
        "target placed at random in the plane. Reward 1 for every step the fingertip is inside the "
        "(large, in the easy task) target, else 0."),
    "finger-spin": (
        "Use a planar two-joint finger to flick a free-spinning body (the spinner, on a hinge) so "
        "that it keeps spinning fast. Reward 1 for every step the spinner's angular velocity "
        "exceeds 15 rad/s in the required direction, else 0."),
    "ball_in_cup-catch": (
        "Move a planar cup (actuated along x and z) to swing up a ball tied to it by a string and "
        "catch it in the cup. Reward 1 for every step the ball is inside the cup, else 0."),
}

_DOMAIN_GOALS = {
    "acrobot": "swing up and balance a two-link pendulum actuated only at the elbow",
    "ball_in_cup": "swing a ball on a string into a cup",
    "cartpole": "swing up or balance poles on a cart sliding along a rail",
    "cheetah": "make a planar two-legged runner move forward",
    "dog": "control a 38-actuator dog model",
    "finger": "manipulate a hinged spinner with a planar two-joint finger",
    "fish": "control a swimming fish",
    "hopper": "make a planar one-legged hopper stand or hop forward",
    "humanoid": "control a 21-joint humanoid",
    "humanoid_CMU": "control the 56-joint CMU humanoid",
    "manipulator": "grasp an object with a planar arm and bring it to a target",
    "pendulum": "swing up and balance a pendulum with limited torque",
    "point_mass": "move a point mass to the centre of a plane",
    "quadruped": "make a quadruped walk, run, escape rough terrain or fetch a ball",
    "reacher": "bring the fingertip of a two-link arm to a target",
    "stacker": "stack boxes with a planar arm",
    "swimmer": "make a multi-link swimmer reach a target",
    "walker": "make a planar biped stand, walk or run",
}

# What each observation key measures (description, unit); domain-specific entries override.
_KEY_MEANING: dict[str, tuple[str, str]] = {
    "position": ("joint positions", ""),
    "velocity": ("joint velocities (generalised velocities)", ""),
    "orientations": ("entries of the bodies' rotation matrices (cosines and sines of their angles)", ""),
    "orientation": ("cosine and sine of the pole angle from upright", ""),
    "height": ("height of the torso above the ground", "m"),
    "head_height": ("height of the head above the ground", "m"),
    "touch": ("log(1 + force) of the touch sensors", ""),
    "to_target": ("vector from the end effector to the target in the plane", "m"),
    "target_position": ("position of the target relative to the agent", "m"),
    "target": ("vector from the mouth to the target in the fish's frame", "m"),
    "dist_to_target": ("distance from the fingertip to the target surface", "m"),
    "joint_angles": ("joint angles", "rad"),
    "joint_velocites": ("joint velocities", "rad/s"),
    "joints": ("joint angles", "rad"),
    "body_velocities": ("linear and angular velocities of the bodies in their own frames", ""),
    "upright": ("projection of the body's z axis on the world z axis (1 is upright)", ""),
    "torso_upright": ("projection of the torso's z axis on the world z axis (1 is upright)", ""),
    "torso_vertical": ("the world z axis in the torso's frame", ""),
    "torso_pelvis_height": ("heights of the torso and the pelvis", "m"),
    "z_projection": ("the world z axis in the frames of the torso, pelvis and head", ""),
    "torso_com_velocity": ("velocity of the centre of mass in the torso's frame", "m/s"),
    "com_velocity": ("velocity of the centre of mass", "m/s"),
    "extremities": ("positions of hands and feet in the torso's frame", "m"),
    "inertial_sensors": ("accelerometer, velocimeter and gyroscope readings", ""),
    "foot_forces": ("contact forces on the feet", "N"),
    "touch_sensors": ("touch sensor readings", "N"),
    "actuator_state": ("internal activation state of the actuators", ""),
    "ball_state": ("position and velocity of the ball in the agent's frame", ""),
    "egocentric_state": ("joint angles, joint velocities and actuator activations", ""),
    "torso_velocity": ("velocity of the torso in its own frame", "m/s"),
    "imu": ("accelerometer and gyroscope readings of the torso", ""),
    "force_torque": ("forces and torques at the hip and ankle sensors", ""),
    "origin": ("position of the world origin in the torso's frame", "m"),
    "rangefinder": ("log-distance readings of the rangefinders (1 when nothing is in range)", ""),
    "arm_pos": ("cosine and sine of each arm joint angle", ""),
    "arm_vel": ("arm joint velocities", "rad/s"),
    "hand_pos": ("x, z, cos and sin of the hand's pose", ""),
    "object_pos": ("x, z, cos and sin of the object's pose", ""),
    "object_vel": ("velocities of the object's joints", ""),
    "target_pos": ("pose of the target", ""),
    "box_pos": ("x, z, cos and sin of each box's pose", ""),
    "box_vel": ("velocities of the boxes' joints", ""),
    "reward_factors": ("the factors whose product is the reward", ""),
}


def _joint_unit(physics: Any, joint: str, derivative: bool) -> str:
    jtype = int(physics.model.jnt_type[physics.model.name2id(joint, "joint")])
    base = {2: "m", 3: "rad"}.get(jtype, "")  # mjJNT_SLIDE = 2, mjJNT_HINGE = 3
    return f"{base}/s" if base and derivative else base


def _one_dof_joints(physics: Any) -> list[str] | None:
    """The joint names in qpos order when every joint has one degree of freedom, else None."""
    model = physics.model
    if model.nq != model.njnt or model.nv != model.njnt:
        return None
    if not all(int(t) in (2, 3) for t in model.jnt_type):
        return None
    return [model.id2name(i, "joint") for i in range(model.njnt)]


def _entry_labels(domain: str, key: str, size: int, physics: Any) -> list[tuple[str, str, str]] | None:
    """Per-entry (short label, description, unit) of one observation key, where we know them."""
    joints = _one_dof_joints(physics)
    model = physics.model
    if domain == "cartpole" and key == "position":
        out = [("cart_x", "position of the cart along the rail", "m")]
        for i in range((size - 1) // 2):
            pole = model.id2name(2 + i, "body")
            out += [(f"{pole}_cos", f"cosine of {pole}'s angle from upright", ""),
                    (f"{pole}_sin", f"sine of {pole}'s angle from upright", "")]
        return out if len(out) == size else None
    if domain in ("cheetah", "hopper") and key == "position" and joints and size == len(joints) - 1:
        return [(j, f"position of joint {j} (the horizontal root position is left out)",
                 _joint_unit(physics, j, False)) for j in joints[1:]]
    if domain == "finger" and key == "position" and size == 4:
        return [("proximal", "angle of the proximal finger joint", "rad"),
                ("distal", "angle of the distal finger joint", "rad"),
                ("tip_x", "x of the fingertip relative to the spinner's hinge", "m"),
                ("tip_z", "z of the fingertip relative to the spinner's hinge", "m")]
    if domain == "finger" and key == "velocity" and size == 3:
        return [(j, f"angular velocity of the {j} joint", "rad/s") for j in ("proximal", "distal", "hinge")]
    if domain == "finger" and key == "touch" and size == 2:
        return [(s, f"log(1 + force) of the {s} touch sensor of the fingertip", "") for s in ("top", "bottom")]
    if domain == "finger" and key == "target_position" and size == 2:
        return [("x", "x of the target relative to the spinner's hinge", "m"),
                ("z", "z of the target relative to the spinner's hinge", "m")]
    if domain == "hopper" and key == "touch" and size == 2:
        return [(s, f"log(1 + force) of the {s} touch sensor", "") for s in ("toe", "heel")]
    if domain == "walker" and key == "orientations" and size == 2 * (model.nbody - 1):
        out = []
        for b in range(1, model.nbody):
            body = model.id2name(b, "body")
            out += [(f"{body}_xx", f"xx entry of {body}'s rotation matrix (cosine of its angle)", ""),
                    (f"{body}_xz", f"xz entry of {body}'s rotation matrix (sine of its angle)", "")]
        return out
    if domain == "acrobot" and key == "orientations" and size == 4:
        return [("upper_arm_xz", "sine of the upper arm's angle", ""),
                ("lower_arm_xz", "sine of the lower arm's angle", ""),
                ("upper_arm_zz", "cosine of the upper arm's angle", ""),
                ("lower_arm_zz", "cosine of the lower arm's angle", "")]
    if domain == "pendulum" and key == "orientation" and size == 2:
        return [("cos", "cosine of the pole angle from upright", ""),
                ("sin", "sine of the pole angle from upright", "")]
    if domain == "pendulum" and key == "velocity" and size == 1:
        return [("hinge", "angular velocity of the pole", "rad/s")]
    if domain in ("reacher", "swimmer") and key == "to_target" and size == 2:
        return [("x", "x of the vector to the target", "m"), ("y", "y of the vector to the target", "m")]
    if key in ("position", "velocity") and joints and size == len(joints):
        deriv = key == "velocity"
        what = "velocity" if deriv else "position"
        return [(j, f"{what} of joint {j}", _joint_unit(physics, j, deriv)) for j in joints]
    return None


def _observation_layout(
        domain: str, spec: Mapping[str, Any], physics: Any,
) -> tuple[tuple[Component, ...], list[tuple[str, tuple[int, ...], list[str] | None]], list[tuple[str, int]]]:
    """Components, text labels and the (key, size) plan of the flattened observation."""
    components: list[Component] = []
    labels: list[tuple[str, tuple[int, ...], list[str] | None]] = []
    plan: list[tuple[str, int]] = []
    for key, arr_spec in spec.items():
        shape = tuple(arr_spec.shape)
        size = int(np.prod(shape)) if shape else 1
        meaning, unit = _KEY_MEANING.get(key, (key.replace("_", " "), ""))
        entries = _entry_labels(domain, key, size, physics)
        for flat in range(size):
            if not shape:
                name = key
            elif len(shape) == 1:
                name = f"{key}[{flat}]"
            else:
                name = f"{key}[{','.join(str(i) for i in np.unravel_index(flat, shape))}]"
            if entries:
                _, desc, eunit = entries[flat]
                components.append(Component(name, desc, eunit))
            else:
                components.append(Component(name, meaning, unit))
        labels.append((key, shape, [e[0] for e in entries] if entries else None))
        plan.append((key, size))
    return tuple(components), labels, plan


def _split_id(name: str) -> tuple[str, str]:
    domain, sep, task = name.partition("-")
    if not sep or not domain or not task:
        raise ValueError(f"dmc task names look like '<domain>-<task>' (e.g. 'cheetah-run'), got {name!r}")
    return domain, task


def _fmt(x: float) -> str:
    return f"{x:.3g}"


@contextlib.contextmanager
def _quiet_absl() -> Iterator[None]:
    """Raise absl's log threshold to ERROR for the duration (dm_control logs through absl)."""
    try:
        from absl import logging as absl_logging
    except ImportError:  # pragma: no cover - dm_control depends on absl
        yield
        return
    old = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        yield
    finally:
        absl_logging.set_verbosity(old)


_MODELS: dict[tuple, object] = {}  # the MuJoCo models compiled in this process, by (XML, assets)


@contextlib.contextmanager
def _compile_once() -> Iterator[None]:
    """For the duration, dm_control's compilation of an MJCF model that this process has compiled
    before returns a copy of that model (``mj_copyModel``, far cheaper: docs/families/dmc.md). A
    worker with 8 lanes builds a task's environment 8 times; the copy is the same model to the bit,
    so episodes do not change."""
    from dm_control.mujoco import wrapper

    raw = vars(wrapper.MjModel)["from_xml_string"]  # the classmethod object, restored as it was
    compile_xml = wrapper.MjModel.from_xml_string

    def from_xml_string(xml_string: str, assets: dict[str, bytes] | None = None) -> Any:
        key = (xml_string, tuple(sorted((assets or {}).items())))
        model = _MODELS.get(key)
        if model is None:
            model = _MODELS[key] = compile_xml(xml_string, assets=assets)
        return copy.copy(model)

    wrapper.MjModel.from_xml_string = from_xml_string
    try:
        yield
    finally:
        wrapper.MjModel.from_xml_string = raw


@functools.cache
def _task_names() -> tuple[str, ...]:
    require("dm_control", "dmc", "the DeepMind Control Suite tasks")
    from dm_control import suite

    return tuple(sorted(f"{d}-{t}" for d, t in suite.ALL_TASKS if d not in _EXCLUDED_DOMAINS))


class DMCHarness(Harness):
    """Harness over one DeepMind Control Suite task (``dmc/cheetah-run``, ``dmc/walker-walk``, ...).

    Options: ``environment_kwargs`` (a dict passed to ``suite.load``, e.g. ``{"legacy_step": True}``;
    ``time_limit`` there changes the step limit) and ``task_kwargs`` (task arguments other than
    ``random``, which the harness owns).
    """

    family = "dmc"
    bitwise_across_machines = False  # MuJoCo's compiled kernels round differently on another CPU

    @staticmethod
    def task_names() -> list[str]:
        return list(_task_names())

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None,
                 task_kwargs: dict | None = None, environment_kwargs: dict | None = None) -> None:
        super().__init__(text=text)
        require("dm_control", "dmc", "the DeepMind Control Suite tasks")
        from dm_control import suite

        domain, task = _split_id(name)
        if domain in _EXCLUDED_DOMAINS:
            raise ValueError(f"dmc/{name} is not offered: {_EXCLUDED_DOMAINS[domain]}")
        task_kwargs = dict(task_kwargs or {})
        if "random" in task_kwargs:
            raise ValueError(f"dmc/{name}: task_kwargs['random'] is not allowed; the episode seed "
                             f"(reset(seed=...)) sets the task's random state")
        environment_kwargs = dict(environment_kwargs or {})
        with _quiet_absl(), _compile_once():  # the compiler warns about deprecated XML attributes on load
            self._env = suite.load(domain, task, task_kwargs={**task_kwargs, "random": 0},
                                   environment_kwargs=environment_kwargs or None)
        self._physics = self._env.physics
        self._task = self._env.task
        if not isinstance(getattr(self._task, "_random", None), np.random.RandomState):
            raise TypeError(f"dmc/{name}: the task keeps no numpy RandomState in task._random; "
                            f"per-episode seeding would not be exact")
        self._n_sub_steps = int(getattr(self._env, "_n_sub_steps", 1))

        spec = self._env.observation_spec()
        obs_components, self._labels, plan = _observation_layout(domain, spec, self._physics)
        # (key, start, stop, is_1d) of each key in the flat vector, for _flatten.
        self._slices = []
        start = 0
        for (key, size), arr_spec in zip(plan, spec.values(), strict=True):
            self._slices.append((key, start, start + size, len(arr_spec.shape) == 1))
            start += size
        self._obs_size = start
        observation_space = spaces.Box(-np.inf, np.inf, shape=(self._obs_size,), dtype=np.float32)

        aspec = self._env.action_spec()
        low = np.asarray(aspec.minimum, dtype=np.float64).reshape(aspec.shape)
        high = np.asarray(aspec.maximum, dtype=np.float64).reshape(aspec.shape)
        native_action_space = spaces.Box(low=low, high=high, dtype=np.float64)
        model = self._physics.model
        act_components = []
        for i in range(int(model.nu)):
            actuator = model.id2name(i, "actuator") or f"actuator_{i}"
            if int(model.actuator_trntype[i]) == 0:  # mjTRN_JOINT
                joint = model.id2name(int(model.actuator_trnid[i, 0]), "joint")
                what = f"control of the actuator on joint {joint} (gear {float(model.actuator_gear[i, 0]):g})"
            else:
                what = f"control of actuator {actuator}"
            act_components.append(Component(actuator, what, "", float(low[i]), float(high[i])))

        step_limit = getattr(self._env, "_step_limit", float("inf"))
        native_steps = int(round(step_limit)) if np.isfinite(step_limit) else 1000
        steps = int(max_episode_steps or native_steps)
        key = f"{domain}-{task}"
        goal = _GOALS.get(key) or (
            f"DeepMind Control Suite task '{task}' of the '{domain}' domain: "
            f"{_DOMAIN_GOALS.get(domain, 'control a MuJoCo body')}. The reward per step is in [0, 1]; "
            f"maximise the return over {steps} steps.")
        info = TaskInfo(
            id=f"dmc/{name}",
            domain="dmc",
            description=goal,
            observation_space=observation_space,
            action_space=spaces.Box(-1.0, 1.0, shape=native_action_space.shape, dtype=np.float32),
            observation_components=obs_components,
            action_components=tuple(act_components),
            reward_range=(0.0, 1.0),
            max_episode_steps=steps,
            package="dm-control",
            package_version=version_of("dm-control"),
            has_text=True,
            text_note="each observation key with its entries by name (joint, body or index) and value",
            native_id=f"{domain}/{task}",
            options={k: v for k, v in (("task_kwargs", task_kwargs),
                                       ("environment_kwargs", environment_kwargs)) if v},
        )
        self._finish_setup(info, native_action_space)

    # ----------------------------------------------------------------- hooks
    def _flatten(self, obs: Mapping[str, Any]) -> np.ndarray:
        out = np.empty(self._obs_size, dtype=np.float32)
        for key, start, stop, flat in self._slices:
            out[start:stop] = obs[key] if flat else np.ravel(obs[key])
        return out

    def _native_reset(self, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        self._task._random = np.random.RandomState(seed)  # noqa: SLF001 - dm_control has no setter for it
        timestep = self._env.reset()
        return self._flatten(timestep.observation), {}

    def _native_step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        # The body of dm_control.rl.control.Environment.step, minus the TimeStep and step counter.
        task, physics = self._task, self._physics
        task.before_step(action, physics)
        physics.step(self._n_sub_steps)
        task.after_step(physics)
        reward = task.get_reward(physics)
        obs = task.get_observation(physics)
        discount = task.get_termination(physics)
        terminated = truncated = False
        if discount is not None:
            # An episode the task ends with a non-zero discount is cut short, not finished.
            terminated = discount == 0
            truncated = not terminated
        return self._flatten(obs), reward, terminated, truncated, {}

    def _native_close(self) -> None:
        self._env.close()

    def _render_text(self, observation: np.ndarray) -> str:
        values = np.asarray(observation, dtype=np.float64).tolist()
        parts = []
        i = 0
        for key, shape, names in self._labels:
            size = int(np.prod(shape)) if shape else 1
            chunk = values[i:i + size]
            i += size
            if names:
                parts.append(f"{key}: " + ", ".join(f"{n}={_fmt(v)}" for n, v in zip(names, chunk, strict=True)))
            elif not shape:
                parts.append(f"{key}: {_fmt(chunk[0])}")
            else:
                dims = "x".join(str(d) for d in shape)
                parts.append(f"{key}{'' if len(shape) == 1 else f' ({dims}, row-major)'}: "
                             f"[{', '.join(_fmt(v) for v in chunk)}]")
        return "; ".join(parts)
