"""Cost per CRD: memory against the number of CRDs, with intervals that hold.

For each cause of :mod:`crdscale.analysis.attribution`, the heap in use
(bytes and objects) measured at several CRD counts gives a per-CRD cost:
the growth from the run's first profile to its last per CRD, with an
interval from the step increments (the error model of
:mod:`crdscale.analysis.intervals`: Go's heap sampling makes the profiles'
errors a random walk, so the increments, not the points, are independent).
The same is done for the total, separately for the two phases a run may
record (``installed``: CRDs Established, not yet served; ``served``: after
the step's resources were listed/watched), for the split between installing
and serving (paired increments), and for the RSS and heap-in-use series.

Pure functions take DataFrames and decoded profiles; reading a run directory
is :func:`crdscale.rundir.read_run`'s, and :func:`crdscale.analysis.run.analyze` puts these
fits together for one run (``analyze_run(read_run(path))`` calls it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from crdscale.analysis.attribution import OTHER, RULES, Rule, sums_by_cause
from crdscale.analysis.intervals import (
    FEW_INCREMENTS,
    GO_HEAP_SAMPLING_RATE,
    Estimate,
    Growths,
    growth_fit,
    heap_sampling_variance,
    increments_batch,
    t_quantile,
)
from crdscale.analysis.lstsq import least_squares
from crdscale.analysis.pprof.decode import Profile
from crdscale.analysis.targets import TOTAL
from crdscale.errors import UsageError
from crdscale.rundir.layout import PHASES
from crdscale.rundir.reader import status_warning  # noqa: F401 (its home was here: analysis.run and callers import it)

METRICS = {"inuse_space": "bytes", "inuse_objects": "objects"}
SERIES_METRICS = {
    "process_resident_memory_bytes": "rss_bytes",
    "go_memstats_heap_inuse_bytes": "heap_inuse_bytes",
}


# --------------------------------------------------------------------------
# The fits' error model lives in crdscale.analysis.intervals (growth over step
# increments, Welch differences); linear_fit stays for regressions across
# independent runs (bytes per schema property), where ordinary least squares is right.
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

    For points with independent errors only (e.g. one per-CRD estimate per
    run); the steps of one run are not (see :mod:`crdscale.analysis.intervals`).
    Needs at least two distinct x values (raises UsageError otherwise);
    with exactly two points the intervals are NaN (no degrees of freedom left).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 2 or np.ptp(x) == 0:
        raise UsageError("a per-CRD fit needs profiles at two or more different CRD counts")
    fit = least_squares(np.column_stack([np.ones(n), x]), y)
    intercept, slope = (float(c) for c in fit.coef)
    residuals = fit.residuals
    ss_res = float((residuals**2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    # A constant series (a cause absent at every count) has no variance to explain.
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else math.nan
    if fit.dof > 0:
        se_intercept, se_slope = (math.sqrt(v) for v in np.diag(fit.cov))
        t = t_quantile(0.5 + confidence / 2, fit.dof)
        slope_ci = (slope - t * se_slope, slope + t * se_slope)
        intercept_ci = (intercept - t * se_intercept, intercept + t * se_intercept)
    else:
        slope_ci = intercept_ci = (math.nan, math.nan)
    return LinearFit(slope, *slope_ci, intercept, *intercept_ci, r2, n, residuals)


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
    ``crds, phase, cause, metric, value, sampling_var``: metric ``bytes``
    (inuse_space) or ``objects`` (inuse_objects), one row per cause (``other``
    included) plus a ``total`` row; ``sampling_var`` is the variance Go's heap
    sampling alone gives that value (:func:`~crdscale.analysis.intervals.heap_sampling_variance`).
    """
    rows = []
    for crds, phase, profile in profiles:
        problem = heap_profile_problem(profile)
        if problem:  # callers set such profiles aside, saying why (see SkippedProfile): never dropped silently
            raise UsageError(f"{profile.source or f'the profile at {crds} CRDs'}: {problem}")
        types = [t for t in METRICS if t in profile.sample_types]
        columns = profile.sample_columns
        values = profile.value_matrix()[:, [columns.index(t) for t in types]].astype(float)
        variances = _sampling_variances(profile, types)
        # One attribution pass for the values and their sampling variances (NaN: not derivable).
        causes, sums = sums_by_cause(profile, np.column_stack([values, np.nan_to_num(variances)]), rules)
        for i, sample_type in enumerate(types):
            metric = METRICS[sample_type]
            known = not np.isnan(variances[:, i]).any()
            cause_values, cause_vars = sums[:, i], sums[:, len(types) + i]
            for cause, value, var in zip(causes, cause_values, cause_vars):
                rows.append((crds, phase or "served", cause, metric, int(round(value)), var if known else math.nan))
            total_var = float(cause_vars.sum()) if known else math.nan
            rows.append((crds, phase or "served", TOTAL, metric, int(round(cause_values.sum())), total_var))
    return pd.DataFrame(rows, columns=["crds", "phase", "cause", "metric", "value", "sampling_var"])


def _sampling_variances(profile: Profile, types: Sequence[str]) -> np.ndarray:
    """Heap sampling variance of each sample's value, one column per sample type of ``types``
    (NaN columns unless the profile has both ``inuse_space`` and ``inuse_objects``)."""
    out = np.full((profile.n_samples, len(types)), np.nan)
    if "inuse_space" not in profile.sample_types or "inuse_objects" not in profile.sample_types:
        return out
    rate = profile.meta.period if profile.meta.period > 0 else GO_HEAP_SAMPLING_RATE
    var_space, var_objects = heap_sampling_variance(
        profile.values("inuse_space"), profile.values("inuse_objects"), rate
    )
    for i, sample_type in enumerate(types):
        out[:, i] = var_space if sample_type == "inuse_space" else var_objects
    return out


def heap_profile_problem(profile: Profile) -> str | None:
    """Why ``profile`` cannot be a point of a heap fit (``None`` when it can): it holds no
    ``inuse_space``/``inuse_objects`` samples (a CPU or goroutine profile under a heap name)."""
    if any(t in profile.sample_types for t in METRICS):
        return None
    kind = profile.meta.kind
    types = ", ".join(profile.sample_types) or "none"
    what = f"a {kind} profile" if kind != "other" else "not a heap profile"
    return f"{what} (sample types {types}), no heap in use to fit"


@dataclass(frozen=True)
class SkippedProfile:
    """A profile a run holds that its fits leave out, and why (stated wherever the fits are shown)."""

    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


def phase_points(points: pd.DataFrame, phase: str) -> pd.DataFrame:
    """The points of one phase, plus the baseline (0 CRDs): the phase's own when the run took one
    (the openapiv2 phase: after a GET of /openapi/v2 at 0 CRDs), else whatever phase it was taken in."""
    base = points[points["crds"] == 0]
    ours = points[(points["phase"] == phase) & (points["crds"] != 0)]
    if len(base):
        own = base["phase"] == phase
        base = base[own if own.any() else base["phase"] == base["phase"].iloc[0]].assign(phase=phase)
    return pd.concat([base, ours], ignore_index=True)


def chain_points(points: pd.DataFrame, phase: str) -> pd.DataFrame:
    """:func:`phase_points` with an ``installed`` column (CRDs installed at each point), and for the served
    phase the installed profiles between the served ones too, at the CRDs then served.

    A served per-CRD fit is the growth from the first served profile to the last; the installed profiles
    add nothing to it but twice the increments to tell the noise of one profile from the noise that
    persists (:func:`~crdscale.analysis.intervals.growth_fit`'s ``installed``).
    """
    data = phase_points(points, phase)
    data = data.assign(installed=data["crds"])
    if phase != "served" or "installed" not in set(points["phase"]):
        return data
    counts = served_counts(points)
    between = points[(points["phase"] == "installed") & (points["crds"] != 0)].merge(counts, on=["crds", "phase"])
    between = between.assign(crds=between["served"]).drop(columns="served")
    return pd.concat([data, between[data.columns]], ignore_index=True)


FEW_INCREMENTS_WARNING = (
    f"fewer than {FEW_INCREMENTS} steps: the intervals of causes carried by a heap sample or two per step "
    "(goroutines, zap counters at a few CRDs) are unreliable; run more steps for them"
)

FIT_COLUMNS = [
    "phase", "metric", "cause", "per_crd", "per_crd_low", "per_crd_high", "per_crd_se", "dof",
    "sampling_se", "base", "r2", "n",
]  # fmt: skip


def sampling_se(group: pd.DataFrame) -> float:
    """Standard error per CRD that heap sampling alone gives a group's growth (0 without the column).

    Sampled objects that stay live carry their error from profile to profile,
    so the growth's sampling variance is the last profile's minus the first's.
    The interval's floor (:func:`~crdscale.analysis.intervals.increments_batch`
    applies it, with ~3 samples' worth more for causes of a few samples): no
    interval is narrower than ``1.96 × sampling_se``.
    """
    if "sampling_var" not in group or not group["sampling_var"].notna().all() or len(group) < 2:
        return 0.0
    first, last = group.iloc[0], group.iloc[-1]
    span = float(last["crds"] - first["crds"])
    growth_var = float(last["sampling_var"] - first["sampling_var"])
    if span <= 0 or growth_var <= 0:
        return 0.0
    return math.sqrt(growth_var) / span


def heap_resolution(metric: str, group: pd.DataFrame) -> float:
    """The least growth one heap sample stands for: Go's sampling rate for bytes of heap profiles, else 0."""
    return float(GO_HEAP_SAMPLING_RATE) if metric == "bytes" and "sampling_var" in group else 0.0


def fit_per_crd(
    points: pd.DataFrame, confidence: float = 0.95, *, served: dict | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-CRD cost for every phase, cause and metric, from the increments between profiles.

    ``points`` has columns ``crds, phase, cause, metric, value`` (and
    ``sampling_var``; see :func:`profile_points`; the baseline at 0 CRDs is
    shared by both phases). Returns ``(fits, residuals)``:

    - fits: ``phase, metric, cause, per_crd, per_crd_low, per_crd_high,
      per_crd_se, dof, sampling_se, base, r2, n, share`` where ``per_crd`` is
      the growth from the phase's first profile to its last per CRD, in bytes
      (or objects); its interval is Student's t on ``dof`` degrees of freedom
      from the step increments and their sampling variance (when no heap sample changed at
      all, the bounds no sample allows instead); ``sampling_se`` is what heap
      sampling alone gives (the floor, see :func:`sampling_se`); ``base`` is the
      line's value at 0 CRDs, ``share`` the cause's fraction of the total
      per-CRD growth. Phases with fewer than two distinct CRD counts are left out.
    - residuals: ``phase, metric, cause, crds, value, fitted, residual``
      around the line through the first and last profile.

    ``served``: the served phase's chain fits when the caller has them (:func:`served_chain_fits`, which
    :func:`fit_install_serve` takes too), so they are made once.
    """
    fits, resid = [], []
    for phase in [p for p in PHASES if p in set(points["phase"])]:
        data = chain_points(points, phase)
        if data["crds"].nunique() < 2:
            continue
        phase_fits = served if phase == "served" and served is not None else chain_fits(data, confidence)
        for (metric, cause), fit in phase_fits.items():
            group = data[(data["metric"] == metric) & (data["cause"] == cause)]
            e = fit.estimate
            line = group[group["installed"] == group["crds"]].sort_values("crds", kind="stable")
            fits.append(
                (phase, metric, cause, e.value, e.low, e.high, e.se, e.dof, sampling_se(line), fit.base, fit.r2, fit.n)
            )
            for crds, value, r in zip(line["crds"], line["value"], fit.residuals):
                resid.append((phase, metric, cause, int(crds), value, value - r, r))
    fits_df = pd.DataFrame(fits, columns=FIT_COLUMNS)
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
    else:
        fits_df["share"] = []
    resid_df = pd.DataFrame(resid, columns=["phase", "metric", "cause", "crds", "value", "fitted", "residual"])
    return fits_df, resid_df


def chain_fits(data: pd.DataFrame, confidence: float = 0.95, by: Sequence[str] = ("metric", "cause")) -> dict:
    """The growth fit (:func:`~crdscale.analysis.intervals.growth_fit`) of every group of one run's
    :func:`chain_points`, keyed by the group's ``by`` values (a tuple), in the groups' order; groups with
    fewer than two CRD counts are left out.

    A heap profile's total (cause ``total``) is fitted after its causes: their samplings are independent, so
    its known sampling covariance is the sum of theirs, each read as carried over or rebuilt at every profile
    as its own fit read it (``growth_fit``'s ``parts``). :func:`fit_per_crd` and ``crdscale compare``
    (:func:`crdscale.analysis.differences.per_crd_differences`) take their fits from here.
    """
    by = list(by)
    groups = {}
    for key, group in data.groupby(by, sort=False) if len(data) else []:
        groups[key if isinstance(key, tuple) else (key,)] = group.sort_values(["installed", "crds"], kind="stable")

    def is_total(key: tuple) -> bool:
        return "cause" in by and key[by.index("cause")] == TOTAL

    fits = {}
    for key in sorted(groups, key=is_total):  # stable: every total after the causes it adds up
        group = groups[key]
        if group["crds"].nunique() < 2:
            continue
        metric = str(group["metric"].iloc[0]) if "metric" in group else ""
        fits[key] = growth_fit(
            group["crds"],
            group["value"],
            confidence,
            resolution=heap_resolution(metric, group),
            sampling_var=group["sampling_var"] if "sampling_var" in group else None,
            installed=group["installed"],
            parts=_sampling_parts(groups, fits, key, by) if is_total(key) else None,
        )
    return {key: fits[key] for key in groups if key in fits}


def served_chain_fits(points: pd.DataFrame, confidence: float = 0.95) -> dict:
    """The served phase's :func:`chain_fits` (``{}`` without two served CRD counts): what :func:`fit_per_crd`
    fits its served phase from and where :func:`fit_install_serve` finds each cause's kink."""
    data = chain_points(points, "served")
    return chain_fits(data, confidence) if data["crds"].nunique() >= 2 else {}


def _sampling_parts(groups: dict, fits: dict, total: tuple, by: list) -> list | None:
    """A total's causes as :func:`~crdscale.analysis.intervals.growth_fit`'s ``parts``: each cause's sampling
    variance at the total's points (0 where it holds nothing) and the share of its own fit read as rebuilt."""
    points = groups[total]
    if "sampling_var" not in points:
        return None
    at = pd.MultiIndex.from_frame(points[["installed", "crds"]])
    cause = by.index("cause")

    def rest(key: tuple) -> tuple:  # a group's key but its cause (its metric)
        return key[:cause] + key[cause + 1 :]

    parts = []
    for key, group in groups.items():
        if key[cause] == TOTAL or key not in fits or rest(key) != rest(total):
            continue
        var = group.groupby(["installed", "crds"])["sampling_var"].mean().reindex(at, fill_value=0.0)
        fit = fits[key]
        parts.append((var.to_numpy(dtype=float), fit.rebuilt, fit.excess, fit.excess_var))
    return parts or None


def served_counts(points: pd.DataFrame) -> pd.DataFrame:
    """How many CRDs were installed and how many served at each profile point.

    A run serves each step's CRDs after profiling them as ``installed``, so the
    ``installed`` profile at N CRDs still includes the CRDs of earlier steps,
    already served. Returns ``crds, phase, installed, served`` per distinct point.
    """
    # The openapiv2 phase is a state after serving, not a step of installing.
    points = points[points["phase"].isin(["installed", "served"])]
    marks = points[["crds", "phase"]].drop_duplicates().sort_values(["crds", "phase"])
    served_levels = sorted(set(marks.loc[marks["phase"] == "served", "crds"]) | {0})
    rows = []
    for crds, phase in marks.itertuples(index=False):
        if phase == "served" or crds == 0:
            rows.append((crds, phase, crds, crds))
        else:
            rows.append((crds, phase, crds, max(level for level in served_levels if level < crds)))
    return pd.DataFrame(rows, columns=["crds", "phase", "installed", "served"])


INSTALL_SERVE_COLUMNS = [
    "metric", "cause", "per_installed", "per_installed_low", "per_installed_high",
    "per_served", "per_served_low", "per_served_high", "base", "n",
]  # fmt: skip


def install_serve_increments(points: pd.DataFrame) -> pd.DataFrame:
    """The run's profiles as a chain of paired increments: installing a step's CRDs, then serving them.

    Orders a group's points by (installed, served) CRDs (see
    :func:`served_counts`) and returns, per ``metric, cause``, each increment
    ``kind`` (``install`` or ``serve``), ``crds`` (how many CRDs it
    installed or served), ``delta`` (value after minus before) and ``delta_var``
    (what it added to the heap sampling variance; NaN without it). The
    installed profile at N CRDs and the served one at N minus a step are
    taken moments apart in one process, so only their difference says what
    installing cost; an increment that both installs and serves (a step
    without its installed profile) cannot be split and is left out.
    """
    columns = ["metric", "cause", "kind", "crds", "delta", "delta_var"]
    counts = served_counts(points)
    if counts["phase"].nunique() < 2:
        return pd.DataFrame(columns=columns)
    data = points.merge(counts, on=["crds", "phase"]).sort_values(["installed", "served"], kind="stable")
    rows = []
    for (metric, cause), group in data.groupby(["metric", "cause"], sort=False):
        installed = group["installed"].to_numpy()
        served = group["served"].to_numpy()
        value = group["value"].to_numpy(dtype=float)
        var = group["sampling_var"].to_numpy(dtype=float) if "sampling_var" in group else np.full(len(group), np.nan)
        for k in range(1, len(group)):
            d_installed, d_served = installed[k] - installed[k - 1], served[k] - served[k - 1]
            delta, delta_var = value[k] - value[k - 1], var[k] - var[k - 1]
            if d_installed > 0 and d_served == 0:
                rows.append((metric, cause, "install", int(d_installed), delta, delta_var))
            elif d_served > 0 and d_installed == 0:
                rows.append((metric, cause, "serve", int(d_served), delta, delta_var))
    return pd.DataFrame(rows, columns=columns)


def _split_parts(fitted: dict, metric: str, kind: str, total: pd.DataFrame) -> list | None:
    """A total's causes for one kind of the install/serve split, as :func:`~crdscale.analysis.intervals.increments_batch`'s
    ``parts``: each cause's sampling variances and its fit's noise beyond them (``excess``); None when a cause's
    increments are not the total's (a cause missing from a profile)."""
    parts = []
    for (fit_metric, cause, fit_kind), (sel, fit) in fitted.items():
        if fit_metric != metric or fit_kind != kind or cause == TOTAL:
            continue
        if not np.array_equal(sel["crds"].to_numpy(), total["crds"].to_numpy()) or sel["delta_var"].isna().any():
            return None
        var = sel["delta_var"].to_numpy(dtype=float)[None, :]
        parts.append((var, np.zeros(1), np.zeros(1), fit.excess, fit.excess_var))
    return parts or None


def fit_install_serve(points: pd.DataFrame, confidence: float = 0.95, *, served: dict | None = None) -> pd.DataFrame:
    """Split the per-CRD cost into installing a CRD and serving it, for every cause and metric.

    From paired increments (:func:`install_serve_increments`): ``per_installed``
    is what the install increments add per CRD installed, what an Established
    CRD costs that nobody uses; ``per_served`` what the serve increments add
    per CRD served (storage, etcd client, watch cache). Each has a t interval
    from its own increments' spread (:func:`~crdscale.analysis.intervals.increments_batch`):
    increments of one kind share no profile, so the noise of one profile counts
    in each of them, as it does in their sum; around the kink the cause's served chain
    found, where it found one (a cause that starts late: ``increments_batch``'s
    ``kink``). A total's kind is fitted after its
    causes', its noise beyond the sampling theirs added up (as ``growth_fit``'s
    ``parts``: a total's 4 increments of a kind leave its own spread t on 3 degrees
    of freedom, its causes' together many more).
    Returns ``metric, cause, per_installed, per_installed_low,
    per_installed_high, per_served, per_served_low, per_served_high, base, n``
    (bytes or objects per CRD; ``n`` increments of each kind; NaN intervals
    with a single increment of a kind). Empty when the run has only one phase.
    """
    increments = install_serve_increments(points)
    if increments.empty:
        return pd.DataFrame(columns=INSTALL_SERVE_COLUMNS)
    base = points[points["crds"] == 0].drop_duplicates(["metric", "cause"]).set_index(["metric", "cause"])["value"]
    # Where the served chain (twice the increments, through the same profiles) found a cost per CRD that changes
    # at a step, each kind's noise is estimated around that kink too (where each step gave one increment of each).
    chains = served if served is not None else served_chain_fits(points, confidence)
    bends = {key: fit.bend for key, fit in chains.items()}
    steps = {key: fit.increments for key, fit in chains.items()}
    rows = []
    fitted: dict[tuple[str, str, str], tuple[pd.DataFrame, Growths]] = {}
    groups = list(increments.groupby(["metric", "cause"], sort=False))
    for (metric, cause), group in sorted(groups, key=lambda g: g[0][1] == TOTAL):  # totals after their causes
        parts = {}
        start = float(base.get((metric, cause), 0.0))
        for kind in ("install", "serve"):
            sel = group[group["kind"] == kind]
            if len(sel):
                known = sel["delta_var"] if sel["delta_var"].notna().all() else None
                causes = _split_parts(fitted, metric, kind, sel) if cause == TOTAL and known is not None else None
                fit = increments_batch(
                    sel["crds"].to_numpy(dtype=float),
                    sel["delta"].to_numpy(dtype=float)[None, :],
                    confidence,
                    resolution=heap_resolution(metric, points),
                    first=np.array([start]),
                    sampling_var=None if known is None else known.to_numpy(dtype=float)[None, :],
                    parts=causes,
                    kink=np.array([bends.get((metric, cause), 0) if len(sel) == steps.get((metric, cause)) else 0]),
                )
                fitted[(metric, cause, kind)] = (sel, fit)
                parts[kind] = fit.estimate()
            else:
                parts[kind] = Estimate(math.nan, math.nan, 0, math.nan, math.nan)
        i, s = parts["install"], parts["serve"]
        n = int(min((group["kind"] == k).sum() for k in ("install", "serve")))
        rows.append(
            (
                metric,
                cause,
                i.value,
                i.low,
                i.high,
                s.value,
                s.low,
                s.high,
                float(base.get((metric, cause), math.nan)),
                n,
            )
        )
    out = pd.DataFrame(rows, columns=INSTALL_SERVE_COLUMNS)
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
    (bytes per CRD; base in bytes), from the increments between marks as for heap profiles
    (memory a step added stays, so the series' errors carry over too)."""
    rows = []
    for phase in [p for p in PHASES if p in set(points["phase"])]:
        data = phase_points(points, phase)
        for metric, group in data.groupby("metric", sort=False):
            if group["crds"].nunique() < 2:
                continue
            fit = growth_fit(group["crds"], group["value"], confidence)
            e = fit.estimate
            rows.append((phase, metric, e.value, e.low, e.high, fit.base, fit.r2, fit.n))
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
