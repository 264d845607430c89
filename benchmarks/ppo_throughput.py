"""Training throughput of the PPO baseline against Stable-Baselines3's PPO, matched hyperparameters.

    python benchmarks/ppo_throughput.py                      # CartPole-v1 100k steps, cheetah-run 20k
    python benchmarks/ppo_throughput.py --cartpole-steps 2e5 --cheetah-steps 5e4 --seeds 0 1

Both train on the same polar_bench harnesses with the same number of environments, rollout length,
epochs, minibatch size, learning rate (linearly annealed), discount, GAE lambda, policy clipping,
entropy coefficient, value loss and gradient clipping, one torch thread each; on cheetah-run both
normalize observations and rewards (SB3 through VecNormalize). The value loss is matched term for
term: SB3 weighs the plain mean squared error by ``vf_coef``, ours weighs half of it, so ours gets
twice SB3's coefficient; value clipping is off in both (as in rl-zoo's settings for these tasks),
because the two libraries clip differently (SB3 keeps only the clipped prediction's error, ours
the larger of the clipped and the plain error, as cleanrl) and no setting makes them equal.
Throughput is environment steps per second of training (``learn`` for SB3; ours without its
evaluations). Each trained policy is then evaluated
deterministically on suite v1's evaluation seeds of the task. Runs alternate between the two
libraries so that background load hits both alike. Prints a table and the ratio (ours / SB3;
target >= 1.0), and the final returns: the mean over seeds of each seed's evaluation mean, with a
95% Student-t confidence interval over seeds (the seed is the independent unit, not the episode).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polar_bench  # noqa: E402
from baselines.ppo import train as ppo  # noqa: E402

# Matched settings per task: ours (Config fields) and SB3's names for the same thing.
SETTINGS: dict[str, dict[str, Any]] = {
    "gym/CartPole-v1": dict(num_envs=8, num_steps=32, update_epochs=20, minibatch_size=256, learning_rate=1e-3,
                            gamma=0.98, gae_lambda=0.8, clip_coef=0.2, ent_coef=0.0, vf_coef=0.5,
                            max_grad_norm=0.5, norm_obs=False, norm_reward=False),  # rl-zoo's CartPole
    "dmc/cheetah-run": dict(num_envs=4, num_steps=512, update_epochs=10, minibatch_size=64, learning_rate=3e-4,
                            gamma=0.99, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.0, vf_coef=0.5,
                            max_grad_norm=0.5, norm_obs=True, norm_reward=True),
}


def run_ours(task: str, steps: int, seed: int, out: Path) -> tuple[float, np.ndarray]:
    settings = dict(SETTINGS[task])
    settings["vf_coef"] = 2 * settings["vf_coef"]  # ours: vf_coef * 0.5 * MSE; SB3: vf_coef * MSE
    cfg = ppo.Config(task=task, steps=steps, seed=seed, anneal_lr=True, clip_vloss=False, eval_every=0,
                     progress=False, out_dir=str(out), **settings)
    summary = ppo.train(cfg)  # ends with the evaluation on the suite's seeds
    return summary["env_steps"] / summary["train_seconds"], np.array(summary["eval_returns"])


def run_sb3(task: str, steps: int, seed: int) -> tuple[float, np.ndarray]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    s = SETTINGS[task]
    env = make_vec_env(lambda: polar_bench.make(task), n_envs=s["num_envs"], seed=seed)
    if s["norm_obs"] or s["norm_reward"]:
        env = VecNormalize(env, norm_obs=s["norm_obs"], norm_reward=s["norm_reward"], gamma=s["gamma"])
    lr = s["learning_rate"]
    model = PPO("MlpPolicy", env, n_steps=s["num_steps"], batch_size=s["minibatch_size"],
                n_epochs=s["update_epochs"], learning_rate=lambda remaining: lr * remaining,
                gamma=s["gamma"], gae_lambda=s["gae_lambda"], clip_range=s["clip_coef"],
                clip_range_vf=None, ent_coef=s["ent_coef"], vf_coef=s["vf_coef"],
                max_grad_norm=s["max_grad_norm"], seed=seed, device="cpu", verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    sps = model.num_timesteps / (time.perf_counter() - start)

    spec = polar_bench.load_suite("v1").task(task)
    returns = []
    for episode_seed in spec.seeds:
        harness = polar_bench.make(task, **spec.options)
        obs, _ = harness.reset(seed=episode_seed)
        total, done = 0.0, False
        while not done:
            o = env.normalize_obs(obs) if isinstance(env, VecNormalize) else obs
            action, _ = model.predict(o, deterministic=True)
            chosen = int(action) if np.ndim(action) == 0 else np.clip(action, -1, 1).astype(np.float32)
            obs, reward, terminated, truncated, _ = harness.step(chosen)
            total += reward
            done = terminated or truncated
        harness.close()
        returns.append(total)
    env.close()
    return sps, np.array(returns)


# Two-sided 95% quantiles of Student's t for 1..10 degrees of freedom (beyond: the normal's 1.96).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def ci95(per_seed: list[np.ndarray]) -> str:
    """Mean over seeds of the per-seed evaluation means, +- the 95% t half-width over seeds."""
    means = np.array([r.mean() for r in per_seed])
    n = len(means)
    if n < 2:
        return f"{means.mean():7.1f} (1 seed)"
    t = T975[n - 2] if n - 1 <= len(T975) else 1.96
    half = t * means.std(ddof=1) / np.sqrt(n)
    return f"{means.mean():7.1f} +- {half:5.1f}"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cartpole-steps", type=lambda s: int(float(s)), default=100_000)
    p.add_argument("--cheetah-steps", type=lambda s: int(float(s)), default=20_480)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for task, steps in (("gym/CartPole-v1", args.cartpole_steps), ("dmc/cheetah-run", args.cheetah_steps)):
            if steps <= 0:
                continue  # --cheetah-steps 0: skip the task
            ours_sps, sb3_sps, ours_ret, sb3_ret = [], [], [], []
            for seed in args.seeds:
                sps, ret = run_ours(task, steps, seed, Path(tmp))
                ours_sps.append(sps)
                ours_ret.append(ret)
                sps, ret = run_sb3(task, steps, seed)
                sb3_sps.append(sps)
                sb3_ret.append(ret)
                print(f"{task} seed {seed}: ours {ours_sps[-1]:.0f} steps/s, SB3 {sb3_sps[-1]:.0f} steps/s",
                      file=sys.stderr, flush=True)
            print(f"{task} per-seed final returns: ours {[round(float(r.mean()), 1) for r in ours_ret]}, "
                  f"SB3 {[round(float(r.mean()), 1) for r in sb3_ret]}", file=sys.stderr, flush=True)
            rows.append((task, steps, np.mean(ours_sps), np.mean(sb3_sps), ours_ret, sb3_ret))
    print(f"\nPPO training throughput, {len(args.seeds)} seed(s), 1 torch thread, matched hyperparameters")
    print(f"{'task':18} {'steps':>7} {'ours steps/s':>13} {'SB3 steps/s':>12} {'ratio':>6}   "
          f"{'ours final return':>20} {'SB3 final return':>20}")
    for task, steps, ours, sb3, ours_ret, sb3_ret in rows:
        print(f"{task:18} {steps:7d} {ours:13.0f} {sb3:12.0f} {ours / sb3:6.2f}   "
              f"{ci95(ours_ret):>20} {ci95(sb3_ret):>20}")
    print("final return: mean over seeds of each seed's mean over suite v1's evaluation episodes (mode action)"
          " +- 95% Student-t CI over seeds")


if __name__ == "__main__":
    main()
