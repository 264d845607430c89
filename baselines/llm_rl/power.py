"""How big a gain issue #42's comparison can see, and how much a view-blind policy gets (planning figures).

    python -m baselines.llm_rl.power gain --base 0.39,0.41,0.27,0,0.05 --trained 0.55,0.6,0.4,0,0.05 \\
        [--runs 5] [--episodes 20] [--draws 100]
    python -m baselines.llm_rl.power blind --shares 0.116,0.022,0.373,0.105,0.002,0.382 \\
        [--levels GoToRedBall,GoToLocal,PickupLoc] [--episodes 150]

``gain`` draws both sides' episodes from per-level success rates (one rate per level, in the order of
the domain; a success returns a value uniform in [0.3, 0.9], as BabyAI's 1 - 0.9 x steps / limit
mostly does, a failure 0), averages each run's episodes as ``compare`` does, and computes P(trained >
base) with its 95% stratified-bootstrap interval with polar_bench's own statistic
(``scoring.interval_estimates``), ``--draws`` times. It prints the mean P and how often the interval's
lower end is above 0.5 (the chance that the experiment shows the gain, if the rates are the truth).
The probability of improvement does not depend on a level's normalization (an increasing affine map
per level), so the raw returns stand in for normalized scores.

``blind`` plays BabyAI levels with a policy that ignores the view and draws each action from fixed
shares (``--shares``: Turn left, Turn right, Move forward, Pick up, Drop, Toggle; renormalized),
seeds 5000 onwards (none of suite v1's): the success rate and mean return such answer shares alone buy.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence

import numpy as np

from polar_bench import scoring

ACTIONS = ("Turn left", "Turn right", "Move forward", "Pick up", "Drop", "Toggle")   # BabyAI actions 0-5


def run_scores(rates: Sequence[float], runs: int, episodes: int, rng: np.random.Generator) -> np.ndarray:
    """``(runs, levels)``: each run's mean return over ``episodes`` episodes per level."""
    p = np.asarray(rates, dtype=float)
    success = rng.random((runs, len(p), episodes)) < p[None, :, None]
    returns = np.where(success, rng.uniform(0.3, 0.9, success.shape), 0.0)
    return returns.mean(axis=-1)


def detection(base: Sequence[float], trained: Sequence[float], *, runs: int = 5, episodes: int = 20,
              draws: int = 100, seed: int = 0, reps: int = 2000) -> tuple[float, float]:
    """(mean P(trained > base), share of draws whose interval's lower end is above 0.5)."""
    if len(base) != len(trained):
        raise ValueError(f"--base has {len(base)} levels and --trained {len(trained)}; give one rate per level to both")
    if not all(0.0 <= r <= 1.0 for r in (*base, *trained)):
        raise ValueError("success rates must lie in [0, 1]")
    if runs < 2 or episodes < 1 or draws < 1:
        raise ValueError("need runs >= 2, episodes >= 1 and draws >= 1")
    rng = np.random.default_rng(seed)
    points, shown = [], 0
    for i in range(draws):
        x, y = run_scores(trained, runs, episodes, rng), run_scores(base, runs, episodes, rng)
        r = scoring.interval_estimates({"d": (x, y)}, "probability_of_improvement", reps, seed + i)
        points.append(float(np.atleast_1d(r.points["d"])[0]))
        shown += float(np.asarray(r.intervals["d"]).reshape(-1)[0]) > 0.5
    return float(np.mean(points)), shown / draws


def blind(level: str, shares: Sequence[float], episodes: int, seed: int = 5000) -> tuple[float, float]:
    """(success rate, mean return) of the view-blind policy on ``BabyAI-<level>-v0``."""
    import gymnasium as gym
    import minigrid  # noqa: F401  (registers the BabyAI levels)

    p = np.asarray(shares, dtype=float)
    if p.shape != (len(ACTIONS),) or (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"--shares needs {len(ACTIONS)} non-negative numbers ({', '.join(ACTIONS)}), not all 0")
    p = p / p.sum()
    env = gym.make(f"BabyAI-{level}-v0")
    rng = np.random.default_rng(0)
    returns = []
    for i in range(episodes):
        with contextlib.redirect_stdout(io.StringIO()):   # minigrid prints its rejected placements
            env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            _, r, terminated, truncated, _ = env.step(int(rng.choice(len(p), p=p)))
            total += float(r)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean([r > 0 for r in returns])), float(np.mean(returns))


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated numbers, e.g. 0.39,0.41,0.27") from None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.power", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gain", help="the chance that compare shows a given gain")
    g.add_argument("--base", type=_floats, required=True, help="the base model's success rate per level")
    g.add_argument("--trained", type=_floats, required=True, help="the trained model's, same levels")
    g.add_argument("--runs", type=int, default=5)
    g.add_argument("--episodes", type=int, default=20, help="episodes per level and run (suite v1: 20)")
    g.add_argument("--draws", type=int, default=100)
    b = sub.add_parser("blind", help="a view-blind policy's success on BabyAI levels")
    b.add_argument("--shares", type=_floats, required=True, help="the six actions' shares")
    b.add_argument("--levels", default="GoToRedBall,GoToLocal,PickupLoc")
    b.add_argument("--episodes", type=int, default=150)
    args = ap.parse_args(argv)
    try:
        if args.command == "gain":
            mean, shown = detection(args.base, args.trained, runs=args.runs, episodes=args.episodes,
                                    draws=args.draws)
            print(f"{args.runs} runs x {args.episodes} episodes a side, {args.draws} draws: mean P(trained > base) "
                  f"{mean:.3f}; lower end of the 95% interval above 0.5 in {shown:.0%} of the draws")
        else:
            for level in args.levels.split(","):
                rate, ret = blind(level, args.shares, args.episodes)
                print(f"{level}: success {rate:.2f}, mean return {ret:.3f} ({args.episodes} episodes)")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
