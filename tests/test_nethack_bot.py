"""The scripted NetHack agent (baselines/nethack_bot/agent.py): its map logic on a hand-made map, and
one short episode through the harness, deterministic given the seed."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import polar_bench

try:
    import nle  # noqa: F401
except ImportError:  # the map tests do not need nle
    nle = None

needs_nle = pytest.mark.skipif(nle is None, reason="nle is not installed")

_spec = importlib.util.spec_from_file_location(
    "nethack_bot_under_test", Path(__file__).resolve().parent.parent / "baselines" / "nethack_bot" / "agent.py")
bot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bot)

FLOOR, WALL, DOOR, STONE, CORRIDOR = (bot.CMAP_OFF + i for i in (19, 1, 13, 0, 21))


def glyph_map(rows: list[str]) -> np.ndarray:
    """``.`` floor, ``|`` wall, ``+`` open door, ``#`` corridor, `` `` unexplored stone."""
    code = {".": FLOOR, "|": WALL, "+": DOOR, " ": STONE, "#": CORRIDOR}
    return np.array([[code[c] for c in r] for r in rows], dtype=np.int32)


def test_bfs_paths_walls_and_no_diagonal_through_doors():
    g = glyph_map(["|....|  ",
                   "|....+##",
                   "|....|  "])
    walk = np.vectorize(bot.passable)(g)
    doors = g == DOOR
    dist, parent = bot.bfs(walk, (0, 1), doors)
    assert dist[1, 5] == 4  # along the room, then straight into the door (not diagonally)
    assert dist[1, 7] == 6 and dist[0, 0] == -1  # through the door into the corridor; walls unreached
    assert dist[0, 4] == 3
    assert bot.first_step(parent, (0, 1), (0, 4)) == (0, 1)
    # The door square is entered from the west only, so (0, 6) and (2, 6) (stone) stay unreachable.
    frontier = walk & (bot.neighbour_count(g == STONE) > 0)
    assert bot.nearest(dist, frontier) == (1, 5)


def test_passable_objects_monsters_and_boulders():
    assert bot.passable(5) and bot.passable(bot.PET_OFF + 3)  # monsters (attacked) and pets (swapped)
    assert bot.passable(bot.OBJ_OFF + 10, ord("%")) and not bot.passable(bot.OBJ_OFF + 10, ord("`"))
    assert not bot.passable(WALL) and not bot.passable(STONE) and bot.passable(FLOOR)
    assert not bot.passable(bot.STATUE_OFF + 1)


class _Component:
    def __init__(self, name):
        self.name = name


class _Task:
    id = "nethack/Scout"
    action_components = [_Component(n) for n in (
        "next message (Enter)", "move north (k)", "move east (l)", "move south (j)", "move west (h)",
        "move northeast (u)", "move southeast (n)", "move southwest (b)", "move northwest (y)",
        "go down the stairs (>)", "kick (^d)", "eat (e)", "search (s)")]


def test_policy_walks_to_the_frontier_on_a_hand_made_map():
    agent = bot.make_agent(_Task(), 0)
    agent.reset(0)
    glyphs = np.full((bot.ROWS, bot.COLS), STONE, dtype=np.int16)
    glyphs[5, 10:20] = WALL
    glyphs[6, 10:20] = [WALL] + [FLOOR] * 8 + [WALL]
    glyphs[7, 10:20] = WALL
    glyphs[6, 19] = FLOOR  # a doorway east: the only way on
    glyphs[6, 12] = 0  # the bot (a monster glyph)
    blstats = np.zeros(27, dtype=np.int64)
    blstats[[bot.BL_X, bot.BL_Y, bot.BL_HP, bot.BL_HPMAX, bot.BL_TIME, bot.BL_HUNGER, bot.BL_DLEVEL]] = \
        [12, 6, 14, 14, 1, 1, 1]
    obs = {"glyphs": glyphs, "blstats": blstats, "message": np.zeros(256, dtype=np.uint8),
           "tty_chars": np.full((24, 80), ord(" "), dtype=np.uint8)}
    assert agent.act(obs, {}) == 2  # east, towards the doorway
    obs["message"][:18] = np.frombuffer(b"In what direction?", dtype=np.uint8)
    assert agent.act(obs, {}) == 0  # a prompt it did not ask for: Enter


@needs_nle
def test_short_episode_is_deterministic_and_explores():
    def play(seed):
        harness = polar_bench.make("nethack/Scout", max_episode_steps=150)
        agent = bot.make_agent(harness.task_info, 0)
        try:
            obs, info = harness.reset(seed=seed)
            agent.reset(seed)
            actions, total = [], 0.0
            while True:
                actions.append(int(agent.act(obs, info)))
                obs, r, term, trunc, info = harness.step(actions[-1])
                total += r
                if term or trunc:
                    return actions, total, agent
        finally:
            harness.close()

    a1, r1, agent = play(3)
    a2, r2, _ = play(3)
    assert a1 == a2 and r1 == r2
    assert len(a1) == 150
    assert r1 > 100  # far more of the map seen than a random walk's 150 steps reveal
    assert sum(int(lv.visited.sum()) for lv in agent.levels.values()) > 40
