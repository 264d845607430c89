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
    data["agent"]["out_dir"] = str(tmp_path / name)
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
        a = tmp_path / "local" / "checkpoints" / "gym/CartPole-v1" / f"run{seed}.pt"
        b = tmp_path / "ray" / "checkpoints" / "gym/CartPole-v1" / f"run{seed}.pt"
        assert a.is_file() and b.is_file()
        assert json.loads(a.with_suffix(".json").read_text())["eval_return_mean"] == \
            json.loads(b.with_suffix(".json").read_text())["eval_return_mean"]
        assert (tmp_path / "ray" / "curves" / "gym/CartPole-v1" / f"run{seed}.csv").is_file()


def test_out_dir_flag_overrides_the_experiment_and_a_bad_suite_stops_the_sweep_first(tmp_path):
    local = sweep.main([_experiment(tmp_path, "ignored"), "--workers", "1", "--out-dir", str(tmp_path / "chosen")])
    assert [s["checkpoint"] for s in local] == [
        str(tmp_path / "chosen" / "checkpoints" / "gym/CartPole-v1" / f"run{seed}.pt") for seed in (0, 1)]
    assert (tmp_path / "chosen" / "curves" / "gym/CartPole-v1" / "run1.csv").is_file()
    assert not (tmp_path / "ignored").exists()
    # --skip-existing: nothing left to train; with run 1's checkpoint gone, only run 1 trains, the same again
    again = [_experiment(tmp_path, "ignored"), "--workers", "1", "--out-dir", str(tmp_path / "chosen"),
             "--skip-existing"]
    assert sweep.main(again) == []
    run1 = tmp_path / "chosen" / "checkpoints" / "gym/CartPole-v1" / "run1.pt"
    before = run1.with_suffix(".json").read_text()
    run1.unlink()
    assert [s["seed"] for s in sweep.main(again)] == [1]
    assert run1.is_file() and run1.with_suffix(".json").read_text() == before   # same seed, same run
    data = yaml.safe_load(Path(_experiment(tmp_path, "typo")).read_text())
    data["evaluation"]["suite"] = "v1x"
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump(data))
    from polar_bench.errors import SuiteError

    with pytest.raises(SuiteError, match="unknown suite 'v1x'"):
        sweep.main([str(typo)])
    assert not (tmp_path / "typo").exists()


def test_skip_existing_starts_seed_by_seed_or_with_by_task_task_by_task(tmp_path, monkeypatch):
    data = json.loads(json.dumps(EXPERIMENT))
    data["harnesses"].append({"type": "gymnasium", "env_id": "Acrobot-v1", "num_parallel": 2})
    data["agent"]["out_dir"] = str(tmp_path / "out")
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(data))
    started: list[list[tuple[str, int]]] = []

    def record(configs, backend, workers, address):
        started.append([(c.task, c.seed) for c in configs])
        return []

    monkeypatch.setattr(sweep, "run_sweep", record)
    sweep.main([str(path), "--skip-existing"])
    sweep.main([str(path), "--skip-existing", "--by-task"])
    cp, ac = "gym/CartPole-v1", "gym/Acrobot-v1"
    assert started == [[(cp, 0), (ac, 0), (cp, 1), (ac, 1)], [(cp, 0), (cp, 1), (ac, 0), (ac, 1)]]


def test_several_files_are_one_sweep_filtered_by_task_in_one_numeric_mode(tmp_path, monkeypatch):
    """stage_v2.sh trains a task's runs 0-2 (one file) and 3-4 (another) together, task by task."""
    first = json.loads(json.dumps(EXPERIMENT))
    first["harnesses"].append({"type": "gymnasium", "env_id": "Acrobot-v1", "num_parallel": 2})
    second = json.loads(json.dumps(first))
    second["training"]["seeds"] = [3]
    paths = []
    for name, data in (("a", first), ("b", second)):
        data["agent"]["out_dir"] = str(tmp_path / "out")
        paths.append(tmp_path / f"{name}.yaml")
        paths[-1].write_text(yaml.safe_dump(data))
    started: list[list[tuple[str, int, str]]] = []
    run_sweep = sweep.run_sweep
    monkeypatch.setattr(sweep, "run_sweep", lambda configs, *a: started.append(
        [(c.task, c.seed, c.numerics) for c in configs]) or [])
    sweep.main([*map(str, paths), "--skip-existing", "--by-task", "--numerics", "avx2-portable"])
    cp, ac = "gym/CartPole-v1", "gym/Acrobot-v1"
    assert started[-1] == [(t, s, "avx2-portable") for t in (cp, ac) for s in (0, 1, 3)]
    sweep.main([*map(str, paths), "--tasks", "gym/Acro*"])
    assert [(t, s) for t, s, _ in started[-1]] == [(ac, 0), (ac, 1), (ac, 3)] and started[-1][0][2] == "native"
    with pytest.raises(SystemExit, match="matches --tasks procgen/"):
        sweep.main([str(paths[0]), "--tasks", "procgen/*"])
    configs = sweep.configs_from_args(["--config", str(paths[0])])
    with pytest.raises(ValueError, match="one sweep trains in one numeric mode"):
        run_sweep([configs[0], __import__("dataclasses").replace(configs[1], numerics="avx2-portable")])
