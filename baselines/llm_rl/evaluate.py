"""Evaluate baselines/llm_rl/agent.py with base or trained weights behind the transformers-backed upstream:
serves the weights in a thread of this process (``server.py``), runs ``python -m polar_bench evaluate``
with ``--llm-upstream`` pointing at it, and prints the upstream's speed (ms per call).

    python -m baselines.llm_rl.evaluate --out baselines/llm_rl/results/base.json -- \\
        --suite v1 --tasks babyai/GoToRedBall --runs 1 --episodes 10
    python -m baselines.llm_rl.evaluate --weights runs/llm_rl/gotoredball/checkpoint.pt \\
        --out baselines/llm_rl/results/trained.json -- --suite v1 --tasks babyai/GoToRedBall --runs 1 --episodes 10

Arguments after ``--`` go to ``polar_bench evaluate`` as they are. The sampling salt is 0 for both, so
the base and the trained model draw the same random numbers (common random numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from .model import Policy, load_model, load_trained_state
from .server import serve_in_thread
from .train import AGENT, ROOT


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--weights", help="a checkpoint of baselines.llm_rl.train (default: the base model)")
    ap.add_argument("--out", required=True, help="the results file")
    ap.add_argument("--trajectories", help="default: <out without .json>.trajectories/")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_model(args.model)
    if args.weights:
        load_trained_state(model, torch.load(args.weights, map_location="cpu", weights_only=False)["trained"])
    name = "smollm2-135m-rl" if args.weights else "smollm2-135m-base"
    server, stats, url = serve_in_thread(Policy(model, tok, salt=0), model_name=name)
    out = Path(args.out)
    traj = args.trajectories or str(out.with_suffix("")) + ".trajectories"
    cmd = [sys.executable, "-m", "polar_bench", "evaluate", str(AGENT), "--llm-upstream", url,
           "--trajectories", traj, "--out", str(out), "--no-progress", *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    finally:
        server.shutdown()
        server.server_close()
    summary = {"model": name, "weights": args.weights, "calls": stats.calls,
               "ms_per_call": round(stats.ms_per_call(), 1), "wall_seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(summary), flush=True)
    out.with_suffix(".upstream.json").write_text(json.dumps(summary, indent=1) + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
