import subprocess
import sys

import numpy as np
import pytest
from harness_conformance import HarnessConformance

import polar_bench
from polar_bench.harness import task_names
from polar_bench.harness.rollout import random_episode

pytest.importorskip("pybullet")


class TestBulletConformance(HarnessConformance):
    task_ids = ["bullet/HalfCheetah", "bullet/Hopper"]


def test_family_lists_the_five_morphologies_shared_with_mujoco():
    assert task_names("bullet") == ["Ant", "HalfCheetah", "Hopper", "Humanoid", "Walker2d"]
    from polar_bench.harness.bullet import TASKS

    assert {v[2] for v in TASKS.values()} == {f"mujoco/{n}" for n in task_names("mujoco")}


def test_spaces_and_named_components():
    h = polar_bench.make("bullet/Walker2d")
    info = h.task_info
    assert info.observation_space.shape == (22,) and info.action_space.shape == (6,)
    names = [c.name for c in info.observation_components]
    assert names[:3] == ["z_offset", "sin_angle_to_target", "cos_angle_to_target"]
    assert "thigh_joint_position" in names and "foot_left_contact" in names and len(names) == 22
    assert [c.name for c in info.action_components][:3] == ["thigh_joint", "leg_joint", "foot_joint"]
    assert "mujoco/Walker2d-v5" in info.description and info.package == "pybullet"
    h.close()
    humanoid = polar_bench.make("bullet/Humanoid")  # its action order is its motor list, not its joint list
    assert [c.name for c in humanoid.task_info.action_components][:3] == ["abdomen_z", "abdomen_y", "abdomen_x"]
    humanoid.close()


def test_whole_random_episodes_repeat_for_a_seed_in_one_harness_and_across_harnesses():
    # PyBullet keeps contact and solver state across its own resets; the harness builds a new physics
    # client per episode, so an episode never depends on the ones played before it.
    first = polar_bench.make("bullet/Hopper", max_episode_steps=200)
    once = [random_episode(first, s, np.random.default_rng(s)) for s in range(4)]
    again = [random_episode(first, s, np.random.default_rng(s)) for s in reversed(range(4))][::-1]
    other = polar_bench.make("bullet/Hopper", max_episode_steps=200)
    fresh = [random_episode(other, s, np.random.default_rng(s)) for s in range(4)]
    first.close()
    other.close()
    assert once == again == fresh and len(set(once)) == 4


def test_no_output_on_the_worker_descriptors():
    # pybullet prints its build time to stderr at import and "argv[0]=" to stdout when a client connects.
    code = ("import polar_bench\nh = polar_bench.make('bullet/Ant')\nh.reset(seed=0)\n"
            "h.step(h.action_space.sample())\nh.close()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
