"""The lockdown toolkit shared by the agent process of `evaluate` and the code sandbox.

`wire` (the plain-data pipe format), `seccomp` (installing a BPF program), `kernel` (the calls a
process makes to lock itself down) and `limits` (the trusted parent's side of the memory and disk
limits). `wire`, `seccomp` and `kernel` import only the standard library (and numpy for `wire`): the
sandbox child loads them by file path. See docs/sandbox.md#the-lockdown-toolkit; docs/evaluate.md
("Isolation: what is guaranteed") and docs/sandbox.md say what each layer does.
"""

from pathlib import Path

__all__ = ["module_file"]


def module_file(name: str) -> str:
    """The file of one of this toolkit's modules, for an interpreter that loads it by path."""
    return str(Path(__file__).resolve().with_name(f"{name}.py"))
