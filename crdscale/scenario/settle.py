"""Settling before a profile: wait ``steps.settle_seconds`` so transient garbage is collected, then until
the work the step caused is done (crdscale.collect.workqueues): a profile taken while v1.24.0 still
merges the whole OpenAPI spec charges the merge's transient heap to the CRDs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from crdscale.cluster.clients import ApiError, Cluster
from crdscale.collect.workqueues import QUEUE_METRICS, wait_drained
from crdscale.scenario.config import Steps

log = logging.getLogger(__name__)


class Settler:
    """``settle(label)`` as ``steps`` says, recording ``settle.start`` and ``settle.drained`` events."""

    def __init__(
        self, steps: Steps, cluster: Cluster, events, progress, *, sleep: Callable[[float], None] = time.sleep
    ):
        self.steps = steps
        self.cluster = cluster
        self.events = events
        self.progress = progress
        self.sleep = sleep

    def settle(self, label: str) -> None:
        seconds = float(self.steps.settle_seconds)
        # Recorded with seconds 0 too: every settle, and so every settle.drained, has its start mark.
        self.events.emit("settle.start", label=label, seconds=seconds)
        if seconds > 0:
            self.sleep(seconds)
        if self.steps.settle_queues:
            self.wait_queues(label)

    def wait_queues(self, label: str) -> None:
        """Wait until kube-apiserver's CRD work queues are idle, ``steps.settle_queues_timeout_seconds`` at most."""
        timeout = float(self.steps.settle_queues_timeout_seconds)

        def scrape() -> str:
            # name[]: only these families are encoded, where the server supports it (>= 1.37)
            resp = self.cluster.get("/metrics", params={"name[]": list(QUEUE_METRICS)}, timeout=120)
            if resp.status_code >= 400:
                raise ApiError("GET /metrics", resp)
            return resp.text

        result = wait_drained(scrape, timeout_s=timeout)
        log.info("%s: %s", label, result.describe())
        if result.waited_s >= 5 or not result.drained:
            self.progress.message(f"{label}: {result.describe()}")
        self.events.emit(
            "settle.drained",
            label=label,
            drained=result.drained,
            seconds=round(result.waited_s, 3),
            scrapes=result.scrapes,
            queues=result.queues,
            **({"busy": result.busy} if result.busy else {}),
            **({"error": result.error} if result.error else {}),
        )
