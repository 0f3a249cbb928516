"""The run's watchdog: ends the run (interrupting the main thread) when the API server dies or the
machine runs out of memory, so the run directory records why instead of a hang or the OOM killer's pick."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

from crdscale.cluster.clients import Cluster
from crdscale.cluster.local import LocalControlPlane
from crdscale.errors import ClusterError
from crdscale.proc import available_memory_bytes
from crdscale.units import fmt_bytes


class Watchdog(threading.Thread):
    """Ends the run (interrupting the main thread) when the API server dies.

    Local target: the recorded kube-apiserver/etcd processes are checked every
    second, and so is the machine's available memory: below ``min_available_bytes``
    the run stops as failed (reason naming memory) before the kernel's OOM killer
    picks a victim — which could be crdscale itself, losing the run's end.
    ``/readyz`` failing for ``unready_limit_s`` (checked every 5 s): 15 s for a remote
    target, where nothing else tells a dead server from a slow one; 180 s for a local one,
    whose processes are watched directly, so a failing ``/readyz`` there means a saturated
    server (a 5,000-CRD run on 2 busy cores timed /readyz out for 15 s while it served on).
    """

    CHECK_EVERY_S = 5.0

    def __init__(
        self,
        cluster: Cluster,
        plane: LocalControlPlane | None,
        *,
        interrupt_main: bool = True,
        min_available_bytes: int = 0,
        available: Callable[[], int | None] = available_memory_bytes,
        unready_limit_s: float | None = None,
    ):
        super().__init__(name="crdscale-watchdog", daemon=True)
        self.unready_limit_s = unready_limit_s if unready_limit_s is not None else (15.0 if plane is None else 180.0)
        self.interrupt_main = interrupt_main
        self.min_available_bytes = min_available_bytes
        self.available = available
        self.cluster = cluster
        self.plane = plane
        self.reason: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        failures, last_http = 0, time.monotonic()
        while not self._stop_event.wait(1.0):
            if self.plane is not None:
                dead = [p for p in self.plane.processes if not p.alive()]
                if dead:
                    self._fail(f"{dead[0].name} (pid {dead[0].pid}) exited unexpectedly")
                    return
                left = self.available() if self.min_available_bytes else None
                if left is not None and left < self.min_available_bytes:
                    self._fail(
                        f"memory guard: only {fmt_bytes(left, unit='MiB', digits=0)} of memory available, below the "
                        f"{fmt_bytes(self.min_available_bytes, unit='MiB', digits=0)} guard (steps.memory_guard_mib); "
                        "stopped before the OOM killer"
                    )
                    return
            if time.monotonic() - last_http >= self.CHECK_EVERY_S:
                last_http = time.monotonic()
                try:
                    ok = self.cluster.get("/readyz", timeout=self.CHECK_EVERY_S).status_code == 200
                except ClusterError:
                    ok = False
                failures = 0 if ok else failures + 1
                if failures * self.CHECK_EVERY_S >= self.unready_limit_s:
                    alive = " although its process runs (saturated?)" if self.plane is not None else ""
                    self._fail(f"API server {self.cluster.server} not ready for {self.unready_limit_s:.0f} s{alive}")
                    return

    def _fail(self, reason: str) -> None:
        if self._stop_event.is_set():  # the run is already shutting the server down
            return
        self.reason = reason
        # A real signal to the main thread: unlike _thread.interrupt_main() it also
        # cuts short a blocking sleep (the settle period) or socket wait.
        main = threading.main_thread()
        if main.ident is not None and self.interrupt_main:
            signal.pthread_kill(main.ident, signal.SIGINT)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=10)
