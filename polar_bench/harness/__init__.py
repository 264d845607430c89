"""The harness registry: task ids ``family/name`` to harness classes.

Built-in families are imported lazily (so that importing polar_bench never imports MuJoCo or
NetHack). Third-party packages add a family through the ``polar_bench.harnesses`` entry-point
group: the entry point's name is the family prefix and its value a `Harness` subclass (or any
callable ``factory(name, **overrides) -> Harness`` with a ``task_names()`` attribute). See
docs/harnesses.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata
from typing import Any, Protocol

from ..errors import UnknownTaskError, did_you_mean
from .base import COMMON_OPTIONS, Harness, check_common_options

__all__ = ["Harness", "make", "check_options", "register_family", "families", "family_factory", "task_names",
           "COMMON_OPTIONS", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "polar_bench.harnesses"

_BUILTIN: dict[str, str] = {
    "gym": "polar_bench.harness.gym_family:GymHarness",
    "dmc": "polar_bench.harness.dmc:DMCHarness",
    "procgen": "polar_bench.harness.procgen:ProcgenHarness",
    "nethack": "polar_bench.harness.nethack:NetHackHarness",
    "babyai": "polar_bench.harness.babyai:BabyAIHarness",
    "atari": "polar_bench.harness.atari:AtariHarness",
    "mujoco": "polar_bench.harness.mujoco_family:MujocoHarness",
    "bullet": "polar_bench.harness.bullet:BulletHarness",
    "minihack": "polar_bench.harness.minihack:MiniHackHarness",
    "crafter": "polar_bench.harness.crafter:CrafterHarness",
    "textworld": "polar_bench.harness.textworld:TextWorldHarness",
}  # every family of polar_bench's own; third-party packages use the entry-point group


class HarnessFactory(Protocol):
    """What a family registers: a `Harness` subclass, or any callable ``factory(name, **overrides)``
    with a ``task_names()`` attribute."""

    def __call__(self, *args: Any, **overrides: Any) -> Harness: ...

    def task_names(self) -> list[str]: ...


_LOADED: dict[str, HarnessFactory] = {}


def register_family(prefix: str, factory: HarnessFactory | str) -> None:
    """Register a family under ``prefix``: a factory ``(name, **overrides) -> Harness`` with a
    ``task_names()`` attribute, or ``"module:attr"`` naming one (imported on first use)."""
    if not prefix or "/" in prefix:
        raise ValueError(f"a family prefix must be a non-empty name without '/', got {prefix!r}")
    if isinstance(factory, str):
        _BUILTIN[prefix] = factory
        _LOADED.pop(prefix, None)
    else:
        _LOADED[prefix] = factory


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def families() -> list[str]:
    """Every family prefix known: built-in, registered and from entry points."""
    return sorted(set(_BUILTIN) | set(_LOADED) | set(_entry_points()))


def _family(prefix: str) -> HarnessFactory:
    if prefix in _LOADED:
        return _LOADED[prefix]
    if prefix in _BUILTIN:
        module, _, attr = _BUILTIN[prefix].partition(":")
        factory = getattr(importlib.import_module(module), attr)
    else:
        eps = _entry_points()
        if prefix not in eps:
            raise UnknownTaskError(
                f"unknown harness family {prefix!r}; known families: {', '.join(families())}."
                + did_you_mean(prefix, families()))
        factory = eps[prefix].load()
    _LOADED[prefix] = factory
    return factory


def family_factory(prefix: str) -> HarnessFactory:
    """The factory (usually a `Harness` subclass) that builds the tasks of family ``prefix``, loaded on
    first use; `UnknownTaskError` for a family nobody registered."""
    return _family(prefix)


def task_names(prefix: str) -> list[str]:
    """The task names a family offers (without the prefix)."""
    return list(_family(prefix).task_names())


def _resolve(task_id: str) -> tuple[HarnessFactory, str]:
    """The family factory of ``task_id`` and the task name, or `UnknownTaskError`."""
    if not isinstance(task_id, str) or "/" not in task_id:
        raise UnknownTaskError(
            f"task ids look like 'family/name' (e.g. 'gym/CartPole-v1', 'dmc/cheetah-run'), got {task_id!r}")
    prefix, name = task_id.split("/", 1)
    factory = _family(prefix)
    known = factory.task_names()
    if name not in known:
        raise UnknownTaskError(
            f"unknown task {task_id!r}." + did_you_mean(task_id, [f"{prefix}/{n}" for n in known])
            + f" List the family's tasks with polar_bench.harness.task_names({prefix!r}).")
    return factory, name


def check_options(task_id: str, options: Mapping[str, Any]) -> None:
    """Check the options of ``task_id`` without building its environment: `HarnessOptionError` for an
    option its family does not accept (the message lists those it does) or a bad ``max_episode_steps``
    or ``text``; `UnknownTaskError` for an unknown task. ``make`` runs the same checks."""
    factory, name = _resolve(task_id)
    if isinstance(factory, type) and issubclass(factory, Harness):
        factory.check_options(name, options)
    else:  # a plain factory function: only the options every family shares can be checked
        check_common_options(task_id, options)


def make(task_id: str, **overrides: Any) -> Harness:
    """Build the harness of ``task_id`` (``family/name``), e.g. ``polar_bench.make("dmc/cheetah-run")``.

    ``overrides`` go to the family (``text=True`` for text observations, ``max_episode_steps=N``,
    family options such as Procgen's ``distribution_mode``); see `check_options` for how they are checked.
    """
    factory, name = _resolve(task_id)
    if not (isinstance(factory, type) and issubclass(factory, Harness)):
        check_common_options(task_id, overrides)  # a Harness subclass checks its options in __new__
    return factory(name, **overrides)
