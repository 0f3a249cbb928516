"""Request builders and metric parsing for the probes (no server)."""

from __future__ import annotations

import json

import pytest

from crdscale.collect.probes import requestcost
from crdscale.collect.probes.fixtures import (
    PROBE_INSTANCE_LABEL,
    crd_manifest,
    has_selectable_field,
    list_probe_crd,
    pod,
    probe_labels,
    probe_selector,
    secret,
    sweep_crds,
)
from crdscale.collect.probes.requests import (
    LIST_KINDS,
    METADATA_ONLY_ACCEPT,
    TABLE_ACCEPT,
    ListTarget,
    aggregated_group_versions,
    build_list_requests,
    is_aggregated_discovery,
    legacy_group_version_paths,
)
from crdscale.collect.promtext import samples_by_name
from crdscale.ownership import MANAGED_BY_LABEL, RUN_ID_LABEL
from crdscale.rundir.layout import parse_probe_table_name, probe_table_relative

CORE = {"kind": "APIVersions", "versions": ["v1"]}
GROUPS = {
    "kind": "APIGroupList",
    "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]},
        {
            "name": "autoscaling",
            "versions": [
                {"groupVersion": "autoscaling/v2", "version": "v2"},
                {"groupVersion": "autoscaling/v1", "version": "v1"},
            ],
        },
    ],
}


def test_legacy_discovery_fetches_every_version_of_every_group():
    assert legacy_group_version_paths(CORE, GROUPS) == [
        "/api/v1",
        "/apis/apps/v1",
        "/apis/autoscaling/v2",
        "/apis/autoscaling/v1",
    ]


@pytest.mark.parametrize(
    "content_type, expected",
    [
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "v2"),
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", "v2beta1"),
        ("application/json", None),
        (None, None),
    ],
)
def test_is_aggregated_discovery(content_type, expected):
    assert is_aggregated_discovery(content_type) == expected


def test_aggregated_group_versions():
    doc = {
        "items": [
            {"metadata": {}, "versions": [{"version": "v1"}]},
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1"}]},
        ]
    }
    assert aggregated_group_versions(doc) == ["v1", "apps/v1"]


def test_list_target_paths():
    core = ListTarget("secrets", namespace="ns")
    assert core.collection_path() == "/api/v1/secrets"
    assert core.collection_path("ns") == "/api/v1/namespaces/ns/secrets"
    custom = ListTarget("listprobes", "x.probe.crdscale.io", "v1")
    assert custom.collection_path() == "/apis/x.probe.crdscale.io/v1/listprobes"
    assert custom.group_resource == "listprobes.x.probe.crdscale.io"


def test_build_list_requests_covers_every_kind():
    target = ListTarget("secrets", namespace="ns-a", field_selector="spec.nodeName=node-0")
    reqs = {
        r.kind: r
        for r in build_list_requests(
            target, resource_version="42", label_selector="b=0", single_name="s-0", old_resource_version="7"
        )
    }
    assert tuple(reqs) == LIST_KINDS
    assert reqs["rv0"].params == {"resourceVersion": "0"}
    assert reqs["consistent"].params == {}
    assert reqs["exact"].params == {"resourceVersion": "42", "resourceVersionMatch": "Exact"}
    assert reqs["exact-old"].params == {"resourceVersion": "7", "resourceVersionMatch": "Exact"}
    assert reqs["paged"].paged and reqs["paged"].params == {"limit": "500"}
    assert reqs["label-selector"].params == {"labelSelector": "b=0"}
    assert reqs["field-selector-name"].params == {"fieldSelector": "metadata.name=s-0"}
    assert reqs["field-selector-namespace"].path == "/api/v1/secrets"
    assert reqs["field-selector"].params == {"fieldSelector": "spec.nodeName=node-0"}
    assert reqs["field-selector"].path == "/api/v1/secrets"
    assert reqs["namespaced"].path == "/api/v1/namespaces/ns-a/secrets"
    assert reqs["metadata-only"].accept == METADATA_ONLY_ACCEPT
    assert reqs["table"].accept == TABLE_ACCEPT
    assert json.loads(reqs["exact"].params_json())["resourceVersionMatch"] == "Exact"


def test_build_list_requests_without_namespace_or_name_skips_those_kinds():
    reqs = build_list_requests(ListTarget("secrets"), resource_version="1", label_selector="a=b")
    kinds = {r.kind for r in reqs}
    assert "namespaced" not in kinds and "field-selector-name" not in kinds and "exact-old" not in kinds
    assert "field-selector" not in kinds  # the resource has no field beyond namespace and name to select on
    assert "rv0" in kinds


def test_fixtures_carry_ownership_and_instance_labels():
    labels = probe_labels("run-abcd", "f00d")
    crd = crd_manifest("g.probe.crdscale.io", "ListProbe", "listprobes", labels)
    assert crd["metadata"]["labels"][MANAGED_BY_LABEL] == "crdscale"
    assert crd["metadata"]["labels"][RUN_ID_LABEL] == "run-abcd"
    assert crd["metadata"]["labels"][PROBE_INSTANCE_LABEL] == "f00d"
    s = secret("s-0", "ns", labels, 3, 100)
    assert s["metadata"]["labels"][RUN_ID_LABEL] == "run-abcd"
    assert len(s["stringData"]["data"]) == 100
    crds = sweep_crds(0, 5, labels, "f00d")
    assert len({c["spec"]["group"] for c in crds}) == 5


def test_pods_are_bound_hold_their_data_in_env_and_delete_at_once():
    p = pod("p-0", "ns", probe_labels("run-abcd", "f00d"), 13, 20_000)
    env = p["spec"]["containers"][0]["env"]
    assert sum(len(e["value"]) for e in env) == 20_000 and len(env) == 20
    assert 20_000 < len(json.dumps(p)) < 22_000
    assert p["spec"]["nodeName"] == "node-3" and p["metadata"]["labels"]["crdscale.io/bucket"] == "3"
    # No kubelet would ever confirm the deletion of a bound Pod with a grace period.
    assert p["spec"]["terminationGracePeriodSeconds"] == 0
    assert sum(len(e["value"]) for e in pod("p", "ns", {}, 0, 7)["spec"]["containers"][0]["env"]) == 7


def test_list_probe_crd_selects_on_spec_bucket():
    crd = list_probe_crd(probe_labels("run-abcd", "f00d"), "f00d")
    version = crd["spec"]["versions"][0]
    assert version["selectableFields"] == [{"jsonPath": ".spec.bucket"}]
    assert "bucket" in version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert has_selectable_field(crd)
    # A server before v1.31 stores the CRD without it.
    del version["selectableFields"]
    assert not has_selectable_field(crd)


def test_cleanup_selector_never_matches_other_objects_of_the_same_run():
    # Inside a scenario the run id is shared with the scenario's CRDs: the selector must name the instance.
    assert probe_selector("run-abcd", "f00d").endswith(f",{PROBE_INSTANCE_LABEL}=f00d")
    assert "crdscale.io/run-id=run-abcd" in probe_selector("run-abcd", "f00d")


METRICS_TEXT = """\
# HELP apiserver_cache_list_total [ALPHA] Number of LIST requests served from watch cache
# TYPE apiserver_cache_list_total counter
apiserver_cache_list_total{group="",index="",resource="secrets"} 7
apiserver_cache_list_total{group="apps",index="",resource="deployments"} 3
apiserver_storage_list_total{group="",resource="secrets"} 2
apiserver_storage_list_fetched_objects_total{group="",resource="secrets"} 200
process_resident_memory_bytes 1.234e+08
go_memstats_heap_inuse_bytes 5e+07
apiserver_flowcontrol_work_estimated_seats_sum{flow_schema="global-default",priority_level="global-default"} 12
apiserver_flowcontrol_work_estimated_seats_count{flow_schema="global-default",priority_level="global-default"} 3
"""


def test_parse_and_total():
    samples = samples_by_name(METRICS_TEXT)
    assert requestcost.total(samples, "apiserver_cache_list_total") == 10
    assert requestcost.resource_total(samples, requestcost.CACHE_LIST_COUNTERS, "", "secrets") == 7
    assert requestcost.memory_bytes(samples)["rss_bytes"] == 1.234e8


def test_parse_only_wanted_names():
    samples = samples_by_name(METRICS_TEXT, ("process_",), prefixes=True)
    assert list(samples) == ["process_resident_memory_bytes"]


def _bump(text: str, **changes: float) -> str:
    out = []
    for line in text.splitlines():
        for key, delta in changes.items():
            if line.startswith(key) and 'resource="secrets"' in line:
                name, value = line.rsplit(" ", 1)
                line = f"{name} {float(value) + delta:g}"
        out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"apiserver_cache_list_total": 3}, "cache"),
        # a consistent read from cache that asked etcd for the revision (one object per request)
        (
            {
                "apiserver_cache_list_total": 3,
                "apiserver_storage_list_total": 3,
                "apiserver_storage_list_fetched_objects_total": 3,
            },
            "cache",
        ),
        ({"apiserver_storage_list_total": 3, "apiserver_storage_list_fetched_objects_total": 300}, "etcd"),
        (
            {
                "apiserver_cache_list_total": 3,
                "apiserver_storage_list_total": 3,
                "apiserver_storage_list_fetched_objects_total": 300,
            },
            "etcd",
        ),
        ({}, "unknown"),
    ],
)
def test_classify_served_from(changes, expected):
    before = samples_by_name(METRICS_TEXT)
    after = samples_by_name(_bump(METRICS_TEXT, **{k + "{": v for k, v in changes.items()}))
    assert requestcost.classify_served_from(before, after, "", "secrets", requests=3).place == expected


def test_classify_with_older_resource_prefix_labels():
    before = samples_by_name('apiserver_cache_list_total{index="",resource_prefix="/secrets"} 1\n')
    after = samples_by_name('apiserver_cache_list_total{index="",resource_prefix="/secrets"} 2\n')
    assert requestcost.classify_served_from(before, after, "", "secrets").place == "cache"


def test_histogram_delta_by():
    before = samples_by_name(METRICS_TEXT)
    after = samples_by_name(
        METRICS_TEXT.replace('global-default"} 12', 'global-default"} 22').replace(
            'global-default"} 3', 'global-default"} 4'
        )
    )
    assert requestcost.histogram_delta_by(
        before, after, "apiserver_flowcontrol_work_estimated_seats", "priority_level"
    ) == {"global-default": {"count": 1.0, "sum": 10.0}}


def test_probe_table_names():
    assert probe_table_relative("list", 3) == "probes/list-step03.parquet"
    assert probe_table_relative("list", 3, "load") == "probes/list-load-step03.parquet"
    assert parse_probe_table_name("list-load-step03.parquet") == ("list-load", 3)
    assert parse_probe_table_name("list.parquet") is None


# Recorded from kube-apiserver v1.37.1 around LISTs of configmaps: the storage label names the place.
V137_BEFORE = """\
apiserver_storage_list_total{group="",index="",resource="configmaps",storage="watchcache"} 2
apiserver_storage_list_fetched_objects_total{group="",index="",resource="configmaps",storage="watchcache"} 4
apiserver_watch_cache_consistent_read_total{fallback="false",group="",resource="configmaps",success="true"} 1
etcd_requests_total{group="",operation="getCurrentResourceVersion",resource="configmaps"} 4
"""
V137_AFTER_CONSISTENT = """\
apiserver_storage_list_total{group="",index="",resource="configmaps",storage="watchcache"} 3
apiserver_storage_list_fetched_objects_total{group="",index="",resource="configmaps",storage="watchcache"} 6
apiserver_watch_cache_consistent_read_total{fallback="false",group="",resource="configmaps",success="true"} 2
etcd_requests_total{group="",operation="getCurrentResourceVersion",resource="configmaps"} 5
"""


def test_classify_with_storage_label_scheme_consistent_read_from_cache():
    served = requestcost.classify_served_from(
        samples_by_name(V137_BEFORE), samples_by_name(V137_AFTER_CONSISTENT), "", "configmaps"
    )
    assert served.place == "cache"
    assert served.scheme == "storage-label"
    assert served.consistent_reads == 1 and served.etcd_revision_checks == 1


def test_classify_with_storage_label_scheme_etcd():
    after = V137_BEFORE + 'apiserver_storage_list_total{group="",index="",resource="configmaps",storage="etcd"} 1\n'
    served = requestcost.classify_served_from(samples_by_name(V137_BEFORE), samples_by_name(after), "", "configmaps")
    assert served.place == "etcd"


def test_classify_counts_objects_read_and_returned_by_storage():
    # A label selector from etcd: every object read, a tenth returned.
    before = V137_BEFORE
    after = V137_BEFORE + (
        'apiserver_storage_list_total{group="",index="",resource="configmaps",storage="etcd"} 1\n'
        'apiserver_storage_list_fetched_objects_total{group="",index="",resource="configmaps",storage="etcd"} 200\n'
        'apiserver_storage_list_returned_objects_total{group="",resource="configmaps",storage="etcd"} 20\n'
    )
    served = requestcost.classify_served_from(samples_by_name(before), samples_by_name(after), "", "configmaps")
    assert (served.place, served.fetched_objects, served.returned_objects) == ("etcd", 200, 20)


def _costs(cpu: float, alloc: float, rss: float = 1e8) -> str:
    return (
        f"process_cpu_seconds_total {cpu}\ngo_memstats_alloc_bytes_total {alloc}\n"
        f"process_resident_memory_bytes {rss}\ngo_memstats_heap_inuse_bytes 5e7\n"
    )


def test_request_cost_from_proc_subtracts_the_idle_cpu_rate_and_the_scrapes_allocations():
    idle = requestcost.CostReadings(
        samples_by_name(_costs(10, 1e9)),
        samples_by_name(_costs(10.2, 1.002e9)),
        1.0,
        proc_before=(5.0, 1e8),
        proc_after=(5.01, 1e8),
    )  # 10 ms/s in the background; scrapes allocate 2 MB
    window = requestcost.CostReadings(
        samples_by_name(_costs(11, 2e9)),
        samples_by_name(_costs(12, 2.032e9)),
        2.0,
        proc_before=(6.0, 1e8),
        proc_after=(6.32, 1.5e8),
    )
    cost = requestcost.request_cost(window, 3, idle)
    assert cost.source == "proc"
    assert cost.cpu_s == pytest.approx((0.32 - 0.02) / 3)  # /proc, not /metrics (1 s would include the scrapes)
    assert cost.alloc_bytes == pytest.approx((32e6 - 2e6) / 3)
    assert cost.rss_growth_bytes == 5e7


def test_request_cost_from_metrics_alone_subtracts_the_idle_window_whole():
    idle = requestcost.CostReadings(samples_by_name(_costs(10, 1e9)), samples_by_name(_costs(10.03, 1.002e9)), 1.0)
    window = requestcost.CostReadings(samples_by_name(_costs(11, 2e9)), samples_by_name(_costs(11.33, 2.032e9)), 2.0)
    cost = requestcost.request_cost(window, 3, idle)
    assert cost.source == "metrics"
    assert cost.cpu_s == pytest.approx(0.1)
    assert requestcost.request_cost(window, 3).cpu_s == pytest.approx(0.11)


def test_kubectl_get_lines_in_both_log_formats():
    from crdscale.collect.probes.discovery import _GET_LINE, _THROTTLE_LINE

    old = "I0301 round_trippers.go:553] GET https://10.0.0.1:443/apis/apps/v1?timeout=32s 200 OK in 5 milliseconds"
    new = 'I1122 round_trippers.go:632] "Response" verb="GET" url="https://127.0.0.1:52591/apis?timeout=32s" status="200 OK"'
    assert len(_GET_LINE.findall(old + "\n" + new)) == 2
    assert _THROTTLE_LINE.search("Waited for 1.1s due to client-side throttling, not priority and fairness")
