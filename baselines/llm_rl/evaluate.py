"""Evaluate baselines/llm_rl/agent.py (or ``--agent``) with base or trained weights behind the upstream:
serves the weights in a thread of this process (``server.py``), runs ``python -m polar_bench evaluate``
with ``--llm-upstream`` pointing at it, and prints the upstream's speed (ms per call).

    python -m baselines.llm_rl.evaluate --out baselines/llm_rl/results/base.json -- \\
        --suite v1 --tasks babyai/GoToRedBall --runs 1 --episodes 10
    python -m baselines.llm_rl.evaluate --weights runs/llm_rl/gotoredball/checkpoint.pt \\
        --out baselines/llm_rl/results/trained.json -- --suite v1 --tasks babyai/GoToRedBall --runs 1 --episodes 10

Arguments after ``--`` go to ``polar_bench evaluate`` as they are. The sampling salt is 0 for both, so
the base and the trained model draw the same random numbers (common random numbers).

Trained instances that exist in different sessions are played one run at a time into one results file
(its journal grows by runs: docs/evaluate.md): ``--weights journaled runs/.../seed1/checkpoint.pt --
... --runs 2`` plays run 1 only, after checking that the results file already holds every episode of
run 0, finished ``ok``. ``<out>.upstream.json`` records each run's weights (path and the SHA-256 of
the trained layers, ``state_sha256``; a journaled run's is carried over), the CPU (bfloat16 answers
depend on its instructions: README, "Serving") and each session's calls and wall time.
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

from polar_bench.numerics import cpu_flags, cpu_name

from .model import state_digest
from .server import DTYPES, JOURNALED, policies_from_args, serve_in_thread
from .train import AGENT, ROOT, evaluate_command


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--weights", nargs="+", default=[], help="checkpoints of baselines.llm_rl.train, one per run "
                    f"(independently trained instances: run R plays weights[R]; '{JOURNALED}': run R's episodes are "
                    "already in --out, finished); default: the base model")
    ap.add_argument("--pinned", metavar="AGENT", help="the checkpoints AGENT's artifacts manifest pins, one per "
                    "run (checked by SHA-256, fetched from the artifact store when missing)")
    ap.add_argument("--artifact-store", help="where --pinned fetches missing checkpoints (docs/artifacts.md)")
    ap.add_argument("--instances", type=int, default=1, help="copies of the base model (no --weights), one per "
                    "run, so that workers playing different runs do not queue behind one model")
    ap.add_argument("--replicas", type=int, default=1, help="identical copies of each served model, so that "
                    "workers playing the same run answer in parallel (answers do not change; memory grows)")
    ap.add_argument("--dtype", choices=DTYPES, default="float32", help="serving precision (see server.py)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (see server.py)")
    ap.add_argument("--agent", default=str(AGENT), help="the agent file to evaluate (default agent.py; "
                    "agent_v2.py is the suite-v2 entry, the same agent with its own AGENT_INFO)")
    ap.add_argument("--out", required=True, help="the results file")
    ap.add_argument("--trajectories", help="default: <out without .json>.trajectories/")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    journaled = [r for r, w in enumerate(args.weights) if w == JOURNALED]
    if journaled:
        problem = unfinished_runs(out, journaled)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            sys.exit(2)
    policies = policies_from_args(args)
    name = "smollm2-135m-rl" if args.weights else "smollm2-135m-base"
    server, stats, url = serve_in_thread(policies, model_name=name)
    traj = args.trajectories or str(out.with_suffix("")) + ".trajectories"
    t0 = time.perf_counter()
    cmd, env = evaluate_command(url, ["--trajectories", traj, "--out", str(out), *extra], agent=args.agent)
    rc = run_until_it_ends(cmd, env)
    server.shutdown()
    server.server_close()
    summary = {"model": name, "weights": args.weights, "dtype": args.dtype, "device": args.device, "calls": stats.calls,
               "ms_per_call": round(stats.ms_per_call(), 1), "wall_seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(summary), flush=True)
    write_upstream_record(out.with_suffix(".upstream.json"), summary)
    sys.exit(rc if rc >= 0 else 128 - rc)  # killed by signal N: 128 + N, as a shell says


def unfinished_runs(out: Path, runs: list[int]) -> str | None:
    """Why the runs given as journaled cannot be taken from the results file ``out``, or None: it must exist
    and hold every episode of each of them (the evaluation that played them wrote it), each ``ok``."""
    from polar_bench.errors import UserError
    from polar_bench.results import read_results

    fix = f"play those runs with their weights first (or give their checkpoints instead of '{JOURNALED}')"
    if not out.exists():
        return f"--weights gives run(s) {runs} as '{JOURNALED}', but {out} does not exist: {fix}"
    try:
        data = read_results(out).to_json()
    except UserError as exc:
        return f"{exc}: {fix}"
    played = data["config"]["runs"]
    for r in runs:
        mine = [e for e in data["episodes"] if e["run"] == r]
        bad = [e for e in mine if e["status"] != "ok"]
        if r >= played or not mine or bad:
            what = f"{len(bad)} of its episodes did not end ok" if mine and r < played else "none of its episodes"
            return f"--weights gives run {r} as '{JOURNALED}', but {out} holds {what}: {fix}"
    return None


def write_upstream_record(path: Path, summary: dict) -> None:
    """``<out>.upstream.json``: this session's summary, with each run's weights identity (`state_sha256`
    of its trained layers; a journaled run's carried over from the record before), the CPU, and the
    earlier sessions' summaries, so that the whole evaluation's weights and compute stay on record."""
    previous: dict = json.loads(path.read_text()) if path.exists() else {}
    before = {r["run"]: r for r in previous.get("runs", []) if isinstance(r, dict) and "run" in r}
    runs = []
    for r, w in enumerate(summary["weights"]):
        if w == JOURNALED:
            runs.append(before.get(r, {"run": r, "weights": JOURNALED}))
        else:
            trained = torch.load(w, map_location="cpu", weights_only=False)["trained"]
            runs.append({"run": r, "weights": w, "state_sha256": state_digest(trained)})
    flags = cpu_flags()
    record = {**summary, "runs": runs, "cpu": cpu_name(), "bfloat16_instructions": "avx512_bf16" in flags}
    earlier = previous.pop("earlier", []) if previous else []
    if previous:
        earlier.append(previous)
    if earlier:
        record["earlier"] = earlier
    path.write_text(json.dumps(record, indent=1) + "\n")


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
