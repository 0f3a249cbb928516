"""Releases side by side: each quantity by cause at each release with its 95 % interval, and the changepoints
between consecutive releases (``crdscale history``'s numbers; :mod:`crdscale.report.history` draws them).

Quantities (:func:`release_table`): kube-apiserver's heap per CRD and per custom resource by cause, RSS and CPU
per CRD, peak and settled RSS; kube-controller-manager's and etcd's heap and RSS per CRD (:data:`COMPONENTS`,
from their own heap profiles and ``/proc`` samples at every step, :mod:`crdscale.analysis.components`). Beside
them, what the seeds quote per CRD for a release (:data:`SEED_QUOTES`, :func:`seed_comparison`).

A history is a set of runs of one workload on several kube-apiserver releases (with repeats). Each release's
figure pools its repeats: their mean, with an interval from their spread, never narrower than the runs' own
intervals allow (a single run keeps its own). A **changepoint** is a pair of consecutive releases whose
difference's interval (:func:`crdscale.analysis.compare.compare_runs`, repeats pooled) excludes zero *and*
whose difference exceeds a threshold (bytes per CRD, or a share of the older release's value): a change that
is surely there and large enough to matter. Each changepoint carries the frames that moved most (the
comparison's profile diff of the process it is about: kube-apiserver's, or the component's own last profiles),
which is where an upstream change is recognised (:data:`UPSTREAM_CHANGES`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crdscale.analysis.compare import compare_runs, per_crd_profile_diff
from crdscale.analysis.intervals import replicate_mean, t_quantile
from crdscale.analysis.pprof import diff
from crdscale.crds.objects import CUSTOM_RESOURCES
from crdscale.errors import CrdscaleError
from crdscale.rundir import Run, read_runs

HISTORY_COLUMNS = ["version", "cause", "per_crd", "low", "high", "runs"]
CHANGE_COLUMNS = [
    "component", "quantity", "older", "newer", "cause", "per_crd_older", "per_crd_newer", "difference", "low",
    "high", "relative", "frames",
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
# :func:`wide_table`. kube-apiserver's come from every run; kube-controller-manager's and etcd's (their heap
# totals, no causes: the attribution rules describe kube-apiserver's code) from runs that profiled them
# (``profiles.components``), their groups empty (NaN) for runs recorded before.
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
# The other components' figures (crdscale.analysis.components' metric names) -> quantity.
COMPONENT_METRICS = {"bytes": HEAP_PER_CRD, "rss_bytes": RSS_PER_CRD}


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
    """Each pair of consecutive releases compared (repeats pooled): :data:`CHANGE_COLUMNS` rows, kube-apiserver's
    heap per CRD and per custom resource by cause, and kube-controller-manager's and etcd's heap and RSS per CRD
    (when both releases' runs profiled them). ``frames`` names the functions whose flat bytes per CRD moved most
    between the two releases' first runs, in the profiles of the process the row is about. ``runs_by_version``:
    version -> :class:`crdscale.rundir.Run` objects (or run directories)."""
    ordered = release_order(runs_by_version)
    runs_by_version = {
        v: list(runs) if all(isinstance(r, Run) for r in runs) else read_runs(list(runs))
        for v, runs in runs_by_version.items()
    }
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
        profile_diff = comparison.profile_diff
        if profile_diff is not None and len(profile_diff) and "run" in profile_diff.columns:
            # The newer release's first run against the older's first (the reference): not the older's repeats.
            profile_diff = profile_diff[profile_diff["run"] == labels[len(runs_by_version[older])]]
        moved = _moved_frames(profile_diff, frames)
        joint = comparison.joint[comparison.joint["metric"] == "bytes"]
        for r in joint.to_dict("records"):
            rows.append(
                (APISERVER, HEAP_PER_CRD, older, newer, r["cause"], r["per_crd_reference"], r["per_crd"],
                 r["difference"], r["difference_low"], r["difference_high"], r["relative"], moved)
            )  # fmt: skip
        objects = comparison.per_object_joint
        if objects is not None and len(objects):
            for r in objects[objects["kind"] == CUSTOM_RESOURCES].to_dict("records"):
                rows.append(
                    (APISERVER, HEAP_PER_CR, older, newer, r["cause"], r["per_object_reference"], r["per_object"],
                     r["difference"], r["difference_low"], r["difference_high"], r["relative"], "")
                )  # fmt: skip
        table = (comparison.results.get("components") or {}).get("components")
        if table is not None and len(table):
            others = table[(table["component"] != APISERVER) & table["metric"].isin(list(COMPONENT_METRICS))]
            for component in dict.fromkeys(others["component"]):
                heap_frames = component_moved_frames(
                    runs_by_version[older][0], runs_by_version[newer][0], component, frames
                )
                for r in others[others["component"] == component].to_dict("records"):
                    rows.append(
                        (component, COMPONENT_METRICS[r["metric"]], older, newer, "total", r["per_crd_reference"],
                         r["per_crd"], r["difference"], r["difference_low"], r["difference_high"], r["relative"],
                         heap_frames if r["metric"] == "bytes" else "")
                    )  # fmt: skip
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


def _moved_frames(profile_diff: pd.DataFrame | None, n: int) -> str:
    if profile_diff is None or profile_diff.empty or "flat_per_crd" not in profile_diff.columns:
        return ""
    top = profile_diff.reindex(profile_diff["flat_per_crd"].abs().sort_values(ascending=False).index).head(n)
    top = top[top["flat_per_crd"] != 0]
    return "; ".join(f"{name} {value / 1024:+.1f} KiB" for name, value in zip(top["name"], top["flat_per_crd"]))


def _served_growth(run, component: str):
    """``(last crds, last profile, first crds, first profile)`` of ``component``'s heap profiles at the end of
    the steps that added CRDs, or None (fewer than two CRD counts, or a profile that cannot be read)."""
    rows = run.component_profiles(component)
    if not len(rows):
        return None
    rows = rows[(rows["kind"] == "heap") & (rows["phase"].isna() | (rows["phase"] == ""))]
    if len(run.object_steps):  # object steps add objects, not CRDs
        rows = rows[~rows["step"].isin(run.object_steps["step"])]
    if rows["crds"].nunique() < 2:
        return None
    first, last = rows.iloc[0], rows.iloc[-1]
    try:
        return int(last["crds"]), run.read_profile(last["file"]), int(first["crds"]), run.read_profile(first["file"])
    except CrdscaleError:
        return None


def component_profile_diff(older, newer, component: str) -> pd.DataFrame:
    """``component``'s last served heap profile of run ``newer`` against run ``older``'s (``go tool pprof
    -diff_base``), with ``flat_per_crd``/``cum_per_crd``: the difference of the runs' growths from their
    first profile, in bytes per CRD (:func:`crdscale.analysis.compare.per_crd_profile_diff`, as ``compare``
    gives kube-apiserver's). Empty when a run has no two usable profiles of it."""
    a, b = _served_growth(older, component), _served_growth(newer, component)
    if a is None or b is None:
        return pd.DataFrame()
    (ref_crds, ref_last, ref_first_crds, ref_first), (crds, last, first_crds, first) = a, b
    return per_crd_profile_diff(
        diff(last, ref_last, "inuse_space"),
        diff(last, first, "inuse_space"),
        diff(ref_last, ref_first, "inuse_space"),
        crds - first_crds,
        ref_crds - ref_first_crds,
    )


def component_moved_frames(older, newer, component: str, n: int = 3) -> str:
    """The ``n`` functions of ``component`` whose heap per CRD moved most from run ``older`` to ``newer``:
    ``name +x.y KiB; ...`` (empty when either run has no two usable profiles of it)."""
    return _moved_frames(component_profile_diff(older, newer, component), n)


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


def release_table(comparison, versions: Mapping[str, str], *, confidence: float = 0.95) -> pd.DataFrame:
    """Every quantity of a history at each release, repeats pooled: :data:`RELEASE_COLUMNS` rows.

    ``comparison``: :func:`crdscale.analysis.compare.compare_runs` of all the history's runs; ``versions``
    maps each run label to its release. Quantities (:data:`UNITS`): heap per CRD and per custom resource
    by cause (``total`` and the causes), RSS and CPU seconds per CRD (the served phase's slope at the CRD
    steps), and peak and settled (last) RSS of the run (cause ``total``); kube-controller-manager's and
    etcd's heap and RSS per CRD (cause ``total``) from their own profiles and samples. A quantity a run
    lacks (no custom resources, no series, a component not profiled) has no rows."""
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
    fits = comparison.series_fits  # each run's slopes at its CRD steps (crdscale.analysis.rundata.crd_step_marks)
    if fits is not None and len(fits):
        data = fits[(fits["phase"] == "served") & fits["metric"].isin(list(PER_CRD_SERIES))].copy()
        if len(data):
            data["version"] = data["run"].map(versions)
            data = data.dropna(subset=["version"])
            data["cause"] = "total"
            for r in _pool(data, ["metric", "version", "cause"], "per_crd", "per_crd_low", "per_crd_high", confidence):
                rows.append((APISERVER, PER_CRD_SERIES[r[0]], *r[1:]))
    rows += _component_rows(comparison, versions, confidence)
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


def _component_rows(comparison, versions: Mapping[str, str], confidence: float) -> list[tuple]:
    """kube-controller-manager's and etcd's heap and RSS per served CRD by release (repeats pooled, as
    kube-apiserver's heap is): rows of :func:`release_table` before their unit."""
    fits = (comparison.results.get("components") or {}).get("component_fits")
    if fits is None or not len(fits):
        return []
    data = fits[(fits["phase"] == "served") & (fits["component"] != APISERVER)].copy()
    data["version"] = data["run"].map(versions)
    data = data.dropna(subset=["version"])
    rows = []
    for metric, quantity in COMPONENT_METRICS.items():
        sel = data[data["metric"] == metric]
        # Heap fits carry their standard error (sampling and steps); RSS fits their interval only.
        se = "per_crd_se" if metric == "bytes" else None
        for r in _pool(sel, ["component", "version"], "per_crd", "per_crd_low", "per_crd_high", confidence, se=se):
            rows.append((r[0], quantity, r[1], "total", *r[2:]))
    return rows


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
            rows.append((APISERVER, quantity, older, newer, cause, float(a["value"]), float(b["value"]), d, d - half,
                         d + half, relative, ""))  # fmt: skip
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
    """A known upstream change, recognised in a changepoint of ``component`` by its cause or a frame that
    moved: ``frames`` a regular expression on function names, ``cause`` an attribution cause, ``links``
    (``name``, URL). The sources page (``docs/sources.md``, from ``docs/results/sources.toml``) lists each."""

    cause: str
    frames: str
    what: str
    links: tuple[tuple[str, str], ...]
    component: str = APISERVER


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
    (:data:`UPSTREAM_CHANGES`) of the row's component whose cause is the row's, or (on the ``total`` row)
    whose frame moved."""
    out = changes.copy()

    def links(row) -> str:
        # The frames are the pair's (all causes together): they name a change on the total's row only.
        frames = str(row.get("frames") or "") if row["cause"] == "total" else ""
        component = row.get("component") or APISERVER
        found = [
            c
            for c in known
            if c.component == component and (row["cause"] == c.cause or (frames and re.search(c.frames, frames)))
        ]
        return "; ".join(", ".join(f"[{name}]({url})" for name, url in c.links) for c in found)

    out["upstream"] = [links(r) for r in out.to_dict("records")] if len(out) else []
    return out


@dataclass(frozen=True)
class SeedQuote:
    """A per-CRD number a seed quotes for a release (``../shared/seeds``; ``docs/results/seeds.md`` redoes
    them): ``quantity`` and ``cause`` as in :func:`release_table`, ``value`` in its unit, ``version`` the
    release (or minor) the seed measured, ``said`` its words, ``source`` a key of
    ``docs/results/sources.toml`` and ``url`` the seed itself."""

    source: str
    version: str
    quantity: str
    cause: str
    value: float
    said: str
    url: str
    component: str = APISERVER


ONE_PAGER = "https://github.com/crossplane/crossplane/blob/master/design/one-pager-crd-scaling.md"
UPBOUND_BLOG = "https://blog.upbound.io/scaling-kubernetes-to-thousands-of-crds/"
# Only numbers a seed gives per CRD, or gives with the CRD count that makes them per CRD.
SEED_QUOTES = (
    SeedQuote(
        "one-pager", "v1.23", HEAP_PER_CRD, "zap-counters", 7 * 4096 * 16.0,
        "448 KB of zapcore.newCounters per served CRD version (7 x 4096 x 16 bytes), 780 CRDs of "
        "provider-jet-aws on kube-apiserver 1.23", ONE_PAGER,
    ),
    SeedQuote(
        "one-pager", "v1.23", HEAP_PER_CRD, "total", 1.16e9 / 780,
        "~1.16 GB of heap in the profile with 780 CRDs (provider-jet-aws), baseline included", ONE_PAGER,
    ),
    SeedQuote(
        "one-pager", "v1.23", RSS_PER_CRD, "total", (3.2e9 - 0.6e9) / 780,
        "RSS ~600 MB -> ~3.2 GB settled while 780 CRDs were installed", ONE_PAGER,
    ),
    SeedQuote(
        "upbound-blog", "v1.23", RSS_PER_CRD, "total", 4.0 * 2**20,
        "a little over 4 MiB of RSS per CRD (780 CRDs; 2022, with v1.23's lazy OpenAPI and before the zap fix)",
        UPBOUND_BLOG,
    ),
)  # fmt: skip
SEED_COLUMNS = [
    "source", "seed_version", "component", "quantity", "cause", "seed_value", "said", "url", "release", "value",
    "low", "high", "newest", "newest_value", "newest_low", "newest_high", "unit",
]  # fmt: skip


def _minor(version: str) -> tuple[int, ...]:
    return _release_key(version)[0][:2]


def seed_comparison(releases: pd.DataFrame, quotes: Sequence[SeedQuote] = SEED_QUOTES) -> pd.DataFrame:
    """Each seed quote (:data:`SEED_QUOTES`) beside what the history measured: at ``release``, the history's
    release of the quote's minor, else the nearest one (the seeds measured v1.23, which a history from
    v1.24 does not hold: its oldest release stands beside them), and at the ``newest`` release.
    :data:`SEED_COLUMNS` rows; a quote whose quantity the history lacks keeps NaN values."""
    rows = []
    for q in quotes:
        data = releases[
            (releases["component"] == q.component)
            & (releases["quantity"] == q.quantity)
            & (releases["cause"] == q.cause)
        ]
        versions = release_order(data["version"]) if len(data) else []
        by = data.set_index("version")
        if versions:
            wanted = _minor(q.version)
            same = [v for v in versions if _minor(v) == wanted]
            release = same[0] if same else min(versions, key=lambda v: (abs(_minor(v)[1] - wanted[1]), _release_key(v)))
            newest = versions[-1]
            a, b = by.loc[release], by.loc[newest]
            measured = (release, a["value"], a["low"], a["high"], newest, b["value"], b["low"], b["high"])
        else:
            measured = ("", math.nan, math.nan, math.nan, "", math.nan, math.nan, math.nan)
        rows.append(
            (q.source, q.version, q.component, q.quantity, q.cause, q.value, q.said, q.url, *measured,
             UNITS[q.quantity])
        )  # fmt: skip
    return pd.DataFrame(rows, columns=SEED_COLUMNS)
