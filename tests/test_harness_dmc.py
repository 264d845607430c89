import sys

import numpy as np
import pytest

pytest.importorskip("dm_control")

from harness_conformance import HarnessConformance, action_sequence  # noqa: E402

import polar_bench  # noqa: E402
from polar_bench.errors import MissingDependencyError, UnknownTaskError  # noqa: E402


class TestDMCConformance(HarnessConformance):
    task_ids = ["dmc/cartpole-swingup", "dmc/cheetah-run"]


def _native_rollout(domain, task, seed, actions):
    """Observations (flattened in observation_spec order, as float32) and rewards of a fresh load."""
    from dm_control import suite

    env = suite.load(domain, task, task_kwargs={"random": seed})
    keys = list(env.observation_spec())
    spec = env.action_spec()
    flat = lambda o: np.concatenate([np.ravel(o[k]) for k in keys]).astype(np.float32)  # noqa: E731
    ts = env.reset()
    obs, rewards = [flat(ts.observation)], []
    for a in actions:
        native = (spec.maximum + spec.minimum) / 2 + (spec.maximum - spec.minimum) / 2 * a.astype(np.float64)
        ts = env.step(native)
        obs.append(flat(ts.observation))
        rewards.append(ts.reward)
    env.close()
    return obs, rewards


def test_task_ids_cover_the_suite_split_at_the_first_dash():
    from dm_control import suite

    names = polar_bench.harness.task_names("dmc")
    expected = {f"{d}-{t}" for d, t in suite.ALL_TASKS if d != "lqr"}
    assert set(names) == expected
    for name in ("cheetah-run", "ball_in_cup-catch", "cartpole-swingup", "walker-walk", "reacher-easy",
                 "finger-spin", "finger-turn_easy", "humanoid_CMU-run", "point_mass-easy"):
        assert name in names
    h = polar_bench.make("dmc/ball_in_cup-catch")
    assert h.task_info.native_id == "ball_in_cup/catch"
    assert h.task_info.domain == "dmc"
    assert h.task_info.max_episode_steps == 1000 and h.task_info.reward_range == (0.0, 1.0)
    h.close()


def test_reseeding_per_episode_equals_a_fresh_load():
    h = polar_bench.make("dmc/cartpole-swingup")
    actions = action_sequence(h.task_info, 25, seed=3)
    h.reset(seed=5)  # an earlier episode must leave no trace
    for a in actions[:10]:
        h.step(a)
    obs, _ = h.reset(seed=11)
    got_obs, got_rewards = [obs], []
    for a in actions:
        obs, r, *_ = h.step(a)
        got_obs.append(obs)
        got_rewards.append(r)
    h.close()
    want_obs, want_rewards = _native_rollout("cartpole", "swingup", 11, actions)
    assert all(np.array_equal(a, b) for a, b in zip(got_obs, want_obs, strict=True))
    assert got_rewards == want_rewards


def test_actions_are_rescaled_to_the_native_bounds():
    h = polar_bench.make("dmc/quadruped-walk")  # actuator ranges differ from [-1, 1]
    from dm_control import suite

    spec = suite.load("quadruped", "walk").action_spec()
    assert not np.allclose(spec.maximum, 1.0)
    n = spec.shape[0]
    assert np.allclose(h._convert_action(np.ones(n, dtype=np.float32)), spec.maximum)
    assert np.allclose(h._convert_action(-np.ones(n, dtype=np.float32)), spec.minimum)
    assert np.allclose(h._convert_action(np.zeros(n, dtype=np.float32)), (spec.maximum + spec.minimum) / 2)
    comps = h.task_info.action_components
    assert [(c.low, c.high) for c in comps] == list(zip(spec.minimum.tolist(), spec.maximum.tolist(), strict=True))
    physics = h._physics
    assert [c.name for c in comps] == [physics.model.id2name(i, "actuator") for i in range(n)]
    h.close()


def test_action_components_are_the_actuators():
    h = polar_bench.make("dmc/cheetah-run")
    assert [c.name for c in h.task_info.action_components] == [
        "bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"]
    assert all((c.low, c.high) == (-1.0, 1.0) for c in h.task_info.action_components)
    h.close()


def test_observation_keys_in_observation_spec_order():
    h = polar_bench.make("dmc/walker-walk")  # has a scalar key ('height') between two vectors
    names = [c.name for c in h.task_info.observation_components]
    assert names == [f"orientations[{i}]" for i in range(14)] + ["height"] + [f"velocity[{i}]" for i in range(9)]
    assert h.observation_space.shape == (24,) and h.observation_space.dtype == np.float32
    obs, _ = h.reset(seed=2)
    want, _ = _native_rollout("walker", "walk", 2, [])
    assert np.array_equal(obs, want[0])
    assert h.task_info.observation_components[14].unit == "m"
    h.close()


def test_matrix_keys_are_flattened_row_major():
    h = polar_bench.make("dmc/manipulator-bring_ball")
    names = [c.name for c in h.task_info.observation_components]
    assert names[:3] == ["arm_pos[0,0]", "arm_pos[0,1]", "arm_pos[1,0]"]
    h.close()


def test_text_names_the_components():
    h = polar_bench.make("dmc/cartpole-swingup", text=True)
    _, info = h.reset(seed=0)
    assert info["text"].startswith("position: cart_x=")
    assert "velocity: slider=" in info["text"]
    h.close()


def test_step_limit_can_exceed_the_native_time_limit():
    h = polar_bench.make("dmc/cartpole-balance", max_episode_steps=1003)
    h.reset(seed=0)
    zero = np.zeros(1, dtype=np.float32)
    for i in range(1003):
        _, _, term, trunc, _ = h.step(zero)
        assert not term
        assert trunc == (i == 1002)
    h.close()


def test_random_task_kwarg_is_rejected():
    with pytest.raises(ValueError, match="random"):
        polar_bench.make("dmc/cartpole-swingup", task_kwargs={"random": 3})


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "dm_control", None)
    with pytest.raises(MissingDependencyError) as err:
        polar_bench.make("dmc/cheetah-run")
    assert 'pip install "polar_bench[dmc]"' in str(err.value)


def test_unknown_id_suggests_the_closest():
    with pytest.raises(UnknownTaskError) as err:
        polar_bench.make("dmc/cheetah-runn")
    assert "Did you mean" in str(err.value) and "dmc/cheetah-run" in str(err.value)
    with pytest.raises(UnknownTaskError):
        polar_bench.make("dmc/lqr-lqr_2_1")
