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
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from .server import DTYPES, policies_from_args, serve_in_thread
from .train import ROOT, evaluate_command


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--weights", nargs="+", default=[], help="checkpoints of baselines.llm_rl.train, one per run "
                    "(independently trained instances: run R plays weights[R]); default: the base model")
    ap.add_argument("--pinned", metavar="AGENT", help="the checkpoints AGENT's artifacts manifest pins, one per "
                    "run (checked by SHA-256, fetched from the artifact store when missing)")
    ap.add_argument("--artifact-store", help="where --pinned fetches missing checkpoints (docs/artifacts.md)")
    ap.add_argument("--instances", type=int, default=1, help="copies of the base model (no --weights), one per "
                    "run, so that workers playing different runs do not queue behind one model")
    ap.add_argument("--replicas", type=int, default=1, help="identical copies of each served model, so that "
                    "workers playing the same run answer in parallel (answers do not change; memory grows)")
    ap.add_argument("--dtype", choices=DTYPES, default="float32", help="serving precision (see server.py)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (see server.py)")
    ap.add_argument("--out", required=True, help="the results file")
    ap.add_argument("--trajectories", help="default: <out without .json>.trajectories/")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    policies = policies_from_args(args)
    name = "smollm2-135m-rl" if args.weights else "smollm2-135m-base"
    server, stats, url = serve_in_thread(policies, model_name=name)
    out = Path(args.out)
    traj = args.trajectories or str(out.with_suffix("")) + ".trajectories"
    t0 = time.perf_counter()
    cmd, env = evaluate_command(url, ["--trajectories", traj, "--out", str(out), *extra])
    rc = run_until_it_ends(cmd, env)
    server.shutdown()
    server.server_close()
    summary = {"model": name, "weights": args.weights, "dtype": args.dtype, "device": args.device, "calls": stats.calls,
               "ms_per_call": round(stats.ms_per_call(), 1), "wall_seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(summary), flush=True)
    out.with_suffix(".upstream.json").write_text(json.dumps(summary, indent=1) + "\n")
    sys.exit(rc if rc >= 0 else 128 - rc)  # killed by signal N: 128 + N, as a shell says


def run_until_it_ends(cmd: list[str], env: dict[str, str]) -> int:
    """Run the evaluation and keep serving until it has ended, however it is stopped: SIGTERM to this
    process is passed on (the evaluation stops as on Ctrl-C, its journal kept), Ctrl-C reaches the
    evaluation from the terminal itself. Shutting the upstream first would let the episodes still
    running record failed LLM calls."""
    child = subprocess.Popen(cmd, cwd=ROOT, env=env)

    def _pass_on(signum: int, frame: object) -> None:
        child.send_signal(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, _pass_on), signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


if __name__ == "__main__":
    main()
