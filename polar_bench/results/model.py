"""The typed model of one episode record of a results file: `Status` and `Episode`.

Producers (the episode loop, a worker that failed a unit) build an `Episode` and write
`Episode.to_json`; consumers read records with `Episode.from_json`, which makes the structural checks
once (types, statuses, a finite return for a successful episode). What needs the suite (a known task,
a run in range, the task's metric) is checked by the consumer that has it (`polar_bench.analysis`).
The JSON Schema (``schemas/results-v1.json``) lists the same fields; a test holds the two together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import ResultsError

__all__ = ["Status", "Episode", "EPISODE_FIELDS", "EPISODE_REQUIRED"]


class Status(str, Enum):
    """How an episode ended."""

    OK = "ok"
    ENV_ERROR = "env_error"  # the environment raised
    AGENT_ERROR = "agent_error"  # the agent raised, died, broke a limit or returned an invalid action
    TIMEOUT = "timeout"  # past the step or episode deadline


# what every record has (the schema's "required")
EPISODE_REQUIRED = ("task", "run", "seed", "return", "length", "status")
# the fields of an episode record, in the order a record is written; any other key is the agent's
# own (``episode_info()``), kept as given after these
EPISODE_FIELDS = ("task", "run", "index", "seed", "return", "length", "status", "error", "wall_seconds",
                  "agent_seconds", "clipped_actions", "harness", "digest", "llm", "attempts")


def _int(rec: Mapping[str, Any], key: str, where: str, required: bool = True) -> int | None:
    value = rec.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ResultsError(f"{where}: {key!r} must be an integer, got {value!r}")
    return value


def _number(rec: Mapping[str, Any], key: str, where: str) -> float | None:
    value = rec.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ResultsError(f"{where}: {key!r} must be a number, got {value!r}")
    return value


@dataclass(frozen=True)
class Episode:
    """One episode record. ``ret`` is the record's ``return``; ``extra``, the agent's own keys."""

    task: str
    run: int
    seed: int
    ret: float | None
    length: int
    status: Status
    index: int | None = None  # absent in files made before it was recorded: the episodes' order
    error: str | None = None
    wall_seconds: float | None = None
    agent_seconds: float | None = None
    clipped_actions: int | None = None
    harness: dict | None = None  # what the harness reports about the episode (its metrics)
    digest: str | None = None  # the trajectory digest of a successful episode
    llm: dict | None = None  # LLM calls and tokens counted by the proxy (or the agent's own count)
    attempts: int | None = None  # plays of the unit, when more than one
    extra: dict = field(default_factory=dict)

    @classmethod
    def failed(cls, task: str, run: int, index: int, seed: int, status: Status | str, error: str) -> Episode:
        """The record of a unit that could not be played (its worker was lost, a harness failed to start)."""
        return cls(task=task, run=run, index=index, seed=seed, ret=None, length=0, status=Status(status),
                   error=error, wall_seconds=0.0, agent_seconds=0.0)

    @classmethod
    def from_json(cls, rec: Any, where: str = "episode") -> Episode:
        """Read a record, checking its structure; `ResultsError` naming ``where`` and the field."""
        if not isinstance(rec, Mapping):
            raise ResultsError(f"{where}: an episode must be an object, got {type(rec).__name__}")
        task = rec.get("task")
        if not isinstance(task, str):
            raise ResultsError(f"{where}: 'task' must be a string, got {task!r}")
        status_text = rec.get("status")
        try:
            status = Status(status_text)
        except ValueError:
            raise ResultsError(f"{where} ({task}) has unknown status {status_text!r}; expected one of "
                               f"{', '.join(s.value for s in Status)}") from None
        run = _int(rec, "run", where)
        assert run is not None  # required
        ret = _number(rec, "return", where)
        if status is Status.OK and (ret is None or not math.isfinite(ret)):
            raise ResultsError(f"{where} ({task}, run {run}) has status ok but return {rec.get('return')!r}; "
                               "a successful episode needs a finite return")
        seed, length = _int(rec, "seed", where), _int(rec, "length", where)
        assert seed is not None and length is not None  # required
        index = rec.get("index")  # anything but an integer: absent (the episodes' order)
        return cls(task=task, run=run, seed=seed, ret=ret, length=length, status=status,
                   index=index if isinstance(index, int) and not isinstance(index, bool) else None,
                   error=None if rec.get("error") is None else str(rec.get("error")),
                   wall_seconds=_number(rec, "wall_seconds", where), agent_seconds=_number(rec, "agent_seconds", where),
                   clipped_actions=_int(rec, "clipped_actions", where, required=False),
                   harness=dict(rec["harness"]) if isinstance(rec.get("harness"), Mapping) else None,
                   digest=rec.get("digest") if isinstance(rec.get("digest"), str) else None,
                   llm=dict(rec["llm"]) if isinstance(rec.get("llm"), Mapping) else None,
                   attempts=_int(rec, "attempts", where, required=False),
                   extra={k: v for k, v in rec.items() if k not in EPISODE_FIELDS})

    def to_json(self) -> dict:
        """The record as written: the fields in `EPISODE_FIELDS` order (the optional ones only when set),
        then the agent's own keys."""
        rec: dict[str, Any] = {"task": self.task, "run": self.run}
        if self.index is not None:
            rec["index"] = self.index
        rec.update({"seed": self.seed, "return": self.ret, "length": self.length, "status": self.status.value,
                    "error": self.error})
        for key in ("wall_seconds", "agent_seconds", "clipped_actions", "harness", "digest", "llm", "attempts"):
            value = getattr(self, key)
            if value is not None:
                rec[key] = value
        rec.update(self.extra)
        return rec
