"""Tables of scores: built once as a `Table` of strings and `Value` cells and rendered to plain text,
Markdown, LaTeX (booktabs) and CSV; the same input always gives byte-identical output (fixed digits,
``\\n`` line endings, no timestamps). See docs/scoring.md.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import scoring
from ..analysis import INCOMPLETE_NOTE, OVERALL, AgentScores, Estimate, ScopeEstimates, task_rows
from ..scoring import RESAMPLED_EPISODES

METRIC_LABELS = {"iqm": "IQM", "mean": "Mean", "median": "Median", "optimality_gap": "Optimality gap",
                 "probability_of_improvement": "P(X > Y)"}
HIGHER_IS_BETTER = {"iqm": True, "mean": True, "median": True, "optimality_gap": False}
INCOMPLETE_MARK = "*"
NOISE_MARK = "†"
DASH = "—"


# ---------------------------------------------------------------------------------------------------
# Tables


@dataclass(frozen=True)
class Value:
    """A number with an optional interval ``[low, high]`` or spread ``± sd``; ``bold`` marks the best."""

    point: float | None
    low: float | None = None
    high: float | None = None
    sd: float | None = None
    bold: bool = False

    @classmethod
    def of(cls, estimate: Estimate | None, interval: bool = True) -> Value:
        if estimate is None:
            return cls(None)
        if not interval:
            return cls(estimate.point)
        return cls(estimate.point, estimate.low, estimate.high)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


@dataclass
class Table:
    """A table: ``rows`` of strings and `Value` cells under ``columns``.

    ``groups`` (one key per row, optional) separates runs of rows with a rule and prints the first
    column once per run; ``notes`` are printed under the table (caption in LaTeX).
    """

    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    groups: list[str] | None = None
    notes: list[str] = field(default_factory=list)
    digits: int = 3

    # -- formatting of one cell -------------------------------------------------------------------
    def _num(self, v: float | None) -> str | None:
        if v is None or not math.isfinite(v):
            return None
        text = f"{v:.{self.digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text

    def plain(self, cell: Any, bold: tuple[str, str] = ("", "")) -> str:
        """A cell as plain text (a `Value` with its interval or sd; ``bold`` wraps a bold value), on one
        line: control characters of a submitted string become spaces (a line break ends a table row)."""
        if not isinstance(cell, Value):
            return CONTROL_CHARS.sub(" ", str(cell))
        point = self._num(cell.point)
        if point is None:
            return DASH
        text = f"{bold[0]}{point}{bold[1]}" if cell.bold else point
        if cell.has_interval:
            text += f" [{self._num(cell.low)}, {self._num(cell.high)}]"
        elif cell.sd is not None and self._num(cell.sd) is not None:
            text += f" ± {self._num(cell.sd)}"
        return text

    def _latex_cell(self, cell: Any) -> str:
        if not isinstance(cell, Value):
            return latex_escape(str(cell))
        point = self._num(cell.point)
        if point is None:
            return "--"
        text = rf"\textbf{{{point}}}" if cell.bold else point
        if cell.has_interval:
            text += rf" {{\scriptsize[{self._num(cell.low)}, {self._num(cell.high)}]}}"
        elif cell.sd is not None and self._num(cell.sd) is not None:
            text += rf" {{\scriptsize$\pm$ {self._num(cell.sd)}}}"
        return text

    def _first_cells(self) -> list[list[Any]]:
        """Rows with the group column blanked after the first row of each group."""
        out = []
        for i, row in enumerate(self.rows):
            if self.groups and i > 0 and self.groups[i] == self.groups[i - 1]:
                row = ["", *row[1:]]
            out.append(row)
        return out

    def _numeric(self, j: int) -> bool:
        return any(isinstance(r[j], Value) for r in self.rows)

    # -- renderers --------------------------------------------------------------------------------
    def to_text(self) -> str:
        cells = [[self.plain(c) for c in row] for row in self._first_cells()]
        widths = [max([len(h)] + [len(r[j]) for r in cells]) for j, h in enumerate(self.columns)]

        def line(values: Sequence[str]) -> str:
            parts = [v.rjust(w) if self._numeric(j) else v.ljust(w)
                     for j, (v, w) in enumerate(zip(values, widths, strict=True))]
            return "  ".join(parts).rstrip()

        out = [self.title, line(self.columns), "  ".join("-" * w for w in widths)]
        for i, row in enumerate(cells):
            if self.groups and i > 0 and self.groups[i] != self.groups[i - 1]:
                out.append("")
            out.append(line(row))
        out.extend(self.notes)
        return "\n".join(out) + "\n"

    def to_markdown(self) -> str:
        cells = [[self.plain(c, ("**", "**")).replace("|", "\\|") for c in row]
                 for row in self._first_cells()]
        header = [h.replace("|", "\\|") for h in self.columns]
        widths = [max([len(h), 3] + [len(r[j]) for r in cells]) for j, h in enumerate(header)]

        def line(values: Sequence[str]) -> str:
            return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

        rule = "| " + " | ".join(("-" * (w - 1) + ":") if self._numeric(j) else "-" * w
                                 for j, w in enumerate(widths)) + " |"
        out = [f"**{self.title}**", "", line(header), rule, *(line(r) for r in cells)]
        if self.notes:
            out.append("")
            out.extend(f"{n}  " if k < len(self.notes) - 1 else n for k, n in enumerate(self.notes))
        return "\n".join(out) + "\n"

    def to_latex(self) -> str:
        spec = "".join("r" if self._numeric(j) else "l" for j in range(len(self.columns)))
        caption = latex_escape(self.title)
        if self.notes:
            caption += ". " + " ".join(latex_escape(n) for n in self.notes)
        out = [
            "% Generated by polar_bench report. Needs \\usepackage{booktabs}.",
            "\\begin{table}[t]",
            "  \\centering",
            f"  \\caption{{{caption}}}",
            f"  \\label{{tab:{self.name}}}",
            f"  \\begin{{tabular}}{{{spec}}}",
            "    \\toprule",
            "    " + " & ".join(latex_escape(h) for h in self.columns) + r" \\",
            "    \\midrule",
        ]
        for i, row in enumerate(self._first_cells()):
            if self.groups and i > 0 and self.groups[i] != self.groups[i - 1]:
                out.append("    \\midrule")
            out.append("    " + " & ".join(self._latex_cell(c) for c in row) + r" \\")
        out += ["    \\bottomrule", "  \\end{tabular}", "\\end{table}"]
        return "\n".join(out) + "\n"

    def to_csv(self) -> str:
        """One column per string column; ``x``, ``x_low``, ``x_high`` (or ``x_sd``) per value column."""
        header, layout = [], []
        for j, h in enumerate(self.columns):
            values = [r[j] for r in self.rows if isinstance(r[j], Value)]
            key = csv_key(h)
            if not values:
                header.append(key)
                layout.append("text")
            elif any(v.has_interval for v in values):
                header += [key, f"{key}_low", f"{key}_high"]
                layout.append("interval")
            elif any(v.sd is not None for v in values):
                header += [key, f"{key}_sd"]
                layout.append("sd")
            else:
                header.append(key)
                layout.append("point")
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        exact = f"{{:.{max(self.digits, 6)}f}}"

        def num(v: float | None) -> str:
            return "" if v is None or not math.isfinite(v) else exact.format(v)

        for row in self.rows:
            out = []
            for cell, kind in zip(row, layout, strict=True):
                if kind == "text":
                    out.append(csv_text(str(cell)))
                    continue
                v = cell if isinstance(cell, Value) else Value(None)
                out.append(num(v.point))
                if kind == "interval":
                    out += [num(v.low), num(v.high)]
                elif kind == "sd":
                    out.append(num(v.sd))
            writer.writerow(out)
        return buffer.getvalue()

    def write(self, folder: Path) -> list[Path]:
        """Write ``<name>.md``, ``<name>.tex`` and ``<name>.csv`` into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for ext, text in (("md", self.to_markdown()), ("tex", self.to_latex()), ("csv", self.to_csv())):
            path = folder / f"{self.name}.{ext}"
            path.write_bytes(text.encode("utf-8"))
            paths.append(path)
        return paths


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
          "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
          "ε": r"$\varepsilon$", "γ": r"$\gamma$", "τ": r"$\tau$", "±": r"$\pm$", "×": r"$\times$",
          "—": "--", "†": r"\textsuperscript{\dag}", "≥": r"$\geq$", "≤": r"$\leq$", ">": r"$>$",
          "<": r"$<$", "≈": r"$\approx$", "‡": r"\textsuperscript{\ddag}", "▿": r"$\triangledown$"}


CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")  # a line break, a tab, ...: one line in any table


def latex_escape(text: str) -> str:
    """``text`` as LaTeX shows it literally. Control characters become spaces: a line break in an agent
    name (a results file's strings are the submitter's) would end the paragraph inside the tabular,
    and the paper stops compiling."""
    return "".join(_LATEX.get(ch, ch) for ch in CONTROL_CHARS.sub(" ", text))


def csv_text(text: str) -> str:
    """A text cell that a spreadsheet shows as text: one starting with ``=``, ``+``, ``-``, ``@`` (or a
    tab or carriage return) would be run as a formula when the CSV is opened (an agent name is the
    submitter's string), so it gets a leading ``'``, as OWASP advises for CSV files."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_key(header: str) -> str:
    key = "".join(ch.lower() if ch.isalnum() else "_" for ch in header)
    return "_".join(p for p in key.split("_") if p)


def slug(text: str, default: str = "suite") -> str:
    """``text`` as a file-name part: runs of characters other than letters, digits, ``.``, ``_`` and
    ``-`` become one ``-``; ``default`` when nothing is left."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or default


def mark_best(values: list[Value], higher: bool) -> list[Value]:
    """``values`` with the best point estimate(s) bold (highest, or lowest when ``higher`` is False);
    unchanged when fewer than two values have a finite point."""
    points = [v.point for v in values if v.point is not None and math.isfinite(v.point)]
    if len(points) < 2:
        return values
    best = max(points) if higher else min(points)
    return [replace(v, bold=True) if v.point == best else v for v in values]


INTERVAL_NAMES = {"percentile": "percentile", "rescaled": "rescaled-percentile", "bca": "BCa"}


def interval_note(confidence: float, reps: int, task_bootstrap: bool = False, method: str = "percentile") -> str:
    """The table note that says what ``[low, high]`` is."""
    what = "runs and tasks" if task_bootstrap else "runs within each task"
    return (f"[low, high]: {confidence:.0%} {INTERVAL_NAMES.get(method, method)} stratified-bootstrap interval "
            f"({reps:,} replicates; {what} resampled).")


def show_scopes(per_agent: Sequence[Sequence[ScopeEstimates]]) -> list[str]:
    """The scopes to show: every domain, plus the overall row when there is more than one domain."""
    scopes = list(dict.fromkeys(s.scope for scopes in per_agent for s in scopes))
    domains = [s for s in scopes if s != OVERALL]
    return scopes if len(domains) > 1 else domains


def _row_marks(s: ScopeEstimates | None) -> str:
    if s is None:
        return ""
    marks = ""
    if s.estimates and not s.complete:
        marks += INCOMPLETE_MARK
    if s.resampled == RESAMPLED_EPISODES:
        marks += NOISE_MARK
    return marks


def _common_notes(entries: Sequence[tuple[str, ScopeEstimates]], confidence: float, reps: int,
                  task_bootstrap: bool = False, method: str = "percentile") -> list[str]:
    notes = [interval_note(confidence, reps, task_bootstrap, method)]
    scopes = {s.scope for _, s in entries}
    if OVERALL in scopes and len(scopes) > 1:
        notes.append("overall: each domain weighted equally (the metric is averaged over domains "
                     "inside every bootstrap replicate).")
    if any(_row_marks(s).count(INCOMPLETE_MARK) for _, s in entries):
        notes.append(f"{INCOMPLETE_MARK} incomplete: errored or missing episodes left out "
                     "(--allow-incomplete).")
    if any(NOISE_MARK in _row_marks(s) for _, s in entries):
        notes.append(f"{NOISE_MARK} one run: the interval resamples episodes and reflects evaluation "
                     "noise only.")
    for label, s in entries:  # what the marks above do not say already
        parts = [p for p in s.note.split("; ") if p] if s.note else []
        if s.estimates:
            parts = [p for p in parts if p != INCOMPLETE_NOTE and not p.startswith("includes incomplete")]
        if parts:
            notes.append(f"{label}, {s.scope}: {'; '.join(parts)}.")
    return notes


def aggregates_table(results: Sequence[tuple[str, Sequence[ScopeEstimates]]],
                     metrics: Sequence[str], *, confidence: float, reps: int, digits: int = 3,
                     task_bootstrap: bool = False, title: str = "Aggregate normalized scores",
                     name: str = "aggregates", method: str = "percentile") -> Table:
    """Rows: agents grouped by domain (then overall); columns: the metrics with intervals; the best
    agent of every domain bolded per metric."""
    scopes = show_scopes([s for _, s in results])
    rows, groups, entries = [], [], []
    for scope in scopes:
        block: list[list[Any]] = []
        for label, per_scope in results:
            s = next((x for x in per_scope if x.scope == scope), None)
            if s is not None:
                entries.append((label, s))
            values = [Value.of(s.estimates.get(m) if s else None) for m in metrics]
            block.append([scope, f"{label}{_row_marks(s)}", *values])
        for j, m in enumerate(metrics):
            col = mark_best([r[2 + j] for r in block], HIGHER_IS_BETTER.get(m, True))
            for r, v in zip(block, col, strict=True):
                r[2 + j] = v
        rows += block
        groups += [scope] * len(block)
    columns = ["Domain", "Agent", *(METRIC_LABELS.get(m, m) for m in metrics)]
    return Table(name, title, columns, rows, groups,
                 _common_notes(entries, confidence, reps, task_bootstrap, method), digits)


def score_table(label: str, scopes: Sequence[ScopeEstimates], *, confidence: float, reps: int,
                digits: int = 3, task_bootstrap: bool = False, method: str = "percentile") -> Table:
    """One agent: a row per domain (and overall), IQM with its interval, mean, median, optimality gap."""
    rows = []
    shown = [s for s in scopes if not (s.scope == OVERALL and len(scopes) == 2)]
    for s in shown:
        rows.append([f"{s.scope}{_row_marks(s)}", str(s.tasks) if s.estimates else DASH,
                     Value.of(s.estimates.get("iqm")),
                     *(Value.of(s.estimates.get(m), interval=False)
                       for m in ("mean", "median", "optimality_gap"))])
    columns = ["Domain", "Tasks", "IQM", "Mean", "Median", "Optimality gap"]
    return Table("score", f"Aggregate normalized scores of {label}", columns, rows,
                 notes=_common_notes([(label, s) for s in shown], confidence, reps, task_bootstrap, method),
                 digits=digits)


def side_by_side_table(results: Sequence[tuple[str, Sequence[ScopeEstimates]]],
                       metrics: Sequence[str], *, confidence: float, reps: int, digits: int = 3,
                       task_bootstrap: bool = False, method: str = "percentile") -> Table:
    """Agents as columns; rows grouped by domain with one row per metric; the best bolded per row."""
    scopes = show_scopes([s for _, s in results])
    rows, groups, entries = [], [], []
    for scope in scopes:
        for m in metrics:
            values = []
            for label, per_scope in results:
                s = next((x for x in per_scope if x.scope == scope), None)
                if s is not None and m == metrics[0]:
                    entries.append((label, s))
                values.append(Value.of(s.estimates.get(m) if s else None))
            rows.append([scope, METRIC_LABELS.get(m, m), *mark_best(values, HIGHER_IS_BETTER.get(m, True))])
            groups.append(scope)
    marks = {label: "".join(m for m in (INCOMPLETE_MARK, NOISE_MARK)
                            if any(m in _row_marks(s) for s in per_scope))
             for label, per_scope in results}
    columns = ["Domain", "Metric", *(f"{label}{marks[label]}" for label, _ in results)]
    return Table("compare", "Aggregate normalized scores, side by side", columns, rows, groups,
                 _common_notes(entries, confidence, reps, task_bootstrap, method), digits)


def task_table(agents: Sequence[AgentScores], digits: int = 3) -> Table:
    """Per-task normalized scores. One agent: references, mean return, mean ± sd over runs and the
    episode counts. Several agents: one column each (mean ± sd over runs), the best bolded per task."""
    if len(agents) == 1:
        a = agents[0]
        rows = []
        for r in task_rows(a):
            failed = r["env_error"] + r["agent_error"] + r["timeout"] + r["missing"]
            rows.append([r["task"], r["domain"], Value(r["low"]), Value(r["high"]), Value(r["mean_return"]),
                         Value(r["mean"], sd=r["sd"]), f"{r['ok']}/{r['episodes_expected']}",
                         str(failed)])
        columns = ["Task", "Domain", "Low", "High", "Mean return", "Normalized score", "OK episodes",
                   "Failed"]
        notes = [f"Normalized score: mean ± sd over the {a.runs} run(s) of (return - low) / (high - low)."]
        return Table("per_task", f"Per-task scores of {a.label}", columns, rows,
                     notes=notes, digits=digits)
    tables = [task_rows(a) for a in agents]
    rows = []
    for i, first in enumerate(tables[0]):
        values = [Value(t[i]["mean"], sd=t[i]["sd"]) for t in tables]
        rows.append([first["task"], first["domain"], *mark_best(values, True)])
    notes = ["Normalized score: mean ± sd over runs of (return - low) / (high - low); best bolded."]
    return Table("per_task", "Per-task normalized scores", ["Task", "Domain", *(a.label for a in agents)],
                 rows, notes=notes, digits=digits)


def improvement_table(pairs: Sequence[tuple[str, str, Sequence[ScopeEstimates]]], *, confidence: float,
                      reps: int, digits: int = 3, method: str = "percentile") -> Table:
    """One row per pair (X, Y): P(X > Y) with its interval, per domain and overall."""
    scopes = show_scopes([s for _, _, s in pairs])
    rows, entries = [], []
    for x, y, per_scope in pairs:
        row: list[Any] = [x, y]
        for scope in scopes:
            s = next((e for e in per_scope if e.scope == scope), None)
            if s is not None:
                entries.append((f"{x} vs {y}", s))
            row.append(Value.of(s.estimates.get("probability_of_improvement") if s else None))
        rows.append(row)
    notes = ["P(X > Y): the Mann-Whitney statistic per task, averaged over tasks; "
             + interval_note(confidence, reps, method=method).replace("runs within each task resampled",
                                                        "runs of X and Y resampled independently "
                                                        "within each task")]
    notes += [n for n in _common_notes(entries, confidence, reps)[1:]]
    return Table("probability_of_improvement", "Probability of improvement",
                 ["X", "Y", *scopes], rows, notes=notes, digits=digits)


def sample_efficiency_table(curves: Mapping[str, Sequence[tuple[int, Estimate]]], metric: str, *,
                            confidence: float, reps: int, digits: int = 3, method: str = "percentile") -> Table:
    rows: list[list[Any]] = [[label, str(steps), Value.of(est)] for label, points in curves.items()
                             for steps, est in points]
    return Table("sample_efficiency", f"Overall {METRIC_LABELS.get(metric, metric)} by training budget",
                 ["Agent", "Training steps", METRIC_LABELS.get(metric, metric)], rows,
                 groups=[str(r[0]) for r in rows], notes=[interval_note(confidence, reps, method=method)],
                 digits=digits)


def coverage_note(runs: int, method: str, *, warning: bool = False) -> str | None:
    """What the intervals' measured coverage (`scoring.MEASURED_COVERAGE`) is worth at ``runs`` runs
    below `scoring.FEW_RUNS` (None from that count on, and for one run, which has its own warning): the
    leaderboard's note, or with ``warning`` the one-line warning of `score` and `compare`."""
    if runs >= scoring.FEW_RUNS or runs < 2:
        return None
    measured = scoring.MEASURED_COVERAGE.get(method, {}).get(runs)
    if warning:
        best_rescaled = scoring.MEASURED_COVERAGE.get("rescaled", {}).get(runs)
        what = (f"covered the true overall IQM in {measured:.1%} of simulated experiments" if measured is not None
                else "have no measured coverage at this run count")
        hint = (f"; --interval rescaled measured {best_rescaled:.1%}"
                if method != "rescaled" and best_rescaled is not None else "")
        return (f"warning: {runs} runs: nominal 95% {method} intervals {what} (benchmarks/interval_coverage.py, "
                f"docs/scoring.md){hint}; {scoring.FEW_RUNS} or more runs make them reliable")
    if measured is None:
        return None
    best = max((by.get(runs, 0.0), name) for name, by in scoring.MEASURED_COVERAGE.items())
    verdict = (f"no interval method we measured reaches 93 % at {runs} runs (the best, {best[1]}, {best[0]:.1%})"
               if best[0] < 0.93 else f"the {best[1]} interval reaches {best[0]:.1%}")
    return (f"Coverage: with {runs} runs, simulated experiments found the true overall IQM inside these 95 % "
            f"{method} intervals {measured:.1%} of the time; {verdict}, so the next suite asks for at least "
            f"{scoring.FEW_RUNS} runs (docs/scoring.md).")
