"""The kernel calls that lock a process down, shared by the agent process of `evaluate` and the code
sandbox's child (standard library only: the sandbox child loads this file by path before it locks
itself down, and imports nothing afterwards).

Each function changes the calling process and returns, or raises `OSError` where the caller must
not go on; the callers record which layers took effect (``isolation.layers``).
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
CLONE_NEWIPC, CLONE_NEWUTS = 0x08000000, 0x04000000
CAP_DAC_READ_SEARCH = 2
_PR_SET_KEEPCAPS, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 8, 24, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE = 47, 2
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000

__all__ = ["CLONE_NEWNS", "CLONE_NEWUSER", "CLONE_NEWNET", "CLONE_NEWIPC", "CLONE_NEWUTS", "CAP_DAC_READ_SEARCH",
           "libc", "unshare", "capset", "drop_root", "keep_reading_across_exec", "no_new_privs",
           "join_cgroup", "oom_first", "enter_limits", "private_tmpfs"]


def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def unshare(flags: int) -> int:
    """unshare(2) with ``flags``: 0, or the errno it failed with."""
    return 0 if libc().unshare(flags) == 0 else ctypes.get_errno() or -1


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def capset(low_caps: int = 0, inheritable: int = 0) -> None:
    """Set the effective and permitted capabilities to ``low_caps`` (capabilities 0-31), the inheritable
    ones to ``inheritable``; every capability from 32 on is cleared."""
    hdr, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    data[0].effective = data[0].permitted = low_caps
    data[0].inheritable = inheritable
    if libc().capset(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def drop_root(uid: int, keep: int | None = None) -> None:
    """Root only: become ``uid``/``uid`` with no groups; the bounding set is emptied but for the
    capability ``keep`` (None: none), which stays effective and permitted."""
    lib = libc()
    for cap in range(64):  # stops at the first capability this kernel does not know
        if cap != keep and lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    if keep is not None:
        lib.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # all uids non-zero: the kernel clears every capability (KEEPCAPS aside)
    if keep is not None:
        capset(1 << keep)


def keep_reading_across_exec() -> None:
    """Make CAP_DAC_READ_SEARCH ambient, so that a program the process executes still reads any file."""
    capset(1 << CAP_DAC_READ_SEARCH, inheritable=1 << CAP_DAC_READ_SEARCH)
    if libc().prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAP_AMBIENT_RAISE) failed")


def no_new_privs() -> None:
    if libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def join_cgroup(procs_file: str) -> None:
    """Move the calling process into the cgroup whose ``cgroup.procs`` is ``procs_file`` (made by the
    trusted parent, `polar_bench.lockdown.limits`); every process it starts is then in it too."""
    fd = os.open(procs_file, os.O_WRONLY)
    try:
        os.write(fd, b"0")  # 0: the writing process
    finally:
        os.close(fd)


def oom_first() -> bool:
    """Make the calling process (and what it starts) the kernel's first choice when memory runs out:
    ``oom_score_adj`` 1000 (raising it needs no privilege). False where /proc refuses it."""
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"1000")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def enter_limits(limits: dict) -> bool:
    """The first step of a lockdown, shared by the agent process and the sandbox child: join the memory
    cgroup the parent made (``limits["cgroup_procs"]``, `TreeLimits.child_config`), if any, and make
    this process the OOM killer's first choice (`oom_first`'s answer)."""
    if limits.get("cgroup_procs"):
        join_cgroup(limits["cgroup_procs"])
    return oom_first()


def private_tmpfs(path: str, size_bytes: int, inodes: int, uid: int, gid: int) -> str:
    """In a mount namespace of the caller's own (unshared with CLONE_NEWNS), make every mount private
    and mount a tmpfs of ``size_bytes`` and ``inodes`` files over ``path``, owned by ``uid``/``gid``,
    mode 0700; returns "" or why it failed. The folder's files on the host are hidden, the tmpfs
    goes with the namespace's last process, and its pages count against the memory cgroup."""
    lib = libc()
    if lib.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return f"mount --make-rprivate / failed (errno {ctypes.get_errno()})"
    data = f"size={int(size_bytes)},nr_inodes={int(inodes)},mode=0700,uid={uid},gid={gid}".encode()
    if lib.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, data) != 0:
        return f"mount tmpfs failed (errno {ctypes.get_errno()})"
    os.chdir(path)  # the old working directory is the host folder under the mount
    return ""
