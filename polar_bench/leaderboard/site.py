"""``leaderboard build``: the Markdown table, the LaTeX and CSV tables, ``leaderboard.json`` and the
static site of a leaderboard folder.

The site (``site/``) is plain HTML with one local stylesheet and one local script (sortable columns);
nothing is fetched from the network, and a Content-Security-Policy allows only those local files
(no inline script, no inline style), so even a string that escaped escaping could not run. Every
submitted string is escaped with `html.escape` where it is written; links are made only of http(s)
URLs. Pages: ``index.html`` (the ranking, per suite, with the plots of ``report``), one page per
domain (ranked by that domain's IQM, with the per-task scores) and one page per entry.

The output depends only on the entries and the statistics options: no timestamps, fixed seeds, so a
rebuild of an unchanged folder changes no byte (PNG files: for one matplotlib version).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import __version__, analysis, report
from ..report import DASH, Table, Value
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
    leaderboard_table,
    markdown_table,
    md_escape,
    rank_entries,
    steps_text,
)

__all__ = ["build", "render_tables", "SITE_TITLE"]

SITE_TITLE = "polar_bench leaderboard"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
_HTTP_URL = re.compile(r"^https?://[^\s<>\"'`]+$")


def e(value: Any) -> str:
    """HTML-escaped text (quotes too, so it is safe inside attribute values)."""
    return html.escape(str(value), quote=True)


def _slug(text: Any) -> str:
    return report.slug(str(text), "x")


def _link(url: Any, text: Any) -> str:
    if isinstance(url, str) and _HTTP_URL.match(url):
        return f'<a href="{e(url)}" rel="nofollow noopener noreferrer">{e(text)}</a>'
    return e(text)


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


# ---------------------------------------------------------------------------------------------------
# HTML


def _page(title: str, nav: str, body: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="referrer" content="no-referrer">
<title>{e(SITE_TITLE)}</title>
<link rel="stylesheet" href="assets/leaderboard.css">
<script src="assets/leaderboard.js" defer></script>
</head>
<body>
<header>
<p class="site"><a href="index.html">{e(SITE_TITLE)}</a></p>
{nav}
<h1>{e(title)}</h1>
</header>
<main>
{body}
</main>
<footer>
<p>Generated by polar_bench {e(__version__)} (<code>python -m polar_bench leaderboard build</code>) from the
submitted results files; every number is recomputed from the episodes. Nothing on this site is fetched
from the network.</p>
</footer>
</body>
</html>
"""


def _nav(boards: Sequence[Board], current: str) -> str:
    items = [("index.html", "Overall")]
    for b in boards:
        prefix = f"{b.suite.get('name')} " if len(boards) > 1 else ""
        items += [(_domain_page(b, d), f"{prefix}{d}") for d in b.domains]
    current_attr = ' aria-current="page"'
    links = [f'<a href="{e(href)}"{current_attr if href == current else ""}>{e(text)}</a>'
             for href, text in items]
    return '<nav aria-label="views">' + " ".join(links) + "</nav>"


def _domain_page(board: Board, domain: str) -> str:
    return f"{_slug(board.suite.get('name'))}-{_slug(domain)}.html"


def _entry_page(row: Row) -> str:
    return f"entry-{row.entry.id}.html"


def _cell(table: Table, value: Any) -> tuple[str, str]:
    """(escaped text, sort key) of a table cell."""
    if isinstance(value, Value):
        text = table.plain(value, ("", ""))
        sort = "" if value.point is None or not math.isfinite(value.point) else repr(float(value.point))
        cls = ' class="best"' if value.bold else ""
        return f"<span{cls}>{e(text)}</span>", sort
    return e(value), str(value)


def _th(label: str, kind: str, first: str, title: str = "") -> str:
    t = f' title="{e(title)}"' if title else ""
    return (f'<th scope="col" data-type="{kind}" data-first="{first}"{t}>'
            f'<button type="button">{e(label)}</button></th>')


def _html_table(table: Table, rows: Sequence[Any], kinds: Sequence[tuple[str, str]], table_id: str,
                rank_html: Sequence[str], sort_keys: Mapping[int, Sequence[Any]] | None = None) -> str:
    """A sortable HTML table of ``table``: every cell escaped, column 0 the rank (``rank_html``), column
    1 the agent linked to its entry page; ``sort_keys`` overrides the sort keys of some columns."""
    head = "".join(_th(c, kind, first) for c, (kind, first) in zip(table.columns, kinds, strict=True))
    body = []
    for i, (row, cells) in enumerate(zip(rows, table.rows, strict=True)):
        tds = []
        for j, cell in enumerate(cells):
            text, sort = _cell(table, cell)
            if j == 0:
                text, sort = rank_html[i], "" if row.rank is None else str(row.rank)
            elif j == 1:
                text = f'<a href="{e(_entry_page(row))}">{text}</a>'
            if sort_keys and j in sort_keys:
                value = sort_keys[j][i]
                sort = "" if value is None else repr(value)
            elif sort == DASH:
                sort = ""
            tds.append(f'<td data-sort="{e(sort)}">{text}</td>')
        cls = ' class="tied"' if row.tied else (' class="failed"' if row.rank is None else "")
        body.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
    return (f'<div class="scroll"><table id="{e(table_id)}" class="sortable">\n<caption>{e(table.title)}</caption>\n'
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table></div>\n"
            + "".join(f'<p class="note">{e(n)}</p>\n' for n in table.notes))


def _rank_html(rank: int | None, verdict: str | None, p: Any, confidence: float) -> str:
    """The rank cell: the rank, ``≈`` when tied with the entry above, ``‡`` when the probability of
    improvement favours this entry over the one above; the interval in the mark's title."""
    if rank is None:
        return f'<span title="failed verification">{DASH}</span>'
    if verdict not in ("tied", "worse") or p is None:
        return str(rank)
    interval = f"P(above > this entry) = {p.point:.3f}, {confidence:.0%} interval [{p.low:.3f}, {p.high:.3f}]"
    if verdict == "tied":
        title, cls, mark = f"statistically tied with the entry above: {interval} contains 0.5", "tie", TIE_MARK
    else:
        title, cls, mark = (f"the entry above has the higher IQM, but {interval} lies below 0.5", "disagree",
                            DISAGREE_MARK)
    return f'{rank} <span class="{cls}" title="{e(title)}">{mark}</span>'


def _overall_kinds(board: Board) -> list[tuple[str, str]]:
    return ([("number", "ascending"), ("text", "ascending")] + [("number", "descending")] * (1 + len(board.domains))
            + [("number", "descending"), ("number", "ascending"), ("number", "ascending"),
               ("text", "descending"), ("text", "descending")])


def _index_body(boards: Sequence[Board], tables: Sequence[Table], plots: dict) -> str:
    if not boards:
        return "<p>No entries yet. See SUBMISSION.md in the repository to submit one.</p>"
    out = ['<p>Agents ranked by the interquartile mean (IQM) of normalized scores over all domains of the '
           'suite, each domain weighted equally, with stratified-bootstrap confidence intervals. '
           f'Every adjacent pair is compared by the probability of improvement: entries marked {TIE_MARK} are '
           f'statistically tied with the entry above and share its rank; {DISAGREE_MARK} marks an entry that the '
           f'probability of improvement puts above the entry with the higher IQM; {BELOW_BUDGET_MARK} names the '
           'domains trained below the protocol budget. Click a column heading to sort; '
           'click an agent for its details. How to submit: <code>SUBMISSION.md</code> in the repository.</p>']
    for board, table in zip(boards, tables, strict=True):
        s = board.suite
        out.append(f'<section><h2>Suite {e(s.get("name"))} {e(s.get("version"))}</h2>')
        out.append(f'<p class="meta">Suite hash <code>{e(s.get("hash"))}</code>; {len(board.rows)} '
                   f'entr{"y" if len(board.rows) == 1 else "ies"}.</p>')
        n = len(board.domains)
        keys: dict[int, list[Any]] = {4 + n: [r.budget_total for r in board.rows],
                5 + n: [None if r.llm_tokens is None else float(r.llm_tokens) for r in board.rows]}
        out.append(_html_table(table, board.rows, _overall_kinds(board), board.name,
                               [_rank_html(r.rank, r.verdict, r.poi_vs_above, board.options.confidence)
                                for r in board.rows], keys))
        for title, src in plots.get(board.name, []):
            out.append(f'<figure><img src="{e(src)}" alt="{e(title)}"><figcaption>{e(title)}</figcaption></figure>')
        out.append("</section>")
    return "\n".join(out)


def _domain_body(board: Board, domain: str, plots: dict) -> str:
    table, rows = domain_table(board, domain)
    n_tasks = len(table.columns) - 4
    kinds = ([("number", "ascending"), ("text", "ascending"), ("number", "descending")]
             + [("number", "descending")] * n_tasks + [("number", "ascending")])
    ranking = board.domain_ranking(domain)
    ranked = [_DomainRow(r, rank, verdict == "tied") for r, rank, verdict, _ in ranking]
    rank_html = [_rank_html(rank, verdict, p, board.options.confidence) for _, rank, verdict, p in ranking]
    keys = {len(table.columns) - 1: [r.budget.get(domain, 0) for r in rows]}
    out = [f'<p>Suite {e(board.suite.get("name"))} {e(board.suite.get("version"))}: the entries ranked by the '
           f'IQM of domain {e(domain)} alone, and their normalized score on each of its tasks.</p>',
           _html_table(table, ranked, kinds, f"{board.name}-{_slug(domain)}", rank_html, keys)]
    for title, src in plots.get(f"{board.name}-{domain}", []):
        out.append(f'<figure><img src="{e(src)}" alt="{e(title)}"><figcaption>{e(title)}</figcaption></figure>')
    return "\n".join(out)


class _DomainRow:
    """A `Row` seen through a domain page: its rank and tie there."""

    def __init__(self, row: Row, rank: int | None, tied: bool):
        self.rank, self.tied, self.entry = rank, tied, row.entry


def _entry_body(board: Board, row: Row) -> str:
    info, a, o = row.info, row.agent, board.options
    llm = info.get("llm")
    if isinstance(llm, dict):
        llm_text = ", ".join(f"{k}: {v}" for k, v in llm.items())
    else:
        llm_text = "none" if llm is None else str(llm)
    data = row.entry.results()
    pb = data.get("polar_bench", {})
    if row.budget:
        budget = f"{row.budget_total:,} per run in all; " + ", ".join(
            f"{d}: {row.budget.get(d, 0):,}{' (below the protocol budget)' if d in row.below_budget else ''}"
            for d in board.domains)
    else:
        budget = "none (untrained)"
    verdicts = {"tied": " (statistically tied with the entry above)",
                "worse": " (the probability of improvement puts it above the entry with the higher IQM)"}
    items = [
        ("Rank", DASH if row.rank is None else f"{row.rank}{verdicts.get(str(row.verdict), '')}"),
        ("Authors", ", ".join(str(x) for x in info.get("authors") or [])),
        ("License", info.get("license", "")),
        ("LLM", llm_text),
        ("Training budget (environment steps)", budget),
        ("Runs", a.runs), ("Episodes", len(data.get("episodes", []))),
        ("Suite", f"{board.suite.get('name')} {board.suite.get('version')} ({board.suite.get('hash')})"),
        ("polar_bench",
         f"{pb.get('version')} (commit {pb.get('git_commit')}{', modified' if pb.get('git_dirty') else ''})"),
        ("Agent file SHA-256", data.get("agent", {}).get("sha256", "")),
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
    dl = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in items)
    url = info.get("url")
    dl = f"<dt>Code</dt><dd>{_link(url, url)}</dd>" + dl
    results_href = f"../entries/{row.entry.id}/results.json"
    out = [f"<dl>{dl}</dl>", f'<p><a href="{e(results_href)}">The submitted results file</a> (every episode).</p>']
    scopes = [s for s in row.scopes if "iqm" in s.estimates]
    if scopes:
        t = Table("iqm", "IQM by domain", ["Domain", "IQM"],
                  [[s.scope, Value.of(s.estimates["iqm"])] for s in scopes], digits=o.digits)
        out.append('<table class="plain"><caption>IQM of normalized scores by domain</caption><thead><tr>'
                   '<th scope="col">Domain</th><th scope="col">IQM [95 % interval]</th></tr></thead><tbody>'
                   + "".join(f"<tr><td>{e(r[0])}</td><td>{e(t.plain(r[1]))}</td></tr>" for r in t.rows)
                   + "</tbody></table>")
    runs = row.entry.verifications()
    if runs:
        lines = []
        for v in runs:
            if v.get("status") == "not_verifiable":
                lines.append(f"<li>{e(v.get('date'))}: not verifiable — {e(v.get('reason') or 'no reason given')}</li>")
                continue
            how = "exactly" if v.get("mode") == "exact" else f"within {v.get('tolerance')} (normalized score)"
            lines.append(f"<li>{e(v.get('date'))}: {e(v.get('matched'))} of {e(v.get('sample'))} sampled episodes "
                         f"reproduced {e(how)} (sample seed {e(v.get('seed'))}) — "
                         f"{'passed' if v.get('passed') else 'FAILED'}</li>")
        out.append("<h2>Verification</h2><ul>" + "".join(lines) + "</ul>")
    rows = analysis.task_rows(a)
    tt = Table("tasks", "Per-task scores", ["Task", "Domain", "Mean return", "Normalized score"],
               [[r["task"], r["domain"], Value(r["mean_return"]), Value(r["mean"], sd=r["sd"])] for r in rows],
               digits=o.digits)
    out.append('<table class="plain"><caption>Per-task scores (normalized: mean ± sd over runs)</caption><thead><tr>'
               + "".join(f'<th scope="col">{e(c)}</th>' for c in tt.columns) + "</tr></thead><tbody>"
               + "".join("<tr>" + "".join(f"<td>{e(tt.plain(c))}</td>" for c in r) + "</tr>" for r in tt.rows)
               + "</tbody></table>")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# Plots


def _save_png(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})


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
            _save_png(ax.figure, folder / f"{name}-{_slug(d)}.png")
            out[f"{name}-{d}"] = [(f"IQM of domain {d}", f"plots/{name}-{_slug(d)}.png")]
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
                markdown_table(table).rstrip("\n"), "", "Entries:", ""]
        for r in board.rows:
            info = r.info
            authors = ", ".join(str(x) for x in info.get("authors") or [])
            out.append(f"- `{r.entry.id}` {md_escape(r.label)} by {md_escape(authors)}: "
                       f"[results](entries/{r.entry.id}/results.json); verification: {md_escape(r.check.text)}")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
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
    written.append(_write(site / "assets" / "leaderboard.css", CSS))
    written.append(_write(site / "assets" / "leaderboard.js", JS))
    plot_map = {}
    if plots and boards:
        plot_map = _plots(boards, site / "plots")
        written += sorted((site / "plots").glob("*.png"))
    written.append(_write(site / "index.html", _page("Leaderboard", _nav(boards, "index.html"),
                                                     _index_body(boards, tables, plot_map))))
    for board in boards:
        for d in board.domains:
            page = _domain_page(board, d)
            written.append(_write(site / page, _page(f"Domain {d}", _nav(boards, page),
                                                     _domain_body(board, d, plot_map))))
        for r in board.rows:
            written.append(_write(site / _entry_page(r), _page(r.label, _nav(boards, ""), _entry_body(board, r))))
    return written


# ---------------------------------------------------------------------------------------------------
# Assets

CSS = """\
:root { --fg: #1b1f24; --muted: #59636e; --line: #d1d9e0; --head: #f6f8fa; --best: #0b5394;
        --tied: #fff8c5; --failed: #ffebe9; --link: #0969da; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1760px; padding: 0 1.5rem 2rem; color: var(--fg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
a { color: var(--link); }
header { border-bottom: 1px solid var(--line); margin-bottom: 1rem; }
header .site { margin: 1rem 0 0.3rem; font-weight: 600; }
header .site a { color: var(--fg); text-decoration: none; }
nav a { display: inline-block; margin: 0 0.2rem 0.4rem 0; padding: 0.15rem 0.6rem; border: 1px solid var(--line);
        border-radius: 999px; text-decoration: none; font-size: 0.9rem; }
nav a[aria-current="page"] { background: var(--fg); color: #fff; border-color: var(--fg); }
h1 { font-size: 1.6rem; margin: 0.6rem 0 0.8rem; }
h2 { font-size: 1.25rem; margin-top: 1.6rem; }
.meta, .note, footer { color: var(--muted); font-size: 0.85rem; }
.note { margin: 0.2rem 0; }
footer { border-top: 1px solid var(--line); margin-top: 2rem; padding-top: 0.5rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5rem 0 0.8rem; font-size: 0.85rem; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3rem; }
th, td { border-bottom: 1px solid var(--line); padding: 0.3rem 0.5rem; text-align: left; white-space: nowrap;
         font-variant-numeric: tabular-nums; }
td:has(> a[href^="entry-"]) { white-space: normal; min-width: 16em; max-width: 22em; }  /* long agent names wrap */
thead th { background: var(--head); position: sticky; top: 0; }
th button { all: unset; cursor: pointer; font-weight: 600; }
th button:focus-visible { outline: 2px solid var(--link); }
th[aria-sort="ascending"] button::after { content: " \\25B2"; font-size: 0.7em; }
th[aria-sort="descending"] button::after { content: " \\25BC"; font-size: 0.7em; }
tr.tied td { background: var(--tied); }
tr.failed td { background: var(--failed); color: var(--muted); }
.best { font-weight: 700; color: var(--best); }
.tie, .disagree { font-weight: 700; cursor: help; }
figure { margin: 1.2rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 0.85rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; }
dt { font-weight: 600; }
dd { margin: 0; overflow-wrap: anywhere; }
code { font-size: 0.85em; }
"""

JS = """\
// Sortable tables: click a column heading to sort its rows; click again to reverse.
// Cells carry their sort key in data-sort (numbers for numeric columns); empty keys sort last.
(function () {
  "use strict";

  function key(cell, type) {
    var raw = cell.getAttribute("data-sort");
    if (raw === null) { raw = cell.textContent.trim(); }
    if (raw === "") { return null; }
    if (type === "number") {
      var n = parseFloat(raw);
      return isNaN(n) ? null : n;
    }
    return raw.toLowerCase();
  }

  function sortTable(table, col, type, direction) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col], type), y = key(b.cells[col], type);
      if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
      var c = x < y ? -1 : (x > y ? 1 : 0);
      return direction === "ascending" ? c : -c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function init(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      var button = th.querySelector("button");
      if (!button) { return; }
      button.addEventListener("click", function () {
        var current = th.getAttribute("aria-sort");
        var direction = current === "ascending" ? "descending" :
          (current === "descending" ? "ascending" : (th.getAttribute("data-first") || "ascending"));
        Array.prototype.forEach.call(heads, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", direction);
        sortTable(table, col, th.getAttribute("data-type") || "text", direction);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), init);
  });
}());
"""
