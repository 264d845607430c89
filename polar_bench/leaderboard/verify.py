"""Verification: re-run a sample of a submission's episodes that nobody can predict, compare them, and
play fresh seeds to measure the generalisation gap.

The sample's seed comes from the OS's entropy; its size follows from a stated guarantee
(`DEFAULT_GUARANTEE`, `required_sample`); each sampled episode is compared by digest, exactly, at
floating-point level, or within a tolerance. SUBMISSION.md ("How verification works") is the
specification; docs/evaluate.md ("Fresh seeds") covers the gap test.

A verification can take hours (a whole suite's fresh seeds), so it keeps its work: the re-runs journal
their episodes in a folder of the verifier's cache (`work_root`), keyed by the results file's bytes, the
agent file and the options, beside the seed drawn when it started. Run the same command again after an
interruption and it resumes with that seed and those episodes; `restart` draws afresh. The folder is
removed once the outcome is recorded. A verification that must rebuild pinned artifacts goes in
stages (`_stages`): a few rebuilds, then those tasks' episodes into the journals, then the next stage.
"""

from __future__ import annotations

import dataclasses
import fcntl
import fnmatch
import functools
import hashlib
import json
import math
import os
import secrets
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from .. import __version__
from ..agent import agent_file_hash
from ..analysis import episode_value
from ..artifacts import ArtifactError, ensure_artifacts, pending_artifacts
from ..cache import user_cache_dir
from ..clock import utc_now
from ..errors import ResultsError, UserError
from ..evaluate import DEFAULT_AGENT_THREADS, EvalConfig, Unit, run_evaluation
from ..evaluate.journal import journaled_keys
from ..generalization import (
    DETECTABLE_GAP,
    FALSE_ALARM_RATE,
    TEST_LEVEL,
    draw_fresh_seeds,
    fresh_episode_count,
    gap_test,
    normalized_by_stratum,
)
from ..results import ResultsFile, Status, read_results
from ..results.model import Episode
from ..suite import Suite, TaskSpec
from .checks import released_suites
from .entries import DEFAULT_DIR, Entry, find_entry, record_verification

__all__ = ["verify", "required_sample", "catch_probability", "draw_sample", "STOCHASTIC_TOLERANCE",
           "DEFAULT_GUARANTEE", "work_root", "WORK_DIR_ENV"]

STOCHASTIC_TOLERANCE = 0.05  # normalized-score units, per episode
DEFAULT_GUARANTEE = (0.05, 0.99)  # (fraction of episodes altered, probability that one is re-run)
# The re-run's timeouts, in seconds: at least evaluate's defaults, at least what the submission used
# (its episodes finished within them), never more than the cap, also when it used none: the file is
# the submitter's, and an agent that hangs must not hang the verifier.
TIMEOUTS = {"step_timeout": (60.0, 600.0), "episode_timeout": (1800.0, 21600.0)}
WORK_DIR_ENV = "POLAR_BENCH_VERIFY_DIR"


def work_root() -> Path:
    """Where unfinished verifications keep their work: ``$POLAR_BENCH_VERIFY_DIR``, else the user's cache."""
    env = os.environ.get(WORK_DIR_ENV)
    if env:
        return Path(env)
    return user_cache_dir("verify")


class _Work:
    """The folder of one verification (its journals and its seed), locked while it runs. ``resumed``: the
    start time of the interrupted verification whose seed and episodes are taken over, else None."""

    def __init__(self, identity: dict, seed: int | None, restart: bool):
        key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
        self.folder = work_root() / key
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock_path = self.folder.parent / f"{key}.lock"
            self._lock = open(self._lock_path, "w")  # noqa: SIM115 (held until close)
        except OSError as exc:
            raise UserError(f"cannot write the verification's work folder {self.folder} ({exc.strerror}); set "
                            f"{WORK_DIR_ENV} to a writable folder") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise UserError(f"another verify of the same file, agent and options is running (its work: "
                            f"{self.folder}); wait for it to finish") from None
        state = self._state()
        self.resumed: str | None = None
        if (not restart and state is not None and state.get("identity") == identity
                and (seed is None or seed == state.get("seed"))):
            self.seed, self.resumed = int(state["seed"]), str(state.get("started"))
            return
        shutil.rmtree(self.folder)  # another draw: nothing of an earlier one may be mixed in
        self.folder.mkdir(mode=0o700)
        self.seed = secrets.randbits(63) if seed is None else seed  # fresh OS entropy; recorded with the outcome
        tmp = self.folder / "state.json.tmp"
        tmp.write_text(json.dumps({"identity": identity, "seed": self.seed, "started": utc_now()}))
        tmp.replace(self.folder / "state.json")

    def _state(self) -> dict | None:
        try:
            state = json.loads((self.folder / "state.json").read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) and isinstance(state.get("seed"), int) else None

    def journaled(self, name: str) -> set[tuple]:
        """The (task, run, index) keys of the episodes in the journal ``name`` (``rerun`` or ``fresh``)."""
        return journaled_keys(self.folder / f"{name}.episodes.jsonl")

    def played(self) -> bool:
        """Whether any episode was journaled here (by this verification or the interrupted one it resumes)."""
        return bool(self.journaled("rerun") or self.journaled("fresh"))

    def finish(self) -> None:
        """The outcome is recorded: the work is no longer needed."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self._lock_path.unlink(missing_ok=True)  # still held: a verify that opened it meanwhile is refused
        self.close()

    def close(self) -> None:
        if not self._lock.closed:
            self._lock.close()


def rerun_timeout(submitted: object, key: str) -> float:
    """The re-run's ``key`` (`TIMEOUTS`) for a submission that used ``submitted`` (None: none)."""
    default, cap = TIMEOUTS[key]
    ok = isinstance(submitted, (int, float)) and not isinstance(submitted, bool) and math.isfinite(submitted) \
        and submitted > 0
    return min(max(float(submitted), default), cap) if ok else cap  # type: ignore[arg-type]


@dataclass(frozen=True)
class _SampleConfig(EvalConfig):
    """An `EvalConfig` whose units are only the sampled ones."""

    sample: frozenset | None = frozenset()  # None: every unit

    def units(self) -> list[Unit]:
        if self.sample is None:
            return super().units()
        return [u for u in super().units() if u.key in self.sample]


def altered_count(population: int, fraction: float) -> int:
    """The fewest altered episodes that make at least ``fraction`` of ``population`` (at least 1)."""
    return max(1, math.ceil(Fraction(fraction).limit_denominator(10**9) * population))


def catch_probability(population: int, altered: int, sample: int) -> Fraction:
    """Exact probability that a uniform sample of ``sample`` of ``population`` episodes, drawn without
    replacement, holds at least one of ``altered`` episodes: 1 - C(N - m, n) / C(N, n)."""
    if sample >= population:
        return Fraction(1) if altered > 0 else Fraction(0)
    return 1 - Fraction(math.comb(population - altered, sample), math.comb(population, sample))


def required_sample(population: int, fraction: float, probability: float) -> int:
    """The smallest uniform sample that catches an alteration of ``fraction`` of ``population``
    episodes with probability at least ``probability`` (exact hypergeometric; at most the population)."""
    if population < 1:
        raise ValueError("population must be at least 1")
    if not (0 < fraction <= 1 and 0 < probability < 1):
        raise ValueError("need 0 < fraction <= 1 and 0 < probability < 1")
    m = altered_count(population, fraction)
    want = Fraction(probability).limit_denominator(10**9)
    lo, hi = 1, population  # catch_probability grows with n; binary search for the first n that meets want
    while lo < hi:
        mid = (lo + hi) // 2
        if catch_probability(population, m, mid) >= want:
            hi = mid
        else:
            lo = mid + 1
    return lo


def draw_sample(groups: Sequence[str], uniform: int, rng: np.random.Generator) -> list[int]:
    """Indices into a population whose episode ``i`` belongs to task ``groups[i]``: ``uniform`` drawn
    uniformly without replacement, then one drawn uniformly from each task the first draw missed."""
    n = len(groups)
    picked = set(rng.choice(n, size=min(uniform, n), replace=False).tolist())
    covered = {groups[i] for i in picked}
    for task in dict.fromkeys(groups):  # tasks in population order
        if task not in covered:
            members = [i for i, g in enumerate(groups) if g == task]
            picked.add(members[int(rng.integers(len(members)))])
    return sorted(picked)


#: The proxy's counts of an episode's LLM use that a deterministic agent's re-run must reproduce.
LLM_COUNTS = ("calls", "prompt_tokens", "completion_tokens")


def _llm_counts(record: Episode) -> dict | None:
    return {k: record.llm.get(k) for k in LLM_COUNTS} if record.llm is not None else None


# The largest relative difference of returns that is floating-point noise of another machine (a few
# ulps accumulated over an episode), not a different trajectory: 1e-9 of a return is below any score's
# printed precision, so a forger gains nothing inside it.
FLOAT_TOLERANCE = 1e-9


@functools.cache
def bitwise_across_machines(task_id: str) -> bool:
    """Whether the harness family of ``task_id`` gives the same bits on every CPU (its class's
    ``bitwise_across_machines``). Only polar_bench's own families can ask for the float-level
    comparison: a family that cannot be loaded, or whose factory comes from elsewhere (a plugin,
    even one registered under a built-in prefix), is compared strictly."""
    from ..harness import family_factory

    try:
        factory = family_factory(task_id.split("/", 1)[0])
    except Exception:  # noqa: BLE001 - an unknown family is compared strictly
        return True
    if not str(getattr(factory, "__module__", "")).startswith("polar_bench.harness."):
        return True
    return getattr(factory, "bitwise_across_machines", True) is not False


def _float_level(e: Episode, again: Episode, differences: list[str]) -> bool:
    """Whether a deterministic re-run differs from its submission only at floating-point level: nothing
    but the return and the digest differ, and the returns agree within `FLOAT_TOLERANCE` (relative)."""
    if not differences or not set(differences) <= {"return", "digest"}:
        return False
    a, b = e.ret, again.ret
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= FLOAT_TOLERANCE * max(1.0, abs(a), abs(b))


def _compare(e: Episode, again: Episode, deterministic: bool, tolerance: float, width: float,
             metric: str = "return", llm_counted: bool = False,
             float_level_ok: bool = False) -> tuple[str, float | None, bool]:
    """(compared_by, normalized |Δ score|, match) for a submitted episode and its re-run. The score is
    the task's metric (its return, or a value of the harness record); the harness record the submission
    carries, if any, must also come back unchanged from a deterministic agent, and so must its LLM
    counts where the evaluation counted them at the proxy (``llm_counted``) and the re-run's agent
    called the LLM: an edited token count would otherwise misstate the agent's cost unseen."""
    by = ("digest" if e.digest is not None else "exact") if deterministic else "tolerance"
    if again.status is not Status.OK or again.ret is None:
        return by, None, False
    try:
        diff = abs(episode_value(again, metric) - episode_value(e, metric)) / width
    except ResultsError:
        return by, None, False
    if by == "tolerance":
        return by, diff, diff <= tolerance
    differences = _differences(e, again, llm_counted)
    if float_level_ok and _float_level(e, again, differences):
        return "float", diff, True
    return by, diff, not differences


def _llm_compared(again: Episode, llm_counted: bool) -> bool:
    return llm_counted and again.llm is not None and again.llm.get("source") == "proxy"


def _differences(e: Episode, again: Episode, llm_counted: bool) -> list[str]:
    """What a deterministic agent's re-run brought back differently: the return, the length, the
    digest (when the submission has one), the harness record (likewise) and the proxy's LLM counts."""
    out = [k for k, a, b in (("return", e.ret, again.ret), ("length", e.length, again.length)) if a != b]
    if e.digest is not None and again.digest != e.digest:
        out.append("digest")
    if e.harness is not None and again.harness != e.harness:
        out.append("harness record")
    if _llm_compared(again, llm_counted) and _llm_counts(e) != _llm_counts(again):
        out.append(f"LLM counts (submitted {_llm_counts(e)}, re-run {_llm_counts(again)})")
    return out


def _brief(e: Episode) -> dict:
    """What a verification keeps of a fresh-seed episode: its keys, outcome, digest and harness record."""
    return {"task": e.task, "run": e.run, "seed": e.seed, "return": e.ret, "length": e.length,
            "status": e.status.value, "digest": e.digest} | ({"harness": e.harness} if e.harness is not None else {})


@dataclass(frozen=True)
class _FreshPlan:
    """The fresh-seed evaluation of a verification: every selected task and run on ``per_run`` seeds drawn
    from ``entropy`` (`polar_bench.generalization`), played as the sample is (``cfg``'s journal)."""

    cfg: _SampleConfig
    per_run: int
    entropy: int

    def keys(self, task_ids: set[str]) -> frozenset:
        """The (task, run, index) keys of the fresh episodes of these tasks."""
        return frozenset((t.id, r, i) for t in self.cfg.tasks if t.id in task_ids
                         for r in range(self.cfg.runs) for i in range(self.per_run))


def _fresh_plan(cfg: _SampleConfig, suite: Suite, pool: list[Episode], tasks: list[TaskSpec], runs: int,
                seed: int, folder: Path) -> _FreshPlan:
    """How many fresh episodes each task and run gets (enough for the gap test to see `DETECTABLE_GAP`, at
    most a task's published count) and their seeds, drawn from ``seed``."""
    per_run = fresh_episode_count(normalized_by_stratum(suite, pool), limit=min(t.episodes for t in tasks))
    entropy, seeds = draw_fresh_seeds(tasks, per_run, entropy=seed)
    return _FreshPlan(dataclasses.replace(
        cfg, sample=None, out=str(folder / "fresh.json"), tasks=tasks, runs=runs, fresh_seeds=seeds,
        fresh_entropy=entropy, command=f"{cfg.command} (fresh seeds)"), per_run, entropy)


def _fresh_seed_check(plan: _FreshPlan, suite: Suite, pool: list[Episode]) -> dict:
    """Play (or take from the journal) every fresh episode of ``plan`` and test each domain's published-seed
    score against them (`polar_bench.generalization.gap_test`)."""
    published = normalized_by_stratum(suite, pool)
    played, _ = run_evaluation(plan.cfg)
    gaps = gap_test(published, normalized_by_stratum(suite, played.episodes), seed=plan.entropy)
    failed = [g for g in gaps if g.significant]
    return {"passed": not failed, "entropy": plan.entropy, "episodes_per_task_run": plan.per_run,
            "runs": plan.cfg.runs, "false_alarm_rate": FALSE_ALARM_RATE, "test_level": TEST_LEVEL,
            "detectable_gap": DETECTABLE_GAP, "domains": [g.to_json() for g in gaps],
            "reasons": [g.reason() for g in failed],
            "not_ok": sum(e.status is not Status.OK for e in played.episodes),
            "episodes": [_brief(e) for e in played.episodes]}


# A verification that must rebuild artifacts goes in stages: each rebuilds about this many per worker (it
# closes once it holds that many: whole rounds keep every worker busy), then plays its tasks' sampled and
# fresh episodes into the journals before the next stage rebuilds.
STAGE_REBUILDS_PER_WORKER = 4


def _stages(agent_path: str | Path, task_order: Sequence[str], units: set[tuple[str, int]], store: str | None,
            workers: int) -> list[list[str]]:
    """The tasks of ``units`` in suite order, cut into consecutive stages: a stage closes once the artifacts
    it leaves to rebuild reach `STAGE_REBUILDS_PER_WORKER` x ``workers`` (tasks that need no rebuild join
    the stage at hand). With nothing to rebuild it is one stage: the whole verification.

    Why: a verifier without the artifacts (a clean clone, a fresh machine) may face hours of retraining (a
    v2 PPO entry: 245 runs); staged, what is played is journaled as it goes, so a stop loses at most one
    stage, and the verification moves on in pieces that fit the time a machine is held."""
    needing = [t for t in task_order if any(u[0] == t for u in units)]
    pending = pending_artifacts(agent_path, units, store=store)
    stages: list[list[str]] = []
    current: list[str] = []
    counted: set[str] = set()  # every artifact already given to a stage (skills shared by tasks count once)
    in_stage = 0
    for task in needing:
        mine = [u for u in units if u[0] == task]
        new = {a.path for a in pending if a.needed_by(mine)} - counted
        current.append(task)
        counted |= new
        in_stage += len(new)
        if in_stage >= STAGE_REBUILDS_PER_WORKER * workers:
            stages.append(current)
            current, in_stage = [], 0
    return [*stages, current] if current else stages


def _submission(results_path: str | Path, agent_path: str | Path) -> tuple[ResultsFile, Suite, str]:
    """The results (read and checked), their released suite and the agent file's SHA-256, which must
    be the one evaluated."""
    results = read_results(results_path)
    suite = released_suites().get(results.suite.hash)
    if suite is None:
        raise UserError(f"{results_path} is not of a released suite (hash {results.suite.hash}); only "
                        "leaderboard submissions can be verified")
    if not Path(agent_path).is_file():
        raise UserError(f"agent file {str(agent_path)!r} does not exist; pass the agent.py that was evaluated")
    sha = agent_file_hash(agent_path)
    submitted = str(results.agent.get("sha256"))
    if sha != submitted:
        raise UserError(f"{agent_path} is not the agent file that was evaluated (SHA-256 {sha[:12]}... differs "
                        f"from the results' {submitted[:12]}...); pass the exact file")
    return results, suite, sha


@dataclass(frozen=True)
class _Draw:
    """The sampled episodes and what the record says of the draw."""

    everything: list[Episode]  # every successful episode on the suite's seeds
    pool: list[Episode]  # those of the selected tasks: the population
    picked: list[Episode]
    keys: frozenset  # (task, run, episode index) of each picked episode
    sampling: dict


def _draw(results: ResultsFile, suite: Suite, results_path: str | Path, sample: int | None, seed: int,
          tasks: Sequence[str] | None, guarantee: tuple[float, float], allow_weaker: bool) -> _Draw:
    """The population, the sample size its guarantee needs, and the sample drawn with ``seed``."""
    fraction, probability = guarantee
    specs = {t.id: t for t in suite.tasks}
    order = {tid: i for i, tid in enumerate(suite.task_ids)}
    everything = [e for e in results.episodes if e.status is Status.OK and e.task in specs
                  and e.seed in specs[e.task].seeds]
    pool = [e for e in everything if not tasks or any(fnmatch.fnmatchcase(e.task, g) for g in tasks)]
    if not pool:
        raise UserError(f"no successful episode of {results_path} matches --tasks {' '.join(tasks or [])!r}")
    pool.sort(key=lambda e: (order[e.task], e.run, specs[e.task].seeds.index(e.seed)))
    needed = required_sample(len(pool), fraction, probability)
    if sample is not None and sample < needed and not allow_weaker:
        raise UserError(f"--sample {sample} is below the {needed} episodes that catch {fraction:.0%} altered "
                        f"episodes of {len(pool)} with probability {probability}; omit --sample, or pass "
                        "--allow-weaker to record a weaker verification")
    uniform = min(len(pool), needed if sample is None else sample)
    rng = np.random.default_rng(seed)
    picked = [pool[i] for i in draw_sample([e.task for e in pool], uniform, rng)]
    keys = frozenset((e.task, e.run, specs[e.task].seeds.index(e.seed)) for e in picked)
    altered = altered_count(len(pool), fraction)
    achieved = float(catch_probability(len(pool), altered, uniform))
    sampling = {
        "population": len(pool), "episodes_total": len(everything), "sample": len(picked), "uniform": uniform,
        "tasks_covered": len({e.task for e in picked}), "tasks_total": len({e.task for e in everything}),
        "guarantee": {"fraction": fraction, "probability": probability, "altered_episodes": altered,
                      "required_uniform": needed, "achieved_probability": round(achieved, 6),
                      "met": uniform >= needed, "every_task": True},
        "seed": seed, "tasks": list(tasks or []),
    }
    return _Draw(everything, pool, picked, keys, sampling)


def _rows(picked: list[Episode], rerun: ResultsFile, suite: Suite, deterministic: bool, tolerance: float,
          llm_counted: bool) -> list[dict]:
    """One row per sampled episode: what was compared, both outcomes, and whether they match."""
    specs = {t.id: t for t in suite.tasks}
    by_key = {(e.task, e.run, e.seed): e for e in rerun.episodes}
    rows = []
    for e in picked:
        again = by_key[(e.task, e.run, e.seed)]
        spec = specs[e.task]
        by, diff, match = _compare(e, again, deterministic, tolerance, spec.high.value - spec.low.value,
                                   spec.metric, llm_counted, not bitwise_across_machines(e.task))
        rows.append({"task": e.task, "run": e.run, "seed": e.seed, "compared_by": by,
                     "submitted_return": e.ret, "rerun_return": again.ret,
                     "submitted_length": e.length, "rerun_length": again.length,
                     "submitted_digest": e.digest, "rerun_digest": again.digest,
                     "rerun_status": again.status.value, "normalized_difference": diff, "match": match,
                     **({"submitted_llm": _llm_counts(e), "rerun_llm": _llm_counts(again)}
                        if e.llm is not None or again.llm is not None else {}),
                     **({"differs": _differences(e, again, llm_counted)}
                        if not match and by != "tolerance" and again.status is Status.OK else {})})
    return rows


def _notes(counts: dict[str, int]) -> list[str]:
    notes = []
    if counts["exact"]:
        notes.append(f"{counts['exact']} submitted episode(s) carry no trajectory digest (a results file made "
                     "before digests existed): their returns and lengths were compared, not their trajectories")
    if counts["float"]:
        notes.append(f"{counts['float']} episode(s) matched only to floating-point precision: same length, "
                     f"returns within {FLOAT_TOLERANCE:g} (relative), other bits (digest or last digits of the "
                     "return), as another CPU's floating-point kernels give; counted as matches")
    return notes


def verify(results_path: str | Path, agent_path: str | Path, sample: int | None = None, *, seed: int | None = None,
           leaderboard: str | Path | None = DEFAULT_DIR, tolerance: float | None = None,
           tasks: Sequence[str] | None = None, workers: int | None = None, progress: bool | None = None,
           guarantee: tuple[float, float] = DEFAULT_GUARANTEE, allow_weaker: bool = False,
           rebuild: bool = True, llm_upstream: str | None = None,
           artifact_store: str | None = None, fresh_seeds: bool = True,
           restart: bool = False) -> tuple[dict, Entry | None]:
    """Re-run a sample of a results file's episodes with ``agent_path`` and compare (SUBMISSION.md).

    ``sample``: the size of the uniform part (default: what ``guarantee`` needs). ``seed``: None draws
    one from the OS's entropy. Returns the verification record and the leaderboard entry it was
    recorded on (None when the results are not on the leaderboard, or ``leaderboard`` is None). A
    needed artifact that cannot be checked or rebuilt raises `ArtifactError` after a
    ``not_verifiable`` record was appended to the entry. ``llm_upstream``: the upstream of the LLM proxy
    that the re-run agent always runs behind (default "embedded", started at its first call).
    ``artifact_store``: where missing artifacts are looked up by SHA-256 before a rebuild
    (`polar_bench.artifacts.store_location`). ``fresh_seeds``: also play every (selected) task and run on
    fresh seeds and fail the entry where a domain's published-seed score is significantly above its
    fresh-seed score (`polar_bench.generalization`; the draw follows ``seed``). An interrupted verification
    of the same file, agent and options resumes with its seed and finished episodes (see the module's
    docstring) unless ``restart`` or another ``seed`` is given."""
    if sample is not None and sample < 1:
        raise UserError(f"--sample must be at least 1; got {sample}")
    if seed is not None and seed < 0:
        raise UserError(f"--seed must be a non-negative integer; got {seed}")
    if tolerance is not None and not tolerance >= 0:
        raise UserError(f"--tolerance must be a non-negative number; got {tolerance}")
    results, suite, sha = _submission(results_path, agent_path)
    entry = find_entry(leaderboard, results.to_json()) if leaderboard is not None else None
    identity = {"results_sha256": hashlib.sha256(Path(results_path).read_bytes()).hexdigest(), "agent_sha256": sha,
                "sample": sample, "tasks": list(tasks or []), "guarantee": list(guarantee),
                "allow_weaker": allow_weaker, "fresh_seeds": fresh_seeds, "llm_upstream": llm_upstream or "embedded"}
    work = _Work(identity, seed, restart)
    try:
        seed = work.seed
        if work.resumed is not None:
            print(f"note: resuming the verification of {results_path} started {work.resumed} (seed {seed}); its "
                  f"finished episodes are kept (--restart draws a new sample)", file=sys.stderr)
        draw = _draw(results, suite, results_path, sample, seed, tasks, guarantee, allow_weaker)
        runs = results.runs
        fresh_tasks = [t for t in suite.tasks if any(e.task == t.id for e in draw.pool)]
        units = {(k[0], k[1]) for k in draw.keys} | ({(t.id, r) for t in fresh_tasks for r in range(runs)}
                                                    if fresh_seeds else set())
        deterministic = results.agent_info.get("deterministic", True) is not False
        # behind the proxy (the default since it existed) every episode's LLM use was counted there
        isolation = results.isolation or {}
        llm_counted = isolation.get("llm_proxy") is not None
        if tolerance is None:
            tolerance = 0.0 if deterministic else STOCHASTIC_TOLERANCE
        # the evaluation's thread count (schema-checked: 1-256); results made before it was recorded: 1
        threads = isolation.get("agent_threads") or DEFAULT_AGENT_THREADS
        # the journals live in the work folder: an interrupted verification resumes from them
        cfg = _SampleConfig(
            suite=suite, agent_path=str(agent_path), out=str(work.folder / "rerun.json"),
            tasks=[t for t in suite.tasks if any(k[0] == t.id for k in draw.keys)],
            runs=1 + max(k[1] for k in draw.keys), workers=max(1, min(workers or 2, len(draw.keys))),
            step_timeout=rerun_timeout(results.config.get("step_timeout", 60.0), "step_timeout"),
            episode_timeout=rerun_timeout(results.config.get("episode_timeout", 1800.0), "episode_timeout"),
            progress=progress, command=f"verify {results_path} --seed {seed}", sample=draw.keys, in_process=False,
            agent_threads=threads, llm_upstream=llm_upstream or "embedded",  # always behind the LLM proxy
            llm_budget=dict(suite.llm) if suite.llm else None)
        fresh = _fresh_plan(cfg, suite, draw.pool, fresh_tasks, runs, seed, work.folder) if fresh_seeds else None
        if work.resumed is not None:  # artifacts are needed only where episodes remain to be played
            units = {k[:2] for k in draw.keys - work.journaled("rerun")}
            if fresh is not None:
                units |= {k[:2] for k in fresh.keys({t.id for t in fresh_tasks}) - work.journaled("fresh")}
        # without rebuilds nothing is staged: a file the store lacks fails the verification before it plays
        stages = (_stages(agent_path, suite.task_ids, units, artifact_store, workers or 2) if rebuild
                  else [sorted({u[0] for u in units})])
        artifacts: dict[str, dict] = {}  # path -> row, the first stage's (an artifact shared by tasks)
        for n, stage in enumerate(stages, 1):
            if len(stages) > 1:
                print(f"stage {n} of {len(stages)}: {', '.join(stage)} (its artifacts, then its episodes)",
                      flush=True)
            try:
                for row in ensure_artifacts(agent_path, sorted(u for u in units if u[0] in stage), rebuild=rebuild,
                                            log=lambda line: print(line, flush=True), store=artifact_store,
                                            workers=workers or 2):
                    artifacts.setdefault(row["path"], row)
            except ArtifactError as exc:
                if entry is not None:
                    record_verification(entry, {"status": "not_verifiable", "reason": str(exc), "date": utc_now(),
                                                "agent_sha256": sha, "polar_bench": __version__, **draw.sampling})
                if work.played():  # what was played stays (earlier stages, or before an interruption)
                    print(f"note: the episodes played so far are kept in {work.folder}; the same verify command "
                          "resumes with them once the artifact can be had", file=sys.stderr)
                else:
                    work.finish()  # an outcome is recorded; nothing was played
                raise
            if n < len(stages):  # the last stage is played by the whole evaluations below
                stage_keys = frozenset(k for k in draw.keys if k[0] in stage)
                if stage_keys:
                    run_evaluation(dataclasses.replace(cfg, sample=stage_keys))
                if fresh is not None:
                    run_evaluation(dataclasses.replace(fresh.cfg, sample=fresh.keys(set(stage))))
        rerun, _ = run_evaluation(cfg)  # every sampled episode (those of earlier stages from the journal)
        generalization = _fresh_seed_check(fresh, suite, draw.pool) if fresh is not None else None
        rows = _rows(draw.picked, rerun, suite, deterministic, tolerance, llm_counted)
        matched = sum(r["match"] for r in rows)
        counts = {k: sum(r["compared_by"] == k for r in rows) for k in ("digest", "exact", "float", "tolerance")}
        passed = matched == len(rows) and (generalization is None or generalization["passed"])
        record = {
            "status": "passed" if passed else "failed", "date": utc_now(), "passed": passed,
            **draw.sampling, "mode": "exact" if tolerance == 0 else "tolerance", "compared_by": counts,
            "notes": _notes(counts), "tolerance": tolerance, "deterministic": deterministic, "matched": matched,
            "mismatched": len(rows) - matched, "agent_sha256": sha,
            # what this run checked, fetched or rebuilt: after a resume, for the episodes it had left to play
            "artifacts": list(artifacts.values()), "resumed_from": work.resumed,
            "isolation": rerun.isolation, "polar_bench": __version__,
            "versions": rerun.versions, "environment": rerun.environment, "episodes": rows,
            "generalization": generalization,
        }
        if entry is not None:
            record_verification(entry, record)
        work.finish()
    finally:
        work.close()
    return record, entry
