"""The package's layout rules, checked over the source's syntax trees (ruff's SLF001 does not see imports)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "polar_bench"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(path: Path):
    """(line, imported module as dotted parts, names imported from it) of every import in ``path``."""
    here = ["polar_bench", *path.relative_to(PACKAGE).with_suffix("").parts]
    package = here[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = base + (node.module.split(".") if node.module else [])
            yield node.lineno, module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split("."), []


def private_imports() -> list[str]:
    """Every import of a private name from another module, and of a private module from outside the
    package that holds it (a package's own private modules serve it and its subpackages)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = ["polar_bench", *path.relative_to(PACKAGE).with_suffix("").parts]
        for line, module, names in _imports(path):
            if not module or module[0] != "polar_bench":
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            for i, part in enumerate(module):
                if _private(part) and here[:i] != module[:i]:
                    found.append(f"{where}: private module {'.'.join(module)}")
                    break
            for name in names:
                full = module + [name]
                # `from . import _x` imports a module of the same package: allowed like the check above
                if _private(name) and not (Path(PACKAGE.parent, *full).with_suffix(".py").is_file()
                                           and here[:len(module)] == module):
                    found.append(f"{where}: private name {name} of {'.'.join(module)}")
    return found


def test_no_private_name_is_imported_across_modules_or_packages():
    assert private_imports() == []


def test_the_rule_finds_what_it_is_about(tmp_path, monkeypatch):
    """The check itself can fail: a module that reaches into another package's private parts."""
    root = tmp_path / "polar_bench"
    (root / "evaluate").mkdir(parents=True)
    (root / "sandbox").mkdir()
    (root / "sandbox" / "_child.py").write_text("def install(): ...\n")
    (root / "sandbox" / "wire.py").write_text("def _secret(): ...\n")
    (root / "_optional.py").write_text("")
    (root / "evaluate" / "lockdown.py").write_text(
        "from ..sandbox._child import install\nfrom ..sandbox.wire import _secret\nfrom .._optional import x\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", root)
    assert private_imports() == [
        "polar_bench/evaluate/lockdown.py:1: private module polar_bench.sandbox._child",
        "polar_bench/evaluate/lockdown.py:2: private name _secret of polar_bench.sandbox.wire"]
