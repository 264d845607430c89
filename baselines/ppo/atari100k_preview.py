"""PPO at 100k agent steps beside the published Atari 100k agents, from the training-time evaluations.

Each committed sidecar ``checkpoints/atari/GAME/runN.json`` holds the return averaged over a short
evaluation at the end of training (``eval_episodes`` of the experiment, on the first suite-v2 seeds of
the game, whole games). This script normalizes those by the random and human scores that rliable used
(the suite's low and high) and puts the aggregate beside SPR, DrQ(ε), DrQ, DER, OTRainbow, CURL and
SimPLe with the same stratified bootstrap. It is a preview: the figure that counts is `polar_bench
evaluate` on suite v2 (10 episodes per run, 5 runs), which this does not replace.

    python -m baselines.ppo.atari100k_preview
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from polar_bench.errors import UserError
from polar_bench.published import get_table
from polar_bench.scoring import interval_estimates

HERE = Path(__file__).resolve().parent
BUDGET = 100_000  # agent steps: the Atari 100k protocol


def training_evaluations(folder: Path) -> tuple[list[str], dict[str, dict[int, float]]]:
    """({game: {run: end-of-training mean return}}) from the sidecars under ``folder``, games sorted.
    A sidecar that is not final or that trained past the budget is an error, not a data point."""
    by_game: dict[str, dict[int, float]] = {}
    for path in sorted(folder.glob("*/run*.json")):
        side = json.loads(path.read_text(encoding="utf-8"))
        if not side.get("final") or side.get("env_steps", BUDGET + 1) > BUDGET:
            raise UserError(f"{path}: not a finished run within {BUDGET:,} steps (final={side.get('final')}, "
                            f"env_steps={side.get('env_steps')}); retrain it or remove the sidecar")
        by_game.setdefault(side["task"].split("/", 1)[1], {})[int(side["run"])] = float(side["eval_return_mean"])
    return sorted(by_game), by_game


def ppo_matrix(folder: Path) -> tuple[np.ndarray, list[int]]:
    """Normalized scores ``(runs, games)`` over the runs that every game has, and those runs (the
    published table's random and human scores: suite v2's low and high of the atari100k tasks)."""
    games, low, high = get_table("atari100k").references()
    found, by_game = training_evaluations(folder)
    if found != games:
        missing = sorted(set(games) - set(found))
        raise UserError(f"sidecars for {len(found)} of the 26 games under {folder}; missing {', '.join(missing)}")
    runs = sorted(set.intersection(*(set(r) for r in by_game.values())))
    if not runs:
        raise UserError(f"no run number is present for every game under {folder}")
    raw = np.array([[by_game[g][r] for g in games] for r in runs])
    return (raw - low) / (high - low), runs


def report(folder: Path, reps: int = 50_000, seed: int = 0) -> str:
    scores, runs = ppo_matrix(folder)
    label = f"PPO 100k (training-time evaluation, runs {runs[0]}-{runs[-1]})"
    entries = {label: scores, **get_table("atari100k").normalized_scores()}
    est = interval_estimates(entries, ["iqm", "median", "mean"], reps=reps, seed=seed)
    lines = ["| agent | runs | IQM [95% CI] | median [95% CI] | mean [95% CI] |", "|---|---|---|---|---|"]
    for name, m in entries.items():
        cells = [f"{est.points[name][k]:.3f} [{est.intervals[name][0][k]:.3f}, {est.intervals[name][1][k]:.3f}]"
                 for k in range(3)]
        lines.append(f"| {name} | {m.shape[0]} | " + " | ".join(cells) + " |")
    lines.append(f"\nStratified bootstrap over runs, {reps:,} replicates, seed {seed}; human-normalized "
                 f"((score - random) / (human - random)) over the 26 games.")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoints", default=str(HERE / "checkpoints" / "atari"),
                    help="the folder of the Atari sidecars (GAME/runN.json)")
    ap.add_argument("--reps", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        print(report(Path(args.checkpoints), args.reps, args.seed))
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
