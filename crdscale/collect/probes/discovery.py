"""Discovery probe: how long a cold client takes to learn the API, with client-go's throttling.

* :func:`client_go_discovery` -- client-go's own discovery client (crdscale-client's
  ``discovery`` mode, :mod:`crdscale.cluster.goclient`) through client-go's token
  bucket at a given (burst, QPS): per-request timings, limiter waits, wall time.
  This is what the probe and the sweep measure.
* :func:`legacy_discovery` -- a Python imitation (``GET /api``, ``GET /apis``, then
  every group-version in parallel through :class:`tokenbucket.TokenBucket`), used
  only when crdscale-client cannot be built: it cannot disagree with the model.
* :func:`aggregated_discovery` -- the two-request aggregated discovery with
  ETag revalidation.
* :func:`kubectl_discovery` -- a real ``kubectl`` (e.g. v1.23.3 and v1.24.0 built
  from Go modules) with an empty cache dir: wall time and GETs.
* :func:`sweep` -- add CRDs in new groups until the server has 192 and 368
  group-versions and compare measured with predicted throttling delays.

Everything returns plain dicts and DataFrames; nothing plots.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from crdscale.cluster import binaries, goclient
from crdscale.errors import BinaryError, ClusterError
from crdscale.models import tokenbucket

from . import ProbeResult, Section, write_tables
from ._http import fresh_transport, timed_get
from .configs import kubectl_limit, validate_limits
from .fixtures import ProbeFixtures, sweep_crds
from .requests import (
    AGGREGATED_DISCOVERY_ACCEPT,
    LEGACY_DISCOVERY_ACCEPT,
    aggregated_group_versions,
    is_aggregated_discovery,
    legacy_group_version_paths,
)

log = logging.getLogger(__name__)

MAX_PARALLEL = 512


@dataclass
class LegacyDiscovery:
    """One legacy discovery run.

    Attributes:
        requests: one row per request: ``path``, ``phase`` (``groups``/``resources``),
            ``issued_s`` (when the client wanted to send it, seconds from start),
            ``limiter_wait_s`` (the bucket's reservation), ``queued_s`` (issued to sent,
            wall clock: limiter plus thread scheduling), ``start_s``, ``latency_s``,
            ``bytes``, ``status``.
        summary: ``limit``, ``burst``, ``qps``, ``group_versions``, ``requests``,
            ``wall_s``, ``preamble_s``, ``max_wait_s``, ``bytes``, ``errors``.
    """

    requests: pd.DataFrame
    summary: dict


def _count_group_versions(cluster) -> int:
    core = cluster.get_json("/api")
    groups = cluster.get_json("/apis")
    return len(legacy_group_version_paths(core, groups))


def count_group_versions(cluster) -> int:
    """Group-versions a legacy discovery would fetch (``kubectl api-versions | wc -l``)."""
    return _count_group_versions(cluster)


def legacy_discovery(
    cluster,
    limit: tokenbucket.RateLimit,
    *,
    max_parallel: int = MAX_PARALLEL,
    timeout_s: float = 120.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> LegacyDiscovery:
    """Run one cold legacy discovery through a token bucket ``limit`` (fresh connections).

    Returns a :class:`LegacyDiscovery` with per-request rows and a summary (seconds, bytes). ``clock`` and
    ``sleep`` are the limiter's and the rows' times (seconds; a request's own latency is the transport's),
    injectable so a test can hold the time still and see the limiter's waits exactly.
    """
    rows: list[dict] = []
    rows_lock = threading.Lock()
    transport = fresh_transport(cluster, pool_size=min(max_parallel, 1024))
    # The bucket starts full at t0, as a new client-go client's does, so the model's clock and the probe's agree.
    limiter = tokenbucket.Limiter(limit.burst, limit.qps, clock=clock, sleep=sleep)
    t0 = clock()

    def fetch(path: str, phase: str, issued: float) -> tuple[dict, bytes]:
        wait = limiter.wait()
        start = clock()
        error = ""
        try:
            result = timed_get(
                transport, cluster.url(path), headers={"Accept": LEGACY_DISCOVERY_ACCEPT}, timeout=timeout_s
            )
            status, size, latency, body = result.status, result.bytes, result.latency_s, result.body
        except ClusterError as err:
            status, size, latency, body, error = 0, 0, clock() - start, b"", str(err)[-200:]
        row = {
            "path": path,
            "phase": phase,
            "issued_s": issued - t0,
            "limiter_wait_s": wait,
            "queued_s": start - issued,
            "start_s": start - t0,
            "latency_s": latency,
            "bytes": size,
            "status": status,
            "error": error,
        }
        with rows_lock:
            rows.append(row)
        return row, body

    try:
        core_row, core_body = fetch("/api", "groups", clock())
        groups_row, groups_body = fetch("/apis", "groups", clock())
        if core_row["status"] != 200 or groups_row["status"] != 200:
            raise ClusterError(f"discovery: GET /api -> {core_row['status']}, GET /apis -> {groups_row['status']}")
        paths = legacy_group_version_paths(json.loads(core_body), json.loads(groups_body))
        preamble_s = clock() - t0
        issued = clock()
        with ThreadPoolExecutor(max_workers=max(1, min(len(paths), max_parallel))) as pool:
            list(pool.map(lambda p: fetch(p, "resources", issued), paths))
        wall = clock() - t0
    finally:
        transport.close()

    table = pd.DataFrame(rows).sort_values("start_s").reset_index(drop=True)
    summary = {
        "mode": "legacy",
        "limit": limit.label(),
        "burst": limit.burst,
        "qps": limit.qps,
        "group_versions": len(paths),
        "requests": len(table),
        "wall_s": wall,
        "preamble_s": preamble_s,
        "max_wait_s": float(table["queued_s"].max()),
        "max_limiter_wait_s": float(table["limiter_wait_s"].max()),
        "bytes": int(table["bytes"].sum()),
        "errors": int((table["status"] != 200).sum()),
        "predicted_delay_s": tokenbucket.predicted_discovery_delay(len(paths), limit, preamble_duration_s=preamble_s),
    }
    return LegacyDiscovery(table, summary)


def discovery_from_events(
    events: list[dict], limit: tokenbucket.RateLimit, *, mode: str = "client-go"
) -> LegacyDiscovery:
    """A :class:`LegacyDiscovery` from crdscale-client ``discovery`` events (``request``, ``wait``, ``summary``).

    client-go does not say which request a limiter wait belonged to; each request
    is sent right after its wait ends, so the k-th wait to end is matched with the
    k-th request sent (``limiter_wait_s``, NaN when the counts differ). Times are
    seconds from the start of the discovery.
    """
    summary_event = next((e for e in events if e["event"] == "summary"), None)
    if summary_event is None:
        raise ClusterError("crdscale-client discovery ended without a summary")
    begin = summary_event["t"] - summary_event["wall_s"]
    requests = sorted((e for e in events if e["event"] == "request"), key=lambda e: e["start_s"])
    waits = sorted((e["start_s"] + e["wait_s"], e["wait_s"]) for e in events if e["event"] == "wait")
    matched = len(waits) == len(requests)
    rows = []
    for k, r in enumerate(requests):
        wait = waits[k][1] if matched else float("nan")
        start = r["start_s"] - begin
        rows.append(
            {
                "path": r["path"],
                "phase": "groups" if r["path"] in ("/api", "/apis") else "resources",
                "issued_s": start - (wait if matched else 0.0),
                "limiter_wait_s": wait,
                "queued_s": wait if matched else float("nan"),
                "start_s": start,
                "latency_s": r["latency_s"],
                "bytes": r["bytes"],
                "status": r["status"],
                "error": r.get("error", ""),
            }
        )
    table = pd.DataFrame(
        rows,
        columns=[
            "path",
            "phase",
            "issued_s",
            "limiter_wait_s",
            "queued_s",
            "start_s",
            "latency_s",
            "bytes",
            "status",
            "error",
        ],
    )
    groups = table[table["phase"] == "groups"]
    preamble_s = float((groups["start_s"] + groups["latency_s"]).max()) if len(groups) else 0.0
    gv = int(summary_event["group_versions"])
    wait_values = [w for _, w in waits]
    summary = {
        "mode": mode,
        "limit": limit.label(),
        "burst": limit.burst,
        "qps": limit.qps,
        "group_versions": gv,
        "requests": len(table),
        "wall_s": float(summary_event["wall_s"]),
        "preamble_s": preamble_s,
        "max_wait_s": max(wait_values, default=0.0),
        "max_limiter_wait_s": max(wait_values, default=0.0),
        "bytes": int(table["bytes"].sum()),
        "errors": int((table["status"] != 200).sum()) + int(bool(summary_event.get("error"))),
        "predicted_delay_s": tokenbucket.predicted_discovery_delay(gv, limit, preamble_duration_s=preamble_s),
    }
    return LegacyDiscovery(table, summary)


def client_go_discovery(
    cluster,
    limit: tokenbucket.RateLimit,
    *,
    legacy: bool = True,
    cache: str = "memory",
    timeout_s: float = 600.0,
) -> LegacyDiscovery:
    """One cold discovery by client-go's discovery client in a fresh crdscale-client process.

    ``legacy`` True: ``/api``, ``/apis`` and one GET per group-version (client-go
    before aggregated discovery, kubectl <= 1.29); False: aggregated. ``cache``:
    ``memory`` (memcache) or ``disk`` (kubectl's cache, in an empty temporary directory).
    Returns a :class:`LegacyDiscovery` (seconds, bytes); raises :class:`BinaryError`
    when crdscale-client cannot be built.
    """
    args, env = goclient.connection(cluster.kubeconfig, cluster.context)
    args += [
        f"--burst={limit.burst}",
        f"--qps={limit.qps:g}",
        f"--legacy={'true' if legacy else 'false'}",
        f"--cache={cache}",
    ]
    with tempfile.TemporaryDirectory(prefix="crdscale-discovery-cache-") as cache_dir:
        if cache == "disk":
            args.append(f"--cache-dir={cache_dir}")
        events = goclient.run_once("discovery", args, timeout_s=timeout_s, env=env)
    # The disk cache's client always prefers aggregated discovery when the server serves it.
    kind = "legacy" if legacy and cache == "memory" else "aggregated"
    return discovery_from_events(
        events, limit, mode="client-go" if kind == "legacy" else f"client-go {kind}, {cache} cache"
    )


def _discoverer() -> Callable:
    """client-go's discovery (crdscale-client), or the Python imitation with a warning when it cannot be built."""
    try:
        goclient.binary()
    except BinaryError as err:
        log.warning("discovery measured with the Python imitation of client-go (crdscale-client unavailable: %s)", err)
        return legacy_discovery
    return lambda cluster, limit: client_go_discovery(cluster, limit)


def aggregated_discovery(cluster, *, timeout_s: float = 120.0) -> dict:
    """Aggregated discovery (``/api`` + ``/apis`` as ``APIGroupDiscoveryList``) and ETag revalidation.

    Returns ``supported`` (bool), ``version`` (``v2``/``v2beta1``), ``requests``,
    ``bytes``, ``wall_s``, ``group_versions``, and for the revalidation
    ``revalidate_status`` (304 when the ETag matched), ``revalidate_bytes``, ``revalidate_s``.
    """
    transport = fresh_transport(cluster, pool_size=2)
    try:
        t0 = time.monotonic()
        results = {
            p: timed_get(transport, cluster.url(p), headers={"Accept": AGGREGATED_DISCOVERY_ACCEPT}, timeout=timeout_s)
            for p in ("/api", "/apis")
        }
        wall = time.monotonic() - t0
        versions = {p: is_aggregated_discovery(r.headers.get("Content-Type")) for p, r in results.items()}
        supported = all(versions.values()) and all(r.status == 200 for r in results.values())
        out = {
            "mode": "aggregated",
            "supported": supported,
            "version": versions.get("/apis"),
            "requests": 2,
            "bytes": sum(r.bytes for r in results.values()),
            "wall_s": wall,
            "group_versions": sum(len(aggregated_group_versions(r.json())) for r in results.values())
            if supported
            else None,
        }
        if not supported:
            return out
        t1 = time.monotonic()
        statuses, sizes, etags = [], 0, 0
        for path, first in results.items():
            etag = first.headers.get("ETag")
            headers = {"Accept": AGGREGATED_DISCOVERY_ACCEPT}
            if etag:
                headers["If-None-Match"] = etag
                etags += 1
            again = timed_get(transport, cluster.url(path), headers=headers, timeout=timeout_s)
            statuses.append(again.status)
            sizes += again.bytes
        out.update(
            {
                "etags": etags,
                "revalidate_status": statuses[-1] if len(set(statuses)) == 1 else ",".join(map(str, statuses)),
                "revalidate_bytes": sizes,
                "revalidate_s": time.monotonic() - t1,
            }
        )
        return out
    finally:
        transport.close()


# --- kubectl -----------------------------------------------------------------

# kubectl -v=6 logs a request as "GET https://..." (up to about v1.30) or, with
# structured logging, as '"Response" verb="GET" url="https://..."'.
_GET_LINE = re.compile(r'\bGET https?://\S+|verb="GET" url="https?://')
_THROTTLE_LINE = re.compile(r"client-side throttling")


def find_kubectl(candidate: str | None = None) -> tuple[str | None, str]:
    """A real kubectl binary and its client version, or ``(None, reason)``.

    Some machines ship a ``kubectl`` that is a dispatcher shim; it is rejected
    because its discovery behaviour is not kubectl's.
    """
    path = candidate or os.environ.get("CRDSCALE_KUBECTL") or shutil.which("kubectl")
    if not path:
        return None, "no kubectl on PATH"
    try:
        out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{path} does not run: {err}"
    try:
        version = json.loads(out.stdout)["clientVersion"]["gitVersion"]
    except (ValueError, KeyError, TypeError):
        return None, f"{path} did not report a client version"
    if "dispatcher" in version or not re.match(r"^v\d+\.\d+\.\d+", version):
        return None, f"{path} is not a real kubectl build ({version})"
    return path, version


def kubectl_discovery(
    kubeconfig, *, context: str | None = None, kubectl: str | None = None, verb: Iterable[str] = ("get", "pods")
) -> dict:
    """``kubectl -v=6 <verb>`` with an empty ``--cache-dir``: wall time and GETs.

    ``kubeconfig`` (one file or a list) reaches kubectl as ``$KUBECONFIG``, as for
    crdscale-client (:func:`crdscale.cluster.goclient.connection`).

    Returns ``available`` False with a ``note`` when no real kubectl is found;
    otherwise ``kubectl_version``, ``wall_s``, ``gets``, ``throttle_messages``, ``exit_code``.
    """
    binary, detail = find_kubectl(kubectl)
    if not binary:
        return {"mode": "kubectl", "available": False, "note": f"kubectl part skipped: {detail}"}
    with tempfile.TemporaryDirectory(prefix="crdscale-kubectl-cache-") as cache_dir:
        args, env = goclient.connection(kubeconfig, context)
        argv = [binary, *args, f"--cache-dir={cache_dir}", "-v=6", *verb]
        start = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
        wall = time.monotonic() - start
    log = proc.stderr
    return {
        "mode": "kubectl",
        "available": True,
        "kubectl_version": detail,
        "command": " ".join(["kubectl", *verb]),
        "wall_s": wall,
        "gets": len(_GET_LINE.findall(log)),
        "throttle_messages": len(_THROTTLE_LINE.findall(log)),
        "exit_code": proc.returncode,
    }


KUBECTL_COMMANDS = (("get", "pods"), ("api-resources",))


def kubectl_rows(
    kubeconfig,
    versions: Iterable[str],
    group_versions: int,
    *,
    context: str | None = None,
) -> list[dict]:
    """``kubectl get pods`` and ``kubectl api-resources`` with an empty cache, per kubectl version.

    Each version is built from Go modules on first use (:func:`binaries.kubectl`).
    Returns one row per (version, command): ``limit`` (``kubectl vX.Y.Z``), ``command``,
    ``requests`` (GETs in the ``-v=6`` log), ``wall_s``, ``errors``, and the model's
    ``predicted_delay_s`` for that kubectl's limiter (0 for aggregated discovery).
    """
    rows = []
    for version in versions:
        kubectl = binaries.kubectl(version)
        limit = kubectl_limit(kubectl.version)
        for verb in KUBECTL_COMMANDS:
            kc = kubectl_discovery(kubeconfig, context=context, kubectl=str(kubectl.path), verb=verb)
            predicted = tokenbucket.predicted_discovery_delay(group_versions, limit) if limit else 0.0
            rows.append(
                {
                    "group_versions": group_versions,
                    "repeat": 0,
                    "limit": f"kubectl {kubectl.version}",
                    "command": kc.get("command"),
                    "burst": limit.burst if limit else float("nan"),
                    "qps": limit.qps if limit else float("nan"),
                    "requests": kc.get("gets"),
                    "wall_s": kc.get("wall_s"),
                    "errors": int(kc.get("exit_code", 1) != 0),
                    "throttle_messages": kc.get("throttle_messages"),
                    "measured_delay_s": float("nan"),
                    "predicted_delay_s": predicted,
                    "relative_error": float("nan"),
                }
            )
            log.info(
                f"  {group_versions} GVs kubectl {kubectl.version} {kc.get('command')}: wall {kc['wall_s']:6.2f} s, "
                f"{kc['gets']} GETs, predicted throttling {predicted:.2f} s"
            )
    return rows


# --- the probe and the sweep --------------------------------------------------


def probe(
    cluster,
    limits: Iterable[tokenbucket.RateLimit],
    *,
    kubeconfig: str | Path | None = None,
    with_kubectl: bool = True,
    kubectl_versions: Iterable[str] = (),
) -> dict[str, pd.DataFrame]:
    """client-go legacy discovery once per limit, aggregated discovery, and kubectl.

    kubectl: each of ``kubectl_versions`` (built from Go modules), or else the one on
    PATH if it is real. Returns ``{"summary": one row per mode/limit, "requests":
    legacy per-request rows}``.
    """
    discover = _discoverer()
    kubectl_versions = list(kubectl_versions)
    context = getattr(cluster, "context", None)
    summaries, request_tables = [], []
    for limit in limits:
        run = discover(cluster, limit)
        summaries.append(run.summary)
        request_tables.append(run.requests.assign(limit=limit.label()))
    summaries.append(aggregated_discovery(cluster))
    if with_kubectl and kubeconfig and kubectl_versions:
        gv = count_group_versions(cluster)
        summaries += [
            dict(row, mode="kubectl") for row in kubectl_rows(kubeconfig, kubectl_versions, gv, context=context)
        ]
    elif with_kubectl and kubeconfig:
        summaries.append(kubectl_discovery(kubeconfig, context=context))
    return {
        "summary": pd.DataFrame(summaries),
        "requests": pd.concat(request_tables, ignore_index=True) if request_tables else pd.DataFrame(),
    }


def sweep(
    cluster,
    *,
    run_id: str,
    targets: Iterable[int] = tokenbucket.SWEEP_GROUP_VERSIONS,
    limits: Iterable[tokenbucket.RateLimit] = tuple(tokenbucket.PRESETS[n] for n in tokenbucket.SWEEP_PRESETS),
    repeats: int = 1,
    keep: bool = False,
    with_kubectl: bool = True,
    kubectl_versions: Iterable[str] = (),
) -> dict[str, pd.DataFrame]:
    """Add CRDs (one group each) until the server has each target number of group-versions; measure every limit.

    Each limit is measured with client-go's discovery client (crdscale-client;
    the Python imitation only when it cannot be built). Each target also gets
    kubectl rows: for every version in ``kubectl_versions`` (built from Go modules)
    a cold ``kubectl get pods`` and ``kubectl api-resources`` (wall time, GETs);
    without versions, one ``get pods`` by a real kubectl on ``PATH`` if any.

    The measured throttling delay of a limit (``measured_delay_s``) is its
    discovery wall time minus the unthrottled (``disabled``) wall time at the
    same group-version count. ``predicted_delay_s`` is the token-bucket model's
    longest wait (the one-pager's number); ``predicted_extra_wall_s`` turns it
    into end-to-end extra time (see :func:`tokenbucket.predicted_extra_wall`).
    ``relative_error`` compares measured with ``predicted_extra_wall_s`` (NaN
    below :data:`tokenbucket.MIN_CHECKED_DELAY_S`), ``model_relative_error``
    with ``predicted_delay_s``. All times in seconds.

    Returns ``{"sweep": one row per (group_versions, limit, repeat), "requests": per-request rows}``.
    """
    discover = _discoverer()
    kubectl_versions = list(kubectl_versions)
    limits = list(limits)
    disabled = tokenbucket.PRESETS["disabled"]
    if not any(not limit.enabled for limit in limits):
        limits = [disabled, *limits]
    # The unthrottled run goes first so every other limit has its baseline.
    limits.sort(key=lambda limit: limit.enabled)
    rows, request_tables = [], []
    with ProbeFixtures(cluster, run_id, keep=keep) as fixtures:
        created = 0
        for target in sorted(targets):
            created = _grow_to(cluster, fixtures, target, created)
            gv = count_group_versions(cluster)
            for repeat in range(repeats):
                baseline, solo_latency = None, 0.0
                for limit in limits:
                    run = discover(cluster, limit)
                    if not limit.enabled:
                        baseline = run.summary["wall_s"]
                        # /api and /apis go one at a time: their latency is a request's latency alone.
                        solo_latency = float(run.requests.loc[run.requests["phase"] == "groups", "latency_s"].mean())
                    rows.append(_sweep_row(gv, repeat, limit, run.summary, baseline, solo_latency))
                    request_tables.append(run.requests.assign(group_versions=gv, limit=limit.label(), repeat=repeat))
            if with_kubectl:
                rows += _kubectl_sweep_rows(cluster, gv, kubectl_versions)
    return {"sweep": pd.DataFrame(rows), "requests": pd.concat(request_tables, ignore_index=True)}


def _grow_to(cluster, fixtures, target: int, created: int) -> int:
    """Add CRDs in new groups until the server has ``target`` group-versions (none when it has
    as many or more); returns how many CRDs the sweep has created so far."""
    current = count_group_versions(cluster)
    if current > target:
        log.info(f"server already has {current} group-versions > {target}; measuring at {current}")
    elif current < target:
        need = target - current
        log.info(f"adding {need} CRDs in new groups ({current} -> {target} group-versions)")
        fixtures.install_crds(sweep_crds(created, created + need, fixtures.labels, fixtures.instance))
        created += need
    return created


_SWEEP_SUMMARY_KEYS = (
    "limit",
    "burst",
    "qps",
    "requests",
    "wall_s",
    "preamble_s",
    "max_wait_s",
    "max_limiter_wait_s",
    "bytes",
    "errors",
)


def _sweep_row(
    gv: int, repeat: int, limit: tokenbucket.RateLimit, s: dict, baseline: float | None, solo_latency: float
) -> dict:
    """One limit's row of the sweep: its discovery summary ``s``, the delay measured against the
    unthrottled ``baseline`` wall time, and the model's predictions with their relative errors."""
    against_baseline = baseline is not None and limit.enabled
    measured = s["wall_s"] - baseline if against_baseline else 0.0
    predicted_extra = (
        tokenbucket.predicted_extra_wall(s["preamble_s"], s["predicted_delay_s"], solo_latency, baseline)
        if against_baseline
        else 0.0
    )
    row = {
        "group_versions": gv,
        "repeat": repeat,
        "mode": s["mode"],
        **{k: s[k] for k in _SWEEP_SUMMARY_KEYS},
        "unthrottled_wall_s": baseline,
        "measured_delay_s": measured,
        "predicted_delay_s": s["predicted_delay_s"],
        "predicted_extra_wall_s": predicted_extra,
    }
    # Held to the tolerance: end-to-end extra time vs its prediction, when above the noise floor.
    row["relative_error"] = (
        tokenbucket.relative_error(measured, predicted_extra)
        if predicted_extra >= tokenbucket.MIN_CHECKED_DELAY_S
        else float("nan")
    )
    row["model_relative_error"] = tokenbucket.relative_error(measured, row["predicted_delay_s"])
    # The client's own last wait on its limiter against the model's: no network in between.
    row["wait_relative_error"] = tokenbucket.relative_error(s["max_limiter_wait_s"], row["predicted_delay_s"])
    log.info(
        f"  {gv} GVs {limit.label():>10}: wall {s['wall_s']:6.2f} s, "
        f"delay measured {measured:6.2f} s, predicted {row['predicted_delay_s']:6.2f} s"
    )
    return row


def _kubectl_sweep_rows(cluster, gv: int, kubectl_versions: list[str]) -> list[dict]:
    """kubectl's rows at ``gv`` group-versions: each of ``kubectl_versions``, else a real kubectl
    on PATH (none without a kubeconfig, or when there is no real kubectl)."""
    kubeconfig = getattr(cluster, "kubeconfig", None)
    context = getattr(cluster, "context", None)
    if not kubeconfig:
        return []
    if kubectl_versions:
        return kubectl_rows(kubeconfig, kubectl_versions, gv, context=context)
    kc = kubectl_discovery(kubeconfig, context=context)
    if not kc.get("available"):
        log.info(f"  {kc['note']}")
        return []
    log.info(f"  {gv} GVs kubectl {kc['kubectl_version']}: wall {kc['wall_s']:6.2f} s, {kc['gets']} GETs")
    return [
        {
            "group_versions": gv,
            "repeat": 0,
            "limit": f"kubectl {kc['kubectl_version']}",
            "requests": kc["gets"],
            "wall_s": kc["wall_s"],
            "errors": int(kc["exit_code"] != 0),
            "measured_delay_s": float("nan"),
            "predicted_delay_s": float("nan"),
            "relative_error": float("nan"),
        }
    ]


def agreement(sweep_table: pd.DataFrame, *, tolerance: float = 0.15) -> pd.DataFrame:
    """Rows held to the tolerance (``relative_error`` known), with ``within_tolerance``."""
    predicted = sweep_table[sweep_table["relative_error"].notna()].copy()
    predicted["within_tolerance"] = predicted["relative_error"] <= tolerance
    return predicted


# --- the probe's entry point -----------------------------------------------------

SWEEP_COLUMNS = (
    "group_versions",
    "limit",
    "command",
    "requests",
    "wall_s",
    "unthrottled_wall_s",
    "measured_delay_s",
    "predicted_delay_s",
    "predicted_extra_wall_s",
    "relative_error",
    "model_relative_error",
    "max_limiter_wait_s",
    "wait_relative_error",
)
SUMMARY_COLUMNS = (
    "mode",
    "limit",
    "command",
    "group_versions",
    "requests",
    "wall_s",
    "max_wait_s",
    "predicted_delay_s",
    "bytes",
    "version",
    "revalidate_status",
    "revalidate_bytes",
    "kubectl_version",
    "gets",
    "throttle_messages",
    "note",
)


def run(cluster, config, writer, *, step: int = 0, run_id: str):
    """The discovery probe as one step (``config``: :class:`.configs.DiscoveryConfig`); with ``config.sweep``
    the sweep, checked against the token-bucket model within ``config.tolerance`` (exit code 1 beyond it).
    kubectl runs with the cluster's own kubeconfig and context."""
    config.validate()
    limits = validate_limits(config.limit_names())
    if not config.sweep:
        tables = probe(
            cluster,
            limits,
            kubeconfig=getattr(cluster, "kubeconfig", None),
            with_kubectl=config.with_kubectl,
            kubectl_versions=config.kubectl_versions,
        )
        write_tables(writer, "discovery", step, tables, main="summary")
        section = Section(
            "Discovery", "summary", SUMMARY_COLUMNS, {"wall_s": "s", "max_wait_s": "s", "predicted_delay_s": "s"}
        )
        return ProbeResult("discovery", tables, "summary", sections=[section])
    tables = sweep(
        cluster,
        run_id=run_id,
        targets=config.targets,
        limits=limits,
        repeats=config.sweep_repeats,
        keep=config.keep,
        with_kubectl=config.with_kubectl,
        kubectl_versions=config.kubectl_versions,
    )
    write_tables(writer, "discovery", step, tables, main="sweep")
    table = tables["sweep"]
    # kubectl rows have one row per command; the row label names both.
    command = table["command"].fillna("") if "command" in table else ""
    labelled = table.assign(limit=(table["limit"] + " " + command).str.strip())
    cold = labelled.pivot_table(index="limit", columns="group_versions", values="wall_s", aggfunc="median", sort=False)
    cold = cold.rename(columns=str).reset_index()  # one row per limit, one column per group-version count
    checked = agreement(table, tolerance=config.tolerance)
    ok = bool(checked["within_tolerance"].all()) if len(checked) else True
    seconds = ("wall_s", "unthrottled_wall_s", "measured_delay_s", "predicted_delay_s", "predicted_extra_wall_s")
    units = {k: "s" for k in (*seconds, "max_limiter_wait_s")}
    units |= {k: "pct" for k in ("relative_error", "model_relative_error", "wait_relative_error")}
    sections = [
        Section(
            "Legacy discovery: measured vs predicted client-side throttling delay (s)",
            "sweep",
            SWEEP_COLUMNS,
            units,
            "measured_delay = wall - unthrottled wall; predicted_delay = token-bucket longest wait; "
            "predicted_extra_wall = the wait net of the overlapping unthrottled transfer; "
            "relative_error is measured vs predicted_extra_wall (checked when >= 0.25 s)",
        ),
        Section(
            "Cold legacy discovery wall time (s), the shape of the Crossplane one-pager's table",
            "cold_wall_s",
            tuple(cold.columns),
            {c: "s" for c in cold.columns[1:]},
            f"agreement within {config.tolerance:.0%}: {'yes' if ok else 'NO'} "
            f"({int(checked['within_tolerance'].sum())}/{len(checked)} checked rows)",
        ),
    ]
    return ProbeResult(
        "discovery",
        tables,
        "sweep",
        derived={"cold_wall_s": cold},
        summary={"agreement_within_tolerance": ok, "tolerance": config.tolerance},
        exit_code=0 if ok else 1,
        sections=sections,
    )
