"""LIST cost probe: latency, bytes and server cost per kind of LIST, and where the server served it from.

:func:`populate` creates custom resources, Secrets, ConfigMaps and Pods of a
chosen size and count (ownership-labelled); :func:`measure_lists` times each
request kind from :mod:`.requests` on one or more kube-apiservers and reads each
server's counters around it to tell watch cache from etcd, and its CPU and heap
allocations per request; :func:`concurrent_load` replays one kind at several
concurrency levels while sampling kube-apiserver's RSS and heap.

To compare the two paths on the same objects, :func:`apiservers` starts a second
kube-apiserver with ``--watch-cache=false`` on a local instance's etcd: the same
binary, flags and stored objects, only every LIST goes to etcd. (v1.37 has no
switch left to send one LIST to etcd on a server with a watch cache: the
ConsistentListFromCache gate is gone, and Exact and paged LISTs are served from
the cache's snapshots; ``exact-old`` reaches etcd only when the resource's watch
cache is younger than the revision asked for, and then lists no object.)
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pandas as pd

from crdscale.errors import ClusterError, UsageError
from crdscale.proc import rss_bytes, thread_cpu_seconds
from crdscale.units import is_missing

from . import ProbeResult, Section, requestcost, write_tables
from ._http import fresh_transport, is_loopback, timed_get
from .configs import ListObjects, ListProbeConfig
from .fixtures import (
    BUCKET_LABEL,
    CR_SELECTABLE_FIELD,
    CRD_PATH,
    ProbeFixtures,
    bucket,
    config_map,
    custom_resource,
    has_selectable_field,
    list_probe_crd,
    list_probe_group,
    node_name,
    pod,
    secret,
)
from .requests import LIST_KINDS, ListRequest, ListTarget, build_list_requests

log = logging.getLogger(__name__)


@dataclass
class Populated:
    """What :func:`populate` created: one :class:`ListTarget` per resource, and object counts."""

    targets: list[ListTarget] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    data_bytes: dict[str, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # resource -> one object's name
    namespaces: list[str] = field(default_factory=list)
    resource_version_before: str = ""  # a list RV from before anything was created


def populate(fixtures: ProbeFixtures, config: ListObjects) -> Populated:
    """Create the objects ``config`` asks for; returns what to LIST."""
    labels, instance = fixtures.labels, fixtures.instance
    out = Populated()
    out.resource_version_before = (
        fixtures.cluster.get_json("/api/v1/namespaces?limit=1").get("metadata", {}).get("resourceVersion", "")
    )
    out.namespaces = [fixtures.namespace(chr(ord("a") + i)) for i in range(config.namespaces)]
    primary = out.namespaces[0]

    def spread(count: int) -> list[tuple[int, str]]:
        return [(i, out.namespaces[i % len(out.namespaces)]) for i in range(count)]

    if config.custom_resources:
        group = list_probe_group(instance)
        crd = list_probe_crd(labels, instance)
        fixtures.install_crds([crd])
        fixtures.wait_resource_served(group, "listprobes")
        stored = fixtures.cluster.get_json(f"{CRD_PATH}/{crd['metadata']['name']}")
        selector = f"{CR_SELECTABLE_FIELD}={bucket(0)}" if has_selectable_field(stored) else None
        target = ListTarget("listprobes", group, "v1", primary, field_selector=selector)
        log.info(f"creating {config.custom_resources} custom resources of {config.cr_bytes} B")
        bodies = [
            custom_resource(group, f"cr-{i:06d}", ns, labels, i, config.cr_bytes)
            for i, ns in spread(config.custom_resources)
        ]
        fixtures.create_objects(target.collection_path, bodies, workers=config.workers)
        out.targets.append(target)
        out.counts[target.group_resource] = config.custom_resources
        out.data_bytes[target.group_resource] = config.cr_bytes
        out.names[target.group_resource] = "cr-000000"
    # Core objects of a chosen data size: (resource, count, bytes, builder, name prefix, what to say,
    # a field selector on neither namespace nor name).
    core_objects = (
        ("secrets", config.secrets, config.secret_bytes, secret, "s", "Secrets", None),
        ("configmaps", config.configmaps, config.configmap_bytes, config_map, "cm", "ConfigMaps", None),
        ("pods", config.pods, config.pod_bytes, pod, "p", "Pods", f"spec.nodeName={node_name(0)}"),
    )
    for resource, count, size, build, prefix, noun, field_selector in core_objects:
        if not count:
            continue
        target = ListTarget(resource, "", "v1", primary, field_selector=field_selector)
        log.info(f"creating {count} {noun} of {size} B")
        bodies = [build(f"{prefix}-{i:06d}", ns, labels, i, size) for i, ns in spread(count)]
        fixtures.create_objects(target.collection_path, bodies, workers=min(config.workers, 8))
        out.targets.append(target)
        out.counts[resource] = count
        out.data_bytes[resource] = size
        out.names[resource] = f"{prefix}-000000"
    return out


@dataclass
class ListResult:
    """One execution of a :class:`ListRequest` (all pages when paged)."""

    status: int
    latency_s: float
    bytes: int
    items: int
    pages: int
    resource_version: str
    first_page_latency_s: float


def execute(
    transport, cluster, request: ListRequest, *, timeout_s: float = 300.0, max_pages: int = 10_000, decode: bool = True
) -> ListResult:
    """Send ``request`` (following ``continue`` when paged) and count items; latency and bytes cover all pages.

    ``decode=False`` skips JSON decoding of unpaged responses (items reported as -1), so a load
    generator on a small machine spends its CPU on requests rather than on parsing.
    """
    params = dict(request.params)
    total_latency, total_bytes, items, pages = 0.0, 0, 0, 0
    first_latency = 0.0
    status, rv = 0, ""
    while True:
        result = timed_get(
            transport, cluster.url(request.path), params=params, headers={"Accept": request.accept}, timeout=timeout_s
        )
        pages += 1
        total_latency += result.latency_s
        total_bytes += result.bytes
        if pages == 1:
            first_latency = result.latency_s
        status = result.status
        if status != 200:
            break
        if not decode and not request.paged:
            items = -1
            break
        body = result.json()
        # Table responses carry rows, lists carry items.
        items += len(body.get("items") or body.get("rows") or [])
        meta = body.get("metadata", {})
        rv = meta.get("resourceVersion", rv)
        token = meta.get("continue")
        if not request.paged or not token or pages >= max_pages:
            break
        params = {k: v for k, v in request.params.items() if k != "resourceVersion"}
        params["continue"] = token
    return ListResult(status, total_latency, total_bytes, items, pages, rv, first_latency)


def current_resource_version(transport, cluster, target: ListTarget) -> str:
    """A list resourceVersion from a consistent ``limit=1`` LIST (for the Exact / NotOlderThan kinds)."""
    result = timed_get(transport, cluster.url(target.collection_path()), params={"limit": "1"})
    if result.status != 200:
        raise ClusterError(f"LIST {target.collection_path()} -> HTTP {result.status}: {result.body[:200]!r}")
    return result.json().get("metadata", {}).get("resourceVersion", "")


# --- the kube-apiservers to LIST from ----------------------------------------------

DEFAULT_APISERVER = "default"
ETCD_ONLY_FLAGS = ("--watch-cache=false",)
ETCD_ONLY_APISERVER = " ".join(ETCD_ONLY_FLAGS)
# Background CPU and the scrapes' own allocations are measured over this long with no request.
IDLE_WINDOW_S = 1.0


@dataclass(frozen=True)
class ApiServer:
    """A kube-apiserver to send the LISTs to.

    Attributes:
        label: how the tables name it (:data:`DEFAULT_APISERVER`, :data:`ETCD_ONLY_APISERVER`).
        cluster: its :class:`~crdscale.cluster.clients.Cluster`.
        pid: its process id when it runs on this machine: CPU and RSS then come from
            ``/proc``, leaving out what reading ``/metrics`` costs it.
        etcd_pid: the etcd behind it, when local (its CPU per request is reported too).
    """

    label: str
    cluster: object
    pid: int | None = None
    etcd_pid: int | None = None


@dataclass
class ApiServers:
    """What :func:`apiservers` yields: the servers to measure (the default one first), and a
    note on the etcd comparison: which server serves from etcd, or why there is none."""

    servers: list[ApiServer]
    note: str = ""


@contextlib.contextmanager
def apiservers(cluster, *, compare_etcd: bool, name_suffix: str = "") -> Iterator[ApiServers]:
    """The kube-apiserver behind ``cluster``, and with ``compare_etcd`` a second one started
    with ``--watch-cache=false`` on the same etcd when ``cluster`` is a ready local instance.

    The second server is stopped on exit. For other clusters there is no second server and
    :attr:`ApiServers.note` says so; process ids are known only for local instances.
    """
    from crdscale.cluster.local import instance_serving

    plane = instance_serving(cluster.server)
    etcd = plane.process("etcd") if plane else None
    etcd_pid = etcd.pid if etcd else None
    found = ApiServers([ApiServer(DEFAULT_APISERVER, cluster, plane.apiserver_pid if plane else None, etcd_pid)])
    if not compare_etcd:
        found.note = "not asked for"
        yield found
        return
    if plane is None:
        found.note = (
            f"{cluster.server} is not a crdscale local instance: no second kube-apiserver to serve LISTs from etcd"
        )
        log.info(f"etcd comparison skipped: {found.note}")
        yield found
        return
    name = f"kube-apiserver-etcd-only{'-' + name_suffix if name_suffix else ''}"
    log.info(f"starting a second kube-apiserver ({ETCD_ONLY_APISERVER}) on {plane.name}'s etcd")
    with plane.start_second_apiserver(name, ETCD_ONLY_FLAGS) as second:
        etcd_only = second.connect(cluster)
        try:
            found.servers.append(ApiServer(ETCD_ONLY_APISERVER, etcd_only, second.pid, etcd_pid))
            found.note = f"{ETCD_ONLY_APISERVER} on the same etcd ({second.server})"
            yield found
        finally:
            etcd_only.close()


def wait_served(server: ApiServer, populated: Populated, *, timeout_s: float = 120.0) -> None:
    """Wait until ``server`` serves every populated resource (a second server learns about a
    new CRD from etcd a moment after the first one)."""
    deadline = time.monotonic() + timeout_s
    for target in populated.targets:
        while server.cluster.get(target.collection_path(), params={"limit": "1"}).status_code != 200:
            if time.monotonic() > deadline:
                raise ClusterError(f"{server.label} does not serve {target.group_resource} after {timeout_s:.0f} s")
            time.sleep(0.3)


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


# --- concurrent load ------------------------------------------------------------


def _cpu_seconds(cluster, pid: int | None) -> tuple[float, str]:
    """The server's CPU seconds so far and where they came from: ``/proc`` of a local
    server (to the nanosecond), else its ``process_cpu_seconds_total`` (NaN if not exposed)."""
    cpu = thread_cpu_seconds(pid) if pid is not None else None
    if cpu is not None:
        return cpu, "proc"
    series = requestcost.scrape(cluster, names=(requestcost.CPU_SECONDS,)).get(requestcost.CPU_SECONDS)
    return (series[0][1] if series else float("nan")), "metrics"


def concurrent_load(
    cluster,
    request: ListRequest,
    *,
    concurrency_levels: Iterable[int] = (1, 4, 16),
    requests_per_level: int = 100,
    max_seconds_per_level: float = 30.0,
    sample_interval_s: float = 0.5,
    allow_remote: bool = False,
    pid: int | None = None,
    collect_garbage: bool = False,
) -> pd.DataFrame:
    """Replay ``request`` with N clients at each level, bounded in count and time, sampling server memory.

    Only loopback servers unless ``allow_remote`` (the user's own cluster, on purpose).
    ``pid`` is the kube-apiserver's process id when it runs on this machine: its CPU and RSS
    then come from ``/proc`` (RSS sampled as often as the heap), otherwise from ``/metrics``.
    Returns one row per level: ``concurrency``, ``requests``, ``errors``, ``seconds``,
    ``throughput_rps``, ``latency_p50_s``, ``latency_p99_s``, ``bytes``, and the
    server's ``rss_before_bytes``, ``rss_max_bytes``, ``heap_inuse_before_bytes``,
    ``heap_inuse_max_bytes``, ``rss_growth_bytes`` and ``heap_inuse_growth_bytes`` (peak over
    the level's baseline), ``cpu_s`` (CPU seconds over the level) and ``cpu_source``
    (``proc`` or ``metrics``). With ``collect_garbage`` the server runs a garbage collection
    before each level (``/debug/pprof/heap?gc=1``), so each level's heap baseline holds no
    garbage left by the one before.
    """
    if not (is_loopback(cluster.server) or allow_remote):
        raise UsageError(
            f"refusing concurrent load against {cluster.server}: pass --allow-remote-load for your own cluster"
        )
    rows = []
    for level in concurrency_levels:
        if level < 1:
            raise UsageError("concurrency levels must be >= 1")
        if collect_garbage:
            cluster.get("/debug/pprof/heap", params={"gc": "1"}, timeout=60)
        memory = _MemorySampler(cluster, pid, sample_interval_s)
        before = memory.sample()
        cpu_before, cpu_source = _cpu_seconds(cluster, pid)
        memory.start()
        replay = _replay(cluster, request, level, requests_per_level, max_seconds_per_level)
        cpu_after, _ = _cpu_seconds(cluster, pid)
        samples = memory.stop()
        rows.append(
            {
                "kind": request.kind,
                "concurrency": level,
                **replay.columns(),
                **_memory_columns(before, samples),
                "cpu_s": cpu_after - cpu_before,
                "cpu_source": cpu_source,
                "memory_samples": len(samples),
            }
        )
    return pd.DataFrame(rows)


class _MemorySampler:
    """The server's RSS and heap in use every ``interval_s`` in a thread, until :meth:`stop`.
    RSS comes from ``/proc`` of ``pid`` when given (not the value of up to a scrape interval
    ago), else from ``/metrics`` like the heap."""

    def __init__(self, cluster, pid: int | None, interval_s: float):
        self.cluster, self.pid, self.interval_s = cluster, pid, interval_s
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> dict[str, float]:
        sample = requestcost.memory_bytes(
            requestcost.scrape(self.cluster, names=requestcost.MEMORY_METRIC_NAMES, timeout=10)
        )
        rss = rss_bytes(self.pid) if self.pid is not None else None
        if rss is not None:
            sample["rss_bytes"] = float(rss)
        return sample

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.sample())
            except ClusterError:
                pass
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[dict[str, float]]:
        self._stop.set()
        self._thread.join(timeout=15)
        return self.samples


@dataclass
class _Replay:
    """What one concurrency level's clients got: successful latencies, errors, bytes, wall time."""

    latencies: list[float]
    errors: int
    bytes: int
    seconds: float

    def columns(self) -> dict:
        lat = pd.Series(self.latencies, dtype=float)
        nan = float("nan")
        return {
            "requests": len(self.latencies),
            "errors": self.errors,
            "seconds": self.seconds,
            "throughput_rps": len(self.latencies) / self.seconds if self.seconds > 0 else nan,
            "latency_p50_s": float(lat.quantile(0.5)) if len(lat) else nan,
            "latency_p99_s": float(lat.quantile(0.99)) if len(lat) else nan,
            "bytes": self.bytes,
        }


def _replay(cluster, request: ListRequest, level: int, requests: int, max_seconds: float) -> _Replay:
    """``level`` clients send ``request`` until ``requests`` were sent or ``max_seconds`` passed."""
    transport = fresh_transport(cluster, pool_size=level)
    deadline = time.monotonic() + max_seconds
    remaining = [requests]
    lock = threading.Lock()
    got = _Replay([], 0, 0, 0.0)

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            try:
                r = execute(transport, cluster, request, timeout_s=max(5.0, max_seconds), decode=False)
                ok = r.status == 200
            except ClusterError:
                ok, r = False, None
            with lock:
                if ok:
                    got.latencies.append(r.latency_s)
                    got.bytes += r.bytes
                else:
                    got.errors += 1

    start = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=level) as pool:
            for _ in range(level):
                pool.submit(worker)
        got.seconds = time.monotonic() - start
    finally:
        transport.close()
    return got


def _memory_columns(before: dict[str, float], samples: list[dict[str, float]]) -> dict:
    """The server's memory over a level: baseline, peak and growth (peak over the baseline)."""
    rss = [s["rss_bytes"] for s in samples]
    heap = [s["heap_inuse_bytes"] for s in samples]
    nan = float("nan")
    return {
        "rss_before_bytes": before["rss_bytes"],
        "rss_max_bytes": max(rss) if rss else nan,
        "heap_inuse_before_bytes": before["heap_inuse_bytes"],
        "heap_inuse_max_bytes": max(heap) if heap else nan,
        # A level whose peak stays under its baseline (a GC in between) grew by 0.
        "rss_growth_bytes": max(0.0, max(rss) - before["rss_bytes"]) if rss else nan,
        "heap_inuse_growth_bytes": max(0.0, max(heap) - before["heap_inuse_bytes"]) if heap else nan,
    }


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


# --- one response size, two shapes ----------------------------------------------


@dataclass(frozen=True)
class LoadShape:
    """One way to make up a LIST response: ``objects`` Secrets holding ``object_bytes`` of data each."""

    objects: int
    object_bytes: int

    @property
    def label(self) -> str:
        return f"{self.objects}x{self.object_bytes}"

    @property
    def data_bytes(self) -> int:
        return self.objects * self.object_bytes


def parse_load_shapes(text: str) -> tuple[LoadShape, ...]:
    """``"40x1000000,4000x10000"`` -> two :class:`LoadShape` (objects x data bytes each)."""
    shapes = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        count, sep, size = part.lower().partition("x")
        try:
            shape = LoadShape(int(count), int(size))
        except ValueError:
            shape = None
        if not sep or shape is None or shape.objects < 1 or shape.object_bytes < 1:
            raise UsageError(f"load shape {part!r}: expected OBJECTSxBYTES such as 40x1000000")
        if shape.object_bytes > 1_000_000:
            raise UsageError(f"load shape {part!r}: a Secret holds at most 1000000 B of data (etcd's request limit)")
        shapes.append(shape)
    if len(shapes) < 2:
        raise UsageError(f"load shapes {text!r}: give at least two shapes to compare, e.g. 40x1000000,4000x10000")
    return tuple(shapes)


# The LISTs the shape experiment sends to each shape's namespace, both served from the watch cache on v1.31+.
SHAPE_LIST_PARAMS = {"rv0": {"resourceVersion": "0"}, "consistent": {}}
# A LIST of tens of MB holds its memory for a fraction of a second: sample often enough to see
# the peak, not so often that scraping /metrics becomes the CPU being measured.
SHAPE_SAMPLE_INTERVAL_S = 0.2


def shape_load(
    cluster,
    *,
    run_id: str,
    shapes: Sequence[LoadShape],
    concurrency_levels: Iterable[int] = (1, 4, 16),
    kinds: Sequence[str] = ("rv0",),
    requests_per_level: int = 100,
    max_seconds_per_level: float = 30.0,
    allow_remote: bool = False,
    keep: bool = False,
) -> pd.DataFrame:
    """Concurrent LISTs of one namespace per shape: the same data in few large or many small Secrets.

    Every shape is created before any is loaded, so all see the same server. Each (kind, shape)
    runs :func:`concurrent_load` over ``concurrency_levels`` with a garbage collection before each
    level. Returns its rows plus ``shape``, ``objects``, ``object_bytes``, ``data_bytes``.
    """
    levels = tuple(concurrency_levels)
    unknown = set(kinds) - set(SHAPE_LIST_PARAMS)
    if unknown:
        raise UsageError(f"unknown load kinds: {', '.join(sorted(unknown))} (known: {', '.join(SHAPE_LIST_PARAMS)})")
    if not (is_loopback(cluster.server) or allow_remote):
        raise UsageError(
            f"refusing concurrent load against {cluster.server}: pass --allow-remote-load for your own cluster"
        )
    with ProbeFixtures(cluster, run_id, keep=keep) as fixtures:
        with apiservers(cluster, compare_etcd=False) as found:
            pid = found.servers[0].pid
        targets = []
        for index, shape in enumerate(shapes):
            target = ListTarget("secrets", "", "v1", fixtures.namespace(f"shape{index}"))
            log.info(f"creating {shape.objects} Secrets of {shape.object_bytes} B in {target.namespace}")
            bodies = [
                secret(f"s-{i:06d}", target.namespace, fixtures.labels, i, shape.object_bytes)
                for i in range(shape.objects)
            ]
            fixtures.create_objects(target.collection_path, bodies, workers=8)
            targets.append(target)
        tables = []
        for kind in kinds:
            for shape, target in zip(shapes, targets):
                request = ListRequest(
                    kind,
                    target.collection_path(target.namespace),
                    SHAPE_LIST_PARAMS[kind],
                    description=f"{shape.label} in {target.namespace}",
                )
                log.info(f"loading {shape.label} ({kind}) at concurrency {','.join(map(str, levels))}")
                table = concurrent_load(
                    cluster,
                    request,
                    concurrency_levels=levels,
                    requests_per_level=requests_per_level,
                    max_seconds_per_level=max_seconds_per_level,
                    allow_remote=allow_remote,
                    pid=pid,
                    collect_garbage=True,
                    sample_interval_s=SHAPE_SAMPLE_INTERVAL_S,
                )
                tables.append(
                    table.assign(
                        shape=shape.label,
                        objects=shape.objects,
                        object_bytes=shape.object_bytes,
                        data_bytes=shape.data_bytes,
                    )
                )
    return pd.concat(tables, ignore_index=True)


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
SHAPE_COLUMNS = (
    "kind",
    "shape",
    "concurrency",
    "requests",
    "errors",
    "latency_p50_s",
    "latency_p99_s",
    "bytes",
    "heap_inuse_before_bytes",
    "heap_inuse_growth_bytes",
    "rss_before_bytes",
    "rss_growth_bytes",
    "cpu_s",
    "cpu_source",
)


def run(cluster, config: ListProbeConfig, writer, *, step: int = 0, run_id: str) -> ProbeResult:
    """The LIST probe (or, with ``config.load_shapes``, the shape experiment) as one step: measures,
    writes its tables into ``writer`` and returns them with the etcd/cache comparison derived from them."""
    from crdscale.analysis.probes import cache_vs_etcd

    if config.load_shapes:
        return _run_shapes(cluster, config, writer, step=step, run_id=run_id)
    tables = probe(cluster, run_id=run_id, config=config)
    write_tables(writer, "list", step, tables, main="lists")
    lists = tables["lists"]
    note = tables["apiservers"]["note"].iloc[0]
    # Derived from the rows (crdscale.analysis.probes.cache_vs_etcd), so not stored in the run directory.
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


def _run_shapes(cluster, config: ListProbeConfig, writer, *, step: int, run_id: str) -> ProbeResult:
    from crdscale.analysis.probes import SHAPE_FINDING_COLUMNS, shape_findings

    load = shape_load(
        cluster,
        run_id=run_id,
        shapes=parse_load_shapes(",".join(config.load_shapes)),
        concurrency_levels=config.load_levels or config.SHAPE_LOAD_LEVELS,
        kinds=config.load_kinds,
        requests_per_level=config.load_requests,
        max_seconds_per_level=config.load_seconds,
        allow_remote=config.allow_remote_load,
        keep=config.keep,
    )
    writer.write_probe_table("list", step, load, "shapes")
    # Derived from the rows (crdscale.analysis.probes.shape_findings), so not stored in the run directory.
    findings = shape_findings(load)
    units = {"latency_p50_s": "ms", "latency_p99_s": "ms", "cpu_s": "s", "bytes": "MiB"}
    units |= {c: "MiB" for c in SHAPE_COLUMNS if c.startswith(("heap_", "rss_"))}
    sections = [
        Section(
            "Concurrent LISTs of one namespace per shape",
            "shapes",
            SHAPE_COLUMNS,
            units,
            "(latency in ms; bytes = all responses of the level and memory in MiB; growth = peak over the level's "
            "baseline after a garbage collection; cpu_s = kube-apiserver CPU seconds over the level)",
        ),
        Section(
            "Each shape / the shape of fewest objects: memory follows bytes if heap_growth_ratio is near bytes_ratio, "
            "object count if near objects_ratio",
            "shape_findings",
            SHAPE_FINDING_COLUMNS,
            {c: "x2" for c in SHAPE_FINDING_COLUMNS if c.endswith("_ratio")},
        ),
    ]
    summary = {
        "heap_follows": {
            f"{r.kind} c={r.concurrency} {r.shape}": r.heap_follows for r in findings.itertuples(index=False)
        }
    }
    return ProbeResult(
        "list",
        {"shapes": load},
        None,
        derived={"shape_findings": findings},
        summary=summary,
        exit_code=1 if load["errors"].sum() else 0,
        sections=sections,
    )
