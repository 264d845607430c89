"""The reachable upper reference of suite v2's BabyAI tasks: minigrid's BabyAI bot on the evaluation seeds.

    python scripts/babyai_bot_references.py --suite v1 --out runs/babyai-bot.json

The bot (``minigrid.utils.baby_ai_bot.BabyAIBot``, the planner the BabyAI authors used to generate
demonstrations) reads the full level state, so it is a reference, not an agent: it shows what return
a near-shortest-path solver gets under the reward ``1 - 0.9 * steps / max_steps``. It plays every
evaluation seed of every ``babyai/`` task of the suite through ``polar_bench.make`` (the same levels
an agent sees); the mean return per task becomes the task's ``high`` in suite v2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
from pathlib import Path


def bot_episode(task_id: str, seed: int) -> tuple[float, int, bool]:
    """(return, length, reached the goal) of the bot on one seeded episode."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    import polar_bench

    env = polar_bench.make(task_id)
    try:
        env.reset(seed=seed)
        # The bot plans on the full level state, which the harness keeps from agents: reach into it.
        native = env.unwrapped._env  # noqa: SLF001
        with contextlib.redirect_stdout(io.StringIO()):
            bot = BabyAIBot(native)
        total, steps = 0.0, 0
        while True:
            with contextlib.redirect_stdout(io.StringIO()):
                action = int(bot.replan())
            _, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            steps += 1
            if terminated or truncated:
                return total, steps, total > 0
    finally:
        env.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="v1", help="suite whose babyai/ tasks and seeds to play (default v1)")
    p.add_argument("--out", help="write the per-task figures as JSON here")
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import polar_bench

    suite = polar_bench.load_suite(args.suite)
    out = {}
    for task in suite.tasks:
        if not task.id.startswith("babyai/"):
            continue
        episodes = [bot_episode(task.id, s) for s in task.seeds]
        returns = [r for r, _, _ in episodes]
        out[task.id] = {"mean_return": round(statistics.fmean(returns), 4), "episodes": len(returns),
                        "successes": sum(ok for _, _, ok in episodes), "min_return": round(min(returns), 4),
                        "mean_length": statistics.fmean(n for _, n, _ in episodes), "seeds": list(task.seeds)}
        print(f"{task.id:24s} bot mean return {out[task.id]['mean_return']:.4f}  "
              f"successes {out[task.id]['successes']}/{len(returns)}  mean length {out[task.id]['mean_length']:.1f}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
