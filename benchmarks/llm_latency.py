"""LLM latency: constrained decisions per second with the embedded model, cache hits against misses.

Every decision is one `LLMClient.complete` call choosing one of five skills (`Choices`, decoded under
its grammar) from a prompt of about 80 tokens that changes at every decision, as an LLM planner's
would. Rows:

    constrained          greedy, no cache: what an evaluation pays per decision
    constrained, seeded  temperature 1 with per-step seeds (`call_seed`), no cache
    unconstrained        free text, max_tokens 16, no cache (for scale)
    cache miss           the first pass over the prompts with an empty disk cache (generate + write)
    cache hit            the second pass over the same prompts (read only)

The model is loaded (and hashed) before timing. Times are wall-clock (``time.perf_counter``) on
whatever else the machine is doing; run it on an idle machine for figures to quote.

Usage: python benchmarks/llm_latency.py [--decisions 50] [--threads 1] [--model PATH] [--json out.json]

(The LLM+PPO agent's evaluation episodes per second against plain PPO come in a later part.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time

SKILLS = ["go to the red ball", "pick up the key", "open the door", "drop the object", "explore"]
THINGS = ["a red ball", "a yellow key", "a locked door", "a green box", "nothing", "a purple ball",
          "a grey wall", "an open door", "a blue key", "a closed box"]


def prompt(i: int) -> list[dict]:
    a, b, c = (THINGS[(k * i + k) % len(THINGS)] for k in (1, 3, 7))
    return [{"role": "system", "content": "You control a robot in a grid world. Choose its next skill."},
            {"role": "user", "content": f"Step {i}. In front of you: {a}. To your left: {b}. Behind you: {c}. "
                                        f"Skills: {', '.join(SKILLS)}. Which skill next?"}]


def timed(client, n: int, **kwargs) -> dict:
    from polar_bench.llm import Choices

    per = []
    constraint = kwargs.pop("constraint", Choices(SKILLS))
    seeded = kwargs.pop("seeded", False)
    client.reset(seed=0)
    t0 = time.perf_counter()
    for i in range(n):
        s = time.perf_counter()
        client.complete(prompt(i), constraint=constraint, seed=client.seed_for(i) if seeded else None, **kwargs)
        per.append(time.perf_counter() - s)
    total = time.perf_counter() - t0
    u = client.episode_info()["llm"]
    return {"decisions": n, "seconds": total, "decisions_per_s": n / total,
            "median_ms": 1000 * statistics.median(per), "prompt_tokens": u["prompt_tokens"] / n,
            "completion_tokens": u["completion_tokens"] / n, "cache_hits": u["cache_hits"],
            "fallbacks": u["fallbacks"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--decisions", type=int, default=50, help="decisions per row (default 50)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    ap.add_argument("--model", default=None, help="a GGUF file (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)

    from polar_bench._optional import version_of
    from polar_bench.llm import EmbeddedBackend, LLMClient, Recorder

    backend = EmbeddedBackend(args.model, n_threads=args.threads)
    t0 = time.perf_counter()
    backend._get()
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ident = backend.identity
    hash_s = time.perf_counter() - t0
    plain = LLMClient(backend, recorder=Recorder(trace=False))
    timed(plain, 3)  # warm-up
    n = args.decisions
    rows = {}
    rows["constrained"] = timed(plain, n, temperature=0.0)
    rows["constrained, seeded"] = timed(plain, n, temperature=1.0, seeded=True)
    rows["unconstrained"] = timed(plain, n, constraint=None, temperature=0.0, max_tokens=16)
    with tempfile.TemporaryDirectory() as tmp:
        cached = LLMClient(backend, recorder=Recorder(trace=False), cache=tmp)
        rows["cache miss"] = timed(cached, n, temperature=0.0)
        rows["cache hit"] = timed(cached, n, temperature=0.0)
        hit_rate = cached.cache.hit_rate

    print(f"LLM latency: {ident['model']} (sha256 {ident['sha256'][:12]}), llama-cpp-python "
          f"{version_of('llama-cpp-python')}, {args.threads} thread(s), {len(SKILLS)} skills, {n} decisions a row")
    print(f"model load {load_s:.2f} s, file hash {hash_s:.2f} s (once per process)\n")
    head = f"{'':22s} {'decisions/s':>12s} {'median ms':>10s} {'prompt tok':>11s} {'compl. tok':>11s} {'hits':>5s}"
    print(head)
    print("-" * len(head))
    for name, r in rows.items():
        print(f"{name:22s} {r['decisions_per_s']:12.1f} {r['median_ms']:10.2f} {r['prompt_tokens']:11.1f} "
              f"{r['completion_tokens']:11.1f} {r['cache_hits']:5d}")
    speedup = rows["cache hit"]["decisions_per_s"] / rows["cache miss"]["decisions_per_s"]
    print(f"\ncache: hit rate over both passes {hit_rate:.0%}; a hit is {speedup:.0f}x faster than a miss")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": ident, "threads": args.threads, "load_seconds": load_s, "hash_seconds": hash_s,
                       "rows": rows, "cache_hit_rate": hit_rate}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
