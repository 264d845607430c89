"""REINFORCE with a group baseline (GRPO-style advantages; one on-policy step per batch, or PPO-clipped epochs)
for the LLM agent itself, on BabyAI, from the trajectories that polar_bench's LLM proxy records.

    python -m baselines.llm_rl.train --config baselines/llm_rl/experiments/gotoredball.yaml
    python -m baselines.llm_rl.train --config ... --resume          # continue from the last checkpoint

One iteration:
  1. serve the current weights (``server.py``, in a thread of this process, on a free 127.0.0.1 port,
     with the iteration as sampling salt);
  2. ``python -m polar_bench evaluate baselines/llm_rl/agent.py --suite <training suite>
     --llm-upstream <that server> --trajectories <folder>``: the training suite (written from the YAML)
     lists the training seeds only, checked disjoint from the evaluation suite's seeds; its ``runs``
     are the group size (each run samples its own answers);
  3. read the trajectory lines: (prompt ids, completion ids, guided choices, temperature) per LLM
     call, and the episode's return from the last line;
  4. advantage of an episode = (return - mean of its group) / (std of its group + eps), a group being
     the runs of one (task, seed) (or 1 for a successful episode, ``baseline: success``); every call of the
     episode gets it; loss = -mean(A * log pi(completion)); one Adam step on the last ``trainable_layers``
     decoder layers (the rest stays frozen), or ``epochs`` steps on PPO's clipped objective, optionally
     with a KL penalty to the base model (``kl``);
  5. checkpoint (trained layers, optimizer, RNG states, iteration, history) so --resume continues exactly;
  6. log mean return, success rate, loss, tokens, env steps and wall time to TensorBoard and metrics.csv.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .curriculum import Curriculum, CurriculumConfig, Planner, known_settings
from .model import (
    DTYPES,
    HiddenCapture,
    Policy,
    load_model,
    load_trained_state,
    mixed_precision,
    pick_device,
    precision,
    prompt_ids,
    sequence_logprobs,
    state_digest,
    trainable_parameters,
    trained_state,
)

if TYPE_CHECKING:
    from .server import Replicas

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
AGENT = HERE / "agent.py"


@dataclass
class TaskSpec:
    task: str
    seeds: list[int]
    max_episode_steps: int | None = None


@dataclass(frozen=True)
class ValidationConfig:
    """The learning curve on held-out seeds: every ``every`` iterations (and before the first, and after
    the last), each task is played on ``seeds`` (disjoint from the training pools and from the evaluation
    suite's seeds) by ``runs`` runs, and scored as the evaluation suite scores it (its references, IQM
    over runs x tasks with a stratified-bootstrap interval). ``every: 0``: no validation."""

    every: int = 0
    seeds: tuple[int, ...] = ()
    runs: int = 3
    reps: int = 2000  # bootstrap replicates of the interval

    @classmethod
    def from_mapping(cls, raw: dict | None) -> ValidationConfig:
        raw = known_settings(cls, raw, "validation")
        if "seeds" in raw:
            raw["seeds"] = tuple(int(x) for x in raw["seeds"])
        out = cls(**raw)
        if out.every < 0 or out.runs < 1 or (out.every and not out.seeds):
            raise ValueError("validation needs every >= 0, runs >= 1 and, when every > 0, some seeds")
        return out


@dataclass
class Config:
    name: str
    model: str = "smollm2"
    tasks: list[TaskSpec] = field(default_factory=list)
    group_size: int = 2          # runs per (task, seed): the group of the baseline
    baseline: str = "group"      # "group": mean/std over the runs of a (task, seed); "batch": over the task's batch;
                                 # "success": imitate the successful episodes (rejection-sampling fine-tuning)
    normalize: str = "episode"   # "episode": each episode weighs the same; "sample": each LLM call does
    iterations: int = 4
    lr: float = 1e-4
    trainable_layers: int = 2
    minibatch: int = 16          # samples per forward/backward (gradient accumulation)
    max_grad_norm: float = 1.0
    epochs: int = 1              # optimizer steps per batch (above 1: PPO's clipped ratio keeps them close)
    clip: float = 0.2            # PPO's ratio clip (epochs > 1 or kl > 0)
    kl: float = 0.0              # weight of the KL penalty to the base model's trained layers (0: none)
    merge_duplicates: bool = False  # one forward/backward per distinct (prompt, answer) of the batch
    step_credit: float = 0.0     # weight of the step-level anchor-state advantage added to the episode's
    gamma: float = 0.95          # its discount of the return to go
    seed: int = 0
    threads: int = 0
    workers: int = 1             # episodes a rollout plays at once (polar_bench evaluate --workers)
    replicas: int = 1            # identical copies of the policy serving them, so that workers answer in parallel
                                 # (answers and kept hidden states do not change: tests/test_llm_rl.py)
    update_threads: int = 0      # torch threads of the update (0: as `threads`); a count may change the bits
                                 # (babyai5-group seed 0 gave the same on 1 and 2: README)
    device: str = "cpu"          # cpu, cuda, cuda:N, or auto (a CUDA GPU where torch sees one)
    dtype: str = "float32"       # bfloat16: frozen weights stored and every matrix product run in bfloat16,
                                 # the trained weights kept float32 for Adam (serving during training too)
    eval_suite: str = "v1"       # the suite whose evaluation seeds training must not touch
    allow_version_mismatch: bool = False
    out_dir: str = ""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)  # which tasks and seeds each iteration
    validation: ValidationConfig = field(default_factory=lambda: ValidationConfig())  # the held-out learning curve

    @classmethod
    def from_yaml(cls, path: str | Path) -> Config:
        import yaml

        raw = yaml.safe_load(Path(path).read_text())
        exp, train, harnesses = raw.get("experiment", {}), raw.get("training", {}), raw.get("harnesses", [])
        tasks = [TaskSpec(h["task"], [int(s) for s in h["seeds"]], h.get("max_episode_steps")) for h in harnesses]
        known = {f for f in cls.__dataclass_fields__} - {"name", "tasks", "curriculum", "validation"}
        unknown = set(train) - known
        if unknown:
            raise ValueError(f"{path}: unknown training setting(s) {sorted(unknown)}; known: {sorted(known)}")
        cfg = cls(name=exp["name"], tasks=tasks, curriculum=CurriculumConfig.from_mapping(raw.get("curriculum")),
                  validation=ValidationConfig.from_mapping(raw.get("validation")), **train)
        cfg.model = raw.get("agent", {}).get("model", cfg.model)
        cfg.eval_suite = raw.get("evaluation", {}).get("suite", cfg.eval_suite)
        cfg.check()
        return cfg

    def check(self) -> None:
        """The update's settings, refused before any model loads or rollout plays."""
        if self.baseline not in ("group", "batch", "success"):
            raise ValueError(f"training.baseline must be group, batch or success, not {self.baseline!r}")
        if self.normalize not in ("episode", "sample"):
            raise ValueError(f"training.normalize must be episode or sample, not {self.normalize!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"training.dtype must be one of {DTYPES}, not {self.dtype!r}")
        if self.epochs < 1 or self.clip <= 0 or self.kl < 0 or self.group_size < 1 or self.iterations < 0:
            raise ValueError("training needs epochs >= 1, clip > 0, kl >= 0, group_size >= 1 and iterations >= 0")
        if self.step_credit < 0 or not 0 < self.gamma <= 1:
            raise ValueError("training needs step_credit >= 0 and 0 < gamma <= 1")
        if self.workers < 1 or self.replicas < 1 or self.threads < 0 or self.update_threads < 0:
            raise ValueError("training needs workers >= 1, replicas >= 1, threads >= 0 and update_threads >= 0")


# ----------------------------------------------------------------------------------------------------
# The training suite and the seeds


def check_disjoint(cfg: Config) -> None:
    """Refuse training seeds that the evaluation suite plays (for the same task)."""
    from polar_bench.suite import load_suite

    suite = load_suite(cfg.eval_suite)
    held_out = set(cfg.validation.seeds)
    for t in cfg.tasks:
        if t.task in suite.task_ids:
            clash = set(t.seeds) & set(suite.task(t.task).seeds)
            if clash:
                raise ValueError(f"{t.task}: training seeds {sorted(clash)} are evaluation seeds of suite "
                                 f"{cfg.eval_suite}")
            clash = held_out & set(suite.task(t.task).seeds)
            if clash:
                raise ValueError(f"{t.task}: validation seeds {sorted(clash)} are evaluation seeds of suite "
                                 f"{cfg.eval_suite}")
        clash = held_out & set(t.seeds)
        if clash:
            raise ValueError(f"{t.task}: validation seeds {sorted(clash)} are also training seeds")


def _suite_lines(name: str, description: str, seed: int, runs: int) -> list[str]:
    return [f"# Written by baselines/llm_rl/train.py: {description} (not comparable with anything).",
            "[suite]", f'name = "{name}"', 'version = "0.0.1"', f'description = "baselines/llm_rl {description}"',
            f"seed = {seed}", f"runs = {runs}", "episodes = 1", "",
            "[[domains]]", 'name = "babyai"', f'description = "BabyAI {description}"',
            'training = "this is the training"', 'budget = "none"', ""]


def suite_toml(cfg: Config, seeds: dict[str, list[int]] | None = None) -> str:
    """The training suite: every task's training seeds, or only those of ``seeds`` (task -> seeds, the
    curriculum's choice for one iteration; a task without seeds is left out)."""
    lines = _suite_lines(f"llm-rl-train-{cfg.name}", "training rollouts", cfg.seed, cfg.group_size)
    for t in cfg.tasks:
        chosen = t.seeds if seeds is None else seeds.get(t.task, [])
        if not chosen:
            continue
        lines += ["[[tasks]]", f'id = "{t.task}"', 'domain = "babyai"', f"episodes = {len(chosen)}",
                  f"seeds = {json.dumps(chosen)}"]
        if t.max_episode_steps:
            lines.append(f"options = {{ max_episode_steps = {int(t.max_episode_steps)} }}")
        lines += ['low = { value = 0.0, source = "none", measured = false }',
                  'high = { value = 1.0, source = "BabyAI reward supremum", measured = false }', ""]
    return "\n".join(lines) + "\n"


def validation_suite_toml(cfg: Config) -> str:
    """The held-out suite of the learning curve: every task on the validation seeds, ``validation.runs``
    runs, with the evaluation suite's options and normalization references for the task (so its IQM is
    on that suite's scale; 0 and 1 for a task the suite lacks)."""
    from polar_bench.suite import load_suite

    suite = load_suite(cfg.eval_suite)
    seeds = list(cfg.validation.seeds)
    lines = _suite_lines(f"llm-rl-validate-{cfg.name}", "held-out validation seeds", cfg.seed, cfg.validation.runs)
    for t in cfg.tasks:
        spec = suite.task(t.task) if t.task in suite.task_ids else None
        low, high = (spec.low.value, spec.high.value) if spec else (0.0, 1.0)
        lines += ["[[tasks]]", f'id = "{t.task}"', 'domain = "babyai"', f"episodes = {len(seeds)}",
                  f"seeds = {json.dumps(seeds)}"]
        if spec is not None and spec.options:
            lines.append("options = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in spec.options.items()) + " }")
        lines += [f'low = {{ value = {low!r}, source = "suite {cfg.eval_suite}", measured = false }}',
                  f'high = {{ value = {high!r}, source = "suite {cfg.eval_suite}", measured = false }}', ""]
    return "\n".join(lines) + "\n"


def validation_row(results: Path, reps: int, seed: int) -> dict[str, float]:
    """The learning curve's point: IQM over runs x tasks of the held-out results, its 95% stratified-
    bootstrap interval, and the success rate."""
    from polar_bench import analysis

    agent = analysis.agent_scores(results)
    scope = {s.scope: s for s in analysis.aggregate(agent, ["iqm"], reps=reps, seed=seed)}["overall"]
    iqm = scope.estimates.get("iqm")
    returns = [e.ret for e in agent.results.episodes if e.ret is not None] if agent.results else []
    return {"val_iqm": iqm.point if iqm else math.nan, "val_iqm_low": iqm.low if iqm else math.nan,
            "val_iqm_high": iqm.high if iqm else math.nan,
            "val_success_rate": float(np.mean([r > 0 for r in returns])) if returns else math.nan,
            "val_episodes": len(returns)}


# ----------------------------------------------------------------------------------------------------
# Samples from trajectory files


@dataclass
class Sample:
    task: str
    seed: int
    run: int
    prompt: list[int]
    completion: list[int]
    choices: list[str] | None
    temperature: float
    logprob: float | None      # as the server reported it at sampling time (None if not recorded)
    ret: float
    step: int = 0              # the call's place in its episode (0 = the first action)
    length: int = 1            # the episode's calls (its return comes after the last)


@dataclass
class Episode:
    task: str
    seed: int
    run: int
    ret: float
    length: int
    status: str
    calls: int
    tokens: int
    llm_seconds: float


def _recorded_logprob(call: dict) -> float | None:
    lps = call.get("completion_logprobs")
    if not lps:
        content = (call.get("logprobs") or {}).get("content") if isinstance(call.get("logprobs"), dict) else None
        lps = [c["logprob"] for c in content] if content else None
    return float(sum(lps)) if lps else None


def load_trajectories(folder: str | Path, tokenizer: Any) -> tuple[list[Sample], list[Episode]]:
    """Every LLM call of every finished episode under ``folder`` as a Sample, and the episodes. Token ids
    come from the trajectory line (``prompt_token_ids``/``completion_token_ids``); where they are null
    (an upstream that returns none) the messages and completion are tokenized again."""
    samples: list[Sample] = []
    episodes: list[Episode] = []
    for path in sorted(Path(folder).glob("*/run*-ep*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not lines or lines[-1].get("type") != "episode":
            continue
        *calls, end = lines
        ret = float(end["return"])
        llm = end.get("llm") or {}
        episodes.append(Episode(end["task"], int(end["seed"]), int(end["run"]), ret, int(end.get("length") or 0),
                                str(end.get("status")), int(llm.get("calls", len(calls))),
                                int(llm.get("prompt_tokens", 0)) + int(llm.get("completion_tokens", 0)),
                                float(llm.get("seconds", 0.0))))
        for k, c in enumerate(calls):
            params = c.get("params") or {}
            p = c.get("prompt_token_ids") or prompt_ids(tokenizer, c["messages"])
            comp = (c.get("completion_token_ids")
                    or list(tokenizer(c["completion"], add_special_tokens=False)["input_ids"]))
            temp = params.get("temperature")
            samples.append(Sample(c["task"], int(c["seed"]), int(c["run"]), list(p), list(comp),
                                  params.get("guided_choice"), 1.0 if temp is None else float(temp),
                                  _recorded_logprob(c), ret, k, len(calls)))
    return samples, episodes


def advantages(samples: list[Sample], baseline: str = "group", eps: float = 1e-6) -> list[float]:
    """Per sample: its episode's return minus the mean over its group (``group``: same task and seed,
    the runs; ``batch``: all episodes of the task in the batch), divided by the group's std (when > 0,
    else no signal). Groups of one fall back to the task's batch. ``success``: 1 for the calls of an
    episode that reached the goal (return > 0), else 0: the update then imitates the policy's own
    successes (rejection-sampling fine-tuning, expert iteration) and never pushes an answer down."""
    if baseline not in ("group", "batch", "success"):
        raise ValueError(f"baseline must be 'group', 'batch' or 'success', not {baseline!r}")
    if baseline == "success":
        return [1.0 if s.ret > 0 else 0.0 for s in samples]
    ep_ret: dict[tuple[str, int, int], float] = {(s.task, s.seed, s.run): s.ret for s in samples}
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    for (task, seed, _), r in sorted(ep_ret.items()):
        groups[(task, seed)].append(r)
        by_task[task].append(r)
    out = []
    for s in samples:
        g = groups[(s.task, s.seed)] if baseline == "group" and len(groups[(s.task, s.seed)]) > 1 else by_task[s.task]
        mean, std = float(np.mean(g)), float(np.std(g))
        out.append((s.ret - mean) / (std + eps) if std > 0 else 0.0)
    return out


def step_advantages(samples: list[Sample], gamma: float, eps: float = 1e-6) -> list[float]:
    """Step-level credit from anchor states (GiGPO's, Feng et al. 2025): the calls that saw the same
    prompt (the same text view of the same task; the agent is stateless, so the same state for it)
    anywhere in the batch are compared by their discounted return to go, gamma^(length - 1 - step) x
    return (BabyAI pays only at the end); each gets (G - mean) / std over its anchor group, 0 where the
    group has one call or no spread. Where a view comes back (an action that changed nothing) the
    visit that left it for good is closer to the goal than the ones that came back, so a successful
    episode's loop-breaking answer is credited over the answers that looped; failed episodes give
    no spread among themselves."""
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], not {gamma!r}")
    to_go = [gamma ** (s.length - 1 - s.step) * s.ret for s in samples]
    anchors: dict[tuple[str, tuple[int, ...]], list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        anchors[(s.task, tuple(s.prompt))].append(i)
    out = [0.0] * len(samples)
    for members in anchors.values():
        g = [to_go[i] for i in members]
        mean, std = float(np.mean(g)), float(np.std(g))
        if len(members) > 1 and std > 0:
            for i in members:
                out[i] = (to_go[i] - mean) / (std + eps)
    return out


def _episode_weights(samples: list[Sample], normalize: str) -> list[float]:
    if normalize not in ("episode", "sample"):
        raise ValueError(f"normalize must be 'episode' or 'sample', not {normalize!r}")
    if normalize == "sample":
        return [1.0 / len(samples)] * len(samples)
    lengths: dict[tuple[str, int, int], int] = defaultdict(int)
    for s in samples:
        lengths[(s.task, s.seed, s.run)] += 1
    return [1.0 / (len(lengths) * lengths[(s.task, s.seed, s.run)]) for s in samples]


@contextlib.contextmanager
def _weights_of(model: Any, state: dict[str, torch.Tensor]) -> Iterator[None]:
    """The model with ``state`` (some of its parameters, e.g. the base model's trained layers) in place
    of its own for the duration; its own are put back after."""
    params = dict(model.named_parameters())
    own = {n: params[n].detach().clone() for n in state}
    with torch.no_grad():
        for n, t in state.items():
            params[n].copy_(t)
    try:
        yield
    finally:
        with torch.no_grad():
            for n, t in own.items():
                params[n].copy_(t)


@dataclass(frozen=True)
class UpdateSettings:
    """How one batch moves the trained layers (the YAML's ``training:`` settings of the same names)."""

    minibatch: int = 16          # rows per forward/backward (gradient accumulation)
    max_grad_norm: float = 1.0
    normalize: str = "episode"   # each episode weighs the same ("episode") or each LLM call does ("sample")
    epochs: int = 1              # optimizer steps per batch (above 1: PPO's clipped ratio)
    clip: float = 0.2
    kl: float = 0.0              # weight of the KL penalty to the reference weights
    merge_duplicates: bool = False  # one row per distinct (prompt, answer): the same loss, fewer passes

    @classmethod
    def of(cls, cfg: Config) -> UpdateSettings:
        return cls(**{f: getattr(cfg, f) for f in cls.__dataclass_fields__})


@dataclass
class _Row:
    """One differentiated (prompt, answer): the samples it stands for, as sums of their weighted
    advantages A x w (positive and negative apart: PPO's clip acts on each side differently) and of
    their weights w (the KL term's)."""

    sample: Sample
    pos: float
    neg: float
    weight: float
    count: int


def _update_rows(samples: list[Sample], adv: list[float], weights: list[float], keep_zero: bool,
                 merge: bool) -> list[_Row]:
    """The rows of an update: a sample with advantage 0 adds nothing (kept only for the KL term); with
    ``merge``, samples of the same prompt, answer, choices and temperature become one row (their
    log-probabilities and sampling-time ones are the same numbers, so each term of the loss adds up)."""
    rows: dict[Any, _Row] = {}
    out: list[_Row] = []
    for k, (s, a, w) in enumerate(zip(samples, adv, weights, strict=True)):
        if a == 0.0 and not keep_zero:
            continue
        aw = a * w
        key = (tuple(s.prompt), tuple(s.completion), tuple(s.choices or ()), s.temperature) if merge else k
        row = rows.get(key)
        if row is None:
            rows[key] = row = _Row(s, 0.0, 0.0, 0.0, 0)
            out.append(row)
        if aw >= 0:
            row.pos += aw
        else:
            row.neg += aw
        row.weight += w
        row.count += 1
    return out


def _loss(lp: torch.Tensor, old: torch.Tensor, ref: torch.Tensor | None, rows: list[_Row],
          settings: UpdateSettings) -> tuple[torch.Tensor, int]:
    """The minibatch's loss and how many samples the clip held. REINFORCE (one epoch, no KL):
    -sum(A w log pi). Otherwise PPO's -sum(min(r A w, clip(r) A w)) with r = pi / pi_old, which is
    A w min(r, clip(r)) for A > 0 and A w max(r, clip(r)) for A < 0, plus kl x sum(w KL)."""
    def column(values: list[float]) -> torch.Tensor:
        return torch.tensor(values, dtype=lp.dtype, device=lp.device)

    pos, neg = column([r.pos for r in rows]), column([r.neg for r in rows])
    if settings.epochs == 1 and settings.kl == 0:
        return -((pos + neg) * lp).sum(), 0
    ratio = torch.exp(lp - old)
    held = ratio.clamp(1 - settings.clip, 1 + settings.clip)
    loss = -(pos * torch.min(ratio, held) + neg * torch.max(ratio, held)).sum()
    clipped = int((column([float(r.count) for r in rows]) * ((ratio.detach() - 1).abs() > settings.clip)).sum())
    if settings.kl > 0 and ref is not None:
        d = ref - lp
        loss = loss + settings.kl * (column([r.weight for r in rows]) * (torch.exp(d) - d - 1)).sum()
    return loss, clipped


def reinforce_step(model: Any, tokenizer: Any, optimizer: torch.optim.Optimizer, samples: list[Sample],
                   adv: list[float], settings: UpdateSettings | None = None, *,
                   capture: HiddenCapture | None = None, autocast: torch.dtype | None = None,
                   reference: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
    """``settings.epochs`` optimizer steps on the batch. With one epoch and ``kl`` 0: one step on
    -sum(w * A * log pi(completion | prompt)), plain REINFORCE. Otherwise each step minimises PPO's
    clipped objective, -sum(w * min(r A, clip(r, 1 - clip, 1 + clip) A)) with r = pi / pi_old (pi_old:
    the policy before the update, which sampled the batch; r = 1 at the first step, which is then the
    REINFORCE step), plus ``kl`` x sum(w * KL) to the ``reference`` weights (the base model's trained
    layers), KL estimated on the sampled answers as exp(d) - d - 1 with d = log pi_ref - log pi.

    ``normalize``: ``episode``, w = 1 / (episodes x the episode's calls), so that every episode weighs
    the same whatever its length (with ``sample``, w = 1 / samples, the long failed episodes outweigh
    the short successful ones and push down whatever they did); samples with A = 0 add nothing and are
    skipped (unless ``kl`` > 0). ``merge_duplicates``: one forward/backward per distinct (prompt, answer)
    (`_update_rows`). ``logprob_change_mean``: how much the update moved the log-probability of the
    sampled answers (the first minibatch's rows), a gauge of the step size; ``kl_to_reference``: the KL
    estimate after the update on those rows (with ``reference``). ``autocast``: the dtype of the matrix
    products (`precision`), as the policy sampled with."""
    st = settings or UpdateSettings()
    if st.epochs < 1 or st.clip <= 0 or st.kl < 0:
        raise ValueError(f"need epochs >= 1, clip > 0 and kl >= 0 (got {st.epochs}, {st.clip}, {st.kl})")
    if st.kl > 0 and reference is None:
        raise ValueError("kl > 0 needs the reference weights")
    rows = _update_rows(samples, adv, _episode_weights(samples, st.normalize), st.kl > 0, st.merge_duplicates)
    device = next(model.parameters()).device
    chunks = [rows[i:i + st.minibatch] for i in range(0, len(rows), st.minibatch)]
    signal = sum(r.count for r in rows)

    def logp(chunk: list[_Row]) -> torch.Tensor:
        with precision(device, autocast):
            return sequence_logprobs(model, tokenizer, [(r.sample.prompt, r.sample.completion, r.sample.choices,
                                                         r.sample.temperature) for r in chunk], capture)

    ref: list[torch.Tensor] = []
    if reference is not None and chunks:
        with torch.no_grad(), _weights_of(model, reference):
            ref = [logp(c) for c in (chunks if st.kl > 0 else chunks[:1])]
    model.train()
    loss_sum, grad_norm, clipped = 0.0, 0.0, 0
    diffs: list[float] = []
    old: list[torch.Tensor] = []
    for epoch in range(st.epochs if rows else 0):
        optimizer.zero_grad(set_to_none=True)
        loss_sum, clipped = 0.0, 0
        for k, chunk in enumerate(chunks):
            lp = logp(chunk)
            if epoch == 0:
                old.append(lp.detach())
                diffs += [abs(float(v) - r.sample.logprob) for v, r in zip(lp.detach(), chunk, strict=True)
                          if r.sample.logprob is not None]
            loss, held = _loss(lp, old[k], ref[k] if st.kl > 0 else None, chunk, st)
            loss.backward()
            loss_sum += float(loss.detach())
            clipped += held
        params = [p for p in model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, st.max_grad_norm))
        optimizer.step()
    change = drift = 0.0
    if rows:
        with torch.no_grad():
            after = logp(chunks[0])
        change = float((after - old[0]).mean())
        if ref:
            d = ref[0] - after
            drift = float((torch.exp(d) - d - 1).mean())
    model.eval()
    return {"loss": loss_sum, "grad_norm": grad_norm, "samples_with_signal": float(signal),
            "update_rows": float(len(rows)), "logprob_mismatch_max": max(diffs) if diffs else 0.0,
            "logprob_change_mean": change, "clip_fraction": clipped / signal if signal else 0.0,
            "kl_to_reference": drift}


# ----------------------------------------------------------------------------------------------------
# Rollouts through polar_bench evaluate and the LLM proxy

Rollout = Callable[["Trainer", int, Path], Path]


# ``python -m polar_bench`` that gets SIGTERM when the process serving its upstream dies (Linux's
# parent-death signal; the first argument is that process's pid): evaluate then stops as on Ctrl-C,
# keeping its journal, instead of recording every episode after as failed LLM calls.
_LAUNCH = """import ctypes, os, runpy, signal, sys
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != int(sys.argv[1]):
        sys.exit(130)
sys.argv = ["polar_bench", *sys.argv[2:]]
runpy.run_module("polar_bench", run_name="__main__", alter_sys=True)
"""


def evaluate_command(url: str, args: list[str], agent: str | Path = AGENT) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``python -m polar_bench evaluate`` of the agent file (``agent``,
    default agent.py) behind the LLM proxy, its upstream at ``url`` served by this process (``args``: the
    rest of the command line). The evaluation stops, journal kept, if this process dies."""
    cmd = [sys.executable, "-c", _LAUNCH, str(os.getpid()), "evaluate", str(agent), "--llm-upstream", url,
           "--no-progress", *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return cmd, env


def evaluate_agent(url: str, args: list[str], **run: Any) -> subprocess.CompletedProcess:
    """Run `evaluate_command` to its end (``run``: passed to `subprocess.run`)."""
    cmd, env = evaluate_command(url, args)
    return subprocess.run(cmd, cwd=ROOT, env=env, **run)


def _serve_and_evaluate(trainer: Trainer, model_name: str, suite: Path, folder: Path, *extra: str) -> float:
    """Serve the current weights in a thread and run the agent on ``suite`` under ``evaluate`` (results in
    ``folder``, its output in evaluate.log); the server's milliseconds per call."""
    from .server import serve_in_thread

    with trainer.serving() as served:
        server, stats, url = serve_in_thread(served, model_name=model_name)
        try:
            args = ["--suite", str(suite), *extra, "--out", str(folder / "results.json"),
                    "--workers", str(trainer.cfg.workers)]
            if trainer.cfg.allow_version_mismatch:
                args.append("--allow-version-mismatch")
            proc = evaluate_agent(url, args, capture_output=True, text=True)
            (folder / "evaluate.log").write_text(proc.stdout + proc.stderr)
            if proc.returncode != 0:
                raise RuntimeError(f"evaluate failed ({proc.returncode}); see {folder / 'evaluate.log'}:\n"
                                   f"{proc.stderr[-2000:]}")
        finally:
            server.shutdown()
            server.server_close()
    return stats.ms_per_call()


def evaluate_rollout(trainer: Trainer, iteration: int, folder: Path) -> Path:
    """Serve the current weights and run the agent on the iteration's training suite under ``evaluate``
    with the LLM proxy recording trajectories; returns the trajectory folder."""
    traj = folder / "trajectories"
    trainer.server_ms = _serve_and_evaluate(trainer, f"smollm2-rl-iter{iteration}", trainer.suite_path, folder,
                                            "--trajectories", str(traj))
    return traj


def evaluate_validation(trainer: Trainer, iteration: int, folder: Path) -> Path:
    """Serve the current weights and play the held-out validation suite under ``evaluate``; returns its
    results file."""
    suite = folder / "validation_suite.toml"
    suite.write_text(validation_suite_toml(trainer.cfg))
    _serve_and_evaluate(trainer, f"smollm2-rl-val{iteration}", suite, folder)
    return folder / "results.json"


# ----------------------------------------------------------------------------------------------------
# The loop


class Trainer:
    def __init__(self, cfg: Config, out_dir: str | Path, *, rollout: Rollout = evaluate_rollout,
                 model: Any = None, tokenizer: Any = None, planner: Planner | None = None,
                 validator: Rollout = evaluate_validation, reuse_validation: tuple[Path, ...] = ()) -> None:
        cfg.check()
        self.cfg = cfg
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.rollout = rollout
        self.validator = validator
        self.reuse_validation = tuple(Path(p) for p in reuse_validation)  # other runs whose points may be taken
        self.curve: list[dict] = []  # the held-out learning curve: one row per validation
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        _seed_everything(cfg.seed)
        self.device = pick_device(cfg.device)
        if model is None:
            model, tokenizer = load_model(cfg.model)
        self.model, self.tok = model.to(self.device), tokenizer
        self.trained_names = trainable_parameters(self.model, cfg.trainable_layers)
        self.autocast = torch.bfloat16 if cfg.dtype == "bfloat16" else None
        if self.autocast is not None:
            mixed_precision(self.model, self.autocast)
        self.optimizer = torch.optim.Adam([p for p in self.model.parameters() if p.requires_grad], lr=cfg.lr)
        self.reference = trained_state(self.model)  # the base model's trained layers: the KL penalty's anchor
        # The update runs only the trained layers, over the hidden states the server kept while serving.
        self.capture = HiddenCapture(self.model, self.model.config.num_hidden_layers - cfg.trainable_layers)
        self.policy = Policy(self.model, self.tok, capture=self.capture, autocast=self.autocast)
        self.iteration = 0
        self.history: list[dict] = []
        self.server_ms = 0.0
        self.elapsed = 0.0
        self.curriculum = Curriculum(cfg.curriculum, {t.task: list(t.seeds) for t in cfg.tasks}, seed=cfg.seed,
                                     planner=planner)
        self.suite_path = self.out / "train_suite.toml"  # the iteration's training suite
        self.plan: dict[str, list[int]] = {}  # the iteration's seeds per task (the curriculum's choice)

    @contextlib.contextmanager
    def serving(self) -> Iterator[Policy | Replicas]:
        """What a rollout or validation serves: the policy, or with ``replicas`` above 1 `Replicas` of it
        (bit-identical copies of the current weights, each keeping the hidden states of what it serves;
        they are merged into the policy's when serving ends, so the update sees every call)."""
        from .server import Replicas

        if self.cfg.replicas <= 1:
            yield self.policy
            return
        kept, self.capture.store = self.capture.store, {}   # not copied into every replica
        copies = [self.policy]
        try:
            for _ in range(self.cfg.replicas - 1):
                memo: dict[int, Any] = {}
                model = copy.deepcopy(self.model, memo)      # its forward hook feeds a copy of the capture
                copies.append(Policy(model, self.tok, salt=self.policy.salt, capture=memo[id(self.capture)],
                                     autocast=self.autocast, prompt_cache=self.policy.prompt_cache))
        finally:
            self.capture.store = kept
        try:
            yield Replicas(copies)
        finally:
            for replica in copies[1:]:
                if replica.capture is not None:
                    self.capture.store.update(replica.capture.store)

    @property
    def checkpoint_path(self) -> Path:
        return self.out / "checkpoint.pt"

    def save(self) -> None:
        state = {"iteration": self.iteration, "trained": trained_state(self.model),
                 "optimizer": self.optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
                 "python_rng": random.getstate(), "numpy_rng": np.random.get_state(),
                 "history": self.history, "curve": self.curve, "elapsed": self.elapsed, "config": asdict(self.cfg),
                 "device": str(self.device)}
        tmp = self.checkpoint_path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint_path)

    def load(self) -> None:
        state = torch.load(self.checkpoint_path, map_location="cpu", weights_only=False)
        load_trained_state(self.model, state["trained"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])
        self.iteration, self.history, self.elapsed = state["iteration"], state["history"], state["elapsed"]
        self.curve = state.get("curve", [])

    def run(self, *, resume: bool = False, stop_after: int | None = None) -> list[dict]:
        """Train to ``cfg.iterations`` (or ``stop_after`` more iterations, for tests of resuming)."""
        if resume and self.checkpoint_path.exists():
            self.load()
        elif not resume and self.checkpoint_path.exists():
            raise FileExistsError(f"{self.checkpoint_path} exists: pass --resume, or another --out-dir")
        check_disjoint(self.cfg)
        (self.out / "config.json").write_text(json.dumps(asdict(self.cfg), indent=1) + "\n")   # how it trains
        writer = _writer(self.out / "tensorboard", self.iteration)
        done = 0
        try:
            while self.iteration < self.cfg.iterations and (stop_after is None or done < stop_after):
                self._validate()
                self._iterate(writer)
                done += 1
            if self.iteration >= self.cfg.iterations:
                self._validate(last=True)
        finally:
            if writer is not None:
                writer.close()
        return self.history

    def _validate(self, last: bool = False) -> None:
        """A point of the held-out learning curve for the current weights, when one is due (every
        ``validation.every`` updates, and after the last) and not yet taken; saved with the checkpoint
        and in validation.csv."""
        every, it = self.cfg.validation.every, self.iteration
        if not every or (it % every and not last) or any(r["iteration"] == it for r in self.curve):
            return
        folder = self.out / "validation" / f"iter{it:03d}"
        if folder.exists():
            shutil.rmtree(folder)  # a validation cut short is played again
        folder.mkdir(parents=True)
        key = self.validation_key()
        t0 = time.perf_counter()
        source = self._reusable_validation(key)
        if source is not None:   # the same weights already played the same held-out suite: take that point
            shutil.copy2(source / "results.json", folder / "results.json")
            results = folder / "results.json"
        else:
            salt, self.policy.salt = self.policy.salt, 0  # as an evaluation: only the weights differ between points
            try:
                results = self.validator(self, it, folder)
            finally:
                self.policy.salt = salt
        reused = str(source) if source else None
        (folder / "key.json").write_text(json.dumps({"key": key, "reused_from": reused}) + "\n")
        row = {"iteration": it, **validation_row(results, self.cfg.validation.reps, self.cfg.seed),
               "validation_seconds": time.perf_counter() - t0}
        self.curve.append(row)
        self.save()
        with (self.out / "validation.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(self.curve[0]))
            w.writeheader()
            w.writerows(self.curve)
        print(json.dumps({"validation": {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}}),
              flush=True)

    def validation_key(self) -> str:
        """What a validation point depends on: the trained layers' bytes, the model they sit in, the
        precision and device kind, the agent file and the held-out suite (its name and the training seed
        left out: the seeds are explicit and serving uses the evaluation salt). Equal keys, equal episodes;
        so every training seed of an experiment shares the base model's point (iteration 0)."""
        canonical = validation_suite_toml(dataclasses.replace(self.cfg, name="", seed=0))
        parts = {"weights": state_digest(trained_state(self.model)), "model": self.cfg.model, "dtype": self.cfg.dtype,
                 "device": self.device.type, "agent": hashlib.sha256(AGENT.read_bytes()).hexdigest(),
                 "suite": hashlib.sha256(canonical.encode()).hexdigest()}
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def _reusable_validation(self, key: str) -> Path | None:
        """A validation folder of a ``reuse_validation`` run with this key and a results file, if any."""
        for run in self.reuse_validation:
            for folder in sorted((run / "validation").glob("iter*")):
                try:
                    found = json.loads((folder / "key.json").read_text()).get("key")
                except (OSError, ValueError):
                    continue
                if found == key and (folder / "results.json").is_file():
                    return folder
        return None

    def _per_task(self, episodes: list[Episode]) -> dict[str, float]:
        """Each task's episodes, success rate and environment steps in this iteration (0 episodes: not
        chosen), as columns (the steps make a per-level training budget: agent_v2.py)."""
        out: dict[str, float] = {}
        for t in self.cfg.tasks:
            rets = [e.ret for e in episodes if e.task == t.task]
            out[f"episodes:{t.task}"] = len(rets)
            out[f"success_rate:{t.task}"] = float(np.mean([r > 0 for r in rets])) if rets else math.nan
            out[f"env_steps:{t.task}"] = sum(e.length for e in episodes if e.task == t.task)
        return out

    def _iterate(self, writer: Any) -> None:
        it = self.iteration
        t0 = time.perf_counter()
        folder = self.out / "rollouts" / f"iter{it:03d}"
        if folder.exists():
            shutil.rmtree(folder)   # an iteration cut short is played again from its start
        folder.mkdir(parents=True)
        self.policy.salt = self.cfg.seed * 100_003 + it
        self.plan = self.curriculum.plan(it, self.history)
        self.suite_path = folder / "train_suite.toml"
        self.suite_path.write_text(suite_toml(self.cfg, self.plan))
        traj = self.rollout(self, it, folder)
        samples, episodes = load_trajectories(traj, self.tok)
        t1 = time.perf_counter()
        adv = advantages(samples, self.cfg.baseline)
        if self.cfg.step_credit:
            steps = step_advantages(samples, self.cfg.gamma)
            adv = [a + self.cfg.step_credit * b for a, b in zip(adv, steps, strict=True)]
        with _torch_threads(self.cfg.update_threads):
            stats = reinforce_step(self.model, self.tok, self.optimizer, samples, adv, UpdateSettings.of(self.cfg),
                                   capture=self.capture, autocast=self.autocast, reference=self.reference)
        if self.cfg.step_credit:
            stats["samples_with_step_credit"] = float(sum(b != 0 for b in steps))
        self.capture.clear()
        t2 = time.perf_counter()
        self.elapsed += t2 - t0
        rets = [e.ret for e in episodes]
        row = {"iteration": it, "episodes": len(episodes), "return_mean": float(np.mean(rets)) if rets else math.nan,
               "success_rate": float(np.mean([r > 0 for r in rets])) if rets else math.nan,
               "env_steps": sum(e.length for e in episodes), "llm_calls": len(samples),
               "llm_tokens": sum(len(s.prompt) + len(s.completion) for s in samples),
               "rollout_seconds": t1 - t0, "update_seconds": t2 - t1, "wall_seconds": self.elapsed,
               "server_ms_per_call": self.server_ms, **stats, **self._per_task(episodes)}
        self.history.append(row)
        self.iteration = it + 1
        self.save()
        _log(writer, row, self.out / "metrics.csv", self.history)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` inside (0: unchanged)."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _writer(folder: Path, start: int) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard not installed: metrics.csv only
        return None
    return SummaryWriter(str(folder), purge_step=start)


def _log(writer: Any, row: dict, csv_path: Path, history: list[dict]) -> None:
    if writer is not None:
        for k, v in row.items():
            if k != "iteration" and isinstance(v, (int, float)):
                writer.add_scalar(f"llm_rl/{k}", v, row["iteration"])
        writer.flush()
    with csv_path.open("w", newline="") as f:   # every column any row has (a resumed older run lacks newer ones)
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in history for k in r)), restval="")
        w.writeheader()
        w.writerows(history)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m baselines.llm_rl.train", description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="the experiment YAML (baselines/llm_rl/experiments/)")
    ap.add_argument("--out-dir", help="default: runs/llm_rl/<experiment name>, with -seed<N> when --seed is given")
    ap.add_argument("--seed", type=int, help="the training seed (replaces training.seed of the YAML): it salts "
                    "every rollout's sampling, so each seed is an independent training run")
    ap.add_argument("--resume", action="store_true", help="continue from <out-dir>/checkpoint.pt")
    ap.add_argument("--device", help="replaces training.device: cpu, cuda, cuda:N or auto")
    ap.add_argument("--dtype", choices=DTYPES, help="replaces training.dtype")
    ap.add_argument("--cores", type=int, metavar="N", help="train on N cores: N rollout workers answered by N "
                    "replicas of the policy, and N torch threads in the update (replaces training.workers, "
                    "replicas and update_threads; the update's thread count may change its bits, the rollouts' "
                    "does not)")
    ap.add_argument("--reuse-validation", nargs="+", default=[], metavar="RUN_DIR",
                    help="other output folders of this experiment: a held-out point whose weights, precision, "
                    "agent and validation suite are the same (the base model's, before the first update) is "
                    "copied from there instead of played again")
    args = ap.parse_args(argv)
    try:
        cfg = Config.from_yaml(args.config)
        cfg = dataclasses.replace(cfg, device=args.device or cfg.device, dtype=args.dtype or cfg.dtype)
        if args.cores is not None:
            cfg = dataclasses.replace(cfg, workers=args.cores, replicas=args.cores, update_threads=args.cores)
            cfg.check()
        pick_device(cfg.device)   # a GPU that is not there: said before the model loads
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    name = cfg.name
    if args.seed is not None:
        cfg = dataclasses.replace(cfg, seed=args.seed)
        name = f"{cfg.name}-seed{args.seed}"
    out = Path(args.out_dir or cfg.out_dir or ROOT / "runs" / "llm_rl" / name)
    Trainer(cfg, out, reuse_validation=tuple(Path(p) for p in args.reuse_validation)).run(resume=args.resume)


if __name__ == "__main__":
    main()
