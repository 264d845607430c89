"""submit, verify, leaderboard build and report of a leaderboard folder, end to end."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from test_leaderboard_fixtures import XSS_NAME, add_verification, make_leaderboard, valid_results, write_json

from polar_bench.cli import main
from polar_bench.leaderboard import RankingOptions, build, check_data, load_entries, submit
from polar_bench.suite import DEFAULT_SUITE

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("POLAR_BENCH_UPDATE_GOLDEN") == "1"
FAST = ["--reps", "500", "--poi-reps", "200"]
RANDOM_RESULTS = ROOT / "baselines" / "random" / "results-v1.json"
RANDOM_AGENT = ROOT / "examples" / "random_agent.py"


def run(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The fixture leaderboard: four synthetic entries, one verified, one that failed verification."""
    board = make_leaderboard(tmp_path_factory.mktemp("lb"))
    add_verification(board, "strong", True)
    add_verification(board, "weak", False)
    build(board, RankingOptions(reps=500, poi_reps=200), plots=True)
    return board


# ---------------------------------------------------------------------------------------------------
# submit


def test_submit_adds_a_content_addressed_entry_and_refuses_resubmission(tmp_path, capsys):
    data = valid_results()
    path = write_json(tmp_path / "results.json", data)
    lb = tmp_path / "lb"
    code, out, _ = run(["submit", path, "--leaderboard", lb, "--date", "2026-03-01"], capsys)
    assert code == 0 and out.startswith("accepted: good is entry ")
    [entry] = load_entries(lb)
    assert (entry.folder / "results.json").read_bytes() == Path(path).read_bytes()
    assert entry.meta["submitted"] == "2026-03-01" and entry.meta["runs"] == 3
    assert entry.verification_status == "unverified"

    code, _, err = run(["submit", path, "--leaderboard", lb], capsys)
    assert code == 2 and f"is already on the leaderboard as entry {entry.id}" in err and len(err.splitlines()) == 1

    reindented = write_json(tmp_path / "again.json", data, indent=3)  # the same content, other bytes
    code, _, err = run(["submit", reindented, "--leaderboard", lb], capsys)
    assert code == 2 and f"entry {entry.id}" in err

    renamed = json.loads(json.dumps(data))
    renamed["agent"]["info"]["name"] = renamed["agent"]["name"] = "good-v2"
    code, _, err = run(["submit", write_json(tmp_path / "renamed.json", renamed), "--leaderboard", lb], capsys)
    assert code == 2 and "has the same episodes as entry" in err
    assert len(load_entries(lb)) == 1


def test_submit_user_errors(tmp_path, capsys):
    code, _, err = run(["submit", tmp_path / "missing.json"], capsys)
    assert code == 2 and "does not exist" in err
    path = write_json(tmp_path / "r.json", valid_results())
    code, _, err = run(["submit", path, "--leaderboard", tmp_path / "lb", "--date", "yesterday"], capsys)
    assert code == 2 and "not a date" in err


# ---------------------------------------------------------------------------------------------------
# build and report


def test_build_ranks_marks_ties_and_escapes(board):
    readme = (board / "README.md").read_text()
    main_table = readme.split("**Fresh seeds")[0]  # the generalisation table follows
    lines = [line for line in main_table.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Rank | Agent ")
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]]
    assert [r[0] for r in rows] == ["1", "1 ≈", "3", "—"]  # tied entries share a rank
    assert [r[1] for r in rows] == ["strong", "close-second", "&lt;script&gt;alert(1)&lt;/script&gt;", "weak"]
    assert [r[-2] for r in rows] == ["10 of 1,770 episodes re-run, 0 of 38 tasks, 2026-02-01", "not verified",
                                     "not verified", "failed (3 of 10 differ)"]
    assert "<script>" not in readme and "failed verification; not ranked" in readme
    for page in (board / "site").glob("*.html"):
        html = page.read_text()
        assert "<script>" not in html and "<img src=x" not in html, page.name
        assert html.count("<script") == 1
    data = json.loads((board / "leaderboard.json").read_text())
    entries = data["boards"][0]["entries"]
    assert [e["rank"] for e in entries] == [1, 1, 3, None]
    assert [e["verdict_vs_above"] for e in entries] == [None, "tied", "better", None]
    assert entries[1]["tied_with_above"] and not entries[2]["tied_with_above"]
    assert entries[2]["above"] == "close-second"  # every adjacent pair, not only against the leader
    low, high = entries[1]["p_above_better"]["low"], entries[1]["p_above_better"]["high"]
    assert low <= 0.5 <= high
    assert entries[2]["p_above_better"]["low"] > 0.5
    assert entries[2]["name"] == XSS_NAME
    plots = sorted(p.name for p in (board / "site" / "plots").glob("*.png"))
    assert {"leaderboard-v1-iqm.png", "leaderboard-v1-profiles.png", "leaderboard-v1-improvement.png",
            "leaderboard-v1-tasks.png", "leaderboard-v1-classic.png"} <= set(plots)
    for page in (board / "site").glob("*.html"):  # nothing is loaded from the network
        for tag in re.findall(r"<(?:script|link|img)\b[^>]*>", page.read_text()):
            assert "//" not in tag, (page.name, tag)


def test_build_is_reproducible(board, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(board / "entries", copy / "entries")
    build(copy, RankingOptions(reps=500, poi_reps=200), plots=False)
    pages = [f"site/{p.name}" for p in (board / "site").glob("entry-*.html")]  # (the others show plots)
    for name in ("README.md", "leaderboard-v1.tex", "leaderboard-v1.csv", "leaderboard.json", *pages):
        assert (copy / name).read_bytes() == (board / name).read_bytes(), name


def test_report_of_a_leaderboard_reproduces_its_table_golden(board, capsys):
    code, out, _ = run(["report", board, "--format", "latex", *FAST], capsys)
    assert code == 0
    assert out == (board / "leaderboard-v1.tex").read_text(), "report reproduces the built table exactly"
    golden = GOLDEN / "leaderboard_v1.tex"
    if UPDATE:
        golden.write_text(out)
    assert golden.is_file(), f"missing {golden}; run with POLAR_BENCH_UPDATE_GOLDEN=1"
    assert out == golden.read_text(), f"the leaderboard table differs from {golden}"
    code, out, _ = run(["report", board, "--format", "markdown", *FAST], capsys)
    assert code == 0 and out == (board / "leaderboard-v1.md").read_text() and out in (board / "README.md").read_text()


def test_report_format_for_results_files(tmp_path, capsys):
    path = write_json(tmp_path / "r.json", valid_results())
    code, out, _ = run(["report", path, "--format", "latex", "--reps", "200"], capsys)
    assert code == 0 and out.startswith("% Generated by polar_bench report") and "\\toprule" in out
    code, _, err = run(["report", path], capsys)
    assert code == 2 and "--out DIR" in err


def test_report_keeps_a_submitted_name_on_one_line_and_literal(tmp_path, capsys):
    """An agent name is the submitter's string: a line break in it ended the LaTeX paragraph inside the
    tabular (the paper stopped compiling) and the Markdown table row."""
    data = valid_results()
    data["agent"]["name"] = "evil\n\nname % \\input{x}"
    path = write_json(tmp_path / "r.json", data)
    code, out, _ = run(["report", path, "--format", "latex", "--reps", "200"], capsys)
    body = out[out.index("\\begin{tabular}"):out.index("\\end{tabular}")]
    assert code == 0 and "\n\n" not in body
    assert "evil  name \\% \\textbackslash{}input\\{x\\}" in body
    code, out, _ = run(["report", path, "--format", "markdown", "--reps", "200"], capsys)
    rows = [line for line in out.splitlines() if "evil" in line]
    assert code == 0 and rows and all(line.startswith("|") and line.endswith("|") for line in rows)


def test_report_csv_keeps_a_submitted_name_from_running_as_a_formula(tmp_path, capsys):
    data = valid_results()
    data["agent"]["name"] = '=HYPERLINK("http://example.org","click")'
    path = write_json(tmp_path / "r.json", data)
    code, out, _ = run(["report", path, "--format", "csv", "--reps", "200"], capsys)
    rows = list(csv.reader(io.StringIO(out)))
    names = {row[rows[0].index("agent")] for row in rows[1:]}
    assert code == 0 and names == {"'" + data["agent"]["name"]}


def test_the_site_draws_a_submitted_name_with_dollar_signs(tmp_path):
    """Matplotlib reads $...$ as mathtext; a submitted name with an unknown command stopped the build."""
    pytest.importorskip("matplotlib")
    from test_leaderboard_fixtures import XSS_INFO, synthetic_results

    name = "evil $\\undefinedcmd{x}$"
    for who, skill in ((name, 0.4), ("plain", 0.2)):
        data = synthetic_results(who, skill, seed=3, info={**XSS_INFO, "name": who})
        submit(write_json(tmp_path / f"{skill}.json", data), tmp_path / "board", date="2026-12-04")
    build(tmp_path / "board", RankingOptions(reps=200, poi_reps=100), plots=True)
    assert list((tmp_path / "board" / "site").rglob("*.png"))


def test_committed_leaderboard_is_consistent(capsys):
    """leaderboard/ holds the baselines; its tables are what `report leaderboard/` computes now."""
    board = ROOT / "leaderboard"
    entries = load_entries(board)
    names = {e.name for e in entries}
    assert {"random", "ppo"} <= names and any(n.startswith("llm+ppo") for n in names)
    assert any(n.startswith("codegen") for n in names)  # the four baselines are the first entries
    assert all(e.verifications() and e.verifications()[-1]["passed"] for e in entries)
    code, out, _ = run(["report", board, "--format", "latex"], capsys)
    order = sorted(("v1", "v2"), key=lambda suite: suite != DEFAULT_SUITE)  # the default suite first
    tables = [(board / f"leaderboard-{suite}.tex").read_text() for suite in order]
    assert code == 0 and out == "\n".join(tables)  # one table per suite, in order
    assert (board / "site" / "index.html").is_file() and (ROOT / "docs" / "leaderboard.png").is_file()


def test_the_default_suite_opens_the_leaderboard(monkeypatch):
    """The board of `DEFAULT_SUITE` comes first (README, report and site open on it), whatever its name."""
    from polar_bench.leaderboard import ranking

    entries = load_entries(ROOT / "leaderboard")
    for default, order in (("v1", ["v1", "v2"]), ("v2", ["v2", "v1"])):
        monkeypatch.setattr(ranking, "DEFAULT_SUITE", default)
        boards = ranking.rank_entries(entries, RankingOptions(reps=50, poi_reps=50))
        assert [b.suite["name"] for b in boards] == order


def test_every_committed_entry_passes_todays_checks():
    """A check added later (the episode bounds, say) must not leave entries on the board that it
    would reject: every committed results file passes every check of this code."""
    entries = sorted((ROOT / "leaderboard" / "entries").glob("*/results.json"))
    assert len(entries) >= 5
    for results in entries:
        problems = check_data(json.loads(results.read_text()))
        assert problems == [], f"{results.parent.name}: {problems[:3]}"


def test_every_committed_entry_can_be_verified_with_a_file_of_this_repository():
    """`verify` needs the exact agent file an entry was evaluated with: a baseline's agent.py that has
    changed since keeps its entry's version beside it (agent_<id>.py), byte for byte."""
    import hashlib

    ours = {}
    for path in [*(ROOT / "baselines").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]:
        ours.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), []).append(path)
    entries = sorted((ROOT / "leaderboard" / "entries").glob("*/results.json"))
    assert len(entries) >= 5
    for results in entries:
        agent = json.loads(results.read_text())["agent"]
        assert agent["sha256"] in ours, f"{results.parent.name}: no file here has the SHA-256 of {agent['path']}"


# ---------------------------------------------------------------------------------------------------
# verify


@pytest.fixture()
def random_board(tmp_path):
    lb = tmp_path / "lb"
    assert main(["submit", str(RANDOM_RESULTS), "--leaderboard", str(lb), "--date", "2026-12-02"]) == 0
    return lb


def test_verify_reproduces_the_random_baseline_exactly(random_board, capsys):
    code, out, _ = run(["verify", RANDOM_RESULTS, "--agent", RANDOM_AGENT, "--sample", 3, "--allow-weaker",
                        "--seed", 0, "--tasks", "gym/*", "--workers", 1, "--leaderboard", random_board,
                        "--no-progress"], capsys)
    assert code == 0, out
    [entry] = load_entries(random_board)
    [record] = entry.verifications()
    n = len(record["episodes"])  # 3 drawn uniformly, plus one of each gym task they missed
    assert f"verified: {n} of {n} sampled episodes (of 120; 4 of 38 tasks) reproduced ({n} by exact)" in out
    assert record["passed"] and record["mode"] == "exact" and 4 <= n <= 6 and record["uniform"] == 3
    assert all(r["rerun_return"] == r["submitted_return"] for r in record["episodes"])
    assert entry.verification_status == "verified"


def test_verify_detects_tampered_returns(tmp_path, capsys):
    data = json.loads(RANDOM_RESULTS.read_text())
    for ep in data["episodes"]:
        if ep["task"] == "gym/CartPole-v1":  # claims better returns than the agent gets, and so that the
            ep["return"] += 50.0                # bounds check cannot tell (CartPole pays 1 a step), longer
            ep["length"] += 50                  # episodes: only a re-run finds it
    path = write_json(tmp_path / "tampered.json", data)
    lb = tmp_path / "lb"
    assert main(["submit", path, "--leaderboard", str(lb)]) == 0
    capsys.readouterr()
    code, out, _ = run(["verify", path, "--agent", RANDOM_AGENT, "--sample", 2, "--allow-weaker",
                        "--tasks", "gym/CartPole-v1", "--workers", 1, "--leaderboard", lb, "--no-progress"], capsys)
    assert code == 1 and "FAILED: 0 of 2" in out and "mismatch: gym/CartPole-v1" in out
    [entry] = load_entries(lb)
    assert entry.verification_status == "failed"


def test_verify_user_errors(tmp_path, capsys):
    other = tmp_path / "agent.py"
    other.write_text(RANDOM_AGENT.read_text() + "\n# edited\n")
    code, _, err = run(["verify", RANDOM_RESULTS, "--agent", other, "--sample", 1], capsys)
    assert code == 2 and "is not the agent file that was evaluated" in err
    code, _, err = run(["verify", RANDOM_RESULTS, "--agent", RANDOM_AGENT, "--sample", 0], capsys)
    assert code == 2 and "--sample must be at least 1" in err
    code, _, err = run(["verify", RANDOM_RESULTS, "--agent", RANDOM_AGENT, "--sample", 1], capsys)
    assert code == 2 and "--sample 1 is below the 88 episodes" in err and len(err.splitlines()) == 1
    code, _, err = run(["verify", RANDOM_RESULTS, "--agent", RANDOM_AGENT, "--tasks", "nope/*"], capsys)
    assert code == 2 and "no successful episode" in err


def test_llm_tokens_spent_before_the_evaluation_are_shown_beside_the_per_episode_ones(tmp_path, capsys):
    """A code-generation agent's LLM runs only in its search: 0 per episode, the search's tokens beside."""
    data = valid_results("searcher", llm=True)
    for e in data["episodes"]:
        e["llm"] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
    data["agent"]["info"]["llm"]["search_tokens"] = 585_281
    plain = valid_results("plain", seed=2)
    lb = tmp_path / "lb"
    for name, d in (("searcher", data), ("plain", plain)):
        assert main(["submit", write_json(tmp_path / f"{name}.json", d), "--leaderboard", str(lb),
                     "--date", "2026-12-02"]) == 0
    build(lb, RankingOptions(reps=200, poi_reps=100), plots=False)
    rows = {r.split("|")[2].strip(): [c.strip() for c in r.split("|")[1:-1]]
            for r in (lb / "README.md").read_text().splitlines() if r.startswith("| ") and "---" not in r}
    assert rows["searcher"][-3] == "0 + 585k before" and rows["plain"][-3] == "—"
    assert "spent before the evaluation" in (lb / "README.md").read_text()
    entries = {e["agent"]: e for e in json.loads((lb / "leaderboard.json").read_text())["boards"][0]["entries"]}
    assert entries["searcher"]["llm_tokens_before_evaluation"] == 585_281
    assert entries["searcher"]["llm_tokens_per_episode"] == 0
    assert entries["plain"]["llm_tokens_before_evaluation"] is None


def test_verification_display_a_failure_stays_and_not_verifiable_is_shown():
    from polar_bench.leaderboard.ranking import verification

    passed = {"passed": True, "sample": 92, "population": 1770, "date": "2026-12-03T08:00:00+00:00",
              "episodes": [{"task": "gym/CartPole-v1"}, {"task": "dmc/cheetah-run"}]}
    failed = {"passed": False, "sample": 92, "mismatched": 3, "date": "2026-12-02T08:00:00+00:00", "episodes": []}
    unverifiable = {"status": "not_verifiable", "reason": "checkpoints/x/run0.pt is missing"}
    assert verification([], 38).text == "not verified"
    assert verification([passed], 38).text == "92 of 1,770 episodes re-run, 2 of 38 tasks, 2026-12-03"
    assert verification([failed, passed], 38).text == "failed (3 of 92 differ)"  # a later pass does not clear it
    got = verification([passed, unverifiable], 38)
    assert (got.status, got.text) == ("not_verifiable", "not verifiable")
    assert got.detail == "checkpoints/x/run0.pt is missing"


def test_atari100k_domain_page_lists_the_published_runs_unranked(tmp_path):
    from types import SimpleNamespace

    from test_scoring_commands import _atari_results

    from polar_bench import analysis
    from polar_bench.leaderboard import site
    from polar_bench.leaderboard.ranking import Board, Row

    data = _atari_results("mine", 0.25)
    agent = analysis.agent_scores(data)
    options = RankingOptions(reps=2000, poi_reps=200)
    entry = SimpleNamespace(id="mine-1")  # the domain page links each entry to its page
    row = Row(entry=entry, agent=agent, info={}, scopes=analysis.aggregate(agent, ["iqm"], reps=2000), rank=1)
    board = Board(suite={"name": "v2", "version": "2.0.0"}, domains=["atari100k"], rows=[row], options=options)
    table = site.published_table(board, "atari100k")
    assert table is not None
    assert [r[0] for r in table.rows][:2] == ["SPR (published, not re-run)", "DrQ(ε) (published, not re-run)"]
    assert len(table.rows) == 7 and table.rows[0][1] == 100
    assert round(table.rows[0][2].point, 3) == 0.337  # SPR's IQM, as Agarwal et al. 2021 publish it
    assert "nobody re-ran these agents here" in " ".join(table.notes)
    page = site._domain_page_html((board,), board, "atari100k", {})
    assert "<h2>Published, not re-run</h2>" in page and "SPR (published, not re-run)</td>" in page

    data["suite"]["tasks"][0]["high"] += 1.0  # other references: the published runs would not be comparable
    other = analysis.agent_scores(data)
    board.rows[0] = Row(entry=entry, agent=other, info={}, scopes=row.scopes, rank=1)
    assert site.published_table(board, "atari100k") is None
    assert site.published_table(board, "classic") is None


def test_a_shared_name_is_told_apart_only_within_one_suite(tmp_path):
    """The random agent on v1 and on v2 is on two boards, named plainly on each; two entries of one
    suite with one name get their entry ids."""
    from polar_bench.leaderboard.entries import Entry
    from polar_bench.leaderboard.ranking import _labels

    def entry(i: str, suite: str) -> Entry:
        return Entry(i * 16, tmp_path, {"agent": {"name": "random"}, "suite": {"hash": suite}})

    labels = _labels([entry("a", "v1"), entry("b", "v2"), entry("c", "v2")])
    assert labels == {"a" * 16: "random", "b" * 16: "random (bbbbbb)", "c" * 16: "random (cccccc)"}
