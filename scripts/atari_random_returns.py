"""Random-agent returns on the 26 Atari 100k games through the `atari/` harness, beside RANDOM.json.

The check that our protocol matches the published one: a uniformly random policy played through
``polar_bench.make("atari/<Game>")`` with the default (evaluation) options should score near the
random reference that the published human-normalized scores use (polar_bench/data/atari100k/RANDOM.json).

    python scripts/atari_random_returns.py --episodes 3 [--games Pong,Breakout] [--max-steps 27000]
        [--json out.json] [--nature-random]

Episode ``i`` of a game uses episode seed ``i`` and actions drawn uniformly by
``numpy.random.default_rng([i, 0])`` (as examples/random_agent.py does for run 0). Prints a markdown
table: mean and standard error of the return, mean episode length, the published random score, and
the difference in units of the standard error. ``--nature-random`` plays the random agent that the
published numbers come from instead (see `nature_random_returns`), to tell a protocol difference of
the harness from a difference of the random agent.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from importlib import resources

import numpy as np

import polar_bench
from polar_bench.harness.rollout import random_episode


def random_returns(game: str, episodes: int, max_steps: int | None) -> tuple[list[float], list[int]]:
    """Returns and lengths of ``episodes`` random episodes on seeds 0, 1, ..."""
    options = {} if max_steps is None else {"max_episode_steps": max_steps}
    harness = polar_bench.make(f"atari/{game}", **options)
    returns, lengths = [], []
    try:
        for seed in range(episodes):
            total, steps = random_episode(harness, seed, np.random.default_rng([seed, 0]))
            returns.append(total)
            lengths.append(steps)
    finally:
        harness.close()
    return returns, lengths


def nature_random_returns(game: str, episodes: int) -> tuple[list[float], list[int]]:
    """The random agent of the published random scores, played on the raw ALE: a uniformly random
    action of the minimal set every 6 frames (10 Hz), episodes capped at 18,000 frames (5 minutes),
    after 1-30 no-op frames (Mnih et al. 2015, Methods; the source of RANDOM.json's numbers). Lengths
    are in frames."""
    from polar_bench.harness.atari import AtariHarness, noop_count

    harness = AtariHarness(game, noop_max=30)
    ale = harness._ale  # noqa: SLF001 - the harness's configured emulator (no sticky actions), driven raw
    actions = ale.getMinimalActionSet()
    returns, lengths = [], []
    for seed in range(episodes):
        rng = np.random.default_rng([seed, 0])
        harness.reset(seed=seed)
        total, frames = 0.0, noop_count(seed, 30)
        while not ale.game_over() and frames < 18_000:
            action = actions[int(rng.integers(len(actions)))]
            for _ in range(6):
                total += ale.act(action)
                frames += 1
                if ale.game_over():
                    break
        returns.append(total)
        lengths.append(frames)
    harness.close()
    return returns, lengths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3, help="episodes per game (seeds 0, 1, ...)")
    parser.add_argument("--games", default="", help="comma-separated games (default: all 26)")
    parser.add_argument("--max-steps", type=int, default=None, help="episode cap in agent steps (default 27000)")
    parser.add_argument("--json", default="", help="also write the per-episode returns to this file")
    parser.add_argument("--nature-random", action="store_true",
                        help="play the published scores' random agent instead (10 Hz, 5-minute episodes, raw ALE)")
    args = parser.parse_args(argv)
    published = json.loads(resources.files("polar_bench").joinpath("data/atari100k/RANDOM.json").read_text())
    games = [g for g in args.games.split(",") if g] or polar_bench.harness.task_names("atari")
    unit = "frames" if args.nature_random else "steps"
    print(f"| game | random return (mean ± s.e.) | mean length ({unit}) | RANDOM.json | (ours - published) / s.e. |")
    print("|---|---|---|---|---|")
    out = {}
    for game in games:
        began = time.time()
        if args.nature_random:
            returns, lengths = nature_random_returns(game, args.episodes)
        else:
            returns, lengths = random_returns(game, args.episodes, args.max_steps)
        mean = float(np.mean(returns))
        se = float(np.std(returns, ddof=1) / math.sqrt(len(returns))) if len(returns) > 1 else float("nan")
        ref = float(published[game][0])
        z = (mean - ref) / se if se > 0 else math.copysign(math.inf, mean - ref) if mean != ref else 0.0
        print(f"| {game} | {mean:.1f} ± {se:.1f} | {np.mean(lengths):.0f} | {ref:g} | {z:+.1f} |", flush=True)
        print(f"{game}: {len(returns)} episodes in {time.time() - began:.0f} s", file=sys.stderr, flush=True)
        out[game] = {"returns": returns, "lengths": lengths, "published": ref}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
