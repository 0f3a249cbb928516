"""The LIST probe and the object writer served by the in-memory API server (``fakeapi``), through the
cluster's transport seam: no control plane, no sockets."""

from __future__ import annotations

import json

from fakeapi import FakeApiServer

from crdscale.cluster.clients import Cluster
from crdscale.collect.probes import listcost, listobjects
from crdscale.collect.probes.configs import ListObjects
from crdscale.collect.probes.fixtures import ProbeFixtures
from crdscale.crds.populate import ObjectWriter, control_target

SERVER = "https://fake.example:6443"  # not loopback: nothing local is looked up


def test_the_list_probe_populates_and_lists_through_the_fake():
    fake = FakeApiServer()
    cluster = Cluster(SERVER, fake)
    config = ListObjects(custom_resources=0, secrets=12, secret_bytes=100, namespaces=2, workers=4)
    with ProbeFixtures(cluster, "run-1") as fixtures:
        populated = listobjects.populate(fixtures, config)
        assert populated.counts == {"secrets": 12} and len(populated.namespaces) == 2
        assert len(fake.objects["/api/v1/secrets"]) == 12  # created through a fresh transport of the fake
        lists = listcost.measure_lists(
            cluster,
            populated,
            repeats=2,
            page_size=5,
            kinds=("rv0", "consistent", "paged", "label-selector"),
            read_metrics=False,
        ).set_index("kind")
    assert list(lists["status"]) == [200] * 4
    assert lists.loc["rv0", "items"] == 12 and lists.loc["paged", "pages"] == 3  # 5 + 5 + 2
    assert lists.loc["label-selector", "items"] == 2  # bucket 0 of 12: objects 0 and 10
    assert lists.loc["rv0", "bytes"] > 12 * 100 and (lists["latency_s"] > 0).all()
    assert lists.loc["rv0", "served_from"] == "unknown"  # metrics not read
    sent = [r for r in fake.sent("GET") if r.path == "/api/v1/secrets" and "continue" not in r.params]
    assert {json.dumps(r.params, sort_keys=True) for r in sent} >= {'{"resourceVersion": "0"}', '{"limit": "5"}'}
    assert fake.objects["/api/v1/secrets"] == {} and fake.objects["/api/v1/namespaces"] == {}  # cleaned up


def test_the_object_writer_posts_through_a_fresh_transport_of_the_cluster():
    fake = FakeApiServer()
    writer = ObjectWriter(Cluster(SERVER, fake), run_id="run-2", size=256, concurrency=3)
    target = control_target("configmaps", writer.ensure_namespace("crdscale-configmaps-run-2"))
    assert writer.write([target], 7) == 7
    stored = fake.objects["/api/v1/configmaps"]
    assert len(stored) == 7 and writer.counts.objects == {"configmaps": 7}
    posts = fake.sent("POST")
    assert [p.params for p in posts[1:]] == [{"fieldManager": "crdscale"}] * 7
