"""The README's first screen, walked as a newcomer walks it: a hand-written agent with a mistake, the
fix, the retry, score, a compare with a committed baseline on the shared domain, a report and a
check-only submit. Each step's message must name the cause and the command that moves on."""

from __future__ import annotations

import json
from pathlib import Path

from polar_bench.cli import main

ROOT = Path(__file__).resolve().parent.parent
PPO_V1 = str(ROOT / "baselines" / "ppo" / "results" / "ppo-v1.json")

# A CartPole controller (and a do-nothing action elsewhere) that, while the file BUG exists, answers
# with an action out of CartPole's range: the newcomer's mistake, fixed outside the agent file.
AGENT = '''from pathlib import Path

AGENT_INFO = {"name": "newcomer", "authors": ["me"], "url": "https://example.org", "training_steps": 0,
              "llm": None, "license": "MIT"}

def make_agent(task, run):
    return Agent(task)

class Agent:
    def __init__(self, task):
        self.cartpole = task.id == "gym/CartPole-v1"
        self.continuous = task.action_space.shape != ()

    def act(self, observation, info):
        if self.continuous:
            return [0.0]
        if not self.cartpole:
            return 0
        if Path(__file__).with_name("BUG").exists():
            return 5
        return 1 if 3 * observation[2] + observation[3] > 0 else 0
'''


def test_the_first_screen_of_the_readme_with_one_mistake(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("agent.py").write_text(AGENT)
    Path("BUG").write_text("")
    evaluate = ["evaluate", "agent.py", "--suite", "v1", "--domains", "classic", "--runs", "3", "--workers", "2",
                "--no-progress", "--out", "mine.json"]

    # 1. the mistake: evaluate names the cause and what to do next
    assert main(evaluate) == 1
    out = capsys.readouterr().out
    assert "30 failed:" in out and "30x agent_error: InvalidActionError" in out and "action 5" in out  # the cause
    assert "python -m polar_bench score mine.json" in out and "--retry-failed" in out

    # score says the same, with the evaluation's own command
    assert main(["score", "mine.json", "--allow-incomplete"]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if "play the failed episodes again" in x]
    assert line.endswith("python -m polar_bench evaluate agent.py --suite v1 --domains classic --runs 3 "
                         "--workers 2 --no-progress --out mine.json --retry-failed"), line

    # 2. the fix (outside the agent file), then the retry it named
    Path("BUG").unlink()
    assert main([*evaluate, "--retry-failed"]) == 0
    episodes = json.loads(Path("mine.json").read_text())["episodes"]
    assert all(e["status"] == "ok" for e in episodes) and any(e.get("attempts") == 2 for e in episodes)
    capsys.readouterr()

    # 3. score
    assert main(["score", "mine.json"]) == 0
    assert "classic" in capsys.readouterr().out

    # 4. compare with a committed baseline: first as a newcomer types it, then as the message says
    assert main(["compare", "mine.json", PPO_V1]) == 2
    err = capsys.readouterr().err
    assert "pass --domains classic" in err
    fixed = ["compare", "mine.json", PPO_V1, "--domains", "classic", "--reps", "500", "--poi-reps", "200"]
    assert main(fixed) == 0
    assert "only the domains classic" in capsys.readouterr().out

    # 5. report, on the shared domain
    assert main(["report", "mine.json", PPO_V1, "--domains", "classic", "--out", "report", "--no-plots",
                 "--reps", "500", "--poi-reps", "200"]) == 0
    assert Path("report/report.md").is_file()
    capsys.readouterr()

    # 6. check-only submit: the root cause first, with the command that makes a submittable file
    assert main(["submit", "mine.json", "--check-only"]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert "not a submittable result: it has 4 of the suite's 38 tasks" in first
    assert "Make one with: python -m polar_bench evaluate agent.py --suite v1 --out results.json" in first
