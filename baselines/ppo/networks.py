"""What the PPO baseline's policy is made of: observation preprocessing, one network per observation
kind, and the checkpoint format. Shared by ``train.py`` (which trains it) and ``agent.py`` (which
plays it), so that evaluation sees exactly the network and preprocessing that training saw.

Observation kinds (`observation_kind`), decided from the harness's observation space:

* ``vector``  a ``Box`` of rank 1 (or any other space `polar_bench.observations` flattens):
  separate actor and critic MLPs, 2 x 64 tanh (cleanrl's ``ppo.py``/``ppo_continuous_action.py``);
  optional running mean/std normalization of the inputs (clipped to [-10, 10]).
* ``image``   a ``uint8`` ``Box`` of shape (H, W, C) (Procgen): the IMPALA CNN (Espeholt et al.
  2018; channels 16, 32, 32, then 256 units), shared by actor and critic (cleanrl's ``ppo_procgen.py``);
  84 x 84 frames (the Atari harness's stacked grayscale frames) get the Nature DQN CNN instead (Mnih
  et al. 2015; cleanrl's ``ppo_atari.py``), a fifth of the IMPALA CNN's arithmetic at that size.
* ``nethack`` NLE's dict with ``glyphs`` and ``blstats``: a 9 x 9 glyph crop centred on the agent
  (glyph embeddings, two convolutions) plus the bottom-line stats (signed log scale, one layer).
* ``babyai``  MiniGrid's dict with ``image`` (7 x 7 x 3 object/colour/state codes), ``direction`` and
  the ``mission`` string: code embeddings and two convolutions, a one-hot direction, and the mission
  as hashed word tokens read by a GRU.

Batches of prepared observations are ``dict[str, torch.Tensor]`` with the batch dimension first.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array
from torch import nn
from torch.distributions import Categorical, Normal

from polar_bench.observations import flat_size, flatten_observation

CHECKPOINT_FORMAT = 1
NETHACK_CROP = 9          # side of the glyph window around the agent
NETHACK_GLYPHS = 5976     # nle.nethack.MAX_GLYPH: glyph ids are 0..5976; 5977 pads the crop
MISSION_TOKENS = 32       # BabyAI mission: at most this many words
MISSION_VOCAB = 512       # hashed word ids 1..511; 0 pads
NATURE_FRAME = (84, 84)   # image observations of this size (Atari) get the Nature DQN CNN


# ---------------------------------------------------------------------------------------------
# Observation preprocessing
# ---------------------------------------------------------------------------------------------

def observation_kind(space: spaces.Space) -> str:
    """``vector``, ``image``, ``nethack`` or ``babyai`` (see the module docstring)."""
    if isinstance(space, spaces.Dict):
        keys = set(space.spaces)
        if {"glyphs", "blstats"} <= keys:
            return "nethack"
        if {"image", "mission"} <= keys:
            return "babyai"
    if isinstance(space, spaces.Box) and len(space.shape) == 3 and space.dtype == np.uint8:
        return "image"
    return "vector"


# Procgen and NetHack policies are played by sampling from the policy (with a generator seeded by the
# episode seed, so still reproducible): their mode action gets stuck (NetHack: walking into the same
# wall for the whole episode; -10 on Score where the sampled policy scores above random).
SAMPLED_KINDS = ("image", "nethack")


def plays_sampled(space: spaces.Space) -> bool:
    """Whether a policy for this observation space is evaluated by sampling (else: the mode action)."""
    return observation_kind(space) in SAMPLED_KINDS


class RunningMeanStd:
    """Running mean and variance of a stream of batches (Chan et al.'s parallel update), float64."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4

    def update(self, batch: np.ndarray) -> None:
        batch_mean, batch_var, n = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict:
        return {"mean": torch.as_tensor(self.mean), "var": torch.as_tensor(self.var),
                "count": torch.tensor(self.count, dtype=torch.float64)}

    def load_state_dict(self, state: dict) -> None:
        self.mean = state["mean"].numpy().astype(np.float64)
        self.var = state["var"].numpy().astype(np.float64)
        self.count = float(state["count"])


def mission_tokens(mission: str) -> np.ndarray:
    """A BabyAI mission as ``MISSION_TOKENS`` word ids (CRC32 hashing; stable across processes)."""
    words = re.findall(r"[a-z]+", str(mission).lower())[:MISSION_TOKENS]
    out = np.zeros(MISSION_TOKENS, np.int64)
    for i, word in enumerate(words):
        out[i] = 1 + zlib.crc32(word.encode()) % (MISSION_VOCAB - 1)
    return out


def nethack_crop(glyphs: np.ndarray, blstats: np.ndarray) -> np.ndarray:
    """The ``NETHACK_CROP`` square of glyphs centred on the agent, for a batch: (N, 21, 79) glyphs and
    (N, 27) blstats (x = column, y = row in entries 0 and 1) give (N, 9, 9) int64; off-map is padding."""
    n, rows, cols = glyphs.shape
    r = NETHACK_CROP // 2
    padded = np.full((n, rows + 2 * r, cols + 2 * r), NETHACK_GLYPHS + 1, np.int64)
    padded[:, r:r + rows, r:r + cols] = glyphs
    x = np.clip(blstats[:, 0].astype(np.int64), 0, cols - 1)
    y = np.clip(blstats[:, 1].astype(np.int64), 0, rows - 1)
    window = np.arange(NETHACK_CROP)
    return padded[np.arange(n)[:, None, None], (y[:, None] + window)[:, :, None],
                  (x[:, None] + window)[:, None, :]]


class ObservationPreprocessor:
    """Raw observations (a vector env's batch, or a list of single ones via `stack`) to the tensors
    the network reads. Holds the running normalization of vector observations when enabled."""

    def __init__(self, space: spaces.Space, normalize: bool = False, clip: float = 10.0):
        self.space = space
        self.kind = observation_kind(space)
        self.normalize = normalize and self.kind == "vector"
        self.clip = clip
        self.rms = RunningMeanStd((flat_size(space),)) if self.normalize else None

    def stack(self, observations: list) -> Any:
        """A list of single observations as one batch, laid out like a vector env's."""
        return concatenate(self.space, observations, create_empty_array(self.space, len(observations)))

    def __call__(self, batch: Any, update: bool = False) -> dict[str, torch.Tensor]:
        if self.kind == "vector":
            if isinstance(self.space, spaces.Box):
                x = np.asarray(batch, np.float32).reshape(len(batch), -1)
            else:
                n = len(next(iter(batch.values()))) if isinstance(batch, dict) else len(batch)
                x = np.stack([flatten_observation(self.space, _item(batch, i)) for i in range(n)])
            if self.rms is not None:  # normalizing
                if update:
                    self.rms.update(x)
                x = np.clip((x - self.rms.mean) / np.sqrt(self.rms.var + 1e-8), -self.clip, self.clip)
            return {"x": torch.as_tensor(x, dtype=torch.float32)}
        if self.kind == "image":
            return {"image": torch.as_tensor(np.asarray(batch, np.uint8))}
        if self.kind == "nethack":
            blstats = np.asarray(batch["blstats"])
            crop = nethack_crop(np.asarray(batch["glyphs"]), blstats)
            stats = np.sign(blstats) * np.log1p(np.abs(blstats.astype(np.float64)))
            return {"crop": torch.as_tensor(crop), "blstats": torch.as_tensor(stats, dtype=torch.float32)}
        # babyai
        tokens = np.stack([mission_tokens(m) for m in batch["mission"]])
        return {"image": torch.as_tensor(np.asarray(batch["image"], np.int64)),
                "direction": torch.as_tensor(np.asarray(batch["direction"], np.int64).reshape(-1)),
                "mission": torch.as_tensor(tokens)}

    def state_dict(self) -> dict | None:
        return self.rms.state_dict() if self.rms is not None else None

    def load_state_dict(self, state: dict | None) -> None:
        if self.rms is not None:
            if state is None:
                raise ValueError("the checkpoint has no observation normalization statistics")
            self.rms.load_state_dict(state)


def _item(batch: Any, i: int) -> Any:
    """Entry ``i`` of a batched (possibly nested dict) observation."""
    if isinstance(batch, dict):
        return {k: _item(v, i) for k, v in batch.items()}
    return batch[i]


# ---------------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------------

def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights with gain ``std`` and constant biases (the PPO implementation detail)."""
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias)
    return layer


class Body(nn.Module):
    """A network body: observation tensors in, ``out_dim`` features out."""

    out_dim: int


class MLPBody(Body):
    def __init__(self, in_dim: int, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        layers, d = [], in_dim
        for h in hidden:
            layers += [layer_init(nn.Linear(d, h)), nn.Tanh()]
            d = h
        self.net = nn.Sequential(*layers)
        self.out_dim = d

    def forward(self, obs: dict) -> torch.Tensor:
        return self.net(obs["x"])


class ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


class ConvSequence(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.res0 = ResidualBlock(out_channels)
        self.res1 = ResidualBlock(out_channels)

    def forward(self, x):
        x = nn.functional.max_pool2d(self.conv(x), kernel_size=3, stride=2, padding=1)
        return self.res1(self.res0(x))


class ImpalaBody(Body):
    """The IMPALA CNN: three conv sequences (16, 32, 32 channels), then 256 ReLU units."""

    def __init__(self, shape: tuple[int, int, int], channels=(16, 32, 32), out_dim: int = 256):
        super().__init__()
        h, w, c = shape
        seqs = []
        for ch in channels:
            seqs.append(ConvSequence(c, ch))
            c, h, w = ch, (h + 1) // 2, (w + 1) // 2
        self.convs = nn.Sequential(*seqs)
        self.fc = layer_init(nn.Linear(c * h * w, out_dim))
        self.out_dim = out_dim

    def forward(self, obs: dict) -> torch.Tensor:
        x = obs["image"].permute(0, 3, 1, 2).float() / 255.0
        x = torch.relu(torch.flatten(self.convs(x), 1))
        return torch.relu(self.fc(x))


class NatureBody(Body):
    """The Nature DQN CNN: 32 8x8/4, 64 4x4/2, 64 3x3/1 convolutions, then 512 ReLU units."""

    def __init__(self, shape: tuple[int, int, int], out_dim: int = 512):
        super().__init__()
        h, w, c = shape
        self.convs = nn.Sequential(
            nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten())
        for conv in self.convs:  # orthogonal weights, zero biases (as layer_init does for linear layers)
            if isinstance(conv, nn.Conv2d):
                torch.nn.init.orthogonal_(conv.weight, np.sqrt(2))
                if conv.bias is not None:
                    torch.nn.init.zeros_(conv.bias)
        with torch.no_grad():
            n = self.convs(torch.zeros(1, c, h, w)).shape[1]
        self.fc = layer_init(nn.Linear(n, out_dim))
        self.out_dim = out_dim

    def forward(self, obs: dict) -> torch.Tensor:
        x = obs["image"].permute(0, 3, 1, 2).float() / 255.0
        return torch.relu(self.fc(self.convs(x)))


class NetHackBody(Body):
    """Glyph crop around the agent (embedding, two convolutions) + bottom-line stats."""

    def __init__(self, n_stats: int = 27, embed: int = 16, out_dim: int = 256):
        super().__init__()
        self.embed = nn.Embedding(NETHACK_GLYPHS + 2, embed)
        self.conv = nn.Sequential(
            nn.Conv2d(embed, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten())
        self.stats = nn.Sequential(layer_init(nn.Linear(n_stats, 64)), nn.ReLU())
        self.fc = nn.Sequential(layer_init(nn.Linear(32 * NETHACK_CROP**2 + 64, out_dim)), nn.ReLU())
        self.out_dim = out_dim

    def forward(self, obs: dict) -> torch.Tensor:
        crop = self.embed(obs["crop"]).permute(0, 3, 1, 2)
        return self.fc(torch.cat([self.conv(crop), self.stats(obs["blstats"])], dim=1))


class BabyAIBody(Body):
    """Grid codes (object, colour, state: one embedding table with offsets), direction, mission GRU."""

    OFFSETS = (0, 11, 17)  # MiniGrid: 11 object types, 6 colours, 3 door states

    def __init__(self, embed: int = 16, text_dim: int = 64, out_dim: int = 128):
        super().__init__()
        self.register_buffer("offsets", torch.tensor(self.OFFSETS), persistent=False)
        self.cells = nn.Embedding(32, embed)
        self.conv = nn.Sequential(
            nn.Conv2d(embed, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten())
        self.words = nn.Embedding(MISSION_VOCAB, 32, padding_idx=0)
        self.gru = nn.GRU(32, text_dim, batch_first=True)
        self.fc = nn.Sequential(layer_init(nn.Linear(32 * 49 + 4 + text_dim, out_dim)), nn.ReLU())
        self.out_dim = out_dim

    def forward(self, obs: dict) -> torch.Tensor:
        codes = (obs["image"].clamp(0, 10) + self.offsets).clamp(max=31)
        grid = self.cells(codes).sum(dim=3).permute(0, 3, 1, 2)          # (N, embed, 7, 7)
        direction = nn.functional.one_hot(obs["direction"].clamp(0, 3), 4).float()
        tokens = obs["mission"]
        out, _ = self.gru(self.words(tokens))
        last = (tokens > 0).sum(dim=1).clamp(min=1) - 1                  # index of the last word
        text = out[torch.arange(len(tokens)), last]
        return self.fc(torch.cat([self.conv(grid), direction, text], dim=1))


class ActorCritic(nn.Module):
    """A body (or separate actor and critic bodies) with a policy head and a value head.

    Discrete actions: a categorical over the logits. Continuous actions: a diagonal Gaussian with a
    state-independent log standard deviation; samples are unbounded and the environment gets them
    clipped to [-1, 1] (the harness's action box); the mode is the clipped mean.
    """

    def __init__(self, actor_body: Body, critic_body: Body | None, action_space: spaces.Space):
        super().__init__()
        self.actor_body = actor_body
        self.critic_body = critic_body          # None: the critic shares the actor's body
        d = actor_body.out_dim
        self.discrete = isinstance(action_space, spaces.Discrete)
        if isinstance(action_space, spaces.Discrete):
            self.actor_head = layer_init(nn.Linear(d, int(action_space.n)), std=0.01)
        else:
            n = int(np.prod(action_space.shape or ()))
            self.actor_head = layer_init(nn.Linear(d, n), std=0.01)
            self.actor_logstd = nn.Parameter(torch.zeros(1, n))
        self.critic_head = layer_init(nn.Linear(d, 1), std=1.0)

    def _features(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        actor = self.actor_body(obs)
        return actor, (actor if self.critic_body is None else self.critic_body(obs))

    def distribution(self, features: torch.Tensor) -> Categorical | Normal:
        """The policy's action distribution given the actor body's features."""
        out = self.actor_head(features)
        if self.discrete:  # argument validation off: it costs more than the network on small batches
            return Categorical(logits=out, validate_args=False)
        return Normal(out, self.actor_logstd.expand_as(out).exp(), validate_args=False)

    def get_value(self, obs: dict) -> torch.Tensor:
        body = self.actor_body if self.critic_body is None else self.critic_body
        return self.critic_head(body(obs)).squeeze(-1)

    def get_action_and_value(self, obs: dict, action: torch.Tensor | None = None,
                             generator: torch.Generator | None = None):
        """(action, log-probability, entropy, value); samples an action when none is given."""
        actor, critic = self._features(obs)
        dist = self.distribution(actor)
        if action is None:
            action = _sample(dist, generator)
        logprob, entropy = dist.log_prob(action), dist.entropy()
        if not self.discrete:
            logprob, entropy = logprob.sum(-1), entropy.sum(-1)
        return action, logprob, entropy, self.critic_head(critic).squeeze(-1)

    def sample(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-probability, value) for acting: `get_action_and_value` without the entropy."""
        actor, critic = self._features(obs)
        dist = self.distribution(actor)
        action = dist.sample()
        logprob = dist.log_prob(action)
        return action, (logprob if self.discrete else logprob.sum(-1)), self.critic_head(critic).squeeze(-1)

    def mode(self, obs: dict) -> torch.Tensor:
        """The most likely action (argmax, or the mean clipped to [-1, 1])."""
        out = self.actor_head(self.actor_body(obs))
        return out.argmax(-1) if self.discrete else out.clamp(-1.0, 1.0)


def _sample(dist, generator: torch.Generator | None) -> torch.Tensor:
    if generator is None:
        return dist.sample()
    if isinstance(dist, Categorical):
        return torch.multinomial(dist.probs, 1, generator=generator).squeeze(-1)
    return dist.mean + dist.stddev * torch.randn(dist.mean.shape, generator=generator)


def build_network(observation_space: spaces.Space, action_space: spaces.Space) -> ActorCritic:
    """The network for a task's spaces (a pure function of them, so a checkpoint needs no more)."""
    kind = observation_kind(observation_space)
    if kind == "vector":
        n = flat_size(observation_space)
        return ActorCritic(MLPBody(n), MLPBody(n), action_space)
    if kind == "image":
        height, width, channels = observation_space.shape or ()
        if (height, width) == NATURE_FRAME:
            return ActorCritic(NatureBody((height, width, channels)), None, action_space)
        return ActorCritic(ImpalaBody((height, width, channels)), None, action_space)
    if kind == "nethack" and isinstance(observation_space, spaces.Dict):
        n_stats, = observation_space["blstats"].shape or (0,)
        return ActorCritic(NetHackBody(int(n_stats)), None, action_space)
    return ActorCritic(BabyAIBody(), None, action_space)


# ---------------------------------------------------------------------------------------------
# The policy (preprocessing + network) and checkpoints
# ---------------------------------------------------------------------------------------------

class Policy:
    """What a checkpoint holds and an agent plays: preprocessing (frozen) plus the network."""

    def __init__(self, preprocess: ObservationPreprocessor, network: ActorCritic):
        self.preprocess, self.network = preprocess, network

    @torch.no_grad()
    def act(self, batch: Any, deterministic: bool = True,
            generator: torch.Generator | None = None) -> np.ndarray:
        """Actions for a batch of raw observations, in the harness's action format."""
        obs = self.preprocess(batch, update=False)
        if deterministic:
            action = self.network.mode(obs)
        else:
            action = self.network.get_action_and_value(obs, generator=generator)[0]
        actions = action.numpy()
        return actions if self.network.discrete else np.clip(actions, -1.0, 1.0).astype(np.float32)

    @torch.no_grad()
    def act_each(self, batch: Any, generators: list[torch.Generator | None]) -> np.ndarray:
        """Discrete actions for a batch in one forward pass, row ``i`` played as `act` plays a batch of
        one: the mode where ``generators[i]`` is None, else sampled with ``generators[i]``."""
        if not self.network.discrete:
            raise ValueError("act_each is for discrete actions; continuous ones are computed row by row")
        obs = self.preprocess(batch, update=False)
        dist = self.network.distribution(self.network.actor_body(obs))
        assert isinstance(dist, Categorical)  # checked above: the network is discrete
        actions = dist.logits.argmax(-1).tolist()  # the modes, as `act` takes them
        probs = dist.probs if any(g is not None for g in generators) else None
        for i, generator in enumerate(generators):
            if generator is not None and probs is not None:
                actions[i] = int(torch.multinomial(probs[i:i + 1], 1, generator=generator)[0, 0])
        return np.asarray(actions, np.int64)

    @torch.no_grad()
    def act_and_entropy(self, batch: Any, generator: torch.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Actions (the mode, or sampled with ``generator``) and the policy's entropy (nats) for a
        batch, in one forward pass. The LLM+PPO agent replans when its executor is uncertain."""
        obs = self.preprocess(batch, update=False)
        dist = self.network.distribution(self.network.actor_body(obs))
        entropy = dist.entropy() if self.network.discrete else dist.entropy().sum(-1)
        if generator is not None:
            action = _sample(dist, generator)
        else:
            action = dist.logits.argmax(-1) if isinstance(dist, Categorical) else dist.mean
        actions = action.numpy()
        if not self.network.discrete:
            actions = np.clip(actions, -1.0, 1.0).astype(np.float32)
        return actions, entropy.numpy()


def save_checkpoint(path, policy: Policy, *, task_id: str, domain: str, env_steps: int,
                    config: dict, eval_return: float | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"format": CHECKPOINT_FORMAT, "task": task_id, "domain": domain,
                "env_steps": int(env_steps), "eval_return": eval_return, "config": config,
                "kind": policy.preprocess.kind, "normalize": policy.preprocess.normalize,
                "obs_rms": policy.preprocess.state_dict(),
                "network": policy.network.state_dict()}, tmp)
    tmp.replace(path)  # atomic: an agent never reads a half-written checkpoint


def load_checkpoint(path, observation_space: spaces.Space, action_space: spaces.Space) -> tuple[Policy, dict]:
    """The `Policy` stored at ``path`` for these spaces, and the checkpoint's metadata."""
    data = torch.load(path, map_location="cpu", weights_only=True)
    if data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: checkpoint format {data.get('format')!r}, expected {CHECKPOINT_FORMAT}")
    preprocess = ObservationPreprocessor(observation_space, normalize=bool(data["normalize"]))
    preprocess.load_state_dict(data["obs_rms"])
    network = build_network(observation_space, action_space)
    network.load_state_dict(data["network"])
    network.eval()
    meta = {k: v for k, v in data.items() if k not in ("network", "obs_rms")}
    return Policy(preprocess, network), meta
