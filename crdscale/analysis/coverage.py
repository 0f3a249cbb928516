"""Do crdscale's 95 % intervals hold 95 %? A simulation of how heap profiles are made.

A run is simulated the way kube-apiserver and Go make its heap profiles:

- each cause holds live objects of the sizes a real profile shows for it
  (:func:`models_from_profile`), a fixed set at 0 CRDs plus a number per CRD
  installed and per CRD served;
- Go samples every allocation of ``s`` bytes with ``p = 1 - exp(-s/rate)``
  (``rate`` = 512 KiB) and reports a sampled object as ``s/p`` bytes;
- a sampled object that stays live is in every later profile (the errors of
  the steps add up: a random walk);
- plus GC-timing noise: transient objects caught by one profile only, a
  Poisson number of the cause's sizes each time, sampled afresh;
- optionally, causes rebuilt before every profile (sampled afresh each time,
  as the whole OpenAPI spec is on every CRD change) and causes that start late.

The steps follow a scenario: a baseline profile, then per step an
``installed`` profile (the step's CRDs Established) and a ``served`` one.
Each simulated run's intervals are computed by the same estimators
``crdscale analyze`` and ``crdscale compare`` use (their batch forms in
:mod:`crdscale.analysis.intervals`; a test checks that the DataFrame pipeline
gives the same numbers on simulated runs), and the share of runs whose
interval holds the true per-CRD cost is the empirical coverage; 1.96 times the
estimates' standard deviation over the runs is the ideal half width an
interval's median is measured against. :data:`CASES` are the scenarios
``benchmarks/coverage.py`` runs (2, 3, 4, 10 and uneven steps, a late cause,
strong GC noise, OpenAPI rebuilt, a true difference of zero) on size models
from the committed reference runs (:func:`models_from_run`); a fast version
is a unit test. Deterministic for a seed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from crdscale.analysis.attribution import RULES, attribute
from crdscale.analysis.intervals import (
    GO_HEAP_SAMPLING_RATE,
    difference_batch,
    increments_batch,
    sampled_object_sizes,
    t_quantile,
)
from crdscale.analysis.run import analyze_run


@dataclass(frozen=True)
class CauseModel:
    """Live objects of one cause by size class: ``sizes`` (bytes), and how many of each size
    the baseline holds, each installed CRD adds and each served CRD adds."""

    cause: str
    sizes: np.ndarray
    base: np.ndarray
    per_installed: np.ndarray
    per_served: np.ndarray

    def true_per_crd(self, kind: str = "total") -> float:
        """Expected bytes per CRD: ``installed``, ``served`` or ``total`` (both)."""
        counts = {
            "installed": self.per_installed,
            "served": self.per_served,
            "total": self.per_installed + self.per_served,
        }[kind]
        return float((counts * self.sizes).sum())


def models_from_profile(
    profile, fits: pd.DataFrame, install_serve: pd.DataFrame, rules=None, *, min_bytes: float = 1.0
) -> list[CauseModel]:
    """Size models of every cause from one real heap profile and its run's fits.

    The cause's samples in ``profile`` (a late served profile) give the object
    sizes and their mix; the mix is scaled so a CRD adds what the run's
    ``install_serve`` split measured (installed and served bytes per CRD,
    negative parts taken as 0) and the baseline holds the served fit's
    ``base``. Causes that grow by less than ``min_bytes`` per CRD are skipped.
    """
    rules = rules or RULES
    causes = attribute(profile, rules)["cause"].to_numpy()
    space = profile.values("inuse_space").astype(float)
    objects = profile.values("inuse_objects").astype(float)
    served = fits[(fits["phase"] == "served") & (fits["metric"] == "bytes")].set_index("cause")
    split = install_serve[install_serve["metric"] == "bytes"].set_index("cause")
    models = []
    for cause in served.index:
        if cause == "total" or cause not in split.index:
            continue
        sel = (causes == cause) & (objects > 0) & (space > 0)
        if not sel.any():
            continue
        # Samples of one size are one size class (kube-apiserver's zap counters: 35 samples of 448 KiB).
        sizes, inverse = np.unique(np.round(sampled_object_sizes(space[sel], objects[sel])), return_inverse=True)
        mix = np.bincount(inverse, weights=space[sel]) / space[sel].sum()  # share of the cause's bytes per size
        installed = max(float(split.loc[cause, "per_installed"]), 0.0)
        serve = max(float(split.loc[cause, "per_served"]), 0.0)
        if installed + serve < min_bytes:
            continue
        base = max(float(served.loc[cause, "base"]), 0.0)
        models.append(CauseModel(cause, sizes, mix * base / sizes, mix * installed / sizes, mix * serve / sizes))
    return models


def models_from_run(run) -> list[CauseModel]:
    """Cause models of one run (a :class:`crdscale.rundir.Run`), from its last served heap profile and its fits.

    The committed reference runs (``data/reference-run``, ``data/reference-run-v1.24.0``) are what
    ``benchmarks/coverage.py`` and the unit test simulate.
    """
    analysis = analyze_run(run)
    heap = run.heap_profiles()
    last = heap[heap["phase"].isna() | heap["phase"].isin(["", "served"])].iloc[-1]
    return models_from_profile(run.read_profile(last["file"]), analysis.fits, analysis.install_serve)


@dataclass(frozen=True)
class SimulatedRuns:
    """Many simulated runs of one scenario: per cause (and ``total``) the value and heap sampling
    variance of each profile (runs x marks), the expected value of each profile (marks), and the
    marks ``(crds, phase, installed, served)``."""

    marks: list[tuple[int, str, int, int]]
    values: dict[str, np.ndarray]
    variances: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    models: dict[str, CauseModel]
    # Expected sampled objects live at each profile (marks): how many heap samples carry a cause.
    sampled: dict[str, np.ndarray] = field(default_factory=dict)
    # The served estimates of every cause, once per (confidence, model): _served_estimates.
    estimates: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def runs(self) -> int:
        return next(iter(self.values.values())).shape[0]

    def points(self, run: int) -> pd.DataFrame:
        """One run as :func:`~crdscale.analysis.percrd.profile_points` would give it (metric ``bytes``)."""
        rows = [
            (n, phase, cause, "bytes", self.values[cause][run, m], self.variances[cause][run, m])
            for cause in self.values
            for m, (n, phase, *_counts) in enumerate(self.marks)
        ]
        return pd.DataFrame(rows, columns=["crds", "phase", "cause", "metric", "value", "sampling_var"])

    def series(self, cause: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(values, variances, expected)`` of a cause; zeros for a cause the runs never allocate
        (0 in every profile, as crdscale sees it)."""
        zero = np.zeros_like(self.values["total"])
        return (
            self.values.get(cause, zero),
            self.variances.get(cause, zero),
            self.expected.get(cause, np.zeros(len(self.marks))),
        )


def simulate_runs(
    models: Sequence[CauseModel],
    runs: int,
    steps: Sequence[int] = (40, 40, 40, 40),
    *,
    rate: float = GO_HEAP_SAMPLING_RATE,
    transient_fraction: float = 0.001,
    rebuilt: Collection[str] = (),
    starts: Mapping[str, int] | None = None,
    persistent: float = 0.0,
    seed: int | np.random.Generator = 0,
) -> SimulatedRuns:
    """``runs`` simulated runs: a baseline profile, then per step an installed and a served profile.

    ``transient_fraction``: GC-timing noise, the expected transient objects a
    profile catches as a fraction of the objects live at the end of the run
    (the heap profiles are taken right after a forced GC, so this is small).
    ``rebuilt``: causes whose objects are built afresh before every profile
    (the whole OpenAPI spec on every CRD change), so their sampling does not
    carry over. ``starts``: causes that add nothing until that many CRDs, then
    the same total over the rest (a cause that starts late). ``persistent``: other noise that persists, a
    random walk whose every step has ``persistent`` times the variance the step's heap sampling adds
    (how much a step happens to allocate beyond what it costs on average: the model's ``σ²``).
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    starts = dict(starts or {})
    crds = np.cumsum([0, *steps])
    marks = [(0, "served", 0, 0)]
    for k in range(1, len(crds)):
        marks += [(int(crds[k]), "installed", int(crds[k]), int(crds[k - 1]))]
        marks += [(int(crds[k]), "served", int(crds[k]), int(crds[k]))]
    values, variances, expected, sampled = {}, {}, {}, {}
    for model in models:
        p = -np.expm1(-model.sizes / rate)
        scaled = model.sizes / p
        start = starts.get(model.cause, 0)
        # A late cause adds its whole growth over the CRDs after its start.
        boost = crds[-1] / (crds[-1] - start) if start else 1.0
        end_live = model.base + (model.per_installed + model.per_served) * crds[-1]
        held = np.tile(np.round(model.base), (runs, 1))  # live objects (whole)
        live = rng.binomial(held.astype(np.int64), p).astype(float)  # of which sampled
        vals = np.zeros((runs, len(marks)))
        vars_ = np.zeros((runs, len(marks)))
        means = np.zeros(len(marks))
        samples = np.zeros(len(marks))
        mean_live = np.round(model.base).astype(float)
        before = (0, 0)
        walk = np.zeros(runs)
        for m, (_n, _phase, installed, served) in enumerate(marks):
            # Whole objects: the expected count a step adds, its fraction rounded at random
            # (a size class of 0.3 objects per CRD adds 12 objects or 13 to a step of 40).
            grown = (
                max(installed - start, 0) - max(before[0] - start, 0),
                max(served - start, 0) - max(before[1] - start, 0),
            )
            add_expected = boost * (model.per_installed * grown[0] + model.per_served * grown[1])
            add = np.floor(add_expected) + (rng.random((runs, len(p))) < add_expected - np.floor(add_expected))
            held += add
            mean_live = mean_live + add_expected
            if model.cause in rebuilt:
                live = rng.binomial(held.astype(np.int64), p).astype(float)
            else:
                live += rng.binomial(add.astype(np.int64), p)
            before = (installed, served)
            transient = rng.binomial(rng.poisson(end_live * transient_fraction, size=(runs, len(p))), p)
            counts = live + transient
            space = counts * scaled
            # What heap_sampling_variance derives from a profile (it undoes Go's rounding of counts first).
            var_space = space * model.sizes * (1.0 - p) / p
            if persistent:
                step_var = float((add_expected * model.sizes**2 * (1.0 - p) / p).sum())
                walk = walk + rng.normal(0.0, math.sqrt(persistent * step_var), runs)
            vals[:, m] = space.sum(axis=1) + walk
            vars_[:, m] = var_space.sum(axis=1)
            means[m] = float(((mean_live + end_live * transient_fraction) * model.sizes).sum())
            samples[m] = float((mean_live * p).sum())
        values[model.cause], variances[model.cause], expected[model.cause] = vals, vars_, means
        sampled[model.cause] = samples
    for out in (values, variances, expected, sampled):
        out["total"] = sum(out.values())
    return SimulatedRuns(marks, values, variances, expected, {m.cause: m for m in models}, sampled)


@dataclass(frozen=True)
class Coverage:
    """Empirical coverage of one kind of interval for one cause: ``held`` of ``runs`` intervals held the truth.

    ``ideal_half_width`` is what a 95 % interval needs when the estimator's
    spread is known: z · the standard deviation of the estimates over the runs;
    ``zero_width`` the share of runs whose interval had no width at all.
    """

    interval: str
    cause: str
    held: int
    runs: int
    median_half_width: float
    true_value: float
    ideal_half_width: float = float("nan")
    zero_width: float = 0.0
    case: str = ""
    samples: float = float("nan")  # expected heap samples the interval's growth is made of

    @property
    def coverage(self) -> float:
        return self.held / self.runs if self.runs else float("nan")


def _chain_increments(sim: SimulatedRuns, cause: str):
    """The served profiles' increments of every run: ``(dx, dy, dvar, first, expected dy)``."""
    idx = [m for m, (_n, phase, *_c) in enumerate(sim.marks) if phase == "served"]
    x = np.array([sim.marks[m][0] for m in idx], dtype=float)
    y, v, e = (a[..., idx] for a in sim.series(cause))
    return np.diff(x), np.diff(y, axis=1), np.diff(v, axis=1), y[:, 0], np.diff(e)


# The interval models a benchmark can score: what crdscale computes now, and the spread of the
# increments alone that it computed before (no known sampling variance, no floor, no per-profile noise).
MODELS = ("components", "spread")


def _served_estimates(sim: SimulatedRuns, cause: str, confidence: float, model: str = "components"):
    """The served per-CRD estimates of every run, as :func:`~crdscale.analysis.percrd.fit_per_crd` computes them:
    the total's from its causes' sampling, each read as carried or rebuilt as its own fit read it (once per
    simulation: the comparisons take the per-run fits')."""
    key = (confidence, model)
    if key not in sim.estimates:
        found = {cause: _served_fit(sim, cause, confidence, model) for cause in sim.values if cause != "total"}
        parts = None if model == "spread" else [_sampling_part(sim, cause, found[cause]) for cause in found]
        found["total"] = _served_fit(sim, "total", confidence, model, parts)
        sim.estimates[key] = found
    if cause not in sim.estimates[key]:  # a cause these runs never allocate (0 in every profile)
        return _served_fit(sim, cause, confidence, model)
    return sim.estimates[key][cause]


def _served_chain(sim: SimulatedRuns, cause: str):
    """A cause's chain of every profile from the first served one to the last, installed ones between (as
    fit_per_crd's): ``(CRDs served, CRDs installed, values, sampling variances)``, values and variances runs x
    profiles."""
    served = [m for m, (_n, phase, *_c) in enumerate(sim.marks) if phase == "served"]
    span = slice(served[0], served[-1] + 1)
    installed = np.array([mark[2] for mark in sim.marks[span]], dtype=float)
    crds = np.array([mark[3] for mark in sim.marks[span]], dtype=float)
    y, v, _e = (a[..., span] for a in sim.series(cause))
    return crds, installed, y, v


def _sampling_part(sim: SimulatedRuns, cause: str, fit) -> tuple:
    """What a cause's sampling gives its total's known covariance: ``increments_batch``'s ``parts``."""
    _crds, _installed, _y, v = _served_chain(sim, cause)
    return np.diff(v, axis=1), v[:, 0], fit.rebuilt, fit.excess, fit.excess_var


def _served_fit(sim: SimulatedRuns, cause: str, confidence: float, model: str, parts=None):
    if model == "spread":
        dx, dy, _dv, first, _de = _chain_increments(sim, cause)
        return increments_batch(dx, dy, confidence, resolution=GO_HEAP_SAMPLING_RATE, first=first)
    crds, installed, y, v = _served_chain(sim, cause)
    return increments_batch(
        np.diff(crds),
        np.diff(y, axis=1),
        confidence,
        resolution=GO_HEAP_SAMPLING_RATE,
        first=y[:, 0],
        sampling_var=np.diff(v, axis=1),
        first_var=v[:, 0],
        chain=True,
        installed=np.diff(installed),
        parts=parts,
    )


def _served_truth(sim: SimulatedRuns, cause: str) -> float:
    dx, _dy, _dv, _first, de = _chain_increments(sim, cause)
    return float(de.sum() / dx.sum())


def _samples(sim: SimulatedRuns, cause: str, ends: Sequence[int]) -> float:
    """Expected heap samples added over the increments ending at marks ``ends`` (each from the mark before)."""
    counts = sim.sampled.get(cause)
    if counts is None:
        return 0.0
    return float(sum(abs(counts[k] - counts[k - 1]) for k in ends))


def _served_ends(sim: SimulatedRuns) -> list[int]:
    """Marks ending a served increment, taken from the first served profile to the last (what adds up)."""
    idx = [m for m, (_n, phase, *_c) in enumerate(sim.marks) if phase == "served"]
    return list(range(idx[0] + 1, idx[-1] + 1))


def _split_increments(sim: SimulatedRuns, cause: str):
    """Installed and served increments of every run (paired, as :func:`fit_install_serve` takes them):
    kind -> ``(dx, dy, dvar, first, expected dy)``."""
    y, v, e = sim.series(cause)
    out = {}
    for kind, position in (("installed", 1), ("served", 2)):
        # marks: baseline, then (installed, served) per step: install increments end at odd marks.
        ends = list(range(position, len(sim.marks), 2))
        dx = np.array([sim.marks[k][2 + position - 1] - sim.marks[k - 1][2 + position - 1] for k in ends], float)
        dy, dv = (np.stack([a[:, k] - a[:, k - 1] for k in ends], axis=1) for a in (y, v))
        out[kind] = (dx, dy, dv, y[:, 0], np.array([e[k] - e[k - 1] for k in ends]))
    return out


def _install_serve_estimates(sim: SimulatedRuns, cause: str, confidence: float, model: str = "components"):
    """Installed and served per-CRD estimates of every run (paired increments, as :func:`fit_install_serve`): a
    total's after its causes', its noise beyond the sampling theirs added up (once per simulation)."""
    key = ("install/serve", confidence, model)
    if key not in sim.estimates:
        served = {c: _served_estimates(sim, c, confidence, model) for c in sim.values if c != "total"}
        increments = {c: _split_increments(sim, c) for c in sim.values}
        found = {c: _split_fit(increments[c], confidence, model, kink=served[c].bend) for c in served}
        parts = None
        if model != "spread":
            parts = {c: (increments[c], found[c]) for c in found}
        found["total"] = _split_fit(increments["total"], confidence, model, parts)
        sim.estimates[key] = found
    if cause not in sim.estimates[key]:  # a cause these runs never allocate
        return _split_fit(_split_increments(sim, cause), confidence, model)
    return sim.estimates[key][cause]


def _split_fit(increments: dict, confidence: float, model: str, causes: dict | None = None, kink=None):
    """One cause's installed and served estimates from its :func:`_split_increments`, around the ``kink`` its
    served chain found (:attr:`~crdscale.analysis.intervals.Growths.bend`); a total's with its ``causes``' (cause
    -> their increments and fits) as its parts."""
    out = {}
    for kind, (dx, dy, dv, first, _de) in increments.items():
        parts = None
        if causes:
            parts = [
                (own[kind][2], np.zeros(len(dy)), 0.0, fits[kind].excess, fits[kind].excess_var)
                for own, fits in causes.values()
            ]
        out[kind] = increments_batch(
            dx,
            dy,
            confidence,
            resolution=GO_HEAP_SAMPLING_RATE,
            first=first,
            sampling_var=None if model == "spread" else dv,
            parts=parts,
            kink=None if model == "spread" else kink,
        )
    return out


def per_run_coverage(
    sim: SimulatedRuns, confidence: float = 0.95, label: str = "", model: str = "components"
) -> list[Coverage]:
    """Coverage of ``crdscale analyze``'s served per-CRD intervals and of its install/serve split, per cause
    (``model``: one of :data:`MODELS`)."""
    suffix = f" ({label})" if label else ""
    results = []
    for cause in sim.values:
        served = _served_estimates(sim, cause, confidence, model)
        samples = _samples(sim, cause, _served_ends(sim))
        true = _served_truth(sim, cause)
        found = _coverage(f"per-run{suffix}", cause, served.value, served.low, served.high, true, confidence)
        results.append(replace(found, samples=samples))
        increments = _split_increments(sim, cause)
        for kind, part in _install_serve_estimates(sim, cause, confidence, model).items():
            dx, _dy, _dv, _first, de = increments[kind]
            true = float(de.sum() / dx.sum())
            ends = range(1 if kind == "installed" else 2, len(sim.marks), 2)
            found = _coverage(
                f"install/serve: {kind}{suffix}", cause, part.value, part.low, part.high, true, confidence
            )
            results.append(replace(found, samples=_samples(sim, cause, ends)))
    return results


def comparison_coverage(
    a: SimulatedRuns, b: SimulatedRuns, confidence: float = 0.95, label: str = "comparison", model: str = "components"
) -> list[Coverage]:
    """Coverage of ``crdscale compare``'s per-CRD differences (b minus a, run i of each paired), per cause."""
    results = []
    for cause in dict.fromkeys([*a.values, *b.values]):
        ea = _served_estimates(a, cause, confidence, model)
        eb = _served_estimates(b, cause, confidence, model)
        value, _se, _dof, low, high = difference_batch(eb, ea, confidence)
        true = _served_truth(b, cause) - _served_truth(a, cause)
        samples = _samples(a, cause, _served_ends(a)) + _samples(b, cause, _served_ends(b))
        results.append(replace(_coverage(label, cause, value, low, high, true, confidence), samples=samples))
    return results


def ols_coverage(sim: SimulatedRuns, confidence: float = 0.95, label: str = "") -> list[Coverage]:
    """Coverage of the interval crdscale gave before its error model: ordinary least squares through
    the served profiles as if they were independent (t with n - 2 degrees of freedom). For contrast."""
    idx = [m for m, (_n, phase, *_c) in enumerate(sim.marks) if phase == "served"]
    x = np.array([sim.marks[m][0] for m in idx], dtype=float)
    xc = x - x.mean()
    sxx = float((xc**2).sum())
    t = t_quantile(0.5 + confidence / 2, len(x) - 2)
    results = []
    for cause in sim.values:
        y = sim.values[cause][:, idx]
        slope = (y - y.mean(axis=1, keepdims=True)) @ xc / sxx
        resid = y - y.mean(axis=1, keepdims=True) - slope[:, None] * xc
        se = np.sqrt((resid**2).sum(axis=1) / (len(x) - 2) / sxx)
        suffix = f" ({label})" if label else ""
        # The OLS line's own truth: the expected profiles' slope.
        true = float(sim.series(cause)[2][idx] @ xc / sxx)
        results.append(
            _coverage(f"OLS, before{suffix}", cause, slope, slope - t * se, slope + t * se, true, confidence)
        )
    return results


def _coverage(
    kind: str, cause: str, value: np.ndarray, low: np.ndarray, high: np.ndarray, true: float, confidence: float
) -> Coverage:
    # A zero-width interval at the truth holds it (a cause no simulated object adds to).
    eps = 1e-6 * max(1.0, abs(true))
    held = (low - eps <= true) & (true <= high + eps)
    z = float(_normal_quantile(confidence))
    return Coverage(
        kind,
        cause,
        int(held.sum()),
        len(held),
        float(np.nanmedian((high - low) / 2)),
        true,
        ideal_half_width=z * float(np.std(value, ddof=1)) if len(value) > 1 else float("nan"),
        zero_width=float(np.mean(high - low <= eps)),
    )


def _normal_quantile(confidence: float) -> float:
    return t_quantile(0.5 + confidence / 2, math.inf)


COVERAGE_COLUMNS = [
    "case", "interval", "cause", "coverage", "runs", "true_per_crd", "median_half_width", "ideal_half_width",
    "width_ratio", "zero_width", "samples",
]  # fmt: skip


def coverage_table(results: Iterable[Coverage]) -> pd.DataFrame:
    """One row per case, interval kind and cause: ``case, interval, cause, coverage, runs, true_per_crd,
    median_half_width, ideal_half_width, width_ratio, zero_width, samples`` (bytes per CRD;
    ``width_ratio`` is the median half width over the ideal one; ``samples`` the expected heap samples
    the interval's growth is made of)."""
    rows = [
        (
            c.case,
            c.interval,
            c.cause,
            c.coverage,
            c.runs,
            c.true_value,
            c.median_half_width,
            c.ideal_half_width,
            c.median_half_width / c.ideal_half_width if c.ideal_half_width > 0 else float("nan"),
            c.zero_width,
            c.samples,
        )
        for c in results
    ]
    return pd.DataFrame(rows, columns=COVERAGE_COLUMNS)


# --------------------------------------------------------------------------
# The benchmark's cases
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One simulated scenario: its ``steps`` (CRDs each), GC-timing noise (``transient``, see
    :func:`simulate_runs`), causes ``rebuilt`` at every profile, causes that start late
    (``starts``: cause -> CRDs), ``same``: compare a version with itself (a true difference of zero), and
    other noise that persists (``persistent``, times the sampling's)."""

    name: str
    steps: tuple[int, ...] = (40, 40, 40, 40)
    transient: float = 0.001
    rebuilt: tuple[str, ...] = ()
    starts: tuple[tuple[str, int], ...] = ()
    same: bool = False
    ols: bool = False  # also score ordinary least squares through the profiles, for contrast
    persistent: float = 0.0  # other persistent noise, times the sampling's (see simulate_runs)


CASES = (
    Case("4×40 (project-like)", ols=True),
    Case("2 steps (2×80)", steps=(80, 80)),
    Case("3 steps (54+53+53)", steps=(54, 53, 53)),
    Case("10×16", steps=(16,) * 10),
    Case("uneven (10+20+50+80)", steps=(10, 20, 50, 80)),
    Case("watch cache starts at 80 CRDs", starts=(("watch-cache", 80),)),
    Case("strong GC noise (1 %)", transient=0.01),
    Case("OpenAPI rebuilt at every profile", rebuilt=("openapi",)),
    Case("OpenAPI rebuilt, 10×16", steps=(16,) * 10, rebuilt=("openapi",)),
    Case("true difference zero (v1.37.1 twice)", same=True),
    # Noise beyond the sampling that persists (the model's σ²), as much as the sampling's: real runs have it
    # (five runs of the 1,539 Azure CRDs on v1.37.1 varied 2.7 times as much as their sampling alone in a first
    # repeat on 2026-11-28; a second that day read more noise in single runs: docs/results/repeatability.md), and
    # no case above does.
    Case("persistent noise (as much as sampling)", persistent=1.0),
)


def case_coverage(
    models: Mapping[str, Sequence[CauseModel]],
    case: Case,
    runs: int,
    seed: int = 1,
    confidence: float = 0.95,
    *,
    reference: str = "v1.37.1",
    model: str = "components",
) -> list[Coverage]:
    """Every interval kind's coverage in one case: per run (each version of ``models``, with the
    install/serve split) and the comparison of the other version with ``reference``; with
    ``case.same``, only ``reference`` compared with itself. Deterministic for ``seed``; ``model``
    is the interval model scored (:data:`MODELS`)."""
    rng = np.random.default_rng(seed)

    def simulate(label):
        return simulate_runs(
            models[label],
            runs,
            case.steps,
            transient_fraction=case.transient,
            rebuilt=case.rebuilt,
            starts=dict(case.starts),
            persistent=case.persistent,
            seed=rng,
        )

    if case.same:
        a, b = simulate(reference), simulate(reference)
        results = comparison_coverage(a, b, confidence, label=f"comparison ({reference} twice)", model=model)
    else:
        sims = {label: simulate(label) for label in models}
        results = [c for label, sim in sims.items() for c in per_run_coverage(sim, confidence, label, model)]
        if case.ols:
            results += [c for label, sim in sims.items() for c in ols_coverage(sim, confidence, label=label)]
        for label, sim in sims.items():
            if label != reference:
                results += comparison_coverage(
                    sims[reference], sim, confidence, label=f"comparison ({label} − {reference})", model=model
                )
    return [replace(c, case=case.name) for c in results]


def benchmark_table(
    models: Mapping[str, Sequence[CauseModel]],
    runs: int,
    seed: int = 1,
    cases: Sequence[Case] = CASES,
    confidence: float = 0.95,
    *,
    model: str = "components",
) -> pd.DataFrame:
    """:func:`coverage_table` of every case (``benchmarks/coverage.py`` prints it, a unit test checks it);
    ``model``: the interval model scored (:data:`MODELS`: ``spread`` is crdscale's before issue 32)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}")
    return coverage_table(
        c for i, case in enumerate(cases) for c in case_coverage(models, case, runs, seed + i, confidence, model=model)
    )


# Causes whose growth is made of fewer heap samples than this are scored apart: their counts are
# Poisson-like and discrete, so their coverage cannot sit at 95 % (a sample more or less is all there is).
FEW_SAMPLES = 20


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per case of a :func:`benchmark_table`.

    Columns: the coverage range and widest width ratio (median half width over
    the ideal) of the totals, of OpenAPI and of the zap counters over every
    interval kind; the lowest and highest coverage of any cause with a true
    growth of at least :data:`FEW_SAMPLES` heap samples (``cause, interval:
    coverage``); the coverage range of the causes of fewer samples; and the
    largest share of zero-width intervals. In a case comparing a version with
    itself every true difference is zero, and every cause is scored.
    """
    rows = []
    table = table[~table["interval"].str.startswith("OLS")]
    for case, group in table.groupby("case", sort=False):
        same = (group["true_per_crd"] == 0).all()
        grown = group if same else group[group["true_per_crd"].abs() > 0]
        many = grown[grown["samples"] >= FEW_SAMPLES]
        row = {"case": case}
        for cause, name in (("total", "total"), ("openapi", "OpenAPI"), ("zap-counters", "zap")):
            sel = grown[grown["cause"] == cause]
            row[name] = _range(sel["coverage"])
            row[f"{name} ×ideal"] = sel["width_ratio"].max() if len(sel) else float("nan")
        if len(many):
            low, high = many.loc[many["coverage"].idxmin()], many.loc[many["coverage"].idxmax()]
            row["lowest"] = f"{low.cause}, {low.interval}: {low.coverage:.3f}"
            row["highest"] = f"{high.cause}, {high.interval}: {high.coverage:.3f}"
        row[f"< {FEW_SAMPLES} samples"] = _range(grown.loc[grown["samples"] < FEW_SAMPLES, "coverage"])
        row["zero-width"] = f"{group['zero_width'].max():.3f}"
        rows.append(row)
    return pd.DataFrame(rows)


def goals(table: pd.DataFrame, cases: Sequence[Case] = CASES) -> pd.DataFrame:
    """Issue 32's goals for the intervals, checked on a :func:`benchmark_table`: one row per goal with
    ``met`` (bool), ``misses`` (how many interval kinds and causes miss it, of ``scored``) and ``worst``.

    - coverage 0.93–0.97 for every cause of :data:`FEW_SAMPLES` heap samples or more and every interval
      kind, at 4 or more steps (causes of fewer are discrete counts, scored apart by :func:`summary`);
    - totals and OpenAPI at most 1.5 times the ideal width, in every case and interval kind;
    - with 2–3 steps, coverage at least 0.93 for every cause;
    - no zero-width interval.

    ``clear_misses``: the coverage misses that lie beyond the band by more than twice the Monte Carlo
    standard error at its edge (``√(c(1 - c)/runs)``, c = the edge): with 2,000 runs a cell whose true
    coverage is 0.965 reads above 0.97 one time in eight, so ``misses`` alone counts chance too.
    """
    table, many_steps, grown = _goal_cells(table, cases)
    # (goal, the cells it scores, what holding it means, the column it reads, the coverage band it sets)
    checks = [
        (
            "coverage 0.93–0.97 at 4+ steps (causes of 20+ samples)",
            table[many_steps & grown & (table["samples"] >= FEW_SAMPLES)],
            lambda t: t["coverage"].between(0.93, 0.97),
            "coverage",
            (0.93, 0.97),
        ),
        (
            "totals and OpenAPI at most 1.5 × the ideal width",
            table[table["cause"].isin(["total", "openapi"]) & grown],
            lambda t: t["width_ratio"] <= 1.5,
            "width_ratio",
            None,
        ),
        (
            "coverage at least 0.93 with 2–3 steps",
            table[~many_steps & grown],
            lambda t: t["coverage"] >= 0.93,
            "coverage",
            (0.93, 1.0),
        ),
        ("no zero-width interval", table, lambda t: t["zero_width"] == 0, "zero_width", None),
    ]
    rows = []
    for goal, scored, holds, column, band in checks:
        missed = scored[~holds(scored)]
        clear = len(missed) if band is None else int(_beyond_chance(missed, *band).sum())
        worst = ""
        if len(missed):
            # The miss farthest from the goal: the largest width or zero-width share, else the coverage
            # farthest from 0.95.
            far = missed[column] if column != "coverage" else (missed[column] - 0.95).abs()
            row = missed.loc[far.idxmax()]
            worst = f"{row['case']}: {row['cause']}, {row['interval']}: {row[column]:.3f}"
        rows.append(
            {
                "goal": goal,
                "met": not len(missed),
                "misses": len(missed),
                "clear_misses": clear,
                "scored": len(scored),
                "worst": worst,
            }
        )
    return pd.DataFrame(rows)


def goal_misses(table: pd.DataFrame, cases: Sequence[Case] = CASES) -> pd.DataFrame:
    """The interval kinds and causes that miss :func:`goals`' coverage band at 4+ steps or its width, farthest
    first: ``case, interval, cause, samples, coverage, ×ideal`` and whether the coverage miss is clear of the
    Monte Carlo error."""
    table, many_steps, grown = _goal_cells(table, cases)
    scored = table[many_steps & grown & (table["samples"] >= FEW_SAMPLES)]
    off = (scored["coverage"] < 0.93) | (scored["coverage"] > 0.97)
    wide = table["cause"].isin(["total", "openapi"]) & grown & (table["width_ratio"] > 1.5)
    rows = pd.concat([scored[off], table[wide]]).drop_duplicates(["case", "interval", "cause"])
    # Beyond the band by more than chance; a cell the band does not score (too wide only) by the band alone.
    in_band = rows.index.isin(scored.index)
    clear = _beyond_chance(rows, 0.93, 0.97) | (~in_band & ~rows["coverage"].between(0.93, 0.97))
    out = pd.DataFrame(
        {
            "case": rows["case"],
            "interval": rows["interval"],
            "cause": rows["cause"],
            "samples": rows["samples"].round(0).astype(int),
            "coverage": rows["coverage"].map(lambda v: f"{v:.4f}"),
            "×ideal": rows["width_ratio"].map(lambda v: f"{v:.2f}"),
            "coverage clear of chance": clear.map({True: "yes", False: "no"}),
        }
    )
    far = (rows["coverage"] - 0.95).abs() + (rows["width_ratio"] - 1.5).clip(lower=0)
    return out.loc[far.sort_values(ascending=False).index].reset_index(drop=True)


def _goal_cells(table: pd.DataFrame, cases: Sequence[Case]) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """The cells :func:`goals` scores (OLS left out), which of them have 4 or more steps, and which have a
    cost to find (a true difference of zero counts: its coverage is one minus the false positives)."""
    table = table[~table["interval"].str.startswith("OLS")]
    steps = {case.name: len(case.steps) for case in cases}
    many_steps = table["case"].map(steps).fillna(0) >= 4
    grown = (table["true_per_crd"] != 0) | table["case"].str.contains("twice")
    return table, many_steps, grown


def _beyond_chance(cells: pd.DataFrame, low: float, high: float) -> pd.Series:
    """Cells whose coverage lies outside ``[low, high]`` by more than twice the Monte Carlo standard error
    at the edge it crossed (``√(c(1 - c)/runs)``, c = the edge)."""

    def margin(edge: float) -> pd.Series:
        return 2 * np.sqrt(edge * (1 - edge) / cells["runs"])

    return (cells["coverage"] < low - margin(low)) | (cells["coverage"] > high + margin(high))


def _range(values: pd.Series) -> str:
    if not len(values):
        return "—"
    low, high = float(values.min()), float(values.max())
    return f"{low:.3f}" if round(low, 3) == round(high, 3) else f"{low:.3f}–{high:.3f}"
