"""The lockdown toolkit shared by the agent process of `evaluate` and the code sandbox.

Its modules import only the standard library (and numpy for `wire`), because the sandbox child loads
them by file path in an interpreter started with ``python -I -S``, before it locks itself down:

- `wire`: the plain-data encoding of everything that crosses a pipe from an untrusted process;
- `seccomp`: installing a seccomp BPF program.

docs/evaluate.md ("Isolation: what is guaranteed") and docs/sandbox.md say what each layer does.
"""

from pathlib import Path

__all__ = ["module_file"]


def module_file(name: str) -> str:
    """The file of one of this toolkit's modules, for an interpreter that loads it by path."""
    return str(Path(__file__).resolve().with_name(f"{name}.py"))
