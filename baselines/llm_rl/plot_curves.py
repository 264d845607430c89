"""Learning curves of baselines/llm_rl runs, one line per run (training seed) and their mean, as a PNG
(matplotlib) beside a copy of each run's CSVs (``<run folder>.csv``, ``<run folder>.validation.csv``; such
copies are taken as sources too, so a plot can be redrawn from runs trained in different sessions):

- mean training return and success rate per iteration (the rollouts, before each update), and the loss;
- where the runs have a ``validation.csv``: the held-out learning curve, the IQM on the evaluation
  suite's scale with its 95% stratified-bootstrap interval (a band per run);
- where the runs' ``metrics.csv`` has per-level columns: each level's training success rate, mean over
  the runs of the iterations that played it.

It also prints the compute each run spent (environment steps, LLM calls, tokens, wall time) as a
Markdown table, for the README.

    python -m baselines.llm_rl.plot_curves runs/llm_rl/babyai5-seed{0,1,2}/metrics.csv \\
        baselines/llm_rl/curves/babyai5       (--title TEXT: default, the experiments and seeds plotted)
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import shutil
from pathlib import Path

KEYS = ["return_mean", "success_rate", "loss"]
LABELS = ["mean training return", "training success rate", "loss"]
LEVEL = "success_rate:"


def _num(value: str | None) -> float:
    try:
        return float(value) if value not in (None, "") else math.nan
    except ValueError:
        return math.nan


def run_files(src: Path) -> tuple[str, Path]:
    """(the run's name, its validation CSV) for a run's ``metrics.csv`` (named by its folder) or for the
    copy of one kept beside a plot (``<run>.csv``, with ``<run>.validation.csv``)."""
    if src.name == "metrics.csv":
        return src.parent.name, src.with_name("validation.csv")
    return src.stem, src.with_name(f"{src.stem}.validation.csv")


def read_runs(sources: list[Path]) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """Each run's metrics rows and validation rows (empty where it has no validation CSV), by run name."""
    metrics, validation = {}, {}
    for src in sources:
        if not src.is_file():
            raise SystemExit(f"error: {src} does not exist: pass the metrics.csv of a run of baselines.llm_rl.train "
                             f"(or its copy <run>.csv beside a plot)")
        name, val = run_files(src)
        metrics[name] = list(csv.DictReader(src.open()))
        validation[name] = list(csv.DictReader(val.open())) if val.is_file() else []
    return metrics, validation


def compute_table(metrics: dict[str, list[dict]]) -> str:
    """The compute each run spent, summed over its iterations, and the total, as Markdown."""
    lines = ["| run | iterations | env steps | LLM calls | tokens | wall |", "| --- | --- | --- | --- | --- | --- |"]
    total = [0, 0, 0, 0, 0.0]
    for name, rows in metrics.items():
        steps, calls, tokens = (sum(int(_num(r[k])) for r in rows) for k in ("env_steps", "llm_calls", "llm_tokens"))
        wall = _num(rows[-1]["wall_seconds"]) if rows else 0.0
        lines.append(f"| {name} | {len(rows)} | {steps:,} | {calls:,} | {tokens:,} | {wall / 3600:.2f} h |")
        for i, v in enumerate((len(rows), steps, calls, tokens, wall)):
            total[i] += v
    lines.append(f"| all | {total[0]} | {total[1]:,} | {total[2]:,} | {total[3]:,} | {total[4] / 3600:.2f} h |")
    return "\n".join(lines)


def _mean_over_runs(series: list[list[float]]) -> list[float]:
    """Per iteration, the mean of the runs' values that are numbers (NaN where none is)."""
    means = []
    for i in range(min(map(len, series))):
        vals = [s[i] for s in series if not math.isnan(s[i])]
        means.append(sum(vals) / len(vals) if vals else math.nan)
    return means


def plot(metrics: dict[str, list[dict]], validation: dict[str, list[dict]], out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = sorted({k[len(LEVEL):] for rows in metrics.values() if rows for k in rows[0] if k.startswith(LEVEL)})
    has_val = any(validation.values())
    panels = len(KEYS) + int(has_val) + int(len(levels) > 1)
    fig, axes = plt.subplots(1, panels, figsize=(3.7 * panels, 3.3))
    for ax, key, label in zip(axes, KEYS, LABELS, strict=False):
        series = []
        for name, rows in metrics.items():
            values = [_num(r.get(key)) for r in rows]
            series.append(values)
            ax.plot([int(r["iteration"]) for r in rows], values, marker="o", markersize=3,
                    alpha=0.6 if len(metrics) > 1 else 1.0, label=name)
        if len(metrics) > 1:
            means = _mean_over_runs(series)
            ax.plot(range(len(means)), means, color="black", linewidth=2, label="mean")
        ax.set_xlabel("iteration (before its update)")
        ax.set_title(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    k = len(KEYS)
    if has_val:
        ax = axes[k]
        for name, rows in validation.items():
            if not rows:
                continue
            it = [int(r["iteration"]) for r in rows]
            line, = ax.plot(it, [_num(r["val_iqm"]) for r in rows], marker="o", label=name)
            ax.fill_between(it, [_num(r["val_iqm_low"]) for r in rows], [_num(r["val_iqm_high"]) for r in rows],
                            color=line.get_color(), alpha=0.15)
        ax.set_xlabel("updates")
        ax.set_title("held-out IQM, 95% interval")
        ax.grid(alpha=0.3)
        k += 1
    if len(levels) > 1:
        ax = axes[k]
        for level in levels:
            means = _mean_over_runs([[_num(r.get(LEVEL + level)) for r in rows] for rows in metrics.values()])
            ax.plot(range(len(means)), means, marker=".", label=level.split("/")[-1])
        ax.set_xlabel("iteration")
        ax.set_title("training success per level (mean of runs)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    png = out.with_suffix(".png")
    fig.savefig(png, dpi=110)
    return png


def default_title(runs: list[str]) -> str:
    """What the runs are, from their folders' names (``<experiment>-seed<N>``): "SmolLM2-135M-Instruct,
    baselines/llm_rl: babyai5-group (seeds 0, 1)"; a folder named otherwise is named as it is."""
    seeds: dict[str, list[str]] = {}
    for name in runs:
        m = re.fullmatch(r"(.+)-seed(\d+)", name)
        exp, seed = (m.group(1), m.group(2)) if m else (name, "")
        seeds.setdefault(exp, [])
        if seed:
            seeds[exp].append(seed)
    parts = [f"{exp} (seed{'s' if len(s) > 1 else ''} {', '.join(s)})" if s else exp for exp, s in seeds.items()]
    return "SmolLM2-135M-Instruct, baselines/llm_rl: " + "; ".join(parts)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.plot_curves", description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", help="the runs' metrics.csv files, then the output stem (PNG and copies)")
    ap.add_argument("--title", help="default: the experiments and seeds plotted, from the run folders' names")
    args = ap.parse_args(argv)
    if len(args.paths) < 2:
        ap.error("pass at least one metrics.csv and the output stem")
    sources, stem = [Path(a) for a in args.paths[:-1]], Path(args.paths[-1])
    metrics, validation = read_runs(sources)
    stem.parent.mkdir(parents=True, exist_ok=True)
    names = []
    for src in sources:
        name, val = run_files(src)
        names.append(name)
        for have, keep in ((src, stem.parent / f"{name}.csv"), (val, stem.parent / f"{name}.validation.csv")):
            if have.is_file() and have.resolve() != keep.resolve():
                shutil.copyfile(have, keep)
    print(plot(metrics, validation, stem, args.title or default_title(names)))
    print(compute_table(metrics))


if __name__ == "__main__":
    main()
