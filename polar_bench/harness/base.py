"""The `Harness` base class: one `gymnasium.Env` in front of every native environment.

A family subclasses `Harness` and implements five small hooks (`_native_reset`, `_native_step`,
`_native_close`, `_render_text` and the constructor that builds the native env and the `TaskInfo`).
The base class owns what must behave the same in every family: seeding, action checks and
rescaling, the step limit, the reward range, option checks, fault isolation and text on request.
See docs/harnesses.md for what each of them guarantees.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Mapping
from typing import Any, ClassVar, SupportsFloat, TypeVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from ..errors import (
    EpisodeOverError,
    HarnessClosedError,
    HarnessError,
    HarnessOptionError,
    InvalidActionError,
    NoTextRenderingError,
    describe_value,
)
from ..task_info import TaskInfo

__all__ = ["Harness", "COMMON_OPTIONS", "REWARD_TOLERANCE", "reward_slack", "check_common_options",
           "keyword_parameters"]

_SEED_BOUND = 2**31 - 1

#: Relative slack (times max(1, |bound|)) on the reward range and on the return bounds: a bound
#: written to 7 decimals (Pendulum's -16.2736044 for -(pi^2 + 0.1 * 8^2 + 0.001 * 2^2)) and sums of
#: float32 rewards round in the last bits.
REWARD_TOLERANCE = 1e-6

_H = TypeVar("_H", bound="Harness")


def reward_slack(bound: float) -> float:
    """How far past a finite reward or return ``bound`` a value may fall and still be within it."""
    return REWARD_TOLERANCE * max(1.0, abs(bound)) if np.isfinite(bound) else 0.0


#: The options every family takes: ``polar_bench.make(task_id, text=True, max_episode_steps=N)``.
COMMON_OPTIONS = ("max_episode_steps", "text")


def keyword_parameters(function: Any, skip: tuple[str, ...] = ("self", "name")) -> tuple[list[str], bool]:
    """The names ``function`` accepts as keywords (without ``skip``), and whether it also takes ``**kwargs``."""
    params = inspect.signature(function).parameters.values()
    names = [p.name for p in params if p.name not in skip
             and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_common_options(task_id: str, options: Mapping[str, Any]) -> None:
    """Raise `HarnessOptionError` unless ``max_episode_steps`` is absent, None or a positive integer and
    ``text`` is absent, True or False."""
    steps = options.get("max_episode_steps")
    if steps is not None and not (_is_int(steps) and steps >= 1):
        raise HarnessOptionError(
            task_id, f"{task_id}: max_episode_steps must be a positive integer (or None for the task's "
                     f"own limit), got {describe_value(steps)}")
    text = options.get("text", False)
    if not isinstance(text, (bool, np.bool_)):
        raise HarnessOptionError(task_id, f"{task_id}: text must be True or False, got {describe_value(text)}")


class Harness(gymnasium.Env):
    """Base class of all polar_bench harnesses. Subclasses set ``task_info`` in ``__init__``."""

    family: ClassVar[str] = ""
    #: (least, greatest) return of one whole episode where the family knows a bound tighter than
    #: the per-step range times the length (`return_bounds`); a family may set it per task.
    episode_return_range: tuple[float, float] = (-np.inf, np.inf)
    #: Whether the same seed and actions give the same bits on every CPU. False where the simulator's
    #: compiled floating-point kernels depend on the CPU (MuJoCo: measured on DMC); `verify` then
    #: accepts a re-run that differs only at floating-point level (`polar_bench.leaderboard.verify`).
    bitwise_across_machines: ClassVar[bool] = True
    metadata: dict[str, Any] = {"render_modes": []}
    task_info: TaskInfo

    def __new__(cls: type[_H], *args: Any, **options: Any) -> _H:
        # Runs before the family's __init__ with the same arguments, so that every family (built-in,
        # registered or future) gets the same option checks before it builds anything. Unpickling and
        # copying call __new__ without arguments: nothing to check then.
        name = args[0] if args else options.pop("name", None)
        if name is not None:
            cls.check_options(str(name), options)
        return super().__new__(cls)

    def __init__(self, *, text: bool = False) -> None:
        self._text = bool(text)
        self._closed = False
        self._needs_reset = True
        self._step_index = 0
        self._episode_seed: int | None = None
        self._clipped = 0
        self._max_steps = 0
        self._continuous = False
        self._discrete_n = 0
        self._action_offset = np.zeros(0)  # set by _finish_setup for continuous actions
        self._action_scale = np.ones(0)

    # ----------------------------------------------------------------- set-up helpers
    def _finish_setup(self, info: TaskInfo, native_action_space: spaces.Space | None = None) -> None:
        """Record the TaskInfo and prepare action conversion. Call at the end of ``__init__``."""
        self.task_info = info
        self.observation_space = info.observation_space
        self.action_space = info.action_space
        self._max_steps = int(info.max_episode_steps) or 0
        lo, hi = (float(b) for b in info.reward_range)
        self._reward_lo, self._reward_hi = lo - reward_slack(lo), hi + reward_slack(hi)
        if isinstance(info.action_space, spaces.Box):
            self._continuous = True
            native = native_action_space if native_action_space is not None else info.action_space
            if not isinstance(native, spaces.Box):
                raise TypeError(f"{info.id}: the native action space of a Box action space must be a Box, "
                                f"got {native}")
            low = np.asarray(native.low, dtype=np.float64)
            high = np.asarray(native.high, dtype=np.float64)
            self._action_offset = (high + low) / 2.0
            self._action_scale = (high - low) / 2.0
            self._action_dtype = getattr(native, "dtype", np.float64)
            self._action_shape = info.action_space.shape
            # For the fast path of _convert_action: skip the affine map when it is the identity, and
            # check small actions in Python (numpy's per-call overhead dominates at these sizes).
            self._action_identity = bool(np.all(self._action_offset == 0.0) and np.all(self._action_scale == 1.0))
            self._action_small = int(np.prod(self._action_shape)) <= 32
        elif isinstance(info.action_space, spaces.Discrete):
            self._discrete_n = int(info.action_space.n)
        else:
            raise TypeError(f"{info.id}: unsupported action space {info.action_space}")
        if self._text and not info.has_text:
            raise NoTextRenderingError(f"{info.id} has no text rendering: {info.text_note}")

    # ----------------------------------------------------------------- options
    @classmethod
    def accepted_options(cls, name: str) -> list[str] | None:
        """The options ``polar_bench.make(f"{family}/{name}", **options)`` accepts, or None when the
        family takes any (its ``__init__`` has ``**options`` and it does not say which).

        By default: the keyword parameters of the family's ``__init__`` (after ``name``). A family that
        passes ``**options`` on to the native environment overrides this to add the names it takes."""
        names, takes_any = keyword_parameters(cls.__init__)
        return None if takes_any else names

    @classmethod
    def check_options(cls, name: str, options: Mapping[str, Any]) -> None:
        """Raise `HarnessOptionError` for an option the family does not accept or a bad value of a
        common option; called for every construction, before the family's ``__init__``."""
        task_id = f"{cls.family}/{name}" if cls.family else name
        accepted = cls.accepted_options(name)
        if accepted is not None:
            unknown = sorted(set(options) - set(accepted))
            if unknown:
                listing = ", ".join(sorted(accepted)) or "none"
                raise HarnessOptionError(
                    task_id, f"{task_id}: unknown option{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; the {cls.family or cls.__name__} family "
                             f"accepts: {listing}")
        check_common_options(task_id, options)

    # ----------------------------------------------------------------- hooks
    def _native_reset(self, seed: int) -> tuple[Any, dict[str, Any]]:
        raise NotImplementedError

    def _native_step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        raise NotImplementedError

    def _native_close(self) -> None:
        pass

    def _render_text(self, observation: Any) -> str:
        raise NoTextRenderingError(f"{self.task_info.id} has no text rendering: {self.task_info.text_note}")

    # ----------------------------------------------------------------- lazy generator
    _lazy_seed: int | None = None

    @property
    def _np_random(self) -> np.random.Generator | None:  # overrides gymnasium.Env's attribute; see reset()
        if self._lazy_seed is not None:
            seed, self._lazy_seed = self._lazy_seed, None
            self.__dict__["_rng"], self._np_random_seed = seeding.np_random(seed)
        return self.__dict__.get("_rng")

    @_np_random.setter
    def _np_random(self, value: np.random.Generator | None) -> None:
        self._lazy_seed = None
        self.__dict__["_rng"] = value

    # ----------------------------------------------------------------- public API
    def request_text(self, enabled: bool = True) -> None:
        """Add (or stop adding) ``info["text"]`` to every reset and step."""
        if enabled and not self.task_info.has_text:
            raise NoTextRenderingError(f"{self.task_info.id} has no text rendering: {self.task_info.text_note}")
        self._text = bool(enabled)

    def render_text(self, observation: Any) -> str:
        """The observation as concise text for language agents."""
        return self._render_text(observation)

    @property
    def episode_seed(self) -> int | None:
        return self._episode_seed

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if self._closed:
            raise HarnessClosedError(f"{self.task_info.id}: reset() after close(); make a new harness")
        if seed is None:
            super().reset(seed=None)
            seed = int(self.np_random.integers(_SEED_BOUND))
        elif not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"{self.task_info.id}: seed must be a non-negative int, got {seed!r}")
        else:
            # Gymnasium semantics (a later reset() continues a generator seeded here), but the
            # generator is only built if someone reads it: building it costs ~35 us per episode.
            self._lazy_seed = int(seed)
            self._np_random_seed = int(seed)
        seed = int(seed)
        self._episode_seed = seed
        self._step_index = 0
        self._clipped = 0
        self._needs_reset = True
        try:
            obs, info = self._native_reset(seed)
        except Exception as exc:  # noqa: BLE001 - fault isolation is the point
            raise HarnessError(self.task_info.id, seed, 0, exc, traceback.format_exc()) from exc
        self._needs_reset = False
        info = dict(info)
        info["seed"] = seed
        if self._text:
            info["text"] = self._render_text(obs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._needs_reset:
            if self._closed:
                raise HarnessClosedError(f"{self.task_info.id}: step() after close(); make a new harness")
            if self._episode_seed is None:
                raise EpisodeOverError(f"{self.task_info.id}: step() before reset(); call reset(seed=...) first")
            raise EpisodeOverError(
                f"{self.task_info.id}: step() after the episode with seed {self._episode_seed} ended "
                f"at step {self._step_index}; call reset() to start a new one")
        native_action = self._convert_action(action)
        try:
            obs, reward, terminated, truncated, info = self._native_step(native_action)
        except Exception as exc:  # noqa: BLE001
            self._needs_reset = True
            raise HarnessError(self.task_info.id, self._episode_seed, self._step_index + 1, exc,
                               traceback.format_exc()) from exc
        self._step_index += 1
        try:
            reward = float(reward)
        except (TypeError, ValueError):
            reward = float("nan")
        if not self._reward_lo <= reward <= self._reward_hi:  # also NaN and non-numbers
            self._needs_reset = True
            wrong = ValueError(f"reward {reward!r} is outside the task's declared per-step range "
                               f"{tuple(self.task_info.reward_range)} (TaskInfo.reward_range)")
            raise HarnessError(self.task_info.id, self._episode_seed, self._step_index, wrong, "") from None
        if self._max_steps and self._step_index >= self._max_steps and not terminated:
            truncated = True
        if terminated or truncated:
            self._needs_reset = True
        if self._continuous:
            info["clipped_actions"] = self._clipped
        if self._text:
            info["text"] = self._render_text(obs)
        return obs, reward, bool(terminated), bool(truncated), info

    def return_bounds(self, length: int) -> tuple[float, float]:
        """The least and the greatest return an episode of ``length`` steps can have: the per-step
        ``reward_range`` times the length, narrowed by the family's ``episode_return_range`` (BabyAI
        pays one reward in [0, 1] per episode). Infinite where the task has no bound."""
        if length <= 0:
            return 0.0, 0.0
        lo, hi = (float(b) for b in self.task_info.reward_range)
        ep_lo, ep_hi = self.episode_return_range
        return max(lo * length, ep_lo), min(hi * length, ep_hi)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._needs_reset = True
        try:
            self._native_close()
        except Exception:  # noqa: BLE001 - closing must never raise twice or mask a real error
            pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # ----------------------------------------------------------------- actions
    def _convert_action(self, action: Any) -> int | np.ndarray:
        if self._discrete_n:
            if isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
                a = int(action)
            elif isinstance(action, np.ndarray) and action.shape in ((), (1,)) and action.dtype.kind in "iu":
                a = int(action.reshape(()))
            else:
                raise InvalidActionError(
                    f"{self.task_info.id}: expected an integer action in [0, {self._discrete_n - 1}] "
                    f"({self._action_help()}), got {describe_value(action)}")
            if not 0 <= a < self._discrete_n:
                raise InvalidActionError(
                    f"{self.task_info.id}: action {a} is out of range; expected an integer in "
                    f"[0, {self._discrete_n - 1}] ({self._action_help()})")
            return a
        # Fast path (the common case, kept to a few microseconds): a float array of the right shape
        # whose entries are all in [-1, 1] (comparisons are False for NaN, so NaN takes the slow path).
        if type(action) is np.ndarray and action.shape == self._action_shape and action.dtype.kind == "f":
            if self._action_small:
                ok = all(-1.0 <= v <= 1.0 for v in action.tolist())
            else:
                ok = bool(((action >= -1.0) & (action <= 1.0)).all())
            if ok:
                if self._action_identity:
                    return action.astype(self._action_dtype)  # a copy: never alias the agent's array
                return (self._action_offset + self._action_scale * action).astype(self._action_dtype, copy=False)
        try:
            raw = np.asarray(action)
            if raw.dtype.kind not in "fiu":  # not strings, booleans, complex numbers or objects, converted
                raise TypeError(raw.dtype)
            arr = raw.astype(np.float64)
        except (TypeError, ValueError):
            raise InvalidActionError(
                f"{self.task_info.id}: expected a float array of shape {self._action_shape} in [-1, 1], "
                f"got {describe_value(action)}") from None
        if arr.shape != self._action_shape:
            raise InvalidActionError(
                f"{self.task_info.id}: expected a float array of shape {self._action_shape} in [-1, 1], "
                f"got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise InvalidActionError(
                f"{self.task_info.id}: action contains NaN or inf: {arr.tolist()}; expected finite "
                f"values in [-1, 1]")
        if (arr > 1.0).any() or (arr < -1.0).any():
            arr = np.clip(arr, -1.0, 1.0)
            self._clipped += 1
        return (self._action_offset + self._action_scale * arr).astype(self._action_dtype, copy=False)

    def _action_help(self) -> str:
        names = [c.name for c in self.task_info.action_components]
        if names and len(names) <= 20:
            return ", ".join(f"{i}={n}" for i, n in enumerate(names))
        return f"{self._discrete_n} actions"

