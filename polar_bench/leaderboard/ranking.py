"""Ranking the entries of a leaderboard, and the leaderboard table.

Entries are ranked per suite by the overall IQM; adjacent entries are compared by the probability of
improvement and share a rank when its interval contains 0.5; training budgets come from AGENT_INFO and
are marked below the suite's protocol budget. SUBMISSION.md ("How entries are ranked") is the rule;
docs/leaderboard.md lists where the same `Table` is rendered.
"""

from __future__ import annotations

import html
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import analysis, report, scoring
from ..analysis import OVERALL, AgentScores, Estimate, ScopeEstimates, step_count, steps_text
from ..report import CONTROL_CHARS, DASH, Table, Value, interval_note, mark_best, slug
from ..suite import DEFAULT_SUITE
from .entries import Entry

__all__ = ["RankingOptions", "Row", "Board", "rank_entries", "leaderboard_table", "markdown_table",
           "steps_text", "TIE_MARK", "DISAGREE_MARK", "BELOW_BUDGET_MARK", "Verification", "verification",
           "GAP_MARK", "fresh_seed_record", "generalization_table",
           "protocol_budgets", "compare_adjacent"]

TIE_MARK = "≈"
DISAGREE_MARK = "‡"
BELOW_BUDGET_MARK = "▿"
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
    method: str = "rescaled"
    """Interval method of the board (`polar_bench.scoring.INTERVAL_METHODS`), for the IQM intervals
    and for the probability of improvement that decides ties: the one with the best measured coverage
    at the suite's 3 runs (docs/scoring.md, benchmarks/interval_coverage.py)."""


@dataclass(frozen=True)
class Verification:
    """What the latest verification record of an entry says, in one line (`text`).

    ``status``: ``"verified"``, ``"failed"``, ``"not_verifiable"`` or ``"unverified"`` (no record).
    """

    status: str
    text: str
    detail: str = ""


def _gap_domains(record: dict) -> list[str]:
    """The domains whose published-seed score a verification found significantly above the fresh one."""
    fresh = record.get("generalization")
    rows = fresh.get("domains") if isinstance(fresh, dict) else None
    return [str(d.get("domain")) for d in rows or [] if isinstance(d, dict) and d.get("significant")]


def verification(records: Sequence[dict], tasks: int) -> Verification:
    """The display of an entry's verification from its records (oldest first) and its task count.

    "failed (k of N differ)" when any recorded re-run did not match, "failed (above its fresh-seed
    score on D)" when a fresh-seed check found domains D significantly better on the published seeds
    (a failure stays: verifying again until a fresh sample happens to miss the altered episodes must
    not clear it); otherwise "not
    verifiable" when the latest record says ``"status": "not_verifiable"`` (its ``reason`` becomes
    the detail); "N of M episodes re-run, T of U tasks, DATE" from the latest passed record; "not
    verified" without any record. The same rule as `Entry.verification_status`.
    """
    if not records:
        return Verification("unverified", "not verified")
    outcomes = [r for r in records if r.get("status") != "not_verifiable"]
    failed = [r for r in outcomes if not r.get("passed")]
    if failed:
        v = failed[-1]
        rows = [r for r in v.get("episodes") or [] if isinstance(r, dict)]
        differ = v.get("mismatched")
        if not isinstance(differ, int):
            differ = sum(1 for r in rows if r.get("match") is False or (r.get("mismatched") or 0) > 0)
        why = [f"{differ} of {v.get('sample', len(rows))} differ"] if differ or not _gap_domains(v) else []
        if _gap_domains(v):
            why.append(f"above its fresh-seed score on {', '.join(_gap_domains(v))}")
        return Verification("failed", f"failed ({'; '.join(why)})", str(v.get("date") or "")[:10])
    if records[-1].get("status") == "not_verifiable":
        return Verification("not_verifiable", "not verifiable", str(records[-1].get("reason") or ""))
    v = outcomes[-1]
    rows = [r for r in v.get("episodes") or [] if isinstance(r, dict)]
    sample = v.get("sample", len(rows))
    covered = len({r.get("task") for r in rows if r.get("task")})
    population = v.get("population")
    of = f" of {population:,}" if isinstance(population, int) else ""
    date = str(v.get("date") or "")[:10]
    return Verification("verified", f"{sample:,}{of} episodes re-run, {covered} of {tasks} tasks, {date}")


_BUDGET = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([kKMG]?)\s+environment steps per (?:task|game|level)")
_UNITS = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}


def protocol_budgets(suite: dict) -> dict[str, int]:
    """The protocol's training budget per task of every domain of a released suite (environment
    steps), parsed from the domain's ``budget`` text; empty for a suite that is not released here
    (matched by name and content hash) and without domains whose text names no number."""
    from ..suite import load_suite

    try:
        s = load_suite(str(suite.get("name")))
    except Exception:  # an unreleased or renamed suite simply has no protocol budget to compare with
        return {}
    if s.hash != suite.get("hash"):
        return {}
    out = {}
    for d in s.domains:
        m = _BUDGET.search(d.budget)
        if m:
            out[d.name] = int(float(m.group(1)) * _UNITS[m.group(2)])
    return out


@dataclass
class Row:
    """One entry on the board."""

    entry: Entry
    agent: AgentScores
    info: dict
    scopes: list[ScopeEstimates]
    rank: int | None = None
    tied: bool = False  # tied with the ranked entry just above (and sharing its rank)
    above: str | None = None  # label of the ranked entry just above
    poi_vs_above: Estimate | None = None  # P(entry above > this entry), None for the first
    verdict: str | None = None  # "better", "worse" or "tied": the entry above compared with this one
    budget: dict = field(default_factory=dict)  # training steps per domain (sum over its tasks)
    task_budget: dict = field(default_factory=dict)  # training steps per task
    below_budget: tuple[str, ...] = ()  # domains trained below the suite's protocol budget
    llm_tokens: float | None = None
    check: Verification = Verification("unverified", "not verified")

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
        """Environment steps of training per run, summed over every task."""
        return int(sum(self.budget.values()))

    @property
    def verification(self) -> str:
        return self.check.status

    @property
    def disagrees(self) -> bool:
        """True when the entry above (higher IQM) is worse by the probability of improvement."""
        return self.verdict == "worse"


@dataclass
class Board:
    """The ranked entries of one suite."""

    suite: dict
    domains: list[str]
    rows: list[Row]
    options: RankingOptions
    comparisons: dict = field(default_factory=dict)  # (id above, id below) -> improvement scopes

    def improvement(self, above: Row, below: Row) -> list[ScopeEstimates]:
        """`analysis.improvement` of ``above`` over ``below`` (every domain and overall), computed once."""
        key = (above.entry.id, below.entry.id)
        if key not in self.comparisons:
            o = self.options
            self.comparisons[key] = analysis.improvement(above.agent, below.agent, reps=o.poi_reps, seed=o.seed,
                                                         confidence=o.confidence, method=o.method)
        return self.comparisons[key]

    def domain_ranking(self, domain: str) -> list[tuple[Row, int | None, str | None, Estimate | None]]:
        """The entries ordered by the IQM of ``domain`` (failed verifications last, unranked), each with
        its rank there, its verdict against the entry above and P(above > entry) on that domain; tied
        entries share a rank, as on the main table."""
        def point(r: Row) -> float:
            est = r.estimate(domain)
            return est.point if est is not None and math.isfinite(est.point) else -math.inf

        ranked = sorted(self.ranked, key=lambda r: -point(r))
        # the first ranked entry has no entry above it (and a board whose entries all failed has none)
        comparisons: list[tuple[str | None, Estimate | None]] = [(None, None)] if ranked else []
        for above, r in zip(ranked, ranked[1:], strict=False):
            est = next((s.estimates.get(POI) for s in self.improvement(above, r) if s.scope == domain), None)
            comparisons.append((verdict_of(est), est))
        ranks = share_ranks([point(r) for r in ranked], [v == "tied" for v, _ in comparisons])
        out: list[tuple[Row, int | None, str | None, Estimate | None]] = [
            (r, rank, v, est) for r, rank, (v, est) in zip(ranked, ranks, comparisons, strict=True)]
        out += [(r, None, None, None) for r in self.rows if r.rank is None]
        return out

    @property
    def name(self) -> str:
        return f"leaderboard-{slug(str(self.suite.get('name')))}"

    @property
    def ranked(self) -> list[Row]:
        return [r for r in self.rows if r.rank is not None]

    @property
    def leader(self) -> Row | None:
        return self.ranked[0] if self.ranked else None


def _labels(entries: Sequence[Entry]) -> dict[str, str]:
    """Display names: the agent name, with the entry id appended where two entries of the same suite
    share it (one agent on two suites is on two boards, named plainly on each)."""
    def key(e: Entry) -> tuple:
        return e.suite.get("hash"), e.name

    by_name = defaultdict(list)
    for e in entries:
        by_name[key(e)].append(e)
    return {e.id: e.name if len(by_name[key(e)]) == 1 else f"{e.name} ({e.id[:6]})" for e in entries}


def _budget(info: dict, agent: AgentScores) -> tuple[dict[str, int], dict[str, int]]:
    """Training steps per task and per domain (the sum over its tasks), from AGENT_INFO's
    ``training_steps_per_task``, else its per-domain ``training_steps`` counted for every task."""
    per_task: dict[str, int] = {}
    given = info.get("training_steps_per_task")
    if isinstance(given, dict):
        per_task = {t.task_id: n for t in agent.tasks if (n := step_count(given.get(t.task_id))) is not None}
    else:
        steps = info.get("training_steps", info.get("training_budget"))
        if isinstance(steps, dict):
            per_task = {t.task_id: n for t in agent.tasks if (n := step_count(steps.get(t.domain))) is not None}
    per_domain: dict[str, int] = {}
    for t in agent.tasks:
        if t.task_id in per_task:
            per_domain[t.domain] = per_domain.get(t.domain, 0) + per_task[t.task_id]
    return per_task, per_domain


def _below_budget(agent: AgentScores, per_task: dict[str, int], protocol: dict[str, int]) -> tuple[str, ...]:
    """Domains with a protocol budget where some task was trained on fewer steps (an untrained
    entry, with no budget at all, is not marked: it makes no claim about training)."""
    if not per_task:
        return ()
    return tuple(d for d in agent.domains if d in protocol
                 and any(per_task.get(t.task_id, 0) < protocol[d] for t in agent.domain_tasks(d)))


def verdict_of(est: Estimate | None) -> str | None:
    """From the whole interval of P(above > below): ``"better"`` (it lies above 0.5), ``"worse"``
    (below 0.5) or ``"tied"`` (it contains 0.5); None without an estimate."""
    if est is None:
        return None
    return "better" if est.low > 0.5 else "worse" if est.high < 0.5 else "tied"


def compare_adjacent(board: Board, above: Row, below: Row) -> tuple[Estimate | None, str | None]:
    """P(above > below) over all domains and its verdict (`verdict_of`)."""
    est = next((s.estimates.get(POI) for s in board.improvement(above, below) if s.scope == OVERALL), None)
    return est, verdict_of(est)


def share_ranks(points: Sequence[float], tied_with_above: Sequence[bool]) -> list[int]:
    """Competition ranks (1, 2, 2, 4) of entries in order: an entry shares the rank of the one above
    when its point estimate is equal or when the two are statistically tied."""
    ranks: list[int] = []
    for i, (p, tied) in enumerate(zip(points, tied_with_above, strict=True)):
        same = i > 0 and (tied or p == points[i - 1])
        ranks.append(ranks[-1] if same else i + 1)
    return ranks


DEFAULT_OPTIONS = RankingOptions()


def rank_entries(entries: Sequence[Entry], options: RankingOptions = DEFAULT_OPTIONS,
                 metrics: Sequence[str] = ("iqm",)) -> list[Board]:
    """Score, rank and mark ties, per suite; the default suite first, then the others by name and version."""
    labels = _labels(entries)
    groups: dict[str, list[Row]] = defaultdict(list)
    suites: dict[str, dict] = {}
    for e in entries:
        results = e.results()
        agent = analysis.agent_scores(results, label=labels[e.id])
        scopes = analysis.aggregate(agent, metrics, reps=options.reps, seed=options.seed,
                                    confidence=options.confidence, method=options.method)
        info = results.agent_info
        tokens = None
        if agent.llm:
            per = agent.llm["per_episode"]
            tokens = per["prompt_tokens"] + per["completion_tokens"]
        per_task, per_domain = _budget(info, agent)
        suite = results.suite
        below = _below_budget(agent, per_task, protocol_budgets({"name": suite.name, "hash": suite.hash}))
        groups[suite.hash].append(Row(e, agent, info, scopes, budget=per_domain, task_budget=per_task,
                                      below_budget=below, llm_tokens=tokens,
                                      check=verification(e.verifications(), len(agent.tasks))))
        suites[suite.hash] = {"name": suite.name, "version": suite.version, "hash": suite.hash}
    boards = []
    for h, rows in groups.items():
        def overall(r: Row) -> float:
            est = r.estimate()
            return est.point if est is not None and math.isfinite(est.point) else -math.inf

        eligible = sorted((r for r in rows if r.verification != "failed"),
                          key=lambda r: (-overall(r), r.entry.submitted, r.entry.id))
        failed = sorted((r for r in rows if r.verification == "failed"), key=lambda r: (r.entry.submitted, r.entry.id))
        board = Board(suites[h], list(rows[0].agent.domains), eligible + failed, options)
        for above, r in zip(eligible, eligible[1:], strict=False):
            r.above = above.label
            r.poi_vs_above, r.verdict = compare_adjacent(board, above, r)
            r.tied = r.verdict == "tied"
        ranks = share_ranks([overall(r) for r in eligible], [r.tied for r in eligible])
        for r, rank in zip(eligible, ranks, strict=True):
            r.rank = rank
        boards.append(board)
    # The default suite's board comes first (the site and README open on it), then the others by name.
    return sorted(boards, key=lambda b: (str(b.suite["name"]) != DEFAULT_SUITE, str(b.suite["name"]),
                                         str(b.suite["version"])))


def rank_text(row: Row) -> str:
    if row.rank is None:
        return DASH
    marks = (f" {TIE_MARK}" if row.tied else "") + (f" {DISAGREE_MARK}" if row.disagrees else "")
    return f"{row.rank}{marks}"


def budget_text(row: Row) -> str:
    """Total steps per run, with the domains trained below the protocol budget."""
    text = steps_text(row.budget_total)
    if row.below_budget:
        text += f" {BELOW_BUDGET_MARK} " + ", ".join(row.below_budget)
    return text


def leaderboard_table(board: Board) -> Table:
    """Rank, agent, overall IQM with its interval, per-domain IQM with intervals, runs, training budget,
    LLM tokens per episode, verification and date; the best value of each IQM column bolded."""
    o = board.options
    rows: list[list[Any]] = []
    for r in board.rows:
        rows.append([rank_text(r), r.label, Value.of(r.estimate()),
                     *(Value.of(r.estimate(d)) for d in board.domains),
                     str(r.agent.runs), budget_text(r),
                     r.tokens_text(),
                     r.check.text, r.entry.submitted])
    ranked = [i for i, r in enumerate(board.rows) if r.rank is not None]
    for j in range(2, 3 + len(board.domains)):
        best = mark_best([rows[i][j] for i in ranked], True)
        for i, v in zip(ranked, best, strict=True):
            rows[i][j] = v
    columns = ["Rank", "Agent", "Overall IQM", *board.domains, "Runs", "Budget (steps)", "LLM tokens/ep.",
               "Verified", "Date"]
    notes = [interval_note(o.confidence, o.reps, method=o.method),
             "Overall: the mean of the per-domain IQMs (each domain weighted equally, inside every "
             "bootstrap replicate); the other IQM columns are per domain.",
             f"{TIE_MARK} statistically tied with the entry above, sharing its rank: the {o.confidence:.0%} "
             f"interval of P(above > entry) ({o.poi_reps:,} replicates, {o.method}) contains 0.5. Every "
             "adjacent pair is compared.",
             "Budget: environment steps of training per run, summed over every task; "
             f"{BELOW_BUDGET_MARK} names the domains trained below the suite's protocol budget. Verified: "
             "episodes re-run out of all, tasks covered and date of the latest re-run of a random sample "
             "(python -m polar_bench verify)."]
    if any(r.disagrees for r in board.rows):
        notes.append(f"{DISAGREE_MARK} the entry above has the higher IQM, but the probability of improvement "
                     "says this entry is better (the interval of P(above > entry) lies below 0.5).")
    if any(r.search_tokens for r in board.rows):
        notes.append("LLM tokens/ep.: prompt + completion tokens per evaluation episode; a second number (+ N before) "
                     "counts the tokens the agent's LLM spent before the evaluation, in all (e.g. a code-generation "
                     "agent's program search; AGENT_INFO llm.search_tokens).")
    if any(r.rank is None for r in board.rows):
        notes.append(f"Rank {DASH}: failed verification; not ranked.")
    note = report.coverage_note(min((r.agent.runs for r in board.rows), default=scoring.FEW_RUNS), o.method)
    if note:
        notes.append(note)
    s = board.suite
    title = f"Leaderboard of suite {s.get('name')} {s.get('version')} ({str(s.get('hash'))[:19]})"
    return Table(board.name, title, columns, rows, None, notes, o.digits)


GAP_MARK = "*"


def fresh_seed_record(records: Sequence[dict]) -> dict | None:
    """The fresh-seed check of an entry's latest verification that ran one (None: never checked)."""
    for record in reversed(records):
        fresh = record.get("generalization")
        if isinstance(fresh, dict) and isinstance(fresh.get("domains"), list):
            return fresh
    return None


def generalization_table(board: Board) -> Table:
    """Per entry and domain: the mean normalized score on fresh seeds and the gap to the published
    seeds' with its interval (`polar_bench.generalization`), from the latest verification that
    played fresh seeds; `GAP_MARK` where the gap is significant."""
    rows = []
    for r in board.rows:
        fresh = fresh_seed_record(r.entry.verifications())
        by_domain = {d.get("domain"): d for d in (fresh or {}).get("domains", []) if isinstance(d, dict)}
        cells = []
        for domain in board.domains:
            d = by_domain.get(domain)
            if d is None:
                cells.append(DASH)
                continue
            lo, hi = d["interval"]
            cells.append(f"{d['fresh']:.3f}, gap {d['gap']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                         + (f" {GAP_MARK}" if d.get("significant") else ""))
        checked = (f"{fresh['episodes_per_task_run']} per task and run" if fresh else "not yet")
        rows.append([r.label, *cells, checked])
    notes = ["Each cell: the mean normalized score on fresh seeds (drawn for the verification, never published), "
             "then the gap to the submitted mean on the published seeds (published - fresh) with its 95% "
             f"stratified-bootstrap interval; {GAP_MARK}: significantly above the fresh score (one-sided "
             "permutation test, at most 1% false alarms per entry), which fails verification. "
             f"{DASH}: no verification with fresh seeds yet (SUBMISSION.md, 'Fresh seeds')."]
    s = board.suite
    return Table(f"{board.name}-fresh-seeds", f"Fresh seeds: generalisation gap per domain, suite {s.get('name')}",
                 ["Agent", *board.domains, "Fresh episodes"], rows, None, notes, board.options.digits)


def md_escape(text: str) -> str:
    """Text that Markdown shows literally: HTML special characters as entities, Markdown's inline
    syntax characters backslash-escaped (``|`` is escaped by `Table.to_markdown`)."""
    text = html.escape(CONTROL_CHARS.sub(" ", text), quote=False)  # a line break ends a table row
    return re.sub(r"([\\`*_\[\]#!~])", r"\\\1", text)


def markdown_table(table: Table) -> str:
    """`Table.to_markdown` with every text cell escaped (agent names are submitted strings)."""
    rows = [[md_escape(c) if isinstance(c, str) else c for c in row] for row in table.rows]
    return replace(table, rows=rows).to_markdown()


def _fresh_json(fresh: dict | None) -> dict | None:
    if fresh is None:
        return None
    return {k: fresh.get(k) for k in ("passed", "entropy", "episodes_per_task_run", "domains")}


def board_json(board: Board) -> dict:
    """Every number of a board, for machines (``leaderboard.json``)."""
    o = board.options
    out = []
    for r in board.rows:
        info = r.info
        out.append({
            "id": r.entry.id, "agent": r.label, "name": info.get("name"), "rank": r.rank,
            "above": r.above, "p_above_better": r.poi_vs_above.to_json() if r.poi_vs_above else None,
            "verdict_vs_above": r.verdict, "tied_with_above": r.tied, "iqm_disagrees": r.disagrees,
            "iqm": {s.scope: s.estimates["iqm"].to_json() for s in r.scopes if "iqm" in s.estimates},
            "runs": r.agent.runs, "training_steps_total": r.budget_total, "training_steps": r.budget,
            "training_steps_per_task": r.task_budget, "below_protocol_budget": list(r.below_budget),
            "llm_tokens_per_episode": r.llm_tokens, "llm_tokens_before_evaluation": r.search_tokens,
            "verification": r.verification, "verification_text": r.check.text,
            "verification_detail": r.check.detail, "submitted": r.entry.submitted,
            "authors": info.get("authors"), "url": info.get("url"), "license": info.get("license"),
            "llm": info.get("llm"), "results": f"entries/{r.entry.id}/results.json",
            "fresh_seeds": _fresh_json(fresh_seed_record(r.entry.verifications())),
        })
    return {"suite": board.suite, "domains": board.domains,
            "statistics": {"reps": o.reps, "poi_reps": o.poi_reps, "seed": o.seed, "confidence": o.confidence,
                           "interval": f"{o.method}, stratified bootstrap", "domain_weighting": "equal",
                           "tie_rule": "adjacent pairs: the interval of P(above > entry) contains 0.5 (tied), "
                                       "lies above (better) or below (worse)"},
            "entries": out}
