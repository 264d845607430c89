"""What the policy's prompt cache saves when baselines/llm_rl's model plays BabyAI, side by side.

    python benchmarks/llm_rl_prompt_cache.py [--episodes 4] [--levels GoToRedBall GoToLocal] [--threads 1]
                                             [--dtype bfloat16] [--weights CHECKPOINT]

The base SmolLM2 (or a checkpoint's trained layers) plays the same episodes twice in this process, as
`agent.py` plays them behind `server.py`: the text view and the menu as the prompt, the answer sampled
along the menu's token trie with the agent's per-call seed, the answer's action stepped. Once with
`Policy(prompt_cache=32)` (what the server and the trainer use), once with the cache off. Prints, for
each: calls, prompt forward passes, wall seconds and ms per call, and the speed-up; then whether the two
passes gave the same answers with the same log-probabilities in every call (they must: the cache hands
back the forward pass's own numbers). Training seeds 1, 2, ... (not suite v1's). Wall-clock times on
whatever else the machine does: compare the two rows of one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def play(policy, levels: list[str], episodes: int) -> tuple[list, float]:
    """Every call's Sampled answer over ``episodes`` episodes of each level, and the wall seconds."""
    import polar_bench
    from baselines.llm_rl.agent import BABYAI_ACTIONS, MENU, call_seed, prompt
    from baselines.llm_rl.model import prompt_ids

    answers = []
    t0 = time.perf_counter()
    for level in levels:
        env = polar_bench.make(f"babyai/{level}", text=True)
        for seed in range(1, episodes + 1):
            _, info = env.reset(seed=seed)
            done, step = False, 0
            while not done:
                ids = prompt_ids(policy.tokenizer, prompt(" ".join(str(info["text"]).split()), MENU))
                out = policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4,
                                      seed=call_seed(seed, step, 0))
                answers.append(out)
                _, _, term, trunc, info = env.step(BABYAI_ACTIONS.index(out.text))
                done, step = term or trunc, step + 1
        env.close()
    return answers, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=4, help="episodes per level (training seeds 1..N)")
    ap.add_argument("--levels", nargs="+", default=["GoToRedBall", "GoToLocal"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    ap.add_argument("--weights", help="a checkpoint of baselines.llm_rl.train (default: the base model)")
    args = ap.parse_args()
    import torch

    from baselines.llm_rl.server import load_policies

    torch.set_num_threads(args.threads)
    (policy,) = load_policies("smollm2", [args.weights] if args.weights else [], dtype=args.dtype)
    rows = {}
    for label, size in (("prompt cache 32", 32), ("no cache", 0)):
        policy.prompt_cache, policy.forwards = size, 0
        policy.forget_prompts()   # each pass starts cold
        answers, seconds = play(policy, args.levels, args.episodes)
        rows[label] = (answers, policy.forwards, seconds)
    print(f"{args.episodes} episode(s) of {', '.join(args.levels)}, {args.dtype}, {args.threads} thread(s)")
    print(f"{'serving':16s} {'calls':>6s} {'forwards':>9s} {'seconds':>8s} {'ms/call':>8s} {'speed-up':>9s}")
    base = rows["no cache"][2]
    for label, (answers, forwards, seconds) in rows.items():
        print(f"{label:16s} {len(answers):6d} {forwards:9d} {seconds:8.1f} {1000 * seconds / len(answers):8.1f} "
              f"{base / seconds:8.2f}x")
    same = rows["prompt cache 32"][0] == rows["no cache"][0]
    print(f"same answers and log-probabilities in every call: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
