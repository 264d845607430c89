"""The LLM protocol's data: requests, completions, constraints, and per-call seeds.

Everything here is plain data with a JSON form (``to_json``), because a request is also the key of the
disk cache and a line of the trace.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Message",
    "Choices",
    "Grammar",
    "Constraint",
    "Request",
    "Completion",
    "Backend",
    "LLM",
    "call_seed",
    "choices_grammar",
    "parse_choice",
]

Message = Mapping[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""

ROLES = ("system", "user", "assistant")


def call_seed(episode_seed: int, step: int, salt: int | str = 0) -> int:
    """The seed of the LLM call made at ``step`` of the episode with seed ``episode_seed``.

    ``int.from_bytes(sha256(f"{episode_seed}:{step}:{salt}")[:4], "big") & 0x7FFFFFFF``: a 31-bit
    integer (valid for llama.cpp, which takes a uint32, and for OpenAI's ``seed``), the same on every
    machine and in every process, and unrelated between neighbouring steps. ``salt`` separates several
    calls made at the same step (a planner and a critic, say). Pass it as ``seed=`` of
    `LLMClient.complete`; ``LLMClient.seed_for(step)`` does it with the seed given to ``reset``.
    """
    for name, v in (("episode_seed", episode_seed), ("step", step)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"call_seed: {name} must be an int, got {v!r}")
    digest = hashlib.sha256(f"{episode_seed}:{step}:{salt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


# ----------------------------------------------------------------------------- constraints
def _gbnf_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def choices_grammar(options: Sequence[str]) -> str:
    """The GBNF grammar whose only sentences are ``options``: ``root ::= "a" | "b" | ...``."""
    return "root ::= " + " | ".join(_gbnf_literal(o) for o in options) + "\n"


_STRIP = " \t\r\n\"'`*.,;:!()[]{}<>"


def parse_choice(text: str, options: Sequence[str]) -> str | None:
    """The option that ``text`` names, or None when it names none or several. Case-insensitive:

    1. the text, stripped of spaces, quotes, brackets and punctuation at both ends, is an option;
    2. else exactly one option occurs in the text as whole words ("I would open door now"); an
       option that only occurs inside a longer occurring option does not count ("go" in "go to").

    Several options ("pick up or drop") are ambiguous: None, and the client retries.
    """
    norm = text.strip().strip(_STRIP).lower()
    lowered = {o.lower(): o for o in options}
    if norm in lowered:
        return lowered[norm]
    low = text.lower()
    found = [o for lo, o in lowered.items()
             if re.search(r"(?<!\w)" + re.escape(lo) + r"(?!\w)", low)]
    found = [o for o in found if not any(o != p and o.lower() in p.lower() for p in found)]
    return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class Choices:
    """The answer must be exactly one of ``options``.

    A backend with grammar support decodes under `choices_grammar` (every answer is valid); any other
    backend is asked in plain text and its answer parsed with `parse_choice`. ``fallback`` is the
    action taken when the answer cannot be parsed even after one retry; ``None`` means the first option.
    """

    options: tuple[str, ...]
    fallback: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.options, str):
            raise ValueError(f"Choices needs a sequence of strings, got the string {self.options!r}")
        opts = tuple(self.options)
        if not opts or not all(isinstance(o, str) and o.strip() for o in opts):
            raise ValueError(f"Choices needs non-empty strings, got {self.options!r}")
        if len({o.lower() for o in opts}) != len(opts):
            raise ValueError(f"Choices has duplicate options (case-insensitive): {opts!r}")
        if self.fallback is not None and self.fallback not in opts:
            raise ValueError(f"Choices fallback {self.fallback!r} is not one of the options {opts!r}")
        object.__setattr__(self, "options", opts)

    @property
    def grammar(self) -> str:
        return choices_grammar(self.options)

    @property
    def fallback_value(self) -> str:
        return self.fallback if self.fallback is not None else self.options[0]

    def parse(self, text: str) -> str | None:
        return parse_choice(text, self.options)

    def instruction(self) -> str:
        return "Answer with exactly one of: " + ", ".join(self.options) + ". Reply with that and nothing else."

    def to_json(self) -> dict:
        return {"type": "choices", "options": list(self.options), "fallback": self.fallback_value}


@dataclass(frozen=True)
class Grammar:
    """The answer must be a sentence of the GBNF grammar ``gbnf`` (llama.cpp's grammar format).

    A backend without grammar support is asked unconstrained; then ``parse`` (optional: text -> value,
    or None when invalid) checks the answer and ``fallback`` (text) replaces an answer still invalid
    after one retry. Without ``parse`` such an answer is returned as it is and recorded as unchecked.
    ``description`` is told to such a backend ("Answer with ...").
    """

    gbnf: str
    parse: Callable[[str], Any] | None = field(default=None, compare=False)
    fallback: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.gbnf, str) or "::=" not in self.gbnf:
            raise ValueError(f"Grammar needs GBNF text with at least one rule 'name ::= ...', got {self.gbnf!r:.80}")
        if "root" not in re.findall(r"^\s*([\w-]+)\s*::=", self.gbnf, flags=re.M):
            raise ValueError("Grammar: the GBNF text has no 'root ::= ...' rule")

    @property
    def grammar(self) -> str:
        return self.gbnf

    def instruction(self) -> str:
        return self.description or "Answer in the required format."

    def to_json(self) -> dict:
        return {"type": "grammar", "gbnf": self.gbnf, "fallback": self.fallback}


Constraint = Choices | Grammar


# ----------------------------------------------------------------------------- request / completion
@dataclass(frozen=True)
class Request:
    """One call: what a backend receives and what the cache is keyed by (with the model's identity)."""

    messages: tuple[Message, ...]  # stored as plain dicts (see __post_init__)
    constraint: Constraint | None = None
    seed: int | None = None
    temperature: float = 0.0
    max_tokens: int = 64

    def __post_init__(self) -> None:
        msgs = tuple(dict(m) for m in self.messages)
        if not msgs:
            raise ValueError("an LLM request needs at least one message")
        for m in msgs:
            if set(m) != {"role", "content"} or m["role"] not in ROLES or not isinstance(m["content"], str):
                raise ValueError(f"a message is {{'role': one of {ROLES}, 'content': str}}, got {m!r:.200}")
        object.__setattr__(self, "messages", msgs)
        if self.seed is not None and (not isinstance(self.seed, int) or not 0 <= self.seed < 2**32):
            raise ValueError(f"seed must be None or an int in [0, 2**32), got {self.seed!r}")
        if not (isinstance(self.temperature, (int, float)) and 0.0 <= self.temperature <= 5.0):
            raise ValueError(f"temperature must be in [0, 5], got {self.temperature!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive int, got {self.max_tokens!r}")

    @property
    def deterministic(self) -> bool:
        """Greedy decoding or a fixed seed: the same request gives the same completion (cacheable)."""
        return self.temperature == 0 or self.seed is not None

    def to_json(self) -> dict:
        return {"messages": [dict(m) for m in self.messages],
                "constraint": self.constraint.to_json() if self.constraint is not None else None,
                "seed": self.seed, "temperature": float(self.temperature), "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class Completion:
    """What a call returns.

    ``text`` is the model's answer (of the last attempt); ``value`` is what the agent should act on:
    the chosen option for `Choices` (the fallback when none could be parsed), the parsed value for a
    `Grammar` with ``parse``, else the text. ``valid``: True when the answer met the constraint, False
    when the fallback was used, None when there was nothing to check. Token counts and ``seconds``
    (wall time of the backend calls, ~0 on a cache hit) add up all attempts.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    model: dict
    finish_reason: str = "stop"
    value: Any = None
    valid: bool | None = None
    fallback: bool = False
    attempts: int = 1
    cached: bool = False

    def to_json(self) -> dict:
        return {"text": self.text, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": self.seconds,
                "finish_reason": self.finish_reason, "model": self.model}


@runtime_checkable
class Backend(Protocol):
    """A model that completes one `Request`. ``identity`` (a JSON dict, with ``backend``, ``model`` and
    ``sha256`` where known) names the model in traces and cache keys; ``supports_grammar`` says
    whether ``constraint.grammar`` is enforced while decoding."""

    # Read-only properties, so that an attribute (OpenAIBackend) and a property (EmbeddedBackend,
    # which reads the model file's hash lazily) both implement them.
    @property
    def identity(self) -> dict: ...

    @property
    def supports_grammar(self) -> bool: ...

    def generate(self, request: Request) -> Completion: ...


@runtime_checkable
class LLM(Protocol):
    """What an LLM agent calls: `polar_bench.llm.LLMClient` implements it."""

    def complete(self, messages: Sequence[Message], *, constraint: Constraint | None = None,
                 seed: int | None = None, temperature: float = 0.0, max_tokens: int = 64) -> Completion: ...
