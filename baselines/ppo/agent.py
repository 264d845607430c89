"""The PPO baseline on suite v1: the checkpoint of (task, run) plays its mode action.

    python -m polar_bench evaluate baselines/ppo/agent.py --suite v1 --tasks gym/CartPole-v1

Checkpoints are read from baselines/ppo/checkpoints/<task>/run<run>.pt, or from the folder named by
the environment variable POLAR_PPO_CHECKPOINTS. Train a missing one with
``python -m baselines.ppo.train --task <task> --seed <run>`` (see README.md beside this file).
Suite v2 is played by ``agent_v2.py``, whose Procgen, NetHack and Atari checkpoints are the portable
ones. What this file loads must not change: the v1 LLM+PPO entry's agent file (frozen) imports it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # so that baselines.ppo imports when evaluate loads this file

import numpy as np  # noqa: E402
import torch  # noqa: E402

from baselines.ppo.networks import load_checkpoint, plays_sampled  # noqa: E402


def checkpoint_dir() -> Path:
    """POLAR_PPO_CHECKPOINTS, or the checkpoints folder beside this file (read at every call)."""
    return Path(os.environ.get("POLAR_PPO_CHECKPOINTS", Path(__file__).resolve().parent / "checkpoints"))


def training_steps(sidecars) -> tuple[dict, dict]:
    """Environment steps per task (the largest over runs) and per domain, from checkpoints' sidecars."""
    per_task: dict[str, int] = {}
    per_domain: dict[str, int] = {}
    for sidecar in sorted(sidecars):
        try:
            meta = json.loads(sidecar.read_text())
        except (OSError, ValueError):
            continue
        steps = int(meta.get("env_steps", 0))
        per_task[meta["task"]] = max(per_task.get(meta["task"], 0), steps)
        per_domain[meta["domain"]] = max(per_domain.get(meta["domain"], 0), steps)
    return per_task, per_domain


_PER_TASK, _PER_DOMAIN = training_steps(checkpoint_dir().glob("**/run*.json"))
AGENT_INFO = {
    "name": "ppo",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench/tree/main/baselines/ppo",
    "training_steps": _PER_DOMAIN,            # environment steps per task, the largest in the domain
    "training_steps_per_task": _PER_TASK,
    "llm": None,
    "license": "MIT",
}


class PPOAgent:
    """Plays a trained PPO policy. ``deterministic`` (the default) plays the mode action; otherwise
    actions are sampled from a generator seeded by ``reset(seed)`` (``make_agent`` samples on
    Procgen and NetHack, where the mode action gets stuck)."""

    def __init__(self, policy, *, deterministic: bool = True):
        self.policy = policy
        self.deterministic = deterministic
        self.generator = torch.Generator().manual_seed(0)
        self.generators: dict[int, torch.Generator] = {}  # per episode seed, for act_batch's lanes

    def reset(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(int(seed))
        self.generators[int(seed)] = self.generator

    def act(self, observation, info):
        return self._act_one(observation, self.generator)

    def _act_one(self, observation, generator):
        batch = self.policy.preprocess.stack([observation])
        action = self.policy.act(batch, deterministic=self.deterministic, generator=generator)[0]
        return int(action) if np.ndim(action) == 0 else action

    def act_batch(self, observations, infos):
        """The actions of the lanes of one task and run, identical to calling `act` on each.

        Each lane's episode samples from its own generator (``info["episode_seed"]``, the seed that
        `reset` was called with). Discrete policies run one forward pass for all lanes. Continuous
        policies run row by row: a float32 matrix product's last bits depend on the number of rows,
        so a batched pass would not give `act`'s actions bit for bit."""
        generators = [self.generators.get(int(info["episode_seed"]), self.generator) for info in infos]
        if self.policy.network.discrete:
            batch = self.policy.preprocess.stack(list(observations))
            played = [None if self.deterministic else g for g in generators]
            return [int(a) for a in self.policy.act_each(batch, played)]
        return [self._act_one(o, g) for o, g in zip(observations, generators, strict=True)]


def make_agent(task, run):
    torch.set_num_threads(1)
    path = checkpoint_dir() / task.id / f"run{run}.pt"
    if not path.exists():
        raise FileNotFoundError(f"no PPO checkpoint at {path}; train it with "
                                f"python -m baselines.ppo.train --task {task.id} --seed {run}")
    policy, _ = load_checkpoint(path, task.observation_space, task.action_space)
    # Procgen and NetHack: sampled actions, seeded by each episode's seed (networks.plays_sampled)
    return PPOAgent(policy, deterministic=not plays_sampled(task.observation_space))
