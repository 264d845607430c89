"""What training did to the agent's answers: the probability of each action of the menu, averaged over
prompts the agent really saw, under the base weights and under each checkpoint given.

    python -m baselines.llm_rl.probe runs/llm_rl/babyai5-seed0/rollouts/iter000/trajectories \\
        --weights runs/llm_rl/babyai5-seed0/checkpoint.pt [--prompts 64] [--dtype bfloat16]

The prompts are an evenly spaced sample of the LLM calls recorded under the trajectory folder (the
proxy's lines: prompt ids and the guided choices). For each prompt and each choice, the probability is
exp(sum of the choice's token log-probabilities) under the same masked, temperature-1 distribution the
server samples from (``model.sequence_logprobs``), so the six numbers of a prompt add up to 1. A
checkpoint is a training checkpoint (``checkpoint.pt``) or a pinned trained-layers file (``pin.py``).
Also prints how far each checkpoint moved the answers from the base model: the mean total-variation
distance over the prompts.

    python -m baselines.llm_rl.probe FOLDER [FOLDER ...] --calls

loads no model and counts the recorded calls instead, per folder: calls per task, how many repeat the
episode's previous prompt or any earlier prompt of the episode (what the policy's prompt cache answers),
the distinct (prompt, answer) pairs (the update's rows with ``merge_duplicates``), and the share of
each answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .model import (
    DTYPES,
    ChoiceTrie,
    load_model,
    load_trained_state,
    mixed_precision,
    precision,
    prompt_ids,
    sequence_logprobs,
    trained_state,
)


def episode_calls(folder: str | Path) -> Iterator[list[dict[str, Any]]]:
    """The call lines of each episode recorded under ``folder`` (the proxy's ``*/run*-ep*.jsonl``), in order."""
    for path in sorted(Path(folder).glob("*/run*-ep*.jsonl")):
        lines = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
        yield [rec for rec in lines if rec.get("type") == "call"]


def recorded_prompts(folder: str | Path, n: int, tokenizer: Any) -> list[tuple[list[int], list[str]]]:
    """``n`` evenly spaced (prompt ids, choices) of the guided calls recorded under ``folder``."""
    calls: list[tuple[list[int], list[str]]] = []
    for episode in episode_calls(folder):
        for rec in episode:
            choices = (rec.get("params") or {}).get("guided_choice")
            if choices:
                calls.append((list(rec.get("prompt_token_ids") or prompt_ids(tokenizer, rec["messages"])), choices))
    if not calls:
        raise ValueError(f"{folder}: no recorded call with guided choices (a --trajectories folder of evaluate)")
    step = max(1, len(calls) // n)
    return calls[::step][:n]


def call_counts(folder: str | Path) -> dict[str, Any]:
    """The recorded calls under ``folder`` counted (no model): see the module's ``--calls``."""
    tasks: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    pairs: set[tuple[str, tuple[int, ...] | str, str]] = set()
    calls = repeat_previous = repeat_earlier = 0
    for episode in episode_calls(folder):
        seen: set[tuple[int, ...] | str] = set()
        previous: tuple[int, ...] | str | None = None
        for rec in episode:
            ids = rec.get("prompt_token_ids")
            prompt = tuple(ids) if ids else json.dumps(rec.get("messages"), sort_keys=True)
            calls += 1
            tasks[str(rec.get("task"))] += 1
            answers[str(rec.get("completion"))] += 1
            pairs.add((str(rec.get("task")), prompt, str(rec.get("completion"))))
            repeat_previous += prompt == previous
            repeat_earlier += prompt in seen
            seen.add(prompt)
            previous = prompt
    if not calls:
        raise ValueError(f"{folder}: no recorded call (a --trajectories folder of evaluate)")
    return {"calls": calls, "repeat_previous": repeat_previous, "repeat_earlier": repeat_earlier,
            "distinct_pairs": len(pairs), "tasks": dict(sorted(tasks.items())), "answers": dict(answers.most_common())}


def print_call_counts(folders: list[str]) -> None:
    for folder in folders:
        c = call_counts(folder)
        n = c["calls"]
        print(f"{folder}: {n:,} calls; {c['repeat_previous']:,} ({c['repeat_previous'] / n:.0%}) repeat the episode's "
              f"previous prompt, {c['repeat_earlier']:,} ({c['repeat_earlier'] / n:.0%}) an earlier one; "
              f"{c['distinct_pairs']:,} distinct (prompt, answer) pairs")
        print("  calls per task: " + ", ".join(f"{t} {k:,}" for t, k in c["tasks"].items()))
        print("  answers: " + ", ".join(f"{a} {k / n:.3f}" for a, k in c["answers"].items()))


def choice_probabilities(model: Any, tokenizer: Any, prompts: list[tuple[list[int], list[str]]],
                         dtype: torch.dtype | None) -> list[dict[str, float]]:
    """Per prompt, each choice's probability under the model's masked temperature-1 distribution."""
    out = []
    with torch.no_grad(), precision(torch.device("cpu"), dtype):
        for ids, choices in prompts:
            trie = ChoiceTrie.build(tokenizer, choices)
            lps = sequence_logprobs(model, tokenizer, [(ids, seq, choices, 1.0) for seq in trie.sequences])
            out.append({c: float(lp.exp()) for c, lp in zip(choices, lps, strict=True)})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.probe", description=__doc__.split("\n")[0])
    ap.add_argument("trajectories", nargs="+", help="a trajectory folder recorded by evaluate --trajectories (a "
                    "training iteration's rollouts/iterNNN/trajectories); several with --calls")
    ap.add_argument("--calls", action="store_true", help="load no model; count the recorded calls of each folder")
    ap.add_argument("--weights", nargs="*", default=[], help="checkpoints to compare with the base model")
    ap.add_argument("--prompts", type=int, default=64, help="how many recorded prompts (default 64)")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--dtype", choices=DTYPES, default="float32")
    args = ap.parse_args(argv)
    if args.calls:
        try:
            print_call_counts(args.trajectories)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        return
    if len(args.trajectories) != 1:
        print("error: the probabilities read one trajectory folder (several only with --calls)", file=sys.stderr)
        sys.exit(2)
    folder = args.trajectories[0]
    try:
        states = [torch.load(w, map_location="cpu", weights_only=False) for w in args.weights]
        states = [s.get("trained", s) for s in states]   # a training checkpoint, or a pinned file
        model, tok = load_model(args.model)
        prompts = recorded_prompts(folder, args.prompts, tok)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    trained = set().union(*(s.keys() for s in states))
    for name, p in model.named_parameters():   # as in training: the trained layers float32, the rest `dtype`
        p.requires_grad_(name in trained)
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else None
    if dtype is not None:
        mixed_precision(model, dtype)
    base = trained_state(model)
    rows = [("base", choice_probabilities(model, tok, prompts, dtype))]
    for w, state in zip(args.weights, states, strict=True):
        load_trained_state(model, state)
        rows.append((w, choice_probabilities(model, tok, prompts, dtype)))
        load_trained_state(model, base)
    choices = list(rows[0][1][0])
    print(f"{len(prompts)} recorded prompts from {folder}; mean probability of each answer")
    print("weights".ljust(40) + "".join(c.rjust(14) for c in choices) + "      TV to base")
    for label, probs in rows:
        means = [sum(p[c] for p in probs) / len(probs) for c in choices]
        tv = sum(0.5 * sum(abs(p[c] - b[c]) for c in choices) for p, b in zip(probs, rows[0][1], strict=True))
        print(label[-40:].ljust(40) + "".join(f"{m:14.3f}" for m in means) + f"{tv / len(probs):16.4f}")


if __name__ == "__main__":
    main()
