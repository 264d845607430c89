"""Rebuild PPO checkpoints bit for bit: retrain (task, run) as the experiment file did, byte-stable output.

    python -m baselines.ppo.rebuild TASK RUN [TASK RUN ...] [--numerics avx2-portable|x86-portable|native]
        [--out DIR | --to FILE]
    python -m baselines.ppo.rebuild --missing [--families procgen nethack atari] [--numerics ...]
    python -m baselines.ppo.rebuild --adopt runs/ppo-v2-portable [--families procgen nethack atari]
    python -m baselines.ppo.rebuild --write-manifest

A retrain is seeded and single-threaded; in the portable numeric mode (the default,
`polar_bench.numerics`) it gives the same weights on any x86-64 CPU with AVX2 and FMA of one vendor (AMD
or Intel), in the x86-portable mode on either vendor's, natively only on a like CPU. A checkpoint's
``config`` is cut to its seed and it is serialized through memory (`canonical_bytes`), so that its
SHA-256 depends on the weights alone. Portable checkpoints go to portable/checkpoints/ (suite v2's,
played by agent_v2.py), x86-portable ones to x86/checkpoints/ (none pinned yet), native ones to
checkpoints/ (suite v1's pins). ``--adopt`` takes a finished sweep's runs in without retraining;
``--write-manifest`` writes the four manifests (`write_manifests`). Details and measurements: README.md,
"Artifacts".
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

from polar_bench import numerics
from polar_bench.numerics import PORTABLE

HERE = Path(__file__).resolve().parent
# families whose checkpoints are git-ignored and rebuilt by retraining
REBUILT = ("procgen", "nethack", "atari")
# Where each numeric mode's checkpoints live: the native ones are suite v1's pins (agent.py and the v1
# entries play them); the portable ones suite v2's (agent_v2.py).
FOLDERS = {numerics.NATIVE: HERE / "checkpoints", PORTABLE: HERE / "portable" / "checkpoints",
           numerics.X86_PORTABLE: HERE / "x86" / "checkpoints"}
_ABOUT = ("deterministic retrain with one torch thread: about 40 s per Procgen run, 2-3 min per NetHack run, "
          "4-5 min per Atari 100k run on one core")
RECIPES = {
    numerics.NATIVE: {"command": ["{python}", "-m", "baselines.ppo.rebuild", "{task}", "{run}", "--numerics",
                                  "native", "--to", "{path}"], "cwd": "../..",
                      "about": _ABOUT + "; bit for bit only on a CPU like the one that built it ('built_on')"},
    PORTABLE: {"command": ["{python}", "-m", "baselines.ppo.rebuild", "{task}", "{run}", "--numerics", PORTABLE,
                           "--to", "{path}"], "cwd": "../..",
               "about": _ABOUT + "; the portable numeric mode: the same bytes on any x86-64 CPU with AVX2 and FMA "
                                 "of the vendor of the CPU that built it ('built_on')"},
    numerics.X86_PORTABLE: {"command": ["{python}", "-m", "baselines.ppo.rebuild", "{task}", "{run}", "--numerics",
                                        numerics.X86_PORTABLE, "--to", "{path}"], "cwd": "../..",
                            "about": _ABOUT + "; the x86-portable numeric mode: the same bytes on any x86-64 CPU "
                                              "with AVX2 and FMA, AMD's and Intel's"},
}
RECIPE_NAMES = {numerics.NATIVE: "retrain", PORTABLE: "retrain-portable", numerics.X86_PORTABLE: "retrain-x86"}
# The machine that pinned the native rows that predate 'built_on' (measured: issue #39, the same bytes
# rebuilt on an AMD EPYC of family 25, model 17, AVX-512; a Zen 2 machine gives other bytes).
FIRST_PINS_MACHINE = "AMD EPYC, x86_64 family 25 model 17, AVX-512"
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


def rebuild(task: str, run: int, out: Path, to: Path | None = None, mode: str = PORTABLE) -> dict:
    """Retrain one run in numeric ``mode`` and write its byte-stable checkpoint under ``out`` (or to
    the file ``to``); return a summary. The mode must have been entered (`numerics.enter`) before
    torch computed anything in this process; `main` does that."""
    from .sweep import train_isolated

    cfg = dataclasses.replace(find_config(task, run), torch_threads=1, progress=False, numerics=mode)
    summary, files = train_isolated(cfg)
    raw = files[f"checkpoints/{task}/run{run}.pt"]
    target = to if to is not None else out / task / f"run{run}.pt"
    data = canonical_bytes(io.BytesIO(raw))
    _write_atomically(target, data)
    sidecar = HERE / "checkpoints" / task / f"run{run}.json"
    committed = json.loads(sidecar.read_text())["eval_return_mean"] if sidecar.is_file() else None
    return {"task": task, "run": run, "path": str(target), "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data), "eval_return_mean": summary.get("eval_return_mean"),
            "committed_eval_return_mean": committed, "seconds": summary.get("seconds"),
            "numerics": summary.get("numerics")}


def adopt(sweep_dir: Path, out: Path, families: list[str], mode: str = PORTABLE) -> list[dict]:
    """Take the finished runs of a sweep's output folder into ``out`` (see the module's docstring). Every
    run must have been trained in ``mode`` (its sidecar says so), or nothing is taken."""
    runs = []
    for pt in sorted((sweep_dir / "checkpoints").glob("*/*/run*.pt")):
        family, name, run = pt.parent.parent.name, pt.parent.name, int(pt.stem[3:])
        task = f"{family}/{name}"
        if family not in families:
            continue
        find_config(task, run)  # exits if nothing here could rebuild it
        copies = ((pt.with_suffix(".json"), out / task / f"run{run}.json"),
                  (sweep_dir / "curves" / task / f"run{run}.csv", out.parent / "curves" / task / f"run{run}.csv"))
        for src, _ in copies:
            if not src.is_file():
                raise SystemExit(f"{src} is missing: the sweep did not finish {task} run {run}")
        trained = (json.loads(copies[0][0].read_text()).get("numerics") or {}).get("mode", numerics.NATIVE)
        if trained != mode:
            raise SystemExit(f"{pt} was trained in the {trained} numeric mode, not {mode}: retrain it with "
                             f"sweep --numerics {mode}, or adopt it with --numerics {trained}")
        runs.append((pt, task, run, copies))
    done = []
    for pt, task, run, copies in runs:
        data = canonical_bytes(pt)
        _write_atomically(out / task / f"run{run}.pt", data)
        for src, dst in copies:
            _write_atomically(dst, src.read_bytes())
        done.append({"task": task, "run": run, "sha256": hashlib.sha256(data).hexdigest(), "numerics": mode})
    return done


def missing(families: list[str], mode: str = PORTABLE) -> list[tuple[str, int]]:
    """(task, run) of every committed sidecar of these families in ``mode``'s folder whose checkpoint is absent."""
    out = []
    for fam in families:
        for sidecar in sorted((FOLDERS[mode] / fam).glob("*/run*.json")):
            if not sidecar.with_suffix(".pt").is_file():
                out.append((f"{fam}/{sidecar.parent.name}", int(sidecar.stem[3:])))
    return out


def _rows(checkpoints: Path, prefix: str, families: tuple[str, ...], mode: str, pinned: dict[str, dict],
          shared: dict[str, list[str]] | None) -> list[dict]:
    """One manifest row per sidecar of ``families`` under ``checkpoints`` (see `manifest`)."""
    from polar_bench.artifacts import file_sha256, machine_description

    rows = []
    for sidecar in sorted(checkpoints.glob("*/*/run*.json")):
        task = f"{sidecar.parent.parent.name}/{sidecar.parent.name}"
        run = int(sidecar.stem[3:])
        pt = sidecar.with_suffix(".pt")
        family = task.split("/")[0]
        if family not in families or (family not in REBUILT and not pt.is_file()):
            continue
        on_disk = pt.is_file()
        path = f"{prefix}{task}/run{run}.pt"
        before = pinned.get(path, {})
        row: dict[str, object] = {"path": path, "sha256": file_sha256(pt) if on_disk else before.get("sha256"),
                                  "bytes": pt.stat().st_size if on_disk else before.get("bytes"), "task": task,
                                  "run": run}
        if family in REBUILT:
            row["recipe"] = RECIPE_NAMES[mode]
            row["numerics"] = mode
            # where the pinned bytes came from: kept while they stay pinned, this machine for new ones
            # (natively, a retrain gives the same bits only on a like CPU; README, "Artifacts")
            if row["sha256"] is None:
                built_on = None
            elif row["sha256"] == before.get("sha256"):
                built_on = before.get("built_on") or (FIRST_PINS_MACHINE if mode == numerics.NATIVE else None)
            else:
                built_on = machine_description()
            if built_on:
                row["built_on"] = built_on
        if shared and task in shared:
            row["tasks"] = shared[task]
        rows.append(row)
    return rows


def manifest(parts: list[tuple[Path, str, tuple[str, ...], str]], shared: dict[str, list[str]] | None = None,
             previous: dict | None = None) -> dict:
    """An artifacts.json: for each (checkpoints folder, path prefix, families, numeric mode) of ``parts``,
    a row per checkpoint of those families there, named from the manifest's folder with the prefix
    (``checkpoints/`` beside agent.py, ``../ppo/portable/checkpoints/`` for LLM+PPO's v2 agent).
    ``shared`` maps a checkpoint's task to every task whose episodes play it (default: its own).
    ``previous`` is the manifest being replaced: a git-ignored checkpoint absent from this disk keeps
    the SHA-256 it pinned (a clone that never rebuilt it must not unpin it)."""
    pinned = {str(r.get("path")): r for r in (previous or {}).get("artifacts", []) if isinstance(r, dict)}
    rows, modes = [], set()
    for checkpoints, prefix, families, mode in parts:
        part = _rows(checkpoints, prefix, families, mode, pinned, shared)
        modes |= {mode for r in part if "recipe" in r}
        rows += part
    return {"format": 1,
            "about": "PPO checkpoints (baselines/ppo/README.md, 'Artifacts'): committed ones are checked; "
                     "Procgen, NetHack and Atari ones are git-ignored and rebuilt bit for bit by retraining. "
                     "Written by python -m baselines.ppo.rebuild --write-manifest.",
            "recipes": {RECIPE_NAMES[m]: RECIPES[m] for m in sorted(modes)}, "artifacts": rows}


def llm_ppo_shared(suite: str) -> dict[str, list[str]]:
    """LLM+PPO's executors: a NetHack episode loads the skill policies (baselines/llm_ppo/skills.py),
    a BabyAI episode GoToLocal's, beside its own task's."""
    from polar_bench import load_suite

    from ..llm_ppo.skills import NETHACK_SKILLS

    ids = load_suite(suite).task_ids
    shared = {f"nethack/{name}": [t for t in ids if t.startswith("nethack/")] for name in NETHACK_SKILLS.values()}
    shared["babyai/GoToLocal"] = [t for t in ids if t.startswith("babyai/")]
    return shared


def write_manifests() -> list[Path]:
    """The four manifests: suite v1's pins (agent.py and the v1 entries' frozen agent files) and suite
    v2's (agent_v2.py, LLM+PPO's agent.py), each written from the checkpoints on disk."""
    native, portable = FOLDERS[numerics.NATIVE], FOLDERS[PORTABLE]
    committed = ("gym", "dmc", "babyai")
    v1 = committed + ("procgen", "nethack")
    llm_ppo = HERE.parent / "llm_ppo"
    Part = tuple[Path, str, tuple[str, ...], str]
    plans: list[tuple[Path, list[Part], dict[str, list[str]] | None]] = [
        (HERE / "artifacts.json", [(native, "checkpoints/", v1, numerics.NATIVE)], None),
        (HERE / "agent_v2.artifacts.json", [(native, "checkpoints/", committed, numerics.NATIVE),
                                            (portable, "portable/checkpoints/", REBUILT, PORTABLE)], None),
        (llm_ppo / "agent_3bd0b979.artifacts.json", [(native, "../ppo/checkpoints/", v1, numerics.NATIVE)],
         llm_ppo_shared("v1")),
        (llm_ppo / "artifacts.json", [(native, "../ppo/checkpoints/", committed, numerics.NATIVE),
                                      (portable, "../ppo/portable/checkpoints/", REBUILT, PORTABLE)],
         llm_ppo_shared("v2")),
    ]
    out = []
    for path, parts, shared in plans:
        # a manifest's previous pins: its own, or (first written) those of the manifest it splits from
        source = path if path.is_file() else path.with_name("artifacts.json")
        previous = json.loads(source.read_text()) if source.is_file() else None
        path.write_text(json.dumps(manifest(parts, shared, previous), indent=1) + "\n")
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
    p.add_argument("--out", help="checkpoint folder (default: this folder's for the mode: portable/checkpoints/ "
                   "for avx2-portable, x86/checkpoints/ for x86-portable, checkpoints/ for native)")
    p.add_argument("--to", metavar="FILE", help="with one TASK RUN pair: write the checkpoint to FILE instead (what "
                   "verify's locked-down recipe does: it may write only in its private folder)")
    p.add_argument("--numerics", choices=numerics.MODES, default=PORTABLE,
                   help="numeric mode of the retraining (default: %(default)s, the same bytes on any x86-64 CPU "
                        "with AVX2 and FMA of the pinning CPU's vendor; x86-portable: of either vendor; 'native' "
                        "rebuilds the checkpoints pinned before those modes existed)")
    p.add_argument("--write-manifest", action="store_true",
                   help="write artifacts.json here and in baselines/llm_ppo/ from the checkpoints on disk")
    args = p.parse_args(argv)
    if args.write_manifest:
        for path in write_manifests():
            print(f"wrote {path}")
        return 0
    out = Path(args.out) if args.out else FOLDERS[args.numerics]
    if args.adopt:
        for row in adopt(Path(args.adopt), out, args.families, args.numerics):
            print(json.dumps(row), flush=True)
        return 0
    if len(args.pairs) % 2:
        p.error("give TASK RUN pairs")
    pairs = [(args.pairs[i], int(args.pairs[i + 1])) for i in range(0, len(args.pairs), 2)]
    if args.missing:
        pairs += missing(args.families, args.numerics)
    if args.to and len(pairs) != 1:
        p.error("--to takes exactly one TASK RUN pair")
    if pairs:
        numerics.enter(args.numerics)  # before this process imports torch
    for task, run in pairs:
        print(json.dumps(rebuild(task, run, out, Path(args.to) if args.to else None, args.numerics)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
