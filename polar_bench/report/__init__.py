"""Tables (plain text, Markdown, LaTeX, CSV) and plots (PNG, PDF) of scores: `tables` builds and renders
a `Table`, `plots` draws matplotlib figures. See docs/scoring.md.
"""

from __future__ import annotations

from .plots import (
    FONT_SIZE,
    LEGEND_SIDE_CHARS,
    ROW_LABEL_CHARS,
    agent_colors,
    new_figure,
    plot_aggregates,
    plot_intervals,
    plot_performance_profile,
    plot_probability_of_improvement,
    plot_sample_efficiency,
    plot_task_scores,
    require_matplotlib,
    save_figure,
    savefig_literal,
)
from .tables import (
    CONTROL_CHARS,
    DASH,
    HIGHER_IS_BETTER,
    INCOMPLETE_MARK,
    INTERVAL_NAMES,
    METRIC_LABELS,
    NOISE_MARK,
    Table,
    Value,
    aggregates_table,
    coverage_note,
    csv_key,
    csv_text,
    improvement_table,
    interval_note,
    latex_escape,
    mark_best,
    sample_efficiency_table,
    score_table,
    show_scopes,
    side_by_side_table,
    slug,
    task_table,
)

__all__ = ["METRIC_LABELS", "HIGHER_IS_BETTER", "INCOMPLETE_MARK", "NOISE_MARK", "DASH", "Value", "Table",
           "CONTROL_CHARS", "latex_escape", "csv_text", "csv_key", "slug", "mark_best", "INTERVAL_NAMES",
           "interval_note", "show_scopes", "aggregates_table", "score_table", "side_by_side_table",
           "task_table", "improvement_table", "sample_efficiency_table", "coverage_note", "FONT_SIZE",
           "require_matplotlib", "new_figure", "agent_colors", "ROW_LABEL_CHARS", "LEGEND_SIDE_CHARS",
           "plot_intervals", "plot_aggregates", "plot_performance_profile",
           "plot_probability_of_improvement", "plot_task_scores", "plot_sample_efficiency",
           "savefig_literal", "save_figure"]
