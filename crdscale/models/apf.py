"""How many APF seats a LIST request occupies: the object-count estimator and the size-based one.

Both follow kube-apiserver's ``staging/src/k8s.io/apiserver/pkg/util/flowcontrol/
request/list_work_estimator.go``:

* **object count** (``seatsBasedOnObjectCount``, the estimator before the
  ``SizeBasedListCostEstimate`` feature gate): one seat per 100 objects the
  server is expected to *process* -- every stored object when served from the
  watch cache, ``stored + limit`` with a label/field selector from etcd,
  ``2 * limit`` otherwise -- clamped to [1, 10].
* **size based** (the APF proposal in seed 003, upstream behind the
  ``SizeBasedListCostEstimate`` gate): one seat per 100 KB of response the server holds in
  memory at once -- ``objects * average size``; from the watch cache the
  response is streamed so at most 1 MB (10 seats) counts -- clamped to [1, 100].

Requests naming a single object (``fieldSelector=metadata.name=X``) cost one
object either way. The average object size comes from the server's storage
stats (``apiserver_resource_size_estimate_bytes`` where exposed); callers
without it may pass the measured JSON bytes per item, which over-estimates the
stored (protobuf/JSON-in-etcd) size somewhat.

The server refreshes both statistics per resource only every
``--etcd-count-metric-poll-period`` (1 min, jittered up to 132 s); until then a
new CRD counts 0 objects and every LIST of it gets 1 seat, so an observation is
compared with these models only once the statistics count the stored objects
(:func:`crdscale.collect.probes.apfseats.wait_for_estimator_stats`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

MINIMUM_SEATS = 1
OBJECTS_PER_SEAT = 100.0
# MaximumListSeatsLimit: 10 with the gate off (object count), 100 with it on.
OBJECT_COUNT_MAX_SEATS = 10
SIZE_BASED_MAX_SEATS = 100
BYTES_PER_SEAT = 100_000
# A response streamed from the watch cache never holds more than this at once.
CACHE_STREAMING_MAX_MEMORY_BYTES = 1_000_000
# etcd's recommended maximum request size; the server's guess when it has no stats.
MAX_OBJECT_SIZE_BYTES = 1_500_000


@dataclass(frozen=True)
class ListShape:
    """What the work estimators know about one LIST request.

    Attributes:
        object_count: objects of this resource stored (all namespaces).
        avg_object_size_bytes: the server's estimated average stored object size.
        limit: the ``limit`` parameter (0 = none).
        has_selector: a label or field selector is set.
        from_cache: the request is served from the watch cache (see :func:`served_from_cache`).
        matches_single: ``fieldSelector=metadata.name=...`` (treated like a GET).
        streamed: the cache streams the response (true for all cache LISTs today).
    """

    object_count: int
    avg_object_size_bytes: int
    limit: int = 0
    has_selector: bool = False
    from_cache: bool = True
    matches_single: bool = False
    streamed: bool = True


# apf_controller.go: a priority level's maxSeats is 15 % of its nominal concurrency limit,
# at most nominalCL / handSize and at least 1 (600 server seats give the default levels 10).
PRIORITY_LEVEL_MAX_SEATS_SHARE = 0.15


def priority_level_max_seats(nominal_limit_seats: int, hand_size: int | None) -> int:
    """The most seats one request may occupy in a priority level, as kube-apiserver derives it
    (``apf_controller.go``): ``max(1, min(ceil(0.15 * nominalCL), nominalCL // handSize))``.
    ``hand_size`` None (a level without queuing): 0, meaning no level limit (the estimator's own applies)."""
    if not hand_size:
        return 0
    return int(
        max(1, min(math.ceil(nominal_limit_seats * PRIORITY_LEVEL_MAX_SEATS_SHARE), nominal_limit_seats // hand_size))
    )


def _clamp(seats: int, max_seats: int) -> int:
    return max(MINIMUM_SEATS, min(seats, max_seats))


def _effective_max(limit_for_estimator: int, priority_level_max_seats: int) -> int:
    # estimate(): the priority level's maxSeats, unless unknown (0) or above the estimator's limit.
    if priority_level_max_seats <= 0 or priority_level_max_seats > limit_for_estimator:
        return limit_for_estimator
    return priority_level_max_seats


def object_count_seats_unclamped(shape: ListShape) -> int:
    """``seatsBasedOnObjectCount`` before clamping: ceil(objects to process / 100)."""
    stored = shape.object_count
    limited = shape.limit if 0 < shape.limit < stored else stored
    if shape.matches_single:
        processed = 1
    elif shape.from_cache:
        processed = stored
    elif shape.has_selector:
        processed = stored + limited
    else:
        processed = 2 * limited
    return math.ceil(processed / OBJECTS_PER_SEAT)


def size_based_seats_unclamped(shape: ListShape) -> int:
    """``seatsBasedOnObjectSize`` before clamping: ceil(bytes held at once / 100 KB)."""
    avg = shape.avg_object_size_bytes
    if avg <= 0 and shape.object_count != 0:
        avg = MAX_OBJECT_SIZE_BYTES
    stored = shape.object_count
    limited = shape.limit if 0 < shape.limit < stored else stored
    if shape.matches_single:
        loaded = 1
    elif shape.from_cache:
        loaded = limited
    elif shape.has_selector:
        # etcd has no selectors: the server pages through at least half the objects.
        loaded = max(limited, stored // 2)
    else:
        loaded = limited
    memory = loaded * avg
    if shape.from_cache and shape.streamed:
        memory = min(memory, CACHE_STREAMING_MAX_MEMORY_BYTES)
    return math.ceil(memory / BYTES_PER_SEAT)


def object_count_seats(shape: ListShape, *, priority_level_max_seats: int = 0) -> int:
    """Seats (1..10) the object-count estimator gives a LIST."""
    max_seats = _effective_max(OBJECT_COUNT_MAX_SEATS, priority_level_max_seats)
    return _clamp(object_count_seats_unclamped(shape), max_seats)


def size_based_seats(shape: ListShape, *, priority_level_max_seats: int = 0) -> int:
    """Seats (1..100) the size-based estimator gives a LIST."""
    max_seats = _effective_max(SIZE_BASED_MAX_SEATS, priority_level_max_seats)
    return _clamp(size_based_seats_unclamped(shape), max_seats)


def served_from_cache(params: Mapping[str, str], *, consistent_reads_from_cache: bool = True) -> bool:
    """Whether the watch cache may serve a LIST with these query ``params`` (``delegator.ShouldDelegateList``).

    ``consistent_reads_from_cache`` is the server's ``ConsistentListFromCache``
    (on since v1.31 when etcd supports progress notifications); without it a
    LIST with no ``resourceVersion`` goes to etcd. Requests the estimator
    cannot classify count as etcd, as the estimator does.
    """
    match = params.get("resourceVersionMatch", "")
    rv = params.get("resourceVersion", "")
    if match == "Exact":
        return False
    if match == "NotOlderThan":
        return True
    if match:
        return False
    if params.get("continue"):
        return False
    try:
        limit = int(params.get("limit", "0") or 0)
    except ValueError:
        return False
    if limit > 0 and rv and rv != "0":
        return False  # legacy exact match
    if rv == "":
        return consistent_reads_from_cache
    return True


def matches_single_object(params: Mapping[str, str]) -> bool:
    """True for ``fieldSelector=metadata.name=X`` (the request info names one object)."""
    for term in params.get("fieldSelector", "").split(","):
        key, _, value = term.partition("=")
        if key.strip() == "metadata.name" and value and not value.startswith("="):
            return True
    return False


def shape_from_params(
    params: Mapping[str, str],
    *,
    object_count: int,
    avg_object_size_bytes: int,
    from_cache: bool | None = None,
    consistent_reads_from_cache: bool = True,
) -> ListShape:
    """Build a :class:`ListShape` from a LIST's query parameters and the resource's stats.

    ``from_cache`` overrides the parameter-based guess (use what the server's
    metrics said when known).
    """
    try:
        limit = int(params.get("limit", "0") or 0)
    except ValueError:
        limit = 0
    if from_cache is None:
        from_cache = served_from_cache(params, consistent_reads_from_cache=consistent_reads_from_cache)
    return ListShape(
        object_count=int(object_count),
        avg_object_size_bytes=int(avg_object_size_bytes),
        limit=limit,
        has_selector=bool(params.get("labelSelector") or params.get("fieldSelector")),
        from_cache=bool(from_cache),
        matches_single=matches_single_object(params),
    )


def compare_estimators(shape: ListShape, *, priority_level_max_seats: int = 0) -> dict[str, int]:
    """Both estimates for one shape: ``object_count_seats``, ``size_based_seats`` and their unclamped values."""
    return {
        "object_count_seats": object_count_seats(shape, priority_level_max_seats=priority_level_max_seats),
        "size_based_seats": size_based_seats(shape, priority_level_max_seats=priority_level_max_seats),
        "object_count_seats_unclamped": object_count_seats_unclamped(shape),
        "size_based_seats_unclamped": size_based_seats_unclamped(shape),
    }


# The seed's response sizes (seed 003): 100 KB, 1 MB, 10 MB, from etcd and from cache.
SEED_CASES = tuple(
    (label, total, count, from_cache)
    for label, total in (("100KB", 100_000), ("1MB", 1_000_000), ("10MB", 10_000_000))
    for count in (10, 100, 1000)
    for from_cache in (False, True)
)


def seed_table(cases=SEED_CASES) -> pd.DataFrame:
    """Both estimators on the seed's (response size, object count, etcd/cache) grid, full LISTs.

    Columns: ``response``, ``response_bytes``, ``objects``, ``served_from``,
    ``object_count_seats``, ``size_based_seats`` (and unclamped values).
    """
    rows = []
    for label, total, count, from_cache in cases:
        shape = ListShape(object_count=count, avg_object_size_bytes=total // count, from_cache=from_cache)
        rows.append(
            {
                "response": label,
                "response_bytes": total,
                "objects": count,
                "served_from": "cache" if from_cache else "etcd",
                **compare_estimators(shape),
            }
        )
    return pd.DataFrame(rows)


def estimate_measured_lists(
    lists: pd.DataFrame,
    *,
    object_counts: Mapping[str, int],
    avg_sizes: Mapping[str, int],
    priority_level_max_seats: int = 0,
    consistent_reads_from_cache: bool = True,
) -> pd.DataFrame:
    """Apply both estimators to the LIST probe's measured requests.

    The server's estimator decides cache vs etcd from the parameters alone
    (:func:`served_from_cache`), before the request runs; ``object_count_seats``
    and ``size_based_seats`` do the same so they compare with what the server
    observes. ``size_based_seats_measured_place`` uses where the request was
    really served (``served_from``), which is what its memory cost follows.

    Parameters:
        lists: the LIST probe's table; uses ``resource``, ``params`` (dict or
            JSON string) and ``served_from`` (``cache``/``etcd``/``unknown``).
        object_counts: stored objects per ``resource``.
        avg_sizes: average stored object size (bytes) per ``resource``.

    Returns ``lists`` with ``estimator_assumes`` (``cache``/``etcd``),
    ``object_count_seats``, ``size_based_seats`` and ``size_based_seats_measured_place``.
    """
    out = lists.copy()
    assumed, count_seats, size_seats, size_seats_measured = [], [], [], []
    for row in out.itertuples(index=False):
        params = row.params if isinstance(row.params, Mapping) else json.loads(row.params or "{}")
        stats = {
            "object_count": object_counts.get(row.resource, 0),
            "avg_object_size_bytes": avg_sizes.get(row.resource, 0),
        }
        shape = shape_from_params(params, consistent_reads_from_cache=consistent_reads_from_cache, **stats)
        assumed.append("cache" if shape.from_cache else "etcd")
        count_seats.append(object_count_seats(shape, priority_level_max_seats=priority_level_max_seats))
        size_seats.append(size_based_seats(shape, priority_level_max_seats=priority_level_max_seats))
        measured_place = {"cache": True, "etcd": False}.get(getattr(row, "served_from", "unknown"), shape.from_cache)
        size_seats_measured.append(
            size_based_seats(with_cache(shape, measured_place), priority_level_max_seats=priority_level_max_seats)
        )
    out["estimator_assumes"] = assumed
    out["object_count_seats"] = count_seats
    out["size_based_seats"] = size_seats
    out["size_based_seats_measured_place"] = size_seats_measured
    return out


def with_cache(shape: ListShape, from_cache: bool) -> ListShape:
    """The same shape served from the other place."""
    return replace(shape, from_cache=from_cache)
