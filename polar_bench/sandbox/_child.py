"""The sandbox child: locks down a fresh interpreter, then runs one untrusted policy program.

`polar_bench.sandbox.SandboxedPolicy` starts it as ``python -I -S -B _child.py CONFIG_JSON``. Before
it reads the first byte of untrusted code it keeps only its protocol pipes, imports what the program
may use, then applies the kernel layers (memory cgroup, namespaces, chroot, resource limits, the
privilege drop, seccomp) and the Python-level import and audit filter, in that order. It then says
hello with the layers that took effect and serves requests. The kernel layers are the boundary.
See docs/sandbox.md#the-boundary-what-confines-the-program for each step.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: the child imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

# Frame kinds, parent -> child: L(oad source), A(ct), S(eed reset), Q(uit).
# Child -> parent: H(ello), O(k value), E(rror: dict), V(iolation: dict, the child then exits).
REQ_FD, RESP_FD = 3, 4
MAX_REQUEST = 1 << 30

# --------------------------------------------------------------------------- seccomp (x86-64)
# Syscall numbers from asm/unistd_64.h.
_X86_64 = {
    # files: open, create, modify, metadata
    "open": 2, "stat": 4, "lstat": 6, "access": 21, "truncate": 76, "ftruncate": 77,
    "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85, "link": 86, "unlink": 87, "symlink": 88,
    "readlink": 89, "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94,
    "utime": 132, "mknod": 133, "uselib": 134, "ustat": 136, "statfs": 137, "sysfs": 139,
    "acct": 163, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "chroot": 161,
    "pivot_root": 155, "quotactl": 179, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
    "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "utimes": 235,
    "inotify_init": 253, "inotify_add_watch": 254, "openat": 257, "mkdirat": 258, "mknodat": 259,
    "fchownat": 260, "futimesat": 261, "unlinkat": 263, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "readlinkat": 267, "fchmodat": 268, "faccessat": 269, "utimensat": 280,
    "fallocate": 285, "inotify_init1": 294, "fanotify_init": 300, "fanotify_mark": 301,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "renameat2": 316, "memfd_create": 319,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "openat2": 437, "faccessat2": 439, "mount_setattr": 442, "quotactl_fd": 443,
    "memfd_secret": 447,
    # network
    "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "recvfrom": 45, "sendmsg": 46,
    "recvmsg": 47, "shutdown": 48, "bind": 49, "listen": 50, "getsockname": 51,
    "getpeername": 52, "socketpair": 53, "setsockopt": 54, "getsockopt": 55, "accept4": 288,
    "recvmmsg": 299, "sendmmsg": 307,
    # processes, programs, other processes
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "pidfd_open": 434, "pidfd_getfd": 438, "pidfd_send_signal": 424, "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297, "setpgid": 109, "setsid": 112, "process_madvise": 440,
    "process_mrelease": 448, "migrate_pages": 256, "move_pages": 279,
    # credentials, limits, namespaces, scheduling of others
    "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114, "setgroups": 116,
    "setresuid": 117, "setresgid": 119, "setfsuid": 122, "setfsgid": 123, "capset": 126,
    "setrlimit": 160, "prlimit64": 302, "unshare": 272, "setns": 308, "prctl": 157,
    "personality": 135, "seccomp": 317, "setpriority": 141, "sched_setparam": 142,
    "sched_setscheduler": 144, "sched_setattr": 314, "ioprio_set": 251,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
    # timers that would interrupt the bootstrap with a frame in hand
    "alarm": 37, "setitimer": 38, "timer_create": 222, "timerfd_create": 283,
    # kernel and system
    "syslog": 103, "vhangup": 153, "modify_ldt": 154, "_sysctl": 156, "adjtimex": 159,
    "settimeofday": 164, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172,
    "ioperm": 173, "create_module": 174, "init_module": 175, "delete_module": 176,
    "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "perf_event_open": 298, "clock_adjtime": 305,
    "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_setup": 206, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "mq_open": 240, "mq_unlink": 241, "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64,
    "semop": 65, "semctl": 66, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "vserver": 236, "mbind": 237, "set_mempolicy": 238,
}
_X86_64_FIRST_UNLISTED = 451  # every syscall from here on (newer than the table) is refused
_X86_64_KILL, _X86_64_TGKILL, _X86_64_TKILL = 62, 234, 200
_X86_64_NEWFSTATAT, _X86_64_STATX = 262, 332
_AUDIT_ARCH_X86_64 = 0xC000003E
_EPERM, _ENOSYS = 1, 38


def _seccomp_program(own_pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF program (a list of (code, jt, jf, k)) of the filter, for x86-64."""
    LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, KILL = 0x7FFF0000, 0x80000000
    deny, nosys = 0x00050000 | _EPERM, 0x00050000 | _ENOSYS
    ARG0, ARG0_HI, ARG2, ARG3 = 16, 20, 32, 40
    p = [
        (LD_W_ABS, 0, 0, 4),                         # A = arch
        (JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (RET, 0, 0, KILL),                           # wrong ABI (e.g. int 0x80): kill
        (LD_W_ABS, 0, 0, 0),                         # A = syscall number
        (JGE, 0, 1, 0x40000000),                     # x32 ABI numbers: refuse
        (RET, 0, 0, deny),
        (JGE, 0, 1, _X86_64_FIRST_UNLISTED),         # newer than this table: "not implemented"
        (RET, 0, 0, nosys),
    ]
    # kill(pid, sig) and tgkill(tgid, ...) only on the process itself; tkill(tid) only on itself.
    for nr in (_X86_64_KILL, _X86_64_TGKILL, _X86_64_TKILL):
        p += [
            (JEQ, 0, 6, nr),
            (LD_W_ABS, 0, 0, ARG0_HI),
            (JEQ, 0, 2, 0),
            (LD_W_ABS, 0, 0, ARG0),
            (JEQ, 1, 0, own_pid),
            (RET, 0, 0, deny),
            (RET, 0, 0, ALLOW),
        ]
    # fstat() is newfstatat(fd, "", buf, AT_EMPTY_PATH) in glibc >= 2.33, and statx likewise:
    # allow them on an fd (AT_EMPTY_PATH = 0x1000), refuse them on paths.
    for nr, flags_arg in ((_X86_64_NEWFSTATAT, ARG3), (_X86_64_STATX, ARG2)):
        p += [
            (JEQ, 0, 4, nr),
            (LD_W_ABS, 0, 0, flags_arg),
            (JSET, 1, 0, 0x1000),
            (RET, 0, 0, deny),
            (RET, 0, 0, ALLOW),
        ]
    nrs = sorted(set(_X86_64.values()))
    for i, nr in enumerate(nrs):
        p.append((JEQ, len(nrs) - i, 0, nr))  # jump to the shared "deny" at the end
    p.append((RET, 0, 0, ALLOW))
    p.append((RET, 0, 0, deny))
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in p), "jump too long"
    return p


def _install_seccomp(libc: Any, ctypes: Any) -> str:
    import platform
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"unavailable on {platform.machine()}"
    return sys.modules["polar_bench_lockdown_seccomp"].install_bpf(_seccomp_program(os.getpid()))


# --------------------------------------------------------------------------- framing
_INBUF = bytearray()


def _read_exact(n: int) -> bytes:
    buf = _INBUF
    while len(buf) < n:
        b = os.read(REQ_FD, max(n - len(buf), 1 << 16))
        if not b:
            raise EOFError
        buf += b
    data = bytes(buf[:n])
    del buf[:n]
    return data


def _write_frame(data: bytes) -> None:
    data = len(data).to_bytes(4, "little") + data
    view = memoryview(data)
    while view:
        view = view[os.write(RESP_FD, view):]


def _read_frame() -> bytes:
    n = int.from_bytes(_read_exact(4), "little")
    if n > MAX_REQUEST:
        raise EOFError
    return _read_exact(n)


# --------------------------------------------------------------------------- lock-down
def _move_fds(req: int, resp: int) -> None:
    hi_req, hi_resp = os.dup(req), os.dup(resp)
    os.dup2(hi_req, REQ_FD)
    os.dup2(hi_resp, RESP_FD)
    os.closerange(RESP_FD + 1, 1 << 16)  # also closes the high copies


def _lock_down(cfg: dict) -> dict:
    """Steps 3-8 of docs/sandbox.md ("The boundary"), the kernel layers; returns those that took effect."""
    import ctypes
    import resource
    disabled = set(cfg.get("disable", ()))
    layers = {}
    libc = ctypes.CDLL(None, use_errno=True)
    root = os.geteuid() == 0

    with open("/proc/self/statm") as f:  # before the chroot hides /proc
        vm_bytes = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")

    kernel = sys.modules["polar_bench_lockdown_kernel"]
    # the parent's memory cgroup (the limit of what the program adds), as the agent process of evaluate
    layers["oom_score_adj"] = "1000" if kernel.enter_limits(cfg.get("limits") or {}) else "unchanged"

    userns = False
    if "netns" in disabled:
        layers["network_namespace"] = "disabled"
    else:
        flags = kernel.CLONE_NEWNET | kernel.CLONE_NEWIPC | kernel.CLONE_NEWUTS | (0 if root else kernel.CLONE_NEWUSER)
        errno = kernel.unshare(flags)
        if errno == 0:
            layers["network_namespace"] = "on" + ("" if root else " (in a user namespace)")
            userns = not root
        else:
            layers["network_namespace"] = f"unavailable (errno {errno})"

    workdir = cfg["workdir"]
    if "chroot" in disabled:
        layers["chroot"] = "disabled"
    elif root or userns:
        try:
            os.chroot(workdir)
            os.chdir("/")
            layers["chroot"] = "on"
        except OSError as exc:
            layers["chroot"] = f"failed ({exc})"
            os.chdir(workdir)
    else:
        layers["chroot"] = "unavailable (needs root or a user namespace)"
        os.chdir(workdir)

    if "rlimits" in disabled:
        layers["rlimits"] = "disabled"
    else:
        def limit(res: int, value: int) -> None:
            resource.setrlimit(res, (value, value))
        limit(resource.RLIMIT_CORE, 0)
        limit(resource.RLIMIT_FSIZE, 0)
        limit(resource.RLIMIT_MEMLOCK, 0)
        limit(resource.RLIMIT_NOFILE, RESP_FD + 1)  # fds 0-4 are open: no new fd at all
        if hasattr(resource, "RLIMIT_MSGQUEUE"):
            limit(resource.RLIMIT_MSGQUEUE, 0)
        if cfg.get("memory_mb"):
            limit(resource.RLIMIT_AS, vm_bytes + int(cfg["memory_mb"]) * (1 << 20))
        if cfg.get("cpu_seconds"):
            used = resource.getrusage(resource.RUSAGE_SELF)
            soft = int(used.ru_utime + used.ru_stime + 1 + float(cfg["cpu_seconds"]))
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
        limit(resource.RLIMIT_NPROC, 0)  # enforced for any uid but root: see the privilege drop
        layers["rlimits"] = "on"

    if "privileges" in disabled:
        layers["privileges"] = "disabled"
    elif root:
        uid = int(cfg.get("uid", 65534))
        kernel.drop_root(uid)  # no capability kept: the limits above cannot be raised again
        layers["privileges"] = f"dropped to uid {uid}"
    else:
        if userns:  # we hold every capability inside the new user namespace: clear them
            kernel.capset(0)
        layers["privileges"] = f"unprivileged uid {os.getuid()}, no capabilities"
    kernel.no_new_privs()

    layers["seccomp"] = "disabled" if "seccomp" in disabled else _install_seccomp(libc, ctypes)
    return layers


# --------------------------------------------------------------------------- Python first filter
# Code compiled with only these globals, so that the objects the program can reach (its import
# function, sys.stdout) lead nowhere through __globals__ or __closure__.
_SAFE_HELPERS = '''
def make_import(real_import, allowed, audit):
    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0 or name.partition(".")[0] not in allowed:
            audit("polar_bench.refused_import", name if level == 0 else "." * level + name)
        return real_import(name, globals, locals, fromlist, level)
    return __import__


class CappedWriter:
    """sys.stdout / sys.stderr: writes to the fd until the shared budget is spent, then drops."""
    encoding = "utf-8"
    errors = "replace"

    def __init__(self, fd, budget, write):
        self._fd, self._budget, self._write = fd, budget, write

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        left = self._budget[0]
        if left > 0:
            data = text.encode("utf-8", "replace")[:left]
            self._budget[0] = left - len(data)
            try:
                while data:
                    data = data[self._write(self._fd, data):]
                if self._budget[0] <= 0:
                    self._write(self._fd, b"\\n[output truncated]\\n")
            except OSError:
                self._budget[0] = 0
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True
'''

_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_globals",
                          "f_locals", "f_builtins"})
_KILL_PREFIXES = ("os.", "subprocess.", "socket.", "ctypes.", "pty.", "shutil.", "fcntl.",
                  "resource.", "mmap.", "signal.", "syslog.", "sqlite3.", "tempfile.", "glob.",
                  "urllib.", "http.", "ftplib.", "smtplib.", "telnetlib.", "webbrowser.", "_posixsubprocess.",
                  "winreg.", "msvcrt.", "_winapi.", "cpython.")
_KILL_EVENTS = frozenset({
    "sys.settrace", "sys.setprofile", "sys._current_frames", "sys._current_exceptions",
    "sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "builtins.input", "builtins.breakpoint", "code.__new__", "function.__new__", "marshal.load",
    "marshal.loads", "pickle.find_class", "setopencodehook",
})


def _make_audit_hook(allowed: frozenset[str], trusted: list[bool], wire: Any, write_frame: Callable[[bytes], None],
                     exit_: Callable[[int], NoReturn]) -> Callable[[str, tuple[Any, ...]], None]:
    def describe(value: object) -> str:
        return repr(value)[:200] if type(value) in (str, bytes, int) else "..."

    def violation(kind: str, reason: str) -> NoReturn:
        try:
            write_frame(b"V" + wire.encode({"kind": kind, "reason": reason}))
        finally:
            exit_(70)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if trusted[0]:
            return
        if event == "import":
            name = args[0] if args and type(args[0]) is str else "?"
            if name.partition(".")[0] not in allowed:
                violation("import", f"refused import {name!r}")
        elif event == "polar_bench.refused_import":
            name = args[0] if args and type(args[0]) is str else "?"
            violation("import", f"refused import {name!r}")
        elif event == "open":
            violation("forbidden", f"refused open({describe(args[0]) if args else ''})")
        elif event == "object.__getattr__":
            name = args[1] if len(args) > 1 and type(args[1]) is str else "?"
            if name in _FRAME_ATTRS:
                violation("forbidden", f"refused access to the interpreter's frames ({name})")
        elif event == "sys._getframe":
            raise ValueError("sys._getframe is not available in the sandbox")
        elif event in _KILL_EVENTS or event.startswith(_KILL_PREFIXES):
            detail = f"({describe(args[0])})" if args else ""
            violation("forbidden", f"refused {event}{detail}")
    return hook


def _format_error(exc: BaseException, source_lines: list[str]) -> tuple[str, str]:
    """A traceback with source lines for the program's frames only (no file is opened)."""
    parts = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        line = ""
        if code.co_filename == "<policy>" and 0 < tb.tb_lineno <= len(source_lines):
            line = "\n    " + source_lines[tb.tb_lineno - 1].strip()
        parts.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}{line}')
        tb = tb.tb_next
    parts = parts[1:] if len(parts) > 1 else parts  # drop the bootstrap's own frame
    if len(parts) > 30:
        parts = parts[:10] + [f"  ... {len(parts) - 20} more frames ..."] + parts[-10:]
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - the program's exception class may be hostile
        message = "<unprintable>"
    head = type(exc).__name__ + (f": {message}" if message else "")
    if isinstance(exc, SyntaxError) and exc.lineno:
        head += f" (line {exc.lineno})"
    return "Traceback (most recent call last):\n" + "\n".join(parts) + "\n" + head[:2000], head[:500]


# --------------------------------------------------------------------------- main
def _load_toolkit(cfg: dict[str, Any]) -> Any:
    """Put the configured paths on sys.path and load polar_bench.lockdown's modules by file path;
    returns the wire module."""
    for path in cfg.get("paths", ()):
        sys.path.append(path)
    import importlib.util
    for name, path in cfg["toolkit"].items():  # polar_bench.lockdown's modules, by file path
        spec = importlib.util.spec_from_file_location(f"polar_bench_lockdown_{name}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load the lockdown toolkit's {name} from {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["polar_bench_lockdown_wire"]


def _import_ahead(cfg: dict[str, Any]) -> None:
    """Step 2 of docs/sandbox.md ("The boundary"): import what the program and the lock-down need,
    then empty the import path, so that nothing needs the file system later."""
    for name in cfg.get("preload", ()):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a missing optional module is simply not available
            pass
    for name in ("encodings.latin_1", "encodings.ascii", "encodings.utf_16", "encodings.utf_32",
                 "encodings.cp1252", "encodings.idna"):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001
            pass
    import ctypes  # noqa: F401 - needed by _lock_down, after which nothing can be imported
    import platform  # noqa: F401
    import resource  # noqa: F401
    sys.path[:] = []
    sys.path_hooks[:] = []
    sys.path_importer_cache.clear()


def _install_first_filter(cfg: dict[str, Any], wire: Any,
                          layers: dict[str, str]) -> tuple[dict[str, Any], list[bool], bool]:
    """Step 9 of docs/sandbox.md ("The boundary"): capped stdout and stderr, and (with guards) the import
    allow-list and the audit hook. Returns the program's builtins, the trusted flag (a one-item
    list the hook reads) and whether the guards are on."""
    import builtins
    budget = [int(cfg.get("max_output", 65536))]
    helpers: dict[str, Any] = {"__builtins__": {"__build_class__": builtins.__build_class__, "len": len,
                                "isinstance": isinstance, "str": str, "type": type,
                                "TypeError": TypeError, "OSError": OSError,
                                "__name__": "sandbox_helpers"},
               "__name__": "sandbox_helpers"}
    exec(compile(_SAFE_HELPERS, "<sandbox>", "exec"), helpers)
    sys.stdout = helpers["CappedWriter"](1, budget, os.write)
    sys.stderr = helpers["CappedWriter"](2, budget, os.write)
    sys.stdin = None

    guards = cfg.get("guards", True)
    allowed = frozenset(cfg.get("allowed", ()))
    if guards:
        safe_builtins = {k: v for k, v in builtins.__dict__.items()
                         if k not in ("open", "exec", "eval", "compile", "input", "breakpoint",
                                      "help", "exit", "quit", "copyright", "credits", "license",
                                      "__loader__", "__spec__", "__import__")}
        safe_builtins["__import__"] = helpers["make_import"](builtins.__import__, allowed, sys.audit)
        trusted = [False]
        sys.addaudithook(_make_audit_hook(allowed, trusted, wire, _write_frame, os._exit))
        layers["python_guards"] = "on"
    else:
        safe_builtins = builtins.__dict__
        trusted = [True]
        layers["python_guards"] = "disabled"
    del helpers
    return safe_builtins, trusted, guards


def _serve(wire: Any, safe_builtins: dict[str, Any], trusted: list[bool], guards: bool) -> NoReturn:
    """Answer the parent's requests (load, act, reset) until it quits or closes the pipe."""
    ns: dict[str, Any] = {"__name__": "__policy__", "__builtins__": safe_builtins}
    source_lines: list = []
    act = reset = None
    value: Any
    while True:
        try:
            frame = _read_frame()
        except EOFError:
            os._exit(0)
        op = frame[:1]
        try:
            if op == b"A":
                if act is None:
                    raise RuntimeError("no program loaded")
                value = act(wire.decode(frame, 1))
            elif op == b"L":
                source = wire.decode(frame, 1)
                source_lines = source.splitlines()
                trusted[0] = True  # compiling runs no program code, but a SyntaxError makes
                try:               # CPython try to open "<policy>" for the offending line
                    code = compile(source, "<policy>", "exec")
                finally:
                    trusted[0] = not guards
                exec(code, ns)
                act, reset = ns.get("act"), ns.get("reset")
                if not callable(act):
                    _write_frame(b"E" + wire.encode({
                        "kind": "error", "reason": "the program defines no function act(observation)",
                        "traceback": ""}))
                    continue
                value = None
            elif op == b"S":
                value = reset(wire.decode(frame, 1)) if callable(reset) else None
            else:
                os._exit(0)
            try:
                reply = b"O" + wire.encode(value)
            except TypeError as exc:
                reply = b"E" + wire.encode({"kind": "invalid_action", "reason": str(exc),
                                            "traceback": ""})
        except BaseException as exc:  # noqa: BLE001 - every failure of the program is reported
            was = trusted[0]
            trusted[0] = True
            try:
                text, head = _format_error(exc, source_lines)
            except BaseException:  # noqa: BLE001
                text = head = type(exc).__name__
            finally:
                trusted[0] = was
            kind = "memory" if isinstance(exc, MemoryError) else "error"
            exc = None
            reply = b"E" + wire.encode({"kind": kind, "reason": head, "traceback": text})
        _write_frame(reply)


def main() -> None:
    import json
    cfg = json.loads(sys.argv[1])
    _move_fds(cfg["req_fd"], cfg["resp_fd"])
    wire = _load_toolkit(cfg)
    _import_ahead(cfg)
    layers = _lock_down(cfg)
    safe_builtins, trusted, guards = _install_first_filter(cfg, wire, layers)
    _write_frame(b"H" + wire.encode(layers))
    _serve(wire, safe_builtins, trusted, guards)


if __name__ == "__main__":
    main()
