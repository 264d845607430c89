"""Fresh seeds: does an agent score on seeds nobody knew in advance what it scored on the published ones?

A released suite's episode seeds are public, so an agent can detect or memorise them. `verify` therefore
also plays every task on seeds drawn from OS entropy (`draw_fresh_seeds`) and `gap_test` compares each
domain's mean normalized score on them with the submitted one. For an honest agent the published and
the fresh episodes of a (task, run) are draws from one distribution, so a stratified permutation test
(labels shuffled within each task and run) gives a valid one-sided p-value. Each domain is tested at
`TEST_LEVEL` divided by the number of domains (Bonferroni), half the stated `FALSE_ALARM_RATE`, so
that Monte Carlo error and ties leave room under it (measured: docs/evaluate.md,
benchmarks/fresh_seed_false_alarms.py). Doing better on fresh seeds is no offence.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from .analysis import episode_value
from .errors import UserError
from .report import Table
from .results.model import Episode, ResultsFile, Status
from .suite import SEED_BOUND, Reference, Suite, TaskSpec

__all__ = ["FALSE_ALARM_RATE", "TEST_LEVEL", "DETECTABLE_GAP", "FRESH_MIN_EPISODES", "PERMUTATIONS", "DomainGap",
           "draw_fresh_seeds", "fresh_episode_count", "gap_test", "normalized_by_stratum", "file_gaps", "gap_table"]

FALSE_ALARM_RATE = 0.01   # per entry: the stated chance, at most, that an honest agent fails on fresh seeds
TEST_LEVEL = 0.005        # the level an entry is tested at (over all its domains): half the stated rate
DETECTABLE_GAP = 0.1      # the domain gap (normalized score) that the fresh episodes are sized to detect
DETECTION_POWER = 0.8     # ... with this probability
FRESH_MIN_EPISODES = 2    # fresh episodes per (task, run), at least
PERMUTATIONS = 20_000     # permutation replicates of the test (its p-values resolve to 5e-5)
BOOTSTRAP_REPS = 2_000    # replicates of the gap's interval

Strata = Mapping[str, Mapping[tuple[str, int], Sequence[float]]]  # domain -> (task, run) -> scores


@dataclass(frozen=True)
class DomainGap:
    """One domain's comparison: mean normalized scores on published and fresh seeds, the gap
    (published - fresh) with its 95% stratified-bootstrap interval, and the permutation p-value."""

    domain: str
    published: float
    fresh: float
    gap: float
    interval: tuple[float, float]
    p_value: float
    threshold: float
    published_episodes: int
    fresh_episodes: int

    @property
    def significant(self) -> bool:
        return self.p_value <= self.threshold

    def reason(self) -> str:
        return (f"{self.domain}: mean normalized score {self.published:.3f} on the published seeds, "
                f"{self.fresh:.3f} on fresh ones: gap {self.gap:.3f} [{self.interval[0]:.3f}, "
                f"{self.interval[1]:.3f}], p = {self.p_value:.2g} (one-sided, significant at {self.threshold:.2g})")

    def to_json(self) -> dict:
        return {"domain": self.domain, "published": self.published, "fresh": self.fresh, "gap": self.gap,
                "interval": list(self.interval), "p_value": self.p_value, "threshold": self.threshold,
                "significant": self.significant, "published_episodes": self.published_episodes,
                "fresh_episodes": self.fresh_episodes}


def draw_fresh_seeds(tasks: Iterable[TaskSpec], count: int | None = None,
                     entropy: int | None = None) -> tuple[int, dict[str, tuple[int, ...]]]:
    """``count`` seeds per task (None: the task's own episode count) in the suites' seed range, none of
    them a published seed of the task, from a generator seeded by ``entropy`` (None: fresh OS entropy).
    Returns the entropy (to record) and task id -> seeds."""
    if count is not None and count < 1:
        raise UserError(f"fresh episodes per task must be at least 1; got {count}")
    entropy = secrets.randbits(63) if entropy is None else entropy
    rng = np.random.default_rng([entropy, 0])
    out = {}
    for task in tasks:
        taken, seeds = set(task.seeds), list[int]()
        while len(seeds) < (task.episodes if count is None else count):
            s = int(rng.integers(0, SEED_BOUND))
            if s not in taken:
                taken.add(s)
                seeds.append(s)
        out[task.id] = tuple(seeds)
    return entropy, out


def normalized_by_stratum(suite: Suite | Iterable[TaskSpec],
                          episodes: Iterable[Episode | Mapping]) -> dict[str, dict[tuple[str, int], list[float]]]:
    """The normalized score of every ``ok`` episode of a suite task, by domain and (task, run)."""
    specs = {t.id: t for t in (suite.tasks if isinstance(suite, Suite) else suite)}
    out: dict[str, dict[tuple[str, int], list[float]]] = {}
    for raw in episodes:
        ep = raw if isinstance(raw, Episode) else Episode.from_json(raw)
        spec = specs.get(ep.task)
        if spec is None or ep.status is not Status.OK:
            continue
        value = spec.normalize(episode_value(ep, spec.metric, f"{ep.task} run {ep.run}"))
        out.setdefault(spec.domain, {}).setdefault((spec.id, ep.run), []).append(value)
    return out


def _domain_mean(per_stratum: Mapping[tuple[str, int], Any]) -> Any:
    """Mean over tasks of the mean over runs (each task weighs the same), along the last axes' stack."""
    by_task: dict[str, list[np.ndarray]] = {}
    for (task, _run), value in per_stratum.items():
        by_task.setdefault(task, []).append(np.asarray(value))
    return np.mean([np.mean(runs, axis=0) for runs in by_task.values()], axis=0)


def fresh_episode_count(published: Strata, limit: int, gap: float = DETECTABLE_GAP,
                        power: float = DETECTION_POWER, alpha: float = TEST_LEVEL) -> int:
    """Fresh episodes per (task, run) that detect a domain gap of ``gap`` with probability ``power`` at
    the test's level, from the published episodes' spread (normal approximation), within
    [`FRESH_MIN_EPISODES`, ``limit``]."""
    z = NormalDist().inv_cdf(1 - alpha / max(1, len(published))) + NormalDist().inv_cdf(power)
    need = FRESH_MIN_EPISODES
    for strata in published.values():
        tasks: dict[str, list[tuple[float, int]]] = {}
        for (task, _run), values in strata.items():
            tasks.setdefault(task, []).append((float(np.var(values, ddof=1)) if len(values) > 1 else 0.0,
                                               len(values)))
        for k in range(FRESH_MIN_EPISODES, limit + 1):
            # variance of the domain gap: tasks weigh 1/T, runs 1/R within a task
            var = sum(sum(v * (1 / n + 1 / k) for v, n in runs) / len(runs) ** 2
                      for runs in tasks.values()) / len(tasks) ** 2
            if math.sqrt(var) * z <= gap:
                need = max(need, k)
                break
        else:
            need = limit
    return min(need, limit)


def gap_test(published: Strata, fresh: Strata, *, alpha: float = TEST_LEVEL, reps: int = PERMUTATIONS,
             bootstrap_reps: int = BOOTSTRAP_REPS, seed: int = 0) -> list[DomainGap]:
    """Every domain of ``fresh``: the one-sided stratified permutation test of published > fresh, at
    level ``alpha`` divided by the number of domains. Strata present on one side only are left out."""
    rng = np.random.default_rng(seed)
    domains = sorted(d for d in fresh if d in published)
    threshold = alpha / max(1, len(domains))
    out = []
    for domain in domains:
        keys = sorted(k for k in fresh[domain] if published[domain].get(k) and fresh[domain][k])
        if not keys:
            continue
        observed, perm, boot = {}, {}, {}
        for key in keys:
            pub, new = np.asarray(published[domain][key], float), np.asarray(fresh[domain][key], float)
            observed[key] = pub.mean() - new.mean()
            both = np.tile(np.concatenate([pub, new]), (reps, 1))
            shuffled = rng.permuted(both, axis=1)
            perm[key] = shuffled[:, :len(pub)].mean(axis=1) - shuffled[:, len(pub):].mean(axis=1)
            boot[key] = (rng.choice(pub, (bootstrap_reps, len(pub))).mean(axis=1)
                         - rng.choice(new, (bootstrap_reps, len(new))).mean(axis=1))
        gap = float(_domain_mean(observed))
        perm_gaps = _domain_mean(perm)
        p = float((1 + np.sum(perm_gaps >= gap - 1e-12)) / (1 + reps))
        lo, hi = np.percentile(_domain_mean(boot), [2.5, 97.5])
        pub_mean = float(_domain_mean({k: np.mean(published[domain][k]) for k in keys}))
        new_mean = float(_domain_mean({k: np.mean(fresh[domain][k]) for k in keys}))
        out.append(DomainGap(domain, pub_mean, new_mean, gap, (float(lo), float(hi)), p, threshold,
                             sum(len(published[domain][k]) for k in keys), sum(len(fresh[domain][k]) for k in keys)))
    return out


def _embedded_tasks(results: ResultsFile) -> list[TaskSpec]:
    """The tasks a results file embeds (ids, domains, references, metrics): enough to normalize."""
    return [TaskSpec(t.id, t.domain, t.episodes, t.seeds, Reference(float(t.low), "", False),
                     Reference(float(t.high), "", False), metric=t.metric) for t in results.suite.tasks]


def file_gaps(files: Sequence[tuple[str, ResultsFile]], seed: int = 0) -> list[tuple[str, list[DomainGap]]]:
    """For each results file of ``files`` (label, results) played on fresh seeds, the gap test against the
    file of the same agent file and suite on the published seeds, when one is among them."""
    out = []
    for label, fresh in files:
        if not fresh.fresh:
            continue
        match = next((r for _, r in files if not r.fresh and r.suite.hash == fresh.suite.hash
                      and r.agent.get("sha256") == fresh.agent.get("sha256")), None)
        if match is None:
            continue
        tasks = _embedded_tasks(match)
        out.append((label, gap_test(normalized_by_stratum(tasks, match.episodes),
                                    normalized_by_stratum(tasks, fresh.episodes), seed=seed)))
    return out


def gap_table(gaps: Sequence[tuple[str, Sequence[DomainGap]]], digits: int = 3) -> Table:
    """One row per agent and domain: both scores, the gap with its interval, p and the verdict."""
    rows = []
    for label, domain_gaps in gaps:
        for g in domain_gaps:
            rows.append([label, g.domain, f"{g.published:.{digits}f}", f"{g.fresh:.{digits}f}",
                         f"{g.gap:+.{digits}f} [{g.interval[0]:+.{digits}f}, {g.interval[1]:+.{digits}f}]",
                         f"{g.p_value:.2g}", "significant" if g.significant else "-"])
    notes = ["gap: mean normalized score on the published seeds minus that on fresh seeds (tasks weighted "
             "equally), with its 95% stratified-bootstrap interval; p: one-sided stratified permutation test, "
             f"significant at {TEST_LEVEL} / domains, as verify tests it (docs/evaluate.md, 'Fresh seeds')"]
    return Table("generalization", "Published seeds against fresh seeds",
                 ["Agent", "Domain", "Published", "Fresh", "Gap", "p", "Verdict"], rows, None, notes, digits)
