"""Releases side by side: each quantity by cause at each release with its 95 % interval, and the changepoints
between consecutive releases (``crdscale history``'s numbers; :mod:`crdscale.report.history` draws them).

Quantities (:func:`release_table`): kube-apiserver's heap per CRD and per custom resource by cause, RSS and CPU
per CRD, peak and settled RSS; :data:`COMPONENTS` keeps a place for kube-controller-manager's and etcd's.

A history is a set of runs of one workload on several kube-apiserver releases (with repeats). Each release's
figure pools its repeats: their mean, with an interval from their spread, never narrower than the runs' own
intervals allow (a single run keeps its own). A **changepoint** is a pair of consecutive releases whose
difference's interval (:func:`crdscale.analysis.compare.compare_runs`, repeats pooled) excludes zero *and*
whose difference exceeds a threshold (bytes per CRD, or a share of the older release's value): a change that
is surely there and large enough to matter. Each changepoint carries the frames that moved most (the
comparison's profile diff), which is where an upstream change is recognised.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crdscale.analysis.compare import compare_runs
from crdscale.analysis.intervals import replicate_mean, t_quantile
from crdscale.analysis.percrd import fit_series_per_crd

CUSTOM_RESOURCES = "customresources"  # crdscale.crds.objects.CUSTOM_RESOURCES: the kind of a run's custom resources

HISTORY_COLUMNS = ["version", "cause", "per_crd", "low", "high", "runs"]
CHANGE_COLUMNS = [
    "quantity", "older", "newer", "cause", "per_crd_older", "per_crd_newer", "difference", "low", "high", "relative",
    "frames",
]  # fmt: skip

# The quantities of a history, each with its unit: the long table's ``quantity`` column.
HEAP_PER_CRD = "heap per CRD"
HEAP_PER_CR = "heap per custom resource"
RSS_PER_CRD = "RSS per CRD"
CPU_PER_CRD = "CPU per CRD"
RSS_PEAK = "peak RSS"
RSS_SETTLED = "settled RSS"
UNITS = {
    HEAP_PER_CRD: "bytes", HEAP_PER_CR: "bytes", RSS_PER_CRD: "bytes", CPU_PER_CRD: "CPU seconds",
    RSS_PEAK: "bytes", RSS_SETTLED: "bytes",
}  # fmt: skip
RELEASE_COLUMNS = ["component", "quantity", "version", "cause", "value", "low", "high", "runs", "unit"]
# Each process of the control plane and what the history shows of it: one column group per component in
# :func:`wide_table`. kube-apiserver's come from every run; kube-controller-manager's and etcd's groups stay
# empty (NaN) until runs carry their per-CRD figures (their heap profiles at every step), when rows with
# their component join the long table.
COMPONENTS = {
    "kube-apiserver": [HEAP_PER_CRD, HEAP_PER_CR, RSS_PER_CRD, CPU_PER_CRD, RSS_PEAK, RSS_SETTLED],
    "kube-controller-manager": [HEAP_PER_CRD, RSS_PER_CRD],
    "etcd": [HEAP_PER_CRD, RSS_PER_CRD],
}
APISERVER = "kube-apiserver"
# A changepoint's difference is at least this share of the older release's value (and its interval excludes 0).
DEFAULT_MIN_RELATIVE = 0.10
# Process series fitted per CRD: the comparison's metric name -> quantity.
PER_CRD_SERIES = {"rss_bytes": RSS_PER_CRD, "cpu_seconds": CPU_PER_CRD}


def _release_key(version: str) -> tuple:
    digits = re.findall(r"\d+", str(version))
    return tuple(int(d) for d in digits[:3]), str(version)


def release_order(versions) -> list[str]:
    """Versions oldest first (``v1.9.0`` before ``v1.24.0``)."""
    return sorted(set(versions), key=_release_key)


def history_table(
    per_crd: pd.DataFrame,
    versions: Mapping[str, str],
    *,
    phase: str = "served",
    metric: str = "bytes",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each release's per-CRD figure by cause: ``version, cause, per_crd, low, high, runs``.

    ``per_crd`` is stacked :func:`~crdscale.analysis.percrd.fit_per_crd` tables with a ``run`` column (what
    ``Comparison.per_crd`` holds); ``versions`` maps each run label to its release. Repeats are pooled: the
    mean, with a t interval on their spread whose standard error is at least the runs' own (rms se / sqrt n)."""
    data = per_crd[(per_crd["phase"] == phase) & (per_crd["metric"] == metric)].copy()
    data["version"] = data["run"].map(versions)
    data = data.dropna(subset=["version"])
    rows = _pool(data, ["version", "cause"], "per_crd", "per_crd_low", "per_crd_high", confidence, se="per_crd_se")
    table = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    order = {v: i for i, v in enumerate(release_order(table["version"]))}
    return table.sort_values(["cause", "version"], key=lambda s: s.map(order) if s.name == "version" else s)


def changepoints(
    differences: pd.DataFrame,
    *,
    min_bytes: float = 0.0,
    min_relative: float = DEFAULT_MIN_RELATIVE,
    causes: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rows of ``differences`` (:data:`CHANGE_COLUMNS`, consecutive releases) that are changepoints:
    the interval excludes 0 and ``|difference|`` is at least ``min_bytes`` and at least ``min_relative`` of
    the older release's value. Largest first."""
    if differences.empty:
        return differences
    d = differences if causes is None else differences[differences["cause"].isin(causes)]
    sure = (d["low"] > 0) | (d["high"] < 0)
    big = d["difference"].abs() >= np.maximum(min_bytes, min_relative * d["per_crd_older"].abs())
    picked = d[sure & big]
    return picked.reindex(picked["difference"].abs().sort_values(ascending=False).index)


def consecutive_differences(runs_by_version: Mapping[str, Sequence], *, frames: int = 3) -> pd.DataFrame:
    """Each pair of consecutive releases compared (repeats pooled): :data:`CHANGE_COLUMNS` rows by cause,
    with the ``frames`` functions whose flat bytes per CRD moved most. ``runs_by_version``: version ->
    :class:`crdscale.rundir.Run` objects (or run directories)."""
    ordered = release_order(runs_by_version)
    rows = []
    for older, newer in zip(ordered, ordered[1:]):
        runs = [*runs_by_version[older], *runs_by_version[newer]]
        labels = [f"{older},repeat={i + 1}" for i in range(len(runs_by_version[older]))]
        labels += [f"{newer},repeat={i + 1}" for i in range(len(runs_by_version[newer]))]
        if len(runs_by_version[older]) == 1:
            labels[0] = older
        if len(runs_by_version[newer]) == 1:
            labels[-1] = newer
        comparison = compare_runs(runs, labels)
        moved = _moved_frames(comparison.profile_diff, frames)
        joint = comparison.joint[comparison.joint["metric"] == "bytes"]
        for r in joint.to_dict("records"):
            rows.append(
                (HEAP_PER_CRD, older, newer, r["cause"], r["per_crd_reference"], r["per_crd"], r["difference"],
                 r["difference_low"], r["difference_high"], r["relative"], moved)
            )  # fmt: skip
        objects = comparison.per_object_joint
        if objects is not None and len(objects):
            for r in objects[objects["kind"] == CUSTOM_RESOURCES].to_dict("records"):
                rows.append(
                    (HEAP_PER_CR, older, newer, r["cause"], r["per_object_reference"], r["per_object"],
                     r["difference"], r["difference_low"], r["difference_high"], r["relative"], "")
                )  # fmt: skip
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


def _moved_frames(profile_diff: pd.DataFrame, n: int) -> str:
    if profile_diff is None or profile_diff.empty or "flat_per_crd" not in profile_diff.columns:
        return ""
    top = profile_diff.reindex(profile_diff["flat_per_crd"].abs().sort_values(ascending=False).index).head(n)
    return "; ".join(f"{name} {value / 1024:+.1f} KiB" for name, value in zip(top["name"], top["flat_per_crd"]))


def _pool(
    data: pd.DataFrame, keys: list[str], value: str, low: str, high: str, confidence: float, *, se: str | None = None
) -> list[tuple]:
    """Per ``keys`` group of runs: ``(*key, value, low, high, runs)``, the repeats' mean with a t interval on
    their spread whose standard error is at least the runs' own (root mean square se over sqrt n; from
    ``se``, else the runs' half-widths over z); one run keeps its own interval."""
    z = t_quantile(0.5 + confidence / 2, math.inf)
    rows = []
    for key, group in data.groupby(keys, sort=False):
        group = group[np.isfinite(group[value].to_numpy(dtype=float))]
        n = len(group)
        if n == 0:
            continue
        if n == 1:
            r = group.iloc[0]
            rows.append((*np.atleast_1d(key), float(r[value]), float(r[low]), float(r[high]), 1))
            continue
        spread = replicate_mean(group[value].to_numpy(dtype=float), confidence)
        own = group[se].to_numpy(dtype=float) if se else (group[high] - group[low]).to_numpy(dtype=float) / (2 * z)
        own_se = float(np.sqrt(np.nanmean(own**2)) / math.sqrt(n)) if np.isfinite(own).any() else 0.0
        half = max(spread.high - spread.value, z * own_se)
        rows.append((*np.atleast_1d(key), spread.value, spread.value - half, spread.value + half, n))
    return rows


def _first_at_each_count(points: pd.DataFrame) -> pd.DataFrame:
    """Series points at CRD counts only: a run that grows objects stays at its last CRD count for its object
    steps, whose memory is the objects', not the CRDs' (the first point at each count is the CRD step's)."""
    return points.drop_duplicates(["run", "phase", "metric", "crds"], keep="first")


def release_table(comparison, versions: Mapping[str, str], *, confidence: float = 0.95) -> pd.DataFrame:
    """Every quantity of a history at each release, repeats pooled: :data:`RELEASE_COLUMNS` rows.

    ``comparison``: :func:`crdscale.analysis.compare.compare_runs` of all the history's runs; ``versions``
    maps each run label to its release. Quantities (:data:`UNITS`): heap per CRD and per custom resource
    by cause (``total`` and the causes), RSS and CPU seconds per CRD (the served phase's slope at the CRD
    steps), and peak and settled (last) RSS of the run (cause ``total``). A quantity a run lacks (no
    custom resources, no series) has no rows."""
    rows = []
    heap = history_table(comparison.per_crd, versions, confidence=confidence)
    rows += [(APISERVER, HEAP_PER_CRD, r.version, r.cause, r.per_crd, r.low, r.high, r.runs) for r in heap.itertuples()]
    objects = comparison.per_object
    if objects is not None and len(objects):
        data = objects[(objects["metric"] == "bytes") & (objects["kind"] == CUSTOM_RESOURCES)].copy()
        data["version"] = data["run"].map(versions)
        data = data.dropna(subset=["version"])
        pooled = _pool(
            data,
            ["version", "cause"],
            "per_object",
            "per_object_low",
            "per_object_high",
            confidence,
            se="per_object_se",
        )
        rows += [(APISERVER, HEAP_PER_CR, *r) for r in pooled]
    points = comparison.series_points
    if points is not None and len(points):
        fits = []
        for label, group in _first_at_each_count(points).groupby("run", sort=False):
            fit = fit_series_per_crd(group, confidence)
            fits.append(fit[(fit["phase"] == "served") & fit["metric"].isin(list(PER_CRD_SERIES))].assign(run=label))
        if fits:
            data = pd.concat(fits, ignore_index=True)
            data["version"] = data["run"].map(versions)
            data = data.dropna(subset=["version"])
            data["cause"] = "total"
            for r in _pool(data, ["metric", "version", "cause"], "per_crd", "per_crd_low", "per_crd_high", confidence):
                rows.append((APISERVER, PER_CRD_SERIES[r[0]], *r[1:]))
    end = comparison.end
    if end is not None and len(end):
        data = end[end["metric"] == "rss_bytes"].copy()
        data["version"] = data["run"].map(versions)
        data = data.dropna(subset=["version"])
        for column, quantity in (("peak", RSS_PEAK), ("last", RSS_SETTLED)):
            for version, group in data.groupby("version", sort=False):
                e = replicate_mean(group[column].to_numpy(dtype=float), confidence)
                if math.isfinite(e.value):
                    runs = int(np.isfinite(group[column].to_numpy(dtype=float)).sum())
                    rows.append((APISERVER, quantity, version, "total", e.value, e.low, e.high, runs))
    table = pd.DataFrame([(*r, UNITS[r[1]]) for r in rows], columns=RELEASE_COLUMNS)
    order = {v: i for i, v in enumerate(release_order(table["version"]))}
    return table.sort_values(
        ["component", "quantity", "cause", "version"], key=lambda c: c.map(order) if c.name == "version" else c
    ).reset_index(drop=True)


def process_differences(releases: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Consecutive releases' differences of the process quantities (RSS and CPU per CRD, peak and settled
    RSS) from :func:`release_table`: :data:`CHANGE_COLUMNS` rows, the interval's half-width the root of the
    sum of both releases' squared half-widths (no interval when a release has none: one run of peak RSS)."""
    rows = []
    data = releases[(releases["component"] == APISERVER) & releases["quantity"].isin([*PER_CRD_SERIES.values(),
                    RSS_PEAK, RSS_SETTLED])]  # fmt: skip
    for (quantity, cause), group in data.groupby(["quantity", "cause"], sort=False):
        by = group.set_index("version")
        ordered = release_order(by.index)
        for older, newer in zip(ordered, ordered[1:]):
            a, b = by.loc[older], by.loc[newer]
            d = float(b["value"] - a["value"])
            half = math.hypot(float(a["high"] - a["value"]), float(b["high"] - b["value"]))
            relative = d / float(a["value"]) if a["value"] else math.nan
            rows.append((quantity, older, newer, cause, float(a["value"]), float(b["value"]), d, d - half, d + half,
                         relative, ""))  # fmt: skip
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


def wide_table(releases: pd.DataFrame, cause: str = "total") -> pd.DataFrame:
    """One row per release, one column group per component (:data:`COMPONENTS`) and a column per quantity:
    ``cause``'s value with its interval as ``value [low, high]`` numbers in three sub-columns. Components
    whose runs carry no figure yet keep their (empty) columns: the place their numbers go."""
    data = releases[releases["cause"] == cause]
    versions = release_order(data["version"]) if len(data) else []
    columns = pd.MultiIndex.from_tuples(
        [(c, q, part) for c, quantities in COMPONENTS.items() for q in quantities for part in ("value", "low", "high")],
        names=["component", "quantity", ""],
    )
    cells: dict[tuple, dict[str, float]] = {c: {} for c in columns}
    for r in data.itertuples():
        for part, number in (("value", r.value), ("low", r.low), ("high", r.high)):
            if (r.component, r.quantity, part) in cells:
                cells[(r.component, r.quantity, part)][r.version] = float(number)
    wide = pd.DataFrame({c: [cells[c].get(v, math.nan) for v in versions] for c in columns}, index=versions)
    wide.columns, wide.index.name = columns, "version"
    return wide


@dataclass(frozen=True)
class UpstreamChange:
    """A known upstream change, recognised in a changepoint by its cause or a frame that moved: ``frames``
    a regular expression on function names, ``cause`` an attribution cause, ``links`` (``name``, URL)."""

    cause: str
    frames: str
    what: str
    links: tuple[tuple[str, str], ...]


# Only changes whose pull requests were read and match the frames (add one row per change, with its links).
UPSTREAM_CHANGES = (
    UpstreamChange(
        "zap-counters",
        r"zapcore\.newCounters",
        "one etcd3 client logger shared by every client, instead of one per CRD each holding zap's sampling counters",
        (
            ("kubernetes#111476", "https://github.com/kubernetes/kubernetes/issues/111476"),
            ("kubernetes#111477", "https://github.com/kubernetes/kubernetes/pull/111477"),
            ("kubernetes#111648 (release-1.24)", "https://github.com/kubernetes/kubernetes/pull/111648"),
        ),
    ),
)


def upstream_links(changes: pd.DataFrame, known: Sequence[UpstreamChange] = UPSTREAM_CHANGES) -> pd.DataFrame:
    """``changes`` (:data:`CHANGE_COLUMNS`) with ``upstream``: Markdown links to the known changes
    (:data:`UPSTREAM_CHANGES`) whose cause is the row's, or (on the ``total`` row) whose frame moved."""
    out = changes.copy()

    def links(row) -> str:
        # The frames are the pair's (all causes together): they name a change on the total's row only.
        frames = str(row.get("frames") or "") if row["cause"] == "total" else ""
        found = [c for c in known if row["cause"] == c.cause or (frames and re.search(c.frames, frames))]
        return "; ".join(", ".join(f"[{name}]({url})" for name, url in c.links) for c in found)

    out["upstream"] = [links(r) for r in out.to_dict("records")] if len(out) else []
    return out
