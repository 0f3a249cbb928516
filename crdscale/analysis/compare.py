"""Differences between runs, each with its uncertainty from one fit.

Two runs of the same CRD set on different API servers (versions, GOGC, a
patch) differ in what a CRD costs. Fitting each run on its own and eyeballing
two confidence intervals says little; :func:`joint_fit` fits all runs at once
with a run indicator::

    value = b0 + b1 * crds + sum_k (c_k * run_k + d_k * run_k * crds)

where ``run_k`` is 1 for the points of run k (0 for the reference run), so
``d_k`` is run k's per-CRD cost minus the reference's, and its interval comes
from the pooled residual variance of the one fit (Student's t). The slopes
per run are the same as separate fits would give; only the interval of the
difference is new.

Everything here takes DataFrames (points from
:func:`crdscale.analysis.percrd.profile_points` and
:func:`crdscale.analysis.percrd.series_points`, events, series) and returns
DataFrames; reading runs is :mod:`crdscale.report.compare`'s job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from crdscale.analysis.percrd import phase_points, t_quantile
from crdscale.analysis.process import end_values

JOINT_COLUMNS = [
    "run",
    "reference",
    "metric",
    "cause",
    "per_crd_reference",
    "per_crd",
    "difference",
    "difference_low",
    "difference_high",
    "relative",
    "n",
    "dof",
]

# Series compared per CRD and at the end: metric name -> column in series points.
COMPARE_SERIES = {
    "process_resident_memory_bytes": "rss_bytes",
    "go_memstats_heap_inuse_bytes": "heap_inuse_bytes",
    "go_goroutines": "goroutines",
    "process_open_fds": "open_fds",
    "process_cpu_seconds_total": "cpu_seconds",
    "process_threads": "threads",
}
SERIES_UNITS = {
    "rss_bytes": "bytes",
    "heap_inuse_bytes": "bytes",
    "goroutines": "goroutines",
    "open_fds": "fds",
    "cpu_seconds": "CPU seconds",
    "threads": "threads",
}


def stack_runs(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One table from one per run, with a ``run`` column holding the label (dict order kept)."""
    frames = [t.assign(run=label) for label, t in tables.items() if t is not None and len(t)]
    if not frames:
        return pd.DataFrame(columns=["run"])
    return pd.concat(frames, ignore_index=True)


def _joint(x: np.ndarray, y: np.ndarray, run_codes: np.ndarray, n_runs: int, confidence: float):
    """Coefficients of the fully interacted model and the covariance of the slope differences."""
    columns = [np.ones_like(x), x]
    for k in range(1, n_runs):
        indicator = (run_codes == k).astype(float)
        columns += [indicator, indicator * x]
    design = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    dof = len(y) - design.shape[1]
    if dof > 0 and np.linalg.matrix_rank(design) == design.shape[1]:
        sigma2 = float(((y - design @ coef) ** 2).sum()) / dof
        se = np.sqrt(np.diag(sigma2 * np.linalg.inv(design.T @ design)))
        t = t_quantile(0.5 + confidence / 2, dof)
    else:
        se, t = np.full(design.shape[1], math.nan), math.nan
    return coef, se, t, dof


def joint_fit(
    points: pd.DataFrame,
    *,
    reference: str | None = None,
    phase: str = "served",
    by: Sequence[str] = ("metric", "cause"),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per-CRD cost of every run against a reference run, from one fit with a run indicator.

    ``points`` has ``run, crds, phase, value`` plus the ``by`` columns (for
    heap profiles ``metric, cause``; for series points ``metric``): what
    :func:`stack_runs` makes of per-run :func:`~crdscale.analysis.percrd.profile_points`.
    Only ``phase`` points are used, plus each run's baseline at 0 CRDs (as
    :func:`~crdscale.analysis.percrd.fit_per_crd` does). ``reference`` is a run
    label (default: the first run).

    Returns one row per other run and group: ``run, reference, metric, cause,
    per_crd_reference, per_crd`` (the two slopes, e.g. bytes per CRD),
    ``difference`` (``per_crd - per_crd_reference``) with its ``confidence``
    interval ``difference_low``/``difference_high`` (NaN when no degree of
    freedom is left), ``relative`` (difference / reference slope; NaN when the
    reference slope is 0 up to rounding), ``n`` points and ``dof``. A run whose group has
    fewer than two CRD counts is left out of that group's fit.
    """
    runs = list(dict.fromkeys(points["run"])) if len(points) else []
    if reference is None and runs:
        reference = runs[0]
    if runs and reference not in runs:
        raise ValueError(f"reference run {reference!r} is not among {runs}")
    by = list(by)
    per_run = [phase_points(points[points["run"] == r], phase) for r in runs]
    data = pd.concat(per_run, ignore_index=True) if per_run else points.iloc[0:0]
    rows = []
    for key, group in data.groupby(by, sort=False) if len(data) else []:
        key = key if isinstance(key, tuple) else (key,)
        usable = [r for r in runs if group.loc[group["run"] == r, "crds"].nunique() >= 2]
        if reference not in usable:
            continue
        order = [reference] + [r for r in usable if r != reference]
        group = group[group["run"].isin(order)]
        codes = group["run"].map({r: i for i, r in enumerate(order)}).to_numpy()
        x = group["crds"].to_numpy(dtype=float)
        y = group["value"].to_numpy(dtype=float)
        coef, se, t, dof = _joint(x, y, codes, len(order), confidence)
        labels = dict(zip(by, key))
        # A slope this small next to the data is rounding noise of a flat line: no relative change.
        negligible = 1e-9 * float(np.abs(y).max()) / float(np.ptp(x))
        for k, run in enumerate(order[1:], start=1):
            d, d_se = coef[2 * k + 1], se[2 * k + 1]
            slope_ref = coef[1]
            rows.append(
                {
                    "run": run,
                    "reference": reference,
                    "metric": labels.get("metric", ""),
                    "cause": labels.get("cause", ""),
                    "per_crd_reference": slope_ref,
                    "per_crd": slope_ref + d,
                    "difference": d,
                    "difference_low": d - t * d_se,
                    "difference_high": d + t * d_se,
                    "relative": d / slope_ref if abs(slope_ref) > negligible else math.nan,
                    "n": len(y),
                    "dof": dof,
                }
            )
    return pd.DataFrame(rows, columns=JOINT_COLUMNS)


# --------------------------------------------------------------------------
# Series: at the end, peak, per CRD
# --------------------------------------------------------------------------


def series_end_values(
    series: pd.DataFrame, job: str | None = None, metrics: Mapping[str, str] = COMPARE_SERIES
) -> pd.DataFrame:
    """Each compared series at the start, at the end and at its peak: ``metric, first, last, peak,
    samples, source`` (metric names as in ``metrics``' values; values summed over labels, in the
    series' own units). Process figures (RSS, CPU, fds, threads) come from the most complete
    record the run holds (:func:`crdscale.analysis.process.process_source`), named in ``source``;
    ``job`` forces one job for every metric."""
    if job is not None and series is not None and len(series) and "job" in series.columns:
        series = series[series["job"] == job]
    return end_values(series, metrics)


def establish_times(events: pd.DataFrame) -> pd.DataFrame:
    """How long each step's CRDs took to become Established: ``step, crds, seconds, per_crd_s``
    from the ``established`` events (``seconds`` after the step's CRDs were created)."""
    columns = ["step", "crds", "seconds", "per_crd_s"]
    if events is None or not len(events) or "kind" not in events:
        return pd.DataFrame(columns=columns)
    sel = events[events["kind"] == "established"]
    rows = []
    for e in sel.to_dict("records"):
        n = e.get("established") or 0
        seconds = float(e.get("duration_s") or math.nan)
        rows.append((int(e.get("step") or 0), int(n), seconds, seconds / n if n else math.nan))
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------
# CRD sets and provenance
# --------------------------------------------------------------------------


def crd_set_warnings(crd_sets: Mapping[str, dict | None]) -> list[str]:
    """One sentence per run whose CRD set differs from the first run's (by sha256), or is unknown.

    ``crd_sets`` maps run label -> the run's CRD set summary (``sha256``,
    ``count``...), as stored in the manifest; empty list when they all match.
    """
    items = list(crd_sets.items())
    if not items:
        return []
    first_label, first = items[0]
    first_hash = (first or {}).get("sha256")
    warnings = []
    if not first_hash:
        warnings.append(f"{first_label}: CRD set unknown (no sha256 in the manifest); cannot check the runs compare")
    for label, summary in items[1:]:
        sha = (summary or {}).get("sha256")
        if not sha:
            warnings.append(f"{label}: CRD set unknown (no sha256 in the manifest)")
        elif first_hash and sha != first_hash:
            warnings.append(
                f"{label}: different CRD set than {first_label} ({(summary or {}).get('count', '?')} "
                f"vs {(first or {}).get('count', '?')} CRDs, sha256 {sha[:12]} vs {first_hash[:12]}): "
                f"per-CRD differences mix the server with the CRDs"
            )
    return warnings


def per_crd_profile_diff(table: pd.DataFrame, crds: float) -> pd.DataFrame:
    """A diff table (:func:`crdscale.analysis.pprof.diff`) with ``flat``/``cum`` also per CRD:
    adds ``flat_per_crd`` and ``cum_per_crd`` (the table's unit, e.g. bytes, per CRD)."""
    out = table.copy()
    out["flat_per_crd"] = out["flat"] / crds if crds else math.nan
    out["cum_per_crd"] = out["cum"] / crds if crds else math.nan
    out.attrs.update(table.attrs, crds=crds)
    return out
