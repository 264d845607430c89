"""Program templates: what the model is asked to write, the GBNF grammar that constrains it, and the
assembly of a full ``def act(observation)`` program from the model's answer.

Two modes:

* ``template`` (default, for small models): we write the function header and the unpacking of the
  observation into named variables; the model writes only the body, under a GBNF grammar of a tiny
  Python subset (threshold rules for discrete actions, clipped linear expressions for continuous
  ones). Every answer is then a program that loads and returns a valid action.
* ``free`` (for stronger models): the model writes the whole program; it is checked with
  ``ast.parse`` in the parent (parsing runs nothing) and then only ever run in the sandbox.
"""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from polar_bench.task_info import TaskInfo

MODES = ("template", "free")


def _identifier(name: str) -> str:
    s = re.sub(r"[^0-9a-zA-Z]+", "_", name.strip().lower()).strip("_") or "x"
    if s[0].isdigit():
        s = "x_" + s
    if keyword.iskeyword(s) or s in {"observation", "act", "clip", "float", "int", "reset"}:
        s = s + "_"
    return s


def variable_names(task: TaskInfo) -> list[str] | None:
    """One Python identifier per entry of a flat vector observation, or None if it is not one."""
    space = task.observation_space
    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        return None
    n = space.shape[0]
    comps = list(task.observation_components)
    names, seen = [], set()
    for i in range(n):
        base = _identifier(comps[i].name) if i < len(comps) else f"x{i}"
        name, j = base, 2
        while name in seen:
            name, j = f"{base}_{j}", j + 1
        seen.add(name)
        names.append(name)
    return names


def _gbnf_literal(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@dataclass
class Template:
    """What the model fills in for one task."""

    task: TaskInfo
    mode: str = "template"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        self.names = variable_names(self.task)
        act = self.task.action_space
        self.discrete = isinstance(act, spaces.Discrete)
        self.continuous = isinstance(act, spaces.Box) and len(act.shape) == 1
        if self.mode == "template" and not (self.discrete or self.continuous):
            raise ValueError(f"{self.task.id}: no template for action space {act}")

    @property
    def n_actions(self) -> int:
        """The number of discrete actions (rules and sequence templates)."""
        act = self.task.action_space
        if not isinstance(act, spaces.Discrete):
            raise TypeError(f"{self.task.id}: {act} is not a discrete action space")
        return int(act.n)

    @property
    def action_dims(self) -> int:
        """The number of continuous action components (linear template)."""
        shape = self.task.action_space.shape
        if not self.continuous or not shape:
            raise TypeError(f"{self.task.id}: {self.task.action_space} is not a vector action space")
        return int(shape[0])

    # ------------------------------------------------------------------ the fixed header
    @property
    def kind(self) -> str:
        if self.mode == "free":
            return "free"
        if self.names is None:
            return "sequence"  # structured observations: an open-loop action cycle
        return "rules" if self.discrete else "linear"

    def header(self) -> str:
        lines = []
        if self.kind == "linear":
            lines.append("def clip(v):\n    return max(-1.0, min(1.0, v))\n\n")
        if self.kind == "sequence":
            lines.append("t = 0\n\n\ndef reset(seed):\n    global t\n    t = 0\n\n\n")
        lines.append("def act(observation):\n")
        if self.kind in ("rules", "linear"):
            lines.append(f"    {', '.join(self.names)}{',' if len(self.names) == 1 else ''} = "
                         "[float(v) for v in observation]\n")
        if self.kind == "sequence":
            lines.append("    global t\n    t += 1\n")
        return "".join(lines)

    def footer(self) -> str:
        if self.kind == "linear":
            n = self.action_dims
            return f"    return [{', '.join(f'clip(a{i})' for i in range(n))}]\n"
        if self.kind == "sequence":
            return "    return actions[t % len(actions)]\n"
        return ""

    def assemble(self, body: str) -> str:
        """The full program from the model's answer (template mode) or the answer itself (free)."""
        if self.kind == "free":
            return extract_code(body)
        body = body.rstrip("\n") + "\n"
        return self.header() + body + self.footer()

    # ------------------------------------------------------------------ the grammar
    def grammar(self) -> str | None:
        """GBNF of the body, or None in free mode."""
        if self.kind == "free":
            return None
        num = 'num ::= "-"? [0-9] "." [0-9] [0-9]?'
        if self.kind == "sequence":
            n = self.n_actions
            acts = " | ".join(_gbnf_literal(str(a)) for a in range(n))
            return "\n".join([
                'root ::= "    actions = [" action (", " action)? (", " action)? (", " action)? '
                '(", " action)? (", " action)? "]\\n"',
                f"action ::= {acts}",
            ])
        vars_ = " | ".join(_gbnf_literal(v) for v in self.names)
        if self.kind == "rules":
            n = self.n_actions
            acts = " | ".join(_gbnf_literal(str(a)) for a in range(n))
            return "\n".join([
                "root ::= rule rule? " + '"    return " action "\\n"',
                'rule ::= "    if " cond ":\\n        return " action "\\n"',
                'cond ::= term (" + " term)? " " cmp " " num',
                'term ::= var | num " * " var',
                'cmp ::= ">" | "<"',
                num,
                f"action ::= {acts}",
                f"var ::= {vars_}",
            ])
        n = self.action_dims
        lines = ["root ::= " + " ".join(f'"    a{i} = " lin "\\n"' for i in range(n)),
                 'lin ::= term (" + " term)? (" + " term)?',
                 'term ::= num " * " var',
                 num,
                 f"var ::= {vars_}"]
        return "\n".join(lines)

    def format_hint(self) -> str:
        """The shape of the answer, told to the model."""
        if self.kind == "rules":
            a = self.n_actions
            return ("Write only the body of act, in this form (one or two rules, then a default):\n"
                    "    if <variable> > <number>:\n        return <action>\n"
                    "    if <number> * <variable> + <number> * <variable> < <number>:\n"
                    "        return <action>\n    return <action>\n"
                    f"where <action> is an integer from 0 to {a - 1}.")
        if self.kind == "linear":
            n = self.action_dims
            return ("Write only the body of act: one line per action component, each a weighted sum of "
                    "observation variables, for example\n    a0 = -1.5 * <variable> + 0.3 * <variable>\n"
                    f"for a0 to a{n - 1}; each a<i> is clipped to [-1, 1] (the full range of that component).")
        if self.kind == "sequence":
            # Placeholders, not numbers: with a concrete example ("[2, 2, 0]") the 135M model copied it in
            # 9 of 15 BabyAI searches, whatever the task's actions were.
            a = self.n_actions
            return ("Write only one line: a list of one to six actions that the agent repeats in a cycle:\n"
                    "    actions = [<action>, <action>, ...]\n"
                    f"where <action> is an integer from 0 to {a - 1}; choose the actions that serve the task.")
        return ("Write the complete Python program in one ```python block. It must define "
                "def act(observation): ... returning a valid action. Only these imports are allowed: "
                "math, random, numpy, collections, itertools, functools.")

    def parse(self, text: str) -> str | None:
        """The full program if ``text`` is an acceptable answer, else None (runs nothing)."""
        try:
            program = self.assemble(text)
            tree = ast.parse(program)
        except (SyntaxError, ValueError):
            return None
        if not any(isinstance(n, ast.FunctionDef) and n.name == "act" for n in tree.body):
            return None
        return program


def extract_code(text: str) -> str:
    """The code of a model's answer: the first fenced block if any, else the text."""
    m = re.search(r"```(?:python|py)?\s*\n(.*?)```", text, flags=re.S)
    code = m.group(1) if m else text
    return code.strip("\n") + "\n"


def describe_value(x, digits: int = 3):
    """A short, readable rendering of an observation for the prompt."""
    if isinstance(x, np.ndarray):
        if x.size > 32:
            return f"<array of shape {x.shape}, dtype {x.dtype}>"
        return [round(float(v), digits) for v in x.ravel()]
    if isinstance(x, dict):
        return {k: describe_value(v, digits) for k, v in x.items()}
    if isinstance(x, np.generic):  # numpy scalars (BabyAI's direction): plain Python for JSON
        x = x.item()
    if isinstance(x, float):
        return round(x, digits)
    return x
