"""The evaluate command end to end: bad input, failures, determinism, journal and resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_helpers import children_of, gone_within

from polar_bench.cli import main
from polar_bench.results import read_results

HERE = Path(__file__).parent
TINY = str(HERE / "data" / "suites" / "tiny.toml")
EXAMPLES = HERE.parent / "examples"


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return str(path)


# --------------------------------------------------------------------------- bad input
GOOD_AGENT = """
    import numpy as np
    def make_agent(task, run):
        class A:
            def act(self, obs, info):
                return 0 if task.action_space.shape == () else np.zeros(task.action_space.shape, np.float32)
        return A()
"""


@pytest.mark.parametrize("case, agent_text, suite, extra, needle", [
    ("missing agent", None, TINY, [], "not found"),
    ("syntax error", "def make_agent(task, run)\n    return 1\n", TINY, [], "SyntaxError"),
    ("no make_agent", "x = 1\n", TINY, [], "defines no make_agent"),
    ("make_agent raises", "def make_agent(task, run):\n    raise ValueError('no checkpoint')\n", TINY, [],
     "raised ValueError: no checkpoint"),
    ("import fails", "import not_a_real_module_xyz\n", TINY, [], "ModuleNotFoundError"),
    ("unknown suite", GOOD_AGENT, "v99", [], "unknown suite"),
    ("no task matches", GOOD_AGENT, TINY, ["--tasks", "dmc/*"], "no task of suite tiny matches"),
    ("unknown domain", GOOD_AGENT, TINY, ["--domains", "clasic"], "Did you mean: classic"),
    ("bad runs", GOOD_AGENT, TINY, ["--runs", "0"], "--runs must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, case, agent_text, suite, extra, needle):
    agent = str(tmp_path / "agent.py")
    if agent_text is not None:
        write(Path(agent), agent_text)
    code, out, err = run_cli(["evaluate", agent, "--suite", suite, "--out", str(tmp_path / "r.json"),
                              "--workers", "1", "--no-progress", *extra], capsys)
    assert code == 2, (case, err)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("[polar_bench]")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0]
    assert "Traceback" not in err


def test_malformed_suite_files(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", GOOD_AGENT)
    cases = {
        "syntax.toml": ("[suite\nname='x'", "not valid TOML"),
        "nohead.toml": ("[[tasks]]\nid='gym/CartPole-v1'\n", "missing the [suite] table"),
        "badref.toml": (Path(TINY).read_text().replace('high = { value = 500.0', 'high = { value = 5.0'),
                        "must be above low"),
        "typo.toml": (Path(TINY).read_text().replace("episodes = 3", "episode = 3"), "unknown field 'episode'"),
    }
    for name, (text, needle) in cases.items():
        suite = write(tmp_path / name, text)
        code, _, err = run_cli(["evaluate", agent, "--suite", suite, "--out", str(tmp_path / "r.json")], capsys)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, (name, err)


def test_unwritable_output_path(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", GOOD_AGENT)
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", str(tmp_path / "nope" / "r.json")], capsys)
    assert code == 2 and "does not exist" in err
    if os.geteuid() != 0:  # root can write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", str(ro / "r.json")], capsys)
        assert code == 2 and "cannot write" in err


def test_version_mismatch_stops_unless_allowed(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", GOOD_AGENT)
    suite = write(tmp_path / "s.toml", Path(TINY).read_text().replace('gymnasium = "1.2.0"', 'gymnasium = "0.29.1"'))
    out = str(tmp_path / "r.json")
    code, _, err = run_cli(["evaluate", agent, "--suite", suite, "--out", out, "--episodes", "1"], capsys)
    assert code == 2 and "gymnasium 1.2.0 (suite pins 0.29.1)" in err
    code, _, err = run_cli(["evaluate", agent, "--suite", suite, "--out", out, "--episodes", "1", "--workers", "1",
                            "--allow-version-mismatch", "--no-progress"], capsys)
    assert code == 0, err
    r = read_results(out)
    assert r.comparable is False and r.standard is False
    assert r.version_mismatches is not None and r.version_mismatches["gymnasium"]["pinned"] == "0.29.1"


# --------------------------------------------------------------------------- failures
# The harness family lives in a trusted plugin file (imported in the workers); the agent file is
# imported only in its own agent process, so it could not register one there.
FAULTY_PLUGIN = """
    import numpy as np
    import polar_bench
    from polar_bench import Harness, TaskInfo, Component
    from gymnasium import spaces

    class Boom(Harness):
        family = "faulty"
        @staticmethod
        def task_names():
            return ["env"]
        def __init__(self, name, text=False, max_episode_steps=None):
            super().__init__(text=text)
            self._finish_setup(TaskInfo(
                id="faulty/env", domain="test", description="a test task whose native env crashes on seed 11",
                observation_space=spaces.Box(-1, 1, (1,), np.float32), action_space=spaces.Discrete(2),
                observation_components=(Component("x"),), action_components=(Component("a"), Component("b")),
                max_episode_steps=20, package="test", package_version="0", text_note="none"))
        def _native_reset(self, seed):
            self.seed_ = seed
            self.t = 0
            return np.zeros(1, np.float32), {}
        def _native_step(self, action):
            self.t += 1
            if self.seed_ == 11 and self.t == 3:
                raise RuntimeError("native simulator exploded")
            return np.zeros(1, np.float32), 1.0, False, False, {}

    polar_bench.register_family("faulty", Boom)
"""

FAULTY_AGENT = """
    import os, time

    AGENT_INFO = {"name": "faulty"}
    SEEDS = __SEEDS__

    class Agent:
        def reset(self, seed):
            self.seed = seed
        def act(self, obs, info):
            if self.seed == SEEDS[2]:
                raise ZeroDivisionError("agent bug")
            if self.seed == SEEDS[3]:
                return 7  # invalid action
            if self.seed == SEEDS[4]:
                while True:  # hangs, and even swallows exceptions
                    try:
                        time.sleep(0.01)
                    except Exception:
                        pass
            if self.seed == SEEDS[5]:
                os._exit(3)  # ends the agent's own process
            return 0

    def make_agent(task, run):
        return Agent()
"""

FAULTY_SUITE = """
    [suite]
    name = "faulty"
    version = "0"
    seed = 1
    runs = 1
    episodes = 7
    [[domains]]
    name = "test"
    description = "d"
    training = "t"
    budget = "b"
    [[tasks]]
    id = "faulty/env"
    domain = "test"
    seeds = [10, 11, 12, 13, 14, 15, 16]
    low = { value = 0.0, source = "s", measured = false }
    high = { value = 20.0, source = "s", measured = false }
"""


def test_failures_are_recorded_per_episode_and_the_run_goes_on(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", FAULTY_AGENT.replace("__SEEDS__", "[10, 11, 12, 13, 14, 15, 16]"))
    plugin = write(tmp_path / "faulty_family.py", FAULTY_PLUGIN)
    suite = write(tmp_path / "faulty.toml", FAULTY_SUITE)
    out = str(tmp_path / "r.json")
    code, _, err = run_cli(["evaluate", agent, "--suite", suite, "--out", out, "--workers", "2",
                            "--harness-plugin", plugin, "--step-timeout", "0.5", "--no-progress"], capsys)
    assert code == 1, err
    eps = {e["seed"]: e for e in read_results(out).to_json()["episodes"]}
    assert eps[10]["status"] == "ok" and eps[10]["return"] == 20.0 and eps[10]["length"] == 20
    assert eps[16]["status"] == "ok"
    assert eps[11]["status"] == "env_error" and "native simulator exploded" in eps[11]["error"]
    assert "faulty/env failed at step 3 of the episode with seed 11" in eps[11]["error"]
    assert eps[12]["status"] == "agent_error" and "ZeroDivisionError: agent bug" in eps[12]["error"]
    assert eps[13]["status"] == "agent_error" and "out of range" in eps[13]["error"]
    assert eps[14]["status"] == "timeout" and "step timeout of 0.5 s" in eps[14]["error"]
    assert eps[15]["status"] == "agent_error" and "agent process ended itself (exit code 3)" in eps[15]["error"]
    assert len(eps) == 7
    data = read_results(out).to_json()
    assert data["standard"] is False and data["harness_plugins"][0]["sha256"]


EXTRAS_AGENT = """
    import numpy as np

    class Agent:
        def reset(self, seed):
            self.seed = seed
        def act(self, obs, info):
            return 0
        def episode_info(self):
            return {
                0: {"counts": np.arange(3), "mean": np.float32(0.5), "pair": (1, "a")},
                1: {"x": float("nan")},
                2: {"x": "a" * (70 << 10)},
                3: {"x": object()},
                4: {"return": 1e9, "length": 1, "status": "ok", "digest": "sha256:0", "clipped_actions": 0,
                    "harness": {}, "wall_seconds": 0.0, "mine": 1},
                5: None,
            }[self.seed % 6]

    def make_agent(task, run):
        return Agent()
"""


@pytest.mark.parametrize("lanes", ["1", "4"])
@pytest.mark.parametrize("isolated", [True, False])
def test_what_episode_info_returns_is_checked_and_the_run_goes_on(tmp_path, capsys, lanes, isolated):
    """An agent's episode_info() may not stop the evaluation (NaN or a non-JSON object in the journal),
    bloat its results (64 KiB per episode) or overwrite what the loop measured."""
    agent = write(tmp_path / "agent.py", EXTRAS_AGENT)
    seeds = [600, 601, 602, 603, 604, 605]
    suite = write(tmp_path / "s.toml", FAULTY_SUITE.replace('"faulty/env"', '"gym/CartPole-v1"')
                  .replace("[10, 11, 12, 13, 14, 15, 16]", str(seeds)).replace("episodes = 7", "episodes = 6")
                  .replace("value = 20.0", "value = 500.0"))
    out = str(tmp_path / "r.json")
    extra = [] if isolated else ["--in-process"]
    code, _, err = run_cli(["evaluate", agent, "--suite", suite, "--out", out, "--workers", "1",
                            "--envs-per-worker", lanes, "--no-progress", *extra], capsys)
    assert code == 1, err
    eps = {e["seed"]: e for e in read_results(out).to_json()["episodes"]}
    assert eps[600]["status"] == "ok" and eps[600]["counts"] == [0, 1, 2] and eps[600]["mean"] == 0.5
    assert eps[600]["pair"] == [1, "a"]
    fix = "return a dict of JSON values"
    assert eps[601]["status"] == "agent_error" and "episode_info()['x'] is nan" in eps[601]["error"]
    assert eps[602]["status"] == "agent_error" and "bytes of JSON" in eps[602]["error"] and fix in eps[602]["error"]
    assert eps[603]["status"] == "agent_error" and "type object" in eps[603]["error"] and "digest" not in eps[603]
    measured = eps[604]
    assert measured["status"] == "ok" and measured["mine"] == 1 and measured["length"] == measured["return"] < 20
    assert measured["digest"] != "sha256:0" and "clipped_actions" not in measured and "harness" not in measured
    assert eps[605]["status"] == "ok"


@pytest.mark.parametrize("info, needle", [
    ("{'x': float('nan')}", "AGENT_INFO['x'] is nan"),
    ("{'x': 'a' * (70 << 10)}", "AGENT_INFO holds"),
    ("'my agent'", "AGENT_INFO must be a dict"),
])
def test_an_agent_info_that_is_not_small_json_is_one_line(tmp_path, capsys, info, needle):
    agent = write(tmp_path / "agent.py", GOOD_AGENT + f"\n    AGENT_INFO = {info}\n")
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", str(tmp_path / "r.json"),
                            "--workers", "1", "--no-progress", "--in-process"], capsys)
    assert code == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------- determinism and resume
def _returns(path):
    return [(e.task, e.run, e.index, e.seed, e.ret, e.length) for e in read_results(path).episodes]


def test_returns_identical_whatever_the_number_of_workers(tmp_path, capsys):
    agent = str(EXAMPLES / "random_agent.py")
    outs = []
    for name, workers in (("a", "1"), ("b", "2"), ("c", "2")):
        out = str(tmp_path / f"{name}.json")
        code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--workers", workers,
                                "--no-progress"], capsys)
        assert code == 0, err
        outs.append(_returns(out))
    assert outs[0] == outs[1] == outs[2]
    # runs are independent instances: the random agent's runs differ on the same seeds
    assert [r[4] for r in outs[0] if r[1] == 0] != [r[4] for r in outs[0] if r[1] == 1]


SLOW_AGENT = """
    import time
    import numpy as np
    AGENT_INFO = {"name": "slow"}
    class A:
        def __init__(self, task, run):
            self.task, self.run = task, run
        def reset(self, seed):
            self.rng = np.random.default_rng([seed, self.run])
        def act(self, obs, info):
            time.sleep(0.004)
            if self.task.action_space.shape == ():
                return int(self.rng.integers(self.task.action_space.n))
            return self.rng.uniform(-1, 1, self.task.action_space.shape).astype(np.float32)
    def make_agent(task, run):
        return A(task, run)
"""


def _reference_and_resume_command(tmp_path, agent, capsys):
    """An uninterrupted evaluation of ``agent`` on the tiny suite (its results file), and the paths and
    command line of a second one to interrupt and resume."""
    ref = str(tmp_path / "ref.json")
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", ref, "--workers", "2", "--no-progress"],
                           capsys)
    assert code == 0, err
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "polar_bench", "evaluate", agent, "--suite", TINY, "--out", str(out),
           "--workers", "2", "--no-progress"]
    return ref, out, tmp_path / "r.episodes.jsonl", cmd


def test_kill_9_then_resume_loses_and_duplicates_nothing(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", SLOW_AGENT)
    ref, out, journal, cmd = _reference_and_resume_command(tmp_path, agent, capsys)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 4:  # header + 3 episodes
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    partial = [json.loads(line) for line in journal.read_text().splitlines()[1:] if line.strip()]
    assert 3 <= len(partial) < 10
    # a torn last line, as a kill in the middle of a write leaves it
    with open(journal, "a") as fh:
        fh.write('{"task": "gym/CartPole-v1", "run": 1, "ind')
    code, _, err = run_cli(cmd[3:], capsys)
    assert code == 0, err
    assert _returns(str(out)) == _returns(ref)
    lines = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    keys = [(r["task"], r["run"], r["index"]) for r in lines]
    assert len(keys) == len(set(keys)) == 10
    # running the same command again does no work and gives the same file
    code, _, _ = run_cli(cmd[3:], capsys)
    assert code == 0 and _returns(str(out)) == _returns(ref)


def test_the_read_only_journal_reader_sees_the_episodes_a_resume_keeps(tmp_path):
    """verify decides what it still has to play (and so which artifacts to fetch or rebuild) from
    `journaled_keys`; the engine then resumes with `Journal`. The two must agree on every journal: a blank
    line inside it, a torn last line that parses as JSON but lacks its newline, a record cut short."""
    from polar_bench.evaluate.journal import Journal, journaled_keys
    identity = {"agent_sha256": "a" * 64, "suite": "s", "tasks": ["t"], "runs": 1, "episodes": 3}

    def rec(i: int) -> str:
        return json.dumps({"task": "t", "run": 0, "index": i, "status": "ok"}) + "\n"

    header = json.dumps({"journal": 1, "identity": identity, "started": "x"}) + "\n"
    cases = {
        "blank line inside": header + rec(0) + "\n" + rec(1) + rec(2),
        "whole record without its newline": header + rec(0) + rec(1) + rec(2).rstrip("\n"),
        "record cut short": header + rec(0) + rec(1)[:20],
        "not a record": header + rec(0) + "[1, 2]\n" + rec(1),
    }
    for name, text in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(text)
        seen = journaled_keys(path)
        journal = Journal(path, identity)
        journal.close()
        assert seen == set(journal.done), name
        assert journaled_keys(path) == seen, name  # what the resume truncated was not an episode
        assert all(json.loads(line) for line in path.read_text().splitlines() if line), name
    assert journaled_keys(tmp_path / "blank line inside.jsonl") == {("t", 0, 0), ("t", 0, 1), ("t", 0, 2)}
    assert journaled_keys(tmp_path / "whole record without its newline.jsonl") == {("t", 0, 0), ("t", 0, 1)}
    assert journaled_keys(tmp_path / "absent.jsonl") == set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG are Linux's")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_stopping_evaluate_alone_stops_its_workers_and_resume_finishes(tmp_path, capsys, sig):
    """A signal to the evaluate process alone, not its group: SIGTERM (kill, a batch scheduler's time limit)
    stops it as Ctrl-C does, with the line saying how to resume and exit code 130; SIGKILL (the OOM
    killer) cannot be handled, but its workers must not play on as orphans. Both resume to the file an
    uninterrupted evaluation gives."""
    # while the file "stuck" lies beside it, the agent takes a second per step in run 1: a worker playing
    # run 1 then ends no episode for a long time (an old worker noticed its parent's death only when it
    # sent the next finished episode)
    agent = write(tmp_path / "agent.py", SLOW_AGENT.replace("time.sleep(0.004)", (
        "time.sleep(1.0 if self.run == 1 and os.path.exists(os.path.join(os.path.dirname(__file__), 'stuck')) "
        "else 0.004)")).replace("import time", "import os, time"))
    ref, out, journal, cmd = _reference_and_resume_command(tmp_path, agent, capsys)
    # One lane per worker, so that run 0's five episodes end fast (lanes step in lockstep: beside a stuck
    # lane they would wait a second per step); each task's units come run by run, so once run 0 is
    # journalled, both workers are inside a run-1 episode when the signal comes.
    cmd += ["--envs-per-worker", "1"]
    (tmp_path / "stuck").write_text("")
    err_file = tmp_path / "stderr.txt"  # not a pipe: an orphaned worker would hold it open
    with open(err_file, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if journal.exists() and journal.read_text().count("\n") >= 6:  # header + run 0's 5 episodes
                break
            time.sleep(0.05)
        workers = children_of(proc.pid, b"spawn_main")  # the evaluation workers
        assert workers, "no worker process found"
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert all(gone_within(pid, 10) for pid in workers), "a worker outlived the evaluate process"
    err = err_file.read_text()
    if sig == signal.SIGTERM:
        assert proc.returncode == 130, err
        assert "interrupted:" in err and "run the same command again to resume" in err, err
        assert "Traceback" not in err, err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    partial = [json.loads(line) for line in journal.read_text().splitlines()[1:] if line.strip()]
    assert len(partial) == 5 and {r["run"] for r in partial} == {0}, partial
    (tmp_path / "stuck").unlink()
    code, _, err = run_cli(cmd[3:], capsys)
    assert code == 0, err
    assert _returns(str(out)) == _returns(ref)


def test_an_interruption_counts_the_saved_episodes_of_its_own_selection(tmp_path, monkeypatch):
    """A journal can hold more than the units being played (verify's stages play a few tasks of the
    whole selection into one journal): the interruption's message counts this selection's saved ones."""
    from types import SimpleNamespace

    from polar_bench.evaluate import run as run_module
    from polar_bench.evaluate.config import RunOutcome, Unit
    from polar_bench.evaluate.journal import Journal

    journal = Journal(tmp_path / "r.episodes.jsonl", {"suite": "s", "tasks": ["a", "b"]})
    for task, index in (("a", 0), ("b", 0), ("b", 1)):
        journal.append({"task": task, "run": 0, "index": index, "status": "ok"})

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "_drive", stopped)
    cfg = SimpleNamespace(retry_failed=False, tasks=[], progress=False)
    with pytest.raises(KeyboardInterrupt, match="1 of 2 episodes are saved"):  # not "3 of 2"
        run_module._play(cfg, journal, [Unit("a", 0, 0, 7), Unit("a", 0, 1, 8)], RunOutcome())


WORKER_BREAKER = """
import multiprocessing
import os
if os.environ.get("POLAR_TEST_BREAK_WORKERS") and multiprocessing.current_process().name != "MainProcess":
    os._exit(1)  # every evaluation worker dies at start-up, as with a broken plugin or library
"""


def test_workers_that_cannot_start_leave_no_failed_episode_in_the_journal(tmp_path, capsys, monkeypatch):
    """Workers dying at start-up is the set-up's fault, not an episode's: the run stops with the one-line
    error, and once the set-up is fixed the same command plays every episode (an episode lost twice at
    start-up used to be journalled as env_error, and resume kept skipping it)."""
    plugin = write(tmp_path / "breaker.py", WORKER_BREAKER)
    out = str(tmp_path / "r.json")
    cmd = ["evaluate", str(EXAMPLES / "random_agent.py"), "--suite", TINY, "--out", out, "--workers", "1",
           "--harness-plugin", plugin, "--no-progress"]
    monkeypatch.setenv("POLAR_TEST_BREAK_WORKERS", "1")
    code, _, err = run_cli(cmd, capsys)
    assert code == 2 and "keep dying before finishing any episode" in err, err
    journal = tmp_path / "r.episodes.jsonl"
    assert [json.loads(line) for line in journal.read_text().splitlines()[1:] if line.strip()] == []
    monkeypatch.delenv("POLAR_TEST_BREAK_WORKERS")
    code, _, err = run_cli(cmd, capsys)
    assert code == 0, err
    assert {e["status"] for e in read_results(out).to_json()["episodes"]} == {"ok"}


def test_journal_of_another_evaluation_is_refused_and_another_agent_files_is_set_aside(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", GOOD_AGENT)
    out = str(tmp_path / "r.json")
    assert run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--episodes", "1", "--workers", "1",
                    "--no-progress"], capsys)[0] == 0
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--episodes", "2"], capsys)
    assert code == 2 and "belongs to a different evaluation" in err
    first = (tmp_path / "r.episodes.jsonl").read_bytes()
    write(tmp_path / "agent.py", GOOD_AGENT + "    # changed\n")
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--episodes", "1", "--workers", "1",
                            "--no-progress"], capsys)
    assert code == 0 and "the agent file changed since" in err and "starts afresh" in err
    [aside] = [p for p in tmp_path.glob("r.episodes.jsonl.*") if not p.name.endswith(".lock")]
    assert aside.read_bytes() == first  # nothing of the old agent's is lost, and nothing of it is kept


def test_results_file_contents(tmp_path, capsys):
    out = str(tmp_path / "r.json")
    code, _, err = run_cli(["evaluate", str(EXAMPLES / "random_agent.py"), "--suite", TINY, "--out", out,
                            "--workers", "1", "--no-progress"], capsys)
    assert code == 0, err
    r = read_results(out)
    d = r.to_json()
    assert d["suite"]["name"] == "tiny" and d["suite"]["hash"].startswith("sha256:")
    assert d["agent"]["info"]["name"] == "random" and len(d["agent"]["sha256"]) == 64
    assert d["versions"]["gymnasium"] == "1.2.0" and d["comparable"] is True
    assert d["environment"]["python"] and d["command"].startswith("python -m polar_bench evaluate")
    assert len(r.episodes) == 2 * 3 + 2 * 2
    pend = [e for e in r.episodes if e.task == "gym/Pendulum-v1"]
    assert all(e.clipped_actions is not None for e in pend)
    assert {e.seed for e in pend} == set(r.suite.tasks[1].seeds)
    assert all((e.agent_seconds or 0) <= (e.wall_seconds or 0) for e in r.episodes)


def test_read_results_refuses_unknown_versions_and_bad_files(tmp_path):
    from polar_bench.errors import ResultsError

    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format_version": 99}))
    with pytest.raises(ResultsError, match="newer than this polar_bench reads"):
        read_results(p)
    p.write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        read_results(p)
    p.write_text(json.dumps({"format_version": 1, "episodes": []}))
    with pytest.raises(ResultsError, match="does not match the results schema"):
        read_results(p)


def test_a_results_file_too_large_to_be_one_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """A submitted file is read whole into memory: one far beyond any results file is refused first."""
    import polar_bench.results as results_module
    from polar_bench.errors import ResultsError

    monkeypatch.setattr(results_module, "MAX_JSON_BYTES", 1000)
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format_version": 1, "pad": "x" * 2000}))
    with pytest.raises(ResultsError, match="larger than 1,000 bytes"):
        read_results(p)
    p.write_text(json.dumps({"format_version": 1, "episodes": []}))
    with pytest.raises(ResultsError, match="does not match the results schema"):  # under it: read as before
        read_results(p)


def test_workers_that_die_at_start_up_stop_the_run_with_one_line(tmp_path, capsys):
    plugin = write(tmp_path / "plugin.py", """
        import multiprocessing, os
        if multiprocessing.current_process().name != "MainProcess":
            os._exit(5)  # dies in every worker, before any episode
    """)
    out = tmp_path / "r.json"
    code, _, err = run_cli(["evaluate", str(EXAMPLES / "random_agent.py"), "--suite", TINY, "--out", str(out),
                            "--workers", "1", "--harness-plugin", plugin, "--no-progress"], capsys)
    assert code == 2 and "keep dying before finishing any episode (exit code 5)" in err
    assert not out.exists()


def test_an_agent_file_that_kills_its_process_at_import_is_one_line(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", """
        import os
        os._exit(5)
    """)
    out = tmp_path / "r.json"
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", str(out), "--no-progress"], capsys)
    assert code == 2 and "agent process ended itself (exit code 5) while importing the agent file" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_several_episodes_per_worker_give_the_same_results(tmp_path, capsys):
    ref = str(tmp_path / "ref.json")
    out = str(tmp_path / "lanes.json")
    agent = str(EXAMPLES / "random_agent.py")
    assert run_cli(["evaluate", agent, "--suite", TINY, "--out", ref, "--workers", "1", "--no-progress"],
                   capsys)[0] == 0
    assert run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--workers", "2", "--envs-per-worker", "3",
                    "--no-progress"], capsys)[0] == 0
    assert _returns(out) == _returns(ref)
    assert read_results(out).to_json()["config"]["envs_per_worker"] == 3


def test_failures_with_several_episodes_per_worker(tmp_path, capsys):
    agent = write(tmp_path / "agent.py", FAULTY_AGENT.replace("__SEEDS__", "[10, 11, 12, 13, 14, 15, 16]"))
    plugin = write(tmp_path / "faulty_family.py", FAULTY_PLUGIN)
    suite = write(tmp_path / "faulty.toml", FAULTY_SUITE)
    out = str(tmp_path / "r.json")
    code, _, err = run_cli(["evaluate", agent, "--suite", suite, "--out", out, "--workers", "1",
                            "--harness-plugin", plugin, "--envs-per-worker", "7",
                            "--step-timeout", "0.5", "--no-progress"], capsys)
    assert code == 1, err
    eps = {e["seed"]: e for e in read_results(out).to_json()["episodes"]}
    # the hang (seed 14) and the exit (seed 15) take the shared agent process down with every lane in flight;
    # those episodes are played again alone and succeed or fail on their own
    assert [eps[s]["status"] for s in range(10, 17)] == ["ok", "env_error", "agent_error", "agent_error",
                                                          "timeout", "agent_error", "ok"]
    assert "exit code 3" in eps[15]["error"] and "native simulator exploded" in eps[11]["error"]


def test_a_worker_lost_mid_run_is_replaced_and_the_results_say_why_and_what_it_played(tmp_path, capsys):
    """A worker that dies once (here its environment ends the process on seed 12, the first time only)
    is replaced and its episodes played again; the results keep why and what it was playing, and stderr
    says so at once, since a retried episode leaves no other trace."""
    marker = tmp_path / "died-once"
    die_once = (f"            if self.seed_ == 12 and self.t == 3 and not os.path.exists({str(marker)!r}):\n"
                f"                open({str(marker)!r}, 'w').close()\n"
                f"                os._exit(9)\n")
    source = FAULTY_PLUGIN.replace("            if self.seed_ == 11", die_once + "            if self.seed_ == 11")
    source = source.replace("import numpy as np", "import os\n    import numpy as np")
    plugin = write(tmp_path / "faulty_family.py", source)
    suite = write(tmp_path / "faulty.toml", FAULTY_SUITE)
    out = str(tmp_path / "r.json")
    code, _, err = run_cli(["evaluate", str(EXAMPLES / "random_agent.py"), "--suite", suite, "--out", out,
                            "--workers", "1", "--harness-plugin", plugin, "--envs-per-worker", "2",
                            "--no-progress"], capsys)
    assert marker.exists() and code == 1, err  # 1: seed 11's env_error
    data = read_results(out).to_json()
    assert [e["status"] for e in sorted(data["episodes"], key=lambda e: e["seed"])] == ["ok", "env_error"] + ["ok"] * 5
    assert data["config"]["replaced_workers"] == 1
    (loss,) = data["config"]["worker_losses"]
    assert loss["why"] == "exit code 9" and "faulty/env run 0 episode 2" in loss["playing"]
    assert "[polar_bench] a worker was lost (exit code 9) while playing" in err


def test_a_journal_resumes_only_with_the_bytes_it_played_and_evaluate_plays_only_pinned_bytes(tmp_path, capsys):
    """The journal records the SHA-256 of every pinned file the evaluation needs: a checkpoint re-pinned
    under the same path (the agent file unchanged) makes the old episodes another agent's, so the
    journal is refused, while a later run's new pin extends it. A file on disk that is not its pin is
    refused before anything plays. A journal from before pins were journaled is taken as it is."""
    agent = write(tmp_path / "agent.py", GOOD_AGENT)
    manifest = tmp_path / "artifacts.json"

    def pin(rows: list[tuple[str, bytes, int]]) -> None:
        for name, data, _ in rows:
            (tmp_path / name).write_bytes(data)
        manifest.write_text(json.dumps({"format": 1, "artifacts": [
            {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "run": run} for name, data, run in rows]}))

    def common(name: str = "r") -> list[str]:
        return ["evaluate", agent, "--suite", TINY, "--out", str(tmp_path / f"{name}.json"), "--workers", "1",
                "--no-progress"]

    pin([("run0.pt", b"weights 0", 0)])
    assert run_cli(common() + ["--runs", "1"], capsys)[0] == 0
    journal = tmp_path / "r.episodes.jsonl"
    [header] = [r for r in map(json.loads, journal.read_text().splitlines()) if "journal" in r]
    assert header["identity"]["artifacts"] == {"run0.pt": hashlib.sha256(b"weights 0").hexdigest()}
    before = journal.read_bytes()

    pin([("run0.pt", b"weights 0", 0), ("run1.pt", b"weights 1", 1)])  # run 1's checkpoint: run 0's kept
    code, _, err = run_cli(common() + ["--runs", "2"], capsys)
    assert code == 0, err
    lines = journal.read_bytes()
    added = [r for r in map(json.loads, lines[len(before):].decode().splitlines()) if "journal" not in r]
    assert lines.startswith(before) and added and {r["run"] for r in added} == {1}  # run 0 not played again

    pin([("run0.pt", b"weights 0, trained again", 0), ("run1.pt", b"weights 1", 1)])
    code, _, err = run_cli(common() + ["--runs", "2"], capsys)
    assert code == 2 and "played with other bytes of run0.pt" in err, err
    assert journal.read_bytes() == lines                              # nothing lost

    (tmp_path / "run0.pt").write_bytes(b"someone else's weights")
    code, _, err = run_cli(common("fresh"), capsys)
    assert code == 2 and "run0.pt: SHA-256" in err and "artifacts check" in err, err
    assert not (tmp_path / "fresh.episodes.jsonl").exists()

    # a journal written before journals recorded pins: resumed, and it gets a header that records them
    pin([("run0.pt", b"weights 0", 0)])
    old = tmp_path / "old.episodes.jsonl"
    old.write_text("".join(json.dumps({**r, "identity": {k: v for k, v in r["identity"].items() if k != "artifacts"}}
                                      if "journal" in r else r) + "\n"
                           for r in map(json.loads, before.decode().splitlines())))
    code, _, err = run_cli(common("old") + ["--runs", "1"], capsys)
    assert code == 0, err
    headers = [r for r in map(json.loads, old.read_text().splitlines()) if "journal" in r]
    assert [("artifacts" in h["identity"]) for h in headers] == [False, True]


def test_a_journal_of_fewer_tasks_is_extended_and_its_episodes_kept(tmp_path, capsys):
    """Evaluate one task, then the whole suite with the same --out: the first task's episodes are
    reused (not replayed) and the results equal a single full run's."""
    agent = str(EXAMPLES / "random_agent.py")
    ref = str(tmp_path / "ref.json")
    assert run_cli(["evaluate", agent, "--suite", TINY, "--out", ref, "--workers", "1", "--no-progress"],
                   capsys)[0] == 0
    out = str(tmp_path / "r.json")
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--tasks", "gym/CartPole-v1",
                            "--workers", "1", "--no-progress"], capsys)
    assert code == 0, err
    journal = tmp_path / "r.episodes.jsonl"
    first = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    first_episodes = [r for r in first if "journal" not in r]
    assert first_episodes and {r["task"] for r in first_episodes} == {"gym/CartPole-v1"}
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--workers", "1", "--no-progress"],
                           capsys)
    assert code == 0, err
    assert _returns(out) == _returns(ref)
    lines = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    episodes = [r for r in lines if "journal" not in r]
    assert episodes[:len(first_episodes)] == first_episodes          # kept, not replayed
    keys = [(r["task"], r["run"], r["index"]) for r in episodes]
    assert len(keys) == len(set(keys)) == len(read_results(ref).to_json()["episodes"])
    # the other way round (a journal with more tasks than the selection) is refused
    code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", out, "--tasks", "gym/CartPole-v1",
                            "--workers", "1", "--no-progress"], capsys)
    assert code == 2 and "belongs to a different evaluation" in err


def test_a_journal_of_fewer_runs_is_extended_and_its_episodes_kept(tmp_path, capsys):
    """Evaluate run 0, then runs 0-2 with the same --out (one trained instance per session, say): run
    0's episodes are kept, only runs 1-2 play, and the results equal a single 3-run evaluation's,
    digests included. More runs than the new selection is refused, as more tasks is."""
    agent = str(EXAMPLES / "random_agent.py")
    ref = str(tmp_path / "ref.json")
    common = ["--suite", TINY, "--workers", "1", "--no-progress"]
    assert run_cli(["evaluate", agent, *common, "--runs", "3", "--out", ref], capsys)[0] == 0
    out = str(tmp_path / "r.json")
    code, _, err = run_cli(["evaluate", agent, *common, "--runs", "1", "--out", out], capsys)
    assert code == 0, err
    journal = tmp_path / "r.episodes.jsonl"
    first = [r for r in map(json.loads, journal.read_text().splitlines()) if "journal" not in r]
    assert first and {r["run"] for r in first} == {0}
    code, _, err = run_cli(["evaluate", agent, *common, "--runs", "3", "--out", out], capsys)
    assert code == 0, err
    episodes = [r for r in map(json.loads, journal.read_text().splitlines()) if "journal" not in r]
    assert episodes[:len(first)] == first                            # kept, not replayed
    assert {r["run"] for r in episodes[len(first):]} == {1, 2}

    def played(path: str) -> list[tuple]:
        return sorted((e["task"], e["run"], e["index"], e["seed"], e["return"], e["digest"])
                      for e in read_results(path).to_json()["episodes"])

    assert played(out) == played(ref)
    assert read_results(out).to_json()["config"]["runs"] == 3
    code, _, err = run_cli(["evaluate", agent, *common, "--runs", "2", "--out", out], capsys)
    assert code == 2 and "more runs" in err, err


@pytest.mark.parametrize("option, needle", [('max_episode_steps = 0', "max_episode_steps"),
                                            ('gravity_wells = 3', "gravity_wells")])
def test_a_bad_task_option_is_a_suite_error_before_any_episode(tmp_path, capsys, option, needle):
    text = Path(TINY).read_text().replace('id = "gym/CartPole-v1"\n',
                                          f'id = "gym/CartPole-v1"\noptions = {{ {option} }}\n')
    suite = write(tmp_path / "s.toml", text)
    out = tmp_path / "r.json"
    code, _, err = run_cli(["evaluate", str(EXAMPLES / "random_agent.py"), "--suite", suite, "--out", str(out),
                            "--workers", "1", "--no-progress"], capsys)
    assert code == 2 and needle in err and "gym/CartPole-v1" in err, err
    assert not out.exists() and not (tmp_path / "r.episodes.jsonl").exists()


def test_digests_do_not_depend_on_lanes_or_on_sharing_an_environment(tmp_path, capsys):
    """NetHack's final screen lists the games its instance played before: with one lane a worker's
    second episode reuses the first one's environment, with three each has its own. The digest
    covers every observation the agent acted on, so both give the same digests."""
    pytest.importorskip("nle")
    agent = str(EXAMPLES / "random_agent.py")
    digests = []
    for lanes in ("1", "3"):
        out = str(tmp_path / f"r{lanes}.json")
        code, _, err = run_cli(["evaluate", agent, "--suite", "v1", "--tasks", "nethack/Score", "--runs", "1",
                                "--episodes", "3", "--workers", "1", "--envs-per-worker", lanes, "--out", out,
                                "--no-progress"], capsys)
        assert code == 0, err
        digests.append([(e["return"], e["digest"]) for e in read_results(out).to_json()["episodes"]])
    assert digests[0] == digests[1] and len({d for _, d in digests[0]}) == 3


def test_trajectory_digest_covers_what_the_agent_acted_on():
    import numpy as np

    from polar_bench.evaluate import TrajectoryDigest

    def digest(mid_obs, final_obs, action=1, reward=0.5):
        d = TrajectoryDigest(7)
        d.start(np.zeros(3, np.float32))
        d.step(action, reward, False, False, mid_obs)
        d.step(0, 1.0, False, True, final_obs)
        return d.hexdigest()

    base = digest(np.ones(3, np.float32), np.ones(3, np.float32))
    assert base.startswith("sha256:") and len(base) == 7 + 64
    assert digest(np.ones(3, np.float32), np.full(3, 9, np.float32)) == base   # the final observation: not acted on
    assert digest(np.full(3, 2, np.float32), np.ones(3, np.float32)) != base   # an observation acted on
    assert digest(np.ones(3, np.float64), np.ones(3, np.float32)) != base      # its dtype
    assert digest(np.ones(3, np.float32), np.ones(3, np.float32), action=2) != base
    assert digest(np.ones(3, np.float32), np.ones(3, np.float32), reward=0.25) != base


def _played_as_alone(records: list, alone: dict) -> None:
    """Each record (keyed by its seed) is the episode that seed gave when played alone."""
    keys = ("return", "length", "status", "digest")
    for r in records:
        assert {k: r[k] for k in keys} == {k: alone[r["seed"]][k] for k in keys}, r["seed"]


def test_a_lane_that_comes_free_takes_the_next_episode_while_the_others_play_on():
    """Streaming: what ``on_record`` answers is played in the lane that just came free, not after the
    batch; every episode is the same as played alone, and the records come back in the order given."""
    from polar_bench.evaluate import EpisodeRunner
    from polar_bench.suite import load_suite

    agent = str(EXAMPLES / "random_agent.py")
    options = {t.id: dict(t.options) for t in load_suite("v1").tasks}
    runner = EpisodeRunner(agent, options, 60.0, 600.0, 2)
    try:
        alone = {s: runner.run("gym/CartPole-v1", 0, s, s) for s in range(1, 13)}
        by_length = sorted(alone, key=lambda s: alone[s]["length"])
        first, rest = by_length[-1], by_length[:3]  # the longest episode beside the three shortest
        assert alone[first]["length"] > sum(alone[s]["length"] for s in rest), "pick other seeds"
        units = [("gym/CartPole-v1", 0, s, s) for s in [first, *rest]]
        handed: list = []
        ended: list = []

        def on_record(rec):
            ended.append(rec["seed"])
            more = units[2 + len(handed):3 + len(handed)]
            handed.extend(more)
            return more

        records = runner.run_batch(units[:2], on_record=on_record)
    finally:
        runner.close()
    assert [r["seed"] for r in records] == [u[3] for u in units]
    assert ended[-1] == first  # the other lane played the three short ones meanwhile
    _played_as_alone(records, alone)


class _FakeStreamingWorkers:
    """A `Transport` of workers that play instantly: each wait() ends one held episode per busy worker
    (a partial record) and reports the batch done once a worker holds nothing. Keeps what was handed out."""

    streams = True

    def __init__(self, size: int, die_on: set | None = None):
        self.size, self.finished = size, [0] * size
        self.held: dict[int, list] = {}
        self.handed: list[tuple[int, str, list]] = []  # (worker, "batch" | "top-up", units)
        self.die_on = set(die_on or ())
        self.topped: list[tuple[list, list]] = []

    def submit(self, i, units):
        self.held[i] = list(units)
        self.handed.append((i, "batch", list(units)))

    def top_up(self, i, units):
        self.topped.append(([u[2] for u in self.held.get(i, [])], list(units)))  # (what it still holds, given)
        self.held[i] += units
        self.handed.append((i, "top-up", list(units)))

    def wait(self, timeout):
        events = []
        for i in sorted(self.held):
            if not self.held[i]:
                del self.held[i]
                events.append((i, {"records": [], "layers": {}, "mode": "process"}, ""))
                continue
            task, run, index, seed = self.held[i].pop(0)
            if (index, "died") not in self.die_on and index in self.die_on:
                self.die_on.add((index, "died"))
                del self.held[i]
                events.append((i, None, "exit code 9"))
                continue
            self.finished[i] += 1
            rec = {"task": task, "run": run, "index": index, "seed": seed, "return": 1.0, "length": 1,
                   "status": "ok", "error": None}
            events.append((i, {"records": [rec], "partial": True}, ""))
        return events

    def replace(self, i):
        self.finished[i] = 0

    def close(self, kill):
        pass


def _dispatch_fake(transport, episodes: int, lanes: int):
    from collections import deque
    from types import SimpleNamespace

    from polar_bench.evaluate.config import RunOutcome, Unit
    from polar_bench.evaluate.dispatch import dispatch

    cfg = SimpleNamespace(envs_per_worker=lanes, episode_timeout=None)
    todo = deque(Unit("t/a", 0, k, 100 + k) for k in range(episodes))
    recorded: list = []
    outcome = RunOutcome()
    assert dispatch(cfg, todo, transport, recorded.append, lambda reply: None, outcome) is None  # type: ignore[arg-type]
    return outcome, recorded


def test_dispatch_refills_a_streaming_worker_to_its_lanes_until_the_queue_runs_dry():
    workers = _FakeStreamingWorkers(1)
    _cfg, recorded = _dispatch_fake(workers, episodes=7, lanes=3)
    assert sorted(r["index"] for r in recorded) == list(range(7))
    kinds = [(kind, [u[2] for u in units]) for _i, kind, units in workers.handed]
    assert kinds == [("batch", [0, 1, 2]), ("top-up", [3]), ("top-up", [4]), ("top-up", [5]), ("top-up", [6]),
                     ("top-up", []), ("top-up", []), ("top-up", [])]  # one batch; every record answered


def test_dispatch_keeps_a_retried_episode_alone_on_a_streaming_worker():
    """A worker dies on episode 1: its unfinished episodes are retried, each in a batch of its own, and
    no episode joins a worker while it plays a retry, so a crashing episode cannot take others down twice."""
    workers = _FakeStreamingWorkers(1, die_on={1})
    outcome, recorded = _dispatch_fake(workers, episodes=6, lanes=2)
    assert sorted(r["index"] for r in recorded) == list(range(6)) and outcome.replaced_workers == 1
    batches = [[u[2] for u in units] for _i, kind, units in workers.handed if kind == "batch"]
    assert batches[:3] == [[0, 1], [1], [2]]  # 1 and 2 were held when the worker died: retried alone
    given = [(held, [u[2] for u in units]) for held, units in workers.topped]
    # before the death, 0's record brought 2 beside 1; 1's retry ended while 2's waited: nothing new, so the
    # worker ran dry and took 2 alone; after 2's retry the stream goes on with both lanes filled again
    assert given == [([1], [2]), ([], []), ([], [3, 4]), ([4], [5]), ([5], []), ([], [])]


def test_a_worker_that_starts_with_one_lane_overlaps_two_requests_once_refilled():
    """Pipelined lanes (a core for the agent process beside the worker's): a play that began with one
    episode (a retry's batch, then top-ups) splits its refilled lanes into two groups with a request
    each in flight, and every episode is still the same as played alone."""
    from polar_bench.evaluate import EpisodeRunner

    agent = str(EXAMPLES / "random_agent.py")
    runner = EpisodeRunner(agent, {}, 60.0, 600.0, 4, pipeline=True)
    try:
        alone = {s: runner.run("gym/CartPole-v1", 0, s, s) for s in range(1, 7)}
        in_flight: list[int] = []
        send = runner.agents.act_send

        def counting_send(*args, **kwargs):
            seq = send(*args, **kwargs)
            in_flight.append(len(runner.agents._outstanding))
            return seq

        runner.agents.act_send = counting_send  # type: ignore[method-assign]
        rest = [("gym/CartPole-v1", 0, s, s) for s in range(2, 7)]
        held = [1]

        def parent(rec):  # as dispatch answers: the worker's 4 lanes filled again
            held[0] -= 1
            more = [rest.pop(0) for _ in range(min(len(rest), 4 - held[0]))]
            held[0] += len(more)
            return more

        records = runner.run_batch([("gym/CartPole-v1", 0, 1, 1)], on_record=parent)
    finally:
        runner.close()
    assert [r["seed"] for r in records] == list(range(1, 7))
    assert max(in_flight) == 2  # two groups, each with its request out
    _played_as_alone(records, alone)


def test_lanes_refilled_into_the_group_whose_request_is_in_flight_are_stepped_after_its_answer():
    """Pipelined lanes: when the answered group keeps more lanes than the group in flight, a refilled
    lane joins the group in flight. Its answer carries actions only for the lanes it was asked for; the
    worker once stepped the grown group with it and died on the mismatch (found by verify --workers 1).
    The first episode to end brings nothing new, the second brings two: whichever groups they ended
    in, every episode must be played, each the same as alone."""
    from polar_bench.evaluate import EpisodeRunner

    agent = str(EXAMPLES / "random_agent.py")
    runner = EpisodeRunner(agent, {}, 60.0, 600.0, 4, pipeline=True)
    try:
        alone = {s: runner.run("gym/CartPole-v1", 0, s, s) for s in range(1, 9)}
        for first in ([1, 2, 3, 4], [1, 3, 2, 4], [2, 1, 4, 3], [5, 6, 7, 8]):
            extra = [("gym/CartPole-v1", 0, s, s) for s in range(1, 9) if s not in first][:2]
            ended = [0]

            def parent(rec, extra=extra, ended=ended):
                ended[0] += 1
                return extra if ended[0] == 2 else []

            records = runner.run_batch([("gym/CartPole-v1", 0, s, s) for s in first], on_record=parent)
            assert sorted(r["seed"] for r in records) == sorted(first + [u[3] for u in extra]), first
            _played_as_alone(records, alone)
    finally:
        runner.close()


def test_settings_are_checked_once_by_the_library_and_reworded_by_the_cli(tmp_path, capsys):
    """EvalConfig.check names the setting as the library knows it; the command line says its flag."""
    from polar_bench.commands.evaluate import FLAGS
    from polar_bench.errors import OptionError
    from polar_bench.evaluate import EvalConfig
    from polar_bench.suite import load_suite

    suite = load_suite(TINY)
    cfg = EvalConfig(suite=suite, agent_path="a.py", out=str(tmp_path / "r.json"), tasks=list(suite.tasks),
                     runs=suite.runs, agent_processes=2, in_process=True)
    with pytest.raises(OptionError) as info:
        cfg.check()
    assert info.value.option == "agent_processes" and "--" not in str(info.value)
    assert str(info.value.in_words_of(FLAGS)) == ("--agent-processes needs agent processes; drop --in-process or "
                                                  "--agent-processes")
    agent = write(tmp_path / "agent.py", GOOD_AGENT)
    for flags, message in ((["--agent-threads", "300"], "--agent-threads must be at most 256, got 300"),
                           (["--workers", "0"], "--workers must be at least 1, got 0"),
                           (["--agent-disk", "0"], "--agent-disk must be at least 1, got 0")):
        code, _, err = run_cli(["evaluate", agent, "--suite", TINY, "--out", str(tmp_path / "r.json"), *flags], capsys)
        assert code == 2 and err.strip() == f"error: {message}", err
    assert not (tmp_path / "r.episodes.jsonl").exists()
