"""`python -m polar_bench new-harness`: scaffold, install as a plugin package, pass its own conformance test."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env
from test_llm import FakeBackend

import polar_bench
from polar_bench.cli import main
from polar_bench.errors import UserError
from polar_bench.llm import LLMClient
from polar_bench.scaffold import scaffold

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "adapter"


def _env(*paths: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _load(module_dir: Path, draft):
    sys.path.insert(0, str(module_dir))
    try:
        module = importlib.import_module(draft.module)
    finally:
        sys.path.remove(str(module_dir))
    polar_bench.register_family(draft.family, getattr(module, draft.class_name))
    return module


def test_scaffold_from_a_gymnasium_id_installs_and_passes_its_conformance_test(tmp_path):
    out, site = tmp_path / "pkg", tmp_path / "site"
    assert main(["new-harness", "Acrobot-v1", "--out", str(out), "--family", "acro"]) == 0
    assert sorted(p.name for p in out.rglob("*.py")) == ["polar_bench_acro.py", "test_polar_bench_acro.py"]
    if importlib.util.find_spec("ruff") is not None:  # the generated code is clean by the project's own rules
        lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F,E,W,B,UP,I",
                               "--line-length", "120", "."], capture_output=True, text=True, cwd=out)
        assert lint.returncode == 0, lint.stdout
    # Installed the way a user installs a plugin package (no network: no dependencies, no build isolation).
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(out)], check=True, capture_output=True, cwd=tmp_path)
    listed = subprocess.run([sys.executable, "-c", "import polar_bench; print(polar_bench.harness.families(), "
                             "polar_bench.harness.task_names('acro'))"],
                            env=_env(site), capture_output=True, text=True, check=True, cwd=tmp_path)
    assert "'acro'" in listed.stdout and "['Acrobot-v1']" in listed.stdout
    # Its conformance test, spawned-process determinism included (the entry point resolves there too).
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                         env=_env(site), capture_output=True, text=True, cwd=out)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "passed" in run.stdout and "failed" not in run.stdout


def test_scaffold_from_an_import_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    draft, paths = scaffold("thermostat_env:ThermostatEnv", tmp_path, family="heater")
    assert (draft.family, draft.task, draft.max_episode_steps) == ("heater", "default", 1000)
    assert draft.observation_names == ["obs[0]", "obs[1]"] and draft.action_names == ["action 0", "action 1",
                                                                                      "action 2"]
    _load(tmp_path, draft)
    h = polar_bench.make("heater/default", text=True)
    _, info = h.reset(seed=0)
    assert info["text"].startswith("obs[0]: ") and h.task_info.native_id == "thermostat_env:ThermostatEnv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(h, skip_render_check=True)
    h.close()


def test_llm_drafts_the_description_and_the_names_of_the_text_rendering(tmp_path):
    answers = ["Swing the two-link chain up above the bar. Reward -1 per step until it is there.",
               "cos first angle", "sin first angle", "cos second angle", "sin second angle",
               "first angular velocity", "second angular velocity",
               "torque minus one", "no torque", "torque plus one"]
    fake = FakeBackend(answers, supports_grammar=True)
    draft, paths = scaffold("Acrobot-v1", tmp_path, family="acrollm", llm=LLMClient(fake))
    assert len(fake.requests) == 1 + 6 + 3  # the description, then one call per name
    assert fake.requests[1].constraint is not None and "Acrobot-v1" in fake.requests[0].messages[-1]["content"]
    source = paths[0].read_text()
    assert "Swing the two-link chain up" in source and '"second angular velocity"' in source
    _load(tmp_path, draft)
    h = polar_bench.make("acrollm/Acrobot-v1", text=True)
    _, info = h.reset(seed=0)
    assert info["text"].startswith("cos first angle: ")
    assert h.task_info.action_names == ("torque minus one", "no torque", "torque plus one")
    assert h.task_info.description.startswith("Swing the two-link chain up")
    h.close()


def test_unusable_llm_answers_keep_the_defaults(tmp_path):
    fake = FakeBackend(["ok", "!!!", "obs", "obs", "  ", "x" * 80], supports_grammar=False)
    draft, _ = scaffold("CartPole-v1", tmp_path, family="cp", llm=LLMClient(fake))
    assert draft.description == "The environment CartPole-v1: maximise the return within 500 steps."
    names = draft.observation_names + draft.action_names
    assert len(names) == 6 and len({n.lower() for n in names}) == 6  # defaults where answers were bad or repeated


@pytest.mark.slow  # about 25 s: seven calls to the embedded model
def test_llm_path_with_the_embedded_model(tmp_path):
    pytest.importorskip("llama_cpp")
    from polar_bench.llm import EmbeddedBackend, default_model_path

    if not Path(default_model_path()).exists():
        pytest.skip("the embedded model is not installed")
    draft, paths = scaffold("CartPole-v1", tmp_path, family="cpemb", llm=LLMClient(EmbeddedBackend()))
    _load(tmp_path, draft)
    h = polar_bench.make("cpemb/CartPole-v1", text=True)
    _, info = h.reset(seed=0)
    assert info["text"] and len(h.task_info.description) > 20
    assert len(set(h.task_info.action_names)) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(h, skip_render_check=True)
    h.close()


def test_user_errors_name_the_fix(tmp_path, capsys):
    with pytest.raises(UserError, match="not a registered Gymnasium id"):
        scaffold("NoSuchEnv-v0", tmp_path)
    with pytest.raises(UserError, match="cannot import"):
        scaffold("no_such_module:Env", tmp_path)
    with pytest.raises(UserError, match="lower-case identifier"):
        scaffold("CartPole-v1", tmp_path, family="Cart Pole")
    scaffold("CartPole-v1", tmp_path)
    with pytest.raises(UserError, match="--force"):
        scaffold("CartPole-v1", tmp_path)
    scaffold("CartPole-v1", tmp_path, force=True)
    assert main(["new-harness", "NoSuchEnv-v0", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.startswith("error: 'NoSuchEnv-v0' is not a registered Gymnasium id")
