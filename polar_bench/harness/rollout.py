"""One uniformly random episode of a harness: the loop behind the random-agent reference returns that
scripts/ measure for families outside a suite (scripts/random_reference_text.py, scripts/atari_random_returns.py).

The seeding rule of the action generator is the caller's, because recorded figures depend on it (the
text families draw with ``default_rng(seed)``, the Atari table with ``default_rng([seed, 0])``, as
examples/random_agent.py does for run 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["random_action", "random_episode"]


def random_action(space: spaces.Space, rng: np.random.Generator) -> Any:
    """A uniformly random action of a `Discrete` space (an int) or a bounded `Box` (an array of its dtype)."""
    if isinstance(space, spaces.Discrete):
        return int(space.start + rng.integers(space.n))
    if isinstance(space, spaces.Box) and space.is_bounded():
        return rng.uniform(space.low, space.high).astype(space.dtype)
    raise TypeError(f"random_action needs a Discrete or bounded Box action space, got {space}")


def random_episode(harness: Any, seed: int, rng: np.random.Generator) -> tuple[float, int]:
    """(return, length) of one episode from ``harness.reset(seed=seed)`` to its end, every action drawn
    by `random_action` from ``rng``."""
    harness.reset(seed=seed)
    total, steps = 0.0, 0
    while True:
        _, reward, terminated, truncated, _ = harness.step(random_action(harness.action_space, rng))
        total += float(reward)
        steps += 1
        if terminated or truncated:
            return total, steps
