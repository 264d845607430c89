"""The program search: K candidates x N refinement rounds per (task, run), scored in the sandbox on
training seeds, the best one saved under ``programs/<task>/run<k>.py`` with a JSON record beside it.

    python -m baselines.codegen.search --tasks 'gym/*' --runs 3 --candidates 4 --rounds 3 \
        [--episodes 2] [--backend embedded|http --base-url URL [--grammar]] [--mode template|free] \
        [--skip-existing]

Run ``k`` uses LLM seed ``k``: call ``i`` of the search for (task, run k) has the seed
``call_seed(k, i, salt=task)``, so the search is reproducible with the embedded model. Training
seeds are derived with their own salt and checked to be disjoint from the suite's evaluation seeds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import polar_bench
from polar_bench.errors import LLMError
from polar_bench.llm import EmbeddedBackend, Grammar, LLMClient, Recorder, call_seed, make_client
from polar_bench.sandbox import SandboxedPolicy, SandboxViolation
from polar_bench.suite import SEED_BOUND, load_suite
from polar_bench.task_info import TaskInfo

from .templates import Template, describe_value

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
TRAIN_SALT = "polar_bench/codegen/train"
SYSTEM = ("You write short Python policies for control tasks. Answer with code only, in exactly the "
          "requested form.")


# ---------------------------------------------------------------------------------- seeds
def train_seeds(task_id: str, n: int, *, exclude: Collection[int] = frozenset()) -> list[int]:
    """``n`` training seeds for ``task_id``, derived with a salt of their own and never in ``exclude``
    (the suite's evaluation seeds)."""
    seeds: list[int] = []
    i = 0
    while len(seeds) < n:
        digest = hashlib.sha256(f"{TRAIN_SALT}/{task_id}/{i}".encode()).hexdigest()
        s = int(digest[:8], 16) % SEED_BOUND
        if s not in exclude and s not in seeds:
            seeds.append(s)
        i += 1
    return seeds


def evaluation_seeds(task_id: str, suites: Collection[str] | None = None) -> set[int]:
    """Every evaluation seed of ``task_id`` in ``suites`` (default: every released suite, so that a
    program searched for v1 is not trained on a seed that v2 evaluates, or the other way)."""
    from polar_bench.leaderboard import released_suites

    out: set[int] = set()
    for suite in released_suites().values() if suites is None else map(load_suite, suites):
        if task_id in suite.task_ids:
            out.update(suite.task(task_id).seeds)
    return out


# ---------------------------------------------------------------------------------- scoring
@dataclass
class Score:
    returns: list[float] = field(default_factory=list)
    error: str | None = None          # "kind: reason" of the first violation, if any
    steps: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.returns)) if self.returns else None

    def key(self) -> tuple:
        """Sort key, larger is better: programs that ran cleanly before failed ones."""
        return (self.ok, self.mean if self.mean is not None else -math.inf)

    def to_json(self) -> dict:
        return {"mean": self.mean, "returns": self.returns, "error": self.error, "steps": self.steps}


def run_program(program: str, task_id: str, seeds: list[int], *, options: dict | None = None,
                max_steps: int | None = None, step_timeout: float = 1.0) -> Score:
    """Play ``program`` in a `SandboxedPolicy` on ``seeds``; a violation ends the scoring with its
    reason (the return of the episode so far is kept)."""
    harness = polar_bench.make(task_id, **(options or {}))
    info = harness.task_info
    score = Score()
    try:
        with SandboxedPolicy(program, action_space=info.action_space, step_timeout=step_timeout,
                             cpu_seconds=120, memory_mb=256, max_output_bytes=4096) as policy:
            for seed in seeds:
                obs, _ = harness.reset(seed=seed)
                total, done, t = 0.0, False, 0
                try:
                    policy.reset(seed)
                    while not done:
                        action = policy.act(obs)
                        obs, reward, term, trunc, _ = harness.step(action)
                        total += float(reward)
                        t += 1
                        done = term or trunc or (max_steps is not None and t >= max_steps)
                except SandboxViolation as v:
                    score.returns.append(total)
                    score.steps += t
                    score.error = f"{v.kind}: {v.reason} (episode seed {seed}, step {t})"
                    tb = (v.traceback or "").strip().splitlines()
                    if tb:
                        score.error += "\n" + "\n".join(tb[-3:])
                    return score
                score.returns.append(total)
                score.steps += t
    except SandboxViolation as v:  # failed to load
        score.error = f"{v.kind}: {v.reason}"
    finally:
        harness.close()
    return score


def example_observations(task_id: str, seed: int, *, options: dict | None = None, n: int = 3,
                         every: int = 5) -> list[Any]:
    """A few observations of random play on a training seed, for the prompt."""
    harness = polar_bench.make(task_id, **(options or {}))
    rng = np.random.default_rng(seed)
    harness.action_space.seed(int(rng.integers(2**31)))
    out = []
    try:
        obs, _ = harness.reset(seed=seed)
        for t in range(n * every):
            if t % every == 0:
                out.append(describe_value(obs))
            obs, _, term, trunc, _ = harness.step(harness.action_space.sample())
            if term or trunc:
                break
    finally:
        harness.close()
    return out


# ---------------------------------------------------------------------------------- prompts
def task_text(task: TaskInfo, template: Template, examples: list[Any]) -> str:
    lines = [f"Task: {task.id}. {task.description}", ""]
    if template.names is not None:
        lines.append("The observation is a list of numbers; the program names them:")
        components = list(task.observation_components)
        for i, name in enumerate(template.names):
            comp = components[i] if i < len(components) else None
            extra = ""
            if comp is not None:
                extra = "".join([f" ({comp.unit})" if comp.unit else "",
                                 f": {comp.description}" if comp.description else ""])
            lines.append(f"- {name}{extra}")
    else:
        lines.append("The observation has these parts:")
        for comp in task.observation_components:
            lines.append(f"- {comp.name}" + (f": {comp.description}" if comp.description else ""))
    lines.append("")
    if template.discrete:
        lines.append("Actions (return the number):")
        for i, comp in enumerate(task.action_components):
            lines.append(f"- {i}: {comp.name}")
    else:
        lines.append("Action: a list of numbers in [-1, 1], one per component:")
        for i, comp in enumerate(task.action_components):
            rng = f" (-1 is {comp.low:g}, 1 is {comp.high:g})" if comp.low is not None else ""
            lines.append(f"- a{i}: {comp.name}{': ' + comp.description if comp.description else ''}{rng}")
    lines += ["", "Example observations:"]
    lines += [f"- {json.dumps(ex)}" for ex in examples]
    return "\n".join(lines)


def first_prompt(task: TaskInfo, template: Template, examples: list[Any]) -> list[dict]:
    user = "\n".join([task_text(task, template, examples), "",
                      "The policy is a Python function with this signature:", "",
                      template.header().rstrip("\n") + "\n        ...", "",
                      template.format_hint(),
                      "Higher return is better."])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def feedback_text(program: str, score: Score) -> str:
    rets = ", ".join(f"{r:.1f}" for r in score.returns) or "none"
    lines = ["```python", program.rstrip("\n"), "```",
             f"Returns on the training episodes: {rets}"
             + (f" (mean {score.mean:.1f})" if score.mean is not None else "")]
    if score.error:
        lines.append(f"Error: {score.error}")
    return "\n".join(lines)


def refine_prompt(task: TaskInfo, template: Template, examples: list[Any], previous: tuple[str, Score],
                  best: tuple[str, Score] | None) -> list[dict]:
    parts = [task_text(task, template, examples), "", "Your previous program:", feedback_text(*previous)]
    if best is not None and best[0] != previous[0]:
        parts += ["", "The best program so far:", feedback_text(*best)]
    parts += ["", ("Fix the error and write a better program." if previous[1].error
                   else "Write a better program that gets a higher return."),
              template.format_hint()]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


# ---------------------------------------------------------------------------------- search
def search_task(client: LLMClient, task_id: str, run: int, *, candidates: int = 3, rounds: int = 2,
                episodes: int = 2, mode: str = "template", options: dict | None = None,
                temperature: float = 1.0, max_tokens: int = 96, max_steps: int | None = None,
                log: Callable[[str], None] = lambda s: None) -> dict:
    """Search programs for (task, run); return the record saved with the chosen program."""
    t0 = time.monotonic()
    harness = polar_bench.make(task_id, **(options or {}))
    task = harness.task_info
    harness.close()
    template = Template(task, mode)
    if template.kind == "linear":
        # one line of up to three weighted terms per action component: 96 tokens cut the answer
        # short (and so made every candidate invalid) on 6-dimensional actions (cheetah, walker)
        max_tokens = max(max_tokens, 48 * template.action_dims)
    seeds = train_seeds(task_id, episodes, exclude=evaluation_seeds(task_id))
    examples = example_observations(task_id, seeds[0], options=options)
    gbnf = template.grammar()
    constraint = Grammar(gbnf, parse=template.parse) if gbnf else None
    client.reset(run, task=task_id, run=run)
    lineage: list[tuple[str, Score] | None] = [None] * candidates
    tried: list[dict] = []
    best: tuple[str, Score] | None = None
    best_at = (0, 0)
    call = 0
    last_failure = ""
    for r in range(rounds):
        for k in range(candidates):
            previous = lineage[k]
            if previous is None:
                messages = first_prompt(task, template, examples)
            else:
                messages = refine_prompt(task, template, examples, previous, best)
            try:
                out = client.complete(messages, constraint=constraint, seed=call_seed(run, call, task_id),
                                      temperature=temperature, max_tokens=max_tokens)
            except LLMError as exc:
                # e.g. a refinement prompt longer than the model's context: this candidate fails with
                # the reason, and its next round starts afresh; the search goes on.
                call += 1
                last_failure = str(exc)
                score = Score(error=f"llm: {exc}")
                lineage[k] = None
                tried.append({"round": r, "candidate": k, "prompt": messages[-1]["content"],
                              "program": None, **score.to_json()})
                log(f"{task_id} run {run} round {r} cand {k}: no program (llm: {exc})")
                continue
            call += 1
            program = template.parse(out.text)
            if program is None:
                score = Score(error="syntax: the answer is not a valid program (it must parse as Python "
                                    "and define act(observation))")
                program = template.assemble(out.text) if mode == "template" else out.text
            else:
                score = run_program(program, task_id, seeds, options=options, max_steps=max_steps)
            lineage[k] = (program, score)
            tried.append({"round": r, "candidate": k, "prompt": messages[-1]["content"],
                          "program": program, **score.to_json()})
            log(f"{task_id} run {run} round {r} cand {k}: mean {score.mean} "
                f"{'error ' + score.error.splitlines()[0] if score.error else ''}")
            if best is None or score.key() > best[1].key():
                best, best_at = (program, score), (r, k)
    if best is None:  # every LLM call failed: there is no program to keep
        raise LLMError(f"{task_id} run {run}: all {rounds * candidates} LLM calls of the search failed, so "
                       f"there is no program; the last said: {last_failure}")
    usage = client.recorder.usage()
    return {
        "task": task_id, "run": run, "llm_seed": run, "mode": mode,
        "candidates": candidates, "rounds": rounds, "train_seeds": seeds,
        "program": best[0], "program_sha256": hashlib.sha256(best[0].encode()).hexdigest(),
        "train": {**best[1].to_json(), "round": best_at[0], "candidate": best_at[1]},
        "llm": {**usage, "model": client.identity, "temperature": temperature, "max_tokens": max_tokens},
        "search_seconds": round(time.monotonic() - t0, 3),
        "tried": tried,
    }


def program_path(task_id: str, run: int, root: Path = PROGRAMS) -> Path:
    return root / task_id / f"run{run}.py"


def save(record: dict, root: Path = PROGRAMS) -> Path:
    path = program_path(record["task"], record["run"], root)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# polar_bench codegen: {record['task']} run {record['run']} "
              f"(LLM seed {record['llm_seed']}, {record['candidates']} candidates x {record['rounds']} "
              f"rounds, training mean {record['train']['mean']})\n")
    path.write_text(header + record["program"])
    path.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    return path


def make_llm(args) -> LLMClient:
    if args.backend == "embedded":
        # 4096 tokens of context: refinement prompts (task, examples, previous program, feedback) of
        # tasks with many observation components exceed the default 2048 (SmolLM2 was trained to 8192).
        return LLMClient(EmbeddedBackend(args.model, n_ctx=4096, n_threads=args.threads),
                         recorder=Recorder(trace=False))
    return make_client("openai", base_url=args.base_url, model=args.model or "default",
                       grammar=args.grammar, trace=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m baselines.codegen.search", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="v1")
    p.add_argument("--tasks", nargs="*", default=None, help="task id globs, e.g. 'gym/*'")
    p.add_argument("--domains", nargs="*", default=None)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--first-run", type=int, default=0)
    p.add_argument("--candidates", "-K", type=int, default=3)
    p.add_argument("--rounds", "-N", type=int, default=2)
    p.add_argument("--episodes", type=int, default=2, help="training episodes per program")
    p.add_argument("--max-steps", type=int, default=None, help="cut training episodes short")
    p.add_argument("--mode", choices=("template", "free"), default="template")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--backend", choices=("embedded", "http"), default="embedded")
    p.add_argument("--base-url", default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--grammar", action="store_true", help="send the GBNF grammar (llama.cpp servers)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(PROGRAMS), help="where to save programs")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--skip-existing", action="store_true", help="leave out the (task, run) pairs whose record is "
                   "already in --out (a search cut short, continued later; each pair is deterministic)")
    args = p.parse_args(argv)
    if args.backend == "http" and not args.base_url:
        p.error("--backend http needs --base-url")
    suite = load_suite(args.suite)
    specs = suite.select(args.tasks, args.domains)
    client = make_llm(args)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    for spec in specs:
        for run in range(args.first_run, args.first_run + args.runs):
            if args.skip_existing and program_path(spec.id, run, Path(args.out)).with_suffix(".json").is_file():
                print(f"{spec.id} run {run}: already searched, skipped", flush=True)
                continue
            rec = search_task(client, spec.id, run, candidates=args.candidates, rounds=args.rounds,
                              episodes=args.episodes, mode=args.mode, options=dict(spec.options),
                              temperature=args.temperature, max_tokens=args.max_tokens,
                              max_steps=args.max_steps, log=log)
            path = save(rec, Path(args.out))
            u = rec["llm"]
            print(f"{spec.id} run {run}: train mean {rec['train']['mean']} "
                  f"(round {rec['train']['round']}, cand {rec['train']['candidate']}); "
                  f"LLM {u['calls']} calls, {u['prompt_tokens']}+{u['completion_tokens']} tokens, "
                  f"{u['seconds']:.1f} s; search {rec['search_seconds']:.1f} s -> {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
