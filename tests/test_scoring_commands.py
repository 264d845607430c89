"""The `score`, `compare` and `report` commands end to end on crafted results files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polar_bench import analysis
from polar_bench.cli import main
from polar_bench.results import read_results

FAST = ["--reps", "500", "--seed", "3"]


def make_results(name: str, scores: dict[str, np.ndarray], *, domains: dict[str, str] | None = None,
                 low: float = 0.0, high: float = 100.0, refs: dict[str, tuple[float, float]] | None = None,
                 status: dict[tuple[str, int, int], str] | None = None, drop: set | None = None,
                 llm: bool = False, training_steps: int | None = None, suite: str = "unit") -> dict:
    """A valid results dict. ``scores[task]`` has shape (runs, episodes) of raw returns; ``status``
    marks (task, run, index) episodes as failed; ``drop`` removes (task, run, index) episodes."""
    status, drop, refs = status or {}, drop or set(), refs or {}
    tasks, episodes = [], []
    runs = next(iter(scores.values())).shape[0]
    for tid, returns in scores.items():
        lo, hi = refs.get(tid, (low, high))
        n_ep = returns.shape[1]
        tasks.append({"id": tid, "domain": (domains or {}).get(tid, "classic"), "low": lo, "high": hi,
                      "episodes": n_ep, "seeds": list(range(100, 100 + n_ep))})
        for r in range(runs):
            for i in range(n_ep):
                if (tid, r, i) in drop:
                    continue
                st = status.get((tid, r, i), "ok")
                ep = {"task": tid, "run": r, "index": i, "seed": 100 + i,
                      "return": float(returns[r, i]) if st == "ok" else None, "length": 10, "status": st,
                      "error": None if st == "ok" else f"Traceback...\nRuntimeError: boom in {tid}",
                      "wall_seconds": 0.5, "agent_seconds": 0.25}
                if llm:
                    ep["llm"] = {"calls": 3, "prompt_tokens": 300, "completion_tokens": 30, "seconds": 1.5}
                episodes.append(ep)
    info = {"name": name}
    if training_steps is not None:
        info["training_steps"] = training_steps
    return {
        "format_version": 1,
        "polar_bench": {"version": "0.1.0", "git_commit": None, "git_dirty": None},
        "suite": {"name": suite, "version": "1", "hash": "sha256:" + "0" * 64, "seed": 0, "pins": {},
                  "tasks": tasks},
        "agent": {"path": f"/agents/{name}.py", "sha256": "a" * 64, "name": name, "info": info},
        "config": {"runs": runs, "episodes_override": None, "tasks": list(scores)},
        "environment": {"python": "3.11"}, "command": "test", "started": "2025-01-01T00:00:00+00:00",
        "finished": "2025-01-01T00:01:00+00:00", "comparable": True, "standard": True,
        "episodes": episodes,
    }


def write_results(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def two_domains(seed: int, shift: float = 0.0, runs: int = 5, episodes: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t: rng.uniform(20, 80, size=(runs, episodes)) + shift
            for t in ("gym/A-v0", "gym/B-v0", "gym/C-v0", "dmc/d-run", "dmc/e-run")}


DOMAINS = {"gym/A-v0": "classic", "gym/B-v0": "classic", "gym/C-v0": "classic",
           "dmc/d-run": "control", "dmc/e-run": "control"}


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path):
    a = write_results(tmp_path / "a.json", make_results("ppo", two_domains(0, 10.0), domains=DOMAINS, llm=True))
    b = write_results(tmp_path / "b.json", make_results("dqn", two_domains(1), domains=DOMAINS))
    return a, b


def test_results_files_are_valid(files):
    for f in files:
        read_results(f)


def test_score_text(files, capsys):
    code, out, err = run(["score", files[0], *FAST], capsys)
    assert code == 0, err
    assert "Aggregate normalized scores of ppo" in out
    for word in ("classic", "control", "overall", "IQM", "Optimality gap", "gym/A-v0", "Per-task scores",
                 "Episodes: all 75 ok", "LLM usage per episode (75 episodes): 3.0 calls, 300 prompt tokens",
                 "each domain weighted equally", "500 replicates"):
        assert word in out, word


def test_score_json_matches_engine(files, capsys):
    code, out, _ = run(["score", files[0], "--json", *FAST], capsys)
    assert code == 0
    data = json.loads(out)
    scopes = {s["scope"]: s for s in data["aggregates"]}
    assert set(scopes) == {"classic", "control", "overall"}
    agent = analysis.agent_scores(files[0])
    m = agent.domain_entry("classic").scores
    assert m.shape == (5, 3)
    from polar_bench import scoring
    assert scopes["classic"]["metrics"]["iqm"]["point"] == scoring.iqm(m)
    # overall = equal-weight mean of the per-domain point estimates
    both = [scoring.iqm(agent.domain_entry(d).scores) for d in ("classic", "control")]
    assert scopes["overall"]["metrics"]["iqm"]["point"] == pytest.approx(np.mean(both), abs=1e-15)
    assert data["llm"]["per_episode"]["calls"] == 3
    assert data["statistics"]["reps"] == 500 and data["evaluation_noise_only"] is False
    assert len(data["tasks"]) == 5 and data["errors"]["counts"]["ok"] == 75


def test_score_is_deterministic(files, capsys):
    outs = [run(["score", files[0], "--json", *FAST], capsys)[1] for _ in range(2)]
    assert outs[0] == outs[1]
    other = run(["score", files[0], "--json", "--reps", "500", "--seed", "4"], capsys)[1]
    assert other != outs[0]


def test_normalization_and_per_task(tmp_path, capsys):
    scores = {"gym/A-v0": np.array([[10.0, 30.0], [50.0, 70.0]])}
    f = write_results(tmp_path / "r.json", make_results("x", scores, refs={"gym/A-v0": (10.0, 110.0)}))
    agent = analysis.agent_scores(f)
    np.testing.assert_allclose(agent.task("gym/A-v0").run_scores, [0.1, 0.5])
    row = analysis.task_rows(agent)[0]
    assert row["mean"] == pytest.approx(0.3) and row["mean_return"] == pytest.approx(40.0)


def test_incomplete_domain_needs_the_flag(tmp_path, capsys):
    scores = two_domains(0)
    data = make_results("x", scores, domains=DOMAINS, status={("gym/A-v0", 1, 2): "agent_error"},
                        drop={("gym/B-v0", 0, 0)})
    f = write_results(tmp_path / "r.json", data)
    code, out, err = run(["score", f, "--json", *FAST], capsys)
    assert code == 0, err
    js = json.loads(out)
    scopes = {s["scope"]: s for s in js["aggregates"]}
    assert scopes["classic"]["metrics"] == {} and not scopes["classic"]["complete"]
    assert "2 of 45 episodes errored or missing" in scopes["classic"]["note"]
    assert scopes["control"]["metrics"]["iqm"]["point"] is not None
    assert scopes["overall"]["metrics"] == {} and "incomplete domain(s) classic" in scopes["overall"]["note"]
    assert js["errors"]["counts"]["agent_error"] == 1 and js["errors"]["counts"]["missing"] == 1
    text = run(["score", f, *FAST], capsys)[1]
    assert "--allow-incomplete" in text and "1 agent_error, 1 missing" in text
    assert "RuntimeError: boom in gym/A-v0" in text

    code, out, _ = run(["score", f, "--json", "--allow-incomplete", *FAST], capsys)
    scopes = {s["scope"]: s for s in json.loads(out)["aggregates"]}
    assert scopes["classic"]["metrics"]["iqm"]["point"] is not None
    assert scopes["overall"]["metrics"]["iqm"]["point"] is not None
    # the errored episode is left out of its run's mean, not counted as zero
    agent = analysis.agent_scores(f)
    a = agent.task("gym/A-v0")
    expected = np.mean((scores["gym/A-v0"][1, :2] - 0.0) / 100.0)
    assert a.run_scores[1] == pytest.approx(expected)
    text = run(["score", f, "--allow-incomplete", *FAST], capsys)[1]
    assert "classic*" in text and "* incomplete" in text


def test_task_without_successful_run_is_left_out(tmp_path):
    scores = two_domains(0, runs=3, episodes=1)
    data = make_results("x", scores, domains=DOMAINS, status={("gym/C-v0", 2, 0): "timeout"})
    agent = analysis.agent_scores(data)
    entry = agent.domain_entry("classic", allow_incomplete=True)
    assert entry.excluded == ("gym/C-v0",) and entry.scores.shape == (3, 2)
    assert "left out" in entry.note
    scopes = analysis.aggregate(agent, reps=200, allow_incomplete=True)
    assert scopes[0].tasks == 2 and scopes[-1].tasks == 4


def test_one_run_bootstraps_episodes(tmp_path, capsys):
    f = write_results(tmp_path / "r.json", make_results("solo", two_domains(0, runs=1, episodes=5),
                                                        domains=DOMAINS))
    code, out, _ = run(["score", f, "--json", *FAST], capsys)
    js = json.loads(out)
    assert js["evaluation_noise_only"] is True
    assert {s["resampled"] for s in js["aggregates"]} == {"episodes (evaluation noise only)"}
    iqm = js["aggregates"][0]["metrics"]["iqm"]
    assert iqm["low"] < iqm["point"] < iqm["high"]
    text = run(["score", f, *FAST], capsys)[1]
    assert "evaluation noise only" in text and "classic†" in text


def test_compare(files, capsys):
    code, out, err = run(["compare", *files, *FAST, "--poi-reps", "300"], capsys)
    assert code == 0, err
    assert "side by side" in out and "Probability of improvement" in out
    assert "ppo" in out and "dqn" in out
    code, out, _ = run(["compare", *files, "--json", *FAST, "--poi-reps", "300"], capsys)
    js = json.loads(out)
    (pair,) = js["probability_of_improvement"]
    assert (pair["x"], pair["y"]) == ("ppo", "dqn")
    overall = next(s for s in pair["scopes"] if s["scope"] == "overall")["metrics"]["probability_of_improvement"]
    assert 0.5 < overall["point"] <= 1 and overall["low"] <= overall["point"] <= overall["high"]


def test_compare_same_name_gets_file_names(tmp_path, capsys):
    a = write_results(tmp_path / "one.json", make_results("ppo", two_domains(0), domains=DOMAINS))
    b = write_results(tmp_path / "two.json", make_results("ppo", two_domains(1), domains=DOMAINS))
    code, out, _ = run(["compare", a, b, "--json", *FAST, "--poi-reps", "100"], capsys)
    assert [x["agent"] for x in json.loads(out)["agents"]] == ["ppo (one.json)", "ppo (two.json)"]


@pytest.mark.parametrize("case", ["missing", "not json", "not results", "schema", "one file",
                                  "different tasks", "different refs", "bad confidence", "bad reps",
                                  "unknown task", "out is a file"])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, case):
    good = write_results(tmp_path / "good.json", make_results("a", two_domains(0), domains=DOMAINS))
    bad = tmp_path / "bad.json"
    command = "score"
    extra: list[str] = []
    needle = ""
    if case == "missing":
        args, needle = [str(tmp_path / "nope.json")], "does not exist"
    elif case == "not json":
        bad.write_text("{not json")
        args, needle = [str(bad)], "not valid JSON"
    elif case == "not results":
        bad.write_text("[1, 2]")
        args, needle = [str(bad)], "JSON object"
    elif case == "schema":
        d = make_results("a", two_domains(0))
        del d["episodes"]
        bad.write_text(json.dumps(d))
        args, needle = [str(bad)], "episodes"
    elif case == "one file":
        command, args, needle = "compare", [good], "at least 2"
    elif case == "different tasks":
        other = make_results("b", {"gym/A-v0": np.ones((5, 3))})
        command, args, needle = "compare", [good, write_results(bad, other)], "different tasks"
    elif case == "different refs":
        other = make_results("b", two_domains(1), domains=DOMAINS, refs={"gym/A-v0": (0.0, 50.0)})
        command, args, needle = "compare", [good, write_results(bad, other)], "not comparable"
    elif case == "bad confidence":
        args, extra, needle = [good], ["--confidence", "1.5"], "--confidence"
    elif case == "bad reps":
        args, extra, needle = [good], ["--reps", "0"], "--reps"
    elif case == "unknown task":
        d = make_results("a", two_domains(0), domains=DOMAINS)
        d["episodes"][0]["task"] = "gym/Z-v0"
        args, needle = [write_results(bad, d)], "does not list"
    elif case == "out is a file":
        (tmp_path / "file").write_text("x")
        command, args, extra, needle = "report", [good], ["--out", str(tmp_path / "file"), "--no-plots"], \
            "not a folder"
    code, out, err = run([command, *args, *extra], capsys)
    assert code == 2, (case, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err


def test_report_tables_and_plots(tmp_path, capsys):
    a = write_results(tmp_path / "a.json", make_results("ppo", two_domains(0, 10.0), domains=DOMAINS))
    b = write_results(tmp_path / "b.json", make_results("dqn", two_domains(1), domains=DOMAINS))
    out = tmp_path / "out"
    args = ["report", a, b, "--out", str(out), *FAST, "--poi-reps", "200", "--profile-reps", "100"]
    code, stdout, err = run(args, capsys)
    assert code == 0, err
    for name in ("aggregates", "per_task", "probability_of_improvement"):
        for ext in ("md", "tex", "csv"):
            assert (out / "tables" / f"{name}.{ext}").is_file(), (name, ext)
    for name in ("aggregates", "performance_profiles", "probability_of_improvement", "task_scores"):
        for ext in ("png", "pdf"):
            assert (out / "plots" / f"{name}.{ext}").stat().st_size > 1000
    tex = (out / "tables" / "aggregates.tex").read_text()
    assert "\\toprule" in tex and "\\textbf{" in tex and "\\scriptsize[" in tex
    md = (out / "report.md").read_text()
    assert "![performance profiles](plots/performance_profiles.png)" in md
    csv = (out / "tables" / "aggregates.csv").read_text().splitlines()
    assert csv[0] == "domain,agent,iqm,iqm_low,iqm_high,mean,mean_low,mean_high,median,median_low," \
                     "median_high,optimality_gap,optimality_gap_low,optimality_gap_high"
    assert len(csv) == 1 + 3 * 2
    # the same input gives byte-identical tables and PDFs
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    out2 = tmp_path / "out2"
    run(["report", a, b, "--out", str(out2), *FAST, "--poi-reps", "200", "--profile-reps", "100"], capsys)
    second = {p.relative_to(out2): p.read_bytes() for p in out2.rglob("*") if p.is_file()}
    assert first.keys() == second.keys()
    for key in first:
        if key.suffix in (".md", ".tex", ".csv", ".json", ".pdf", ".png"):
            assert first[key] == second[key], key


def test_plots_of_long_agent_names_keep_their_axes(tmp_path, capsys):
    """A legend or row labels of long agent names once squeezed the axes to nothing (matplotlib's
    "constrained_layout not applied" warning and a cut-off legend): they now wrap or go below."""
    import warnings

    long_a = "codegen (SmolLM2-135M-Instruct Q4_1, sandboxed program search)"
    long_b = "llm+ppo (SmolLM2-135M-Instruct planner, PPO skills)"
    a = write_results(tmp_path / "a.json", make_results(long_a, two_domains(0, 10.0), domains=DOMAINS))
    b = write_results(tmp_path / "b.json", make_results(long_b, two_domains(1), domains=DOMAINS))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*constrained_layout not applied.*")
        code, _, err = run(["report", a, b, "--out", str(tmp_path / "out"), *FAST, "--poi-reps", "100",
                            "--profile-reps", "50"], capsys)
    assert code == 0, err
    from polar_bench import report
    profile, _ = analysis.profiles([analysis.agent_scores(a), analysis.agent_scores(b)], reps=50, seed=0)
    ax = report.plot_performance_profile(profile)
    fig = ax.figure
    fig.canvas.draw()
    box = ax.get_window_extent()
    assert box.width > 0.5 * fig.bbox.width and box.height > 0.4 * fig.bbox.height
    legend = fig.legends[0].get_window_extent()
    assert legend.x0 >= 0 and legend.x1 <= fig.bbox.width and legend.y1 <= box.y0  # whole, below the axes


def test_plots_show_dollar_signs_in_agent_names_as_written(tmp_path, capsys):
    """Matplotlib reads $...$ as mathtext: an agent name such as "$\\undefinedcmd$" (a submitter's
    string) stopped report with a traceback. Every text is drawn as written now."""
    pytest.importorskip("matplotlib")
    a = write_results(tmp_path / "a.json", make_results("evil $\\undefinedcmd{x}$", two_domains(0, 10.0),
                                                        domains=DOMAINS))
    b = write_results(tmp_path / "b.json", make_results("price: $5 or $6", two_domains(1), domains=DOMAINS))
    out = tmp_path / "out"
    code, _, err = run(["report", a, b, "--out", str(out), *FAST, "--poi-reps", "100", "--profile-reps", "50"],
                       capsys)
    assert code == 0, err
    assert {p.name for p in (out / "plots").glob("*.png")} >= {"aggregates.png", "performance_profiles.png",
                                                               "probability_of_improvement.png", "task_scores.png"}


def test_report_sample_efficiency(tmp_path, capsys):
    files = [write_results(tmp_path / f"ppo_{k}.json",
                           make_results("ppo", two_domains(k, 10.0 * k), domains=DOMAINS, training_steps=k * 10**5))
             for k in (1, 2, 3)]
    files.append(write_results(tmp_path / "dqn.json", make_results("dqn", two_domains(7), domains=DOMAINS)))
    out = tmp_path / "out"
    code, _, err = run(["report", *files, "--out", str(out), *FAST, "--poi-reps", "100",
                        "--profile-reps", "50"], capsys)
    assert code == 0, err
    csv = (out / "tables" / "sample_efficiency.csv").read_text().splitlines()
    assert csv[0] == "agent,training_steps,iqm,iqm_low,iqm_high"
    assert [line.split(",")[1] for line in csv[1:]] == ["100000", "200000", "300000"]
    assert (out / "plots" / "sample_efficiency.png").is_file()
    # the tables use the largest budget under the plain agent name
    agg = (out / "tables" / "aggregates.csv").read_text()
    assert "classic,ppo," in agg and "@" not in agg


def test_report_without_matplotlib(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    a = write_results(tmp_path / "a.json", make_results("ppo", two_domains(0), domains=DOMAINS))
    code, _, err = run(["report", a, "--out", str(tmp_path / "out"), *FAST], capsys)
    assert code == 2 and 'pip install "polar_bench[plot]"' in err
    code, _, err = run(["report", a, "--out", str(tmp_path / "out"), "--no-plots", *FAST], capsys)
    assert code == 0, err


def test_domains_restrict_scores_and_comparisons_to_shared_domains(tmp_path, capsys):
    """Agents evaluated on different tasks compare on the domains they share with --domains."""
    full = make_results("full", two_domains(1), domains=DOMAINS)
    partial_scores = {t: v for t, v in two_domains(2).items() if DOMAINS[t] == "classic"}
    partial = make_results("partial", partial_scores, domains=DOMAINS)
    partial["suite"]["tasks"] = full["suite"]["tasks"]          # same suite, control never played
    a = write_results(tmp_path / "full.json", full)
    b = write_results(tmp_path / "partial.json", partial)
    code, out, _ = run(["compare", a, b, *FAST, "--poi-reps", "200"], capsys)
    assert code == 0 and "control" in out and "missing" in out    # partial's control: all missing
    code, out, err = run(["compare", a, b, *FAST, "--poi-reps", "200", "--domains", "classic"], capsys)
    assert code == 0, err
    assert "only the domains classic" in out and "control" not in out
    code, out, _ = run(["score", a, *FAST, "--json", "--domains", "classic"], capsys)
    data = json.loads(out)
    assert [t["task"] for t in data["tasks"]] == ["gym/A-v0", "gym/B-v0", "gym/C-v0"]
    assert data["standard"] is False
    code, _, err = run(["score", a, *FAST, "--domains", "nethack"], capsys)
    assert code == 2 and "no domain 'nethack'" in err and "classic, control" in err and "\n" not in err.strip()


def test_a_task_scored_by_success_reads_the_harness_record_not_the_return(tmp_path, capsys):
    from polar_bench.analysis import agent_scores, episode_value
    from polar_bench.errors import ResultsError

    returns = np.full((2, 4), -5.0)  # the step penalty: the same return whether or not the goal was reached
    data = make_results("stairs", {"nethack/Staircase": returns}, refs={"nethack/Staircase": (0.0, 1.0)})
    data["suite"]["tasks"][0]["metric"] = "success"
    wins = {(0, 0), (0, 1), (1, 3)}
    for ep in data["episodes"]:
        ep["harness"] = {"end_status": "x", "success": (ep["run"], ep["index"]) in wins, "depth": 1}
    path = write_results(tmp_path / "stairs.json", data)
    assert run(["validate", path], capsys)[0] == 0
    scores = agent_scores(path)
    assert scores.tasks[0].run_scores.tolist() == [0.5, 0.25]
    assert episode_value({"return": 3.0}, "return") == 3.0
    assert episode_value({"return": 3.0, "harness": {"depth": 4}}, "depth") == 4.0

    del data["episodes"][2]["harness"]  # a forged or outdated file: the value the task is scored by is absent
    with pytest.raises(ResultsError, match="scored by its success, but its record has no harness.success"):
        agent_scores(data)
    # a success is true or false: a number (1000 would score 1000 times a success) or a string is refused
    for forged in (1000, 1, "yes", float("nan")):
        data["episodes"][2]["harness"] = {"success": forged}
        with pytest.raises(ResultsError, match=f"harness.success is {forged!r}, not true or false"):
            agent_scores(data)
    for depth in (0, 2.5, True):
        with pytest.raises(ResultsError, match="not a dungeon level, an integer of at least 1"):
            episode_value({"return": 3.0, "harness": {"depth": depth}}, "depth")
    data["suite"]["tasks"][0]["metric"] = "luck"
    with pytest.raises(ResultsError, match="suite/tasks/0/metric: 'luck' is not one of"):  # the schema says so
        agent_scores(data)


def _atari_results(name: str, shift: float) -> dict:
    from polar_bench.published import ATARI100K

    games, low, high = ATARI100K.references()
    rng = np.random.default_rng(3)
    scores, refs, domains = {}, {}, {}
    for g, lo, hi in zip(games, low, high, strict=True):
        tid = f"atari/{g}"
        scores[tid] = lo + (hi - lo) * (shift + 0.05 * rng.standard_normal((3, 2)))
        refs[tid], domains[tid] = (float(lo), float(hi)), "atari100k"
    return make_results(name, scores, refs=refs, domains=domains, suite="v2")


def test_compare_beside_published_atari100k_runs(tmp_path, capsys):
    path = write_results(tmp_path / "mine.json", _atari_results("mine", 0.25))
    code, out, err = run(["compare", path, "--published", "atari100k", "--json", "--reps", "2000",
                          "--poi-reps", "500"], capsys)
    assert code == 0, err
    data = json.loads(out)
    labels = [a["agent"] for a in data["agents"]]
    assert labels[0] == "mine" and "SPR (published, not re-run)" in labels and len(labels) == 8
    spr = next(a for a in data["agents"] if a["agent"].startswith("SPR"))
    overall = next(s for s in spr["aggregates"] if s["scope"] == "atari100k")
    assert round(overall["metrics"]["iqm"]["point"], 3) == 0.337  # the paper's SPR IQM (Agarwal et al. 2021)
    # Every published entry against ours, none among themselves (that is the paper's own table).
    assert len(data["probability_of_improvement"]) == 7
    assert all(p["x"] == "mine" or p["y"] == "mine" for p in data["probability_of_improvement"])
    assert any("published, not re-run" in n for n in data["notes"])

    other = write_results(tmp_path / "classic.json", make_results("c", {"gym/CartPole-v1": np.ones((3, 2))}))
    code, _, err = run(["compare", other, "--published", "atari100k"], capsys)
    assert code == 2 and "needs results with the atari100k domain" in err and len(err.strip().splitlines()) == 1
