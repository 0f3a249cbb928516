"""What a CRD costs each process of the control plane: kube-apiserver, kube-controller-manager and etcd.

kube-apiserver's heap is attributed by cause (:mod:`crdscale.analysis.attribution`); the other two
processes' are not (the rules describe kube-apiserver's code), so each component gets its total: the
heap in use (bytes and objects) at every heap profile the run took of it, fitted against the CRDs
installed with the fit kube-apiserver's total uses (:func:`crdscale.analysis.percrd.fit_per_crd`:
growth over step increments, the heap sampling variance as the interval's floor), phase by phase,
and its RSS per CRD read at the same marks from the most complete record the run holds (``/proc``
every second, else the component's ``/metrics``), fitted as kube-apiserver's is.

A pair of functions, as every named analysis: :func:`compute` gives one run's table
(:data:`COMPONENT_COLUMNS`), :func:`compare` the differences of several runs from a reference, one
row per component and metric (Welch intervals, repeats pooled, as
:func:`crdscale.analysis.compare.per_crd_differences` does for causes). :func:`component_costs` is the
one-line answer a history of releases asks of a run: per component, heap and RSS per served CRD.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from crdscale.analysis.differences import JOINT_COLUMNS, per_crd_differences
from crdscale.analysis.named import CompareContext, NamedAnalysis, RunData, Table
from crdscale.analysis.percrd import (
    fit_per_crd,
    fit_series_per_crd,
    heap_profile_problem,
    profile_points,
    series_points,
)
from crdscale.analysis.pprof.decode import Profile
from crdscale.analysis.process import largest_gaps, process_source
from crdscale.analysis.rundata import crd_step_marks
from crdscale.analysis.targets import TOTAL
from crdscale.rundir.layout import APISERVER, COMPONENTS, PHASES, PROC_JOBS
from crdscale.rundir.manifest import Manifest
from crdscale.units import fmt_per_crd

if TYPE_CHECKING:
    from crdscale.rundir import Run

# One run's table: per component, phase and metric (``bytes``/``objects``: heap in use from its heap
# profiles; ``rss_bytes``: resident memory from its series), the per-CRD cost with its interval.
COMPONENT_COLUMNS = [
    "component", "phase", "metric", "per_crd", "per_crd_low", "per_crd_high", "per_crd_se", "dof",
    "base", "r2", "n", "source",
]  # fmt: skip
# The differences between runs: JOINT_COLUMNS with ``component`` for ``cause``.
COMPARE_COLUMNS = [c if c != "cause" else "component" for c in JOINT_COLUMNS]
HEAP_SOURCE = "heap profiles"
RSS_METRIC = {"process_resident_memory_bytes": "rss_bytes"}


def heap_points(profiles: Iterable[tuple[int, str | None, Profile]]) -> pd.DataFrame:
    """A component's heap in use at each profile: ``crds, phase, cause, metric, value, sampling_var`` of
    :func:`~crdscale.analysis.percrd.profile_points`, only its ``total`` rows (no cause rules: they
    describe kube-apiserver's code). ``profiles`` yields ``(crds, phase, profile)``."""
    points = profile_points(profiles, rules=())
    return points[points["cause"] == TOTAL].reset_index(drop=True)


def rss_points(series: pd.DataFrame | None, marks: pd.DataFrame, component: str) -> pd.DataFrame:
    """The component's RSS at each mark (``crds, phase, metric, value, source``), from its ``/proc`` job or
    its ``/metrics`` job, whichever recorded it more completely; empty when neither did."""
    jobs = (PROC_JOBS[component], component)
    metric = next(iter(RSS_METRIC))
    if not largest_gaps(series, metric, jobs):
        return pd.DataFrame(columns=["crds", "phase", "metric", "value", "source"])
    job = process_source(series, metric, jobs)
    return series_points(series, marks, job=job, metrics=RSS_METRIC).assign(source=job)


def fit_component(
    component: str,
    points: pd.DataFrame,
    rss: pd.DataFrame | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One component's rows of :data:`COMPONENT_COLUMNS`: its heap total per CRD (``points`` of
    :func:`heap_points`) by phase and metric, and its RSS per CRD (``rss`` of :func:`rss_points`)."""
    rows = []
    if len(points) and points["crds"].nunique() >= 2:
        fits, _ = fit_per_crd(points, confidence)
        for r in fits[fits["cause"] == TOTAL].itertuples(index=False):
            rows.append(
                (component, r.phase, r.metric, r.per_crd, r.per_crd_low, r.per_crd_high, r.per_crd_se, r.dof,
                 r.base, r.r2, r.n, HEAP_SOURCE)
            )  # fmt: skip
    if rss is not None and len(rss):
        source = str(rss["source"].iloc[0])
        for r in fit_series_per_crd(rss.drop(columns="source"), confidence).itertuples(index=False):
            rows.append(
                (component, r.phase, r.metric, r.per_crd, r.per_crd_low, r.per_crd_high, math.nan, math.nan,
                 r.base, r.r2, r.n, source)
            )  # fmt: skip
    return pd.DataFrame(rows, columns=COMPONENT_COLUMNS)


# --------------------------------------------------------------------------
# A run
# --------------------------------------------------------------------------


def run_points(run: Run, component: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(points, marks)`` of one component in a run: :func:`heap_points` of its usable heap profiles
    (those of the steps that added CRDs) and when each was taken (``timestamp, crds, phase``)."""
    rows = run.component_profiles(component)
    rows = rows[rows["kind"] == "heap"]
    if len(rows) and len(run.object_steps):  # object steps add objects, not CRDs
        rows = rows[~rows["step"].isin(run.object_steps["step"])]
    usable, decoded = [], []
    for r in rows.itertuples(index=False):
        profile = run.read_profile(r.file)
        if heap_profile_problem(profile) is None:
            phase = r.phase if isinstance(r.phase, str) and r.phase else None
            decoded.append((int(r.crds), phase, profile))
            usable.append(r.file)
    rows = rows[rows["file"].isin(usable)]
    marks = pd.DataFrame(
        {"timestamp": rows["timestamp"], "crds": rows["crds"].astype(int), "phase": rows["phase"].fillna("served")}
    ).reset_index(drop=True)
    return heap_points(decoded), marks


def skipped(manifest: Manifest | Mapping) -> dict[str, str]:
    """component -> why a run has no heap profiles of it, from its manifest's ``components`` (runs recorded
    before crdscale profiled them say so)."""
    recorded = Manifest.of(manifest).components
    out = {}
    for component in COMPONENTS[1:]:
        entry = recorded.get(component) or {}
        if entry.get("skipped"):
            out[component] = str(entry["skipped"])
        elif not entry:
            out[component] = "the run took no heap profiles of it (recorded before crdscale profiled it)"
    return out


# One run's points: per component, its heap totals at each of its profiles (``metric`` bytes/objects, with
# their ``sampling_var``) and its RSS at the same marks (``rss_bytes``, from the job named in ``source``).
POINT_COLUMNS = ["component", "crds", "phase", "metric", "value", "sampling_var", "source"]


def compute_points(
    run: Run, *, apiserver_points: pd.DataFrame | None = None, components: Sequence[str] = COMPONENTS
) -> pd.DataFrame:
    """What every per-component fit of ``run`` takes (:data:`POINT_COLUMNS`), kube-apiserver first.

    ``apiserver_points`` are kube-apiserver's points by cause when the caller has them
    (:meth:`crdscale.rundir.Run.heap_points`; their ``total`` rows are used), so its profiles are not
    decoded twice; the numbers are the same either way. A component without profiles of its own has
    its RSS read at kube-apiserver's marks."""
    frames = []
    for component in components:
        if component == APISERVER and apiserver_points is not None:
            points = apiserver_points[apiserver_points["cause"] == TOTAL]
            marks = crd_step_marks(run)
        else:
            points, marks = run_points(run, component)
        if not len(marks):
            marks = crd_step_marks(run)
        heap = points.drop(columns="cause").assign(component=component, source=HEAP_SOURCE)
        rss = rss_points(run.series, marks, component).assign(component=component, sampling_var=math.nan)
        frames += [f[POINT_COLUMNS] for f in (heap, rss) if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=POINT_COLUMNS)


def fit_points(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """:data:`COMPONENT_COLUMNS` of :func:`compute_points`' points, component by component."""
    frames = []
    for component in dict.fromkeys(points["component"]):
        mine = points[points["component"] == component]
        heap = mine[mine["metric"] != RSS_METRIC["process_resident_memory_bytes"]]
        rss = mine[mine["metric"] == RSS_METRIC["process_resident_memory_bytes"]]
        frames.append(
            fit_component(
                component,
                heap.drop(columns=["component", "source"]).assign(cause=TOTAL),
                rss[["crds", "phase", "metric", "value", "source"]],
                confidence,
            )
        )
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COMPONENT_COLUMNS)


def compute(
    run: Run,
    confidence: float = 0.95,
    *,
    apiserver_points: pd.DataFrame | None = None,
    components: Sequence[str] = COMPONENTS,
) -> pd.DataFrame:
    """Per-CRD heap (bytes, objects) and RSS of each component of ``run`` (:data:`COMPONENT_COLUMNS`),
    kube-apiserver first: :func:`fit_points` of :func:`compute_points`. A component without profiles at
    two CRD counts has only its RSS rows, if any."""
    return fit_points(compute_points(run, apiserver_points=apiserver_points, components=components), confidence)


def component_costs(run: Run, confidence: float = 0.95, phase: str = "served") -> pd.DataFrame:
    """What a CRD costs each component of ``run`` in ``phase``, one row per component:
    ``component, heap_per_crd, heap_low, heap_high, rss_per_crd, rss_low, rss_high`` (bytes per CRD;
    NaN where the run has no record of it). What a history of releases asks of each run."""
    return costs_table(compute(run, confidence), phase)


def costs_table(table: pd.DataFrame, phase: str = "served") -> pd.DataFrame:
    """:func:`component_costs` of a :func:`compute` table."""
    columns = ["component", "heap_per_crd", "heap_low", "heap_high", "rss_per_crd", "rss_low", "rss_high"]
    rows = []
    sel = table[table["phase"] == phase] if len(table) else table
    for component in [c for c in COMPONENTS if c in set(sel["component"])]:
        mine = sel[sel["component"] == component].set_index("metric")
        values = [component]
        for metric in ("bytes", "rss_bytes"):
            if metric in mine.index:
                r = mine.loc[metric]
                values += [float(r["per_crd"]), float(r["per_crd_low"]), float(r["per_crd_high"])]
            else:
                values += [math.nan] * 3
        rows.append(values)
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------
# Runs against a reference
# --------------------------------------------------------------------------


def compare_points(
    points: pd.DataFrame,
    *,
    reference: str | None = None,
    confidence: float = 0.95,
    replicates: Mapping[str, str] | None = None,
    phase: str = "served",
) -> pd.DataFrame:
    """Per-CRD heap bytes and RSS of each component, each run (or configuration, with ``replicates``)
    against ``reference`` (default: the first run's): :data:`COMPARE_COLUMNS`, one row per compared run,
    component and metric (``bytes``, ``rss_bytes``), the difference's interval from both runs' own
    variances (Welch; repeats pooled: :func:`crdscale.analysis.compare.per_crd_differences`).
    ``points`` are runs' :func:`compute_points` one under the other, with a ``run`` column (the label)."""
    if not len(points):
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    if reference is None:
        first = points["run"].iloc[0]
        reference = (replicates or {}).get(first, first)
    data = points.rename(columns={"component": "cause"})
    frames = []
    # Heap points carry their sampling variance (the intervals' floor); RSS points have none.
    for metric, keep in (("bytes", ["sampling_var"]), ("rss_bytes", [])):
        sel = data[data["metric"] == metric][["run", "crds", "phase", "metric", "cause", "value", *keep]]
        if not len(sel) or reference not in {(replicates or {}).get(r, r) for r in sel["run"]}:
            continue
        frames.append(
            per_crd_differences(sel, reference=reference, phase=phase, confidence=confidence, replicates=replicates)
        )
    frames = [f for f in frames if len(f)]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=JOINT_COLUMNS)
    return out.rename(columns={"cause": "component"})[COMPARE_COLUMNS]


def compare(
    runs: Mapping[str, Run],
    *,
    reference: str | None = None,
    confidence: float = 0.95,
    replicates: Mapping[str, str] | None = None,
    apiserver_points: Mapping[str, pd.DataFrame] | None = None,
    phase: str = "served",
) -> pd.DataFrame:
    """:func:`compare_points` of runs: ``runs`` maps label -> :class:`~crdscale.rundir.Run`,
    ``apiserver_points`` label -> kube-apiserver's points by cause, when the caller has them."""
    points = [
        compute_points(run, apiserver_points=(apiserver_points or {}).get(label)).assign(run=label)
        for label, run in runs.items()
    ]
    stacked = pd.concat(points, ignore_index=True) if points else pd.DataFrame(columns=[*POINT_COLUMNS, "run"])
    return compare_points(stacked, reference=reference, confidence=confidence, replicates=replicates, phase=phase)


# --------------------------------------------------------------------------
# The registry's entry
# --------------------------------------------------------------------------

SKIPPED_COLUMNS = ["component", "reason"]


def applies(data: RunData) -> bool:
    """A run directory (its components' profiles and series are read from it)."""
    return data.run is not None


def compute_result(data: RunData) -> dict[str, pd.DataFrame]:
    """``components`` (:func:`fit_points`), ``component_points`` (:func:`compute_points`, what
    :func:`compare_result` takes) and ``components_skipped`` (``component, reason``: :func:`skipped`).
    kube-apiserver's points are the run's own (``data.points``), not decoded again."""
    points = compute_points(data.run, apiserver_points=data.points)
    why = skipped(data.manifest)
    return {
        "components": fit_points(points, data.confidence),
        "component_points": points,
        "components_skipped": pd.DataFrame(list(why.items()), columns=SKIPPED_COLUMNS),
    }


def compare_result(stacked: Mapping[str, pd.DataFrame], context: CompareContext) -> dict[str, pd.DataFrame]:
    """``components``: :func:`compare_points` of the runs' points against the reference, ``component_fits``:
    each run's own fits (:func:`fit_points`, with its ``run`` label: what a history pools by release), and
    ``components_skipped`` of every run (with its ``run`` label)."""
    points = stacked.get("component_points", pd.DataFrame())
    return {
        "component_fits": stacked.get("components", pd.DataFrame(columns=["run", *COMPONENT_COLUMNS])),
        "components": compare_points(
            points, reference=context.reference, confidence=context.confidence, replicates=context.replicates or None
        )
        if len(points)
        else pd.DataFrame(columns=COMPARE_COLUMNS),
        "components_skipped": stacked.get("components_skipped", pd.DataFrame()),
    }


def text_lines(result: Mapping[str, pd.DataFrame], metric: str = "bytes", confidence: float = 0.95) -> list[str]:
    """``crdscale analyze``'s block: per phase, each component's heap ``metric`` and RSS per CRD, then the
    components a run has no profiles of, with why."""
    table = result.get("components")
    why = result.get("components_skipped")
    missing = (
        [f"no {r.component} heap profiles: {r.reason}" for r in why.itertuples(index=False)] if why is not None else []
    )
    if table is None or not len(table):
        return ["", *missing] if missing else []
    level = f"{100 * confidence:g}% CI"
    lines = []
    for phase in [p for p in PHASES if p in set(table["phase"])]:
        sel = table[table["phase"] == phase]
        lines += [
            "",
            f"Per component, phase {phase} (heap {metric} from each one's own heap profiles, and RSS; per CRD, {level}):",
            f"{'component':<24} {'heap per CRD':>14} {level:>29} {'RSS per CRD':>14} {level:>29}",
        ]
        for component in dict.fromkeys(sel["component"]):
            mine = sel[sel["component"] == component].set_index("metric")
            cells = []
            for m, unit in ((metric, metric), ("rss_bytes", "bytes")):
                if m in mine.index:
                    r = mine.loc[m]
                    ci = f"[{fmt_per_crd(r['per_crd_low'], unit)}, {fmt_per_crd(r['per_crd_high'], unit)}]"
                    cells += [fmt_per_crd(r["per_crd"], unit), ci]
                else:
                    cells += ["", ""]
            lines.append(f"{component:<24} {cells[0]:>14} {cells[1]:>29} {cells[2]:>14} {cells[3]:>29}")
    return lines + missing


ANALYSIS = NamedAnalysis(
    name="components",
    applies=applies,
    compute=compute_result,
    tables=(
        Table("components", file="components.csv"),
        Table("component_points", json=False),
        Table("components_skipped"),
    ),
    text=text_lines,
    compare=compare_result,
)
