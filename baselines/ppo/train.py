"""Proximal Policy Optimization (Schulman et al. 2017) on polar_bench harnesses, read top to bottom:
the configuration, the environment factory, the loss pieces, evaluation, then the training loop.

    python -m baselines.ppo.train --task gym/CartPole-v1 --steps 2e5 --seed 0
    python -m baselines.ppo.train --task dmc/cheetah-run --steps 1e6 --seed 0 --out-dir runs/cheetah
    python -m baselines.ppo.train --config baselines/ppo/experiments/v1_trained.yaml --out-dir baselines/ppo

Implementation details follow cleanrl's ``ppo.py`` / ``ppo_continuous_action.py`` / ``ppo_procgen.py``
(Huang et al. 2022, "The 37 implementation details of PPO"): clipped surrogate objective, GAE,
optional value clipping, per-minibatch advantage normalization, entropy bonus, global gradient
clipping, linear learning-rate annealing, orthogonal initialization, and, for continuous control,
observation and reward normalization. One deliberate difference: episodes cut by the step limit
(truncated, not terminated) bootstrap from the value of their final observation, as SB3 does.
The networks and preprocessing live in ``networks.py`` (shared with ``agent.py``).

Outputs of a run of task T with seed S, under ``--out-dir`` (default: ``runs/ppo`` at the project root,
which git ignores; ``--out-dir baselines/ppo`` writes where the committed baseline lives):
  checkpoints/T/runS.pt (+ runS.json)  the policy ``agent.py`` plays as run S (it reads
                                       ``POLAR_PPO_CHECKPOINTS=<out-dir>/checkpoints``, else baselines/ppo's)
  curves/T/runS.csv                    the learning curve (one row per evaluation)
  tensorboard/T/seedS/                 TensorBoard events and scalars.csv

A suite that does not load, or a task it does not list, is an error naming the fix (``--suite none``
trains a task outside every suite, evaluated on seeds 0, 1, ... with the harness's default options).
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import inspect
import itertools
import json
import random
import sys
import time
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import polar_bench
from polar_bench import numerics
from polar_bench.errors import SuiteError, UserError
from polar_bench.suite import load_suite

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

from .networks import ObservationPreprocessor, Policy, RunningMeanStd, build_network, plays_sampled, save_checkpoint

HERE = Path(__file__).resolve().parent
PROJECT_ROOT = HERE.parents[1]
NO_SUITE = "none"


class ExperimentError(UserError, ValueError):
    """A bad experiment file, setting, suite or task: one line naming the fix (exit code 2)."""


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------

@dataclass
class Config:
    task: str = "gym/CartPole-v1"
    """polar_bench task id to train on (python -m polar_bench describe v1 lists them)"""
    steps: int = 500_000
    """total environment steps of training, all parallel environments together (1e6 is accepted)"""
    seed: int = 0
    """random seed of the run; the checkpoint is saved as run<seed>.pt"""
    num_envs: int | None = None
    """parallel environments (default: the domain's preset)"""
    num_steps: int | None = None
    """rollout length: steps per environment between updates (default: the domain's preset)"""
    learning_rate: float | None = None
    """Adam learning rate at the start (default: the domain's preset)"""
    anneal_lr: bool | None = None
    """anneal the learning rate linearly to 0 over training"""
    gamma: float | None = None
    """discount factor"""
    gae_lambda: float | None = None
    """lambda of generalized advantage estimation"""
    num_minibatches: int | None = None
    """minibatches per epoch (the batch is num_envs * num_steps)"""
    minibatch_size: int | None = None
    """alternative to --num-minibatches: samples per minibatch"""
    update_epochs: int | None = None
    """epochs over each batch"""
    norm_adv: bool | None = None
    """normalize advantages per minibatch"""
    clip_coef: float | None = None
    """surrogate clipping coefficient epsilon"""
    clip_vloss: bool | None = None
    """clip the value loss around the old values (as in the PPO paper's code)"""
    ent_coef: float | None = None
    """entropy bonus coefficient"""
    vf_coef: float | None = None
    """value loss coefficient"""
    max_grad_norm: float | None = None
    """global gradient-norm clipping threshold"""
    target_kl: float | None = None
    """stop the epochs of an update early once the approximate KL exceeds this (0: never)"""
    norm_obs: bool | None = None
    """normalize vector observations with running mean and std (standard for continuous control)"""
    norm_reward: bool | None = None
    """scale rewards by the running std of the discounted return (standard for continuous control)"""
    async_envs: bool = False
    """step the environments in subprocesses (gymnasium AsyncVectorEnv) instead of in-process"""
    suite: str = "v1"
    """suite (name or .toml) whose evaluation seeds and task options are used; 'none' for a task outside every suite"""
    eval_every: int | None = None
    """evaluate every this many environment steps (0: only at the end)"""
    eval_episodes: int | None = None
    """episodes per evaluation (default: the suite's, on its evaluation seeds)"""
    out_dir: str = str(PROJECT_ROOT / "runs" / "ppo")
    """output folder: checkpoints/<task>/run<seed>.pt, curves/<task>/run<seed>.csv, tensorboard/<task>/seed<seed>/"""
    torch_threads: int = 1
    """torch threads per process (small networks: more threads only add contention)"""
    numerics: str = "native"
    """numeric mode: 'avx2-portable' (same checkpoint bytes on any x86-64 CPU with AVX2 and FMA of one vendor),
    'x86-portable' (the same on AMD's and Intel's too) or 'native'"""
    progress: bool = True
    """show a progress bar with steps per second (plain lines when not on a terminal)"""


@dataclass(frozen=True)
class Hyperparameters:
    """The settings a run trains with, every one resolved: the `Config` value where it is set, else the
    domain's preset (`PRESETS`), else these defaults."""

    num_envs: int = 4
    num_steps: int = 128
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float = 0.0
    norm_obs: bool = False
    norm_reward: bool = False
    eval_every: int = 50_000


# Per-domain presets (every unset Config field above is filled from here, then from the
# Hyperparameters defaults). Sources: classic: rl-baselines3-zoo's CartPole-v1 PPO; dmc: cleanrl
# ppo_continuous_action (MuJoCo) with 4 envs; procgen: cleanrl ppo_procgen (Cobbe et al. 2020);
# nethack and babyai: cleanrl's Atari-like discrete settings with more entropy; atari100k: cleanrl's
# ppo_atari.py (8 envs x 128 steps, clip 0.1), with reward scaling instead of its reward clipping, and
# 25k-step evaluations within the benchmark's 100k-step budget.
PRESETS: dict[str, dict[str, Any]] = {
    "classic": dict(num_envs=8, num_steps=32, learning_rate=1e-3, gamma=0.98, gae_lambda=0.8,
                    num_minibatches=1, update_epochs=20, ent_coef=0.0, eval_every=10_000),
    "dmc": dict(num_envs=4, num_steps=512, learning_rate=3e-4, num_minibatches=32, update_epochs=10,
                ent_coef=0.0, norm_obs=True, norm_reward=True, eval_every=25_000),
    "procgen": dict(num_envs=64, num_steps=256, learning_rate=5e-4, gamma=0.999, num_minibatches=8,
                    update_epochs=3, ent_coef=0.01, norm_reward=True, eval_every=500_000),
    "nethack": dict(num_envs=16, num_steps=128, learning_rate=3e-4, gamma=0.999, ent_coef=0.01,
                    eval_every=100_000),
    "babyai": dict(num_envs=16, num_steps=128, learning_rate=5e-4, gamma=0.99, ent_coef=0.01,
                   eval_every=50_000),
    "atari100k": dict(num_envs=8, num_steps=128, learning_rate=2.5e-4, clip_coef=0.1, ent_coef=0.01,
                      norm_reward=True, eval_every=25_000),
}
CONTINUOUS = dict(norm_obs=True, norm_reward=True)  # Pendulum and any continuous task outside dmc


def resolve(cfg: Config, domain: str, continuous: bool) -> Hyperparameters:
    """The run's hyperparameters: ``cfg``'s where set, then the domain preset, then the defaults."""
    preset = {**(CONTINUOUS if continuous else {}), **PRESETS.get(domain, {})}
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Hyperparameters):
        mine = getattr(cfg, f.name)
        if mine is not None:
            values[f.name] = mine
        elif f.name in preset:
            values[f.name] = preset[f.name]
    hp = Hyperparameters(**values)
    if cfg.minibatch_size:
        hp = dataclasses.replace(hp, num_minibatches=max(1, hp.num_envs * hp.num_steps // cfg.minibatch_size))
    return hp


# ---------------------------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------------------------

def task_options(cfg: Config, task_id: str) -> tuple[dict, dict, list[int]]:
    """(training options, evaluation options, evaluation seeds) from the suite.

    Training options are the evaluation ones except for Procgen, whose protocol trains on levels
    0-199 only, and Atari, which trains with a life loss as the end of an episode (the game goes on;
    docs/families/atari.md). A suite that does not load or lacks the task raises `UserError` (a misspelt suite must
    not train silently on other options and seeds); with ``suite='none'`` the task is evaluated with
    its default options on seeds 0, 1, ... (``eval_episodes`` of them, 10 by default).
    """
    if cfg.suite.lower() == NO_SUITE:
        eval_options: dict[str, Any] = {}
        seeds = list(range(cfg.eval_episodes or 10))
    else:
        suite = load_suite(cfg.suite)  # SuiteError names the available suites
        try:
            spec = suite.task(task_id)
        except SuiteError as exc:
            raise ExperimentError(
                f"{exc} Pass --suite with a suite that lists it, or --suite none to evaluate it with "
                f"default options on seeds 0-{(cfg.eval_episodes or 10) - 1}") from None
        eval_options, seeds = dict(spec.options), list(spec.seeds)
    polar_bench.harness.check_options(task_id, eval_options)  # an unknown task or option fails here, at once
    if cfg.eval_episodes:
        seeds = (seeds * (cfg.eval_episodes // len(seeds) + 1))[:cfg.eval_episodes]
    train_options = dict(eval_options)
    if task_id.startswith("procgen/"):
        train_options.update(start_level=0, num_levels=200)
    if task_id.startswith("atari/"):
        train_options.update(terminal_on_life_loss=True)
    return train_options, eval_options, seeds


def make_env(task_id: str, options: dict):
    def thunk():
        return polar_bench.make(task_id, **options)
    return thunk


def make_vector_env(task_id: str, options: dict, num_envs: int, async_envs: bool = False) -> gym.vector.VectorEnv:
    """``num_envs`` harnesses; an ended episode resets in the same step and its last observation is
    in ``info["final_obs"]`` (needed to bootstrap truncated episodes)."""
    fns = [make_env(task_id, options) for _ in range(num_envs)]
    if async_envs:
        return gym.vector.AsyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    # copy=False: the loop turns each batch into tensors (copies) before the next step overwrites it
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP, copy=False)


# ---------------------------------------------------------------------------------------------
# The loss pieces (pure functions; tests check them against hand computations)
# ---------------------------------------------------------------------------------------------

def compute_gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, next_value: np.ndarray,
                gamma: float, gae_lambda: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over a rollout of shape (T, N).

    ``dones[t]`` is 1 where the episode ended with step t (its reward ``rewards[t]`` already holds any
    bootstrap of a truncation), ``next_value`` (N,) is the value of the observation after the
    rollout. Returns (advantages, returns = advantages + values), both (T, N).
    """
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        following = next_value if t == len(rewards) - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * following * nonterminal - values[t]
        last = delta + gamma * gae_lambda * nonterminal * last
        advantages[t] = last
    return advantages, advantages + values


def policy_loss(new_logprob: torch.Tensor, old_logprob: torch.Tensor, advantages: torch.Tensor,
                clip_coef: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The clipped surrogate objective, negated: mean(max(-A r, -A clip(r, 1-eps, 1+eps))).

    Also returns the approximate KL divergence ((r - 1) - log r, Schulman's low-variance estimator)
    and the fraction of samples whose ratio was clipped, both without gradients."""
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()
    loss = torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return loss, approx_kl, clipfrac


def value_loss(new_value: torch.Tensor, old_value: torch.Tensor, returns: torch.Tensor,
               clip_coef: float | None) -> torch.Tensor:
    """0.5 * mean squared error to the returns; with ``clip_coef``, the max of the plain and the
    clipped error, the prediction clipped to old_value +- clip_coef."""
    unclipped = (new_value - returns) ** 2
    if clip_coef is None:
        return 0.5 * unclipped.mean()
    clipped = old_value + (new_value - old_value).clamp(-clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (clipped - returns) ** 2).mean()


def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    if advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


class RewardScaler:
    """Divide rewards by the running std of the discounted return (gymnasium's NormalizeReward, then
    clipping to [-clip, clip], as cleanrl does for continuous control)."""

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0):
        self.rms, self.gamma, self.clip = RunningMeanStd(), gamma, clip
        self.discounted = np.zeros(num_envs)

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        self.discounted = self.discounted * self.gamma + rewards
        self.rms.update(self.discounted)
        self.discounted[dones] = 0.0
        return np.clip(rewards / np.sqrt(self.rms.var + 1e-8), -self.clip, self.clip)


def make_optimizer(network: torch.nn.Module, learning_rate: float) -> torch.optim.Optimizer:
    """Adam with eps 1e-5 (cleanrl); the fused kernel where this torch has it (the same update, in
    one call instead of a dozen small ones per parameter: it matters with small networks)."""
    try:
        return torch.optim.Adam(network.parameters(), lr=learning_rate, eps=1e-5, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(network.parameters(), lr=learning_rate, eps=1e-5)


# ---------------------------------------------------------------------------------------------
# Evaluation on the suite's seeds
# ---------------------------------------------------------------------------------------------

class Evaluator:
    """Plays the policy on one harness per evaluation seed, all in lockstep, the same way
    ``agent.py`` plays it under ``evaluate``: the mode action (one batched forward pass per step), or,
    for Procgen and NetHack (`networks.plays_sampled`), actions sampled with a generator per episode
    seeded by that seed."""

    def __init__(self, task_id: str, options: dict, seeds: list[int]):
        self.seeds = seeds
        self.envs = [polar_bench.make(task_id, **options) for _ in seeds]
        self.sampled = plays_sampled(self.envs[0].observation_space) if self.envs else False

    def __call__(self, policy: Policy) -> np.ndarray:
        returns = np.zeros(len(self.seeds))
        obs = [env.reset(seed=s)[0] for env, s in zip(self.envs, self.seeds, strict=True)]
        generators = [torch.Generator().manual_seed(int(s)) for s in self.seeds]
        active = list(range(len(self.envs)))
        while active:
            actions: list[Any] | np.ndarray
            if self.sampled:  # one row at a time, each with its episode's generator (as agent.py)
                actions = [policy.act(policy.preprocess.stack([obs[i]]), deterministic=False,
                                      generator=generators[i])[0] for i in active]
            else:
                actions = policy.act(policy.preprocess.stack([obs[i] for i in active]))
            still = []
            for i, action in zip(active, actions, strict=True):
                obs[i], reward, terminated, truncated, _ = self.envs[i].step(action)
                returns[i] += reward
                if not (terminated or truncated):
                    still.append(i)
            active = still
        return returns

    def close(self) -> None:
        for env in self.envs:
            env.close()


# ---------------------------------------------------------------------------------------------
# Logging and progress
# ---------------------------------------------------------------------------------------------

_warned_tensorboard = False


class Logger:
    """Scalars to TensorBoard (when installed) and to scalars.csv; the learning curve to its CSV."""

    def __init__(self, log_dir: Path, curve_path: Path):
        global _warned_tensorboard
        log_dir.mkdir(parents=True, exist_ok=True)
        curve_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            from torch.utils.tensorboard import SummaryWriter
            self.tb: SummaryWriter | None = SummaryWriter(str(log_dir))
        except ImportError:
            self.tb = None
            if not _warned_tensorboard:
                print("tensorboard is not installed (pip install tensorboard): logging to CSV only",
                      file=sys.stderr)
                _warned_tensorboard = True
        self.scalars = open(log_dir / "scalars.csv", "w", newline="")
        self.scalars_csv = csv.writer(self.scalars)
        self.scalars_csv.writerow(["env_steps", "name", "value"])
        self.curve = open(curve_path, "w", newline="")
        self.curve_csv = csv.writer(self.curve)
        self.curve_csv.writerow(["env_steps", "seconds", "eval_return_mean", "eval_return_std",
                                 "eval_episodes", "train_return_mean", "train_episodes", "steps_per_second"])

    def log(self, step: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            if self.tb is not None:
                self.tb.add_scalar(name, value, step)
            self.scalars_csv.writerow([step, name, f"{value:.6g}"])

    def curve_row(self, row: list) -> None:
        self.curve_csv.writerow(row)
        self.curve.flush()
        self.scalars.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        self.scalars.close()
        self.curve.close()


class Progress:
    """A tqdm bar with steps per second on a terminal; plain lines (every 10%) otherwise."""

    def __init__(self, total: int, label: str, enabled: bool):
        self.total, self.label, self.enabled = total, label, enabled
        self.tty = enabled and sys.stderr.isatty()
        self.next_line = total / 10
        self.bar = None
        if self.tty:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=label, unit="step", unit_scale=True, dynamic_ncols=True)

    def update(self, step: int, sps: float, stats: dict) -> None:
        if self.bar is not None:
            self.bar.n = min(step, self.total)
            self.bar.set_postfix({"sps": f"{sps:.0f}", **stats}, refresh=True)
        elif self.enabled and step >= self.next_line:
            self.next_line += self.total / 10
            extra = "  ".join(f"{k} {v}" for k, v in stats.items())
            print(f"{self.label}: {step}/{self.total} steps ({100 * step / self.total:.0f}%)  "
                  f"{sps:.0f} steps/s  {extra}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

def checkpoint_file(cfg: Config) -> Path:
    """Where the run's checkpoint goes: ``<out_dir>/checkpoints/<task>/run<seed>.pt``."""
    return Path(cfg.out_dir) / "checkpoints" / cfg.task / f"run{cfg.seed}.pt"


def train(cfg: Config) -> dict:
    """Train one PPO policy on ``cfg.task``; returns a summary (steps, seconds, final evaluation, the
    numeric mode in force)."""
    if cfg.numerics in numerics.PORTABLE_MODES and cfg.torch_threads != 1:
        raise ExperimentError(f"--numerics {cfg.numerics} trains with one torch thread; "
                              f"drop --torch-threads {cfg.torch_threads}")
    numerics.enter(cfg.numerics, cfg.torch_threads)
    torch.set_num_threads(cfg.torch_threads)
    mode = numerics.in_force(cfg.numerics)  # raises where the portable mode did not take
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)

    train_options, eval_options, eval_seeds = task_options(cfg, cfg.task)
    probe = polar_bench.make(cfg.task, **train_options)
    task = probe.task_info
    probe.close()
    continuous = isinstance(task.action_space, spaces.Box)
    hp = resolve(cfg, task.domain, continuous)
    envs = make_vector_env(cfg.task, train_options, hp.num_envs, cfg.async_envs)
    evaluator = Evaluator(cfg.task, eval_options, eval_seeds)

    preprocess = ObservationPreprocessor(task.observation_space, normalize=hp.norm_obs)
    network = build_network(task.observation_space, task.action_space)
    policy = Policy(preprocess, network)
    optimizer = make_optimizer(network, hp.learning_rate)
    reward_scaler = RewardScaler(hp.num_envs, hp.gamma) if hp.norm_reward else None

    T, N = hp.num_steps, hp.num_envs
    batch_size = T * N
    minibatch_size = max(1, batch_size // hp.num_minibatches)
    num_updates = max(1, cfg.steps // batch_size)
    name = f"{cfg.task}/run{cfg.seed}"
    out = Path(cfg.out_dir)
    checkpoint_path = checkpoint_file(cfg)
    logger = Logger(out / "tensorboard" / cfg.task / f"seed{cfg.seed}",
                    out / "curves" / cfg.task / f"run{cfg.seed}.csv")
    progress = Progress(num_updates * batch_size, name, cfg.progress)
    generator = torch.Generator().manual_seed(cfg.seed)

    # Rollout storage; observation tensors are allocated from the first prepared batch.
    raw_obs, _ = envs.reset(seed=cfg.seed)
    next_obs = preprocess(raw_obs, update=True)
    obs_buf = {k: torch.zeros((T,) + v.shape, dtype=v.dtype) for k, v in next_obs.items()}
    action_shape: tuple[int, ...] = () if network.discrete else tuple(task.action_space.shape or ())
    actions = torch.zeros((T, N) + action_shape, dtype=torch.long if network.discrete else torch.float32)
    logprobs = torch.zeros((T, N))
    rewards, dones, values = np.zeros((T, N), np.float32), np.zeros((T, N), np.float32), np.zeros((T, N), np.float32)

    episode_return, episode_length = np.zeros(N), np.zeros(N, np.int64)
    recent_returns: list[float] = []
    global_step, next_eval, start = 0, hp.eval_every or float("inf"), time.time()
    last_eval: tuple[float, float, list[float]] | None = None
    eval_seconds = 0.0

    def evaluate_and_save(final: bool = False) -> tuple[float, float, list[float]]:
        nonlocal last_eval, eval_seconds
        began = time.time()
        returns = evaluator(policy)
        last_eval = (float(returns.mean()), float(returns.std()), [round(float(r), 3) for r in returns])
        elapsed = time.time() - start
        train_mean = float(np.mean(recent_returns)) if recent_returns else float("nan")
        logger.log(global_step, {"eval/return_mean": last_eval[0], "eval/return_std": last_eval[1]})
        logger.curve_row([global_step, f"{elapsed:.1f}", f"{last_eval[0]:.3f}", f"{last_eval[1]:.3f}",
                          len(returns), f"{train_mean:.3f}", len(recent_returns),
                          f"{global_step / max(elapsed, 1e-9):.0f}"])
        save_checkpoint(checkpoint_path, policy, task_id=cfg.task, domain=task.domain,
                        env_steps=global_step, config={**dataclasses.asdict(cfg), **dataclasses.asdict(hp)},
                        eval_return=last_eval[0])
        checkpoint_path.with_suffix(".json").write_text(json.dumps(
            {"task": cfg.task, "domain": task.domain, "run": cfg.seed, "env_steps": global_step,
             "eval_return_mean": last_eval[0], "eval_return_std": last_eval[1],
             "eval_seeds": eval_seeds, "final": final, "numerics": mode}, indent=1) + "\n")
        eval_seconds += time.time() - began
        return last_eval

    for update in range(1, num_updates + 1):
        if hp.anneal_lr:
            optimizer.param_groups[0]["lr"] = hp.learning_rate * (1.0 - (update - 1.0) / num_updates)

        # 1. Collect a rollout of T steps in each of the N environments.
        for step in range(T):
            global_step += N
            for k, v in next_obs.items():
                obs_buf[k][step] = v
            with torch.inference_mode():
                action, logprob, value = network.sample(next_obs)
            actions[step], logprobs[step], values[step] = action, logprob, value.numpy()
            env_action = action.numpy() if network.discrete else np.clip(action.numpy(), -1.0, 1.0)
            raw_obs, reward, terminated, truncated, info = envs.step(env_action)
            done = terminated | truncated

            episode_return += reward
            episode_length += 1
            for i in np.flatnonzero(done):
                recent_returns = (recent_returns + [float(episode_return[i])])[-20:]
                logger.log(global_step, {"train/episode_return": float(episode_return[i]),
                                         "train/episode_length": int(episode_length[i])})
                episode_return[i], episode_length[i] = 0.0, 0

            reward = reward.astype(np.float64)
            if reward_scaler is not None:
                reward = reward_scaler(reward, done)
            cut = np.flatnonzero(truncated & ~terminated)
            if len(cut):  # bootstrap episodes cut by the step limit from their final observation
                final = preprocess(preprocess.stack([info["final_obs"][i] for i in cut]))
                with torch.no_grad():
                    reward[cut] += hp.gamma * network.get_value(final).numpy()
            rewards[step], dones[step] = reward, done
            next_obs = preprocess(raw_obs, update=True)

        # 2. Advantages and returns.
        with torch.no_grad():
            next_value = network.get_value(next_obs).numpy()
        advantages, returns = compute_gae(rewards, values, dones, next_value, hp.gamma, hp.gae_lambda)

        # 3. Optimize the policy and value network on minibatches of the flattened batch.
        b_obs = {k: v.reshape((batch_size,) + v.shape[2:]) for k, v in obs_buf.items()}
        b_actions = actions.reshape((batch_size,) + action_shape)
        b_logprobs = logprobs.reshape(-1)
        b_advantages = torch.from_numpy(advantages.reshape(-1))
        b_returns = torch.from_numpy(returns.reshape(-1))
        b_values = torch.from_numpy(values.reshape(-1))
        vclip = hp.clip_coef if hp.clip_vloss else None
        for _ in range(hp.update_epochs):
            order = torch.randperm(batch_size, generator=generator)
            for begin in range(0, batch_size, minibatch_size):
                mb = order[begin:begin + minibatch_size]
                _, new_logprob, entropy, new_value = network.get_action_and_value(
                    {k: v[mb] for k, v in b_obs.items()}, b_actions[mb])
                mb_advantages = normalize_advantages(b_advantages[mb]) if hp.norm_adv else b_advantages[mb]
                pg_loss, approx_kl, clipfrac = policy_loss(new_logprob, b_logprobs[mb], mb_advantages, hp.clip_coef)
                v_loss = value_loss(new_value, b_values[mb], b_returns[mb], vclip)
                entropy_loss = entropy.mean()
                loss = pg_loss - hp.ent_coef * entropy_loss + hp.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(network.parameters(), hp.max_grad_norm)
                optimizer.step()
            if hp.target_kl and approx_kl > hp.target_kl:
                break

        sps = global_step / max(time.time() - start, 1e-9)
        if update % 10 == 0 or update == num_updates:
            explained = 1 - np.var(returns - values) / max(np.var(returns), 1e-8)
            logger.log(global_step, {
                "losses/policy": pg_loss.item(), "losses/value": v_loss.item(),
                "losses/entropy": entropy_loss.item(), "losses/approx_kl": approx_kl.item(),
                "losses/clipfrac": clipfrac.item(), "losses/explained_variance": float(explained),
                "charts/learning_rate": optimizer.param_groups[0]["lr"], "charts/steps_per_second": sps})
        if global_step >= next_eval and update < num_updates:
            evaluate_and_save()
            next_eval += hp.eval_every
        stats = {"return": f"{np.mean(recent_returns):.1f}" if recent_returns else "-"}
        if last_eval is not None:
            stats["eval"] = f"{last_eval[0]:.1f}"
        progress.update(global_step, sps, stats)

    final_eval = evaluate_and_save(final=True)
    progress.close()
    envs.close()
    evaluator.close()
    logger.close()
    seconds = time.time() - start
    summary = {"task": cfg.task, "seed": cfg.seed, "env_steps": global_step, "seconds": round(seconds, 1),
               "train_seconds": round(seconds - eval_seconds, 1),  # without the evaluations
               "steps_per_second": round(global_step / (seconds - eval_seconds)), "eval_return_mean": final_eval[0],
               "eval_return_std": final_eval[1], "eval_returns": final_eval[2], "numerics": mode,
               "checkpoint": str(checkpoint_path)}
    print(json.dumps(summary), flush=True)
    return summary


# ---------------------------------------------------------------------------------------------
# Experiment files (YAML) and the command line
# ---------------------------------------------------------------------------------------------

# Keys of the seed design's example layout, mapped to Config fields.
_TRAINING_KEYS = {"total_timesteps": "steps", "rollout_length": "num_steps", "batch_size": "minibatch_size",
                  "num_epochs": "update_epochs", "seed": "seed"}
_EVALUATION_KEYS = {"interval": "eval_every", "num_episodes": "eval_episodes", "suite": "suite"}
_HARNESS_KEYS = {"num_parallel": "num_envs", **_TRAINING_KEYS}


def _harness_task(entry: dict, where: str) -> str:
    kind = entry.get("type")
    if kind in ("gymnasium", "gym") and "env_id" in entry:
        return f"gym/{entry['env_id']}"
    if kind in ("dm_control", "dmc") and {"domain", "task"} <= set(entry):
        return f"dmc/{entry['domain']}-{entry['task']}"
    if "task" in entry:
        return str(entry["task"])
    raise ExperimentError(f"{where}: name the task, e.g. 'task: dmc/cheetah-run' "
                     f"(or type: gymnasium + env_id, or type: dm_control + domain + task)")


def field_types() -> dict[str, type]:
    """Each `Config` field's type, without its ``| None`` (``num_envs: int | None`` gives ``int``)."""
    out = {}
    for name, hint in typing.get_type_hints(Config).items():
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out[name] = hint
    return out


def _config_value(name: str, value: Any, where: str) -> Any:
    kinds = field_types()
    if name not in kinds:
        raise ExperimentError(f"{where}: unknown setting {name!r}; known: {', '.join(sorted(kinds))}")
    if value is None or kinds[name] is str or isinstance(value, bool):
        return value
    try:
        if kinds[name] is int:
            return int(float(value))  # YAML reads 2e5 as a string
        if kinds[name] is float:
            return float(value)
    except (TypeError, ValueError):
        raise ExperimentError(f"{where}: setting {name!r} must be a number, got {value!r}") from None
    return value


def read_experiment_file(path: str | Path) -> dict[str, Any]:
    """The YAML mapping of an experiment file, or `UserError` naming what is wrong with it."""
    from polar_bench._optional import require

    yaml = require("yaml", "train", "reading experiment files")
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ExperimentError(f"cannot read the experiment file {str(path)!r}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: an experiment file is a mapping with sections experiment, agent, "
                              f"harnesses, training, evaluation")
    return data


def load_experiment(path: str | Path) -> list[Config]:
    """The runs an experiment file asks for: one `Config` per (harness, seed).

    Layout (see baselines/ppo/experiments/*.yaml)::

        experiment: {name: cartpole}
        agent: {algorithm: ppo, learning_rate: 1e-3}      # any Config setting, for every harness
        harnesses:
          - {task: gym/CartPole-v1, num_parallel: 8}      # + per-harness Config settings
        training: {total_timesteps: 2e5, rollout_length: 32, seeds: [0, 1, 2]}
        evaluation: {interval: 10000, suite: v1}

    Each harness is trained as its own policy (the agent plays one checkpoint per task and run).
    """
    data = read_experiment_file(path)
    unknown = set(data) - {"experiment", "agent", "harnesses", "training", "evaluation", "distributed"}
    if unknown:
        raise ExperimentError(f"{path}: unknown section(s) {sorted(unknown)}; expected experiment, agent, "
                         f"harnesses, training, evaluation")
    common: dict[str, Any] = {}
    agent = dict(data.get("agent") or {})
    algorithm = str(agent.pop("algorithm", agent.pop("type", "ppo"))).lower()
    if algorithm != "ppo":
        raise ExperimentError(f"{path}: agent.algorithm is {algorithm!r}; this trainer runs 'ppo'")
    agent.pop("rl", None)
    for key, value in agent.items():
        common[key] = _config_value(key, value, f"{path}: agent")
    training = dict(data.get("training") or {})
    seeds = training.pop("seeds", None)
    for key, value in training.items():
        name = _TRAINING_KEYS.get(str(key), str(key))
        common[name] = _config_value(name, value, f"{path}: training")
    for key, value in dict(data.get("evaluation") or {}).items():
        if key == "harnesses":
            continue  # evaluation always uses the trained task on the suite's seeds
        name = _EVALUATION_KEYS.get(str(key), str(key))
        common[name] = _config_value(name, value, f"{path}: evaluation")
    harnesses = data.get("harnesses") or []
    if not harnesses:
        raise ExperimentError(f"{path}: list at least one entry under 'harnesses'")
    seeds = [int(s) for s in (seeds if seeds is not None else [common.get("seed", 0)])]
    configs = []
    for i, entry in enumerate(harnesses):
        where = f"{path}: harnesses[{i}]"
        entry = dict(entry)
        settings = dict(common, task=_harness_task(entry, where))
        for key, value in entry.items():
            if key in ("task", "type", "env_id", "domain"):
                continue
            name = _HARNESS_KEYS.get(str(key), str(key))
            settings[name] = _config_value(name, value, where)
        for seed in seeds:
            configs.append(Config(**dict(settings, seed=seed)))
    return configs


def _field_docs(cls: type) -> dict[str, str]:
    """The docstring under each dataclass field (what tyro shows as help), parsed from the source."""
    docs = {}
    [definition] = ast.parse(inspect.getsource(cls)).body
    assert isinstance(definition, ast.ClassDef)
    for node, following in itertools.pairwise(definition.body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[node.target.id] = following.value.value.strip()
    return docs


def _count(text: str) -> int:
    return int(float(text))  # 2e5 and 200000 alike


def build_parser() -> argparse.ArgumentParser:
    """One flag per `Config` field (``--num-envs`` for ``num_envs``), typed by the field's annotation,
    its help from the docstring under the field: a new field needs no flag code."""
    parser = argparse.ArgumentParser(
        prog="python -m baselines.ppo.train", description=(__doc__ or "").split("\n\n")[0],
        argument_default=argparse.SUPPRESS)
    parser.add_argument("--config", help="a YAML experiment file; flags given here override it")
    docs, kinds = _field_docs(Config), field_types()
    for f in dataclasses.fields(Config):
        flag = "--" + f.name.replace("_", "-")
        default = "the domain's preset" if f.default is None else f.default
        help_text = f"{docs.get(f.name, '')} (default: {default})"
        kind = kinds[f.name]
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, help=help_text)
        elif kind is int:
            parser.add_argument(flag, type=_count, metavar="N", help=help_text)
        elif kind is float:
            parser.add_argument(flag, type=float, metavar="X", help=help_text)
        elif kind is str:
            parser.add_argument(flag, metavar="TEXT", help=help_text)
        else:
            raise TypeError(f"Config.{f.name}: no command-line flag for type {kind!r}; use bool, int, float or str")
    return parser


def configs_from_args(argv: list[str] | None = None) -> list[Config]:
    """The runs the command line asks for (an experiment file's, with the flags applied to each),
    with each run's suite and task checked, so that a typo fails before any training starts."""
    args = vars(build_parser().parse_args(argv))
    config_file = args.pop("config", None)
    configs = load_experiment(config_file) if config_file else [Config()]
    configs = [dataclasses.replace(c, **args) for c in configs]
    for c in configs:
        task_options(c, c.task)
    return configs


def main(argv: list[str] | None = None) -> list[dict]:
    configs = configs_from_args(argv)
    summaries = [train(c) for c in configs]
    folders = sorted({str(Path(c.out_dir) / "checkpoints") for c in configs})
    print(f"checkpoints in {', '.join(folders)}; evaluate them with POLAR_PPO_CHECKPOINTS={folders[0]} "
          f"python -m polar_bench evaluate baselines/ppo/agent.py ...", file=sys.stderr)
    return summaries


def run_command(main_function: Any) -> None:
    """Run ``main_function()`` as a command: a `UserError` is one line on stderr and exit code 2."""
    try:
        main_function()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    run_command(main)
