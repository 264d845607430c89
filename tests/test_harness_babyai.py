import sys

import numpy as np
import pytest

pytest.importorskip("minigrid")

from harness_conformance import HarnessConformance  # noqa: E402

import polar_bench  # noqa: E402
from polar_bench.errors import MissingDependencyError, UnknownTaskError  # noqa: E402
from polar_bench.harness.babyai import MISSION_MAX_LENGTH, describe_view  # noqa: E402
from polar_bench.observations import flatten_observation, flatten_space  # noqa: E402


class TestBabyAIConformance(HarnessConformance):
    task_ids = ["babyai/GoToRedBall", "babyai/PutNextLocal"]


def _native(level):
    import gymnasium
    import minigrid  # noqa: F401  (registers the levels)

    return gymnasium.make(f"BabyAI-{level}-v0", disable_env_checker=True).unwrapped


def test_every_registered_level_has_an_id():
    import gymnasium

    names = set(polar_bench.harness.task_names("babyai"))
    levels = {k[len("BabyAI-"):].rsplit("-v", 1)[0] for k in gymnasium.registry if k.startswith("BabyAI-")}
    assert names == levels
    for name in ("GoToRedBall", "GoToLocal", "PickupLoc", "PutNextLocal", "Synth", "BossLevel", "GoToObjS6"):
        assert name in names


def test_spaces_actions_and_step_limit():
    h = polar_bench.make("babyai/GoToRedBall")
    info = h.task_info
    assert info.domain == "babyai" and info.native_id == "BabyAI-GoToRedBall-v0"
    assert list(info.observation_space.spaces) == ["direction", "image", "mission"]
    assert info.observation_space["image"].shape == (7, 7, 3)
    assert info.action_names == ("turn left", "turn right", "move forward", "pick up", "drop", "toggle", "done")
    assert info.max_episode_steps == 64 and info.reward_range == (0.0, 1.0)
    _, reset_info = h.reset(seed=0)
    assert reset_info["max_steps"] == 64
    h.close()


def test_step_limit_bounds_every_episode_limit():
    h = polar_bench.make("babyai/BossLevel")
    for seed in range(8):
        _, info = h.reset(seed=seed)
        assert info["max_steps"] <= h.task_info.max_episode_steps
    h.close()


def test_reset_matches_the_native_level():
    h = polar_bench.make("babyai/GoToLocal")
    env = _native("GoToLocal")
    for seed in (0, 5):
        obs, _ = h.reset(seed=seed)
        want, _ = env.reset(seed=seed)
        assert obs["mission"] == want["mission"] and obs["direction"] == want["direction"]
        assert np.array_equal(obs["image"], want["image"])
    h.close()


def test_mission_space_covers_generated_missions():
    for level in ("BossLevel", "SynthSeq", "PutNextLocal", "GoToSeq"):
        h = polar_bench.make(f"babyai/{level}")
        for seed in range(10):
            obs, _ = h.reset(seed=seed)
            assert h.observation_space.contains(obs), obs["mission"]
        h.close()
    assert MISSION_MAX_LENGTH == 337


def test_reset_prints_nothing(capfd):
    seed = 4  # the native level generator rejects a sample and prints for this seed
    env = _native("PutNextLocal")
    env.reset(seed=seed)
    assert "Sampling rejected" in capfd.readouterr().out
    h = polar_bench.make("babyai/PutNextLocal")
    h.reset(seed=seed)
    h.reset(seed=13)
    out = capfd.readouterr()
    assert out.out == "" and out.err == ""
    h.close()


def test_text_describes_the_view():
    image = np.zeros((7, 7, 3), dtype=np.uint8)
    image[:, :, 0] = 1  # empty
    image[:, 0, 0] = 2  # a wall 6 steps ahead, across the view
    image[2, 4] = (6, 0, 0)  # red ball: 2 ahead, 1 to the left
    image[5, 3] = (4, 4, 2)  # locked yellow door: 3 ahead, 2 to the right
    image[4, 6] = (2, 5, 0)  # wall right beside the agent on its right
    image[3, 6] = (5, 2, 0)  # carrying a blue key
    text = describe_view(image, 3, "go to the red ball")
    assert text.startswith("Mission: go to the red ball. You face north. You carry a blue key.")
    assert "a red ball 2 steps ahead and 1 to the left" in text
    assert "a locked yellow door 3 steps ahead and 2 to the right" in text
    assert "Ahead: 5 free cells, then a wall." in text
    assert "A wall is right beside you on your right." in text
    image[3, 5] = (4, 1, 1)
    assert "Directly in front of you: a closed green door." in describe_view(image, 0, "open a door")


def test_text_on_request():
    h = polar_bench.make("babyai/GoToRedBall", text=True)
    obs, info = h.reset(seed=1)
    assert info["text"].startswith(f"Mission: {obs['mission']}.")
    h.close()


def test_observations_flatten():
    h = polar_bench.make("babyai/GoToRedBall")
    obs, _ = h.reset(seed=0)
    box = flatten_space(h.observation_space)
    flat = flatten_observation(h.observation_space, obs)
    assert box.shape == (4 + 147,) and box.contains(flat)
    assert flat[:4].tolist() == [float(i == obs["direction"]) for i in range(4)]
    h.close()


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "minigrid", None)
    with pytest.raises(MissingDependencyError) as err:
        polar_bench.make("babyai/GoToRedBall")
    assert 'pip install "polar_bench[babyai]"' in str(err.value)


def test_unknown_id_suggests_the_closest():
    with pytest.raises(UnknownTaskError) as err:
        polar_bench.make("babyai/GoToRedBal")
    assert "Did you mean" in str(err.value) and "babyai/GoToRedBall" in str(err.value)
