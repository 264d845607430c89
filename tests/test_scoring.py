"""The scoring engine: definitions, input checks, determinism, vectorized == naive, coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from polar_bench import scoring
from polar_bench.errors import ScoringError, UserError
from polar_bench.scoring import EpisodeScores

POINT = {"iqm": scoring.iqm, "mean": scoring.mean, "median": scoring.median,
         "optimality_gap": scoring.optimality_gap}


def matrix(seed=0, runs=6, tasks=4):
    return np.random.default_rng(seed).normal(0.5, 0.4, size=(runs, tasks))


# ------------------------------------------------------------------------------------ definitions
def test_point_estimates_by_hand():
    x = np.arange(1.0, 9.0).reshape(2, 4)  # runs [1 2 3 4], [5 6 7 8]
    assert scoring.iqm(x) == 4.5  # 8 scores, 2 trimmed at each end: mean(3, 4, 5, 6)
    assert scoring.mean(x) == 4.5
    assert scoring.median(x) == 4.5  # task means 3, 4, 5, 6
    assert scoring.optimality_gap(x, gamma=4.0) == pytest.approx(4.0 - (1 + 2 + 3 + 4 * 5) / 8)
    assert scoring.optimality_gap(np.full((2, 2), 2.0)) == 0.0  # scores above gamma count as gamma
    y = np.array([[0.0, 1.0], [1.0, 1.0], [5.0, 0.0]])
    assert scoring.median(y) == pytest.approx(np.median([2.0, 2 / 3]))


def test_iqm_trims_int_quarter():
    x = np.array([[100.0, 1.0, 2.0, 3.0, 4.0, -100.0, 5.0]])  # n=7: int(1.75)=1 cut at each end
    assert scoring.iqm(x) == pytest.approx(np.mean([1, 2, 3, 4, 5]))


def test_probability_of_improvement_by_hand():
    x = np.array([[1.0, 0.0], [3.0, 0.0]])
    y = np.array([[2.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    # task 0: pairs (1>2 no, 1>2 no, 1>0 yes, 3>all yes) = 4/6; task 1: all ties = 0.5
    assert scoring.probability_of_improvement(x, y) == pytest.approx((4 / 6 + 0.5) / 2)
    assert scoring.probability_of_improvement(x, x) == 0.5
    assert scoring.probability_of_improvement(x + 10, y) == 1.0
    assert scoring.probability_of_improvement(y, x) == pytest.approx(1 - (4 / 6 + 0.5) / 2)


def test_score_distributions_by_hand():
    x = np.array([[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(scoring.score_distribution(x, [-1, 0, 1.5, 3]), [1, 0.75, 0.5, 0])
    # task means 1 and 2; strictly above
    np.testing.assert_array_equal(scoring.average_score_distribution(x, [0, 1, 1.5, 2]), [1, 0.5, 0.5, 0])


# ------------------------------------------------------------------------------------ input checks
@pytest.mark.parametrize("bad, needle", [
    (np.ones(5), "2-D (runs × tasks) array; got shape (5,) (for one task, pass x[:, None])"),
    (np.ones((2, 2, 2)), "got shape (2, 2, 2)"),
    (np.ones((0, 3)), "at least one run and one task"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), "2 missing (NaN) cell(s), the first at run 0, task 1"),
    ([[1.0, None]], "1 missing (NaN) cell(s), the first at run 0, task 1"),
    (np.array([[1.0, 2.0], [np.inf, 1.0]]), "1 infinite cell(s), the first at run 1, task 0"),
    ([[1.0, 2.0], [3.0]], "array of numbers"),
    ([["a", "b"]], "array of numbers"),
])
def test_bad_matrices_are_rejected_before_arithmetic(bad, needle):
    for fn in (scoring.iqm, scoring.mean, scoring.median, scoring.optimality_gap):
        with pytest.raises(ScoringError) as info:
            fn(bad)
        assert needle in str(info.value)
    with pytest.raises(ScoringError, match="missing|infinite|shape|numbers|at least"):
        scoring.interval_estimates({"a": bad}, "iqm", reps=10)
    assert issubclass(ScoringError, UserError)


def test_other_bad_arguments():
    x = matrix()
    cases = [
        (lambda: scoring.probability_of_improvement(x, np.ones((3, 5))), "same number of tasks"),
        (lambda: scoring.interval_estimates({"a": x}, "iqm", confidence=1.0), "confidence"),
        (lambda: scoring.interval_estimates({"a": x}, "iqm", reps=0), "reps"),
        (lambda: scoring.interval_estimates({"a": x}, "iqm", reps=2.5), "reps"),
        (lambda: scoring.interval_estimates({"a": x}, "iqm", seed=-1), "seed"),
        (lambda: scoring.interval_estimates({"a": x}, "iqr"), "unknown metric 'iqr'"),
        (lambda: scoring.interval_estimates({}, "iqm"), "non-empty mapping"),
        (lambda: scoring.interval_estimates({"a": x}, "probability_of_improvement"), "pair (x, y)"),
        (lambda: scoring.interval_estimates({"a": (x, x)}, "probability_of_improvement",
                                            task_bootstrap=True), "task_bootstrap"),
        (lambda: scoring.optimality_gap(x, gamma=float("nan")), "gamma"),
        (lambda: scoring.score_distribution(x, [[1.0]]), "tau"),
        (lambda: scoring.performance_profile({"a": x}, kind="median"), "kind"),
        (lambda: EpisodeScores((np.array([]),)), "non-empty"),
        (lambda: EpisodeScores((np.array([1.0, np.nan]),)), "missing (NaN) cell(s), the first at episode 1"),
        (lambda: scoring.interval_estimates({"a": {}}, "iqm"), "empty mapping"),
    ]
    for call, needle in cases:
        with pytest.raises(ScoringError) as info:
            call()
        assert needle in str(info.value), (needle, str(info.value))


# ------------------------------------------------------------------------------------ determinism
def test_same_seed_same_intervals_and_entries_are_independent():
    x, y = matrix(1), matrix(2, runs=8)
    a = scoring.interval_estimates({"x": x}, "iqm", reps=3000, seed=7)
    b = scoring.interval_estimates({"y": y, "x": x}, "iqm", reps=3000, seed=7)
    np.testing.assert_array_equal(a.intervals["x"], b.intervals["x"])
    c = scoring.interval_estimates({"x": x}, "iqm", reps=3000, seed=8)
    assert not np.array_equal(a.intervals["x"], c.intervals["x"])
    d = scoring.interval_estimates({"x": x}, "iqm", reps=3000, seed=np.random.default_rng(7))
    e = scoring.interval_estimates({"x": x}, "iqm", reps=3000, seed=np.random.default_rng(7))
    np.testing.assert_array_equal(d.intervals["x"], e.intervals["x"])
    p = scoring.interval_estimates({"p": (x, y)}, "probability_of_improvement", seed=3)
    q = scoring.interval_estimates({"p": (x, y)}, "probability_of_improvement", seed=3)
    assert p.reps == scoring.PROFILE_REPS and p.intervals["p"].tolist() == q.intervals["p"].tolist()


def test_results_shapes_and_defaults():
    x = matrix()
    one = scoring.interval_estimates({"x": x}, "median", reps=100)
    assert isinstance(one.points["x"], float) and one.intervals["x"].shape == (2,)
    assert one.points["x"] == scoring.median(x) and one.resampled["x"] == "runs"
    many = scoring.interval_estimates({"x": x}, ["iqm", "mean"], reps=100)
    assert many.points["x"].shape == (2,) and many.intervals["x"].shape == (2, 2)
    points, intervals = many  # unpacks like rliable
    assert points is many.points and intervals is many.intervals
    assert scoring.interval_estimates({"x": x}, "iqm").reps == 50_000
    tb = scoring.interval_estimates({"x": x}, "iqm", reps=100, task_bootstrap=True)
    assert tb.resampled["x"] == "runs and tasks"


# ------------------------------------------------------------------------------------ vectorized == naive
def naive_replicates(x, metric, reps, seed, task_bootstrap=False):
    """A Python loop over replicates, on the draws that `stratified_bootstrap` makes."""
    out = []
    for chunk in scoring.stratified_bootstrap(x, reps, seed, task_bootstrap):
        for replicate in chunk:
            out.append(POINT[metric](replicate))
    return np.array(out)


@pytest.mark.parametrize("task_bootstrap", [False, True])
def test_vectorized_equals_naive_loop(monkeypatch, task_bootstrap):
    monkeypatch.setattr(scoring.bootstrap, "CHUNK_ELEMENTS", 500)  # many chunks: 500 // 42 = 11 replicates each
    x = matrix(3, runs=7, tasks=6)
    est = scoring.interval_estimates({"x": x}, list(POINT), reps=300, seed=5, keep_replicates=True,
                                     task_bootstrap=task_bootstrap)
    for k, metric in enumerate(POINT):
        naive = naive_replicates(x, metric, 300, 5, task_bootstrap)
        np.testing.assert_allclose(est.replicates["x"][:, k], naive, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(est.intervals["x"][:, k],
                                   np.percentile(naive, [2.5, 97.5]), rtol=1e-12, atol=1e-14)
        assert est.points["x"][k] == POINT[metric](x)


def test_resampling_is_stratified(monkeypatch):
    monkeypatch.setattr(scoring.bootstrap, "CHUNK_ELEMENTS", 1000)
    x = np.arange(40.0).reshape(8, 5)  # column t holds values ≡ t (mod 5)
    chunks = list(scoring.stratified_bootstrap(x, 200, seed=1))
    assert sum(len(c) for c in chunks) == 200 and all(c[0].size * len(c) <= 1000 for c in chunks)
    block = np.concatenate(chunks)
    assert block.shape == (200, 8, 5)
    assert np.all(block % 5 == np.arange(5))  # runs resampled within each task only
    assert len(np.unique(block[:, :, 0])) == 8  # every run can be drawn
    tasks = np.concatenate(list(scoring.stratified_bootstrap(x, 200, seed=1, task_bootstrap=True)))
    columns = tasks % 5
    assert np.all(columns == columns[:, :1, :])  # each resampled column comes from one task
    assert len(np.unique(columns)) == 5


def test_probability_of_improvement_vectorized_equals_naive():
    x, y = matrix(4, runs=6, tasks=5), matrix(5, runs=4, tasks=5)
    y[:, 0] = x[:4, 0]  # ties
    est = scoring.interval_estimates({"p": (x, y)}, "probability_of_improvement", reps=400, seed=2,
                                     keep_replicates=True)
    rng_x, rng_y = scoring.bootstrap.generators(2, 2)  # one chunk: the draws of each side, in order
    ix = rng_x.integers(0, 6, size=(400, 6, 5))
    iy = rng_y.integers(0, 4, size=(400, 4, 5))
    cols = np.arange(5)
    naive = [scoring.probability_of_improvement(x[ix[r], cols], y[iy[r], cols]) for r in range(400)]
    np.testing.assert_allclose(est.replicates["p"], naive, rtol=0, atol=1e-15)
    assert est.points["p"] == scoring.probability_of_improvement(x, y)
    # the comparison path used for episode resampling agrees with the run-count path
    blocks = scoring.estimates._poi_batch_values(x[ix, cols], y[iy, cols])
    np.testing.assert_allclose(blocks, naive, rtol=0, atol=1e-15)


def test_episode_bootstrap_equals_naive_loop():
    rng = np.random.default_rng(0)
    e = EpisodeScores(tuple(rng.normal(size=n) for n in (3, 5, 4)))
    np.testing.assert_allclose(e.matrix(), [[np.mean(a) for a in e.per_task]])
    est = scoring.interval_estimates({"e": e}, "iqm", reps=500, seed=4, keep_replicates=True)
    assert est.resampled["e"] == "episodes (evaluation noise only)"
    assert est.points["e"] == scoring.iqm(e.matrix())
    naive = [scoring.iqm(r) for chunk in scoring.stratified_bootstrap(e, 500, 4) for r in chunk]
    np.testing.assert_allclose(est.replicates["e"], naive, rtol=1e-12)
    # every resampled cell is a mean of that task's episodes
    cells = np.concatenate(list(scoring.stratified_bootstrap(e, 500, 4)))[:, 0, :]
    for t, a in enumerate(e.per_task):
        assert np.all((cells[:, t] >= a.min() - 1e-12) & (cells[:, t] <= a.max() + 1e-12))


def test_domains_are_weighted_equally():
    big, small = matrix(6, runs=5, tasks=9), matrix(7, runs=5, tasks=1) + 3.0
    est = scoring.interval_estimates({"all": {"big": big, "small": small}}, "mean", reps=300, seed=9,
                                     keep_replicates=True)
    assert est.points["all"] == pytest.approx((scoring.mean(big) + scoring.mean(small)) / 2)
    g_big, g_small = scoring.bootstrap.generators(9, 2)
    naive = []
    for rng, m in ((g_big, big), (g_small, small)):
        runs = rng.integers(0, 5, size=(300, 5, m.shape[1]))
        naive.append(np.mean(np.mean(m[runs, np.arange(m.shape[1])], axis=1), axis=1))
    np.testing.assert_allclose(est.replicates["all"], (naive[0] + naive[1]) / 2, rtol=1e-12)


def test_performance_profile():
    x, y = matrix(1), matrix(2) + 0.3
    tau = np.linspace(-0.5, 1.5, 21)
    prof = scoring.performance_profile({"x": x, "y": y}, tau, reps=300)
    np.testing.assert_array_equal(prof.points["x"], scoring.score_distribution(x, tau))
    assert prof.intervals["x"].shape == (2, 21)
    assert np.all(prof.intervals["x"][0] <= prof.points["x"]) and np.all(prof.points["x"] <= prof.intervals["x"][1])
    avg = scoring.performance_profile({"x": x}, tau, kind="average", reps=300)
    np.testing.assert_array_equal(avg.points["x"], scoring.average_score_distribution(x, tau))
    auto = scoring.performance_profile({"x": x, "y": y}, reps=50)
    assert auto.tau.shape == (101,) and auto.tau[0] == min(0.0, x.min(), y.min())
    assert auto.tau[-1] == max(x.max(), y.max())
    mixed = scoring.performance_profile({"d": {"a": x, "b": y}}, tau, reps=50)
    np.testing.assert_allclose(mixed.points["d"], (prof.points["x"] + prof.points["y"]) / 2)


@pytest.mark.parametrize("runs", [1, 3, 15, 16, 100, 300])
def test_run_counts_are_the_draws_counted(runs):
    # the packed four-bit counts (up to 15 runs) and bincount (more) both equal a direct count of the draws
    draws = np.random.default_rng(runs).integers(0, runs, size=(37, runs, 4))
    by_task = scoring.bootstrap.count_draws(draws, runs, 4)  # (tasks, runs, n)
    by_replicate = scoring.bootstrap.count_draws(draws, runs, 4, layout="ntr")  # (n, tasks, runs)
    direct = np.stack([(draws == r).sum(axis=1) for r in range(runs)], axis=-1)  # (n, tasks, runs)
    np.testing.assert_array_equal(by_replicate, direct)
    np.testing.assert_array_equal(by_task, direct.transpose(1, 2, 0))


@pytest.mark.parametrize("tasks", [1, 2, 5, 20])
def test_median_of_rows_is_numpys_to_the_bit(tasks):
    a = np.random.default_rng(tasks).normal(size=(200, tasks))
    a[:, 0] = np.round(a[:, 0], 1)  # ties too
    assert np.array_equal(scoring.metrics._median_rows(a), np.median(a, axis=1))


# ------------------------------------------------------------------------------------ coverage
def exponential_mixture_iqm(scales: np.ndarray) -> float:
    """The IQM of the equal-weight mixture of exponential distributions with these scales."""
    cdf = lambda q: np.mean(1 - np.exp(-q / scales))  # noqa: E731
    q25 = optimize.brentq(lambda q: cdf(q) - 0.25, 0, 100 * scales.max(), xtol=1e-14)
    q75 = optimize.brentq(lambda q: cdf(q) - 0.75, 0, 100 * scales.max(), xtol=1e-14)
    # ∫_a^b x e^{-x/s}/s dx = (a + s) e^{-a/s} - (b + s) e^{-b/s}
    part = np.mean((q25 + scales) * np.exp(-q25 / scales) - (q75 + scales) * np.exp(-q75 / scales))
    return float(part / 0.5)


def test_exponential_mixture_iqm_formula():
    assert exponential_mixture_iqm(np.array([1.0])) == pytest.approx(
        2 * ((math.log(4 / 3) + 1) * 0.75 - (math.log(4) + 1) * 0.25), rel=1e-12)
    big = np.random.default_rng(0).exponential(np.repeat([[0.5, 1.0, 2.0]], 200_000, axis=0))
    assert scoring.iqm(big) == pytest.approx(exponential_mixture_iqm(np.array([0.5, 1.0, 2.0])), abs=3e-3)


def test_coverage_of_the_95_percent_interval():
    """Skewed scores (exponential, a different scale per task), 20 runs × 10 tasks. Over 300 simulated
    experiments, the 95 % interval (1,000 replicates each) must cover the population IQM in 91 % to
    99 % of them: about ±3 binomial standard errors (1.26 %) around 95 %. (Measured over 2,000
    experiments: 95.2 % with 20 runs; 93.5 % with 10 runs, the known slight under-coverage of
    percentile intervals from few runs.) Seeds are fixed, so the test is deterministic."""
    scales = np.linspace(0.5, 2.0, 10)
    truth = exponential_mixture_iqm(scales)
    rng = np.random.default_rng(2024)
    hits = 0
    repetitions = 300
    for i in range(repetitions):
        x = rng.exponential(scales, size=(20, 10))
        low, high = scoring.interval_estimates({"x": x}, "iqm", reps=1000, seed=i).intervals["x"]
        hits += low <= truth <= high
    coverage = hits / repetitions
    assert 0.91 <= coverage <= 0.99, coverage
