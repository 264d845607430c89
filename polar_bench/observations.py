"""Turn structured observations into one float32 vector, for agents that want a flat input.

`flatten_space(space)` gives the `Box` of the flat vectors, `flat_size(space)` their length, and
`flatten_observation(space, obs)` flattens one observation of ``space``: Box entries row-major,
discrete values one-hot, Dict and Tuple subspaces in order, Text skipped. See
docs/harnesses.md#flat-observations for the exact layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["flatten_space", "flatten_observation", "flat_size"]


def _bounds(space: spaces.Space, lows: list, highs: list) -> None:
    if isinstance(space, spaces.Box):
        lows.append(np.asarray(space.low, dtype=np.float32).ravel())
        highs.append(np.asarray(space.high, dtype=np.float32).ravel())
    elif isinstance(space, spaces.Discrete):
        lows.append(np.zeros(int(space.n), dtype=np.float32))
        highs.append(np.ones(int(space.n), dtype=np.float32))
    elif isinstance(space, spaces.MultiDiscrete):
        n = int(np.sum(space.nvec))
        lows.append(np.zeros(n, dtype=np.float32))
        highs.append(np.ones(n, dtype=np.float32))
    elif isinstance(space, spaces.MultiBinary):
        n = int(np.prod(space.n))
        lows.append(np.zeros(n, dtype=np.float32))
        highs.append(np.ones(n, dtype=np.float32))
    elif isinstance(space, spaces.Dict):
        for sub in space.spaces.values():
            _bounds(sub, lows, highs)
    elif isinstance(space, spaces.Tuple):
        for sub in space.spaces:
            _bounds(sub, lows, highs)
    elif isinstance(space, spaces.Text):
        pass
    else:
        raise TypeError(f"cannot flatten a {type(space).__name__} space ({space}); supported: Box, "
                        f"Discrete, MultiDiscrete, MultiBinary, Dict, Tuple and Text (skipped)")


def flat_size(space: spaces.Space) -> int:
    """The number of entries of a flattened observation of ``space``."""
    lows: list = []
    _bounds(space, lows, [])
    return int(sum(a.size for a in lows))


def flatten_space(space: spaces.Space) -> spaces.Box:
    """The float32 ``Box`` of shape ``(n,)`` holding `flatten_observation` of ``space``.

    Raises ``TypeError`` for unsupported spaces and ``ValueError`` when nothing is left to flatten
    (a space made of Text only).
    """
    lows: list = []
    highs: list = []
    _bounds(space, lows, highs)
    low = np.concatenate(lows) if lows else np.zeros(0, dtype=np.float32)
    if low.size == 0:
        raise ValueError(f"{space} has no numeric part to flatten (Text subspaces are skipped)")
    high = np.concatenate(highs)
    return spaces.Box(low=low, high=high, shape=low.shape, dtype=np.float32)


def _one_hot(index: int, n: int, what: str) -> np.ndarray:
    if not 0 <= index < n:
        raise ValueError(f"{what} value out of range: expected an integer in [0, {n - 1}] after "
                         f"subtracting the start, got {index}")
    out = np.zeros(n, dtype=np.float32)
    out[index] = 1.0
    return out


def _flatten(space: spaces.Space, obs: Any, parts: list) -> None:
    if isinstance(space, spaces.Box):
        arr = np.asarray(obs, dtype=np.float32)
        if arr.size != int(np.prod(space.shape)):
            raise ValueError(f"observation of shape {arr.shape} does not fit {space}")
        parts.append(arr.ravel())
    elif isinstance(space, spaces.Discrete):
        parts.append(_one_hot(int(obs) - int(space.start), int(space.n), str(space)))
    elif isinstance(space, spaces.MultiDiscrete):
        values = np.asarray(obs).ravel()
        starts = np.asarray(getattr(space, "start", np.zeros_like(space.nvec))).ravel()
        nvec = np.asarray(space.nvec).ravel()
        if values.size != nvec.size:
            raise ValueError(f"observation of shape {np.shape(obs)} does not fit {space}")
        for v, s, n in zip(values.tolist(), starts.tolist(), nvec.tolist(), strict=True):
            parts.append(_one_hot(int(v) - int(s), int(n), str(space)))
    elif isinstance(space, spaces.MultiBinary):
        parts.append(np.asarray(obs, dtype=np.float32).ravel())
    elif isinstance(space, spaces.Dict):
        if not isinstance(obs, dict):
            raise ValueError(f"expected a dict observation for {space}, got {type(obs).__name__}")
        for key, sub in space.spaces.items():
            if key not in obs:
                raise ValueError(f"observation lacks the key {key!r} of {space}")
            _flatten(sub, obs[key], parts)
    elif isinstance(space, spaces.Tuple):
        if len(obs) != len(space.spaces):
            raise ValueError(f"expected {len(space.spaces)} entries for {space}, got {len(obs)}")
        for sub, value in zip(space.spaces, obs, strict=True):
            _flatten(sub, value, parts)
    elif isinstance(space, spaces.Text):
        pass
    else:
        _bounds(space, [], [])  # raises the TypeError


def flatten_observation(space: spaces.Space, obs: Any) -> np.ndarray:
    """Flatten one observation of ``space`` into a float32 vector laid out as `flatten_space` says.

    Text parts are skipped; a discrete value out of range or a missing dict key raises
    ``ValueError``.
    """
    parts: list = []
    _flatten(space, obs, parts)
    if not parts:
        raise ValueError(f"{space} has no numeric part to flatten (Text subspaces are skipped)")
    if len(parts) == 1:
        return np.array(parts[0], dtype=np.float32)  # a copy, never a view of the observation
    return np.concatenate(parts)
