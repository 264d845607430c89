"""The agent contract, loading ``agent.py`` files, and adapters.

An agent file defines ``make_agent(task: TaskInfo, run: int)`` returning an object with
``act(observation, info) -> action`` and optionally ``act_batch(observations, infos)``,
``reset(seed)``, ``close()``, ``wants_text`` and ``episode_info()``, and may set a module-level
``AGENT_INFO`` dict. `load_agent_module` imports and checks such a file; `FunctionAgent`,
`SB3Agent`, `RLlibAgent` and `RandomAgent` are ready-made agents. See docs/evaluate.md#the-agent-file
(and "How it runs" for batched acting and determinism).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

from .errors import AgentLoadError
from .task_info import TaskInfo

__all__ = ["Agent", "load_agent_module", "agent_file_hash", "agent_info", "FunctionAgent",
           "SB3Agent", "RLlibAgent", "RandomAgent",
           "RLLIB_OBSERVATION_FILE", "rllib_observation_flattener"]


@runtime_checkable
class Agent(Protocol):
    """What ``make_agent`` returns. Only ``act`` is required."""

    def act(self, observation: Any, info: dict) -> Any: ...


def agent_file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_agent_module(path: str | Path) -> ModuleType:
    """Import an agent file and check its contract; every problem is one `AgentLoadError` line."""
    p = Path(path)
    if not p.is_file():
        raise AgentLoadError(f"agent file {str(p)!r} not found; pass the path of your agent.py "
                             f"(see examples/random_agent.py)")
    name = "polar_bench_agent_" + hashlib.sha256(str(p.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    folder = str(p.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so that the agent can import files beside it
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise AgentLoadError(f"{p} cannot be imported as a Python file; name it agent.py (a .py file)")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise AgentLoadError(f"{p}, line {exc.lineno}: SyntaxError: {exc.msg}; "
                             f"fix the syntax of the agent file") from None
    except Exception as exc:  # noqa: BLE001 - any import failure is the agent's
        where = _last_frame_in(traceback.extract_tb(exc.__traceback__), p)
        raise AgentLoadError(f"importing {p} raised {type(exc).__name__}: {exc}{where}; "
                             f"fix the agent file (or install what it imports)") from None
    make = getattr(module, "make_agent", None)
    if make is None:
        raise AgentLoadError(f"{p} defines no make_agent(task, run); add a function "
                             f"make_agent(task, run) that returns an object with act(observation, info)")
    if not callable(make):
        raise AgentLoadError(f"{p}: make_agent must be a function, got {type(make).__name__}")
    info = getattr(module, "AGENT_INFO", {})
    if not isinstance(info, dict):
        raise AgentLoadError(f"{p}: AGENT_INFO must be a dict (name, authors, url, ...), got {type(info).__name__}")
    sys.modules[name] = module
    return module


def _last_frame_in(frames: traceback.StackSummary, path: Path) -> str:
    for fr in reversed(frames):
        if Path(fr.filename).resolve() == path.resolve():
            return f" (line {fr.lineno})"
    return ""


def agent_info(module: ModuleType) -> dict:
    return dict(getattr(module, "AGENT_INFO", {}) or {})


def build_agent(module: ModuleType, task: TaskInfo, run: int, path: str | Path = "agent.py") -> Any:
    """Call make_agent and check what it returns; `AgentLoadError` when it raises or returns junk."""
    try:
        agent = module.make_agent(task, run)
    except Exception as exc:  # noqa: BLE001
        where = _last_frame_in(traceback.extract_tb(exc.__traceback__), Path(path))
        raise AgentLoadError(f"make_agent({task.id!r}, run={run}) in {path} raised "
                             f"{type(exc).__name__}: {exc}{where}; fix make_agent") from None
    if not callable(getattr(agent, "act", None)):
        raise AgentLoadError(f"make_agent({task.id!r}, run={run}) in {path} returned {type(agent).__name__}, "
                             f"which has no act(observation, info) method")
    return agent


class FunctionAgent:
    """Make any callable ``policy(observation) -> action`` an agent: ``FunctionAgent(policy)``."""

    def __init__(self, policy: Callable[..., Any], *, with_info: bool = False):
        self.policy = policy
        self.with_info = with_info

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self.policy(observation, info) if self.with_info else self.policy(observation)


RLLIB_OBSERVATION_FILE = "polar_bench_observation.json"


def rllib_observation_flattener(space: spaces.Space, dropped: tuple[str, ...] = ()) -> Callable[[Any], np.ndarray]:
    """The observation a policy trained by baselines/rllib sees, as a function of the harness's.

    A Box space passes through as float32. A Dict or Tuple space goes through RLlib's own
    ``FlattenObservations`` rule (``ray.rllib.utils.numpy.flatten_inputs_to_1d_tensor`` over the
    space's leaves in ``tree.flatten`` order: Boxes flattened, Discrete one-hot, MultiDiscrete
    multi-one-hot), after dropping the top-level keys in ``dropped`` (text components, which RLlib
    cannot encode)."""
    if not isinstance(space, (spaces.Dict, spaces.Tuple)):
        return lambda obs: np.asarray(obs, dtype=np.float32)
    from ray.rllib.utils.numpy import flatten_inputs_to_1d_tensor
    from ray.rllib.utils.spaces.space_utils import get_base_struct_from_space

    struct = get_base_struct_from_space(space)
    if isinstance(struct, dict):
        struct = {k: v for k, v in struct.items() if k not in dropped}

    def flatten(obs: Any) -> np.ndarray:
        if isinstance(obs, dict):
            obs = {k: v for k, v in obs.items() if k not in dropped}
        return np.asarray(flatten_inputs_to_1d_tensor(obs, struct, batch_axis=False), dtype=np.float32)

    return flatten


class RLlibAgent:
    """An RLlib (new API stack) checkpoint as an agent: ``RLlibAgent("runs/rllib/checkpoints/T/run0")``.

    ``path`` is an Algorithm checkpoint (baselines/rllib/train.py writes them) or an RLModule
    checkpoint folder. The module is loaded directly with torch (``RLModule.from_checkpoint``): no
    Ray cluster is started, so it plays in the isolated agent process. It acts with the mode of
    the module's inference distribution (``deterministic=False`` samples, seeded by ``reset``).
    The default env-to-module connectors are assumed (observations as arrays, no running filter),
    plus RLlib's ``FlattenObservations`` for dict and tuple observations: baselines/rllib writes the
    harness's observation space and the dropped text keys into the checkpoint
    (`RLLIB_OBSERVATION_FILE`), and the agent flattens the same way (`rllib_observation_flattener`).
    ``observation_space``/``dropped`` given here take precedence over that file; ``module`` (an
    RLModule in memory) replaces the checkpoint.
    """

    def __init__(self, path: str | Path | None = None, *, module_id: str = "default_policy",
                 deterministic: bool = True, observation_space: spaces.Space | None = None,
                 dropped: tuple[str, ...] | None = None, module: Any = None):
        import torch

        from ._optional import require

        require("ray.rllib", "rllib", "loading RLlib checkpoints")
        if module is None:
            if path is None:
                raise AgentLoadError("RLlibAgent needs a checkpoint path (or module=, an RLModule in memory)")
            from ray.rllib.core.rl_module.rl_module import RLModule

            p = Path(path)
            inner = p / "learner_group" / "learner" / "rl_module" / module_id
            if not (p / "class_and_ctor_args.pkl").exists():
                raise AgentLoadError(f"no RLlib checkpoint at {p}; train one with python -m baselines.rllib.train")
            spec_file = p / RLLIB_OBSERVATION_FILE
            if spec_file.exists():
                import json

                from .task_info import space_from_json

                spec = json.loads(spec_file.read_text())
                observation_space = observation_space or space_from_json(spec["observation_space"])
                dropped = tuple(spec.get("dropped", ())) if dropped is None else dropped
            module = RLModule.from_checkpoint(str(inner if inner.is_dir() else p))
        self.module = module
        if isinstance(self.module, torch.nn.Module):  # a TorchRLModule: inference mode (no dropout)
            self.module.eval()
        self.deterministic = deterministic
        self._torch = torch
        self._flatten = (rllib_observation_flattener(observation_space, tuple(dropped or ()))
                         if observation_space is not None else None)

    @classmethod
    def from_module(cls, module: Any, *, deterministic: bool = True, observation_space: spaces.Space | None = None,
                    dropped: tuple[str, ...] = ()) -> RLlibAgent:
        """An agent acting with an RLModule in memory (an env runner's, during training)."""
        return cls(module=module, deterministic=deterministic, observation_space=observation_space, dropped=dropped)

    def reset(self, seed: int) -> None:
        self._torch.manual_seed(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self.act_batch([observation], [info])[0]

    def _array(self, observation: Any) -> np.ndarray:
        if self._flatten is not None:
            return self._flatten(observation)
        if isinstance(observation, (dict, tuple)):
            raise AgentLoadError("this RLlib checkpoint has no polar_bench_observation.json to flatten dict "
                                 "observations with; pass observation_space= (and dropped=) to RLlibAgent")
        return np.asarray(observation, dtype=np.float32)

    def act_batch(self, observations: Sequence[Any], infos: Sequence[dict[str, Any]]) -> list[Any]:
        torch = self._torch
        obs = torch.as_tensor(np.stack([self._array(o) for o in observations]))
        with torch.no_grad():
            out = self.module.forward_inference({"obs": obs})
            if "actions" in out:
                actions = out["actions"]
            else:
                dist = self.module.get_inference_action_dist_cls().from_logits(out["action_dist_inputs"])
                actions = (dist.to_deterministic() if self.deterministic else dist).sample()
        actions = actions.cpu().numpy()
        if actions.dtype.kind in "iu":
            return [int(a) for a in actions.reshape(len(observations), -1)[:, 0]]
        return [np.clip(a, -1.0, 1.0).astype(np.float32) for a in actions]


class SB3Agent:
    """A Stable-Baselines3 model as an agent: ``SB3Agent(PPO.load(path))``.

    The model must have been trained on the polar_bench harness of the task (so its action space is
    the harness's: continuous actions in [-1, 1]); ``deterministic`` selects the mode action.
    """

    def __init__(self, model: Any, *, deterministic: bool = True):
        self.model = model
        self.deterministic = deterministic

    def reset(self, seed: int) -> None:
        if hasattr(self.model, "set_random_seed"):
            self.model.set_random_seed(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        action, _ = self.model.predict(observation, deterministic=self.deterministic)
        if isinstance(self.model.action_space, spaces.Discrete):
            return int(np.asarray(action).reshape(()))
        return np.asarray(action, dtype=np.float32)

    def act_batch(self, observations: Sequence[Any], infos: Sequence[dict[str, Any]]) -> list[Any]:
        """The lanes' actions, identical to `act` on each. A discrete policy predicts all lanes in one
        call; a continuous one lane by lane (a float32 matrix product's last bits depend on the
        number of rows, so a batched call would not reproduce `act` bit for bit). A sampling policy
        (``deterministic=False``) draws from the model's one generator, lane after lane, as `act` would."""
        if not isinstance(self.model.action_space, spaces.Discrete) or not self.deterministic:
            return [self.act(o, i) for o, i in zip(observations, infos, strict=True)]
        if isinstance(observations[0], dict):
            batch = {k: np.stack([o[k] for o in observations]) for k in observations[0]}
        else:
            batch = np.stack(observations)
        actions, _ = self.model.predict(batch, deterministic=True)
        return [int(a) for a in np.asarray(actions).reshape(len(observations))]


class RandomAgent:
    """Uniformly random actions, reproducible from ``reset(seed)``."""

    def __init__(self, task: TaskInfo):
        self.space = task.action_space
        self.rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observation: Any, info: dict[str, Any]) -> int | np.ndarray:
        if isinstance(self.space, spaces.Discrete):
            return int(self.space.start + self.rng.integers(self.space.n))
        return self.rng.uniform(-1.0, 1.0, size=self.space.shape).astype(np.float32)
