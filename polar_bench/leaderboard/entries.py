"""The leaderboard folder and its entries: ``entries/<id>/`` holds the submitted results file, its
``entry.json`` and ``verification.json``. An entry is content-addressed (its id comes from the SHA-256
of the file's canonical JSON) and fingerprinted over its episodes, so a resubmission is refused. See
docs/leaderboard.md ("The folder").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..clock import utc_today
from ..errors import UserError
from ..results import ResultsFile, load_json
from .checks import Problem, check_submission

__all__ = ["Entry", "SubmissionRejected", "content_id", "episodes_fingerprint", "load_entries",
           "submit", "find_entry", "record_verification", "ENTRIES_DIR", "DEFAULT_DIR"]

DEFAULT_DIR = "leaderboard"
ENTRIES_DIR = "entries"
_ID = re.compile(r"^[0-9a-f]{16}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class SubmissionRejected(UserError):
    """A results file that failed the checks; ``problems`` lists every one."""

    def __init__(self, path: str, problems: list[Problem]):
        self.path = path
        self.problems = problems
        super().__init__(f"{path} was rejected: {len(problems)} problem(s)")


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True).encode()


def content_id(data: dict) -> str:
    """The entry id: 16 hex digits of the SHA-256 of the canonical JSON of the whole file."""
    return hashlib.sha256(_canonical(data)).hexdigest()[:16]


def episodes_fingerprint(data: dict) -> str:
    """SHA-256 over the sorted (task, run, seed, return, length) of every episode."""
    rows = sorted((str(e.get("task")), int(e.get("run", -1)), int(e.get("seed", -1)), e.get("return"),
                   e.get("length")) for e in data.get("episodes", []))
    return "sha256:" + hashlib.sha256(_canonical(rows)).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One accepted submission in a leaderboard folder."""

    id: str
    folder: Path
    meta: dict

    @property
    def results_path(self) -> Path:
        return self.folder / "results.json"

    @property
    def name(self) -> str:
        return str(self.meta.get("agent", {}).get("name", self.id))

    @property
    def submitted(self) -> str:
        return str(self.meta.get("submitted", ""))

    @property
    def suite(self) -> dict:
        return self.meta.get("suite", {})

    def results(self) -> ResultsFile:
        """The entry's results file, read through the typed model (checked when it was submitted)."""
        return ResultsFile.from_json(load_json(self.results_path, "results file"), str(self.results_path),
                                     schema=False)

    def verifications(self) -> list[dict]:
        path = self.folder / "verification.json"
        if not path.is_file():
            return []
        return list(json.loads(path.read_text(encoding="utf-8")).get("verifications", []))

    @property
    def verification_status(self) -> str:
        """``"failed"`` (a recorded re-run did not match), ``"not_verifiable"`` (the newest record says
        an artifact the agent needs could not be checked or rebuilt, and none failed), ``"verified"``
        (every recorded re-run matched) or ``"unverified"`` (none recorded)."""
        runs = self.verifications()
        outcomes = [v for v in runs if v.get("status") != "not_verifiable"]
        if any(not v.get("passed") for v in outcomes):
            return "failed"
        if runs and runs[-1].get("status") == "not_verifiable":
            return "not_verifiable"
        return "verified" if outcomes else "unverified"


def _entries_dir(leaderboard: str | Path) -> Path:
    return Path(leaderboard) / ENTRIES_DIR


def load_entries(leaderboard: str | Path) -> list[Entry]:
    """Every entry of a leaderboard folder, oldest submission first (ties: by id)."""
    root = Path(leaderboard)
    if not root.is_dir():
        raise UserError(f"leaderboard folder {str(root)!r} does not exist; submit a results file first "
                        f"('python -m polar_bench submit results.json --leaderboard {root}')")
    out = []
    folder = _entries_dir(root)
    for sub in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not sub.is_dir() or not _ID.match(sub.name):
            continue
        meta_path = sub / "entry.json"
        if not meta_path.is_file() or not (sub / "results.json").is_file():
            raise UserError(f"{sub} is not a complete entry (entry.json and results.json); remove it "
                            "and submit the results file again")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        out.append(Entry(sub.name, sub, meta))
    return sorted(out, key=lambda e: (e.submitted, e.id))


def find_entry(leaderboard: str | Path, data: dict) -> Entry | None:
    """The entry holding these results (same content id), or None."""
    wanted = content_id(data)
    folder = _entries_dir(leaderboard) / wanted
    if (folder / "entry.json").is_file():
        return Entry(wanted, folder, json.loads((folder / "entry.json").read_text(encoding="utf-8")))
    return None


def _write_json(path: Path, obj: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=1, ensure_ascii=False, allow_nan=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def duplicate_of(data: dict, leaderboard: str | Path, src: str) -> str | None:
    """Why the leaderboard refuses ``data`` as a duplicate (the same file, or the same episodes with
    other metadata), in one line; None when it is new."""
    root = Path(leaderboard)
    existing = find_entry(root, data)
    if existing is not None:
        return (f"{src} is already on the leaderboard as entry {content_id(data)} ({existing.name}, submitted "
                f"{existing.submitted}); nothing was added")
    fingerprint = episodes_fingerprint(data)
    for other in load_entries(root) if root.is_dir() else []:
        if other.meta.get("episodes_sha256") == fingerprint:
            return (f"{src} has the same episodes as entry {other.id} ({other.name}, submitted "
                    f"{other.submitted}) with different metadata; a resubmission is refused. "
                    "Evaluate again to submit a new result")
    return None


def submit(results_path: str | Path, leaderboard: str | Path = DEFAULT_DIR, *, date: str | None = None) -> Entry:
    """Check a results file and add it as an entry. Raises `SubmissionRejected` (with every problem)
    when a check fails, and `UserError` for a resubmission."""
    src = Path(results_path)
    data, problems = check_submission(src)
    if problems or data is None:
        raise SubmissionRejected(str(src), problems)
    if date is None:
        date = utc_today()
    elif not _DATE.match(date):
        raise UserError(f"--date {date!r} is not a date like 2026-01-31")
    root = Path(leaderboard)
    entry_id = content_id(data)
    duplicate = duplicate_of(data, root, str(src))
    if duplicate is not None:
        raise UserError(duplicate)
    fingerprint = episodes_fingerprint(data)
    folder = _entries_dir(root) / entry_id
    folder.mkdir(parents=True, exist_ok=False)
    raw = src.read_bytes()
    (folder / "results.json").write_bytes(raw)
    info = data["agent"]["info"]
    meta = {
        "id": entry_id,
        "results_sha256": hashlib.sha256(raw).hexdigest(),
        "content_sha256": hashlib.sha256(_canonical(data)).hexdigest(),
        "episodes_sha256": fingerprint,
        "submitted": date,
        "agent": {"name": info["name"], "sha256": data["agent"]["sha256"]},
        "suite": {k: data["suite"][k] for k in ("name", "version", "hash")},
        "runs": data["config"]["runs"],
        "episodes": len(data["episodes"]),
        "checked_by": f"polar_bench {__version__}",
    }
    _write_json(folder / "entry.json", meta)
    return Entry(entry_id, folder, meta)


def record_verification(entry: Entry, record: dict) -> Path:
    """Append one verification record to the entry's verification.json."""
    path = entry.folder / "verification.json"
    runs = entry.verifications()
    runs.append(record)
    _write_json(path, {"entry": entry.id, "verifications": runs})
    return path
