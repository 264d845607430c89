"""The journal of finished episodes (resume after any interruption) and the progress display."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from ..clock import utc_now
from ..errors import UserError

__all__ = ["Journal", "Progress", "journaled_keys"]


def _extends(old: dict | None, new: dict) -> bool:
    """Whether a journal written for identity ``old`` may be resumed by the evaluation ``new``: the
    same agent file, suite and episode count, every task of ``old`` among ``new``'s, no more runs
    than ``new`` (run R's episodes are the same whatever the run count: evaluating runs 0-1 of a
    trained agent in one session and runs 0-4 in a later one plays only runs 2-4 there), and every
    artifact ``old`` played still pinned to the same SHA-256 (``new`` may pin more: a later run's
    checkpoint). A journal written before journals recorded their pins is taken as it is."""
    if not isinstance(old, dict):
        return False
    if "artifacts" in new and "artifacts" not in old:
        old = {**old, "artifacts": {}}
    if set(old) != set(new):
        return False
    same = all(old[k] == new[k] for k in new if k not in ("tasks", "runs", "artifacts"))
    same_pins = old.get("artifacts") == new.get("artifacts") or (
        isinstance(old.get("artifacts"), dict) and _repinned(old, new) is None)
    runs_old, runs_new = old.get("runs"), new.get("runs")
    fewer_runs = runs_old == runs_new or (type(runs_old) is int and type(runs_new) is int and runs_old <= runs_new)
    return same and same_pins and fewer_runs and set(old.get("tasks") or ()) <= set(new.get("tasks") or ())


def _repinned(old: dict | None, new: dict) -> str | None:
    """The first artifact path that journal identity ``old`` played with other bytes than ``new`` pins."""
    pins_old = old.get("artifacts") if isinstance(old, dict) else None
    pins_new = new.get("artifacts") or {}
    if not isinstance(pins_old, dict):
        return None
    return next((p for p, sha in pins_old.items() if pins_new.get(p) != sha), None)


def _records(raw: bytes) -> Iterator[tuple[dict, int]]:
    """(record, bytes read through its line) for each good line of a journal's bytes, in order. It stops at
    the first line that is not a JSON object (a torn last line from a kill, a write cut short): what
    follows is not trusted, and `Journal` truncates the file there."""
    good_bytes = 0
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    for i, line in enumerate(lines):
        if not line:
            good_bytes += 1 if i < len(lines) - 1 else 0
            continue
        if i == len(lines) - 1 and not complete:
            return  # torn last line from a kill: drop it
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            return
        if not isinstance(rec, dict) or ("journal" not in rec and not all(k in rec for k in ("task", "run", "index"))):
            return
        good_bytes += len(line) + 1
        yield rec, good_bytes


def journaled_keys(path: str | Path) -> set[tuple]:
    """The (task, run, index) keys of the episodes a journal holds, read as `Journal` would resume it
    (a torn tail dropped), without opening it for writing or checking whose it is; a missing or unreadable
    file holds none."""
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return set()
    return {(rec["task"], rec["run"], rec["index"]) for rec, _ in _records(raw) if "journal" not in rec}


class Journal:
    """Append-only JSONL of finished episodes; the first line identifies the evaluation.

    An episode played again (``evaluate --retry-failed``) is appended once more: the last record of a
    key wins, and `attempts` counts them. A journal written by another version of the agent file is
    set aside (renamed ``<name>.<old sha>``, nothing deleted) and the evaluation starts afresh: its
    episodes were another agent's. Any other difference of identity is refused."""

    def __init__(self, path: Path, identity: dict):
        self.path = path
        self.identity = identity
        self.done: dict[tuple, dict] = {}
        self.attempts: dict[tuple, int] = {}
        self.set_aside: Path | None = None
        self.started: str | None = None
        self._has_header = False
        self._last_sync = 0.0
        if path.exists():
            self._set_aside_other_agent()
        if path.exists():
            self._load()
        try:
            self.fh = open(path, "a", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write the journal {path} ({exc.strerror}); choose a writable --out") from None
        if not self._has_header:
            # A new journal, or one of an evaluation of fewer tasks or runs that this one extends (evaluate
            # a domain first, then the whole suite with the same --out: the finished episodes are kept).
            self.started = self.started or utc_now()
            self._write({"journal": 1, "identity": identity, "started": self.started})

    def _load(self) -> None:
        raw = self.path.read_bytes()
        self._has_header = False
        good_bytes = 0
        for rec, read in _records(raw):
            if "journal" in rec:
                if not _extends(rec.get("identity"), self.identity):
                    repinned = _repinned(rec.get("identity"), self.identity)
                    if repinned is not None:
                        raise UserError(
                            f"the journal {self.path} was played with other bytes of {repinned} than its "
                            f"manifest now pins; its episodes are not this agent's: delete it to play afresh, "
                            f"or choose another --out")
                    raise UserError(
                        f"the journal {self.path} belongs to a different evaluation (another agent file, "
                        f"suite or episode count, more runs, or tasks that are not all in this selection); "
                        f"delete it to start afresh, or choose another --out")
                self._has_header = rec.get("identity") == self.identity
                self.started = self.started or rec.get("started")
            else:
                key = (rec["task"], rec["run"], rec["index"])
                self.done[key] = rec  # the last attempt wins (--retry-failed appends again)
                self.attempts[key] = self.attempts.get(key, 0) + 1
            good_bytes = read
        if good_bytes < len(raw):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_bytes)

    def _write(self, rec: dict) -> None:
        # flush() puts the line in the OS page cache, which survives Ctrl-C, crashes and kill -9 of
        # this process; fsync (durability across an OS crash) at most once a second, so that a
        # slow disk does not stall the parent and leave workers waiting for their next episode.
        self.fh.write(json.dumps(rec, allow_nan=False) + "\n")
        self.fh.flush()
        now = time.monotonic()
        if now - self._last_sync >= 1.0:
            os.fsync(self.fh.fileno())
            self._last_sync = now

    def append(self, rec: dict) -> None:
        """Journal a finished episode; a key already done is journaled again only to replace a failure."""
        key = (rec["task"], rec["run"], rec["index"])
        if key in self.done and self.done[key].get("status") == "ok":
            return
        self.done[key] = rec
        self.attempts[key] = self.attempts.get(key, 0) + 1
        self._write(rec)

    def failed(self) -> set[tuple]:
        """Keys whose journaled (last) attempt did not end ``ok``."""
        return {k for k, rec in self.done.items() if rec.get("status") != "ok"}

    def _set_aside_other_agent(self) -> None:
        """Rename a journal whose header names another agent file (see the class docstring)."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                header = json.loads(fh.readline())
        except (OSError, ValueError):
            return
        old = (header.get("identity") or {}) if isinstance(header, dict) else {}
        sha = old.get("agent_sha256") if isinstance(old, dict) else None
        same_otherwise = all(old.get(k) == v for k, v in self.identity.items()
                             if k not in ("agent_sha256", "tasks", "artifacts"))
        if not isinstance(sha, str) or sha == self.identity.get("agent_sha256") or not same_otherwise:
            return
        target = self.path.with_name(f"{self.path.name}.{sha[:12]}")
        os.replace(self.path, target)
        self.set_aside = target

    def close(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()


class Progress:
    """A tqdm bar on a terminal, a plain line every 10 s elsewhere (``enabled`` None), or nothing
    (``enabled`` False: --no-progress)."""

    def __init__(self, total: int, done: int, enabled: bool | None):
        self.total, self.done, self.errors = total, done, 0
        self.first = done  # episodes journaled before this run: not part of its rate
        self.t0 = time.monotonic()
        self.silent = enabled is False
        self.tty = sys.stderr.isatty() if enabled is None else enabled
        self.bar = None
        self.last_line = 0.0
        if self.tty:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, initial=done, unit="ep", dynamic_ncols=True, file=sys.stderr)
            except ImportError:
                self.bar = None

    def update(self, status: str) -> None:
        self.done += 1
        if status != "ok":
            self.errors += 1
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(errors=self.errors, refresh=False)
            return
        if self.silent:
            return
        now = time.monotonic()
        if now - self.last_line >= 10 or self.done == self.total:
            self.last_line = now
            played = self.done - self.first
            rate = played / max(now - self.t0, 1e-9)
            # no estimate from the first few episodes: they include the workers' start-up and end
            # together, lane by lane, so they once promised 169 s for a 6 s run
            settled = played >= max(4, (self.total - self.first) // 20)
            left = ("done" if self.done == self.total else f"ETA {(self.total - self.done) / rate:.0f} s"
                    if settled and rate > 0 else "ETA after a few more")
            print(f"[polar_bench] {self.done}/{self.total} episodes, {self.errors} errors, {left}",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
