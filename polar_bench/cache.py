"""The user's cache folder for polar_bench: ``$XDG_CACHE_HOME/polar_bench`` (default ``~/.cache/polar_bench``)."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/polar_bench/<parts...>``, ``~/.cache`` when the variable is unset or empty."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "polar_bench", *parts)
