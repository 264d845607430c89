"""Crafter through the conformance suite, its achievements, its text and its score."""

import math

import numpy as np
import pytest
from harness_conformance import HarnessConformance

import polar_bench
from polar_bench.harness.crafter import crafter_score

pytest.importorskip("crafter")


class TestCrafterConformance(HarnessConformance):
    task_ids = ["crafter/Reward", "crafter/NoReward"]


def test_registered_as_a_built_in_family():
    """polar_bench's own families are in the registry's one table; entry points are for third parties."""
    assert polar_bench.harness.family_factory("crafter").__module__ == "polar_bench.harness.crafter"
    assert polar_bench.harness.task_names("crafter") == ["Reward", "NoReward"]


def test_collecting_wood_is_an_achievement_with_reward_one():
    h = polar_bench.make("crafter/Reward", text=True)
    names = h.task_info.action_names
    _, info = h.reset(seed=3)
    assert "tree" in info["text"] and info["achievements"]["collect_wood"] == 0
    # Seed 3 (text above): the nearest tree is 2 south and 4 west of the player.
    plan = ["move_left"] * 4 + ["move_down"] * 1 + ["move_down"] + ["do"] * 8
    rewards = []
    for name in plan:
        _, r, term, trunc, info = h.step(names.index(name))
        rewards.append(r)
    h.close()
    assert info["achievements"]["collect_wood"] >= 1 and info["inventory"]["wood"] >= 1
    assert 1.0 in rewards
    assert "wood" in info["text"]


def test_episode_end_lists_the_achievements_unlocked():
    h = polar_bench.make("crafter/NoReward", max_episode_steps=5)
    h.reset(seed=0)
    for _ in range(5):
        _, r, term, trunc, info = h.step(0)
        assert r == 0.0
    h.close()
    assert trunc and not term and info["achievements_unlocked"] == []


def test_crafter_score_is_the_papers_geometric_mean():
    assert crafter_score([0.0] * 22) == 0.0
    assert math.isclose(crafter_score([100.0] * 22), 100.0)
    rates = np.linspace(0, 90, 22)
    assert math.isclose(crafter_score(rates), np.exp(np.log(1 + rates).mean()) - 1)


SUITE = """
[suite]
name = "crafter-test"
version = "0.0.1"
description = "Crafter, short episodes."
seed = 3
runs = 1
episodes = 2

[pins]
crafter = "1.8.3"

[[domains]]
name = "crafter"
description = "Crafter."
training = "anything"
budget = "none"

[[tasks]]
id = "crafter/Reward"
domain = "crafter"
options = { max_episode_steps = 60 }
low = { value = 0.0, source = "test", measured = false }
high = { value = 22.0, source = "test", measured = false }
"""

AGENT = """
def make_agent(task, run):
    class Agent:
        def act(self, observation, info):
            return 5  # "do": collects what the player faces (wood at a tree)
        def episode_info(self):
            return {"harness": {"achievements": ["collect_diamond"]}}  # cannot forge the harness's record
    return Agent()
"""


def test_achievements_are_kept_in_the_episode_record(tmp_path):
    from polar_bench.cli import main

    (tmp_path / "s.toml").write_text(SUITE)
    (tmp_path / "agent.py").write_text(AGENT)
    out = tmp_path / "r.json"
    code = main(["evaluate", str(tmp_path / "agent.py"), "--suite", str(tmp_path / "s.toml"), "--out", str(out),
                 "--workers", "1"])
    assert code == 0
    episodes = polar_bench.read_results(out).to_json()["episodes"]
    assert len(episodes) == 2
    for e in episodes:
        assert e["length"] == 60 and isinstance(e["harness"]["achievements"], list)
        assert "collect_diamond" not in e["harness"]["achievements"]


def test_building_prints_nothing():
    # crafter imports old gym, which prints a notice on stderr: kept off the terminal of every worker.
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", "import polar_bench; polar_bench.make('crafter/Reward').close()"],
                         capture_output=True, text=True, check=True)
    assert run.stderr == "" and run.stdout == ""


def test_whole_random_episodes_repeat_within_a_process_and_across_harnesses():
    # Crafter picks the creature to despawn by its position in a set ordered by memory address; before
    # the harness ordered those sets, seed 3 of this loop lasted 366 steps once and 158 steps the next time.
    from polar_bench.harness.rollout import random_episode

    first = polar_bench.make("crafter/NoReward")
    once = [random_episode(first, s, np.random.default_rng(s)) for s in range(4)]
    again = [random_episode(first, s, np.random.default_rng(s)) for s in range(4)]
    other = polar_bench.make("crafter/NoReward")
    fresh = [random_episode(other, s, np.random.default_rng(s)) for s in range(4)]
    first.close()
    other.close()
    assert once == again == fresh
    assert len({length for _, length in once}) > 1 and all(length > 100 for _, length in once)
