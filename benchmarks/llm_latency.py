"""LLM latency: constrained decisions per second with the embedded model, cache hits against misses,
and evaluation episodes per second of the LLM+PPO agent against plain PPO.

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

The second table plays the same episodes (the first E of suite v1's evaluation seeds of each task,
with the suite's task options, through `evaluate`'s episode loop) with baselines/llm_ppo/agent.py
and baselines/ppo/agent.py, alternating agents episode by episode in this one process, and prints
episodes per second of each and their ratio, with the LLM+PPO agent's decisions per episode. (The
LLM+PPO agent loads the model through ``make_client()``: POLAR_BENCH_LLM_* variables apply.)

The third table is the LLM proxy's overhead (`polar_bench.llm.proxy`, what `evaluate` puts in front
of every agent): the embedded model served by `polar_bench.llm.server` (the proxy's default upstream), and
chat completions of ``max_tokens`` 4 sent to it directly and through a proxy on 127.0.0.1,
alternating (each prompt is sent once, to one of the two, the assignment swapped every pair, so that
the server's prompt cache favours neither). Overhead per call is the proxied call's latency at the
client minus the upstream time that the proxy measured for it: what the proxy adds (parsing,
accounting, the second HTTP hop). Its median is compared with the median direct call.

Usage: python benchmarks/llm_latency.py [--decisions 50] [--threads 1] [--model PATH] [--json out.json]
       [--episodes 5] [--tasks babyai/GoToLocal nethack/Score] [--proxy-calls 40]
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


def play(agent, spec, seed: int) -> int:
    """One episode as `evaluate` plays it (the suite's task options, e.g. NetHack's 1000-step limit,
    and its episode loop); its length."""
    import polar_bench
    from polar_bench.evaluate import run_episode

    with polar_bench.make(spec.id, **dict(spec.options)) as env:
        env.request_text(bool(getattr(agent, "wants_text", False)) and env.task_info.has_text)
        record = run_episode(env, agent, seed, None, None)
    if record["status"] != "ok":
        raise RuntimeError(f"{spec.id} seed {seed}: {record['status']}: {record['error']}")
    return record["length"]


def agents_side_by_side(tasks: list[str], episodes: int) -> dict:
    """Episodes per second of LLM+PPO and PPO on the same seeds, alternating agents per episode."""
    import importlib.util
    from pathlib import Path

    import polar_bench

    root = Path(__file__).resolve().parents[1]
    mods = {}
    for name in ("ppo", "llm_ppo"):
        spec = importlib.util.spec_from_file_location(f"bench_{name}_agent", root / "baselines" / name / "agent.py")
        mods[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mods[name])
    out = {}
    suite = polar_bench.load_suite("v1")
    for task_id in tasks:
        spec = suite.task(task_id)
        with polar_bench.make(task_id, **dict(spec.options)) as env:
            info = env.task_info
        agents = {name: mods[name].make_agent(info, 0) for name in mods}
        seconds = {name: 0.0 for name in agents}
        steps = {name: 0 for name in agents}
        decisions = 0
        for seed in spec.seeds[:episodes]:
            for name, agent in agents.items():
                t0 = time.perf_counter()
                steps[name] += play(agent, spec, seed)
                seconds[name] += time.perf_counter() - t0
                if name == "llm_ppo":
                    decisions += agent.episode_info()["llm"]["decisions"]
        out[task_id] = {"episodes": episodes, "ppo_episodes_per_s": episodes / seconds["ppo"],
                        "llm_ppo_episodes_per_s": episodes / seconds["llm_ppo"],
                        "ratio": seconds["ppo"] / seconds["llm_ppo"], "decisions_per_episode": decisions / episodes,
                        "steps_per_episode": {k: v / episodes for k, v in steps.items()}}
    return out


def _chat(conn, path: str, i: int) -> tuple[float, dict]:
    body = json.dumps({"model": "smollm2", "messages": prompt(i), "max_tokens": 4, "temperature": 0.0, "seed": 0})
    t = time.perf_counter()
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {data}")
    return time.perf_counter() - t, data


def proxy_overhead(calls: int, threads: int) -> dict:
    """Direct and proxied chat completions to the embedded model, alternating (module docstring)."""
    import http.client
    from urllib.parse import urlsplit

    from polar_bench.llm.proxy import LLMProxy
    from polar_bench.llm.server import EmbeddedServer

    with EmbeddedServer(n_threads=threads) as url:
        up = urlsplit(url)
        proxy = LLMProxy(url, trace=True, cache=False)
        port = proxy.serve().server_address[1]
        token = proxy.new_token()
        proxy.open(token, "bench", "bench/task", 0, 0, 0)
        direct_conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        proxy_conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        direct: list[float] = []
        proxied: list[float] = []
        for i in range(-2, calls):  # two warm-up pairs
            pair = [(direct_conn, up.path + "/chat/completions"), (proxy_conn, f"/a/{token}/v1/chat/completions")]
            if i % 2:
                pair.reverse()
            for k, (conn, path) in enumerate(pair):
                seconds, _ = _chat(conn, path, 2 * (i + 2) + k)
                if i < 0:
                    continue
                if conn is direct_conn:
                    direct.append(seconds)
                else:
                    proxied.append(seconds)
        calls_made = proxy.close("bench")
        proxy.shutdown()
    assert calls_made is not None
    upstream = [line["seconds"] for line in calls_made.lines[2:]]  # the two warm-up calls left out
    overhead = [p - u for p, u in zip(proxied, upstream, strict=True)]
    return {"calls": calls, "direct_median_ms": 1e3 * statistics.median(direct),
            "proxied_median_ms": 1e3 * statistics.median(proxied),
            "overhead_median_ms": 1e3 * statistics.median(overhead),
            "overhead_p90_ms": 1e3 * sorted(overhead)[int(0.9 * (len(overhead) - 1))],
            "overhead_share_of_direct_median": statistics.median(overhead) / statistics.median(direct)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--decisions", type=int, default=50, help="decisions per row (default 50)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    ap.add_argument("--model", default=None, help="a GGUF file (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--episodes", type=int, default=5, help="episodes per task and agent in the agent table")
    ap.add_argument("--tasks", nargs="*", default=["babyai/GoToLocal", "nethack/Score"],
                    help="tasks of the agent table (none: skip it)")
    ap.add_argument("--proxy-calls", type=int, default=40,
                    help="calls each way in the LLM proxy table (default 40; 0: skip it)")
    args = ap.parse_args(argv)

    from polar_bench._optional import version_of
    from polar_bench.llm import EmbeddedBackend, LLMClient, Recorder

    backend = EmbeddedBackend(args.model, n_threads=args.threads)
    t0 = time.perf_counter()
    backend.loaded()  # the model file loads here, timed apart from the calls
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
    side = agents_side_by_side(args.tasks, args.episodes) if args.tasks else {}
    if side:
        head = (f"\n{'evaluation episodes/s':24s} {'PPO':>8s} {'LLM+PPO':>8s} {'ratio':>7s} {'decisions/ep':>13s} "
                f"{'steps/ep':>15s}")
        print(head)
        print("-" * (len(head) - 1))
        for task_id, r in side.items():
            st = r["steps_per_episode"]
            print(f"{task_id:24s} {r['ppo_episodes_per_s']:8.2f} {r['llm_ppo_episodes_per_s']:8.2f} "
                  f"{r['ratio']:7.3f} {r['decisions_per_episode']:13.1f} {st['ppo']:7.0f}/{st['llm_ppo']:<7.0f}")
        print("ratio: LLM+PPO episodes/s over PPO's, same seeds; steps/ep: PPO/LLM+PPO")
    over = proxy_overhead(args.proxy_calls, args.threads) if args.proxy_calls > 0 else {}
    if over:
        print(f"\nLLM proxy, {over['calls']} chat completions each way (max_tokens 4), alternating:")
        print(f"{'direct median ms':>17s} {'proxied median ms':>18s} {'overhead median ms':>19s} "
              f"{'overhead p90 ms':>16s} {'overhead/direct':>16s}")
        print(f"{over['direct_median_ms']:17.2f} {over['proxied_median_ms']:18.2f} {over['overhead_median_ms']:19.3f} "
              f"{over['overhead_p90_ms']:16.3f} {over['overhead_share_of_direct_median']:16.2%}")
        print("overhead: proxied latency at the client minus the upstream time the proxy measured for the call")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": ident, "threads": args.threads, "load_seconds": load_s, "hash_seconds": hash_s,
                       "rows": rows, "cache_hit_rate": hit_rate, "agents": side, "proxy": over}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
