import numpy as np
import pytest
from harness_conformance import HarnessConformance

import polar_bench
from polar_bench.harness import task_names

pytest.importorskip("mujoco")


class TestMujocoConformance(HarnessConformance):
    task_ids = ["mujoco/HalfCheetah-v5", "mujoco/Hopper-v5"]


def test_family_lists_the_five_locomotion_tasks():
    assert task_names("mujoco") == ["Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5", "Walker2d-v5"]


def test_same_environment_as_the_gym_family():
    a, b = polar_bench.make("mujoco/Walker2d-v5"), polar_bench.make("gym/Walker2d-v5")
    oa, _ = a.reset(seed=3)
    ob, _ = b.reset(seed=3)
    act = np.full(a.action_space.shape, 0.3, dtype=np.float32)
    for _ in range(5):
        oa, ra, *_ = a.step(act)
        ob, rb, *_ = b.step(act)
    assert np.array_equal(oa, ob) and ra == rb
    assert a.task_info.id == "mujoco/Walker2d-v5" and "walker" in a.task_info.description
    a.close()
    b.close()
