"""Sandbox overhead: calls per second of a trivial policy through `SandboxedPolicy.act`.

The policy (``act(obs) -> int(obs[0] > 0)``, numpy loaded) runs in the sandbox with every layer on;
each call sends a float32 vector observation down the pipe, runs ``act`` and validates the action
against ``Discrete(2)`` in the parent, so the number measures the full per-step path: encoding,
two pipe transfers and wake-ups, decoding on both sides and validation. The same function called in
process is shown for scale. Calls are timed in chunks of ``--chunk`` calls; the table shows the
median chunk rate (preemption by other processes on a shared machine barely moves it) and the
overall rate. The target is at least 5,000 calls per second. Because a loaded machine delays every
wake-up of the child, the CPU time per call (parent and child together, from ``time.process_time``
and ``/proc/<pid>/stat``) is shown too: ``1e6 / cpu_us`` is the rate an idle core pair would give.

Usage: python benchmarks/sandbox_calls.py [--calls 20000] [--chunk 500] [--obs-size 8 128 1024]
       [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from gymnasium import spaces

from polar_bench.sandbox import SandboxedPolicy

POLICY = """
import numpy as np

def act(obs):
    return int(obs[0] > 0)
"""
TARGET = 5000


def measure(obs_size: int, calls: int, chunk: int) -> dict:
    obs = np.random.default_rng(0).normal(size=obs_size).astype(np.float32)
    start = time.perf_counter()
    with SandboxedPolicy(POLICY, action_space=spaces.Discrete(2)) as policy:
        startup = time.perf_counter() - start
        for _ in range(200):  # warm up
            policy.act(obs)
        child_cpu0, cpu0 = _child_cpu(policy.pid), time.process_time()
        rates, total_start = [], time.perf_counter()
        for _ in range(max(1, calls // chunk)):
            t = time.perf_counter()
            for _ in range(chunk):
                policy.act(obs)
            rates.append(chunk / (time.perf_counter() - t))
        overall = chunk * len(rates) / (time.perf_counter() - total_start)
        cpu = (time.process_time() - cpu0) + (_child_cpu(policy.pid) - child_cpu0)
        cpu_us = 1e6 * cpu / (chunk * len(rates))
        layers = policy.layers
    namespace: dict = {}
    exec(POLICY, namespace)
    local_act = namespace["act"]
    t = time.perf_counter()
    for _ in range(calls):
        local_act(obs)
    local = calls / (time.perf_counter() - t)
    return {"obs_size": obs_size, "median_calls_per_s": statistics.median(rates),
            "overall_calls_per_s": overall, "in_process_calls_per_s": local,
            "cpu_us_per_call": cpu_us, "startup_s": startup, "layers": layers}


def _child_cpu(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--obs-size", type=int, nargs="+", default=[8, 128, 1024])
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results = [measure(n, args.calls, args.chunk) for n in args.obs_size]
    print(f"layers: {results[0]['layers']}")
    print(f"{'obs floats':>10} {'median calls/s':>15} {'overall calls/s':>16} {'in-process':>12} "
          f"{'cpu us/call':>12} {'start (s)':>10}  target >= {TARGET}")
    for r in results:
        ok = "ok" if r["median_calls_per_s"] >= TARGET else "BELOW TARGET"
        print(f"{r['obs_size']:>10} {r['median_calls_per_s']:>15,.0f} {r['overall_calls_per_s']:>16,.0f} "
              f"{r['in_process_calls_per_s']:>12,.0f} {r['cpu_us_per_call']:>12.1f} {r['startup_s']:>10.2f}  {ok}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
