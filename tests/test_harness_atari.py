"""The `atari/` family: the conformance suite, and the Atari 100k protocol setting by setting."""

import json
from pathlib import Path

import numpy as np
import pytest
from harness_conformance import HarnessConformance, assert_missing_package_names_extra, assert_quiet

import polar_bench
from polar_bench.errors import HarnessError, HarnessOptionError
from polar_bench.harness.atari import FRAME_SKIP, MAX_EPISODE_STEPS, noop_count, resize_84, rom_id

try:
    import ale_py
except ImportError:  # the conformance and protocol tests need ale-py; the last test does not
    ale_py = None

needs_ale = pytest.mark.skipif(ale_py is None, reason="ale-py is not installed")
DATA = Path(__file__).parent.parent / "polar_bench" / "data" / "atari100k"


@needs_ale
class TestAtariConformance(HarnessConformance):
    task_ids = ["atari/Pong", "atari/Breakout", "atari/MsPacman"]


def random_steps(h, n, seed=0, stop_at_life_loss=False):
    """Step ``h`` with uniformly random actions; yields each step's (obs, reward, term, trunc, info)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        out = h.step(int(rng.integers(h.action_space.n)))
        yield out
        if out[2] or out[3]:
            return


def test_task_ids_are_the_benchmarks_26_games():
    published = sorted(json.loads((DATA / "HUMAN.json").read_text()))
    assert len(published) == 26
    assert polar_bench.harness.task_names("atari") == published
    assert sorted(json.loads((DATA / "RANDOM.json").read_text())) == published
    assert rom_id("MsPacman") == "ms_pacman" and rom_id("UpNDown") == "up_n_down" and rom_id("Pong") == "pong"


@needs_ale
def test_task_info_states_protocol_budget_and_package():
    h = polar_bench.make("atari/Breakout")
    info = h.task_info
    assert info.domain == "atari100k"
    assert info.package == "ale-py" and info.package_version == ale_py.__version__
    assert info.max_episode_steps == MAX_EPISODE_STEPS == 27_000
    assert "100,000 agent steps" in info.description and "no sticky actions" in info.description
    assert info.action_names == ("noop", "fire", "right", "left")
    assert info.observation_space.shape == (84, 84, 4)
    assert not info.has_text and "text" in info.text_note
    assert info.options == {"frame_stack": 4, "noop_max": 30, "terminal_on_life_loss": False,
                            "full_action_space": False}
    h.close()
    full = polar_bench.make("atari/Breakout", full_action_space=True, frame_stack=1)
    assert full.action_space.n == 18 and full.task_info.action_names[17] == "down-left+fire"
    assert full.observation_space.shape == (84, 84, 1)
    full.close()


@needs_ale
def test_one_step_is_four_frames_max_pooled_over_the_last_two():
    """The observation is resize(max(frame 3, frame 4)) of the step, checked against the raw ALE."""
    h = polar_bench.make("atari/MsPacman")  # ghosts flicker: max-pooling matters in this game
    h.reset(seed=0)
    ale = h._ale
    rng = np.random.default_rng(0)
    pooled_differs = 0
    for _ in range(150):
        a = int(rng.integers(h.action_space.n))
        state, frame0 = ale.cloneState(), ale.getEpisodeFrameNumber()
        native = h._actions[a]
        screens, reward = [], 0.0
        for _ in range(FRAME_SKIP):
            reward += ale.act(native)
            screens.append(ale.getScreenGrayscale())
        ale.restoreState(state)
        obs, r, term, trunc, _ = h.step(a)
        assert ale.getEpisodeFrameNumber() == frame0 + FRAME_SKIP
        assert r == reward
        expected = resize_84(np.maximum(screens[2], screens[3]))
        assert np.array_equal(obs[..., -1], expected)
        pooled_differs += not np.array_equal(expected, resize_84(screens[3]))
        assert not (term or trunc)
    assert pooled_differs > 0  # max-pooling changed some observations, so the check above has teeth
    h.close()


@needs_ale
def test_frames_stack_oldest_first_with_zeros_before_the_first():
    h = polar_bench.make("atari/Pong")
    obs, _ = h.reset(seed=1)
    assert not obs[..., :3].any() and obs[..., 3].any()
    frames = [obs[..., 3]]
    for obs, *_ in random_steps(h, 5):
        frames.append(obs[..., 3])
    assert np.array_equal(obs, np.stack(frames[-4:], axis=-1))
    h.close()


def test_resize_is_area_averaging():
    frame = np.zeros((210, 160), np.uint8)
    frame[:5, :] = 200  # the first two output rows average input rows 0-2.5 and 2.5-5
    out = resize_84(frame)
    assert out.shape == (84, 84) and out.dtype == np.uint8
    assert (out[0] == 200).all() and (out[1] == 200).all() and (out[2:] == 0).all()
    block = np.kron(np.arange(42 * 4, dtype=np.uint8).reshape(42, 4), np.ones((5, 40), np.uint8))
    # each 5x40 block of the input becomes a 2x21 block of the output with the same value
    assert np.array_equal(resize_84(block), np.kron(block[::5, ::40], np.ones((2, 21), np.uint8)))


@needs_ale
def test_noop_start_count_comes_from_the_seed():
    counts = [noop_count(s, 30) for s in range(200)]
    assert min(counts) == 1 and max(counts) == 30 and len(set(counts)) == 30
    assert noop_count(5, 0) == 0
    h = polar_bench.make("atari/Pong")
    for seed in (0, 5, 5, 17):
        _, info = h.reset(seed=seed)
        assert info["noops"] == noop_count(seed, 30) == h._ale.getEpisodeFrameNumber()
    h.close()
    h = polar_bench.make("atari/Pong", noop_max=0)
    _, info = h.reset(seed=5)
    assert info["noops"] == 0 and h._ale.getEpisodeFrameNumber() == 0
    h.close()


def _until_life_lost(h, seed):
    """Play random actions until a step reports fewer lives; returns that step's outputs."""
    lives = h._ale.lives()
    for out in random_steps(h, 5000, seed):
        if out[4]["lives"] < lives:
            return out
    pytest.fail("no life was lost")


def _episode(h, seed: int) -> tuple:
    h.reset(seed=seed)
    frames, total, n = [], 0.0, 0
    for obs, reward, _, _, _ in random_steps(h, 27_000, seed=seed):
        total, n = total + float(reward), n + 1
        if n % 25 == 0:
            frames.append(obs[:, :, -1].tobytes())
    return total, n, hash(tuple(frames))


@needs_ale
def test_the_first_episode_of_a_harness_plays_like_every_later_one():
    """Qbert: a restored emulator state keeps a part from before the restore, which differed straight
    after loading the ROM, so a harness's first episode on a seed played differently (312 steps, then
    274 on the same seed). The same seed must give the same episode first, again and after another."""
    h = polar_bench.make("atari/Qbert")
    first = _episode(h, 265147906)
    assert _episode(h, 265147906) == first
    _episode(h, 11)
    assert _episode(h, 265147906) == first
    h.close()


@needs_ale
def test_life_loss_ends_the_episode_only_with_the_training_option():
    h = polar_bench.make("atari/Breakout")
    _, info = h.reset(seed=0)
    assert info["lives"] == 5
    _, _, term, trunc, info = _until_life_lost(h, 0)
    assert info["lives"] == 4 and not term and not trunc
    h.close()

    h = polar_bench.make("atari/Breakout", terminal_on_life_loss=True)
    h.reset(seed=0)
    obs, _, term, trunc, info = _until_life_lost(h, 0)
    assert term and not trunc and info == {"lives": 4, "game_over": False}
    again, info = h.reset()  # no seed: the same game goes on with one life fewer
    assert info["continued"] and info["lives"] == 4 and np.array_equal(again, obs)
    _, info = h.reset(seed=0)  # a seed: a new game
    assert info["lives"] == 5 and "continued" not in info
    h.close()


@needs_ale
def test_episode_cap_counts_agent_steps_of_the_whole_game():
    h = polar_bench.make("atari/Pong", max_episode_steps=30)
    h.reset(seed=0)
    outs = list(random_steps(h, 100))
    assert len(outs) == 30 and outs[-1][3] and not outs[-1][2]
    h.close()
    # With life-loss episodes the cap still counts the game's steps, across its episodes.
    h = polar_bench.make("atari/Breakout", max_episode_steps=100, terminal_on_life_loss=True)
    h.reset(seed=0)
    steps = 0
    for episode in range(10):
        outs = list(random_steps(h, 1000, seed=episode))
        steps += len(outs)
        if outs[-1][3]:
            break
        assert outs[-1][4]["game_over"] is False
        h.reset()
    assert outs[-1][3] and steps == 100 and episode > 0
    h.close()


@needs_ale
def test_a_failure_inside_ale_names_task_seed_and_step(monkeypatch):
    h = polar_bench.make("atari/Pong")
    h.reset(seed=3)
    h.step(0)

    def broken(action):
        raise RuntimeError("emulator fault")

    monkeypatch.setattr(h, "_act", broken)
    with pytest.raises(HarnessError) as err:
        h.step(1)
    assert err.value.task_id == "atari/Pong" and err.value.seed == 3 and err.value.step == 2
    assert "emulator fault" in str(err.value)
    h.close()


@needs_ale
def test_bad_options_are_rejected():
    for bad in ({"frame_stack": 0}, {"noop_max": -1}, {"frame_stack": 2.0}, {"terminal_on_life_loss": 1}):
        with pytest.raises(HarnessOptionError, match=f"atari/Pong: {next(iter(bad))} must be"):
            polar_bench.make("atari/Pong", **bad)  # a UserError: the commands print one line and exit 2
    assert "no no-op frames" in polar_bench.make("atari/Pong", noop_max=0).task_info.description


@needs_ale
def test_import_is_quiet():
    assert_quiet("atari/Pong")


def test_missing_package_names_the_install_command(monkeypatch):
    assert_missing_package_names_extra(monkeypatch, "ale_py", "atari", "atari/Pong")
