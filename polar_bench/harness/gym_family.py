"""`gym/<id>`: any registered Gymnasium environment id.

The harness builds the environment with ``gymnasium.make`` and steps its unwrapped core: the step
limit of the registration is enforced by the harness itself (the same number), and Gymnasium's
checker and order-enforcing wrappers are replaced by the harness's own checks. Classic-control
tasks have named observation components with units and a text rendering; other ids (MuJoCo v5,
...) get generic component names and no text.
"""

from __future__ import annotations

import math
from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from .._optional import version_of
from ..task_info import Component, TaskInfo
from .base import COMMON_OPTIONS, Harness, keyword_parameters

__all__ = ["GymHarness"]

C = Component

# Observation components, action components, goal and per-step reward range of the classic tasks.
_CLASSIC: dict[str, dict[str, Any]] = {
    "CartPole": {
        "obs": (C("cart position", "position of the cart on the track; |x| > 2.4 ends the episode", "m"),
                C("cart velocity", "", "m/s"),
                C("pole angle", "angle of the pole from upright; |angle| > 0.2095 ends the episode", "rad"),
                C("pole angular velocity", "", "rad/s")),
        "act": (C("push cart to the left"), C("push cart to the right")),
        "goal": "Keep a pole balanced upright on a cart moving along a frictionless track by pushing the "
                "cart left or right. Reward +1 for every step the pole stays up; the episode ends when the "
                "pole falls past 12 degrees or the cart leaves the track.",
        "reward": (0.0, 1.0),
    },
    "Acrobot": {
        "obs": (C("cos(theta1)", "cosine of the first link's angle from hanging down"),
                C("sin(theta1)", "sine of the first link's angle"),
                C("cos(theta2)", "cosine of the second link's angle relative to the first"),
                C("sin(theta2)", "sine of the second link's angle relative to the first"),
                C("theta1 angular velocity", "", "rad/s"),
                C("theta2 angular velocity", "", "rad/s")),
        "act": (C("apply -1 torque to the actuated joint"), C("apply no torque"),
                C("apply +1 torque to the actuated joint")),
        "goal": "Swing the free end of a two-link chain, actuated only at the joint between the links, "
                "above a line one link length over the fixed base. Reward -1 per step until it does.",
        "reward": (-1.0, 0.0),
    },
    "MountainCar": {
        "obs": (C("car position", "position along the valley; the goal is at 0.5", "m"),
                C("car velocity", "", "m/s")),
        "act": (C("accelerate to the left"), C("do not accelerate"), C("accelerate to the right")),
        "goal": "Drive an underpowered car out of a valley to the flag on the right hill (position 0.5) "
                "by building momentum. Reward -1 per step until the flag is reached.",
        "reward": (-1.0, 0.0),
    },
    "MountainCarContinuous": {
        "obs": (C("car position", "position along the valley; the goal is at 0.45", "m"),
                C("car velocity", "", "m/s")),
        "act": (C("force", "force applied to the car", "N", -1.0, 1.0),),
        "goal": "Drive an underpowered car out of a valley to the flag on the right hill, spending as "
                "little energy as possible. +100 on reaching the flag, minus 0.1 x force^2 per step.",
        "reward": (-0.1, 100.0),
    },
    "Pendulum": {
        "obs": (C("cos(theta)", "cosine of the pendulum angle from upright"),
                C("sin(theta)", "sine of the pendulum angle from upright"),
                C("angular velocity", "", "rad/s")),
        "act": (C("torque", "torque applied at the pivot", "N*m", -2.0, 2.0),),
        "goal": "Swing a pendulum up and keep it upright with as little torque as possible. Reward per "
                "step is -(theta^2 + 0.1 * theta_dot^2 + 0.001 * torque^2), 0 at best.",
        "reward": (-16.2736044, 0.0),
    },
}


def constructor_options(env_id: str) -> list[str] | None:
    """The keyword arguments ``gymnasium.make(env_id, **kwargs)`` passes to the environment: the
    parameters of its class's ``__init__``, following ``**kwargs`` up the base classes (as MuJoCo and
    Minigrid environments pass them on); None when an entry point is a function taking ``**kwargs``."""
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    spec = gymnasium.spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    names: list[str] = []
    chain = [k for k in creator.__mro__ if "__init__" in vars(k) and k is not object] if isinstance(
        creator, type) else [creator]
    for owner in chain:
        found, takes_more = keyword_parameters(owner.__init__ if isinstance(owner, type) else owner,
                                               skip=("self",))
        names += [n for n in found if n not in names]
        if not takes_more:
            return names
    return None if not isinstance(creator, type) else names


def _family_name(env_id: str) -> str:
    return env_id.split("/")[-1].split("-v")[0]


class GymHarness(Harness):
    """Harness over a registered Gymnasium id (``gym/CartPole-v1``, ``gym/HalfCheetah-v5``, ...)."""

    family = "gym"

    @staticmethod
    def task_names() -> list[str]:
        import gymnasium

        return sorted(k for k, spec in gymnasium.registry.items()
                      if isinstance(spec.entry_point, str) or callable(spec.entry_point))

    @classmethod
    def accepted_options(cls, name: str) -> list[str] | None:
        """``text``, ``max_episode_steps`` and the environment's own constructor arguments."""
        native = constructor_options(name)
        return None if native is None else [*COMMON_OPTIONS, *native]

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(text=text)
        import gymnasium

        spec = gymnasium.spec(name)
        self._env = gymnasium.make(name, disable_env_checker=True, **kwargs).unwrapped
        native_obs = self._env.observation_space
        native_act = self._env.action_space
        classic = bool(spec.entry_point) and "classic_control" in str(spec.entry_point)
        known = _CLASSIC.get(_family_name(name)) if classic else None
        steps = int(max_episode_steps or spec.max_episode_steps or 0)
        action_space: spaces.Space
        if isinstance(native_act, spaces.Box):
            action_space = spaces.Box(-1.0, 1.0, shape=native_act.shape, dtype=np.float32)
            act_components = known["act"] if known else tuple(
                C(f"action[{i}]", "", "", float(lo), float(hi))
                for i, (lo, hi) in enumerate(zip(native_act.low.flat, native_act.high.flat, strict=True)))
        elif isinstance(native_act, spaces.Discrete):
            action_space = native_act
            act_components = known["act"] if known else tuple(C(f"action {i}") for i in range(native_act.n))
        else:
            raise TypeError(f"gym/{name}: action space {native_act} is not supported (Box or Discrete only)")
        if known:
            obs_components = known["obs"]
        elif isinstance(native_obs, spaces.Box) and len(native_obs.shape) == 1:
            obs_components = tuple(C(f"obs[{i}]") for i in range(native_obs.shape[0]))
        else:
            obs_components = ()
        module = str(spec.entry_point).split(".")[2] if str(spec.entry_point).startswith("gymnasium.envs.") else ""
        domain = {"classic_control": "classic", "mujoco": "mujoco", "box2d": "box2d",
                  "toy_text": "toy_text"}.get(module, "gym")
        goal = known["goal"] if known else (
            f"The Gymnasium task {name}: maximise the return within {steps} steps.")
        info = TaskInfo(
            id=f"gym/{name}",
            domain=domain,
            description=goal,
            observation_space=native_obs,
            action_space=action_space,
            observation_components=obs_components,
            action_components=act_components,
            reward_range=known["reward"] if known else (-math.inf, math.inf),
            max_episode_steps=steps,
            package="gymnasium",
            package_version=version_of("gymnasium"),
            has_text=bool(known),
            text_note=("each observation component by name with its unit" if known else
                       "only the classic-control tasks have named components to render"),
            native_id=name,
            options=dict(kwargs),
        )
        self._finish_setup(info, native_act)
        self._names = [c.name for c in obs_components]
        self._units = [c.unit for c in obs_components]

    def _native_reset(self, seed: int) -> tuple[Any, dict[str, Any]]:
        return self._env.reset(seed=seed)

    def _native_step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        return self._env.step(action)

    def _native_close(self) -> None:
        self._env.close()

    def _render_text(self, observation: Any) -> str:
        if not self.task_info.has_text:
            return super()._render_text(observation)
        parts = []
        for name, unit, value in zip(self._names, self._units, np.asarray(observation).tolist(), strict=True):
            parts.append(f"{name}: {value:.4f}{' ' + unit if unit else ''}")
        return "; ".join(parts)
