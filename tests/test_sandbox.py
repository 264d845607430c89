"""The sandbox as a security boundary: every attack of issue 7 is contained and reported.

Most attacks run twice: once with the Python-level first filter (asserting the specific reason it
reports) and once with ``python_guards=False``, to show that the kernel layers (namespaces, chroot,
uid, rlimits, seccomp) hold on their own. Some run again with one kernel layer switched off, to show
that the next layer still holds (defence in depth). Speed is measured by
``benchmarks/sandbox_calls.py``, not asserted here.
"""

from __future__ import annotations

import os
import pickle
import random
import socket
import struct
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from gymnasium import spaces

from polar_bench.errors import PolarBenchError
from polar_bench.lockdown import wire
from polar_bench.sandbox import SandboxedPolicy, SandboxViolation

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox needs Linux")

ROOT = os.geteuid() == 0
# The standard escape: any class -> a module's globals -> the real __import__ (no audit event).
REAL_IMPORT = ("[c for c in ().__class__.__base__.__subclasses__() "
               "if c.__name__ == 'catch_warnings'][0]()._module.__builtins__['__import__']")


_LAYERS: dict = {}


def layers() -> dict:
    """The layers that take effect on this machine (started once)."""
    if not _LAYERS:
        with SandboxedPolicy("def act(obs):\n    return 0\n") as policy:
            _LAYERS.update(policy.layers)
    return _LAYERS


def has(layer: str) -> bool:
    """Whether a kernel layer took effect here (they all do on x86-64 Linux as root or with user
    namespaces; the tests of a layer that this machine lacks are skipped, not failed)."""
    return layers().get(layer, "").startswith(("on", "dropped", "unprivileged"))


def program(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def run(source: str, obs=0, **kw):
    """Start a sandbox, call act once, return the action (raises SandboxViolation)."""
    kw.setdefault("step_timeout", 5.0)
    with SandboxedPolicy(program(source), **kw) as policy:
        return policy.act(obs)


def violation(source: str, obs=0, **kw) -> SandboxViolation:
    with pytest.raises(SandboxViolation) as info:
        run(source, obs, **kw)
    return info.value


def unguarded(source: str, obs=0, disable=(), **kw):
    """Run with the Python filter off (and optionally kernel layers off): only the kernel holds."""
    return run(source, obs, python_guards=False, _disable=disable, **kw)


# =================================================================================== functional
def test_numpy_policy_keeps_state_across_steps():
    src = """
        import numpy as np
        count = 0
        def act(obs):
            global count
            count += 1
            return {"argmax": np.argmax(obs), "count": count, "mean": obs.mean(), "obs": obs * 2}
    """
    with SandboxedPolicy(program(src)) as policy:
        pid = policy.pid
        for step in range(1, 6):
            obs = np.random.default_rng(step).normal(size=7).astype(np.float32)
            out = policy.act(obs)
            assert out["count"] == step
            assert out["argmax"] == np.argmax(obs) and isinstance(out["argmax"], np.int64)
            assert out["mean"] == pytest.approx(obs.mean()) and isinstance(out["mean"], np.float32)
            np.testing.assert_array_equal(out["obs"], obs * 2)
            assert out["obs"].dtype == np.float32 and out["obs"].flags.writeable
        assert policy.pid == pid and policy.calls == 5 and policy.alive


def test_dict_str_and_nested_observations():
    src = """
        def act(obs):
            if isinstance(obs, str):
                return obs.upper()
            return [obs["image"].shape, obs["image"].dtype.str, obs["mission"], obs["t"], obs["none"],
                    obs["bytes"], obs["big"] + 1]
    """
    with SandboxedPolicy(program(src)) as policy:
        assert policy.act("go to the red ball ☃") == "GO TO THE RED BALL ☃"
        obs = {"image": np.zeros((7, 7, 3), np.uint8), "mission": "open the door", "t": (1, 2.5, True),
               "none": None, "bytes": b"\x00\xff", "big": 2 ** 80}
        assert policy.act(obs) == [(7, 7, 3), "|u1", "open the door", (1, 2.5, True), None,
                                   b"\x00\xff", 2 ** 80 + 1]


def test_reset_calls_the_program_reset_and_is_optional():
    src = """
        seen = []
        def reset(seed):
            seen.append(seed)
        def act(obs):
            return list(seen)
    """
    with SandboxedPolicy(program(src)) as policy:
        policy.reset(3)
        policy.reset(None)
        assert policy.act(0) == [3, None]
    with SandboxedPolicy("def act(obs):\n    return 1\n") as policy:
        policy.reset(1)  # no reset() in the program: a no-op
        assert policy.act(0) == 1


def test_invalid_actions_are_reported_and_the_program_survives():
    src = """
        def act(obs):
            return obs
    """
    with SandboxedPolicy(program(src), action_space=spaces.Discrete(3)) as policy:
        assert policy.act(2) == 2
        with pytest.raises(SandboxViolation) as info:
            policy.act(5)
        assert info.value.kind == "invalid_action" and not info.value.fatal
        assert "invalid action int 5: not in Discrete(3)" in info.value.reason
        with pytest.raises(SandboxViolation, match="invalid action float 1.0"):
            policy.act(1.0)
        assert policy.act(np.int64(1)) == 1 and policy.alive  # still loaded
    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    with SandboxedPolicy(program(src), action_space=box) as policy:
        action = policy.act([0.5, -0.5])  # a list becomes an array of the space's dtype
        assert isinstance(action, np.ndarray) and action.dtype == np.float32
        for bad in ([0.5, 2.0], [0.1, 0.2, 0.3], [float("nan"), 0.0], "left"):
            with pytest.raises(SandboxViolation) as info:
                policy.act(bad)
            assert info.value.kind == "invalid_action"

    def even(action):
        if action % 2:
            raise ValueError("must be even")
        return action
    with SandboxedPolicy(program(src), validate_action=even) as policy:
        assert policy.act(4) == 4
        with pytest.raises(SandboxViolation, match="invalid action int 3: must be even"):
            policy.act(3)


def test_unsendable_actions_are_invalid():
    v = violation("def act(obs):\n    return object()\n")
    assert v.kind == "invalid_action" and "cannot send a value of type object" in v.reason
    v = violation("""
        def act(obs):
            x = []
            for _ in range(100):
                x = [x]
            return x
    """)
    assert v.kind == "invalid_action" and "nested deeper" in v.reason


def test_program_errors_carry_a_traceback_and_keep_the_program():
    src = """
        def helper(x):
            return 1 / x
        def act(obs):
            return helper(obs)
    """
    with SandboxedPolicy(program(src)) as policy:
        with pytest.raises(SandboxViolation) as info:
            policy.act(0)
        v = info.value
        assert v.kind == "error" and not v.fatal
        assert v.reason == "ZeroDivisionError: division by zero"
        assert 'File "<policy>", line 2, in helper' in v.traceback and "return 1 / x" in v.traceback
        assert "_child.py" not in v.traceback
        assert policy.act(4) == 0.25


def test_load_failures():
    v = violation("def act(obs)\n    return 1\n")
    assert v.kind == "error" and v.fatal and "the program failed to load: SyntaxError" in v.reason
    assert "(line 1)" in v.reason
    v = violation("x = 1\n")
    assert "defines no function act(observation)" in v.reason
    v = violation("import numpy\nnumpy.zeros(3)[7]\ndef act(obs):\n    return 1\n")
    assert "IndexError" in v.reason


def test_output_is_captured_and_capped():
    src = """
        def act(obs):
            print("hello", obs)
            return 1
    """
    with SandboxedPolicy(program(src)) as policy:
        policy.act(7)
        assert policy.output == "hello 7\n"
    v = violation("def act(obs):\n    print('about to fail')\n    raise RuntimeError('boom')\n")
    assert "about to fail" in v.output


def test_timeout_per_call_then_restart_cleanly():
    src = """
        import time
        calls = 0
        def act(obs):
            global calls
            calls += 1
            if obs == "hang":
                time.sleep(30)
            return calls
    """
    with SandboxedPolicy(program(src), step_timeout=0.5) as policy:
        assert policy.act(0) == 1
        pid = policy.pid
        start = time.monotonic()
        with pytest.raises(SandboxViolation) as info:
            policy.act("hang")
        assert time.monotonic() - start < 3
        assert info.value.kind == "timeout" and info.value.reason == "timeout after 0.5 s"
        assert not policy.alive and not os.path.exists(f"/proc/{pid}")  # killed and reaped
        with pytest.raises(SandboxViolation, match="stopped earlier: timeout after 0.5 s"):
            policy.act(0)
        policy.restart()
        assert policy.act(0) == 1 and policy.pid != pid  # a fresh program


def test_close_is_idempotent_and_leaves_no_process_or_directory():
    policy = SandboxedPolicy("def act(obs):\n    return 1\n").start()
    pid, workdir = policy.pid, policy._workdir
    assert os.path.isdir(workdir)
    policy.close()
    policy.close()
    assert not os.path.exists(f"/proc/{pid}") and not os.path.exists(workdir)
    with pytest.raises(SandboxViolation, match="closed"):
        policy.act(0)


def test_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="step_timeout must be a positive number, got 0"):
        SandboxedPolicy("def act(o): pass", step_timeout=0)
    with pytest.raises(TypeError, match="source must be a str"):
        SandboxedPolicy(b"def act(o): pass")


def test_violations_are_picklable_polar_bench_errors():
    v = SandboxViolation("timeout", "timeout after 1 s", output="x")
    w = pickle.loads(pickle.dumps(v))
    assert isinstance(w, PolarBenchError) and (w.kind, w.reason, w.output) == ("timeout", "timeout after 1 s", "x")


def test_the_process_is_locked_down():
    with SandboxedPolicy("def act(obs):\n    return 1\n") as policy:
        layers, pid, workdir = policy.layers, policy.pid, policy._workdir
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
        fds = sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
        own_net, child_net = os.readlink("/proc/self/ns/net"), os.readlink(f"/proc/{pid}/ns/net")
        root = os.readlink(f"/proc/{pid}/root")
        environ = open(f"/proc/{pid}/environ", "rb").read()
    assert layers["python_guards"] == "on"
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
    assert status["NoNewPrivs"].strip() == "1"
    assert fds == [0, 1, 2, 3, 4]
    assert b"HOME" not in environ and b"PATH" not in environ
    if layers["seccomp"] == "on":
        assert status["Seccomp"].strip() == "2"
    if layers["network_namespace"].startswith("on"):
        assert child_net != own_net
    if layers["chroot"] == "on":
        assert root == os.path.realpath(workdir)
    if ROOT:
        assert status["Uid"].split()[0] == "65534" and status["Uid"].split()[1] == "65534"


# =================================================================================== attacks
def test_reading_etc_passwd():
    v = violation("def act(obs):\n    return open('/etc/passwd').read()\n")
    assert v.kind == "error" and "name 'open' is not defined" in v.reason  # not in its builtins
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('builtins').open('/etc/passwd').read()\n")
    assert (v.kind, v.reason) == ("forbidden", "refused open('/etc/passwd')")
    # FileLoader.get_data opens through io.open_code: the same audit event.
    v = violation("""
        def act(obs):
            loader = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'FileLoader'][0]
            return loader('x', '/etc/passwd').get_data('/etc/passwd')
    """)
    assert v.reason == "refused open('/etc/passwd')"
    reader = """
        def act(obs):
            try:
                return open(obs).read()
            except OSError as exc:
                return type(exc).__name__
    """
    if has("seccomp"):
        assert unguarded(reader, "/etc/passwd") == "PermissionError"  # seccomp: no open()
    # one kernel layer at a time: the chroot (nothing there), the fd limit (no fd to open into)
    if has("chroot"):
        assert unguarded(reader, "/etc/passwd", disable=("seccomp", "rlimits")) == "FileNotFoundError"
    assert unguarded(reader, "/etc/passwd", disable=("seccomp", "chroot")) == "OSError"  # EMFILE


def test_reading_a_file_in_the_users_home(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-value")
    os.chmod(tmp_path, 0o755)
    os.chmod(secret, 0o644)  # readable by anyone: only the sandbox stands in the way
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('builtins').open(obs).read()\n", str(secret))
    assert v.reason == f"refused open({str(secret)!r})"
    reader = """
        import os
        def act(obs):
            out = []
            for path in obs:
                try:
                    out.append(open(path).read())
                except OSError as exc:
                    out.append(type(exc).__name__)
                try:
                    out.append(os.listdir(os.path.dirname(path)))
                except OSError as exc:
                    out.append(type(exc).__name__)
            return out
    """
    paths = [str(secret), os.path.join(os.path.expanduser("~"), ".bashrc")]
    for disable in ((), ("seccomp", "rlimits") if has("chroot") else ("seccomp",)):
        result = unguarded(reader, paths, disable=disable)
        assert "the-secret-value" not in repr(result) and "secret.txt" not in repr(result)
        assert all(isinstance(r, str) and r.endswith("Error") for r in result), result


def test_writing_a_file(tmp_path):
    target = tmp_path / "written.txt"
    os.chmod(tmp_path, 0o777)  # writable by anyone: only the sandbox stands in the way
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('builtins').open(obs, 'w').write('x')\n",
                  str(target))
    assert v.reason == f"refused open({str(target)!r})"
    writer = """
        def act(obs):
            result = []
            for path in obs:
                try:
                    with open(path, 'w') as f:
                        f.write('pwned')
                    result.append('wrote')
                except OSError as exc:
                    result.append(type(exc).__name__)
            return result
    """
    paths = [str(target), "relative.txt", "/tmp/polar_sandbox_write_test"]
    if has("seccomp"):
        assert unguarded(writer, paths) == ["PermissionError"] * 3
    if has("chroot"):
        assert "wrote" not in unguarded(writer, paths, disable=("seccomp", "rlimits"))
    assert "wrote" not in unguarded(writer, paths, disable=("seccomp", "chroot", "privileges"))
    assert not target.exists() and not os.path.exists("/tmp/polar_sandbox_write_test")


def test_os_system(tmp_path):
    marker = tmp_path / "marker"
    os.chmod(tmp_path, 0o777)
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('os').system('touch ' + obs)\n", str(marker))
    assert v.kind == "forbidden" and v.reason.startswith("refused os.system(")
    v = violation("import os\ndef act(obs):\n    return 1\n")
    assert (v.kind, v.reason) == ("import", "refused import 'os'")
    code = "import os\ndef act(obs):\n    return os.system('touch ' + obs)\n"
    assert unguarded(code, str(marker)) != 0
    assert unguarded(code, str(marker), disable=("seccomp",)) != 0  # RLIMIT_NPROC=0 alone
    assert not marker.exists()


def test_subprocess(tmp_path):
    marker = tmp_path / "marker"
    os.chmod(tmp_path, 0o777)
    v = violation("import subprocess\ndef act(obs):\n    return 1\n")
    assert v.reason == "refused import 'subprocess'"
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('subprocess')\n")
    assert v.reason == "refused import 'subprocess'"  # the "import" audit event, any import path
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('os').posix_spawn('/bin/touch', ['touch', obs], {{}})\n",
                  str(marker))
    assert v.reason.startswith("refused os.posix_spawn(")
    spawn = """
        import os
        def act(obs):
            try:
                return os.posix_spawn('/bin/touch', ['touch', obs], {})
            except OSError as exc:
                return type(exc).__name__
    """
    if has("seccomp"):
        assert unguarded(spawn, str(marker)) == "PermissionError"  # seccomp
    assert unguarded(spawn, str(marker), disable=("seccomp",)) == "BlockingIOError"  # RLIMIT_NPROC
    assert "No module named 'subprocess'" in violation("def act(obs):\n    import subprocess\n",
                                                        python_guards=False).reason  # no files
    assert not marker.exists()


def test_fork():
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('os').fork()\n")
    assert (v.kind, v.reason) == ("forbidden", "refused os.fork")
    fork = """
        import os
        def act(obs):
            try:
                pid = os.fork()
            except OSError as exc:
                return type(exc).__name__
            if pid == 0:
                os._exit(0)
            return "forked"
    """
    if has("seccomp"):
        assert unguarded(fork) == "PermissionError"  # seccomp
    assert unguarded(fork, disable=("seccomp",)) == "BlockingIOError"  # RLIMIT_NPROC=0 alone


def test_fork_bomb():
    v = violation(f"""
        def act(obs):
            os = {REAL_IMPORT}('os')
            while True:
                os.fork()
    """)
    assert v.reason == "refused os.fork"
    # Bounded even if every layer failed: each process forks at most 6 times (64 processes).
    bomb = """
        import os
        def act(obs):
            errors = []
            for _ in range(6):
                try:
                    os.fork()
                except OSError as exc:
                    errors.append(type(exc).__name__)
            return [os.getpid(), errors]
    """
    for disable in ((), ("seccomp",)):
        policy = SandboxedPolicy(program(bomb), python_guards=False, _disable=disable).start()
        try:
            pid = policy.pid
            got_pid, errors = policy.act(0)
            assert got_pid == pid and len(errors) == 6  # every fork failed, in the one process
            assert int(open(f"/proc/{pid}/status").read().split("Threads:")[1].split()[0]) == 1
            assert not os.path.exists(f"/proc/{pid}/task/{pid}/children") or \
                open(f"/proc/{pid}/task/{pid}/children").read().strip() == ""
        finally:
            policy.close()


class _Listener:
    """A real TCP listener on 127.0.0.1 that records every connection it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, addr = self.sock.accept()
                self.accepted.append(addr)
                conn.close()
            except OSError:
                pass

    def close(self):
        time.sleep(0.2)
        self._stop = True
        self.thread.join()
        self.sock.close()


CONNECT = """
    import ctypes, os, struct
    def act(port):
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM
        if fd < 0:
            return "socket: " + os.strerror(ctypes.get_errno())
        addr = struct.pack("<H", 2) + struct.pack(">H", port) + bytes([127, 0, 0, 1]) + bytes(8)
        if libc.connect(fd, addr, len(addr)) != 0:
            return "connect: " + os.strerror(ctypes.get_errno())
        return "connected"
"""


def test_socket_connect_to_localhost():
    listener = _Listener()
    try:
        probe = socket.create_connection(("127.0.0.1", listener.port))  # the listener works
        probe.close()
        time.sleep(0.2)
        assert len(listener.accepted) == 1
        v = violation("import socket\ndef act(port):\n    socket.create_connection(('127.0.0.1', port))\n",
                      listener.port)
        assert (v.kind, v.reason) == ("import", "refused import 'socket'")
        v = violation(f"def act(port):\n    {REAL_IMPORT}('socket')\n", listener.port)
        assert v.reason == "refused import 'socket'"
        v = violation(f"def act(port):\n    return {REAL_IMPORT}('ctypes').CDLL(None).socket(2, 1, 0)\n",
                      listener.port)
        assert v.kind == "forbidden" and v.reason.startswith("refused ctypes.")
        if has("seccomp"):
            assert unguarded(CONNECT, listener.port) == "socket: Operation not permitted"
        assert unguarded(CONNECT, listener.port, disable=("seccomp",)) == \
            "socket: Too many open files"  # RLIMIT_NOFILE: no fd left for a socket
        result = unguarded(CONNECT, listener.port, disable=("seccomp", "rlimits"))
        if layers()["network_namespace"].startswith("on"):
            assert result == "connect: Network is unreachable"  # the empty network namespace
    finally:
        listener.close()
    assert len(listener.accepted) == 1  # only our own probe ever connected


def test_subclasses_walk_to_builtins_os_and_subprocess():
    v = violation("""
        def act(obs):
            for cls in ().__class__.__base__.__subclasses__():
                if cls.__name__ == 'catch_warnings':
                    b = cls()._module.__builtins__
                    return b['__import__']('os').system('id')
    """)
    assert v.reason == "refused os.system(b'id')"
    v = violation("""
        def act(obs):
            importer = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'BuiltinImporter'][0]
            return importer.load_module('posix').system('id')
    """)
    assert v.reason == "refused os.system(b'id')"
    v = violation("""
        def act(obs):
            wrap = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]
            return wrap.__init__.__globals__['popen']('id').read()
    """)
    assert v.reason.startswith("refused ") and ("subprocess" in v.reason or "os." in v.reason)
    v = violation("""
        def act(obs):
            try:
                1 / 0
            except ZeroDivisionError as exc:
                return list(exc.__traceback__.tb_frame.f_globals)
    """)
    assert v.reason == "refused access to the interpreter's frames (tb_frame)"
    v = violation(f"def act(obs):\n    return len({REAL_IMPORT}('gc').get_objects())\n")
    assert v.reason in ("refused import 'gc'", "refused gc.get_objects(-1)")


def test_str_format_attribute_walks(monkeypatch):
    monkeypatch.setenv("POLAR_SANDBOX_SECRET", "s3cr3t-token")
    src = """
        import random
        def act(obs):
            return obs.format(random.Random())
    """
    with SandboxedPolicy(program(src)) as policy:
        leaked = policy.act("{0.__class__.__init__.__globals__[_os].environ}")
        assert "environ(" in leaked and "s3cr3t-token" not in leaked  # reached, but empty
        assert "<built-in function open>" in policy.act(
            "{0.__class__.__init__.__globals__[__builtins__][open]}")  # a repr, nothing to call
    v = violation("""
        import random
        def act(obs):
            walk = "{0.__class__.__init__.__globals__[_os].system.__self__.__name__}".format(random.Random())
            return random.Random.__init__.__globals__['_os'].system('id')
    """)
    assert v.reason == "refused os.system(b'id')"


def test_infinite_loop_that_catches_base_exception():
    src = """
        def act(obs):
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass
    """
    start = time.monotonic()
    v = violation(src, step_timeout=0.5)
    assert (v.kind, v.reason) == ("timeout", "timeout after 0.5 s") and v.fatal
    assert time.monotonic() - start < 5
    v = violation(src, step_timeout=20, cpu_seconds=1)  # the kernel's CPU limit, not the parent's
    assert (v.kind, v.reason) == ("cpu", "cpu time limit of 1 s exceeded")


def test_memory_bomb():
    v = violation("""
        def act(obs):
            hoard = []
            while True:
                hoard.append(bytearray(10 ** 7))
    """, memory_mb=200)
    assert (v.kind, v.reason) == ("memory", "memory limit of 200 MB exceeded (MemoryError)")
    assert unguarded("""
        def act(obs):
            try:
                x = bytearray(10 ** 10)
            except MemoryError:
                return "MemoryError"
            return "allocated"
    """, memory_mb=200) == "MemoryError"


def test_memory_the_address_space_limit_misses_is_held_by_the_cgroup():
    """With the address-space limit off, the kernel's memory cgroup (or, without one, the watchdog)
    still ends a program that hoards memory, with the same kind of violation."""
    bomb = """
        def act(obs):
            hoard = []
            while True:
                hoard.append(bytearray(10 ** 7))
                hoard[-1][::4096] = b"x" * len(range(0, 10 ** 7, 4096))
    """
    policy = SandboxedPolicy(textwrap.dedent(bomb), memory_mb=200, python_guards=False, _disable=("rlimits",))
    try:
        policy.start()
        assert policy.layers["oom_score_adj"] == "1000"
        assert policy.layers["memory_limit"].startswith(("cgroup", "watchdog")), policy.layers
        with pytest.raises(SandboxViolation) as info:
            policy.act(0)
        assert (info.value.kind, info.value.reason) == ("memory", "sandboxed program memory limit of 200 MiB exceeded")
    finally:
        policy.close()


def test_reading_environment_variables(monkeypatch):
    monkeypatch.setenv("POLAR_SANDBOX_SECRET", "s3cr3t-token")
    env = run(f"def act(obs):\n    return dict({REAL_IMPORT}('os').environ)\n")
    assert "POLAR_SANDBOX_SECRET" not in env and "s3cr3t-token" not in repr(env)
    assert "HOME" not in env and "PATH" not in env
    v = violation(f"def act(obs):\n    return {REAL_IMPORT}('builtins').open('/proc/self/environ').read()\n")
    assert v.reason == "refused open('/proc/self/environ')"
    got = unguarded("""
        import os
        def act(obs):
            try:
                return open('/proc/self/environ', 'rb').read()
            except OSError as exc:
                return type(exc).__name__
    """, disable=("seccomp", "rlimits"))
    assert b"s3cr3t-token" not in (got if isinstance(got, bytes) else got.encode())


def test_printing_a_gigabyte():
    start = time.monotonic()
    with SandboxedPolicy(program("""
        def act(obs):
            line = "x" * 10 ** 6
            for _ in range(1000):
                print(line)
            return "done"
    """), max_output_bytes=10_000, step_timeout=10) as policy:
        assert policy.act(0) == "done"
        assert len(policy.output) < 10_200 and "output truncated" in policy.output
    # Writing to fd 1 directly bypasses the capped sys.stdout: the parent caps (and drains) it.
    src = """
        import os
        def act(obs):
            chunk = b"y" * 10 ** 6
            for _ in range(1000):
                os.write(1, chunk)
            return "done"
    """
    with SandboxedPolicy(program(src), python_guards=False, max_output_bytes=10_000,
                         step_timeout=2) as policy:
        try:
            policy.act(0)
        except SandboxViolation as v:
            assert v.kind == "timeout"
        assert len(policy.output) < 10_200
    assert time.monotonic() - start < 15


def test_crash_is_reported_with_the_signal():
    v = violation("import faulthandler\ndef act(obs):\n    faulthandler._sigsegv()\n")
    assert v.reason == "refused import 'faulthandler'"
    v = violation("import faulthandler\ndef act(obs):\n    faulthandler._sigsegv()\n", python_guards=False)
    assert (v.kind, v.reason) == ("crash", "crashed with signal 11 (SIGSEGV)")


def test_the_program_ending_its_process():
    v = violation(f"def act(obs):\n    {REAL_IMPORT}('os')._exit(3)\n")
    assert (v.kind, v.reason) == ("exit", "the program ended its process (exit code 3)")


def test_a_new_sandbox_after_violations_works():
    for src in ("import socket\ndef act(o): pass\n", "def act(o):\n    while True: pass\n"):
        with pytest.raises(SandboxViolation):
            run(src, step_timeout=0.3)
    assert run("def act(obs):\n    return obs + 1\n", 1) == 2


# =================================================================================== wire format
def test_wire_round_trip():
    values = [None, True, False, 0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 100, 1.5, float("inf"), "", "é☃",
              b"\x00", [], (), {}, [1, (2, {"a": None})], {1: "x", "k": [b"y"]},
              np.arange(6, dtype=np.int16).reshape(2, 3), np.zeros((0, 3)), np.array(3.5),
              np.ones(4, bool)[::2], np.float32(1.25), np.int8(-3), np.bool_(True),
              np.complex64(1 + 2j)]
    for value in values:
        back = wire.decode(wire.encode(value))
        if isinstance(value, np.ndarray):
            assert back.dtype == value.dtype and back.shape == value.shape
            np.testing.assert_array_equal(back, value)
        else:
            assert back == value and type(back) is type(value), value


def test_wire_refuses_hostile_bytes():
    for bad in (b"", b"x", b"a\x02|O\x00", b"a\x03<f8\x01" + struct.pack("<q", 10 ** 15),
                b"s\xff\xff\xff\xff", b"l\x00\x00\x00\x10", b"d\x01\x00\x00\x00l\x00\x00\x00\x00N",
                b"I\x03\x00\x00\x00abc", b"NN", b"l\x01\x00\x00\x00" * 40 + b"N", b"g\x03|V8" + bytes(8)):
        with pytest.raises(wire.WireError):
            wire.decode(bad)
    rng = random.Random(0)
    frames = [wire.encode(v) for v in ({"a": np.arange(5.0)}, [1, "two", (3.0, None)], np.eye(3))]
    for _ in range(3000):
        data = bytearray(rng.choice(frames))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data))]
        try:
            wire.decode(bytes(data))
        except wire.WireError:
            pass


def test_no_sandbox_process_is_left_behind():
    """Every sandbox above was stopped and reaped: no child of ours runs the sandbox bootstrap."""
    children = []
    for task in os.listdir("/proc/self/task"):
        try:
            children += open(f"/proc/self/task/{task}/children").read().split()
        except OSError:
            pass
    for pid in children:
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        assert b"_child.py" not in cmdline, f"sandbox process {pid} left behind"
