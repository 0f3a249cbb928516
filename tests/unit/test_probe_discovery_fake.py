"""Legacy and aggregated discovery against an in-process fake API server on loopback (no control plane)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crdscale.cluster.clients import Cluster, Credentials, RequestsTransport
from crdscale.collect.probes import discovery
from crdscale.models.tokenbucket import RateLimit

GROUPS = 15


class _Handler(BaseHTTPRequestHandler):
    aggregated_etag = '"abc"'

    def log_message(self, *args):  # keep test output clean
        pass

    def _send(self, status: int, body: dict | None, content_type: str = "application/json", headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        accept = self.headers.get("Accept", "")
        aggregated = "as=APIGroupDiscoveryList" in accept
        if aggregated and self.path in ("/api", "/apis"):
            if self.headers.get("If-None-Match") == self.aggregated_etag:
                return self._send(304, None)
            items = (
                [{"metadata": {"name": ""}, "versions": [{"version": "v1"}]}]
                if self.path == "/api"
                else [
                    {"metadata": {"name": f"g{i}.example.com"}, "versions": [{"version": "v1"}]} for i in range(GROUPS)
                ]
            )
            return self._send(
                200,
                {"kind": "APIGroupDiscoveryList", "items": items},
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                {"Etag": self.aggregated_etag},  # Go canonicalizes the header name like this
            )
        if self.path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
        if self.path == "/apis":
            groups = [
                {"name": f"g{i}.example.com", "versions": [{"groupVersion": f"g{i}.example.com/v1", "version": "v1"}]}
                for i in range(GROUPS)
            ]
            return self._send(200, {"kind": "APIGroupList", "groups": groups})
        if self.path.startswith("/api/") or self.path.startswith("/apis/"):
            return self._send(200, {"kind": "APIResourceList", "resources": []})
        return self._send(404, {})


@pytest.fixture(scope="module")
def fake_cluster():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        credentials = Credentials()
        yield Cluster(f"http://127.0.0.1:{server.server_address[1]}", RequestsTransport(credentials), credentials)
    finally:
        server.shutdown()


def test_legacy_discovery_counts_and_throttles(fake_cluster):
    # 2 + 16 = 18 requests, burst 6 at 20 QPS. The time held still (the limiter's clock and the rows'; the
    # requests themselves go to the fake server): no refill, so the 12 requests past the burst wait
    # 0.05, 0.10, ... 0.6 s, whichever thread gets which, and the last wait is the prediction exactly.
    slept = []
    run = discovery.legacy_discovery(
        fake_cluster, RateLimit("t", 6, 20.0), clock=lambda: 100.0, sleep=lambda s: slept.append(s)
    )
    s = run.summary
    assert s["group_versions"] == GROUPS + 1
    assert s["requests"] == 2 + GROUPS + 1
    assert s["errors"] == 0
    assert s["preamble_s"] == 0.0 and s["predicted_delay_s"] == pytest.approx(0.6)
    assert s["max_limiter_wait_s"] == pytest.approx(s["predicted_delay_s"])
    assert sorted(run.requests["limiter_wait_s"]) == pytest.approx([0.0] * 6 + [k / 20 for k in range(1, 13)])
    assert sorted(slept) == pytest.approx([k / 20 for k in range(1, 13)])  # each wait slept, none other
    assert set(run.requests.columns) >= {"issued_s", "limiter_wait_s", "latency_s", "bytes", "status", "start_s"}


def test_legacy_discovery_on_the_clock_waits_no_longer_than_predicted(fake_cluster):
    # The real clock: the bucket refills during the preamble (which the prediction counts) and during the
    # burst itself on a loaded machine (which it does not), so the waits are bounded, not equal.
    run = discovery.legacy_discovery(fake_cluster, RateLimit("t", 6, 20.0))
    s = run.summary
    assert s["requests"] == 2 + GROUPS + 1 and s["errors"] == 0
    assert s["predicted_delay_s"] == pytest.approx(max(0.0, 0.6 - s["preamble_s"]), abs=0.01)
    # One token's time (1/20 s) of slack: the model sends /apis halfway through the preamble, and a slow /api
    # then a fast /apis leaves the bucket at most one token short of the model's.
    assert s["max_limiter_wait_s"] <= s["predicted_delay_s"] + 1 / 20 + 1e-6
    assert (run.requests["limiter_wait_s"] > 0).sum() <= 18 - 6  # never more than the burst leaves
    # A request's queued time is read after its wait was slept: never shorter than the wait.
    assert (run.requests["queued_s"] >= run.requests["limiter_wait_s"] - 1e-6).all()


def test_legacy_discovery_disabled_limiter_never_waits(fake_cluster):
    run = discovery.legacy_discovery(fake_cluster, RateLimit("off", 0, -1.0))
    assert run.requests["limiter_wait_s"].max() == 0.0
    assert run.summary["predicted_delay_s"] == 0.0


def test_aggregated_discovery_two_requests_and_etag(fake_cluster):
    out = discovery.aggregated_discovery(fake_cluster)
    assert out["supported"] and out["version"] == "v2"
    assert out["requests"] == 2
    assert out["group_versions"] == GROUPS + 1
    assert out["revalidate_status"] == 304
    assert out["revalidate_bytes"] == 0


def test_find_kubectl_rejects_missing_binary(tmp_path):
    path, reason = discovery.find_kubectl(str(tmp_path / "nope"))
    assert path is None and reason
