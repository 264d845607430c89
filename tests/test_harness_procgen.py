
import numpy as np
import pytest
from harness_conformance import HarnessConformance, assert_missing_package_names_extra, assert_quiet, trajectory

import polar_bench
from polar_bench.errors import MissingDependencyError
from polar_bench.harness.procgen import LEVEL_SEED_BOUND, level_for_seed

try:
    from polar_bench.harness.procgen import _import_procgen

    procgen_env = _import_procgen()
except MissingDependencyError:  # the conformance and family tests need procgen; the last test does not
    procgen_env = None

needs_procgen = pytest.mark.skipif(procgen_env is None, reason="procgen is not installed")


@needs_procgen
class TestProcgenConformance(HarnessConformance):
    task_ids = ["procgen/coinrun", "procgen/starpilot"]


def native_frames(game, level, actions, mode="easy"):
    """Frames and rewards of native procgen on one level, until its episode ends."""
    env = procgen_env.ProcgenGym3Env(num=1, env_name=game, start_level=level, num_levels=1,
                                     distribution_mode=mode, num_threads=0, rand_seed=0)
    _, ob, _ = env.observe()
    frames, rewards = [ob["rgb"][0]], []
    for a in actions:
        env.act(np.array([a], dtype=np.int32))
        rew, ob, first = env.observe()
        rewards.append(float(rew[0]))
        if first[0]:
            break
        frames.append(ob["rgb"][0])
    env.close()
    return frames, rewards


def test_level_rule():
    assert [level_for_seed(s, 5, 3) for s in range(7)] == [5, 6, 7, 5, 6, 7, 5]
    assert level_for_seed(7, 1000, 0) == 1007
    assert level_for_seed(0, 0, 0) == 0
    assert level_for_seed(LEVEL_SEED_BOUND - 1, 2, 0) == 1  # wraps into procgen's level-seed range
    assert level_for_seed(123, 10**6, 200) == 10**6 + 123 % 200


@needs_procgen
def test_reset_plays_the_level_of_the_rule_exactly_as_native_procgen():
    h = polar_bench.make("procgen/bigfish", distribution_mode="hard", start_level=1000)
    actions = [int(a) for a in np.random.default_rng(0).integers(0, 15, size=60)]
    for seed in (0, 41):
        obs, info = h.reset(seed=seed)
        assert info["level"] == 1000 + seed
        frames, rewards = native_frames("bigfish", 1000 + seed, actions, mode="hard")
        assert np.array_equal(obs, frames[0])
        for t, a in enumerate(actions[:len(frames) - 1]):
            obs, r, term, trunc, _ = h.step(a)
            assert np.array_equal(obs, frames[t + 1]) and r == rewards[t]
    h.close()


@needs_procgen
def test_num_levels_repeats_levels():
    overrides = {"start_level": 10, "num_levels": 3}
    assert trajectory("procgen/coinrun", overrides, 1, 30) == trajectory("procgen/coinrun", overrides, 4, 30)
    h = polar_bench.make("procgen/coinrun", **overrides)
    assert [h.reset(seed=s)[1]["level"] for s in range(4)] == [10, 11, 12, 10]
    assert h.task_info.options == {"distribution_mode": "easy", "start_level": 10, "num_levels": 3}
    h.close()


@needs_procgen
def test_actions_are_named_by_buttons():
    names = polar_bench.make("procgen/coinrun").task_info.action_names
    assert names[:9] == ("left+down", "left", "left+up", "down", "noop", "up", "right+down", "right",
                         "right+up")
    assert names[9] == "D (no effect: stand still)"
    star = polar_bench.make("procgen/starpilot").task_info.action_names
    assert star[9] == "fire forward (D)" and star[10] == "fire backward (A)"
    ninja = polar_bench.make("procgen/ninja").task_info.action_names
    assert ninja[11] == "throw star up (W)"
    for names in (star, ninja):
        assert len(set(names)) == 15


@needs_procgen
def test_step_limits_are_the_games_own():
    limits = {"bigfish": 6000, "maze": 500, "coinrun": 1000, "plunder": 4000}
    for game, steps in limits.items():
        h = polar_bench.make(f"procgen/{game}")
        assert h.task_info.max_episode_steps == steps
        h.close()
    with pytest.raises(ValueError, match="500"):
        polar_bench.make("procgen/maze", max_episode_steps=501)


@needs_procgen
def test_game_time_limit_is_a_truncation_at_the_same_step_as_native():
    # Standing still in a maze never finds the cheese: native procgen ends the episode at 500 steps.
    frames, _ = native_frames("maze", 3, [4] * 500)
    assert len(frames) == 500  # the 500th step ended the native episode
    h = polar_bench.make("procgen/maze")
    h.reset(seed=3)
    for t in range(500):
        obs, r, term, trunc, _ = h.step(4)
        assert not term
        assert trunc == (t == 499)
    h.close()


@needs_procgen
def test_game_over_repeats_the_last_frame():
    h = polar_bench.make("procgen/chaser")
    rng = np.random.default_rng(0)
    for seed in range(5):
        prev, _ = h.reset(seed=seed)
        while True:
            obs, r, term, trunc, info = h.step(int(rng.integers(15)))
            if term:
                assert np.array_equal(obs, prev) and "level_complete" in info
                h.close()
                return
            assert not trunc
            prev = obs
    pytest.fail("no episode ended")


@needs_procgen
def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="extreme"):
        polar_bench.make("procgen/coinrun", distribution_mode="extreme")
    with pytest.raises(ValueError, match="exploration"):
        polar_bench.make("procgen/coinrun", distribution_mode="exploration")
    with pytest.raises(ValueError, match="start_level"):
        polar_bench.make("procgen/coinrun", start_level=-1)
    with pytest.raises(ValueError, match="frame_skip"):
        polar_bench.make("procgen/coinrun", frame_skip=4)
    h = polar_bench.make("procgen/dodgeball", distribution_mode="memory", use_backgrounds=False)
    assert h.task_info.options["use_backgrounds"] is False
    h.close()


@needs_procgen
def test_import_is_quiet():
    assert_quiet("procgen/coinrun")


def test_missing_package_names_the_install_command(monkeypatch):
    assert_missing_package_names_extra(monkeypatch, "procgen", "procgen", "procgen/coinrun")
