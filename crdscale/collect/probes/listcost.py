"""LIST cost probe: latency, bytes and server cost per kind of LIST, and where the server served it from.

:func:`measure_lists` times each request kind from :mod:`.requests` on one or
more kube-apiservers and reads each server's counters around it to tell watch
cache from etcd, and its CPU and heap allocations per request; :func:`probe`
creates the objects (:func:`.listobjects.populate`), measures them on the
servers of :func:`crdscale.cluster.apiservers.apiservers` -- with the etcd
comparison, a second kube-apiserver with ``--watch-cache=false`` on a local
instance's etcd -- and optionally loads the server (:mod:`.listload`).
:func:`run` is the probe's entry point; with ``--load-shapes`` it runs the
shape experiment (:mod:`.listshapes`) instead. (``exact-old`` reaches etcd on
the default server only when the resource's watch cache is younger than the
revision asked for, and then lists no object.)
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from crdscale.cluster.apiservers import DEFAULT_APISERVER, ApiServer, apiservers
from crdscale.cluster.listing import ListTarget
from crdscale.errors import UsageError
from crdscale.models.probecosts import cache_vs_etcd
from crdscale.proc import rss_bytes, thread_cpu_seconds
from crdscale.units import is_missing

from . import ProbeResult, Section, requestcost, write_tables
from ._http import fresh_transport, is_loopback
from .configs import ListProbeConfig
from .fixtures import BUCKET_LABEL, ProbeFixtures
from .listload import concurrent_load
from .listobjects import ListResult, Populated, current_resource_version, execute, populate, wait_served
from .listshapes import run_shapes
from .requests import LIST_KINDS, ListRequest, build_list_requests

log = logging.getLogger(__name__)

# Background CPU and the scrapes' own allocations are measured over this long with no request.
IDLE_WINDOW_S = 1.0

# --- measuring -------------------------------------------------------------------


def _proc(pid: int | None) -> tuple[float, float] | None:
    if pid is None:
        return None
    cpu, rss = thread_cpu_seconds(pid), rss_bytes(pid)
    return None if cpu is None or rss is None else (cpu, float(rss))


def _etcd_cpu(server: ApiServer) -> float | None:
    return thread_cpu_seconds(server.etcd_pid) if server.etcd_pid is not None else None


@dataclass
class _Window:
    """Readings around some requests (or none): the server's and its etcd's."""

    readings: requestcost.CostReadings
    etcd_cpu_s: float | None


def _measure_window(server: ApiServer, work: Callable[[], object]) -> tuple[_Window, object]:
    """Scrape, read /proc, run ``work``, read /proc, scrape: /proc brackets only the work."""
    names = requestcost.LIST_METRIC_NAMES + requestcost.COST_METRIC_NAMES
    before = requestcost.scrape(server.cluster, names=names)
    proc_before, etcd_before = _proc(server.pid), _etcd_cpu(server)
    start = time.monotonic()
    result = work()
    seconds = time.monotonic() - start
    proc_after, etcd_after = _proc(server.pid), _etcd_cpu(server)
    after = requestcost.scrape(server.cluster, names=names)
    etcd_cpu = etcd_after - etcd_before if etcd_before is not None and etcd_after is not None else None
    return _Window(requestcost.CostReadings(before, after, seconds, proc_before, proc_after), etcd_cpu), result


def _etcd_cpu_per_request(window: _Window, idle: _Window | None, requests: int) -> float:
    if window.etcd_cpu_s is None:
        return float("nan")
    cpu = window.etcd_cpu_s
    if idle is not None and idle.etcd_cpu_s is not None and idle.readings.seconds > 0:
        cpu -= idle.etcd_cpu_s / idle.readings.seconds * window.readings.seconds
    return cpu / max(requests, 1)


def measure_lists(
    cluster,
    populated: Populated,
    *,
    servers: Sequence[ApiServer] | None = None,
    repeats: int = 3,
    page_size: int = 500,
    kinds: Iterable[str] = LIST_KINDS,
    read_metrics: bool = True,
    idle_window_s: float = IDLE_WINDOW_S,
) -> pd.DataFrame:
    """Time each LIST kind on each populated resource, on each of ``servers`` in turn
    (default: ``cluster`` alone), so that both servers see the same request one after the other.

    Returns one row per (resource, kind, apiserver): ``resource``, ``kind``,
    ``apiserver`` (the server's label), ``description``, ``path``, ``params`` (JSON),
    ``accept``, ``status``, ``items``, ``pages``, ``bytes`` (per execution, all pages),
    ``latency_s`` (median over repeats), ``latency_p95_s``, ``latency_min_s``, ``latency_max_s``,
    ``first_page_latency_s``, ``served_from`` (``cache``/``etcd``/``unknown``),
    ``served_from_evidence``, ``fetched_objects`` and ``returned_objects`` (per
    execution, from the server's storage counters), ``cpu_s`` and ``alloc_bytes`` (the
    server's CPU seconds and Go heap bytes allocated per execution, net of an idle
    window), ``etcd_cpu_s`` (per execution, local etcd only), ``rss_growth_bytes`` and
    ``heap_inuse_growth_bytes`` (across the repeats), ``cost_source``,
    ``expected_from_cache`` (what the APF estimator assumes), ``stored_objects``.
    Without ``read_metrics`` the place and costs are unknown (NaN). The idle window
    (``idle_window_s`` with no request) is the background the costs are net of.
    """
    kinds = tuple(kinds)
    servers = list(servers) if servers else [ApiServer(DEFAULT_APISERVER, cluster)]
    rows = []
    transports = {s.label: fresh_transport(s.cluster, pool_size=4) for s in servers}
    try:
        for target in populated.targets:
            rv = current_resource_version(transports[servers[0].label], servers[0].cluster, target)
            list_requests = build_list_requests(
                target,
                resource_version=rv,
                label_selector=f"{BUCKET_LABEL}=0",
                single_name=populated.names.get(target.group_resource),
                old_resource_version=populated.resource_version_before or None,
                page_size=page_size,
                kinds=kinds,
            )
            idle = (
                {s.label: _measure_window(s, lambda: time.sleep(idle_window_s))[0] for s in servers}
                if read_metrics
                else {}
            )
            for request in list_requests:
                for server in servers:
                    timed = _time_list(
                        server, transports[server.label], request, target, repeats, idle.get(server.label)
                    )
                    rows.append(_list_row(target, request, server, timed, populated))
                    log.info(
                        f"  {target.group_resource:>32} {request.kind:>24} {server.label:>20}: "
                        f"{rows[-1]['latency_s'] * 1000:8.1f} ms {rows[-1]['bytes'] / 2**20:9.3f} MiB "
                        f"{rows[-1]['items']:6d} items {timed.cost.cpu_s * 1000:7.1f} CPU-ms  [{timed.served.place}]"
                    )
    finally:
        for transport in transports.values():
            transport.close()
    return pd.DataFrame(rows)


@dataclass
class _TimedList:
    """One LIST request repeated on one server: each execution, and (when the server's metrics
    were read) where it was served from and what it cost per execution."""

    results: list[ListResult]
    repeats: int
    served: requestcost.ServedFrom
    cost: requestcost.RequestCost
    etcd_cpu_s: float
    metrics_read: bool


def _time_list(
    server: ApiServer, transport, request: ListRequest, target: ListTarget, repeats: int, idle: _Window | None
) -> _TimedList:
    """Send ``request`` once to warm up, then ``repeats`` times, inside a metrics window when
    ``idle`` (the server's idle window) is given."""
    execute(transport, server.cluster, request)  # warm-up: connection, caches, first-request costs

    def run() -> list[ListResult]:
        return [execute(transport, server.cluster, request) for _ in range(repeats)]

    if idle is None:
        nan = float("nan")
        served = requestcost.ServedFrom("unknown", 0, 0, 0, 0, 0, 0, "none", "metrics not read")
        return _TimedList(run(), repeats, served, requestcost.RequestCost(nan, nan, nan, nan, "none"), nan, False)
    window, results = _measure_window(server, run)
    served = requestcost.classify_served_from(
        window.readings.before,
        window.readings.after,
        target.group,
        target.resource,
        requests=repeats * results[0].pages,
    )
    cost = requestcost.request_cost(window.readings, repeats, idle.readings)
    return _TimedList(results, repeats, served, cost, _etcd_cpu_per_request(window, idle, repeats), True)


def _list_row(
    target: ListTarget, request: ListRequest, server: ApiServer, timed: _TimedList, populated: Populated
) -> dict:
    """The row of :func:`measure_lists`' table for one request on one server."""
    from crdscale.models.apf import served_from_cache

    results, repeats, served, cost = timed.results, timed.repeats, timed.served, timed.cost
    latencies = [r.latency_s for r in results]
    nan = float("nan")
    return {
        "resource": target.group_resource,
        "kind": request.kind,
        "apiserver": server.label,
        "description": request.description,
        "path": request.path,
        "params": request.params_json(),
        "accept": request.accept,
        "status": results[-1].status,
        "items": results[-1].items,
        "pages": results[0].pages,
        "bytes": results[-1].bytes,
        "latency_s": statistics.median(latencies),
        "latency_p95_s": float(pd.Series(latencies).quantile(0.95)),
        "latency_min_s": min(latencies),
        "latency_max_s": max(latencies),
        "first_page_latency_s": statistics.median(r.first_page_latency_s for r in results),
        "served_from": served.place,
        "served_from_evidence": served.evidence,
        "counter_scheme": served.scheme,
        "fetched_objects": served.fetched_objects / repeats if timed.metrics_read else nan,
        "returned_objects": served.returned_objects / repeats if timed.metrics_read else nan,
        "consistent_reads": served.consistent_reads / repeats,
        "etcd_revision_checks": served.etcd_revision_checks / repeats,
        "cpu_s": cost.cpu_s,
        "alloc_bytes": cost.alloc_bytes,
        "etcd_cpu_s": timed.etcd_cpu_s,
        "rss_growth_bytes": cost.rss_growth_bytes,
        "heap_inuse_growth_bytes": cost.heap_inuse_growth_bytes,
        "cost_source": cost.source,
        "expected_from_cache": served_from_cache(request.params),
        "stored_objects": populated.counts.get(target.group_resource, 0),
        "data_bytes_per_object": populated.data_bytes.get(target.group_resource, 0),
        "repeats": repeats,
    }


def measure_targets(
    cluster,
    targets: Mapping[str, Sequence[ListTarget]],
    counts: Mapping[str, int],
    *,
    repeats: int,
    page_size: int = 500,
    kinds: Iterable[str] = ("consistent", "rv0", "paged", "paged-rv0"),
    idle_window_s: float = IDLE_WINDOW_S,
) -> pd.DataFrame:
    """Time LISTs of objects something else created (the object steps of a run), as
    :func:`measure_lists` times the probe's own: ``targets`` maps a kind of object
    (``customresources``, ``configmaps``) to its resources, ``counts`` a resource
    (:attr:`ListTarget.group_resource`) to its objects.

    On a crdscale local instance the server's CPU comes from ``/proc`` and so does its
    etcd's: ``etcd_cpu_s`` per LIST is where a resource without a watch cache moves its
    cost. Returns :func:`measure_lists`' rows plus ``object_kind``.
    """
    kinds = tuple(kinds)
    frames = []
    with apiservers(cluster, compare_etcd=False) as found:
        for kind, resources in targets.items():
            populated = Populated(
                targets=list(resources), counts={t.group_resource: counts.get(t.group_resource, 0) for t in resources}
            )
            log.info(f"timing {', '.join(kinds)} LISTs of {kind} ({repeats} each)")
            frame = measure_lists(
                cluster,
                populated,
                servers=found.servers,
                repeats=repeats,
                page_size=page_size,
                kinds=kinds,
                idle_window_s=idle_window_s,
            )
            frames.append(frame.assign(object_kind=kind))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def server_object_stats(cluster, populated: Populated) -> pd.DataFrame:
    """The server's own object count and average size estimate per populated resource (NaN where not exposed)."""
    samples = requestcost.scrape(cluster, names=requestcost.OBJECT_COUNT_METRICS + requestcost.SIZE_ESTIMATE_METRICS)
    rows = []
    for target in populated.targets:
        stats = requestcost.object_stats(samples, target.group, target.resource)
        rows.append({"resource": target.group_resource, **stats})
    return pd.DataFrame(rows)


def probe(cluster, *, run_id: str, config: ListProbeConfig | None = None) -> dict[str, pd.DataFrame]:
    """Populate, measure every LIST kind (with ``config.compare_etcd`` on a second, etcd-only
    kube-apiserver too), optionally load the server (``config.load_levels``); clean up unless ``config.keep``.

    Returns ``{"lists": ..., "stats": ..., "apiservers": ..., "load": ...}``: ``apiservers``
    has one row per server measured (``apiserver``, ``server``, ``pid``) and a ``note``
    on the etcd comparison; ``load`` is empty without levels.
    """
    config = config or ListProbeConfig()
    config.validate()
    if config.load_levels and not (is_loopback(cluster.server) or config.allow_remote_load):
        raise UsageError(
            f"refusing concurrent load against {cluster.server}: pass --allow-remote-load for your own cluster"
        )
    with ProbeFixtures(cluster, run_id, keep=config.keep) as fixtures:
        # The second server starts while the objects are created: it reads them from etcd anyway.
        with apiservers(cluster, compare_etcd=config.compare_etcd, name_suffix=fixtures.instance) as found:
            populated = populate(fixtures, config)
            for server in found.servers[1:]:
                wait_served(server, populated)
            lists = measure_lists(
                cluster,
                populated,
                servers=found.servers,
                repeats=config.repeats,
                page_size=config.page_size,
                kinds=config.kinds,
            )
            servers = pd.DataFrame(
                [
                    {"apiserver": s.label, "server": s.cluster.server, "pid": s.pid, "note": found.note}
                    for s in found.servers
                ]
            )
            pid = found.servers[0].pid
        stats = server_object_stats(cluster, populated)
        load = pd.DataFrame()
        if config.load_levels:
            tables = []
            for target in populated.targets:
                for request in build_list_requests(
                    target, resource_version="", label_selector="", kinds=("rv0", "consistent")
                ):
                    table = concurrent_load(
                        cluster,
                        request,
                        concurrency_levels=config.load_levels,
                        requests_per_level=config.load_requests,
                        max_seconds_per_level=config.load_seconds,
                        allow_remote=config.allow_remote_load,
                        pid=pid,
                    )
                    tables.append(table.assign(resource=target.group_resource))
            load = pd.concat(tables, ignore_index=True)
    return {"lists": lists, "stats": stats, "apiservers": servers, "load": load}


# --- the probe's entry point -----------------------------------------------------

LIST_COLUMNS = (
    "resource",
    "kind",
    "apiserver",
    "items",
    "pages",
    "bytes",
    "latency_s",
    "cpu_s",
    "alloc_bytes",
    "fetched_objects",
    "served_from",
    "expected_from_cache",
    "status",
)
COMPARISON_COLUMNS = (
    "resource",
    "kind",
    "items",
    "bytes",
    "latency_cache",
    "latency_etcd",
    "latency_ratio",
    "cpu_cache",
    "cpu_etcd",
    "cpu_ratio",
    "alloc_cache",
    "alloc_etcd",
    "alloc_ratio",
    "etcd_cpu_etcd",
    "fetched_cache",
    "fetched_etcd",
    "note",
)
LOAD_COLUMNS = (
    "resource",
    "kind",
    "concurrency",
    "requests",
    "errors",
    "throughput_rps",
    "latency_p50_s",
    "latency_p99_s",
    "rss_before_bytes",
    "rss_max_bytes",
    "heap_inuse_max_bytes",
    "cpu_s",
)


def run(cluster, config: ListProbeConfig, writer, *, step: int = 0, run_id: str) -> ProbeResult:
    """The LIST probe (or, with ``config.load_shapes``, the shape experiment) as one step: measures,
    writes its tables into ``writer`` and returns them with the etcd/cache comparison derived from them."""
    if config.load_shapes:
        return run_shapes(cluster, config, writer, step=step, run_id=run_id)
    tables = probe(cluster, run_id=run_id, config=config)
    write_tables(writer, "list", step, tables, main="lists")
    lists = tables["lists"]
    note = tables["apiservers"]["note"].iloc[0]
    # Derived from the rows (crdscale.models.probecosts.cache_vs_etcd), so not stored in the run directory.
    comparison = cache_vs_etcd(lists)
    paired = comparison[comparison["same_response"]]
    default = lists[lists["apiserver"] == DEFAULT_APISERVER]
    summary = {
        "served_from": default.groupby("kind", sort=False)["served_from"].first().to_dict(),
        "etcd_comparison": note,
        # The manifest is plain JSON: a ratio that cannot be computed is null, not NaN.
        "etcd_over_cache": {
            f"{r.resource} {r.kind}": {
                name: None if is_missing(v) else round(float(v), 2)
                for name, v in (("latency", r.latency_ratio), ("cpu", r.cpu_ratio), ("alloc", r.alloc_ratio))
            }
            for r in paired.itertuples(index=False)
        },
    }
    sections = [
        Section(
            f"LIST cost (median of {config.repeats}; served_from from each server's counters)",
            "lists",
            LIST_COLUMNS,
            {"bytes": "MiB", "latency_s": "ms", "cpu_s": "ms", "alloc_bytes": "MiB", "fetched_objects": "count"},
            "(bytes and alloc_bytes in MiB, latency and cpu_s in ms; cpu_s, alloc_bytes (Go heap allocated) and "
            "fetched_objects (read from storage) per request, net of an idle second)",
        )
    ]
    title = f"The same LIST from etcd and from the watch cache (etcd: {note}); ratio = etcd / cache"
    if len(paired):
        units = {"bytes": "MiB", "etcd_cpu_etcd": "ms", "fetched_cache": "count", "fetched_etcd": "count"}
        units |= {
            f"{m}_{p}": u for m, u in (("latency", "ms"), ("cpu", "ms"), ("alloc", "MiB")) for p in ("cache", "etcd")
        }
        units |= {f"{m}_ratio": "x1" for m in ("latency", "cpu", "alloc")}
        note_text = (
            "(latency, cpu = kube-apiserver CPU and etcd_cpu_etcd = etcd's CPU in ms per request; bytes and alloc in "
            "MiB; fetched = objects the storage layer read per request)"
        )
        sections.append(Section(title, "comparison", COMPARISON_COLUMNS, units, note_text))
    else:
        sections.append(Section(title, "comparison", (), note="no LIST was served from both places"))
    if not tables["load"].empty:
        units = {"latency_p50_s": "ms", "latency_p99_s": "ms", "throughput_rps": "f1", "cpu_s": "s"}
        units |= {c: "MiB" for c in ("rss_before_bytes", "rss_max_bytes", "heap_inuse_max_bytes")}
        sections.append(Section("Concurrent load", "load", LOAD_COLUMNS, units))
    return ProbeResult(
        "list",
        tables,
        "lists",
        derived={"comparison": comparison},
        summary=summary,
        exit_code=1 if (lists["status"] != 200).any() else 0,
        sections=sections,
    )
