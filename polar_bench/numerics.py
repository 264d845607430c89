"""The portable numeric mode: training whose checkpoint bytes are the same on any x86-64 CPU with AVX2 and FMA
of the same vendor (measured across AMD Zen 2, Zen 4 and Zen 5; not across AMD and Intel).

torch picks its CPU kernels by the widest instruction set the machine has (ATen's dispatch, oneDNN,
MKL), so a float's last bits, and after many updates a checkpoint's bytes, depend on the CPU.
`enter` caps all three at AVX2, puts MKL in its conditional-numerical-reproducibility mode and uses
one thread, before torch computes anything; `in_force` reads back what took effect. MKL runs its
AVX2 reproducibility branch on Intel CPUs only (on others, its AUTO branch), so a pin made on one
vendor's CPU is not rebuilt on the other's: `portable_supported` says so before a rebuild is tried.
`X86_PORTABLE` is the same with MKL's COMPATIBLE branch, which Intel documents as giving the same
results on its CPUs and compatible ones (measured on one run so far). What this promises and what was
measured: docs/artifacts.md.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from .errors import UserError

__all__ = ["PORTABLE", "X86_PORTABLE", "NATIVE", "MODES", "PORTABLE_MODES", "PORTABLE_ENV", "NumericsError",
           "cpu_flags", "cpu_name", "cpu_vendor", "vendor_of", "portable_supported", "enter", "in_force"]

PORTABLE = "avx2-portable"  # MKL's AVX2 branch: the same bytes on CPUs of one vendor
X86_PORTABLE = "x86-portable"  # MKL's COMPATIBLE branch: the same bytes on AMD's and Intel's
NATIVE = "native"
MODES = (PORTABLE, X86_PORTABLE, NATIVE)
# Read by torch's ATen dispatch, oneDNN and MKL when they first run, so they must be set before that.
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2,STRICT",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# MKL_CBWR=COMPATIBLE: the branch Intel documents as giving the same results on Intel and compatible CPUs.
# Measured: procgen/bigfish run 0 gives 8dcec93e... on an AMD Zen 2 and on an Intel Xeon (docs/artifacts.md).
PORTABLE_MODES = {PORTABLE: PORTABLE_ENV, X86_PORTABLE: {**PORTABLE_ENV, "MKL_CBWR": "COMPATIBLE,STRICT"}}
_REQUIRED_FLAGS = ("avx2", "fma")


class NumericsError(UserError):
    """The portable mode cannot be had here: a CPU without AVX2 and FMA, or torch already computing."""


def _cpuinfo(field: str) -> str | None:
    """The value of ``field`` for this machine's first CPU in /proc/cpuinfo (None where it is not there)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == field:
                    return value.strip()
    except OSError:
        pass
    return None


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's first CPU (empty where /proc/cpuinfo is not there)."""
    return frozenset((_cpuinfo("flags") or "").split())


def cpu_name() -> str:
    """This machine's CPU model, as /proc/cpuinfo names it (else what `platform` knows)."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


_VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}


def cpu_vendor() -> str | None:
    """"AMD" or "Intel" for this machine's CPU (None for another vendor, or where /proc/cpuinfo is not there)."""
    return _VENDORS.get(_cpuinfo("vendor_id") or "")


def vendor_of(description: str | None) -> str | None:
    """The vendor ("AMD", "Intel") of a CPU as `polar_bench.artifacts.machine_description` wrote it (an
    artifact's ``built_on``); None where the description does not say."""
    words = (description or "").replace("(R)", " ").replace(",", " ").split()
    found = {v for v in _VENDORS.values() if v in words}
    return found.pop() if len(found) == 1 else None


def portable_supported(flags: frozenset[str] | None = None, built_on: str | None = None,
                       vendor: str | None = None, mode: str = PORTABLE) -> tuple[bool, str]:
    """Whether this machine can train (or rebuild) in a portable ``mode``, and if not, why not.
    ``built_on``: the machine a pin to be rebuilt was made on (its manifest's ``built_on``); in `PORTABLE`,
    a CPU of another vendor computes other floats (MKL, module docstring). ``flags`` and ``vendor`` stand
    for this machine's (tests)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False, f"the portable mode is defined for x86-64 CPUs; this one is {platform.machine()}"
    flags = cpu_flags() if flags is None else flags
    missing = [f.upper() for f in _REQUIRED_FLAGS if f not in flags]
    if missing:
        return False, f"this CPU lacks {' and '.join(missing)}, which the portable mode's kernels need"
    pinned, here = vendor_of(built_on), vendor or cpu_vendor()
    if mode == PORTABLE and pinned is not None and here is not None and pinned != here:
        return False, (f"it was pinned on an {pinned} CPU and this one is {here}'s: MKL runs its reproducible "
                       f"AVX2 branch on Intel CPUs only and its AUTO branch on others, so the two vendors' CPUs "
                       f"train to other bytes (measured: procgen/bigfish and atari/Boxing pins of an AMD EPYC, "
                       f"rebuilt on an Intel Xeon)")
    return True, ""


def enter(mode: str, threads: int = 1) -> None:
    """Put this process in ``mode`` (one of `MODES`) for the training that follows.

    A portable mode sets its `PORTABLE_MODES` environment and one torch thread; call it before torch runs
    any operation (a process that already computed keeps its kernels, and `in_force` then says so). Child
    processes started afterwards inherit the mode. `NATIVE` changes nothing but the thread count.
    Raises `NumericsError` where the CPU cannot run the portable mode."""
    if mode not in MODES:
        raise NumericsError(f"numeric mode {mode!r} is not one of {', '.join(MODES)}")
    if mode in PORTABLE_MODES:
        ok, why = portable_supported(mode=mode)
        if not ok:
            raise NumericsError(f"{why}; a checkpoint pinned in the {mode} mode cannot be rebuilt here")
        os.environ.update(PORTABLE_MODES[mode])
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def in_force(mode: str) -> dict[str, Any]:
    """What this process computes with, as a checkpoint's provenance records it.

    Raises `NumericsError` when ``mode`` is a portable one and any part of it is not in force (torch
    chose its kernels before `enter`, or the environment was changed since)."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    record: dict[str, Any] = {"mode": mode, "torch": torch.__version__, "aten_capability": capability,
                              "threads": torch.get_num_threads()}
    if mode in PORTABLE_MODES:
        record.update({k.lower(): os.environ.get(k) for k in ("ONEDNN_MAX_CPU_ISA", "MKL_CBWR")})
        wrong = [f"{k}={os.environ.get(k)!r}" for k, v in PORTABLE_MODES[mode].items() if os.environ.get(k) != v]
        if capability != "AVX2":
            wrong.append(f"ATen dispatches to {capability} kernels (torch computed before the mode was entered)")
        if record["threads"] != 1:
            wrong.append(f"{record['threads']} torch threads")
        if wrong:
            raise NumericsError(f"the {mode} mode is not in force ({'; '.join(wrong)}); enter it before "
                                "torch runs (polar_bench.numerics.enter)")
    return record
