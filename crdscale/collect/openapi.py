"""Fetch kube-apiserver's aggregated OpenAPI v2 spec the way its clients do.

kubectl (apply, explain, validation), Helm and client-go's ``OpenAPISchema()``
GET ``/openapi/v2`` as protobuf. The server builds what it needs to answer on
the first such request and keeps it: since lazy aggregation (kube-openapi's
cached merger, ~v1.28) the merged v2 spec itself; on older servers, which keep the
merged spec in memory anyway, its serialized JSON and protobuf bytes (kube-openapi's
``HandlerCache``). Either way the result is held until the next request after a
CRD change replaces it, so "a client fetched /openapi/v2" is a state of the
server with its own memory cost (kubernetes/kubernetes#125837).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from crdscale.cluster.clients import ApiError, Cluster

OPENAPI_V2_PATH = "/openapi/v2"
# format -> Accept header. protobuf is what kubectl and client-go ask for; json what a browser or curl gets.
OPENAPI_V2_FORMATS = {
    "protobuf": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "json": "application/json",
}


@dataclass(frozen=True)
class SpecFetch:
    """One GET of the v2 spec: its format, the bytes the server sent (decompressed) and how long it took."""

    format: str
    bytes: int
    seconds: float


def fetch_openapi_v2(cluster: Cluster, fmt: str = "protobuf", *, timeout_s: float = 600.0) -> SpecFetch:
    """GET ``/openapi/v2`` in ``fmt`` (a key of :data:`OPENAPI_V2_FORMATS`) and read the whole body,
    as a client does; :class:`ApiError` when the server answers anything but 200 (ClusterError when it
    does not answer)."""
    if fmt not in OPENAPI_V2_FORMATS:
        raise ValueError(f"unknown OpenAPI v2 format {fmt!r}; expected one of {sorted(OPENAPI_V2_FORMATS)}")
    started = time.monotonic()
    resp = cluster.get(OPENAPI_V2_PATH, headers={"Accept": OPENAPI_V2_FORMATS[fmt]}, timeout=timeout_s)
    if resp.status_code != 200:
        raise ApiError(f"GET {OPENAPI_V2_PATH}", resp)
    return SpecFetch(fmt, len(resp.content), time.monotonic() - started)
