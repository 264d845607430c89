"""`score`, `compare` and `report`: aggregate metrics with stratified-bootstrap intervals, from results
files (see docs/scoring.md for the definitions, the domain weighting and the incomplete-domain rule)."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

from .. import analysis, report, reporting, scoring
from ..errors import ScoringError, UserError
from ..published import TABLES, get_table
from ..reporting import (
    METRICS,
    StatsOptions,
    agent_json,
    dumps,
    error_lines,
    header_lines,
    llm_lines,
    stats_json,
    timing_lines,
)

PUBLISHED_DOMAIN = "atari100k"  # the domain of suite v2 that the published Atari 100k runs match


def _common(p: argparse.ArgumentParser, poi: bool = False, profiles: bool = False) -> None:
    g = p.add_argument_group("statistics")
    g.add_argument("--reps", type=int, default=scoring.AGGREGATE_REPS,
                   help="bootstrap replicates for the aggregate metrics (default: %(default)s)")
    if poi:
        g.add_argument("--poi-reps", type=int, default=scoring.PROFILE_REPS,
                       help="replicates for the probability of improvement (default: %(default)s)")
    if profiles:
        g.add_argument("--profile-reps", type=int, default=scoring.PROFILE_REPS,
                       help="replicates for the performance-profile bands (default: %(default)s)")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the bootstrap; the same input and seed give the same intervals (default: 0)")
    g.add_argument("--confidence", type=float, default=0.95,
                   help="nominal coverage of the intervals (default: %(default)s)")
    g.add_argument("--interval", choices=scoring.INTERVAL_METHODS, default=None,
                   help="interval method: percentile (rliable's, to reproduce published tables; the default), "
                        "rescaled (better coverage with few runs; the leaderboard's) or bca; docs/scoring.md")
    g.add_argument("--gamma", type=float, default=1.0,
                   help="threshold of the optimality gap (default: %(default)s)")
    g.add_argument("--task-bootstrap", action="store_true",
                   help="resample tasks as well as runs (sensitivity to the choice of tasks)")
    g.add_argument("--allow-incomplete", action="store_true",
                   help="aggregate over domains with errored or missing episodes, leaving those episodes "
                        "out of their run's mean (marked * in the tables)")
    g.add_argument("--digits", type=int, default=3, help="decimals in the tables (default: %(default)s)")
    if poi:
        g.add_argument("--published", choices=sorted(TABLES), default=None, metavar="TABLE",
                       help="put the results beside a paper's published per-run scores (atari100k: SPR, "
                            "DrQ(eps) and five more), on that domain only (docs/scoring.md)")
    g.add_argument("--domains", nargs="+", default=None, metavar="DOMAIN",
                   help="only the tasks of these domains, e.g. to compare agents on the domains they share "
                        "(the aggregates are then not the suite's standard ones)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("score", help="aggregate scores of one results file, with confidence intervals",
                       description="Per-domain and overall IQM with its interval, mean, median and optimality "
                                   "gap; a per-task table; a summary of failed episodes; LLM usage.")
    p.add_argument("results", help="a results .json written by evaluate")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _common(p)
    p.set_defaults(func=score)

    p = sub.add_parser("compare", help="compare results files side by side, with probability of improvement",
                       description="Aggregates of every results file side by side, and the probability of "
                                   "improvement of each pair with its interval.")
    p.add_argument("results", nargs="+", help="two or more results .json files of the same suite")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _common(p, poi=True)
    p.set_defaults(func=compare)

    p = sub.add_parser("report", help="write Markdown, LaTeX and CSV tables and PNG and PDF plots",
                       description="Tables (aggregates, per task, probability of improvement, sample "
                                   "efficiency) and plots into --out. Several files of one agent name whose "
                                   "agent.info has distinct training_steps make a sample-efficiency curve.")
    p.add_argument("results", nargs="+",
                   help="results .json files of the same suite, or one leaderboard folder (its table)")
    p.add_argument("--out", help="output folder (created if needed); without it, --format prints one table")
    p.add_argument("--format", choices=tuple(FORMATS), default=None,
                   help="print the aggregates table (of a leaderboard folder: the leaderboard table) to "
                        "stdout in this format")
    p.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    p.add_argument("--score-label", default="normalized score",
                   help="axis label of normalized scores (default: %(default)s)")
    p.add_argument("--tau-max", type=float, default=None,
                   help="upper end of the performance-profile threshold grid (default: the highest score)")
    _common(p, poi=True, profiles=True)
    p.set_defaults(func=report_command)


# ---------------------------------------------------------------------------------------------------


def _check_args(args: argparse.Namespace) -> StatsOptions:
    """Check the statistics flags; return them as the library's `StatsOptions`."""
    args.interval_given = args.interval is not None
    args.interval = args.interval or "percentile"
    for name in ("reps", "poi_reps", "profile_reps"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1; got {value}")
    if not 0 < args.confidence < 1:
        raise UserError(f"--confidence must be strictly between 0 and 1; got {args.confidence}")
    if not math.isfinite(args.gamma):
        raise UserError(f"--gamma must be a finite number; got {args.gamma}")
    if not 0 <= args.digits <= 10:
        raise UserError(f"--digits must be between 0 and 10; got {args.digits}")
    if args.seed < 0:
        raise UserError(f"--seed must be a non-negative integer; got {args.seed}")
    return StatsOptions(reps=args.reps, seed=args.seed, confidence=args.confidence, interval=args.interval,
                        gamma=args.gamma, task_bootstrap=args.task_bootstrap, allow_incomplete=args.allow_incomplete,
                        digits=args.digits, poi_reps=getattr(args, "poi_reps", None),
                        profile_reps=getattr(args, "profile_reps", None),
                        score_label=getattr(args, "score_label", "normalized score"),
                        tau_max=getattr(args, "tau_max", None))


def score(args: argparse.Namespace) -> int:
    opts = _check_args(args)
    agent = analysis.agent_scores(args.results, domains=args.domains)
    scopes = reporting.aggregate(agent, opts)
    warning = report.coverage_note(agent.runs, args.interval, warning=True)
    if warning:
        print(warning, file=sys.stderr)
    if args.json:
        print(dumps({**agent_json(agent, scopes), "statistics": stats_json(opts),
                      "tasks": analysis.task_rows(agent), "errors": analysis.error_summary(agent),
                      "llm": agent.llm, "timing": agent.timing}))
        return 0
    table = report.score_table(agent.label, scopes, confidence=args.confidence, reps=args.reps,
                               digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval)
    sections = ["\n".join(header_lines(agent)), table.to_text(), report.task_table([agent], args.digits).to_text(),
                "\n".join(error_lines(agent) + _retry_lines(agent) + llm_lines(agent)
                          + timing_lines(agent))]
    print("\n".join(s.rstrip("\n") + "\n" for s in sections), end="")
    return 0


def _retry_lines(agent: analysis.AgentScores) -> list[str]:
    """After failed episodes: the command that plays them again (the evaluation's own, plus --retry-failed)."""
    if not any(f["status"] != "missing" for f in agent.failures):
        return []
    command = (agent.results.command if agent.results else "") or "python -m polar_bench evaluate ..."
    again = command if "--retry-failed" in command.split() else f"{command} --retry-failed"
    return [f"Fix the cause, then play the failed episodes again: {again}",
            "(a changed agent file starts the evaluation afresh: its old journal is set aside)"]


def _load_many(paths: list[str], at_least: int, command: str,
               domains: list[str] | None = None, published: str | None = None) -> tuple[list, list[str]]:
    if published:
        at_least = 1
        if domains and domains != [PUBLISHED_DOMAIN]:
            raise UserError(f"--published {published} compares on the {PUBLISHED_DOMAIN} domain only; "
                            "drop --domains")
        domains = [PUBLISHED_DOMAIN]
    if len(paths) < at_least:
        raise UserError(f"{command} needs at least {at_least} results files; got {len(paths)}")
    try:
        agents = analysis.load_agents(paths, domains=domains)
    except ScoringError as err:
        if not published:
            raise
        raise UserError(f"--published {published} needs results with the {PUBLISHED_DOMAIN} domain "
                        f"(suite v2, or any suite with its 26 atari/ tasks and references): {err}") from None
    if published:
        agents += analysis.published_agents(published, PUBLISHED_DOMAIN)
    notes = analysis.check_same_tasks(agents)
    if published:
        notes = [n for n in notes if not n.startswith("the results come from different suite files")]
        notes.append(f"entries marked '{analysis.PUBLISHED_NOTE}' are the per-run scores published for "
                     f"{published} ({get_table(published).source}); nobody re-ran them here, and their "
                     "protocol differs from ours where docs/families/atari.md says")
    if domains:
        notes.append(f"only the domains {', '.join(domains)}: not the suite's standard aggregates")
    return agents, notes


def compare(args: argparse.Namespace) -> int:
    opts = _check_args(args)
    agents, notes = _load_many(args.results, 2, "compare", args.domains, args.published)
    warning = report.coverage_note(min(a.runs for a in agents), args.interval, warning=True)
    if warning:
        print(warning, file=sys.stderr)
    results, pairs = reporting.scores_and_pairs(agents, opts, "compare")
    if args.json:
        print(dumps({"agents": [agent_json(a, s) for a, (_, s) in zip(agents, results, strict=True)],
                      "probability_of_improvement": [{"x": x, "y": y, "scopes": [s.to_json() for s in sc]}
                                                     for x, y, sc in pairs],
                      "statistics": stats_json(opts), "notes": notes}))
        return 0
    lines = []
    for a in agents:
        lines += header_lines(a)[:1]
    lines += [f"note: {n}" for n in notes]
    side = report.side_by_side_table(results, METRICS, confidence=args.confidence, reps=args.reps,
                                     digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval)
    poi = report.improvement_table(pairs, confidence=args.confidence, reps=args.poi_reps, digits=args.digits,
                                   method=args.interval)
    failures = [f"{a.label}: " + error_lines(a)[0] for a in agents]
    gaps = _fresh_gaps(agents)
    print("\n".join(["\n".join(lines), "", side.to_text().rstrip("\n"), "", poi.to_text().rstrip("\n"), "",
                     *([gaps.to_text().rstrip("\n"), ""] if gaps else []), *failures]))
    return 0


def _fresh_gaps(agents: list[analysis.AgentScores]) -> report.Table | None:
    """The generalisation gap of every fresh-seed file beside the published-seed file of its agent."""
    from ..generalization import file_gaps, gap_table

    files = [(a.label, a.results) for a in agents if a.results is not None]
    gaps = file_gaps(files)
    return gap_table(gaps) if gaps else None


FORMATS = {"markdown": "to_markdown", "latex": "to_latex", "csv": "to_csv", "text": "to_text"}


def _leaderboard_report(args: argparse.Namespace) -> int:
    """`report LEADERBOARD_DIR`: the leaderboard's table, exactly as `leaderboard build` writes it."""
    from ..leaderboard import markdown_table, render_tables
    from .leaderboard import ranking_options

    if args.task_bootstrap or args.allow_incomplete or args.gamma != 1.0 or args.domains:
        raise UserError("--task-bootstrap, --allow-incomplete, --gamma and --domains do not apply to a "
                        "leaderboard folder")
    options = ranking_options(args)
    if args.interval_given:
        options = replace(options, method=args.interval)
    tables = [t for _, t in render_tables(args.results[0], options)]
    fmt = args.format or "markdown"

    def render(t: report.Table) -> str:
        return markdown_table(t) if fmt == "markdown" else getattr(t, FORMATS[fmt])()

    if args.out:
        for t in tables:
            for p in t.write(Path(args.out)):
                if p.suffix == ".md":
                    p.write_bytes(markdown_table(t).encode("utf-8"))
                print(p)
        return 0
    print("\n".join(render(t) for t in tables), end="")
    return 0


def report_command(args: argparse.Namespace) -> int:
    opts = _check_args(args)
    if len(args.results) == 1 and Path(args.results[0]).is_dir():
        return _leaderboard_report(args)
    if not args.out and not args.format:
        raise UserError("report needs --out DIR (every table and plot), or --format FORMAT (print the "
                        "aggregates table)")
    if args.tau_max is not None and not math.isfinite(args.tau_max):
        raise UserError(f"--tau-max must be a finite number; got {args.tau_max}")
    agents_all, notes = _load_many(args.results, 1, "report", args.domains, args.published)
    if not args.out:
        agents = analysis.final_budget(agents_all)
        results = [(a.label, reporting.aggregate(a, opts)) for a in agents]
        table = report.aggregates_table(results, METRICS, confidence=args.confidence, reps=args.reps,
                                        digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval)
        print(getattr(table, FORMATS[args.format])(), end="")
        return 0
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {str(out)!r} exists and is not a folder")
    if not args.no_plots:
        report.require_matplotlib()  # fail before any work when matplotlib is missing
    written = reporting.write_report(agents_all, notes, out, opts, plots=not args.no_plots,
                                     extra_tables=lambda agents: [t for t in [_fresh_gaps(agents)] if t])
    for path in written:
        print(path)
    return 0
