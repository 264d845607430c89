"""Suite v1 is released: its content hash is pinned, and its tasks and constants are checked."""

from __future__ import annotations

import os

import polar_bench
from polar_bench.suite import available_suites, load_suite

V1_HASH = "sha256:dc7fa51d27688ad96f0d7bb5fd7796b7f669d543d746fc30e85de459687027b4"


def test_v1_hash_is_pinned():
    # A released suite never changes. If this fails, you edited suites/v1.toml: revert it and make v2.
    assert load_suite("v1").hash == V1_HASH


def test_v1_is_found_from_any_working_directory(tmp_path):
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert "v1" in available_suites()
        assert load_suite("v1").hash == V1_HASH
    finally:
        os.chdir(here)


def test_v1_contents():
    s = load_suite("v1")
    domains = {d.name: [t.id for t in s.tasks if t.domain == d.name] for d in s.domains}
    assert domains["classic"] == ["gym/CartPole-v1", "gym/Acrobot-v1", "gym/MountainCar-v0", "gym/Pendulum-v1"]
    assert len(domains["dmc"]) == 6 and "dmc/ball_in_cup-catch" in domains["dmc"]
    assert len(domains["procgen"]) == 16
    assert [t.split("/")[1] for t in domains["nethack"]] == ["Score", "Staircase", "StaircasePet", "Oracle",
                                                             "Gold", "Eat", "Scout"]
    assert domains["babyai"][0] == "babyai/GoToRedBall" and len(domains["babyai"]) >= 5
    assert s.runs == 3
    for t in s.tasks:
        assert t.low.source and t.high.source and t.high.value > t.low.value
        if t.domain == "procgen":
            assert t.options == {"distribution_mode": "easy", "start_level": 200, "num_levels": 0}
            assert not t.low.measured and not t.high.measured
        if t.domain == "nethack":
            assert t.options["max_episode_steps"] == 1000
    coinrun = s.task("procgen/coinrun")
    assert (coinrun.low.value, coinrun.high.value) == (5.0, 10.0)
    assert {p: s.pins[p] for p in ("gymnasium", "nle", "numpy")} == {"gymnasium": "1.2.0", "nle": "1.3.0",
                                                                       "numpy": "1.26.4"}


def test_every_v1_task_builds_with_its_options():
    s = load_suite("v1")
    for t in s.tasks:
        h = polar_bench.make(t.id, **t.options)
        assert h.task_info.domain == t.domain, t.id
        if t.domain == "nethack":
            assert h.task_info.max_episode_steps == 1000
        h.close()
