"""The trusted parent's handling of an untrusted process it started: killing its whole process group,
closing its pipe ends (used by the agent process's client and the code sandbox alike)."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import TYPE_CHECKING

__all__ = ["kill_process_group", "close_quietly", "end_tree", "signal_name"]

if TYPE_CHECKING:
    from .limits import TreeLimits


def kill_process_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group that ``proc`` leads (started with ``start_new_session=True``) and
    reap ``proc``; nothing in the group can catch it. Safe on a process that already ended; the group
    is killed even then, since what the process started may outlive it. The id names no one else:
    the kernel gives no new process a group's id while the group has members, and once it has none,
    process ids come back only after the whole id space went round (callers kill right after
    reaping the leader)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        pass


def close_quietly(*fds: int) -> tuple[int, ...]:
    """Close each of ``fds`` that is open (>= 0), ignoring errors; returns -1 for each, to assign back."""
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
    return (-1,) * len(fds)


def end_tree(proc: subprocess.Popen | None, limits: TreeLimits | None) -> None:
    """End what an untrusted process left: kill its process group (`kill_process_group`), then stop
    watching its limits and remove its cgroup (`TreeLimits.close`). Either may be None."""
    if proc is not None:
        kill_process_group(proc)
    if limits is not None:
        limits.close()


def signal_name(sig: int) -> str:
    """``SIGKILL`` for 9: the name of a signal that ended a process (a negative return code's), for messages."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
