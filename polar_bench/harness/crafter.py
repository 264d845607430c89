"""`crafter/<task>`: Crafter (Hafner, 2021), an open-world survival game scored by its 22 achievements.

``crafter/Reward`` (Crafter's reward) and ``crafter/NoReward`` (always 0). The observation is
Crafter's 64 x 64 RGB image; ``info`` reports achievements and inventory, the episode record keeps
the achievements unlocked (`crafter_score` scores them) and ``render_text`` describes the player's
view. Crafter's chunk sets are replaced by insertion-ordered ones (`_OrderedSet`) so that
``reset(seed=s)`` fully determines the episode. See docs/families/crafter.md.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from gymnasium import spaces

from .._optional import require, version_of
from ..task_info import Component, TaskInfo
from .base import Harness

__all__ = ["CrafterHarness", "TASKS", "crafter_score"]

TASKS = ("Reward", "NoReward")

_ACTION_TEXT = {
    "noop": "do nothing", "move_left": "move west (left)", "move_right": "move east (right)",
    "move_up": "move north (up)", "move_down": "move south (down)",
    "do": "interact with what you face: collect material, attack a creature, eat, drink",
    "sleep": "sleep (restores energy; wakes when rested)", "place_stone": "place stone in front (needs 1 stone)",
    "place_table": "place a table in front (needs 1 wood)",
    "place_furnace": "place a furnace in front (needs 1 stone, a nearby table)",
    "place_plant": "plant a sapling in front on grass (needs 1 sapling)",
    "make_wood_pickaxe": "make a wood pickaxe (needs 1 wood, a nearby table)",
    "make_stone_pickaxe": "make a stone pickaxe (needs 1 wood, 1 stone, a nearby table)",
    "make_iron_pickaxe": "make an iron pickaxe (needs 1 wood, 1 coal, 1 iron, a nearby table and furnace)",
    "make_wood_sword": "make a wood sword (needs 1 wood, a nearby table)",
    "make_stone_sword": "make a stone sword (needs 1 wood, 1 stone, a nearby table)",
    "make_iron_sword": "make an iron sword (needs 1 wood, 1 coal, 1 iron, a nearby table and furnace)",
}
_FACING = {(-1, 0): "west", (1, 0): "east", (0, -1): "north", (0, 1): "south"}
# One character per material and creature in the text grid.
_SYMBOLS = {"water": "~", "grass": ".", "stone": "#", "path": "_", "sand": ":", "tree": "T", "lava": "%",
            "coal": "c", "iron": "i", "diamond": "d", "table": "t", "furnace": "f", "Player": "@",
            "Cow": "C", "Zombie": "Z", "Skeleton": "S", "Arrow": "a", "Plant": "p", None: " "}


def crafter_score(success_rates_percent: Iterable[float]) -> float:
    """Crafter's score (Hafner, 2021, eq. 1): exp(mean(ln(1 + s_i))) - 1 over the 22 achievements'
    success rates s_i in percent (the share of episodes that unlocked each at least once)."""
    rates = np.asarray(list(success_rates_percent), dtype=np.float64)
    return float(np.exp(np.mean(np.log1p(rates))) - 1.0)


class CrafterHarness(Harness):
    """Harness over Crafter (``crafter/Reward``, ``crafter/NoReward``); see the module docstring."""

    family = "crafter"

    @staticmethod
    def task_names() -> list[str]:
        return list(TASKS)

    def __init__(self, name: str, *, text: bool = False, max_episode_steps: int | None = None) -> None:
        super().__init__(text=text)
        task_id = f"crafter/{name}"
        if name not in TASKS:
            raise ValueError(f"{task_id}: unknown Crafter task; known: {', '.join(TASKS)}")
        crafter = require("crafter", "crafter", "the Crafter tasks", quiet=True)
        from crafter import constants

        steps = 10_000 if max_episode_steps is None else int(max_episode_steps)
        self._env = crafter.Env(reward=name == "Reward", length=steps, seed=0)
        _order_chunks(self._env._world)  # noqa: SLF001 - see docs/families/crafter.md, "Seeding"
        self._actions = list(constants.actions)
        self._achievements = list(constants.achievements)
        self._item_max = {k: v["max"] for k, v in constants.items.items()}
        reward = "Reward" == name
        goal = ("Survive and unlock as many of Crafter's 22 achievements as possible (collect wood, place a "
                "table, make pickaxes and swords, collect stone, coal, iron and diamond, eat, drink, sleep, "
                "defeat zombies and skeletons, ...). ")
        goal += ("Reward: +1 the first time each achievement is unlocked in an episode, plus the change in "
                 "health / 10 on every step." if reward else
                 "Reward: always 0 (unsupervised); the achievements are reported in info.")
        info = TaskInfo(
            id=task_id,
            domain="crafter",
            description=f"{goal} The episode ends when health reaches 0 or after {steps} steps. "
                        f"Achievements: {', '.join(self._achievements)}.",
            observation_space=spaces.Box(0, 255, (64, 64, 3), np.uint8),
            action_space=spaces.Discrete(len(self._actions)),
            observation_components=(Component(
                "image", "64 x 64 RGB, top-down: the 9 x 7 squares around the player (at the centre) above a "
                         "9 x 2 strip showing health, food, drink, energy and the items carried"),),
            action_components=tuple(Component(a, _ACTION_TEXT[a]) for a in self._actions),
            reward_range=(-1.0, 1.1) if reward else (0.0, 0.0),
            max_episode_steps=steps,
            package="crafter",
            package_version=version_of("crafter"),
            has_text=True,
            text_note="the player's status, inventory and facing square, the 9 x 7 view as a grid of "
                      "symbols with a legend, and the nearest material or creature of each kind with its "
                      "offset (read from the game state, not from the image)",
            native_id="CrafterReward-v1" if reward else "CrafterNoReward-v1",
        )
        self._finish_setup(info)

    # ----------------------------------------------------------------- hooks
    def _native_reset(self, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        env = self._env
        env._seed = seed  # noqa: SLF001 - crafter.Env.reset() takes no seed; it seeds from (_seed, _episode)
        env._episode = 0  # noqa: SLF001 - idem: reset() adds 1, so every episode seed gives one world
        obs = env.reset()
        return obs, {"achievements": dict.fromkeys(self._achievements, 0),
                     "inventory": dict(env._player.inventory)}  # noqa: SLF001 - the player is not public

    def _native_step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, done, native = self._env.step(action)
        info: dict[str, Any] = {"achievements": native["achievements"], "inventory": native["inventory"]}
        dead = native["discount"] == 0.0
        if done:
            unlocked = sorted(k for k, v in native["achievements"].items() if v > 0)
            info["achievements_unlocked"] = unlocked
            info["episode_record"] = {"achievements": unlocked}  # kept in the results file's episode record
        return obs, reward, bool(done and dead), bool(done and not dead), info

    def _native_close(self) -> None:
        self._env = None

    def _render_text(self, observation: Any) -> str:
        return render_text(self._env, self._item_max)


class _OrderedSet:
    """The part of ``set`` that crafter's ``World`` uses for its chunks (add, remove, iteration, len,
    membership), iterating in insertion order instead of by memory address."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[Any, None] = {}

    def add(self, item: Any) -> None:
        self._items[item] = None

    def remove(self, item: Any) -> None:
        del self._items[item]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: Any) -> bool:
        return item in self._items


def _order_chunks(world: Any) -> None:
    """Make every later ``world.reset`` build its chunk table from `_OrderedSet`s."""
    native_reset = world.reset

    def reset(seed: int | None = None) -> None:
        native_reset(seed=seed)
        world._chunks = collections.defaultdict(_OrderedSet)  # noqa: SLF001

    world.reset = reset


def render_text(env: Any, item_max: dict[str, int] | None = None) -> str:
    """Crafter's state around the player in words (see the module docstring)."""
    player = env._player  # noqa: SLF001 - crafter keeps the player and world private
    world = env._world  # noqa: SLF001 - idem
    width, height = 9, 7
    px, py = int(player.pos[0]), int(player.pos[1])
    rows: list[str] = []
    nearest: dict[str, tuple[int, int, int]] = {}
    for dy in range(-(height // 2), height // 2 + 1):
        row = []
        for dx in range(-(width // 2), width // 2 + 1):
            x, y = px + dx, py + dy
            if not (0 <= x < world.area[0] and 0 <= y < world.area[1]):
                row.append(" ")
                continue
            material, obj = world[(x, y)]
            kind = type(obj).__name__ if obj is not None else material
            row.append(_SYMBOLS.get(kind, "?"))
            if (dx, dy) != (0, 0) and kind not in ("grass", None):
                distance = abs(dx) + abs(dy)
                if kind not in nearest or distance < nearest[kind][0]:
                    nearest[kind] = (distance, dx, dy)
        rows.append("".join(row))
    inv = player.inventory
    vitals = ("health", "food", "drink", "energy")
    maxima = item_max or {}
    status = ", ".join(f"{k} {inv[k]}/{maxima.get(k, 9)}" for k in vitals)
    items = ", ".join(f"{k} {v}" for k, v in inv.items() if k not in vitals and v > 0) or "nothing"
    fx, fy = int(player.facing[0]), int(player.facing[1])
    material, obj = world[(px + fx, py + fy)]
    facing = type(obj).__name__.lower() if obj is not None else (material or "the edge of the world")
    lines = [f"Status: {status}{' (sleeping)' if player.sleeping else ''}; daylight "
             f"{float(world.daylight):.2f}.",
             f"Inventory: {items}.",
             f"You face {_FACING.get((fx, fy), 'south')}: {facing}.",
             "Your view (north is up; @ is you):", *rows]
    legend = sorted({c for r in rows for c in r} - {" ", "@"})
    names = {v: k.lower() for k, v in _SYMBOLS.items() if k is not None}
    lines.append("Legend: " + ", ".join(f"{c} {names[c]}" for c in legend) + ".")
    if nearest:
        def where(dx: int, dy: int) -> str:
            parts = []
            if dy:
                parts.append(f"{abs(dy)} {'north' if dy < 0 else 'south'}")
            if dx:
                parts.append(f"{abs(dx)} {'west' if dx < 0 else 'east'}")
            return " and ".join(parts)
        seen = sorted(nearest.items(), key=lambda kv: (kv[1][0], str(kv[0])))
        lines.append("Nearest: " + "; ".join(f"{str(k).lower()} {where(dx, dy)}" for k, (_, dx, dy) in seen) + ".")
    return "\n".join(lines)
