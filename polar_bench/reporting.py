"""Score, compare and report results files as the CLI does, as library calls: statistics options
(`StatsOptions`), the aggregates and pairwise comparisons of several agents, the lines and JSON of a
summary, and `write_report` (every table and plot of a report folder). docs/scoring.md defines the
statistics."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import analysis, report
from .scoring import PROFILE_REPS

__all__ = ["StatsOptions", "METRICS", "aggregate", "scores_and_pairs", "dumps", "header_lines", "error_lines",
           "llm_lines", "timing_lines", "agent_json", "stats_json", "write_report"]

METRICS = analysis.DEFAULT_METRICS


@dataclass(frozen=True)
class StatsOptions:
    """How to compute the statistics (the `score`, `compare` and `report` options of the same names)."""

    reps: int
    seed: int = 0
    confidence: float = 0.95
    interval: str = "percentile"
    gamma: float = 1.0
    task_bootstrap: bool = False
    allow_incomplete: bool = False
    digits: int = 3
    poi_reps: int | None = None  # compare and report only (None: scoring.PROFILE_REPS, and not in stats_json)
    profile_reps: int | None = None  # report only (None: scoring.PROFILE_REPS)
    score_label: str = "normalized score"
    tau_max: float | None = None


def aggregate(agent: analysis.AgentScores, args: StatsOptions) -> list[analysis.ScopeEstimates]:
    return analysis.aggregate(agent, METRICS, gamma=args.gamma, reps=args.reps, seed=args.seed,
                              confidence=args.confidence, allow_incomplete=args.allow_incomplete,
                              task_bootstrap=args.task_bootstrap, method=args.interval)


def _progress(total: int, desc: str) -> Any:  # a tqdm bar (tqdm ships no types)
    """A progress bar on stderr when it is a terminal; silent otherwise."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="step", leave=False, disable=not sys.stderr.isatty())


def scores_and_pairs(agents: list[analysis.AgentScores], args: StatsOptions, desc: str) -> tuple[list, list]:
    """The aggregates of every agent and the probability of improvement of every pair (a published entry
    is compared with the results given, never with another published entry)."""
    pairs_todo = [(x, y) for x, y in analysis.iter_pairs(agents) if x.path is not None or y.path is not None]
    with _progress(len(agents) + len(pairs_todo), desc) as bar:
        results = []
        for a in agents:
            results.append((a.label, aggregate(a, args)))
            bar.update()
        pairs = []
        for x, y in pairs_todo:
            pairs.append((x.label, y.label, analysis.improvement(
                x, y, reps=args.poi_reps or PROFILE_REPS, seed=args.seed, confidence=args.confidence,
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


def dumps(obj: Any) -> str:
    """JSON text with NaN and infinities as null."""
    return json.dumps(_clean(obj), indent=1, ensure_ascii=False, allow_nan=False)


def header_lines(a: analysis.AgentScores) -> list[str]:
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


def error_lines(a: analysis.AgentScores) -> list[str]:
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


def llm_lines(a: analysis.AgentScores) -> list[str]:
    if not a.llm:
        return []
    per = a.llm["per_episode"]
    tot = a.llm["total"]
    return [f"LLM usage per episode ({a.llm['episodes']} episodes): {per['calls']:.1f} calls, "
            f"{per['prompt_tokens']:.0f} prompt tokens, {per['completion_tokens']:.0f} completion tokens, "
            f"{per['seconds']:.2f} LLM seconds (total {tot['calls']:.0f} calls, "
            f"{tot['prompt_tokens'] + tot['completion_tokens']:.0f} tokens, {tot['seconds']:.1f} s)"]


def timing_lines(a: analysis.AgentScores) -> list[str]:
    wall, agent = a.timing["wall_seconds"]["per_episode"], a.timing["agent_seconds"]["per_episode"]
    if wall is None:
        return []
    text = f"Time per episode: {wall:.3f} s wall"
    if agent is not None:
        text += f", {agent:.3f} s in the agent"
    return [text]


def agent_json(a: analysis.AgentScores, scopes: list[analysis.ScopeEstimates]) -> dict:
    return {"agent": a.label, "name": a.name, "path": a.path, "suite": a.suite, "runs": a.runs,
            "training_steps": a.training_steps, "comparable": a.comparable, "standard": a.standard,
            "evaluation_noise_only": a.evaluation_noise_only,
            "aggregates": [s.to_json() for s in scopes]}


def stats_json(args: StatsOptions) -> dict:
    out: dict[str, Any] = {"reps": args.reps, "seed": args.seed, "confidence": args.confidence, "gamma": args.gamma,
                           "task_bootstrap": args.task_bootstrap, "allow_incomplete": args.allow_incomplete,
                           "interval": f"{args.interval}, stratified bootstrap", "domain_weighting": "equal"}
    if args.poi_reps is not None:
        out["poi_reps"] = args.poi_reps
    return out


ExtraTables = Callable[[list[analysis.AgentScores]], list[report.Table]]


def write_report(agents_all: list[analysis.AgentScores], notes: list[str], out: Path, args: StatsOptions, *,
                 plots: bool = True, extra_tables: ExtraTables | None = None) -> list[Path]:
    """Every table and plot of ``agents_all`` into the folder ``out`` (report.md, report.json, tables/,
    plots/); returns the files written, report.md and report.json first. ``extra_tables``: more
    tables from the agents (the CLI's fresh-seed gaps)."""
    agents = analysis.final_budget(agents_all)
    results, pairs = scores_and_pairs(agents, args, "report: statistics")
    curves = analysis.sample_efficiency(agents_all, "iqm", gamma=args.gamma, reps=args.reps, seed=args.seed,
                                        confidence=args.confidence, allow_incomplete=args.allow_incomplete,
                                        method=args.interval)

    tables = [report.aggregates_table(results, METRICS, confidence=args.confidence, reps=args.reps,
                                      digits=args.digits, task_bootstrap=args.task_bootstrap, method=args.interval),
              report.task_table(agents, args.digits)]
    if pairs:
        tables.append(report.improvement_table(pairs, confidence=args.confidence,
                                               reps=args.poi_reps or PROFILE_REPS, digits=args.digits,
                                               method=args.interval))
    if curves:
        tables.append(report.sample_efficiency_table(curves, "iqm", confidence=args.confidence,
                                                     reps=args.reps, digits=args.digits, method=args.interval))
    if extra_tables is not None:
        tables += extra_tables(agents_all)
    written = []
    for t in tables:
        written += t.write(out / "tables")

    figures: list[tuple[str, list[Path]]] = []
    if plots:
        figures = _plots(agents, results, pairs, curves, args, out / "plots")
        written += [p for _, paths in figures for p in paths]

    md = [f"# Scores of {', '.join(a.label for a in agents)}", ""]
    md += [f"- {line}" for a in agents for line in header_lines(a)[:2]]
    md += [f"- note: {n}" for n in notes]
    md.append("")
    for t in tables:
        md += [t.to_markdown().rstrip("\n"), ""]
    for name, paths in figures:
        md += [f"![{name}](plots/{paths[0].name})", ""]
    report_md = out / "report.md"
    report_md.write_bytes(("\n".join(md).rstrip("\n") + "\n").encode("utf-8"))
    (out / "report.json").write_bytes(dumps({
        "agents": [agent_json(a, s) for a, (_, s) in zip(agents, results, strict=True)],
        "probability_of_improvement": [{"x": x, "y": y, "scopes": [s.to_json() for s in sc]}
                                       for x, y, sc in pairs],
        "sample_efficiency": {k: [{"training_steps": s, **e.to_json()} for s, e in v]
                              for k, v in curves.items()},
        "statistics": stats_json(args), "notes": notes}).encode("utf-8") + b"\n")
    return [report_md, out / "report.json", *written]


def _plots(agents: list[analysis.AgentScores], results: list, pairs: list, curves: dict, args: StatsOptions,
           folder: Path) -> list[tuple[str, list[Path]]]:
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
    profile, _ = analysis.profiles(agents, tau, "runs", reps=args.profile_reps or PROFILE_REPS, seed=args.seed,
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
