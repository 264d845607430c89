"""Plots of scores (PNG and PDF). They need matplotlib (``pip install "polar_bench[plot]"``), imported
only when a plot is drawn, and are drawn on `matplotlib.figure.Figure` objects (the Agg canvas), never
through pyplot's global state. Every plot function takes an optional ``ax`` so that callers can
compose figures. See docs/scoring.md.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .._optional import require
from ..analysis import AgentScores, Estimate, ScopeEstimates
from ..scoring import ProfileEstimates
from .tables import METRIC_LABELS, show_scopes

# ---------------------------------------------------------------------------------------------------
# Plots

FONT_SIZE = 10


def require_matplotlib() -> ModuleType:
    """The matplotlib module, or a `UserError` with the install command."""
    return require("matplotlib", "plot", "plots")


def new_figure(width: float, height: float) -> Any:
    """A `matplotlib.figure.Figure` on the Agg canvas, outside pyplot's global state."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _new_ax(ax: Any, width: float, height: float) -> Any:
    if ax is not None:
        return ax
    return new_figure(width, height).add_subplot()


def agent_colors(labels: Sequence[str]) -> dict[str, Any]:
    """A fixed colour per label (matplotlib's colour-blind-friendly ``tab10`` cycle, in order)."""
    require_matplotlib()
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


def _style(ax: Any) -> None:
    ax.tick_params(labelsize=FONT_SIZE)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(axis="x", alpha=0.3, linewidth=0.6)


ROW_LABEL_CHARS = 48   # row labels of interval plots wrap at this width
LEGEND_SIDE_CHARS = 24  # longer labels go below the axes: on the right they squeeze the axes to nothing


def _wrap_labels(labels: Sequence[str]) -> tuple[list[str], int, int]:
    """Row labels wrapped at `ROW_LABEL_CHARS` (long agent names, and "P(a > b)" of two of them, would
    squeeze a plot to nothing), the longest line's length and the most lines of one label."""
    shown = ["\n".join(textwrap.wrap(label, ROW_LABEL_CHARS)) for label in labels]
    lines = [label.splitlines() for label in shown]
    longest = max((len(line) for ls in lines for line in ls), default=0)
    return shown, longest, max((len(ls) for ls in lines), default=1)


def _legend(ax: Any) -> None:
    """A legend outside the axes, so that it never hides data: on the right, or below the axes in one
    column when a label is long (agent names such as "codegen (SmolLM2-135M-Instruct Q4_1, ...)"),
    the figure growing to hold it when the axes own their figure."""
    _, labels = ax.get_legend_handles_labels()
    longest = max((len(label) for label in labels), default=0)
    if longest <= LEGEND_SIDE_CHARS:
        ax.legend(fontsize=FONT_SIZE - 1, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return
    fig = ax.figure
    if len(fig.axes) > 1:  # one of several axes (the caller's figure): below these axes only
        ax.legend(fontsize=FONT_SIZE - 1, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.15))
        return
    width, height = fig.get_size_inches()
    fig.set_size_inches(max(width, 0.075 * longest + 1.0), height + 0.3 + 0.2 * len(labels))
    fig.legend(*ax.get_legend_handles_labels(), fontsize=FONT_SIZE - 1, frameon=False,
               loc="outside lower center", ncols=1)


def plot_intervals(estimates: Mapping[str, Estimate | None], ax: Any = None, *,
                   colors: Mapping[str, Any] | None = None, xlabel: str = "", title: str = "",
                   show_labels: bool = True, reference: float | None = None) -> Any:
    """Horizontal interval bars with the point estimate marked, one row per label (top to bottom).
    Labels without an estimate are left empty."""
    labels = list(estimates)
    shown, longest, most_lines = _wrap_labels(labels)   # with room beside the plot for the longest line
    longest = longest if show_labels else 0
    ax = _new_ax(ax, max(4.0, 2.0 + 0.07 * longest), 0.5 + (0.45 + 0.2 * (most_lines - 1)) * len(labels))
    colors = colors or agent_colors(labels)
    xs: list[float] = [] if reference is None else [reference]
    for i, label in enumerate(labels):
        est = estimates[label]
        y = len(labels) - 1 - i
        if est is None or not math.isfinite(est.point):
            continue
        ax.barh(y, est.high - est.low, left=est.low, height=0.6, color=colors[label], alpha=0.75)
        ax.vlines(est.point, y - 0.3, y + 0.3, color="black", linewidth=2)
        # a marker too: a zero-width interval (a deterministic agent) draws no bar, and must still show
        ax.plot([est.point], [y], marker="D", markersize=6, color=colors[label], markeredgecolor="black",
                linestyle="none", zorder=3)
        xs += [v for v in (est.low, est.high, est.point) if math.isfinite(v)]
    if reference is not None:
        ax.axvline(reference, color="gray", linestyle="--", linewidth=1)
    if xs:  # padded so that nothing sits on or beyond an edge, even when every value is the same
        lo, hi = min(xs), max(xs)
        pad = 0.08 * (hi - lo) if hi > lo else max(0.05, 0.05 * abs(hi))
        ax.set_xlim(lo - pad, hi + pad)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(shown[::-1] if show_labels else [], fontsize=FONT_SIZE)
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_xlabel(xlabel, fontsize=FONT_SIZE)
    if title:
        ax.set_title(title, fontsize=FONT_SIZE + 1)
    _style(ax)
    return ax


def plot_aggregates(results: Sequence[tuple[str, Sequence[ScopeEstimates]]], metrics: Sequence[str],
                    axes: Any = None, *, score_label: str = "normalized score",
                    confidence: float = 0.95) -> Any:
    """A grid of `plot_intervals` panels: one row per domain (and overall), one column per metric.
    ``axes`` is an optional 2-D array of axes of that shape. Returns the figure."""
    scopes = show_scopes([s for _, s in results])
    labels = [label for label, _ in results]
    if axes is None:
        fig = new_figure(2.9 * len(metrics) + 1.2, (0.35 * len(labels) + 0.9) * len(scopes) + 0.5)
        axes = np.atleast_2d(fig.subplots(len(scopes), len(metrics), squeeze=False))
    else:
        axes = np.asarray(axes).reshape(len(scopes), len(metrics))
        fig = axes[0, 0].figure
    colors = agent_colors(labels)
    for i, scope in enumerate(scopes):
        for j, m in enumerate(metrics):
            values = {}
            for label, per_scope in results:
                s = next((x for x in per_scope if x.scope == scope), None)
                values[label] = s.estimates.get(m) if s else None
            ax = axes[i, j]
            plot_intervals(values, ax, colors=colors, show_labels=(j == 0),
                           title=METRIC_LABELS.get(m, m) if i == 0 else "",
                           xlabel=score_label if i == len(scopes) - 1 else "")
            if j == 0 and len(scopes) > 1:
                ax.set_ylabel(scope, fontsize=FONT_SIZE + 1, fontweight="bold")
    fig.suptitle(f"Aggregate metrics with {confidence:.0%} stratified-bootstrap intervals",
                 fontsize=FONT_SIZE + 1)
    return fig


def plot_performance_profile(profile: ProfileEstimates, ax: Any = None, *,
                             colors: Mapping[str, Any] | None = None,
                             score_label: str = "normalized score") -> Any:
    """Performance profiles with pointwise bands: the fraction of runs (or of tasks, for the
    average-score distribution) whose normalized score exceeds τ."""
    ax = _new_ax(ax, 5.5, 3.8)
    labels = list(profile.points)
    colors = colors or agent_colors(labels)
    for label in labels:
        ax.plot(profile.tau, profile.points[label], color=colors[label], linewidth=2, label=label)
        ax.fill_between(profile.tau, profile.intervals[label][0], profile.intervals[label][1],
                        color=colors[label], alpha=0.2, linewidth=0)
    ax.set_xlabel(f"{score_label} τ", fontsize=FONT_SIZE)
    what = "runs" if profile.kind == "runs" else "tasks (mean over runs)"
    ax.set_ylabel(f"fraction of {what} with score > τ", fontsize=FONT_SIZE)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(float(profile.tau[0]), float(profile.tau[-1]))
    ax.set_title("Performance profiles", fontsize=FONT_SIZE + 1)
    _legend(ax)
    _style(ax)
    ax.grid(axis="y", alpha=0.3, linewidth=0.6)
    return ax


def plot_probability_of_improvement(pairs: Sequence[tuple[str, str, Estimate | None]], ax: Any = None, *,
                                    colors: Mapping[str, Any] | None = None) -> Any:
    """One interval bar per pair: P(X > Y) with its interval, a dashed line at 0.5 (no difference)."""
    labels = [f"P({x} > {y})" for x, y, _ in pairs]
    estimates = {lab: est for lab, (_, _, est) in zip(labels, pairs, strict=True)}
    if colors is None:
        base = agent_colors(list(dict.fromkeys(x for x, _, _ in pairs)))
        colors = {lab: base[x] for lab, (x, _, _) in zip(labels, pairs, strict=True)}
    ax = _new_ax(ax, max(5.5, 3.0 + 0.07 * _wrap_labels(labels)[1]), 0.9 + 0.85 * len(pairs))
    plot_intervals(estimates, ax, colors=colors, xlabel="probability of improvement",
                   title="Probability of improvement", reference=0.5)
    ax.set_xlim(0, 1)
    return ax


def plot_task_scores(agents: Sequence[AgentScores], ax: Any = None, *,
                     colors: Mapping[str, Any] | None = None,
                     score_label: str = "normalized score") -> Any:
    """Per-task normalized scores: for every task (a row) and agent, the mean over runs (a dot) and
    the interquartile range over runs (a line)."""
    tasks = [t.task_id for t in agents[0].tasks]
    ax = _new_ax(ax, 7.5, 1.3 + (0.25 + 0.03 * len(agents)) * len(tasks))
    labels = [a.label for a in agents]
    colors = colors or agent_colors(labels)
    step = 0.7 / max(1, len(agents))
    for k, a in enumerate(agents):
        offset = (k - (len(agents) - 1) / 2) * step
        for i, tid in enumerate(tasks):
            scores = a.task(tid).run_scores
            scores = scores[np.isfinite(scores)]
            if scores.size == 0:
                continue
            y = len(tasks) - 1 - i + offset
            q25, q75 = np.percentile(scores, [25, 75])
            ax.hlines(y, q25, q75, color=colors[a.label], linewidth=1.5, alpha=0.6)
            ax.plot([scores.mean()], [y], "o", color=colors[a.label], markersize=4,
                    label=a.label if i == 0 else None)
    ax.set_yticks(range(len(tasks)))
    ax.set_yticklabels(tasks[::-1], fontsize=FONT_SIZE - 1)
    ax.set_ylim(-0.6, len(tasks) - 0.4)
    ax.axvline(0, color="gray", linewidth=0.8)
    ax.axvline(1, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel(f"{score_label} (dot: mean over runs; line: 25th to 75th percentile)", fontsize=FONT_SIZE)
    ax.set_title("Per-task normalized scores", fontsize=FONT_SIZE + 1)
    if len(agents) > 1:
        _legend(ax)
    _style(ax)
    return ax


def plot_sample_efficiency(curves: Mapping[str, Sequence[tuple[int, Estimate]]], ax: Any = None, *,
                           colors: Mapping[str, Any] | None = None, metric: str = "iqm",
                           score_label: str = "normalized score") -> Any:
    """The overall metric (with its interval as a band) against training steps, one line per agent."""
    ax = _new_ax(ax, 5.5, 3.8)
    colors = colors or agent_colors(list(curves))
    for label, points in curves.items():
        steps = [p[0] for p in points]
        ax.plot(steps, [p[1].point for p in points], "o-", color=colors[label], linewidth=2,
                markersize=4, label=label)
        ax.fill_between(steps, [p[1].low for p in points], [p[1].high for p in points],
                        color=colors[label], alpha=0.2, linewidth=0)
    ax.set_xlabel("training steps (environment steps)", fontsize=FONT_SIZE)
    ax.set_ylabel(f"{METRIC_LABELS.get(metric, metric)} {score_label}", fontsize=FONT_SIZE)
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_title("Sample efficiency", fontsize=FONT_SIZE + 1)
    _legend(ax)
    _style(ax)
    ax.grid(axis="y", alpha=0.3, linewidth=0.6)
    return ax


def savefig_literal(fig: Any, path: Path, **kwargs: Any) -> None:
    """``fig.savefig`` with every text shown as written. Matplotlib reads ``$...$`` in any text as
    mathtext, and agent names are the submitters' strings: one such as ``$\\x$`` made ``report`` and
    the leaderboard build stop with a traceback. Our own labels use no mathtext (τ is a character)."""
    from matplotlib import rc_context
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    with rc_context({"text.parse_math": False}):  # the tick labels made while drawing
        fig.savefig(path, **kwargs)


def save_figure(fig: Any, folder: Path, name: str, dpi: int = 150) -> list[Path]:
    """Write ``<name>.png`` and ``<name>.pdf`` (without creation date, so the same figure gives the
    same bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    png, pdf = folder / f"{name}.png", folder / f"{name}.pdf"
    savefig_literal(fig, png, dpi=dpi, metadata={"Software": None})
    savefig_literal(fig, pdf, metadata={"CreationDate": None, "Creator": None, "Producer": None})
    return [png, pdf]
