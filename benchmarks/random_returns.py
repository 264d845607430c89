"""Random-agent reference returns of every task of a family: uniform actions in [-1, 1] (continuous)
or uniform over the discrete actions, episode seeds 0..N-1, action generator seeded with 0.

    python benchmarks/random_returns.py mujoco --episodes 10

Prints one Markdown table row per task: task id, mean and standard deviation of the return.
"""

from __future__ import annotations

import argparse

import numpy as np

import polar_bench
from polar_bench.harness import task_names
from polar_bench.harness.rollout import random_episode


def random_returns(task_id: str, episodes: int) -> list[float]:
    harness = polar_bench.make(task_id)
    rng = np.random.default_rng(0)  # one generator for all the episodes, as the recorded tables used
    returns = [random_episode(harness, seed, rng)[0] for seed in range(episodes)]
    harness.close()
    return returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family")
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    print("| task | mean return | std |")
    print("|---|---:|---:|")
    for name in task_names(args.family):
        returns = random_returns(f"{args.family}/{name}", args.episodes)
        print(f"| {args.family}/{name} | {np.mean(returns):.1f} | {np.std(returns):.1f} |", flush=True)


if __name__ == "__main__":
    main()
