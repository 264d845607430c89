"""The content-addressed artifact store: fetched by SHA-256 before any rebuild, checked like a rebuild."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from polar_bench.artifacts import (
    STORE_ENV,
    ArtifactError,
    ArtifactStore,
    ensure_artifacts,
    fetch_missing_artifacts,
    manifest_path,
    publish_artifacts,
    store_location,
)
from polar_bench.cli import main

WEIGHTS = b"weights of run 0\n"
SHA = hashlib.sha256(WEIGHTS).hexdigest()
WRITE = ["{python}", "-c", f"import pathlib, sys; pathlib.Path(sys.argv[1]).write_bytes({WEIGHTS!r})", "{path}"]
FAIL = ["{python}", "-c", "raise SystemExit('the recipe ran')"]


def _agent(folder: Path, recipe: list[str], size: int | None = len(WEIGHTS)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.py").write_text("def make_agent(task, run): ...\n")
    (folder / "artifacts.json").write_text(json.dumps({"format": 1, "recipes": {"r": {"command": recipe}},
        "artifacts": [{"path": "ckpt/run0.pt", "sha256": SHA, "bytes": size, "task": "gym/CartPole-v1", "run": 0,
                       "recipe": "r"}]}))
    return folder / "agent.py"


@pytest.fixture(params=["folder", "file-url"])
def store(request, tmp_path):
    root = tmp_path / "store"
    return str(root) if request.param == "folder" else root.as_uri()  # file:///...: through fsspec


def _plant(store: str, sha: str, data: bytes) -> None:
    root = Path(store.removeprefix("file://"))
    (root / "sha256" / sha[:2]).mkdir(parents=True, exist_ok=True)
    (root / "sha256" / sha[:2] / sha).write_bytes(data)


def test_a_published_file_is_fetched_by_its_sha256_and_nothing_is_rebuilt(tmp_path, store):
    maintainer = _agent(tmp_path / "maintainer", WRITE)
    (maintainer.parent / "ckpt").mkdir()
    (maintainer.parent / "ckpt/run0.pt").write_bytes(WEIGHTS)
    assert publish_artifacts(maintainer, store, log=lambda _: None) == [
        {"path": "ckpt/run0.pt", "sha256": SHA, "status": "stored"}]
    assert publish_artifacts(maintainer, store, log=lambda _: None)[0]["status"] == "present"
    verifier = _agent(tmp_path / "verifier", FAIL)  # a rebuild would fail: only the store can give it
    [row] = ensure_artifacts(verifier, [("gym/CartPole-v1", 0)], store=store, log=lambda _: None)
    assert row["status"] == "fetched" and (verifier.parent / "ckpt/run0.pt").read_bytes() == WEIGHTS
    assert ensure_artifacts(verifier, [("gym/CartPole-v1", 0)], store=store)[0]["status"] == "checked"


def test_a_store_file_with_other_bytes_is_refused_and_the_rebuild_gives_the_pinned_file(tmp_path, store):
    _plant(store, SHA, b"poisoned weights\n")
    agent = _agent(tmp_path / "agent", WRITE, size=None)
    lines: list[str] = []
    [row] = ensure_artifacts(agent, None, store=store, log=lines.append)
    assert row["status"] == "rebuilt" and (agent.parent / "ckpt/run0.pt").read_bytes() == WEIGHTS
    assert any(line.startswith("refused ckpt/run0.pt from the artifact store") for line in lines)
    assert not list((agent.parent / "ckpt").glob("*.fetching"))
    # without a recipe that can run, wrong bytes from a store are still never placed
    (agent.parent / "ckpt/run0.pt").unlink()
    agent = _agent(tmp_path / "agent", FAIL, size=None)
    with pytest.raises(ArtifactError, match="rebuild failed"):
        ensure_artifacts(agent, None, store=store, log=lambda _: None)
    assert not (agent.parent / "ckpt/run0.pt").exists()


def test_a_file_missing_from_the_store_is_rebuilt_and_then_kept_in_a_local_store(tmp_path):
    store = str(tmp_path / "cache")
    first = _agent(tmp_path / "first", WRITE)
    assert ensure_artifacts(first, None, store=store, log=lambda _: None)[0]["status"] == "rebuilt"
    assert ArtifactStore(store).has(SHA)  # the next verifier on this machine need not rebuild it
    second = _agent(tmp_path / "second", FAIL)
    assert ensure_artifacts(second, None, store=store, log=lambda _: None)[0]["status"] == "fetched"


def test_a_store_that_sends_more_than_the_manifest_declares_is_refused(tmp_path, store):
    _plant(store, SHA, WEIGHTS + b"x" * 100)
    agent = _agent(tmp_path / "agent", FAIL)
    with pytest.raises(ArtifactError, match="sent more than 17 bytes"):
        ensure_artifacts(agent, None, store=store, log=lambda _: None)
    assert not (agent.parent / "ckpt/run0.pt").exists()


def test_the_store_comes_from_the_option_then_the_environment_then_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "env"))
    assert store_location("s3://bucket/x") == "s3://bucket/x"
    assert store_location() == str(tmp_path / "env")
    assert store_location("none") is None
    monkeypatch.delenv(STORE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert store_location() == str(tmp_path / "cache" / "polar_bench" / "artifacts")
    with pytest.raises(ValueError, match="not a SHA-256"):
        ArtifactStore(tmp_path).has("../../etc/passwd")


def test_evaluate_fetches_missing_pinned_files_but_leaves_present_ones(tmp_path, store):
    _plant(store, SHA, WEIGHTS)
    agent = _agent(tmp_path / "agent", FAIL)
    assert fetch_missing_artifacts(agent, [("gym/Acrobot-v1", 0)], store=store, log=lambda _: None) == []
    assert fetch_missing_artifacts(agent, [("gym/CartPole-v1", 0)], store=store, log=lambda _: None) == [
        {"path": "ckpt/run0.pt", "sha256": SHA, "status": "fetched"}]
    (agent.parent / "ckpt/run0.pt").write_bytes(b"the researcher's own weights")
    assert fetch_missing_artifacts(agent, None, store=store, log=lambda _: None) == []
    assert (agent.parent / "ckpt/run0.pt").read_bytes() == b"the researcher's own weights"


def test_an_agent_files_own_manifest_wins_over_the_folders(tmp_path):
    agent = _agent(tmp_path / "agent", FAIL)
    (agent.parent / "agent_v2.py").write_text("")
    assert manifest_path(agent.parent / "agent_v2.py") == agent.parent / "artifacts.json"
    (agent.parent / "agent_v2.artifacts.json").write_text(json.dumps({"format": 1, "artifacts": []}))
    assert manifest_path(agent.parent / "agent_v2.py") == agent.parent / "agent_v2.artifacts.json"
    assert manifest_path(agent) == agent.parent / "artifacts.json"
    assert ensure_artifacts(agent.parent / "agent_v2.py") == []


def test_the_artifacts_command_publishes_and_checks(tmp_path, capsys):
    store = str(tmp_path / "store")
    agent = _agent(tmp_path / "agent", WRITE)
    assert main(["artifacts", "check", str(agent), "--store", store]) == 0
    assert "1 pinned files: 0 checked, 0 fetched, 1 rebuilt" in capsys.readouterr().out
    assert main(["artifacts", "publish", str(agent), "--store", str(tmp_path / "hub")]) == 0
    assert capsys.readouterr().out.startswith("1 stored, 0 already there, 0 not on this disk")
    (agent.parent / "ckpt/run0.pt").write_bytes(b"changed")
    assert main(["artifacts", "publish", str(agent), "--store", str(tmp_path / "hub")]) == 2
    assert "only pinned bytes are published" in capsys.readouterr().err
    assert main(["artifacts", "check", str(tmp_path / "nothing.py")]) == 2
    assert main(["artifacts", "check", str(agent), "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_an_interruption_kills_the_rebuilds_that_are_running_instead_of_waiting_for_them(tmp_path):
    """Ctrl-C in a verify that is rebuilding used to wait for the running retrains (13 min each for an
    Atari run on an Intel Xeon): the pool's exit waited for its threads. The recipes are killed now, so
    the interruption reaches the caller while a recipe that sleeps for 600 s would still be sleeping."""
    import os
    import signal
    import threading

    token = f"polar-bench-test-{os.getpid()}-sleeps"
    agent = _agent(tmp_path / "a", ["{python}", "-c", f"import time; time.sleep(600)  # {token}"])

    def recipe_pids() -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
        return pids

    seen: list[int] = []
    gone = threading.Event()  # the recipe ended within 120 s of the interruption (it sleeps 600 s)

    def interrupt_once_the_recipe_runs() -> None:
        for _ in range(600):
            seen.extend(recipe_pids())
            if seen:
                break
            gone.wait(0.1)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C (a real signal: it wakes the main thread's wait)
        for _ in range(1200):
            if not any(Path(f"/proc/{pid}").exists() for pid in seen):
                gone.set()
                return
            threading.Event().wait(0.1)

    watcher = threading.Thread(target=interrupt_once_the_recipe_runs, daemon=True)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        ensure_artifacts(agent, None, log=lambda _: None, workers=2)
    watcher.join(150)
    assert seen, "the recipe never started"
    assert gone.is_set(), "the interrupted recipe was left running"
    assert recipe_pids() == []


def test_a_recipe_whose_thread_had_not_started_it_when_the_rebuilds_stopped_never_starts(tmp_path):
    """The window the Ctrl-C test cannot hit: a rebuild thread still preparing its folder when the
    interruption killed the running recipes used to start its retrain afterwards, and the caller waited
    the whole retrain for it. The group starts processes under the lock that `stop` takes."""
    from polar_bench.artifacts import RecipeGroup, run_recipe

    group = RecipeGroup()
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    # each writes a file in its own folder (the one place a recipe may write)
    ran = run_recipe([sys.executable, "-c", "open('started', 'w')"], tmp_path / "first", tmp_path / "first",
                     running=group)
    assert ran.returncode == 0 and (tmp_path / "first" / "started").is_file()
    group.stop()
    with pytest.raises(ArtifactError, match="stopped before this recipe started"):
        run_recipe([sys.executable, "-c", "open('started', 'w')"], tmp_path / "second", tmp_path / "second",
                   running=group)
    assert not (tmp_path / "second" / "started").exists()
