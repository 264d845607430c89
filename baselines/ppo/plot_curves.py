"""Learning-curve plots of the committed PPO runs: one figure per domain, one panel per task.

    python -m baselines.ppo.plot_curves [--curves baselines/ppo/curves] [--out baselines/ppo/results/curves]

Each panel shows, per run (seed), the mean evaluation return on the suite's evaluation seeds (solid,
with markers) and the mean return of the training episodes finished since the previous evaluation
(dashed, same colour), against environment steps; the dotted lines are the suite's normalization
references (low = 0, high = 1 normalized score), so a curve's height reads as a normalized score.
Needs matplotlib (pip install "polar_bench[plot]").
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent


def read_curves(root: Path) -> dict[str, dict[int, list[dict]]]:
    """{task id: {run: [rows]}} from ``<root>/<family>/<task>/run<k>.csv``."""
    curves: dict[str, dict[int, list[dict]]] = {}
    for path in sorted(root.glob("*/*/run*.csv")):
        task = f"{path.parent.parent.name}/{path.parent.name}"
        with path.open() as f:
            rows = [{k: float(v) if v not in ("", "nan") else math.nan for k, v in row.items()}
                    for row in csv.DictReader(f)]
        if rows:
            curves.setdefault(task, {})[int(path.stem[3:])] = rows
    return curves


def plot(curves: dict, out: Path, suite: str = "v1") -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from polar_bench.suite import load_suite

    s = load_suite(suite)
    tasks = {t.id: t for t in s.tasks}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for domain in s.domains:
        ids = [t for t in tasks if tasks[t].domain == domain.name and t in curves]
        if not ids:
            continue
        cols = min(4, len(ids))
        rows = math.ceil(len(ids) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.7 * rows), squeeze=False)
        for ax, task_id in zip(axes.flat, ids, strict=False):  # the grid may have more axes than tasks
            for run, data in sorted(curves[task_id].items()):
                x = [r["env_steps"] for r in data]
                line, = ax.plot(x, [r["eval_return_mean"] for r in data], marker="o", ms=3, label=f"run {run}")
                ax.plot(x, [r["train_return_mean"] for r in data], ls="--", lw=1, color=line.get_color())
            t = tasks[task_id]
            for ref in (t.low.value, t.high.value):
                ax.axhline(ref, color="grey", ls=":", lw=0.8)
            ax.set_title(task_id, fontsize=9)
            ax.tick_params(labelsize=7)
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        for ax in list(axes.flat)[len(ids):]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"PPO on suite {suite}: {domain.name} (solid: evaluation, dashed: training episodes; "
                     f"dotted: normalization references)", fontsize=9)
        fig.supxlabel("environment steps", fontsize=8)
        fig.supylabel("return", fontsize=8)
        fig.tight_layout()
        path = out / f"curves-{domain.name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=Path, default=HERE / "curves")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "curves")
    ap.add_argument("--suite", default="v1")
    args = ap.parse_args(argv)
    for path in plot(read_curves(args.curves), args.out, args.suite):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
