"""The footprint model: what a CRD set adds to kube-apiserver, predicted from its features.

Per cause of :mod:`crdscale.analysis.attribution` and for RSS, a linear model through the origin
(fitted by :mod:`crdscale.footprint.fit` on sweep runs)::

    added bytes = sum_f coef_f * feature_f

(at 0 CRDs nothing is added). A :class:`FootprintModel` carries the coefficients, their covariance
and the runs' scatter (``len(runs) - len(features)`` degrees of freedom), so :func:`predict` gives
prediction intervals for a new set; it is plain data (:meth:`FootprintModel.to_dict`) shipped per
kube-apiserver version with its provenance (experiment, machine, date, and which runs were used for
what: :mod:`crdscale.footprint.store`). Nothing here reads files.

Intervals are multiplicative: a prediction's mean and variance (the coefficients'
covariance plus a new run's misfit) are those of a lognormal, whose quantiles are
the interval, so no interval of a quantity that cannot be negative (a cause's heap,
the total, RSS) reaches below zero, and a small cause's interval is skewed up rather
than cut at zero. A cause the linear model puts at or below zero is reported as 0
with ``[0, mean + t * sd]`` (bounded below, additive above). Differences between two
sets (:func:`predict_difference`) can be negative and keep the additive interval.

RSS is two quantities (:data:`RSS_DEFINITIONS`): settled growth (the fitted target,
RSS at the last step's profile mark minus RSS at 0 CRDs) and peak growth (the highest
RSS sample of the run minus the same baseline: what a memory limit must hold),
predicted as settled growth plus a lognormal excess, peak minus settled, measured on
runs named in the model's provenance (:class:`PeakExcess`). The excess is a burst
above the final footprint (an install's transient allocations before the runtime
returns them), not a share of it: on five 160-CRD runs per version it was 100-330 MiB
(peak/settled 1.1-1.6), on an 800-CRD provider-like run 47 MiB (1.01), so a ratio taken
from small runs overpredicts provider-scale peaks by ~40 %. Models of format 3 before
it carry a ratio (:class:`PeakRatio`), still read and used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from crdscale.analysis.intervals import t_quantile
from crdscale.analysis.targets import TOTAL
from crdscale.footprint.features import TERM_FEATURES, add_features
from crdscale.units import is_missing

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a function returns or reads DataFrames, not here: a prediction
# (`crdscale footprint`) needs none, and importing it (with pyarrow) is ~0.4 s of the ~3 s a
# provider's prediction takes (hence TOTAL from crdscale.analysis.targets, not percrd).

RSS = "rss"  # settled RSS growth: the target fitted on the runs' profile marks
RSS_PEAK = "rss_peak"  # peak RSS growth: settled growth plus the model's PeakExcess (or times its PeakRatio)
RSS_DEFINITIONS = {
    RSS: (
        "settled RSS growth: kube-apiserver's resident memory once the set is installed and served and the "
        "server settled (RSS at the last step's heap profile, after its settle and the profile's GC), minus "
        "its RSS at 0 CRDs"
    ),
    RSS_PEAK: (
        "peak RSS growth: the highest RSS sampled (every second, /proc) while the set is installed and "
        "served (up to its last heap profile), minus its RSS at 0 CRDs: what a memory limit must hold"
    ),
}
# 2: fitted on runs, not steps, with the error scaling with served versions (1 took steps as independent).
# 3: lognormal (non-negative) intervals, the peak RSS ratio, provenance.uses, error_scale; format 2 files
# are read (they have no peak ratio: no peak RSS prediction).
MODEL_FORMAT = 3
READABLE_FORMATS = (2, 3)
# What a run's misfit is proportional to (a model file's "error_scale"), so the prediction's spread grows
# with it. PREDICTED_TOTAL: the set's predicted heap growth, a multiplicative error (each run strays from
# the model by a share of its size); chosen by leave-one-run-out coverage on the fitting runs
# (crdscale footprint fit error-model): served versions gave wide-schema sets intervals of +-3 %
# where runs strayed by 10-20 %, and 40-CRD sets intervals of x15. SERVED_VERSIONS: models fitted before.
PREDICTED_TOTAL = "predicted_total"
SERVED_VERSIONS = "served_versions"
ERROR_SCALES = (PREDICTED_TOTAL, SERVED_VERSIONS)
ERROR_SCALE = PREDICTED_TOTAL  # what new fits use


@dataclass
class LinearModel:
    """``y = x . coef`` with ``cov`` (coefficients' covariance) and ``sigma2``, the variance of a
    new run's misfit per unit of its model's error scale (:data:`ERROR_SCALES`), on ``dof`` degrees of
    freedom."""

    coef: list[float]
    cov: list[list[float]]
    sigma2: float
    dof: int

    def moments(self, x: Sequence[float], scale: float) -> tuple[float, float]:
        """Mean and variance of a new run's value for a set with features ``x`` and size ``scale``
        (:meth:`FootprintModel.error_size`): the coefficients' uncertainty plus the runs' misfit; NaN
        variance without degrees of freedom."""
        x = np.asarray(x, dtype=float)
        value = float(x @ np.asarray(self.coef))
        if self.dof <= 0 or math.isnan(self.sigma2):
            return value, math.nan
        return value, max(float(x @ np.asarray(self.cov) @ x) + self.sigma2 * scale**2, 0.0)

    def quantile(self, confidence: float) -> float:
        """The two-sided t quantile of a ``confidence`` interval on this model's degrees of freedom."""
        return t_quantile(0.5 + confidence / 2, self.dof) if self.dof > 0 else math.nan

    def predict(self, x: Sequence[float], scale: float, confidence: float = 0.95) -> tuple[float, float, float]:
        """Prediction and its non-negative prediction interval (a new run, not just the mean) for a
        set of size ``scale``: :func:`lognormal_interval` of :meth:`moments`."""
        mean, var = self.moments(x, scale)
        return lognormal_interval(mean, var, self.quantile(confidence))


def lognormal_interval(mean: float, var: float, q: float) -> tuple[float, float, float]:
    """``(value, low, high)`` of a quantity that cannot be negative, with this ``mean`` and ``var``:
    the interval of the lognormal with the same two moments, ``exp(mu +- q * s)`` (``q``: a
    quantile such as t's), never below zero. A mean at or below zero (a linear model's cause that
    is nothing at this size) gives value 0 and ``[0, max(0, mean + q * sd)]``. NaN bounds when
    ``var`` or ``q`` is NaN."""
    if math.isnan(var) or math.isnan(q):
        return max(mean, 0.0), math.nan, math.nan
    if mean <= 0:
        return 0.0, 0.0, max(0.0, mean + q * math.sqrt(var))
    s2 = math.log1p(var / mean**2)
    mu = math.log(mean) - s2 / 2
    return mean, math.exp(mu - q * math.sqrt(s2)), math.exp(mu + q * math.sqrt(s2))


@dataclass
class _LogNormalOverRuns:
    """A positive quantity measured once per run, lognormal: ``log_mean`` and ``log_var`` of its log
    over ``runs`` runs (``dof = runs - 1``); how model files store it."""

    log_mean: float
    log_var: float
    runs: int

    @property
    def dof(self) -> int:
        return self.runs - 1

    def to_dict(self) -> dict[str, Any]:
        return {"log_mean": self.log_mean, "log_var": self.log_var, "runs": self.runs}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        return cls(float(data["log_mean"]), float(data["log_var"]), int(data["runs"]))


@dataclass
class PeakRatio(_LogNormalOverRuns):
    """Peak RSS growth over settled RSS growth (:data:`RSS_DEFINITIONS`): ``log(peak / settled)``
    (format-3 models; read, no longer fitted)."""


@dataclass
class PeakExcess(_LogNormalOverRuns):
    """Peak RSS growth minus settled RSS growth (:data:`RSS_DEFINITIONS`), bytes: ``log(peak - settled)``."""

    def moments(self) -> tuple[float, float]:
        """Mean and variance of a new run's excess (bytes): the lognormal's, its log-variance
        widened by the uncertainty of the mean (``1 + 1/runs``)."""
        s2 = self.log_var * (1 + 1 / self.runs)
        mean = math.exp(self.log_mean + s2 / 2)
        return mean, mean**2 * math.expm1(s2)


def peak_interval(
    settled: LinearModel, peak: PeakRatio | PeakExcess, x: Sequence[float], scale: float, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Peak RSS growth. With a :class:`PeakExcess`: settled growth plus the excess, their means and
    variances added (independent), the interval the lognormal of those two moments
    (:func:`lognormal_interval`); nothing when nothing is installed. With a :class:`PeakRatio`: the
    settled prediction's lognormal times the ratio's (a new run's ratio: its variance plus the
    mean's), the log-variances added. The t quantile on the fewer degrees of freedom of the two."""
    mean, var = settled.moments(x, scale)
    dof = min(settled.dof, peak.dof)
    if isinstance(peak, PeakExcess):
        if not any(x):
            return 0.0, 0.0, 0.0
        excess_mean, excess_var = peak.moments()
        q = t_quantile(0.5 + confidence / 2, dof) if dof > 0 else math.nan
        return lognormal_interval(max(mean, 0.0) + excess_mean, var + excess_var, q)
    if mean <= 0 or math.isnan(var) or peak.dof <= 0:
        return max(mean, 0.0) * math.exp(peak.log_mean), math.nan, math.nan
    s2 = math.log1p(var / mean**2) + peak.log_var * (1 + 1 / peak.runs)
    mu = math.log(mean) - math.log1p(var / mean**2) / 2 + peak.log_mean
    q = t_quantile(0.5 + confidence / 2, dof)
    return math.exp(mu + s2 / 2), math.exp(mu - q * math.sqrt(s2)), math.exp(mu + q * math.sqrt(s2))


# What a fit saw: outside it a prediction extrapolates (v1.24.0's OpenAPI, for one, grows
# superlinearly past a few hundred properties per CRD). Measure -> how a warning names it.
RANGE_MEASURES = {
    "crds": "CRDs",
    "versions_per_crd": "served versions per CRD",
    "properties_per_version": "properties per served version",
}


def _measures(features: Mapping[str, float]) -> dict[str, float]:
    crds = float(features.get("crds") or 0)
    versions = float(features.get("served_versions") or 0)
    return {
        "crds": crds,
        "versions_per_crd": versions / crds if crds else math.nan,
        "properties_per_version": float(features.get("properties") or 0) / versions if versions else math.nan,
    }


@dataclass
class FootprintModel:
    """Per-target linear models (``targets``: cause, ``total`` or ``rss`` -> model) over ``features``,
    for one kube-apiserver version, with where the coefficients came from and ``ranges``: the
    ``[min, max]`` of each of :data:`RANGE_MEASURES` over the steps it was fitted on."""

    kube_version: str
    features: list[str]
    targets: dict[str, LinearModel]
    provenance: dict[str, Any] = field(default_factory=dict)
    ranges: dict[str, list[float]] = field(default_factory=dict)
    peak: PeakRatio | PeakExcess | None = None
    error_scale: str = SERVED_VERSIONS  # files from before "error_scale" was read scaled with served versions

    def __post_init__(self):
        if self.error_scale not in ERROR_SCALES:
            raise ValueError(f"footprint model error_scale {self.error_scale!r}: known are {', '.join(ERROR_SCALES)}")

    def error_size(self, x) -> Any:
        """The size a set's misfit scales with, for features ``x`` (one set, or one row per set):
        its predicted total heap growth (never below 0), or its served versions."""
        x = np.asarray(x, dtype=float)
        if self.error_scale == PREDICTED_TOTAL:
            if TOTAL not in self.targets:
                raise ValueError("a footprint model whose error scales with its predicted total has no total")
            return np.maximum(x @ np.asarray(self.targets[TOTAL].coef), 0.0)
        if SERVED_VERSIONS not in self.features:
            raise ValueError("a footprint model whose error scales with served versions does not use them")
        return x[..., self.features.index(SERVED_VERSIONS)]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (NaN becomes None)."""

        def clean(v):
            if is_missing(v):
                return None
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v

        return {
            "format": MODEL_FORMAT,
            "kube_version": self.kube_version,
            "features": list(self.features),
            "error_scale": self.error_scale,
            "provenance": self.provenance,
            "ranges": self.ranges,
            "peak_ratio": self.peak.to_dict() if isinstance(self.peak, PeakRatio) else None,
            **({"peak_excess": self.peak.to_dict()} if isinstance(self.peak, PeakExcess) else {}),
            "targets": {
                t: {"coef": clean(m.coef), "cov": clean(m.cov), "sigma2": clean(m.sigma2), "dof": m.dof}
                for t, m in self.targets.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FootprintModel:
        """The model of :meth:`to_dict`; ValueError for another format (refit it)."""
        if data.get("format") not in READABLE_FORMATS:
            raise ValueError(f"footprint model format {data.get('format')!r}, this crdscale reads {MODEL_FORMAT}")

        def num(v):
            return math.nan if v is None else v

        targets = {
            t: LinearModel(
                [num(c) for c in m["coef"]],
                [[num(v) for v in row] for row in m["cov"]],
                num(m["sigma2"]),
                int(m["dof"]),
            )
            for t, m in data["targets"].items()
        }
        return cls(
            data["kube_version"],
            list(data["features"]),
            targets,
            dict(data.get("provenance") or {}),
            {k: list(v) for k, v in (data.get("ranges") or {}).items()},
            PeakExcess.from_dict(data["peak_excess"])
            if data.get("peak_excess")
            else PeakRatio.from_dict(data["peak_ratio"])
            if data.get("peak_ratio")
            else None,
            str(data.get("error_scale") or SERVED_VERSIONS),
        )


def extrapolations(model: FootprintModel, features: Mapping[str, float]) -> list[str]:
    """One line per measure of :data:`RANGE_MEASURES` where a CRD set lies outside what ``model``
    was fitted on (empty when inside, or when the model records no ranges)."""
    out = []
    for name, value in _measures(features).items():
        low, high = model.ranges.get(name, (None, None))
        if low is None or math.isnan(value) or low <= value <= high:
            continue
        out.append(
            f"{RANGE_MEASURES[name]} {value:,.{0 if value >= 10 else 1}f} is outside the fitted range "
            f"[{low:,.{0 if low >= 10 else 1}f}, {high:,.{0 if high >= 10 else 1}f}]: "
            f"the prediction extrapolates"
        )
    return out


def prediction_rows(
    model: FootprintModel, features: Mapping[str, float], confidence: float = 0.95
) -> list[tuple[str, float, float, float]]:
    """:func:`predict` as ``(target, value, low, high)`` tuples in its order, without pandas (what the CLI
    prints)."""
    x = [_feature(features, f) for f in model.features]
    scale = float(model.error_size(x))
    rows = [(t, *m.predict(x, scale, confidence)) for t, m in model.targets.items()]
    if model.peak is not None and RSS in model.targets:
        rows.append((RSS_PEAK, *peak_interval(model.targets[RSS], model.peak, x, scale, confidence)))
    last = {TOTAL: 1, RSS: 2, RSS_PEAK: 3}
    return sorted(rows, key=lambda r: (last.get(r[0], 0), -r[1]))


def predict(model: FootprintModel, features: Mapping[str, float], confidence: float = 0.95) -> pd.DataFrame:
    """What a CRD set with these :func:`footprint_features` adds: ``target, value, low, high``
    (bytes, non-negative prediction interval at ``confidence``); causes by size, then ``total``,
    ``rss`` (settled RSS growth) and ``rss_peak`` (peak RSS growth, when the model has a peak excess or ratio)."""
    import pandas as pd  # lazy: a prediction needs no DataFrame (pandas and pyarrow, ~0.4 CPU-s)

    return pd.DataFrame(prediction_rows(model, features, confidence), columns=["target", "value", "low", "high"])


def _ordered(out: pd.DataFrame) -> pd.DataFrame:
    out["_last"] = out["target"].map({TOTAL: 1, RSS: 2, RSS_PEAK: 3}).fillna(0)
    out = out.sort_values(["_last", "value"], ascending=[True, False], kind="stable").drop(columns="_last")
    return out.reset_index(drop=True)


def _feature(features: Mapping[str, float], name: str) -> float:
    """``features[name]``; a term feature (:data:`~crdscale.footprint.features.TERM_FEATURES`, such as CEL rules)
    that a set's features do not give counts 0 (features from before it was counted, or a run's summary)."""
    if name in TERM_FEATURES:
        return float(features.get(name, 0.0))
    return float(features[name])


def _matrix(per_crd: Sequence[Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    return np.array([[_feature(f, n) for n in names] for f in per_crd], dtype=float).reshape(len(per_crd), len(names))


def crd_costs(model: FootprintModel, per_crd: Sequence[Mapping[str, float]], target: str = TOTAL) -> np.ndarray:
    """Each CRD's share of ``target`` (bytes): its :func:`crd_features` times the coefficients. The model is
    linear through the origin, so the shares add up to the set's prediction exactly."""
    return _matrix(per_crd, model.features) @ np.asarray(model.targets[target].coef, dtype=float)


def top_crds(
    model: FootprintModel,
    names: Sequence[str],
    per_crd: Sequence[Mapping[str, float]],
    *,
    count: int = 10,
    target: str = TOTAL,
    extra: Sequence[float] | None = None,
) -> dict[str, Any]:
    """The CRDs that cost most: ``{"target", "crds": how many in the set, "half": how many of the costliest
    make half the predicted ``target``, "costliest": [{"name", "bytes", "share", "cumulative_share"}]
    (the ``count`` costliest, costliest first)}``. ``extra``: bytes each CRD adds besides its definition
    (its objects' heap), in ``per_crd``'s order."""
    costs = crd_costs(model, per_crd, target)
    if extra is not None:
        costs = costs + np.asarray(extra, dtype=float)
    total = float(costs.sum())
    order = np.argsort(-costs, kind="stable")
    cumulative = np.cumsum(costs[order])
    half = int(np.searchsorted(cumulative, total / 2) + 1) if total > 0 else 0
    rows = [
        {
            "name": names[i],
            "bytes": float(costs[i]),
            "share": float(costs[i] / total) if total > 0 else math.nan,
            "cumulative_share": float(cumulative[k] / total) if total > 0 else math.nan,
        }
        for k, i in enumerate(order[:count])
    ]
    return {"target": target, "crds": len(names), "half": min(half, len(names)), "costliest": rows}


def _interval_arrays(model: LinearModel, x: np.ndarray, scale: np.ndarray, confidence: float):
    """Vectorised :meth:`LinearModel.predict` (:func:`lognormal_interval`) over rows of ``x``:
    value, low, high arrays."""
    mean = x @ np.asarray(model.coef, dtype=float)
    if model.dof <= 0 or math.isnan(model.sigma2):
        nan = np.full_like(mean, math.nan)
        return np.maximum(mean, 0.0), nan, nan
    var = np.maximum(np.einsum("ij,jk,ik->i", x, np.asarray(model.cov, dtype=float), x) + model.sigma2 * scale**2, 0)
    q = model.quantile(confidence)
    positive = mean > 0
    safe = np.where(positive, mean, 1.0)
    s = np.sqrt(np.log1p(var / safe**2))
    mu = np.log(safe) - s**2 / 2
    low = np.where(positive, np.exp(mu - q * s), 0.0)
    high = np.where(positive, np.exp(mu + q * s), np.maximum(0.0, mean + q * np.sqrt(var)))
    return np.maximum(mean, 0.0), low, high


def budget_fit(
    model: FootprintModel,
    per_crd: Sequence[Mapping[str, float]],
    budget: float,
    *,
    baseline: float = 0.0,
    target: str = RSS,
    confidence: float = 0.95,
    extra: np.ndarray | None = None,
) -> dict[str, Any]:
    """How many of a set's CRDs fit in ``budget`` bytes of ``target`` beside ``baseline`` (what the server
    holds without them), taken cheapest first (the most that can fit); ``extra``: an array of
    ``(value, low, high)`` rows, what each CRD adds besides its definition (its objects' RSS), added
    to every prefix that holds the CRD (bounds add):

    ``{"budget", "baseline", "target", "crds", "fit": count whose predicted growth fits,
    "fit_at_high": count whose interval's upper bound fits (the safe answer), "whole_set": {"value",
    "low", "high"}}``; counts from 0 to ``crds``. ``target`` :data:`RSS_PEAK` (what a memory limit must
    hold) needs a model with a peak excess or ratio; ValueError otherwise."""
    room = float(budget) - float(baseline)
    peak = target == RSS_PEAK
    if peak and model.peak is None:
        raise ValueError("this model has no peak RSS excess or ratio: budget against settled RSS (rss) or refit it")
    # Peak is settled plus (or times) a constant: the same order.
    costs = crd_costs(model, per_crd, RSS if peak else target)
    extra = np.zeros((len(per_crd), 3)) if extra is None else np.asarray(extra, dtype=float).reshape(-1, 3)
    order = np.argsort(costs + extra[:, 0], kind="stable")
    x = np.cumsum(_matrix(per_crd, model.features)[order], axis=0)
    scale = model.error_size(x)
    if peak:
        rows = [peak_interval(model.targets[RSS], model.peak, row, s, confidence) for row, s in zip(x, scale)]
        value, low, high = (np.array([r[i] for r in rows], dtype=float) for i in range(3))
    else:
        value, low, high = _interval_arrays(model.targets[target], x, scale, confidence)
    added = np.cumsum(extra[order], axis=0)
    value, low, high = value + added[:, 0], low + added[:, 1], high + added[:, 2]

    def fitting(values: np.ndarray) -> int:
        # Cheapest first: stop at the first prefix that does not fit.
        over = np.flatnonzero(~(values <= room))
        return int(over[0]) if len(over) else len(values)

    whole = predict(model, add_features(per_crd), confidence).set_index("target").loc[target]
    whole = whole[["value", "low", "high"]] + extra.sum(axis=0)
    return {
        "budget": float(budget),
        "baseline": float(baseline),
        "target": target,
        "crds": len(per_crd),
        "fit": fitting(value) if room >= 0 else 0,
        "fit_at_high": fitting(high) if room >= 0 and not np.isnan(high).all() else None,
        "whole_set": {k: float(whole[k]) for k in ("value", "low", "high")},
    }


def predict_difference(
    model: FootprintModel, old: Mapping[str, float], new: Mapping[str, float], confidence: float = 0.95
) -> pd.DataFrame:
    """What going from CRD set ``old`` to ``new`` (their :func:`footprint_features`) adds, per target:
    ``target, value, low, high`` (bytes; negative when the new set is smaller).

    The coefficients' uncertainty enters through the features' difference; the runs' misfit is
    taken as shared by the two sets (two releases of one provider, made by one generator, stray from
    the model alike), so it scales with the difference of their error sizes
    (:meth:`FootprintModel.error_size`: predicted totals, or served versions).
    For unrelated sets, compare two predictions instead. A difference can be negative, so its
    interval is additive (t times the standard deviation), not the lognormal of :func:`predict`;
    peak RSS is not differenced (its ratio is not known to carry to a difference)."""
    x_old = np.array([_feature(old, f) for f in model.features])
    x_new = np.array([_feature(new, f) for f in model.features])
    dx = x_new - x_old
    dscale = float(model.error_size(x_new)) - float(model.error_size(x_old))
    rows = []
    for target, m in model.targets.items():
        mean, var = m.moments(dx, dscale)
        half = m.quantile(confidence) * math.sqrt(var)
        rows.append((target, mean, mean - half, mean + half))
    import pandas as pd  # lazy: a prediction needs no DataFrame (pandas and pyarrow, ~0.4 CPU-s)

    return _ordered(pd.DataFrame(rows, columns=["target", "value", "low", "high"]))
