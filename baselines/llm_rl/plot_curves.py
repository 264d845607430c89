"""Learning curves of baselines/llm_rl runs from their metrics.csv files: mean training return, success
rate and loss per iteration, one line per run (training seed) and their mean, as a PNG (matplotlib)
beside a copy of each CSV (``<run folder>.csv`` in the PNG's folder).

    python -m baselines.llm_rl.plot_curves runs/llm_rl/gotoredball-seed{0,1,2}/metrics.csv \\
        baselines/llm_rl/curves/gotoredball
"""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

KEYS = ["return_mean", "success_rate", "loss"]
LABELS = ["mean training return", "training success rate", "REINFORCE loss"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        raise SystemExit(__doc__)
    sources, stem = [Path(a) for a in args[:-1]], Path(args[-1])
    stem.parent.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {}
    for src in sources:
        if not src.is_file():
            raise SystemExit(f"error: {src} does not exist: pass the metrics.csv of a run of baselines.llm_rl.train")
        runs[src.parent.name] = list(csv.DictReader(src.open()))
        shutil.copyfile(src, stem.parent / f"{src.parent.name}.csv")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for ax, key, label in zip(axes, KEYS, LABELS, strict=True):
        series = []
        for name, rows in runs.items():
            values = [float(r[key]) for r in rows]
            series.append(values)
            ax.plot([int(r["iteration"]) for r in rows], values, marker="o", alpha=0.6 if len(runs) > 1 else 1.0,
                    label=name)
        if len(runs) > 1:
            n = min(map(len, series))
            ax.plot(range(n), [sum(s[i] for s in series) / len(series) for i in range(n)], color="black",
                    linewidth=2, label="mean")
        ax.set_xlabel("iteration (before its update)")
        ax.set_title(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("SmolLM2-135M-Instruct, REINFORCE with a batch baseline on BabyAI GoToRedBall")
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=110)
    print(stem.with_suffix(".png"))


if __name__ == "__main__":
    main()
