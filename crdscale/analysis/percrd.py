"""Cost per CRD: straight-line fits of memory against the number of CRDs.

For each cause of :mod:`crdscale.analysis.attribution`, the heap in use
(bytes and objects) measured at several CRD counts is fitted by ordinary
least squares, ``value = base + per_crd * crds``, with a confidence interval
from Student's t. The same is done for the total, separately for the two
phases a run may record (``installed``: CRDs Established, not yet served;
``served``: after the step's resources were listed/watched), and for the
RSS and heap-in-use time series.

Pure functions take DataFrames and decoded profiles; reading a run directory
is :func:`crdscale.rundir.read_run`'s (``read_run(path).analysis()`` calls
:func:`analyze`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from crdscale.analysis.attribution import OTHER, RULES, Rule, cause_totals
from crdscale.analysis.pprof.decode import Profile
from crdscale.errors import UsageError

TOTAL = "total"
METRICS = {"inuse_space": "bytes", "inuse_objects": "objects"}
SERIES_METRICS = {
    "process_resident_memory_bytes": "rss_bytes",
    "go_memstats_heap_inuse_bytes": "heap_inuse_bytes",
}


# --------------------------------------------------------------------------
# Least squares with a confidence interval
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope * x`` with ``confidence`` intervals (NaN when n <= 2)."""

    slope: float
    slope_low: float
    slope_high: float
    intercept: float
    intercept_low: float
    intercept_high: float
    r2: float
    n: int
    residuals: np.ndarray = field(repr=False)


def linear_fit(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> LinearFit:
    """Ordinary least squares of ``y`` on ``x`` with a two-sided t confidence interval.

    Needs at least two distinct x values (raises UsageError otherwise);
    with exactly two points the intervals are NaN (no degrees of freedom left).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 2 or np.ptp(x) == 0:
        raise UsageError("a per-CRD fit needs profiles at two or more different CRD counts")
    x_mean, y_mean = x.mean(), y.mean()
    sxx = float(((x - x_mean) ** 2).sum())
    slope = float(((x - x_mean) * (y - y_mean)).sum() / sxx)
    intercept = float(y_mean - slope * x_mean)
    residuals = y - (intercept + slope * x)
    ss_res = float((residuals**2).sum())
    ss_tot = float(((y - y_mean) ** 2).sum())
    # A constant series (a cause absent at every count) has no variance to explain.
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else math.nan
    dof = n - 2
    if dof > 0:
        sigma2 = ss_res / dof
        se_slope = math.sqrt(sigma2 / sxx)
        se_intercept = math.sqrt(sigma2 * (1.0 / n + x_mean**2 / sxx))
        t = t_quantile(0.5 + confidence / 2, dof)
        slope_ci = (slope - t * se_slope, slope + t * se_slope)
        intercept_ci = (intercept - t * se_intercept, intercept + t * se_intercept)
    else:
        slope_ci = intercept_ci = (math.nan, math.nan)
    return LinearFit(slope, *slope_ci, intercept, *intercept_ci, r2, n, residuals)


def t_quantile(p: float, dof: int) -> float:
    """Quantile of Student's t distribution with ``dof`` degrees of freedom (``scipy.stats.t.ppf``)."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    # scipy.special's stdtrit is what stats.t.ppf calls; scipy.stats takes ~1 s of CPU to import
    # (a footprint prediction's largest import), scipy.special ~0.3 s.
    from scipy.special import stdtrit

    return float(stdtrit(dof, p))


# --------------------------------------------------------------------------
# Points: memory by cause at each CRD count
# --------------------------------------------------------------------------


def profile_points(
    profiles: Iterable[tuple[int, str | None, Profile]],
    rules: Sequence[Rule] = RULES,
) -> pd.DataFrame:
    """Heap in use by cause for each profile.

    ``profiles`` yields ``(crds, phase, profile)`` where phase is ``None`` (end
    of step, served), ``"installed"`` or ``"served"``. Returns tidy rows
    ``crds, phase, cause, metric, value``: metric ``bytes`` (inuse_space) or
    ``objects`` (inuse_objects), one row per cause (``other`` included) plus
    a ``total`` row.
    """
    rows = []
    for crds, phase, profile in profiles:
        types = [t for t in METRICS if t in profile.sample_types]
        if not types:
            continue  # not a heap profile
        totals = cause_totals(profile, rules, types)
        for sample_type in types:
            metric = METRICS[sample_type]
            for cause, value in totals[sample_type].items():
                rows.append((crds, phase or "served", cause, metric, int(value)))
            rows.append((crds, phase or "served", TOTAL, metric, int(totals[sample_type].sum())))
    return pd.DataFrame(rows, columns=["crds", "phase", "cause", "metric", "value"])


def phase_points(points: pd.DataFrame, phase: str) -> pd.DataFrame:
    """The points of one phase, plus the baseline (0 CRDs) whatever phase it was taken in."""
    base = points[points["crds"] == 0]
    ours = points[(points["phase"] == phase) & (points["crds"] != 0)]
    if len(base):
        base = base[base["phase"] == base["phase"].iloc[0]].assign(phase=phase)
    return pd.concat([base, ours], ignore_index=True)


def fit_per_crd(points: pd.DataFrame, confidence: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit ``value = base + per_crd * crds`` for every phase, cause and metric.

    ``points`` has columns ``crds, phase, cause, metric, value`` (see
    :func:`profile_points`; the baseline at 0 CRDs is shared by both phases).
    Returns ``(fits, residuals)``:

    - fits: ``phase, metric, cause, per_crd, per_crd_low, per_crd_high, base,
      base_low, base_high, r2, n, share`` where ``per_crd`` is in bytes (or
      objects) per CRD, ``base`` the fixed part at 0 CRDs, ``share`` the
      cause's fraction of the total per-CRD growth. Phases with fewer than
      two distinct CRD counts are left out.
    - residuals: ``phase, metric, cause, crds, value, fitted, residual``.
    """
    fits, resid = [], []
    for phase in [p for p in ("installed", "served") if p in set(points["phase"])]:
        data = phase_points(points, phase)
        if data["crds"].nunique() < 2:
            continue
        for (metric, cause), group in data.groupby(["metric", "cause"], sort=False):
            group = group.sort_values("crds")
            fit = linear_fit(group["crds"], group["value"], confidence)
            fits.append(
                (
                    phase,
                    metric,
                    cause,
                    fit.slope,
                    fit.slope_low,
                    fit.slope_high,
                    fit.intercept,
                    fit.intercept_low,
                    fit.intercept_high,
                    fit.r2,
                    fit.n,
                )
            )
            for crds, value, r in zip(group["crds"], group["value"], fit.residuals):
                resid.append((phase, metric, cause, int(crds), value, value - r, r))
    fits_df = pd.DataFrame(
        fits,
        columns=[
            "phase",
            "metric",
            "cause",
            "per_crd",
            "per_crd_low",
            "per_crd_high",
            "base",
            "base_low",
            "base_high",
            "r2",
            "n",
        ],
    )
    if len(fits_df):
        total = fits_df[fits_df["cause"] == TOTAL].set_index(["phase", "metric"])["per_crd"]
        key = pd.MultiIndex.from_frame(fits_df[["phase", "metric"]])
        denominator = total.reindex(key).to_numpy()
        fits_df["share"] = np.where(denominator != 0, fits_df["per_crd"] / denominator, np.nan)
        # Biggest causes first, total last: the order a reader wants.
        fits_df["_is_total"] = fits_df["cause"] == TOTAL
        fits_df = fits_df.sort_values(
            ["phase", "metric", "_is_total", "per_crd"], ascending=[True, True, True, False], kind="stable"
        ).drop(columns="_is_total")
        fits_df = fits_df.reset_index(drop=True)
    resid_df = pd.DataFrame(resid, columns=["phase", "metric", "cause", "crds", "value", "fitted", "residual"])
    return fits_df, resid_df


def served_counts(points: pd.DataFrame) -> pd.DataFrame:
    """How many CRDs were installed and how many served at each profile point.

    A run serves each step's CRDs after profiling them as ``installed``, so the
    ``installed`` profile at N CRDs still includes the CRDs of earlier steps,
    already served. Returns ``crds, phase, installed, served`` per distinct point.
    """
    marks = points[["crds", "phase"]].drop_duplicates().sort_values(["crds", "phase"])
    served_levels = sorted(set(marks.loc[marks["phase"] == "served", "crds"]) | {0})
    rows = []
    for crds, phase in marks.itertuples(index=False):
        if phase == "served" or crds == 0:
            rows.append((crds, phase, crds, crds))
        else:
            rows.append((crds, phase, crds, max(level for level in served_levels if level < crds)))
    return pd.DataFrame(rows, columns=["crds", "phase", "installed", "served"])


def fit_install_serve(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Split the per-CRD cost into installing a CRD and serving it, for every cause and metric.

    Fits ``value = base + per_installed * installed + per_served * served`` by
    least squares over all heap profiles of a run (both phases; see
    :func:`served_counts`). ``per_installed`` is what an Established CRD costs
    that nobody uses; ``per_served`` is what its first LIST/watch adds (storage,
    etcd client, watch cache). Returns ``metric, cause, per_installed,
    per_installed_low, per_installed_high, per_served, per_served_low,
    per_served_high, base, n`` (bytes or objects per CRD; NaN intervals when the
    points leave no degree of freedom). Empty when the run has only one phase.
    """
    columns = [
        "metric",
        "cause",
        "per_installed",
        "per_installed_low",
        "per_installed_high",
        "per_served",
        "per_served_low",
        "per_served_high",
        "base",
        "n",
    ]
    counts = served_counts(points)
    if counts["phase"].nunique() < 2 or counts[["installed", "served"]].drop_duplicates().shape[0] < 3:
        return pd.DataFrame(columns=columns)
    data = points.merge(counts, on=["crds", "phase"])
    rows = []
    for (metric, cause), group in data.groupby(["metric", "cause"], sort=False):
        x = np.column_stack([np.ones(len(group)), group["installed"], group["served"]]).astype(float)
        y = group["value"].to_numpy(dtype=float)
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        dof = len(y) - 3
        if dof > 0 and np.linalg.matrix_rank(x) == 3:
            sigma2 = float(((y - x @ coef) ** 2).sum()) / dof
            se = np.sqrt(np.diag(sigma2 * np.linalg.inv(x.T @ x)))
            t = t_quantile(0.5 + confidence / 2, dof)
        else:
            se, t = np.full(3, math.nan), math.nan
        rows.append(
            (
                metric,
                cause,
                coef[1],
                coef[1] - t * se[1],
                coef[1] + t * se[1],
                coef[2],
                coef[2] - t * se[2],
                coef[2] + t * se[2],
                coef[0],
                len(y),
            )
        )
    out = pd.DataFrame(rows, columns=columns)
    out["_total"] = out["cause"] == TOTAL
    out = out.sort_values(["metric", "_total", "per_served"], ascending=[True, True, False], kind="stable")
    return out.drop(columns="_total").reset_index(drop=True)


def unattributed_share(fits: pd.DataFrame, phase: str = "served", metric: str = "bytes") -> float:
    """Fraction of the per-CRD growth that no rule explains (``other`` / ``total``)."""
    rows = fits[(fits["phase"] == phase) & (fits["metric"] == metric)].set_index("cause")["per_crd"]
    if TOTAL not in rows or rows[TOTAL] == 0:
        return math.nan
    return float(rows.get(OTHER, 0.0) / rows[TOTAL])


# --------------------------------------------------------------------------
# Time series: RSS and heap in use per CRD
# --------------------------------------------------------------------------


def series_points(
    series: pd.DataFrame, marks: pd.DataFrame, job: str = "kube-apiserver", metrics: dict[str, str] = SERIES_METRICS
) -> pd.DataFrame:
    """The value of each memory series at each mark.

    ``series`` is the tidy metrics table (``timestamp, metric, labels, value``
    and optionally ``job``); ``marks`` has ``timestamp, crds, phase`` (one per
    profile taken). Returns ``crds, phase, metric, value`` with metric
    ``rss_bytes`` / ``heap_inuse_bytes`` (or the names ``metrics`` maps series
    names to): the last sample at or before the mark (series values are summed
    over their labels).
    """
    rows = []
    if series is None or len(series) == 0 or len(marks) == 0:
        return pd.DataFrame(columns=["crds", "phase", "metric", "value"])
    data = series
    if "job" in data.columns:
        data = data[data["job"] == job]
    ts = pd.to_datetime(data["timestamp"], utc=True)
    for name, metric in metrics.items():
        sel = data["metric"] == name
        if not sel.any():
            continue
        one = pd.Series(data.loc[sel, "value"].to_numpy(), index=ts[sel]).groupby(level=0).sum().sort_index()
        for mark in marks.itertuples(index=False):
            before = one[: pd.Timestamp(mark.timestamp)]
            if len(before):
                rows.append((int(mark.crds), _phase(mark.phase), metric, float(before.iloc[-1])))
    return pd.DataFrame(rows, columns=["crds", "phase", "metric", "value"])


def _phase(value) -> str:
    """``installed`` or ``served`` (a profile without a phase is the end of a step: served)."""
    return value if isinstance(value, str) and value else "served"


def fit_series_per_crd(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per-CRD slope of RSS and heap in use: ``phase, metric, per_crd, per_crd_low, per_crd_high, base, r2, n``
    (bytes per CRD; base in bytes)."""
    rows = []
    for phase in [p for p in ("installed", "served") if p in set(points["phase"])]:
        data = phase_points(points, phase)
        for metric, group in data.groupby("metric", sort=False):
            if group["crds"].nunique() < 2:
                continue
            fit = linear_fit(group["crds"], group["value"], confidence)
            rows.append((phase, metric, fit.slope, fit.slope_low, fit.slope_high, fit.intercept, fit.r2, fit.n))
    return pd.DataFrame(rows, columns=["phase", "metric", "per_crd", "per_crd_low", "per_crd_high", "base", "r2", "n"])


def fit_per_property(per_crd: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Bytes per schema property from runs that differ in schema size.

    ``per_crd`` has ``properties`` (properties per CRD), ``cause`` and
    ``per_crd`` (bytes per CRD, e.g. the served-phase fits of several runs).
    Returns ``cause, per_property, per_property_low, per_property_high,
    fixed_per_crd, r2, n``: the slope of bytes per CRD against properties per
    CRD, and what a CRD costs with no property at all.
    """
    rows = []
    for cause, group in per_crd.groupby("cause", sort=False):
        if group["properties"].nunique() < 2:
            continue
        fit = linear_fit(group["properties"], group["per_crd"], confidence)
        rows.append((cause, fit.slope, fit.slope_low, fit.slope_high, fit.intercept, fit.r2, fit.n))
    return pd.DataFrame(
        rows, columns=["cause", "per_property", "per_property_low", "per_property_high", "fixed_per_crd", "r2", "n"]
    )


def properties_per_crd(manifest: dict) -> float | None:
    """Schema properties per CRD of a run, from its manifest (CRD set summary, else the scenario)."""
    crds = manifest.get("crds") or {}
    if crds.get("properties_total") and crds.get("count"):
        return float(crds["properties_total"]) / float(crds["count"])
    scenario_crds = (manifest.get("scenario") or {}).get("crds") or {}
    value = scenario_crds.get("property_count")
    return float(value) if value else None


def per_property_from_runs(
    analyses: Sequence[RunAnalysis], phase: str = "served", metric: str = "bytes", confidence: float = 0.95
) -> pd.DataFrame:
    """Bytes per schema property by cause across runs that differ in schema size
    (see :func:`fit_per_property`); empty when fewer than two sizes were run."""
    rows = []
    for analysis in analyses:
        properties = properties_per_crd(analysis.manifest)
        if properties is None:
            continue
        fits = analysis.fits[(analysis.fits["phase"] == phase) & (analysis.fits["metric"] == metric)]
        for r in fits.itertuples(index=False):
            rows.append((r.cause, properties, r.per_crd))
    table = pd.DataFrame(rows, columns=["cause", "properties", "per_crd"])
    if table["properties"].nunique() < 2:
        return fit_per_property(table.iloc[0:0], confidence)
    return fit_per_property(table, confidence)


# --------------------------------------------------------------------------
# A run directory
# --------------------------------------------------------------------------


@dataclass
class RunAnalysis:
    """Everything ``crdscale analyze`` computes for one run directory."""

    run_dir: Path | None
    manifest: dict
    points: pd.DataFrame
    fits: pd.DataFrame
    residuals: pd.DataFrame
    series_points: pd.DataFrame
    series_fits: pd.DataFrame
    profiles: list[str]
    install_serve: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def phases(self) -> list[str]:
        return sorted(set(self.fits["phase"])) if len(self.fits) else []


def analyze(
    heap_profiles: Iterable[tuple[int, str | None, Profile]],
    *,
    manifest: dict | None = None,
    series: pd.DataFrame | None = None,
    marks: pd.DataFrame | None = None,
    rules: Sequence[Rule] = RULES,
    confidence: float = 0.95,
    run_dir: Path | None = None,
    profile_files: Sequence[str] = (),
) -> RunAnalysis:
    """Fit per-CRD costs of one run: heap profiles by cause, and the memory series.

    ``heap_profiles`` yields ``(crds, phase, profile)``; ``series`` is the tidy
    metrics table and ``marks`` (``timestamp, crds, phase``) says when each
    profile was taken, so the series can be read at the same moments.
    ``run_dir`` and ``profile_files`` only label the result. Raises UsageError
    unless there are heap profiles at two or more CRD counts.
    """
    points = profile_points(heap_profiles, rules)
    if points.empty or points["crds"].nunique() < 2:
        raise UsageError(f"{run_dir or 'run'}: needs heap profiles at two or more CRD counts")
    fits, residuals = fit_per_crd(points, confidence)
    spoints = series_points(
        series, marks if marks is not None else pd.DataFrame(columns=["timestamp", "crds", "phase"])
    )
    sfits = (
        fit_series_per_crd(spoints, confidence)
        if len(spoints)
        else fit_series_per_crd(pd.DataFrame(columns=["crds", "phase", "metric", "value"]))
    )
    return RunAnalysis(
        run_dir,
        manifest or {},
        points,
        fits,
        residuals,
        spoints,
        sfits,
        list(profile_files),
        fit_install_serve(points, confidence),
    )
