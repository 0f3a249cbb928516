"""What a request did to kube-apiserver, read from its ``/metrics`` before and after: where it was
served from (watch cache or etcd) and what it cost (CPU, allocations, memory).

The probes compare scrapes taken before and after a request. Parsing and the
classification rules are pure; :func:`scrape` is the only I/O. (The run's time
series, which crdscale records during a scenario, are :mod:`crdscale.collect.metrics`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from crdscale.collect.promtext import Samples, samples_by_name
from crdscale.errors import ClusterError


def total(samples: Samples, name: str, **match: str) -> float:
    """Sum of ``name`` over series whose labels include ``match`` (0.0 when absent)."""
    return sum(value for labels, value in samples.get(name, []) if all(labels.get(k) == v for k, v in match.items()))


def has_metric(samples: Samples, name: str) -> bool:
    return bool(samples.get(name))


# Counters that move when a LIST is served, by where it is served. They changed
# across versions, and the classification tries the newest scheme first:
# * since about v1.33 ``apiserver_storage_list_total`` carries a ``storage``
#   label (``watchcache`` or ``etcd``) and counts every LIST at the storage layer;
# * before, ``apiserver_cache_list_total`` counted watch-cache LISTs and
#   ``apiserver_storage_list_total`` (no ``storage`` label) counted etcd LISTs;
# * labels named the resource ``resource_prefix="/secrets"`` on old cachers and
#   ``group`` + ``resource`` later.
CACHE_LIST_COUNTERS = ("apiserver_cache_list_total",)
STORAGE_LIST_COUNTERS = ("apiserver_storage_list_total",)
STORAGE_FETCHED_COUNTERS = ("apiserver_storage_list_fetched_objects_total",)
STORAGE_RETURNED_COUNTERS = ("apiserver_storage_list_returned_objects_total",)
CONSISTENT_READ_COUNTER = "apiserver_watch_cache_consistent_read_total"
ETCD_REQUESTS_COUNTER = "etcd_requests_total"
WATCHCACHE_STORAGE = "watchcache"
LIST_METRIC_NAMES = (
    "apiserver_cache_list",
    "apiserver_storage_list",
    "apiserver_watch_cache_consistent_read",
    "etcd_requests_total",
)
MEMORY_METRIC_NAMES = (
    "process_resident_memory_bytes",
    "go_memstats_heap_inuse_bytes",
    "go_memstats_heap_alloc_bytes",
)
# What a request costs the server: CPU, and bytes the Go heap allocated (a counter, so
# it does not depend on when the garbage collector ran).
CPU_SECONDS = "process_cpu_seconds_total"
ALLOCATED_BYTES = "go_memstats_alloc_bytes_total"
COST_METRIC_NAMES = (CPU_SECONDS, ALLOCATED_BYTES, *MEMORY_METRIC_NAMES)
OBJECT_COUNT_METRICS = ("apiserver_resource_objects", "apiserver_storage_objects")
SIZE_ESTIMATE_METRICS = ("apiserver_resource_size_estimate_bytes",)


def _resource_label_sets(group: str, resource: str) -> list[dict[str, str]]:
    group_resource = f"{resource}.{group}" if group else resource
    prefix = f"/{group}/{resource}" if group else f"/{resource}"
    return [
        {"group": group, "resource": resource},
        {"resource": group_resource},
        {"resource_prefix": prefix},
        {"resource": resource},
    ]


def resource_total(samples: Samples, names: Iterable[str], group: str, resource: str, **extra: str) -> float:
    """Sum of the first of ``names`` found, over the series labelled with this resource (any label scheme)
    and with the ``extra`` labels."""
    for name in names:
        if not has_metric(samples, name):
            continue
        for label_set in _resource_label_sets(group, resource):
            value = total(samples, name, **label_set, **extra)
            if value:
                return value
        return 0.0
    return 0.0


def _storage_values(samples: Samples) -> set[str]:
    return {
        labels["storage"]
        for name in STORAGE_LIST_COUNTERS
        for labels, _ in samples.get(name, [])
        if "storage" in labels
    }


@dataclass(frozen=True)
class ServedFrom:
    """Where a LIST was served from, according to the server's counters.

    Attributes:
        place: ``cache``, ``etcd`` or ``unknown``.
        cache_lists: LISTs the watch cache served (increase).
        etcd_lists: LISTs etcd served (increase).
        fetched_objects: objects the storage layer fetched for them (read from etcd, or
            taken from the watch cache or its index).
        returned_objects: objects it returned after applying the selectors.
        consistent_reads: increase of the watch-cache consistent-read counter.
        etcd_revision_checks: ``getCurrentResourceVersion`` requests to etcd (consistent reads from cache).
        scheme: which counter scheme the server exposes (``storage-label`` or ``cache+storage``).
        evidence: which counters moved, for the report.
    """

    place: str
    cache_lists: float
    etcd_lists: float
    fetched_objects: float
    returned_objects: float
    consistent_reads: float
    etcd_revision_checks: float
    scheme: str
    evidence: str


def classify_served_from(
    before: Samples, after: Samples, group: str, resource: str, *, requests: int = 1
) -> ServedFrom:
    """Tell cache from etcd by which counters grew between two scrapes around ``requests`` LISTs.

    With the ``storage`` label the answer is direct. With the older pair of
    counters a consistent read served from the cache may still show a
    one-object etcd list (asking for the current revision), so an etcd list
    only wins if it fetched more than one object per list or the cache
    counter did not move.
    """

    def delta(names: Iterable[str], **extra: str) -> float:
        return resource_total(after, names, group, resource, **extra) - resource_total(
            before, names, group, resource, **extra
        )

    consistent = delta((CONSISTENT_READ_COUNTER,))
    revision_checks = delta((ETCD_REQUESTS_COUNTER,), operation="getCurrentResourceVersion")
    fetched = delta(STORAGE_FETCHED_COUNTERS)
    returned = delta(STORAGE_RETURNED_COUNTERS)
    if _storage_values(after):
        scheme = "storage-label"
        cache = delta(STORAGE_LIST_COUNTERS, storage=WATCHCACHE_STORAGE)
        etcd = delta(STORAGE_LIST_COUNTERS) - cache
        if cache and not etcd:
            place = "cache"
        elif etcd and not cache:
            place = "etcd"
        elif cache and etcd:
            place = "cache" if cache >= etcd else "etcd"
        else:
            place = "unknown"
    else:
        scheme = "cache+storage"
        cache = delta(CACHE_LIST_COUNTERS)
        etcd = delta(STORAGE_LIST_COUNTERS)
        known = any(has_metric(after, n) for n in CACHE_LIST_COUNTERS + STORAGE_LIST_COUNTERS)
        if not known:
            place = "unknown"
        elif cache >= requests and (etcd == 0 or fetched <= etcd):
            place = "cache"
        elif etcd > 0:
            place = "etcd"
        elif cache > 0:
            place = "cache"
        else:
            place = "unknown"
    evidence = (
        f"[{scheme}] cache_lists+{cache:g} etcd_lists+{etcd:g} fetched+{fetched:g} returned+{returned:g} "
        f"consistent_reads+{consistent:g} etcd_revision_checks+{revision_checks:g}"
    )
    return ServedFrom(place, cache, etcd, fetched, returned, consistent, revision_checks, scheme, evidence)


@dataclass(frozen=True)
class CostReadings:
    """One kube-apiserver's cumulative costs around a measurement window.

    Attributes:
        before: ``/metrics`` scrape (:data:`COST_METRIC_NAMES`) taken before the window.
        after: the scrape taken after it.
        seconds: wall time between the two ``/proc`` readings (or the scrapes).
        proc_before: ``(cpu seconds, RSS bytes)`` from ``/proc`` read just after ``before``
            returned; ``None`` when the server is not a local process.
        proc_after: the same read just before ``after`` was sent. The ``/proc`` pair
            brackets only the window, leaving out what the scrapes themselves cost.
    """

    before: Samples
    after: Samples
    seconds: float
    proc_before: tuple[float, float] | None = None
    proc_after: tuple[float, float] | None = None

    @property
    def has_proc(self) -> bool:
        return self.proc_before is not None and self.proc_after is not None

    def cpu_seconds(self) -> float:
        """CPU seconds the server spent in the window (``/proc`` when read, else ``/metrics``)."""
        if self.has_proc:
            return self.proc_after[0] - self.proc_before[0]
        return total(self.after, CPU_SECONDS) - total(self.before, CPU_SECONDS)

    def allocated_bytes(self) -> float:
        """Bytes the Go heap allocated between the scrapes (includes part of the scrapes' own)."""
        return total(self.after, ALLOCATED_BYTES) - total(self.before, ALLOCATED_BYTES)

    def rss_growth_bytes(self) -> float:
        if self.has_proc:
            return self.proc_after[1] - self.proc_before[1]
        return memory_bytes(self.after)["rss_bytes"] - memory_bytes(self.before)["rss_bytes"]

    def heap_inuse_growth_bytes(self) -> float:
        return memory_bytes(self.after)["heap_inuse_bytes"] - memory_bytes(self.before)["heap_inuse_bytes"]


@dataclass(frozen=True)
class RequestCost:
    """What one request cost a kube-apiserver, from :func:`request_cost`.

    Attributes:
        cpu_s: CPU seconds per request.
        alloc_bytes: bytes the Go heap allocated per request.
        rss_growth_bytes: RSS growth across the whole window (not per request). Go keeps
            the heap it has grown, so a request after a bigger one shows little growth:
            compare ``alloc_bytes`` across requests.
        heap_inuse_growth_bytes: heap in use growth across the window (GC timing moves it).
        source: ``proc`` (CPU and RSS from ``/proc``) or ``metrics`` (from ``/metrics``,
            CPU then includes part of the scrapes' own cost).
    """

    cpu_s: float
    alloc_bytes: float
    rss_growth_bytes: float
    heap_inuse_growth_bytes: float
    source: str


def request_cost(window: CostReadings, requests: int, idle: CostReadings | None = None) -> RequestCost:
    """Per-request cost of the ``requests`` sent during ``window``, net of an ``idle`` window
    (the same readings around no request) when given.

    From ``/proc`` the idle window gives the server's background CPU rate, subtracted for
    the window's length. Otherwise, and for allocated bytes (which only ``/metrics``
    reports), the idle window's whole increase is subtracted as the fixed cost of the pair
    of scrapes. Results can be slightly negative for requests cheaper than that noise.
    """
    cpu = window.cpu_seconds()
    alloc = window.allocated_bytes()
    if idle is not None:
        if window.has_proc and idle.has_proc:
            rate = idle.cpu_seconds() / idle.seconds if idle.seconds > 0 else 0.0
            cpu -= rate * window.seconds
        else:
            cpu -= idle.cpu_seconds()
        alloc -= idle.allocated_bytes()
    n = max(requests, 1)
    return RequestCost(
        cpu / n,
        alloc / n,
        window.rss_growth_bytes(),
        window.heap_inuse_growth_bytes(),
        "proc" if window.has_proc else "metrics",
    )


def memory_bytes(samples: Samples) -> dict[str, float]:
    """``rss_bytes``, ``heap_inuse_bytes``, ``heap_alloc_bytes`` from one scrape (NaN if absent)."""
    nan = float("nan")

    def first(name: str) -> float:
        series = samples.get(name)
        return series[0][1] if series else nan

    return {
        "rss_bytes": first("process_resident_memory_bytes"),
        "heap_inuse_bytes": first("go_memstats_heap_inuse_bytes"),
        "heap_alloc_bytes": first("go_memstats_heap_alloc_bytes"),
    }


def object_stats(samples: Samples, group: str, resource: str) -> dict[str, float]:
    """The server's stored ``object_count``, ``total_size_bytes`` and ``avg_size_bytes`` for a resource.

    ``apiserver_resource_size_estimate_bytes`` is the resource's *total* stored
    size (30 Secrets of 50 KB read 1.5 MB on v1.37), so the average is total /
    count. The server refreshes both about once a minute; NaN when not exposed.
    """
    nan = float("nan")
    count = nan
    for name in OBJECT_COUNT_METRICS:
        if has_metric(samples, name):
            count = resource_total(samples, (name,), group, resource)
            break
    size = nan
    for name in SIZE_ESTIMATE_METRICS:
        if has_metric(samples, name):
            size = resource_total(samples, (name,), group, resource)
            break
    avg = size / count if count and count == count and size == size else nan
    return {"object_count": count, "total_size_bytes": size, "avg_size_bytes": avg}


def histogram_delta(before: Samples, after: Samples, name: str, **match: str) -> dict[str, float]:
    """``count`` and ``sum`` increase of histogram ``name`` over series matching ``match``."""
    return {
        "count": total(after, f"{name}_count", **match) - total(before, f"{name}_count", **match),
        "sum": total(after, f"{name}_sum", **match) - total(before, f"{name}_sum", **match),
    }


def histogram_delta_by(before: Samples, after: Samples, name: str, label: str) -> dict[str, dict[str, float]]:
    """Per value of ``label``: the ``count``/``sum`` increase of histogram ``name`` (only values that moved)."""
    out: dict[str, dict[str, float]] = {}
    values = {labels.get(label, "") for labels, _ in after.get(f"{name}_count", [])}
    for value in values:
        d = histogram_delta(before, after, name, **{label: value})
        if d["count"]:
            out[value] = d
    return out


def scrape(cluster, *, names: Iterable[str] | None = None, timeout: float = 60.0) -> Samples:
    """GET ``/metrics`` and parse it: only metrics whose names start with one of ``names``, when given."""
    resp = cluster.get("/metrics", timeout=timeout)
    if resp.status_code != 200:
        raise ClusterError(f"GET /metrics -> HTTP {resp.status_code}; the probe needs permission to read /metrics")
    return samples_by_name(resp.text, tuple(names) if names else None, prefixes=True)
