"""The `Harness` base class: one `gymnasium.Env` in front of every native environment.

A family subclasses `Harness` and implements five small hooks (`_native_reset`, `_native_step`,
`_native_close`, `_render_text` and the constructor that builds the native env and the
`TaskInfo`). The base class owns everything that must behave the same on every family:

* seeding: every episode has an explicit integer seed (drawn from the harness's own generator when
  ``reset()`` is called without one) and ``reset(seed=s)`` fully determines the episode;
* action checking: discrete actions must be integers in range; continuous actions must have the
  right shape and be finite, arrive in [-1, 1], are clipped there (counted in
  ``info["clipped_actions"]``) and rescaled to the native bounds;
* the step limit (``TaskInfo.max_episode_steps``), after which the episode is truncated;
* fault isolation: any exception of the native env becomes one `HarnessError` naming task, seed
  and step; ``step()`` after the end of an episode raises `EpisodeOverError`; ``close()`` is
  idempotent;
* text on request: with ``text=True`` (or `request_text`) every ``info`` carries ``"text"``.
"""

from __future__ import annotations

import traceback
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from ..errors import (EpisodeOverError, HarnessClosedError, HarnessError, InvalidActionError,
                      NoTextRenderingError)
from ..task_info import TaskInfo

__all__ = ["Harness"]

_SEED_BOUND = 2**31 - 1


class Harness(gymnasium.Env):
    """Base class of all polar_bench harnesses. Subclasses set ``task_info`` in ``__init__``."""

    family: ClassVar[str] = ""
    metadata: ClassVar[dict] = {"render_modes": []}
    task_info: TaskInfo

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
        self._action_offset = None
        self._action_scale = None

    # ----------------------------------------------------------------- set-up helpers
    def _finish_setup(self, info: TaskInfo, native_action_space: spaces.Space | None = None) -> None:
        """Record the TaskInfo and prepare action conversion. Call at the end of ``__init__``."""
        self.task_info = info
        self.observation_space = info.observation_space
        self.action_space = info.action_space
        self._max_steps = int(info.max_episode_steps) or 0
        if isinstance(info.action_space, spaces.Box):
            self._continuous = True
            native = native_action_space if native_action_space is not None else info.action_space
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

    # ----------------------------------------------------------------- hooks
    def _native_reset(self, seed: int) -> tuple[Any, dict]:
        raise NotImplementedError

    def _native_step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        raise NotImplementedError

    def _native_close(self) -> None:
        pass

    def _render_text(self, observation: Any) -> str:
        raise NoTextRenderingError(f"{self.task_info.id} has no text rendering: {self.task_info.text_note}")

    # ----------------------------------------------------------------- lazy generator
    _lazy_seed: int | None = None

    @property
    def _np_random(self):  # overrides gymnasium.Env's attribute; see reset()
        if self._lazy_seed is not None:
            seed, self._lazy_seed = self._lazy_seed, None
            self.__dict__["_rng"], self._np_random_seed = seeding.np_random(seed)
        return self.__dict__.get("_rng")

    @_np_random.setter
    def _np_random(self, value) -> None:
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

    def reset(self, *, seed: int | None = None, options: dict | None = None):
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

    def step(self, action):
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
        if self._max_steps and self._step_index >= self._max_steps and not terminated:
            truncated = True
        if terminated or truncated:
            self._needs_reset = True
        if self._continuous:
            info["clipped_actions"] = self._clipped
        if self._text:
            info["text"] = self._render_text(obs)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._needs_reset = True
        try:
            self._native_close()
        except Exception:  # noqa: BLE001 - closing must never raise twice or mask a real error
            pass

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # ----------------------------------------------------------------- actions
    def _convert_action(self, action):
        if self._discrete_n:
            if isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
                a = int(action)
            elif isinstance(action, np.ndarray) and action.shape in ((), (1,)) and action.dtype.kind in "iu":
                a = int(action.reshape(()))
            else:
                raise InvalidActionError(
                    f"{self.task_info.id}: expected an integer action in [0, {self._discrete_n - 1}] "
                    f"({self._action_help()}), got {_describe(action)}")
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
            arr = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidActionError(
                f"{self.task_info.id}: expected a float array of shape {self._action_shape} in [-1, 1], "
                f"got {_describe(action)}") from None
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


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"
