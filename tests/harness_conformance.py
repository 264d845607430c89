"""The conformance suite lives in `polar_bench.testing` (so that third-party families can run it);
the test modules here import it under this name."""

import re
import subprocess
import sys

import pytest

import polar_bench
from polar_bench.testing import HarnessConformance, action_sequence, trajectory

__all__ = ["HarnessConformance", "action_sequence", "trajectory", "assert_quiet", "assert_missing_package_names_extra"]


def assert_quiet(task_id: str) -> None:
    """Building, resetting, stepping and closing ``task_id`` in a fresh interpreter prints nothing."""
    code = (f"import polar_bench; h = polar_bench.make({task_id!r}); h.reset(seed=0); h.step(0); h.close()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr == "" and out.stdout == ""


def assert_missing_package_names_extra(monkeypatch, module: str, extra: str, task_id: str) -> None:
    """Without ``module``, building ``task_id`` raises `MissingDependencyError` naming the install command."""
    from polar_bench.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependencyError, match=re.escape(f'pip install "polar_bench[{extra}]"')):
        polar_bench.make(task_id)
