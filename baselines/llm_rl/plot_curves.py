"""Learning curves of a baselines/llm_rl run from its metrics.csv: mean training return, success rate
and loss per iteration, as a PNG (matplotlib) beside a copy of the CSV.

    python -m baselines.llm_rl.plot_curves runs/llm_rl/gotoredball/metrics.csv baselines/llm_rl/curves/gotoredball
"""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit(__doc__)
    src, stem = Path(args[0]), Path(args[1])
    stem.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, stem.with_suffix(".csv"))
    rows = list(csv.DictReader(src.open()))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = [int(r["iteration"]) for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for ax, key, label in zip(axes, ["return_mean", "success_rate", "loss"],
                              ["mean training return", "training success rate", "REINFORCE loss"], strict=True):
        ax.plot(it, [float(r[key]) for r in rows], marker="o")
        ax.set_xlabel("iteration (before its update)")
        ax.set_title(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{src.parent.name}: SmolLM2-135M-Instruct, REINFORCE with a mean baseline")
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=110)
    print(stem.with_suffix(".png"))


if __name__ == "__main__":
    main()
