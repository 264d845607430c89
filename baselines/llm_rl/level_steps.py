"""Per-level environment steps of a training run, recomputed from its rollouts.

train.py writes ``env_steps:<level>`` per iteration into ``metrics.csv`` (agent_v2.py reads those columns
for its training budget). Runs trained before it did (babyai5-group seeds 0 and 1) lacked them; this command
rebuilds them from what every iteration kept, ``<run>/rollouts/iterNNN/results.json`` (each training
episode's task and length), and checks them against the columns the row already has: the steps per
level must sum to the row's ``env_steps`` and the episodes per level must equal ``episodes:<level>``.

    python -m baselines.llm_rl.level_steps runs/llm_rl/babyai5-group-seed0 \\
        baselines/llm_rl/curves/babyai5-group-seed0.csv
        --check: compare with the CSV's ``env_steps:<level>`` columns instead of writing them (exit 1 on a difference)

The run folder is git-ignored, so the rebuild needs the machine that trained the run.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from pathlib import Path


def level_steps(run: Path, iteration: int) -> tuple[Counter[str], Counter[str]]:
    """(steps, episodes) per task of one iteration's training rollout."""
    path = run / "rollouts" / f"iter{iteration:03d}" / "results.json"
    try:
        episodes = json.loads(path.read_text())["episodes"]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"{path}: cannot read the iteration's episodes ({e}); the run folder must be the one "
                         f"that trained this CSV") from None
    steps: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for ep in episodes:
        steps[ep["task"]] += int(ep["length"])
        count[ep["task"]] += 1
    return steps, count


def rebuild(run: Path, rows: list[dict[str, str]], levels: list[str]) -> list[dict[str, str]]:
    """The rows with ``env_steps:<level>`` recomputed; SystemExit where a row's own columns disagree."""
    out = []
    for row in rows:
        it = int(row["iteration"])
        steps, count = level_steps(run, it)
        unknown = set(steps) - set(levels)
        if unknown:
            raise SystemExit(f"iteration {it}: the rollout played {sorted(unknown)}, which the CSV has no columns for")
        if sum(steps.values()) != int(float(row["env_steps"])):
            raise SystemExit(f"iteration {it}: the rollout's episodes have {sum(steps.values())} steps, the CSV's "
                             f"env_steps {row['env_steps']}: not this run's CSV")
        for lv in levels:
            if count[lv] != int(float(row[f"episodes:{lv}"])):
                raise SystemExit(f"iteration {it}: {count[lv]} {lv} episodes in the rollout, "
                                 f"{row[f'episodes:{lv}']} in the CSV: not this run's CSV")
        out.append({**row, **{f"env_steps:{lv}": str(steps[lv]) for lv in levels}})
    return out


def with_columns(fields: list[str], levels: list[str]) -> list[str]:
    """The header with ``env_steps:<level>`` after each level's ``success_rate:<level>`` (train.py's order)."""
    out = []
    for f in fields:
        if f.startswith("env_steps:"):
            continue
        out.append(f)
        if f.startswith("success_rate:"):
            out.append("env_steps:" + f[len("success_rate:"):])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the run folder (holds rollouts/iterNNN/results.json)")
    ap.add_argument("csv", type=Path, help="the run's metrics.csv or its curves/ copy")
    ap.add_argument("--check", action="store_true", help="compare with the CSV's columns; write nothing")
    args = ap.parse_args(argv)
    with args.csv.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = list(reader.fieldnames or []), list(reader)
    levels = [f[len("episodes:"):] for f in fields if f.startswith("episodes:")]
    if not levels or not rows:
        raise SystemExit(f"{args.csv}: no episodes:<level> columns or no rows; not a curriculum run's metrics")
    new = rebuild(args.run, rows, levels)
    if args.check:
        missing = [lv for lv in levels if f"env_steps:{lv}" not in fields]
        if missing:
            print(f"{args.csv}: no env_steps column for {', '.join(missing)}", file=sys.stderr)
            return 1
        diff = [(r["iteration"], lv) for r, n in zip(rows, new, strict=True) for lv in levels
                if int(float(r[f"env_steps:{lv}"])) != int(n[f"env_steps:{lv}"])]
        for it, lv in diff[:10]:
            print(f"iteration {it}: env_steps:{lv} differs from the rollout's", file=sys.stderr)
        totals = {lv: sum(int(n[f"env_steps:{lv}"]) for n in new) for lv in levels}
        print(f"{args.csv}: {len(rows)} iterations, " + ("all env_steps:<level> columns match the rollouts"
              if not diff else f"{len(diff)} cells differ") + "; steps per level: "
              + ", ".join(f"{lv.split('/')[-1]} {n}" for lv, n in totals.items()))
        return 1 if diff else 0
    header = with_columns(fields, levels)
    tmp = args.csv.with_name(args.csv.name + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)  # train.py's dialect (\r\n line ends)
        w.writeheader()
        w.writerows(new)
    tmp.replace(args.csv)
    print(f"wrote env_steps:<level> for {len(new)} iterations into {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
