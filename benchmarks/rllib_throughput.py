"""RLlib PPO (baselines/rllib) against baselines/ppo: environment steps per second with 1 and 2 env
runners on gym/CartPole-v1 and dmc/cheetah-run, ratios side by side, then the final CartPole return
of each over seeds: the mean over seeds with its 95% stratified-bootstrap interval over runs
(`polar_bench.scoring.interval_estimates`, the suite's own interval method) and the 95% Student-t
half-width.

    python benchmarks/rllib_throughput.py                                  # throughput only, short
    python benchmarks/rllib_throughput.py --return-steps 1e5 --seeds 0 1 2 # + returns at 100k steps

Throughput is environment steps sampled over the wall time of training (RLlib: the ``train()``
calls, evaluation off; baselines/ppo: its ``train_seconds``). RLlib runs the learner in the driver
(``num_learners=0``) and each env runner as a Ray actor with ``num_parallel`` environments; on a
2-core machine 2 env runners and the learner share those cores. Returns: each final policy played
deterministically on suite v1's evaluation seeds (RLlib's through `polar_bench.agent.RLlibAgent`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppo_throughput import ci95, run_ours  # noqa: E402

import polar_bench  # noqa: E402
from baselines.rllib.train import RunConfig, train  # noqa: E402
from polar_bench.agent import RLlibAgent  # noqa: E402
from polar_bench.scoring import interval_estimates  # noqa: E402

NUM_ENVS = {"gym/CartPole-v1": 8, "dmc/cheetah-run": 4}


def play(agent: RLlibAgent, task: str) -> np.ndarray:
    spec = polar_bench.load_suite("v1").task(task)
    returns = []
    for seed in spec.seeds:
        harness = polar_bench.make(task, **spec.options)
        obs, info = harness.reset(seed=seed)
        agent.reset(seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = harness.step(agent.act(obs, info))
            total += float(reward)
            done = terminated or truncated
        harness.close()
        returns.append(total)
    return np.array(returns)


def bootstrap_interval(per_seed: list[np.ndarray]) -> str:
    """Mean over seeds of the per-seed evaluation means with its 95% percentile interval from the
    stratified bootstrap over runs (one task: a (seeds, 1) score matrix)."""
    runs = np.array([[float(r.mean())] for r in per_seed])
    points, intervals = interval_estimates({"x": runs}, "mean", seed=0)
    low, high = intervals["x"]
    return f"{points['x']:.1f} [{low:.1f}, {high:.1f}]"


def run_rllib(task: str, steps: int, seed: int, workers: int, out: Path) -> tuple[float, np.ndarray]:
    cfg = RunConfig(task=task, algorithm="ppo", steps=steps, seed=seed, num_envs=NUM_ENVS[task] // workers,
                    num_workers=workers, eval_every=0)
    seconds = []

    def clock(algo, result):
        seconds.append(time.perf_counter())

    start = time.perf_counter()
    summary = train(cfg, out, on_iteration=clock)
    sps = summary["steps"] / (seconds[-1] - start)
    return sps, play(RLlibAgent(summary["checkpoint"]), task)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cartpole-steps", type=lambda s: int(float(s)), default=20_000)
    p.add_argument("--cheetah-steps", type=lambda s: int(float(s)), default=8_192)
    p.add_argument("--return-steps", type=lambda s: int(float(s)), default=0,
                   help="CartPole steps per seed for the return comparison (0: skip)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = p.parse_args(argv)
    import ray

    ray.init(address="local", include_dashboard=False, log_to_driver=False)  # a Ray of its own
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for task, steps in (("gym/CartPole-v1", args.cartpole_steps), ("dmc/cheetah-run", args.cheetah_steps)):
            ours, _ = run_ours(task, steps, 0, Path(tmp) / "ppo")
            one, _ = run_rllib(task, steps, 0, 1, Path(tmp) / "r1")
            two, _ = run_rllib(task, steps, 0, 2, Path(tmp) / "r2")
            rows.append((task, steps, ours, one, two))
        head = ("task", "steps", "ppo sps", "rllib 1", "rllib 2", "1/ppo", "2/ppo", "2/1")
        print(f"{head[0]:18} " + " ".join(f"{h:>8}" for h in head[1:]))
        for task, steps, ours, one, two in rows:
            print(f"{task:18} {steps:8d} {ours:8.0f} {one:8.0f} {two:8.0f} {one / ours:8.2f} {two / ours:8.2f} "
                  f"{two / one:8.2f}")
        if args.return_steps:
            task = "gym/CartPole-v1"
            ppo_returns, rllib_returns = [], []
            for seed in args.seeds:
                ppo_returns.append(run_ours(task, args.return_steps, seed, Path(tmp) / "ppo")[1])
                rllib_returns.append(run_rllib(task, args.return_steps, seed, 2, Path(tmp) / f"s{seed}")[1])
            print(f"CartPole return at {args.return_steps} steps over seeds {args.seeds}, mean [95% bootstrap "
                  f"interval] (+- 95% t half-width): baselines/ppo {bootstrap_interval(ppo_returns)} "
                  f"({ci95(ppo_returns).strip()}), rllib ppo {bootstrap_interval(rllib_returns)} "
                  f"({ci95(rllib_returns).strip()})")
    ray.shutdown()


if __name__ == "__main__":
    main()
