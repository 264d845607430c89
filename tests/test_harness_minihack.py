"""MiniHack through the conformance suite, registered through the entry-point group, and its text."""

import pytest
from harness_conformance import HarnessConformance, action_sequence

import polar_bench
from polar_bench.harness import minihack as family

minihack = pytest.importorskip("minihack")


class TestMiniHackConformance(HarnessConformance):
    task_ids = ["minihack/Room-5x5", "minihack/MazeWalk-9x9", "minihack/Eat"]
    determinism_steps = 60


def test_registered_as_a_built_in_family():
    """polar_bench's own families are in the registry's one table; entry points are for third parties."""
    assert polar_bench.harness.family_factory("minihack").__module__ == "polar_bench.harness.minihack"
    assert polar_bench.harness.task_names("minihack") == list(family.TASKS)


def test_seed_fixes_the_level_and_text_shows_the_map():
    def first_text(seed):
        h = polar_bench.make("minihack/MazeWalk-9x9", text=True)
        _, info = h.reset(seed=seed)
        h.close()
        return info["text"]

    a, b, c = first_text(5), first_text(5), first_text(6)
    assert a == b and a != c  # the maze comes from the episode seed
    assert "@" in a and "Status:" in a and "Dlvl:1" in a


def test_reaching_the_stairs_ends_the_episode_with_reward_one():
    h = polar_bench.make("minihack/Room-5x5", max_episode_steps=200)
    total, end = 0.0, None
    for seed in range(3):
        h.reset(seed=seed)
        for a in action_sequence(h.task_info, 200, seed):
            _, r, term, trunc, info = h.step(a)
            total += r
            if term or trunc:
                end = info.get("end_status"), term
                break
        if end and end[1]:
            break
    h.close()
    assert end == ("task_successful", True) and total > 0.5


def test_nle_pin_matters_to_minihack_tasks():
    # A suite with a MiniHack task and a wrong nle pin is reported; a suite of BabyAI tasks is not.
    import types

    from polar_bench._optional import version_of
    from polar_bench.evaluate.config import check_pins

    suite = types.SimpleNamespace(pins={"nle": "0.0.1", "minihack": version_of("minihack")})
    task = types.SimpleNamespace(id="minihack/Room-5x5")
    assert check_pins(suite, [task]) == {"nle": {"pinned": "0.0.1", "installed": version_of("nle")}}
    assert check_pins(suite, [types.SimpleNamespace(id="babyai/GoToRedBall")]) == {}


def test_building_prints_nothing():
    # minihack imports pkg_resources, whose deprecation warning would reach the terminal of every worker.
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-W", "default", "-c",
                          "import polar_bench; polar_bench.make('minihack/Room-5x5').close()"],
                         capture_output=True, text=True, check=True)
    assert run.stderr == "" and run.stdout == ""
