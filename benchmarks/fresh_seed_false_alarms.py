"""How often would verify's fresh-seed test fail an honest entry? Simulated on the committed entries' own episodes.

    python benchmarks/fresh_seed_false_alarms.py [--entries N] [--reps R] [--seed S]

For each leaderboard entry, every (task, run)'s submitted episodes stand in for the agent's true
distribution there: an honest verification is simulated by drawing the "published" episodes and the
fresh ones (as many as verify would play: `fresh_episode_count`) from them with replacement, then
running `gap_test` as verify does. The share of simulated verifications that fail is the false-alarm
rate, printed per entry with its 95% Clopper-Pearson interval beside the stated 1%.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from polar_bench.generalization import (  # noqa: E402
    FALSE_ALARM_RATE,
    TEST_LEVEL,
    fresh_episode_count,
    gap_test,
    normalized_by_stratum,
)
from polar_bench.leaderboard.checks import released_suites  # noqa: E402
from polar_bench.results import read_results  # noqa: E402


def simulate(strata: dict, per_run: int, rng: np.random.Generator, reps: int, seed: int, level: float) -> bool:
    published, fresh = {}, {}
    for domain, by_key in strata.items():
        for key, values in by_key.items():
            v = np.asarray(values)
            published.setdefault(domain, {})[key] = list(rng.choice(v, len(v)))
            fresh.setdefault(domain, {})[key] = list(rng.choice(v, per_run))
    return any(g.significant for g in gap_test(published, fresh, alpha=level, reps=reps, bootstrap_reps=10,
                                               seed=seed))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--entries", type=int, default=200, help="simulated verifications per entry (default 200)")
    p.add_argument("--reps", type=int, default=2000, help="permutation replicates per test (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--level", type=float, default=TEST_LEVEL, help="the test's level per entry (default: verify's)")
    args = p.parse_args()
    suites = released_suites()
    rng = np.random.default_rng(args.seed)
    total_fail = total = 0
    print(f"{'entry':18s} {'agent':44s} {'suite':5s} {'k':>3s} {'failed':>10s} {'rate':>6s}  95% interval")
    for results in sorted((ROOT / "leaderboard" / "entries").glob("*/results.json")):
        data = read_results(results)
        suite = suites[data.suite.hash]
        strata = normalized_by_stratum(suite, data.episodes)
        per_run = fresh_episode_count(strata, limit=min(t.episodes for t in suite.tasks))
        began = time.time()
        failed = sum(simulate(strata, per_run, rng, args.reps, i, args.level) for i in range(args.entries))
        lo = beta.ppf(0.025, failed, args.entries - failed + 1) if failed else 0.0
        hi = beta.ppf(0.975, failed + 1, args.entries - failed)
        total_fail, total = total_fail + failed, total + args.entries
        print(f"{results.parent.name:18s} {str(data.agent_info.get('name'))[:44]:44s} {suite.name:5s} {per_run:3d} "
              f"{failed:4d}/{args.entries:<5d} {failed / args.entries:6.3f}  [{lo:.3f}, {hi:.3f}]  "
              f"({time.time() - began:.0f} s)", flush=True)
    lo = beta.ppf(0.025, total_fail, total - total_fail + 1) if total_fail else 0.0
    hi = beta.ppf(0.975, total_fail + 1, total - total_fail)
    print(f"all entries: {total_fail}/{total} = {total_fail / total:.4f} [{lo:.4f}, {hi:.4f}] at level "
          f"{args.level} (stated: at most {FALSE_ALARM_RATE})")


if __name__ == "__main__":
    main()
