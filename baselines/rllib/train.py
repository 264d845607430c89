"""Train polar_bench tasks with RLlib (Ray) from the same YAML experiment format as baselines/ppo.

    python -m baselines.rllib.train --config baselines/rllib/experiments/cartpole.yaml
    python -m baselines.rllib.train --config ... --resume      # continue from the last checkpoint

Algorithms: ``ppo`` (synchronous: every update waits for all env runners' samples), ``appo`` and
``impala`` (asynchronous: the learner updates on whichever samples arrive, env runners never wait),
``sac`` (continuous actions) and ``dqn`` (discrete actions). Environments are built by
``polar_bench.make`` on RLlib's env runners (the env creator registered as ``polar_bench``).

One RLlib algorithm trains one policy on one observation and action space, so each harness of an
experiment is its own run (several families in one experiment file, one run per harness and seed),
as in baselines/ppo. Layout::

    experiment: {name: cartpole}
    agent: {algorithm: appo}
    harnesses:
      - {task: gym/CartPole-v1, num_parallel: 4}          # num_parallel: envs per env runner
    distributed: {backend: ray, num_workers: 2}            # env runners
    training: {total_timesteps: 2e4, seeds: [0]}
    evaluation: {interval: 10000, num_episodes: 5, suite: v1}

Evaluation runs on RLlib's separate evaluation env runner (``evaluation_num_env_runners=1``) with
the suite's options, every ``interval`` environment steps (rounded to training iterations), in
parallel to training; it does not touch the training env runners. Outputs under ``--out-dir``
(default runs/rllib):
  checkpoints/T/runS/        the RLlib checkpoint (polar_bench.agent.RLlibAgent plays it)
  tensorboard/T/seedS/       TensorBoard events of the training and evaluation metrics
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baselines.ppo.train import ExperimentError, _harness_task, read_experiment_file
from polar_bench._optional import require
from polar_bench.suite import load_suite

ALGORITHMS = ("ppo", "appo", "impala", "sac", "dqn")
ENV_NAME = "polar_bench"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunConfig:
    task: str
    algorithm: str = "ppo"
    seed: int = 0
    steps: int = 20_000
    num_envs: int = 1              # envs per env runner (num_parallel)
    num_workers: int = 1           # env runners (distributed.num_workers)
    eval_every: int = 10_000       # environment steps between evaluations; 0: none
    eval_episodes: int = 5
    suite: str = "v1"
    name: str = "rllib"
    settings: dict[str, Any] = field(default_factory=dict)  # passed to config.training(...)


def env_creator(env_config: dict) -> Any:
    import polar_bench

    return polar_bench.make(env_config["task"], **dict(env_config.get("options") or {}))


def suite_options(cfg: RunConfig) -> dict:
    if cfg.suite.lower() == "none":
        return {}
    return dict(load_suite(cfg.suite).task(cfg.task).options)


def build_config(cfg: RunConfig, *, fault_tolerant: bool = True) -> Any:
    """The RLlib AlgorithmConfig of a run (new API stack)."""
    require("ray.rllib", "rllib", "training with RLlib")
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.impala import IMPALAConfig
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.algorithms.sac import SACConfig
    from ray.tune.registry import register_env

    register_env(ENV_NAME, env_creator)
    classes = {"ppo": PPOConfig, "appo": APPOConfig, "impala": IMPALAConfig, "sac": SACConfig, "dqn": DQNConfig}
    if cfg.algorithm not in classes:
        raise ExperimentError(f"agent.algorithm is {cfg.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    options = suite_options(cfg)
    train_options = dict(options)
    if cfg.task.startswith("procgen/"):
        train_options.update(start_level=0, num_levels=200)
    config = (classes[cfg.algorithm]()
              .environment(ENV_NAME, env_config={"task": cfg.task, "options": train_options})
              .env_runners(num_env_runners=cfg.num_workers, num_envs_per_env_runner=cfg.num_envs,
                           num_cpus_per_env_runner=0.5)  # type: ignore[arg-type]  # annotated int; Ray takes fractions
              .learners(num_learners=0)
              .debugging(seed=cfg.seed))
    if cfg.settings:
        config = config.training(**cfg.settings)
    if fault_tolerant:
        # RLlib's own fault tolerance: a crashed env runner is replaced and training goes on.
        config = config.fault_tolerance(restart_failed_env_runners=True, max_num_env_runner_restarts=100,
                                        num_consecutive_env_runner_failures_tolerance=100)
    if cfg.eval_every > 0:
        # evaluation_interval counts training iterations: one iteration samples about one train batch
        # (off-policy algorithms sample at least min_sample_timesteps_per_iteration, more than a batch)
        per_iteration = max(1, config.total_train_batch_size, config.min_sample_timesteps_per_iteration or 0)
        iterations = max(1, round(cfg.eval_every / per_iteration))
        config = config.evaluation(
            evaluation_interval=iterations, evaluation_num_env_runners=1, evaluation_duration=cfg.eval_episodes,
            evaluation_duration_unit="episodes", evaluation_parallel_to_training=True,
            evaluation_config={"explore": False, "env_config": {"task": cfg.task, "options": options}})
    return config


def run_dir(out_dir: Path, cfg: RunConfig, kind: str) -> Path:
    sub = "checkpoints" if kind == "checkpoints" else "tensorboard"
    leaf = f"run{cfg.seed}" if kind == "checkpoints" else f"seed{cfg.seed}"
    return out_dir / sub / cfg.task.replace("/", "_") / leaf


def _scalars(result: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_scalars(value, name + "/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = float(value)
    return out


def train(cfg: RunConfig, out_dir: Path, *, resume: bool = False, on_iteration: Any = None) -> dict:
    """Train one run; checkpoints after every evaluation and at the end. Returns a summary."""
    from tensorboardX import SummaryWriter

    config = build_config(cfg)
    algo = config.build_algo()
    ckpt = run_dir(out_dir, cfg, "checkpoints")
    if resume and (ckpt / "rllib_checkpoint.json").exists():
        algo.restore_from_path(str(ckpt))
    writer = SummaryWriter(str(run_dir(out_dir, cfg, "tensorboard")))
    steps, evaluations = 0, []
    try:
        while True:
            result = algo.train()
            steps = int(result.get("num_env_steps_sampled_lifetime", 0) or
                        result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0))
            for name, value in _scalars(result).items():
                if name.startswith(("env_runners/", "learners/", "evaluation/")):
                    writer.add_scalar(name, value, steps)
            ev = result.get("evaluation", {}).get("env_runners", {})
            if math.isfinite(ev.get("episode_return_mean", math.nan)):  # NaN: no episode ended yet
                evaluations.append({"step": steps, "return": float(ev["episode_return_mean"])})
                algo.save_to_path(str(ckpt))
            if on_iteration is not None:
                on_iteration(algo, result)
            if steps >= cfg.steps:
                break
        algo.save_to_path(str(ckpt))
        train_return = result.get("env_runners", {}).get("episode_return_mean")
    finally:
        writer.close()
        algo.stop()
    summary = {"task": cfg.task, "algorithm": cfg.algorithm, "seed": cfg.seed, "steps": steps,
               "train_return": train_return, "evaluations": evaluations, "checkpoint": str(ckpt)}
    (ckpt / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def load_experiment(path: str | Path) -> list[RunConfig]:
    """One `RunConfig` per (harness, seed) of an experiment file (layout: the module docstring)."""
    data = read_experiment_file(path)
    unknown = set(data) - {"experiment", "agent", "harnesses", "training", "evaluation", "distributed"}
    if unknown:
        raise ExperimentError(f"{path}: unknown section(s) {sorted(unknown)}; expected experiment, agent, "
                              f"harnesses, distributed, training, evaluation")
    agent = dict(data.get("agent") or {})
    algorithm = str(agent.pop("algorithm", "ppo")).lower()
    if algorithm not in ALGORITHMS:
        raise ExperimentError(f"{path}: agent.algorithm is {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    dist = dict(data.get("distributed") or {})
    if dist.get("backend", "ray") != "ray":
        raise ExperimentError(f"{path}: distributed.backend is {dist['backend']!r}; RLlib runs on 'ray'")
    training = dict(data.get("training") or {})
    evaluation = dict(data.get("evaluation") or {})
    common: dict[str, Any] = dict(
        algorithm=algorithm, name=str((data.get("experiment") or {}).get("name", "rllib")),
        steps=int(float(training.pop("total_timesteps", 20_000))), num_workers=int(dist.get("num_workers", 1)),
        eval_every=int(float(evaluation.get("interval", 10_000))),
        eval_episodes=int(evaluation.get("num_episodes", 5)), suite=str(evaluation.get("suite", "v1")),
        settings=agent)
    seeds = [int(s) for s in training.pop("seeds", [0])]
    if training:
        raise ExperimentError(f"{path}: unknown training setting(s) {sorted(training)}; known: "
                              f"total_timesteps, seeds (algorithm settings go under agent:)")
    harnesses = data.get("harnesses") or []
    if not harnesses:
        raise ExperimentError(f"{path}: list at least one entry under 'harnesses'")
    configs = []
    for i, entry in enumerate(harnesses):
        task = _harness_task(dict(entry), f"{path}: harnesses[{i}]")
        for seed in seeds:
            configs.append(RunConfig(task=task, seed=seed, num_envs=int(entry.get("num_parallel", 1)), **common))
    return configs


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the YAML experiment file")
    parser.add_argument("--out-dir", default=str(ROOT / "runs" / "rllib"))
    parser.add_argument("--resume", action="store_true", help="continue each run from its checkpoint")
    args = parser.parse_args(argv)
    import ray

    ray.init(ignore_reinit_error=True, include_dashboard=False)
    summaries = [train(cfg, Path(args.out_dir), resume=args.resume) for cfg in load_experiment(args.config)]
    for s in summaries:
        print(json.dumps(s))
    return summaries


if __name__ == "__main__":
    from baselines.ppo.train import run_command

    run_command(main)
