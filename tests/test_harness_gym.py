import numpy as np
import pytest
from harness_conformance import HarnessConformance

import polar_bench


class TestGymConformance(HarnessConformance):
    task_ids = ["gym/CartPole-v1", "gym/Acrobot-v1", "gym/MountainCar-v0", "gym/Pendulum-v1"]


def test_pendulum_actions_are_rescaled_to_native_torque():
    h = polar_bench.make("gym/Pendulum-v1")
    h.reset(seed=0)
    assert h._convert_action(np.array([1.0], dtype=np.float32)).tolist() == [2.0]
    assert h._convert_action(np.array([-0.5], dtype=np.float32)).tolist() == [-1.0]
    torque = h.task_info.action_components[0]
    assert (torque.unit, torque.low, torque.high) == ("N*m", -2.0, 2.0)
    h.close()


def test_step_limit_matches_gymnasium_registration():
    h = polar_bench.make("gym/CartPole-v1")
    assert h.task_info.max_episode_steps == 500
    h.reset(seed=0)
    h.close()


def test_mujoco_v5_ids_work():
    pytest.importorskip("mujoco")
    h = polar_bench.make("gym/HalfCheetah-v5")
    obs, _ = h.reset(seed=0)
    assert obs.shape == h.task_info.observation_space.shape
    assert h.task_info.domain == "mujoco"
    obs, r, *_ = h.step(np.zeros(6, dtype=np.float32))
    assert np.isfinite(r)
    h.close()


def test_unseeded_resets_continue_the_seeded_generator():
    h = polar_bench.make("gym/CartPole-v1")
    h.reset(seed=5)
    first = [h.reset()[1]["seed"] for _ in range(3)]
    h.reset(seed=5)
    again = [h.reset()[1]["seed"] for _ in range(3)]
    assert first == again and len(set(first)) == 3
    h.close()
