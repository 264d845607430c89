"""How suites/v1.toml was made: its task table, published constants and measured references.

    python scripts/make_suite_v1.py --draft runs/v1-draft.toml
    python -m polar_bench evaluate examples/random_agent.py --suite runs/v1-draft.toml --runs 10 \
        --out runs/random-references.json
    python scripts/make_suite_v1.py --measured runs/random-references.json polar_bench/suites/v1.toml

The draft is v1 with placeholder references for the measured ones (evaluation never reads
references, so the same episodes are played). A released suite never changes: this script is the
record of how v1's measured constants came about, not something to re-run over it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

SEED = 20261202
RUNS = 3
REF_CMD = ("python -m polar_bench evaluate examples/random_agent.py --suite runs/v1-draft.toml --runs 10 "
           "(scripts/make_suite_v1.py)")

PINS = {
    "numpy": "1.26.4", "gymnasium": "1.2.0", "mujoco": "3.17.0", "dm-control": "1.0.50",
    "procgen-mirror": "0.10.7", "nle": "1.3.0", "minigrid": "3.2.0",
}

DOMAINS = [
    ("classic", "Gymnasium classic control: four small control problems with vector observations.",
     "Train on the same tasks through polar_bench.make, any seeds.",
     "500k environment steps per task"),
    ("dmc", "DeepMind Control Suite state-based tasks; 1000-step episodes, returns in [0, 1000].",
     "Train on the same tasks, any seeds.", "1M environment steps per task (the usual DMC-1M protocol)"),
    ("procgen", "Procgen Benchmark, easy mode, evaluated on levels never seen in training.",
     "Train only on levels 0-199: polar_bench.make(task, start_level=0, num_levels=200), easy mode. "
     "Evaluation plays levels 200 + seed.",
     "25M environment steps per game (Cobbe et al. 2020); report smaller budgets as such"),
    ("nethack", "NetHack Learning Environment tasks with a pinned step limit of 1000 steps.",
     "Train on the same tasks with any seeds (every seed is a new dungeon); no NLD data unless stated.",
     "10M environment steps per task; report the budget"),
    ("babyai", "BabyAI levels of rising difficulty: language-conditioned navigation and manipulation.",
     "Train on the same levels, any seeds.", "1M environment steps per level"),
]

# Procgen easy-mode R_min / R_max: Cobbe et al., "Leveraging Procedural Generation to Benchmark
# Reinforcement Learning" (arXiv:1912.01588), the constants of openai/train-procgen that the rliable
# paper used.
PROCGEN_EASY = {
    "bigfish": (1.0, 40.0), "bossfight": (0.5, 13.0), "caveflyer": (3.5, 12.0), "chaser": (0.5, 13.0),
    "climber": (2.0, 12.6), "coinrun": (5.0, 10.0), "dodgeball": (1.5, 19.0), "fruitbot": (-1.5, 32.4),
    "heist": (3.5, 10.0), "jumper": (3.0, 10.0), "leaper": (3.0, 10.0), "maze": (5.0, 10.0),
    "miner": (1.5, 13.0), "ninja": (3.5, 10.0), "plunder": (4.5, 30.0), "starpilot": (2.5, 64.0),
}
PROCGEN_SRC = ("Procgen easy-mode R_{} (Cobbe et al. 2020, arXiv:1912.01588; "
               "openai/train-procgen constants used by rliable)")

# (task, domain, episodes, options, low, high); a reference is ("measured", kind) or (value, source).
MEASURED_MEAN = ("measured", "mean")
MEASURED_P95 = ("measured", "p95")
Reference = tuple[Any, str]  # (value, source), or MEASURED_MEAN / MEASURED_P95
TASKS: list[tuple[str, str, int, dict[str, Any], Reference, Reference]] = [
    ("gym/CartPole-v1", "classic", 10, {}, MEASURED_MEAN,
     (500.0, "the maximum return: 500 steps at reward 1 (Gymnasium CartPole-v1 step limit)")),
    ("gym/Acrobot-v1", "classic", 10, {}, MEASURED_MEAN,
     (-100.0, "Gymnasium's reward_threshold for Acrobot-v1 (the 'solved' score of its registration)")),
    ("gym/MountainCar-v0", "classic", 10, {}, MEASURED_MEAN,
     (-110.0, "Gymnasium's reward_threshold for MountainCar-v0 (the 'solved' score of its registration)")),
    ("gym/Pendulum-v1", "classic", 10, {}, MEASURED_MEAN,
     (-162.24, "rl-baselines-zoo benchmark.md: A2C on Pendulum (-162.24 over 750 episodes)")),
]
for name in ["cartpole-swingup", "cheetah-run", "walker-walk", "reacher-easy", "finger-spin", "ball_in_cup-catch"]:
    TASKS.append((f"dmc/{name}", "dmc", 10, {}, (0.0, "DMC return range: rewards in [0, 1] over 1000 steps"),
                  (1000.0, "DMC return range: rewards in [0, 1] over 1000 steps")))
for game, (lo, hi) in PROCGEN_EASY.items():
    TASKS.append((f"procgen/{game}", "procgen", 20,
                  {"distribution_mode": "easy", "start_level": 200, "num_levels": 0},
                  (lo, PROCGEN_SRC.format("min")), (hi, PROCGEN_SRC.format("max"))))
NLE_SUCCESS = (1.0, "the success reward of NLE's task definition (nle/env/tasks.py: reward 1 on success)")
for task, high in [("Score", MEASURED_P95), ("Staircase", NLE_SUCCESS), ("StaircasePet", NLE_SUCCESS),
                   ("Oracle", NLE_SUCCESS), ("Gold", MEASURED_P95), ("Eat", MEASURED_P95),
                   ("Scout", MEASURED_P95)]:
    TASKS.append((f"nethack/{task}", "nethack", 10, {"max_episode_steps": 1000}, MEASURED_MEAN, high))
BABYAI_HIGH = (1.0, "the supremum of BabyAI's reward 1 - 0.9 * steps / max_steps (minigrid)")
for level in ["GoToRedBall", "GoToLocal", "PickupLoc", "PutNextLocal", "Synth"]:
    TASKS.append((f"babyai/{level}", "babyai", 20, {}, MEASURED_MEAN, BABYAI_HIGH))


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def _ref(spec, returns: list[float] | None) -> dict:
    if spec[0] != "measured":
        return {"value": float(spec[0]), "source": spec[1], "measured": False}
    if returns is None:
        return {"value": -1e9 if spec[1] == "mean" else 1e9, "source": "placeholder (draft)", "measured": True}
    if spec[1] == "mean":
        value = statistics.fmean(returns)
        source = f"random agent: mean return of {len(returns)} episodes, measured here with {REF_CMD}"
    else:
        value = statistics.quantiles(returns, n=20, method="inclusive")[-1]
        source = (f"random agent: 95th percentile of {len(returns)} episode returns (the best 5% of random play; "
                  f"no published reference exists at this step limit), measured here with {REF_CMD}")
    return {"value": round(value, 4), "source": source, "measured": True}


def render(measured: dict[str, list[float]] | None) -> str:
    lines = [
        "# polar_bench suite v1. RELEASED: never edit this file; a change is a new suite version.",
        "# docs/suites.md explains every choice; scripts/make_suite_v1.py records how it was made.",
        "",
        "[suite]",
        'name = "v1"',
        'version = "1.0.0"',
        'released = "2026-12-02"',
        'description = "Five domains, 38 tasks: classic control, DMC, Procgen (easy, unseen levels), NetHack '
        '(1000-step limit) and BabyAI; 3 runs; rliable statistics per domain."',
        f"seed = {SEED}",
        f"runs = {RUNS}",
        "episodes = 10",
        "",
        "[pins]",
    ]
    lines += [f'{json.dumps(k)} = "{v}"' for k, v in PINS.items()]
    for name, desc, training, budget in DOMAINS:
        lines += ["", "[[domains]]", f"name = {json.dumps(name)}", f"description = {json.dumps(desc)}",
                  f"training = {json.dumps(training)}", f"budget = {json.dumps(budget)}"]
    for tid, dom, episodes, options, low, high in TASKS:
        rets = measured.get(tid) if measured is not None else None
        if measured is not None and rets is None and "measured" in (low[0], high[0]):
            sys.exit(f"no measured returns for {tid}")
        lines += ["", "[[tasks]]", f"id = {json.dumps(tid)}", f"domain = {json.dumps(dom)}",
                  f"episodes = {episodes}"]
        if options:
            lines.append(f"options = {toml_value(options)}")
        lines.append(f"low = {toml_value(_ref(low, rets))}")
        lines.append(f"high = {toml_value(_ref(high, rets))}")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draft", metavar="OUT", help="write the draft suite (placeholder measured references)")
    p.add_argument("--measured", nargs=2, metavar=("RESULTS", "OUT"), help="write v1 from a random-agent results file")
    args = p.parse_args()
    if args.draft:
        Path(args.draft).parent.mkdir(parents=True, exist_ok=True)
        Path(args.draft).write_text(render(None))
    if args.measured:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from polar_bench.results import read_results

        r = read_results(args.measured[0])
        bad = [e for e in r.episodes if e.ret is None or e.status.value != "ok"]
        if bad:
            sys.exit(f"{len(bad)} episodes failed; measure again")
        returns: dict[str, list[float]] = {}
        for e in r.episodes:
            returns.setdefault(e.task, []).append(float(e.ret or 0.0))
        Path(args.measured[1]).write_text(render(returns))


if __name__ == "__main__":
    main()
