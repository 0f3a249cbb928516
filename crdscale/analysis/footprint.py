"""What a CRD set will add to kube-apiserver, predicted from its shape.

:func:`footprint_features` describes a CRD set in the numbers memory grows
with (CRDs, served versions, schema properties and bytes, depth).
:func:`fit_footprint` fits, per cause of :mod:`crdscale.analysis.attribution`
and for RSS, a linear model through the origin on points of sweep runs::

    added bytes = sum_f coef_f * feature_f

(at 0 CRDs nothing is added). A :class:`FootprintModel` carries the
coefficients, their covariance and residual variance, so :func:`predict`
gives prediction intervals; it is plain data (:meth:`FootprintModel.to_dict`)
shipped per kube-apiserver version with its provenance (experiment, machine,
date). Nothing here reads files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from crdscale.analysis.percrd import TOTAL, phase_points, t_quantile
from crdscale.crds.summary import compact_json, count_properties, schema_depth

# Features a model may use, in the order they are reported; max_depth describes, it does not add up.
FEATURES = ("crds", "served_versions", "properties", "schema_bytes")
DESCRIPTIVE = ("max_depth",)
RSS = "rss"
MODEL_FORMAT = 1


def footprint_features(crds: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The shape of a CRD set: ``crds``; ``served_versions`` (summed over CRDs);
    ``properties`` and ``schema_bytes`` (compact JSON) of the served versions' schemas,
    summed; ``max_depth`` (deepest property nesting). Counts, bytes and levels."""
    out = dict.fromkeys(FEATURES + DESCRIPTIVE, 0.0)
    for crd in crds:
        out["crds"] += 1
        for version in (crd.get("spec") or {}).get("versions") or []:
            if not version.get("served", True):
                continue
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            out["served_versions"] += 1
            out["properties"] += count_properties(schema)
            out["schema_bytes"] += len(compact_json(schema).encode("utf-8")) if schema is not None else 0
            out["max_depth"] = max(out["max_depth"], schema_depth(schema))
    return out


def features_from_summary(summary: Mapping[str, Any]) -> dict[str, float]:
    """:func:`footprint_features` from a run's CRD set summary (``manifest["crds"]``, see
    :class:`crdscale.crds.summary.CrdSetSummary`), taking every version as served and
    ``max_depth`` as unknown (NaN): what a recorded run tells without its CRDs."""
    return {"crds": float(summary["count"]), "served_versions": float(summary["versions"]),
            "properties": float(summary["properties_total"]), "schema_bytes": float(summary["schema_bytes_total"]),
            "max_depth": math.nan}


def training_rows(points: pd.DataFrame, features: Mapping[str, Mapping[str, float]], *,
                  phase: str = "served") -> pd.DataFrame:
    """Rows to fit on, from several runs: ``run, installed, target, added`` plus one column per
    feature (``installed``: CRDs installed at that point).

    ``points`` has ``run, crds, phase, target, value`` (``target`` is a cause,
    ``total`` or ``rss``; bytes); ``features`` maps run -> the
    :func:`footprint_features` of its whole CRD set. ``added`` is the value
    minus the run's value at 0 CRDs; a step's features are the set's scaled
    by the share of CRDs installed (runs install uniform slices of a set).
    """
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
                rows.append({"run": run, "installed": r.crds, "target": target, "added": r.value - float(base.iloc[0]),
                             **{f: feats[f] * share for f in FEATURES}})
    return pd.DataFrame(rows, columns=["run", "installed", "target", "added", *FEATURES])


@dataclass
class LinearModel:
    """``y = x . coef`` with ``cov`` (coefficients' covariance), residual variance ``sigma2`` and ``dof``."""

    coef: list[float]
    cov: list[list[float]]
    sigma2: float
    dof: int

    def predict(self, x: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
        """Prediction and its prediction interval (a new measurement, not just the mean)."""
        x = np.asarray(x, dtype=float)
        value = float(x @ np.asarray(self.coef))
        if self.dof <= 0 or math.isnan(self.sigma2):
            return value, math.nan, math.nan
        var = float(x @ np.asarray(self.cov) @ x) + self.sigma2
        half = t_quantile(0.5 + confidence / 2, self.dof) * math.sqrt(max(var, 0.0))
        return value, value - half, value + half


def fit_linear(x: np.ndarray, y: np.ndarray) -> LinearModel:
    """Least squares through the origin; NaN uncertainty when the points leave no degree of freedom."""
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    dof = len(y) - x.shape[1]
    if dof > 0 and np.linalg.matrix_rank(x) == x.shape[1]:
        sigma2 = float(((y - x @ coef) ** 2).sum()) / dof
        cov = sigma2 * np.linalg.inv(x.T @ x)
    else:
        sigma2, cov = math.nan, np.full((x.shape[1], x.shape[1]), math.nan)
    return LinearModel([float(c) for c in coef], [[float(v) for v in row] for row in cov], sigma2, dof)


# What a fit saw, per CRD: outside it a prediction extrapolates (v1.24.0's OpenAPI, for one,
# grows superlinearly past a few hundred properties per CRD).
RANGE_MEASURES = ("crds", "properties_per_crd")


def _measures(features: Mapping[str, float]) -> dict[str, float]:
    crds = float(features.get("crds") or 0)
    return {"crds": crds, "properties_per_crd": float(features.get("properties") or 0) / crds if crds else math.nan}


@dataclass
class FootprintModel:
    """Per-target linear models (``targets``: cause, ``total`` or ``rss`` -> model) over ``features``,
    for one kube-apiserver version, with where the coefficients came from and ``ranges``: the
    ``[min, max]`` of each of :data:`RANGE_MEASURES` over the rows it was fitted on."""

    kube_version: str
    features: list[str]
    targets: dict[str, LinearModel]
    provenance: dict[str, Any] = field(default_factory=dict)
    ranges: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (NaN becomes None)."""
        def clean(v):
            if isinstance(v, float) and math.isnan(v):
                return None
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v

        return {"format": MODEL_FORMAT, "kube_version": self.kube_version, "features": list(self.features),
                "provenance": self.provenance, "ranges": self.ranges,
                "targets": {t: {"coef": clean(m.coef), "cov": clean(m.cov), "sigma2": clean(m.sigma2),
                                "dof": m.dof} for t, m in self.targets.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FootprintModel":
        def num(v):
            return math.nan if v is None else v

        targets = {t: LinearModel([num(c) for c in m["coef"]], [[num(v) for v in row] for row in m["cov"]],
                                  num(m["sigma2"]), int(m["dof"])) for t, m in data["targets"].items()}
        return cls(data["kube_version"], list(data["features"]), targets, dict(data.get("provenance") or {}),
                   {k: list(v) for k, v in (data.get("ranges") or {}).items()})


def fit_footprint(rows: pd.DataFrame, features: Sequence[str], *, kube_version: str,
                  provenance: Mapping[str, Any] | None = None) -> FootprintModel:
    """Fit one :class:`LinearModel` per target of :func:`training_rows` over ``features``.

    Raises ValueError when ``features`` cannot be told apart on these rows
    (e.g. properties per CRD never varied: fit ``crds`` alone then).
    """
    features = list(features)
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"unknown features {unknown} (known: {', '.join(FEATURES)})")
    targets = {}
    for target, group in rows.groupby("target", sort=False):
        x = group[features].to_numpy(dtype=float)
        if np.linalg.matrix_rank(x) < len(features):
            raise ValueError(f"features {features} are collinear on these runs; sweep what they measure "
                             f"(schema size, versions) or fit fewer")
        targets[target] = fit_linear(x, group["added"].to_numpy(dtype=float))
    seen = pd.DataFrame([_measures(r) for r in rows.to_dict("records")], columns=list(RANGE_MEASURES))
    ranges = {m: [float(seen[m].min()), float(seen[m].max())] for m in RANGE_MEASURES if seen[m].notna().any()}
    return FootprintModel(kube_version, features, targets, dict(provenance or {}), ranges)


def extrapolations(model: FootprintModel, features: Mapping[str, float]) -> list[str]:
    """One line per measure of :data:`RANGE_MEASURES` where a CRD set lies outside what ``model``
    was fitted on (empty when inside, or when the model records no ranges)."""
    out = []
    for name, value in _measures(features).items():
        low, high = model.ranges.get(name, (None, None))
        if low is None or math.isnan(value) or low <= value <= high:
            continue
        out.append(f"{name.replace('_', ' ')} {value:,.0f} is outside the fitted range "
                   f"[{low:,.0f}, {high:,.0f}]: the prediction extrapolates")
    return out


def predict(model: FootprintModel, features: Mapping[str, float], confidence: float = 0.95) -> pd.DataFrame:
    """What a CRD set with these :func:`footprint_features` adds: ``target, value, low, high``
    (bytes, prediction interval at ``confidence``); causes by size, then ``total`` and ``rss``."""
    x = [float(features[f]) for f in model.features]
    rows = [(t, *m.predict(x, confidence)) for t, m in model.targets.items()]
    out = pd.DataFrame(rows, columns=["target", "value", "low", "high"])
    out["_last"] = out["target"].map({TOTAL: 1, RSS: 2}).fillna(0)
    out = out.sort_values(["_last", "value"], ascending=[True, False], kind="stable").drop(columns="_last")
    return out.reset_index(drop=True)
