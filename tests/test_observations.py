import numpy as np
import pytest
from gymnasium import spaces

from polar_bench.observations import flat_size, flatten_observation, flatten_space


def test_box_is_raveled_and_cast():
    space = spaces.Box(0, 255, shape=(2, 3), dtype=np.uint8)
    obs = np.arange(6, dtype=np.uint8).reshape(2, 3)
    flat = flatten_observation(space, obs)
    assert flat.dtype == np.float32 and flat.tolist() == [0, 1, 2, 3, 4, 5]
    box = flatten_space(space)
    assert box.shape == (6,) and box.dtype == np.float32 and box.high.max() == 255
    obs[0, 0] = 9
    assert flat[0] == 0  # a copy, not a view


def test_discrete_is_one_hot_with_start():
    space = spaces.Discrete(3, start=-1)
    assert flatten_observation(space, 1).tolist() == [0, 0, 1]
    assert flatten_observation(space, -1).tolist() == [1, 0, 0]
    with pytest.raises(ValueError):
        flatten_observation(space, 2)


def test_dict_in_key_order_with_text_skipped():
    space = spaces.Dict({
        "mission": spaces.Text(20),
        "image": spaces.Box(-1.0, 1.0, shape=(2,)),
        "direction": spaces.Discrete(4),
    })
    assert list(space.spaces) == ["direction", "image", "mission"]
    obs = {"mission": "go", "image": np.array([0.5, -0.5], dtype=np.float32), "direction": 2}
    flat = flatten_observation(space, obs)
    assert flat.tolist() == [0, 0, 1, 0, 0.5, -0.5]
    box = flatten_space(space)
    assert box.shape == (6,) and box.contains(flat) and flat_size(space) == 6
    with pytest.raises(ValueError, match="direction"):
        flatten_observation(space, {"image": obs["image"], "mission": "go"})


def test_tuple_multidiscrete_and_multibinary():
    space = spaces.Tuple((spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(2),
                          spaces.Box(0.0, 1.0, shape=(1,))))
    obs = (np.array([1, 0]), np.array([1, 0], dtype=np.int8), np.array([0.25], dtype=np.float32))
    flat = flatten_observation(space, obs)
    assert flat.tolist() == [0, 1, 1, 0, 0, 1, 0, 0.25]
    assert flatten_space(space).contains(flat)
    space.seed(1)
    for _ in range(5):
        assert flatten_space(space).contains(flatten_observation(space, space.sample()))


def test_unsupported_and_empty_spaces():
    with pytest.raises(TypeError, match="Sequence"):
        flatten_space(spaces.Sequence(spaces.Discrete(2)))
    with pytest.raises(ValueError, match="Text"):
        flatten_space(spaces.Dict({"mission": spaces.Text(5)}))
