"""baselines/rllib on a simulated 3-node Ray cluster: a short training end to end whose checkpoint
plays through `evaluate` (isolated, without Ray), an env runner killed mid-training with the run
finishing (RLlib's fault tolerance), resuming from a checkpoint, and the experiment file format."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from polar_bench.cli import main
from polar_bench.results import read_results

ray = pytest.importorskip("ray")
pytest.importorskip("ray.rllib")

from baselines.rllib.train import RunConfig, load_experiment, train  # noqa: E402 - after the skip

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    c.add_node(num_cpus=1)
    c.add_node(num_cpus=1)
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def _cfg(**kw):
    base = dict(task="gym/CartPole-v1", algorithm="ppo", steps=2000, num_envs=2, num_workers=2,
                eval_every=1000, eval_episodes=2, settings={"train_batch_size_per_learner": 500})
    return RunConfig(**dict(base, **kw))


def test_training_end_to_end_and_checkpoint_evaluated(cluster, tmp_path, capsys, monkeypatch):
    summary = train(_cfg(), tmp_path)
    assert summary["steps"] >= 2000
    assert summary["evaluations"], "the evaluation env runner reported no episodes"
    ckpt = Path(summary["checkpoint"])
    assert (ckpt / "learner_group" / "learner" / "rl_module" / "default_policy").is_dir()
    assert list((tmp_path / "tensorboard").rglob("events.out.tfevents.*"))
    monkeypatch.setenv("RLLIB_CHECKPOINTS", str(tmp_path / "checkpoints"))
    out = str(tmp_path / "eval.json")
    assert main(["evaluate", str(ROOT / "examples" / "rllib_agent.py"), "--suite", "v1", "--tasks",
                 "gym/CartPole-v1", "--runs", "1", "--episodes", "2", "--workers", "1", "--no-progress",
                 "--out", out]) == 0
    episodes = read_results(out).to_json()["episodes"]
    assert len(episodes) == 2 and all(e["status"] == "ok" for e in episodes)
    # resuming continues from the saved step count instead of starting again
    resumed = train(_cfg(steps=3000), tmp_path, resume=True)
    assert resumed["steps"] >= 3000
    assert resumed["steps"] - summary["steps"] < 2000


@pytest.mark.slow
def test_env_runner_killed_mid_training_is_restarted(cluster, tmp_path):
    killed = []

    def kill_one(algo, result):
        if not killed:
            pids = algo.env_runner_group.foreach_env_runner(lambda runner: os.getpid(), local_env_runner=False)
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    restarts = []

    def record(algo, result):
        kill_one(algo, result)
        restarts.append(algo.env_runner_group.num_remote_worker_restarts())

    summary = train(_cfg(steps=4000, eval_every=0), tmp_path, on_iteration=record)
    assert killed and summary["steps"] >= 4000
    assert max(restarts) >= 1, "RLlib did not restart the killed env runner"


def test_experiment_file_reads_the_ppo_layout(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("""
agent: {algorithm: appo, lr: 0.001}
harnesses:
  - {type: gymnasium, env_id: CartPole-v1, num_parallel: 4}
  - {type: dm_control, domain: cheetah, task: run, num_parallel: 2}
distributed: {backend: ray, num_workers: 3}
training: {total_timesteps: 5e4, seeds: [0, 1]}
evaluation: {interval: 10000, num_episodes: 4, suite: v1}
""")
    configs = load_experiment(path)
    assert [(c.task, c.seed, c.num_envs) for c in configs] == [
        ("gym/CartPole-v1", 0, 4), ("gym/CartPole-v1", 1, 4), ("dmc/cheetah-run", 0, 2), ("dmc/cheetah-run", 1, 2)]
    assert {(c.algorithm, c.num_workers, c.steps, c.eval_every, c.eval_episodes) for c in configs} == {
        ("appo", 3, 50_000, 10_000, 4)}
    assert configs[0].settings == {"lr": 0.001}
