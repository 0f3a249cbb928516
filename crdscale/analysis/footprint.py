"""What a CRD set will add to kube-apiserver, predicted from its shape.

:func:`footprint_features` describes a CRD set in the numbers memory grows
with (CRDs, served versions, schema properties and bytes, depth).
:func:`fit_footprint` fits, per cause of :mod:`crdscale.analysis.attribution`
and for RSS, a linear model through the origin on sweep runs::

    added bytes = sum_f coef_f * feature_f

(at 0 CRDs nothing is added). Each run is one observation: its steps share the
run's misfit (a schema size the features describe badly is wrong at every
step), so treating steps as independent made the intervals too narrow. A run's
growth at its full set is fitted through its steps, and the runs are regressed
per served CRD version, since a misfit grows with the set. A
:class:`FootprintModel` carries the coefficients, their covariance and the
runs' scatter (``len(runs) - len(features)`` degrees of freedom), so
:func:`predict` gives prediction intervals for a new set; it is plain data
(:meth:`FootprintModel.to_dict`) shipped per kube-apiserver version with its
provenance (experiment, machine, date, and which runs were used for what). Nothing
here reads files.

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
from crdscale.schema import measure_schema
from crdscale.units import is_missing

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a function returns or reads DataFrames, not here: a prediction
# (`crdscale footprint`) needs none, and importing it (with pyarrow) is ~0.4 s of the ~3 s a
# provider's prediction takes (hence TOTAL from crdscale.analysis.targets, not percrd).

# Features a model may use, in the order they are reported; max_depth describes, it does not add up.
# properties_squared (the sum over served versions of their property count squared) is there for
# costs that grow faster than the schema; tried on v1.24.0's RSS, the sweep did not support it
# (README, "Footprint"), so no shipped model uses it.
FEATURES = ("crds", "served_versions", "properties", "properties_squared", "schema_bytes")
DESCRIPTIVE = ("max_depth",)
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
# (scripts/footprint_error_model.py): served versions gave wide-schema sets intervals of +-3 %
# where runs strayed by 10-20 %, and 40-CRD sets intervals of x15. SERVED_VERSIONS: models fitted before.
PREDICTED_TOTAL = "predicted_total"
SERVED_VERSIONS = "served_versions"
ERROR_SCALES = (PREDICTED_TOTAL, SERVED_VERSIONS)
ERROR_SCALE = PREDICTED_TOTAL  # what new fits use


def crd_features(crd: Mapping[str, Any]) -> dict[str, float]:
    """:func:`footprint_features` of one CRD (``crds`` is 1): its served versions and their schemas,
    each measured in one pass."""
    out = dict.fromkeys(FEATURES + DESCRIPTIVE, 0.0)
    out["crds"] = 1.0
    for version in (crd.get("spec") or {}).get("versions") or []:
        if not version.get("served", True):
            continue
        measures = measure_schema((version.get("schema") or {}).get("openAPIV3Schema"))
        out["served_versions"] += 1
        out["properties"] += measures.properties
        out["properties_squared"] += measures.properties**2
        out["schema_bytes"] += measures.bytes
        out["max_depth"] = max(out["max_depth"], measures.depth)
    return out


def add_features(per_crd: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The features of a set from its CRDs' (:func:`crd_features`): sums, and the deepest depth."""
    out = dict.fromkeys(FEATURES + DESCRIPTIVE, 0.0)
    for features in per_crd:
        for f in FEATURES:
            out[f] += features[f]
        out["max_depth"] = max(out["max_depth"], features["max_depth"])
    return out


def footprint_features(crds: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The shape of a CRD set: ``crds``; ``served_versions`` (summed over CRDs);
    ``properties`` and ``schema_bytes`` (compact JSON) of the served versions' schemas,
    summed; ``properties_squared`` (each served version's properties squared, summed);
    ``max_depth`` (deepest property nesting). Counts, bytes and levels."""
    return add_features([crd_features(c) for c in crds])


def features_from_summary(summary: Mapping[str, Any]) -> dict[str, float]:
    """:func:`footprint_features` from a run's CRD set summary (``manifest["crds"]``, see
    :class:`crdscale.crds.summary.CrdSetSummary`), taking every version as served and
    ``max_depth`` as unknown (NaN): what a recorded run tells without its CRDs. The summary
    has no per-version property counts, so ``properties_squared`` takes the versions as equal
    in size: exact for generated sets, a lower bound for others."""
    versions, properties = float(summary["versions"]), float(summary["properties_total"])
    return {
        "crds": float(summary["count"]),
        "served_versions": versions,
        "properties": properties,
        "properties_squared": properties**2 / versions if versions else 0.0,
        "schema_bytes": float(summary["schema_bytes_total"]),
        "max_depth": math.nan,
    }


def training_rows(
    points: pd.DataFrame, features: Mapping[str, Mapping[str, float]], *, phase: str = "served"
) -> pd.DataFrame:
    """Rows to fit on, from several runs: ``run, installed, share, target, added`` plus one column
    per feature (``installed``: CRDs installed at that point, ``share``: of the run's set).

    ``points`` has ``run, crds, phase, target, value`` (``target`` is a cause,
    ``total`` or ``rss``; bytes); ``features`` maps run -> the
    :func:`footprint_features` of its whole CRD set. ``added`` is the value
    minus the run's value at 0 CRDs; a step's features are the set's scaled
    by the share of CRDs installed (runs install uniform slices of a set).
    """
    import pandas as pd

    from crdscale.analysis.percrd import phase_points

    rows = []
    for run, data in points.groupby("run", sort=False):
        feats = features[run]
        data = phase_points(data, phase)
        for target, group in data.groupby("target", sort=False):
            base = group.loc[group["crds"] == 0, "value"]
            if not len(base) or not feats.get("crds"):
                continue
            for r in group[group["crds"] > 0].itertuples(index=False):
                share = r.crds / feats["crds"]
                rows.append(
                    {
                        "run": run,
                        "installed": r.crds,
                        "share": share,
                        "target": target,
                        "added": r.value - float(base.iloc[0]),
                        **{f: feats[f] * share for f in FEATURES},
                    }
                )
    return pd.DataFrame(rows, columns=["run", "installed", "share", "target", "added", *FEATURES])


def run_growth(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run and target of :func:`training_rows`: ``run, target, added`` (bytes the whole
    set adds, fitted through the run's steps and the origin) and the whole set's features."""
    import pandas as pd

    out = []
    for (run, target), group in rows.groupby(["run", "target"], sort=False):
        share = group["share"].to_numpy(dtype=float)
        added = float(share @ group["added"].to_numpy(dtype=float) / (share @ share))
        whole = group.iloc[int(np.argmax(share))]
        out.append(
            {
                "run": run,
                "target": target,
                "added": added,
                **{f: float(whole[f]) / float(whole["share"]) for f in FEATURES},
            }
        )
    return pd.DataFrame(out, columns=["run", "target", "added", *FEATURES])


def final_growth(rows: pd.DataFrame) -> pd.DataFrame:
    """What each run measured once its whole set was in: ``run, target, installed, added`` at the
    run's last step (bytes), from :func:`training_rows` -- the number a prediction is judged by."""
    last = rows[rows["installed"] == rows.groupby("run")["installed"].transform("max")]
    return last[["run", "target", "installed", "added"]].reset_index(drop=True)


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


def fit_peak_excess(growths: Sequence[tuple[float, float]]) -> PeakExcess:
    """The :class:`PeakExcess` of runs' ``(peak growth, settled growth)`` (bytes); a run whose peak is
    its settled growth (the RSS still rising at its last mark) counts as 1 MiB of excess, the
    resolution of RSS samples against a heap sampled every 512 KiB. ValueError with fewer than two
    runs with RSS growth."""
    logs = [math.log(max(p - s, 2**20)) for p, s in growths if p > 0 and s > 0]
    if len(logs) < 2:
        raise ValueError(f"a peak excess needs at least two runs with RSS growth, got {len(logs)}")
    return PeakExcess(float(np.mean(logs)), float(np.var(logs, ddof=1)), len(logs))


def fit_peak_ratio(growths: Sequence[tuple[float, float]]) -> PeakRatio:
    """The :class:`PeakRatio` of runs' ``(peak growth, settled growth)`` (bytes, both positive);
    ValueError with fewer than two usable runs."""
    logs = [math.log(p / s) for p, s in growths if p > 0 and s > 0]
    if len(logs) < 2:
        raise ValueError(f"a peak ratio needs at least two runs with RSS growth, got {len(logs)}")
    return PeakRatio(float(np.mean(logs)), float(np.var(logs, ddof=1)), len(logs))


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


def rss_growths(rss: pd.Series, marks: pd.DataFrame) -> dict[str, float]:
    """A run's RSS growth as :data:`RSS_DEFINITIONS` defines it, from its RSS samples (``rss``: bytes
    indexed by UTC timestamp) and profile ``marks`` (``timestamp, crds, phase``):
    ``{"baseline", "settled", "peak", "end"}`` in bytes (``baseline``: RSS at the 0-CRD mark;
    ``end``: growth at the last sample, e.g. after a hold). The peak is taken up to the last mark: a run
    stopped early (its memory guard) measured the set it had profiled, not the step it was in.
    NaN where the run lacks the samples."""
    import pandas as pd

    nan = {"baseline": math.nan, "settled": math.nan, "peak": math.nan, "end": math.nan}
    rss = rss.sort_index()
    if not len(rss) or not len(marks):
        return nan
    times = pd.to_datetime(marks["timestamp"], utc=True)
    zero, last = times[marks["crds"] == 0], times[marks["crds"] == marks["crds"].max()]
    if not len(zero) or marks["crds"].max() <= 0:
        return nan
    before = rss[: zero.max()]
    baseline = float(before.iloc[-1]) if len(before) else float(rss.iloc[0])
    at_last = rss[: last.max()]
    after = rss[zero.max() : last.max()]
    return {
        "baseline": baseline,
        "settled": float(at_last.iloc[-1]) - baseline if len(at_last) else math.nan,
        "peak": float(after.max()) - baseline if len(after) else math.nan,
        "end": float(rss.iloc[-1]) - baseline,
    }


def fit_linear(x: np.ndarray, y: np.ndarray) -> LinearModel:
    """Least squares through the origin; NaN uncertainty when the points leave no degree of freedom."""
    # Columns scaled to unit norm first: properties_squared is ~10^4 times properties, and an
    # unscaled inverse of x'x would lose the small coefficients' covariance to rounding.
    norms = np.linalg.norm(x, axis=0)
    norms[norms == 0] = 1.0
    z = x / norms
    coef, *_ = np.linalg.lstsq(z, y, rcond=None)
    dof = len(y) - x.shape[1]
    if dof > 0 and np.linalg.matrix_rank(z) == x.shape[1]:
        sigma2 = float(((y - z @ coef) ** 2).sum()) / dof
        cov = sigma2 * np.linalg.inv(z.T @ z) / np.outer(norms, norms)
    else:
        sigma2, cov = math.nan, np.full((x.shape[1], x.shape[1]), math.nan)
    coef = coef / norms
    return LinearModel([float(c) for c in coef], [[float(v) for v in row] for row in cov], sigma2, dof)


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


def fit_footprint(
    rows: pd.DataFrame,
    features: Sequence[str],
    *,
    kube_version: str,
    provenance: Mapping[str, Any] | None = None,
    error_scale: str = ERROR_SCALE,
) -> FootprintModel:
    """Fit one :class:`LinearModel` per target of :func:`training_rows` over ``features``, one
    observation per run (:func:`run_growth`), each weighted by its ``error_scale``
    (:data:`ERROR_SCALES`): for :data:`PREDICTED_TOTAL`, the run's fitted total heap growth,
    found by reweighting the total's fit until it settles (weights start as served versions).

    Raises ValueError when ``features`` cannot be told apart on these runs
    (e.g. served versions per CRD never varied: drop ``served_versions`` or ``crds`` then).
    With no more runs than features the coefficients have no interval (NaN).
    """
    import pandas as pd

    features = list(features)
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"unknown features {unknown} (known: {', '.join(FEATURES)})")
    if error_scale not in ERROR_SCALES:
        raise ValueError(f"unknown error scale {error_scale!r} (known: {', '.join(ERROR_SCALES)})")
    growth = run_growth(rows)
    groups = dict(tuple(growth.groupby("target", sort=False)))
    sizes = _run_sizes(groups, features, error_scale)
    targets = {}
    for target, group in groups.items():
        size = group["run"].map(sizes).to_numpy(dtype=float)
        # Dividing by the size weighs each run by it: a run's misfit grows with its set.
        x = group[features].to_numpy(dtype=float) / size[:, None]
        if np.linalg.matrix_rank(x) < len(features):
            raise ValueError(
                f"features {features} are collinear on these {len(group)} runs; sweep what they "
                f"measure (schema size, versions) or fit fewer"
            )
        targets[target] = fit_linear(x, group["added"].to_numpy(dtype=float) / size)
    seen = pd.DataFrame([_measures(r) for r in rows.to_dict("records")], columns=list(RANGE_MEASURES))
    ranges = {m: [float(seen[m].min()), float(seen[m].max())] for m in RANGE_MEASURES if seen[m].notna().any()}
    return FootprintModel(kube_version, features, targets, dict(provenance or {}), ranges, error_scale=error_scale)


# Reweighting rounds for PREDICTED_TOTAL: the weights change by well under 1 % after three on the sweeps.
_REWEIGHT_ROUNDS = 5


def _run_sizes(groups: Mapping[str, pd.DataFrame], features: Sequence[str], error_scale: str) -> dict[str, float]:
    """run -> the size its misfit scales with (:func:`fit_footprint`)."""
    first = next(iter(groups.values()))
    sizes = dict(zip(first["run"], first[SERVED_VERSIONS].astype(float)))
    if error_scale == SERVED_VERSIONS:
        return sizes
    if TOTAL not in groups:
        raise ValueError("an error scaled by the predicted total needs the total heap among the targets")
    total = groups[TOTAL]
    x = total[features].to_numpy(dtype=float)
    y = total["added"].to_numpy(dtype=float)
    # A floor keeps a run whose fitted total is about nothing from weighing as if it were exact.
    floor = 0.01 * float(np.abs(y).max() or 1.0)
    for _ in range(_REWEIGHT_ROUNDS):
        w = total["run"].map(sizes).to_numpy(dtype=float)
        coef = fit_linear(x / w[:, None], y / w).coef
        sizes = dict(zip(total["run"], np.maximum(x @ np.asarray(coef), floor)))
    return sizes


def leave_one_run_out(
    rows: pd.DataFrame,
    features: Sequence[str],
    *,
    error_scale: str = ERROR_SCALE,
    targets: Sequence[str] = (TOTAL, RSS),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each run of :func:`training_rows` predicted by a model fitted on the others: ``run, target,
    predicted, low, high, measured`` (its :func:`final_growth`), ``error`` (relative) and ``inside``.
    How an error model is chosen on the fitting runs alone, with no held-out set spent on it."""
    import pandas as pd

    last = final_growth(rows).set_index(["run", "target"])["added"]
    out = []
    for run in dict.fromkeys(rows["run"]):
        model = fit_footprint(rows[rows["run"] != run], features, kube_version="", error_scale=error_scale)
        whole = run_growth(rows[rows["run"] == run]).iloc[0]  # the whole set's features, as the fit sees them
        feats = {f: float(whole[f]) for f in FEATURES}
        predicted = {t: (v, lo, hi) for t, v, lo, hi in prediction_rows(model, feats, confidence)}
        for target in targets:
            if target not in predicted or (run, target) not in last.index:
                continue
            value, low, high = predicted[target]
            measured = float(last[(run, target)])
            out.append(
                {
                    "run": run,
                    "target": target,
                    "predicted": value,
                    "low": low,
                    "high": high,
                    "measured": measured,
                    "error": (value - measured) / measured if measured else math.nan,
                    "inside": bool(low <= measured <= high),
                }
            )
    return pd.DataFrame(out, columns=["run", "target", "predicted", "low", "high", "measured", "error", "inside"])


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
    x = [float(features[f]) for f in model.features]
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
    import pandas as pd

    return pd.DataFrame(prediction_rows(model, features, confidence), columns=["target", "value", "low", "high"])


def _ordered(out: pd.DataFrame) -> pd.DataFrame:
    out["_last"] = out["target"].map({TOTAL: 1, RSS: 2, RSS_PEAK: 3}).fillna(0)
    out = out.sort_values(["_last", "value"], ascending=[True, False], kind="stable").drop(columns="_last")
    return out.reset_index(drop=True)


def _matrix(per_crd: Sequence[Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    return np.array([[float(f[n]) for n in names] for f in per_crd], dtype=float).reshape(len(per_crd), len(names))


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
    x_old = np.array([float(old[f]) for f in model.features])
    x_new = np.array([float(new[f]) for f in model.features])
    dx = x_new - x_old
    dscale = float(model.error_size(x_new)) - float(model.error_size(x_old))
    rows = []
    for target, m in model.targets.items():
        mean, var = m.moments(dx, dscale)
        half = m.quantile(confidence) * math.sqrt(var)
        rows.append((target, mean, mean - half, mean + half))
    import pandas as pd

    return _ordered(pd.DataFrame(rows, columns=["target", "value", "low", "high"]))


# Candidate forms of a cost that may grow faster than the set (old servers rebuild the whole aggregated
# OpenAPI spec for every CRD): columns of the design at ``n`` CRDs installed of ``b`` schema bytes each.
# All have the linear model's per-CRD and per-schema-byte terms; the others add one superlinear term.
GROWTH_FORMS = {
    "linear": lambda n, b: [n, n * b],
    "crds_x_schema_bytes": lambda n, b: [n, n * b, n * n * b],
    "quadratic": lambda n, b: [n, n * b, n * n],
}


def held_out_growth_errors(steps: pd.DataFrame, forms: Mapping[str, Any] = GROWTH_FORMS) -> pd.DataFrame:
    """How well each growth form predicts a run's largest step it was not fitted on.

    ``steps`` has ``run, installed, bytes_per_crd, added`` (one target, one kube-apiserver version).
    For each run, each form is fitted (least squares through the origin, relative errors: rows
    divided by ``installed``) on every other run's steps and this run's steps but its largest, then
    predicts the largest: ``form, run, installed, predicted, measured, error`` (relative). The form
    with the smallest held-out error is the one the data supports; forms that coincide on these runs
    (one schema size makes ``crds_x_schema_bytes`` a multiple of ``quadratic``) tie."""
    import pandas as pd

    out = []
    for run, group in steps.groupby("run", sort=False):
        last = group.loc[group["installed"].idxmax()]
        train = steps[(steps["run"] != run) | (steps["installed"] < last["installed"])]
        for name, form in forms.items():
            x = np.array([form(n, b) for n, b in zip(train["installed"], train["bytes_per_crd"], strict=True)], float)
            y = train["added"].to_numpy(dtype=float)
            n = train["installed"].to_numpy(dtype=float)
            coef, *_ = np.linalg.lstsq(x / n[:, None], y / n, rcond=None)
            predicted = float(np.asarray(form(last["installed"], last["bytes_per_crd"]), float) @ coef)
            measured = float(last["added"])
            out.append(
                {
                    "form": name,
                    "run": run,
                    "installed": int(last["installed"]),
                    "predicted": predicted,
                    "measured": measured,
                    "error": (predicted - measured) / measured if measured else math.nan,
                }
            )
    return pd.DataFrame(out, columns=["form", "run", "installed", "predicted", "measured", "error"])


# -- states: what the set costs besides "served" (the state the models are fitted on)

SERVED = "served"
STATES = ("installed", "watched", SERVED, "openapi-v2")
STATE_DEFINITIONS = {
    "installed": (
        "the CRDs are Established and nothing watches them: no kube-controller-manager (envtest, a bare "
        "kube-apiserver); OpenAPI, the CRD objects and their JSONSchemaProps, no storage per resource"
    ),
    "watched": (
        "installed, and kube-controller-manager's garbage collector and quota controller watch every CRD "
        "(every real cluster, before any provider runs): each resource gets its storage, etcd client and "
        "handler; at most served"
    ),
    SERVED: (
        "installed, and a provider's informers LIST and watch every served version: what the model is fitted on "
        "(sweep runs without kube-controller-manager, whose watches add no storage a provider's did not)"
    ),
    "openapi-v2": (
        "served, and a client (kubectl apply/explain, Helm, client-go's OpenAPISchema) fetched /openapi/v2: "
        "the server keeps the spec it built until a CRD changes and the next client asks again"
    ),
}
OPENAPI_V2_CAUSE = "openapi-v2-spec"  # the prediction's row for what the v2 fetch holds
WATCH_CAUSE = "controller-manager-watch"  # the watched state's row for what kube-controller-manager's watches add


@dataclass
class StateTerms:
    """How the states other than served follow from a served prediction, measured per kube-apiserver version.

    ``installed_shares``: per cause, the share of its served cost already there once installed (causes not
    named: 0, they come with serving); ``watch_per_crd``: ``(value, low, high)`` bytes per CRD that
    kube-controller-manager's watches add to an installed set; ``openapi_v2``: a :class:`LinearModel`
    over ``openapi_v2_features`` (per CRD features) for what a fetched /openapi/v2 spec holds;
    ``provenance``: which runs gave each term (``uses``: term -> lines)."""

    kube_version: str
    installed_shares: dict[str, float]
    watch_per_crd: tuple[float, float, float]
    openapi_v2_features: list[str]
    openapi_v2: LinearModel
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        m = self.openapi_v2
        return {
            "format": 1,
            "kube_version": self.kube_version,
            "definitions": STATE_DEFINITIONS,
            "installed_shares": self.installed_shares,
            "watch_per_crd": list(self.watch_per_crd),
            "openapi_v2": {
                "features": self.openapi_v2_features,
                "coef": m.coef,
                "cov": m.cov,
                "sigma2": None if math.isnan(m.sigma2) else m.sigma2,
                "dof": m.dof,
            },
            "provenance": self.provenance,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateTerms:
        v2 = data["openapi_v2"]
        return cls(
            str(data["kube_version"]),
            {k: float(v) for k, v in data["installed_shares"].items()},
            tuple(float(v) for v in data["watch_per_crd"]),
            list(v2["features"]),
            LinearModel(
                [float(c) for c in v2["coef"]],
                [[float(v) for v in row] for row in v2["cov"]],
                math.nan if v2.get("sigma2") is None else float(v2["sigma2"]),
                int(v2["dof"]),
            ),
            dict(data.get("provenance") or {}),
        )


def fit_openapi_v2_term(
    observations: Sequence[tuple[Mapping[str, float], float, float]], features: Sequence[str], dof: int
) -> LinearModel:
    """What a fetched v2 spec holds per CRD, linear in ``features`` (per CRD: e.g. served versions and
    properties), from runs' ``(features per CRD, bytes per CRD, its standard error)``: solved exactly
    when there are as many runs as features (two schema sizes for two features), by weighted least
    squares otherwise; the coefficients' covariance from the runs' standard errors, ``dof`` the fewest
    degrees of freedom of the runs' estimates. No run scatter beyond those errors (``sigma2`` 0)."""
    x = np.array([[float(f[n]) for n in features] for f, _, _ in observations], dtype=float)
    y = np.array([v for _, v, _ in observations], dtype=float)
    se = np.array([s for _, _, s in observations], dtype=float)
    if np.linalg.matrix_rank(x) < len(features):
        raise ValueError(f"features {list(features)} cannot be told apart on these {len(y)} runs")
    w = 1.0 / se**2
    xtwx = x.T @ (x * w[:, None])
    cov = np.linalg.inv(xtwx)
    coef = cov @ (x.T @ (w * y))
    return LinearModel([float(c) for c in coef], [[float(v) for v in row] for row in cov], 0.0, int(dof))


def _scaled(row: pd.Series, factor: float) -> tuple[float, float, float]:
    return tuple(float(row[k]) * factor for k in ("value", "low", "high"))


def predict_state(
    model: FootprintModel,
    terms: StateTerms | None,
    features: Mapping[str, float],
    state: str = SERVED,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """:func:`predict` for one of :data:`STATES` (:data:`STATE_DEFINITIONS`), from the served
    prediction and the version's :class:`StateTerms`:

    * installed: each cause times its installed share; total and RSS scaled by installed/served total;
    * watched: installed plus kube-controller-manager's per-CRD term (its own row), at most served;
    * openapi-v2: served plus the fetched spec's term (its own row, lognormal interval);

    total and RSS bounds: the served prediction's, scaled by the state's total over the served total,
    plus the added term's bounds (bounds added: wider than a joint interval). ValueError for an unknown
    state, or a state other than served without ``terms``."""
    import pandas as pd

    if state not in STATES:
        raise ValueError(f"unknown state {state!r}; one of {', '.join(STATES)}")
    served = predict(model, features, confidence)
    if state == SERVED:
        return served
    if terms is None:
        raise ValueError(f"no state terms for kube-apiserver v{model.kube_version}: only 'served' can be predicted")
    rows = served.set_index("target")
    causes = [t for t in rows.index if t not in (TOTAL, RSS, RSS_PEAK)]
    total = rows.loc[TOTAL]
    served_total = float(total["value"])
    out = {}
    if state in ("installed", "watched"):
        shares = {c: min(max(terms.installed_shares.get(c, 0.0), 0.0), 1.0) for c in causes}
        for c in causes:
            out[c] = _scaled(rows.loc[c], shares[c])
        installed = sum(out[c][0] for c in causes)
        ratio = installed / served_total if served_total > 0 else 0.0
        added = (0.0, 0.0, 0.0)
        if state == "watched":
            n = float(features["crds"])
            room = max(served_total - installed, 0.0)
            added = tuple(min(v * n, room) if not math.isnan(v) else math.nan for v in terms.watch_per_crd)
            out[WATCH_CAUSE] = added
    else:
        x = [float(features[f]) for f in terms.openapi_v2_features]
        mean, var = terms.openapi_v2.moments(x, 0.0)
        added = lognormal_interval(mean, var, terms.openapi_v2.quantile(confidence))
        out = {c: _scaled(rows.loc[c], 1.0) for c in causes}
        out[OPENAPI_V2_CAUSE] = added
        ratio = 1.0
    state_total = served_total * ratio + added[0]
    total_row = (state_total, float(total["low"]) * ratio + added[1], float(total["high"]) * ratio + added[2])
    out[TOTAL] = total_row
    # RSS in these states was not fitted: it moves with the heap, by the state's total over the served total.
    factor = state_total / served_total if served_total > 0 else math.nan
    for target in (RSS, RSS_PEAK):
        if target in rows.index:
            out[target] = _scaled(rows.loc[target], factor)
    table = pd.DataFrame([(t, *v) for t, v in out.items()], columns=["target", "value", "low", "high"])
    return _ordered(table)
