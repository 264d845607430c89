"""baselines/rllib on one local Ray node: dict observations (BabyAI) trained through RLlib's
FlattenObservations and played back by `RLlibAgent` the same way, and in-training evaluation on the
suite's harnesses and evaluation seeds (the episodes `evaluate` plays) logged to TensorBoard."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import polar_bench
from polar_bench.agent import RLLIB_OBSERVATION_FILE, RLlibAgent
from polar_bench.cli import main
from polar_bench.results import read_results
from polar_bench.suite import load_suite

ray = pytest.importorskip("ray")
pytest.importorskip("ray.rllib")
pytest.importorskip("minigrid")

from baselines.rllib.train import (  # noqa: E402 - after the skip
    ExperimentError,
    RunConfig,
    _play_suite_episodes,
    dropped_keys,
    train,
)

ROOT = Path(__file__).resolve().parents[1]
TASK = "babyai/GoToRedBall"


@pytest.fixture(scope="module")
def babyai_run(ray_local, tmp_path_factory):
    out = tmp_path_factory.mktemp("rllib_babyai")
    cfg = RunConfig(task=TASK, algorithm="ppo", steps=600, num_envs=1, num_workers=1, eval_every=400,
                    eval_episodes=2, settings={"train_batch_size_per_learner": 200, "minibatch_size": 100,
                                               "num_epochs": 1})
    return cfg, out, train(cfg, out)


def test_dict_observations_train_and_play_back_flattened_like_rllib(babyai_run):
    from ray.rllib.connectors.env_to_module import FlattenObservations
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    cfg, out, summary = babyai_run
    ckpt = Path(summary["checkpoint"])
    spec = json.loads((ckpt / RLLIB_OBSERVATION_FILE).read_text())
    assert spec["dropped"] == ["mission"]
    agent = RLlibAgent(ckpt)
    harness = polar_bench.make(TASK)
    try:
        obs, info = harness.reset(seed=3)
        space = harness.observation_space
        # the agent's vector is the one RLlib's env-to-module connector put into the episode
        connector = FlattenObservations(space, harness.action_space, keys_to_remove=["mission"])
        episode = SingleAgentEpisode(observations=[obs])
        connector(rl_module=None, batch={}, episodes=[episode], explore=False, shared_data={})
        assert agent._flatten is not None
        np.testing.assert_array_equal(agent._flatten(obs), episode.get_observations(-1))
        assert agent._flatten(obs).shape == (4 + 7 * 7 * 3,)
        actions = agent.act_batch([obs, harness.step(0)[0]], [info, info])
        assert all(isinstance(a, int) and 0 <= a < 7 for a in actions)
    finally:
        harness.close()
    # the mission is ignored, not misread: changing it does not change the action
    assert agent.act(dict(obs, mission="go to the blue key"), info) == agent.act(obs, info)


def test_checkpoint_with_dict_observations_evaluates(babyai_run, tmp_path, monkeypatch):
    cfg, out, summary = babyai_run
    monkeypatch.setenv("RLLIB_CHECKPOINTS", str(out / "checkpoints"))
    path = str(tmp_path / "eval.json")
    assert main(["evaluate", str(ROOT / "examples" / "rllib_agent.py"), "--suite", "v1", "--tasks", TASK,
                 "--runs", "1", "--episodes", "2", "--workers", "1", "--no-progress", "--out", path]) == 0
    episodes = read_results(path).to_json()["episodes"]
    assert [e["status"] for e in episodes] == ["ok", "ok"]


def test_in_training_evaluation_plays_the_suite_seeds_like_evaluate(babyai_run, tmp_path, monkeypatch):
    cfg, out, summary = babyai_run
    assert summary["evaluations"], "no in-training evaluation reported"
    ckpt = Path(summary["checkpoint"])
    seeds = list(load_suite("v1").task(TASK).seeds[:2])

    class Runner:  # what an evaluation env runner offers: its RLModule, its index, its config
        module = RLlibAgent(ckpt).module
        worker_index = 1

        class config:
            num_env_runners = 1

    spec = json.loads((ckpt / RLLIB_OBSERVATION_FILE).read_text())
    records = _play_suite_episodes(Runner(), [(TASK, s, k) for k, s in enumerate(seeds)], {TASK: {}}, spec)
    assert [r["seed"] for r in records] == seeds
    monkeypatch.setenv("RLLIB_CHECKPOINTS", str(out / "checkpoints"))
    path = str(tmp_path / "eval.json")
    assert main(["evaluate", str(ROOT / "examples" / "rllib_agent.py"), "--suite", "v1", "--tasks", TASK,
                 "--runs", "1", "--episodes", "2", "--workers", "1", "--no-progress", "--out", path]) == 0
    played = {e["seed"]: (e["return"], e["length"]) for e in read_results(path).to_json()["episodes"]}
    assert {r["seed"]: (r["return"], r["length"]) for r in records} == played


def test_evaluation_scalars_are_in_the_tensorboard_events(babyai_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg, out, summary = babyai_run
    acc = EventAccumulator(str(out / "tensorboard" / TASK.replace("/", "_") / "seed0"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert f"evaluation/suite/{TASK}/return_mean" in tags
    assert "evaluation/env_runners/episode_return_mean" in tags
    assert "env_runners/episode_return_mean" in tags or "env_runners/num_env_steps_sampled_lifetime" in tags
    values = [e.value for e in acc.Scalars(f"evaluation/suite/{TASK}/return_mean")]
    assert values and all(0.0 <= v <= 1.0 for v in values)
    # every 400 steps = every 2nd iteration of 200: one evaluation in 3 iterations, logged once
    # (RLlib repeats the last evaluation's metrics in the next results; they are not new)
    assert len(summary["evaluations"]) == len(values) == 1


def test_text_observations_outside_a_dict_are_refused():
    from gymnasium import spaces

    assert dropped_keys(spaces.Dict({"a": spaces.Discrete(2), "m": spaces.Text(5)}), "t") == ("m",)
    with pytest.raises(ExperimentError, match="cannot encode its text"):
        dropped_keys(spaces.Tuple([spaces.Text(5)]), "textworld/x")


def _weights_after(cfg: RunConfig, out: Path) -> tuple[list, dict]:
    """The per-iteration training metrics and the learner's final module weights of a run."""
    seen: dict = {}

    def grab(algo, result):
        seen["weights"] = {k: v.detach().cpu().numpy().copy() for k, v in algo.get_module().state_dict().items()}
        seen.setdefault("metrics", []).append(
            (result["env_runners"].get("episode_return_mean"),
             result["learners"]["default_policy"]["total_loss"]))

    summary = train(cfg, out, on_iteration=grab)
    assert bool(summary["evaluations"]) == (cfg.eval_every > 0)
    return seen["metrics"], seen["weights"]


@pytest.mark.slow
def test_same_seed_same_training_with_and_without_evaluation(ray_local, tmp_path):
    base = dict(task="gym/CartPole-v1", algorithm="ppo", steps=1500, num_envs=2, num_workers=2, eval_episodes=2,
                settings={"train_batch_size_per_learner": 500})
    plain_metrics, plain = _weights_after(RunConfig(eval_every=0, **base), tmp_path / "a")
    evaluated_metrics, evaluated = _weights_after(RunConfig(eval_every=500, **base), tmp_path / "b")
    assert plain_metrics == evaluated_metrics
    assert plain.keys() == evaluated.keys()
    for name in plain:
        np.testing.assert_array_equal(plain[name], evaluated[name], err_msg=name)
    # and a different seed trains differently (the comparison can fail)
    _, other = _weights_after(RunConfig(eval_every=0, seed=1, **base), tmp_path / "c")
    assert any(not np.array_equal(plain[n], other[n]) for n in plain)


def test_one_policy_on_several_tasks_of_one_space(ray_local, tmp_path):
    """Two BabyAI levels (the same spaces) in one run: env runner i steps the i-th task, one policy
    learns from both, and the suite evaluation covers both."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tasks = (TASK, "babyai/GoToLocal")
    cfg = RunConfig(task=TASK, tasks=tasks, algorithm="ppo", steps=400, num_envs=1, num_workers=2, eval_every=200,
                    eval_episodes=1, settings={"train_batch_size_per_learner": 200, "minibatch_size": 100,
                                               "num_epochs": 1})
    stepped = []

    def which(algo, result):
        stepped.append(algo.env_runner_group.foreach_env_runner(
            lambda runner: runner.env.unwrapped.get_attr("task_info")[0].id, local_env_runner=False))

    summary = train(cfg, tmp_path, on_iteration=which)
    assert stepped and all(s == list(tasks) for s in stepped)
    assert summary["evaluations"]
    acc = EventAccumulator(str(tmp_path / "tensorboard" / TASK.replace("/", "_") / "seed0"))
    acc.Reload()
    assert {f"evaluation/suite/{t}/return_mean" for t in tasks} <= set(acc.Tags()["scalars"])


def test_one_policy_refuses_tasks_of_other_spaces_and_too_few_runners():
    from baselines.rllib.train import observation_spec

    with pytest.raises(ExperimentError, match="other observation or action spaces"):
        observation_spec(RunConfig(task=TASK, tasks=(TASK, "gym/CartPole-v1"), num_workers=2))
    with pytest.raises(ExperimentError, match="at least one env runner per task"):
        observation_spec(RunConfig(task=TASK, tasks=(TASK, "babyai/GoToLocal"), num_workers=1))


def test_experiment_file_one_policy(tmp_path):
    from baselines.rllib.train import load_experiment

    path = tmp_path / "x.yaml"
    text = """
harnesses:
  - {task: babyai/GoToRedBall, num_parallel: 2}
  - {task: babyai/GoToLocal, num_parallel: %d}
distributed: {backend: ray, num_workers: 2}
training: {total_timesteps: 1000, seeds: [0, 1], one_policy: true}
"""
    path.write_text(text % 2)
    configs = load_experiment(path)
    assert [(c.task, c.tasks, c.seed, c.num_envs) for c in configs] == [
        (TASK, (TASK, "babyai/GoToLocal"), s, 2) for s in (0, 1)]
    path.write_text(text % 3)
    with pytest.raises(ExperimentError, match="same num_parallel"):
        load_experiment(path)


@pytest.mark.parametrize("path", sorted((ROOT / "baselines" / "rllib" / "experiments").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_committed_experiment_files_build_their_rllib_configs(path):
    from baselines.rllib.train import build_config, load_experiment

    for cfg in load_experiment(path):
        config = build_config(cfg)  # the agent: settings are RLlib training() arguments
        config.validate()
        assert config.num_env_runners == cfg.num_workers


def test_evaluation_interval_in_iterations_matches_the_steps_asked():
    from baselines.rllib.train import build_config

    def interval(**kw):
        return build_config(RunConfig(task="gym/Pendulum-v1", **kw)).evaluation_interval

    assert interval(algorithm="ppo", eval_every=2000, settings={"train_batch_size_per_learner": 500}) == 4
    assert interval(algorithm="sac", eval_every=2500) == 25   # SAC samples 100 steps an iteration
    assert build_config(RunConfig(task="gym/CartPole-v1", algorithm="dqn", eval_every=5000)).evaluation_interval == 5
