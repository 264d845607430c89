"""`reproduce NAME`: recompute a published table from its public per-run data, print it beside the
published values, check it, and draw the paper's interval figure (docs/scoring.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import report, scoring
from ..analysis import Estimate, ScopeEstimates
from ..errors import UserError
from ..published import TABLES, get_table

METRICS = ("median", "iqm", "mean", "optimality_gap")  # the panels of the paper's Figure 1 / A.17


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("reproduce", help="recompute a published table from its per-run data and check it",
                       description="Recompute a published table of aggregate metrics from the paper's public "
                                   "per-run scores (shipped with polar_bench), print it beside the published "
                                   "values, check them, and draw the paper's interval figure. "
                                   f"Tables: {', '.join(TABLES)}.")
    p.add_argument("table", help=f"the published table: {', '.join(TABLES)}")
    p.add_argument("--reps", type=int, default=scoring.AGGREGATE_REPS,
                   help="bootstrap replicates (default: %(default)s, as in the paper)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument("--out", default=None,
                   help="folder for the figure (<table>_aggregates.png and .pdf); default: none drawn")
    p.set_defaults(func=reproduce)


def reproduce(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    if args.reps < 1:
        raise UserError(f"--reps must be at least 1; got {args.reps}")
    if args.seed < 0:
        raise UserError(f"--seed must be a non-negative integer; got {args.seed}")
    if args.out:
        report.require_matplotlib()  # before the work, when matplotlib is missing
    scores = table.normalized_scores()
    est = scoring.interval_estimates(scores, list(METRICS), reps=args.reps, seed=args.seed)
    rows, checked, failed = [], 0, []
    for label, matrix in scores.items():
        points, intervals = est.points[label], est.intervals[label]
        for i, m in enumerate(METRICS):
            want = table.published[label].get(m)
            got = float(points[i])
            match = "—"
            if want is not None:
                checked += 1
                ok = round(got, table.digits) == want
                match = "yes" if ok else "NO"
                if not ok:
                    failed.append(f"{label} {m}: {got:.{table.digits}f} vs published {want}")
            rows.append([label, str(matrix.shape[0]), report.METRIC_LABELS[m],
                         report.Value(got, float(intervals[0, i]), float(intervals[1, i])),
                         "—" if want is None else f"{want:.{table.digits}f}", match])
    t = report.Table(f"{table.name}_reproduced", table.title,
                     ["Algorithm", "Runs", "Metric", "Recomputed", "Published", "Match"], rows,
                     notes=[report.interval_note(0.95, args.reps), f"Published: {table.source}.",
                            f"Match: the recomputed point estimate rounds to the published value "
                            f"({table.digits} decimals)."], digits=table.digits)
    print(t.to_text(), end="")
    if args.out:
        results = [(label, [ScopeEstimates(
            table.name, matrix.shape[1], True,
            {m: Estimate(float(est.points[label][i]), float(est.intervals[label][0, i]),
                         float(est.intervals[label][1, i])) for i, m in enumerate(METRICS)}, "runs")])
            for label, matrix in scores.items()]
        fig = report.plot_aggregates(results, list(METRICS), score_label="human-normalized score")
        for path in report.save_figure(fig, Path(args.out), f"{table.name}_aggregates"):
            print(path)
    if failed:
        print(f"NOT REPRODUCED: {len(failed)} of {checked} published values differ: " + "; ".join(failed))
        return 1
    print(f"reproduced: all {checked} published values")
    return 0
