"""Ranking the entries of a leaderboard, and the leaderboard table.

Entries are grouped by suite (name, version, hash); within a suite they are ranked by the point
estimate of the overall IQM (every domain weighted equally; docs/scoring.md), higher first. An entry
whose verification failed is listed last, without a rank, and cannot lead.

Statistical ties: for every ranked entry E below the leader L, the probability of improvement
P(L > E) is estimated over all domains with its stratified-bootstrap interval
(`polar_bench.analysis.improvement`). When that interval contains 0.5, L's advantage over E is not
statistically distinguishable from no advantage, and E is marked *tied with the leader* (``≈``).

The same `Table` is rendered into ``leaderboard/README.md`` (Markdown), ``leaderboard-<suite>.tex``
and ``.csv``, and by ``python -m polar_bench report leaderboard/ --format latex``; the same numbers
go into ``leaderboard.json`` and the site.
"""

from __future__ import annotations

import html
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Sequence

from .. import analysis, report, scoring
from ..analysis import OVERALL, AgentScores, Estimate, ScopeEstimates
from ..report import DASH, Table, Value
from .entries import Entry

__all__ = ["RankingOptions", "Row", "Board", "rank_entries", "leaderboard_table", "markdown_table",
           "steps_text", "TIE_MARK"]

TIE_MARK = "≈"
POI = "probability_of_improvement"


@dataclass(frozen=True)
class RankingOptions:
    """The statistics of the leaderboard; the defaults are those of `report`, so that
    ``report leaderboard/ --format latex`` reproduces the published table."""

    reps: int = scoring.AGGREGATE_REPS
    poi_reps: int = scoring.PROFILE_REPS
    seed: int = 0
    confidence: float = 0.95
    digits: int = 3


@dataclass
class Row:
    """One entry on the board."""

    entry: Entry
    agent: AgentScores
    info: dict
    scopes: list[ScopeEstimates]
    rank: int | None = None
    tied: bool = False
    poi_vs_leader: Estimate | None = None  # P(leader > this entry), None for the leader itself
    budget: dict = field(default_factory=dict)
    llm_tokens: float | None = None

    @property
    def label(self) -> str:
        return self.agent.label

    @property
    def search_tokens(self) -> int | None:
        """LLM tokens spent before the evaluation (AGENT_INFO["llm"]["search_tokens"]: e.g. writing the
        programs a code-generation agent then plays without an LLM), or None."""
        llm = self.info.get("llm")
        n = llm.get("search_tokens") if isinstance(llm, dict) else None
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    def tokens_text(self) -> str:
        if self.llm_tokens is None:
            return DASH
        text = f"{self.llm_tokens:,.0f}"
        return text if self.search_tokens is None else f"{text} + {steps_text(self.search_tokens)} before"

    def estimate(self, scope: str = OVERALL, metric: str = "iqm") -> Estimate | None:
        s = next((x for x in self.scopes if x.scope == scope), None)
        return s.estimates.get(metric) if s else None

    @property
    def budget_total(self) -> int:
        return int(sum(self.budget.values()))

    @property
    def verification(self) -> str:
        return self.entry.verification_status


@dataclass
class Board:
    """The ranked entries of one suite."""

    suite: dict
    domains: list[str]
    rows: list[Row]
    options: RankingOptions

    @property
    def name(self) -> str:
        return f"leaderboard-{_slug(str(self.suite.get('name')))}"

    @property
    def ranked(self) -> list[Row]:
        return [r for r in self.rows if r.rank is not None]

    @property
    def leader(self) -> Row | None:
        return self.ranked[0] if self.ranked else None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "suite"


def _labels(entries: Sequence[Entry]) -> dict[str, str]:
    """Display names: the agent name, with the entry id appended where two entries share it."""
    by_name = defaultdict(list)
    for e in entries:
        by_name[e.name].append(e)
    return {e.id: e.name if len(by_name[e.name]) == 1 else f"{e.name} ({e.id[:6]})" for e in entries}


def _budget(info: dict) -> dict:
    steps = info.get("training_steps", info.get("training_budget"))
    return {str(k): int(v) for k, v in steps.items()} if isinstance(steps, dict) else {}


def rank_entries(entries: Sequence[Entry], options: RankingOptions = RankingOptions(),
                 metrics: Sequence[str] = ("iqm",)) -> list[Board]:
    """Score, rank and mark ties, per suite; suites in order of name and version."""
    labels = _labels(entries)
    groups: dict[str, list[Row]] = defaultdict(list)
    suites: dict[str, dict] = {}
    for e in entries:
        data = e.results()
        agent = analysis.agent_scores(data, label=labels[e.id])
        agent = replace(agent, path=str(e.results_path))
        scopes = analysis.aggregate(agent, metrics, reps=options.reps, seed=options.seed,
                                    confidence=options.confidence)
        info = data["agent"].get("info") or {}
        tokens = None
        if agent.llm:
            per = agent.llm["per_episode"]
            tokens = per["prompt_tokens"] + per["completion_tokens"]
        groups[data["suite"]["hash"]].append(Row(e, agent, info, scopes, budget=_budget(info),
                                                 llm_tokens=tokens))
        suites[data["suite"]["hash"]] = {k: data["suite"][k] for k in ("name", "version", "hash")}
    boards = []
    for h, rows in groups.items():
        def overall(r: Row) -> float:
            est = r.estimate()
            return est.point if est is not None and math.isfinite(est.point) else -math.inf

        eligible = sorted((r for r in rows if r.verification != "failed"),
                          key=lambda r: (-overall(r), r.entry.submitted, r.entry.id))
        failed = sorted((r for r in rows if r.verification == "failed"), key=lambda r: (r.entry.submitted, r.entry.id))
        for i, r in enumerate(eligible):
            same = i > 0 and overall(r) == overall(eligible[i - 1])
            r.rank = eligible[i - 1].rank if same else i + 1
        if eligible:
            leader = eligible[0]
            for r in eligible[1:]:
                scopes = analysis.improvement(leader.agent, r.agent, reps=options.poi_reps, seed=options.seed,
                                              confidence=options.confidence)
                est = next((s.estimates.get(POI) for s in scopes if s.scope == OVERALL), None)
                r.poi_vs_leader = est
                r.tied = est is not None and est.low <= 0.5 <= est.high
        domains = list(rows[0].agent.domains)
        boards.append(Board(suites[h], domains, eligible + failed, options))
    return sorted(boards, key=lambda b: (str(b.suite["name"]), str(b.suite["version"])))


def steps_text(steps: int) -> str:
    """1500000 -> '1.5M'; 0 -> '0'."""
    if steps <= 0:
        return "0"
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if steps >= size:
            return f"{steps / size:.3g}{unit}"
    return str(steps)


VERIFIED_TEXT = {"verified": "yes", "unverified": "no", "failed": "failed"}


def rank_text(row: Row) -> str:
    if row.rank is None:
        return DASH
    return f"{row.rank} {TIE_MARK}" if row.tied else str(row.rank)


def leaderboard_table(board: Board) -> Table:
    """Rank, agent, overall IQM with its interval, per-domain IQM with intervals, runs, training budget,
    LLM tokens per episode, verification and date; the best value of each IQM column bolded."""
    o = board.options
    rows = []
    for r in board.rows:
        rows.append([rank_text(r), r.label, Value.of(r.estimate()),
                     *(Value.of(r.estimate(d)) for d in board.domains),
                     str(r.agent.runs), steps_text(r.budget_total),
                     r.tokens_text(),
                     VERIFIED_TEXT[r.verification], r.entry.submitted])
    ranked = [i for i, r in enumerate(board.rows) if r.rank is not None]
    for j in range(2, 3 + len(board.domains)):
        best = report._mark_best([rows[i][j] for i in ranked], True)
        for i, v in zip(ranked, best):
            rows[i][j] = v
    columns = ["Rank", "Agent", "Overall IQM", *board.domains, "Runs", "Budget (steps)", "LLM tokens/ep.",
               "Verified", "Date"]
    notes = [report._interval_note(o.confidence, o.reps),
             "Overall: the mean of the per-domain IQMs (each domain weighted equally, inside every "
             "bootstrap replicate); the other IQM columns are per domain.",
             f"{TIE_MARK} statistically tied with the leader: the {o.confidence:.0%} interval of "
             f"P(leader > entry) ({o.poi_reps:,} replicates) contains 0.5.",
             "Budget: environment steps of training, summed over domains. Verified: yes when a re-run of "
             "a random sample of its episodes reproduced the returns (python -m polar_bench verify)."]
    if any(r.search_tokens for r in board.rows):
        notes.append("LLM tokens/ep.: prompt + completion tokens per evaluation episode; a second number (+ N before) "
                     "counts the tokens the agent's LLM spent before the evaluation, in all (e.g. a code-generation "
                     "agent's program search; AGENT_INFO llm.search_tokens).")
    if any(r.rank is None for r in board.rows):
        notes.append(f"Rank {DASH}: failed verification; not ranked.")
    s = board.suite
    title = f"Leaderboard of suite {s.get('name')} {s.get('version')} ({str(s.get('hash'))[:19]})"
    return Table(board.name, title, columns, rows, None, notes, o.digits)


def md_escape(text: str) -> str:
    """Text that Markdown shows literally: HTML special characters as entities, Markdown's inline
    syntax characters backslash-escaped (``|`` is escaped by `Table.to_markdown`)."""
    text = html.escape(text, quote=False)
    return re.sub(r"([\\`*_\[\]#!~])", r"\\\1", text)


def markdown_table(table: Table) -> str:
    """`Table.to_markdown` with every text cell escaped (agent names are submitted strings)."""
    rows = [[md_escape(c) if isinstance(c, str) else c for c in row] for row in table.rows]
    return replace(table, rows=rows).to_markdown()


def board_json(board: Board) -> dict:
    """Every number of a board, for machines (``leaderboard.json``)."""
    o = board.options
    out = []
    for r in board.rows:
        info = r.info
        out.append({
            "id": r.entry.id, "agent": r.label, "name": info.get("name"), "rank": r.rank, "tied_with_leader": r.tied,
            "p_leader_better": r.poi_vs_leader.to_json() if r.poi_vs_leader else None,
            "iqm": {s.scope: s.estimates["iqm"].to_json() for s in r.scopes if "iqm" in s.estimates},
            "runs": r.agent.runs, "training_steps": r.budget, "llm_tokens_per_episode": r.llm_tokens,
            "llm_tokens_before_evaluation": r.search_tokens,
            "verification": r.verification, "submitted": r.entry.submitted,
            "authors": info.get("authors"), "url": info.get("url"), "license": info.get("license"),
            "llm": info.get("llm"), "results": f"entries/{r.entry.id}/results.json",
        })
    return {"suite": board.suite, "domains": board.domains,
            "statistics": {"reps": o.reps, "poi_reps": o.poi_reps, "seed": o.seed, "confidence": o.confidence,
                           "interval": "percentile, stratified bootstrap", "domain_weighting": "equal",
                           "tie_rule": "the interval of P(leader > entry) contains 0.5"},
            "entries": out}
