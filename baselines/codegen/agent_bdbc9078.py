"""The codegen agent: plays the program the search saved for (task, run), in the sandbox, with no LLM.

    python -m polar_bench evaluate baselines/codegen/agent.py --suite v1 --domains classic \
        --out baselines/codegen/results/classic.json

Programs are read from ``programs/<task>/run<k>.py`` beside this file, or from the folder named by
the environment variable ``POLAR_BENCH_CODEGEN_PROGRAMS`` (the tests use it).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from polar_bench.errors import UserError
from polar_bench.sandbox import SandboxedPolicy

HERE = Path(__file__).resolve().parent


def programs_dir() -> Path:
    return Path(os.environ.get("POLAR_BENCH_CODEGEN_PROGRAMS") or HERE / "programs")


def _search_summary(root: Path) -> dict:
    """What the saved programs cost: LLM, K, N and tokens, summed over every (task, run)."""
    records = []
    for path in sorted(root.glob("**/run*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    total = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
    for r in records:
        for k in total:
            total[k] += r.get("llm", {}).get(k, 0)
    total["seconds"] = round(total["seconds"], 1)
    models = sorted({r.get("llm", {}).get("model", {}).get("model", "?") for r in records})
    return {
        "model": models[0] if len(models) == 1 else models,
        "provider": sorted({r.get("llm", {}).get("model", {}).get("backend", "?") for r in records}),
        "used_at": "search only (the evaluation runs the saved programs without any LLM)",
        "candidates": sorted({r.get("candidates") for r in records}),
        "rounds": sorted({r.get("rounds") for r in records}),
        "training_episodes": sorted({len(r.get("train_seeds", [])) for r in records}),
        "search_tokens": total["prompt_tokens"] + total["completion_tokens"],
        "search_usage": total,
        "programs": {f"{r['task']}/run{r['run']}": r.get("program_sha256") for r in records},
    }


def _search_steps(root: Path) -> tuple[dict, dict]:
    """Environment steps the search played (every candidate's training episodes): per task (the
    largest over runs) and per domain (the largest task of the domain, as the PPO baseline reports)."""
    per_task: dict[str, int] = {}
    for path in sorted(root.glob("**/run*.json")):
        try:
            r = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        steps = sum(int(t.get("steps") or 0) for t in r.get("tried", []))
        per_task[r["task"]] = max(per_task.get(r["task"], 0), steps)
    per_domain: dict[str, int] = {}
    for task, steps in per_task.items():
        domain = DOMAIN_OF_FAMILY.get(task.split("/")[0], task.split("/")[0])
        per_domain[domain] = max(per_domain.get(domain, 0), steps)
    return per_domain, per_task


DOMAIN_OF_FAMILY = {"gym": "classic"}  # task ids are <family>/<name>; suite v1 names gym's domain classic
_PER_DOMAIN, _PER_TASK = _search_steps(programs_dir())

AGENT_INFO = {
    "name": "codegen (SmolLM2-135M-Instruct Q4_1, sandboxed program search)",
    "authors": ["polar_bench maintainers"],
    "url": "https://github.com/polar-bench/polar_bench/tree/main/baselines/codegen",
    "training_steps": _PER_DOMAIN,             # steps of the search's training episodes, largest task per domain
    "training_steps_per_task": _PER_TASK,
    "license": "MIT",
    "llm": _search_summary(programs_dir()),
}


class CodegenAgent:
    """Runs one saved program in a `SandboxedPolicy`; a violation fails the episode (agent_error)."""

    def __init__(self, task, run: int, root: Path | None = None):
        path = (root or programs_dir()) / task.id / f"run{run}.py"
        if not path.is_file():
            raise UserError(f"no codegen program for {task.id} run {run} at {path}; run "
                            f"python -m baselines.codegen.search --tasks '{task.id}' --runs {run + 1}")
        self.source = path.read_text()
        self.sha256 = hashlib.sha256(self.source.encode()).hexdigest()
        self.policy = SandboxedPolicy(self.source, action_space=task.action_space, step_timeout=1.0,
                                      cpu_seconds=3600, memory_mb=256, max_output_bytes=4096)

    def reset(self, seed):
        if not self.policy.alive:
            self.policy.restart()
        self.policy.reset(seed)

    def act(self, observation, info):
        return self.policy.act(observation)

    def episode_info(self) -> dict:
        """No LLM at evaluation: the program was written before it (AGENT_INFO['llm'] has the search's
        usage). Every episode says so, as an LLM agent's episodes must carry their token counts."""
        from polar_bench.llm import USAGE_KEYS
        return {"llm": {k: 0.0 if k == "seconds" else 0 for k in USAGE_KEYS}}

    def close(self):
        self.policy.close()


def make_agent(task, run):
    return CodegenAgent(task, run)
