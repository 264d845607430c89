"""A disk cache of deterministic LLM calls, safe for concurrent processes.

Only deterministic requests are cached: ``temperature == 0`` or a fixed ``seed``. The key is the
sha256 of the canonical JSON of ``{"format": 1, "model": <key of the model>, "request": <request>}``:
the model key is its file hash (embedded backend), or the backend, base URL, model name and the
hash you declared (HTTP backend); the request is every message, the constraint, seed, temperature and
max_tokens. One JSON file per entry, ``<dir>/<key[:2]>/<key>.json``, written to a temporary file in
the same folder and renamed over the target (atomic on POSIX), so a reader in another process sees
either nothing or a whole entry, and two writers of the same key write the same bytes. An entry that
cannot be read (say, a disk filled up) counts as a miss and is rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .types import Completion, Request

__all__ = ["DiskCache", "cache_key"]

FORMAT = 1


def model_key(identity: dict) -> dict:
    """The part of a model's identity that decides its outputs."""
    if identity.get("backend") == "embedded":
        return {"backend": "embedded", "sha256": identity.get("sha256")}
    return {k: identity.get(k) for k in ("backend", "base_url", "model", "sha256")}


def cache_key(identity: dict, request: Request) -> str:
    payload = {"format": FORMAT, "model": model_key(identity), "request": request.to_json()}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DiskCache:
    """Completions of deterministic requests, on disk under ``directory``. ``hits`` and ``misses``
    count this process's lookups; ``hit_rate`` is hits / (hits + misses) (0.0 before any lookup)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, identity: dict, request: Request) -> Completion | None:
        if not request.deterministic:
            return None
        path = self._path(cache_key(identity, request))
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            c = entry["completion"]
            out = Completion(text=c["text"], prompt_tokens=int(c["prompt_tokens"]),
                             completion_tokens=int(c["completion_tokens"]), seconds=0.0,
                             model=identity, finish_reason=c.get("finish_reason", "stop"), cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return out

    def put(self, identity: dict, request: Request, completion: Completion) -> None:
        if not request.deterministic:
            return
        key = cache_key(identity, request)
        path = self._path(key)
        entry = {"format": FORMAT, "key": key, "model": model_key(identity), "request": request.to_json(),
                 "completion": {"text": completion.text, "prompt_tokens": completion.prompt_tokens,
                                "completion_tokens": completion.completion_tokens,
                                "finish_reason": completion.finish_reason,
                                "seconds": round(completion.seconds, 6)}}
        data = json.dumps(entry, sort_keys=True, ensure_ascii=False).encode("utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate}

    def clear(self) -> None:
        """Delete every entry (other processes' included)."""
        for p in self.directory.glob("*/*.json"):
            try:
                p.unlink()
            except OSError:
                pass
