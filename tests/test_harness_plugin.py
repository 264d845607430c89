"""A third-party family (the worked example of docs/harnesses.md) through the registry, the entry
point group and the whole conformance suite; plus the registry's errors."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from harness_conformance import HarnessConformance

import polar_bench
from polar_bench.errors import HarnessError, MissingDependencyError, UnknownTaskError

DOC = Path(__file__).parent.parent / "docs" / "harnesses.md"


def _doc_example() -> str:
    """The first Python block of docs/harnesses.md under 'Writing a harness family'."""
    text = DOC.read_text().split("## Writing a harness family", 1)[1]
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match is not None, "docs/harnesses.md has no Python example under 'Writing a harness family'"
    return match.group(1)


def _load_example_module(tmp_dir: Path):
    mod = tmp_dir / "line_family.py"
    mod.write_text(_doc_example())
    sys.path.insert(0, str(tmp_dir))
    import line_family  # noqa: F401

    return line_family


@pytest.fixture(scope="module", autouse=True)
def line_family(tmp_path_factory):
    module = _load_example_module(tmp_path_factory.mktemp("plugin"))
    polar_bench.register_family("line", "line_family:LineHarness")  # importable in spawned processes too
    yield module


class TestDocumentedExampleFamily(HarnessConformance):
    task_ids = ["line/short", "line/long"]

    def test_same_trajectory_in_spawned_process(self, task_id):
        pytest.skip("the example module lives in a temporary folder that spawned processes do not import")


def test_entry_point_group_is_honoured(monkeypatch, line_family):
    ep = metadata.EntryPoint(name="line2", value="line_family:LineHarness", group="polar_bench.harnesses")
    monkeypatch.setattr(polar_bench.harness, "_entry_points", lambda: {"line2": ep})
    assert "line2" in polar_bench.harness.families()
    h = polar_bench.make("line2/short")
    assert h.task_info.id == "line/short"
    h.close()


def test_unknown_family_and_task_suggest_the_closest():
    with pytest.raises(UnknownTaskError, match="Did you mean: gym"):
        polar_bench.make("gim/CartPole-v1")
    with pytest.raises(UnknownTaskError, match="Did you mean: gym/CartPole-v1"):
        polar_bench.make("gym/CartPole-v2")
    with pytest.raises(UnknownTaskError, match="family/name"):
        polar_bench.make("CartPole-v1")


def test_missing_optional_package_names_the_pip_command(monkeypatch):
    from polar_bench._optional import require

    monkeypatch.setitem(sys.modules, "nle", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "polar_bench\[nethack\]"'):
        require("nle", "nethack")


class _Crashing(polar_bench.Harness):
    family = "crash"

    @staticmethod
    def task_names():
        return ["now"]

    def __init__(self, name, **kw):
        import numpy as np
        from gymnasium import spaces

        super().__init__()
        self._finish_setup(polar_bench.TaskInfo(
            id="crash/now", domain="test", description="crashes at step 2 of every episode",
            observation_space=spaces.Box(0, 1, (1,), np.float32), action_space=spaces.Discrete(1),
            observation_components=(polar_bench.Component("x"),), action_components=(polar_bench.Component("a"),),
            max_episode_steps=10, package="test", package_version="0", text_note="none"))

    def _native_reset(self, seed):
        import numpy as np

        self.t = 0
        return np.zeros(1, np.float32), {}

    def _native_step(self, action):
        import numpy as np

        self.t += 1
        if self.t == 2:
            {}["missing key"]
        return np.zeros(1, np.float32), 0.0, False, False, {}


def test_native_crash_is_one_typed_error_with_task_seed_step_and_traceback():
    polar_bench.register_family("crash", _Crashing)
    h = polar_bench.make("crash/now")
    h.reset(seed=42)
    h.step(0)
    with pytest.raises(HarnessError) as err:
        h.step(0)
    e = err.value
    assert (e.task_id, e.seed, e.step) == ("crash/now", 42, 2)
    assert "KeyError" in str(e) and "'missing key'" in e.native_traceback
    assert "crash/now failed at step 2 of the episode with seed 42" in str(e)
    with pytest.raises(polar_bench.errors.EpisodeOverError):
        h.step(0)
    h.close()


class _Paying(polar_bench.Harness):
    """pay/<rewards>: pays the comma-separated rewards, one per step, within the range (0, 1)."""

    family = "pay"

    @staticmethod
    def task_names():
        return ["0.5,1.0000001,2", "0.5,nan", "0.5,none"]

    def __init__(self, name, *, text=False, max_episode_steps=None):
        import numpy as np
        from gymnasium import spaces

        super().__init__()
        self.rewards = [None if r == "none" else float(r) for r in name.split(",")]
        self._finish_setup(polar_bench.TaskInfo(
            id=f"pay/{name}", domain="test", description="pays fixed rewards",
            observation_space=spaces.Box(0, 1, (1,), np.float32), action_space=spaces.Discrete(1),
            observation_components=(polar_bench.Component("x"),), action_components=(polar_bench.Component("a"),),
            reward_range=(0.0, 1.0), max_episode_steps=10, package="test", package_version="0", text_note="none"))

    def _native_reset(self, seed):
        import numpy as np

        self.t = 0
        return np.zeros(1, np.float32), {}

    def _native_step(self, action):
        import numpy as np

        self.t += 1
        return np.zeros(1, np.float32), self.rewards[self.t - 1], False, False, {}


@pytest.mark.parametrize("name, bad", [("0.5,1.0000001,2", "2.0"), ("0.5,nan", "nan"), ("0.5,none", "nan")])
def test_a_reward_outside_the_declared_range_is_the_environments_error(name, bad):
    """The declared per-step range is kept, not hoped for: 1 + 1e-7 is within the slack for rounding,
    2, NaN and a non-number end the episode as a HarnessError, so every recorded episode keeps the
    bounds the leaderboard's check derives from the range."""
    polar_bench.register_family("pay", _Paying)
    h = polar_bench.make(f"pay/{name}")
    h.reset(seed=1)
    assert h.step(0)[1] == 0.5
    if name.startswith("0.5,1.0"):
        assert h.step(0)[1] == 1.0000001
    with pytest.raises(HarnessError, match=r"outside the task's declared per-step range \(0.0, 1.0\)") as err:
        h.step(0)
    assert f"reward {bad}" in str(err.value)
    assert h.return_bounds(7) == (0.0, 7.0) and h.return_bounds(0) == (0.0, 0.0)
    with pytest.raises(polar_bench.errors.EpisodeOverError):
        h.step(0)
    h.close()


def test_return_bounds_narrowed_by_a_family():
    h = polar_bench.make("babyai/GoToLocal")
    assert h.return_bounds(64) == (0.0, 1.0) and h.return_bounds(1) == (0.0, 1.0)
    h.close()
    h = polar_bench.make("gym/MountainCar-v0")
    assert h.return_bounds(200) == (-200.0, 0.0)
    h.close()
    coinrun, bigfish = polar_bench.make("procgen/coinrun"), polar_bench.make("procgen/bigfish")
    assert coinrun.return_bounds(1000) == (0.0, 10.0)        # one goal bonus per episode
    assert bigfish.return_bounds(1000) == (0.0, float("inf"))  # fish can be eaten again and again
    coinrun.close()
    bigfish.close()
    stairs = polar_bench.make("nethack/Staircase")
    assert stairs.return_bounds(1000) == (-10.0, 1.0)  # penalties, then at most the goal's 1
    stairs.close()
