"""Small user-facing lines a newcomer meets first: suggestions, release status, quiet progress."""

from __future__ import annotations

from pathlib import Path

from polar_bench.cli import main
from polar_bench.results import read_results

ROOT = Path(__file__).resolve().parent.parent


def test_a_misspelt_task_gets_the_closest_ids(capsys):
    assert main(["evaluate", str(ROOT / "examples" / "random_agent.py"), "--suite", "v1",
                 "--tasks", "gym/CartPol-v1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Did you mean: gym/CartPole-v1" in err


def test_describe_says_whether_a_suite_is_released(capsys, tmp_path):
    assert main(["describe", "v1"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "suite v1 version 1.0.0 (released 2026-12-02)"
    assert main(["describe", "v2"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "suite v2 version 2.0.0 (released; its file gives no date)"
    draft = tmp_path / "draft.toml"
    draft.write_text((ROOT / "polar_bench" / "suites" / "v1.toml").read_text().replace('version = "1.0.0"',
                                                                                        'version = "1.0.1"'))
    assert main(["describe", str(draft)]) == 0
    assert "(not released: a suite file outside polar_bench)" in capsys.readouterr().out.splitlines()[0]


def test_no_progress_prints_no_progress_lines(capsys, tmp_path):
    args = ["evaluate", str(ROOT / "examples" / "random_agent.py"), "--suite", "v1", "--tasks", "gym/CartPole-v1",
            "--runs", "1", "--episodes", "2", "--workers", "1", "--out", str(tmp_path / "r.json")]
    assert main([*args, "--no-progress"]) == 0
    assert "episodes, 0 errors" not in capsys.readouterr().err
    (tmp_path / "r.json").unlink()
    (tmp_path / "r.episodes.jsonl").unlink()
    assert main(args) == 0  # not a terminal: a plain line
    assert "[polar_bench] 2/2 episodes, 0 errors" in capsys.readouterr().err


def test_evaluate_names_its_failures_by_cause_and_the_command_that_shows_them(capsys, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text("def make_agent(task, run):\n    return Bad()\n\nclass Bad:\n"
                     "    def act(self, observation, info):\n        return 5\n")
    out = tmp_path / "r.json"
    code = main(["evaluate", str(agent), "--suite", "v1", "--tasks", "gym/CartPole-v1", "--runs", "1",
                 "--episodes", "2", "--workers", "1", "--no-progress", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 1
    assert "2 episodes on 1 tasks x 1 runs" in text and "; 2 failed:" in text
    assert "  2x agent_error: " in text and "action 5 is out of range" in text
    assert f"every failure, by task: python -m polar_bench score {out}" in text


FLAKY = '''from pathlib import Path

def make_agent(task, run):
    return Agent()

class Agent:
    def act(self, observation, info):
        return 5 if Path(__file__).with_name("broken").exists() else 0
'''


def test_failed_episodes_are_played_again_with_retry_failed_and_a_changed_agent_starts_afresh(capsys, tmp_path):
    """What evaluate's closing lines and SUBMISSION.md tell a user after a failure, run as they say."""
    agent, marker, out = tmp_path / "agent.py", tmp_path / "broken", tmp_path / "r.json"
    agent.write_text(FLAKY)
    marker.write_text("")
    args = ["evaluate", str(agent), "--suite", "v1", "--tasks", "gym/CartPole-v1", "--runs", "1", "--episodes", "2",
            "--workers", "1", "--no-progress", "--out", str(out)]
    assert main(args) == 1
    said = capsys.readouterr().out
    assert "the same command with --retry-failed" in said
    marker.unlink()  # the cause, fixed outside the agent file
    assert main(args) == 1  # without the flag the journal's failures stand
    capsys.readouterr()
    assert main([*args, "--retry-failed"]) == 0
    episodes = __import__("json").loads(out.read_text())["episodes"]
    assert [(e["status"], e.get("attempts")) for e in episodes] == [("ok", 2), ("ok", 2)]
    retried = read_results(out)
    assert main([*args, "--retry-failed"]) == 0  # nothing failed: nothing played again
    assert [e.get("attempts") for e in __import__("json").loads(out.read_text())["episodes"]] == [2, 2]
    capsys.readouterr()
    agent.write_text(FLAKY + "# fixed\n")  # a changed agent file: the old episodes were another agent's
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "the agent file changed since" in err and "this evaluation starts afresh" in err
    assert [e.get("attempts") for e in __import__("json").loads(out.read_text())["episodes"]] == [None, None]
    assert len([p for p in tmp_path.glob("r.episodes.jsonl.*") if not p.name.endswith(".lock")]) == 1  # kept
    from polar_bench.leaderboard.site import _retried_text

    assert _retried_text(retried) == "2 (after a failure, evaluate --retry-failed; 4 attempts in all)"
    assert _retried_text(read_results(out)) == "none"


def test_comparing_a_subset_names_the_domains_to_pass_and_how_many_tasks_are_not_listed(capsys, tmp_path):
    mine = tmp_path / "mine.json"
    assert main(["evaluate", str(ROOT / "examples" / "random_agent.py"), "--suite", "v1", "--domains", "classic",
                 "--workers", "2", "--no-progress", "--out", str(mine)]) == 0
    capsys.readouterr()
    full = str(ROOT / "baselines" / "ppo" / "results" / "ppo-v1.json")
    for command in (["compare", str(mine), full], ["report", str(mine), full, "--format", "text"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "and 29 more" in err, err
        assert "pass --domains classic to compare them there" in err
    assert main(["compare", str(mine), full, "--domains", "classic", "--reps", "500", "--poi-reps", "200"]) == 0
    assert "only the domains classic" in capsys.readouterr().out


def test_check_only_names_the_root_cause_first_and_runs_the_duplicate_check(capsys, tmp_path):
    mine = tmp_path / "mine.json"
    assert main(["evaluate", str(ROOT / "examples" / "random_agent.py"), "--suite", "v1", "--tasks",
                 "gym/CartPole-v1", "--runs", "1", "--episodes", "2", "--workers", "1", "--no-progress",
                 "--out", str(mine)]) == 0
    capsys.readouterr()
    assert main(["submit", str(mine), "--check-only"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"error: {mine} is not a submittable result: it has 1 of the suite's 38 tasks; "
                               "it has 1 run(s) of the 3 the suite asks; it played 2 episodes per task")
    assert "Make one with: python -m polar_bench evaluate" in lines[0] and "--suite v1" in lines[0]
    assert len(lines) < 200  # the per-check lines follow, capped
    board = tmp_path / "lb"
    results = str(ROOT / "baselines" / "random" / "results-v1.json")
    assert main(["submit", results, "--leaderboard", str(board)]) == 0
    capsys.readouterr()
    assert main(["submit", results, "--check-only", "--leaderboard", str(board)]) == 2
    assert "is already on the leaderboard as entry" in capsys.readouterr().err


def test_a_deterministic_agents_zero_width_interval_is_drawn_inside_the_axes(tmp_path):
    """An interval of width 0 draws no bar: its marker must still be on the plot, off the edges."""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib import colors as mcolors
    from matplotlib import image as mimage

    from polar_bench.analysis import Estimate
    from polar_bench.report import plot_intervals

    estimates = {"deterministic": Estimate(1.0, 1.0, 1.0), "noisy": Estimate(0.4, 0.2, 0.6)}
    palette = {"deterministic": "#d62728", "noisy": "#1f77b4"}
    for case in (estimates, {"deterministic": Estimate(1.0, 1.0, 1.0)}):  # also alone: an axis of one value
        ax = plot_intervals(case, colors=palette)
        fig = ax.figure
        fig.canvas.draw()
        x_axes, _ = ax.transAxes.inverted().transform(ax.transData.transform((1.0, 0)))
        assert 0.03 < x_axes < 0.97, x_axes  # not on or beyond an edge
        path = tmp_path / "plot.png"
        fig.savefig(path, dpi=80)
        image = np.asarray(mimage.imread(path))[..., :3]
        red = np.array(mcolors.to_rgb(palette["deterministic"]))
        assert (np.abs(image - red).sum(axis=-1) < 0.1).sum() >= 10  # the marker's pixels are there
        fig.clf()


def test_leaderboard_build_takes_its_folder_as_submit_and_verify_do(tmp_path, capsys):
    board = tmp_path / "lb"
    assert main(["submit", str(ROOT / "baselines" / "random" / "results-v1.json"), "--leaderboard", str(board)]) == 0
    assert main(["leaderboard", "build", "--leaderboard", str(board), "--no-plots", "--reps", "200",
                 "--poi-reps", "100"]) == 0
    assert (board / "README.md").is_file() and f"into {board}" in capsys.readouterr().out
    assert main(["leaderboard", "build", str(board), "--leaderboard", str(tmp_path / "other")]) == 2
    assert "two leaderboard folders" in capsys.readouterr().err


def test_progress_gives_no_eta_from_the_first_episodes(capsys):
    from polar_bench.evaluate.journal import Progress

    p = Progress(100, 0, None)
    p.update("ok")  # the first line comes at once, before any estimate can be trusted
    assert capsys.readouterr().err.strip() == "[polar_bench] 1/100 episodes, 0 errors, ETA after a few more"
    done = Progress(2, 0, None)
    done.update("ok")
    done.update("ok")
    assert capsys.readouterr().err.strip().splitlines()[-1] == "[polar_bench] 2/2 episodes, 0 errors, done"


def test_a_bad_out_path_is_named_before_any_agent_process_starts(tmp_path, capsys):
    """The cheap checks come first: a broken agent file is not even imported when --out cannot be written."""
    agent = tmp_path / "agent.py"
    agent.write_text("def make_agent(task, run)\n")  # a syntax error, which the agent process would report
    assert main(["evaluate", str(agent), "--suite", "v1", "--tasks", "gym/CartPole-v1",
                 "--out", str(tmp_path / "missing" / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "the folder of --out" in err and "does not exist" in err and "SyntaxError" not in err
