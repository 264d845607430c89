"""Every error polar_bench raises on purpose, in one small hierarchy.

`UserError` and its subclasses are mistakes a user can fix (a bad file, an unknown id, a missing
package); the CLI prints their message as one line and exits with code 2. Anything else is a bug in
polar_bench or in a native environment and keeps its traceback.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "PolarBenchError",
    "UserError",
    "UnknownTaskError",
    "MissingDependencyError",
    "HarnessError",
    "HarnessOptionError",
    "InvalidActionError",
    "EpisodeOverError",
    "HarnessClosedError",
    "NoTextRenderingError",
    "SuiteError",
    "ResultsError",
    "ScoringError",
    "AgentLoadError",
    "LLMError",
    "LLMTimeoutError",
    "did_you_mean",
    "describe_value",
]


class PolarBenchError(Exception):
    """Base class of every error polar_bench raises deliberately."""


class UserError(PolarBenchError):
    """A mistake the user can fix; the CLI reports it in one line and exits with code 2."""


class OptionError(UserError):
    """A setting out of its range, named as the library knows it (``option``: the field of the settings
    object, e.g. ``agent_threads``); the message starts with that name, and the CLI puts its flag there."""

    def __init__(self, option: str, message: str):
        super().__init__(f"{option} {message}")
        self.option, self.message = option, message

    def in_words_of(self, flags: Mapping[str, str]) -> UserError:
        """The same error in the words of a command line: each field named (``option`` and any in the
        message) replaced by its flag in ``flags``, e.g. ``--agent-threads must be at least 1, got 0``."""
        message = re.sub(r"\b[a-z][a-z_]*\b", lambda m: flags.get(m.group(0), m.group(0)), self.message)
        return UserError(f"{flags.get(self.option, self.option)} {message}")


def did_you_mean(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """Return ' Did you mean: a, b?' for the closest candidates, or '' when none is close."""
    close = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)
    return f" Did you mean: {', '.join(close)}?" if close else ""


def describe_value(value: Any) -> str:
    """A short description of a value for an error message: ``int 5``, ``str 'left'``, or ``array of
    dtype float32 and shape (3,)`` for a numpy array (never its full contents); reprs longer than 80
    characters are cut with ``...``."""
    numpy = sys.modules.get("numpy")  # a value can only be an ndarray if numpy is imported already
    if numpy is not None and isinstance(value, numpy.ndarray):
        return f"array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


class UnknownTaskError(UserError, KeyError):
    """A task id that no registered harness family knows."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MissingDependencyError(UserError, ImportError):
    """An optional package a harness family needs is not installed; the message has the pip command."""


class HarnessError(PolarBenchError):
    """An exception raised inside a native environment.

    Attributes: ``task_id``, ``seed`` and ``step`` (the step index at which it failed, 0 for reset),
    and ``native_traceback``, the formatted traceback of the original exception.
    """

    def __init__(self, task_id: str, seed: int | None, step: int, original: BaseException,
                 native_traceback: str):
        self.task_id = task_id
        self.seed = seed
        self.step = step
        self.original: BaseException | None = original
        self.native_traceback = native_traceback
        super().__init__(
            f"{task_id} failed at step {step} of the episode with seed {seed}: "
            f"{type(original).__name__}: {original}"
        )

    def __reduce__(self) -> tuple[type[HarnessError], tuple[Any, ...]]:  # picklable across worker processes
        return (HarnessError, (self.task_id, self.seed, self.step,
                               RuntimeError(f"{type(self.original).__name__}: {self.original}"),
                               self.native_traceback))


class HarnessOptionError(HarnessError, UserError, ValueError):
    """An option that a harness family does not accept, or a bad value of an option every family takes
    (``max_episode_steps``, ``text``), given to ``polar_bench.make`` or a suite's task options. Raised
    before the native environment is built; a `UserError` (the commands exit with code 2).

    Attributes: ``task_id``; ``seed`` is None and ``step`` 0 (no episode was played)."""

    def __init__(self, task_id: str, message: str):
        self.task_id = task_id
        self.seed = None
        self.step = 0
        self.original = None
        self.native_traceback = ""
        PolarBenchError.__init__(self, message)

    def __reduce__(self) -> tuple[type[HarnessOptionError], tuple[str, str]]:
        return (HarnessOptionError, (self.task_id, str(self)))


class InvalidActionError(PolarBenchError, ValueError):
    """An action of the wrong type or shape, NaN, or a discrete action out of range."""


class EpisodeOverError(PolarBenchError, RuntimeError):
    """`step()` was called after the episode ended, or before the first `reset()`."""


class HarnessClosedError(PolarBenchError, RuntimeError):
    """The harness was used after `close()`."""


class NoTextRenderingError(PolarBenchError, NotImplementedError):
    """Text was asked of a task family that has no faithful text rendering."""


class SuiteError(UserError):
    """A suite file that is missing, malformed or inconsistent."""


class ResultsError(UserError):
    """A results file that is missing, malformed or of an unknown format version."""


class ScoringError(UserError, ValueError):
    """Scores that cannot be aggregated: a bad shape, NaN or infinite cells, missing (run, task) cells,
    results that do not match each other, or a bad statistical option (confidence, replicates)."""


class AgentLoadError(UserError):
    """An agent file that cannot be loaded or whose `make_agent` fails."""


class LLMError(PolarBenchError):
    """An LLM backend that failed: a server that is down or answers with an error, a reply that is not
    a completion, a model file that cannot be loaded. Raised inside ``agent.act``, it fails that episode
    (status ``agent_error``, with this message), not the evaluation."""


class LLMTimeoutError(LLMError, TimeoutError):
    """An LLM backend that did not answer within its timeout."""
