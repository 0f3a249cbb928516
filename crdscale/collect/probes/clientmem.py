"""Client memory probe: what a controller's informer cache costs, per object and per CRD.

The cert-manager PR (seed 004) measured cainjector's peak RSS with 100 MiB of
Secrets: ~290 MB caching full Secrets, ~46 MB caching
``PartialObjectMetadata``; the Crossplane one-pager put kube-apiserver's CRD
informer caches at < ~80 MB for ~780 CRDs; crossplane-runtime#1056 saw a
provider caching ~900 CRDs reach ~1.5 GB until a transform stripped their
schemas. :func:`measure_cache` redoes these with client-go: crdscale-client's
``cachemem`` mode (:mod:`crdscale.cluster.goclient`) runs one informer cache
-- full objects, metadata only, or full objects through a transform that
strips ``managedFields`` and CRD schemas -- in a fresh process per mode and
reports its peak Go heap, its heap after a forced GC, its peak RSS
(``VmHWM``) and what the cache still holds of what the transform strips. Both
initial-sync strategies of client-go are measured: a LIST and the streaming
WatchList client-go >= 1.35 uses by default.

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


# client-go's feature gate for the streaming initial sync (sendInitialEvents), read from the environment.
WATCH_LIST_ENV = "KUBE_FEATURE_WatchListClient"
WATCH_LIST = {"off": "false", "on": "true"}
# --cache -> crdscale-client's --resource for the built-in kinds (custom resources are GROUP/VERSION/RESOURCE).
CLIENT_RESOURCES = {"secrets": "secrets", "configmaps": "configmaps", "crds": "customresourcedefinitions"}


def cache_report(event: dict) -> dict:
    """One row from a crdscale-client ``cachemem`` event: bytes and KiB as sent, plus MiB columns.

    ``mode`` is the cache mode, ``watch_list`` whether client-go synced with WatchList (as the
    client's feature gate said), ``cache_heap_bytes`` the Go heap after a forced GC minus the heap
    before the informer started: what the cache holds.
    """
    row = {k: v for k, v in event.items() if k not in ("event", "t")}
    row["mode"] = row.pop("kind")
    row["seconds"] = row.pop("sync_s")
    row["cache_heap_bytes"] = max(row["live_heap_bytes"] - row["baseline_heap_bytes"], 0)
    for key in ("peak_heap_bytes", "live_heap_bytes", "cache_heap_bytes"):
        row[key.replace("_bytes", "_mib")] = row[key] / 2**20
    row["peak_rss_mib"] = row["peak_rss_kib"] / 1024
    return row


def measure_cache(
    cluster,
    resource: str,
    *,
    namespace: str = "",
    label_selector: str = "",
    modes: Iterable[str] = ("full", "metadata", "transform"),
    watch_list: Iterable[str] = ("off", "on"),
    timeout_s: float = 600.0,
) -> list[dict]:
    """A client-go informer cache of ``resource`` per (mode, WatchList setting), each in a fresh process.

    ``resource`` is crdscale-client's ``--resource``: ``secrets``, ``configmaps``,
    ``customresourcedefinitions`` or ``GROUP/VERSION/RESOURCE``; ``namespace`` empty caches
    all namespaces. Returns one row per run (:func:`cache_report`): ``mode``, ``watch_list``,
    ``items``, ``seconds`` (to synced), ``peak_heap_bytes`` (largest Go HeapAlloc sampled every
    20 ms), ``live_heap_bytes`` (after a GC once synced), ``cache_heap_bytes``, ``peak_rss_kib``
    (VmHWM), ``baseline_rss_kib``, ``managed_fields`` and ``schemas`` (entries left in the cache),
    and MiB columns. Raises :class:`BinaryError` when crdscale-client cannot be built.
    """
    from crdscale.cluster import goclient
    from crdscale.errors import ClusterError

    reports = []
    for setting in watch_list:
        for mode in modes:
            args, env = goclient.connection(cluster.kubeconfig, cluster.context)
            args += [f"--kind={mode}", f"--resource={resource}", f"--namespace={namespace}"]
            args += [f"--label-selector={label_selector}"] if label_selector else []
            log.info(f"client-go cache of {resource}: {mode}, WatchList {setting}")
            events = goclient.run_once(
                "cachemem", args, timeout_s=timeout_s, env={**env, WATCH_LIST_ENV: WATCH_LIST[setting]}
            )
            event = next((e for e in events if e["event"] == "cachemem"), None)
            if event is None:
                raise ClusterError(f"crdscale-client cachemem ({mode}) reported nothing")
            reports.append(cache_report(event))
    return reports


def json_bytes(cluster, path: str, selector: str = "") -> tuple[int, int]:
    """``(bytes, items)`` of one full JSON LIST of ``path`` from the watch cache: the objects'
    serialized size, the yardstick a cache's bytes per object are compared with."""
    params = {"resourceVersion": "0"} | ({"labelSelector": selector} if selector else {})
    resp = cluster.get(path, params=params, headers={"Accept": "application/json"}, timeout=600)
    from ._http import check

    check(resp, f"LIST {path}", ok=(200,))
    return len(resp.content), len(resp.json().get("items") or [])


def _install_crds(fixtures, config: ClientMemConfig) -> int:
    """Install the CRDs of ``config.crds_from`` (matching ``crd_match``, at most ``crd_limit``) with
    this probe instance's labels, so that cleanup removes them; returns how many were Established."""
    import re

    from crdscale.crds.install import Installer
    from crdscale.crds.load import load_crds, require_crds
    from crdscale.errors import ClusterError

    loaded = load_crds(config.crds_from)
    require_crds(loaded, config.crds_from)
    crds = [c for c in loaded.crds if re.search(config.crd_match, c["metadata"]["name"])]
    crds = crds[: config.crd_limit] if config.crd_limit else crds
    if not crds:
        raise ClusterError(f"no CRD of {config.crds_from} matches {config.crd_match!r}")
    labelled = []
    for crd in crds:
        metadata = dict(crd["metadata"], labels={**(crd["metadata"].get("labels") or {}), **fixtures.labels})
        labelled.append(dict(crd, metadata=metadata))
    fixtures.crd_names.extend(c["metadata"]["name"] for c in labelled)
    log.info(f"installing {len(labelled)} CRDs of {config.crds_from}")
    with Installer(fixtures.cluster, fixtures.run_id) as installer:
        result = installer.install_step(0, labelled)
    if result.established < len(labelled):
        raise ClusterError(f"{result.established} of {len(labelled)} CRDs Established")
    return result.established


def probe(cluster, *, run_id: str, config: ClientMemConfig | None = None) -> pandas.DataFrame:  # noqa: F821
    """Create what ``config`` caches, measure a client-go cache of it per mode and WatchList setting,
    clean up (unless ``config.keep``).

    Returns :func:`crdscale.models.probecosts.clientmem_costs` of the runs' rows (see :func:`measure_cache`)
    with ``client`` = ``client-go``, ``cache``, ``objects``, ``object_bytes`` and ``json_bytes``
    (one full JSON LIST of the cached objects). Without crdscale-client (no Go), Secrets are measured
    by the Python stand-in (:func:`measure`, ``client`` = ``python``) with a warning; other caches fail.
    """
    import pandas as pd

    from crdscale.errors import BinaryError
    from crdscale.models.probecosts import clientmem_costs

    from .configs import ClientMemConfig, ListObjects
    from .fixtures import CRD_PATH, ProbeFixtures
    from .listobjects import populate

    config = config or ClientMemConfig()
    config.validate()
    with ProbeFixtures(cluster, run_id, keep=config.keep) as fixtures:
        objects, object_bytes = config.objects, config.object_bytes
        if config.cache == "crds":
            objects, object_bytes = (_install_crds(fixtures, config) if config.crds_from else 0), 0
            # Every CRD in the cluster, as a controller's CRD informer sees them (ours and any others).
            resource, namespace, selector, path = CLIENT_RESOURCES["crds"], "", "", CRD_PATH
        else:
            n, size = config.objects, config.object_bytes
            objects = ListObjects(
                custom_resources=n if config.cache == "custom-resources" else 0,
                cr_bytes=size,
                secrets=n if config.cache == "secrets" else 0,
                secret_bytes=size,
                configmaps=n if config.cache == "configmaps" else 0,
                configmap_bytes=size,
                namespaces=1,
            )
            target = populate(fixtures, objects).targets[0]
            resource = CLIENT_RESOURCES.get(config.cache) or f"{target.group}/{target.version}/{target.resource}"
            namespace, selector = target.namespace, fixtures.selector
            path = target.collection_path(namespace)
        serialized, listed = json_bytes(cluster, path, selector)
        try:
            rows = [
                dict(r, client="client-go")
                for r in measure_cache(
                    cluster,
                    resource,
                    namespace=namespace,
                    label_selector=selector,
                    modes=config.modes,
                    watch_list=config.watch_list,
                )
            ]
        except BinaryError as err:
            if config.cache != "secrets":
                raise
            log.warning("client memory measured with the Python stand-in (crdscale-client unavailable: %s)", err)
            rows = [dict(r, client="python") for r in measure(cluster, path)]
    table = pd.DataFrame(rows).assign(
        cache=config.cache, json_bytes=serialized, json_items=listed, objects=objects, object_bytes=object_bytes
    )
    return clientmem_costs(table)


CLIENTMEM_COLUMNS = (
    "client",
    "mode",
    "watch_list",
    "items",
    "seconds",
    "peak_rss_mib",
    "cache_heap_mib",
    "heap_per_object_bytes",
    "heap_per_crd_bytes",
    "heap_per_json_byte",
    "ratio_to_full",
    "rss_ratio_to_full",
    "managed_fields",
    "schemas",
)


def run(cluster, config: ClientMemConfig, writer, *, step: int = 0, run_id: str):
    """The client-memory probe as one step; writes its table (``clientmem``) into ``writer``."""
    from . import ProbeResult, Section, write_tables

    table = probe(cluster, run_id=run_id, config=config)
    write_tables(writer, "clientmem", step, {"clientmem": table}, main="clientmem")
    what = (
        "every CRD in the cluster"
        if config.cache == "crds"
        else f"{config.objects} {config.cache} x {config.object_bytes} B"
    )
    title = f"client-go cache of {what}: {', '.join(config.modes)}; WatchList {', '.join(config.watch_list)}"
    units = {
        "seconds": "s",
        "peak_rss_mib": "f1",
        "cache_heap_mib": "f1",
        "heap_per_object_bytes": "int",
        "heap_per_crd_bytes": "int",
        "heap_per_json_byte": "x1",
        "ratio_to_full": "x2",
        "rss_ratio_to_full": "x2",
    }
    note = (
        "cache_heap: Go heap after a forced GC minus before the informer started; per CRD: per CRD the cache "
        "covers (blank for built-in kinds); heap_per_json_byte: heap per object over its JSON size; managed_fields, "
        "schemas: entries still in the cache."
    )
    summary = {
        f"{r.mode}/watchlist-{'on' if r.watch_list else 'off'}": {
            "items": int(r.items),
            "peak_rss_mib": round(float(r.peak_rss_mib), 1),
            # None when nothing was cached (a CRD cache of a cluster without CRDs).
            "heap_per_object_bytes": round(r.heap_per_object_bytes) if r.heap_per_object_bytes > 0 else None,
        }
        for r in table.itertuples(index=False)
        if r.client == "client-go"
    }
    return ProbeResult(
        "clientmem",
        {"clientmem": table},
        "clientmem",
        summary=summary,
        sections=[Section(title, "clientmem", CLIENTMEM_COLUMNS, units, note)],
    )


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
