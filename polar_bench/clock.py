"""Timestamps as polar_bench records them: UTC, ISO 8601, to the second."""

from __future__ import annotations

import datetime as _dt

__all__ = ["utc_now", "utc_today"]


def utc_now() -> str:
    """Now in UTC, e.g. ``2026-12-06T04:40:12+00:00``."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def utc_today() -> str:
    """Today's date in UTC, e.g. ``2026-12-06``."""
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()
