"""`python -m polar_bench new-harness SOURCE`: write a harness family for a Gymnasium-style environment.

SOURCE is a registered Gymnasium id or an import path ``module:Class``. The scaffold builds the
environment once to read its spaces, then writes a small installable plugin package: the family (a
`polar_bench.harness.adapter.GymnasiumAdapter` subclass whose attributes are drafts to review), its
``pyproject.toml`` with the entry point, and a conformance test. With ``--llm`` an LLM drafts the
description and the names. See docs/harnesses.md#scaffolding-a-family-new-harness.
"""

from __future__ import annotations

import json
import keyword
import re
import textwrap
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from .errors import UserError

__all__ = ["Draft", "inspect_source", "draft_with_llm", "write_package", "scaffold"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9 ()_.,/-]{0,39}$")
_NAME_GRAMMAR = 'root ::= [a-zA-Z] [a-zA-Z0-9 _-]*'
_ADAPTER_IMPORT = "from polar_bench.harness.adapter import GymnasiumAdapter"
#: Entries beyond this many are not named by the LLM (one call per name).
MAX_LLM_NAMES = 32


@dataclass
class Draft:
    """What the scaffold writes into the family file (every field a draft to review)."""

    source: str
    family: str
    task: str
    description: str
    observation_names: list[str] = field(default_factory=list)
    action_names: list[str] = field(default_factory=list)
    max_episode_steps: int = 1000
    package: str = ""
    spaces_text: str = ""
    doc: str = ""

    @property
    def module(self) -> str:
        return f"polar_bench_{self.family.replace('-', '_')}"

    @property
    def class_name(self) -> str:
        return "".join(p.capitalize() for p in re.split(r"[_-]", self.family) if p) + "Harness"


def _build(source: str) -> tuple[Any, dict]:
    """The native environment of ``source`` and facts about it (kind, spec step limit, module)."""
    if ":" in source and "/" not in source.split(":", 1)[0]:
        module_name, _, attr = source.partition(":")
        try:
            import importlib

            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UserError(f"cannot import {source!r} ({exc}); give a Gymnasium id such as CartPole-v1 or an "
                            f"import path module:Class that Python can import from here") from None
        try:
            env = cls()
        except TypeError as exc:
            raise UserError(f"{source} cannot be built without arguments ({exc}); wrap it in a class or function "
                            f"that supplies them and pass that import path") from None
        return env, {"kind": "class", "module": module_name, "attr": attr, "steps": None,
                     "top": module_name.split(".")[0], "doc": (cls.__doc__ or "")}
    import gymnasium
    from gymnasium.error import Error as GymnasiumError

    try:
        spec = gymnasium.spec(source)
    except GymnasiumError as exc:
        raise UserError(f"{source!r} is not a registered Gymnasium id ({exc}); give an id such as CartPole-v1 or "
                        f"an import path module:Class") from None
    env = gymnasium.make(source, disable_env_checker=True).unwrapped
    top = str(spec.entry_point).split(".")[0].split(":")[0] if isinstance(spec.entry_point, str) else \
        type(env).__module__.split(".")[0]
    return env, {"kind": "id", "steps": spec.max_episode_steps, "top": top,
                 "doc": (type(env).__doc__ or "")}


def _distribution(top_module: str) -> str:
    names = metadata.packages_distributions().get(top_module) or [top_module]
    return names[0]


def _default_family(source: str) -> str:
    base = source.split(":", 1)[1] if ":" in source else source.split("/")[-1].split("-v")[0]
    base = re.sub(r"Env$", "", base) or base
    name = re.sub(r"[^a-z0-9]+", "_", base.lower()).strip("_")
    return name or "custom"


def inspect_source(source: str, family: str | None = None, task: str | None = None,
                   max_episode_steps: int | None = None) -> tuple[Draft, Any]:
    """The default `Draft` for ``source`` and its native environment (the caller closes it)."""
    family = family or _default_family(source)
    if not re.fullmatch(r"[a-z][a-z0-9_]*", family) or keyword.iskeyword(family):
        raise UserError(f"--family must be a lower-case identifier (letters, digits, _), got {family!r}")
    env, facts = _build(source)
    obs, act = env.observation_space, env.action_space
    if not isinstance(act, (spaces.Discrete, spaces.Box)):
        env.close()
        raise UserError(f"{source}: action space {act} is not supported by the adapter (Discrete or Box only); "
                        f"write the family by hand (docs/harnesses.md, 'Writing a harness family')")
    n_obs = obs.shape[0] if isinstance(obs, spaces.Box) and len(obs.shape) == 1 else 0
    n_act = int(act.n) if isinstance(act, spaces.Discrete) else int(np.prod(act.shape))
    steps = int(max_episode_steps or facts["steps"] or 1000)
    task = task or (source.split("/")[-1] if facts["kind"] == "id" else "default")
    if "/" in task or not task:
        raise UserError(f"--task must be a non-empty name without '/', got {task!r}")
    draft = Draft(source=source, family=family, task=task,
                  description=f"The environment {source}: maximise the return within {steps} steps.",
                  observation_names=[f"obs[{i}]" for i in range(n_obs)],
                  action_names=[f"action {i}" if isinstance(act, spaces.Discrete) else f"action[{i}]"
                                for i in range(n_act)],
                  max_episode_steps=steps, package=_distribution(facts["top"]),
                  spaces_text=f"observation space {obs}; action space {act}",
                  doc=" ".join(facts["doc"].split())[:1200])
    return draft, env


def _clean_description(text: str, limit: int = 400) -> str:
    """The first paragraph on one line, cut after the last whole sentence within ``limit`` characters."""
    text = " ".join(text.strip().split("\n\n")[0].split()).strip("\"' ")
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    return cut[:end + 1] if end > 0 else ""


def draft_with_llm(draft: Draft, client: Any) -> Draft:
    """Ask ``client`` (a `polar_bench.llm.LLMClient`) for the description and the names; keep each
    default where the answer is unusable (too short, not a name, a duplicate)."""
    from .llm import Grammar

    about = (f"Environment: {draft.source}\n{draft.spaces_text}\n"
             + (f"Documentation: {draft.doc}\n" if draft.doc else ""))
    out = client.complete([
        {"role": "system", "content": "You describe reinforcement-learning environments precisely and briefly."},
        {"role": "user", "content": about + "In two sentences, state the agent's goal in this environment and how "
                                            "it is rewarded."}], max_tokens=96)
    description = _clean_description(out.text)
    if len(description) >= 30:
        draft.description = description

    def parse(text: str) -> str | None:
        name = " ".join(text.split()).strip(" .")
        return name if _NAME.match(name) and len(name.split()) <= 4 else None

    # Every name unique (case-insensitively) across observations and actions: an answer that repeats
    # one already taken, or a default name still to come, keeps its own default.
    taken = {n.lower() for n in draft.observation_names + draft.action_names}

    def name_all(names: list[str], what: str) -> list[str]:
        if len(names) > MAX_LLM_NAMES:
            return names
        named: list[str] = []
        for i, default in enumerate(names):
            answer = client.complete(
                [{"role": "user", "content": about + f"Give a short name (2-4 words) for {what} number {i} "
                                                     f"(counting from 0) of {len(names)}. Answer with the name only."}],
                constraint=Grammar(_NAME_GRAMMAR, parse=parse, fallback=default,
                                   description="Answer with a short name only."), max_tokens=12)
            value = answer.value if isinstance(answer.value, str) else None
            if value and value != default and value.lower() not in taken:
                taken.discard(default.lower())
                taken.add(value.lower())
                named.append(value)
            else:
                named.append(default)
        return named

    draft.observation_names = name_all(draft.observation_names, "the entry of the observation vector")
    draft.action_names = name_all(draft.action_names, "the discrete action" if draft.action_names
                                  and draft.action_names[0].startswith("action ") else "the action entry")
    return draft


def _lit(text: str) -> str:
    """A double-quoted Python string literal of ``text`` (JSON's escapes are valid Python)."""
    return json.dumps(text)


def _family_source(draft: Draft) -> str:
    if ":" in draft.source and "/" not in draft.source.split(":", 1)[0]:
        module, _, attr = draft.source.partition(":")
        imports = "\n".join(sorted([f"from {module} import {attr}", _ADAPTER_IMPORT])) + "\n"
        build = f"    return {attr}()\n"
    else:
        imports = f"import gymnasium\n{_ADAPTER_IMPORT}\n"
        build = (f"    # The unwrapped environment: the harness applies the step limit ({draft.max_episode_steps}) "
                 f"and its own checks.\n"
                 f"    return gymnasium.make({_lit(draft.source)}, disable_env_checker=True).unwrapped\n")
    description = "\n".join(f"        {_lit(line)}" for line in textwrap.wrap(draft.description, 90,
                                                                             drop_whitespace=False))

    def names(values: list[str]) -> str:
        if not values:
            return "()"
        return "(\n" + "".join(f"        {_lit(v)},\n" for v in values) + "    )"

    return f'''"""`{draft.family}/<task>`: {draft.source} as a polar_bench harness family.

Scaffolded by `python -m polar_bench new-harness {draft.source}`. The description, the names (from
which the text rendering `name: value` is made) and the step limit are drafts: review them, then run
the conformance suite: python -m pytest -q tests/test_{draft.module}.py
"""

{imports}

def _make():
{build}

class {draft.class_name}(GymnasiumAdapter):
    family = {_lit(draft.family)}
    tasks = {{{_lit(draft.task)}: _make}}
    description = (
{description}
    )
    observation_names = {names(draft.observation_names)}
    action_names = {names(draft.action_names)}
    max_episode_steps = {draft.max_episode_steps}
    package = {_lit(draft.package)}
'''


def _pyproject(draft: Draft) -> str:
    return f'''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "polar-bench-{draft.family.replace('_', '-')}"
version = "0.1.0"
description = "The {draft.family} harness family for polar_bench ({draft.source})"
requires-python = ">=3.10"
dependencies = ["polar_bench", "{draft.package}"]

[project.entry-points."polar_bench.harnesses"]
{draft.family} = "{draft.module}:{draft.class_name}"

[tool.setuptools]
py-modules = ["{draft.module}"]
'''


def _test(draft: Draft) -> str:
    return f'''"""polar_bench's conformance suite over the {draft.family} family."""

from polar_bench.testing import HarnessConformance


class Test{draft.class_name}Conformance(HarnessConformance):
    task_ids = [{_lit(f"{draft.family}/{draft.task}")}]
'''


def write_package(draft: Draft, out: Path, force: bool = False) -> list[Path]:
    """Write the family file, pyproject.toml and the conformance test under ``out``; the paths written."""
    files = {out / f"{draft.module}.py": _family_source(draft), out / "pyproject.toml": _pyproject(draft),
             out / "tests" / f"test_{draft.module}.py": _test(draft)}
    existing = [str(p) for p in files if p.exists()]
    if existing and not force:
        raise UserError(f"{', '.join(existing)} already exist(s); choose another --out or pass --force to overwrite")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)


def scaffold(source: str, out: str | Path | None = None, *, family: str | None = None, task: str | None = None,
             max_episode_steps: int | None = None, llm: Any = None, force: bool = False) -> tuple[Draft, list[Path]]:
    """Inspect ``source``, draft (with ``llm``, an `LLMClient`, when given) and write the package."""
    draft, env = inspect_source(source, family, task, max_episode_steps)
    try:
        if llm is not None:
            draft = draft_with_llm(draft, llm)
    finally:
        env.close()
    target = Path(out) if out is not None else Path(f"polar_bench_{draft.family}")
    return draft, write_package(draft, target, force)
