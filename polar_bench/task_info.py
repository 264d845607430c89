"""`TaskInfo`: everything an agent may know about a task, and its JSON form.

An agent receives a `TaskInfo`, never the environment, so the spaces themselves travel in it
(as Gymnasium spaces) together with their meaning in words.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["Component", "TaskInfo", "space_to_json", "space_from_json"]


@dataclass(frozen=True)
class Component:
    """One named part of an observation or action: a vector entry, a dict key or a discrete choice.

    ``unit`` is empty for dimensionless quantities; ``low``/``high`` are the native bounds where the
    harness rescales (continuous actions arrive in [-1, 1] and are mapped onto [low, high]).
    """

    name: str
    description: str = ""
    unit: str = ""
    low: float | None = None
    high: float | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, "")}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Component:
        return cls(**data)


def _num(x: float) -> Any:
    """JSON has no inf/nan: encode them as strings."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _unnum(x: Any) -> float:
    return float(x)


def space_to_json(space: spaces.Space) -> dict:
    """Encode a Gymnasium space as plain JSON data (Box, Discrete, MultiDiscrete, MultiBinary,
    Dict, Tuple and Text)."""
    if isinstance(space, spaces.Box):
        low, high = space.low, space.high
        uniform = bool(np.all(low == low.flat[0]) and np.all(high == high.flat[0]))
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _num(low.flat[0]) if uniform else [_num(v) for v in low.flat],
            "high": _num(high.flat[0]) if uniform else [_num(v) for v in high.flat],
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "dtype": str(space.dtype)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    if isinstance(space, spaces.Text):
        return {"type": "Text", "max_length": space.max_length, "min_length": space.min_length,
                "charset": "".join(sorted(space.character_set))}
    raise TypeError(f"cannot encode space of type {type(space).__name__} as JSON")


def space_from_json(data: Mapping[str, Any]) -> spaces.Space:
    """Inverse of `space_to_json`."""
    kind = data["type"]
    if kind == "Box":
        shape = tuple(data["shape"])
        dtype = np.dtype(data["dtype"])

        def arr(v: Any) -> np.ndarray:
            if isinstance(v, list):
                return np.array([_unnum(x) for x in v], dtype=dtype).reshape(shape)
            return np.full(shape, _unnum(v), dtype=dtype)

        return spaces.Box(low=arr(data["low"]), high=arr(data["high"]), shape=shape, dtype=dtype.type)
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.array(data["nvec"]), dtype=np.dtype(data.get("dtype", "int64")).type)
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    if kind == "Dict":
        return spaces.Dict({k: space_from_json(v) for k, v in data["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_json(v) for v in data["spaces"]])
    if kind == "Text":
        return spaces.Text(max_length=data["max_length"], min_length=data.get("min_length", 1),
                           charset=data["charset"])
    raise ValueError(f"unknown space type {kind!r}")


@dataclass(frozen=True, eq=True)
class TaskInfo:
    """The frozen description of one task.

    Fields:
        id: ``family/name``, e.g. ``dmc/cheetah-run``.
        domain: the group of tasks it is scored in (``classic``, ``dmc``, ``procgen``, ...).
        description: the goal in natural language.
        observation_space, action_space: the harness's Gymnasium spaces (continuous actions are
            always ``Box(-1, 1)``; the harness rescales them to the native bounds).
        observation_components: the meaning of each vector entry or dict key, in order.
        action_components: one per discrete action (its name) or per continuous component (its
            meaning, unit and native bounds).
        reward_range: (min, max) reward of one step; infinite where the native env has no bound.
        max_episode_steps: the step limit after which an episode is truncated.
        package, package_version: the native package behind the task.
        has_text: whether observations have a faithful text rendering (``info["text"]``).
        text_note: how the text is made, or why there is none.
        native_id: the id of the task in the native package.
        options: the construction arguments (level ranges, distribution mode, ...).
    """

    id: str
    domain: str
    description: str
    observation_space: spaces.Space
    action_space: spaces.Space
    observation_components: tuple[Component, ...] = ()
    action_components: tuple[Component, ...] = ()
    reward_range: tuple[float, float] = (-math.inf, math.inf)
    max_episode_steps: int = 0
    package: str = ""
    package_version: str = ""
    has_text: bool = False
    text_note: str = ""
    native_id: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: its spaces are not hashable

    @property
    def family(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def action_names(self) -> tuple[str, ...]:
        """Names of the discrete actions (empty for continuous action spaces)."""
        if isinstance(self.action_space, spaces.Discrete):
            return tuple(c.name for c in self.action_components)
        return ()

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "domain": self.domain,
            "description": self.description,
            "observation_space": space_to_json(self.observation_space),
            "action_space": space_to_json(self.action_space),
            "observation_components": [c.to_json() for c in self.observation_components],
            "action_components": [c.to_json() for c in self.action_components],
            "reward_range": [_num(self.reward_range[0]), _num(self.reward_range[1])],
            "max_episode_steps": self.max_episode_steps,
            "package": self.package,
            "package_version": self.package_version,
            "has_text": self.has_text,
            "text_note": self.text_note,
            "native_id": self.native_id,
            "options": dict(self.options),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> TaskInfo:
        record: Mapping[str, Any] = json.loads(data) if isinstance(data, str) else data
        low, high = record["reward_range"]
        return cls(
            id=record["id"],
            domain=record["domain"],
            description=record["description"],
            observation_space=space_from_json(record["observation_space"]),
            action_space=space_from_json(record["action_space"]),
            observation_components=tuple(Component.from_json(c) for c in record["observation_components"]),
            action_components=tuple(Component.from_json(c) for c in record["action_components"]),
            reward_range=(_unnum(low), _unnum(high)),
            max_episode_steps=int(record["max_episode_steps"]),
            package=record["package"],
            package_version=record["package_version"],
            has_text=bool(record["has_text"]),
            text_note=record["text_note"],
            native_id=record["native_id"],
            options=dict(record["options"]),
        )
