"""The recorder every LLM call goes through: the episode's trace and its usage sums.

An `LLMClient` hands each backend call (a retry is a second call) to its `Recorder`, which adds it to
the episode's sums (``episode_info()``, in the shape the results file stores) and, when tracing is
on, to the in-memory trace and an optional JSONL file (one line per call, appended with a single
``write``; ``{pid}`` in the path gives a file per process). See docs/llm.md#the-recorder-and-the-trace
for the trace line's fields.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from .types import Completion, Request

__all__ = ["Recorder", "USAGE_KEYS"]

USAGE_KEYS = ("calls", "prompt_tokens", "completion_tokens", "seconds", "decisions", "cache_hits",
              "retries", "fallbacks", "invalid")


def _zero() -> dict:
    return {k: 0 for k in USAGE_KEYS} | {"seconds": 0.0}


class Recorder:
    """Per-episode sums and traces of LLM calls.

    trace: keep each call's messages and completion (False: sums only; nothing is kept or written).
    path: a JSONL file that every traced call is appended to (``{pid}`` is replaced by the process id).
    Sums (``usage()``): ``calls`` backend calls, cache hits included (a retry is a call);
    ``prompt_tokens``/``completion_tokens`` of those calls, cache hits included, so that they do not
    depend on the state of the cache; ``seconds`` of wall time spent in backends (a hit costs ~0);
    ``decisions`` calls of ``complete``; ``cache_hits``; ``retries``; ``fallbacks`` decisions that
    ended with the fallback action; ``invalid`` answers that broke their constraint (before retry).
    """

    def __init__(self, *, trace: bool = True, path: str | os.PathLike | None = None):
        self.tracing = bool(trace)
        self.path = Path(str(path).replace("{pid}", str(os.getpid()))) if path else None
        if self.path is not None and self.tracing:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.episode: dict[str, Any] = {}
        self.trace: list[dict] = []
        self.totals = _zero()  # over the recorder's life
        self._sums = _zero()
        self._decision = -1

    # -- episodes
    def start_episode(self, seed: int | None = None, **meta: Any) -> None:
        """Reset the sums and the in-memory trace; ``seed`` and ``meta`` label the episode's lines."""
        self.episode = {"seed": seed, **meta} if seed is not None or meta else {}
        self.trace = []
        self._sums = _zero()
        self._decision = -1

    def usage(self) -> dict:
        """The current episode's sums (a copy); ``seconds`` rounded to microseconds."""
        out = dict(self._sums)
        out["seconds"] = round(out["seconds"], 6)
        return out

    def episode_info(self) -> dict:
        """``{"llm": usage()}``: what an agent's ``episode_info()`` returns for the results file."""
        return {"llm": self.usage()}

    # -- calls
    def begin_decision(self) -> int:
        self._decision += 1
        self._sums["decisions"] += 1
        self.totals["decisions"] += 1
        return self._decision

    def record(self, request: Request, completion: Completion, *, decision: int, attempt: int,
               valid: bool | None, value: Any = None, fallback: bool = False) -> None:
        """Add one backend call (a cache hit included) to the sums and the trace."""
        for sums in (self._sums, self.totals):
            sums["calls"] += 1
            sums["prompt_tokens"] += completion.prompt_tokens
            sums["completion_tokens"] += completion.completion_tokens
            sums["seconds"] += completion.seconds
            sums["cache_hits"] += int(completion.cached)
            sums["retries"] += int(attempt > 1)
            sums["invalid"] += int(valid is False)
            sums["fallbacks"] += int(fallback)
        if not self.tracing:
            return
        line = {
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            "pid": os.getpid(), "episode": self.episode, "decision": decision, "attempt": attempt,
            **request.to_json(),
            "completion": completion.text, "finish_reason": completion.finish_reason,
            "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "seconds": round(completion.seconds, 6), "cached": completion.cached, "model": completion.model,
            "valid": valid, "value": _jsonable(value), "fallback": fallback,
        }
        self.trace.append(line)
        if self.path is not None:
            data = (json.dumps(line, ensure_ascii=False, default=str) + "\n").encode("utf-8")
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
