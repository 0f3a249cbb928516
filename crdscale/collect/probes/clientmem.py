"""Client memory probe: peak memory of a client caching full objects versus metadata only.

The cert-manager PR (seed 004) measured cainjector's peak RSS with 100 MiB of
Secrets: ~290 MB caching full Secrets, ~46 MB caching
``PartialObjectMetadata``. :func:`measure_cache` redoes that with client-go:
crdscale-client's ``cachemem`` mode (:mod:`crdscale.cluster.goclient`) runs
one informer cache of a namespace's Secrets -- typed full objects, or the
metadata informer -- in a fresh process per mode and reports its peak Go heap,
its live heap once synced, and its peak RSS (``VmHWM``). Both initial-sync
strategies of client-go are measured: a LIST (what the seed's client did) and
the streaming watch-list client-go >= 1.35 uses by default.

:func:`measure` is the older Python stand-in (``python -m
crdscale.collect.probes.clientmem``: one LIST read and decoded by ``requests`` +
``json``); it also reports response bytes, and is the fallback when
crdscale-client cannot be built. Its child imports only ``requests`` and the
standard library and reads the credentials from its environment
(:func:`._http.credentials_env`), so nothing secret appears on a command line.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .configs import ClientMemConfig

log = logging.getLogger(__name__)

MODES = {
    "full": "application/json",
    "metadata": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
}


def _rss_kib() -> int:
    """Peak RSS of this process so far, KiB.

    ``VmHWM`` from ``/proc/self/status``, not ``getrusage``: Linux carries
    ``ru_maxrss`` across ``execve``, so a child of a big parent (pytest, a
    notebook kernel) would report the parent's peak.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _current_rss_kib() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def child_main(argv: list[str]) -> int:
    """Entry point of the child: ``clientmem <path> <mode>``; prints one JSON line."""
    import time

    # ClusterSession keeps our CA even when REQUESTS_CA_BUNDLE is set; its module imports requests and yaml.
    from crdscale.cluster.clients import ClusterSession

    path, mode = argv[0], argv[1]
    env = os.environ
    session = ClusterSession()
    if env.get("CRDSCALE_PROBE_INSECURE"):
        session.verify = False
    elif env.get("CRDSCALE_PROBE_CA"):
        session.verify = env["CRDSCALE_PROBE_CA"]
    if env.get("CRDSCALE_PROBE_CERT"):
        session.cert = (env["CRDSCALE_PROBE_CERT"], env["CRDSCALE_PROBE_KEY"])
    if env.get("CRDSCALE_PROBE_AUTH"):
        session.headers["Authorization"] = env["CRDSCALE_PROBE_AUTH"]
    baseline_kib = _current_rss_kib()
    start = time.perf_counter()
    resp = session.get(env["CRDSCALE_PROBE_SERVER"].rstrip("/") + path, headers={"Accept": MODES[mode]}, timeout=600)
    body = resp.content
    objects = json.loads(body)  # decoded like an informer's initial list
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "mode": mode,
                "status": resp.status_code,
                "bytes": len(body),
                "items": len(objects.get("items") or []),
                "seconds": seconds,
                "baseline_rss_kib": baseline_kib,
                "peak_rss_kib": _rss_kib(),
            }
        )
    )
    return 0 if resp.status_code == 200 else 1


def measure(cluster, path: str, *, modes: Iterable[str] = ("full", "metadata"), timeout_s: float = 600.0) -> list[dict]:
    """Run one child per mode against collection ``path``; returns their reports.

    Each report has ``mode``, ``status``, ``bytes`` (response body), ``items``,
    ``seconds``, ``baseline_rss_kib`` (after imports), ``peak_rss_kib`` and
    ``peak_rss_mib``.
    """
    from crdscale.errors import ClusterError

    from ._http import credentials_env

    env = {**os.environ, **credentials_env(cluster)}
    reports = []
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        proc = subprocess.run(
            [sys.executable, "-m", "crdscale.collect.probes.clientmem", path, mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise ClusterError(
                f"client-memory child ({mode}) failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}"
            )
        report = json.loads(lines[-1])
        report["peak_rss_mib"] = report["peak_rss_kib"] / 1024
        reports.append(report)
    return reports


CACHE_KINDS = ("full", "metadata")
# client-go's feature gate for the streaming initial sync (sendInitialEvents), read from the environment.
WATCH_LIST_ENV = "KUBE_FEATURE_WatchListClient"
INITIAL_SYNC = {"list": "false", "watch-list": "true"}


def cache_report(event: dict, *, initial_sync: str) -> dict:
    """One row from a crdscale-client ``cachemem`` event: bytes and KiB as sent, plus MiB columns."""
    row = {k: v for k, v in event.items() if k not in ("event", "t")}
    row["mode"] = row.pop("kind")
    row["initial_sync"] = initial_sync
    row["seconds"] = row.pop("sync_s")
    for key in ("peak_heap_bytes", "live_heap_bytes"):
        row[key.replace("_bytes", "_mib")] = row[key] / 2**20
    row["peak_rss_mib"] = row["peak_rss_kib"] / 1024
    return row


def measure_cache(
    cluster,
    namespace: str,
    *,
    kinds: Iterable[str] = CACHE_KINDS,
    initial_syncs: Iterable[str] = ("list", "watch-list"),
    timeout_s: float = 600.0,
) -> list[dict]:
    """A client-go informer cache of ``namespace``'s Secrets per (kind, initial sync), each in a fresh process.

    Returns one report per run: ``mode`` (``full``/``metadata``), ``initial_sync``
    (``list``/``watch-list``), ``items``, ``seconds`` (to synced), ``peak_heap_bytes``
    (largest Go HeapAlloc sampled every 20 ms), ``live_heap_bytes`` (after a GC once
    synced), ``peak_rss_kib`` (VmHWM), ``baseline_rss_kib``, and the same in MiB.
    Raises :class:`BinaryError` when crdscale-client cannot be built.
    """
    from crdscale.cluster import goclient
    from crdscale.errors import ClusterError

    reports = []
    for initial_sync in initial_syncs:
        for kind in kinds:
            args, env = goclient.connection(cluster.kubeconfig, cluster.context)
            args += [f"--kind={kind}", f"--namespace={namespace}"]
            events = goclient.run_once(
                "cachemem",
                args,
                timeout_s=timeout_s,
                env={**env, WATCH_LIST_ENV: INITIAL_SYNC[initial_sync]},
            )
            event = next((e for e in events if e["event"] == "cachemem"), None)
            if event is None:
                raise ClusterError(f"crdscale-client cachemem ({kind}) reported nothing")
            reports.append(cache_report(event, initial_sync=initial_sync))
    return reports


def probe(cluster, *, run_id: str, config: ClientMemConfig | None = None) -> pandas.DataFrame:  # noqa: F821
    """Create ``config.cached_secrets`` Secrets of ``config.cached_secret_bytes`` each, measure a client-go
    cache of them, clean up (unless ``config.keep``).

    Returns one row per (mode, initial sync) (see :func:`measure_cache`) with
    ``client`` = ``client-go``, plus ``secrets`` and ``secret_bytes``. Without
    crdscale-client (no Go), the Python stand-in's rows (:func:`measure`, ``client`` = ``python``)
    with a warning.
    """
    import pandas as pd

    from crdscale.errors import BinaryError

    from .configs import ClientMemConfig, ListObjects
    from .fixtures import ProbeFixtures
    from .listcost import populate

    config = config or ClientMemConfig()
    config.validate()
    secrets, secret_bytes = config.cached_secrets, config.cached_secret_bytes
    objects = ListObjects(custom_resources=0, secrets=secrets, secret_bytes=secret_bytes, namespaces=1)
    with ProbeFixtures(cluster, run_id, keep=config.keep) as fixtures:
        populated = populate(fixtures, objects)
        ns = populated.namespaces[0]
        try:
            reports = [dict(r, client="client-go") for r in measure_cache(cluster, ns)]
        except BinaryError as err:
            log.warning("client memory measured with the Python stand-in (crdscale-client unavailable: %s)", err)
            reports = [dict(r, client="python") for r in measure(cluster, f"/api/v1/namespaces/{ns}/secrets")]
    return pd.DataFrame(reports).assign(secrets=secrets, secret_bytes=secret_bytes)


CLIENTMEM_COLUMNS = (
    "client",
    "mode",
    "initial_sync",
    "items",
    "bytes",
    "seconds",
    "peak_heap_mib",
    "live_heap_mib",
    "peak_rss_mib",
)


def run(cluster, config: ClientMemConfig, writer, *, step: int = 0, run_id: str):
    """The client-memory probe as one step; writes its table (``clientmem``) into ``writer``."""
    from . import ProbeResult, Section, write_tables

    table = probe(cluster, run_id=run_id, config=config)
    write_tables(writer, "clientmem", step, {"clientmem": table}, main="clientmem")
    title = (
        f"Client cache of {config.cached_secrets} Secrets x {config.cached_secret_bytes} B: full vs metadata-only (MiB)"
    )
    units = {"bytes": "MiB", "seconds": "s", "peak_heap_mib": "f1", "live_heap_mib": "f1", "peak_rss_mib": "f1"}
    return ProbeResult(
        "clientmem", {"clientmem": table}, "clientmem", sections=[Section(title, "clientmem", CLIENTMEM_COLUMNS, units)]
    )


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
