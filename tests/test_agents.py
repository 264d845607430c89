"""Agent adapters: a Stable-Baselines3 model and a plain callable as agents, through evaluate."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import polar_bench
from polar_bench.agent import FunctionAgent, RandomAgent, SB3Agent
from polar_bench.cli import main
from polar_bench.results import read_results

ROOT = Path(__file__).parent.parent
TINY = str(ROOT / "tests" / "data" / "suites" / "tiny.toml")


def test_sb3_model_trains_on_a_harness_and_evaluates_through_the_adapter(tmp_path, monkeypatch, capsys):
    pytest.importorskip("stable_baselines3")
    import sys

    sys.path.insert(0, str(ROOT / "examples"))
    import train_sb3

    train_sb3.main(["--task", "gym/CartPole-v1", "--run", "0", "--steps", "256", "--out-dir", str(tmp_path)])
    train_sb3.main(["--task", "gym/CartPole-v1", "--run", "1", "--steps", "256", "--out-dir", str(tmp_path)])
    monkeypatch.setenv("SB3_MODELS", str(tmp_path))
    out = str(tmp_path / "r.json")
    code = main(["evaluate", str(ROOT / "examples" / "sb3_agent.py"), "--suite", TINY, "--tasks", "gym/CartPole*",
                 "--out", out, "--workers", "1", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    r = read_results(out)
    assert r.agent_name == "sb3-ppo" and len(r.episodes) == 6
    assert all(e.status.value == "ok" and e.length >= 8 for e in r.episodes)


def test_sb3_adapter_returns_harness_actions():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    for task in ("gym/CartPole-v1", "gym/Pendulum-v1"):
        env = polar_bench.make(task)
        agent = SB3Agent(PPO("MlpPolicy", env, n_steps=64, device="cpu", seed=0))
        agent.reset(3)
        obs, info = env.reset(seed=3)
        action = agent.act(obs, info)
        env.step(action)  # accepted by the harness's checks
        if task.endswith("CartPole-v1"):
            assert isinstance(action, int)
        else:
            assert action.shape == (1,) and action.dtype == np.float32
        env.close()


def test_function_and_random_agents():
    h = polar_bench.make("gym/CartPole-v1")
    obs, info = h.reset(seed=0)
    assert FunctionAgent(lambda o: int(o[2] > 0)).act(obs, info) in (0, 1)
    assert FunctionAgent(lambda o, i: 1, with_info=True).act(obs, info) == 1
    r = RandomAgent(h.task_info)
    r.reset(5)
    a = [r.act(obs, info) for _ in range(5)]
    r.reset(5)
    assert a == [r.act(obs, info) for _ in range(5)]
    h.close()


def test_make_agent_returning_no_act_is_a_user_error(tmp_path, capsys):
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent("""
        def make_agent(task, run):
            return 42
    """))
    code = main(["evaluate", str(agent), "--suite", TINY, "--out", str(tmp_path / "r.json"), "--workers", "1",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "returned int, which has no act(observation, info) method" in err


def _rollout_pairs(task: str, n: int = 6, steps: int = 40):
    """Observations of ``n`` episodes, with the infos an act_batch agent receives."""
    env = polar_bench.make(task)
    obs, infos = [], []
    for k in range(n):
        o, info = env.reset(seed=100 + k)
        for _ in range(steps // n + 3):
            obs.append(o)
            infos.append({**info, "episode_seed": 100 + k})
            o, _, term, trunc, info = env.step(env.action_space.sample())
            if term or trunc:
                break
    env.close()
    return obs, infos


def test_sb3_act_batch_equals_act_lane_by_lane():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    for task in ("gym/CartPole-v1", "gym/Pendulum-v1"):
        env = polar_bench.make(task)
        agent = SB3Agent(PPO("MlpPolicy", env, n_steps=64, device="cpu", seed=0))
        env.close()
        obs, infos = _rollout_pairs(task)
        batched = agent.act_batch(obs, infos)
        single = [agent.act(o, i) for o, i in zip(obs, infos, strict=True)]
        assert len(batched) == len(single) == len(obs)
        assert all(np.array_equal(np.asarray(a), np.asarray(b)) and np.asarray(a).dtype == np.asarray(b).dtype
                   for a, b in zip(batched, single, strict=True))


@pytest.mark.parametrize("task", ["gym/CartPole-v1", "dmc/cheetah-run", "babyai/GoToLocal"])
def test_ppo_baseline_act_batch_equals_act_bit_for_bit(task):
    """The PPO baseline's act_batch (one forward pass for discrete policies, row by row for
    continuous ones) gives act's actions exactly, including sampled ones (a generator per episode)."""
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("ppo_agent_under_test", ROOT / "baselines" / "ppo" / "agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    info = polar_bench.make(task).task_info
    obs, infos = _rollout_pairs(task)
    for deterministic in (True, False):
        one, many = module.make_agent(info, 0), module.make_agent(info, 0)
        one.deterministic = many.deterministic = deterministic
        for seed in sorted({i["episode_seed"] for i in infos}):
            many.reset(seed)
        single = []
        for o, i in zip(obs, infos, strict=True):
            if not single or infos[len(single) - 1]["episode_seed"] != i["episode_seed"]:
                one.reset(i["episode_seed"])
            single.append(one.act(o, i))
        # the lanes interleaved, as a worker steps them: every episode's k-th step in one call
        by_episode: dict[int, list[int]] = {}
        for k, i in enumerate(infos):
            by_episode.setdefault(i["episode_seed"], []).append(k)
        batched: dict[int, object] = {}
        for step in range(max(len(v) for v in by_episode.values())):
            idx = [v[step] for v in by_episode.values() if step < len(v)]
            for k, a in zip(idx, many.act_batch([obs[k] for k in idx], [infos[k] for k in idx]), strict=True):
                batched[k] = a
        assert all(np.array_equal(np.asarray(batched[k]), np.asarray(single[k])) for k in range(len(obs))), \
            (task, deterministic)
