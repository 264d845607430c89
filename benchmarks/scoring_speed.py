"""Speed of polar_bench.scoring against rliable on the same input, in one run.

    python benchmarks/scoring_speed.py            # full: rliable takes about a minute
    python benchmarks/scoring_speed.py --quick    # rliable on a tenth of the replicates, extrapolated

Workloads (issue 4): the four aggregates (IQM, mean, median, optimality gap) with 50,000 stratified-
bootstrap replicates on a (10 runs × 20 tasks) matrix, computed the way rliable's README does (one
bootstrap whose function returns the four values), and the probability of improvement of X over Y
(10 × 20 each) with 2,000 replicates. Targets: ≥ 50× faster for the aggregates (issue 16), ≥ 50× for the
probability of improvement. Our times are the best of three runs (rliable's: one run).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from polar_bench import scoring  # noqa: E402

AGGREGATES = ["iqm", "mean", "median", "optimality_gap"]


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def once(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="run rliable on a tenth of the replicates and scale its time by 10")
    parser.add_argument("--reps", type=int, default=50_000, help="replicates for the aggregates")
    parser.add_argument("--poi-reps", type=int, default=2_000, help="replicates for probability of improvement")
    args = parser.parse_args(argv)

    try:
        from rliable import library as rly
        from rliable import metrics
    except ImportError:
        print('rliable is needed for the comparison: pip install "polar_bench[test]"', file=sys.stderr)
        return 2

    rng = np.random.default_rng(0)
    x = rng.normal(0.5, 0.3, size=(10, 20))
    y = rng.normal(0.45, 0.3, size=(10, 20))
    scale = 10 if args.quick else 1

    ours_agg = best_of(lambda: scoring.interval_estimates({"x": x}, AGGREGATES, reps=args.reps, seed=0))
    ours_agg_separate = best_of(lambda: [scoring.interval_estimates({"x": x}, m, reps=args.reps, seed=0)
                                         for m in AGGREGATES])
    ours_poi = best_of(lambda: scoring.interval_estimates({"p": (x, y)}, "probability_of_improvement",
                                                          reps=args.poi_reps, seed=0))

    theirs_funcs = [metrics.aggregate_iqm, metrics.aggregate_mean, metrics.aggregate_median,
                    metrics.aggregate_optimality_gap]
    np.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs_agg = scale * once(lambda: rly.get_interval_estimates(
            {"x": x}, lambda s: np.array([f(s) for f in theirs_funcs]), reps=args.reps // scale))
        theirs_poi = scale * once(lambda: rly.get_interval_estimates(
            {"p": [x, y]}, lambda a, b: np.array([metrics.probability_of_improvement(a, b)]),
            reps=args.poi_reps // scale))

    # the same point estimates, to the bit
    assert all(scoring.METRICS[m].estimate(x) == f(x) for m, f in zip(AGGREGATES, theirs_funcs, strict=True))
    assert scoring.probability_of_improvement(x, y) == metrics.probability_of_improvement(x, y)

    note = " (extrapolated from a tenth of the replicates)" if args.quick else ""
    print(f"numpy {np.__version__}, Python {platform.python_version()}, {platform.machine()}")
    print(f"input: two (10 runs × 20 tasks) matrices{note}")
    rows = [
        (f"four aggregates, {args.reps:,} replicates", ours_agg, theirs_agg, 50),
        (f"probability of improvement, {args.poi_reps:,} replicates", ours_poi, theirs_poi, 50),
    ]
    print(f"{'workload':52s} {'ours (s)':>9s} {'rliable (s)':>12s} {'speed-up':>9s} {'target':>7s}")
    ok = True
    for name, ours, theirs, target in rows:
        ratio = theirs / ours
        ok &= ratio >= target
        print(f"{name:52s} {ours:9.3f} {theirs:12.2f} {ratio:8.0f}× {target:6d}×")
    print(f"(ours, the four aggregates as four separate bootstraps: {ours_agg_separate:.3f} s, "
          f"{theirs_agg / ours_agg_separate:.0f}× faster than rliable's one bootstrap)")
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
