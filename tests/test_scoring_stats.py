"""Interval methods, rliable-style metric functions, pathological JSON, and the leaderboard's tie rule,
budgets and verification display."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_scoring_commands import DOMAINS, make_results, run, two_domains, write_results

from polar_bench import scoring
from polar_bench.analysis import Estimate, agent_scores
from polar_bench.errors import ScoringError
from polar_bench.leaderboard.ranking import (
    BELOW_BUDGET_MARK,
    DISAGREE_MARK,
    TIE_MARK,
    _below_budget,
    _budget,
    protocol_budgets,
    share_ranks,
    verdict_of,
    verification,
)
from polar_bench.results import MAX_JSON_DEPTH

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------------
# Interval methods


def test_rescaled_interval_restores_the_variance_of_each_tasks_mean():
    """Resampling n runs gives a task mean the variance s²(n-1)/n²; the rescaled runs give s²/n."""
    x = np.random.default_rng(0).normal(0.0, 1.0, (3, 1))
    for method, factor in (("percentile", 2 / 3), ("rescaled", 1.0)):
        r = scoring.interval_estimates({"a": x}, "mean", 40_000, seed=1, method=method, keep_replicates=True)
        assert np.var(r.replicates["a"]) == pytest.approx(factor * np.var(x, ddof=1) / 3, rel=0.03), method
        assert r.points["a"] == pytest.approx(float(np.mean(x)))  # the point estimate is unchanged


def test_rescaled_intervals_are_wider_and_bca_follows_its_definition():
    x = np.random.default_rng(2).normal(0.5, 0.2, (3, 12))
    p = scoring.interval_estimates({"a": x}, "iqm", 4000, seed=3).intervals["a"]
    r = scoring.interval_estimates({"a": x}, "iqm", 4000, seed=3, method="rescaled").intervals["a"]
    assert r[0] < p[0] and r[1] > p[1]
    res = scoring.interval_estimates({"a": x}, "iqm", 4000, seed=3, method="bca", keep_replicates=True)
    jack = np.array([scoring.iqm(np.delete(x, i, axis=0)) for i in range(3)])
    want = scoring.bca_interval(res.replicates["a"], res.points["a"], jack, 0.95)
    np.testing.assert_allclose(res.intervals["a"], want)
    assert res.method == "bca"


def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    values = np.concatenate([np.linspace(-1, 1, 1001)])
    np.testing.assert_allclose(scoring.bca_interval(values, 0.0), scoring.percentile_interval(values), atol=2e-3)


def test_unknown_interval_method_is_a_scoring_error():
    with pytest.raises(ScoringError, match="unknown interval method 'student'; choose from percentile"):
        scoring.interval_estimates({"a": np.ones((3, 2))}, "iqm", 10, method="student")


# ---------------------------------------------------------------------------------------------------
# rliable-style metric functions


def _trimmed(m: np.ndarray) -> float:  # rliable's aggregate_iqm: scipy.stats.trim_mean(x, 0.25, axis=None)
    from scipy.stats import trim_mean

    return float(trim_mean(m, 0.25, axis=None))


def test_a_function_of_one_matrix_is_accepted_as_rliable_passes_it():
    x = np.random.default_rng(4).normal(0.5, 0.2, (5, 26))
    builtin = scoring.interval_estimates({"a": x}, "iqm", 300, seed=5)
    detected = scoring.interval_estimates({"a": x}, _trimmed, 300, seed=5)
    flagged = scoring.interval_estimates({"a": x}, _trimmed, 300, seed=5, matrix_function=True)
    for r in (detected, flagged):
        assert r.points["a"] == pytest.approx(builtin.points["a"])
        np.testing.assert_allclose(r.intervals["a"], builtin.intervals["a"])
    vector = scoring.interval_estimates({"a": x}, lambda m: np.array([_trimmed(m), np.mean(m)]), 300, seed=5)
    np.testing.assert_allclose(vector.intervals["a"][:, 0], builtin.intervals["a"])


def test_a_batched_function_is_still_called_once_per_chunk():
    calls = []

    def batched(block: np.ndarray) -> np.ndarray:
        calls.append(block.shape[0])
        return np.mean(block.reshape(block.shape[0], -1), axis=1)

    x = np.random.default_rng(6).normal(size=(3, 4))
    r = scoring.interval_estimates({"a": x}, batched, 1000, seed=0)
    mean = scoring.interval_estimates({"a": x}, "mean", 1000, seed=0)
    np.testing.assert_allclose(r.intervals["a"], mean.intervals["a"])
    assert sum(calls) < 1000 + 50  # a probe and whole chunks, never one call per replicate


# ---------------------------------------------------------------------------------------------------
# Commands: standard flag, coverage warning, pathological JSON


def _file(tmp_path: Path, runs: int = 3) -> str:
    scores = {t: v[:runs] for t, v in two_domains(0, 10.0, runs=5).items()}
    return write_results(tmp_path / "a.json", make_results("ppo", scores, domains=DOMAINS))


def test_score_json_says_standard_unless_domains_are_chosen(tmp_path, capsys):
    path = _file(tmp_path)
    code, out, _ = run(["score", path, "--json", "--reps", "50"], capsys)
    assert code == 0 and json.loads(out)["standard"] is True
    code, out, _ = run(["score", path, "--json", "--reps", "50", "--domains", "classic"], capsys)
    assert code == 0 and json.loads(out)["standard"] is False


def test_score_warns_with_the_measured_coverage_below_five_runs(tmp_path, capsys):
    code, _, err = run(["score", _file(tmp_path, 3), "--reps", "50"], capsys)
    cover = scoring.MEASURED_COVERAGE["percentile"][3]
    assert code == 0 and f"warning: 3 runs: nominal 95% percentile intervals covered the true overall IQM in " \
                          f"{cover:.1%}" in err and len(err.splitlines()) == 1
    code, out, err = run(["score", _file(tmp_path, 3), "--reps", "50", "--interval", "rescaled"], capsys)
    assert code == 0 and f"{scoring.MEASURED_COVERAGE['rescaled'][3]:.1%}" in err
    assert "rescaled-percentile stratified-bootstrap interval" in out
    code, _, err = run(["score", _file(tmp_path, 5), "--reps", "50"], capsys)
    assert code == 0 and "warning" not in err


def test_compare_warns_with_the_coverage_of_the_smallest_run_count(tmp_path, capsys):
    a = write_results(tmp_path / "a.json", make_results("a", two_domains(0, 10.0, runs=3), domains=DOMAINS))
    b = write_results(tmp_path / "b.json", make_results("b", two_domains(1, runs=5), domains=DOMAINS))
    code, _, err = run(["compare", a, b, "--reps", "50", "--poi-reps", "20", "--interval", "bca"], capsys)
    want = f"warning: 3 runs: nominal 95% bca intervals covered the true overall IQM in " \
           f"{scoring.MEASURED_COVERAGE['bca'][3]:.1%}"
    assert code == 0 and want in err and "--interval rescaled measured 92.8%" in err


PATHOLOGICAL = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "deep_but_parseable": '{"a": ' + "[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5) + "}",
    "huge_float": '{"format_version": 1e999}',
    "huge_int": '{"format_version": 1' + "0" * 400 + "}",
    "very_huge_int": '{"format_version": 1' + "0" * 5000 + "}",
    "nan": '{"format_version": NaN}',
    "not_utf8": b'{"a": "\xff"}',
}


@pytest.mark.parametrize("case", sorted(PATHOLOGICAL))
@pytest.mark.parametrize("command", [["score"], ["validate"], ["report", "--format", "text"]])
def test_pathological_json_is_one_line_and_exit_2(tmp_path, capsys, case, command):
    path = tmp_path / "bad.json"
    text = PATHOLOGICAL[case]
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    code, out, err = run([command[0], str(path), *command[1:]], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err[:300]
    assert "Traceback" not in err


def test_compare_answers_pathological_json_too(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(PATHOLOGICAL["deep"])
    code, _, err = run(["compare", _file(tmp_path), str(bad)], capsys)
    assert code == 2 and "nested too deeply" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------------
# Tie rule, budgets, verification


def test_verdicts_come_from_the_whole_interval():
    assert verdict_of(Estimate(0.70, 0.62, 0.78)) == "better"
    assert verdict_of(Estimate(0.26, 0.232, 0.294)) == "worse"  # the case: the IQM leader is worse
    assert verdict_of(Estimate(0.55, 0.45, 0.63)) == "tied"
    assert verdict_of(None) is None


def test_rank_and_budget_cells_carry_their_marks():
    from polar_bench.leaderboard.ranking import Row, budget_text, rank_text

    def row(**kw):
        return Row(entry=None, agent=None, info={}, scopes=[], **kw)  # only the cells are read

    assert rank_text(row(rank=2, tied=True, verdict="tied")) == f"2 {TIE_MARK}"
    assert rank_text(row(rank=2, verdict="worse")) == f"2 {DISAGREE_MARK}"  # the IQM-vs-P(improvement) flag
    assert rank_text(row(rank=3, verdict="better")) == "3"
    assert rank_text(row()) == "—"
    assert budget_text(row(budget={"a": 3_000_000, "b": 30_000}, below_budget=("b",))) == \
        f"3.03M {BELOW_BUDGET_MARK} b"


def test_tied_entries_share_a_rank_along_chains():
    assert share_ranks([0.9, 0.8, 0.7, 0.6], [False, True, True, False]) == [1, 1, 1, 4]
    assert share_ranks([0.9, 0.8, 0.8, 0.5], [False, False, False, False]) == [1, 2, 2, 4]


def test_identical_agents_are_called_not_tied_at_most_five_percent_of_the_time():
    """The tie rule's false 'not tied' rate, with the leaderboard's method, on identical agents."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("interval_coverage", ROOT / "benchmarks" / "interval_coverage.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rates = bench.false_not_tied(bench.make_tasks(), 3, 300, 500, ("rescaled", "percentile"), seed=7)
    assert rates["rescaled"] <= 0.05  # the leaderboard's method (docs/scoring.md: 2.8% on 500 experiments)
    assert rates["percentile"] > 0.05  # rliable's interval would break the promise at 3 runs (8.8% there)


def _records(**latest):
    old = {"date": "2026-01-01T00:00:00+00:00", "passed": True, "sample": 5, "population": 100, "episodes": []}
    return [old, {"date": "2026-02-03T10:00:00+00:00", **latest}]


def test_verification_text_from_the_latest_record():
    rows = [{"task": "a/x", "match": True}, {"task": "a/x", "match": True}, {"task": "b/y", "match": True}]
    v = verification(_records(passed=True, sample=3, population=1770, episodes=rows), 38)
    assert (v.status, v.text) == ("verified", "3 of 1,770 episodes re-run, 2 of 38 tasks, 2026-02-03")
    rows = [{"task": "a/x", "matched": 2, "mismatched": 1}, {"task": "b/y", "matched": 3, "mismatched": 0}]
    v = verification(_records(passed=False, sample=6, population=1770, episodes=rows), 38)
    assert (v.status, v.text) == ("failed", "failed (1 of 6 differ)")
    v = verification(_records(passed=False, sample=30, mismatched=4, episodes=[]), 38)
    assert v.text == "failed (4 of 30 differ)"
    v = verification(_records(status="not_verifiable", reason="checkpoints missing"), 38)
    assert (v.status, v.text, v.detail) == ("not_verifiable", "not verifiable", "checkpoints missing")
    assert verification([], 38).text == "not verified"


def test_budget_per_task_and_below_protocol_marks(tmp_path):
    data = make_results("ppo", two_domains(0, 10.0), domains=DOMAINS)
    agent = agent_scores(data)
    steps = {"gym/A-v0": 100, "gym/B-v0": 300, "gym/C-v0": 200, "dmc/d-run": 50, "dmc/e-run": 50}
    per_task, per_domain = _budget({"training_steps_per_task": steps}, agent)
    assert per_domain == {"classic": 600, "control": 100}
    assert _below_budget(agent, per_task, {"classic": 200, "control": 10}) == ("classic",)
    _, per_domain = _budget({"training_steps": {"classic": 1000, "control": 7}}, agent)
    assert per_domain == {"classic": 3000, "control": 14}  # a per-domain figure counts for every task
    assert _below_budget(agent, {}, {"classic": 200}) == ()  # untrained: no claim, no mark


def test_the_leaderboard_says_no_method_reaches_93_percent_at_3_runs():
    from polar_bench.report import coverage_note

    note = coverage_note(3, "rescaled")
    assert note is not None and "92.8% of the time" in note
    assert "no interval method we measured reaches 93 % at 3 runs (the best, rescaled, 92.8%)" in note
    assert "the next suite asks for at least 5 runs" in note
    assert coverage_note(5, "rescaled") is None and coverage_note(1, "rescaled") is None


def test_protocol_budgets_of_suite_v1():
    from polar_bench import load_suite

    s = load_suite("v1")
    budgets = protocol_budgets({"name": "v1", "hash": s.hash})
    assert budgets == {"classic": 500_000, "dmc": 1_000_000, "procgen": 25_000_000, "nethack": 10_000_000,
                       "babyai": 1_000_000}
    assert protocol_budgets({"name": "v1", "hash": "sha256:other"}) == {}
    assert len({TIE_MARK, DISAGREE_MARK, BELOW_BUDGET_MARK}) == 3


def test_site_pages_come_from_templates_with_autoescaping():
    from polar_bench.leaderboard import site

    env = site._environment()  # noqa: SLF001  # the module's own environment, checked directly
    assert env.autoescape("index.html") is True
    assert env.from_string("{{ x }}").render(x="<script>") == "&lt;script&gt;"  # strings too (the default)
    page = env.get_template("macros.html").module.cell({"value": False, "text": "<img src=x onerror=1>"})
    assert str(page) == "&lt;img src=x onerror=1&gt;"
    assert {p.name for p in site.STATIC.iterdir()} == {"leaderboard.css", "leaderboard.js"}
