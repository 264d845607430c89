"""Installing a seccomp BPF program on the calling thread (standard library only: the sandbox child
loads this file by path before it locks itself down)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: the sandbox child imports as little as it can
if TYPE_CHECKING:
    from typing import Any

__all__ = ["install_bpf"]


def install_bpf(prog: list) -> str:
    """Install a seccomp BPF filter, given as (code, jt, jf, k) instructions, on the calling thread
    (no_new_privs must be set); "on" or why not. The agent processes of `evaluate` and the sandbox
    child use it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    structure: Any = SockFilter  # a ctypes array type is Structure * n, which mypy does not model
    arr = (structure * len(prog))(*[SockFilter(*ins) for ins in prog])
    fprog = SockFprog(len(prog), ctypes.cast(arr, ctypes.POINTER(SockFilter)))
    PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"failed: errno {ctypes.get_errno()}"
    return "on"
