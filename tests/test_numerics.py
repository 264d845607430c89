"""polar_bench.numerics: the portable numeric mode, in force inside a locked-down rebuild."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from polar_bench import numerics
from polar_bench.artifacts import ArtifactError, ensure_artifacts, run_recipe

ROOT = Path(__file__).resolve().parents[1]
torch = pytest.importorskip("torch")
needs_avx2 = pytest.mark.skipif(not numerics.portable_supported()[0], reason="this CPU has no AVX2 and FMA")

# A rebuild as baselines/ppo/rebuild.py runs it, of a config small enough for a test (512 CartPole steps).
TINY_REBUILD = """
import sys
from baselines.ppo import rebuild, train
rebuild.find_config = lambda task, run: train.Config(task=task, seed=run, steps=512, eval_episodes=2)
sys.exit(rebuild.main(["gym/CartPole-v1", "0", "--to", sys.argv[1]] + sys.argv[2:]))
"""


def test_the_portable_mode_needs_avx2_and_fma_on_x86_64(monkeypatch):
    ok, why = numerics.portable_supported(frozenset({"sse2", "avx", "avx2"}))
    if ok is False and "x86-64" in why:
        pytest.skip("not an x86-64 machine")
    assert not ok and "lacks FMA" in why
    assert numerics.portable_supported(frozenset({"avx2", "fma"})) == (True, "")
    monkeypatch.setattr(numerics, "cpu_flags", lambda: frozenset({"sse4_2"}))
    with pytest.raises(numerics.NumericsError, match="lacks AVX2 and FMA.*cannot be rebuilt here"):
        numerics.enter(numerics.PORTABLE)
    with pytest.raises(numerics.NumericsError, match="not one of avx2-portable, x86-portable, native"):
        numerics.enter("fast")


@needs_avx2
@pytest.mark.parametrize(("mode", "mkl"), [("avx2-portable", "AVX2,STRICT"), ("x86-portable", "COMPATIBLE,STRICT")])
def test_the_mode_is_in_force_inside_a_locked_down_rebuild_and_gives_the_same_bytes_twice(tmp_path, mode, mkl):
    """The recipe's process gets none of the verifier's environment: the rebuild itself enters the mode."""
    outputs = []
    for attempt in ("a", "b"):
        work = tmp_path / attempt
        (work / "out").mkdir(parents=True)
        done = run_recipe([sys.executable, "-c", TINY_REBUILD, str(work / "out" / "run0.pt"), "--numerics", mode],
                          ROOT, work)
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads([line for line in done.stdout.splitlines() if line.startswith('{"task"')][-1])
        assert summary["numerics"] == {"mode": mode, "torch": torch.__version__,
                                       "aten_capability": "AVX2", "threads": 1, "onednn_max_cpu_isa": "AVX2",
                                       "mkl_cbwr": mkl}
        outputs.append((work / "out" / "run0.pt").read_bytes())
        assert summary["sha256"] == hashlib.sha256(outputs[-1]).hexdigest()
    assert outputs[0] == outputs[1]


@needs_avx2
def test_a_native_rebuild_says_so_and_keeps_this_cpus_kernels(tmp_path):
    done = subprocess.run([sys.executable, "-c", TINY_REBUILD, str(tmp_path / "run0.pt"), "--numerics", "native"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in __import__("os").environ.items()
                               if k not in numerics.PORTABLE_ENV})
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads([line for line in done.stdout.splitlines() if line.startswith('{"task"')][-1])
    assert summary["numerics"]["mode"] == "native" and "mkl_cbwr" not in summary["numerics"]
    assert summary["numerics"]["aten_capability"] == torch.backends.cpu.get_cpu_capability()


def test_torch_that_already_chose_its_kernels_is_not_in_the_portable_mode():
    script = ("import torch; torch.backends.cpu.get_cpu_capability()\n"
              "from polar_bench import numerics\n"
              "numerics.enter(numerics.PORTABLE)\n"
              "numerics.in_force(numerics.PORTABLE)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in numerics.PORTABLE_ENV}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    if torch.backends.cpu.get_cpu_capability() == "AVX2" or not numerics.portable_supported()[0]:
        pytest.skip("this CPU's own kernels are AVX2's: nothing to tell apart")
    assert done.returncode != 0 and "is not in force (ATen dispatches to" in done.stderr


def test_an_artifact_pinned_in_the_portable_mode_is_not_verifiable_without_avx2(tmp_path, monkeypatch):
    import polar_bench.artifacts as artifacts

    (tmp_path / "agent.py").write_text("")
    (tmp_path / "artifacts.json").write_text(json.dumps({"format": 1, "recipes": {"r": {"command": ["true"]}},
        "artifacts": [{"path": "run0.pt", "sha256": "a" * 64, "recipe": "r", "numerics": "avx2-portable"}]}))
    monkeypatch.setattr(artifacts, "portable_supported", lambda **_: (False, "this CPU lacks AVX2 and FMA"))
    with pytest.raises(ArtifactError, match="cannot be rebuilt here: this CPU lacks AVX2 and FMA .*x86-64 machine"):
        ensure_artifacts(tmp_path / "agent.py", None, log=lambda _: None)
    (tmp_path / "artifacts.json").write_text(json.dumps({"format": 1, "artifacts": [
        {"path": "run0.pt", "sha256": "a" * 64, "numerics": "fast"}]}))
    with pytest.raises(ArtifactError, match="numerics must be one of"):
        ensure_artifacts(tmp_path / "agent.py", None)


def test_a_portable_pin_of_one_vendors_cpu_is_not_rebuilt_on_the_others(tmp_path, monkeypatch):
    """MKL's AVX2 reproducibility branch runs on Intel CPUs only: AMD pins rebuilt on an Intel Xeon gave
    other bytes (docs/artifacts.md). The rebuild is refused at once, naming where it can be had, instead
    of training for minutes to bytes that are then rejected."""
    amd = "AMD EPYC, x86_64 family 25 model 17, AVX-512"
    intel = "Intel(R) Xeon(R) Processor, x86_64 family 6 model 207, AVX-512"
    assert (numerics.vendor_of(amd), numerics.vendor_of(intel), numerics.vendor_of(None)) == ("AMD", "Intel", None)
    assert numerics.vendor_of("Some CPU, x86_64 family 7 model 1, AVX2 (no AVX-512)") is None
    if numerics.platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("not an x86-64 machine")
    flags = frozenset({"avx2", "fma"})
    ok, why = numerics.portable_supported(flags, built_on=amd, vendor="Intel")
    assert not ok and "pinned on an AMD CPU and this one is Intel's" in why
    assert numerics.portable_supported(flags, built_on=intel, vendor="Intel") == (True, "")
    assert numerics.portable_supported(flags, built_on=amd, vendor="AMD") == (True, "")
    assert numerics.portable_supported(flags, built_on=None, vendor="Intel") == (True, "")  # unknown: tried
    # the x86-portable mode is the one meant to cross vendors
    assert numerics.portable_supported(flags, built_on=amd, vendor="Intel", mode="x86-portable") == (True, "")

    import polar_bench.artifacts as artifacts

    monkeypatch.setattr(numerics, "cpu_vendor", lambda: "Intel")
    monkeypatch.setattr(numerics, "cpu_flags", lambda: flags)
    (tmp_path / "agent.py").write_text("")
    ran = tmp_path / "ran"
    (tmp_path / "artifacts.json").write_text(json.dumps({"format": 1, "recipes": {"r": {"command": [
        sys.executable, "-c", f"open({str(ran)!r}, 'w')"]}}, "artifacts": [
        {"path": "run0.pt", "sha256": "a" * 64, "recipe": "r", "numerics": "avx2-portable", "built_on": amd}]}))
    with pytest.raises(ArtifactError, match="cannot be rebuilt here: it was pinned on an AMD CPU.*verify on an AMD "
                                            "x86-64 machine"):
        artifacts.ensure_artifacts(tmp_path / "agent.py", None, log=lambda _: None)
    assert not ran.exists()  # refused before the recipe ran
