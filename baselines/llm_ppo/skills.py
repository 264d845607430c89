"""The skills of the LLM+PPO agent, per domain: the menu the planner chooses from, and the executor
that carries a chosen skill out until it ends.

The executor is goal-conditioned PPO, trained with ``baselines/ppo``'s code:

* BabyAI: the PPO networks read the mission as text, so the skill *is* the goal given to them: "go to
  the red ball" runs the GoToLocal policy with that mission. "pick up X" and "open the X door" navigate
  the same way to X, then use the interaction action once X is in front. "follow the mission" plays
  the level's own PPO policy with the level's own mission, so the planner can always fall back to
  plain PPO.
* NetHack: one PPO policy per skill, each trained on the NLE task whose reward is that skill's goal
  (explore: Scout, descend: Staircase, fight: Score, eat: Eat, pick up: Gold); the goal selects the
  policy. "follow the task" plays the task's own policy.

A skill ends when its goal is reached (seen in the observation), when it has run ``max_steps``, or,
for one-shot skills, after its action. Classic control, DMC and Procgen declare no skills: there the
agent plays plain PPO (see ``agent.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# BabyAI's observation codes (minigrid OBJECT_TO_IDX, COLOR_TO_IDX, door states).
OBJECTS = ("unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal", "lava", "agent")
COLORS = ("red", "green", "blue", "purple", "yellow", "grey")
PICKABLE = {"key", "ball", "box"}
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = 0, 1, 2, 3, 4, 5, 6
FRONT = (3, 5)      # the cell in front of the agent in the 7 x 7 egocentric view (column, row)
CARRIED = (3, 6)    # the agent's own cell shows what it carries


@dataclass(frozen=True)
class Target:
    color: str | None
    kind: str

    def words(self) -> str:
        return f"{self.color} {self.kind}" if self.color else self.kind

    def matches(self, obj: int, color: int) -> bool:
        return (OBJECTS[obj] == self.kind if obj < len(OBJECTS) else False) and (
            self.color is None or (color < len(COLORS) and COLORS[color] == self.color))


_MENTION = re.compile(r"\b(?:the|a|an)\s+(?:(red|green|blue|purple|yellow|grey)\s+)?(key|ball|box|door)\b")


def mission_targets(mission: str) -> list[Target]:
    """The objects a BabyAI mission names, in order ("put the red ball next to a door" -> red ball, door)."""
    seen: list[Target] = []
    for color, kind in _MENTION.findall(mission.lower()):
        t = Target(color or None, kind)
        if t not in seen:
            seen.append(t)
    return seen


def visible_targets(image: np.ndarray) -> list[Target]:
    """The objects in view, nearest first (ties broken left to right), the agent's own cell excluded."""
    img = np.asarray(image)
    found = []
    for i in range(7):
        for j in range(7):
            obj, color = int(img[i, j, 0]), int(img[i, j, 1])
            if (i, j) == CARRIED or not 4 <= obj <= 7:
                continue
            found.append((abs(6 - j) + abs(i - 3), i, Target(COLORS[color] if color < 6 else None, OBJECTS[obj])))
    targets: list[Target] = []
    for _, _, t in sorted(found, key=lambda f: (f[0], f[1])):
        if t not in targets:
            targets.append(t)
    return targets


def carrying(image: np.ndarray) -> Target | None:
    obj, color = int(image[CARRIED][0]), int(image[CARRIED][1])
    return Target(COLORS[color] if color < 6 else None, OBJECTS[obj]) if 5 <= obj <= 7 else None


def in_front(image: np.ndarray, target: Target) -> bool:
    cell = image[FRONT]
    return target.matches(int(cell[0]), int(cell[1]))


FOLLOW_MISSION = "follow the mission"


def babyai_menu(observation: dict, max_options: int = 8) -> list[str]:
    """The skills that make sense now: follow the mission; go to / pick up / open each object the
    mission names or the agent sees (mission objects first); drop what is carried."""
    image = np.asarray(observation["image"])
    targets = mission_targets(str(observation.get("mission", "")))
    targets += [t for t in visible_targets(image) if t not in targets]
    menu = [FOLLOW_MISSION]
    held = carrying(image)
    if held is not None:
        menu.append("drop the object you carry")
    front = image[FRONT]
    for t in targets:
        here = t.matches(int(front[0]), int(front[1]))
        if not here:             # "go to" a thing already in front would end at once, every step
            menu.append(f"go to the {t.words()}")
        if t.kind == "door":
            if not (here and int(front[2]) == 0):    # nor "open" the open door in front
                menu.append(f"open the {t.words()}")
        elif held is None:
            menu.append(f"pick up the {t.words()}")
    return menu[:max_options]


_SKILL = re.compile(r"^(go to|pick up|open) the (?:(red|green|blue|purple|yellow|grey) )?(key|ball|box|door)$")


class BabyAISkill:
    """One running BabyAI skill. ``policies(name)`` gives a PPO policy (``act(observation) ->
    (action, entropy)``) by level name: "GoToLocal" navigates, the task's own level follows the mission."""

    def __init__(self, text: str, policies: Callable[[str], Any], own_level: str, max_steps: int):
        self.text, self.steps, self.max_steps = text, 0, max_steps
        self.done_reason: str | None = None
        if text == FOLLOW_MISSION:
            self.kind, self.target, self.policy = "follow", None, policies(own_level)
        elif text == "drop the object you carry":
            self.kind, self.target, self.policy = "drop", None, None
        else:
            m = _SKILL.match(text)
            if m is None:
                raise ValueError(f"not a BabyAI skill: {text!r}")
            verb, color, kind = m.groups()
            self.kind = {"go to": "goto", "pick up": "pickup", "open": "open"}[verb]
            self.target = Target(color, kind)
            self.policy = policies("GoToLocal")

    def act(self, observation: dict) -> tuple[int, float | None]:
        """The next action and the executor's policy entropy (None for a scripted action)."""
        image = np.asarray(observation["image"])
        self.steps += 1
        if self.kind == "follow":
            return self.policy(observation)
        if self.kind == "drop":
            if int(image[FRONT][0]) in (1, 3):      # empty floor in front: drop here
                self.done_reason = "dropped"
                return DROP, None
            return LEFT, None                       # else turn until a free cell is in front
        assert self.target is not None
        if in_front(image, self.target):
            if self.kind == "goto":
                return DONE, None                   # already there: "done" changes nothing
            if self.kind == "pickup":
                return PICKUP, None
            if self.kind == "open":
                return TOGGLE, None
        goal = dict(observation, mission=f"go to the {self.target.words()}")
        return self.policy(goal)

    def ended(self, observation: dict) -> str | None:
        """Why the skill is over after this observation, or None while it runs."""
        image = np.asarray(observation["image"])
        if self.done_reason is not None:
            return self.done_reason
        if self.kind == "goto" and self.target is not None and in_front(image, self.target):
            return "reached"
        if self.kind == "pickup" and self.target is not None:
            held = carrying(image)
            if held is not None and held.kind == self.target.kind and (
                    self.target.color is None or held.color == self.target.color):
                return "picked up"
        if self.kind == "open" and self.target is not None and in_front(image, self.target) \
                and int(image[FRONT][2]) == 0:
            return "opened"
        if self.kind == "drop" and carrying(image) is None:
            return "dropped"
        if self.steps >= self.max_steps:
            return "step limit"
        return None


# ---------------------------------------------------------------------------------------------
# NetHack
# ---------------------------------------------------------------------------------------------

# blstats indices (NLE nethack/botl): depth, gold, hunger state
BL_HP, BL_HPMAX, BL_DEPTH, BL_GOLD, BL_TIME, BL_HUNGER = 10, 11, 12, 13, 20, 21
HUNGER = ("satiated", "not hungry", "hungry", "weak", "fainting", "fainted", "starved")  # u.uhs
FOLLOW_TASK = "follow the task"
NETHACK_SKILLS = {             # skill -> the v1 task whose PPO policy carries it out
    "explore": "Scout",
    "descend": "Staircase",
    "fight": "Score",
    "eat": "Eat",
    "pick up": "Gold",
}


def nethack_menu(observation: dict) -> list[str]:
    return [FOLLOW_TASK, *NETHACK_SKILLS]


class NetHackSkill:
    def __init__(self, text: str, policies: Callable[[str], Any], own_task: str, max_steps: int,
                 observation: dict):
        if text != FOLLOW_TASK and text not in NETHACK_SKILLS:
            raise ValueError(f"not a NetHack skill: {text!r}")
        self.text, self.steps, self.max_steps = text, 0, max_steps
        self.policy = policies(own_task if text == FOLLOW_TASK else NETHACK_SKILLS[text])
        bl = np.asarray(observation["blstats"])
        self.start = {"depth": int(bl[BL_DEPTH]), "gold": int(bl[BL_GOLD]), "hunger": int(bl[BL_HUNGER])}

    def act(self, observation: dict) -> tuple[int, float | None]:
        self.steps += 1
        return self.policy(observation)

    def ended(self, observation: dict) -> str | None:
        bl = np.asarray(observation["blstats"])
        if self.text == "descend" and int(bl[BL_DEPTH]) > self.start["depth"]:
            return "descended"
        if self.text == "pick up" and int(bl[BL_GOLD]) > self.start["gold"]:
            return "picked up gold"
        if self.text == "eat" and int(bl[BL_HUNGER]) < self.start["hunger"]:
            return "ate"
        if self.steps >= self.max_steps:
            return "step limit"
        return None


def nethack_summary(observation: dict, rows: int = 7, cols: int = 25) -> str:
    """A short text of the NetHack state for the planner: status numbers, the message and the map
    around the agent (``rows`` x ``cols`` characters of the terminal centred on '@')."""
    bl = np.asarray(observation["blstats"])
    msg = bytes(np.asarray(observation["message"], dtype=np.uint8)).split(b"\0", 1)[0].decode("latin-1").strip()
    tty = np.asarray(observation["tty_chars"], dtype=np.uint8)
    x, y = int(bl[0]), int(bl[1]) + 1                  # map row y is terminal row y + 1
    top, left = max(0, y - rows // 2), max(0, x - cols // 2)
    crop = [bytes(r[left:left + cols]).decode("latin-1").rstrip() for r in tty[top:top + rows]]
    hunger = HUNGER[int(bl[BL_HUNGER])] if 0 <= int(bl[BL_HUNGER]) < len(HUNGER) else str(int(bl[BL_HUNGER]))
    lines = [f"HP {int(bl[BL_HP])}/{int(bl[BL_HPMAX])}, dungeon level {int(bl[BL_DEPTH])}, "
             f"gold {int(bl[BL_GOLD])}, {hunger}, turn {int(bl[BL_TIME])}.",
             f"Message: {msg or '(none)'}", "Map around you (@ is you, > is stairs down):", *crop]
    return "\n".join(lines)
