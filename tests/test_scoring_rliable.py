"""Our engine against rliable (the reference implementation) on the same matrices.

Point estimates must be bit-for-bit equal. Interval endpoints must agree within Monte-Carlo error:
rliable runs few replicates here (it loops in Python), so the tolerance is 4 combined standard errors
of a bootstrap quantile, SE ≈ 2.67 · sd / √reps for the 2.5 % and 97.5 % quantiles of a roughly normal
bootstrap distribution with standard deviation sd (sd measured from our replicates), plus one lattice
step for statistics that take few distinct values (profiles, probability of improvement).
rliable draws from numpy's global random state whatever its `random_state` says, so we seed that.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from polar_bench import scoring

rly = pytest.importorskip("rliable.library")
metrics = pytest.importorskip("rliable.metrics")

OURS = {"iqm": scoring.iqm, "mean": scoring.mean, "median": scoring.median,
        "optimality_gap": scoring.optimality_gap}
THEIRS = {"iqm": metrics.aggregate_iqm, "mean": metrics.aggregate_mean, "median": metrics.aggregate_median,
          "optimality_gap": metrics.aggregate_optimality_gap}


def matrices():
    rng = np.random.default_rng(123)
    yield rng.normal(0.6, 0.5, size=(10, 20))
    yield rng.exponential(1.0, size=(5, 7))
    yield np.round(rng.uniform(0, 3, size=(8, 6)))  # many ties
    yield rng.normal(size=(20, 4)).T  # Fortran-ordered (4 runs × 20 tasks)
    yield rng.normal(size=(1, 3))
    yield rng.normal(size=(7, 1))


@pytest.mark.parametrize("index", range(6))
def test_point_estimates_equal_rliable_exactly(index):
    x = list(matrices())[index]
    for name in OURS:
        assert OURS[name](x) == THEIRS[name](x), name
    assert scoring.optimality_gap(x, gamma=0.5) == metrics.aggregate_optimality_gap(x, gamma=0.5)
    tau = np.linspace(x.min() - 0.1, x.max() + 0.1, 17)
    np.testing.assert_array_equal(scoring.score_distribution(x, tau), rly.score_distributions(x, tau))
    np.testing.assert_array_equal(scoring.average_score_distribution(x, tau),
                                  rly.average_score_distributions(x, tau))


def test_probability_of_improvement_equals_rliable_exactly():
    rng = np.random.default_rng(5)
    cases = [(rng.normal(size=(10, 8)), rng.normal(size=(10, 8))),
             (rng.normal(size=(6, 5)), rng.normal(0.3, size=(9, 5))),  # different run counts
             (np.round(rng.uniform(0, 2, size=(5, 6))), np.round(rng.uniform(0, 2, size=(7, 6)))),  # ties
             ]
    x = rng.normal(size=(4, 3))
    cases.append((x, x.copy()))  # identical columns (rliable's special case)
    for x, y in cases:
        assert scoring.probability_of_improvement(x, y) == metrics.probability_of_improvement(x, y)
        assert scoring.probability_of_improvement(y, x) == metrics.probability_of_improvement(y, x)


def tolerance(ours_replicates: np.ndarray, reps_ours: int, reps_theirs: int, lattice: float = 0.0):
    sd = np.std(ours_replicates, axis=0)
    return 4 * 2.67 * sd * np.sqrt(1 / reps_ours + 1 / reps_theirs) + lattice


def test_aggregate_intervals_agree_with_rliable():
    x = np.random.default_rng(7).normal(0.5, 0.4, size=(10, 8))
    names = list(OURS)
    reps_theirs, reps_ours = 1000, 50_000
    np.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, theirs = rly.get_interval_estimates(
            {"x": x}, lambda s: np.array([THEIRS[n](s) for n in names]), reps=reps_theirs)
    ours = scoring.interval_estimates({"x": x}, names, reps=reps_ours, seed=0, keep_replicates=True)
    tol = tolerance(ours.replicates["x"], reps_ours, reps_theirs)
    diff = np.abs(ours.intervals["x"] - theirs["x"])
    assert np.all(diff <= tol), (diff, tol)
    assert np.all(tol < 0.25 * (ours.intervals["x"][1] - ours.intervals["x"][0]))  # a meaningful check


def test_task_bootstrap_intervals_agree_with_rliable():
    x = np.random.default_rng(8).normal(0.5, 0.4, size=(6, 10))
    reps_theirs, reps_ours = 1000, 20_000
    np.random.seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, theirs = rly.get_interval_estimates({"x": x}, lambda s: np.array([metrics.aggregate_mean(s)]),
                                               reps=reps_theirs, task_bootstrap=True)
    ours = scoring.interval_estimates({"x": x}, "mean", reps=reps_ours, seed=0, task_bootstrap=True,
                                      keep_replicates=True)
    tol = tolerance(ours.replicates["x"], reps_ours, reps_theirs)
    assert np.all(np.abs(ours.intervals["x"] - theirs["x"][:, 0]) <= tol)


def test_probability_of_improvement_intervals_agree_with_rliable():
    rng = np.random.default_rng(9)
    x, y = rng.normal(0.3, 1.0, size=(8, 5)), rng.normal(size=(6, 5))
    reps_theirs, reps_ours = 300, 20_000
    np.random.seed(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, theirs = rly.get_interval_estimates({"p": [x, y]}, lambda a, b: np.array(
            [metrics.probability_of_improvement(a, b)]), reps=reps_theirs)
    ours = scoring.interval_estimates({"p": (x, y)}, "probability_of_improvement", reps=reps_ours, seed=0,
                                      keep_replicates=True)
    lattice = 0.5 / (8 * 6 * 5)  # P takes values on a grid of half-pairs per task, averaged over tasks
    tol = tolerance(ours.replicates["p"], reps_ours, reps_theirs, lattice)
    assert np.all(np.abs(ours.intervals["p"] - theirs["p"][:, 0]) <= tol)


def test_profile_bands_agree_with_rliable():
    x = np.random.default_rng(10).normal(0.5, 0.4, size=(10, 6))
    tau = np.linspace(-0.2, 1.2, 8)
    reps_theirs, reps_ours = 400, 20_000
    np.random.seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        points, theirs = rly.create_performance_profile({"x": x}, tau, reps=reps_theirs)
    ours = scoring.performance_profile({"x": x}, tau, reps=reps_ours)
    np.testing.assert_array_equal(ours.points["x"], points["x"])
    # the profile at one τ is a count of 60 scores: sd ≤ 0.5/√60; one lattice step is 1/60
    tol = 4 * 2.67 * (0.5 / np.sqrt(60)) * np.sqrt(1 / reps_ours + 1 / reps_theirs) + 1 / 60
    assert np.all(np.abs(ours.intervals["x"] - theirs["x"]) <= tol + 1e-12)
