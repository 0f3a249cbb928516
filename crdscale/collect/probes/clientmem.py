"""Client memory probe: peak RSS of a client that LISTs full objects versus metadata only.

The cert-manager PR (seed 004) measured cainjector's peak RSS with 100 MiB of
Secrets: ~290 MB listing full Secrets, ~46 MB listing
``PartialObjectMetadataList``. Here a child process (``python -m
crdscale.collect.probes.clientmem``) does one LIST the way an informer's first
list does -- read the whole body, decode it -- and reports its peak RSS from
``getrusage``. A fresh process per mode keeps the peaks independent.

The child imports only ``requests`` and the standard library and reads the
credentials from its environment (:func:`._http.credentials_env`), so its
baseline is small and nothing secret appears on a command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Iterable

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

    # ClusterSession keeps our CA even when REQUESTS_CA_BUNDLE is set; it imports only requests.
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
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        if not lines:
            raise ClusterError(f"client-memory child ({mode}) failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
        report = json.loads(lines[-1])
        report["peak_rss_mib"] = report["peak_rss_kib"] / 1024
        reports.append(report)
    return reports


def probe(
    cluster,
    *,
    run_id: str,
    secrets: int = 100,
    secret_bytes: int = 1_000_000,
    keep: bool = False,
    echo=None,
) -> "pandas.DataFrame":  # noqa: F821
    """Create ``secrets`` Secrets of ``secret_bytes`` each, measure both client modes, clean up.

    Returns one row per mode (see :func:`measure`) plus ``secrets`` and ``secret_bytes``.
    """
    import pandas as pd

    from .fixtures import ProbeFixtures
    from .listcost import ListProbeConfig, populate

    config = ListProbeConfig(custom_resources=0, secrets=secrets, secret_bytes=secret_bytes, namespaces=1)
    config.validate()
    with ProbeFixtures(cluster, run_id, keep=keep, echo=echo) as fixtures:
        populated = populate(fixtures, config, echo=echo)
        ns = populated.namespaces[0]
        reports = measure(cluster, f"/api/v1/namespaces/{ns}/secrets")
    return pd.DataFrame(reports).assign(secrets=secrets, secret_bytes=secret_bytes)


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
