"""Rebuild PPO checkpoints bit for bit: retrain (task, run) as the experiment file did, byte-stable output.

    python -m baselines.ppo.rebuild TASK RUN [TASK RUN ...] [--out DIR] [--manifest]
    python -m baselines.ppo.rebuild --missing [--families procgen nethack atari]
    python -m baselines.ppo.rebuild --adopt runs/ppo-atari100k [--families atari]
    python -m baselines.ppo.rebuild --write-manifest

Training is seeded and, with one torch thread, gives the same network weights on every run on the
same machine and torch build (measured: baselines/ppo/README.md, "Artifacts"). What differed between
two trainings of one run were the temporary output folder that `sweep.train_isolated` stores in the
checkpoint's ``config`` (and the layout of that dict changes with the trainer's command line), and
the archive name ``torch.save`` takes from the file name. A rebuilt checkpoint therefore keeps of
its ``config`` only the seed (the settings are the experiment file's) and is serialized through
memory, so that its SHA-256 depends on the weights alone; those are the SHA-256 that
``baselines/ppo/artifacts.json`` pins and that `polar_bench.artifacts` checks.

``--write-manifest`` writes ``artifacts.json`` beside ``agent.py`` here and in ``baselines/llm_ppo/``
(whose agent plays the same checkpoints): every checkpoint with a committed sidecar, its SHA-256 as
it is on disk now, and for the git-ignored families (`REBUILT`) this module as the recipe; a
checkpoint of those families that is absent keeps the SHA-256 the manifest already pinned, and is
listed with ``"sha256": null`` only if it never was (then an entry that needs it is not verifiable
until it is rebuilt and pinned).

``--adopt DIR`` takes the runs of a finished sweep (``python -m baselines.ppo.sweep ... --out-dir DIR``)
into this folder without training them again: each checkpoint re-serialized by `canonical_bytes` (the
bytes a rebuild gives), its ``.json`` sidecar and its learning curve. A run whose task and seed no
experiment file here trains is refused, since nothing could rebuild it.

Only the ``.pt`` is written (atomically, into ``checkpoints/<task>/run<run>.pt`` of this folder or
``--out``); the committed ``.json`` sidecar, curve and logs are left alone. Each rebuilt run prints its
training-time evaluation beside the committed sidecar's ``eval_return_mean``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# families whose checkpoints are git-ignored and rebuilt by retraining
REBUILT = ("procgen", "nethack", "atari")
RECIPE = {"command": ["{python}", "-m", "baselines.ppo.rebuild", "{task}", "{run}", "--to", "{path}"], "cwd": "../..",
          "about": "deterministic retrain with one torch thread: about 40 s per Procgen run, 2-3 min per "
                   "NetHack run, 4-5 min per Atari 100k run on one core"}
EXPERIMENTS = ("v1_trained.yaml", "v1_rest.yaml", "v1_procgen.yaml", "v2_atari100k.yaml", "v2_runs34.yaml")
# What a rebuilt checkpoint keeps of the trainer's config: the seed; the settings are the experiment file's.
CANONICAL_CONFIG_KEYS = ("seed",)


def find_config(task: str, run: int):
    """The `Config` that trained ``task``'s run ``run``, from the experiment files of `EXPERIMENTS`."""
    from .train import load_experiment

    for name in EXPERIMENTS:
        for cfg in load_experiment(HERE / "experiments" / name):
            if cfg.task == task and cfg.seed == run:
                return cfg
    raise SystemExit(f"no experiment file trains {task} run {run} (looked in {', '.join(EXPERIMENTS)})")


def canonical_bytes(checkpoint: Path | io.BytesIO) -> bytes:
    """The checkpoint re-serialized without what depends on the machine or the trainer's version: its
    ``config`` is cut down to `CANONICAL_CONFIG_KEYS`."""
    import torch

    data = torch.load(checkpoint, map_location="cpu", weights_only=True)
    data["config"] = {k: data["config"][k] for k in CANONICAL_CONFIG_KEYS if k in data["config"]}
    buf = io.BytesIO()  # not a file name: torch.save would name the archive after it
    torch.save(data, buf)
    return buf.getvalue()


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def rebuild(task: str, run: int, out: Path, to: Path | None = None) -> dict:
    """Retrain one run and write its byte-stable checkpoint under ``out`` (or to the file ``to``);
    return a summary."""
    from .sweep import train_isolated

    cfg = dataclasses.replace(find_config(task, run), torch_threads=1, progress=False)
    summary, files = train_isolated(cfg)
    raw = files[f"checkpoints/{task}/run{run}.pt"]
    target = to if to is not None else out / task / f"run{run}.pt"
    data = canonical_bytes(io.BytesIO(raw))
    _write_atomically(target, data)
    sidecar = HERE / "checkpoints" / task / f"run{run}.json"
    committed = json.loads(sidecar.read_text())["eval_return_mean"] if sidecar.is_file() else None
    return {"task": task, "run": run, "path": str(target), "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data), "eval_return_mean": summary.get("eval_return_mean"),
            "committed_eval_return_mean": committed, "seconds": summary.get("seconds")}


def adopt(sweep_dir: Path, out: Path, families: list[str]) -> list[dict]:
    """Take the finished runs of a sweep's output folder into ``out`` (see the module's docstring)."""
    done = []
    for pt in sorted((sweep_dir / "checkpoints").glob("*/*/run*.pt")):
        family, name, run = pt.parent.parent.name, pt.parent.name, int(pt.stem[3:])
        task = f"{family}/{name}"
        if family not in families:
            continue
        find_config(task, run)  # exits if nothing here could rebuild it
        data = canonical_bytes(pt)
        target = out / task / f"run{run}.pt"
        copies = ((pt.with_suffix(".json"), target.with_suffix(".json")),
                  (sweep_dir / "curves" / task / f"run{run}.csv", out.parent / "curves" / task / f"run{run}.csv"))
        for src, _ in copies:
            if not src.is_file():
                raise SystemExit(f"{src} is missing: the sweep did not finish {task} run {run}")
        _write_atomically(target, data)
        for src, dst in copies:
            _write_atomically(dst, src.read_bytes())
        done.append({"task": task, "run": run, "sha256": hashlib.sha256(data).hexdigest()})
    return done


def missing(families: list[str]) -> list[tuple[str, int]]:
    """(task, run) of every committed sidecar of these families whose checkpoint is absent."""
    out = []
    for fam in families:
        for sidecar in sorted((HERE / "checkpoints" / fam).glob("*/run*.json")):
            if not sidecar.with_suffix(".pt").is_file():
                out.append((f"{fam}/{sidecar.parent.name}", int(sidecar.stem[3:])))
    return out


def manifest(checkpoints: Path, prefix: str, shared: dict[str, list[str]] | None = None,
             previous: dict | None = None) -> dict:
    """The artifacts.json of an agent that plays the checkpoints in ``checkpoints``, named from its
    folder with ``prefix`` (``checkpoints/`` for this folder's agent, ``../ppo/checkpoints/`` for LLM+PPO).
    ``shared`` maps a checkpoint's task to every task whose episodes play it (default: its own).
    ``previous`` is the manifest being replaced: a git-ignored checkpoint absent from this disk keeps
    the SHA-256 it pinned (a clone that never rebuilt it must not unpin it)."""
    from polar_bench.artifacts import file_sha256, machine_description

    pinned = {r.get("path"): r for r in (previous or {}).get("artifacts", []) if isinstance(r, dict)}
    artifacts = []
    for sidecar in sorted(checkpoints.glob("*/*/run*.json")):
        task = f"{sidecar.parent.parent.name}/{sidecar.parent.name}"
        run = int(sidecar.stem[3:])
        pt = sidecar.with_suffix(".pt")
        family = task.split("/")[0]
        if family not in REBUILT and not pt.is_file():
            continue
        on_disk = pt.is_file()
        path = f"{prefix}{task}/run{run}.pt"
        before = pinned.get(path, {})
        row: dict[str, object] = {"path": path, "sha256": file_sha256(pt) if on_disk else before.get("sha256"),
                                  "bytes": pt.stat().st_size if on_disk else before.get("bytes"), "task": task,
                                  "run": run}
        if family in REBUILT:
            row["recipe"] = "retrain"
            # where the pinned bytes came from: kept while they stay pinned, this machine for new ones
            # (a retrain gives the same bits only on a like CPU; README, "Artifacts")
            built_on = before.get("built_on") if row["sha256"] == before.get("sha256") else machine_description()
            if built_on:
                row["built_on"] = built_on
        if shared and task in shared:
            row["tasks"] = shared[task]
        artifacts.append(row)
    return {"format": 1,
            "about": "PPO checkpoints (baselines/ppo/README.md, 'Artifacts'): committed ones are checked; "
                     "Procgen, NetHack and Atari ones are git-ignored and rebuilt bit for bit by retraining. "
                     "Written by python -m baselines.ppo.rebuild --write-manifest.",
            "recipes": {"retrain": RECIPE}, "artifacts": artifacts}


def llm_ppo_shared() -> dict[str, list[str]]:
    """LLM+PPO's executors: a NetHack episode loads the skill policies (baselines/llm_ppo/skills.py),
    a BabyAI episode GoToLocal's, beside its own task's."""
    from polar_bench import load_suite

    from ..llm_ppo.skills import NETHACK_SKILLS

    ids = load_suite("v1").task_ids
    shared = {f"nethack/{name}": [t for t in ids if t.startswith("nethack/")] for name in NETHACK_SKILLS.values()}
    shared["babyai/GoToLocal"] = [t for t in ids if t.startswith("babyai/")]
    return shared


def write_manifests() -> list[Path]:
    out = []
    for folder, prefix, shared in ((HERE, "checkpoints/", None),
                                   (HERE.parent / "llm_ppo", "../ppo/checkpoints/", llm_ppo_shared())):
        path = folder / "artifacts.json"
        previous = json.loads(path.read_text()) if path.is_file() else None
        data = manifest(HERE / "checkpoints", prefix, shared, previous)  # both two below the repository root
        path.write_text(json.dumps(data, indent=1) + "\n")
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m baselines.ppo.rebuild", description=__doc__.split("\n\n")[0])
    p.add_argument("pairs", nargs="*", help="TASK RUN pairs, e.g. procgen/bigfish 0")
    p.add_argument("--missing", action="store_true", help="every checkpoint whose sidecar is committed but .pt absent")
    p.add_argument("--families", nargs="+", default=list(REBUILT),
                   help="with --missing or --adopt (default: %(default)s)")
    p.add_argument("--adopt", metavar="DIR", help="take the finished runs of a sweep's --out-dir DIR into --out "
                   "(canonical checkpoint bytes, sidecars, curves), without training")
    p.add_argument("--out", default=str(HERE / "checkpoints"), help="checkpoint folder (default: this folder's)")
    p.add_argument("--to", metavar="FILE", help="with one TASK RUN pair: write the checkpoint to FILE instead (what "
                   "verify's locked-down recipe does: it may write only in its private folder)")
    p.add_argument("--write-manifest", action="store_true",
                   help="write artifacts.json here and in baselines/llm_ppo/ from the checkpoints on disk")
    args = p.parse_args(argv)
    if args.write_manifest:
        for path in write_manifests():
            print(f"wrote {path}")
        return 0
    if args.adopt:
        for row in adopt(Path(args.adopt), Path(args.out), args.families):
            print(json.dumps(row), flush=True)
        return 0
    if len(args.pairs) % 2:
        p.error("give TASK RUN pairs")
    pairs = [(args.pairs[i], int(args.pairs[i + 1])) for i in range(0, len(args.pairs), 2)]
    if args.missing:
        pairs += missing(args.families)
    if args.to and len(pairs) != 1:
        p.error("--to takes exactly one TASK RUN pair")
    for task, run in pairs:
        print(json.dumps(rebuild(task, run, Path(args.out), Path(args.to) if args.to else None)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
