"""An LLM agent written with LiteLLM: it imports nothing from polar_bench and names an
OpenAI-compatible model ("openai/..."), which LiteLLM reaches at OPENAI_BASE_URL (under evaluate,
the LLM proxy)."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the price list at import

import litellm  # noqa: E402

AGENT_INFO = {"name": "litellm-agent", "llm": "openai/smollm2 behind OPENAI_BASE_URL"}


class Agent:
    def __init__(self, task, run):
        self.actions = task.action_space.n
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def reset(self, seed):
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.step = 0

    def act(self, observation, info):
        self.step += 1
        reply = litellm.completion(
            model="openai/smollm2", max_tokens=2, temperature=0.0, api_base=os.environ["OPENAI_BASE_URL"],
            messages=[{"role": "user", "content": f"Step {self.step}. Answer with one digit below {self.actions}."}])
        self.usage["calls"] += 1
        self.usage["prompt_tokens"] += reply.usage.prompt_tokens
        self.usage["completion_tokens"] += reply.usage.completion_tokens
        digits = [c for c in reply.choices[0].message.content or "" if c.isdigit()]
        return int(digits[0]) % self.actions if digits else self.step % self.actions

    def episode_info(self):
        return {"usage_seen_by_agent": dict(self.usage)}


def make_agent(task, run):
    return Agent(task, run)
