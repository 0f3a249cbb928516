"""Fetch Go pprof profiles through the authenticated API (``/debug/pprof/...``).

No port-forwarding: the API server serves its own profiling endpoints when
started with ``--profiling`` (the default), so the same code works on the
local control plane and on any cluster where the user may GET ``/debug/pprof``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import requests

from crdscale.analysis.pprof.decode import parse_profile, read_profile_bytes
from crdscale.cluster.clients import Cluster
from crdscale.errors import ClusterError

PathOrBytes = str | os.PathLike | bytes | bytearray | memoryview

# kind -> (path, query); heap uses gc=1 so the profile reflects live objects after a GC.
PROFILE_ENDPOINTS = {
    "heap": ("/debug/pprof/heap", {"gc": "1"}),
    "allocs": ("/debug/pprof/allocs", {}),
    "goroutine": ("/debug/pprof/goroutine", {}),
    "cpu": ("/debug/pprof/profile", {}),
}


def fetch_profile(cluster: Cluster, kind: str, *, cpu_seconds: int = 10, timeout_s: float = 120.0) -> bytes:
    """Return the gzip-compressed ``profile.proto`` bytes of profile ``kind``
    (``heap``, ``allocs``, ``goroutine`` or ``cpu`` sampled for ``cpu_seconds``)."""
    if kind not in PROFILE_ENDPOINTS:
        raise ValueError(f"unknown profile kind {kind!r}; expected one of {sorted(PROFILE_ENDPOINTS)}")
    path, params = PROFILE_ENDPOINTS[kind]
    params = dict(params)
    if kind == "cpu":
        params["seconds"] = str(cpu_seconds)
        timeout_s = max(timeout_s, cpu_seconds + 60)
    resp = cluster.get(path, params=params, timeout=timeout_s)
    return _profile_body(resp, path)


def fetch_component_profile(
    get: Callable[..., Any], base_url: str, kind: str = "heap", *, timeout_s: float = 60.0
) -> bytes:
    """Profile ``kind`` (not ``cpu``) of another process of the control plane that serves ``/debug/pprof``
    itself: ``base_url`` is its ``.../debug/pprof`` (etcd's client URL with ``--enable-pprof``,
    kube-controller-manager's secure port), ``get`` a ``requests.Session.get`` that trusts it. Returns the
    gzip ``profile.proto`` bytes; :class:`ClusterError` when it answers anything else."""
    if kind not in PROFILE_ENDPOINTS or kind == "cpu":
        raise ValueError(f"unknown profile kind {kind!r} for a component; expected heap, allocs or goroutine")
    path, params = PROFILE_ENDPOINTS[kind]
    url = base_url.rstrip("/") + path.removeprefix("/debug/pprof")
    try:
        resp = get(url, params=dict(params), timeout=timeout_s)
    except requests.RequestException as err:
        raise ClusterError(f"GET {url}: {type(err).__name__}: {err}") from None
    return _profile_body(resp, url)


def _profile_body(resp, where: str) -> bytes:
    """A pprof answer's gzip body; :class:`ClusterError` for an error status or anything not gzip."""
    if resp.status_code != 200:
        raise ClusterError(
            f"GET {where} -> HTTP {resp.status_code} (is profiling enabled and are you allowed "
            f"to GET /debug/pprof?): {resp.text.strip()[:160]}"
        )
    body = resp.content
    if body[:2] != b"\x1f\x8b":
        raise ClusterError(f"GET {where} did not return a gzip pprof profile ({len(body)} bytes)")
    return body


def read_profile(source: PathOrBytes):
    """Read a ``profile.proto`` (gzip-compressed or plain) from a file path or bytes.

    Returns a :class:`crdscale.analysis.pprof.Profile` (tables, see its
    docstring). Raises :class:`ProfileError` (one line) for an unreadable file
    or anything that is not a valid profile (see ``parse_profile``).
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "<bytes>"
    else:
        name = str(source)

        data = read_profile_bytes(source)
    return parse_profile(data, name)
