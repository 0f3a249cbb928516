"""Installer, condition watcher, resource server and cleaner against the in-memory fake API server.

The same code talks to kube-apiserver in tests/integration/test_crds_install.py;
here the transport seam lets each server behaviour be scripted: a rejected CRD,
conflicts, throttling with Retry-After, watches that end early, objects that
are not crdscale's.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from fakeapi import CRD_COLLECTION, FakeApiServer, status_body, too_many_requests

from crdscale.cluster.clients import ApiError, Cluster, Credentials, RequestsTransport
from crdscale.cluster.retry import RetryPolicy
from crdscale.crds.clean import OWNED_KINDS, clean
from crdscale.crds.generate import GeneratorParams, generate_crds
from crdscale.crds.install import ConditionWatcher, CrdRejected, Installer, owned_body, resource_ref
from crdscale.crds.serve import ResourceServer
from crdscale.errors import ClusterError
from crdscale.ownership import MANAGED_BY_LABEL, ownership_labels

RUN = "20261123t090000-abcd"


def _cluster(server: FakeApiServer) -> Cluster:
    return Cluster("https://127.0.0.1:6443", server, Credentials())


def _crds(n: int, seed: int = 1) -> list[dict]:
    return generate_crds(GeneratorParams(crd_count=n, group_count=min(n, 2), property_count=3, seed=seed))


def _no_sleep() -> tuple[RetryPolicy, list[float]]:
    slept: list[float] = []
    return RetryPolicy(sleep=slept.append), slept


# ---------------------------------------------------------------- installer


def test_install_step_creates_labels_and_sees_every_crd_established():
    server = FakeApiServer()
    crds = _crds(6)
    with Installer(_cluster(server), RUN, concurrency=3, establish_timeout_s=5) as installer:
        result = installer.install_step(1, crds)
    assert result.ok and result.count("created") == 6 and result.established == 6
    for record in result.records:
        assert record.http_status == 201
        assert record.created_at <= record.names_accepted_at <= record.established_at
        stored = server.get(CRD_COLLECTION, record.name)
        assert stored["metadata"]["labels"] == ownership_labels(RUN)
    posts = server.sent("POST")
    assert all(p.params == {"fieldManager": "crdscale"} for p in posts)
    assert [r.path for r in result.served_resources()] == [resource_ref(c).path for c in crds]


def test_rejected_crd_is_recorded_with_the_servers_words_and_the_rest_installed():
    crds = _crds(4)
    bad = crds[1]["metadata"]["name"]
    server = FakeApiServer(reject={bad})
    with Installer(_cluster(server), RUN, concurrency=2, establish_timeout_s=5) as installer:
        result = installer.install_step(1, crds)
    record = next(r for r in result.records if r.name == bad)
    assert (record.action, record.http_status) == ("rejected", 422)
    assert record.message == status_body("invalid", name=bad)["message"]
    assert result.count("created") == 3 and result.established == 3 and not result.ok
    assert len(server.sent("POST")) == 4  # a 422 is final: not retried


def test_rejected_crd_stops_the_install_when_asked():
    crds = _crds(3)
    server = FakeApiServer(reject={crds[0]["metadata"]["name"]})
    with Installer(_cluster(server), RUN, concurrency=1, on_rejected="stop", establish_timeout_s=5) as installer:
        with pytest.raises(CrdRejected) as err:
            installer.install_step(1, crds)
    assert "422" not in str(err.value) and "is invalid" in str(err.value)
    assert [r.action for r in err.value.result.records] == ["rejected", "failed", "failed"]
    assert len(server.sent("POST")) == 1


@pytest.mark.parametrize(
    "existing,owner,action,puts",
    [
        ("skip", "crdscale", "skipped", 0),
        ("update", "crdscale", "updated", 1),
        ("update", "helm", "skipped", 0),  # someone else's CRD is never modified
        ("fail", "crdscale", "rejected", 0),
    ],
)
def test_conflict_409_follows_the_existing_policy(existing, owner, action, puts):
    crd = _crds(1)[0]
    server = FakeApiServer()
    present = owned_body(crd, "an-earlier-run")
    present["metadata"]["labels"][MANAGED_BY_LABEL] = owner
    server.add(CRD_COLLECTION, present)
    with Installer(_cluster(server), RUN, existing=existing, establish_timeout_s=2) as installer:
        record = installer.install_step(1, [crd]).records[0]
    assert record.action == action
    assert len(server.sent("PUT")) == puts
    labels = server.get(CRD_COLLECTION, crd["metadata"]["name"])["metadata"]["labels"]
    assert labels[MANAGED_BY_LABEL] == owner
    if action == "updated":
        assert labels == ownership_labels(RUN)


def test_update_that_races_another_writer_reads_again_and_retries():
    crd = _crds(1)[0]
    name = crd["metadata"]["name"]
    path = f"{CRD_COLLECTION}/{name}"
    server = FakeApiServer()
    server.add(CRD_COLLECTION, owned_body(crd, "an-earlier-run"))
    # Another client writes between our GET and our PUT: the PUT carries a stale resourceVersion.
    server.inject("PUT", path, 0, before=lambda sent: server.add(CRD_COLLECTION, server.get(CRD_COLLECTION, name)))
    with Installer(_cluster(server), RUN, existing="update", establish_timeout_s=2) as installer:
        record = installer.install_step(1, [crd]).records[0]
    assert record.action == "updated"
    assert [r.method for r in server.requests if r.path == path] == ["GET", "PUT", "GET", "PUT"]


def test_429_waits_the_servers_retry_after_then_succeeds():
    crd = _crds(1)[0]
    server = FakeApiServer()
    server.inject("POST", CRD_COLLECTION, 429, **too_many_requests(3), times=2)
    retry, slept = _no_sleep()
    with Installer(_cluster(server), RUN, retry=retry, establish_timeout_s=2) as installer:
        record = installer.install_step(1, [crd]).records[0]
    assert slept == [3.0, 3.0]
    assert (record.action, record.http_status) == ("created", 201)
    assert len(server.sent("POST")) == 3


def test_throttled_beyond_the_attempts_is_a_failed_record_not_a_crash():
    crd = _crds(1)[0]
    server = FakeApiServer()
    server.inject("POST", CRD_COLLECTION, 503, {"kind": "Status", "message": "etcd is busy"}, times=99)
    retry, slept = _no_sleep()
    with Installer(_cluster(server), RUN, retry=retry, establish_timeout_s=1) as installer:
        record = installer.install_step(1, [crd]).records[0]
    assert (
        record.action == "failed" and "gave up after 5 attempts" in record.message and "etcd is busy" in record.message
    )
    assert slept == [0.1, 0.2, 0.4, 0.8]  # backoff without Retry-After; no sleep after the last attempt


def test_unreachable_server_is_a_cluster_error_with_one_line():
    class Down:
        def request(self, *a, **kw):
            raise requests.ConnectionError("[Errno 111] Connection refused")

        def close(self):
            pass

    with pytest.raises(ClusterError) as err:
        Cluster("https://127.0.0.1:1", Down(), Credentials()).get("/version")
    assert str(err.value).startswith("cannot reach API server https://127.0.0.1:1: ") and "refused" in str(err.value)


# ---------------------------------------------------------------- condition watcher


def test_watcher_resumes_after_watches_that_end_early_without_listing_again():
    server = FakeApiServer(watch_event_limit=2)
    crds = _crds(5)
    with Installer(_cluster(server), RUN, concurrency=1, establish_timeout_s=5) as installer:
        result = installer.install_step(1, crds)
    assert result.established == 5 and not result.timed_out
    watches = server.sent("GET", watch=True)
    lists = [r for r in server.sent("GET", watch=False) if r.path == CRD_COLLECTION]
    assert len(watches) >= 5 and len(lists) == 1
    # Each new watch starts where the previous one stopped: versions only move forward.
    versions = [int(w.params["resourceVersion"]) for w in watches]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)


def test_watcher_lists_again_after_an_error_event():
    server = FakeApiServer()
    expired = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    cluster = _cluster(server)
    watcher = ConditionWatcher(cluster, RUN, watch_timeout_s=5)
    try:
        # The server expires the open watch: the watcher must LIST again and still see what happens next.
        server.feed_watches(expired)
        crd = owned_body(_crds(1)[0], RUN)
        cluster.post(CRD_COLLECTION, crd)
        assert watcher.wait([crd["metadata"]["name"]], time.monotonic() + 5) == []
    finally:
        watcher.close()
    lists = [r for r in server.sent("GET", watch=False) if r.path == CRD_COLLECTION]
    assert len(lists) >= 2


def test_watcher_refused_by_the_server_says_why():
    server = FakeApiServer()
    server.inject("GET", CRD_COLLECTION, 403, {"kind": "Status", "message": "forbidden: User cannot list"}, times=99)
    with pytest.raises(ClusterError) as err:
        ConditionWatcher(_cluster(server), RUN)
    assert "HTTP 403" in str(err.value) and "forbidden" in str(err.value)


# ---------------------------------------------------------------- resource server


def test_list_mode_lists_each_resource_once_and_retries_a_404_after_established():
    crds = _crds(3)
    server = FakeApiServer()
    refs = [resource_ref(c) for c in crds]
    for ref in refs:
        server.add(ref.path, {"metadata": {"name": "one"}})
    server.inject("GET", refs[0].path, 404, status_body("not_found", name=refs[0].plural))
    with ResourceServer(_cluster(server), "list", concurrency=2) as rs:
        first = rs.serve(1, refs)
        again = rs.serve(2, refs)
    assert first.listed == 3 and not first.list_errors and len(first.list_latencies_s) == 3
    assert again.resources == 0
    assert [r.params for r in server.sent("GET") if r.path == refs[1].path] == [{"limit": "500"}]
    assert len([r for r in server.sent("GET") if r.path == refs[0].path]) == 2


def test_list_mode_reports_a_resource_the_server_refuses():
    ref = resource_ref(_crds(1)[0])
    server = FakeApiServer()
    server.inject("GET", ref.path, 403, {"kind": "Status", "message": "forbidden"}, times=99)
    with ResourceServer(_cluster(server), "list") as rs:
        result = rs.serve(1, [ref])
    assert result.listed == 0 and result.list_errors == [f"{ref.path}: HTTP 403: forbidden"]


# ---------------------------------------------------------------- cleaner


def _object(name: str, labels: dict | None, namespace: str | None = None) -> dict:
    metadata = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"metadata": metadata}


def _populate(server: FakeApiServer) -> None:
    owned, other_run = ownership_labels(RUN), ownership_labels("another-run")
    for collection, namespace in (("/api/v1/configmaps", "ns"), (CRD_COLLECTION, None)):
        server.add(collection, _object("mine", owned, namespace))
        server.add(collection, _object("other-run", other_run, namespace))
        server.add(collection, _object("foreign", {"team": "a"}, namespace))
        server.add(collection, _object("managed-by-only", {MANAGED_BY_LABEL: "crdscale"}, namespace))
        server.add(collection, _object("helm", {MANAGED_BY_LABEL: "helm"}, namespace))


@pytest.mark.parametrize("honour_selectors", [True, False])
def test_clean_one_run_deletes_only_that_runs_objects_with_uid_preconditions(honour_selectors):
    server = FakeApiServer(honour_selectors=honour_selectors)
    _populate(server)
    uids = {
        (c, o["metadata"]["name"]): o["metadata"]["uid"] for c in server.objects for o in server.objects[c].values()
    }
    result = clean(_cluster(server), run_id=RUN, wait_timeout_s=2)
    assert result.ok and result.deleted == {
        "configmaps": 1,
        "secrets": 0,
        "namespaces": 0,
        "customresourcedefinitions": 1,
    }
    deletes = server.sent("DELETE")
    assert sorted(d.path for d in deletes) == ["/api/v1/namespaces/ns/configmaps/mine", f"{CRD_COLLECTION}/mine"]
    for d in deletes:
        collection = "/api/v1/configmaps" if "/configmaps/" in d.path else CRD_COLLECTION
        assert d.body["preconditions"]["uid"] == uids[(collection, "mine")]
    left = {o["metadata"]["name"] for o in server.objects[CRD_COLLECTION].values()}
    assert left == {"other-run", "foreign", "managed-by-only", "helm"}


def test_clean_all_owned_leaves_foreign_objects():
    server = FakeApiServer()
    _populate(server)
    result = clean(_cluster(server), all_owned=True, wait_timeout_s=2)
    assert result.ok
    assert {o["metadata"]["name"] for o in server.objects[CRD_COLLECTION].values()} == {"foreign", "helm"}


def test_clean_leaves_an_object_replaced_since_the_list():
    server = FakeApiServer()
    server.add(CRD_COLLECTION, _object("mine", ownership_labels(RUN)))
    path = f"{CRD_COLLECTION}/mine"

    def replace(_sent):
        # Deleted and created again by someone else, with our labels even: a new uid.
        del server.objects[CRD_COLLECTION][path]
        server.add(CRD_COLLECTION, _object("mine", ownership_labels(RUN)))

    server.inject("DELETE", path, 0, before=replace)
    result = clean(_cluster(server), run_id=RUN, wait_timeout_s=0.5)
    assert any("replaced by another object" in e for e in result.errors)
    assert server.get(CRD_COLLECTION, "mine") is not None


def test_clean_dry_run_sends_no_delete_and_missing_apis_count_as_empty():
    server = FakeApiServer(known_collections={CRD_COLLECTION})
    server.add(CRD_COLLECTION, _object("mine", ownership_labels(RUN)))
    result = clean(_cluster(server), run_id=RUN, dry_run=True, kinds=OWNED_KINDS)
    assert result.found["customresourcedefinitions"] == 1 and result.found["configmaps"] == 0
    assert server.sent("DELETE") == []


def test_list_follows_continue_tokens():
    server = FakeApiServer()
    for i in range(7):
        server.add("/api/v1/namespaces", _object(f"n{i}", None))
    items, version = _cluster(server).list("/api/v1/namespaces", page_size=3)
    assert [i["metadata"]["name"] for i in items] == [f"n{i}" for i in range(7)]
    assert len(server.sent("GET")) == 3 and int(version) > 0
    with pytest.raises(ApiError) as err:
        _cluster(FakeApiServer(known_collections=set())).list("/api/v1/x")
    assert err.value.status == 404


def test_python_watch_keeper_resumes_from_the_last_version_when_the_server_ends_a_watch():
    """The resource server's own watches (raw HTTP/1.1 streams) against a loopback server that ends each early."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            if query.get("watch") != "1":
                body = json.dumps({"kind": "List", "metadata": {"resourceVersion": "10"}, "items": []}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            seen.append(query["resourceVersion"])
            event = json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(10 + len(seen))}}})
            chunk = (event + "\n").encode()
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk))  # one event, then the watch ends

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        credentials = Credentials()
        cluster = Cluster(f"http://127.0.0.1:{server.server_address[1]}", RequestsTransport(credentials), credentials)
        ref = resource_ref(_crds(1)[0])
        with ResourceServer(cluster, "watch", go_client=False) as rs:
            assert rs.serve(1, [ref]).watches_requested == 1
            deadline = time.monotonic() + 10
            while len(seen) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        server.shutdown()
    assert seen[:3] == ["10", "11", "12"]
