"""Random-agent reference returns of the tasks of families not in a suite yet (minihack, crafter, textworld, bullet).

For every task: episodes with seeds 0..N-1, each action drawn uniformly from the task's (discrete or [-1, 1] continuous)
action space by ``numpy.random.default_rng(seed)``, the task's default step limit. Writes the mean,
standard deviation, min and max of the returns (and the mean length) to a JSON file, which
docs/families/<family>.md tabulates.

Usage: python scripts/random_reference_text.py [--episodes 10] [--families minihack,crafter,textworld]
       [--out polar_bench/data/random_reference/text_families.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import polar_bench
from polar_bench.harness.rollout import random_episode


def run_task(task_id: str, episodes: int) -> dict:
    harness = polar_bench.make(task_id)
    returns, lengths = [], []
    for seed in range(episodes):
        total, steps = random_episode(harness, seed, np.random.default_rng(seed))
        returns.append(total)
        lengths.append(steps)
    harness.close()
    return {"episodes": episodes, "seeds": f"0-{episodes - 1}", "mean": statistics.fmean(returns),
            "std": statistics.pstdev(returns), "min": min(returns), "max": max(returns),
            "mean_length": statistics.fmean(lengths), "max_episode_steps": harness.task_info.max_episode_steps,
            "package_version": harness.task_info.package_version}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--families", default="minihack,crafter,textworld")
    parser.add_argument("--out", default="polar_bench/data/random_reference/text_families.json")
    args = parser.parse_args()
    out = Path(args.out)
    table = json.loads(out.read_text()) if out.exists() else {}
    for family in args.families.split(","):
        for name in polar_bench.harness.task_names(family):
            start = time.perf_counter()
            table[f"{family}/{name}"] = run_task(f"{family}/{name}", args.episodes)
            print(f"{family}/{name}: {table[f'{family}/{name}']} ({time.perf_counter() - start:.0f} s)", flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
