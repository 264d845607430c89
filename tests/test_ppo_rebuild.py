"""baselines.ppo.rebuild: byte-stable checkpoints and the artifacts manifest of the PPO agents."""

from __future__ import annotations

import json

import pytest

from baselines.ppo.rebuild import adopt, canonical_bytes, manifest
from polar_bench.artifacts import ArtifactError, ensure_artifacts, machine_description

torch = pytest.importorskip("torch")  # rebuild imports torch only when it runs


def _checkpoint(path, folder: str, weight: float) -> None:
    torch.save({"format": 1, "config": {"checkpoint_dir": f"{folder}/c", "curve_dir": f"{folder}/v",
                                        "log_dir": f"{folder}/l", "seed": 0},
                "network": {"w": torch.full((3, 2), weight)}, "obs_rms": None}, path)


def test_the_same_weights_give_the_same_bytes_whatever_the_folders_and_file_names(tmp_path):
    _checkpoint(tmp_path / "a.pt", "/tmp/polar_bench_ppo_x1", 0.5)
    _checkpoint(tmp_path / "run0.pt", "/tmp/polar_bench_ppo_y2", 0.5)
    assert (tmp_path / "a.pt").read_bytes() != (tmp_path / "run0.pt").read_bytes()
    assert canonical_bytes(tmp_path / "a.pt") == canonical_bytes(tmp_path / "run0.pt")
    _checkpoint(tmp_path / "b.pt", "/tmp/polar_bench_ppo_x1", 0.25)
    assert canonical_bytes(tmp_path / "b.pt") != canonical_bytes(tmp_path / "a.pt")
    (tmp_path / "c.pt").write_bytes(canonical_bytes(tmp_path / "a.pt"))
    assert torch.load(tmp_path / "c.pt", weights_only=True)["config"] == {"seed": 0}


def test_manifest_pins_files_on_disk_and_lists_absent_rebuildable_ones_unpinned(tmp_path):
    ckpt = tmp_path / "checkpoints"
    for task, with_pt in (("gym/CartPole-v1", True), ("procgen/coinrun", False), ("babyai/Synth", False)):
        (ckpt / task).mkdir(parents=True)
        (ckpt / task / "run0.json").write_text("{}")
        if with_pt:
            (ckpt / task / "run0.pt").write_bytes(b"weights")
    data = manifest([(ckpt, "checkpoints/", ("gym", "procgen", "babyai"), "native")])
    rows = {a["task"]: a for a in data["artifacts"]}
    assert set(rows) == {"gym/CartPole-v1", "procgen/coinrun"}  # BabyAI's are committed: absent means absent
    assert rows["gym/CartPole-v1"]["sha256"] and "recipe" not in rows["gym/CartPole-v1"]
    assert rows["procgen/coinrun"] == {"path": "checkpoints/procgen/coinrun/run0.pt", "sha256": None, "bytes": None,
                                       "task": "procgen/coinrun", "run": 0, "recipe": "retrain",
                                       "numerics": "native"}
    assert data["recipes"]["retrain"]["command"][-4:] == ["--numerics", "native", "--to", "{path}"]
    (tmp_path / "agent.py").write_text("")
    (tmp_path / "artifacts.json").write_text(json.dumps(data))
    assert ensure_artifacts(tmp_path / "agent.py", [("gym/CartPole-v1", 0)])[0]["status"] == "checked"
    with pytest.raises(ArtifactError, match="pins no SHA-256"):
        ensure_artifacts(tmp_path / "agent.py", [("procgen/coinrun", 0)])


def test_the_trainers_config_layout_does_not_change_the_bytes(tmp_path):
    """The trainer once stored three output folders in the checkpoint's config, and now stores out_dir
    and the resolved hyperparameters: a rebuilt checkpoint's SHA-256 must not depend on which."""
    _checkpoint(tmp_path / "old.pt", "/tmp/polar_bench_ppo_x1", 0.5)
    torch.save({"format": 1, "config": {"out_dir": "/tmp/polar_bench_ppo_z", "seed": 0, "lr": 3e-4},
                "network": {"w": torch.full((3, 2), 0.5)}, "obs_rms": None}, tmp_path / "new.pt")
    assert canonical_bytes(tmp_path / "old.pt") == canonical_bytes(tmp_path / "new.pt")


def test_adopt_takes_a_sweeps_runs_as_the_bytes_a_rebuild_would_write(tmp_path):
    sweep, out = tmp_path / "sweep", tmp_path / "ppo" / "checkpoints"
    (sweep / "checkpoints/atari/Breakout").mkdir(parents=True)
    (sweep / "curves/atari/Breakout").mkdir(parents=True)
    _checkpoint(sweep / "checkpoints/atari/Breakout/run1.pt", "/tmp/polar_bench_ppo_q", 0.5)
    (sweep / "checkpoints/atari/Breakout/run1.json").write_text('{"eval_return_mean": 4.0}')
    (sweep / "curves/atari/Breakout/run1.csv").write_text("step,return\n")
    # trained natively: not taken into the portable folder (nor anything else of the sweep)
    with pytest.raises(SystemExit, match="trained in the native numeric mode, not avx2-portable"):
        adopt(sweep, out, ["atari"])
    assert not out.exists()
    sidecar = '{"eval_return_mean": 4.0, "numerics": {"mode": "avx2-portable"}}'
    (sweep / "checkpoints/atari/Breakout/run1.json").write_text(sidecar)
    rows = adopt(sweep, out, ["atari"])
    pt = out / "atari/Breakout/run1.pt"
    assert pt.read_bytes() == canonical_bytes(sweep / "checkpoints/atari/Breakout/run1.pt")
    pinned = manifest([(out, "c/", ("atari",), "avx2-portable")])["artifacts"][0]
    assert pinned["numerics"] == "avx2-portable" and pinned["recipe"] == "retrain-portable"
    assert rows == [{"task": "atari/Breakout", "run": 1, "sha256": pinned["sha256"], "numerics": "avx2-portable"}]
    assert (out / "atari/Breakout/run1.json").read_text() == sidecar
    assert (tmp_path / "ppo/curves/atari/Breakout/run1.csv").read_text() == "step,return\n"
    assert adopt(sweep, tmp_path / "other", ["procgen"]) == []  # another family: left alone
    # a seed that no experiment file trains could never be rebuilt, so it is refused
    (sweep / "checkpoints/atari/Breakout/run9.pt").write_bytes(pt.read_bytes())
    with pytest.raises(SystemExit, match="no experiment file trains atari/Breakout run 9"):
        adopt(sweep, out, ["atari"])


def test_rewriting_the_manifest_keeps_the_pins_of_rebuildable_checkpoints_absent_here(tmp_path):
    """A clone without the git-ignored Procgen checkpoints rewrites the manifest (say, after adopting
    new Atari runs): the Procgen rows keep their SHA-256 instead of being unpinned."""
    ckpt = tmp_path / "checkpoints"
    for task in ("procgen/coinrun", "atari/Pong"):
        (ckpt / task).mkdir(parents=True)
        (ckpt / task / "run0.json").write_text("{}")
    (ckpt / "atari/Pong/run0.pt").write_bytes(b"new weights")
    before = {"artifacts": [{"path": "checkpoints/procgen/coinrun/run0.pt", "sha256": "ab" * 32, "bytes": 7,
                             "built_on": "the pinning CPU"},
                            {"path": "checkpoints/atari/Pong/run0.pt", "sha256": "cd" * 32, "bytes": 11,
                             "built_on": "the pinning CPU"}]}
    part = [(ckpt, "checkpoints/", ("procgen", "atari"), "native")]
    rows = {a["task"]: a for a in manifest(part, previous=before)["artifacts"]}
    assert (rows["procgen/coinrun"]["sha256"], rows["procgen/coinrun"]["bytes"]) == ("ab" * 32, 7)
    assert rows["procgen/coinrun"]["built_on"] == "the pinning CPU"     # still the pinned bytes
    assert rows["atari/Pong"]["sha256"] and rows["atari/Pong"]["recipe"] == "retrain"
    assert rows["atari/Pong"]["built_on"] == machine_description()       # new bytes, made here
    before["artifacts"][1]["sha256"] = rows["atari/Pong"]["sha256"]
    again = {a["task"]: a for a in manifest(part, previous=before)["artifacts"]}
    assert again["atari/Pong"]["built_on"] == "the pinning CPU"          # the same bytes keep their origin
    fresh = {a["task"]: a for a in manifest(part)["artifacts"]}["procgen/coinrun"]
    assert fresh["sha256"] is None and "built_on" not in fresh
