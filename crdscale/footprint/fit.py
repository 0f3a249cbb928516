"""Fitting the footprint model (:mod:`crdscale.footprint.model`) on sweep runs.

:func:`fit_footprint` fits, per cause and for RSS, a linear model through the origin. Each run is
one observation: its steps share the run's misfit (a schema size the features describe badly is
wrong at every step), so treating steps as independent made the intervals too narrow. A run's
growth at its full set is fitted through its steps (:func:`run_growth`), and the runs are regressed
weighted by their error scale, since a misfit grows with the set. :func:`leave_one_run_out` is how
the error model was chosen; :func:`fit_peak_excess` fits peak RSS over settled. Pure: DataFrames in,
models out (reading runs: :mod:`crdscale.footprint.calibrate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crdscale.analysis.lstsq import least_squares
from crdscale.analysis.percrd import phase_points
from crdscale.analysis.targets import TOTAL
from crdscale.footprint.features import FEATURES
from crdscale.footprint.model import (
    ERROR_SCALE,
    ERROR_SCALES,
    RANGE_MEASURES,
    RSS,
    SERVED_VERSIONS,
    FootprintModel,
    LinearModel,
    PeakExcess,
    PeakRatio,
    _measures,
    prediction_rows,
)

if TYPE_CHECKING:
    import pandas as pd


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
                        **{f: feats.get(f, 0.0) * share for f in FEATURES},  # a feature the run does not give: 0
                    }
                )
    return pd.DataFrame(rows, columns=["run", "installed", "share", "target", "added", *FEATURES])


def run_growth(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run and target of :func:`training_rows`: ``run, target, added`` (bytes the whole
    set adds, fitted through the run's steps and the origin) and the whole set's features."""
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


def rss_growths(rss: pd.Series, marks: pd.DataFrame) -> dict[str, float]:
    """A run's RSS growth as :data:`RSS_DEFINITIONS` defines it, from its RSS samples (``rss``: bytes
    indexed by UTC timestamp) and profile ``marks`` (``timestamp, crds, phase``):
    ``{"baseline", "settled", "peak", "end"}`` in bytes (``baseline``: RSS at the 0-CRD mark;
    ``end``: growth at the last sample, e.g. after a hold). The peak is taken up to the last mark: a run
    stopped early (its memory guard) measured the set it had profiled, not the step it was in.
    NaN where the run lacks the samples."""
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
    """Least squares through the origin (:func:`crdscale.analysis.lstsq.least_squares`); NaN uncertainty
    when the points leave no degree of freedom."""
    fit = least_squares(x, y)
    return LinearModel([float(c) for c in fit.coef], [[float(v) for v in row] for row in fit.cov], fit.sigma2, fit.dof)


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
    out = []
    for run, group in steps.groupby("run", sort=False):
        last = group.loc[group["installed"].idxmax()]
        train = steps[(steps["run"] != run) | (steps["installed"] < last["installed"])]
        for name, form in forms.items():
            x = np.array([form(n, b) for n, b in zip(train["installed"], train["bytes_per_crd"], strict=True)], float)
            y = train["added"].to_numpy(dtype=float)
            n = train["installed"].to_numpy(dtype=float)
            coef = least_squares(x / n[:, None], y / n).coef
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
