"""Cost per object: heap by cause against the objects a run added, and the amplification ratio.

A run with ``steps.grow = "objects"`` installs its CRDs, then adds objects one
kind per step (custom resources, ConfigMaps, Secrets: see
:meth:`crdscale.scenario.config.Scenario.object_steps`). Each step's increment
(its profile minus the one before) therefore belongs to one kind, and the
error model of :mod:`crdscale.analysis.intervals` applies as it does to CRDs,
with objects of that kind as the x: the estimate is the kind's summed growth
over the objects it added (``ΣΔy / ΣΔx``), its interval Student's t from the
spread of its increments.

The **amplification ratio** is the heap an object holds over its serialized
size: the size of one object read back as JSON (``stored_bytes``: the server's fields and
``managedFields`` included; the ratio's denominator), beside the size the server
itself reports (``apiserver_resource_size_estimate_bytes`` over the objects: protobuf
for built-ins; none for custom resources in v1.37.1) and the bytes crdscale sent
(``sent_bytes``), so each checks the others.

Pure: DataFrames in, DataFrames out. The registry's ``per_object`` entry
(:mod:`crdscale.analysis.registry`) computes the view for a run that grew objects (:func:`compute`)
and says it in each output: ``analyze``'s text (:func:`text_lines`), the key numbers
(:func:`findings_rows`), ``findings.md``'s LISTs (:func:`report_sections`) and ``compare``
(:func:`compare_runs`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from crdscale.analysis.attribution import OTHER
from crdscale.analysis.intervals import (
    GO_HEAP_SAMPLING_RATE,
    Estimate,
    increments_estimate,
)
from crdscale.analysis.named import NamedAnalysis, Section, Table
from crdscale.analysis.percrd import series_points
from crdscale.analysis.pooled import configuration_differences
from crdscale.analysis.rundata import object_points
from crdscale.analysis.targets import TOTAL
from crdscale.crds.objects import CUSTOM_RESOURCES
from crdscale.rundir import layout
from crdscale.units import fmt_bytes, fmt_interval, fmt_per_crd, is_missing

if TYPE_CHECKING:
    from crdscale.analysis.named import CompareContext, RunData

# The server's own estimate of what a resource's objects take in etcd (summed serialized sizes).
SIZE_ESTIMATE_METRIC = "apiserver_resource_size_estimate_bytes"

PER_OBJECT_COLUMNS = [
    "kind", "metric", "cause", "per_object", "per_object_low", "per_object_high", "per_object_se", "dof",
    "increments", "objects", "share",
]  # fmt: skip
AMPLIFICATION_COLUMNS = [
    "kind", "objects", "heap_per_object", "heap_per_object_low", "heap_per_object_high",
    "sent_bytes", "stored_bytes", "server_estimate_bytes", "serialized_bytes", "serialized_source",
    "amplification", "amplification_low", "amplification_high",
]  # fmt: skip


# Causes a profile may catch in flight that belong to no object: left out of each profile's total
# before the fits (still fitted and shown on their own). The watch cache's consistency checker
# (crdscale.analysis.attribution.OBJECT_RULES) holds a decoded page of up to 10,000 objects while it
# LISTs a resource from etcd: caught by a ConfigMap step's profile, it charged 95 MiB of custom
# resources to the ConfigMaps (scenarios/objects-124680.toml) and took them back at the next step.
TRANSIENT_CAUSES = ("consistency-check",)


def without_transients(points: pd.DataFrame) -> pd.DataFrame:
    """``points`` with each profile's ``total`` less its :data:`TRANSIENT_CAUSES` (same columns)."""
    if points.empty or not points["cause"].isin(TRANSIENT_CAUSES).any():
        return points
    transient = points[points["cause"].isin(TRANSIENT_CAUSES)].groupby(["step", "metric"])["value"].sum()
    out = points.copy()
    is_total = out["cause"] == TOTAL
    keys = pd.MultiIndex.from_frame(out.loc[is_total, ["step", "metric"]])
    out.loc[is_total, "value"] = (
        out.loc[is_total, "value"].to_numpy() - transient.reindex(keys, fill_value=0).to_numpy()
    )
    return out


def object_increments(points: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Each object step's increment per ``metric, cause``: ``kind, step, objects, delta``.

    ``points`` has ``step, metric, cause, value`` (heap by cause at each step's profile);
    ``steps`` has ``step, kind, objects_in_step`` for the object steps. A step's increment is
    its profile minus the previous step's; a step whose own or previous profile is missing
    is left out (its growth cannot be told apart from its neighbour's).
    """
    columns = ["kind", "step", "objects", "metric", "cause", "delta"]
    if points.empty or steps.empty:
        return pd.DataFrame(columns=columns)
    wide = points.pivot_table(index="step", columns=["metric", "cause"], values="value", aggfunc="mean")
    rows = []
    for r in steps.itertuples(index=False):
        if r.step not in wide.index or (r.step - 1) not in wide.index or r.objects_in_step <= 0:
            continue
        delta = wide.loc[r.step] - wide.loc[r.step - 1]
        for (metric, cause), value in delta.items():
            if not math.isnan(value):
                rows.append((r.kind, int(r.step), int(r.objects_in_step), metric, cause, float(value)))
    return pd.DataFrame(rows, columns=columns)


def fit_per_object(points: pd.DataFrame, steps: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Bytes (and heap objects) per object of each kind, by cause, with intervals.

    From :func:`object_increments`: per ``kind, metric, cause`` the summed growth over the
    objects added, with a t interval from the increments' spread (NaN with one increment; for
    bytes, when no heap sample came or went, the bounds no sample allows). ``share``: the
    cause's fraction of the kind's total. The total leaves out :data:`TRANSIENT_CAUSES` (a
    consistency check in flight is no object's cost): they are fitted and shown, with no share.
    Returns :data:`PER_OBJECT_COLUMNS` per kind and metric: the causes held, biggest first, then the
    transient ones, then ``total``.
    """
    points = without_transients(points)
    increments = object_increments(points, steps)
    if increments.empty:
        return pd.DataFrame(columns=PER_OBJECT_COLUMNS)
    first_step = int(steps["step"].min()) - 1
    before = points[points["step"] == first_step].set_index(["metric", "cause"])["value"]
    rows = []
    for (kind, metric, cause), group in increments.groupby(["kind", "metric", "cause"], sort=False):
        e = increments_estimate(
            group["objects"],
            group["delta"],
            confidence,
            resolution=float(GO_HEAP_SAMPLING_RATE) if metric == "bytes" else 0.0,
            first=float(before.get((metric, cause), 0.0)),
        )
        rows.append((kind, metric, cause, e.value, e.low, e.high, e.se, e.dof, len(group), int(group["objects"].sum())))
    out = pd.DataFrame(rows, columns=PER_OBJECT_COLUMNS[:-1])
    # Series have no total: their share is left undefined.
    totals = out[out["cause"] == TOTAL].set_index(["kind", "metric"])["per_object"]
    denominator = totals.reindex(pd.MultiIndex.from_frame(out[["kind", "metric"]])).to_numpy()
    out["share"] = np.where(denominator != 0, out["per_object"] / denominator, np.nan)
    # A transient is not in the total it would be a share of (a check caught in a ConfigMap step can be
    # many times a ConfigMap's heap, and sorted first by size): no share, and after the causes held.
    transient = out["cause"].isin(TRANSIENT_CAUSES)
    out.loc[transient, "share"] = np.nan
    out["_rank"] = np.select([transient, out["cause"] == TOTAL], [1, 2], default=0)
    out = out.sort_values(["kind", "metric", "_rank", "per_object"], ascending=[True, True, True, False])
    return out.drop(columns="_rank").reset_index(drop=True)


# Series read at each object step's profile, fitted per object like the heap: (job, metric) -> label.
# kube-controller-manager's heap holds the garbage collector's and quota controller's metadata
# informers (every object's metadata), etcd's database holds every object once more.
SERIES_PER_OBJECT = {
    ("kube-apiserver-proc", "process_resident_memory_bytes"): "kube-apiserver RSS",
    ("kube-apiserver", "go_memstats_heap_inuse_bytes"): "kube-apiserver heap in use (metrics)",
    ("kube-controller-manager", "go_memstats_heap_inuse_bytes"): "kube-controller-manager heap in use",
    ("kube-controller-manager-proc", "process_resident_memory_bytes"): "kube-controller-manager RSS",
    ("etcd", "etcd_mvcc_db_total_size_in_use_in_bytes"): "etcd database in use",
    ("etcd", "process_resident_memory_bytes"): "etcd RSS",
}
SERIES_METRIC = "series"


def series_step_points(series: pd.DataFrame | None, marks: pd.DataFrame) -> pd.DataFrame:
    """Each series of :data:`SERIES_PER_OBJECT` at each step's mark (``marks``: ``step, timestamp``):
    ``step, metric, cause, value`` with ``metric`` = :data:`SERIES_METRIC` and ``cause`` the series'
    label, so :func:`fit_per_object` fits them as it fits the heap (last sample at or before a mark,
    summed over labels)."""
    columns = ["step", "metric", "cause", "value"]
    if series is None or not len(series) or marks.empty:
        return pd.DataFrame(columns=columns)
    at = pd.DataFrame({"timestamp": marks["timestamp"], "crds": marks["step"], "phase": "served"})
    frames = []
    for (job, name), label in SERIES_PER_OBJECT.items():
        points = series_points(series, at, job=job, metrics={name: label})
        if len(points):
            frames.append(
                pd.DataFrame(
                    {"step": points["crds"], "metric": SERIES_METRIC, "cause": label, "value": points["value"]}
                )
            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def size_estimate_per_object(
    series: pd.DataFrame | None, objects: dict[str, int], resources: dict[str, list[str]]
) -> dict:
    """The server's own serialized size per object of each kind: the last recorded value of
    ``apiserver_resource_size_estimate_bytes`` summed over the kind's resources, over the kind's
    objects (``objects``: kind -> count at the end).

    ``resources`` maps a kind to the ``resource`` label values of its series (``configmaps``;
    the plural of each CRD). The last value, not the growth between steps: the estimate is
    refreshed on its own schedule and lags a step's writes. Kinds whose series is missing, 0
    (v1.37.1 keeps none for custom resources) or -1 (a fetching error) are left out; other
    objects of a built-in kind (a namespace's kube-root-ca.crt) count too, a few in thousands.
    """
    out: dict[str, float] = {}
    if series is None or len(series) == 0:
        return out
    data = series[series["metric"] == SIZE_ESTIMATE_METRIC]
    if "job" in data.columns:
        data = data[data["job"] == "kube-apiserver"]
    if data.empty:
        return out
    labels = data["labels"].map(_labels)
    ts = pd.to_datetime(data["timestamp"], utc=True)
    for kind, names in resources.items():
        sel = labels.map(lambda lab, names=names: lab.get("resource") in names)
        count = objects.get(kind, 0)
        if not sel.any() or count <= 0:
            continue
        one = pd.Series(data.loc[sel, "value"].to_numpy(), index=ts[sel]).groupby(level=0).sum().sort_index()
        last = float(one.iloc[-1])
        if last > 0:
            out[kind] = last / count
    return out


def _labels(text) -> dict[str, str]:
    """``{a="b",c="d"}`` or a dict -> dict."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        return {}

    try:
        value = json.loads(text)
        if isinstance(value, dict):
            return value
    except ValueError:
        pass
    out = {}
    for part in text.strip("{}").split(","):
        key, _, value = part.partition("=")
        if key:
            out[key.strip()] = value.strip().strip('"')
    return out


def amplification(
    per_object: pd.DataFrame, sizes: dict[str, dict], server_estimate: dict[str, float] | None = None
) -> pd.DataFrame:
    """Heap per object over its serialized size, per kind (:data:`AMPLIFICATION_COLUMNS`).

    ``per_object`` is :func:`fit_per_object`'s; ``sizes`` maps a kind to ``sent_bytes`` and
    ``stored_bytes`` (one object read back as JSON: the server's fields and managedFields
    included); ``server_estimate`` the server's own bytes per object as stored
    (:func:`size_estimate_per_object`: protobuf for built-ins, so smaller). The ratio divides by
    the stored JSON size, the same measure for every kind and #142062's (``serialized_source``
    says which was used), else by the server's estimate, else by the bytes sent.
    """
    rows = []
    server_estimate = server_estimate or {}
    totals = per_object[(per_object["cause"] == TOTAL) & (per_object["metric"] == "bytes")]
    for r in totals.itertuples(index=False):
        size = sizes.get(r.kind, {})
        sent, stored = size.get("sent_bytes"), size.get("stored_bytes")
        estimate = server_estimate.get(r.kind)
        for source, value in (("stored JSON", stored), ("server estimate", estimate), ("sent", sent)):
            if value:
                serialized, serialized_source = float(value), source
                break
        else:
            serialized, serialized_source = math.nan, None
        rows.append(
            (
                r.kind,
                r.objects,
                r.per_object,
                r.per_object_low,
                r.per_object_high,
                sent,
                stored,
                estimate,
                serialized,
                serialized_source,
                r.per_object / serialized,
                r.per_object_low / serialized,
                r.per_object_high / serialized,
            )
        )
    return pd.DataFrame(rows, columns=AMPLIFICATION_COLUMNS)


def ratio_between(per_object: pd.DataFrame, kind: str, other: str) -> float:
    """How many times the heap one ``kind`` object holds is another ``other`` object's (total bytes)."""
    totals = per_object[(per_object["cause"] == TOTAL) & (per_object["metric"] == "bytes")].set_index("kind")
    if kind not in totals.index or other not in totals.index or totals.loc[other, "per_object"] <= 0:
        return math.nan
    return float(totals.loc[kind, "per_object"] / totals.loc[other, "per_object"])


# --- what a LIST of the objects costs (objects.list_repeats) ----------------------------------

LIST_COST_COLUMNS = [
    "kind", "list", "resources", "items", "bytes", "latency_p50_s", "latency_p95_s", "latency_max_s",
    "apiserver_cpu_s", "etcd_cpu_s", "served_from", "repeats",
]  # fmt: skip


def list_costs(lists: pd.DataFrame) -> pd.DataFrame:
    """What one LIST of each kind's objects cost, per LIST kind (:data:`LIST_COST_COLUMNS`).

    ``lists`` holds the rows of the LIST probe's ``measure_targets`` (the run's objects): one per
    resource and LIST kind, ``object_kind`` naming the kind of object. A kind spread over several
    resources (a custom resource per CRD) is LISTed resource by resource: its row is the mean over
    them of each LIST's latency (median ``p50``, ``p95``; ``max`` the largest) and of the CPU
    seconds kube-apiserver and etcd spent per LIST, net of an idle window; ``items`` and ``bytes``
    per LIST, also means. ``served_from`` is where the server's counters say each was served
    (``cache``, ``etcd``; several joined by ``/`` when the resources differ).
    """
    if lists is None or lists.empty or "object_kind" not in lists.columns:
        return pd.DataFrame(columns=LIST_COST_COLUMNS)
    rows = []
    for (kind, request), group in lists.groupby(["object_kind", "kind"], sort=False):
        places = "/".join(dict.fromkeys(str(p) for p in group["served_from"]))
        p95 = group["latency_p95_s"] if "latency_p95_s" in group else group["latency_max_s"]
        rows.append(
            (
                kind,
                request,
                int(group["resource"].nunique()),
                float(group["items"].mean()),
                float(group["bytes"].mean()),
                float(group["latency_s"].mean()),
                float(p95.mean()),
                float(group["latency_max_s"].max()),
                float(group["cpu_s"].mean()),
                float(group["etcd_cpu_s"].mean()),
                places,
                int(group["repeats"].min()),
            )
        )
    return pd.DataFrame(rows, columns=LIST_COST_COLUMNS)


CELL_COLUMNS = [
    "run", "kind", "heap_per_object", "heap_per_object_low", "heap_per_object_high", "list", "served_from",
    "latency_p50_s", "latency_p95_s", "latency_max_s", "apiserver_cpu_s", "etcd_cpu_s",
]  # fmt: skip


def cost_moved(per_object: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """Runs side by side (a ``run`` column in both): each kind's heap per object beside what a LIST
    of its objects cost, one row per run, kind and LIST kind (:data:`CELL_COLUMNS`). Where a
    resource's watch cache is off its heap per object falls and its LISTs' latency and etcd CPU
    rise: the table says how much of each. ``per_object`` is stacked :func:`fit_per_object`
    tables, ``costs`` stacked :func:`list_costs` tables; a run without LISTs gets one row per kind
    with the LIST columns empty."""
    if per_object is None or per_object.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    totals = per_object[(per_object["cause"] == TOTAL) & (per_object["metric"] == "bytes")]
    costs = costs if costs is not None and len(costs) else pd.DataFrame(columns=["run", *LIST_COST_COLUMNS])
    rows = []
    for t in totals.itertuples(index=False):
        heap = (t.run, t.kind, t.per_object, t.per_object_low, t.per_object_high)
        mine = costs[(costs["run"] == t.run) & (costs["kind"] == t.kind)]
        if mine.empty:
            rows.append((*heap, None, None, *([math.nan] * 5)))
        for c in mine.itertuples(index=False):
            rows.append(
                (
                    *heap,
                    c.list,
                    c.served_from,
                    c.latency_p50_s,
                    c.latency_p95_s,
                    c.latency_max_s,
                    c.apiserver_cpu_s,
                    c.etcd_cpu_s,
                )
            )
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


PER_OBJECT_JOINT_COLUMNS = [
    "run", "reference", "kind", "cause", "per_object_reference", "per_object",
    "difference", "difference_low", "difference_high", "relative",
]  # fmt: skip


def per_object_differences(
    per_object: pd.DataFrame,
    reference: str,
    confidence: float = 0.95,
    replicates: Mapping[str, str] | None = None,
    spread: str = "own",
) -> pd.DataFrame:
    """Heap bytes per object of each kind and cause, each run minus ``reference``, with the
    difference's interval from both runs' own variances (Welch: :func:`~crdscale.analysis.intervals.difference`).
    ``per_object`` is stacked :func:`~crdscale.analysis.perobject.fit_per_object` tables (a ``run`` column).
    With ``replicates`` (label -> configuration) the repeats of a configuration are pooled, as for the
    per-CRD differences: their mean, the interval from their spread, and ``reference`` names a configuration;
    ``spread="pooled"``: the spread pooled over every configuration (:mod:`crdscale.analysis.pooled`)."""
    rows = []
    replicates = replicates or {}
    if per_object.empty:
        return pd.DataFrame(columns=PER_OBJECT_JOINT_COLUMNS)
    data = per_object[per_object["metric"] == "bytes"].copy()
    data["config"] = data["run"].map(lambda label: replicates.get(label, label))
    if reference not in set(data["config"]):
        return pd.DataFrame(columns=PER_OBJECT_JOINT_COLUMNS)

    def estimate(r) -> Estimate:
        return Estimate(r["per_object"], r["per_object_se"], r["dof"], r["per_object_low"], r["per_object_high"])

    runs = {
        (config, kind, cause): [estimate(r) for r in group.to_dict("records")]
        for (config, kind, cause), group in data.groupby(["config", "kind", "cause"], sort=False)
    }
    differences = {}
    for kind, cause in dict.fromkeys((k, c) for _, k, c in runs):
        if (reference, kind, cause) not in runs:
            continue
        mine = {config: e for (config, k, c), e in runs.items() if (k, c) == (kind, cause)}
        combined, diffs = configuration_differences(mine, reference, confidence, spread)
        differences.update(
            {(config, kind, cause): (combined[reference], combined[config], d) for config, d in diffs.items()}
        )
    for config, kind, cause in runs:
        if config == reference or (config, kind, cause) not in differences:
            continue
        b, e, d = differences[(config, kind, cause)]
        relative = d.value / b.value if b.value else math.nan
        rows.append((config, reference, kind, cause, b.value, e.value, d.value, d.low, d.high, relative))
    return pd.DataFrame(rows, columns=PER_OBJECT_JOINT_COLUMNS)


# --------------------------------------------------------------------------
# The registry's entry: a run that grew objects, in every output
# --------------------------------------------------------------------------


def applies(data: RunData) -> bool:
    """A run that grew objects (``steps.grow = "objects"``: its events record object steps)."""
    return data.run is not None and len(data.run.object_steps) > 0


def compute(data: RunData) -> dict[str, pd.DataFrame]:
    """The per-object view of a run that grew objects: ``per_object`` (:func:`fit_per_object`, plus the
    memory series at the same steps), ``amplification`` (:func:`amplification`) and ``object_lists``
    (what a LIST of each kind cost, ``objects.list_repeats``: :func:`list_costs`; empty otherwise)."""
    run = data.run
    steps = run.object_steps
    heap = run.heap_profiles()
    ends = heap[heap["phase"].isna() | (heap["phase"] == "")][["step", "timestamp"]]
    points = object_points(run, profiles=data.profiles)
    # The memory series at the same marks (kube-controller-manager's informers, etcd), fitted alike.
    series = series_step_points(run.series, ends)
    if len(series):
        points = pd.concat([points, series.assign(phase="served")], ignore_index=True)
    fits = fit_per_object(points, steps, data.confidence)
    info = run.manifest.objects
    counts = steps.groupby("kind")["objects_in_step"].sum().to_dict()
    estimate = size_estimate_per_object(run.series, counts, dict(info.resources))
    return {
        "per_object": fits,
        "amplification": amplification(fits, info.kinds_json(), estimate),
        "object_lists": list_costs(run.probe_table(*layout.OBJECT_LISTS)),
    }


def text_lines(result: Mapping[str, pd.DataFrame], metric: str = "bytes", confidence: float = 0.95) -> list[str]:
    """``crdscale analyze``'s per-object view (no lines without per-object fits): heap per object of
    each kind by cause, the series at the same steps, the amplification ratio and the LISTs' cost."""
    per_object = result.get("per_object")
    if per_object is None or not len(per_object):
        return []
    level = f"{100 * confidence:g}% CI"
    lines = []
    for kind, fits in per_object[per_object["metric"] == metric].groupby("kind", sort=True):
        lines.append("")
        lines.append(
            f"Heap in use per object of {kind} ({metric}; {int(fits['objects'].iloc[0]):,} objects added in "
            f"{int(fits['increments'].iloc[0])} steps; {level}):"
        )
        for r in fits.itertuples(index=False):
            ci = f"[{fmt_per_crd(r.per_object_low, metric)}, {fmt_per_crd(r.per_object_high, metric)}]"
            if r.cause in TRANSIENT_CAUSES:
                share = "transient, not in total"
            else:
                share = "" if is_missing(r.share) else f"{100 * r.share:6.1f}%"
            lines.append(f"{r.cause:<18} {fmt_per_crd(r.per_object, metric):>14} {ci:>29} {share:>7}")
    series = per_object[per_object["metric"] == "series"]
    if len(series):
        lines.append("")
        lines.append(f"From the series at the same steps (bytes per object; {level}; RSS is noisy: freed heap stays):")
        for r in series.sort_values(["kind", "cause"]).itertuples(index=False):
            ci = f"[{fmt_per_crd(r.per_object_low, 'bytes')}, {fmt_per_crd(r.per_object_high, 'bytes')}]"
            lines.append(f"{r.kind:<16} {r.cause:<38} {fmt_per_crd(r.per_object, 'bytes'):>12} {ci:>29}")
    amp = result.get("amplification")
    if amp is not None and len(amp):
        lines.append("")
        lines.append(f"Amplification (heap per object / serialized size; {level}):")
        for r in amp.itertuples(index=False):
            lines.append(
                f"{r.kind:<18} {r.amplification:6.1f}x [{r.amplification_low:.1f}, {r.amplification_high:.1f}]  "
                f"heap {fmt_per_crd(r.heap_per_object, 'bytes')} / {fmt_per_crd(r.serialized_bytes, 'bytes')} ({r.serialized_source}); "
                f"sent {fmt_per_crd(r.sent_bytes, 'bytes')}, stored {fmt_per_crd(r.stored_bytes, 'bytes')}"
                + (
                    f", server estimate {fmt_per_crd(r.server_estimate_bytes, 'bytes')}"
                    if not is_missing(r.server_estimate_bytes)
                    else ""
                )
            )
    return lines + object_lists_lines(result.get("object_lists"))


def object_lists_lines(costs: pd.DataFrame | None) -> list[str]:
    """What one LIST of each kind's objects cost (:func:`list_costs`), as text lines."""
    if costs is None or not len(costs):
        return []
    lines = [
        "",
        f"LISTs of the objects (per LIST, {int(costs['repeats'].min())} repeats; CPU net of an idle window):",
        f"{'kind':<16} {'LIST':<18} {'from':<6} {'items':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} "
        f"{'apiserver CPU ms':>16} {'etcd CPU ms':>11}",
    ]
    for r in costs.itertuples(index=False):
        lines.append(
            f"{r.kind:<16} {r.list:<18} {r.served_from:<6} {r.items:7.0f} {1000 * r.latency_p50_s:8.1f} "
            f"{1000 * r.latency_p95_s:8.1f} {1000 * r.latency_max_s:8.1f} {1000 * r.apiserver_cpu_s:16.1f} "
            f"{1000 * r.etcd_cpu_s:11.1f}"
        )
    return lines


# How the per-object view names its kinds in sentences.
KIND_LABELS = {CUSTOM_RESOURCES: "custom resource", "configmaps": "ConfigMap", "secrets": "Secret"}


def main_kind(kinds) -> str:
    """The kind a one-line answer speaks of: the custom resources when the runs made any (a control kind of
    ConfigMaps or Secrets only stands beside them), else the first kind."""
    kinds = list(dict.fromkeys(kinds))
    return CUSTOM_RESOURCES if CUSTOM_RESOURCES in kinds or not kinds else kinds[0]


def kind_label(kind: str | None) -> str:
    """``custom resource``, ``ConfigMap``, ``Secret`` (:data:`KIND_LABELS`), or the kind itself."""
    return KIND_LABELS.get(kind or CUSTOM_RESOURCES, str(kind))


def findings_rows(result: Mapping[str, pd.DataFrame], top_causes: int = 5) -> list[tuple]:
    """Key-numbers rows (:data:`crdscale.report.findings.NUMBER_COLUMNS`) for a run that grew objects (none otherwise): per kind, the
    heap per object with its interval, the bytes sent per object, the amplification ratio and the
    largest causes; custom resources over each control kind."""
    per_object = result.get("per_object")
    if per_object is None or not len(per_object):
        return []
    amp = result.get("amplification", pd.DataFrame())
    amp = amp.set_index("kind") if len(amp) else amp
    nan, rows = math.nan, []
    bytes_ = per_object[per_object["metric"] == "bytes"]
    for kind in sorted(bytes_["kind"].unique(), key=lambda k: (k != CUSTOM_RESOURCES, k)):
        fits = bytes_[bytes_["kind"] == kind]
        label = KIND_LABELS.get(kind, kind)
        total = fits[fits["cause"] == TOTAL].iloc[0]
        source = f"growth over {int(total['increments'])} steps adding {int(total['objects']):,} {kind}"
        rows.append(
            (
                f"heap_per_object:{kind}",
                f"Heap in use per {label}",
                float(total["per_object"]),
                float(total["per_object_low"]),
                float(total["per_object_high"]),
                "bytes/object",
                source + ", interval from their increments",
            )
        )
        if kind in getattr(amp, "index", ()):
            a = amp.loc[kind]
            if a["sent_bytes"]:
                rows.append(
                    (
                        f"object_bytes:{kind}",
                        f"JSON bytes per {label} as sent",
                        float(a["sent_bytes"]),
                        nan,
                        nan,
                        "bytes",
                        "objects.bytes",
                    )
                )
            if not math.isnan(a["serialized_bytes"]):
                rows.append(
                    (
                        f"serialized_bytes:{kind}",
                        f"Serialized size per {label} as stored",
                        float(a["serialized_bytes"]),
                        nan,
                        nan,
                        "bytes",
                        str(a["serialized_source"]),
                    )
                )
                rows.append(
                    (
                        f"amplification:{kind}",
                        f"Amplification: heap per {label} / its serialized size",
                        float(a["amplification"]),
                        float(a["amplification_low"]),
                        float(a["amplification_high"]),
                        "x",
                        f"heap per object / {a['serialized_source']}",
                    )
                )
        series = per_object[(per_object["metric"] == "series") & (per_object["kind"] == kind)].set_index("cause")
        for name in ("kube-controller-manager heap in use", "etcd database in use"):
            if name in series.index:
                r = series.loc[name]
                rows.append(
                    (
                        f"object_series:{kind}:{name}",
                        f"{name[0].upper() + name[1:]} per {label}",
                        float(r["per_object"]),
                        float(r["per_object_low"]),
                        float(r["per_object_high"]),
                        "bytes/object",
                        "metrics series at the same steps, interval from their increments",
                    )
                )
        # A transient caught in flight (a consistency check's LIST) is no object's cause.
        causes = fits[~fits["cause"].isin([TOTAL, OTHER, *TRANSIENT_CAUSES])].sort_values(
            "per_object", ascending=False, kind="stable"
        )
        for r in causes.head(top_causes).itertuples(index=False):
            rows.append(
                (
                    f"object_cause:{kind}:{r.cause}",
                    f"per {label}: {r.cause} ({100 * r.share:.0f}%)",
                    float(r.per_object),
                    float(r.per_object_low),
                    float(r.per_object_high),
                    "bytes/object",
                    "heap profiles by cause (OBJECT_RULES)",
                )
            )
    kinds = list(bytes_["kind"].unique())
    if CUSTOM_RESOURCES in kinds:
        for other in [k for k in kinds if k != CUSTOM_RESOURCES]:
            ratio = ratio_between(per_object, CUSTOM_RESOURCES, other)
            if not math.isnan(ratio):
                rows.append(
                    (
                        f"ratio:{CUSTOM_RESOURCES}/{other}",
                        f"Heap per custom resource / per {KIND_LABELS.get(other, other)} of the same bytes",
                        ratio,
                        nan,
                        nan,
                        "x",
                        "heap per object, totals",
                    )
                )
    return rows


def object_lists_table(costs: pd.DataFrame) -> pd.DataFrame:
    """What a LIST of each kind's objects cost (:func:`list_costs`, or
    :func:`cost_moved`'s rows with ``run`` and the heap per object) as a
    readable table: latencies and CPU per LIST in ms."""
    if costs is None or not len(costs):
        return pd.DataFrame()

    def ms(values) -> list[str]:
        return ["" if is_missing(v) else f"{1000 * v:,.1f}" for v in values]

    out = pd.DataFrame()
    if "run" in costs.columns:
        out["run"] = costs["run"]
    out["kind"] = costs["kind"]
    if "heap_per_object" in costs.columns:
        out["heap per object"] = [fmt_bytes(v) for v in costs["heap_per_object"]]
        out["95% CI"] = [
            fmt_interval(lo, hi, "bytes") for lo, hi in zip(costs["heap_per_object_low"], costs["heap_per_object_high"])
        ]
    out["LIST"] = costs["list"].fillna("")
    out["served from"] = costs["served_from"].fillna("")
    if "items" in costs.columns:
        out["items"] = [f"{v:,.0f}" for v in costs["items"]]
    out["p50 ms"] = ms(costs["latency_p50_s"])
    out["p95 ms"] = ms(costs["latency_p95_s"])
    out["max ms"] = ms(costs["latency_max_s"])
    out["kube-apiserver CPU ms"] = ms(costs["apiserver_cpu_s"])
    out["etcd CPU ms"] = ms(costs["etcd_cpu_s"])
    return out


OBJECT_LISTS_NOTE = (
    "Each LIST of one resource's objects (a kind spread over several CRDs: the mean over them), timed after the last "
    "object step: latency p50/p95/max over the repeats (whole LIST, every page), CPU seconds of kube-apiserver and "
    "of etcd per LIST from `/proc`, net of an idle window; `served from` is what the server's own storage counters "
    "say (watch cache or etcd). `consistent` leaves resourceVersion unset, `rv0` sets it to 0, `paged` adds limit=500."
)


def report_sections(result: Mapping[str, pd.DataFrame]) -> list[Section]:
    """``findings.md``'s section on the LISTs of the objects, when the run timed them."""
    lists = object_lists_table(result.get("object_lists"))
    return [Section("LISTs of the objects", OBJECT_LISTS_NOTE, lists)] if len(lists) else []


def compare_runs(stacked: Mapping[str, pd.DataFrame], context: CompareContext) -> dict[str, pd.DataFrame]:
    """Runs that grew objects side by side: each run's ``per_object``, ``amplification`` and
    ``object_lists``, the differences of heap per object from the reference (``per_object_joint``:
    :func:`per_object_differences`, with two runs or more) and each LIST beside the heap per
    object (``cost_moved``: :func:`cost_moved`)."""
    per_object, lists = stacked.get("per_object", pd.DataFrame()), stacked.get("object_lists", pd.DataFrame())
    runs = per_object["run"].nunique() if len(per_object) else 0
    return {
        "per_object": per_object if len(per_object) else pd.DataFrame(),
        "amplification": stacked.get("amplification", pd.DataFrame()),
        "per_object_joint": per_object_differences(
            per_object, context.reference, context.confidence, context.replicates, context.spread
        )
        if runs > 1
        else pd.DataFrame(),
        "object_lists": lists,
        "cost_moved": cost_moved(per_object, lists),
    }


ANALYSIS = NamedAnalysis(
    name="per_object",
    applies=applies,
    compute=compute,
    tables=(
        Table("per_object", file="perobject.csv"),
        Table("amplification", file="amplification.csv"),
        Table("object_lists", file="object_lists.csv"),
    ),
    text=text_lines,
    findings=findings_rows,
    report=report_sections,
    compare=compare_runs,
)
