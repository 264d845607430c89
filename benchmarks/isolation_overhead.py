"""What the agent process costs, and what batched acting buys back, side by side in one run.

    python benchmarks/isolation_overhead.py [--part all|random|ppo] [--workers 2] [--episodes 16] [--repeat N]

1. The random agent on the whole of suite v1 (1,770 episodes), in-process one episode per worker at a
   time (``--in-process --envs-per-worker 1``, the path before isolation) and isolated with the
   defaults (8 lanes per worker, one request to the agent process per step for all of them), same
   workers. Target: isolated at most 1.5x the in-process time.
2. The PPO baseline on one task of each family (gym/CartPole-v1, dmc/cheetah-run, procgen/coinrun,
   nethack/Score, babyai/GoToLocal; ``--episodes`` each) in one worker's `EpisodeRunner`: in-process
   acting one lane at a time against isolated with ``act_batch`` over 8 lanes, with one agent process
   (the default) and with ``--agent-processes 2`` (lane i served by process i % 2, each on a core).
   Environment steps per second once started (the agent processes' start-up, importing torch and
   loading the checkpoint, is paid once per worker and not timed), per task and overall. Target: at
   least 2x.
   Where a trained checkpoint is missing (NetHack and Procgen are not committed), an untrained
   network of the same architecture is saved in a temporary folder and played instead: speed does
   not depend on the weights.

Also prints that both modes gave identical episodes (returns and trajectory digests), as they must.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polar_bench.evaluate import EvalConfig, run_evaluation  # noqa: E402
from polar_bench.suite import episode_seed, load_suite  # noqa: E402

PPO_TASKS = ["gym/CartPole-v1", "dmc/cheetah-run", "procgen/coinrun", "nethack/Score", "babyai/GoToLocal"]


def evaluate(agent: str, tasks: list, runs: int, out: Path, *, workers: int, in_process: bool,
             lanes: int = 1, episodes: int | None = None) -> tuple[float, dict]:
    suite = load_suite("v1")
    cfg = EvalConfig(suite=suite, agent_path=agent, out=str(out), tasks=tasks, runs=runs, workers=workers,
                     progress=False, in_process=in_process, envs_per_worker=lanes, episodes_override=episodes)
    t0 = time.perf_counter()
    results, _ = run_evaluation(cfg)
    return time.perf_counter() - t0, results


def _same(a, b) -> str:
    def key(e):
        return (e.task, e.run, e.seed, e.ret, e.length, e.status.value, e.digest)
    same = sorted(map(key, a.episodes)) == sorted(map(key, b.episodes))
    return "identical episodes" if same else "EPISODES DIFFER"


def part_random(workers: int, tmp: Path, repeat: int = 1) -> None:
    """``repeat`` pairs, each mode in turn: on a shared machine one pair's ratio moves by +-0.15, so the
    median of several says more than any one of them."""
    suite = load_suite("v1")
    agent = str(ROOT / "examples" / "random_agent.py")
    ratios = []
    for _ in range(repeat):
        t_in, d_in = evaluate(agent, list(suite.tasks), suite.runs, tmp / "in.json", workers=workers,
                              in_process=True)
        t_iso, d_iso = evaluate(agent, list(suite.tasks), suite.runs, tmp / "iso.json", workers=workers,
                                in_process=False, lanes=8)
        ratios.append(t_iso / t_in)
        print(f"random agent, full v1 ({len(d_in.episodes)} episodes, {workers} workers): in-process "
              f"{t_in:.1f} s, isolated {t_iso:.1f} s, ratio {t_iso / t_in:.2f} (target <= 1.5); "
              f"{_same(d_in, d_iso)}", flush=True)
        for f in ("in.json", "iso.json"):  # the next pair evaluates afresh, not from the journals
            for path in tmp.glob(f"{Path(f).stem}*"):
                path.unlink()
    if repeat > 1:
        print(f"random agent: median ratio of {repeat} pairs {statistics.median(ratios):.2f} "
              f"(range {min(ratios):.2f}-{max(ratios):.2f}; target <= 1.5)")


def _untrained_checkpoints(folder: Path) -> None:
    """Untrained PPO networks for the benchmark tasks whose trained checkpoints are not here."""
    import polar_bench
    from baselines.ppo.agent import checkpoint_dir
    from baselines.ppo.networks import ObservationPreprocessor, Policy, build_network, save_checkpoint

    for task in PPO_TASKS:
        for run in range(1):
            target = folder / task / f"run{run}.pt"
            trained = checkpoint_dir() / task / f"run{run}.pt"
            if trained.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(trained, target)
                continue
            info = polar_bench.make(task).task_info
            policy = Policy(ObservationPreprocessor(info.observation_space),
                            build_network(info.observation_space, info.action_space))
            save_checkpoint(target, policy, task_id=task, domain=info.domain, env_steps=0, config={},
                            eval_return=None)
            print(f"  {task}: no trained checkpoint here, an untrained network of the same architecture")


def _play(runner, units: list, lanes: int) -> tuple[float, list]:
    """Play ``units`` as a worker of ``evaluate`` does: ``lanes`` at once, each lane that comes free
    taking the next unit."""
    t0 = time.perf_counter()
    rest = list(units[lanes:])
    records = runner.run_batch(units[:lanes], on_record=lambda rec: [rest.pop(0)] if rest else [])
    return time.perf_counter() - t0, records


def _played(records: list) -> list:
    return [(r["return"], r["length"], r.get("digest")) for r in records]


def part_ppo(episodes: int, tmp: Path) -> None:
    from polar_bench.evaluate import EpisodeRunner

    folder = tmp / "checkpoints"
    _untrained_checkpoints(folder)
    os.environ["POLAR_PPO_CHECKPOINTS"] = str(folder)
    suite = load_suite("v1")
    options = {t.id: dict(t.options) for t in suite.tasks}
    agent = str(ROOT / "baselines" / "ppo" / "agent.py")
    total_in = total_iso = total_pool = steps_all = 0.0
    for task in PPO_TASKS:
        units = [(task, 0, i, episode_seed(suite.seed, task, i)) for i in range(episodes)]
        timings = {}
        for mode, lanes, processes in (("in-process", 1, 1), ("isolated", 8, 1), ("pool", 8, 2)):
            runner = EpisodeRunner(agent, options, 60.0, 1800.0, lanes, in_process=mode == "in-process",
                                   agent_processes=processes)
            # start-up (agent processes, torch, checkpoint): not timed; one episode per agent process
            runner.run_batch([(task, 0, 99 + k, 12345 + k) for k in range(processes)])
            timings[mode] = _play(runner, units, lanes)
            runner.close()
        (t_in, r_in), (t_iso, r_iso), (t_pool, r_pool) = (timings[m] for m in ("in-process", "isolated", "pool"))
        steps = sum(r["length"] for r in r_in)
        same = _played(r_in) == _played(r_iso) == _played(r_pool)
        total_in += t_in
        total_iso += t_iso
        total_pool += t_pool
        steps_all += steps
        print(f"  {task:18s} {steps:7d} steps: in-process 1 lane {steps / t_in:8.0f} steps/s, isolated act_batch "
              f"8 lanes {steps / t_iso:8.0f} steps/s (ratio {t_in / t_iso:.2f}), with 2 agent processes "
              f"{steps / t_pool:8.0f} steps/s (ratio {t_in / t_pool:.2f}); "
              f"{'identical episodes' if same else 'EPISODES DIFFER'}")
    print(f"PPO acting, one task per family ({episodes} episodes each, one worker, start-up not timed): in-process "
          f"{steps_all / total_in:.0f} steps/s; isolated act_batch, 8 lanes: one agent process "
          f"{steps_all / total_iso:.0f} steps/s, ratio {total_in / total_iso:.2f}; two agent processes "
          f"(--agent-processes 2) {steps_all / total_pool:.0f} steps/s, ratio {total_in / total_pool:.2f} "
          f"(target >= 2)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("all", "random", "ppo"), default="all")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--episodes", type=int, default=16, help="episodes per PPO task (default 16)")
    p.add_argument("--repeat", type=int, default=1, help="pairs of random-agent runs, each mode in turn; "
                                                          "prints the median ratio too (default 1)")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="polar_bench_iso_bench_"))
    try:
        if args.part in ("all", "random"):
            part_random(args.workers, tmp, max(1, args.repeat))
        if args.part in ("all", "ppo"):
            part_ppo(args.episodes, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
