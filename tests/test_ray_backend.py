"""evaluate --backend ray: the same episodes as local processes, the same failure handling, resume
across backends, and episodes retried elsewhere when a node of a (simulated) cluster dies."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from polar_bench.cli import main
from polar_bench.results import read_results

ray = pytest.importorskip("ray")

HERE = Path(__file__).parent
TINY = str(HERE / "data" / "suites" / "tiny.toml")
RANDOM = str(HERE.parent / "examples" / "random_agent.py")


def _episodes(path):
    return [(e["task"], e["run"], e["index"], e["seed"], e["return"], e["length"], e["status"])
            for e in read_results(path).to_json()["episodes"]]


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ref") / "local.json")
    assert main(["evaluate", RANDOM, "--suite", TINY, "--out", out, "--workers", "2", "--no-progress"]) == 0
    return out


def test_same_episodes_as_local_processes(ray_local, local_reference, tmp_path, capsys):
    out = str(tmp_path / "ray.json")
    assert main(["evaluate", RANDOM, "--suite", TINY, "--out", out, "--backend", "ray", "--no-progress"]) == 0
    assert _episodes(out) == _episodes(local_reference)
    cfg = read_results(out).to_json()["config"]
    assert cfg["backend"] == "ray" and cfg["workers"] == 2


def test_failures_are_handled_as_locally(ray_local, tmp_path, capsys):
    """The actors start agent processes on their nodes: an agent that exits, hangs or raises fails its
    own episode, as with local workers. (An actor that dies: see the node-death test.)"""
    from test_evaluate import FAULTY_AGENT, FAULTY_PLUGIN, FAULTY_SUITE, write

    agent = write(tmp_path / "agent.py", FAULTY_AGENT.replace("__SEEDS__", "[10, 11, 12, 13, 14, 15, 16]"))
    plugin = write(tmp_path / "faulty_family.py", FAULTY_PLUGIN)
    suite = write(tmp_path / "faulty.toml", FAULTY_SUITE)
    out = str(tmp_path / "r.json")
    code = main(["evaluate", agent, "--suite", suite, "--out", out, "--backend", "ray", "--step-timeout", "0.5",
                 "--harness-plugin", plugin, "--no-progress"])
    assert code == 1
    eps = {e["seed"]: e for e in read_results(out).to_json()["episodes"]}
    assert [eps[s]["status"] for s in range(10, 17)] == ["ok", "env_error", "agent_error", "agent_error",
                                                          "timeout", "agent_error", "ok"]
    assert "exit code 3" in eps[15]["error"] and read_results(out).to_json()["isolation"]["mode"] == "process"


def test_resume_a_local_journal_on_ray(ray_local, local_reference, tmp_path, capsys):
    out = tmp_path / "r.json"
    journal = tmp_path / "r.episodes.jsonl"
    assert main(["evaluate", RANDOM, "--suite", TINY, "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:4]))  # the header and 3 episodes, as after a kill
    out.unlink()
    assert main(["evaluate", RANDOM, "--suite", TINY, "--out", str(out), "--backend", "ray", "--no-progress"]) == 0
    assert _episodes(str(out)) == _episodes(local_reference)
    keys = [tuple(json.loads(x)[k] for k in ("task", "run", "index")) for x in journal.read_text().splitlines()[1:]]
    assert len(keys) == len(set(keys)) == 10


def test_agent_folder_is_shipped(ray_local, tmp_path, capsys):
    (tmp_path / "weights.json").write_text(json.dumps({"action": 1}))
    (tmp_path / "agent.py").write_text(
        "import json, os\n"
        "W = json.load(open(os.path.join(os.path.dirname(__file__), 'weights.json')))\n"
        "import numpy as np\n"
        "def make_agent(task, run):\n"
        "    class A:\n"
        "        def act(self, obs, info):\n"
        "            return W['action'] if task.action_space.shape == () else np.zeros(1, np.float32)\n"
        "    return A()\n")
    out = str(tmp_path / "r.json")
    assert main(["evaluate", str(tmp_path / "agent.py"), "--suite", TINY, "--out", out, "--backend", "ray",
                 "--episodes", "1", "--no-progress"]) == 0
    assert all(e["status"] == "ok" for e in read_results(out).to_json()["episodes"])


def test_missing_ray_names_the_install_command(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    code = main(["evaluate", RANDOM, "--suite", TINY, "--out", str(tmp_path / "r.json"), "--backend", "ray"])
    assert code == 2
    assert 'pip install "polar_bench[ray]"' in capsys.readouterr().err


def test_address_needs_the_ray_backend(tmp_path, capsys):
    assert main(["evaluate", RANDOM, "--suite", TINY, "--out", str(tmp_path / "r.json"), "--address", "auto"]) == 2
    assert "--address only applies to --backend ray" in capsys.readouterr().err


SLOW_AGENT = """
import time
import numpy as np
def make_agent(task, run):
    class A:
        def reset(self, seed):
            self.rng = np.random.default_rng([seed, run])
        def act(self, obs, info):
            time.sleep(0.006)  # slow enough that a loaded machine removes the node mid-run
            if task.action_space.shape == ():
                return int(self.rng.integers(task.action_space.n))
            return self.rng.uniform(-1, 1, task.action_space.shape).astype(np.float32)
    return A()
"""


def test_node_death_mid_run_retries_its_episodes_elsewhere(tmp_path, capsys):
    """A simulated 3-node cluster (head + 2 workers); one worker node is removed during the run."""
    from ray.cluster_utils import Cluster

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    victim = cluster.add_node(num_cpus=1)
    cluster.add_node(num_cpus=1)  # the two actors are placed on these two nodes
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes()
        agent = tmp_path / "agent.py"
        agent.write_text(SLOW_AGENT)
        ref = str(tmp_path / "ref.json")
        assert main(["evaluate", str(agent), "--suite", TINY, "--out", ref, "--workers", "2", "--episodes", "6",
                     "--no-progress"]) == 0
        out = tmp_path / "r.json"
        journal = tmp_path / "r.episodes.jsonl"
        codes = []
        t = threading.Thread(target=lambda: codes.append(main(
            ["evaluate", str(agent), "--suite", TINY, "--out", str(out), "--backend", "ray", "--workers", "2",
             "--episodes", "6", "--no-progress"])))
        t.start()
        deadline = time.time() + 120
        while time.time() < deadline and (not journal.exists() or journal.read_text().count("\n") < 3):
            time.sleep(0.05)
        cluster.add_node(num_cpus=1)  # a spare node to take over
        cluster.remove_node(victim)
        t.join(timeout=300)
        assert codes == [0]
        assert _episodes(str(out)) == _episodes(ref)
        config = read_results(str(out)).to_json()["config"]
        assert config["replaced_workers"] >= 1  # the loss really hit the run
        assert len(config["worker_losses"]) == config["replaced_workers"] and config["worker_losses"][0]["playing"]
        keys = [tuple(json.loads(x)[k] for k in ("task", "run", "index")) for x in journal.read_text().splitlines()[1:]]
        assert len(keys) == len(set(keys)) == 24
    finally:
        ray.shutdown()
        cluster.shutdown()


SCALE_SUITE = """
[suite]
name = "scale"
version = "0"
seed = 3
runs = 1
episodes = 34
[[domains]]
name = "mixed"
description = "three families at once"
training = "-"
budget = "-"
[[tasks]]
id = "gym/CartPole-v1"
domain = "mixed"
low = { value = 0.0, source = "-", measured = false }
high = { value = 500.0, source = "-", measured = false }
[[tasks]]
id = "babyai/GoToRedBall"
domain = "mixed"
low = { value = 0.0, source = "-", measured = false }
high = { value = 1.0, source = "-", measured = false }
[[tasks]]
id = "procgen/coinrun"
domain = "mixed"
options = { distribution_mode = "easy", start_level = 200, num_levels = 0, max_episode_steps = 300 }
low = { value = 5.0, source = "-", measured = false }
high = { value = 10.0, source = "-", measured = false }
"""


PROBE_AGENT = """
import os
import numpy as np
LIVE = [0]  # agent instances alive in this process: one per environment lane

def make_agent(task, run):
    class A:
        def __init__(self):
            LIVE[0] += 1
        def reset(self, seed):
            self.rng = np.random.default_rng([seed, run])
        def act(self, obs, info):
            return int(self.rng.integers(task.action_space.n))
        def episode_info(self):
            return {"probe": {"pid": os.getpid(), "live": LIVE[0]}}
        def close(self):
            LIVE[0] -= 1
    return A()
"""


def test_heterogeneous_scale_102_environments_at_once_on_three_nodes(tmp_path, capsys):
    """3 actors on 3 simulated nodes, 34 environments each (CartPole, BabyAI, Procgen): 102 at once."""
    from ray.cluster_utils import Cluster

    suite = tmp_path / "scale.toml"
    suite.write_text(SCALE_SUITE)
    agent = tmp_path / "agent.py"
    agent.write_text(PROBE_AGENT)
    ref = str(tmp_path / "ref.json")
    assert main(["evaluate", str(agent), "--suite", str(suite), "--out", ref, "--workers", "2",
                 "--no-progress"]) == 0
    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(3):
        cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes()
        out = str(tmp_path / "r.json")
        assert main(["evaluate", str(agent), "--suite", str(suite), "--out", out, "--backend", "ray",
                     "--workers", "3", "--envs-per-worker", "34", "--no-progress"]) == 0
        assert _episodes(out) == _episodes(ref)
        eps = read_results(out).to_json()["episodes"]
        by_pid: dict = {}
        for e in eps:
            by_pid.setdefault(e["probe"]["pid"], set()).add(e["task"])
            assert e["probe"]["live"] == 34  # every lane of the actor held its own environment and agent
        assert len(by_pid) == 3 and set().union(*by_pid.values()) == {"gym/CartPole-v1", "babyai/GoToRedBall",
                                                                      "procgen/coinrun"}
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU")}
        assert len(nodes) == 3
    finally:
        ray.shutdown()
        cluster.shutdown()
