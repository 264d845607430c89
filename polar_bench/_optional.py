"""Import optional dependencies with an error that names the install command."""

from __future__ import annotations

import functools
import importlib
from importlib import metadata
from types import ModuleType

from .errors import MissingDependencyError

__all__ = ["require", "version_of"]


def require(module: str, extra: str, purpose: str = "") -> ModuleType:
    """Import ``module`` or raise `MissingDependencyError` naming ``pip install "polar_bench[extra]"``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        what = f" for {purpose}" if purpose else ""
        raise MissingDependencyError(
            f"the optional package {module!r} is needed{what} but cannot be imported ({exc}); "
            f'install it with: pip install "polar_bench[{extra}]"') from exc


@functools.cache
def version_of(distribution: str) -> str:
    """The installed version of a distribution, or '' when it is not installed (read once per process:
    every harness built asks, and reading package metadata takes about a millisecond)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""
