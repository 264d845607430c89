"""The LLM agent that baselines/llm_rl trains: the same file before and after training; only the model
behind OPENAI_BASE_URL changes (the base SmolLM2-135M-Instruct or the RL-trained weights, both served
by ``python -m baselines.llm_rl.server``).

    python -m baselines.llm_rl.server --model smollm2 --port 8080 &
    python -m polar_bench evaluate baselines/llm_rl/agent.py --suite v1 --domains babyai \\
        --llm-upstream http://127.0.0.1:8080/v1 --trajectories runs/traj --out llm_rl.json

Each step it sends the observation's text (the mission and what is in view, a few words per object) and
asks for one action word. The request's ``guided_choice`` (vLLM's extra field, which the
baselines/llm_rl server honours too) restricts the answer to the action words; an answer that is not
one (a server that ignores the field) is parsed for an action word, else the agent moves forward.
Sampling is at temperature 1 (POLAR_LLM_RL_TEMPERATURE overrides) with a seed from (episode seed, step,
run), so an evaluation is reproducible and runs are independent samples of the policy.

It asks for the model ``smollm2-run<R>`` in run R: an upstream that serves one model answers every
run with it; ``baselines.llm_rl.evaluate --weights A B C`` serves independently trained instances, run R
playing the R-th (the suite's runs are training seeds, as for the PPO baseline's checkpoints).

The LLM plays the BabyAI tasks only (the domain it is trained on). Every other task of a suite (DMC's
continuous actions, Procgen's and NetHack's thousand-step episodes: hundreds of thousands of calls)
gets uniformly random actions from a generator seeded by (episode seed, run), as declared in
``AGENT_INFO``, so that a whole suite can be evaluated and its other domains read at random level.

Written with the openai SDK and numpy alone: no polar_bench import.
"""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np
from openai import OpenAI

AGENT_INFO = {
    "name": "llm-rl (SmolLM2-135M-Instruct, REINFORCE-trained on BabyAI)",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench/tree/main/baselines/llm_rl",
    # the RL-trained model's budget (the leaderboard entry): environment steps of its training rollouts on
    # BabyAI GoToRedBall's training seeds, the most of its three training runs (1,928, 1,857 and 1,975:
    # README.md); the base model has none. Every other domain of v1 and v2 is played at random.
    "training_steps": {"classic": 0, "dmc": 0, "procgen": 0, "nethack": 0, "babyai": 1975, "atari100k": 0},
    "training_steps_per_task": {"babyai/GoToRedBall": 1975},
    "llm": {"model": "SmolLM2-135M-Instruct, RL-trained by baselines/llm_rl (or the base model: the upstream "
                     "behind OPENAI_BASE_URL decides)",
            "provider": "baselines/llm_rl/server.py (transformers, bfloat16)"},
    "license": "MIT",
    "description": "The LLM picks each BabyAI action from the text view; on every task outside BabyAI the agent "
                   "plays uniformly random actions (seeded by episode seed and run), not the LLM.",
}
LLM_FAMILIES = ("babyai/",)  # the tasks the LLM plays

# BabyAI's actions in index order (minigrid's Actions), in the words the agent offers: worded so that
# the base SmolLM2-135M-Instruct gives moving a fair share (P(first token) on a typical view: "Move
# forward" 0.42, "Toggle" 0.43, "Turn left" 0.09; plain "forward" got 0.003). "Done" is left out of the
# menu (a no-op in every v1 level).
BABYAI_ACTIONS = ["Turn left", "Turn right", "Move forward", "Pick up", "Drop", "Toggle", "Done"]
MENU = BABYAI_ACTIONS[:6]
SYSTEM = "You steer a robot in a grid. Answer with one action."


def call_seed(episode_seed: int, step: int, salt: int = 0) -> int:
    return int.from_bytes(hashlib.sha256(f"{episode_seed}:{step}:{salt}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def prompt(text: str, menu: list[str]) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{text} Actions: {', '.join(menu)}."}]


class Agent:
    wants_text = True

    def __init__(self, task, run):
        self.client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
        self.run = int(run)
        n = int(task.action_space.n)
        self.names = BABYAI_ACTIONS[:n] if str(task.id).startswith("babyai/") else [str(i) for i in range(n)]
        self.menu = [a for a in MENU if a in self.names] or self.names
        self.temperature = float(os.environ.get("POLAR_LLM_RL_TEMPERATURE", "1.0"))
        self.seed = 0
        self.step = 0
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "invalid": 0}

    def reset(self, seed):
        self.seed = int(seed)
        self.step = 0
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "invalid": 0}

    def act(self, observation, info):
        text = " ".join(str(info.get("text", "")).split())
        reply = self.client.chat.completions.create(
            model=f"smollm2-run{self.run}", messages=prompt(text, self.menu), max_tokens=4,
            temperature=self.temperature,
            seed=call_seed(self.seed, self.step, self.run), extra_body={"guided_choice": self.menu})
        self.step += 1
        self.usage["calls"] += 1
        self.usage["prompt_tokens"] += reply.usage.prompt_tokens
        self.usage["completion_tokens"] += reply.usage.completion_tokens
        answer = (reply.choices[0].message.content or "").strip()
        if answer in self.menu:
            return self.names.index(answer)
        self.usage["invalid"] += 1   # a server that ignores guided_choice: look for one action in the text
        found = [a for a in self.menu if re.search(rf"\b{re.escape(a.lower())}\b", answer.lower())]
        fallback = self.menu[min(2, len(self.menu) - 1)]   # Move forward on BabyAI
        return self.names.index(found[0] if len(found) == 1 else fallback)

    def episode_info(self):
        return {"usage_seen_by_agent": dict(self.usage)}


class UniformRandom:
    """Outside BabyAI: uniformly random actions (integers of a discrete space, floats in a box),
    reproducible from (episode seed, run); no LLM call."""

    def __init__(self, task, run):
        self.space = task.action_space
        self.run = int(run)
        self.rng = np.random.default_rng([0, self.run])

    def reset(self, seed):
        self.rng = np.random.default_rng([int(seed), self.run])

    def act(self, observation, info):
        if hasattr(self.space, "n"):
            return int(getattr(self.space, "start", 0)) + int(self.rng.integers(int(self.space.n)))
        low, high = np.asarray(self.space.low, np.float64), np.asarray(self.space.high, np.float64)
        return self.rng.uniform(low, high).astype(self.space.dtype)

    def episode_info(self):
        # zero LLM usage, reported: a results file that names an LLM carries token counts on every episode
        return {"policy": "uniform random (no LLM outside BabyAI)",
                "llm": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}}


def make_agent(task, run):
    if str(task.id).startswith(LLM_FAMILIES):
        return Agent(task, run)
    return UniformRandom(task, run)
