"""Differences between runs, each with the uncertainty of the difference itself.

Two runs of the same CRD set on different API servers (versions, GOGC, a
patch) differ in what a CRD costs. :func:`per_crd_differences` fits each run
on its own (:func:`crdscale.analysis.percrd.fit_per_crd`'s growth over step
increments) and gives each difference to the reference run an interval from
both runs' own variances, with Welch–Satterthwaite degrees of freedom
(:func:`crdscale.analysis.intervals.difference`). One variance pooled across
runs would lend a quiet run's degrees of freedom to a noisy one. When a
configuration was repeated (a matrix's ``repeat``), its runs are the unit of
replication: its per-CRD cost is the mean of the repeats and its interval
comes from their spread.

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

from crdscale.analysis.intervals import Estimate, difference, growth_fit, replicate_mean
from crdscale.analysis.percrd import heap_resolution, phase_points
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


def _run_estimate(group: pd.DataFrame, confidence: float) -> Estimate | None:
    """One run's per-CRD estimate of a group (None with fewer than two CRD counts)."""
    if group["crds"].nunique() < 2:
        return None
    group = group.sort_values("crds", kind="stable")
    metric = str(group["metric"].iloc[0]) if "metric" in group else ""
    return growth_fit(group["crds"], group["value"], confidence, resolution=heap_resolution(metric, group)).estimate


def per_crd_differences(
    points: pd.DataFrame,
    *,
    reference: str | None = None,
    phase: str = "served",
    by: Sequence[str] = ("metric", "cause"),
    confidence: float = 0.95,
    replicates: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Per-CRD cost of every run (or configuration) against a reference, with the difference's interval.

    ``points`` has ``run, crds, phase, value`` plus the ``by`` columns (for
    heap profiles ``metric, cause`` and ``sampling_var``; for series points
    ``metric``): what :func:`stack_runs` makes of per-run
    :func:`~crdscale.analysis.percrd.profile_points`. Only ``phase`` points
    are used, plus each run's baseline at 0 CRDs. ``replicates`` maps run
    label -> configuration label: runs of one configuration are pooled as
    repeats (mean of their per-CRD costs, interval from their spread; a
    single run keeps its own interval). ``reference`` is a run label, or a
    configuration label with ``replicates`` (default: the first).

    Returns one row per other run (configuration) and group: ``run,
    reference, metric, cause, per_crd_reference, per_crd`` (the two
    per-CRD costs, e.g. bytes per CRD), ``difference`` (``per_crd -
    per_crd_reference``) with its ``confidence`` interval
    ``difference_low``/``difference_high`` (Welch; NaN when a side has no
    spread to estimate), ``relative`` (difference / reference; NaN when the
    reference is 0 up to rounding), ``n`` points and ``dof``. A run with fewer
    than two CRD counts in a group is left out of that group.
    """
    runs = list(dict.fromkeys(points["run"])) if len(points) else []
    config_of = {r: (replicates or {}).get(r, r) for r in runs}
    configs = list(dict.fromkeys(config_of[r] for r in runs))
    if reference is None and configs:
        reference = configs[0]
    if configs and reference not in configs:
        raise ValueError(f"reference run {reference!r} is not among {configs}")
    by = list(by)
    per_run = [phase_points(points[points["run"] == r], phase) for r in runs]
    data = pd.concat(per_run, ignore_index=True) if per_run else points.iloc[0:0]
    rows = []
    for key, group in data.groupby(by, sort=False) if len(data) else []:
        key = key if isinstance(key, tuple) else (key,)
        labels = dict(zip(by, key))
        estimates: dict[str, list[Estimate]] = {}
        for run in runs:
            est = _run_estimate(group[group["run"] == run], confidence)
            if est is not None:
                estimates.setdefault(config_of[run], []).append(est)
        if reference not in estimates:
            continue
        combined = {c: _combine(e, confidence) for c, e in estimates.items()}
        ref = combined[reference]
        scale = float(np.abs(group["value"]).max()) / max(float(np.ptp(group["crds"])), 1.0)
        # A per-CRD cost this small next to the data is rounding noise of a flat line: no relative change.
        negligible = 1e-9 * scale
        for config in [c for c in configs if c != reference and c in combined]:
            d = difference(combined[config], ref, confidence)
            n = int(group["run"].map(config_of).isin([config, reference]).sum())
            rows.append(
                {
                    "run": config,
                    "reference": reference,
                    "metric": labels.get("metric", ""),
                    "cause": labels.get("cause", ""),
                    "per_crd_reference": ref.value,
                    "per_crd": combined[config].value,
                    "difference": d.value,
                    "difference_low": d.low,
                    "difference_high": d.high,
                    "relative": d.value / ref.value if abs(ref.value) > negligible else math.nan,
                    "n": n,
                    "dof": d.dof,
                }
            )
    return pd.DataFrame(rows, columns=JOINT_COLUMNS)


def _combine(estimates: list[Estimate], confidence: float) -> Estimate:
    """A configuration's estimate: its one run's, or the mean of its repeats with their spread."""
    if len(estimates) == 1:
        return estimates[0]
    return replicate_mean([e.value for e in estimates], confidence)


def replicate_spread(per_crd: pd.DataFrame, replicates: Mapping[str, str], confidence: float = 0.95) -> pd.DataFrame:
    """Repeated runs of one configuration: the spread of their per-CRD costs against one run's interval.

    ``per_crd`` is :func:`stack_runs` of each run's
    :func:`~crdscale.analysis.percrd.fit_per_crd` fits (``run, phase, metric,
    cause, per_crd, per_crd_low, per_crd_high``); ``replicates`` maps run ->
    configuration. Returns per configuration, phase, metric and cause:
    ``repeats``, ``mean``, ``between_sd`` (standard deviation of the runs'
    per-CRD costs), ``within_half_width`` (median half width of one run's
    interval), ``sd_ratio`` (``between_sd`` over the median standard error
    one run claims, ``per_crd_se``: about 1 when single-run intervals are
    right, above when runs vary more than they say), ``low``/``high`` (the
    mean's interval from the between-run spread) and ``repeats_for_10pct``
    (repeats that would give a ±10 % interval of the mean at the observed spread).
    """
    from crdscale.analysis.intervals import repeats_for_half_width

    columns = [
        "configuration", "phase", "metric", "cause", "repeats", "mean", "between_sd",
        "within_half_width", "sd_ratio", "low", "high", "repeats_for_10pct",
    ]  # fmt: skip
    if per_crd is None or not len(per_crd):
        return pd.DataFrame(columns=columns)
    data = per_crd.assign(configuration=per_crd["run"].map(lambda r: replicates.get(r, r)))
    rows = []
    for (config, phase, metric, cause), group in data.groupby(
        ["configuration", "phase", "metric", "cause"], sort=False
    ):
        if len(group) < 2:
            continue
        est = replicate_mean(group["per_crd"], confidence)
        sd = float(group["per_crd"].std(ddof=1))
        half = float(((group["per_crd_high"] - group["per_crd_low"]) / 2).median())
        within_se = float(group["per_crd_se"].median()) if "per_crd_se" in group else math.nan
        ratio = sd / within_se if within_se > 0 else math.nan
        target = 0.1 * abs(est.value)
        needed = repeats_for_half_width(sd, target, confidence) if target > 0 else math.nan
        rows.append((config, phase, metric, cause, len(group), est.value, sd, half, ratio, est.low, est.high, needed))
    return pd.DataFrame(rows, columns=columns)


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


def per_crd_profile_diff(
    table: pd.DataFrame, growth: pd.DataFrame, reference_growth: pd.DataFrame, crds: float, reference_crds: float
) -> pd.DataFrame:
    """A diff table (:func:`crdscale.analysis.pprof.diff` of the two last profiles) with per-CRD columns
    that agree with the fits.

    ``growth`` and ``reference_growth`` are each run's own diff of its last
    served profile against its first (``top`` tables by ``name``), over
    ``crds`` and ``reference_crds`` CRDs of growth. ``flat_per_crd`` and
    ``cum_per_crd`` are the difference of the two growths per CRD (the
    table's unit, e.g. bytes, per CRD): the runs' different baselines at 0
    CRDs cancel, as they do in :func:`per_crd_differences`. Functions present
    in only one table count 0 in the other; functions whose growth differs but
    whose last values are equal are appended with ``flat``/``cum`` 0.
    """

    def per_crd(frame: pd.DataFrame, n: float, column: str) -> pd.Series:
        if not n or frame is None or not len(frame):
            return pd.Series(dtype=float)
        return frame.groupby("name")[column].sum() / n

    deltas = {}
    for column in ("flat", "cum"):
        ours = per_crd(growth, crds, column)
        theirs = per_crd(reference_growth, reference_crds, column)
        deltas[column] = ours.sub(theirs, fill_value=0.0)
    # A function can grow differently in the two runs and still end equal in their last profiles
    # (absent from ``table``): it gets a row of its own, so the per-CRD columns add up to the fits.
    missing = sorted(set(deltas["flat"].index[deltas["flat"] != 0]) - set(table["name"]))
    out = pd.concat([table, pd.DataFrame({"name": missing, "flat": 0, "cum": 0})], ignore_index=True)
    if missing:
        out[["flat", "cum"]] = out[["flat", "cum"]].astype(table["flat"].dtype if len(table) else np.int64)
    for column in ("flat", "cum"):
        out[f"{column}_per_crd"] = out["name"].map(deltas[column]).fillna(0.0).to_numpy(dtype=float)
    out.attrs.update(table.attrs, crds=crds, reference_crds=reference_crds)
    return out
