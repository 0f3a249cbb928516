"""Concurrent load: one LIST replayed by N clients at each level while kube-apiserver's memory is sampled.

:func:`concurrent_load` is the LIST probe's ``--load`` (:mod:`.listcost`) and the
shape experiment's measurement (:mod:`.listshapes`). Only loopback servers unless
the user allows their own remote cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd

from crdscale.errors import ClusterError, UsageError
from crdscale.proc import rss_bytes, thread_cpu_seconds

from . import requestcost
from ._http import fresh_transport, is_loopback
from .listobjects import execute
from .requests import ListRequest


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
