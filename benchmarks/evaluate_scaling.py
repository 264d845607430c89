"""Episodes per second of `evaluate` with 1 and with 2 worker processes, on a CPU-bound task.

    python benchmarks/evaluate_scaling.py [--task dmc/cheetah-run] [--episodes 200] [--repeats 2]

Runs the random agent through the real evaluation path (spawned workers, journal, results file),
alternating 1 and 2 workers to share the machine's noise, and prints episodes per second and the
ratio. Target on a 2-core machine: ratio >= 1.7. Worker start-up (about 1 s: importing dm_control and
building the harness) is included, as a user waits for it; with 200 episodes (about 17 s of work for
one worker, less than half a full v1 evaluation) it is amortized as it is in real runs. Measured here
on 2026-12-02: 11.64 vs 21.51 episodes/s, ratio 1.85 (with 60 episodes, 1.59).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from backend_overhead import suite_for  # the one-task suite both benchmarks time

from polar_bench.evaluate import EvalConfig, run_evaluation

ROOT = Path(__file__).resolve().parent.parent


def episodes_per_second(suite, workers: int, tmp: Path) -> float:
    out = tmp / f"w{workers}-{time.monotonic_ns()}.json"
    cfg = EvalConfig(suite=suite, agent_path=str(ROOT / "examples" / "random_agent.py"), out=str(out),
                     tasks=list(suite.tasks), runs=1, workers=workers, progress=False)
    t0 = time.perf_counter()
    data, code = run_evaluation(cfg)
    elapsed = time.perf_counter() - t0
    assert code == 0, "episodes failed"
    return len(data.episodes) / elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="dmc/cheetah-run")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    suite = suite_for(args.task, {}, args.episodes)
    rates = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for w in (1, 2):
                rates[w].append(episodes_per_second(suite, w, Path(tmp)))
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    ratio = two / one
    print(f"task {args.task}, {args.episodes} episodes, median of {args.repeats} alternating repeats")
    print(f"{'workers':>8} {'episodes/s':>12}")
    print(f"{1:>8} {one:>12.2f}")
    print(f"{2:>8} {two:>12.2f}")
    print(f"ratio 2/1 = {ratio:.2f} (target >= 1.7: {'met' if ratio >= 1.7 else 'NOT met'})")


if __name__ == "__main__":
    main()
