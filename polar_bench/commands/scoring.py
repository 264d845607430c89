"""`score`, `compare` and `report`: aggregate metrics with stratified-bootstrap intervals, from results
files (see docs/scoring.md for the definitions, the domain weighting and the incomplete-domain rule)."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import analysis, report, scoring
from ..errors import ScoringError, UserError
from ..published import TABLES, get_table

METRICS = analysis.DEFAULT_METRICS
PUBLISHED_DOMAIN = "atari100k"  # the domain of suite v2 that the published Atari 100k runs match


def _common(p, poi: bool = False, profiles: bool = False) -> None:
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
                       help="put the results beside the per-run scores a paper published (atari100k: SPR, "
                            "DrQ(eps), DrQ, DER, OTRainbow, CURL, SimPLe), on that table's domain only; they "
                            "are listed as 'published, not re-run' (docs/scoring.md)")
    g.add_argument("--domains", nargs="+", default=None, metavar="DOMAIN",
                   help="only the tasks of these domains, e.g. to compare agents on the domains they share "
                        "(the aggregates are then not the suite's standard ones)")


def register(sub) -> None:
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


def _check_args(args) -> None:
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


def _aggregate(agent: analysis.AgentScores, args) -> list[analysis.ScopeEstimates]:
    return analysis.aggregate(agent, METRICS, gamma=args.gamma, reps=args.reps, seed=args.seed,
                              confidence=args.confidence, allow_incomplete=args.allow_incomplete,
                              task_bootstrap=args.task_bootstrap, method=args.interval)


def coverage_warning(runs: int, method: str) -> str | None:
    """One line for fewer than `scoring.FEW_RUNS` runs: the coverage measured for this run count
    and interval method (`scoring.MEASURED_COVERAGE`), or None."""
    if runs >= scoring.FEW_RUNS or runs < 2:
        return None  # one run has its own warning: its intervals reflect evaluation noise only
    measured = scoring.MEASURED_COVERAGE.get(method, {}).get(runs)
    best = scoring.MEASURED_COVERAGE.get("rescaled", {}).get(runs)
    what = (f"covered the true overall IQM in {measured:.1%} of simulated experiments" if measured is not None
            else "have no measured coverage at this run count")
    hint = (f"; --interval rescaled measured {best:.1%}" if method != "rescaled" and best is not None else "")
    return (f"warning: {runs} runs: nominal 95% {method} intervals {what} (benchmarks/interval_coverage.py, "
            f"docs/scoring.md){hint}; {scoring.FEW_RUNS} or more runs make them reliable")


def _progress(total: int, desc: str):
    """A progress bar on stderr when it is a terminal; silent otherwise."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="step", leave=False, disable=not sys.stderr.isatty())


def _scores_and_pairs(agents, args, desc: str):
    # Published entries are compared with the results given, not with each other (that is the paper's table).
    pairs_todo = [(x, y) for x, y in analysis.iter_pairs(agents) if x.path is not None or y.path is not None]
    with _progress(len(agents) + len(pairs_todo), desc) as bar:
        results = []
        for a in agents:
            results.append((a.label, _aggregate(a, args)))
            bar.update()
        pairs = []
        for x, y in pairs_todo:
            pairs.append((x.label, y.label, analysis.improvement(
                x, y, reps=args.poi_reps, seed=args.seed, confidence=args.confidence,
                allow_incomplete=args.allow_incomplete, method=args.interval)))
            bar.update()
    return results, pairs


def _clean(obj: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _dumps(obj: Any) -> str:
    return json.dumps(_clean(obj), indent=1, ensure_ascii=False, allow_nan=False)


def _header(a: analysis.AgentScores) -> list[str]:
    suite = a.suite
    episodes = sorted({t.episodes for t in a.tasks})
    ep_text = "/".join(str(e) for e in episodes)
    if str(suite.get("name")).startswith("published:"):
        return [f"Agent {a.label}", f"Published per-run scores: {a.runs} runs × {len(a.tasks)} games"]
    lines = [f"Agent {a.label}" + (f" ({a.path})" if a.path else ""),
             f"Suite {suite.get('name')} {suite.get('version')} ({str(suite.get('hash'))[:19]}); "
             f"{len(a.tasks)} tasks in {len(a.domains)} domain(s); {a.runs} run(s) × {ep_text} episodes"]
    if a.evaluation_noise_only:
        lines.append(f"{report.NOISE_MARK} one run: intervals resample episodes within each task and reflect "
                     "evaluation noise only, not the variability between training runs")
    if not a.comparable:
        lines.append("warning: not comparable (installed package versions differed from the suite's pins)")
    if not a.standard:
        lines.append("warning: not a standard evaluation (episodes override, a subset of tasks, or fewer runs "
                     "than the suite asks)")
    return lines


def _error_lines(a: analysis.AgentScores) -> list[str]:
    if str(a.suite.get("name")).startswith("published:"):
        return [f"Published: {a.runs} runs × {len(a.tasks)} games, one score per run and game"]
    summary = analysis.error_summary(a)
    counts = summary["counts"]
    failed = sum(v for k, v in counts.items() if k != "ok")
    total = sum(counts.values())
    if not failed:
        return [f"Episodes: all {total} ok"]
    parts = ", ".join(f"{v} {k}" for k, v in counts.items() if k != "ok" and v)
    lines = [f"Episodes: {failed} of {total} failed or missing ({parts}); incomplete domain(s): "
             f"{', '.join(summary['incomplete_domains'])}"]
    for task, c in summary["by_task"].items():
        lines.append(f"  {task}: " + ", ".join(f"{v} {k}" for k, v in c.items()))
    for m in summary["messages"]:
        lines.append(f"  {m['count']}× {m['status']}: {m['message']}")
    return lines


def _llm_lines(a: analysis.AgentScores) -> list[str]:
    if not a.llm:
        return []
    per = a.llm["per_episode"]
    tot = a.llm["total"]
    return [f"LLM usage per episode ({a.llm['episodes']} episodes): {per['calls']:.1f} calls, "
            f"{per['prompt_tokens']:.0f} prompt tokens, {per['completion_tokens']:.0f} completion tokens, "
            f"{per['seconds']:.2f} LLM seconds (total {tot['calls']:.0f} calls, "
            f"{tot['prompt_tokens'] + tot['completion_tokens']:.0f} tokens, {tot['seconds']:.1f} s)"]


def _timing_lines(a: analysis.AgentScores) -> list[str]:
    wall, agent = a.timing["wall_seconds"]["per_episode"], a.timing["agent_seconds"]["per_episode"]
    if wall is None:
        return []
    text = f"Time per episode: {wall:.3f} s wall"
    if agent is not None:
        text += f", {agent:.3f} s in the agent"
    return [text]


def _agent_json(a: analysis.AgentScores, scopes) -> dict:
    return {"agent": a.label, "name": a.name, "path": a.path, "suite": a.suite, "runs": a.runs,
            "training_steps": a.training_steps, "comparable": a.comparable, "standard": a.standard,
            "evaluation_noise_only": a.evaluation_noise_only,
            "aggregates": [s.to_json() for s in scopes]}


def _stats_json(args) -> dict:
    out = {"reps": args.reps, "seed": args.seed, "confidence": args.confidence, "gamma": args.gamma,
           "task_bootstrap": args.task_bootstrap, "allow_incomplete": args.allow_incomplete,
           "interval": f"{args.interval}, stratified bootstrap", "domain_weighting": "equal"}
    if hasattr(args, "poi_reps"):
        out["poi_reps"] = args.poi_reps
    return out


def score(args) -> int:
    _check_args(args)
    agent = analysis.agent_scores(args.results, domains=args.domains)
    scopes = _aggregate(agent, args)
    warning = coverage_warning(agent.runs, args.interval)
    if warning:
        print(warning, file=sys.stderr)
    if args.json:
        print(_dumps({**_agent_json(agent, scopes), "statistics": _stats_json(args),
                      "tasks": analysis.task_rows(agent), "errors": analysis.error_summary(agent),
                      "llm": agent.llm, "timing": agent.timing}))
        return 0
    table = report.score_table(agent.label, scopes, confidence=args.confidence, reps=args.reps,
                               digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval)
    sections = ["\n".join(_header(agent)), table.to_text(), report.task_table([agent], args.digits).to_text(),
                "\n".join(_error_lines(agent) + _retry_lines(agent, args.results) + _llm_lines(agent)
                          + _timing_lines(agent))]
    print("\n".join(s.rstrip("\n") + "\n" for s in sections), end="")
    return 0


def _retry_lines(agent: analysis.AgentScores, path: str) -> list[str]:
    """After failed episodes: the command that plays them again (the evaluation's own, plus --retry-failed)."""
    if not any(f["status"] != "missing" for f in agent.failures):
        return []
    from ..results import read_results

    command = str(read_results(path).data.get("command") or "python -m polar_bench evaluate ...")
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


def compare(args) -> int:
    _check_args(args)
    agents, notes = _load_many(args.results, 2, "compare", args.domains, args.published)
    warning = coverage_warning(min(a.runs for a in agents), args.interval)
    if warning:
        print(warning, file=sys.stderr)
    results, pairs = _scores_and_pairs(agents, args, "compare")
    if args.json:
        print(_dumps({"agents": [_agent_json(a, s) for a, (_, s) in zip(agents, results, strict=True)],
                      "probability_of_improvement": [{"x": x, "y": y, "scopes": [s.to_json() for s in sc]}
                                                     for x, y, sc in pairs],
                      "statistics": _stats_json(args), "notes": notes}))
        return 0
    lines = []
    for a in agents:
        lines += _header(a)[:1]
    lines += [f"note: {n}" for n in notes]
    side = report.side_by_side_table(results, METRICS, confidence=args.confidence, reps=args.reps,
                                     digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval)
    poi = report.improvement_table(pairs, confidence=args.confidence, reps=args.poi_reps, digits=args.digits,
                                   method=args.interval)
    failures = [f"{a.label}: " + _error_lines(a)[0] for a in agents]
    gaps = _fresh_gaps(args.results, agents)
    print("\n".join(["\n".join(lines), "", side.to_text().rstrip("\n"), "", poi.to_text().rstrip("\n"), "",
                     *([gaps.to_text().rstrip("\n"), ""] if gaps else []), *failures]))
    return 0


def _fresh_gaps(paths: list[str], agents: list) -> report.Table | None:
    """The generalisation gap of every fresh-seed file beside the published-seed file of its agent."""
    from ..generalization import file_gaps, gap_table
    from ..results import read_results

    files = [(a.label, read_results(p).data) for p, a in zip(paths, agents, strict=False)]
    gaps = file_gaps(files)
    return gap_table(gaps) if gaps else None


FORMATS = {"markdown": "to_markdown", "latex": "to_latex", "csv": "to_csv", "text": "to_text"}


def _leaderboard_report(args) -> int:
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

    def render(t):
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


def report_command(args) -> int:
    _check_args(args)
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
        results = [(a.label, _aggregate(a, args)) for a in agents]
        table = report.aggregates_table(results, METRICS, confidence=args.confidence, reps=args.reps,
                                        digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval)
        print(getattr(table, FORMATS[args.format])(), end="")
        return 0
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {str(out)!r} exists and is not a folder")
    if not args.no_plots:
        report.require_matplotlib()  # fail before any work when matplotlib is missing
    agents = analysis.final_budget(agents_all)
    results, pairs = _scores_and_pairs(agents, args, "report: statistics")
    curves = analysis.sample_efficiency(agents_all, "iqm", gamma=args.gamma, reps=args.reps, seed=args.seed,
                                        confidence=args.confidence, allow_incomplete=args.allow_incomplete,
                                        method=args.interval)

    tables = [report.aggregates_table(results, METRICS, confidence=args.confidence, reps=args.reps,
                                      digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval),
              report.task_table(agents, args.digits)]
    if pairs:
        tables.append(report.improvement_table(pairs, confidence=args.confidence, reps=args.poi_reps,
                                               digits=args.digits, method=args.interval))
    if curves:
        tables.append(report.sample_efficiency_table(curves, "iqm", confidence=args.confidence,
                                                     reps=args.reps, digits=args.digits, method=args.interval))
    gaps = _fresh_gaps(args.results, agents_all)
    if gaps:
        tables.append(gaps)
    written = []
    for t in tables:
        written += t.write(out / "tables")

    plots = []
    if not args.no_plots:
        plots = _plots(agents, results, pairs, curves, args, out / "plots")
        written += [p for _, paths in plots for p in paths]

    md = [f"# Scores of {', '.join(a.label for a in agents)}", ""]
    md += [f"- {line}" for a in agents for line in _header(a)[:2]]
    md += [f"- note: {n}" for n in notes]
    md.append("")
    for t in tables:
        md += [t.to_markdown().rstrip("\n"), ""]
    for name, paths in plots:
        md += [f"![{name}](plots/{paths[0].name})", ""]
    report_md = out / "report.md"
    report_md.write_bytes(("\n".join(md).rstrip("\n") + "\n").encode("utf-8"))
    (out / "report.json").write_bytes(_dumps({
        "agents": [_agent_json(a, s) for a, (_, s) in zip(agents, results, strict=True)],
        "probability_of_improvement": [{"x": x, "y": y, "scopes": [s.to_json() for s in sc]}
                                       for x, y, sc in pairs],
        "sample_efficiency": {k: [{"training_steps": s, **e.to_json()} for s, e in v]
                              for k, v in curves.items()},
        "statistics": _stats_json(args), "notes": notes}).encode("utf-8") + b"\n")
    for p in [report_md, out / "report.json", *written]:
        print(p)
    return 0


def _plots(agents, results, pairs, curves, args, folder: Path) -> list[tuple[str, list[Path]]]:
    colors = report.agent_colors([a.label for a in agents] + [c for c in curves if c not in
                                                               {a.label for a in agents}])
    label = args.score_label
    out = []
    fig = report.plot_aggregates(results, METRICS, score_label=label, confidence=args.confidence)
    out.append(("aggregate metrics", report.save_figure(fig, folder, "aggregates")))

    tau = None
    if args.tau_max is not None:
        import numpy as np

        tau = np.linspace(0.0, args.tau_max, 101)
    profile, _ = analysis.profiles(agents, tau, "runs", reps=args.profile_reps, seed=args.seed,
                                   confidence=args.confidence, allow_incomplete=args.allow_incomplete)
    if profile is not None:
        ax = report.plot_performance_profile(profile, colors=colors, score_label=label)
        out.append(("performance profiles", report.save_figure(ax.figure, folder, "performance_profiles")))

    if pairs:
        overall = [(x, y, next((s.estimates.get("probability_of_improvement") for s in sc
                                if s.scope == analysis.OVERALL), None)) for x, y, sc in pairs]
        ax = report.plot_probability_of_improvement(overall, colors={
            f"P({x} > {y})": colors[x] for x, y, _ in overall})
        out.append(("probability of improvement",
                    report.save_figure(ax.figure, folder, "probability_of_improvement")))

    ax = report.plot_task_scores(agents, colors=colors, score_label=label)
    out.append(("per-task scores", report.save_figure(ax.figure, folder, "task_scores")))

    if curves:
        ax = report.plot_sample_efficiency(curves, colors=colors, score_label=label)
        out.append(("sample efficiency", report.save_figure(ax.figure, folder, "sample_efficiency")))
    return out
