"""Whether kube-apiserver has finished the work that installing CRDs caused, from its own ``/metrics``.

A fixed settle time is not enough at provider scale: kube-apiserver v1.24.0 re-merges the whole
aggregated OpenAPI spec after CRD changes (``open_api_aggregation_controller``), and at 1,848 CRDs a
merge was still running minutes after the last CRD was Established -- a heap profile taken then
charges ~700 MiB of in-flight merge to the CRDs. The controllers that react to a CRD all work from
client-go work queues, and each queue exports ``workqueue_depth`` (items waiting) and
``workqueue_unfinished_work_seconds`` (work being processed, 0 when no worker holds an item). A
queue is idle when both are 0; the server has settled when every CRD-driven queue is idle on
consecutive scrapes.

Queues present on v1.24.0 and v1.37.1 (scraped from local servers after installing CRDs,
``tests/data/metrics/``): the names in :data:`CRD_QUEUES`. A name a version does not have is not
exposed and is simply not waited for (``discovery-manager``, aggregated discovery, is v1.26+).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from crdscale.collect.promtext import parse_exposition

log = logging.getLogger(__name__)

CRD_QUEUES: tuple[str, ...] = (
    "crd_openapi_controller",  # builds a CRD's OpenAPI v2 spec (v1.24: then merges the whole spec)
    "crd_openapi_v3_controller",
    "open_api_aggregation_controller",  # the aggregator's whole-spec v2 merge (the 1.24 in-flight merge)
    "open_api_v3_aggregation_controller",
    "DiscoveryController",  # per-group discovery documents
    "discovery-manager",  # aggregated discovery (v1.26+)
    "crd_autoregistration_controller",  # an APIService per CRD group
    "autoregister",
    "APIServiceRegistrationController",
    "crdEstablishing",
    "crd_naming_condition_controller",
    "non_structural_schema_condition_controller",
    "kubernetes_api_approval_conformant_condition_controller",
    "crd_finalizer",
)

QUEUE_METRICS = ("workqueue_depth", "workqueue_unfinished_work_seconds")


@dataclass(frozen=True)
class QueueState:
    """One queue at one scrape: items waiting and seconds of work in progress."""

    depth: float = 0.0
    unfinished_s: float = 0.0

    @property
    def idle(self) -> bool:
        return self.depth == 0 and self.unfinished_s == 0


def queue_states(text: str, queues: Collection[str] = CRD_QUEUES) -> dict[str, QueueState]:
    """The state of each of ``queues`` that a ``/metrics`` body exposes (absent ones are left out)."""
    wanted = set(queues)
    values: dict[str, dict[str, float]] = {}
    for metric, labels, value in parse_exposition(text, QUEUE_METRICS):
        name = labels.get("name")
        if name in wanted:
            values.setdefault(name, {})[metric] = value
    return {
        name: QueueState(v.get("workqueue_depth", 0.0), v.get("workqueue_unfinished_work_seconds", 0.0))
        for name, v in values.items()
    }


def busy(states: Mapping[str, QueueState]) -> dict[str, QueueState]:
    """The queues that still have work waiting or in progress."""
    return {name: s for name, s in states.items() if not s.idle}


@dataclass
class DrainResult:
    """How a wait for the CRD-driven queues ended (the runner records it as ``settle.drained``)."""

    drained: bool
    waited_s: float
    scrapes: int
    queues: list[str] = field(default_factory=list)  # the queues this server exposes that were watched
    busy: dict[str, dict[str, float]] = field(default_factory=dict)  # last busy queues (on timeout)
    error: str | None = None  # /metrics could not be read: the wait was skipped

    def describe(self) -> str:
        if self.error:
            return f"work queues not checked ({self.error})"
        if self.drained:
            return f"CRD work queues drained after {self.waited_s:.1f} s ({self.scrapes} scrapes)"
        names = ", ".join(
            f"{n} (depth {s['depth']:.0f}, {s['unfinished_s']:.0f} s in progress)" for n, s in self.busy.items()
        )
        return f"CRD work queues still busy after {self.waited_s:.1f} s (timeout): {names}"


def wait_drained(
    scrape: Callable[[], str],
    *,
    timeout_s: float,
    poll_s: float = 2.0,
    idle_scrapes: int = 2,
    max_errors: int = 3,
    queues: Collection[str] = CRD_QUEUES,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainResult:
    """Scrape until every watched queue is idle on ``idle_scrapes`` scrapes in a row, or ``timeout_s``.

    Two idle scrapes in a row, because one queue's finished item is often the next queue's new item
    (crd_openapi_controller hands the spec to open_api_aggregation_controller) and a single scrape
    can fall between them; v1.24.0's aggregator re-reads the local specs every second, so two scrapes at
    least ``poll_s`` = 2 s apart also see a merge it has yet to start. The pause between scrapes is
    at least as long as the last scrape took. ``scrape`` returns a ``/metrics`` body; if it raises ``max_errors`` times
    in a row (a server too busy to answer in time gets retried), or the body exposes none of the
    queues, the wait ends with ``error`` set: a server whose queues we cannot see cannot be waited on.
    """
    start = clock()
    scrapes, idle_in_row, last_busy, seen, errors = 0, 0, {}, set(), 0
    while True:
        began = clock()
        try:
            text = scrape()
        except Exception as err:  # ClusterError (timeout, connection) or ApiError (a 403 on a remote target)
            errors += 1
            if errors >= max_errors or clock() - start + poll_s > timeout_s:
                return DrainResult(False, clock() - start, scrapes, sorted(seen), error=f"{type(err).__name__}: {err}")
            log.debug("scraping /metrics for the work queues failed (%s); retrying", err)
            sleep(poll_s)
            continue
        errors = 0
        scrapes += 1
        # v1.24.0 ignores name[] and encodes all of /metrics: 43 MB, 12-61 s a scrape at 1,848 CRDs, costing the
        # server about a core while it lasts. Pausing as long as the scrape took keeps the wait to half its CPU.
        pause = max(poll_s, clock() - began)
        states = queue_states(text, queues)
        if not states and not seen:
            return DrainResult(False, clock() - start, scrapes, [], error="no CRD work queue in /metrics")
        seen.update(states)
        last_busy = busy(states)
        idle_in_row = 0 if last_busy else idle_in_row + 1
        waited = clock() - start
        if idle_in_row >= idle_scrapes:
            return DrainResult(True, waited, scrapes, sorted(seen))
        if waited + pause > timeout_s:
            return DrainResult(
                False,
                waited,
                scrapes,
                sorted(seen),
                busy={n: {"depth": s.depth, "unfinished_s": s.unfinished_s} for n, s in last_busy.items()},
            )
        if last_busy:
            log.debug("waiting for work queues: %s", ", ".join(sorted(last_busy)))
        sleep(pause)
