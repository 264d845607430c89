"""Shared by the tests that kill a process and check that what it started goes too."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` ends within ``seconds`` (a zombie waiting to be reaped counts as ended); if it
    does not, it is killed so that the failing test leaves nothing running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/status")
        try:
            if "State:\tZ" in status.read_text():
                return True
        except OSError:
            return True  # gone between the two looks
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return False


def children_of(parent: int, cmdline_has: bytes = b"") -> list[int]:
    """The processes whose parent is ``parent`` (and whose command line contains ``cmdline_has``), from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and cmdline_has in cmdline:
            pids.append(int(stat.parent.name))
    return pids
