import ctypes
import os
import sys

import numpy as np
import pytest
from harness_conformance import HarnessConformance, action_sequence, trajectory

import polar_bench
from polar_bench.errors import MissingDependencyError

try:
    import nle  # noqa: F401
except ImportError:  # the conformance and family tests need nle; the last test does not
    nle = None

needs_nle = pytest.mark.skipif(nle is None, reason="nle is not installed")


@needs_nle
class TestNetHackConformance(HarnessConformance):
    task_ids = ["nethack/Score", "nethack/Staircase", "nethack/Challenge"]
    determinism_steps = 60


def play(harness, seed, n, action_seed=0):
    obs, _ = harness.reset(seed=seed)
    for a in action_sequence(harness.task_info, n, action_seed):
        obs, r, term, trunc, info = harness.step(a)
        if term or trunc:
            break
    return obs


@needs_nle
def test_actions_are_named():
    names = polar_bench.make("nethack/Score").task_info.action_names
    assert names[:3] == ("next message (Enter)", "move north (k)", "move east (l)")
    assert {"move far southwest (B)", "go down the stairs (>)", "wait a turn (.)", "kick (^d)",
            "eat (e)", "search (s)"} <= set(names)
    challenge = polar_bench.make("nethack/Challenge").task_info.action_names
    assert len(challenge) == 121 == len(set(challenge))
    assert {"pray (M-p)", "list spells (+)", "type + (+)", "cancel (Esc)"} <= set(challenge)


@needs_nle
def test_longer_trajectories_are_deterministic_with_fixed_levels():
    overrides = {"fixed_levels": True}
    a = trajectory("nethack/Score", overrides, 11, 400)
    assert a == trajectory("nethack/Score", overrides, 11, 400)
    assert a != trajectory("nethack/Score", {}, 11, 400)  # lgen changes the dungeon


@needs_nle
def test_nethack_seeds_and_start_time_are_pinned():
    from polar_bench.harness.nethack import _game_variable, nle_seeds

    h = polar_bench.make("nethack/Score")
    for seed in (5, 6, 5):
        _, info = h.reset(seed=seed)  # resetting again also proves that no library handle was kept
        expected = nle_seeds(seed)
        assert info["nle_seeds"] == {**expected, "lgen": None}
        assert h._env.get_seeds()[:3] == (expected["core"], expected["disp"], False)
        birthday = _game_variable(h._env.nethack.dlpath, "ubirthday", ctypes.c_long)
        assert birthday == expected["birthday"]
    h.close()


@needs_nle
def test_step_limit_is_nles_and_a_truncation():
    h = polar_bench.make("nethack/Score", max_episode_steps=7)
    assert h._env._max_episode_steps == 7 and h.task_info.max_episode_steps == 7
    assert polar_bench.make("nethack/Score").task_info.max_episode_steps == 5000
    h.reset(seed=0)
    for _ in range(7):
        _, _, term, trunc, info = h.step(19)  # wait a turn
    assert trunc and not term and info["end_status"] == "aborted"
    h.close()


@needs_nle
def test_no_ttyrec_and_scratch_files_removed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    h = polar_bench.make("nethack/Score", max_episode_steps=50)
    vardir = h._env.nethack._vardir
    for seed in range(2):
        play(h, seed, 50)
    written = [f for _, _, files in os.walk(vardir) for f in files]
    assert not [f for f in written if "ttyrec" in f]
    assert h._env.savedir is None
    h.close()
    assert not os.path.exists(vardir)
    assert list(tmp_path.iterdir()) == []


@needs_nle
def test_text_rendering():
    h = polar_bench.make("nethack/Score", text=True)
    _, info = h.reset(seed=3)
    text = info["text"]
    lines = text.split("\n")
    assert lines[0] == "Message: Hello Agent, welcome to NetHack!  You are a neutral male human Monk."
    assert "@" in text and "Status:" in lines and lines[-1].startswith("Dlvl:1 ")
    assert all(line == line.rstrip() for line in lines)
    assert lines[1].strip()  # no blank rows above the map
    h.close()


def test_render_text_layout():
    from polar_bench.harness.nethack import render_text

    tty = np.full((24, 80), ord(" "), dtype=np.uint8)
    for row, s in ((0, "Hello"), (3, "  |.@.|"), (22, "Agent St:18"), (23, "Dlvl:1 $:0")):
        tty[row, :len(s)] = np.frombuffer(s.encode(), dtype=np.uint8)
    message = np.zeros(256, dtype=np.uint8)
    message[:5] = np.frombuffer(b"Hello", dtype=np.uint8)
    assert render_text({"message": message, "tty_chars": tty}) == (
        "Message: Hello\n  |.@.|\nStatus:\nAgent St:18\nDlvl:1 $:0")
    assert render_text({"message": np.zeros(256, np.uint8), "tty_chars": tty}).startswith(
        "Message: (none)\nHello\n\n\n  |.@.|")


@needs_nle
def test_observation_keys_and_copies():
    h = polar_bench.make("nethack/Gold", observation_keys=["inv_strs", "glyphs"])
    assert list(h.task_info.observation_space.spaces) == sorted(
        ["glyphs", "blstats", "message", "tty_chars", "inv_strs"])
    first, _ = h.reset(seed=0)
    kept = {k: v.copy() for k, v in first.items()}
    h.step(1)
    h.step(2)
    assert all(np.array_equal(first[k], kept[k]) for k in kept)  # not NLE's reused buffers
    h.close()
    with pytest.raises(ValueError, match="internal"):
        polar_bench.make("nethack/Score", observation_keys=["internal"])
    with pytest.raises(ValueError, match="unknown option"):
        polar_bench.make("nethack/Score", savedir="/tmp")


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "nle", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "polar_bench\[nethack\]"'):
        polar_bench.make("nethack/Score")


@needs_nle
def test_screen_descriptions_is_refused_because_it_alters_the_game():
    with pytest.raises(ValueError, match="alters the"):
        polar_bench.make("nethack/Score", observation_keys=["screen_descriptions"])


def _play_random(env, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    while True:
        _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            return info


def test_episode_record_says_whether_the_task_succeeded_and_how_deep():
    env = polar_bench.make("nethack/Staircase", max_episode_steps=300)
    try:
        won = _play_random(env, 33)  # random play that finds the stairs down on seed 33 (189 steps)
        assert won["episode_record"] == {"end_status": "task_successful", "success": True, "depth": 1}
        lost = _play_random(env, 0)
        assert lost["episode_record"]["success"] is False
        assert lost["episode_record"]["end_status"] == lost["end_status"] != "task_successful"
    finally:
        env.close()
    score = polar_bench.make("nethack/Score", max_episode_steps=20)
    try:
        record = _play_random(score, 1)["episode_record"]
        assert record["success"] is False and record["depth"] >= 1  # Score has no goal to reach
    finally:
        score.close()
