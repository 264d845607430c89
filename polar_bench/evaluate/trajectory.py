"""What an episode leaves behind besides its record: the trajectory digest and the trajectory file.

`TrajectoryDigest` is SHA-256 chained over the episode seed, the initial observation, and for every
step the action, the reward (float64), the terminated and truncated flags and the next observation
if the agent acts on it (the final observation is left out: no action follows it, and NetHack's
shows the high-score list of the games its instance played before), each encoded with its dtype and
shape. `verify` compares digests, so a verified episode checks every observation the agent acted on
and every action, not only the return. `write_trajectory` writes an episode's LLM calls and outcome
(docs/llm.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any

import numpy as np

from ..llm.proxy import EpisodeCalls

__all__ = ["DIGEST_PREFIX", "TrajectoryDigest", "trajectory_path", "write_trajectory"]

DIGEST_PREFIX = "sha256:"


class TrajectoryDigest:
    """A hash chained over one episode: seed, the observations acted on, actions, rewards and end flags."""

    def __init__(self, seed: int):
        self._h = hashlib.sha256(b"polar_bench trajectory digest v1\0")
        self._h.update(struct.pack("<q", int(seed)))

    def _value(self, v: Any) -> None:
        h = self._h
        if isinstance(v, dict):
            h.update(b"d" + struct.pack("<I", len(v)))
            for k in v:
                self._value(str(k))
                self._value(v[k])
        elif isinstance(v, (list, tuple)):
            h.update(b"l" + struct.pack("<I", len(v)))
            for item in v:
                self._value(item)
        elif isinstance(v, str):
            b = v.encode("utf-8", "surrogatepass")
            h.update(b"s" + struct.pack("<I", len(b)) + b)
        elif isinstance(v, bytes):
            h.update(b"y" + struct.pack("<I", len(v)) + v)
        elif v is None:
            h.update(b"N")
        else:
            a = np.asarray(v)
            if a.dtype.kind not in "biufc":
                self._value(repr(v))
                return
            a = np.ascontiguousarray(a)
            h.update(b"a" + a.dtype.str.encode() + struct.pack(f"<B{a.ndim}q", a.ndim, *a.shape))
            h.update(a.tobytes())

    def start(self, observation: Any) -> None:
        self._value(observation)

    def step(self, action: Any, reward: float, terminated: bool, truncated: bool, observation: Any) -> None:
        self._value(action)
        self._h.update(struct.pack("<d??", float(reward), bool(terminated), bool(truncated)))
        if not (terminated or truncated):  # the final observation is never acted on
            self._value(observation)

    def hexdigest(self) -> str:
        return DIGEST_PREFIX + self._h.hexdigest()



def trajectory_path(folder: str, task: str, run: int, index: int) -> str:
    """The trajectory file of one episode: ``FOLDER/<family>__<name>/run<R>-ep<I>.jsonl``."""
    return os.path.join(folder, task.replace("/", "__"), f"run{run}-ep{index}.jsonl")


def write_trajectory(folder: str, rec: dict, calls: EpisodeCalls) -> None:
    """Write an episode's LLM calls and, last, its outcome as JSONL (docs/llm.md has the schema). The
    file appears whole (written beside, then renamed), so a reader never sees half an episode and an
    episode played again replaces its file."""
    path = trajectory_path(folder, rec["task"], rec["run"], rec["index"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    end = {"type": "episode", "task": rec["task"], "run": rec["run"], "index": rec["index"], "seed": rec["seed"],
           "return": rec["return"], "length": rec["length"], "status": rec["status"], "error": rec["error"],
           "llm": rec.get("llm")}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for line in [*calls.lines, end]:
            fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    os.replace(tmp, path)
