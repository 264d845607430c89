"""Episodes per second of `evaluate` with local worker processes and with Ray actors, side by side.

    python benchmarks/backend_overhead.py [--workers 2] [--repeats 2]

Two workloads with the random agent: short episodes (gym/CartPole-v1, a few milliseconds each) and
long ones (dmc/cheetah-run with a 20,000-step limit, about a second each). Ray is started once before
timing, as it is on a cluster that already runs; creating the actors and shipping the agent folder
are timed, as are the local workers' start-up. Target: Ray within 15% of local processes
(ratio >= 0.85) for episodes that last a second or more.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from polar_bench.evaluate import EvalConfig, run_evaluation
from polar_bench.suite import parse_suite

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = [
    ("short", "gym/CartPole-v1", {}, 400),
    ("long", "dmc/cheetah-run", {"max_episode_steps": 20_000}, 12),
]


def suite_for(task: str, options: dict, episodes: int):
    data = {
        "suite": {"name": "bench", "version": "0", "seed": 1, "runs": 1, "episodes": episodes},
        "domains": [{"name": "d", "description": "-", "training": "-", "budget": "-"}],
        "tasks": [{"id": task, "domain": "d", "options": options,
                   "low": {"value": 0.0, "source": "-", "measured": False},
                   "high": {"value": 1.0, "source": "-", "measured": False}}],
    }
    return parse_suite(data, "bench")


def rate(suite, backend: str, workers: int, tmp: Path) -> tuple[float, float]:
    out = tmp / f"{backend}-{time.monotonic_ns()}.json"
    cfg = EvalConfig(suite=suite, agent_path=str(ROOT / "examples" / "random_agent.py"), out=str(out),
                     tasks=list(suite.tasks), runs=1, workers=workers, progress=False, backend=backend)
    t0 = time.perf_counter()
    data, code = run_evaluation(cfg)
    elapsed = time.perf_counter() - t0
    if code != 0:
        sys.exit("episodes failed")
    eps = data.episodes
    return len(eps) / elapsed, statistics.mean(e.wall_seconds or 0.0 for e in eps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    import ray

    ray.init(address="local", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, task, options, episodes in WORKLOADS:
            suite = suite_for(task, options, episodes)
            rates = {"local": [], "ray": []}
            length = 0.0
            for _ in range(args.repeats):
                for backend in ("local", "ray"):
                    r, length = rate(suite, backend, args.workers, Path(tmp))
                    rates[backend].append(r)
            local, on_ray = statistics.median(rates["local"]), statistics.median(rates["ray"])
            rows.append((name, task, episodes, length, local, on_ray, on_ray / local))
    ray.shutdown()
    print(f"{args.workers} workers, median of {args.repeats} alternating repeats")
    print(f"{'workload':8s} {'task':18s} {'episodes':>8s} {'s/episode':>9s} {'local ep/s':>10s} {'ray ep/s':>9s} "
          f"{'ratio':>6s}")
    for name, task, episodes, length, local, on_ray, ratio in rows:
        verdict = "met" if ratio >= 0.85 else "NOT met"
        target = "" if name == "short" else f"  (target >= 0.85: {verdict})"
        print(f"{name:8s} {task:18s} {episodes:8d} {length:9.3f} {local:10.2f} {on_ray:9.2f} {ratio:6.2f}{target}")


if __name__ == "__main__":
    main()
