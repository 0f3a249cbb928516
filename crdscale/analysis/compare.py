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

The functions here take DataFrames (points from
:func:`crdscale.analysis.percrd.profile_points` and
:func:`crdscale.analysis.percrd.series_points`, events, series) and return
DataFrames. :func:`compare_runs` puts them together for runs read by
:mod:`crdscale.rundir` into a :class:`Comparison` of plain DataFrames, and the
table builders (:func:`differences_table`, :func:`series_table`,
:func:`repeat_spread_table`) shape it for reading; words, Markdown and HTML
about a comparison are :mod:`crdscale.report.compare`'s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from crdscale.analysis.differences import JOINT_COLUMNS, per_crd_differences
from crdscale.analysis.intervals import repeats_for_half_width, replicate_mean
from crdscale.analysis.percrd import fit_per_crd, fit_series_per_crd
from crdscale.analysis.pprof import diff
from crdscale.analysis.process import end_values, points_by_source, process_source
from crdscale.analysis.registry import CompareContext, Result, RunData, compare_all, compute_all, stack_runs, table
from crdscale.analysis.rundata import crd_profiles, crd_step_marks, heap_points, heap_profile_set
from crdscale.analysis.targets import TOTAL
from crdscale.errors import UsageError
from crdscale.rundir import Run, read_runs
from crdscale.rundir.evidence import Problem, compare_problems
from crdscale.rundir.manifest import Manifest

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


def _joint(
    points: pd.DataFrame, reference, by: list[str], confidence: float, replicates, spread: str = "own"
) -> pd.DataFrame:
    """:func:`per_crd_differences` of a comparison, empty when the reference has no points of this kind
    (a run too short for a sample or a profile of its served phase): nothing to compare against, not an error."""
    if not len(points) or reference not in {(replicates or {}).get(r, r) for r in points["run"]}:
        return pd.DataFrame(columns=JOINT_COLUMNS)
    return per_crd_differences(
        points, reference=reference, by=by, confidence=confidence, replicates=replicates, spread=spread
    )


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


# --------------------------------------------------------------------------
# Runs side by side
# --------------------------------------------------------------------------


@dataclass
class Comparison:
    """Runs side by side; every table has a ``run`` column holding the run's label.

    Attributes:
        labels: one short label per run (what differs: version, cell, directory).
        reference: the label the differences are taken against (the first run).
        run_dirs: the run directories, in label order.
        manifests: label -> manifest.
        warnings: sentences about runs that should not be compared as they are
            (different CRD sets, runs not completed).
        points: heap by cause at each profile (:func:`~crdscale.analysis.percrd.profile_points`).
        per_crd: each run's own per-CRD fits (:func:`~crdscale.analysis.percrd.fit_per_crd`).
        joint: heap bytes per CRD by cause, difference to the reference with its
            95% CI of the difference (Welch, each run's own variance: :func:`~crdscale.analysis.compare.per_crd_differences`).
        series_points: RSS, heap in use, goroutines, fds and CPU seconds at each profile mark of a step that
            added CRDs (:func:`~crdscale.analysis.rundata.crd_step_marks`: a run's object steps left out).
        series_fits: each run's own per-CRD slopes of those series
            (:func:`~crdscale.analysis.percrd.fit_series_per_crd`).
        series_joint: the same differences on those series (per CRD: bytes, goroutines, fds, CPU s).
        end: each series at the start, the end and its peak (:func:`~crdscale.analysis.compare.series_end_values`).
        establish: seconds until each step's CRDs were Established.
        profile_diff: last served heap profile of each run minus the reference's
            (``go tool pprof -diff_base``), with ``flat_per_crd``/``cum_per_crd``: the difference of
            the runs' growths from their first profile, in bytes per CRD (baselines cancel, as in the fits).
        process_jobs: label -> the series job its process figures (RSS, CPU, fds, threads) came from
            (:func:`~crdscale.analysis.process.process_source`), for the provenance a report states.
        replicates: label -> configuration, when a configuration was run more than once (a matrix's
            ``repeat``): ``joint`` and ``series_joint`` then compare configurations (the mean of their
            repeats, the interval from their spread), and ``reference`` is a configuration.
        repeat_spread: per configuration and cause, the repeats' spread against one run's interval
            (:func:`~crdscale.analysis.compare.replicate_spread`); empty without repeats.
    """

    labels: list[str]
    reference: str
    run_dirs: list[Path]
    manifests: dict[str, Manifest]
    warnings: list[str]
    points: pd.DataFrame
    per_crd: pd.DataFrame
    joint: pd.DataFrame
    series_points: pd.DataFrame
    series_fits: pd.DataFrame
    series_joint: pd.DataFrame
    end: pd.DataFrame
    establish: pd.DataFrame
    profile_diff: pd.DataFrame
    process_jobs: dict[str, str | None] = field(default_factory=dict)
    replicates: dict[str, str] = field(default_factory=dict)
    repeat_spread: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Every analysis of the registry compared (crdscale.analysis.registry): name -> its tables.
    results: dict[str, Result] = field(default_factory=dict)
    # Each run's evidence problems and the runs' against each other (crdscale.rundir.evidence), with the
    # run's label: what warnings states in sentences.
    evidence: list[tuple[str, Problem]] = field(default_factory=list)
    # "pooled" when the differences' intervals come from the spread pooled over every configuration
    # (crdscale.analysis.pooled: an A/B's arms), "own" otherwise.
    spread: str = "own"

    # The per-object view's tables by their old names (empty when no run grew objects).
    @property
    def per_object(self) -> pd.DataFrame:
        """Each run's per-object fits (crdscale.analysis.perobject.fit_per_object)."""
        return table(self.results, "per_object")

    @property
    def amplification(self) -> pd.DataFrame:
        """Each run's amplification ratio (crdscale.analysis.perobject.amplification)."""
        return table(self.results, "amplification")

    @property
    def per_object_joint(self) -> pd.DataFrame:
        """Heap per object, each run minus the reference, with the difference's interval (Welch)."""
        return table(self.results, "per_object_joint")

    @property
    def object_lists(self) -> pd.DataFrame:
        """What a LIST of each kind's objects cost in each run (perobject.list_costs)."""
        return table(self.results, "object_lists")

    @property
    def cost_moved(self) -> pd.DataFrame:
        """Each LIST beside the heap per object: where a watch cache turned off moves an object's cost."""
        return table(self.results, "cost_moved")

    @property
    def compared(self) -> list[str]:
        """What is compared against the reference: configurations with repeats, else runs."""
        names = [self.replicates.get(label, label) for label in self.labels]
        return [n for n in dict.fromkeys(names) if n != self.reference]

    def first_run(self, name: str) -> str:
        """The first run label of a configuration (the label itself for a single run)."""
        return next((label for label in self.labels if self.replicates.get(label, label) == name), name)

    def end_value(self, name: str, metric: str, column: str) -> float | None:
        """A series' ``column`` of :attr:`end` (``last``, ``peak``) for run or configuration ``name``: the mean
        over its repeats (no interval: one value per run); None when no run of it has a finite one."""
        if self.end is None or not len(self.end):
            return None
        labels = [label for label in self.labels if self.replicates.get(label, label) == name]
        picked = self.end[self.end["run"].isin(labels) & (self.end["metric"] == metric)][column]
        values = [v for v in pd.to_numeric(picked, errors="coerce").tolist() if math.isfinite(v)]
        return sum(values) / len(values) if values else None


# A matrix cell's label ends in ",repeat=N" when its configuration was repeated (crdscale.scenario.matrix).
_REPEAT = re.compile(r",?repeat=\d+$")


def configurations(labels: Sequence[str]) -> dict[str, str]:
    """label -> configuration for runs that repeat a configuration (labels ending in ``repeat=N``);
    empty when no configuration has two runs."""
    config = {label: _REPEAT.sub("", label) or label for label in labels}
    counts = pd.Series(list(config.values())).value_counts()
    return config if (counts > 1).any() else {}


def run_labels(manifests: Sequence[Manifest | Mapping], names: Sequence[str]) -> list[str]:
    """A short distinct label per run: the experiment cell, else the kube-apiserver version
    (plus GOGC/GOMEMLIMIT/flags when they differ), else the directory name."""

    def candidates(m: Manifest, name: str) -> list[str]:
        target = m.scenario.target
        version = m.versions.kube_apiserver or (f"v{target.kube_version.lstrip('v')}" if target.kube_version else None)
        env = ",".join(f"{k}={v}" for k, v in sorted(target.env.items()))
        flags = " ".join(target.apiserver_flags)
        cell = m.scenario.experiment.cell
        detailed = " ".join(p for p in (version, env, flags) if p)
        return [c for c in (cell, version, detailed, name) if c]

    options = [candidates(Manifest.of(m), n) for m, n in zip(manifests, names)]
    for depth in range(max(len(o) for o in options)):
        labels = [o[min(depth, len(o) - 1)] for o in options]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{i + 1}:{n}" for i, n in enumerate(names)]


def _served(heap: pd.DataFrame) -> pd.DataFrame:
    """Heap profiles taken at the end of a step (after serving)."""
    return heap[heap["phase"].isna() | heap["phase"].isin(["", "served"])]


def compare_runs(
    runs: Sequence[Run | str | Path],
    labels: Sequence[str] | None = None,
    *,
    confidence: float = 0.95,
    spread: str = "own",
) -> Comparison:
    """Compare two or more runs against the first.

    ``runs`` are :class:`crdscale.rundir.Run` objects, or run directories, which
    :func:`crdscale.rundir.read_runs` opens (what a notebook passes). Raises UsageError
    when fewer than two runs are given, a directory is not a run, two are the same
    run, or a run has heap profiles at fewer than two CRD counts. ``spread="pooled"``: the differences'
    intervals from the spread pooled over every configuration's repeats (:mod:`crdscale.analysis.pooled`:
    an A/B's arms), not from each pair of configurations' own.
    """
    if len(runs) < 2:
        raise UsageError("compare needs two or more run directories")
    if not all(isinstance(r, Run) for r in runs):
        runs = read_runs([r.path if isinstance(r, Run) else r for r in runs])
    manifests = [r.manifest for r in runs]
    labels = list(labels) if labels else run_labels(manifests, [Path(r.path).name for r in runs])
    if len(labels) != len(runs) or len(set(labels)) != len(labels):
        raise UsageError("give one distinct label per run")

    points, spoints, ends, establish, per_crd, last_served = {}, {}, {}, {}, {}, {}
    results = {}  # label -> the registry's results of that run
    notes = []  # what each run's numbers leave out or cannot vouch for
    for label, run in zip(labels, runs):
        every = heap_profile_set(run)  # profiles that cannot be fitted are set aside, and said
        # Object steps add objects, not CRDs: they are the per-object view's, not the per-CRD fits'.
        found = crd_profiles(run, every)
        heap, profiles = found.rows, found.decoded
        notes += [f"{label}: {w}" for w in run.warnings] + [
            f"{label}: left out of the fits: {s}" for s in found.skipped
        ]
        if heap["crds"].nunique() < 2:
            raise UsageError(f"{run.path}: needs heap profiles at two or more CRD counts")
        points[label] = heap_points(run, profiles=found)
        per_crd[label] = fit_per_crd(points[label], confidence)[0]
        marks = crd_step_marks(run, found)  # the series per CRD at the CRD steps only, as analyze reads them
        spoints[label] = points_by_source(run.series, marks, COMPARE_SERIES)
        ends[label] = series_end_values(run.series)
        establish[label] = establish_times(run.events)
        served = _served(heap)
        last = served.iloc[-1] if len(served) else heap.iloc[-1]
        first = (served if len(served) else heap).iloc[0]
        last_served[label] = (int(last["crds"]), profiles[last["file"]], int(first["crds"]), profiles[first["file"]])
        data = RunData(points[label], run.series, marks, run.manifest, confidence, run, every)
        results[label] = compute_all(data)

    replicates = configurations(labels)
    reference = replicates.get(labels[0], labels[0])
    warnings = crd_set_warnings(
        {label: m.crds.to_json() or run.crd_summary for label, m, run in zip(labels, manifests, runs)}
    )
    warnings = notes + warnings
    across = compare_problems({lb: r.evidence for lb, r in zip(labels, runs)}, dict(zip(labels, manifests)))
    warnings += [f"{label}: evidence: {problem}" for label, problem in across]
    stacked = stack_runs(points)
    sstacked = stack_runs(spoints)
    diffs = []
    ref_crds, ref_profile, ref_first_crds, ref_first = last_served[labels[0]]
    # Each run's growth from its first served profile to its last: per CRD, what the fits measure.
    ref_growth = diff(ref_profile, ref_first, "inuse_space")
    for label in labels[1:]:
        crds, profile, first_crds, first = last_served[label]
        if crds != ref_crds:
            warnings.append(f"{label}: last served profile at {crds} CRDs, {labels[0]} at {ref_crds}")
        table = per_crd_profile_diff(
            diff(profile, ref_profile, "inuse_space"),
            diff(profile, first, "inuse_space"),
            ref_growth,
            crds - first_crds,
            ref_crds - ref_first_crds,
        )
        diffs.append(table.assign(run=label, reference=labels[0]))
    return Comparison(
        labels=labels,
        reference=reference,
        run_dirs=[Path(r.path) for r in runs],
        manifests=dict(zip(labels, manifests)),
        warnings=warnings,
        points=stacked,
        per_crd=stack_runs(per_crd),
        joint=_joint(stacked, reference, ["metric", "cause"], confidence, replicates, spread),
        series_points=sstacked,
        series_fits=stack_runs({label: fit_series_per_crd(p, confidence) for label, p in spoints.items() if len(p)}),
        series_joint=_joint(sstacked, reference, ["metric"], confidence, replicates, spread),
        end=stack_runs(ends),
        establish=stack_runs(establish),
        profile_diff=pd.concat(diffs, ignore_index=True) if diffs else pd.DataFrame(),
        process_jobs={label: process_source(run.series) for label, run in zip(labels, runs)},
        replicates=replicates,
        repeat_spread=replicate_spread(stack_runs(per_crd), replicates, confidence) if replicates else pd.DataFrame(),
        results=compare_all(results, CompareContext(labels, reference, replicates, confidence, spread)),
        evidence=[(lb, p) for lb, run in zip(labels, runs) for p in run.evidence.problems] + across,
        spread=spread,
    )


# --------------------------------------------------------------------------
# Tables for reading
# --------------------------------------------------------------------------


def differences_table(comparison: Comparison, metric: str = "bytes") -> pd.DataFrame:
    """The per-CRD differences as a readable table: ``run, cause, <reference's label> (reference) per CRD,
    run per CRD (KiB), difference (KiB/CRD), 95% CI low, 95% CI high, relative (%)``;
    biggest |difference| first, total last."""
    sel = comparison.joint[comparison.joint["metric"] == metric].copy()
    sel["_total"] = sel["cause"] == TOTAL
    sel["_abs"] = -sel["difference"].abs()
    sel = sel.sort_values(["run", "_total", "_abs"], kind="stable")
    kib = 1024 if metric == "bytes" else 1
    return pd.DataFrame(
        {
            "run": sel["run"].to_numpy(),
            "cause": sel["cause"].to_numpy(),
            # Named by the reference's label: "reference" alone reads as data/reference-run.
            f"{comparison.reference} (reference) per CRD": (sel["per_crd_reference"] / kib).round(1).to_numpy(),
            "run per CRD": (sel["per_crd"] / kib).round(1).to_numpy(),
            "difference": (sel["difference"] / kib).round(1).to_numpy(),
            "95% CI low": (sel["difference_low"] / kib).round(1).to_numpy(),
            "95% CI high": (sel["difference_high"] / kib).round(1).to_numpy(),
            "relative (%)": (100 * sel["relative"]).round(1).to_numpy(),
        }
    )


def series_table(comparison: Comparison) -> pd.DataFrame:
    """Per run: each series per CRD (its growth per CRD; the difference's interval is Welch's), at the end and at
    its peak, plus seconds to Established; one row per run and metric, units in ``unit``."""
    rows = []
    joint = comparison.series_joint.set_index(["run", "metric"]) if len(comparison.series_joint) else None
    fits = comparison.series_fits
    own = (
        fits[fits["phase"] == "served"].set_index(["run", "metric"])["per_crd"] if len(fits) else pd.Series(dtype=float)
    )
    for label in comparison.labels:
        end = comparison.end[comparison.end["run"] == label].set_index("metric") if len(comparison.end) else None
        for metric, unit in SERIES_UNITS.items():
            per_crd = float(own.get((label, metric), math.nan))
            low = high = math.nan
            key = (comparison.replicates.get(label, label), metric)
            if joint is not None and key in joint.index:
                low, high = joint.loc[key, ["difference_low", "difference_high"]]
            last = end.loc[metric, "last"] if end is not None and metric in end.index else math.nan
            peak = end.loc[metric, "peak"] if end is not None and metric in end.index else math.nan
            first = end.loc[metric, "first"] if end is not None and metric in end.index else math.nan
            source = end.loc[metric, "source"] if end is not None and metric in end.index else ""
            if metric == "cpu_seconds":  # a counter: what the run used, not its value
                last, peak = last - first, math.nan
            rows.append((label, metric, unit, per_crd, low, high, last, peak, source))
        est = comparison.establish[comparison.establish["run"] == label] if len(comparison.establish) else None
        if est is not None and len(est):
            rows.append(
                (
                    label,
                    "establish_seconds",
                    "s",
                    est["seconds"].sum() / max(est["crds"].sum(), 1),
                    math.nan,
                    math.nan,
                    est["seconds"].sum(),
                    est["seconds"].max(),
                    "events",
                )
            )
    return pd.DataFrame(
        rows,
        columns=["run", "metric", "unit", "per_crd", "difference_low", "difference_high", "end", "peak", "source"],
    )


def repeat_spread_table(comparison: Comparison, metric: str = "bytes", phase: str = "served") -> pd.DataFrame:
    """The repeats' spread by configuration and cause, in KiB per CRD (largest mean first, total last)."""
    sel = comparison.repeat_spread
    sel = sel[(sel["metric"] == metric) & (sel["phase"] == phase)].copy()
    if not len(sel):
        return pd.DataFrame()
    sel["_total"] = sel["cause"] == TOTAL
    sel = sel.sort_values(["configuration", "_total", "mean"], ascending=[True, True, False], kind="stable")
    kib = 1024.0
    return pd.DataFrame(
        {
            "configuration": sel["configuration"].to_numpy(),
            "cause": sel["cause"].to_numpy(),
            "repeats": sel["repeats"].to_numpy(),
            "mean (KiB/CRD)": (sel["mean"] / kib).round(1).to_numpy(),
            "95% CI": [f"[{lo / kib:.1f}, {hi / kib:.1f}]" for lo, hi in zip(sel["low"], sel["high"])],
            "between-run sd": (sel["between_sd"] / kib).round(1).to_numpy(),
            "one run ±": (sel["within_half_width"] / kib).round(1).to_numpy(),
            "sd / one run's se": sel["sd_ratio"].round(2).to_numpy(),
            "repeats for ±10%": sel["repeats_for_10pct"].to_numpy(),
        }
    )
