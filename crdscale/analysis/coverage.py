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
  Poisson number of the cause's sizes each time, sampled afresh.

The steps follow a scenario: a baseline profile, then per step an
``installed`` profile (the step's CRDs Established) and a ``served`` one.
Each simulated run's intervals are computed by the same estimators
``crdscale analyze`` and ``crdscale compare`` use (their batch forms in
:mod:`crdscale.analysis.intervals`; a test checks that the DataFrame pipeline
gives the same numbers on simulated runs), and the share of runs whose
interval holds the true per-CRD cost is the empirical coverage. ``benchmarks/coverage.py`` runs it on
size models from the committed reference runs; a fast version is a unit test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crdscale.analysis.intervals import (
    GO_HEAP_SAMPLING_RATE,
    difference_batch,
    increments_batch,
    sampled_object_sizes,
)


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
    from crdscale.analysis.attribution import RULES, attribute

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
    analysis = run.analysis()
    heap = run.heap_profiles()
    last = heap[heap["phase"].isna() | heap["phase"].isin(["", "served"])].iloc[-1]
    return models_from_profile(run.read_profile(last["file"]), analysis.fits, analysis.install_serve)


@dataclass(frozen=True)
class SimulatedRuns:
    """Many simulated runs of one scenario: per cause (and ``total``) the value and heap sampling
    variance of each profile (runs x marks), and the marks ``(crds, phase, installed, served)``."""

    marks: list[tuple[int, str, int, int]]
    values: dict[str, np.ndarray]
    variances: dict[str, np.ndarray]
    models: dict[str, CauseModel]

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

    def true_per_crd(self, cause: str, kind: str = "total") -> float:
        if cause == "total":
            return sum(m.true_per_crd(kind) for m in self.models.values())
        return self.models[cause].true_per_crd(kind) if cause in self.models else 0.0


def simulate_runs(
    models: Sequence[CauseModel],
    runs: int,
    steps: Sequence[int] = (40, 40, 40, 40),
    *,
    rate: float = GO_HEAP_SAMPLING_RATE,
    transient_fraction: float = 0.001,
    seed: int | np.random.Generator = 0,
) -> SimulatedRuns:
    """``runs`` simulated runs: a baseline profile, then per step an installed and a served profile.

    ``transient_fraction``: GC-timing noise, the expected transient objects a
    profile catches as a fraction of the objects live at the end of the run
    (the heap profiles are taken right after a forced GC, so this is small).
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    crds = np.cumsum([0, *steps])
    marks = [(0, "served", 0, 0)]
    for k in range(1, len(crds)):
        marks += [(int(crds[k]), "installed", int(crds[k]), int(crds[k - 1]))]
        marks += [(int(crds[k]), "served", int(crds[k]), int(crds[k]))]
    values, variances = {}, {}
    for model in models:
        p = -np.expm1(-model.sizes / rate)
        scaled = model.sizes / p
        end_live = model.base + (model.per_installed + model.per_served) * crds[-1]
        live = rng.binomial(np.round(model.base).astype(np.int64), p, size=(runs, len(p))).astype(float)
        vals = np.zeros((runs, len(marks)))
        vars_ = np.zeros((runs, len(marks)))
        before = (0, 0)
        for m, (_n, _phase, installed, served) in enumerate(marks):
            # Whole objects: the expected count a step adds, its fraction rounded at random
            # (a size class of 0.3 objects per CRD adds 12 objects or 13 to a step of 40).
            expected = model.per_installed * (installed - before[0]) + model.per_served * (served - before[1])
            add = np.floor(expected) + (rng.random((runs, len(p))) < expected - np.floor(expected))
            live += rng.binomial(add.astype(np.int64), p)
            before = (installed, served)
            transient = rng.binomial(rng.poisson(end_live * transient_fraction, size=(runs, len(p))), p)
            counts = live + transient
            space = counts * scaled
            # What heap_sampling_variance derives from a profile (it undoes Go's rounding of counts first).
            var_space = space * model.sizes * (1.0 - p) / p
            vals[:, m] = space.sum(axis=1)
            vars_[:, m] = var_space.sum(axis=1)
        values[model.cause], variances[model.cause] = vals, vars_
    values["total"] = sum(values.values())
    variances["total"] = sum(variances.values())
    return SimulatedRuns(marks, values, variances, {m.cause: m for m in models})


@dataclass(frozen=True)
class Coverage:
    """Empirical coverage of one kind of interval for one cause: ``held`` of ``runs`` intervals held the truth."""

    interval: str
    cause: str
    held: int
    runs: int
    median_half_width: float
    true_value: float

    @property
    def coverage(self) -> float:
        return self.held / self.runs if self.runs else float("nan")


def _served_estimates(sim: SimulatedRuns, cause: str, confidence: float):
    """The served per-CRD estimates of every run, as :func:`~crdscale.analysis.percrd.fit_per_crd` computes them."""
    idx = [m for m, (_n, phase, *_c) in enumerate(sim.marks) if phase == "served"]
    x = np.array([sim.marks[m][0] for m in idx], dtype=float)
    # A cause the run never allocates is 0 in every profile, as crdscale sees it.
    y = sim.values.get(cause, np.zeros_like(sim.values["total"]))[:, idx]
    dy = np.diff(y, axis=1)
    return increments_batch(np.diff(x), dy, confidence, resolution=GO_HEAP_SAMPLING_RATE, first=y[:, 0])


def _install_serve_estimates(sim: SimulatedRuns, cause: str, confidence: float):
    """Installed and served per-CRD estimates of every run (paired increments, as :func:`fit_install_serve`)."""
    y = sim.values[cause]
    out = {}
    for kind, position in (("installed", 1), ("served", 2)):
        # marks: baseline, then (installed, served) per step: install increments end at odd marks.
        ends = list(range(position, len(sim.marks), 2))
        dx = np.array([sim.marks[e][2 + position - 1] - sim.marks[e - 1][2 + position - 1] for e in ends], float)
        dy = np.stack([y[:, e] - y[:, e - 1] for e in ends], axis=1)
        out[kind] = increments_batch(dx, dy, confidence, resolution=GO_HEAP_SAMPLING_RATE, first=y[:, 0])
    return out


def per_run_coverage(sim: SimulatedRuns, confidence: float = 0.95, label: str = "") -> list[Coverage]:
    """Coverage of ``crdscale analyze``'s served per-CRD intervals and of its install/serve split, per cause."""
    suffix = f" ({label})" if label else ""
    results = []
    for cause in sim.values:
        _v, _se, _dof, low, high = _served_estimates(sim, cause, confidence)
        results.append(_coverage(f"per-run{suffix}", cause, low, high, sim.true_per_crd(cause, "total")))
        for kind, (_v, _se, _dof, low, high) in _install_serve_estimates(sim, cause, confidence).items():
            results.append(_coverage(f"install/serve: {kind}{suffix}", cause, low, high, sim.true_per_crd(cause, kind)))
    return results


def comparison_coverage(a: SimulatedRuns, b: SimulatedRuns, confidence: float = 0.95) -> list[Coverage]:
    """Coverage of ``crdscale compare``'s per-CRD differences (b minus a, run i of each paired), per cause."""
    results = []
    for cause in dict.fromkeys([*a.values, *b.values]):
        ea = _served_estimates(a, cause, confidence)
        eb = _served_estimates(b, cause, confidence)
        _v, _se, _dof, low, high = difference_batch(eb, ea, confidence)
        true = b.true_per_crd(cause) - a.true_per_crd(cause)
        results.append(_coverage("comparison", cause, low, high, true))
    return results


def ols_coverage(sim: SimulatedRuns, confidence: float = 0.95, label: str = "") -> list[Coverage]:
    """Coverage of the interval crdscale gave before its error model: ordinary least squares through
    the served profiles as if they were independent (t with n - 2 degrees of freedom). For contrast."""
    from crdscale.analysis.intervals import t_quantile

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
        results.append(
            _coverage(f"OLS, before{suffix}", cause, slope - t * se, slope + t * se, sim.true_per_crd(cause))
        )
    return results


def _coverage(kind: str, cause: str, low: np.ndarray, high: np.ndarray, true: float) -> Coverage:
    # A zero-width interval at the truth holds it (a cause no simulated object adds to).
    eps = 1e-6 * max(1.0, abs(true))
    held = (low - eps <= true) & (true <= high + eps)
    return Coverage(kind, cause, int(held.sum()), len(held), float(np.nanmedian((high - low) / 2)), true)


def coverage_table(results: Iterable[Coverage]) -> pd.DataFrame:
    """One row per interval kind and cause: ``interval, cause, coverage, runs, true_per_crd, median_half_width``."""
    return pd.DataFrame(
        [(c.interval, c.cause, c.coverage, c.runs, c.true_value, c.median_half_width) for c in results],
        columns=["interval", "cause", "coverage", "runs", "true_per_crd", "median_half_width"],
    )
