"""verify: an unpredictable sample sized by its guarantee, comparison by digest, artifacts; submit's isolation check."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import math
import platform
import shutil
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from test_leaderboard_fixtures import valid_results, write_json

from polar_bench.artifacts import ArtifactError, ensure_artifacts, machine_description
from polar_bench.cli import main
from polar_bench.leaderboard import check_submission, load_entries, verify
from polar_bench.leaderboard.verify import (
    bitwise_across_machines,
    catch_probability,
    draw_sample,
    required_sample,
)
from polar_bench.results import Episode
from polar_bench.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
verify_module = importlib.import_module("polar_bench.leaderboard.verify")  # the package exports the function


def _ep(fields: dict) -> Episode:
    """An episode record from the fields a comparison reads (an ok one unless ``status`` says otherwise)."""
    return Episode.from_json({"task": "gym/CartPole-v1", "run": 0, "seed": 1, "length": 0, "status": "ok", **fields})


def _compare(e: dict, again: dict, *args, **kwargs):
    return verify_module._compare(_ep(e), _ep({"return": None, **again}), *args, **kwargs)


def _differences(e: dict, again: dict, llm_counted: bool) -> list[str]:
    return verify_module._differences(_ep(e), _ep(again), llm_counted)


RANDOM_RESULTS = ROOT / "baselines" / "random" / "results-v1.json"
RANDOM_AGENT = ROOT / "examples" / "random_agent.py"
CARTPOLE = ["gym/CartPole-v1"]


# ---------------------------------------------------------------------------------------------------
# the arithmetic of the guarantee


def test_catch_probability_equals_enumerating_every_sample():
    """1 - C(N-m, n)/C(N, n), checked against all C(N, n) samples of a small population."""
    population, altered = 12, 3
    for n in range(0, 8):
        samples = list(itertools.combinations(range(population), n))
        caught = sum(any(i < altered for i in s) for s in samples)
        assert catch_probability(population, altered, n) == Fraction(caught, len(samples))


def test_required_sample_is_the_smallest_that_meets_the_guarantee():
    for population in (1, 7, 38, 120, 590, 1770):
        n = required_sample(population, 0.05, 0.99)
        m = max(1, math.ceil(0.05 * population))
        assert catch_probability(population, m, n) >= Fraction(99, 100)
        assert n == 1 or catch_probability(population, m, n - 1) < Fraction(99, 100)
    # The full v1 file: 89 of 1,770 altered; sampling without replacement needs fewer than 1 - 0.95^n says.
    n = required_sample(1770, 0.05, 0.99)
    approximation = math.ceil(math.log(0.01) / math.log(0.95))
    assert n == 88 and approximation == 90


def test_required_sample_against_a_simulated_forgery():
    """Alter 5% of 1,770 episodes at random, draw the required sample 20,000 times: caught >= 99%."""
    rng = np.random.default_rng(1)
    population, n = 1770, required_sample(1770, 0.05, 0.99)
    altered = np.zeros(population, bool)
    altered[rng.choice(population, size=89, replace=False)] = True
    caught = np.mean([altered[rng.choice(population, size=n, replace=False)].any() for _ in range(20_000)])
    exact = float(catch_probability(population, 89, n))
    assert abs(caught - exact) < 0.003 and caught > 0.985


def test_the_sample_covers_every_task_and_is_redrawn_only_by_its_seed():
    groups = [f"t{i // 10}" for i in range(200)]  # 20 tasks of 10 episodes
    a = draw_sample(groups, 5, np.random.default_rng(7))
    assert {groups[i] for i in a} == set(groups) and len(a) == len(set(a)) >= 20
    assert a == draw_sample(groups, 5, np.random.default_rng(7))
    assert a != draw_sample(groups, 5, np.random.default_rng(8))
    assert len(draw_sample(groups, 200, np.random.default_rng(7))) == 200


def test_compare_by_digest_exact_or_tolerance():
    sub = {"return": 10.0, "length": 5, "digest": "sha256:" + "a" * 64}
    same = {"status": "ok", "return": 10.0, "length": 5, "digest": "sha256:" + "a" * 64}
    other_path = dict(same, digest="sha256:" + "b" * 64)  # same return, another trajectory
    assert _compare(sub, same, True, 0.0, 100.0) == ("digest", 0.0, True)
    assert _compare(sub, other_path, True, 0.0, 100.0) == ("digest", 0.0, False)
    assert _compare(sub, dict(same, **{"return": 10.0 + 3e-15}), True, 0.0, 100.0)[::2] == ("digest", False)
    # A family whose simulator is not bit for bit the same on every CPU (MuJoCo's): the same return (to
    # 1e-9, relative) and length with other bits is a floating-point match...
    assert _compare(sub, other_path, True, 0.0, 100.0, float_level_ok=True) == ("float", 0.0, True)
    for off in (dict(other_path, **{"return": 10.0 + 3e-15}), dict(same, **{"return": 10.0 + 3e-15})):
        assert _compare(sub, off, True, 0.0, 100.0, float_level_ok=True)[::2] == ("float", True)
    # ... but not a return further off, another length, another harness record or other LLM counts
    for off in (dict(other_path, **{"return": 10.0 + 1e-7}), dict(other_path, length=6)):
        assert _compare(sub, off, True, 0.0, 100.0, float_level_ok=True)[::2] == ("digest", False)
    assert _compare(dict(sub, harness={"success": True}), dict(other_path, harness={"success": False}),
                    True, 0.0, 100.0, float_level_ok=True)[::2] == ("digest", False)
    llm = {"source": "proxy", "calls": 2, "prompt_tokens": 40, "completion_tokens": 4}
    assert _compare(dict(sub, llm=dict(llm, calls=1)), dict(other_path, llm=llm), True, 0.0, 100.0, "return",
                    True, float_level_ok=True)[::2] == ("digest", False)
    assert not bitwise_across_machines("dmc/cheetah-run") and not bitwise_across_machines("mujoco/Hopper-v5")
    assert bitwise_across_machines("gym/CartPole-v1") and bitwise_across_machines("procgen/coinrun")
    assert bitwise_across_machines("nosuchfamily/task")  # unknown: strict
    old = {"return": 10.0, "length": 5}  # a file made before digests
    assert _compare(old, other_path, True, 0.0, 100.0) == ("exact", 0.0, True)
    assert _compare(old, dict(same, **{"return": 10.0 + 3e-15}), True, 0.0, 100.0, float_level_ok=True)[::2] \
        == ("float", True)
    assert _compare(old, dict(same, length=6), True, 0.0, 100.0)[2] is False
    near = dict(other_path, **{"return": 14.0})
    assert _compare(sub, near, False, 0.05, 100.0) == ("tolerance", 0.04, True)
    assert _compare(sub, dict(near, **{"return": 16.0}), False, 0.05, 100.0)[2] is False
    assert _compare(sub, {"status": "timeout"}, True, 0.0, 100.0) == ("digest", None, False)


# ---------------------------------------------------------------------------------------------------
# verify end to end (the random agent on CartPole: fast)


@pytest.fixture()
def board(tmp_path):
    lb = tmp_path / "lb"
    assert main(["submit", str(RANDOM_RESULTS), "--leaderboard", str(lb), "--date", "2026-12-02"]) == 0
    return lb


def test_default_sample_meets_the_guarantee_from_fresh_entropy_and_a_seed_redoes_it(board, monkeypatch):
    drawn = iter([123456789, 987654321])
    module = importlib.import_module("polar_bench.leaderboard.verify")  # the package re-exports a function of that name
    monkeypatch.setattr(module.secrets, "randbits", lambda bits: next(drawn))
    first, entry = verify(RANDOM_RESULTS, RANDOM_AGENT, tasks=CARTPOLE, workers=1, leaderboard=board,
                          progress=False)
    second, _ = verify(RANDOM_RESULTS, RANDOM_AGENT, tasks=CARTPOLE, workers=1, leaderboard=board, progress=False)
    assert (first["seed"], second["seed"]) == (123456789, 987654321)
    keys = [[(r["task"], r["run"], r["seed"]) for r in rec["episodes"]] for rec in (first, second)]
    assert keys[0] != keys[1]
    g = first["guarantee"]
    assert first["population"] == 30 and first["uniform"] == g["required_uniform"] == required_sample(30, 0.05, 0.99)
    assert g["met"] and g["achieved_probability"] >= 0.99
    assert (first["tasks_covered"], first["tasks_total"], first["episodes_total"]) == (1, 38, 1770)  # --tasks said
    # An old file (no digests): returns and lengths compared, and the record says so.
    assert first["passed"]
    assert first["compared_by"] == {"digest": 0, "exact": first["sample"], "float": 0, "tolerance": 0}
    assert "no trajectory digest" in first["notes"][0]
    assert first["isolation"]["mode"] == "process"
    again, _ = verify(RANDOM_RESULTS, RANDOM_AGENT, tasks=CARTPOLE, seed=first["seed"], workers=1, leaderboard=None,
                      progress=False)
    assert [(r["task"], r["run"], r["seed"]) for r in again["episodes"]] == keys[0]
    assert [r["status"] for r in entry.verifications()] == ["passed", "passed"]


def test_an_interrupted_verification_resumes_with_its_seed_and_episodes(board, monkeypatch, capsys):
    """Stopped during its fresh seeds (Ctrl-C, a session's end), verify run again goes on with the seed it
    drew and the episodes it had re-run, records one outcome and removes its work; --restart draws afresh."""
    module = importlib.import_module("polar_bench.leaderboard.verify")
    drawn = iter([111, 222, 333])
    monkeypatch.setattr(module.secrets, "randbits", lambda bits: next(drawn))
    real = module.run_evaluation
    played = []

    def interrupted(cfg):
        if cfg.fresh_seeds is not None:
            raise KeyboardInterrupt
        return real(cfg)

    def watched(cfg):
        journal = Path(cfg.out).with_name(Path(cfg.out).stem + ".episodes.jsonl")
        before = journal.read_text().splitlines() if journal.exists() else []
        out = real(cfg)
        played.append((cfg.fresh_seeds is not None, before, journal.read_text().splitlines()))
        return out

    def folders():
        return [p for p in module.work_root().iterdir() if p.is_dir()]

    monkeypatch.setattr(module, "run_evaluation", interrupted)
    with pytest.raises(KeyboardInterrupt):
        verify(RANDOM_RESULTS, RANDOM_AGENT, tasks=CARTPOLE, workers=1, leaderboard=board, progress=False)
    [folder] = folders()
    assert json.loads((folder / "state.json").read_text())["seed"] == 111
    kept = (folder / "rerun.episodes.jsonl").read_text().splitlines()
    assert len(kept) == 1 + required_sample(30, 0.05, 0.99)  # the header and every sampled episode
    capsys.readouterr()

    monkeypatch.setattr(module, "run_evaluation", watched)
    record, entry = verify(RANDOM_RESULTS, RANDOM_AGENT, tasks=CARTPOLE, workers=1, leaderboard=board,
                           progress=False)
    assert "resuming the verification" in capsys.readouterr().err
    assert record["seed"] == 111 and record["passed"] and record["generalization"] is not None
    (fresh0, before, after), (fresh1, _, _) = played
    assert (fresh0, fresh1) == (False, True) and before == after == kept  # the sample was not played again
    assert [r["status"] for r in entry.verifications()] == ["passed"]  # the interrupted one recorded nothing
    assert list(module.work_root().iterdir()) == []  # recorded: the work is gone; the next verify draws afresh

    monkeypatch.setattr(module, "run_evaluation", interrupted)
    with pytest.raises(KeyboardInterrupt):
        verify(RANDOM_RESULTS, RANDOM_AGENT, tasks=CARTPOLE, workers=1, leaderboard=None, progress=False)
    monkeypatch.setattr(module, "run_evaluation", real)
    record, _ = verify(RANDOM_RESULTS, RANDOM_AGENT, tasks=CARTPOLE, workers=1, leaderboard=None, progress=False,
                       restart=True)
    assert record["seed"] == 333 and "resuming" not in capsys.readouterr().err


def test_one_verification_at_a_time_per_work_folder(tmp_path):
    """Two verifies of the same file, agent and options would write one journal: the second is refused."""
    module = importlib.import_module("polar_bench.leaderboard.verify")
    identity = {"results_sha256": "0" * 64, "agent_sha256": "1" * 64}
    first = module._Work(identity, 7, restart=False)
    try:
        with pytest.raises(module.UserError, match="another verify of the same file"):
            module._Work(identity, 7, restart=False)
    finally:
        first.close()
    again = module._Work(identity, None, restart=False)  # released: it resumes the seed drawn by the first
    assert (again.seed, again.resumed is not None) == (7, True)
    again.finish()
    assert list(module.work_root().iterdir()) == []  # the folder and its lock file are gone


def test_digests_are_compared_and_a_smaller_sample_needs_allow_weaker(tmp_path, capsys):
    """Digests taken from a re-run are put into a copy of the file; one altered digest (same return)
    is a mismatch, found by its digest."""
    code = main(["verify", str(RANDOM_RESULTS), "--agent", str(RANDOM_AGENT), "--tasks", *CARTPOLE, "--sample", "3"])
    assert code == 2 and "--allow-weaker" in capsys.readouterr().err
    record, _ = verify(RANDOM_RESULTS, RANDOM_AGENT, 3, seed=5, tasks=CARTPOLE, workers=1, leaderboard=None,
                       allow_weaker=True, progress=False)
    assert not record["guarantee"]["met"] and record["guarantee"]["achieved_probability"] < 0.99
    assert record["sample"] == 3
    digests = {(r["task"], r["run"], r["seed"]): r["rerun_digest"] for r in record["episodes"]}
    data = json.loads(RANDOM_RESULTS.read_text())
    for ep in data["episodes"]:
        key = (ep["task"], ep["run"], ep["seed"])
        if key in digests:
            ep["digest"] = digests[key]
    forged = next(ep for ep in data["episodes"] if (ep["task"], ep["run"], ep["seed"]) in digests)
    forged["digest"] = "sha256:" + "0" * 64
    path = write_json(tmp_path / "with_digests.json", data)
    capsys.readouterr()
    code = main(["verify", str(path), "--agent", str(RANDOM_AGENT), "--tasks", *CARTPOLE, "--sample", "3",
                 "--allow-weaker", "--seed", "5", "--workers", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED: 2 of 3" in out and "(by digest)" in out and "3 by digest" in out


# ---------------------------------------------------------------------------------------------------
# artifacts


def _agent_with_manifest(tmp_path: Path, manifest: dict) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    shutil.copy(RANDOM_AGENT, folder / "agent.py")  # the same bytes: the results' SHA-256
    (folder / "artifacts.json").write_text(json.dumps(manifest))
    return folder / "agent.py"


WEIGHTS = b"weights of run 0\n"
WRITE = ["{python}", "-c",
         f"import pathlib, sys; pathlib.Path(sys.argv[1]).parent.mkdir(parents=True, exist_ok=True); "
         f"pathlib.Path(sys.argv[1]).write_bytes({WEIGHTS!r})", "{path}"]


def test_a_missing_artifact_is_rebuilt_and_checked_then_a_changed_one_is_refused(tmp_path):
    sha = hashlib.sha256(WEIGHTS).hexdigest()
    agent = _agent_with_manifest(tmp_path, {"format": 1, "recipes": {"write": {"command": WRITE}}, "artifacts": [
        {"path": "ckpt/cartpole/run0.bin", "sha256": sha, "task": "gym/CartPole-v1", "run": 0, "recipe": "write"},
        {"path": "ckpt/pendulum/run0.bin", "sha256": "f" * 64, "task": "gym/Pendulum-v1", "run": 0},
        {"path": "ckpt/skill/run1.bin", "sha256": "e" * 64, "run": 1, "tasks": ["gym/Acrobot-v1", "gym/Pendulum-v1"]}]})
    target = agent.parent / "ckpt" / "cartpole" / "run0.bin"
    rows = ensure_artifacts(agent, [("gym/CartPole-v1", 0)], log=lambda _: None)  # Pendulum's not needed
    [row] = rows
    assert {k: row[k] for k in ("path", "sha256", "status")} == {"path": "ckpt/cartpole/run0.bin", "sha256": sha,
                                                                 "status": "rebuilt"}
    if sys.platform.startswith("linux"):  # the recipe ran locked down, and the row says how
        assert set(row["recipe_layers"]) >= {"network_namespace", "rlimits", "privileges", "landlock", "seccomp"}
    assert target.read_bytes() == WEIGHTS
    assert ensure_artifacts(agent, [("gym/CartPole-v1", 0)])[0]["status"] == "checked"
    target.write_bytes(b"other weights\n")
    with pytest.raises(ArtifactError, match="differs from the manifest's"):
        ensure_artifacts(agent, [("gym/CartPole-v1", 0)])
    with pytest.raises(ArtifactError, match="pendulum/run0.bin is missing and its manifest gives no recipe"):
        ensure_artifacts(agent, [("gym/Pendulum-v1", 0)])
    with pytest.raises(ArtifactError, match="skill/run1.bin is missing"):  # needed by another task's run 1
        ensure_artifacts(agent, [("gym/Acrobot-v1", 1)])
    assert ensure_artifacts(agent, [("gym/Acrobot-v1", 0), ("gym/CartPole-v1", 1)]) == []


RUN_WEIGHTS = ["{python}", "-c",  # run 1 fails at once, the others write their weights after 2 s
               "import pathlib, sys, time; r = int(sys.argv[2]); r == 1 and sys.exit('no weights for run 1'); "
               "time.sleep(2); pathlib.Path(sys.argv[1]).write_bytes(b'run %d' % r)", "{path}", "{run}"]


def test_missing_artifacts_are_rebuilt_workers_at_a_time_and_a_failure_keeps_the_finished_ones(tmp_path,
                                                                                                monkeypatch):
    """A verifier without the store rebuilds a whole entry (a v2 PPO entry: 245 retrains): `workers`
    recipes run at once. When one fails, those running finish and are placed, and no other starts."""
    module = importlib.import_module("polar_bench.artifacts")
    real, active, most = module._rebuild, [0], [0]

    def counted(*args, **kwargs):
        active[0] += 1
        most[0] = max(most[0], active[0])
        try:
            return real(*args, **kwargs)
        finally:
            active[0] -= 1

    monkeypatch.setattr(module, "_rebuild", counted)

    def agent(runs: list[int], name: str) -> Path:
        (tmp_path / name).mkdir()
        arts = [{"path": f"ckpt/run{r}.bin", "sha256": hashlib.sha256(b"run %d" % r).hexdigest(),
                 "task": "gym/CartPole-v1", "run": r, "recipe": "w"} for r in runs]
        return _agent_with_manifest(tmp_path / name, {"format": 1, "recipes": {"w": {"command": RUN_WEIGHTS}},
                                                      "artifacts": arts})

    ok = agent([0, 2, 3], "ok")
    rows = ensure_artifacts(ok, None, log=lambda _: None, workers=2)
    assert [(r["path"], r["status"]) for r in rows] == [(f"ckpt/run{r}.bin", "rebuilt") for r in (0, 2, 3)]
    assert most[0] == 2 and active[0] == 0
    assert [(ok.parent / "ckpt" / f"run{r}.bin").read_bytes() for r in (0, 2, 3)] == [b"run 0", b"run 2", b"run 3"]

    most[0] = 0
    bad = agent([1, 4, 5, 6, 7], "bad")  # runs the store does not hold yet (0, 2 and 3 it now has)
    with pytest.raises(ArtifactError, match=r"run1.bin is missing and its rebuild failed .*no weights for run 1"):
        ensure_artifacts(bad, None, log=lambda _: None, workers=2)
    assert (bad.parent / "ckpt" / "run4.bin").read_bytes() == b"run 4"  # finished beside the failure: kept
    assert not any((bad.parent / "ckpt" / f"run{r}.bin").exists() for r in (5, 6, 7))  # never started
    assert most[0] == 2
    most[0] = 0
    for r in (2, 3):
        (ok.parent / "ckpt" / f"run{r}.bin").unlink()
    rows = ensure_artifacts(ok, None, log=lambda _: None, store="none")  # no store; workers=1: one at a time
    assert [r["status"] for r in rows] == ["checked", "rebuilt", "rebuilt"] and most[0] == 1


TASK_WEIGHTS = ["{python}", "-c", "import pathlib, sys; pathlib.Path(sys.argv[1]).write_bytes(sys.argv[2].encode() "
                "+ b' run ' + sys.argv[3].encode())", "{path}", "{task}", "{run}"]


def test_a_verification_that_must_rebuild_goes_in_stages_and_a_stop_keeps_the_stages_played(tmp_path, board,
                                                                                            monkeypatch, capsys):
    """A verifier without the artifacts rebuilds a few, plays their tasks' sampled and fresh episodes into
    the journals, then goes on: stopped in the second stage's rebuilds, the same command rebuilds and
    plays only what the first stage did not, and records one outcome over all of it."""
    module = importlib.import_module("polar_bench.leaderboard.verify")
    tasks = ["gym/CartPole-v1", "gym/Acrobot-v1"]
    arts = [{"path": f"ckpt/{t.split('/')[1]}/run{r}.bin", "task": t, "run": r, "recipe": "w",
             "sha256": hashlib.sha256(f"{t} run {r}".encode()).hexdigest()} for t in tasks for r in range(3)]
    agent = _agent_with_manifest(tmp_path, {"format": 1, "recipes": {"w": {"command": TASK_WEIGHTS}},
                                            "artifacts": arts})
    # a stage closes once it holds 2 rebuilds per worker: with one worker CartPole's 3 runs, then Acrobot's
    # (suite order: CartPole first); with two, both tasks' 6
    monkeypatch.setattr(module, "STAGE_REBUILDS_PER_WORKER", 2)
    units = {(t, r) for t in tasks for r in range(3)}
    order = load_suite("v1").task_ids
    assert module._stages(agent, order, units, "none", 1) == [[tasks[0]], [tasks[1]]]
    assert module._stages(agent, order, units, "none", 2) == [tasks]

    with pytest.raises(ArtifactError, match="CartPole-v1/run0.bin is missing"):  # --no-rebuild: not staged,
        verify(RANDOM_RESULTS, agent, tasks=tasks, workers=1, leaderboard=None, progress=False,
               artifact_store="none", rebuild=False)
    assert list(module.work_root().iterdir()) == []  # so it failed before playing anything, and kept nothing

    real_ensure, calls = module.ensure_artifacts, []

    def stopped_in_stage_two(agent_path, units, **kwargs):
        calls.append(sorted({t for t, _ in units}))
        if len(calls) == 2:
            raise KeyboardInterrupt  # a session's end, during the second stage's rebuilds
        return real_ensure(agent_path, units, **kwargs)

    monkeypatch.setattr(module, "ensure_artifacts", stopped_in_stage_two)
    with pytest.raises(KeyboardInterrupt):
        verify(RANDOM_RESULTS, agent, tasks=tasks, workers=1, leaderboard=board, progress=False,
               artifact_store="none")
    assert "stage 1 of 2: gym/CartPole-v1" in capsys.readouterr().out
    assert calls == [[tasks[0]], [tasks[1]]]
    assert sorted(p.name for p in (agent.parent / "ckpt").iterdir()) == ["CartPole-v1"]  # stage 2 built nothing
    [folder] = [p for p in module.work_root().iterdir() if p.is_dir()]

    def journaled(name: str) -> list[tuple]:  # a stage that needs more pinned files adds a header line
        lines = (folder / name).read_text().splitlines()
        return [(r["task"], r["run"], r["index"]) for r in map(json.loads, lines) if "journal" not in r]

    first_rerun, first_fresh = journaled("rerun.episodes.jsonl"), journaled("fresh.episodes.jsonl")
    started = json.loads((folder / "state.json").read_text())["started"]
    assert first_rerun and {k[0] for k in first_rerun} == {tasks[0]}  # stage 1's sample, played
    assert {(k[0], k[1]) for k in first_fresh} == {(tasks[0], r) for r in range(3)}  # and its fresh seeds

    monkeypatch.setattr(module, "ensure_artifacts", real_ensure)
    # stage 2's artifacts cannot be had (no rebuilds allowed): recorded, and stage 1's episodes stay
    with pytest.raises(ArtifactError, match="Acrobot-v1/run0.bin is missing"):
        verify(RANDOM_RESULTS, agent, tasks=tasks, workers=1, leaderboard=board, progress=False,
               artifact_store="none", rebuild=False)
    assert "the episodes played so far are kept" in capsys.readouterr().err
    assert journaled("rerun.episodes.jsonl") == first_rerun and journaled("fresh.episodes.jsonl") == first_fresh
    real_run, replayed = module.run_evaluation, []

    def watched(cfg):
        journal = Path(cfg.out).with_name(Path(cfg.out).stem + ".episodes.jsonl")
        before = len(journal.read_text().splitlines())
        out = real_run(cfg)
        replayed.extend(r["task"] for r in map(json.loads, journal.read_text().splitlines()[before:])
                        if "journal" not in r)
        return out

    monkeypatch.setattr(module, "run_evaluation", watched)
    record, entry = verify(RANDOM_RESULTS, agent, tasks=tasks, workers=1, leaderboard=board, progress=False,
                           artifact_store="none")
    assert replayed and set(replayed) == {tasks[1]}  # nothing of stage 1 was played again
    assert record["passed"] and record["generalization"]["passed"]
    assert record["resumed_from"] == started and started  # the record says it went on from an earlier start
    # the artifacts of what remained to play: CartPole's episodes were all in the journals, so its files
    # (kept on disk) were not needed again; Acrobot's were built
    assert [(r["path"], r["status"]) for r in record["artifacts"]] == [
        (f"ckpt/Acrobot-v1/run{r}.bin", "rebuilt") for r in range(3)]
    assert {r["task"] for r in record["episodes"]} == set(tasks)
    fresh_played = {(e["task"], e["run"]) for e in record["generalization"]["episodes"]}
    assert fresh_played == units
    assert [r["status"] for r in entry.verifications()] == ["not_verifiable", "passed"]
    assert list(module.work_root().iterdir()) == []


def test_a_rebuild_that_does_not_reproduce_the_file_is_set_aside(tmp_path):
    agent = _agent_with_manifest(tmp_path, {"format": 1, "recipes": {"write": {"command": WRITE}}, "artifacts": [
        {"path": "run0.bin", "sha256": "0" * 64, "recipe": "write"}]})
    with pytest.raises(ArtifactError, match="not bit-for-bit reproducible") as err:
        ensure_artifacts(agent, None, log=lambda _: None)
    assert not (agent.parent / "run0.bin").exists() and (agent.parent / "run0.bin.rejected").is_file()
    # the error names this machine, and where the pinned file was built when the manifest says so
    assert machine_description() in str(err.value) and "does not say where the pinned file was built" in str(err.value)
    (agent.parent / "run0.bin.rejected").unlink()
    pinned_on = "Some CPU, x86_64 family 25 model 17, AVX-512"
    (agent.parent / "artifacts.json").write_text(json.dumps({"format": 1, "recipes": {"write": {"command": WRITE}},
        "artifacts": [{"path": "run0.bin", "sha256": "0" * 64, "recipe": "write", "built_on": pinned_on}]}))
    with pytest.raises(ArtifactError, match=f"built on: {pinned_on}; .* verify on a machine like the one"):
        ensure_artifacts(agent, None, log=lambda _: None)
    (agent.parent / "artifacts.json").write_text(json.dumps({"format": 1, "recipes": {}, "artifacts": [
        {"path": "run0.bin", "sha256": "0" * 64, "built_on": 25}]}))
    with pytest.raises(ArtifactError, match=r"built_on must be a string or null"):
        ensure_artifacts(agent, None, log=lambda _: None)


def test_machine_description_names_the_cpu_and_its_widest_simd():
    text = machine_description()
    assert text and "\n" not in text
    if Path("/proc/cpuinfo").is_file() and platform.machine() == "x86_64":
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        assert " family " in text and " model " in text
        assert text.endswith("AVX-512" if " avx512f" in flags else "AVX2 (no AVX-512)" if " avx2" in flags
                             else "no AVX2")


HOSTILE_RECIPE = """
import json, os, pathlib, signal, socket, sys
out, target, outside, port, victim = sys.argv[1:6]
tried = {}
def attempt(name, fn):
    try:
        fn()
        tried[name] = "done"
    except OSError as exc:
        tried[name] = type(exc).__name__
attempt("write_target", lambda: pathlib.Path(target).write_bytes(b"planted"))
attempt("write_outside", lambda: pathlib.Path(outside).write_bytes(b"planted"))
attempt("connect", lambda: socket.create_connection(("127.0.0.1", int(port)), timeout=2).close())
attempt("kill", lambda: os.kill(int(victim), signal.SIGKILL))
tried["secret"] = os.environ.get("POLAR_BENCH_TEST_SECRET")
import subprocess, time  # a process left behind, holding the output pipe: it must not keep verify waiting
tried["left_behind"] = subprocess.Popen(["sleep", "300"], start_new_session=True).pid
print("x" * 200_000)  # a flood of output: only its head and tail are kept
tried["home"] = os.environ["HOME"]
pathlib.Path(out).write_text(json.dumps(tried))
"""


def test_a_recipe_runs_locked_down_and_only_its_file_comes_out(tmp_path, monkeypatch):
    """A recipe is the submitter's code run by the verifier: it can write its file and nothing else,
    reach no network, signal no process, and does not see the verifier's environment."""
    import socket
    import subprocess

    if not sys.platform.startswith("linux"):
        pytest.skip("the lock-down layers are Linux's")
    monkeypatch.setenv("POLAR_BENCH_TEST_SECRET", "token-123")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    victim = subprocess.Popen(["sleep", "60"])
    outside = tmp_path / "outside.txt"
    agent = _agent_with_manifest(tmp_path, {"format": 1, "recipes": {"hostile": {"command": [
        "{python}", "-c", HOSTILE_RECIPE, "{path}", str(tmp_path / "agent" / "run0.bin"), str(outside),
        str(server.getsockname()[1]), str(victim.pid)]}},
        "artifacts": [{"path": "run0.bin", "sha256": "0" * 64, "recipe": "hostile"}]})
    try:
        with pytest.raises(ArtifactError, match="not bit-for-bit reproducible"):
            ensure_artifacts(agent, None, log=lambda _: None)
        assert victim.poll() is None, "the recipe killed a process of the verifier"
    finally:
        victim.kill()
        server.close()
    tried = json.loads((agent.parent / "run0.bin.rejected").read_text())  # what it wrote at {path}
    assert tried["write_target"] != "done" and tried["write_outside"] != "done" and not outside.exists()
    assert tried["connect"] != "done" and tried["kill"] != "done"
    assert tried["secret"] is None and tried["home"].startswith(tempfile.gettempdir())
    left = Path(f"/proc/{tried['left_behind']}/status")

    def still_runs() -> bool:
        try:
            return "State:\tZ" not in left.read_text()
        except OSError:
            return False
    # killed when the recipe exited; on a loaded machine it may take a moment to be scheduled and die
    deadline = time.monotonic() + 10
    while still_runs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not still_runs(), "a process the recipe left behind still runs"
    assert not (agent.parent / "run0.bin").exists()
    assert not list(Path(tempfile.gettempdir()).glob("polar_bench_rebuild_*/out/run0.bin")), "its folder is removed"


def test_an_entry_whose_artifact_cannot_be_had_is_recorded_not_verifiable(tmp_path, board, capsys):
    agent = _agent_with_manifest(tmp_path, {"format": 1, "artifacts": [{"path": "gone.bin", "sha256": "1" * 64}]})
    code = main(["verify", str(RANDOM_RESULTS), "--agent", str(agent), "--tasks", *CARTPOLE,
                 "--leaderboard", str(board), "--workers", "1"])
    assert code == 2 and "gone.bin is missing" in capsys.readouterr().err
    [entry] = load_entries(board)
    [record] = entry.verifications()
    assert record["status"] == "not_verifiable" and "gone.bin" in record["reason"] and record["date"]
    assert entry.verification_status == "not_verifiable"


def test_a_malformed_manifest_is_one_clear_error(tmp_path):
    agent = _agent_with_manifest(tmp_path, {"format": 1, "artifacts": [{"path": "/etc/passwd", "sha256": None}]})
    with pytest.raises(ArtifactError, match="must be relative"):
        ensure_artifacts(agent)


# ---------------------------------------------------------------------------------------------------
# submit refuses results made without isolation


@pytest.mark.parametrize("isolation, refused", [(None, False), ({"mode": "process", "layers": {}}, False),
                                                ({"mode": "in-process", "layers": {}}, True)])
def test_submit_refuses_in_process_results(tmp_path, isolation, refused):
    data = valid_results()
    if isolation is not None:
        data["isolation"] = isolation
    _, problems = check_submission(write_json(tmp_path / "r.json", data))
    found = [p for p in problems if p.check == "isolation"]
    assert bool(found) == refused and problems == found
    if refused:
        assert "run evaluate again without --in-process" in str(found[0])


def test_a_rerun_must_bring_back_the_harness_record_the_submission_claims():

    sub = {"return": -5.0, "length": 189, "digest": "d", "status": "ok",
           "harness": {"end_status": "task_successful", "success": True, "depth": 1}}
    same = dict(sub, harness=dict(sub["harness"]))
    forged_back = dict(sub, harness={"end_status": "death", "success": False, "depth": 1})
    assert _compare(sub, same, True, 0.0, 1.0, "success") == ("digest", 0.0, True)
    # Same return, length and trajectory digest, but the submission claimed a success the re-run did not see.
    assert _compare(sub, forged_back, True, 0.0, 1.0, "success") == ("digest", 1.0, False)
    # A stochastic agent is compared on the value the task is scored by, within the tolerance.
    assert _compare(sub, forged_back, False, 0.5, 1.0, "success") == ("tolerance", 1.0, False)
    # Files made before harness records existed: the re-run's new record is not held against them.
    old = {k: v for k, v in sub.items() if k != "harness"}
    assert _compare(old, same, True, 0.0, 1.0, "return")[2] is True


def test_a_rerun_must_bring_back_the_llm_use_the_proxy_counted():
    """The leaderboard's cost column reads the episodes' LLM counts: behind the proxy a deterministic
    agent's re-run makes the same calls with the same tokens, so an edited count is a mismatch."""

    counted = {"calls": 18, "prompt_tokens": 2041, "completion_tokens": 36, "seconds": 4.0, "source": "proxy"}
    sub = {"return": 0.5, "length": 20, "digest": "d", "status": "ok", "llm": counted}
    again = dict(sub, llm=dict(counted, seconds=3.1))  # latency differs from run to run: not compared
    assert _compare(sub, again, True, 0.0, 1.0, llm_counted=True) == ("digest", 0.0, True)
    for key, forged in (("prompt_tokens", 20), ("calls", 1), ("completion_tokens", 0)):
        edited = dict(sub, llm=dict(counted, **{key: forged}))
        assert _compare(edited, again, True, 0.0, 1.0, llm_counted=True)[2] is False, key
        # a file made before the proxy (its agent counted for itself): its counts are not held against it
        assert _compare(edited, again, True, 0.0, 1.0, llm_counted=False)[2] is True, key
    # the count dropped, or claimed as the agent's own: still not what the proxy saw
    assert _compare({k: v for k, v in sub.items() if k != "llm"}, again, True, 0.0, 1.0, llm_counted=True)[2] is False
    assert _compare(dict(sub, llm={"calls": 0, "source": "agent"}), again, True, 0.0, 1.0, llm_counted=True)[2] is False
    # an agent that called no LLM in the re-run: nothing to compare
    assert _compare(dict(sub, llm=None), dict(sub, llm=None), True, 0.0, 1.0, llm_counted=True)[2] is True
    # the mismatch line says what differed

    edited = dict(sub, llm=dict(counted, prompt_tokens=20))
    assert _differences(edited, again, True) == [
        "LLM counts (submitted {'calls': 18, 'prompt_tokens': 20, 'completion_tokens': 36}, "
        "re-run {'calls': 18, 'prompt_tokens': 2041, 'completion_tokens': 36})"]
    assert _differences(dict(sub, digest="x", length=21), again, False) == ["length", "digest"]


def test_the_reruns_timeouts_come_from_the_submission_within_bounds():
    from polar_bench.leaderboard.verify import rerun_timeout

    assert rerun_timeout(60.0, "step_timeout") == 60.0
    assert rerun_timeout(5.0, "step_timeout") == 60.0          # never tighter than evaluate's default
    assert rerun_timeout(300.0, "step_timeout") == 300.0       # a slow LLM agent's own setting
    for unbounded in (None, 1e12, float("inf"), float("nan"), -1.0, 0, True, "60"):
        assert rerun_timeout(unbounded, "step_timeout") == 600.0, unbounded
    assert rerun_timeout(None, "episode_timeout") == 21600.0 and rerun_timeout(7200, "episode_timeout") == 7200.0


def test_an_agent_that_hangs_in_the_rerun_cannot_hang_verify(tmp_path, monkeypatch):
    """A submission made with no step timeout (evaluate --step-timeout 0) whose agent never answers
    when re-run: verify ends the episode at its own cap and records a mismatch."""
    verify_module = importlib.import_module("polar_bench.leaderboard.verify")

    agent = tmp_path / "hangs.py"
    agent.write_text("import time\n\n\ndef make_agent(task_info, run):\n    return Agent()\n\n\n"
                     "class Agent:\n    def reset(self, seed):\n        pass\n\n"
                     "    def act(self, observation, info):\n        time.sleep(1e6)\n")
    data = json.loads(RANDOM_RESULTS.read_text())
    data["agent"]["sha256"] = hashlib.sha256(agent.read_bytes()).hexdigest()
    data["config"]["step_timeout"] = None
    monkeypatch.setitem(verify_module.TIMEOUTS, "step_timeout", (1.0, 2.0))
    record, _ = verify(write_json(tmp_path / "r.json", data), agent, 1, seed=0, tasks=CARTPOLE, workers=1,
                       leaderboard=None, allow_weaker=True, progress=False)
    [row] = record["episodes"]
    assert not record["passed"] and row["rerun_status"] == "timeout"


def test_only_polar_benchs_own_families_get_the_float_level_comparison():
    """A plugin family cannot buy itself the lenient comparison by setting the class attribute, not
    even registered under a built-in prefix."""
    from polar_bench.harness import _LOADED, family_factory, register_family
    from polar_bench.harness.dmc import DMCHarness

    class Lenient(DMCHarness):  # defined here, not in polar_bench.harness
        bitwise_across_machines = False

    bitwise_across_machines.cache_clear()
    try:
        register_family("lenientplugin", Lenient)
        assert bitwise_across_machines("lenientplugin/cheetah-run")
        register_family("dmc", Lenient)
        assert bitwise_across_machines("dmc/cheetah-run")
    finally:
        _LOADED.pop("lenientplugin", None)
        _LOADED.pop("dmc", None)
        bitwise_across_machines.cache_clear()
    assert family_factory("dmc") is DMCHarness and not bitwise_across_machines("dmc/cheetah-run")
