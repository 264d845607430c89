"""Train polar_bench tasks with RLlib (Ray) from the same YAML experiment format as baselines/ppo.

    python -m baselines.rllib.train --config baselines/rllib/experiments/cartpole.yaml
    python -m baselines.rllib.train --config ... --resume      # continue from the last checkpoint
    python -m baselines.rllib.train --config ... --address auto  # on a running Ray cluster

Algorithms: ``ppo`` (synchronous: every update waits for all env runners' samples), ``appo`` and
``impala`` (asynchronous: the learner updates on whichever samples arrive, env runners never wait),
``sac`` (continuous actions) and ``dqn`` (discrete actions). Environments are built by
``polar_bench.make`` on RLlib's env runners (the env creator registered as ``polar_bench``).

One RLlib algorithm trains one policy on one observation and action space, so each harness of an
experiment is its own run (several families in one experiment file, one run per harness and seed),
as in baselines/ppo. With ``training: {one_policy: true}`` the harnesses, which must then share
their spaces (BabyAI levels, Procgen games), train one policy in one run instead: env runner i
steps harness ``(i - 1) % len`` (so ``num_workers`` must be at least the number of harnesses, and
every harness the same ``num_parallel``); the checkpoint is under the first harness's task.
Layout::

    experiment: {name: cartpole}
    agent: {algorithm: appo}
    harnesses:
      - {task: gym/CartPole-v1, num_parallel: 4}          # num_parallel: envs per env runner
    distributed: {backend: ray, num_workers: 2}            # env runners
    training: {total_timesteps: 2e4, seeds: [0]}
    evaluation: {interval: 10000, num_episodes: 5, suite: v1}   # harnesses: [...] (default: the trained task)

Dict and tuple observations (BabyAI, MiniHack, NetHack) go through RLlib's ``FlattenObservations``
connector (Boxes flattened, Discrete one-hot); top-level text components (BabyAI's ``mission``)
are dropped, since RLlib cannot encode text. The checkpoint records the space and the dropped keys
(``polar_bench_observation.json``) so that ``RLlibAgent`` flattens the same way.

Evaluation runs on RLlib's separate evaluation env runner (``evaluation_num_env_runners=1``) every
``interval`` environment steps (rounded to training iterations), in parallel to training, through
RLlib's ``custom_evaluation_function``: after RLlib syncs the latest weights to it, the evaluation
env runner plays the suite's harnesses (the suite's options) on the suite's evaluation seeds (the
first ``num_episodes`` of each evaluation task, as ``evaluate --episodes N`` would) with
``RLlibAgent`` and `evaluate`'s episode loop. It never touches the training env runners, so
training is the same with and without it. Outputs under ``--out-dir``
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
from polar_bench.agent import RLLIB_OBSERVATION_FILE
from polar_bench.suite import load_suite

ALGORITHMS = ("ppo", "appo", "impala", "sac", "dqn")
OFF_POLICY = ("sac", "dqn")
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
    eval_tasks: tuple[str, ...] = ()  # tasks evaluated on the suite's seeds; empty: the training tasks
    tasks: tuple[str, ...] = ()       # one policy on several tasks of one space: env runner i steps
                                      # tasks[(i - 1) % len]; empty: just `task`
    name: str = "rllib"
    settings: dict[str, Any] = field(default_factory=dict)  # passed to config.training(...)


def env_creator(env_config: Any) -> Any:
    """A polar_bench harness: ``env_config["task"]``, or with ``tasks`` (``[[task, options], ...]``)
    the one of this env runner (runner i, counted from 1, steps ``tasks[(i - 1) % len]``)."""
    import polar_bench

    tasks = env_config.get("tasks")
    if tasks:
        index = max(0, int(getattr(env_config, "worker_index", 1)) - 1) % len(tasks)
        task, options = tasks[index]
        return polar_bench.make(task, **dict(options or {}))
    return polar_bench.make(env_config["task"], **dict(env_config.get("options") or {}))


def training_tasks(cfg: RunConfig) -> tuple[str, ...]:
    return cfg.tasks or (cfg.task,)


def training_options(task: str, suite: str) -> dict:
    """The suite's options of a task for training (Procgen: the 200 training levels)."""
    options = suite_options_of(task, suite)
    if task.startswith("procgen/"):
        options.update(start_level=0, num_levels=200)
    return options


def suite_options(cfg: RunConfig) -> dict:
    if cfg.suite.lower() == "none":
        return {}
    return dict(load_suite(cfg.suite).task(cfg.task).options)


def suite_options_of(task: str, suite: str) -> dict:
    return suite_options(RunConfig(task=task, suite=suite))


def evaluation_tasks(cfg: RunConfig) -> tuple[str, ...]:
    return cfg.eval_tasks or training_tasks(cfg)


def dropped_keys(space: Any, task: str) -> tuple[str, ...]:
    """The top-level text components of a dict observation space: RLlib's flattening cannot encode
    text, so the policy does not see them. Text anywhere else is an error."""
    from gymnasium import spaces

    dropped = tuple(k for k, s in space.spaces.items() if isinstance(s, spaces.Text)) \
        if isinstance(space, spaces.Dict) else ()
    rest = ([s for k, s in space.spaces.items() if k not in dropped] if isinstance(space, spaces.Dict)
            else [space])
    stack = list(rest)
    while stack:
        leaf = stack.pop()
        if isinstance(leaf, spaces.Text):
            raise ExperimentError(f"{task}: RLlib cannot encode its text observations; train it with "
                                  f"baselines/ppo or an LLM agent instead")
        if isinstance(leaf, (spaces.Dict, spaces.Tuple)):
            stack.extend(leaf.spaces.values() if isinstance(leaf, spaces.Dict) else leaf.spaces)
    return dropped


def flatten_connector(env: Any = None, spaces: Any = None, device: Any = None) -> Any:
    """The env-to-module connector of every env runner: RLlib's ``FlattenObservations`` (text keys
    dropped) for dict and tuple observations, none otherwise (RLlib's default connectors). A local
    env runner without an environment (it never samples) gets none."""
    from gymnasium import spaces as gym_spaces
    from ray.rllib.connectors.env_to_module import FlattenObservations

    if spaces is not None:
        obs_space, act_space = spaces["__env_single__"]
    elif env is not None:
        obs_space, act_space = env.single_observation_space, env.single_action_space
    else:
        return []
    if not isinstance(obs_space, (gym_spaces.Dict, gym_spaces.Tuple)):
        return []
    dropped = list(dropped_keys(obs_space, "this task"))
    return FlattenObservations(obs_space, act_space, keys_to_remove=dropped or None)


def _play_suite_episodes(runner: Any, units: list[tuple[str, int, int]], options: dict[str, dict],
                         observation: dict) -> list[dict]:
    """On an evaluation env runner: play this runner's share of ``units`` (task, seed, k) with its
    module (RLlib synced the latest weights before), each on a fresh polar_bench harness of the
    task with the suite's options, through `evaluate`'s episode loop."""
    import polar_bench
    from polar_bench.agent import RLlibAgent
    from polar_bench.evaluate.episodes import run_episode
    from polar_bench.task_info import space_from_json

    agent = RLlibAgent.from_module(runner.module, observation_space=space_from_json(observation["observation_space"]),
                                   dropped=tuple(observation["dropped"]))
    share = int(runner.config.num_env_runners or 1)
    mine = [u for u in units if u[2] % share == max(0, runner.worker_index - 1) % share]
    records, harnesses = [], {}
    try:
        for task, seed, _ in mine:
            if task not in harnesses:
                harnesses[task] = polar_bench.make(task, **options[task])
            rec = run_episode(harnesses[task], agent, seed, None, None)
            records.append({"task": task, "seed": seed, "return": rec["return"], "length": rec["length"],
                            "status": rec["status"]})
    finally:
        for h in harnesses.values():
            h.close()
    return records


def suite_evaluation(cfg: RunConfig, observation: dict, algo: Any, eval_workers: Any) -> tuple[dict, int, int]:
    """RLlib's ``custom_evaluation_function``: the suite's evaluation seeds of every evaluation task
    (the first ``eval_episodes`` of them, the seeds `evaluate --episodes N` plays), split over the
    separate evaluation env runners. Logs ``evaluation/suite/<task>/return_mean`` and
    ``evaluation/env_runners/episode_return_mean`` (over all tasks)."""
    from functools import partial

    suite = load_suite(cfg.suite)
    units, k = [], 0
    for task in evaluation_tasks(cfg):
        for seed in suite.task(task).seeds[:cfg.eval_episodes]:
            units.append((task, int(seed), k))
            k += 1
    options = {task: suite_options_of(task, cfg.suite) for task in evaluation_tasks(cfg)}
    play = partial(_play_suite_episodes, units=units, options=options, observation=observation)
    records = [r for part in eval_workers.foreach_env_runner(play, local_env_runner=False) for r in part]
    ok = [r for r in records if r["status"] == "ok" and r["return"] is not None]
    metrics: dict[str, Any] = {"suite": {}}
    for task in evaluation_tasks(cfg):
        mine = [r["return"] for r in ok if r["task"] == task]
        if mine:
            metrics["suite"][task] = {"return_mean": float(sum(mine) / len(mine)), "episodes": len(mine)}
    if ok:
        metrics["env_runners"] = {"episode_return_mean": float(sum(r["return"] for r in ok) / len(ok)),
                                  "num_episodes": len(ok)}
    # into the algorithm's metrics as an env runner's reduced metrics are (RLlib reads them back
    # from there into result["evaluation"])
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    logger = MetricsLogger()
    logger.log_value("round", float(algo.iteration), reduce="mean", window=1)
    for task, values in metrics["suite"].items():
        for name, value in values.items():
            logger.log_value(("suite", task, name), value, reduce="mean", window=1)
    for name, value in metrics.get("env_runners", {}).items():
        logger.log_value(("env_runners", name), value, reduce="mean", window=1)
    algo.metrics.aggregate([logger.reduce()], key="evaluation")
    steps = int(sum(r["length"] for r in ok))
    return metrics, steps, steps


def observation_spec(cfg: RunConfig) -> dict:
    """The harness's observation space and the keys the policy does not see (JSON), checked equal
    across the training and evaluation tasks (one policy plays them all)."""
    import polar_bench
    from polar_bench.task_info import space_to_json

    found = {}
    if cfg.tasks and cfg.num_workers < len(cfg.tasks):
        raise ExperimentError(f"{len(cfg.tasks)} tasks share one policy but distributed.num_workers is "
                              f"{cfg.num_workers}; give at least one env runner per task")
    for task in dict.fromkeys((cfg.task, *training_tasks(cfg), *evaluation_tasks(cfg))):
        env = polar_bench.make(task, **suite_options_of(task, cfg.suite))
        try:
            found[task] = (env.observation_space, env.action_space)
        finally:
            env.close()
    space, actions = found[cfg.task]
    for task, (other, other_actions) in found.items():
        if other != space or other_actions != actions:
            raise ExperimentError(f"task {task} has other observation or action spaces than {cfg.task}; one "
                                  f"policy trains and plays only tasks of the same spaces")
    return {"observation_space": space_to_json(space), "dropped": list(dropped_keys(space, cfg.task))}


def build_config(cfg: RunConfig, *, fault_tolerant: bool = True, observation: dict | None = None) -> Any:
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
    env_config: dict[str, Any] = {"task": cfg.task, "options": training_options(cfg.task, cfg.suite)}
    if cfg.tasks:
        env_config["tasks"] = [[task, training_options(task, cfg.suite)] for task in cfg.tasks]
    config = (classes[cfg.algorithm]()
              .environment(ENV_NAME, env_config=env_config)
              .env_runners(num_env_runners=cfg.num_workers, num_envs_per_env_runner=cfg.num_envs,
                           env_to_module_connector=flatten_connector,
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
        # evaluation_interval counts training iterations: an iteration of PPO, APPO or IMPALA samples
        # about one train batch; DQN and SAC sample min_sample_timesteps_per_iteration (seen here:
        # SAC 100 steps an iteration, whatever its batch of 256 replayed samples)
        per_iteration = max(1, config.min_sample_timesteps_per_iteration or 0) if cfg.algorithm in OFF_POLICY \
            else max(1, config.total_train_batch_size)
        iterations = max(1, round(cfg.eval_every / per_iteration))
        from functools import partial

        config = config.evaluation(
            evaluation_interval=iterations, evaluation_num_env_runners=1, evaluation_parallel_to_training=True,
            custom_evaluation_function=partial(suite_evaluation, cfg, observation or observation_spec(cfg)),
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

    observation = observation_spec(cfg)
    config = build_config(cfg, observation=observation)
    algo = config.build_algo()
    ckpt = run_dir(out_dir, cfg, "checkpoints")
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / RLLIB_OBSERVATION_FILE).write_text(json.dumps(observation))
    if resume and (ckpt / "rllib_checkpoint.json").exists():
        algo.restore_from_path(str(ckpt))
    writer = SummaryWriter(str(run_dir(out_dir, cfg, "tensorboard")))
    steps, evaluations, last_round = 0, [], None
    try:
        while True:
            result = algo.train()
            steps = int(result.get("num_env_steps_sampled_lifetime", 0) or
                        result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0))
            # RLlib repeats the last evaluation's metrics in later results: an evaluation is new
            # when its round (the iteration it ran in) is
            evaluation = result.get("evaluation", {})
            fresh = evaluation.get("round") is not None and evaluation.get("round") != last_round
            for name, value in _scalars(result).items():
                if name.startswith(("env_runners/", "learners/")) or (fresh and name.startswith("evaluation/")):
                    writer.add_scalar(name, value, steps)
            ev = evaluation.get("env_runners", {})
            if fresh and math.isfinite(ev.get("episode_return_mean", math.nan)):
                last_round = evaluation["round"]
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
        eval_tasks=tuple(_harness_task(dict(e), f"{path}: evaluation.harnesses[{i}]")
                         for i, e in enumerate(evaluation.get("harnesses") or [])),
        settings=agent)
    seeds = [int(s) for s in training.pop("seeds", [0])]
    one_policy = bool(training.pop("one_policy", False))
    if training:
        raise ExperimentError(f"{path}: unknown training setting(s) {sorted(training)}; known: "
                              f"total_timesteps, seeds, one_policy (algorithm settings go under agent:)")
    harnesses = data.get("harnesses") or []
    if not harnesses:
        raise ExperimentError(f"{path}: list at least one entry under 'harnesses'")
    tasks = [_harness_task(dict(entry), f"{path}: harnesses[{i}]") for i, entry in enumerate(harnesses)]
    parallel = [int(entry.get("num_parallel", 1)) for entry in harnesses]
    if one_policy:
        if len(set(parallel)) > 1:
            raise ExperimentError(f"{path}: training.one_policy needs the same num_parallel on every harness "
                                  f"(each env runner steps one task); got {parallel}")
        return [RunConfig(task=tasks[0], tasks=tuple(tasks), seed=seed, num_envs=parallel[0], **common)
                for seed in seeds]
    return [RunConfig(task=task, seed=seed, num_envs=n, **common) for task, n in zip(tasks, parallel, strict=True)
            for seed in seeds]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the YAML experiment file")
    parser.add_argument("--out-dir", default=str(ROOT / "runs" / "rllib"))
    parser.add_argument("--resume", action="store_true", help="continue each run from its checkpoint")
    parser.add_argument("--address", help="'auto' or ray://HOST:PORT of an existing cluster (default: a Ray of "
                                          "its own on this machine, which never joins another)")
    args = parser.parse_args(argv)
    import ray

    ray.init(address=args.address or "local", ignore_reinit_error=True, include_dashboard=False)
    summaries = [train(cfg, Path(args.out_dir).resolve(), resume=args.resume) for cfg in load_experiment(args.config)]
    for s in summaries:
        print(json.dumps(s))
    return summaries


if __name__ == "__main__":
    from baselines.ppo.train import run_command

    run_command(main)
