"""The lockdown toolkit shared by the agent process of `evaluate` and the code sandbox.

Its modules import only the standard library (and numpy for `wire`), because the sandbox child loads
them by file path in an interpreter started with ``python -I -S``, before it locks itself down:

- `wire`: the plain-data encoding of everything that crosses a pipe from an untrusted process;
- `seccomp`: installing a seccomp BPF program;
- `kernel`: the calls a process makes to lock itself down (namespaces, capabilities, privileges,
  no_new_privs, joining a memory cgroup, ``oom_score_adj``, a size-limited tmpfs);
- `limits`: the trusted parent's side of the memory and disk limits (`TreeLimits`: the cgroup or the
  watchdog, and the reason when a limit ended the tree). Only the parent imports it.

docs/evaluate.md ("Isolation: what is guaranteed") and docs/sandbox.md say what each layer does.
"""

from pathlib import Path

__all__ = ["module_file"]


def module_file(name: str) -> str:
    """The file of one of this toolkit's modules, for an interpreter that loads it by path."""
    return str(Path(__file__).resolve().with_name(f"{name}.py"))
