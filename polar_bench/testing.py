"""The conformance suite every harness family passes (in the spirit of dm_env's test_utils).

A family's test module (ours or a third-party package's) subclasses `HarnessConformance` and sets
``task_ids`` (two or more) and, if needed, ``overrides`` passed to ``polar_bench.make``; the class
parametrizes its tests over the task ids itself (``pytest_generate_tests``), so no conftest is
needed. It needs pytest (``pip install "polar_bench[test]"``).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import pickle
import re
import warnings
from typing import Any, ClassVar, cast

__all__ = ["HarnessConformance", "action_sequence", "trajectory"]

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import polar_bench
from polar_bench.errors import (
    EpisodeOverError,
    HarnessClosedError,
    HarnessError,
    HarnessOptionError,
    InvalidActionError,
    NoTextRenderingError,
    UserError,
)
from polar_bench.harness import Harness
from polar_bench.task_info import TaskInfo


def action_sequence(task_info: TaskInfo, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    space = task_info.action_space
    if isinstance(space, spaces.Discrete):
        return [int(space.start + rng.integers(space.n)) for _ in range(n)]
    return [rng.uniform(-1.0, 1.0, size=space.shape).astype(np.float32) for _ in range(n)]


def _digest(obj: Any, h: hashlib._Hash) -> None:
    if isinstance(obj, dict):
        for k in sorted(obj):
            h.update(str(k).encode())
            _digest(obj[k], h)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _digest(v, h)
    elif isinstance(obj, str):
        h.update(obj.encode())
    else:
        arr = np.ascontiguousarray(np.asarray(obj))
        h.update(str(arr.dtype).encode() + str(arr.shape).encode())
        h.update(arr.tobytes())


def trajectory(task_id: str, overrides: dict, seed: int, n_steps: int, action_seed: int = 0) -> list[str]:
    """Per-step digests of (observation, reward, terminated, truncated) for a fixed action sequence."""
    harness = polar_bench.make(task_id, **overrides)
    try:
        actions = action_sequence(harness.task_info, n_steps, action_seed)
        obs, _ = harness.reset(seed=seed)
        out = []
        h = hashlib.sha256()
        _digest(obs, h)
        out.append(h.hexdigest())
        for a in actions:
            obs, r, term, trunc, _ = harness.step(a)
            h = hashlib.sha256()
            _digest(obs, h)
            h.update(json.dumps([r, term, trunc]).encode())
            out.append(h.hexdigest())
            if term or trunc:
                break
        return out
    finally:
        harness.close()


def _spawned_trajectory(args: tuple[str, dict[str, Any], int, int]) -> list[str]:
    return trajectory(*args)


class HarnessConformance:
    task_ids: ClassVar[list[str]] = []
    overrides: ClassVar[dict] = {}
    determinism_steps: ClassVar[int] = 40

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Parametrize every test that takes ``task_id`` over the class's ``task_ids``."""
        if "task_id" in metafunc.fixturenames and self.task_ids:
            metafunc.parametrize("task_id", self.task_ids)

    def make(self, task_id: str, **extra: Any) -> Harness:
        return polar_bench.make(task_id, **{**self.overrides, **extra})

    def test_check_env(self, task_id: str) -> None:
        harness = self.make(task_id)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env(harness, skip_render_check=True)
        harness.close()

    def test_task_info_complete(self, task_id: str) -> None:
        harness = self.make(task_id)
        info = harness.task_info
        assert info.id == task_id
        assert info.family == task_id.split("/")[0]
        assert info.domain and info.description and len(info.description) > 20
        assert info.observation_space == harness.observation_space
        assert info.action_space == harness.action_space
        if isinstance(info.action_space, spaces.Discrete):
            assert len(info.action_components) == info.action_space.n
            assert all(c.name for c in info.action_components)
        else:
            box = cast(spaces.Box, info.action_space)
            assert box.low.min() == -1.0 and box.high.max() == 1.0
            assert len(info.action_components) == int(np.prod(box.shape))
        assert info.observation_components, "observation components must be described"
        assert info.max_episode_steps > 0
        assert info.package and info.package_version
        assert info.text_note
        assert info.reward_range[0] <= info.reward_range[1]
        harness.close()

    def test_task_info_round_trips_through_json(self, task_id: str) -> None:
        harness = self.make(task_id)
        info = harness.task_info
        text = json.dumps(info.to_json())
        again = TaskInfo.from_json(json.loads(text))
        assert again == info
        assert again.to_json() == info.to_json()
        harness.close()

    def test_same_seed_same_trajectory(self, task_id: str) -> None:
        a = trajectory(task_id, self.overrides, 123, self.determinism_steps)
        b = trajectory(task_id, self.overrides, 123, self.determinism_steps)
        assert a == b

    def test_different_seeds_differ(self, task_id: str) -> None:
        a = trajectory(task_id, self.overrides, 1, self.determinism_steps)
        b = trajectory(task_id, self.overrides, 2, self.determinism_steps)
        assert a != b

    def test_same_trajectory_in_spawned_process(self, task_id: str) -> None:
        """Also checks that a harness can be built from its id inside a spawned process."""
        here = trajectory(task_id, self.overrides, 7, self.determinism_steps)
        ctx = mp.get_context("spawn")
        with ctx.Pool(1) as pool:
            there = pool.map(_spawned_trajectory, [(task_id, self.overrides, 7, self.determinism_steps)])[0]
        assert here == there

    def test_text_rendering_on_request_only(self, task_id: str) -> None:
        harness = self.make(task_id)
        _, info = harness.reset(seed=0)
        assert "text" not in info
        if not harness.task_info.has_text:
            with pytest.raises(NoTextRenderingError):
                harness.request_text()
            with pytest.raises(NoTextRenderingError):
                self.make(task_id, text=True)
            harness.close()
            return
        harness.close()
        harness = self.make(task_id, text=True)
        _, info = harness.reset(seed=0)
        assert isinstance(info["text"], str) and info["text"].strip()
        action = action_sequence(harness.task_info, 1, 0)[0]
        _, _, _, _, info = harness.step(action)
        assert isinstance(info["text"], str) and info["text"].strip()
        harness.close()

    def test_invalid_actions_rejected(self, task_id: str) -> None:
        harness = self.make(task_id)
        harness.reset(seed=0)
        space = harness.task_info.action_space
        if isinstance(space, spaces.Discrete):
            bad = [space.n, -1, 0.5, "left", None, np.zeros(3, dtype=np.int64), np.float64(1.0)]
        else:
            box = cast(spaces.Box, space)
            bad = [np.zeros(box.shape[0] + 1), np.full(box.shape, np.nan),
                   np.full(box.shape, np.inf), "fast", None,
                   # nothing that numpy would convert quietly: strings, booleans, complex numbers
                   ["0.5"] * box.shape[0], [True] * box.shape[0], np.zeros(box.shape, np.complex128) + 1j]
        for action in bad:
            with pytest.raises(InvalidActionError) as err:
                harness.step(action)
            assert task_id in str(err.value)
        harness.close()

    def test_out_of_range_continuous_actions_are_clipped_and_counted(self, task_id: str) -> None:
        harness = self.make(task_id)
        space = harness.task_info.action_space
        if not isinstance(space, spaces.Box):
            harness.close()
            pytest.skip("discrete actions")
        harness.reset(seed=0)
        _, _, _, _, info = harness.step(np.zeros(space.shape, dtype=np.float32))
        assert info["clipped_actions"] == 0
        _, _, _, _, info = harness.step(np.full(space.shape, 5.0, dtype=np.float32))
        assert info["clipped_actions"] == 1
        harness.close()

    def test_step_after_episode_end_raises(self, task_id: str) -> None:
        harness = self.make(task_id, max_episode_steps=3)
        with pytest.raises(EpisodeOverError):
            harness.step(action_sequence(harness.task_info, 1, 0)[0])
        harness.reset(seed=0)
        done = False
        steps = 0
        for a in action_sequence(harness.task_info, 3, 0):
            _, _, term, trunc, _ = harness.step(a)
            steps += 1
            done = term or trunc
            if done:
                break
        assert done and steps <= 3
        with pytest.raises(EpisodeOverError):
            harness.step(a)
        harness.reset(seed=1)  # a new episode works again
        harness.close()

    def test_options_are_checked_alike_in_every_family(self, task_id: str) -> None:
        # The same checks, from the base class, for every family: a positive integer step limit, a
        # boolean text flag, and one error naming the task and the options its family accepts.
        for bad in (0, -5, 2.5, True, "10"):
            with pytest.raises(HarnessOptionError, match=re.escape(f"{task_id}: max_episode_steps must be a "
                                                                   f"positive integer")):
                self.make(task_id, max_episode_steps=bad)
            with pytest.raises(HarnessOptionError, match="max_episode_steps"):
                polar_bench.harness.check_options(task_id, {**self.overrides, "max_episode_steps": bad})
        with pytest.raises(HarnessOptionError, match=re.escape(f"{task_id}: text must be True or False")):
            self.make(task_id, text="yes")
        with pytest.raises(HarnessOptionError) as err:
            self.make(task_id, no_such_option=1)
        error = err.value
        assert isinstance(error, HarnessError) and isinstance(error, UserError)  # the commands exit with 2
        assert error.task_id == task_id and str(error).startswith(f"{task_id}: unknown option 'no_such_option'")
        harness = self.make(task_id, max_episode_steps=7)
        assert harness.task_info.max_episode_steps == 7
        accepted = type(harness).accepted_options(task_id.split("/", 1)[1])
        harness.close()
        assert accepted is not None and {"max_episode_steps", "text"} <= set(accepted)
        assert set(self.overrides) <= set(accepted)
        assert str(error).endswith(f"family accepts: {', '.join(sorted(accepted))}")
        with pytest.raises(HarnessOptionError, match="no_such_option"):
            polar_bench.harness.check_options(task_id, {"no_such_option": 1})
        polar_bench.harness.check_options(task_id, {**self.overrides, "max_episode_steps": 7, "text": False})
        copy = pickle.loads(pickle.dumps(error))  # errors cross worker processes
        assert type(copy) is HarnessOptionError and str(copy) == str(error) and copy.task_id == task_id

    def test_close_is_idempotent(self, task_id: str) -> None:
        harness = self.make(task_id)
        harness.reset(seed=0)
        harness.close()
        harness.close()
        with pytest.raises(HarnessClosedError):
            harness.reset(seed=0)
