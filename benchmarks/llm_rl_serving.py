"""How fast each way of serving baselines/llm_rl's model answers the agent's prompts, side by side.

    python benchmarks/llm_rl_serving.py [--prompts 20] [--threads 1] [--weights CHECKPOINT]

The prompts are the agent's own (`baselines.llm_rl.agent.prompt`): the text views of BabyAI
GoToRedBall episodes on training seeds 1-8 under random actions, with the menu, chat template applied
(about 130 tokens each). Each backend reads every prompt once (the forward pass that picks an answer's
first token: what a decision costs), in one process, one after the other, after one warm-up call:

    transformers float32   what training differentiates and `baselines.llm_rl.server` serves by default
    transformers bfloat16  `--dtype bfloat16` (AVX-512 BF16 instructions where the CPU has them)
    llama.cpp Q4_1         the shipped GGUF through llama-cpp-python (polar_bench's embedded model), the
                           route of exporting trained weights back to GGUF

Also prints how far bfloat16's answer distribution is from float32's (total variation over the six
answers, per prompt: mean and max), which is what `--dtype bfloat16` costs in fidelity. With
``--weights`` the transformers rows serve that checkpoint's trained layers (llama.cpp: the base GGUF
either way). Wall-clock times on whatever else the machine does: run it idle for figures to quote.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def agent_prompts(n: int) -> list[list[dict]]:
    import numpy as np

    import polar_bench
    from baselines.llm_rl.agent import MENU, prompt

    out: list[list[dict]] = []
    rng = np.random.default_rng(0)
    seed = 1
    while len(out) < n:
        env = polar_bench.make("babyai/GoToRedBall", text=True)
        _, info = env.reset(seed=seed)
        done = False
        while not done and len(out) < n:
            out.append(prompt(" ".join(str(info["text"]).split()), MENU))
            _, _, term, trunc, info = env.step(int(rng.integers(0, 6)))
            done = term or trunc
        env.close()
        seed = seed % 8 + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--weights", help="a checkpoint of baselines.llm_rl.train for the transformers rows")
    args = ap.parse_args()
    import torch

    from baselines.llm_rl.agent import MENU
    from baselines.llm_rl.model import prompt_ids
    from baselines.llm_rl.server import load_policies

    torch.set_num_threads(args.threads)
    messages = agent_prompts(args.prompts)
    weights = [args.weights] if args.weights else []
    policies = {dtype: load_policies("smollm2", weights, dtype=dtype)[0] for dtype in ("float32", "bfloat16")}
    tok = policies["float32"].tokenizer
    prompts = [prompt_ids(tok, m) for m in messages]
    print(f"{len(prompts)} prompts, {statistics.mean(map(len, prompts)):.0f} tokens on average, "
          f"{args.threads} thread(s)")

    rows: dict[str, list[float]] = {}
    for dtype, policy in policies.items():
        model = policy.model
        with torch.no_grad():
            model(input_ids=torch.tensor([prompts[0]]), logits_to_keep=1)
            times = []
            for ids in prompts:
                t0 = time.perf_counter()
                model(input_ids=torch.tensor([ids]), logits_to_keep=1)
                times.append(time.perf_counter() - t0)
        rows[f"transformers {dtype}"] = times

    import llama_cpp

    from polar_bench.llm.embedded import default_model_path

    llm = llama_cpp.Llama(model_path=str(default_model_path()), n_ctx=2048, n_threads=args.threads,
                          n_threads_batch=args.threads, n_batch=512, verbose=False)
    llm.reset()
    llm.eval(prompts[0])
    times = []
    for ids in prompts:
        t0 = time.perf_counter()
        llm.reset()   # an empty context before each call, as polar_bench's embedded server does
        llm.eval(ids)
        times.append(time.perf_counter() - t0)
    rows["llama.cpp Q4_1 (GGUF)"] = times

    base = statistics.median(rows["transformers float32"])
    print(f"{'backend':24s} {'median ms/call':>15s} {'mean ms/call':>13s} {'vs float32':>11s}")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"{name:24s} {1000 * med:15.1f} {1000 * statistics.mean(times):13.1f} {base / med:10.2f}x")

    from baselines.llm_rl.probe import choice_probabilities

    asked = [(ids, MENU) for ids in prompts]
    p32 = choice_probabilities(policies["float32"].model, tok, asked, None)
    p16 = choice_probabilities(policies["bfloat16"].model, tok, asked, None)   # as served: its own weights
    tv = [0.5 * sum(abs(a[c] - b[c]) for c in MENU) for a, b in zip(p32, p16, strict=True)]
    print(f"bfloat16 vs float32 answer distributions: total variation mean {statistics.mean(tv):.4f}, "
          f"max {max(tv):.4f} over {len(tv)} prompts")


if __name__ == "__main__":
    main()
