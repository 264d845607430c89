"""`GymnasiumAdapter`: a harness family over any Gymnasium-style environment in a few lines.

A family subclasses `GymnasiumAdapter` and states, as class attributes, what the environment cannot
say about itself (its tasks, goal, component and action names, step limit and package); the adapter
derives the rest: spaces, action rescaling, seeding, the `TaskInfo` and a ``name: value`` text
rendering (`observation_text`). ``python -m polar_bench new-harness`` writes such a family for you.
See docs/harnesses.md#adapters-in-minutes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, SupportsFloat

import numpy as np
from gymnasium import spaces

from .._optional import version_of
from ..task_info import Component, TaskInfo
from .base import Harness

__all__ = ["GymnasiumAdapter"]


class GymnasiumAdapter(Harness):
    """Base class of a family over Gymnasium-style environments (see the module docstring).

    Class attributes a subclass sets:
        family: the task-id prefix.
        tasks: task name -> a function of no arguments that returns a new native environment.
        description: the goal in words; a string for every task, or a dict task name -> string.
        domain: the scoring group (default: the family).
        observation_names: the names of a 1-D Box observation's entries (default ``obs[i]``), or of
            the values of a Discrete observation; optional descriptions with `Component` objects.
        action_names: the names of the discrete actions (default ``action i``), or of the entries of
            a Box action; the same for every task, or a dict task name -> names.
        reward_range: per-step (min, max); default unbounded.
        max_episode_steps: the step limit (default 1000).
        package: the distribution behind the environments (its installed version is recorded).
    """

    tasks: ClassVar[Mapping[str, Callable[[], Any]]] = {}
    description: ClassVar[str | Mapping[str, str]] = ""
    domain: ClassVar[str] = ""
    observation_names: ClassVar[tuple[str | Component, ...]] = ()
    action_names: ClassVar[tuple[str | Component, ...] | Mapping[str, tuple[str | Component, ...]]] = ()
    reward_range: ClassVar[tuple[float, float]] = (-math.inf, math.inf)
    max_episode_steps: ClassVar[int] = 1000
    package: ClassVar[str] = ""

    @classmethod
    def task_names(cls) -> list[str]:
        return list(cls.tasks)

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None) -> None:
        super().__init__(text=text)
        cls = type(self)
        task_id = f"{cls.family}/{name}"
        if name not in cls.tasks:
            raise ValueError(f"{task_id}: unknown task; known: {', '.join(cls.tasks)}")
        self._env = cls.tasks[name]()
        native_obs, native_act = self._env.observation_space, self._env.action_space
        action_names = cls.action_names.get(name, ()) if isinstance(cls.action_names, Mapping) else cls.action_names
        action_space: spaces.Space
        if isinstance(native_act, spaces.Discrete):
            action_space = native_act
            actions = _components(action_names, int(native_act.n), "action {}")
        elif isinstance(native_act, spaces.Box):
            action_space = spaces.Box(-1.0, 1.0, shape=native_act.shape, dtype=np.float32)
            named = _components(action_names, int(np.prod(native_act.shape)), "action[{}]")
            actions = tuple(Component(c.name, c.description, c.unit, float(lo), float(hi)) for c, lo, hi in
                            zip(named, native_act.low.flat, native_act.high.flat, strict=True))
        else:
            raise TypeError(f"{task_id}: action space {native_act} is not supported (Discrete or Box only)")
        self._obs_names: tuple[Component, ...] = ()
        if isinstance(native_obs, spaces.Box) and len(native_obs.shape) == 1:
            self._obs_names = _components(cls.observation_names, native_obs.shape[0], "obs[{}]")
            observations = self._obs_names
        elif isinstance(native_obs, spaces.Discrete):
            self._obs_names = _components(cls.observation_names, int(native_obs.n), "state {}")
            observations = (Component("state", f"one of {native_obs.n} states"),)
        else:
            observations = (Component("observation", str(native_obs)),)
        has_text = bool(self._obs_names) or type(self).observation_text is not GymnasiumAdapter.observation_text
        goal = cls.description if isinstance(cls.description, str) else cls.description.get(name, "")
        steps = int(max_episode_steps or cls.max_episode_steps)
        package = cls.package or type(self._env).__module__.split(".")[0]
        self._finish_setup(TaskInfo(
            id=task_id,
            domain=cls.domain or cls.family,
            description=goal or f"The task {name} of the {cls.family} family: maximise the return within "
                                f"{steps} steps.",
            observation_space=native_obs,
            action_space=action_space,
            observation_components=observations,
            action_components=actions,
            reward_range=cls.reward_range,
            max_episode_steps=steps,
            package=package,
            package_version=version_of(package) or "unknown",
            has_text=has_text,
            text_note=("each observation entry by name" if self._obs_names else
                       "written by the family's observation_text" if has_text else
                       "no text rendering: the family renders only 1-D Box and Discrete observations"),
            native_id=f"{type(self._env).__module__}:{type(self._env).__name__}",
        ), native_act)

    def _native_reset(self, seed: int) -> tuple[Any, dict[str, Any]]:
        return self._env.reset(seed=seed)

    def _native_step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        return self._env.step(action)

    def _native_close(self) -> None:
        self._env.close()

    def _render_text(self, observation: Any) -> str:
        return self.observation_text(observation)

    def observation_text(self, observation: Any) -> str:
        """The observation in words; by default, ``name: value`` per entry of a 1-D Box and the name of
        a Discrete observation's value. Override for other observations."""
        if not self._obs_names:
            return super()._render_text(observation)
        if isinstance(self.observation_space, spaces.Discrete):
            return self._obs_names[int(observation) - int(self.observation_space.start)].name
        values = np.asarray(observation).tolist()
        return "; ".join(f"{c.name}: {v:.4g}{' ' + c.unit if c.unit else ''}"
                         for c, v in zip(self._obs_names, values, strict=True))


def _components(given: tuple[str | Component, ...], n: int, default: str) -> tuple[Component, ...]:
    """``n`` components: the given names (strings or Components), then numbered defaults."""
    out = [g if isinstance(g, Component) else Component(str(g)) for g in given[:n]]
    out += [Component(default.format(i)) for i in range(len(out), n)]
    return tuple(out)
