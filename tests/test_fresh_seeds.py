"""Fresh seeds: the generalisation test's false alarms, a seed-detecting agent caught by the default
verify, honest agents passing it, and evaluate --fresh-seeds' results kept off the leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polar_bench import load_suite
from polar_bench.cli import main
from polar_bench.generalization import (
    FRESH_MIN_EPISODES,
    draw_fresh_seeds,
    fresh_episode_count,
    gap_test,
    normalized_by_stratum,
)
from polar_bench.leaderboard import check_submission, verify

ROOT = Path(__file__).resolve().parent.parent
CARTPOLE = "gym/CartPole-v1"

# A strong CartPole controller on the suite's published seeds, uniformly random actions elsewhere.
DETECTOR = '''
import random
PUBLISHED = set({seeds!r})
AGENT_INFO = {{"name": "seed-detector", "authors": ["a referee"], "url": "https://example.org",
               "training_steps": 0, "llm": None, "license": "MIT"}}

class Agent:
    def reset(self, seed):
        self.known = seed in PUBLISHED
        self.rng = random.Random(seed)

    def act(self, observation, info):
        if self.known:
            return 1 if 3 * observation[2] + observation[3] > 0 else 0
        return self.rng.randrange(2)

def make_agent(task, run):
    return Agent()
'''


def _draw(rng, kind: str, mu: float, n: int) -> list[float]:
    if kind == "bernoulli":
        return [float(v) for v in rng.random(n) < mu * 0.5]
    if kind == "constant":
        return [mu] * n
    return [float(v) for v in rng.normal(mu, 0.25, n)]


def _honest_strata(rng, domains=3, tasks=4, runs=3, published=10, fresh=3, kind="normal"):
    pub: dict = {}
    new: dict = {}
    for d in range(domains):
        for t in range(tasks):
            mu = rng.uniform(0, 1)
            for r in range(runs):
                pub.setdefault(f"d{d}", {})[(f"t{t}", r)] = _draw(rng, kind, mu, published)
                new.setdefault(f"d{d}", {})[(f"t{t}", r)] = _draw(rng, kind, mu, fresh)
    return pub, new


def test_honest_agents_fail_the_fresh_seed_test_in_at_most_one_percent_of_entries():
    """Simulated honest entries (published and fresh episodes from one distribution per task and run):
    the share failing is within the stated 1% (at 150 entries, more than 5 has probability under 0.1%
    if the rate is 1%)."""
    rng = np.random.default_rng(2026)
    failed = 0
    for i in range(150):
        kind = ("normal", "bernoulli", "constant")[i % 3]
        gaps = gap_test(*_honest_strata(rng, kind=kind), reps=2000, bootstrap_reps=50, seed=i)
        failed += any(g.significant for g in gaps)
    assert failed <= 5, failed


def test_a_gap_is_found_where_fresh_scores_drop_and_not_where_they_rise():
    rng = np.random.default_rng(3)
    pub, new = _honest_strata(rng)
    for key in pub["d0"]:
        pub["d0"][key] = [1.0] * 10
        new["d0"][key] = [0.0, 0.02, 0.01]
    for key in new["d1"]:
        new["d1"][key] = [v + 0.5 for v in new["d1"][key]]  # better on fresh seeds: no offence
    gaps = {g.domain: g for g in gap_test(pub, new, reps=5000, seed=1)}
    assert gaps["d0"].significant and gaps["d0"].gap > 0.95 and gaps["d0"].interval[0] > 0.9
    assert "d0: mean normalized score 1.000 on the published seeds, 0.010 on fresh ones" in gaps["d0"].reason()
    assert not gaps["d1"].significant and gaps["d1"].gap < 0
    assert gaps["d0"].threshold == pytest.approx(0.005 / 3)


def test_fresh_seeds_are_new_reproducible_from_their_entropy_and_sized_by_the_spread():
    suite = load_suite("v1")
    tasks = suite.select([CARTPOLE, "babyai/*"])
    entropy, seeds = draw_fresh_seeds(tasks, 4)
    assert draw_fresh_seeds(tasks, 4, entropy) == (entropy, seeds)
    assert draw_fresh_seeds(tasks, 4, entropy + 1)[1] != seeds
    for t in tasks:
        assert len(set(seeds[t.id])) == 4 and not set(seeds[t.id]) & set(t.seeds)
    assert {t.id: len(s) for t, s in zip(tasks, draw_fresh_seeds(tasks)[1].values(), strict=True)} == {
        t.id: t.episodes for t in tasks}
    constant = {"d": {("t", r): [0.5] * 10 for r in range(3)}}
    spread = {"d": {("t", r): list(np.linspace(0, 1, 10)) for r in range(3)}}
    assert fresh_episode_count(constant, 10) == FRESH_MIN_EPISODES
    assert fresh_episode_count(spread, 10) == 10 and fresh_episode_count(spread, 40) > 10


@pytest.fixture(scope="module")
def detector_results(tmp_path_factory):
    """The seed detector evaluated on v1's CartPole (3 runs x 10 published seeds)."""
    folder = tmp_path_factory.mktemp("detector")
    seeds = list(load_suite("v1").task(CARTPOLE).seeds)
    agent = folder / "agent.py"
    agent.write_text(DETECTOR.format(seeds=seeds))
    out = folder / "results.json"
    assert main(["evaluate", str(agent), "--suite", "v1", "--tasks", CARTPOLE, "--workers", "1", "--no-progress",
                 "--out", str(out)]) == 0
    return agent, out


def test_a_seed_detecting_agent_reproduces_every_episode_but_fails_the_default_verify(detector_results, capsys):
    agent, results = detector_results
    episodes = json.loads(results.read_text())["episodes"]
    assert all(e["return"] == 500.0 for e in episodes)  # it plays perfectly on the published seeds
    capsys.readouterr()
    code = main(["verify", str(results), "--agent", str(agent), "--seed", "11", "--workers", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "reproduced" in out and "FAILED, published-seed score significantly above the fresh one" in out
    assert "classic: mean normalized score 1.000 on the published seeds" in out
    record, _ = verify(results, agent, seed=11, workers=1, leaderboard=None, progress=False)
    fresh = record["generalization"]
    assert record["matched"] == record["sample"] and not record["passed"] and record["status"] == "failed"
    assert not fresh["passed"] and fresh["domains"][0]["significant"] and fresh["entropy"] == 11
    assert len(fresh["episodes"]) == 3 * fresh["episodes_per_task_run"]  # kept with the verification
    assert all(e["seed"] not in load_suite("v1").task(CARTPOLE).seeds for e in fresh["episodes"])


def test_an_honest_agent_passes_the_fresh_seed_check(tmp_path):
    record, _ = verify(ROOT / "baselines" / "random" / "results-v1.json", ROOT / "examples" / "random_agent.py",
                       seed=3, tasks=[CARTPOLE, "gym/Acrobot-v1"], workers=1, leaderboard=None, progress=False)
    fresh = record["generalization"]
    assert record["passed"] and fresh["passed"] and [d["domain"] for d in fresh["domains"]] == ["classic"]
    assert fresh["episodes_per_task_run"] >= FRESH_MIN_EPISODES


def test_evaluate_fresh_seeds_marks_its_results_and_submit_refuses_them(tmp_path, capsys):
    out = tmp_path / "fresh.json"
    args = ["evaluate", str(ROOT / "examples" / "random_agent.py"), "--suite", "v1", "--tasks", CARTPOLE,
            "--runs", "1", "--episodes", "3", "--workers", "1", "--no-progress", "--out", str(out)]
    assert main([*args, "--fresh-seeds", "42"]) == 0
    assert "cannot be submitted" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["seeds"] == {"kind": "fresh", "entropy": 42} and data["standard"] is False
    assert [e["seed"] for e in data["episodes"]] == list(draw_fresh_seeds(load_suite("v1").select([CARTPOLE]), 3,
                                                                          42)[1][CARTPOLE])
    assert main([*args, "--fresh-seeds"]) == 0  # resumes the journal's draw: nothing new to play
    assert json.loads(out.read_text())["episodes"] == data["episodes"]
    _, problems = check_submission(out)
    assert any(p.where == "seeds" and "fresh seeds" in p.message for p in problems)
    scores = normalized_by_stratum(load_suite("v1"), data["episodes"])
    assert list(scores) == ["classic"] and len(scores["classic"][(CARTPOLE, 0)]) == 3
    published = tmp_path / "published.json"
    assert main([*args[:-1], str(published)]) == 0
    capsys.readouterr()
    assert main(["compare", str(published), str(out), "--reps", "200", "--poi-reps", "200"]) == 0
    text = capsys.readouterr().out
    assert "Published seeds against fresh seeds" in text
    [row] = [line for line in text.splitlines() if " classic " in line and "[" in line and "random" in line]
    assert row.split()[-1] in ("-", "significant")
    assert main(["report", str(published), str(out), "--out", str(tmp_path / "rep"), "--no-plots",
                 "--reps", "200", "--poi-reps", "200"]) == 0
    assert "Published seeds against fresh seeds" in (tmp_path / "rep" / "report.md").read_text()


def test_the_leaderboard_shows_each_entrys_fresh_seed_score_and_gap(tmp_path):
    from polar_bench.leaderboard import build, load_entries
    from polar_bench.leaderboard.entries import record_verification

    board = tmp_path / "lb"
    assert main(["submit", str(ROOT / "baselines" / "random" / "results-v1.json"), "--leaderboard", str(board),
                 "--date", "2026-12-06"]) == 0
    build(board, plots=False)
    squeezed = [" ".join(line.split()) for line in (board / "README.md").read_text().splitlines()]
    assert "| random | — | — | — | — | — | not yet |" in squeezed
    [entry] = load_entries(board)
    domains = [{"domain": "classic", "published": 0.0, "fresh": 0.01, "gap": -0.01, "interval": [-0.03, 0.01],
                "p_value": 0.8, "threshold": 0.002, "significant": False},
               {"domain": "nethack", "published": 0.3, "fresh": 0.05, "gap": 0.25, "interval": [0.2, 0.3],
                "p_value": 5e-5, "threshold": 0.002, "significant": True}]
    record_verification(entry, {"status": "failed", "passed": False, "date": "2026-12-06T00:00:00+00:00",
                                "sample": 0, "episodes": [], "mismatched": 0,
                                "generalization": {"passed": False, "entropy": 5, "episodes_per_task_run": 4,
                                                   "domains": domains}})
    build(board, plots=False)
    readme = (board / "README.md").read_text()
    assert "0.010, gap -0.010 \\[-0.030, +0.010\\]" in readme  # Markdown-escaped
    assert "0.050, gap +0.250 \\[+0.200, +0.300\\] \\*" in readme
    assert "verification: failed (above its fresh-seed score on nethack)" in readme
    assert "4 per task and run" in readme
    site = (board / "site" / "index.html").read_text()
    assert "Fresh seeds: generalisation gap per domain" in site and "0.050, gap +0.250 [+0.200, +0.300] *" in site
    row = json.loads((board / "leaderboard.json").read_text())["boards"][0]["entries"][0]
    assert row["fresh_seeds"]["domains"][1]["significant"] is True
