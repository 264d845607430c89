"""An LLM agent written with the official openai SDK, as found in the wild: it imports nothing from
polar_bench and reaches its model through OPENAI_BASE_URL (under evaluate, the LLM proxy)."""

from openai import OpenAI

AGENT_INFO = {"name": "openai-sdk-agent", "llm": "the model behind OPENAI_BASE_URL"}


class Agent:
    wants_text = True

    def __init__(self, task, run):
        self.client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
        self.actions = task.action_space.n
        self.goal = task.description[:80]
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def reset(self, seed):
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.step = 0

    def act(self, observation, info):
        self.step += 1
        view = str(info.get("text", ""))[:60]
        reply = self.client.chat.completions.create(
            model="smollm2", max_tokens=2, temperature=0.0,
            messages=[{"role": "user", "content": f"Goal: {self.goal}. Step {self.step}. {view} "
                                                  f"Answer with one digit below {self.actions}."}])
        self.usage["calls"] += 1
        self.usage["prompt_tokens"] += reply.usage.prompt_tokens
        self.usage["completion_tokens"] += reply.usage.completion_tokens
        digits = [c for c in reply.choices[0].message.content or "" if c.isdigit()]
        return int(digits[0]) % self.actions if digits else self.step % self.actions

    def episode_info(self):
        return {"usage_seen_by_agent": dict(self.usage)}


def make_agent(task, run):
    return Agent(task, run)
