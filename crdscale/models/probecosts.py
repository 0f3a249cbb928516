"""What the probes derive from their own rows, pure pandas: the same LIST from the watch cache and from
etcd side by side, whether kube-apiserver's memory under concurrent LISTs follows bytes or objects, and what
a client cache costs per object and per CRD.

The probes (``crdscale.collect.probes``) report these in their tables and run-manifest summaries; the
analysis (``crdscale.analysis.probes``) builds the notebooks' findings on them. Both import them from here,
below both: a probe never imports the analysis.
"""

from __future__ import annotations

import math

import pandas as pd

# What the cache-vs-etcd comparison puts side by side: (column in the probe's table, name in the comparison).
COMPARED = (
    ("latency_s", "latency"),
    ("cpu_s", "cpu"),
    ("alloc_bytes", "alloc"),
    ("etcd_cpu_s", "etcd_cpu"),
    ("fetched_objects", "fetched"),
)
# Ratios of the cost columns (etcd over cache); fetched objects are reported, not divided.
RATIOS = ("latency", "cpu", "alloc")


def cache_vs_etcd(lists: pd.DataFrame) -> pd.DataFrame:
    """The same LIST served from the watch cache and from etcd, side by side, per (resource, kind).

    Pairs rows of the LIST probe's table by where the server's own counters say each was
    served (``served_from``), not by which server was asked: a kind that both servers
    served from etcd (``exact-old``) has no cache row and no ratio. When several rows
    qualify, the first in table order is used (the probe writes the default server first).

    Returns one row per (resource, kind) in table order with ``items``/``bytes`` (of the
    cache row), ``same_response`` (both returned the same number of items), for each of
    latency, cpu, alloc, etcd_cpu and fetched a ``<name>_cache`` and ``<name>_etcd``
    column (units of the probe's columns: seconds, bytes, objects per request), the
    ratios ``latency_ratio``, ``cpu_ratio``, ``alloc_ratio`` (etcd / cache; NaN unless
    both are positive), ``apiserver_cache``/``apiserver_etcd`` (who served each) and a
    ``note`` for unpaired kinds.
    """
    columns = ["resource", "kind", "items", "bytes", "same_response", "apiserver_cache", "apiserver_etcd"]
    columns += [f"{name}_{place}" for _, name in COMPARED for place in ("cache", "etcd")]
    columns += [f"{name}_ratio" for name in RATIOS] + ["note"]
    if lists.empty:
        return pd.DataFrame(columns=columns)
    nan = float("nan")
    rows = []
    for (resource, kind), grp in lists.groupby(["resource", "kind"], sort=False):
        ok = grp[grp["status"] == 200] if "status" in grp else grp
        cache = ok[ok["served_from"] == "cache"]
        etcd = ok[ok["served_from"] == "etcd"]
        row: dict = {"resource": resource, "kind": kind}
        first = (cache if len(cache) else etcd if len(etcd) else grp).iloc[0]
        row["items"], row["bytes"] = first["items"], first["bytes"]
        c = cache.iloc[0] if len(cache) else None
        e = etcd.iloc[0] if len(etcd) else None
        row["apiserver_cache"] = c.get("apiserver", "") if c is not None else ""
        row["apiserver_etcd"] = e.get("apiserver", "") if e is not None else ""
        for column, name in COMPARED:
            row[f"{name}_cache"] = c.get(column, nan) if c is not None else nan
            row[f"{name}_etcd"] = e.get(column, nan) if e is not None else nan
        for name in RATIOS:
            cached, direct = row[f"{name}_cache"], row[f"{name}_etcd"]
            row[f"{name}_ratio"] = direct / cached if cached > 0 and direct > 0 else nan
        if c is not None and e is not None:
            row["same_response"] = bool(c["items"] == e["items"])
            row["note"] = "" if row["same_response"] else "different items: not the same LIST"
        else:
            row["same_response"] = False
            places = sorted(set(ok["served_from"]))
            row["note"] = f"only served from {', '.join(places)}" if places else "no LIST answered 200"
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _ratio(numerator: float, denominator: float) -> float:
    return (
        numerator / denominator
        if denominator and denominator == denominator and numerator == numerator
        else float("nan")
    )


def _closer_to(value: float, candidates: dict[str, float]) -> str:
    """The name of the candidate ratio nearest ``value`` on a log scale ("unknown" when it cannot be told)."""
    if not (value > 0) or any(not (c > 0) for c in candidates.values()):
        return "unknown"
    return min(candidates, key=lambda name: abs(math.log(value) - math.log(candidates[name])))


# The columns of :func:`shape_findings` (the list probe prints them in this order).
SHAPE_FINDING_COLUMNS = (
    "kind",
    "concurrency",
    "shape",
    "baseline_shape",
    "objects_ratio",
    "bytes_ratio",
    "heap_growth_ratio",
    "rss_growth_ratio",
    "cpu_per_request_ratio",
    "latency_p50_ratio",
    "heap_follows",
)


def shape_findings(load: pd.DataFrame) -> pd.DataFrame:
    """Does kube-apiserver's memory under concurrent LISTs follow response bytes or object count?

    ``load`` is the shape table of the list probe (``shape_load``): rows per (kind,
    shape, concurrency) for shapes of about the same data in few large or many small objects.
    For each (kind, concurrency), every shape is compared with the one of fewest objects.
    Returns one row each: ``kind``, ``concurrency``, ``shape``, ``baseline_shape``, and the
    ratios shape / baseline of ``objects``, response ``bytes`` per request,
    ``heap_growth`` (peak heap-in-use growth), ``rss_growth``, ``cpu_per_request`` and
    ``latency_p50``; ``heap_follows`` names the ratio (``bytes`` or ``objects``) the heap ratio
    is nearer on a log scale (``unknown`` when a growth is zero or missing).
    """
    columns = list(SHAPE_FINDING_COLUMNS)
    if load.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (kind, level), group in load.groupby(["kind", "concurrency"], sort=True):
        group = group.sort_values("objects")
        base = group.iloc[0]
        for _, row in group.iloc[1:].iterrows():
            bytes_ratio = _ratio(row["bytes"] / max(row["requests"], 1), base["bytes"] / max(base["requests"], 1))
            objects_ratio = _ratio(row["objects"], base["objects"])
            heap_ratio = _ratio(row["heap_inuse_growth_bytes"], base["heap_inuse_growth_bytes"])
            rows.append(
                {
                    "kind": kind,
                    "concurrency": level,
                    "shape": row["shape"],
                    "baseline_shape": base["shape"],
                    "objects_ratio": objects_ratio,
                    "bytes_ratio": bytes_ratio,
                    "heap_growth_ratio": heap_ratio,
                    "rss_growth_ratio": _ratio(row["rss_growth_bytes"], base["rss_growth_bytes"]),
                    "cpu_per_request_ratio": _ratio(
                        row["cpu_s"] / max(row["requests"], 1), base["cpu_s"] / max(base["requests"], 1)
                    ),
                    "latency_p50_ratio": _ratio(row["latency_p50_s"], base["latency_p50_s"]),
                    "heap_follows": _closer_to(heap_ratio, {"bytes": bytes_ratio, "objects": objects_ratio}),
                }
            )
    return pd.DataFrame(rows, columns=columns)


def clientmem_costs(runs: pd.DataFrame) -> pd.DataFrame:
    """What each client cache costs per object and per CRD, and against the full cache.

    ``runs`` has one row per crdscale-client ``cachemem`` run (see
    ``clientmem.cache_report`` in the probes), with ``cache`` (what was cached:
    ``crds`` for CRDs, otherwise objects of one CRD or built-in kind) and ``json_bytes``/``json_items``
    (one full JSON LIST of the same objects). Returns a copy with, in bytes:

    * ``heap_per_object_bytes``: the cache's Go heap (after a forced GC, net of the heap before the
      informer started) per cached object;
    * ``heap_per_crd_bytes``: the same per CRD the cache covers -- per object for a CRD cache, the
      whole cache for one CRD's custom resources, NaN for built-in kinds;
    * ``rss_per_object_bytes``: peak RSS growth over the process's baseline per object (sync
      transients included);
    * ``json_bytes_per_object`` and ``heap_per_json_byte``: the object's serialized size and the
      heap it takes per byte of it (the client's amplification);
    * ``ratio_to_full`` and ``rss_ratio_to_full``: heap per object and peak RSS over the ``full``
      mode's with the same WatchList setting (NaN without such a row).

    Rows of the Python stand-in (no heap columns) pass through with NaN.
    """
    out = runs.copy()
    if out.empty:
        return out
    nan = float("nan")
    items = out["items"].where(out["items"] > 0) if "items" in out else nan
    heap = out["cache_heap_bytes"] if "cache_heap_bytes" in out else nan
    out["heap_per_object_bytes"] = heap / items
    cache = out["cache"] if "cache" in out else pd.Series("", index=out.index)
    crds = items.where(cache == "crds", 1.0).where(cache.isin(["crds", "custom-resources"]), nan)
    out["heap_per_crd_bytes"] = heap / crds
    if {"peak_rss_kib", "baseline_rss_kib"} <= set(out):
        out["rss_per_object_bytes"] = (out["peak_rss_kib"] - out["baseline_rss_kib"]) * 1024 / items
    if {"json_bytes", "json_items"} <= set(out):
        out["json_bytes_per_object"] = out["json_bytes"] / out["json_items"].where(out["json_items"] > 0)
        out["heap_per_json_byte"] = out["heap_per_object_bytes"] / out["json_bytes_per_object"]
    out["ratio_to_full"] = nan
    out["rss_ratio_to_full"] = nan
    if "watch_list" in out:
        for _, group in out.groupby("watch_list", sort=False):
            full = group[group["mode"] == "full"]
            if full.empty:
                continue
            base = full.iloc[0]
            out.loc[group.index, "ratio_to_full"] = group["heap_per_object_bytes"] / base["heap_per_object_bytes"]
            out.loc[group.index, "rss_ratio_to_full"] = group["peak_rss_kib"] / base["peak_rss_kib"]
    return out
