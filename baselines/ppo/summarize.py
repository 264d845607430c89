"""A Markdown table of a results file per task: training steps, each run's mean return, the mean
normalized score, and the suite's references; optionally a second results file side by side.

    python -m baselines.ppo.summarize baselines/ppo/results/ppo-v1.json
    python -m baselines.ppo.summarize baselines/llm_ppo/results/llm_ppo-v1.json \
        --against baselines/ppo/results/ppo-v1.json
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from polar_bench.results import Status, read_results
from polar_bench.suite import load_suite


def per_run_means(path) -> tuple[dict, dict]:
    """({task: {run: mean return}}, the results' agent info)."""
    res = read_results(path)
    returns: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for e in res.episodes:
        if e.status is Status.OK and e.ret is not None:
            returns[e.task][e.run].append(e.ret)
    return ({t: {r: float(np.mean(v)) for r, v in runs.items()} for t, runs in returns.items()},
            res.agent_info)


def table(path, against=None, suite: str = "v1", digits: int = 3) -> str:
    s = load_suite(suite)
    means, info = per_run_means(path)
    other = per_run_means(against)[0] if against else None
    steps = info.get("training_steps_per_task") or {}
    head = ["task", "env steps", "runs: mean return", "normalized", "low", "high"]
    if other is not None:
        head += ["other: normalized"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    def fmt(v: float) -> str:
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.{digits}g}"
    for t in s.tasks:
        if t.id not in means:
            continue
        runs = means[t.id]
        norm = np.mean([t.normalize(v) for v in runs.values()])
        row = [t.id, f"{steps.get(t.id, 0):,}" if steps.get(t.id) else "-",
               ", ".join(fmt(runs[r]) for r in sorted(runs)), f"{norm:.3f}",
               fmt(t.low.value), fmt(t.high.value)]
        if other is not None:
            o = other.get(t.id)
            row.append(f"{np.mean([t.normalize(v) for v in o.values()]):.3f}" if o else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--against", default=None, help="a second results file: its normalized score per task")
    ap.add_argument("--suite", default="v1")
    args = ap.parse_args(argv)
    print(table(args.results, args.against, args.suite))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
