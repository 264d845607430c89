"""PPO training sweeps over (task, seed): every run of an experiment file, in parallel.

    python -m baselines.ppo.sweep EXPERIMENT.yaml [EXPERIMENT.yaml ...] [--tasks GLOB ...]
        [--backend local|ray] [--address auto|ray://HOST:PORT] [--workers N] [--out-dir DIR]
        [--numerics avx2-portable|native] [--skip-existing [--by-task]]

Each (harness, seed) of the experiment is one `train()` call, run in a spawned worker process
(``local``) or as a Ray task (``ray``, one CPU each; Ray retries a task whose worker or node dies).
Every run trains into a private temporary folder and sends its outputs (checkpoint, its JSON
summary, the CSV learning curve, TensorBoard scalars) back to the driver, which writes them under
``--out-dir`` (else the experiment's ``out_dir``, else ``runs/ppo`` at the project root, as
``train`` does): on a cluster, nothing is left behind on the worker machines. A suite or task that
does not load stops the sweep before any run starts. The experiment
file's ``distributed: {backend: ray, num_workers: 4}`` section sets the defaults of the flags (the
first file's, when several are given). Training is seeded, so a run gives the same checkpoint on either
backend; ``--numerics avx2-portable`` makes it the same checkpoint on any x86-64 CPU with AVX2 and FMA
(`polar_bench.numerics`: the mode is entered here, before any worker starts).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import multiprocessing as mp
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from polar_bench import numerics

from .train import Config, checkpoint_file, configs_from_args, read_experiment_file, run_command, train


def train_isolated(cfg: Config) -> tuple[dict, dict[str, bytes]]:
    """Train ``cfg`` in a temporary folder; return its summary and its output files (paths relative
    to the output folder)."""
    with tempfile.TemporaryDirectory(prefix="polar_bench_ppo_") as tmp:
        summary = train(dataclasses.replace(cfg, progress=False, out_dir=tmp))
        root = Path(tmp)
        files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    summary = {k: v for k, v in summary.items() if k != "checkpoint"}
    return summary, files


def _write_outputs(cfg: Config, files: dict[str, bytes]) -> None:
    root = Path(cfg.out_dir)
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)


def run_sweep(configs: list[Config], backend: str = "local", workers: int | None = None,
              address: str | None = None) -> list[dict]:
    """Train every config; return the summaries in the configs' order.

    Each run's checkpoint, curve and logs are written as soon as that run finishes, so a sweep that
    is interrupted keeps every finished run (and later runs can already use them)."""
    summaries: list[dict | None] = [None] * len(configs)
    modes = {c.numerics for c in configs}
    if len(modes) > 1:
        raise ValueError(f"one sweep trains in one numeric mode, not {sorted(modes)}")
    for mode in modes:
        numerics.enter(mode)  # inherited by the workers, which import torch before train() runs

    def finished(i: int, result: tuple[dict, dict[str, bytes]]) -> None:
        summary, files = result
        _write_outputs(configs[i], files)
        summary["checkpoint"] = str(checkpoint_file(configs[i]))
        summaries[i] = summary
        print(json.dumps({"finished": f"{configs[i].task}/run{configs[i].seed}",
                          "done": sum(s is not None for s in summaries), "of": len(configs),
                          "eval_return_mean": summary.get("eval_return_mean")}), flush=True)

    if backend == "ray":
        _sweep_ray(configs, workers, address, finished)
    elif backend == "local":
        n = max(1, min(workers or os.cpu_count() or 1, len(configs)))
        with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(train_isolated, c): i for i, c in enumerate(configs)}
            for future in as_completed(futures):
                finished(futures[future], future.result())
    else:
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    return [s for s in summaries if s is not None]


def _sweep_ray(configs: list[Config], workers: int | None, address: str | None, finished) -> None:
    from polar_bench._optional import require

    ray = require("ray", "ray", "ray sweeps")
    started_here = False
    if not ray.is_initialized():
        # no address: a Ray of its own, never a cluster that `ray start` runs on this machine
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                 **({"num_cpus": workers} if address is None and workers else {}))
        started_here = True
    try:
        # the portable mode's variables reach a Ray worker before it imports torch (its process starts with them)
        portable = {c.numerics for c in configs} & set(numerics.PORTABLE_MODES)
        if len(portable) > 1:
            raise SystemExit(f"one sweep trains in one portable numeric mode, not {sorted(portable)}")
        options = {"runtime_env": {"env_vars": dict(numerics.PORTABLE_MODES[portable.pop()])}} if portable else {}
        task = ray.remote(num_cpus=1, max_retries=2, **options)(train_isolated)
        pending = {task.remote(c): i for i, c in enumerate(configs)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                finished(pending.pop(ref), ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()


def _distributed_defaults(path: str) -> dict[str, Any]:
    dist = read_experiment_file(path).get("distributed") or {}
    return {"backend": dist.get("backend"), "workers": dist.get("num_workers")}


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m baselines.ppo.sweep", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("experiments", nargs="+", metavar="experiment",
                   help="YAML experiment files (see baselines/ppo/experiments/); their runs are trained together")
    p.add_argument("--tasks", nargs="+", metavar="GLOB",
                   help="only the runs of these tasks (globs such as 'procgen/*')")
    p.add_argument("--numerics", choices=numerics.MODES, help="numeric mode of every run (default: each run's "
                   "own, 'native' unless its file says); avx2-portable: the same bytes on any AVX2+FMA x86-64 "
                   "CPU of one vendor; x86-portable: of AMD and Intel alike")
    p.add_argument("--backend", choices=("local", "ray"), help="default: the file's distributed.backend, else local")
    p.add_argument("--address", help="with --backend ray: 'auto' or ray://HOST:PORT")
    p.add_argument("--workers", type=int, help="parallel runs (default: distributed.num_workers, else all CPUs)")
    p.add_argument("--out-dir", help="output folder (default: the experiment's out_dir, else runs/ppo at the "
                                     "project root); --out-dir baselines/ppo writes where the committed baseline lives")
    p.add_argument("--skip-existing", action="store_true", help="leave out the runs whose checkpoint is already in "
                   "the output folder (a sweep cut short, continued later), and start the rest seed by seed, so "
                   "that a sweep stopped early has whole seeds done")
    p.add_argument("--by-task", action="store_true", help="with --skip-existing: start the runs task by task, in "
                   "the files' order, instead (every seed of a task done before the next task starts: what "
                   "baselines/ppo/stage_v2.sh needs to evaluate each task as soon as its runs exist)")
    args = p.parse_args(argv)
    defaults = _distributed_defaults(args.experiments[0])
    configs = []
    for experiment in args.experiments:
        configs += configs_from_args(["--config", experiment] + (["--out-dir", args.out_dir] if args.out_dir else []))
    if args.tasks:
        configs = [c for c in configs if any(fnmatch.fnmatchcase(c.task, g) for g in args.tasks)]
        if not configs:
            raise SystemExit(f"no run of {' '.join(args.experiments)} matches --tasks {' '.join(args.tasks)}")
    if args.numerics:
        configs = [dataclasses.replace(c, numerics=args.numerics) for c in configs]
    if args.skip_existing:
        first: dict[str, int] = {}
        for c in configs:
            first.setdefault(c.task, len(first))
        todo = [c for c in configs if not checkpoint_file(c).is_file()]
        # task by task (in the order the files first name them), or seed by seed
        todo.sort(key=(lambda c: (first[c.task], c.seed)) if args.by_task else (lambda c: c.seed))
        print(json.dumps({"skipped_existing": len(configs) - len(todo), "to_train": len(todo)}), flush=True)
        configs = todo
        if not configs:
            return []
    backend = args.backend or defaults["backend"] or "local"
    summaries = run_sweep(configs, backend, args.workers or defaults["workers"], args.address)
    print(f"{'task':28s} {'seed':>4s} {'steps':>9s} {'eval return':>12s} {'seconds':>8s}")
    for s in summaries:
        print(f"{s['task']:28s} {s['seed']:4d} {s['env_steps']:9d} {s['eval_return_mean']:12.2f} {s['seconds']:8.1f}")
    return summaries


if __name__ == "__main__":
    run_command(main)
