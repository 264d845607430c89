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


def test_registered_through_the_entry_point_group():
    from importlib import metadata

    eps = {ep.name: ep.value for ep in metadata.entry_points(group=polar_bench.harness.ENTRY_POINT_GROUP)}
    assert eps.get("crafter") == "polar_bench.harness.crafter:CrafterHarness"
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
