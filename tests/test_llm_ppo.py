"""The LLM+PPO agent: skill menus, executors, when the planner is asked, and the fallbacks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import polar_bench
from baselines.llm_ppo import skills as S

ROOT = Path(__file__).resolve().parents[1]


def _agent_module():
    spec = importlib.util.spec_from_file_location("llm_ppo_agent_under_test", ROOT / "baselines/llm_ppo/agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ScriptedLLM:
    """Stands in for an LLMClient: records every menu and answers with ``pick(menu)``."""

    def __init__(self, pick=lambda menu: menu[0]):
        self.pick, self.menus, self.seeds, self.prompts = pick, [], [], []
        self.episode_seed = None

    def reset(self, seed=None, **meta):
        self.episode_seed = seed

    def seed_for(self, step, salt=0):
        return (self.episode_seed or 0) * 100_003 + step

    def choose(self, messages, options, seed=None):
        self.menus.append(list(options))
        self.seeds.append(seed)
        self.prompts.append(messages[-1]["content"])
        answer = self.pick(list(options))
        assert answer in options
        return answer

    def episode_info(self):
        return {"llm": {"calls": len(self.menus)}}


class FakeChooser:
    """An LLM backend that always answers its request's first option."""
    supports_grammar = True
    identity = {"backend": "fake", "model": "fake", "sha256": "0" * 64}

    def __init__(self):
        self.seeds = []

    def generate(self, request):
        from polar_bench.llm import Completion
        self.seeds.append(request.seed)
        return Completion(text=request.constraint.options[0], prompt_tokens=1, completion_tokens=1, seconds=0.0,
                          model=self.identity)


def _view(objects: dict[tuple[int, int], tuple[int, int, int]], carried=None) -> np.ndarray:
    """A 7x7x3 BabyAI view: empty floor everywhere, ``objects`` at (column, row)."""
    image = np.zeros((7, 7, 3), dtype=np.uint8)
    image[:, :, 0] = 1
    for (i, j), code in objects.items():
        image[i, j] = code
    if carried is not None:
        image[3, 6] = carried
    return image


RED_BALL, BLUE_KEY, GREY_DOOR_CLOSED, GREY_DOOR_OPEN = (6, 0, 0), (5, 2, 0), (4, 5, 1), (4, 5, 0)


def test_mission_targets_and_menu():
    assert S.mission_targets("put the red ball next to a door") == [S.Target("red", "ball"), S.Target(None, "door")]
    assert S.mission_targets("pick up a purple box and go to the green key") == [
        S.Target("purple", "box"), S.Target("green", "key")]
    obs = {"image": _view({(3, 4): BLUE_KEY, (0, 0): GREY_DOOR_CLOSED}), "direction": 0,
           "mission": "pick up the red ball"}
    menu = S.babyai_menu(obs)
    # the mission's object first (even unseen), then what is in view, nearest first
    assert menu == ["follow the mission", "go to the red ball", "pick up the red ball",
                    "go to the blue key", "pick up the blue key", "go to the grey door", "open the grey door"]
    held = {"image": _view({(3, 4): BLUE_KEY}, carried=RED_BALL), "direction": 0, "mission": "go to the blue key"}
    menu = S.babyai_menu(held)
    assert "drop the object you carry" in menu and not any(m.startswith("pick up") for m in menu)
    assert len(S.babyai_menu(obs, max_options=3)) == 3


def test_babyai_skills_navigate_then_interact():
    calls = []

    def policies(name):
        def act(observation):
            calls.append((name, observation["mission"]))
            return S.FORWARD, 0.5
        return act

    far = {"image": _view({(3, 2): RED_BALL}), "direction": 0, "mission": "pick up the red ball"}
    skill = S.BabyAISkill("pick up the red ball", policies, "PickupLoc", max_steps=16)
    assert skill.act(far) == (S.FORWARD, 0.5)
    assert calls[-1] == ("GoToLocal", "go to the red ball")   # the goal is given to the executor as text
    assert skill.ended(far) is None
    near = {**far, "image": _view({S.FRONT: RED_BALL})}
    assert skill.act(near) == (S.PICKUP, None)
    assert skill.ended({**far, "image": _view({}, carried=RED_BALL)}) == "picked up"

    door = S.BabyAISkill("open the grey door", policies, "Synth", max_steps=16)
    assert door.act({**far, "image": _view({S.FRONT: GREY_DOOR_CLOSED})}) == (S.TOGGLE, None)
    assert door.ended({**far, "image": _view({S.FRONT: GREY_DOOR_OPEN})}) == "opened"

    goto = S.BabyAISkill("go to the blue key", policies, "GoToLocal", max_steps=2)
    assert goto.ended({**far, "image": _view({S.FRONT: BLUE_KEY})}) == "reached"
    goto.act(far), goto.act(far)
    assert goto.ended(far) == "step limit"

    drop = S.BabyAISkill("drop the object you carry", policies, "PutNextLocal", max_steps=8)
    assert drop.act({**far, "image": _view({S.FRONT: BLUE_KEY}, carried=RED_BALL)}) == (S.LEFT, None)
    assert drop.act({**far, "image": _view({}, carried=RED_BALL)}) == (S.DROP, None)
    assert drop.ended(far) == "dropped"

    follow = S.BabyAISkill("follow the mission", policies, "PutNextLocal", max_steps=8)
    follow.act(far)
    assert calls[-1] == ("PutNextLocal", "pick up the red ball")   # the level's policy, the real mission
    with pytest.raises(ValueError):
        S.BabyAISkill("fly to the moon", policies, "GoToLocal", max_steps=8)


def _nethack_obs(depth=1, gold=0, hunger=0):
    bl = np.zeros(27, dtype=np.int64)
    bl[0], bl[1] = 10, 5
    bl[S.BL_HP], bl[S.BL_HPMAX], bl[S.BL_DEPTH], bl[S.BL_GOLD], bl[S.BL_HUNGER] = 12, 14, depth, gold, hunger
    tty = np.full((24, 80), ord(" "), dtype=np.uint8)
    tty[6, 8:13] = np.frombuffer(b"..@.>", dtype=np.uint8)
    message = np.zeros(256, dtype=np.uint8)
    message[:9] = np.frombuffer(b"Welcome! ", dtype=np.uint8)
    return {"blstats": bl, "tty_chars": tty, "message": message, "glyphs": np.zeros((21, 79), dtype=np.int16)}


def test_nethack_skills_end_on_their_events():
    used = []
    policies = lambda name: (used.append(name), lambda obs: (3, 1.0))[1]  # noqa: E731
    descend = S.NetHackSkill("descend", policies, "Score", 100, _nethack_obs())
    assert used[-1] == "Staircase" and descend.act(_nethack_obs()) == (3, 1.0)
    assert descend.ended(_nethack_obs()) is None and descend.ended(_nethack_obs(depth=2)) == "descended"
    pick_up = S.NetHackSkill("pick up", policies, "Score", 100, _nethack_obs())
    assert pick_up.ended(_nethack_obs(gold=5)) == "picked up gold"
    assert S.NetHackSkill("eat", policies, "Score", 100, _nethack_obs(hunger=2)).ended(_nethack_obs(hunger=0)) == "ate"
    follow = S.NetHackSkill("follow the task", policies, "Oracle", 2, _nethack_obs())
    assert used[-1] == "Oracle"
    follow.act(_nethack_obs()), follow.act(_nethack_obs())
    assert follow.ended(_nethack_obs()) == "step limit"
    text = S.nethack_summary(_nethack_obs())
    assert "HP 12/14" in text and "..@.>" in text and "Welcome!" in text


def _task(task_id):
    with polar_bench.make(task_id) as env:
        return env.task_info


def test_planner_is_asked_at_start_every_k_steps_and_when_a_skill_ends():
    mod = _agent_module()
    task = _task("babyai/GoToLocal")
    llm = ScriptedLLM(lambda menu: next((m for m in menu if m.startswith("go to")), menu[0]))
    policies = lambda name: (lambda obs: (S.FORWARD, 0.1))  # noqa: E731
    agent = mod.LLMPPOAgent(task, 0, llm, policies, cfg={**mod.CONFIG, "replan_every": {"babyai": 3}})
    agent.reset(7)
    far = {"image": _view({(3, 2): RED_BALL}), "direction": 0, "mission": "go to the red ball"}
    for _ in range(3):
        assert agent.act(far, {"text": "view"}) == S.FORWARD
    assert len(llm.menus) == 1                       # the first decision, then the skill runs k steps
    agent.act(far, {"text": "view"})
    assert len(llm.menus) == 2                       # k steps: replan
    assert "go to the red ball: step limit after 3 steps" in llm.prompts[-1]
    agent.act({**far, "image": _view({S.FRONT: RED_BALL})}, {"text": "view"})
    assert len(llm.menus) == 3                       # the skill reached its goal: replan
    assert "reached" in llm.prompts[-1]
    assert llm.seeds == [7 * 100_003 + s for s in (0, 3, 4)]   # per-call seeds from (episode seed, step)
    agent.reset(8)
    agent.act(far, {"text": "view"})
    assert len(llm.menus) == 4 and "(none yet)" in llm.prompts[-1]   # history is per episode


def test_planner_replans_when_the_executor_is_uncertain():
    mod = _agent_module()
    task = _task("babyai/GoToLocal")
    llm = ScriptedLLM()
    entropies = iter([0.5, 1.8, 0.5, 0.5])
    policies = lambda name: (lambda obs: (S.FORWARD, next(entropies)))  # noqa: E731
    cfg = {**mod.CONFIG, "replan_every": {"babyai": 100}, "replan_entropy": 1.5}
    agent = mod.LLMPPOAgent(task, 0, llm, policies, cfg=cfg)
    agent.reset(0)
    obs = {"image": _view({}), "direction": 0, "mission": "go to the red ball"}
    for _ in range(4):
        agent.act(obs, {})
    assert len(llm.menus) == 2 and "executor uncertain" in llm.prompts[-1]


def test_following_the_mission_plays_exactly_the_ppo_policy():
    """With the planner always choosing "follow the mission", LLM+PPO is plain PPO, step for step."""
    mod = _agent_module()
    from baselines.ppo import agent as ppo_agent
    task = _task("babyai/GoToRedBall")
    llm = ScriptedLLM(lambda menu: S.FOLLOW_MISSION)
    lp = mod.LLMPPOAgent(task, 0, llm, mod._executor(task, 0))
    plain = ppo_agent.make_agent(task, 0)
    for seed in (3, 4):
        with polar_bench.make("babyai/GoToRedBall", text=True) as env:
            obs, info = env.reset(seed=seed)
            lp.reset(seed)
            done = False
            while not done:
                a = lp.act(obs, info)
                assert a == plain.act(obs, info)
                obs, _, term, trunc, info = env.step(a)
                done = term or trunc
    assert llm.menus and all(m[0] == S.FOLLOW_MISSION for m in llm.menus)


def test_domains_without_skills_play_plain_ppo():
    mod = _agent_module()
    from baselines.ppo.agent import PPOAgent
    agent = mod.make_agent(_task("gym/CartPole-v1"), 0)
    assert isinstance(agent.agent, PPOAgent)    # no LLM is loaded for classic, dmc or procgen
    assert agent.episode_info()["llm"]["calls"] == 0 and agent.episode_info()["llm"]["seconds"] == 0.0


def test_each_agent_object_has_its_own_llm_client(monkeypatch):
    """Lanes get one agent object each (docs/evaluate.md): their episodes interleave in one process, so
    a client shared by all of them would give one lane's LLM calls the seeds of another's episode."""
    from polar_bench.llm import LLMClient
    mod = _agent_module()
    base = LLMClient(FakeChooser())
    monkeypatch.setattr(mod, "_CLIENT", base)
    task = _task("babyai/GoToLocal")
    one, two = mod.make_agent(task, 0), mod.make_agent(task, 0)
    assert one.llm is not two.llm and one.llm.backend is two.llm.backend is base.backend
    with polar_bench.make("babyai/GoToLocal") as env_one, polar_bench.make("babyai/GoToLocal") as env_two:
        obs_one, info_one = env_one.reset(seed=11)
        one.reset(11)
        obs_two, info_two = env_two.reset(seed=22)
        two.reset(22)                  # the second lane starts while the first lane's episode goes on
        one.act(obs_one, info_one)     # each asks the planner at its first step
        two.act(obs_two, info_two)
    assert base.backend.seeds == [polar_bench.llm.call_seed(11, 0), polar_bench.llm.call_seed(22, 0)]
    assert one.episode_info()["llm"]["calls"] == 1 == two.episode_info()["llm"]["calls"]


def test_config_override(monkeypatch):
    mod = _agent_module()
    monkeypatch.setenv("POLAR_LLM_PPO_CONFIG", '{"replan_every": {"nethack": 50}, "replan_entropy": 2}')
    cfg = mod.config()
    assert cfg["replan_every"] == {"babyai": 16, "nethack": 50} and cfg["replan_entropy"] == 2
    monkeypatch.setenv("POLAR_LLM_PPO_CONFIG", '{"k": 3}')
    with pytest.raises(polar_bench.errors.UserError, match="unknown setting"):
        mod.config()
    monkeypatch.setenv("POLAR_LLM_PPO_CONFIG", "{nope")
    with pytest.raises(polar_bench.errors.UserError, match="not JSON"):
        mod.config()


@pytest.mark.slow
def test_embedded_planner_always_returns_a_menu_skill():
    pytest.importorskip("llama_cpp")
    mod = _agent_module()
    task = _task("babyai/GoToLocal")
    agent = mod.make_agent(task, 0)
    with polar_bench.make("babyai/GoToLocal", text=True) as env:
        obs, info = env.reset(seed=11)
        agent.reset(11)
        for _ in range(20):
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
    usage = agent.episode_info()["llm"]
    assert usage["calls"] >= 1 and usage["invalid"] == 0 and usage["fallbacks"] == 0


def test_the_prompt_carries_the_first_sentence_of_the_description():
    mod = _agent_module()
    assert mod.goal_sentence("Collect gold: the reward is gold; -0.01 per step. (NetHack 3.6)") == \
        "Collect gold: the reward is gold;"
    assert mod.goal_sentence("Go to an object. More text.") == "Go to an object."
    assert len(mod.goal_sentence("x" * 500)) == 200


def test_the_menu_offers_no_skill_that_would_end_at_once():
    """A skill already achieved would end after one step, again and again (one LLM call per step)."""
    obs = {"image": _view({S.FRONT: RED_BALL, (0, 0): BLUE_KEY}), "direction": 0, "mission": "go to the red ball"}
    menu = S.babyai_menu(obs)
    assert "go to the red ball" not in menu and "pick up the red ball" in menu and "go to the blue key" in menu
    door = {"image": _view({S.FRONT: GREY_DOOR_OPEN}), "direction": 0, "mission": "open the grey door"}
    assert not any("grey door" in m for m in S.babyai_menu(door))
    closed = {"image": _view({S.FRONT: GREY_DOOR_CLOSED}), "direction": 0, "mission": "open the grey door"}
    assert "open the grey door" in S.babyai_menu(closed)


def test_the_llm_budget_per_episode_caps_decisions():
    """A planner that alternates two one-step skills would ask the LLM at every step: after
    max_decisions calls the agent follows the mission with the level's own policy."""
    mod = _agent_module()
    task = _task("babyai/GoToLocal")
    llm = ScriptedLLM(lambda menu: "drop the object you carry" if "drop the object you carry" in menu
                      else "pick up the red ball")
    calls = []
    policies = lambda name: (lambda obs: (calls.append(name), (S.FORWARD, 0.1))[1])  # noqa: E731
    cfg = {**mod.CONFIG, "max_decisions": {"babyai": 3}}
    agent = mod.LLMPPOAgent(task, 0, llm, policies, cfg=cfg)
    agent.reset(0)
    empty = {"image": _view({}), "direction": 0, "mission": "go to the red ball"}
    held = {"image": _view({}, carried=RED_BALL), "direction": 0, "mission": "go to the red ball"}
    for i in range(20):
        agent.act(held if i % 2 else empty, {})       # every skill "ends" after one step
    assert len(llm.menus) == 3 and agent.skill.text == S.FOLLOW_MISSION and calls[-1] == "GoToLocal"
