"""Submissions and the leaderboard: check, add, verify, rank, publish.

- `check_submission(path)` runs every check of SUBMISSION.md on a results file and returns every problem.
- `submit(path, leaderboard)` adds a results file that passes them as a content-addressed entry.
- `verify(path, agent, sample)` re-runs a random sample of its episodes and records the outcome.
- `build(leaderboard)` ranks the entries (IQM over domains; ties by probability of improvement) and
  writes README.md, LaTeX and CSV tables, leaderboard.json and a static site.

The command line: ``python -m polar_bench submit | verify | leaderboard build`` (docs/leaderboard.md).
"""

from .checks import CHECKS, Problem, check_data, check_submission, recompute_summary, released_suites
from .entries import (
                      DEFAULT_DIR,
                      Entry,
                      SubmissionRejected,
                      content_id,
                      episodes_fingerprint,
                      find_entry,
                      load_entries,
                      submit,
)
from .ranking import Board, RankingOptions, Row, leaderboard_table, markdown_table, rank_entries
from .site import build, render_tables
from .verify import STOCHASTIC_TOLERANCE, verify

__all__ = ["CHECKS", "Problem", "check_data", "check_submission", "recompute_summary", "released_suites",
           "DEFAULT_DIR", "Entry", "SubmissionRejected", "content_id", "episodes_fingerprint", "find_entry",
           "load_entries", "submit", "Board", "RankingOptions", "Row", "leaderboard_table", "markdown_table",
           "rank_entries", "build", "render_tables", "STOCHASTIC_TOLERANCE", "verify"]
