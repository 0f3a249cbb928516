"""HTTP plumbing shared by the probes: fresh transports, timed requests, bulk object creation.

Every request goes through the cluster's :class:`~crdscale.cluster.clients.Transport`
(its own, or a fresh one from it), so a unit test's in-memory API server
(``tests/unit/fakeapi.py``) serves the probes as it serves the installer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests

from crdscale.cluster.clients import Transport
from crdscale.cluster.retry import RetryPolicy, send_with_retry
from crdscale.errors import ClusterError

# Setup creates thousands of objects on a server that is busy building storage.
CREATE_RETRY = RetryPolicy(backoff_s=0.5)
JSON_CONTENT = {"Content-Type": "application/json"}


def fresh_transport(cluster, *, pool_size: int = 16) -> Transport:
    """A new transport with the cluster's credentials and no warm connections (close it when done).

    Probes that time a cold client (discovery) must not reuse connections a
    previous run kept alive; ``pool_size`` should cover the parallel requests
    so urllib3 does not open and discard extra connections.
    """
    return cluster.transport.fresh(pool_size=pool_size)


def credentials_env(cluster) -> dict[str, str]:
    """Environment for a child process to reach the cluster with the same credentials (no kubeconfig parsing)."""
    creds = cluster.credentials
    env = {"CRDSCALE_PROBE_SERVER": cluster.server}
    if isinstance(creds.verify, str):
        env["CRDSCALE_PROBE_CA"] = creds.verify
    elif creds.verify is False:
        env["CRDSCALE_PROBE_INSECURE"] = "1"
    # The credentials of this moment (an exec plugin's current token): the child lives seconds.
    auth = creds.current_auth()
    if auth.cert:
        env["CRDSCALE_PROBE_CERT"], env["CRDSCALE_PROBE_KEY"] = auth.cert
    if auth.headers.get("Authorization"):
        env["CRDSCALE_PROBE_AUTH"] = auth.headers["Authorization"]
    return env


def is_loopback(server: str) -> bool:
    """True when the API server URL points at this machine."""
    host = urlsplit(server).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


@dataclass
class Timed:
    """One timed GET: ``latency_s`` covers sending and reading the whole body."""

    status: int
    bytes: int
    latency_s: float
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def timed_get(
    transport: Transport,
    url: str,
    *,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Timed:
    """GET ``url`` and read the body; raises :class:`ClusterError` when the server is unreachable."""
    if params:
        url = f"{url}?{urlencode(params)}"
    start = time.perf_counter()
    try:
        resp = transport.request("GET", url, headers=headers or {}, timeout=timeout)
        body = resp.content
    except requests.exceptions.RequestException as err:
        raise ClusterError(f"GET {url} failed: {err}") from err
    latency = time.perf_counter() - start
    # Keep requests' case-insensitive mapping: Go sends "Etag", not "ETag".
    return Timed(resp.status_code, len(body), latency, body, resp.headers)


def check(resp: requests.Response, what: str, *, ok: Iterable[int] = (200, 201, 202)) -> requests.Response:
    if resp.status_code not in tuple(ok):
        raise ClusterError(f"{what} -> HTTP {resp.status_code}: {resp.text.strip()[:300]}")
    return resp


def create_many(
    cluster,
    path: str,
    bodies: Iterable[dict],
    *,
    workers: int = 16,
    progress: Callable[[int], None] | None = None,
) -> int:
    """POST each body to ``path`` (collection URL) with ``workers`` in parallel; returns how many were created.

    An ``AlreadyExists`` (409) counts as created so that a retried setup is idempotent.
    """
    transport = fresh_transport(cluster, pool_size=workers)
    url = cluster.url(path)

    def send_once(body: dict) -> requests.Response:
        try:
            # The bytes and Content-Type requests' json= sends.
            data = json.dumps(body, allow_nan=False).encode()
            return transport.request("POST", url, data=data, headers=JSON_CONTENT, timeout=60)
        except requests.exceptions.RequestException as err:
            raise ClusterError(f"POST {path} failed: {err}") from err

    def post(body: dict) -> int:
        resp = send_with_retry(lambda: send_once(body), CREATE_RETRY)
        if resp.status_code in (200, 201, 202, 409):
            return 1
        raise ClusterError(f"POST {path} -> HTTP {resp.status_code}: {resp.text.strip()[:300]}")

    created = 0
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for n in pool.map(post, bodies):
                created += n
                if progress:
                    progress(created)
    finally:
        transport.close()
    return created


def delete_collection(cluster, path: str, selector: str, *, timeout: float = 300.0) -> None:
    """DELETE every object under collection ``path`` that matches label ``selector``."""
    resp = cluster.delete(path, params={"labelSelector": selector}, timeout=timeout)
    if resp.status_code not in (200, 202, 404):
        raise ClusterError(
            f"DELETE {path}?labelSelector={selector} -> HTTP {resp.status_code}: {resp.text.strip()[:300]}"
        )
