"""Coverage of the bootstrap intervals, and the false "not tied" rate of the leaderboard's tie rule.

Simulated in suite v1's layout: 5 domains of 4, 6, 16, 7 and 5 tasks; each task's normalized scores
are drawn from a normal or a bimodal (two-normal mixture) distribution with its own parameters. The
true value of an IQM is the population's: the interquartile mean of each domain's mixture of tasks,
computed on 200,000 draws per task; the overall is the mean of the domains' (equal weights), as in
`polar_bench.analysis`.

Coverage: in each of ``--experiments`` experiments, every task gets ``runs`` fresh runs, and each
interval method of `polar_bench.scoring.interval_estimates` gives a nominal 95 % interval of the
overall IQM and of every domain's IQM; coverage is the fraction of experiments whose interval
contains the true value.

Ties: two identical agents (same distributions) are drawn, and the rule of the leaderboard
(`polar_bench.leaderboard.ranking`) calls them "better" or "worse" when the 95 % interval of the
probability of improvement over all domains excludes 0.5; the false "not tied" rate is the fraction
of experiments where it does.

    python benchmarks/interval_coverage.py                      # the table in docs/scoring.md
    python benchmarks/interval_coverage.py --runs 3 --experiments 100 --reps 1000   # a quick look
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from polar_bench import scoring

DOMAIN_TASKS = {"classic": 4, "control": 6, "procgen": 16, "nethack": 7, "babyai": 5}


def make_tasks(seed: int = 1234) -> dict[str, list[tuple[str, tuple[float, ...]]]]:
    """Per domain, a list of (kind, parameters): ``("normal", mu, sd)`` or ``("bimodal", p, mu1, mu2, sd)``."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple[str, tuple[float, ...]]]] = {}
    for domain, n in DOMAIN_TASKS.items():
        tasks: list[tuple[str, tuple[float, ...]]] = []
        for _ in range(n):
            if rng.random() < 0.5:
                tasks.append(("normal", (float(rng.uniform(0.1, 0.9)), float(rng.uniform(0.03, 0.25)))))
            else:
                lo = float(rng.uniform(0.0, 0.4))
                tasks.append(("bimodal", (float(rng.uniform(0.2, 0.8)), lo, lo + float(rng.uniform(0.3, 0.6)),
                                          float(rng.uniform(0.02, 0.1)))))
        out[domain] = tasks
    return out


def draw(task: tuple[str, tuple[float, ...]], n: int, rng: np.random.Generator) -> np.ndarray:
    kind, p = task
    if kind == "normal":
        return rng.normal(p[0], p[1], n)
    high = rng.random(n) < p[0]
    return np.where(high, rng.normal(p[2], p[3], n), rng.normal(p[1], p[3], n))


def sample(tasks: dict, runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {d: np.stack([draw(t, runs, rng) for t in ts], axis=1) for d, ts in tasks.items()}


def true_iqm(tasks: dict, n: int = 200_000, seed: int = 99) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    out = {}
    for d, ts in tasks.items():
        pooled = np.sort(np.concatenate([draw(t, n, rng) for t in ts]))
        cut = len(pooled) // 4
        out[d] = float(np.mean(pooled[cut:len(pooled) - cut]))
    out["overall"] = float(np.mean([out[d] for d in tasks]))
    return out


def coverage(tasks: dict, truth: dict, runs: int, experiments: int, reps: int,
             methods: tuple[str, ...], seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    hits = {m: {s: 0 for s in truth} for m in methods}
    for i in range(experiments):
        data = sample(tasks, runs, rng)
        for m in methods:
            entries = {"overall": data, **{d: data[d] for d in tasks}}
            r = scoring.interval_estimates(entries, "iqm", reps, seed=i, method=m)
            for s, (low, high) in r.intervals.items():
                hits[m][s] += int(low <= truth[s] <= high)
    return {m: {s: h / experiments for s, h in by.items()} for m, by in hits.items()}


def false_not_tied(tasks: dict, runs: int, experiments: int, reps: int, methods: tuple[str, ...],
                   seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed + 1)
    bad = {m: 0 for m in methods}
    for i in range(experiments):
        x, y = sample(tasks, runs, rng), sample(tasks, runs, rng)
        pairs = {d: (x[d], y[d]) for d in tasks}
        for m in methods:
            low, high = scoring.interval_estimates({"p": pairs}, "probability_of_improvement", reps, seed=i,
                                                   method=m).intervals["p"]
            bad[m] += int(not low <= 0.5 <= high)
    return {m: b / experiments for m, b in bad.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, nargs="+", default=[2, 3, 4, 5, 10])
    p.add_argument("--experiments", type=int, default=500)
    p.add_argument("--reps", type=int, default=2000, help="bootstrap replicates per interval")
    p.add_argument("--methods", nargs="+", default=list(scoring.INTERVAL_METHODS),
                   choices=scoring.INTERVAL_METHODS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-ties", action="store_true", help="skip the tie-rule simulation")
    args = p.parse_args()
    tasks = make_tasks()
    truth = true_iqm(tasks)
    methods = tuple(args.methods)
    print(f"{args.experiments} experiments, {args.reps} replicates, nominal 95 %; true overall IQM "
          f"{truth['overall']:.4f}")
    print("| runs | method | overall IQM | per domain (min–max) | identical agents called not tied |")
    print("|---:|---|---:|---:|---:|")
    for runs in args.runs:
        t0 = time.perf_counter()
        cov = coverage(tasks, truth, runs, args.experiments, args.reps, methods, args.seed)
        ties = {} if args.no_ties else false_not_tied(tasks, runs, args.experiments, args.reps, methods,
                                                     args.seed)
        for m in methods:
            dom = [cov[m][d] for d in tasks]
            tie = f"{ties[m]:.1%}" if m in ties else "–"
            print(f"| {runs} | {m} | {cov[m]['overall']:.1%} | {min(dom):.1%}–{max(dom):.1%} | {tie} |",
                  flush=True)
        print(f"<!-- {runs} runs: {time.perf_counter() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
