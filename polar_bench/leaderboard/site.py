"""``leaderboard build``: the Markdown, LaTeX and CSV tables, ``leaderboard.json`` and the static site of
a leaderboard folder: pages from autoescaped Jinja2 templates, a Content-Security-Policy that allows
only local files, and no timestamps (a rebuild of an unchanged folder changes no byte). See
docs/leaderboard.md ("The site, and why it is safe to publish").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from .. import __version__, analysis, report
from ..report import DASH, Table, Value
from ..results import ResultsFile
from .entries import load_entries
from .ranking import (
    BELOW_BUDGET_MARK,
    DEFAULT_OPTIONS,
    DISAGREE_MARK,
    TIE_MARK,
    Board,
    RankingOptions,
    Row,
    board_json,
    generalization_table,
    leaderboard_table,
    markdown_table,
    md_escape,
    rank_entries,
    steps_text,
)

__all__ = ["build", "render_tables", "SITE_TITLE"]

SITE_TITLE = "polar_bench leaderboard"
STATIC = Path(__file__).parent / "static"
"""The site's stylesheet and script, copied into ``site/assets``."""
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
_HTTP_URL = re.compile(r"^https?://[^\s<>\"'`]+$")



# ---------------------------------------------------------------------------------------------------
# Tables


def render_tables(leaderboard: str | Path, options: RankingOptions = DEFAULT_OPTIONS) -> list[tuple[Board, Table]]:
    """The ranked boards of a leaderboard folder and their tables (what ``report`` prints)."""
    boards = rank_entries(load_entries(leaderboard), options)
    return [(b, leaderboard_table(b)) for b in boards]


def domain_table(board: Board, domain: str) -> tuple[Table, list[Row]]:
    """The entries ranked by one domain's IQM (tied entries sharing a rank, as on the main table),
    with the per-task normalized scores of that domain."""
    ranking = board.domain_ranking(domain)
    rows = [r for r, _, _, _ in ranking]
    task_ids = [t.task_id for t in board.rows[0].agent.domain_tasks(domain)] if board.rows else []
    cells: list[list[Any]] = []
    for r, rank, verdict, _ in ranking:
        per_task = {t["task"]: t for t in analysis.task_rows(r.agent)}
        marks = (f" {TIE_MARK}" if verdict == "tied" else "") + (f" {DISAGREE_MARK}" if verdict == "worse" else "")
        budget = steps_text(r.budget.get(domain, 0))
        if domain in r.below_budget:
            budget += f" {BELOW_BUDGET_MARK}"
        cells.append([DASH if rank is None else f"{rank}{marks}", r.label, Value.of(r.estimate(domain)),
                      *(Value(per_task[t]["mean"], sd=per_task[t]["sd"]) for t in task_ids), budget])
    ranked = [i for i, r in enumerate(rows) if r.rank is not None]
    for j in range(2, 3 + len(task_ids)):
        best = report.mark_best([cells[i][j] for i in ranked], True)
        for i, v in zip(ranked, best, strict=True):
            cells[i][j] = v
    o = board.options
    table = Table(f"{board.name}-{domain}", f"Domain {domain}",
                  ["Rank", "Agent", f"{domain} IQM", *task_ids, "Budget (steps)"], cells,
                  notes=[report.interval_note(o.confidence, o.reps, method=o.method),
                         "Tasks: normalized score, mean ± sd over runs.",
                         f"{TIE_MARK} tied with the entry above on this domain (the {o.confidence:.0%} interval of "
                         f"P(above > entry) on its tasks contains 0.5), sharing its rank; {DISAGREE_MARK} the "
                         "entry above has the higher IQM but the probability of improvement favours this one.",
                         f"Budget: training steps per run on this domain's tasks; {BELOW_BUDGET_MARK} below the "
                         "suite's protocol budget."], digits=o.digits)
    return table, rows


def published_table(board: Board, domain: str) -> Table | None:
    """The per-run scores a paper published on ``domain`` (`analysis.published_agents`), as a reference
    table under the domain's ranking: labelled "published, not re-run", never ranked with the entries.
    None unless the domain is atari100k and the board's tasks and references are exactly the published
    table's (so the normalization is the same)."""
    if domain != "atari100k" or not board.rows:
        return None
    tasks = board.rows[0].agent.domain_tasks(domain)
    agents = analysis.published_agents("atari100k", domain)
    if [(t.task_id, t.low, t.high) for t in tasks] != [(t.task_id, t.low, t.high) for t in agents[0].tasks]:
        return None
    o = board.options
    cells: list[list[Any]] = []
    for a in agents:
        scope = analysis.aggregate(a, ["iqm"], reps=o.reps, seed=o.seed, confidence=o.confidence,
                                   method=o.method)[0]
        per_task = {t["task"]: t for t in analysis.task_rows(a)}
        cells.append([a.label, a.runs, Value.of(scope.estimates.get("iqm")),
                      *(Value(per_task[t.task_id]["mean"], sd=per_task[t.task_id]["sd"]) for t in tasks)])
    return Table(f"{board.name}-{domain}-published", f"Domain {domain}: {analysis.PUBLISHED_NOTE}",
                 ["Agent", "Runs", f"{domain} IQM", *(t.task_id for t in tasks)], cells,
                 notes=[report.interval_note(o.confidence, o.reps, method=o.method),
                        "Per-run scores published with Agarwal et al. 2021 (polar_bench/data/atari100k), "
                        "normalized with the same random and human scores as this domain; nobody re-ran these "
                        "agents here, so they are shown for reference and not ranked. Where their protocol may "
                        "differ from ours: docs/families/atari.md."], digits=o.digits)


# ---------------------------------------------------------------------------------------------------
# HTML: Jinja2 templates (templates/) with autoescaping on, fed plain data (never HTML strings)


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("polar_bench.leaderboard", "templates"),
                              autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


def _render(template: str, title: str, nav: list[dict], **context: Any) -> str:
    return _environment().get_template(template).render(
        csp=CSP, site_title=SITE_TITLE, version=__version__, title=title, nav=nav, **context)


def _nav(boards: Sequence[Board], current: str) -> list[dict]:
    items = [("index.html", "Overall")]
    for b in boards:
        prefix = f"{b.suite.get('name')} " if len(boards) > 1 else ""
        items += [(_domain_page(b, d), f"{prefix}{d}") for d in b.domains]
    return [{"href": href, "text": text, "current": href == current} for href, text in items]


def _domain_page(board: Board, domain: str) -> str:
    return f"{report.slug(str(board.suite.get('name')))}-{report.slug(domain)}.html"


def _entry_page(row: Row) -> str:
    return f"entry-{row.entry.id}.html"


def _cell(table: Table, value: Any) -> dict:
    """A table cell: its text, sort key, and whether it is a (bold) value."""
    if isinstance(value, Value):
        sort = "" if value.point is None or not math.isfinite(value.point) else repr(float(value.point))
        return {"text": table.plain(value, ("", "")), "sort": sort, "value": True, "best": value.bold}
    return {"text": str(value), "sort": str(value), "value": False, "best": False}


def _rank(rank: int | None, verdict: str | None, p: Any, confidence: float) -> dict:
    """The rank cell: the rank, ``≈`` when tied with the entry above, ``‡`` when the probability of
    improvement favours this entry over the one above; the interval in the mark's title."""
    out = {"rank": rank, "dash": DASH, "mark": "", "cls": "", "title": ""}
    if rank is None or verdict not in ("tied", "worse") or p is None:
        return out
    interval = f"P(above > this entry) = {p.point:.3f}, {confidence:.0%} interval [{p.low:.3f}, {p.high:.3f}]"
    if verdict == "tied":
        out.update(mark=TIE_MARK, cls="tie", title=f"statistically tied with the entry above: {interval} contains 0.5")
    else:
        out.update(mark=DISAGREE_MARK, cls="disagree",
                   title=f"the entry above has the higher IQM, but {interval} lies below 0.5")
    return out


def _sortable(table: Table, rows: Sequence[Any], kinds: Sequence[tuple[str, str]], table_id: str,
              ranks: Sequence[dict], sort_keys: Mapping[int, Sequence[Any]] | None = None) -> dict:
    """The data of a sortable table: column 0 the rank (``ranks``), column 1 the agent linked to its
    entry page; ``sort_keys`` overrides the sort keys of some columns."""
    heads = [{"label": c, "kind": kind, "first": first}
             for c, (kind, first) in zip(table.columns, kinds, strict=True)]
    body = []
    for i, (row, cells) in enumerate(zip(rows, table.rows, strict=True)):
        tds = []
        for j, value in enumerate(cells):
            c = _cell(table, value)
            c["href"] = _entry_page(row) if j == 1 else ""
            if j == 0:  # sorted by position: entries sharing a rank keep their order
                c.update(rank=ranks[i], sort="" if row.rank is None else str(i))
            if sort_keys and j in sort_keys:
                key = sort_keys[j][i]
                c["sort"] = "" if key is None else repr(key)
            elif c["sort"] == DASH:
                c["sort"] = ""
            tds.append(c)
        body.append({"cls": "tied" if row.tied else ("failed" if row.rank is None else ""), "cells": tds})
    return {"id": table_id, "caption": table.title, "heads": heads, "rows": body, "notes": list(table.notes)}


def _plain(table: Table) -> dict:
    """A `Table` as the ``plain`` macro shows it: caption, columns, rows of text, notes."""
    return {"caption": table.title, "columns": table.columns, "notes": list(table.notes),
            "rows": [[table.plain(c) for c in row] for row in table.rows]}


def _overall_kinds(board: Board) -> list[tuple[str, str]]:
    return ([("number", "ascending"), ("text", "ascending")] + [("number", "descending")] * (1 + len(board.domains))
            + [("number", "descending"), ("number", "ascending"), ("number", "ascending"),
               ("text", "descending"), ("text", "descending")])


def _figures(plots: dict, key: str) -> list[dict]:
    return [{"title": title, "src": src} for title, src in plots.get(key, [])]


def _index_page(boards: Sequence[Board], tables: Sequence[Table], plots: dict) -> str:
    intro = ("Agents ranked by the interquartile mean (IQM) of normalized scores over all domains of the suite, "
             "each domain weighted equally, with stratified-bootstrap confidence intervals. Every adjacent pair "
             f"is compared by the probability of improvement: entries marked {TIE_MARK} are statistically tied "
             f"with the entry above and share its rank; {DISAGREE_MARK} marks an entry that the probability of "
             f"improvement puts above the entry with the higher IQM; {BELOW_BUDGET_MARK} names the domains "
             "trained below the protocol budget.")
    sections = []
    for board, table in zip(boards, tables, strict=True):
        s = board.suite
        n = len(board.domains)
        keys: dict[int, list[Any]] = {4 + n: [r.budget_total for r in board.rows],
                                      5 + n: [None if r.llm_tokens is None else float(r.llm_tokens)
                                              for r in board.rows]}
        ranks = [_rank(r.rank, r.verdict, r.poi_vs_above, board.options.confidence) for r in board.rows]
        sections.append({"name": s.get("name"), "version": s.get("version"), "hash": s.get("hash"),
                         "count": f"{len(board.rows)} entr{'y' if len(board.rows) == 1 else 'ies'}",
                         "table": _sortable(table, board.rows, _overall_kinds(board), board.name, ranks, keys),
                         "fresh": _plain(generalization_table(board)),
                         "figures": _figures(plots, board.name)})
    return _render("index.html", "Leaderboard", _nav(boards, "index.html"), intro=intro, sections=sections)


class _DomainRow:
    """A `Row` seen through a domain page: its rank and tie there."""

    def __init__(self, row: Row, rank: int | None, tied: bool):
        self.rank, self.tied, self.entry = rank, tied, row.entry


def _domain_page_html(boards: Sequence[Board], board: Board, domain: str, plots: dict) -> str:
    table, rows = domain_table(board, domain)
    n_tasks = len(table.columns) - 4
    kinds = ([("number", "ascending"), ("text", "ascending"), ("number", "descending")]
             + [("number", "descending")] * n_tasks + [("number", "ascending")])
    ranking = board.domain_ranking(domain)
    shown = [_DomainRow(r, rank, verdict == "tied") for r, rank, verdict, _ in ranking]
    ranks = [_rank(rank, verdict, p, board.options.confidence) for _, rank, verdict, p in ranking]
    keys = {len(table.columns) - 1: [r.budget.get(domain, 0) for r in rows]}
    published = published_table(board, domain)
    plain = None if published is None else {
        "caption": published.title, "columns": published.columns, "notes": list(published.notes),
        "rows": [[published.plain(v) for v in r] for r in published.rows]}
    return _render("domain.html", f"Domain {domain}", _nav(boards, _domain_page(board, domain)),
                   suite=f"{board.suite.get('name')} {board.suite.get('version')}", domain=domain, published=plain,
                   table=_sortable(table, shown, kinds, f"{board.name}-{report.slug(domain)}", ranks, keys),
                   figures_=_figures(plots, f"{board.name}-{domain}"))


def _retried_text(results: ResultsFile | None) -> str:
    """How many episodes needed more than one attempt (evaluate --retry-failed), and how many in all."""
    again = [e.attempts for e in (results.episodes if results else ()) if e.attempts is not None and e.attempts > 1]
    if not again:
        return "none"
    return f"{len(again)} (after a failure, evaluate --retry-failed; {sum(again)} attempts in all)"


def _entry_page_html(boards: Sequence[Board], board: Board, row: Row) -> str:
    info, a, o = row.info, row.agent, board.options
    llm = info.get("llm")
    if isinstance(llm, dict):
        llm_text = ", ".join(f"{k}: {v}" for k, v in llm.items())
    else:
        llm_text = "none" if llm is None else str(llm)
    results = row.agent.results
    pb = results.polar_bench if results is not None else {}
    if row.budget:
        budget = f"{row.budget_total:,} per run in all; " + ", ".join(
            f"{d}: {row.budget.get(d, 0):,}{' (below the protocol budget)' if d in row.below_budget else ''}"
            for d in board.domains)
    else:
        budget = "none (untrained)"
    verdicts = {"tied": " (statistically tied with the entry above)",
                "worse": " (the probability of improvement puts it above the entry with the higher IQM)"}
    items: list[tuple[str, Any]] = [
        ("Rank", DASH if row.rank is None else f"{row.rank}{verdicts.get(str(row.verdict), '')}"),
        ("Authors", ", ".join(str(x) for x in info.get("authors") or [])),
        ("License", info.get("license", "")),
        ("LLM", llm_text),
        ("Training budget (environment steps)", budget),
        ("Runs", a.runs), ("Episodes", len(results.episodes) if results else 0),
        ("Episodes played more than once", _retried_text(results)),
        ("Suite", f"{board.suite.get('name')} {board.suite.get('version')} ({board.suite.get('hash')})"),
        ("polar_bench",
         f"{pb.get('version')} (commit {pb.get('git_commit')}{', modified' if pb.get('git_dirty') else ''})"),
        ("Agent file SHA-256", results.agent.get("sha256", "") if results else ""),
        ("Submitted", row.entry.submitted), ("Entry", row.entry.id),
        ("Verification", row.check.text + (f": {row.check.detail}" if row.verification == "not_verifiable"
                                           and row.check.detail else "")),
    ]
    if row.poi_vs_above is not None:
        p = row.poi_vs_above
        items.append((f"P({row.above} > this entry)",
                      f"{p.point:.3f} [{p.low:.3f}, {p.high:.3f}] ({o.confidence:.0%} {o.method} interval, "
                      f"{o.poi_reps:,} replicates): {row.verdict}"))
    if info.get("description"):
        items.insert(1, ("Description", info["description"]))
    url = info.get("url")
    scopes = [s for s in row.scopes if "iqm" in s.estimates]
    iqm = None
    if scopes:
        t = Table("iqm", "IQM by domain", ["Domain", "IQM"],
                  [[s.scope, Value.of(s.estimates["iqm"])] for s in scopes], digits=o.digits)
        iqm = {"caption": "IQM of normalized scores by domain", "columns": ["Domain", "IQM [95 % interval]"],
               "rows": [[r[0], t.plain(r[1])] for r in t.rows]}
    verifications = []
    for v in row.entry.verifications():
        if v.get("status") == "not_verifiable":
            verifications.append(f"{v.get('date')}: not verifiable — {v.get('reason') or 'no reason given'}")
            continue
        how = "exactly" if v.get("mode") == "exact" else f"within {v.get('tolerance')} (normalized score)"
        verifications.append(f"{v.get('date')}: {v.get('matched')} of {v.get('sample')} sampled episodes "
                             f"reproduced {how} (sample seed {v.get('seed')}) — "
                             f"{'passed' if v.get('passed') else 'FAILED'}")
    task_rows = analysis.task_rows(a)
    tt = Table("tasks", "Per-task scores", ["Task", "Domain", "Mean return", "Normalized score"],
               [[r["task"], r["domain"], Value(r["mean_return"]), Value(r["mean"], sd=r["sd"])] for r in task_rows],
               digits=o.digits)
    tasks = {"caption": "Per-task scores (normalized: mean ± sd over runs)", "columns": tt.columns,
             "rows": [[tt.plain(c) for c in r] for r in tt.rows]}
    return _render("entry.html", row.label, _nav(boards, ""), items=items,
                   code_url=url if isinstance(url, str) and _HTTP_URL.match(url) else "", code_text=url,
                   results_href=f"../entries/{row.entry.id}/results.json", iqm=iqm,
                   verifications=verifications, tasks=tasks)


# ---------------------------------------------------------------------------------------------------
# Plots


def _save_png(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    report.savefig_literal(fig, path, dpi=110, metadata={"Software": None})


def _plots(boards: Sequence[Board], folder: Path) -> dict[str, list[tuple[str, str]]]:
    report.require_matplotlib()
    out: dict[str, list[tuple[str, str]]] = {}
    for b in boards:
        if not b.rows:
            continue
        rows = b.ranked or b.rows
        labels = [r.label for r in rows]
        colors = report.agent_colors(labels)
        conf, name = b.options.confidence, b.name
        items = []
        fig = report.plot_aggregates([(r.label, r.scopes) for r in rows], ["iqm"], confidence=conf)
        width, height = fig.get_size_inches()
        fig.set_size_inches(max(width, 7.0), height)
        fig.suptitle(f"IQM with {conf:.0%} stratified-bootstrap intervals", fontsize=report.FONT_SIZE + 1)
        _save_png(fig, folder / f"{name}-iqm.png")
        items.append(("IQM by domain and overall, with confidence intervals", f"plots/{name}-iqm.png"))
        profile, _ = analysis.profiles([r.agent for r in rows], reps=b.options.poi_reps, seed=b.options.seed,
                                       confidence=conf)
        if profile is not None:
            ax = report.plot_performance_profile(profile, colors=colors)
            _save_png(ax.figure, folder / f"{name}-profiles.png")
            items.append(("Performance profiles (score distributions over all runs and tasks)",
                          f"plots/{name}-profiles.png"))
        pairs = [(str(r.above), r.label, r.poi_vs_above) for r in rows[1:] if r.poi_vs_above is not None]
        if pairs:
            ax = report.plot_probability_of_improvement(pairs, colors={f"P({x} > {y})": colors[y]
                                                                       for x, y, _ in pairs})
            _save_png(ax.figure, folder / f"{name}-improvement.png")
            items.append(("Probability that each entry improves on the one ranked below it (tied when the "
                          "interval contains 0.5)", f"plots/{name}-improvement.png"))
        ax = report.plot_task_scores([r.agent for r in rows], colors=colors)
        _save_png(ax.figure, folder / f"{name}-tasks.png")
        items.append(("Per-task normalized scores", f"plots/{name}-tasks.png"))
        out[name] = items
        for d in b.domains:
            est = {r.label: r.estimate(d) for r in rows}
            ax = report.plot_intervals(est, colors=colors, xlabel="IQM of normalized scores",
                                       title=f"Domain {d}: IQM with {conf:.0%} intervals")
            ax.figure.set_size_inches(6.5, ax.figure.get_size_inches()[1])
            _save_png(ax.figure, folder / f"{name}-{report.slug(d)}.png")
            out[f"{name}-{d}"] = [(f"IQM of domain {d}", f"plots/{name}-{report.slug(d)}.png")]
    return out


# ---------------------------------------------------------------------------------------------------
# README and build


def _readme(boards: Sequence[Board], tables: Sequence[Table]) -> str:
    out = ["# polar_bench leaderboard", "",
           "Generated by `python -m polar_bench leaderboard build` from the entries in [`entries/`](entries/); "
           "do not edit by hand. How to submit, what is checked, how verification works and how ties are "
           "decided: [SUBMISSION.md](../SUBMISSION.md). The same table as a sortable site with per-domain views "
           "and plots: [`site/index.html`](site/index.html) (open the file in a browser; nothing is fetched "
           "from the network).", ""]
    if not boards:
        out += ["No entries yet.", ""]
    for board, table in zip(boards, tables, strict=True):
        s = board.suite
        out += [f"## Suite {md_escape(str(s.get('name')))} {md_escape(str(s.get('version')))}", "",
                markdown_table(table).rstrip("\n"), "",
                markdown_table(generalization_table(board)).rstrip("\n"), "", "Entries:", ""]
        for r in board.rows:
            info = r.info
            authors = ", ".join(str(x) for x in info.get("authors") or [])
            out.append(f"- `{r.entry.id}` {md_escape(r.label)} by {md_escape(authors)}: "
                       f"[results](entries/{r.entry.id}/results.json); verification: {md_escape(r.check.text)}")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _write(path: Path, text: str) -> Path:
    return _write_bytes(path, text.encode("utf-8"))


def _write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def build(leaderboard: str | Path, options: RankingOptions = DEFAULT_OPTIONS, *, plots: bool = True) -> list[Path]:
    """Write README.md, leaderboard-<suite>.{md,tex,csv}, leaderboard.json and site/; return the paths."""
    root = Path(leaderboard)
    pairs = render_tables(root, options)
    boards = [b for b, _ in pairs]
    tables = [t for _, t in pairs]
    written = []
    for _, table in pairs:
        written.append(_write(root / f"{table.name}.md", markdown_table(table)))
        written.append(_write(root / f"{table.name}.tex", table.to_latex()))
        written.append(_write(root / f"{table.name}.csv", table.to_csv()))
    written.append(_write(root / "README.md", _readme(boards, tables)))
    written.append(_write(root / "leaderboard.json", json.dumps(
        {"boards": [board_json(b) for b in boards]}, indent=1, ensure_ascii=False, allow_nan=False) + "\n"))

    site = root / "site"
    for name in ("leaderboard.css", "leaderboard.js"):  # static files, copied byte for byte
        written.append(_write_bytes(site / "assets" / name, (STATIC / name).read_bytes()))
    plot_map = {}
    if plots and boards:
        plot_map = _plots(boards, site / "plots")
        written += sorted((site / "plots").glob("*.png"))
    written.append(_write(site / "index.html", _index_page(boards, tables, plot_map)))
    for board in boards:
        for d in board.domains:
            written.append(_write(site / _domain_page(board, d), _domain_page_html(boards, board, d, plot_map)))
        for r in board.rows:
            written.append(_write(site / _entry_page(r), _entry_page_html(boards, board, r)))
    return written
