"""Agents that try to exhaust the machine: memory across a process tree, the private folder's disk,
many small files. Each is held to its limit: its own episode ends as a recorded agent error (or the
agent's own error, for a refused write), every other episode plays as the honest agent's, and the
results and journal are complete.

The attacks fire on one seed only (the first episode of run 0), so "the rest is unaffected" is
checked against the honest agent, episode by episode."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from polar_bench.cli import main
from polar_bench.lockdown.limits import TreeLimits
from polar_bench.results import read_results

HERE = Path(__file__).parent
TINY = str(HERE / "data" / "suites" / "tiny.toml")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the limits are Linux's")

AGENT = """
import os
import time

import numpy as np

AGENT_INFO = {"name": "hog", "oom_score_adj": open("/proc/self/oom_score_adj").read().strip()}

def touch(mb):
    block = bytearray(mb << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    return block

def child_holding(mb):
    if os.fork() == 0:
        try:
            held = touch(mb)
            time.sleep(60)
            del held
        finally:
            os._exit(0)

def attack():
    ATTACK

class Agent:
    def __init__(self, task, run):
        self.space, self.run = task.action_space, run
    def reset(self, seed):
        self.rng = np.random.default_rng([seed, self.run])
        self.first = self.run == 0 and seed == FIRST_SEED
    def act(self, obs, info):
        if self.first:
            self.first = False
            attack()
        return int(self.rng.integers(self.space.n))

def make_agent(task, run):
    return Agent(task, run)
"""


def _first_seed() -> int:
    from polar_bench.suite import load_suite

    return load_suite(TINY).task("gym/CartPole-v1").seeds[0]


def _agent(tmp_path: Path, name: str, attack: str) -> str:
    body = AGENT.replace("ATTACK", textwrap.indent(textwrap.dedent(attack).strip(), " " * 4).lstrip())
    path = tmp_path / f"{name}.py"
    path.write_text(body.replace("FIRST_SEED", str(_first_seed())))
    return str(path)


def _evaluate(agent: str, out: Path, capsys, *extra: str) -> dict:
    code = main(["evaluate", agent, "--suite", TINY, "--out", str(out), "--workers", "1", "--no-progress",
                 "--envs-per-worker", "1", "--tasks", "gym/CartPole-v1", *extra])
    _, err = capsys.readouterr()
    assert code in (0, 1), err
    return read_results(out).to_json()


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("honest")
    data = _evaluate(_agent(tmp, "honest", "pass"), tmp / "r.json", _NoCapture())
    return {(e["run"], e["seed"]): (e["return"], e["length"], e["digest"]) for e in data["episodes"]}


class _NoCapture:
    @staticmethod
    def readouterr():
        return "", ""


def _check(data: dict, out: Path, honest: dict, attacked_error: str) -> None:
    """The attacked episode failed with ``attacked_error`` in its error; every other one is the honest
    agent's; results and journal hold every episode."""
    episodes = data["episodes"]
    assert len(episodes) == len(honest) == 6
    first = (0, _first_seed())
    by_key = {(e["run"], e["seed"]): e for e in episodes}
    attacked = by_key[first]
    assert attacked["status"] == "agent_error", attacked
    assert attacked_error in attacked["error"], attacked["error"]
    for key, e in by_key.items():
        if key != first:
            assert e["status"] == "ok", e
            assert (e["return"], e["length"], e["digest"]) == honest[key]
    journal = [json.loads(line) for line in out.with_suffix(".episodes.jsonl").read_text().splitlines()[1:]]
    assert len(journal) == 6


def test_a_tree_of_children_over_the_memory_limit_is_an_agent_error(tmp_path, capsys, honest):
    """Four children of 600 MiB each: every one is under the 1.5 GiB limit of its own address space,
    together they are far over the tree's 1.5 GiB."""
    agent = _agent(tmp_path, "tree", """
        for _ in range(4):
            child_holding(600)
        time.sleep(30)
    """)
    out = tmp_path / "r.json"
    data = _evaluate(agent, out, capsys, "--agent-memory", "1536")
    _check(data, out, honest, "agent memory limit of 1.5 GiB exceeded")
    assert data["agent"]["info"]["oom_score_adj"] == "1000"
    layers = data["isolation"]["layers"]
    assert "1.5 GiB" in layers["memory_limit"] and layers["oom_score_adj"].startswith("1000")


def test_siblings_that_push_a_process_just_under_its_limit_over_the_total(tmp_path, capsys, honest):
    """Two children of 400 MiB each, then the agent process takes 900 MiB, just under its own 1 GiB of
    address space: together they are over the tree's 1 GiB."""
    agent = _agent(tmp_path, "siblings", """
        for _ in range(2):
            child_holding(400)
        time.sleep(2)
        own = touch(900)
        time.sleep(30)
    """)
    out = tmp_path / "r.json"
    data = _evaluate(agent, out, capsys, "--agent-memory", "1024")
    _check(data, out, honest, "agent memory limit of 1 GiB exceeded")


def test_a_folder_flood_fails_the_agents_writes_and_nothing_outside(tmp_path, capsys, honest):
    """A 3 GiB file in HOME with a 64 MiB folder: the write fails inside the agent (ENOSPC, or EFBIG
    where the folder is no tmpfs), the agent's own error is recorded, the host's disk never sees it."""
    agent = _agent(tmp_path, "flood", """
        chunk = b"x" * (1 << 20)
        with open(os.path.join(os.environ["HOME"], "flood.bin"), "wb") as fh:
            for _ in range(3 << 10):
                fh.write(chunk)
    """)
    out = tmp_path / "r.json"
    before = os.statvfs("/tmp")
    data = _evaluate(agent, out, capsys, "--agent-disk", "64")
    after = os.statvfs("/tmp")
    _check(data, out, honest, "OSError")
    error = data["episodes"][[(e["run"], e["seed"]) for e in data["episodes"]].index((0, _first_seed()))]["error"]
    assert "No space left on device" in error or "File too large" in error, error
    assert (before.f_bfree - after.f_bfree) * before.f_frsize < 256 << 20  # the flood never reached it
    assert "64 MiB" in data["isolation"]["layers"]["disk_limit"]
    assert data["isolation"]["agent_disk_mb"] == 64


def test_many_small_files_hit_the_folders_file_count(tmp_path, capsys, honest):
    agent = _agent(tmp_path, "files", """
        home = os.environ["HOME"]
        for i in range(200_000):
            open(os.path.join(home, f"f{i}"), "w").close()
    """)
    out = tmp_path / "r.json"
    data = _evaluate(agent, out, capsys, "--agent-disk", "16")
    tmpfs = data["isolation"]["layers"]["disk_limit"].startswith("tmpfs")
    _check(data, out, honest, "No space left on device" if tmpfs else "agent disk limit of 16 MiB exceeded")


# --------------------------------------------------------------------------- without cgroups or tmpfs
def _hog(megabytes: int, folder: str | None = None) -> int:
    """A process group of its own that holds ``megabytes`` (or writes them into ``folder``) and sleeps."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if folder:
                with open(os.path.join(folder, "hog.bin"), "wb") as fh:
                    fh.write(b"x" * (megabytes << 20))
                    fh.flush()
                    os.fsync(fh.fileno())
            else:
                block = bytearray(megabytes << 20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
            time.sleep(60)
        finally:
            os._exit(0)
    return pid


def _ended(pid: int, seconds: float) -> bool:
    """Whether ``pid`` (a child of this process) ends within ``seconds``; it is reaped if so."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        time.sleep(0.05)
    return False


def _reap(pid: int) -> None:
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def test_the_watchdog_holds_a_tree_where_there_is_no_cgroup():
    limits = TreeLimits(64, None, cgroups=False)
    assert limits.memory_layer().startswith("watchdog")
    assert limits.child_config()["cgroup_procs"] is None
    pid = _hog(200)
    try:
        limits.watch(pid)
        assert _ended(pid, 20), "the watchdog did not kill a process group over its memory limit"
        assert limits.reason == "agent memory limit of 64 MiB exceeded"
    finally:
        limits.close()
        _reap(pid)


def test_the_watchdog_adds_up_the_folder_where_there_is_no_tmpfs(tmp_path):
    limits = TreeLimits(None, 8)
    pid = _hog(32, folder=str(tmp_path))
    try:
        limits.watch(pid)
        limits.watch_folder(str(tmp_path))
        assert _ended(pid, 20), "the watchdog did not kill a process over its folder's limit"
        assert limits.reason is not None and limits.reason.startswith("agent disk limit of 8 MiB exceeded")
    finally:
        limits.close()
        _reap(pid)


def test_what_the_agent_prints_is_capped(tmp_path, capfd, honest):
    """An agent that prints 1 MiB a step (60-odd MiB in all) cannot fill the disk that the evaluation's
    stderr is redirected to: each agent process's output stops at 1 MiB, with one line saying so."""
    path = Path(_agent(tmp_path, "loud", "pass"))
    path.write_text(path.read_text().replace("    def act(self, obs, info):\n",
                                             "    def act(self, obs, info):\n        os.write(2, b'x' * (1 << 20))\n"))
    code = main(["evaluate", str(path), "--suite", TINY, "--out", str(tmp_path / "r.json"), "--workers", "1",
                 "--no-progress", "--tasks", "gym/CartPole-v1"])
    _, err = capfd.readouterr()
    assert code == 0
    assert err.count("the rest of its output is dropped") == 1
    assert (1 << 20) <= len(err) < (1 << 20) + 4096  # one agent process played (the probe printed nothing)
    episodes = read_results(tmp_path / "r.json").to_json()["episodes"]
    assert {(e["run"], e["seed"]): (e["return"], e["length"], e["digest"]) for e in episodes} == honest


# --------------------------------------------------------------------------- an artifact's recipe
def test_a_recipe_is_held_to_its_memory_and_disk(tmp_path):
    """A recipe is a submitter's command, run by whoever verifies: a tree over its memory is killed
    with the reason, a file over its disk limit fails to grow (RLIMIT_FSIZE: its folder stays on the
    host's disk, since the rebuilt file is read from it), and the layers say so."""
    from polar_bench.artifacts import run_recipe

    def recipe(name: str, code: str):
        work = tmp_path / name
        work.mkdir()
        done = run_recipe([sys.executable, "-c", code], tmp_path, work, memory_mb=512, disk_mb=64)
        assert done.returncode != 0
        return done, work

    done, _ = recipe("mem", "import os, time\n"
                            "for _ in range(3):\n"
                            "    if os.fork() == 0:\n"
                            "        b = bytearray(300 << 20)\n"
                            "        b[::4096] = b'x' * len(range(0, len(b), 4096))\n"
                            "        time.sleep(60)\n"
                            "time.sleep(60)\n")
    assert done.stderr.rstrip().endswith("recipe memory limit of 512 MiB exceeded"), done.stderr[-500:]

    done, work = recipe("disk", "import os\n"
                                "with open(os.path.join(os.environ['HOME'], 'flood.bin'), 'wb') as fh:\n"
                                "    for _ in range(256):\n"
                                "        fh.write(b'x' * (1 << 20))\n")
    assert "File too large" in done.stderr or "recipe disk limit of 64 MiB exceeded" in done.stderr, done.stderr[-500:]
    assert (work / "home" / "flood.bin").stat().st_size <= 64 << 20
    layers = json.loads([line for line in done.stderr.splitlines()
                         if line.startswith("polar_bench recipe layers: ")][0].split(": ", 1)[1])
    assert layers["disk_limit"].startswith("no file over 64 MiB") and layers["oom_score_adj"].startswith("1000")
