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

Pure: DataFrames in, DataFrames out (a run directory is read by
:meth:`crdscale.rundir.Run.analysis`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from crdscale.analysis.intervals import GO_HEAP_SAMPLING_RATE, increments_estimate
from crdscale.analysis.targets import TOTAL

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
    from crdscale.analysis.percrd import series_points

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
    import json

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
