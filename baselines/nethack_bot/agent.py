"""A scripted NetHack agent (no learning) for nethack/Score, Gold, Eat and Scout.

    python -m polar_bench evaluate baselines/nethack_bot/agent.py --suite v1 --tasks 'nethack/*'

It reads the map from the ``glyphs`` observation and keeps, per dungeon level, which squares it has
stood on and searched. Every step it: answers a pending prompt; attacks an adjacent hostile monster
(never a pet, a floating eye or a gas spore, nor a monster the game called peaceful); eats when
hungry (and, on Eat, fresh safe corpses and food found on the floor, with an estimate of its
nutrition that keeps it from choking); otherwise walks (breadth-first search) to the nearest gold
(Gold, Score), floor food (Eat), unexplored frontier, or, when the level is done or its step budget
spent, the downstairs (Score descends as soon as it knows them: every new level is worth 50
points); with nothing left, it searches for hidden passages at dead ends and room edges. Its only
randomness is a ``random.Random(seed)`` that breaks loops, so it is deterministic given the seed.
"""

from __future__ import annotations

import random
import re
from collections import deque
from typing import Any, cast

import numpy as np

AGENT_INFO: dict[str, Any] = {
    "name": "nethack-bot (scripted)",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench/tree/main/baselines/nethack_bot",
    "training_steps": {},  # hand-written rules, no training
    "llm": None,
    "license": "MIT",
    "deterministic": True,
    "description": "Hand-coded NetHack explorer: BFS to frontier, gold, food and stairs; fights, eats, searches.",
}

# Glyph layout of NetHack 3.6 (nle.nethack.GLYPH_*_OFF).
PET_OFF, INVIS_OFF, BODY_OFF, RIDDEN_OFF, OBJ_OFF, CMAP_OFF, STATUE_OFF = 381, 762, 1144, 1525, 1906, 2359, 5595
EXPLODE_OFF = 2446
STONE = CMAP_OFF  # S_stone: never seen
# cmap indices (glyph - CMAP_OFF)
WALKABLE_CMAP = {12, 13, 14, 15, 16, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 33, 35, 36, 39, 40}
DOOR_CMAP = {13, 14, 15, 16}  # open and closed doors: no diagonal moves in or out
DOWN_CMAP = {24, 26}
BL_X, BL_Y, BL_HP, BL_HPMAX, BL_DEPTH, BL_TIME, BL_HUNGER, BL_DNUM, BL_DLEVEL = 0, 1, 10, 11, 12, 20, 21, 23, 24
ROWS, COLS = 21, 79

# (dy, dx) -> key, in the fixed order ties are broken in.
MOVES = {(-1, 0): "k", (0, 1): "l", (1, 0): "j", (0, -1): "h", (-1, 1): "u", (1, 1): "n", (1, -1): "b", (-1, -1): "y"}
KEY_TO_DELTA = {k: d for d, k in MOVES.items()}
ORANGE = "h"  # the monk's oranges; the other starting food letters (f, g, i) are not in the action set
AVOID_ATTACK = ("floating eye", "gas spore")
BAD_CORPSE = ("cockatrice", "chickatrice", "Medusa", "green slime", "were", "dog", "kitten", "housecat",
              "large cat", "lizard")
UNSAFE_FOOD = ("egg", "tin")  # an egg may be a cockatrice's; a tin takes many turns to open
FOOD_NUTRITION = {"food ration": 800, "cram ration": 600, "lembas wafer": 800, "tripe ration": 200,
                  "meatball": 5, "meat stick": 5, "huge chunk of meat": 2000, "apple": 50, "orange": 80,
                  "pear": 50, "melon": 100, "banana": 80, "carrot": 50, "fortune cookie": 40, "candy bar": 100,
                  "pancake": 200, "cream pie": 100, "lump of royal jelly": 200, "slime mold": 80,
                  "clove of garlic": 40, "sprig of wolfsbane": 40, "kelp frond": 30, "eucalyptus leaf": 30,
                  "C-ration": 300, "K-ration": 400}
CHOKE_MARGIN = 1900  # NetHack chokes at 2000 when a meal was started while satiated
# Steps spent on a level after which the bot heads for known downstairs, per task.
LEVEL_BUDGET = {"Score": 0, "Gold": 400, "Scout": 180, "Eat": 400}  # other tasks (Staircase, Oracle, ...): 0


def _monsters() -> list[tuple[str, int, int]]:
    """(name, corpse nutrition, flags1) of every monster, from NLE when it is installed."""
    try:
        from nle import nethack
    except ImportError:  # the map logic still works, without names
        return []
    out = []
    for i in range(PET_OFF):
        p = nethack.permonst(i)
        out.append((p.mname, int(p.cnutrit), int(p.mflags1) & 0xFFFFFFFF))
    return out


def passable(glyph: int, char: int = 0) -> bool:
    """Whether the bot may plan a path through a square showing ``glyph`` (``char`` its map symbol)."""
    if glyph < OBJ_OFF:  # monsters, pets, invisible ones, corpses
        return True
    if glyph < CMAP_OFF:
        return char not in (ord("`"), ord("0"))  # boulders
    if glyph < EXPLODE_OFF:
        return glyph - CMAP_OFF in WALKABLE_CMAP
    return glyph < STATUE_OFF  # effects over a square: assume it walkable; statues block


def bfs(walk: np.ndarray, start: tuple[int, int], doors: np.ndarray) -> tuple[np.ndarray, dict]:
    """Distances from ``start`` over the boolean grid ``walk`` (8-connected; no diagonal step into or
    out of a door square), and the parent of every reached square."""
    dist = np.full(walk.shape, -1, dtype=np.int32)
    dist[start] = 0
    parent: dict[tuple[int, int], tuple[int, int]] = {}
    queue = deque([start])
    while queue:
        y, x = queue.popleft()
        for dy, dx in MOVES:
            ny, nx = y + dy, x + dx
            if not (0 <= ny < walk.shape[0] and 0 <= nx < walk.shape[1]) or dist[ny, nx] >= 0 or not walk[ny, nx]:
                continue
            if dy and dx and (doors[y, x] or doors[ny, nx]):
                continue
            dist[ny, nx] = dist[y, x] + 1
            parent[(ny, nx)] = (y, x)
            queue.append((ny, nx))
    return dist, parent


def path_to(parent: dict, start: tuple[int, int], goal: tuple[int, int]) -> list[tuple[int, int]]:
    """The squares of the BFS path from ``start`` (excluded) to ``goal``."""
    path = [goal]
    while parent.get(path[-1], start) != start:
        path.append(parent[path[-1]])
    return path[::-1]


def first_step(parent: dict, start: tuple[int, int], goal: tuple[int, int]) -> tuple[int, int]:
    """The (dy, dx) of the first move on the BFS path from ``start`` to ``goal``."""
    node = path_to(parent, start, goal)[0]
    return node[0] - start[0], node[1] - start[1]


def straight_run(path: list[tuple[int, int]], start: tuple[int, int]) -> int:
    """How many moves the path makes in its first direction before turning."""
    dy, dx = path[0][0] - start[0], path[0][1] - start[1]
    n = 1
    while n < len(path) and (path[n][0] - path[n - 1][0], path[n][1] - path[n - 1][1]) == (dy, dx):
        n += 1
    return n


def nearest(dist: np.ndarray, mask: np.ndarray) -> tuple[int, int] | None:
    """The reachable square of ``mask`` closest by ``dist`` (ties: first in row-major order)."""
    d = np.where(mask & (dist > 0), dist, np.iinfo(np.int32).max)
    i = int(np.argmin(d))
    return None if d.flat[i] == np.iinfo(np.int32).max else divmod(i, d.shape[1])


def neighbour_count(mask: np.ndarray) -> np.ndarray:
    """For every square, how many of its 8 neighbours are in ``mask``."""
    p = np.pad(mask.astype(np.int16), 1)
    return cast(np.ndarray, sum(p[1 + dy:1 + dy + mask.shape[0], 1 + dx:1 + dx + mask.shape[1]] for dy, dx in MOVES))


class Level:
    """What the bot remembers of one dungeon level."""

    def __init__(self) -> None:
        self.visited = np.zeros((ROWS, COLS), dtype=bool)
        self.searched = np.zeros((ROWS, COLS), dtype=np.int16)
        self.blocked = np.zeros((ROWS, COLS), dtype=np.int32)  # blocked until this many steps on the level
        # Terrain (cmap index) last seen on each square: the bot, monsters and objects hide it.
        self.terrain = np.zeros((ROWS, COLS), dtype=np.int32)
        self.tried_food: set[tuple[int, int]] = set()
        self.corpses: dict[tuple[int, int, int], tuple[int, bool]] = {}  # (y, x, glyph) -> (turn seen, fresh)
        self.steps = 0
        self.previous: np.ndarray | None = None  # the map on the bot's previous step here


class NetHackBot:
    def __init__(self, task: Any, run: int) -> None:
        self.task_name = task.id.split("/", 1)[1]
        names = [c.name for c in task.action_components]
        self.key = {cast(re.Match, re.search(r"\(([^()]*)\)$", n)).group(1): i for i, n in enumerate(names)}
        self.monsters = _monsters()
        self.run = run
        self.reset(0)

    def reset(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.levels: dict[tuple[int, int], Level] = {}
        self.peaceful: set[int] = set()
        self.last_pos: tuple[int, int] | None = None
        self.last_move: tuple[int, int] | None = None
        self.stuck = 0
        self.kick: tuple[int, int] | None = None  # direction of a door being kicked
        self.kicks = 0
        self.steps = 0
        self.mode = ""  # what the last action was for (for debugging)
        self.hunger = 900  # estimate of NetHack's u.uhunger
        self.last_turn = 1
        self.orange_left = True
        self.want_orange = False  # the bot pressed e for an orange, not for floor food

    # ------------------------------------------------------------ helpers
    def _press(self, key: str) -> int:
        return self.key[key]

    def _monster(self, glyph: int) -> tuple[str, int, int]:
        index = glyph % PET_OFF if glyph < INVIS_OFF else (glyph - BODY_OFF if BODY_OFF <= glyph < RIDDEN_OFF else -1)
        return self.monsters[index] if 0 <= index < len(self.monsters) else ("", 0, 0)

    def _corpse_ok(self, glyph: int) -> bool:
        name, _, flags = self._monster(glyph)
        # 0x18000000: M1_ACID | M1_POIS; humans would be cannibalism for the human monk.
        return bool(name) and not flags & 0x18000000 and not any(b in name for b in BAD_CORPSE) \
            and "human" not in name

    def _can_eat(self, nutrition: int, satiated: bool) -> bool:
        # A meal started while not satiated cannot choke; one started satiated must stay under 2000.
        return not satiated or self.hunger + nutrition < CHOKE_MARGIN

    # ------------------------------------------------------------ prompts
    def _answer(self, msg: str, obs: dict, level: Level, pos: tuple[int, int]) -> int | None:
        satiated = int(obs["blstats"][BL_HUNGER]) == 0
        if "In what direction?" in msg:
            return self._press(MOVES[self.kick]) if self.kick else self._press("Enter")
        if "Really attack" in msg:
            if self.last_move:
                y, x = pos[0] + self.last_move[0], pos[1] + self.last_move[1]
                self.peaceful.add(int(obs["glyphs"][y, x]))
            return self._press("n")
        if "Continue eating?" in msg:
            return self._press("n")
        m = re.search(r"There (?:is|are) (?:an? |\d+ )?(.+?) here; eat (?:it|one)\?", msg)
        if m:
            return self._press("y" if self._want_floor_food(m.group(1), obs, level, pos, satiated) else "n")
        if "What do you want to eat?" in msg:
            letters = re.search(r"\[([^\]]*)\]", msg)
            self.orange_left = letters is not None and ORANGE in letters.group(1).split(" or ")[0]
            if self.orange_left and self.want_orange and self._can_eat(80, satiated):
                self.hunger += 80
                return self._press(ORANGE)
            return self._press("Enter")
        return None

    def _want_floor_food(self, what: str, obs: dict, level: Level, pos: tuple[int, int], satiated: bool) -> bool:
        level.tried_food.add(pos)
        if self.task_name != "Eat" and int(obs["blstats"][BL_HUNGER]) < 2:
            return False
        if "corpse" in what:
            # The bot stands on it, so the map shows the bot: use what it saw there before.
            fresh = [g for (y, x, g), (t, f) in level.corpses.items()
                     if (y, x) == pos and f and int(obs["blstats"][BL_TIME]) - t < 40 and self._corpse_ok(g)]
            if not fresh or any(b in what for b in BAD_CORPSE):
                return False
            nutrition = self._monster(fresh[0])[1]
        else:
            if any(u in what.split() or what.endswith(u + "s") for u in UNSAFE_FOOD):
                return False
            nutrition = next((v for k, v in FOOD_NUTRITION.items() if k in what), 400)
        if not self._can_eat(nutrition, satiated):
            return False
        self.hunger += nutrition
        return True

    # ------------------------------------------------------------ the policy
    def act(self, obs: dict, info: dict) -> int:
        self.steps += 1
        bl = obs["blstats"]
        pos = (int(bl[BL_Y]), int(bl[BL_X]))
        turn = int(bl[BL_TIME])
        self.hunger -= max(0, turn - self.last_turn)
        self.last_turn = turn
        hunger_state = int(bl[BL_HUNGER])
        if hunger_state == 0:
            self.hunger = max(self.hunger, 1001)
        elif hunger_state == 1:
            self.hunger = min(max(self.hunger, 150), 1000)
        key = (int(bl[BL_DNUM]), int(bl[BL_DLEVEL]))
        level = self.levels.setdefault(key, Level())
        level.steps += 1
        glyphs = obs["glyphs"].astype(np.int32)
        chars = obs["tty_chars"][1:22, :COLS]
        msg = bytes(obs["message"]).split(b"\0", 1)[0].decode("latin-1")
        top = bytes(obs["tty_chars"][0]).decode("latin-1").strip()
        for text in (msg, top):
            answer = self._answer(text, obs, level, pos)
            if answer is not None:
                return answer

        self._remember_corpses(glyphs, level, turn)
        shown = (glyphs >= CMAP_OFF) & (glyphs < EXPLODE_OFF)
        level.terrain[shown] = glyphs[shown] - CMAP_OFF
        level.visited[pos] = True
        if self.last_pos == pos and self.last_move is not None and self.mode != "fight":
            self.stuck += 1
        else:
            self.stuck = 0
        if "This door is locked" in msg and self.last_move:
            self.kick, self.kicks = self.last_move, 0
        if "Welcome to" in msg and "'s" in msg:  # a shop's door: leave it alone
            level.blocked[pos] = 10**6
        self.last_pos = pos

        # Kick a locked door open (a few tries), then give up on it.
        if self.kick:
            door = (pos[0] + self.kick[0], pos[1] + self.kick[1])
            if self.kicks < 6 and 0 <= door[0] < ROWS and 0 <= door[1] < COLS \
                    and glyphs[door] - CMAP_OFF in (15, 16):
                self.kicks += 1
                self.last_move, self.mode = None, "kick"
                return self._press("^d")
            if self.kicks >= 6:
                level.blocked[door] = 10**6
            self.kick = None

        # Eat from the inventory when hungry (or, on Eat, while there is room for the oranges).
        if self.orange_left and self._eat_oranges_now(hunger_state):
            self.last_move, self.want_orange, self.mode = None, True, "eat"
            return self._press("e")

        hp, hpmax = int(bl[BL_HP]), max(1, int(bl[BL_HPMAX]))
        hostile = self._adjacent_hostile(glyphs, level.terrain, pos)
        if hostile is not None:
            self.mode = "fight"
            return self._move(hostile)

        walk = np.zeros((ROWS, COLS), dtype=bool)
        for y in range(ROWS):
            for x in range(COLS):
                walk[y, x] = passable(int(glyphs[y, x]), int(chars[y, x]))
        walk &= level.blocked <= level.steps
        for g in self.peaceful | self._avoid_glyphs():
            walk &= glyphs != g
        if self.stuck >= 3 and self.last_move is not None:
            ty, tx = pos[0] + self.last_move[0], pos[1] + self.last_move[1]
            if 0 <= ty < ROWS and 0 <= tx < COLS:
                level.blocked[ty, tx] = level.steps + 40  # a pet, a boulder, ...: try again later
                walk[ty, tx] = False
            self.stuck = 0
        walk[pos] = True
        doors = np.isin(level.terrain, list(DOOR_CMAP))
        dist, parent = bfs(walk, pos, doors)

        # Food on the floor (Eat): stand on it and eat.
        if self.task_name == "Eat":
            food = self._food_mask(glyphs, chars, level, turn)
            if food[pos] and pos not in level.tried_food and self._can_eat(200, hunger_state == 0):
                self.last_move, self.want_orange, self.mode = None, False, "eat"
                return self._press("e")
            target = nearest(dist, food & (dist <= 25))
            if target:
                self.mode = "food"
                return self._go(parent, pos, target, walk)

        gold = (chars == ord("$")) & (glyphs >= OBJ_OFF) & (glyphs < CMAP_OFF)
        if self.task_name in ("Gold", "Score", "Scout"):
            reach = 40 if self.task_name == "Gold" else 8
            target = nearest(dist, gold & (dist <= reach))
            if target:
                self.mode = "gold"
                return self._go(parent, pos, target, walk)

        stone = glyphs == STONE
        frontier = walk & ~level.visited & (neighbour_count(stone) > 0)
        stairs = np.isin(level.terrain, list(DOWN_CMAP))
        healthy = hp * 2 >= hpmax
        descend = healthy and (self.task_name != "Eat" or self.steps < 900)
        frontier_target = nearest(dist, frontier)
        level_done = frontier_target is None or level.steps > LEVEL_BUDGET.get(self.task_name, 0)
        if descend and level_done and stairs.any():
            if stairs[pos]:
                self.last_move, self.mode = None, "descend"
                return self._press(">")
            target = nearest(dist, stairs)
            if target:
                self.mode = "stairs"
                return self._go(parent, pos, target, walk)
        if frontier_target:
            self.mode = "frontier"
            return self._go(parent, pos, frontier_target, walk)
        if hp * 3 < hpmax:  # rest
            self.last_move, self.mode = None, "rest"
            return self._press("s")
        return self._search(glyphs, walk, dist, parent, level, pos)

    def _eat_oranges_now(self, hunger_state: int) -> bool:
        # Any task: when hungry. Eat: whenever not satiated (a meal started then cannot choke), and in
        # the last steps while the estimate leaves room.
        if hunger_state >= 2:
            return True
        return self.task_name == "Eat" and (self.steps >= 980 or (hunger_state == 1 and self.hunger < 900))

    def _search(self, glyphs, walk, dist, parent, level: Level, pos) -> int:
        """Search for hidden doors and passages at the nearest promising spot not yet searched enough."""
        solid = (glyphs == STONE) | np.isin(glyphs - CMAP_OFF, list(range(1, 12)))
        score = neighbour_count(solid)
        for need in (7, 5, 3):  # dead-end corridors first, then room corners, then along walls
            spots = walk & (score >= need) & (level.searched < 12)
            if spots[pos]:
                y, x = pos
                level.searched[max(0, y - 1):y + 2, max(0, x - 1):x + 2] += 1
                self.last_move = None
                self.mode = "search"
                return self._press("s")
            target = nearest(dist, spots)
            if target:
                self.mode = "to-search"
                return self._go(parent, pos, target, walk)
        # Everything searched: start another round, and wander a step.
        level.searched[:] = 0
        level.blocked[level.blocked < 10**6] = 0
        dirs = [d for d in MOVES if walk[min(ROWS - 1, max(0, pos[0] + d[0])), min(COLS - 1, max(0, pos[1] + d[1]))]]
        self.mode = "wander"
        return self._move(self.rng.choice(dirs)) if dirs else self._press("s")

    def _go(self, parent: dict, pos: tuple[int, int], target: tuple[int, int], walk: np.ndarray) -> int:
        """Step along the path to ``target``; where the path runs straight for 3 or more squares up to
        something it cannot enter, one "move far" action covers it (NetHack stops it early at anything
        interesting, never past the end), saving steps."""
        path = path_to(parent, pos, target)
        dy, dx = path[0][0] - pos[0], path[0][1] - pos[1]
        n = straight_run(path, pos)
        y, x = pos[0] + (n + 1) * dy, pos[1] + (n + 1) * dx
        wall_after = not (0 <= y < ROWS and 0 <= x < COLS) or not walk[y, x]
        far = MOVES[(dy, dx)].upper()
        if n >= 3 and wall_after and far in self.key and self.task_name != "Eat":
            self.last_move = (dy, dx)
            return self._press(far)
        return self._move((dy, dx))

    def _move(self, delta: tuple[int, int]) -> int:
        self.last_move = delta
        return self._press(MOVES[delta])

    def _avoid_glyphs(self) -> set[int]:
        return {i + off for i, (name, _, _) in enumerate(self.monsters) if name in AVOID_ATTACK
                for off in (0, PET_OFF)}

    def _adjacent_hostile(self, glyphs: np.ndarray, terrain: np.ndarray,
                          pos: tuple[int, int]) -> tuple[int, int] | None:
        avoid = self._avoid_glyphs()
        for dy, dx in MOVES:
            y, x = pos[0] + dy, pos[1] + dx
            if not (0 <= y < ROWS and 0 <= x < COLS):
                continue
            g = int(glyphs[y, x])
            if g < PET_OFF and g not in self.peaceful and g not in avoid:
                if dy and dx and (terrain[pos] in DOOR_CMAP or terrain[y, x] in DOOR_CMAP):
                    continue
                return dy, dx
        return None

    def _food_mask(self, glyphs: np.ndarray, chars: np.ndarray, level: Level, turn: int) -> np.ndarray:
        mask = (chars == ord("%")) & (glyphs >= OBJ_OFF) & (glyphs < CMAP_OFF)  # food objects
        for (y, x, g), (seen, fresh) in level.corpses.items():
            fresh = fresh and turn - seen < 40
            # Where the bot stands the map shows the bot, not the corpse: trust the record there.
            if fresh and (glyphs[y, x] == g or glyphs[y, x] < PET_OFF) and self._corpse_ok(g):
                mask[y, x] = True
        for p in level.tried_food:
            mask[p] = False
        return mask

    def _remember_corpses(self, glyphs: np.ndarray, level: Level, turn: int) -> None:
        """Note the corpses on the map; one is fresh (safe to eat for a while) where the monster it
        came from stood on the previous step: a kill, not a corpse found lying about."""
        ys, xs = np.nonzero((glyphs >= BODY_OFF) & (glyphs < RIDDEN_OFF))
        for y, x in zip(ys.tolist(), xs.tolist(), strict=True):
            k = (y, x, int(glyphs[y, x]))
            if k not in level.corpses:
                fresh = level.previous is not None and int(level.previous[y, x]) == k[2] - BODY_OFF
                level.corpses[k] = (turn, fresh)
                level.tried_food.discard((y, x))
        level.previous = glyphs

    def episode_info(self) -> dict:
        return {"nethack_bot": {"levels_visited": len(self.levels), "steps": self.steps}}


def make_agent(task: Any, run: int) -> NetHackBot:
    return NetHackBot(task, run)
