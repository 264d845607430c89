"""The PPO baseline: loss pieces against hand computations, the command line and experiment files,
and a smoke training on every harness family evaluated through baselines/ppo/agent.py."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from baselines.ppo import train as ppo
from baselines.ppo.networks import NETHACK_GLYPHS, RunningMeanStd, mission_tokens, nethack_crop
from polar_bench.cli import main as polar_main
from polar_bench.results import read_results

HERE = Path(__file__).parent
SMOKE = str(HERE / "data" / "suites" / "ppo_smoke.toml")
AGENT = str(HERE.parent / "baselines" / "ppo" / "agent.py")
FAMILIES = ["gym/CartPole-v1", "dmc/cartpole-swingup", "procgen/coinrun", "nethack/Score", "babyai/GoToRedBall",
            "atari/Pong"]


# --------------------------------------------------------------------------- loss pieces
def test_gae_matches_hand_computation():
    # gamma 0.9, lambda 0.5; the episode ends with step 1, so step 1 does not look past it.
    rewards = np.array([[1.0], [2.0], [3.0]], np.float32)
    values = np.array([[0.5], [1.0], [1.5]], np.float32)
    dones = np.array([[0.0], [1.0], [0.0]], np.float32)
    adv, ret = ppo.compute_gae(rewards, values, dones, np.array([2.0], np.float32), 0.9, 0.5)
    # t=2: 3 + 0.9*2 - 1.5 = 3.3;  t=1: 2 - 1 = 1.0;  t=0: (1 + 0.9*1 - 0.5) + 0.9*0.5*1.0 = 1.85
    np.testing.assert_allclose(adv[:, 0], [1.85, 1.0, 3.3], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [2.35, 2.0, 4.8], rtol=1e-6)


def test_gae_with_lambda_one_is_the_discounted_return_minus_value():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(5, 2)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)
    nv = rng.normal(size=2).astype(np.float32)
    adv, _ = ppo.compute_gae(r, v, np.zeros((5, 2), np.float32), nv, 0.99, 1.0)
    discounted = sum(0.99**k * r[k] for k in range(5)) + 0.99**5 * nv
    np.testing.assert_allclose(adv[0], discounted - v[0], rtol=1e-5)


def test_clipped_policy_loss_matches_hand_computation():
    ratio = torch.tensor([1.5, 0.5, 1.1])
    adv = torch.tensor([1.0, 1.0, -2.0])
    loss, kl, clipfrac = ppo.policy_loss(ratio.log(), torch.zeros(3), adv, 0.2)
    # per sample max(-A r, -A clip(r)): max(-1.5, -1.2) = -1.2; max(-0.5, -0.8) = -0.5; max(2.2, 2.2) = 2.2
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 2.2) / 3, rel=1e-6)
    assert clipfrac.item() == pytest.approx(2 / 3)
    expected_kl = np.mean([(r - 1) - math.log(r) for r in (1.5, 0.5, 1.1)])
    assert kl.item() == pytest.approx(expected_kl, rel=1e-5)


def test_value_loss_plain_and_clipped():
    new, old, ret = torch.tensor([1.0, 3.0]), torch.tensor([0.0, 2.9]), torch.tensor([2.0, 2.0])
    assert ppo.value_loss(new, old, ret, None).item() == pytest.approx(0.5 * (1 + 1) / 2)
    # clipped predictions 0.5 and 3.0: errors max(1, 2.25) and max(1, 1)
    assert ppo.value_loss(new, old, ret, 0.5).item() == pytest.approx(0.5 * (2.25 + 1) / 2)


def test_advantage_normalization_and_reward_scaling():
    a = ppo.normalize_advantages(torch.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(a.numpy(), [-1, 0, 1], atol=1e-6)
    assert ppo.normalize_advantages(torch.tensor([5.0])).item() == 5.0  # a single sample is left alone
    scaler = ppo.RewardScaler(num_envs=1, gamma=0.5)
    out = scaler(np.array([2.0]), np.array([False]))
    assert out[0] == pytest.approx(min(2.0 / math.sqrt(scaler.rms.var[()] + 1e-8), 10.0))  # clipped at 10
    rng = np.random.default_rng(0)
    for _ in range(50):
        out = scaler(rng.normal(size=1), np.array([False]))
    out = scaler(np.array([1.0]), np.array([False]))
    assert 0 < out[0] < 10 and out[0] == pytest.approx(1.0 / math.sqrt(scaler.rms.var[()] + 1e-8))


def test_running_mean_std_matches_numpy():
    rng = np.random.default_rng(1)
    data = rng.normal(3.0, 2.0, size=(300, 4))
    rms = RunningMeanStd((4,))
    for chunk in np.split(data, 6):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-4)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-3)


def test_preprocessing_helpers():
    glyphs = np.arange(21 * 79).reshape(1, 21, 79)
    crop = nethack_crop(glyphs, np.array([[0, 0] + [0] * 25]))  # agent in the top-left corner
    assert crop.shape == (1, 9, 9)
    assert (crop[0, :4, :] == NETHACK_GLYPHS + 1).all() and (crop[0, :, :4] == NETHACK_GLYPHS + 1).all()
    assert crop[0, 4, 4] == 0 and crop[0, 5, 6] == 79 + 2
    tokens = mission_tokens("go to the red ball")
    assert (tokens[:5] > 0).all() and (tokens[5:] == 0).all()
    assert (tokens == mission_tokens("Go to the red ball")).all()


# --------------------------------------------------------------------------- command line and YAML
def test_help_comes_from_the_config_docstrings(capsys):
    with pytest.raises(SystemExit):
        ppo.build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "--clip-vloss" in out and "clip the value loss" in out and "--steps" in out


def test_presets_fill_only_unset_fields():
    cfg = ppo.resolve(ppo.Config(task="dmc/cheetah-run", learning_rate=1e-4), "dmc", True)
    assert cfg.learning_rate == 1e-4 and cfg.num_steps == 512 and cfg.norm_obs and cfg.norm_reward
    cfg = ppo.resolve(ppo.Config(num_envs=2, num_steps=16, minibatch_size=8), "classic", False)
    assert cfg.num_minibatches == 4 and cfg.update_epochs == 20 and not cfg.norm_obs


def _dirs(tmp: Path) -> list[str]:
    return ["--out-dir", str(tmp), "--no-progress"]


def test_every_config_field_is_a_flag_with_its_docstring_as_help(capsys):
    import dataclasses

    with pytest.raises(SystemExit):
        ppo.build_parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    docs = ppo._field_docs(ppo.Config)
    for f in dataclasses.fields(ppo.Config):
        assert docs.get(f.name), f"Config.{f.name} has no docstring"
        assert "--" + f.name.replace("_", "-") in out and " ".join(docs[f.name].split()) in out, f.name
    args = vars(ppo.build_parser().parse_args(["--steps", "2e5", "--learning-rate", "1e-3", "--no-anneal-lr",
                                               "--out-dir", "elsewhere"]))
    assert args == {"steps": 200_000, "learning_rate": 1e-3, "anneal_lr": False, "out_dir": "elsewhere"}


def test_outputs_default_to_runs_at_the_project_root_not_the_source_tree():
    root = Path(ppo.__file__).resolve().parents[2]
    assert Path(ppo.Config().out_dir) == root / "runs" / "ppo"
    assert "/runs/" in (root / ".gitignore").read_text().splitlines()
    cfg = ppo.Config(task="gym/CartPole-v1", seed=3, out_dir="/x")
    assert ppo.checkpoint_file(cfg) == Path("/x/checkpoints/gym/CartPole-v1/run3.pt")


def test_a_suite_or_task_that_does_not_load_is_an_error_before_training(tmp_path):
    from polar_bench.errors import HarnessOptionError, SuiteError, UserError

    with pytest.raises(SuiteError, match="unknown suite 'v9'"):
        ppo.main(["--task", "gym/CartPole-v1", "--suite", "v9", *_dirs(tmp_path)])
    with pytest.raises(UserError, match=r"suite v1 has no task 'gym/CartPole-v0'.*--suite none"):
        ppo.main(["--task", "gym/CartPole-v0", "--suite", "v1", *_dirs(tmp_path)])
    bad_suite = tmp_path / "bad.toml"
    cartpole = 'id = "gym/CartPole-v1"\n'
    tiny = (HERE / "data" / "suites" / "tiny.toml").read_text()
    bad_suite.write_text(tiny.replace(cartpole, cartpole + "options = { colour = 1 }\n"))
    out = tmp_path / "out"
    with pytest.raises(HarnessOptionError, match="gym/CartPole-v1: unknown option 'colour'"):
        ppo.main(["--task", "gym/CartPole-v1", "--suite", str(bad_suite), *_dirs(out)])
    assert not out.exists()  # nothing was trained or written


def test_suite_none_trains_a_task_outside_every_suite_on_seeds_0_to_n(tmp_path):
    [summary] = ppo.main(["--task", "gym/CartPole-v0", "--suite", "none", "--steps", "64", "--num-envs", "2",
                          "--num-steps", "32", "--eval-episodes", "3", *_dirs(tmp_path)])
    meta = json.loads((tmp_path / "checkpoints" / "gym" / "CartPole-v0" / "run0.json").read_text())
    assert meta["eval_seeds"] == [0, 1, 2] and len(summary["eval_returns"]) == 3
    assert summary["checkpoint"] == str(tmp_path / "checkpoints" / "gym" / "CartPole-v0" / "run0.pt")


def test_command_line_errors_are_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "baselines.ppo.train", "--suite", "v9", "--out-dir", str(tmp_path)],
                          cwd=HERE.parent, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown suite 'v9'"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_yaml_experiment_trains_every_harness_and_seed(tmp_path):
    pytest.importorskip("yaml")
    exp = tmp_path / "exp.yaml"
    exp.write_text(textwrap.dedent(f"""
        experiment: {{name: smoke}}
        agent: {{algorithm: ppo, learning_rate: 1e-3}}
        harnesses:
          - {{type: gymnasium, env_id: CartPole-v1, num_parallel: 2}}
          - {{task: babyai/GoToRedBall, num_parallel: 2, update_epochs: 1}}
        training: {{total_timesteps: 64, rollout_length: 16, batch_size: 16, seeds: [0, 1]}}
        evaluation: {{interval: 32, suite: {SMOKE}, num_episodes: 1}}
    """))
    configs = ppo.load_experiment(exp)
    assert [(c.task, c.seed, c.num_envs) for c in configs] == [
        ("gym/CartPole-v1", 0, 2), ("gym/CartPole-v1", 1, 2),
        ("babyai/GoToRedBall", 0, 2), ("babyai/GoToRedBall", 1, 2)]
    assert configs[0].steps == 64 and configs[0].minibatch_size == 16 and configs[2].update_epochs == 1
    summaries = ppo.main(["--config", str(exp), *_dirs(tmp_path)])
    assert len(summaries) == 4
    for s in summaries:
        assert Path(s["checkpoint"]).exists()
    rows = (tmp_path / "curves" / "gym" / "CartPole-v1" / "run1.csv").read_text().splitlines()
    assert rows[0].startswith("env_steps,") and len(rows) == 3  # header, the evaluation at 32, the final one


def test_yaml_errors_name_the_problem(tmp_path):
    pytest.importorskip("yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("harnesses:\n  - {task: gym/CartPole-v1, learning_rat: 0.1}\n")
    with pytest.raises(ValueError, match="unknown setting 'learning_rat'"):
        ppo.load_experiment(bad)


# --------------------------------------------------------------------------- smoke: every family
@pytest.fixture(scope="module")
def smoke_checkpoints(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ppo_smoke")
    summaries = {}
    for task in FAMILIES:
        [summaries[task]] = ppo.main(["--task", task, "--steps", "256", "--num-envs", "2", "--num-steps", "32",
                                      "--update-epochs", "2", "--suite", SMOKE, *_dirs(tmp)])
    return tmp, summaries


def test_smoke_training_on_every_family(smoke_checkpoints):
    tmp, summaries = smoke_checkpoints
    for task, s in summaries.items():
        assert s["env_steps"] == 256 and math.isfinite(s["eval_return_mean"]), task
        meta = json.loads(Path(s["checkpoint"]).with_suffix(".json").read_text())
        assert meta["task"] == task and meta["final"] and meta["env_steps"] == 256
        assert (tmp / "curves" / task / "run0.csv").exists()


def test_smoke_checkpoints_evaluate_through_agent_py(smoke_checkpoints, tmp_path, monkeypatch, capsys):
    tmp, summaries = smoke_checkpoints
    monkeypatch.setenv("POLAR_PPO_CHECKPOINTS", str(tmp / "checkpoints"))
    out = tmp_path / "ppo-smoke.json"
    code = polar_main(["evaluate", AGENT, "--suite", SMOKE, "--workers", "2", "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    results = read_results(out)
    episodes = results.to_json()["episodes"]
    assert {e["task"] for e in episodes} == set(FAMILIES)
    assert all(e["status"] == "ok" for e in episodes)
    assert results.agent_info["name"] == "ppo"
    # The agent plays the mode action, so it reproduces training's final evaluation on the same seeds.
    for task in FAMILIES:
        returns = [e["return"] for e in episodes if e["task"] == task]
        assert np.mean(returns) == pytest.approx(summaries[task]["eval_return_mean"], abs=1e-6), task


def test_summarize_tables_a_results_file_per_task():
    from baselines.ppo.summarize import table
    random_results = HERE.parent / "baselines" / "random" / "results-v1.json"
    text = table(random_results, against=random_results)
    rows = [line for line in text.splitlines()[2:]]
    assert len(rows) == 38                           # every v1 task, in the suite's order
    cartpole = rows[0].split(" | ")
    assert cartpole[0] == "| gym/CartPole-v1" and cartpole[-1] == cartpole[3] + " |"  # same file: same score
    assert abs(float(cartpole[3])) < 0.1             # the random agent defines CartPole's low reference


def test_training_writes_tensorboard_events_and_scalars(tmp_path):
    """The [train] extra installs tensorboard: the run's folder gets an events file with the scalars."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ppo.main(["--task", "gym/CartPole-v1", "--steps", "256", "--seed", "0", "--num-envs", "2",
              "--num-steps", "64", "--eval-every", "128", "--eval-episodes", "1", "--suite", SMOKE,
              *_dirs(tmp_path)])
    run = tmp_path / "tensorboard" / "gym" / "CartPole-v1" / "seed0"
    assert list(run.glob("events.out.tfevents.*")), sorted(p.name for p in run.iterdir())
    acc = EventAccumulator(str(run))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"eval/return_mean", "train/episode_return", "losses/value"} <= tags
    assert [e.step for e in acc.Scalars("eval/return_mean")][-1] == 256
    assert "eval/return_mean" in (run / "scalars.csv").read_text()
