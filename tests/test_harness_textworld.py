"""TextWorld through the conformance suite; its games are generated deterministically and cached."""

import hashlib

import pytest
from harness_conformance import HarnessConformance

import polar_bench
from polar_bench.harness import textworld as family

pytest.importorskip("textworld")


@pytest.fixture(autouse=True, scope="module")
def _cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("POLAR_BENCH_CACHE", str(tmp_path_factory.mktemp("cache")))  # inherited by spawned workers
    yield
    mp.undo()


class TestTextWorldConformance(HarnessConformance):
    task_ids = ["textworld/Custom-Small", "textworld/CoinCollector-L5"]
    determinism_steps = 30


def test_registered_as_a_built_in_family():
    """polar_bench's own families are in the registry's one table; entry points are for third parties."""
    assert polar_bench.harness.family_factory("textworld").__module__ == "polar_bench.harness.textworld"
    assert polar_bench.harness.task_names("textworld") == list(family.TASKS)


def test_games_are_cached_and_regenerated_identically():
    path = family.game_file("Custom-Small", 11)
    assert path.parent == family.cache_dir() / "Custom-Small" and path.exists()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    path.unlink()
    again = family.game_file("Custom-Small", 11)
    assert again == path and hashlib.sha256(again.read_bytes()).hexdigest() == digest
    h = polar_bench.make("textworld/Custom-Small")
    _, info = h.reset(seed=11)
    h.close()
    assert info["game_sha256"] == digest


def test_observation_lists_commands_and_actions_choose_among_them():
    h = polar_bench.make("textworld/Custom-Small", text=True)
    obs, info = h.reset(seed=1)
    assert obs == info["text"] and "Quest:" in obs and "\n0: " in obs
    commands = [line.split(": ", 1)[1] for line in obs.split("Commands:\n", 1)[1].splitlines()]
    assert "look" in commands and "inventory" in commands
    _, _, _, _, info = h.step(commands.index("look"))
    assert info["command"] == "look"
    _, _, _, _, info = h.step(len(commands) + commands.index("inventory"))  # indices wrap around
    assert info["command"] == "inventory"
    h.close()


def test_winning_the_quest_terminates_with_the_score():
    # Coin Collector: the optimal walk is in the game's .json; play the commands that lead to the coin.
    h = polar_bench.make("textworld/CoinCollector-L5", max_episode_steps=100)
    obs, info = h.reset(seed=0)
    import json

    walk = json.loads(family.game_file("CoinCollector-L5", 0).with_suffix(".json").read_text())
    commands = walk["quests"][0]["commands"]
    total, term = 0.0, False
    for command in commands:
        listing = [line.split(": ", 1)[1] for line in obs.split("Commands:\n", 1)[1].splitlines()]
        obs, r, term, trunc, info = h.step(listing.index(command))
        total += r
    h.close()
    assert term and info["won"] and total == 1.0
