"""Pin trained weights for a leaderboard entry: the trained layers of each training run's checkpoint, one
file per run, pinned by SHA-256 in an artifacts manifest (docs/artifacts.md), so that `verify`, the
artifact store (`polar_bench artifacts publish`) and ``server.py --pinned`` all serve exactly those bytes.

    python -m baselines.llm_rl.pin runs/llm_rl/gotoredball-seed{0,1,2}/checkpoint.pt --name gotoredball
        -> baselines/llm_rl/checkpoints/gotoredball-run{0,1,2}.pt, pinned in baselines/llm_rl/artifacts.json

A training checkpoint also holds Adam's state, RNG states and wall times (85 MB, never the same bytes
twice); the pinned file holds only what serving needs: the trained tensors, the iteration and the
experiment's settings (28 MB), saved the same way every time, so equal weights give equal bytes.
The manifest gives no recipe: a retrain (README) is 25 minutes of CPU per run through HTTP and an
evaluation subprocess, and is not promised bit for bit across CPU types; the store is the way to share.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from polar_bench.artifacts import MANIFEST_NAME, file_sha256, machine_description

HERE = Path(__file__).resolve().parent


def serving_state(checkpoint: str | Path) -> dict:
    """What serving needs of a training checkpoint: the trained tensors, iteration and settings."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    if "trained" not in state:
        raise ValueError(f"{checkpoint} is not a checkpoint of baselines.llm_rl.train (no 'trained' tensors)")
    return {"trained": state["trained"], "iteration": state.get("iteration"), "config": state.get("config")}


def pin(checkpoints: list[str], name: str, manifest: Path, folder: str = "checkpoints",
        first_run: int = 0) -> list[dict]:
    """Write ``<folder>/<name>-run<R>.pt`` (relative to the manifest) from ``checkpoints[R - first_run]`` and
    pin each in ``manifest`` with its SHA-256, size, run and this machine; rows of other paths are kept
    (``first_run``: runs trained in different sessions are pinned one at a time)."""
    if first_run < 0:
        raise ValueError(f"the first run must be 0 or more, not {first_run}")
    rows = []
    for run, ckpt in enumerate(checkpoints, start=first_run):
        rel = f"{folder}/{name}-run{run}.pt"
        out = manifest.parent / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        torch.save(serving_state(ckpt), out)
        rows.append({"path": rel, "sha256": file_sha256(out), "bytes": out.stat().st_size, "run": run,
                     "built_on": machine_description()})
    data: dict = json.loads(manifest.read_text()) if manifest.exists() else {"format": 1}
    mine = {r["path"] for r in rows}
    data["artifacts"] = [a for a in data.get("artifacts", []) if a.get("path") not in mine] + rows
    manifest.write_text(json.dumps(data, indent=1) + "\n")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.pin", description=__doc__.split("\n")[0])
    ap.add_argument("checkpoints", nargs="+", help="train.py checkpoints, one per run, in run order")
    ap.add_argument("--name", required=True, help="the pinned files' stem: <name>-run<R>.pt")
    ap.add_argument("--manifest", default=str(HERE / MANIFEST_NAME), help="the artifacts manifest to write "
                    "(default: baselines/llm_rl/artifacts.json, which serves agent.py)")
    ap.add_argument("--first-run", type=int, default=0, help="the run the first checkpoint is (default 0): "
                    "pin run R alone, trained in a later session, with --first-run R")
    args = ap.parse_args(argv)
    try:
        rows = pin(args.checkpoints, args.name, Path(args.manifest), first_run=args.first_run)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    for r in rows:
        print(f"pinned {r['path']} run {r['run']}: {r['sha256'][:16]}... ({r['bytes']:,} bytes)")


if __name__ == "__main__":
    main()
