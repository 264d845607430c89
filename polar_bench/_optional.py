"""Import optional dependencies with an error that names the install command."""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import warnings
from importlib import metadata
from types import ModuleType

from .errors import MissingDependencyError

__all__ = ["require", "version_of"]


def require(module: str, extra: str, purpose: str = "", *, quiet: bool = False) -> ModuleType:
    """Import ``module`` or raise `MissingDependencyError` naming ``pip install "polar_bench[extra]"``.

    ``quiet``: drop the warnings and the stderr output of the import (old gym's notice that crafter's
    import prints, minihack's pkg_resources deprecation), which would reach the user's terminal from
    every worker process."""
    try:
        if quiet:
            with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
                warnings.simplefilter("ignore")
                return importlib.import_module(module)
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
