"""How suite v2 is made: v1's tasks with NetHack and BabyAI scored by what they ask, and Atari 100k.

    python scripts/make_suite_v2.py --draft runs/v2-draft.toml
    python -m polar_bench evaluate examples/random_agent.py --suite runs/v2-draft.toml --runs 10 \
        --tasks 'nethack/Staircase*' nethack/Oracle --out runs/v2-random-success.json
    python scripts/babyai_bot_references.py --suite runs/v2-draft.toml --out runs/babyai-bot.json
    python scripts/make_suite_v2.py --random runs/v2-random-success.json --bot runs/babyai-bot.json \
        --strong runs/nethack-strong.json --out polar_bench/suites/v2.toml

Changes from v1 (docs/suites.md, "Suite v2"):

* NetHack Staircase, StaircasePet and Oracle are scored by ``success`` (NLE's own verdict, recorded by
  the harness): low = the random agent's success rate on the same seeds, high = 1 (the goal reached in
  every episode). v1 scored their returns, which NLE's -0.01 penalty for steps that do not advance game
  time dominates.
* NetHack Score, Gold, Eat and Scout keep their return, but their ``high`` must be a strong agent's
  result (a published one, cited, or one measured and described), given in ``--strong`` as
  ``{"nethack/Score": {"value": ..., "source": "..."}, ...}``; the script refuses to write v2 without
  them. v1's high was the random agent's 95th percentile.
* BabyAI's high is the mean return of minigrid's BabyAI bot on the evaluation seeds
  (scripts/babyai_bot_references.py), which an agent can reach; v1's was the unreachable supremum 1.
* A new domain, atari100k: the 26 games of the Atari 100k benchmark (docs/families/atari.md) with the
  random and human scores of ``polar_bench/data/atari100k`` as low and high, so results sit beside the
  published runs (``compare --published atari100k``).
* 5 runs (at 3 the rescaled interval covers 92.8 %, under the 93 % bar of docs/scoring.md), ale-py pinned.
* An ``[llm]`` budget per episode (1000 calls, 1M tokens), enforced by the LLM proxy.

The seed stays v1's, so the tasks the suites share are played on the same episode seeds, and v1's
measured random-agent lows (means over those seeds) carry over with their sources.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import make_suite_v1 as v1  # noqa: E402  (the scripts folder is not a package)

RUNS = 5
PINS = {**v1.PINS, "ale-py": "0.12.1"}
SUCCESS_TASKS = ("nethack/Staircase", "nethack/StaircasePet", "nethack/Oracle")
STRONG_TASKS = ("nethack/Score", "nethack/Gold", "nethack/Eat", "nethack/Scout")
ATARI_DOMAIN = ("atari100k", "The 26 games of the Atari 100k benchmark under the protocol of the papers rliable "
                "analysed (docs/families/atari.md); human-normalized scores.",
                "Train on the same 26 games through polar_bench.make (options as in the suite), any seeds, "
                "at most 100k agent steps (400k frames) per game.",
                "100k agent steps (400k frames) per game: the Atari 100k protocol (Kaiser et al. 2019)")
ATARI_SOURCE = ("{kind} score of {game} used by rliable's Atari 100k analysis (Agarwal et al. 2021; "
                "polar_bench/data/atari100k/{file})")
SUCCESS_HIGH = {"value": 1.0, "source": "the goal reached in every episode (NLE's TASK_SUCCESSFUL verdict)",
                "measured": False}
DRAFT = {"value": 1e9, "source": "placeholder (draft)", "measured": True}
# The per-episode LLM budget the proxy enforces (docs/suites.md, "LLM budget"): one call per step of the
# longest non-Atari episode (NetHack's 1000-step limit), about 1000 tokens a call. An Atari agent (up to
# 27,000 steps an episode) must therefore decide several steps per call.
LLM_BUDGET = {"calls_per_episode": 1000, "tokens_per_episode": 1_000_000}


def _v1_tasks() -> dict[str, dict[str, Any]]:
    """v1's released task tables (ids in order), read from the packaged file."""
    import tomllib

    data = tomllib.loads((Path(__file__).resolve().parent.parent / "polar_bench/suites/v1.toml").read_text())
    return {t["id"]: t for t in data["tasks"]}


def tasks(random_success: dict[str, float] | None, bot: dict[str, float] | None,
          strong: dict[str, dict] | None) -> list[dict[str, Any]]:
    """Every task table of v2, in order. With all three inputs None: the draft (placeholders where a
    value is still to be measured); otherwise every input must cover its tasks."""
    draft = random_success is None and bot is None and strong is None
    out = []
    for tid, t in _v1_tasks().items():
        t = {k: (dict(v) if isinstance(v, dict) else v) for k, v in t.items()}
        if tid in SUCCESS_TASKS:
            t["metric"] = "success"
            rate = None if draft else (random_success or {}).get(tid)
            if rate is None and not draft:
                sys.exit(f"no random-agent success rate for {tid}: run the evaluate step of the docstring")
            t["low"] = DRAFT | {"value": -1e9} if rate is None else {
                "value": round(rate, 4), "measured": True,
                "source": "random agent: success rate over 100 episodes on the suite's seeds, measured here with "
                          "python -m polar_bench evaluate examples/random_agent.py --runs 10 "
                          "(scripts/make_suite_v2.py)"}
            t["high"] = dict(SUCCESS_HIGH)
        elif tid in STRONG_TASKS:
            ref = None if draft else (strong or {}).get(tid)
            if ref is None and not draft:
                sys.exit(f"no strong upper reference for {tid}: give it in --strong with its source")
            t["high"] = DRAFT if ref is None else {"value": float(ref["value"]), "source": str(ref["source"]),
                                                   "measured": bool(ref.get("measured", True))}
        elif tid.startswith("babyai/"):
            mean = None if draft else (bot or {}).get(tid)
            if mean is None and not draft:
                sys.exit(f"no BabyAI bot return for {tid}: run scripts/babyai_bot_references.py")
            t["high"] = DRAFT if mean is None else {
                "value": round(mean, 4), "measured": True,
                "source": "minigrid's BabyAI bot (minigrid.utils.baby_ai_bot.BabyAIBot): mean return on the "
                          "suite's evaluation seeds, measured here with scripts/babyai_bot_references.py"}
        out.append(t)
    data = Path(__file__).resolve().parent.parent / "polar_bench/data/atari100k"
    rand = json.loads((data / "RANDOM.json").read_text())
    human = json.loads((data / "HUMAN.json").read_text())
    from polar_bench.harness.atari import GAMES

    for game in sorted(GAMES):
        out.append({"id": f"atari/{game}", "domain": "atari100k", "episodes": 10,
                    "low": {"value": float(rand[game][0]), "measured": False,
                            "source": ATARI_SOURCE.format(kind="random-agent", game=game, file="RANDOM.json")},
                    "high": {"value": float(human[game][0]), "measured": False,
                             "source": ATARI_SOURCE.format(kind="human", game=game, file="HUMAN.json")}})
    return out


def render(task_tables: list[dict[str, Any]], draft: bool) -> str:
    lines = [
        "# polar_bench suite v2." + (" DRAFT: placeholders, never evaluate agents on it." if draft else
                                     " RELEASED: never edit this file; a change is a new suite version."),
        "# docs/suites.md explains every choice; scripts/make_suite_v2.py records how it was made.",
        "",
        "[suite]",
        'name = "v2"',
        'version = "2.0.0"',
        'description = "Six domains, 64 tasks: v1\'s five with NetHack and BabyAI scored by what their tasks ask, '
        'and the 26 games of Atari 100k; 5 runs; rliable statistics per domain."',
        f"seed = {v1.SEED}",
        f"runs = {RUNS}",
        "episodes = 10",
        "",
        "[pins]",
    ]
    lines += [f'{json.dumps(k)} = "{v}"' for k, v in PINS.items()]
    lines += ["", "[llm]"] + [f"{k} = {v}" for k, v in LLM_BUDGET.items()]
    for name, desc, training, budget in [*v1.DOMAINS, ATARI_DOMAIN]:
        lines += ["", "[[domains]]", f"name = {json.dumps(name)}", f"description = {json.dumps(desc)}",
                  f"training = {json.dumps(training)}", f"budget = {json.dumps(budget)}"]
    for t in task_tables:
        lines += ["", "[[tasks]]", f"id = {json.dumps(t['id'])}", f"domain = {json.dumps(t['domain'])}",
                  f"episodes = {t['episodes']}"]
        if t.get("metric"):
            lines.append(f"metric = {json.dumps(t['metric'])}")
        if t.get("options"):
            lines.append(f"options = {v1.toml_value(t['options'])}")
        for side in ("low", "high"):
            ref = {k: t[side][k] for k in ("value", "source", "measured")}
            lines.append(f"{side} = {v1.toml_value(ref)}")
    return "\n".join(lines) + "\n"


def _success_rates(path: str) -> dict[str, float]:
    from polar_bench.analysis import episode_value
    from polar_bench.results import read_results

    r = read_results(path)
    bad = [e for e in r.episodes if e.status.value != "ok"]
    if bad:
        sys.exit(f"{len(bad)} episodes failed; measure again")
    by: dict[str, list[float]] = {}
    for e in r.episodes:
        by.setdefault(e.task, []).append(episode_value(e, "success"))
    return {k: sum(v) / len(v) for k, v in by.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draft", metavar="OUT", help="write the draft suite (placeholders where a value is measured)")
    p.add_argument("--random", metavar="RESULTS", help="random-agent results on the success-scored tasks")
    p.add_argument("--bot", metavar="JSON", help="scripts/babyai_bot_references.py output")
    p.add_argument("--strong", metavar="JSON", help="strong references of Score, Gold, Eat and Scout with sources")
    p.add_argument("--out", metavar="OUT", help="write v2 from the three inputs")
    args = p.parse_args()
    if args.draft:
        Path(args.draft).parent.mkdir(parents=True, exist_ok=True)
        Path(args.draft).write_text(render(tasks(None, None, None), draft=True))
    if args.out:
        if not (args.random and args.bot and args.strong):
            sys.exit("--out needs --random, --bot and --strong")
        bot = {k: v["mean_return"] for k, v in json.loads(Path(args.bot).read_text()).items()}
        strong = json.loads(Path(args.strong).read_text())
        Path(args.out).write_text(render(tasks(_success_rates(args.random), bot, strong), draft=False))


if __name__ == "__main__":
    main()
