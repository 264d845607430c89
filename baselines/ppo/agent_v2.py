"""The PPO baseline on suite v2: the checkpoint of (task, run) plays as `agent.py` plays it.

    python -m polar_bench evaluate baselines/ppo/agent_v2.py --suite v2

Classic, DMC and BabyAI checkpoints are the committed ones in checkpoints/ (runs 0-4). Procgen, NetHack
and Atari checkpoints were trained in the portable numeric mode (`polar_bench.numerics`), so they
rebuild bit for bit on any x86-64 CPU with AVX2 and FMA; they are git-ignored and live in
portable/checkpoints/. `agent.py` keeps playing the checkpoints pinned for suite v1 (the v1 entries'
agent files import it). POLAR_PPO_CHECKPOINTS, when set, names one folder for every task instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # so that baselines.ppo imports when evaluate loads this file

import torch  # noqa: E402

from baselines.ppo import agent as v1  # noqa: E402
from baselines.ppo.agent import PPOAgent, training_steps  # noqa: E402
from baselines.ppo.networks import load_checkpoint, plays_sampled  # noqa: E402

HERE = Path(__file__).resolve().parent
PORTABLE_FAMILIES = ("procgen", "nethack", "atari")  # trained in the portable mode, git-ignored


def checkpoint_path(task_id: str, run: int) -> Path:
    """Where run ``run`` of ``task_id`` is read from (module docstring; read at every call)."""
    if "POLAR_PPO_CHECKPOINTS" in os.environ:
        return Path(os.environ["POLAR_PPO_CHECKPOINTS"]) / task_id / f"run{run}.pt"
    folder = HERE / "portable" / "checkpoints" if task_id.split("/")[0] in PORTABLE_FAMILIES else HERE / "checkpoints"
    return folder / task_id / f"run{run}.pt"


_PER_TASK, _PER_DOMAIN = training_steps(
    [p for p in (HERE / "checkpoints").glob("**/run*.json") if p.parent.parent.name not in PORTABLE_FAMILIES]
    + list((HERE / "portable" / "checkpoints").glob("**/run*.json")))
# environment steps per task, the largest in the domain; the rest as agent.py's
AGENT_INFO = {**v1.AGENT_INFO, "training_steps": _PER_DOMAIN, "training_steps_per_task": _PER_TASK}


def load_policy(task, run: int):
    """The trained `Policy` of (task, run), or FileNotFoundError naming the command that makes it."""
    path = checkpoint_path(task.id, run)
    if not path.exists():
        raise FileNotFoundError(f"no PPO checkpoint at {path}; rebuild it with python -m baselines.ppo.rebuild "
                                f"{task.id} {run} --out {path.parents[2]}" if task.id.split("/")[0]
                                in PORTABLE_FAMILIES else f"no PPO checkpoint at {path}; train it with "
                                f"python -m baselines.ppo.train --task {task.id} --seed {run}")
    return load_checkpoint(path, task.observation_space, task.action_space)[0]


def make_agent(task, run):
    torch.set_num_threads(1)
    # Procgen, NetHack and Atari: sampled actions, seeded by each episode's seed (networks.plays_sampled)
    return PPOAgent(load_policy(task, run), deterministic=not plays_sampled(task.observation_space))
