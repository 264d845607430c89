"""The layers that lock down an agent process before the agent's code is imported.

`lock_down` runs once, at the start of `polar_bench.evaluate.agent_process` (and of an artifact's
recipe), in a fresh interpreter that holds nothing but its pipes, and applies, where the kernel
allows it: the memory cgroup and OOM score, the size-limited folder, new network, IPC and UTS
namespaces, resource limits, the privilege drop, Landlock and a seccomp filter (on the calls of
`polar_bench.lockdown`). It returns the layers that took effect (``isolation.layers`` in the
results). docs/evaluate.md ("Isolation: what is guaranteed") says what each layer does and what is
deliberately allowed.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import sys

from ..lockdown import kernel
from ..lockdown.limits import gib
from ..lockdown.seccomp import install_bpf

__all__ = ["lock_down", "protect_trusted_process", "landlock_abi", "AGENT_UID"]

AGENT_UID = 65534  # "nobody": the uid an agent process started by root runs as

_PR_SET_DUMPABLE = 4

# Landlock (include/uapi/linux/landlock.h)
_SYS_LANDLOCK_CREATE, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT = 444, 445, 446
_LL_CREATE_VERSION = 1
_LL_RULE_PATH_BENEATH = 1
_LL_WRITE_FILE, _LL_REMOVE_DIR, _LL_REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_LL_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_LL_REFER, _LL_TRUNCATE = 1 << 13, 1 << 14
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1

# seccomp: system calls refused with EPERM (x86-64 numbers, asm/unistd_64.h)
_DENIED_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "setns": 308,
    "mount": 165, "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "keyctl": 250, "add_key": 248, "request_key": 249,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "reboot": 169, "swapon": 167, "swapoff": 168, "syslog": 103, "iopl": 172, "ioperm": 173,
    "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305,
    "sethostname": 170, "setdomainname": 171, "acct": 163, "quotactl": 179, "vhangup": 153,
    "modify_ldt": 154, "uselib": 134, "lookup_dcookie": 212,
}
# seccomp: system calls that return 0 without running: a process of the agent cannot leave its
# process group (start_new_session and setsid() still "succeed", so libraries that call them work)
_NOOP_X86_64 = {"setpgid": 109, "setsid": 112}
_AUDIT_ARCH_X86_64 = 0xC000003E
_EPERM = 1


_libc = kernel.libc


def protect_trusted_process() -> None:
    """Make the calling (trusted) process non-dumpable: processes of the same uid without
    CAP_SYS_PTRACE can then neither trace it nor open its /proc/<pid>/mem."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel (0: none)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_SYS_LANDLOCK_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_LL_CREATE_VERSION))
    return max(0, int(version))


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock(workdir: str) -> str:
    abi = landlock_abi()
    if abi < 1:
        return "unavailable (kernel without Landlock)"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE
    if abi >= 2:
        handled |= _LL_REFER
    if abi >= 3:
        handled |= _LL_TRUNCATE
    scoped = (_LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16  # older kernels refuse the scoped field
    fd = libc.syscall(_SYS_LANDLOCK_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return f"failed (landlock_create_ruleset errno {ctypes.get_errno()})"
    try:
        for path, access in ((workdir, handled), ("/dev/null", _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0))):
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneathAttr(access, pfd)
                if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_LL_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    return f"failed (landlock_add_rule {path} errno {ctypes.get_errno()})"
            finally:
                os.close(pfd)
        if libc.syscall(_SYS_LANDLOCK_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return f"failed (landlock_restrict_self errno {ctypes.get_errno()})"
    finally:
        os.close(fd)
    what = "writes only in the private folder"
    if scoped:
        what += "; no signals or abstract sockets outside its domain"
    return f"on (ABI {abi}: {what})"


def _seccomp() -> str:
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"unavailable on {platform.machine()}"
    ld_w_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, kill, deny, noop = 0x7FFF0000, 0x80000000, 0x00050000 | _EPERM, 0x00050000
    prog = [
        (ld_w_abs, 0, 0, 4),             # A = arch
        (jeq, 1, 0, _AUDIT_ARCH_X86_64),
        (ret, 0, 0, kill),               # another ABI (int 0x80): kill
        (ld_w_abs, 0, 0, 0),             # A = system call number
        (jge, 0, 1, 0x40000000),         # x32 ABI: refuse
        (ret, 0, 0, deny),
    ]
    nrs = sorted(set(_DENIED_X86_64.values()))
    noops = sorted(set(_NOOP_X86_64.values()))
    checks = len(nrs) + len(noops)
    for i, nr in enumerate(nrs):  # a match jumps over the remaining checks and `allow` to `deny`
        prog.append((jeq, checks - i, 0, nr))
    for i, nr in enumerate(noops, start=len(nrs)):  # ... and one further, to `noop`
        prog.append((jeq, checks - i + 1, 0, nr))
    prog += [(ret, 0, 0, allow), (ret, 0, 0, deny), (ret, 0, 0, noop)]

    state = install_bpf(prog)
    if state != "on":
        return state
    return f"on ({len(nrs)} system calls refused; setsid and setpgid do nothing)"


def _processes_of(uid: int) -> int:
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def _loopback_listener(port: int, forward_fd: int) -> None:
    """Bring up ``lo`` in the new network namespace, listen on 127.0.0.1:``port`` there and hand the
    listening socket to the trusted worker over the UNIX socket ``forward_fd``."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s.fileno(), siocgifflags, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    channel = socket.socket(fileno=forward_fd)
    socket.send_fds(channel, [b"L"], [listener.fileno()])
    listener.close()
    channel.close()


def lock_down(workdir: str, *, memory_mb: int | None, max_processes: int, network: bool = False,
              forward_port: int | None = None, forward_fd: int | None = None,
              exec_next: bool = False, limits: dict | None = None) -> dict[str, str]:
    """Apply the layers of the module docstring to the calling process; return those that took effect.

    ``workdir`` is the private temporary folder (the only place the process may write);
    ``network=True`` keeps the host's network namespace; ``forward_port`` and ``forward_fd``: see
    `_loopback_listener` (an LLM endpoint the user named, reached through the worker).
    ``exec_next``: the caller executes another program next (an artifact's recipe), which keeps
    the right to read any file as an ambient capability; every layer survives the exec.
    ``limits``: `polar_bench.lockdown.limits.TreeLimits.child_config` of the worker's limits."""
    layers: dict[str, str] = {}
    if not sys.platform.startswith("linux"):
        return {"platform": f"{sys.platform}: no kernel layers (only the separate process)"}
    limits = limits or {}
    root = os.geteuid() == 0
    uid = AGENT_UID if root else os.getuid()

    # first: everything from here on is in the cgroup
    layers["oom_score_adj"] = ("1000 (the kernel's first choice when memory runs out)" if kernel.enter_limits(limits)
                               else "unchanged (/proc/self/oom_score_adj refused)")

    disk = limits.get("disk_bytes")
    no_tmpfs = ""  # why the folder has no tmpfs ("": it has one)
    if disk and not limits.get("disk_tmpfs", True):
        no_tmpfs = "the folder is read afterwards"
    elif disk and not root:
        no_tmpfs = "needs root"
    elif disk:
        errno = kernel.unshare(kernel.CLONE_NEWNS)
        no_tmpfs = f"unshare errno {errno}" if errno else kernel.private_tmpfs(
            workdir, disk, int(limits.get("disk_inodes") or 0) or disk >> 14, AGENT_UID, AGENT_UID)
    if disk and not no_tmpfs:
        layers["disk_limit"] = (f"tmpfs of {gib(disk >> 20)} and {limits.get('disk_inodes')} files over the "
                                f"private folder, in a mount namespace of its own")

    userns = False
    if network:
        layers["network_namespace"] = "off (an LLM endpoint was named: the host network is reachable)"
    else:
        flags = kernel.CLONE_NEWNET | kernel.CLONE_NEWIPC | kernel.CLONE_NEWUTS | (0 if root else kernel.CLONE_NEWUSER)
        errno = kernel.unshare(flags)
        if errno == 0:
            userns = not root
            layers["network_namespace"] = "on (no network)" + ("" if root else ", in a user namespace")
            if forward_port and forward_fd is not None:
                _loopback_listener(forward_port, forward_fd)
                layers["network_namespace"] = (f"on (no network but 127.0.0.1:{forward_port}, served by the "
                                               f"worker: the LLM proxy or the named LLM endpoint)"
                                               + ("" if root else ", in a user namespace"))
        else:
            layers["network_namespace"] = f"unavailable (unshare errno {errno})"

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb:
        limit = int(memory_mb) << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if disk and no_tmpfs:
        resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
        layers["disk_limit"] = (f"no file over {gib(disk >> 20)}; the worker adds up the private folder "
                                f"(no tmpfs: {no_tmpfs})")
    nproc = _processes_of(uid) + int(max_processes)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    layers["rlimits"] = (f"on (address space {memory_mb} MiB, " if memory_mb else "on (address space unlimited, ") \
        + f"{max_processes} more processes or threads of uid {uid}, no core files)"

    if root:
        kernel.drop_root(AGENT_UID, keep=kernel.CAP_DAC_READ_SEARCH)
        if exec_next:
            kernel.keep_reading_across_exec()
        layers["privileges"] = f"dropped to uid {AGENT_UID}, only CAP_DAC_READ_SEARCH (reads any file)"
    else:
        if userns:
            kernel.capset(0)
        layers["privileges"] = f"unprivileged uid {os.getuid()}, no capabilities"
    kernel.no_new_privs()
    layers["landlock"] = _landlock(workdir)
    layers["seccomp"] = _seccomp()
    return layers
