"""PPO sweeps over (task, seed) on local processes and on Ray give the same checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
yaml = pytest.importorskip("yaml")

from baselines.ppo import sweep  # noqa: E402

EXPERIMENT = {
    "experiment": {"name": "sweep-test"},
    "agent": {"algorithm": "ppo"},
    "harnesses": [{"type": "gymnasium", "env_id": "CartPole-v1", "num_parallel": 2}],
    "training": {"total_timesteps": 256, "rollout_length": 64, "seeds": [0, 1]},
    "evaluation": {"interval": 0, "num_episodes": 2, "suite": "v1"},
    "distributed": {"backend": "local", "num_workers": 2},
}


def _experiment(tmp_path: Path, name: str) -> str:
    data = json.loads(json.dumps(EXPERIMENT))
    for key, sub in (("checkpoint_dir", "ckpt"), ("curve_dir", "curves"), ("log_dir", "logs")):
        data["agent"][key] = str(tmp_path / name / sub)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_sweep_local_and_ray_write_identical_checkpoints(tmp_path):
    ray = pytest.importorskip("ray")
    local = sweep.main([_experiment(tmp_path, "local")])
    ray.shutdown()
    on_ray = sweep.main([_experiment(tmp_path, "ray"), "--backend", "ray", "--workers", "2"])
    assert [(s["task"], s["seed"]) for s in local] == [("gym/CartPole-v1", 0), ("gym/CartPole-v1", 1)]
    assert [s["eval_returns"] for s in local] == [s["eval_returns"] for s in on_ray]
    for seed in (0, 1):
        a = tmp_path / "local" / "ckpt" / "gym/CartPole-v1" / f"run{seed}.pt"
        b = tmp_path / "ray" / "ckpt" / "gym/CartPole-v1" / f"run{seed}.pt"
        assert a.is_file() and b.is_file()
        assert json.loads(a.with_suffix(".json").read_text())["eval_return_mean"] == \
            json.loads(b.with_suffix(".json").read_text())["eval_return_mean"]
        assert (tmp_path / "ray" / "curves" / "gym/CartPole-v1" / f"run{seed}.csv").is_file()
