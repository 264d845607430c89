"""Hostile agents: each attack either has no effect on the recorded results or ends as a clearly
recorded agent failure of its own episode, with the rest of the run going on.

Every hostile agent below plays like ``HONEST`` (random actions seeded by the episode) apart from
its attack, so "no effect" means: the same returns and digests as the honest agent's."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from process_helpers import gone_within

from polar_bench.cli import main
from polar_bench.results import read_results

HERE = Path(__file__).parent
TINY = str(HERE / "data" / "suites" / "tiny.toml")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the agent process layers are Linux's")

HONEST = """
import numpy as np

AGENT_INFO = {"name": "honest"}

class Agent:
    def __init__(self, task, run):
        self.space, self.run = task.action_space, run
    def reset(self, seed):
        self.rng = np.random.default_rng([seed, self.run])
    def act(self, obs, info):
        ATTACK
        if self.space.shape == ():
            return int(self.rng.integers(self.space.n))
        return self.rng.uniform(-1, 1, self.space.shape).astype(np.float32)

def make_agent(task, run):
    return Agent(task, run)
"""


def _write_agent(tmp_path: Path, name: str, attack: str = "pass", prelude: str = "") -> str:
    body = HONEST.replace("ATTACK", textwrap.indent(textwrap.dedent(attack).strip(), " " * 8).lstrip())
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(prelude) + body)
    return str(path)


def _evaluate(agent: str, out: Path, capsys, *extra: str) -> tuple[int, list[dict], dict]:
    code = main(["evaluate", agent, "--suite", TINY, "--out", str(out), "--workers", "1", "--no-progress",
                 "--tasks", "gym/CartPole-v1", *extra])
    _, err = capsys.readouterr()
    assert code in (0, 1), err
    data = read_results(out).to_json()
    return code, data["episodes"], data


def _outcome(episodes: list[dict]) -> list[tuple]:
    return [(e["run"], e["seed"], e["return"], e["length"], e.get("digest")) for e in episodes]


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("honest")
    agent = _write_agent(tmp, "honest")
    code = main(["evaluate", agent, "--suite", TINY, "--out", str(tmp / "r.json"), "--workers", "1",
                 "--no-progress", "--tasks", "gym/CartPole-v1"])
    assert code == 0
    return _outcome(read_results(tmp / "r.json").to_json()["episodes"])


def test_patching_the_environment_class_at_import_changes_nothing(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "patch", prelude="""
        from gymnasium.envs.classic_control import cartpole
        _step = cartpole.CartPoleEnv.step
        def step(self, action):
            obs, _, _, _, info = _step(self, action)
            return obs, 1.0, False, False, info   # reward 1 forever, never falls
        cartpole.CartPoleEnv.step = step
    """)
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys)
    assert code == 0 and _outcome(episodes) == honest
    assert max(e["return"] for e in episodes) < 500  # the patched class never reached the worker's env
    assert data["isolation"]["mode"] == "process"


def test_the_same_patch_in_process_is_what_isolation_prevents(tmp_path, capsys, monkeypatch, honest):
    """The control: with --in-process the patch does reach the environment (and the results say so).
    One in-process worker is this test's own process: the patch is undone after it (monkeypatch), or
    every later test's CartPole would never fall."""
    from gymnasium.envs.classic_control import cartpole

    monkeypatch.setattr(cartpole.CartPoleEnv, "step", cartpole.CartPoleEnv.step)
    agent = _write_agent(tmp_path, "patch", prelude="""
        from gymnasium.envs.classic_control import cartpole
        _step = cartpole.CartPoleEnv.step
        def step(self, action):
            obs, _, _, _, info = _step(self, action)
            return obs, 1.0, False, False, info
        cartpole.CartPoleEnv.step = step
    """)
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys, "--in-process")
    assert all(e["return"] == 500.0 for e in episodes)
    assert data["isolation"] == {**data["isolation"], "mode": "in-process", "submittable": False}


def test_walking_gc_to_the_environment_finds_nothing(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "gcwalk", attack="""
        import gc
        for obj in gc.get_objects():
            if type(obj).__name__ == "CartPoleEnv":
                obj.state = obj.state * 0  # set the pole upright before every action
    """)
    code, episodes, _ = _evaluate(agent, tmp_path / "r.json", capsys)
    assert code == 0 and _outcome(episodes) == honest


def test_writing_the_journal_is_refused(tmp_path, capsys, honest):
    out = tmp_path / "r.json"
    journal = tmp_path / "r.episodes.jsonl"
    forged = {"task": "gym/CartPole-v1", "run": 0, "index": 0, "seed": 0, "return": 500.0, "length": 500,
              "status": "ok"}
    agent = _write_agent(tmp_path, "journal", attack=f"""
        try:
            with open({str(journal)!r}, "a") as fh:
                fh.write({json.dumps(json.dumps(forged))} + "\\n")
        except OSError:
            pass
        try:
            open({str(tmp_path / "planted.txt")!r}, "w").write("x")
        except OSError:
            pass
    """)
    code, episodes, _ = _evaluate(agent, out, capsys)
    assert code == 0 and _outcome(episodes) == honest
    assert "500.0" not in journal.read_text() and not (tmp_path / "planted.txt").exists()


def test_killing_the_worker_is_an_agent_error_and_the_run_goes_on(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "kill", attack="""
        import os, signal
        self.n = getattr(self, "n", 0) + 1
        if self.n == 30:  # once in a while, without touching the random stream
            os.kill(os.getppid(), signal.SIGKILL)
    """)
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys)
    failed = [e for e in episodes if e["status"] != "ok"]
    assert failed and all(e["status"] == "agent_error" and "PermissionError" in e["error"] for e in failed)
    assert len(episodes) == len(honest) and data["config"]["replaced_workers"] == 0


def test_writing_the_workers_memory_is_refused(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "procmem", attack="""
        with open(f"/proc/{__import__('os').getppid()}/mem", "r+b") as fh:
            fh.seek(0x400000)
            fh.write(b"\\x00" * 64)
    """)
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys)
    assert code == 1 and all(e["status"] == "agent_error" for e in episodes)
    assert all("PermissionError" in e["error"] for e in episodes)
    assert data["config"]["replaced_workers"] == 0


def test_a_fork_bomb_is_an_agent_error(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "forkbomb", attack="""
        import os
        self.n = getattr(self, "n", 0) + 1
        if self.n == 30:
            while True:
                os.fork()
    """)
    code, episodes, _ = _evaluate(agent, tmp_path / "r.json", capsys, "--step-timeout", "20")
    failed = [e for e in episodes if e["status"] != "ok"]
    assert failed and all(e["status"] in ("agent_error", "timeout") for e in failed)
    ok = [o for o, e in zip(_outcome(episodes), episodes, strict=True) if e["status"] == "ok"]
    assert ok and set(ok) <= set(honest)


def test_a_20_gb_allocation_is_an_agent_error(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "alloc", attack="""
        import numpy as np
        self.hog = np.ones(20 * 2**30 // 8)
    """)
    code, episodes, _ = _evaluate(agent, tmp_path / "r.json", capsys)
    assert code == 1 and all(e["status"] == "agent_error" and "MemoryError" in e["error"] for e in episodes)


STRAY_PRELUDE = """
    import os, time

    def _stray():
        # a grandchild in a session of its own, its parent gone: it would outlive the agent process
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            pid = os.fork()
            if pid == 0:
                time.sleep(3000)
                os._exit(0)
            os.write(w, str(pid).encode())
            os._exit(0)
        os.close(w)
        pid = int(os.read(r, 32))
        os.close(r)
        return pid

    STRAYS = [_stray()]
"""


def test_processes_the_agent_starts_do_not_outlive_it(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "stray", prelude=STRAY_PRELUDE, attack="""
        if not hasattr(self, "started"):
            self.started = _stray()  # and one from a worker's agent process, while it plays
    """)
    text = Path(agent).read_text().replace("def make_agent(task, run):",
                                           "Agent.episode_info = lambda self: {'stray': self.started}\n\n"
                                           "def make_agent(task, run):")
    Path(agent).write_text(text + "\nAGENT_INFO = {'name': 'stray', 'strays': STRAYS}\n")
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys)
    assert code == 0 and _outcome(episodes) == honest
    strays = set(data["agent"]["info"]["strays"]) | {e["stray"] for e in episodes}
    assert len(strays) >= 2  # the probe's, and at least one of the worker's agent process
    assert all(gone_within(pid, 10) for pid in strays)


def test_sleeping_forever_in_act_is_a_timeout(tmp_path, capsys, honest):
    agent = _write_agent(tmp_path, "sleep", attack="""
        import time
        self.n = getattr(self, "n", 0) + 1
        if self.n == 30:
            time.sleep(1e6)
    """)
    code, episodes, _ = _evaluate(agent, tmp_path / "r.json", capsys, "--step-timeout", "1")
    failed = [e for e in episodes if e["status"] != "ok"]
    assert failed and all(e["status"] == "timeout" and "step timeout of 1 s" in e["error"] for e in failed)
    ok = [o for o, e in zip(_outcome(episodes), episodes, strict=True) if e["status"] == "ok"]
    assert ok and set(ok) <= set(honest)


def test_agent_info_and_layers_come_from_the_agent_process(tmp_path, capsys):
    agent = _write_agent(tmp_path, "info", prelude="""
        import os
        AGENT_INFO_PID = os.getpid()
    """)
    Path(agent).write_text(Path(agent).read_text() + "\nAGENT_INFO = {'name': 'pid', 'pid': os.getpid()}\n")
    _, _, data = _evaluate(agent, tmp_path / "r.json", capsys)
    assert data["agent"]["info"]["pid"] != os.getpid()  # never imported in the trusted process
    layers = data["isolation"]["layers"]
    assert set(layers) >= {"network_namespace", "rlimits", "privileges", "landlock", "seccomp"}


def test_the_network_is_unreachable(tmp_path, capsys):
    agent = _write_agent(tmp_path, "net", attack="""
        import socket
        socket.create_connection(("10.255.255.1", 9), timeout=2)
    """)
    _, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys)
    if not data["isolation"]["layers"]["network_namespace"].startswith("on"):
        pytest.skip("no network namespace on this machine")
    assert all(e["status"] == "agent_error" and "Network is unreachable" in e["error"] for e in episodes)
    assert all("OPENAI_BASE_URL" in e["error"] for e in episodes)  # the error says what to do


def test_only_the_named_llm_endpoint_is_reachable(tmp_path, capsys):
    """With --llm-endpoint, the agent reaches that endpoint (at 127.0.0.1 on its port, forwarded by the
    worker) and nothing else: another port on the same host stays unreachable."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    other_port = other.getsockname()[1]
    served = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(100)
                served.append(data)
                conn.sendall(b"pong:" + data)

    threading.Thread(target=serve, daemon=True).start()
    agent = _write_agent(tmp_path, "llm", attack=f"""
        import socket
        with socket.create_connection(("127.0.0.1", {port}), timeout=10) as s:
            s.sendall(b"ping")
            assert s.recv(100) == b"pong:ping"
        try:
            socket.create_connection(("127.0.0.1", {other_port}), timeout=2)
            raise AssertionError("reached a port that was not named")
        except OSError:
            pass
    """)
    try:
        code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys, "--episodes", "1",
                                         "--llm-endpoint", f"http://127.0.0.1:{port}/v1")
    finally:
        server.close()
        other.close()
    if not data["isolation"]["layers"]["network_namespace"].startswith("on"):
        pytest.skip("no network namespace on this machine")
    assert code == 0, [e.get("error") for e in episodes]
    assert served and set(served) == {b"ping"}
    assert data["isolation"]["llm_endpoint"] == f"127.0.0.1:{port}"
    assert f"127.0.0.1:{port}" in data["isolation"]["layers"]["network_namespace"]


def test_an_agent_process_dies_with_its_worker(tmp_path):
    """A worker killed mid-episode (Ctrl-C kills the workers) must not leave a hung agent behind, nor
    anything the agent started (with no worker left to kill its process group)."""
    import signal
    import subprocess
    import time

    agent = _write_agent(tmp_path, "hang", prelude=STRAY_PRELUDE, attack="""
        import time
        time.sleep(1e6)
    """)
    Path(agent).write_text(Path(agent).read_text() + "\nAGENT_INFO = {'name': 'hang', 'strays': STRAYS}\n")
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        from polar_bench.evaluate.agents import IsolatedAgents
        import polar_bench
        agents = IsolatedAgents({agent!r})
        slot = agents.make(polar_bench.make("gym/CartPole-v1").task_info, 0)
        agents.reset([slot], [1])
        print(agents._proc.pid, agents.info["strays"][0], flush=True)
        agents.act([slot], [[0.0, 0.0, 0.0, 0.0]], [{{}}], None)
    """))
    worker = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pid, stray = map(int, worker.stdout.readline().split())
    time.sleep(2)  # let the act() request reach it (killed before, the agent would just read EOF and exit)
    os.kill(pid, 0)  # the agent process is alive, sleeping in act
    os.kill(stray, 0)  # and so is the process it started in a session of its own
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert gone_within(pid, 10), "the agent process outlived its worker"
    assert gone_within(stray, 10), "a process the agent started outlived its worker"


# ------------------------------------------------------------------------------ the request pipe
def test_requests_carry_plain_data_and_numeric_arrays_only():
    import enum
    import pickle

    import numpy as np

    from polar_bench.evaluate.agent_process import loads_request
    from polar_bench.evaluate.plain import NotPlain, dumps_request, plain_copy

    value = [7, {"observations": [{"glyphs": np.arange(12, dtype=np.int16).reshape(3, 4),
                                   "strided": np.arange(10.0)[::3], "flag": np.bool_(True)}],
                 "infos": [{"seed": 3, "text": "a\udc80", "x": np.float32(1.5), "t": (1, None, b"y")}]}]
    back = loads_request(dumps_request(value))
    obs = back[1]["observations"][0]
    np.testing.assert_array_equal(obs["glyphs"], value[1]["observations"][0]["glyphs"])
    assert obs["glyphs"].dtype == np.int16 and obs["strided"].tolist() == [0.0, 3.0, 6.0, 9.0]
    assert back[1]["infos"][0] == value[1]["infos"][0] and type(back[1]["infos"][0]["x"]) is np.float32

    class Color(enum.IntEnum):
        RED = 1

    for bad in (np.array([object()]), print, {"k": object()}, Color.RED, np.zeros(2, dtype=[("a", "i4")])):
        with pytest.raises(NotPlain):
            dumps_request(bad)
    # what the worker sends instead: the value as the wire format carries it, else its repr
    assert plain_copy({"c": Color.RED, "o": Path("/x")}) == {"c": 1, "o": repr(Path("/x"))}
    assert type(plain_copy(Color.RED)) is int
    # the agent process's unpickler rebuilds numpy values and nothing else
    for hostile in (pickle.dumps(os.system), pickle.dumps(Path("/etc")), pickle.dumps(np.random.default_rng(0))):
        with pytest.raises(pickle.UnpicklingError, match="may not hold"):
            loads_request(hostile)


def test_an_isolated_evaluation_prints_no_warnings(tmp_path, capfd):
    # the agent process and the probe write to the user's terminal: nothing but what matters
    code = main(["evaluate", _write_agent(tmp_path, "quiet"), "--suite", TINY, "--out", str(tmp_path / "r.json"),
                 "--workers", "1", "--no-progress", "--tasks", "gym/CartPole-v1"])
    _, err = capfd.readouterr()
    assert code == 0
    assert "Warning" not in err and "Traceback" not in err, err


THREADS_PRELUDE = """
    import os
    try:
        import torch
    except ImportError:
        torch = None

    def _threads():
        return {"omp": os.environ.get("OMP_NUM_THREADS"), "mkl": os.environ.get("MKL_NUM_THREADS"),
                "openblas": os.environ.get("OPENBLAS_NUM_THREADS"),
                "torch": torch.get_num_threads() if torch is not None else None}
"""


def _threads_agent(tmp_path: Path) -> str:
    agent = _write_agent(tmp_path, "threads", prelude=THREADS_PRELUDE)
    text = Path(agent).read_text().replace("def make_agent(task, run):",
                                           "Agent.episode_info = lambda self: {'threads': _threads()}\n\n"
                                           "def make_agent(task, run):")
    Path(agent).write_text(text + "\nAGENT_INFO = {'name': 'threads', 'threads': _threads()}\n")
    return agent


@pytest.mark.parametrize("flag,expected", [((), 1), (("--agent-threads", "2"), 2)])
def test_the_agent_process_thread_count_is_fixed_and_recorded(tmp_path, capsys, monkeypatch, flag, expected):
    # what the evaluating shell says must not decide it: a verifier's machine has another core count
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("MKL_NUM_THREADS", "5")
    code, episodes, data = _evaluate(_threads_agent(tmp_path), tmp_path / "r.json", capsys, *flag)
    assert code == 0
    assert data["isolation"]["agent_threads"] == expected
    want = {"omp": str(expected), "mkl": str(expected), "openblas": str(expected)}
    seen = [data["agent"]["info"]["threads"]] + [e["threads"] for e in episodes]  # the probe, every episode
    for threads in seen:
        assert {k: threads[k] for k in want} == want
        assert threads["torch"] in (None, expected)  # torch's intra-op pool follows OMP_NUM_THREADS


def test_a_bad_thread_count_is_a_user_error(tmp_path, capsys):
    code = main(["evaluate", _write_agent(tmp_path, "honest"), "--suite", TINY, "--out", str(tmp_path / "r.json"),
                 "--workers", "1", "--no-progress", "--tasks", "gym/CartPole-v1", "--agent-threads", "0"])
    _, err = capsys.readouterr()
    assert code == 2 and "--agent-threads must be at least 1" in err
    assert not (tmp_path / "r.json").exists()


def test_verify_reruns_with_the_recorded_thread_count(tmp_path, capsys):
    """An agent whose play depends on its thread count (as a torch CNN's sampled actions do, in their
    last bits) passes verification only when the re-run has the evaluation's count."""
    from polar_bench.leaderboard.verify import verify

    agent = _write_agent(tmp_path, "threads", prelude="import os\n", attack="""
        if os.environ.get("OMP_NUM_THREADS") == "2":
            return 0  # CartPole: always left, a short episode
    """)
    out = tmp_path / "r.json"
    code = main(["evaluate", agent, "--suite", "v1", "--tasks", "gym/CartPole-v1", "--runs", "1", "--episodes", "2",
                 "--workers", "1", "--no-progress", "--out", str(out), "--agent-threads", "2"])
    assert code == 0, capsys.readouterr().err
    data = read_results(out).to_json()
    assert data["isolation"]["agent_threads"] == 2
    assert all(e["length"] < 20 for e in data["episodes"])  # it played the two-thread way
    record, _ = verify(out, agent, 2, seed=1, workers=1, leaderboard=None, allow_weaker=True, progress=False)
    assert record["status"] == "passed" and record["isolation"]["agent_threads"] == 2
    # the same episodes claimed as a one-thread evaluation: the re-run plays them another way
    claimed = json.loads(out.read_text())
    claimed["isolation"]["agent_threads"] = 1
    claimed.pop("integrity", None)
    other = tmp_path / "claimed.json"
    other.write_text(json.dumps(claimed))
    record, _ = verify(other, agent, 2, seed=1, workers=1, leaderboard=None, allow_weaker=True, progress=False)
    assert record["status"] == "failed"


def test_string_hashes_are_the_same_in_every_agent_process(tmp_path, capsys, monkeypatch):
    """An agent that iterates over a set of strings (whose order follows str hashes, salted per process
    by default) plays the same in the probe, in every worker and in a later verification."""
    import subprocess

    monkeypatch.setenv("PYTHONHASHSEED", "random")  # what the evaluating shell says does not matter
    agent = _write_agent(tmp_path, "hashes", prelude="", attack="pass")
    text = Path(agent).read_text().replace("def make_agent(task, run):",
                                           "Agent.episode_info = lambda self: {'hash': hash('polar')}\n\n"
                                           "def make_agent(task, run):")
    Path(agent).write_text(text + "\nAGENT_INFO = {'name': 'hashes', 'hash': hash('polar')}\n")
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys, "--workers", "2")
    assert code == 0
    fixed = subprocess.run([sys.executable, "-c", "print(hash('polar'))"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "0"}, check=True).stdout.strip()
    assert {data["agent"]["info"]["hash"]} | {e["hash"] for e in episodes} == {int(fixed)}


def _pid_agent(tmp_path: Path, attack: str = "pass") -> str:
    agent = _write_agent(tmp_path, "pids", attack=attack)
    text = Path(agent).read_text().replace("def make_agent(task, run):",
                                           "Agent.episode_info = lambda self: {'pid': __import__('os').getpid()}\n\n"
                                           "def make_agent(task, run):")
    Path(agent).write_text(text)
    return agent


def test_agent_processes_share_the_lanes_and_change_no_episode(tmp_path, capsys, honest):
    """--agent-processes 2: lane i is served by process i % 2, each with agent objects of its own."""
    agent = _pid_agent(tmp_path)
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys, "--agent-processes", "2",
                                     "--envs-per-worker", "4")
    assert code == 0 and _outcome(episodes) == honest
    assert data["isolation"]["agent_processes"] == 2
    assert len({e["pid"] for e in episodes}) == 2 and os.getpid() not in {e["pid"] for e in episodes}
    code, episodes, data = _evaluate(agent, tmp_path / "one.json", capsys, "--envs-per-worker", "4")
    assert code == 0 and data["isolation"]["agent_processes"] == 1 and len({e["pid"] for e in episodes}) == 1


def test_an_agent_process_of_a_pool_that_dies_fails_its_episode_only(tmp_path, capsys, honest):
    # the process that plays run 1's first episode exits at its 5th step, whichever lanes share it
    from polar_bench.suite import episode_seed
    agent = _pid_agent(tmp_path, attack=f"""
        self.n = getattr(self, "n", 0) + 1
        if self.run == 1 and self.seed == {episode_seed(7, "gym/CartPole-v1", 0)} and self.n == 5:
            import os
            os._exit(3)
    """)
    text = Path(agent).read_text().replace("    def reset(self, seed):\n",
                                           "    def reset(self, seed):\n        self.seed, self.n = seed, 0\n")
    Path(agent).write_text(text)
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys, "--agent-processes", "2",
                                     "--envs-per-worker", "4")
    failed = [e for e in episodes if e["status"] != "ok"]
    assert code == 1 and len(failed) == 1 and "exit code 3" in failed[0]["error"]
    assert (failed[0]["run"], failed[0]["index"]) == (1, 0)
    ok = [o for e, o in zip(episodes, _outcome(episodes), strict=True) if e["status"] == "ok"]
    assert ok == [o for o in honest if (o[0], o[1]) != (failed[0]["run"], failed[0]["seed"])]
    assert data["config"]["replaced_workers"] == 0


@pytest.mark.parametrize("flags,message", [(("--agent-processes", "0"), "--agent-processes must be at least 1"),
                                           (("--agent-processes", "2", "--in-process"),
                                            "--agent-processes needs agent processes")])
def test_a_bad_agent_process_count_is_a_user_error(tmp_path, capsys, flags, message):
    code = main(["evaluate", _write_agent(tmp_path, "honest"), "--suite", TINY, "--out", str(tmp_path / "r.json"),
                 "--workers", "1", "--no-progress", "--tasks", "gym/CartPole-v1", *flags])
    _, err = capsys.readouterr()
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


def test_an_agent_process_cannot_kill_the_other_processes_of_its_pool(tmp_path, capsys, honest):
    """With --agent-processes 2 the two agent processes run as the same uid; from Landlock ABI 6 on,
    neither can signal the other (each is a domain of its own). Below it, a killed process ends
    episodes of the same agent as agent errors, and nothing else changes."""
    agent = _write_agent(tmp_path, "siblings", attack="""
        import os, signal
        self.n = getattr(self, "n", 0) + 1
        if self.n == 10:
            me, group = os.getpid(), os.getpgid(0)
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) == me:
                    continue
                try:
                    with open(f"/proc/{entry}/status") as fh:
                        uid = next(line.split()[1] for line in fh if line.startswith("Uid:"))
                    if int(uid) == os.getuid() and os.getpgid(int(entry)) != group:
                        try:
                            os.kill(int(entry), signal.SIGKILL)
                        except PermissionError:
                            self.refused = getattr(self, "refused", 0) + 1
                except (OSError, StopIteration, ValueError):
                    pass
    """)
    text = Path(agent).read_text().replace("def make_agent(task, run):",
                                           "Agent.episode_info = lambda self: {'refused': getattr(self, 'refused', 0)}"
                                           "\n\ndef make_agent(task, run):")
    Path(agent).write_text(text)
    code, episodes, data = _evaluate(agent, tmp_path / "r.json", capsys, "--agent-processes", "2",
                                     "--envs-per-worker", "4")
    assert len(episodes) == len(honest) and data["config"]["replaced_workers"] == 0
    assert all(e["status"] in ("ok", "agent_error") for e in episodes)
    ok = [o for e, o in zip(episodes, _outcome(episodes), strict=True) if e["status"] == "ok"]
    assert set(ok) <= set(honest)
    if "no signals" in data["isolation"]["layers"].get("landlock", ""):
        # the other process (and its guardian) was found, and every kill was refused
        assert code == 0 and _outcome(episodes) == honest and max(e["refused"] for e in episodes) >= 1
