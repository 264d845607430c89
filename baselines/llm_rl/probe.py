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
"""

from __future__ import annotations

import argparse
import json
import sys
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


def recorded_prompts(folder: str | Path, n: int, tokenizer: Any) -> list[tuple[list[int], list[str]]]:
    """``n`` evenly spaced (prompt ids, choices) of the guided calls recorded under ``folder``."""
    calls: list[tuple[list[int], list[str]]] = []
    for path in sorted(Path(folder).glob("*/run*-ep*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line) if line.strip() else {}
            choices = (rec.get("params") or {}).get("guided_choice")
            if rec.get("type") == "call" and choices:
                calls.append((list(rec.get("prompt_token_ids") or prompt_ids(tokenizer, rec["messages"])), choices))
    if not calls:
        raise ValueError(f"{folder}: no recorded call with guided choices (a --trajectories folder of evaluate)")
    step = max(1, len(calls) // n)
    return calls[::step][:n]


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
    ap.add_argument("trajectories", help="a trajectory folder recorded by evaluate --trajectories (a training "
                    "iteration's rollouts/iterNNN/trajectories)")
    ap.add_argument("--weights", nargs="*", default=[], help="checkpoints to compare with the base model")
    ap.add_argument("--prompts", type=int, default=64, help="how many recorded prompts (default 64)")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--dtype", choices=DTYPES, default="float32")
    args = ap.parse_args(argv)
    try:
        states = [torch.load(w, map_location="cpu", weights_only=False) for w in args.weights]
        states = [s.get("trained", s) for s in states]   # a training checkpoint, or a pinned file
        model, tok = load_model(args.model)
        prompts = recorded_prompts(args.trajectories, args.prompts, tok)
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
    print(f"{len(prompts)} recorded prompts from {args.trajectories}; mean probability of each answer")
    print("weights".ljust(40) + "".join(c.rjust(14) for c in choices) + "      TV to base")
    for label, probs in rows:
        means = [sum(p[c] for p in probs) / len(probs) for c in choices]
        tv = sum(0.5 * sum(abs(p[c] - b[c]) for c in choices) for p, b in zip(probs, rows[0][1], strict=True))
        print(label[-40:].ljust(40) + "".join(f"{m:14.3f}" for m in means) + f"{tv / len(probs):16.4f}")


if __name__ == "__main__":
    main()
