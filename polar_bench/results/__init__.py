"""The results file: every episode of an evaluation, and the submission format.

`read_results` reads one into the typed model (`ResultsFile`, `polar_bench.results.model`), checked
once at the boundary against the model and the JSON Schema shipped in the package
(``schemas/results-v1.json``); `write_results` writes one atomically. Aggregates are always
recomputed from the episodes, never trusted from the file. See docs/evaluate.md.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from .model import Episode, ResultsFile, ResultsSuite, Status, SuiteTask

EPISODE_STATUSES = tuple(s.value for s in Status)

__all__ = ["FORMAT_VERSION", "ResultsFile", "ResultsSuite", "SuiteTask", "read_results", "write_results",
           "results_schema", "schema_problems", "validate_results_data", "check_format_version",
           "format_version_problem", "EPISODE_STATUSES", "load_json", "MAX_JSON_DEPTH", "MAX_JSON_INT",
           "MAX_JSON_BYTES", "Episode", "Status"]

FORMAT_VERSION = 1
MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects that `load_json` accepts (results files use about 6)."""
MAX_JSON_INT = 2**63
MAX_JSON_BYTES = 256 << 20
"""The largest JSON file read (a whole-suite v2 results file is a few MB; this keeps a submitted
file from filling the memory of whoever scores or verifies it)."""
"""Integers in JSON files must lie strictly between ``-MAX_JSON_INT`` and ``MAX_JSON_INT``."""


@cache
def results_schema() -> dict:
    """The JSON Schema of the current format version."""
    path = Path(__file__).parent.parent / "schemas" / f"results-v{FORMAT_VERSION}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def schema_problems(data: Any) -> list[tuple[str, str]]:
    """Every place where ``data`` breaks the results JSON Schema, as (JSON path, message), in path order;
    `validate_results_data` raises on the first few, the leaderboard reports them all."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(results_schema())
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        message = err.message if len(err.message) <= 200 else err.message[:197] + "..."
        out.append(("/".join(str(p) for p in err.absolute_path), message))
    return out


def format_version_problem(data: Any) -> str | None:
    """Why this polar_bench cannot read ``data``'s format version, with the fix; None when it can."""
    version = data.get("format_version") if isinstance(data, dict) else None
    if version == FORMAT_VERSION:
        return None
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        return (f"format version {version} is newer than this polar_bench reads ({FORMAT_VERSION}); upgrade "
                f"polar_bench (pip install -U polar_bench)")
    return f"unknown results format version {version!r} (this polar_bench reads version {FORMAT_VERSION})"


def check_format_version(data: Any, source: str = "results") -> None:
    """`ResultsError` unless this polar_bench reads ``data``'s format version."""
    problem = format_version_problem(data)
    if problem is not None:
        raise ResultsError(f"{source}: {problem}")


def validate_results_data(data: Any, source: str = "results") -> None:
    """Check format version and schema; raise `ResultsError` listing the first problems."""
    if not isinstance(data, dict):
        raise ResultsError(f"{source}: a results file is a JSON object, got {type(data).__name__}")
    check_format_version(data, source)
    problems = [f"{where or '(top level)'}: {message}" for where, message in schema_problems(data)[:5]]
    if problems:
        raise ResultsError(f"{source}: does not match the results schema: " + "; ".join(problems))


def _parse_int(text: str) -> int:
    value = int(text)  # ValueError past Python's 4300-digit limit, caught by load_json
    if not -MAX_JSON_INT < value < MAX_JSON_INT:
        raise ValueError(f"integer {text[:20]}{'...' if len(text) > 20 else ''} ({len(text)} digits) is out of "
                         f"range (at most {len(str(MAX_JSON_INT))} digits)")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:30]} overflows a 64-bit float")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not allowed")


def _depth(obj: Any) -> int:
    """Nesting depth of arrays and objects, without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, d)
            if d > MAX_JSON_DEPTH:
                return d
            stack.extend((v, d + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def load_json(path: str | os.PathLike, what: str = "file") -> Any:
    """Parse a JSON file that a user gave us, or raise `ResultsError` with one line saying what is wrong.

    Besides malformed JSON and non-UTF-8 text, this refuses what Python's parser accepts but nothing
    downstream can use: NaN and Infinity, numbers that overflow a 64-bit float or integer, and nesting
    deeper than `MAX_JSON_DEPTH` (which otherwise ends in a RecursionError deep inside a validator).
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_JSON_BYTES + 1)
        if len(raw) > MAX_JSON_BYTES:
            raise ResultsError(f"{p}: larger than {MAX_JSON_BYTES:,} bytes; is it a {what}? (a whole-suite "
                               f"results file is a few MB)")
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ResultsError(f"{p}: cannot be read ({exc.strerror}); pass a readable {what}") from None
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); is it a {what}?") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int,
                          parse_float=_parse_float)
    except RecursionError:
        raise ResultsError(f"{p}: JSON nested too deeply (more than {MAX_JSON_DEPTH} levels); "
                           f"is it a {what}?") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise ResultsError(f"{p}: not valid JSON ({str(exc)[:200]}); is it a {what}?") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise ResultsError(f"{p}: JSON nested too deeply (more than {MAX_JSON_DEPTH} levels); is it a {what}?")
    return data


def read_results(path: str | os.PathLike) -> ResultsFile:
    """Read and check a results file; `ResultsError` (one line, with the fix) when it is not one."""
    p = Path(path)
    if not p.is_file():
        raise ResultsError(f"results file {str(p)!r} does not exist; pass the .json that "
                           f"'python -m polar_bench evaluate ... --out' wrote")
    return ResultsFile.from_json(load_json(p, "polar_bench results file"), str(p))


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def write_results(results: ResultsFile | dict, path: str | os.PathLike) -> None:
    """Validate and write atomically (a temporary file renamed over the target)."""
    data = _finite(results.to_json() if isinstance(results, ResultsFile) else results)
    validate_results_data(data, str(path))
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(p.parent) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=False, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; results are meant to be shared
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
