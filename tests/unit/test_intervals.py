"""The error model behind crdscale's intervals: its parts, and its coverage checked by simulating
Go's heap sampling on the committed reference runs (the fast version of benchmarks/coverage.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crdscale.analysis.compare import per_crd_differences, stack_runs
from crdscale.analysis.coverage import (
    CASES,
    _install_serve_estimates,
    _served_estimates,
    _served_truth,
    benchmark_table,
    goals,
    models_from_run,
    simulate_runs,
    summary,
)
from crdscale.analysis.intervals import (
    UNSEEN_EVENTS_95,
    Estimate,
    difference,
    difference_batch,
    growth_fit,
    heap_sampling_variance,
    increments_batch,
    increments_estimate,
    repeats_for_half_width,
    replicate_mean,
    sampled_object_sizes,
    t_quantile,
    unseen_growth_bounds,
)
from crdscale.analysis.percrd import fit_install_serve, fit_per_crd
from crdscale.rundir import read_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def models():
    runs = {"v1.24.0": ROOT / "data" / "reference-run-v1.24.0", "v1.37.1": ROOT / "data" / "reference-run"}
    return {label: models_from_run(read_run(path)) for label, path in runs.items()}


def test_go_rounding_of_counts_is_undone():
    # One zap counter array (448 KiB) sampled with p = 0.583 reads as int(1/p) = 1 object of 786,695 B.
    sizes = sampled_object_sizes(np.array([786_695.0, 3 * 786_695.0, 2_000_000.0]), np.array([1.0, 5.0, 4000.0]))
    assert sizes[0] == pytest.approx(458_752, rel=1e-4) and sizes[1] == pytest.approx(458_752, rel=1e-4)
    assert sizes[2] == 500  # many objects: space / objects is exact enough
    var, _ = heap_sampling_variance(np.array([786_695.0]), np.array([1.0]))
    p = 1 - math.exp(-458_752 / 524_288)
    assert var[0] == pytest.approx((458_752 / p) ** 2 * (1 - p), rel=1e-3)


def test_increments_estimate_is_the_growth_with_a_t_interval():
    e = increments_estimate([40, 40, 40, 40], [29.0, 25.0, 22.0, 20.0])
    assert e.value == pytest.approx(96 / 160) and e.dof == 3
    spread = sum((d - 0.6 * 40) ** 2 / 40 for d in (29, 25, 22, 20)) / 3
    assert e.high - e.value == pytest.approx(t_quantile(0.975, 3) * math.sqrt(spread / 160))
    single = increments_estimate([40], [5.0])
    assert single.value == pytest.approx(5 / 40) and math.isnan(single.low)


def test_a_cause_no_sample_touched_gets_the_bounds_no_sample_allows():
    fit = growth_fit([0, 40, 80], [0.0, 0.0, 0.0], resolution=524_288)
    assert fit.per_unit == 0 and fit.estimate.low == 0
    assert fit.estimate.high == pytest.approx(2.9957 * 524_288 / 80, rel=1e-4)
    low, high = unseen_growth_bounds(1e9, 524_288, 80)
    assert low == pytest.approx(-high)


def test_welch_difference_and_repeats():
    a, b = Estimate(10.0, 1.0, 3, 0, 0), Estimate(4.0, 2.0, 4, 0, 0)
    d = difference(a, b)
    dof = 25 / (1 / 3 + 16 / 4)
    assert d.value == 6 and d.dof == pytest.approx(dof)
    assert d.high - 6 == pytest.approx(t_quantile(0.975, dof) * math.sqrt(5))
    exact = difference(Estimate(1.0, 0.0, 3, 1, 1), b)
    assert exact.dof == pytest.approx(4)
    mean = replicate_mean([1.0, 2.0, 3.0])
    assert mean.value == 2 and mean.high - 2 == pytest.approx(t_quantile(0.975, 2) / math.sqrt(3))
    n = repeats_for_half_width(10.0, 5.0)
    assert t_quantile(0.975, n - 1) * 10 / math.sqrt(n) <= 5 < t_quantile(0.975, n - 2) * 10 / math.sqrt(n - 1)


def test_the_dataframe_pipeline_gives_what_the_simulation_scores(models):
    """benchmarks/coverage.py scores batch estimators; crdscale analyze/compare run the DataFrame ones."""
    a = simulate_runs(models["v1.37.1"], 3, seed=5)
    b = simulate_runs(models["v1.24.0"], 3, seed=6)
    for run in range(3):
        points = b.points(run)
        fits = fit_per_crd(points)[0].query("phase == 'served' and metric == 'bytes'").set_index("cause")
        split = fit_install_serve(points).set_index("cause")
        diffs = per_crd_differences(stack_runs({"a": a.points(run), "b": points})).set_index("cause")
        for cause in ("total", "zap-counters", "openapi"):
            _v, _se, _dof, low, high, *_ = _served_estimates(b, cause, 0.95)
            assert (fits.loc[cause, "per_crd_low"], fits.loc[cause, "per_crd_high"]) == pytest.approx(
                (low[run], high[run])
            )
            parts = _install_serve_estimates(b, cause, 0.95)
            assert split.loc[cause, "per_served_high"] == pytest.approx(parts["served"][4][run])
            assert split.loc[cause, "per_installed_low"] == pytest.approx(parts["installed"][3][run])

        ea, eb = _served_estimates(a, "total", 0.95), _served_estimates(b, "total", 0.95)
        _v, _se, _dof, low, high = difference_batch(eb, ea)
        assert diffs.loc["total", "difference_low"] == pytest.approx(low[run])


def test_coverage_of_every_interval_kind_holds_95_percent(models):
    """The unit-suite version of benchmarks/coverage.py: every case, 300 simulated runs per version (~45 s)."""
    table = benchmark_table(models, 300, seed=11)
    table = table[~table["interval"].str.startswith("OLS")]
    # Noise beyond the sampling that persists: one cause's chain cannot tell it from noise of one profile and
    # under-covers (~0.90-0.95 at 2,000 runs; the error-model page says why). Held to no worse, and kept out of
    # the rest; totals add their causes' noise up (_sum_of_parts) and hold (0.94-0.95 at 2,000 runs).
    persistent = table["case"].str.startswith("persistent")
    assert table.loc[persistent, "coverage"].min() >= 0.85, table[persistent].nsmallest(3, "coverage")
    totals = persistent & (table["cause"] == "total") & ~table["interval"].str.startswith("install/serve")
    assert table.loc[totals, "coverage"].min() >= 0.92, table[totals]
    assert (table.loc[persistent, "zero_width"] == 0).all()
    scored_all = table
    table = table[~persistent]
    assert (table["zero_width"] == 0).all(), table[table["zero_width"] > 0]
    headline = table[table["cause"].isin(["total", "zap-counters"]) & (table["true_per_crd"] != 0)]
    for row in headline.itertuples():
        # A cause that starts late bends the line: wide, conservative intervals there, never short. The split's
        # totals add up causes read around the kinks their chains found: 10×16's installs on v1.24.0 cover 0.9335
        # at 2,000 runs (docs/results/coverage.md), 0.917 in this seed's 300 (a standard error is 0.0145).
        wide = "starts" in row.case
        least = 0.91 if row.interval.startswith("install/serve") else 0.92
        assert least <= row.coverage <= (1.0 if wide else 0.995), row
    # Totals as tight as the data allow where the model holds (4 or more steps): median width near 1.96 sd. Where
    # OpenAPI is rebuilt at every profile too: a total's known sampling is its causes', each read as its own fit
    # read it (rebuilt beside carried over; either reading of the total alone made it 1.2-1.35 times as wide).
    steady = ~table["case"].str.contains("steps|twice|starts")
    per_run = table["interval"].str.startswith("per-run") & (table["cause"] == "total")
    assert (table.loc[steady & per_run, "width_ratio"] <= 1.2).all(), table[steady & per_run]
    # Every cause, including those carried by a handful of samples, stays near its 95 %.
    assert table["coverage"].min() >= 0.90, table.loc[table["coverage"].idxmin()]
    assert len(summary(scored_all)) == len(CASES)
    checked = goals(scored_all).set_index("goal")
    assert (checked["scored"] > 0).all() and checked["misses"].le(checked["scored"]).all()
    assert checked["clear_misses"].le(checked["misses"]).all()


def test_a_totals_known_sampling_is_its_causes_each_read_as_carried_or_rebuilt():
    """known_covariance: what each increment added to the sampling variance on the diagonal (carried over), or
    T_V from each profile's own (rebuilt at every profile), blended by the share the cause's own fit found; a
    total's is the sum of its causes' (increments_batch's parts)."""
    from crdscale.analysis.intervals import known_covariance

    added, first = np.array([[1.0, 2.0, 3.0]]), np.array([4.0])  # profiles' variances 4, 5, 7, 10
    carried = known_covariance(added, first, np.array([0.0]))[0]
    rebuilt = known_covariance(added, first, np.array([1.0]))[0]
    assert carried == pytest.approx(np.diag([1.0, 2.0, 3.0]))
    assert rebuilt == pytest.approx(np.array([[9.0, -5.0, 0.0], [-5.0, 12.0, -7.0], [0.0, -7.0, 17.0]]))
    assert known_covariance(added, first, np.array([0.25]))[0] == pytest.approx(0.75 * carried + 0.25 * rebuilt)
    # The growth's known variance: V_last - V_first carried over, V_first + V_last rebuilt.
    assert carried.sum() == pytest.approx(6.0) and rebuilt.sum() == pytest.approx(14.0)


def test_a_totals_noise_beyond_the_sampling_is_its_causes_added_up(monkeypatch):
    """Each cause's fit estimates the noise beyond its sampling unclipped (Growths.excess): unbiased, where
    the estimate kept at 0 or above is not. A total's variance is its causes' known sampling plus their
    excesses added up and kept at 0 or above once (_sum_of_parts), not σ² and τ² found again in its own few
    residual degrees of freedom."""
    import crdscale.analysis.intervals as intervals

    monkeypatch.setattr(intervals, "TREND_MIN_STEPS", 99)  # no bend chosen by the data: the plain estimate
    rng = np.random.default_rng(3)
    runs, m, sample = 20_000, 8, (512 * 1024.0) ** 2
    dx = np.full(m, 20.0)
    causes = []
    for samples_per_step, ratio in ((40, 1.0), (10, 1.0), (5, 0.0)):
        known = np.full((runs, m), samples_per_step * sample)
        dy = 1e5 * dx + rng.normal(0.0, 1.0, (runs, m)) * np.sqrt(known * (1 + ratio))
        fit = intervals.increments_batch(dx, dy, sampling_var=known, chain=True)
        truth = ratio * known.sum(axis=1).mean()
        if ratio:
            assert fit.excess.mean() == pytest.approx(truth, rel=0.05)
            # Kept at 0 or above, σ² and τ² come out ~0.7 of the truth: persisting noise read as noise of one
            # profile costs the growth 2τ² where σ² costs Σw·σ², and a τ² below 0 gives nothing back.
            kept = (fit.se * dx.sum()) ** 2 - known.sum(axis=1)
            assert kept.mean() < 0.8 * truth
        causes.append((known, dy, fit))
    known = sum(c[0] for c in causes)
    parts = [(c[0], np.zeros(runs), c[2].rebuilt, c[2].excess, c[2].excess_var) for c in causes]
    total = intervals.increments_batch(dx, sum(c[1] for c in causes), sampling_var=known, chain=True, parts=parts)
    beyond = sum(c[2].excess for c in causes)
    assert (total.se * dx.sum()) ** 2 == pytest.approx(known.sum(axis=1) + np.clip(beyond, 0.0, None))
    assert np.isinf(total.dof[beyond <= 0]).all() and np.isfinite(total.dof[beyond > 0]).all()
    # Where half the variance is noise beyond the sampling, the total's interval holds its 95 %.
    held = (total.low <= 3e5) & (3e5 <= total.high)
    assert 0.93 <= held.mean() <= 0.97
    # The install/serve split's increments share no profile (no chain): its totals add their causes up alike.
    split = [intervals.increments_batch(dx[:4], c[1][:, :4], sampling_var=c[0][:, :4]) for c in causes]
    parts = [(c[0][:, :4], np.zeros(runs), 0.0, f.excess, f.excess_var) for c, f in zip(causes, split)]
    known = sum(c[0][:, :4] for c in causes).sum(axis=1)
    total = intervals.increments_batch(
        dx[:4], sum(c[1][:, :4] for c in causes), sampling_var=known[:, None] / 4, parts=parts
    )
    beyond = sum(f.excess for f in split)
    assert (total.se * dx[:4].sum()) ** 2 == pytest.approx(known + np.clip(beyond, 0.0, None))


def test_a_run_with_two_steps_says_low_count_causes_are_unreliable():
    """Equal increments are not a zero-width interval, and with fewer than 3 increments the result says so."""
    fit = growth_fit([0, 40, 80], [0.0, 524_288.0, 1_048_576.0], sampling_var=[0.0, 2.7e11, 5.4e11])
    assert fit.few_increments and fit.estimate.high - fit.estimate.low > 0
    assert fit.estimate.low <= 13_107.2 <= fit.estimate.high


def test_the_analysis_of_a_two_step_run_warns_about_low_count_causes(models):
    """The warning reaches every reader of RunAnalysis.warnings (console, -o json, findings.md)."""
    import pandas as pd

    from crdscale.analysis.percrd import FEW_INCREMENTS_WARNING
    from crdscale.analysis.run import RunAnalysis

    def analysis(steps):
        points = simulate_runs(models["v1.37.1"], 1, steps, seed=3).points(0)
        fits, residuals = fit_per_crd(points)
        empty = pd.DataFrame()
        return RunAnalysis(None, {}, points, fits, residuals, empty, empty, [])

    two, four = analysis((80, 80)), analysis((40, 40, 40, 40))
    assert two.few_increments and FEW_INCREMENTS_WARNING in two.warnings
    assert not four.few_increments and FEW_INCREMENTS_WARNING not in four.warnings
    served = two.fits.query("phase == 'served' and metric == 'bytes'")
    assert (served["per_crd_high"] > served["per_crd_low"]).all()  # never zero-wide


def test_a_growth_that_bends_is_not_read_as_noise(monkeypatch):
    """From 4 steps, a cost per CRD that bends along the run (a cause that starts late) is left out of the
    noise where the bend is significant: narrower than around a straight line, and still holding the truth."""
    import crdscale.analysis.intervals as intervals

    rng = np.random.default_rng(5)
    # A chain of 4 steps of 40 CRDs, installed then served: the cause grows only from the third step on.
    installed = np.array([40, 0, 40, 0, 40, 0, 40, 0], float)
    served = np.array([0, 40, 0, 40, 0, 40, 0, 40], float)
    mean = np.array([0, 0, 0, 0, 2, 2, 2, 2], float) * 40 * 524_288 / 4
    known = np.full(8, 1e11)
    dy = mean + rng.normal(0, np.sqrt(known), size=(200, 8))

    def half_widths():
        value, _se, _dof, low, high, *_ = intervals.increments_batch(
            served, dy, sampling_var=np.broadcast_to(known, dy.shape), first_var=np.full(200, 1e11),
            chain=True, installed=installed,
        )  # fmt: skip
        return (high - low) / 2, (low <= mean.sum() / 160) & (mean.sum() / 160 <= high)

    bent, held = half_widths()
    monkeypatch.setattr(intervals, "TREND_MIN_STEPS", 10**6)  # never bent: the straight line's noise
    straight, held_straight = half_widths()
    assert np.median(bent) < 0.6 * np.median(straight)
    assert held.mean() >= 0.93 and held_straight.all()


def test_a_cause_that_starts_at_a_served_profile_is_not_read_as_noise(monkeypatch):
    """A cost per CRD that is 0 until a served profile, then its own per CRD installed and per CRD served (the
    watch cache from 80 CRDs on: mostly installed) is a kink, not a linear bend: left out of the noise, the
    interval is about as wide as the sampling alone allows; where nothing bends, the bend is rarely taken."""
    import crdscale.analysis.intervals as intervals

    rng = np.random.default_rng(7)
    installed = np.array([40, 0, 40, 0, 40, 0, 40, 0], float)
    served = np.array([0, 40, 0, 40, 0, 40, 0, 40], float)
    known = np.full(8, 1e11)
    late = np.array([0, 0, 0, 0, 9, 1, 9, 1], float) * 40 * 524_288 / 4  # installed 9 times the served cost
    noise = rng.normal(0, np.sqrt(known), size=(400, 8))

    def intervals_of(mean):
        growths = intervals.increments_batch(
            served, mean + noise, sampling_var=np.broadcast_to(known, noise.shape), first_var=np.full(400, 1e11),
            chain=True, installed=installed,
        )  # fmt: skip
        truth, low, high = mean.sum() / 160, growths.low, growths.high
        return (high - low) / 2, (low <= truth) & (truth <= high)

    ideal = 1.96 * np.sqrt(known.sum()) / 160
    half, held = intervals_of(late)
    assert np.median(half) < 1.3 * ideal and 0.93 <= held.mean()
    straight, _held = intervals_of(np.zeros(8))
    monkeypatch.setattr(intervals, "TREND_MIN_STEPS", 10**6)  # never bent: the straight line's noise
    never, _held = intervals_of(np.zeros(8))
    assert (straight != never).mean() <= 0.1


def test_a_late_causes_install_serve_split_is_read_around_its_chains_kink():
    """The install/serve split's increments of a cause that starts late are 0, then all of its cost: around a
    straight line that is noise 7 times the sampling's. Read around the kink the served chain found (and each
    kind's own increments confirm), the split is about as wide as the sampling allows and still holds."""
    import crdscale.analysis.intervals as intervals

    rng = np.random.default_rng(11)
    n = 400
    installed = np.array([40, 0, 40, 0, 40, 0, 40, 0], float)
    served = np.array([0, 40, 0, 40, 0, 40, 0, 40], float)
    known = np.full((n, 8), 1e11)
    late = np.array([0, 0, 0, 0, 9, 1, 9, 1], float) * 40 * 524_288 / 4  # installed 9 times the served cost
    dy = late + rng.normal(0, np.sqrt(known))
    chain = intervals.increments_batch(
        served, dy, sampling_var=known, first_var=np.full(n, 1e11), chain=True, installed=installed
    )
    assert (chain.bend == 2).mean() >= 0.95  # from the third served step on
    installs, truth = dy[:, ::2], late[::2].sum() / 160  # the split's install increments, one per step
    ideal = 1.96 * np.sqrt(known[0, ::2].sum()) / 160

    def split(kink):
        fit = intervals.increments_batch(np.full(4, 40.0), installs, sampling_var=known[:, ::2], kink=kink)
        return np.median(fit.high - fit.low) / 2 / ideal, ((fit.low <= truth) & (truth <= fit.high)).mean()

    (around, held), (straight, _held) = split(chain.bend), split(None)
    assert around < 1.3 and 0.93 <= held and straight > 3


def test_a_kinks_wald_test_needs_no_scipy_for_one_or_two_columns():
    """The critical Wald statistic of a bend's columns: t² for one, 2·F(2, d) and χ²(2) in closed form for two."""
    from scipy.special import chdtri, fdtri

    from crdscale.analysis.intervals import _wald_critical

    dof = np.array([3.0, 7.5, 40.0, math.inf])
    expected = np.array([2 * fdtri(2, d, 1 - 0.0125) for d in dof[:-1]] + [chdtri(2, 0.0125)])
    assert _wald_critical(2, dof, 0.0125) == pytest.approx(expected, rel=1e-9)
    assert _wald_critical(1, dof, 0.05) == pytest.approx([t_quantile(0.975, d) ** 2 for d in dof], rel=1e-9)


def test_the_rule_of_three_fades_for_causes_of_many_samples():
    """3 samples' worth more for a count of a few, 20/N of them for N samples beyond 20."""
    rate = 524_288.0

    def half_width(samples):
        var = np.full((1, 4), samples / 4 * rate**2)
        _v, se, _dof, low, high, *_ = increments_batch(np.full(4, 40.0), np.full((1, 4), samples / 4 * rate),
                                                   resolution=rate, sampling_var=var)  # fmt: skip
        return float((high - low)[0] / 2), float(se[0])

    for samples, extra in ((5, 3.0), (20, 3.0), (200, 0.3)):
        _half, se = half_width(samples)
        assert se * 160 == pytest.approx(rate * np.sqrt(samples + UNSEEN_EVENTS_95 * extra / 3), rel=1e-6)


def test_a_difference_of_two_sampled_growths_leaves_the_rule_of_three_out():
    """Each run's interval counts ~3 samples more for a count of a few; their difference is near symmetric and
    does not (both sides' own allowances made differences of 11-21-sample causes cover 0.97-0.98)."""
    rate = 524_288.0
    dx = np.full(4, 40.0)

    def growth(samples):
        var = np.full((1, 4), samples / 4 * rate**2)
        return increments_batch(dx, np.full((1, 4), samples / 4 * rate), resolution=rate, sampling_var=var)

    a, b = growth(11), growth(11)
    assert a.allowance[0] * 160**2 == pytest.approx(UNSEEN_EVENTS_95 * rate**2)
    _v, se, _dof, _low, _high = difference_batch(a, b)
    assert se[0] ** 2 == pytest.approx(a.se[0] ** 2 + b.se[0] ** 2 - a.allowance[0] - b.allowance[0])
    # The same through Estimate; a side without an allowance (a mean of repeats) keeps the other's.
    ea, eb = a.estimate(), b.estimate()
    assert difference(ea, eb).se == pytest.approx(se[0])
    repeats = Estimate(eb.value, eb.se, eb.dof, eb.low, eb.high)
    assert difference(ea, repeats).se ** 2 == pytest.approx(ea.se**2 + eb.se**2)


def test_a_side_known_by_its_bounds_adds_its_margins_in_quadrature():
    """MOVER: a cause no sample touched on one side (its bounds, se 0) widens the other's interval by
    √(margin_a² + margin_b²), not by the bounds end to end."""
    seen = Estimate(100.0, 10.0, math.inf, 100 - 19.6, 100 + 19.6)
    unseen = Estimate(0.0, 0.0, 3, 0.0, 9.6)
    d = difference(seen, unseen)
    assert d.value == 100
    assert d.low == pytest.approx(100 - math.hypot(19.6, 9.6)) and d.high == pytest.approx(100 + 19.6)


def test_sampling_rebuilt_at_every_profile_is_read_from_the_profiles_scatter(models, monkeypatch):
    """OpenAPI rebuilt for every profile: its sampling does not carry over, and the profiles' scatter weighed by
    what rebuilt sampling would give (T_V) says so; the interval is then near the ideal width and holds 95 % or
    more (0.97-0.98 in benchmarks/coverage.py).
    Read as sampling that carries over alone, it is far wider. A cause whose sampling carries over is mostly
    not read as rebuilt at all, and the total it adds to (whose known sampling is its causes', each read as its
    own fit read it) is as wide as the carried reading alone makes it."""
    import crdscale.analysis.intervals as intervals

    rebuilt = simulate_runs(models["v1.37.1"], 400, rebuilt=("openapi",), seed=21)
    carried = simulate_runs(models["v1.37.1"], 400, seed=22)
    truth = _served_truth(rebuilt, "openapi")

    def intervals_of(sim, cause):
        value, _se, _dof, low, high, *_ = _served_estimates(sim, cause, 0.95)
        return value, low, high

    value, low, high = intervals_of(rebuilt, "openapi")
    ratio = np.median((high - low) / 2) / (1.96 * value.std(ddof=1))
    held = ((low <= truth) & (truth <= high)).mean()
    total = intervals_of(carried, "total")
    openapi_share = _served_estimates(carried, "openapi", 0.95).rebuilt
    monkeypatch.setattr(intervals, "REBUILT_FROM", math.inf)  # never read as rebuilt: the carried reading alone
    rebuilt.estimates.clear(), carried.estimates.clear()  # (a simulation keeps the estimates it gave)
    value_c, low_c, high_c = intervals_of(rebuilt, "openapi")
    total_c = intervals_of(carried, "total")
    assert held >= 0.93 and ratio <= 1.25, (held, ratio)
    assert np.median((high_c - low_c) / 2) / (1.96 * value_c.std(ddof=1)) >= 1.4
    assert np.mean(openapi_share > 0) <= 0.05
    assert np.median((total[2] - total[1]) / (total_c[2] - total_c[1])) == pytest.approx(1.0, abs=0.02)


def test_the_goal_misses_table_lists_what_the_goals_count():
    """goal_misses (the results page's list) has a row for every interval kind and cause goals() counts as a miss,
    and says which coverage misses are clear of the Monte Carlo error."""
    from crdscale.analysis.coverage import goal_misses

    def row(interval, cause, coverage, width_ratio, case="4×40 (project-like)"):
        return {"case": case, "interval": interval, "cause": cause, "coverage": coverage, "runs": 2000,
                "true_per_crd": 1.0, "median_half_width": 1.0, "ideal_half_width": 1.0, "width_ratio": width_ratio,
                "zero_width": 0.0, "samples": 100.0}  # fmt: skip

    table = pd.DataFrame([
        row("per-run (v1.37.1)", "total", 0.95, 1.0),  # meets both
        row("per-run (v1.37.1)", "crd-schema", 0.972, 1.1),  # just above the band: within chance
        row("comparison (v1.24.0 − v1.37.1)", "total", 0.99, 1.2),  # clear
        row("install/serve: installed (v1.37.1)", "openapi", 0.95, 1.8),  # too wide only
    ])  # fmt: skip
    checked = goals(table)
    listed = goal_misses(table)
    assert list(checked["misses"].iloc[:2]) == [2, 1] and checked["clear_misses"].iloc[0] == 1
    assert list(listed["cause"]) == ["openapi", "total", "crd-schema"]  # farthest first: 0.3 wider, 0.04 over
    assert list(listed["coverage clear of chance"]) == ["no", "yes", "no"]
