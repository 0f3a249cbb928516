"""Findings tables of the probe notebooks, on small hand-made probe tables."""

from __future__ import annotations

import pandas as pd
import pytest

from crdscale.analysis.probes import apf_findings, discovery_findings, list_findings
from crdscale.models.probecosts import cache_vs_etcd


def test_discovery_findings_verdicts():
    sweep = pd.DataFrame(
        [
            {"group_versions": 192, "limit": "(100, 5)", "measured_delay_s": 18.0, "predicted_delay_s": 18.8},
            {"group_versions": 192, "limit": "(300, 50)", "measured_delay_s": 0.1, "predicted_delay_s": 0.0},
            {"group_versions": 368, "limit": "(100, 5)", "measured_delay_s": 40.0, "predicted_delay_s": 54.0},
        ]
    )
    values = discovery_findings(sweep).set_index("finding")["value"]
    assert "agrees" in values["192 group-versions, (100, 5)"]
    assert "disagrees" in values["368 group-versions, (100, 5)"]
    assert "no throttling predicted" in values["192 group-versions, (300, 50)"]


def test_discovery_findings_report_kubectl_rows_as_measured():
    sweep = pd.DataFrame(
        [
            {
                "group_versions": 192,
                "limit": "kubectl v1.23.3",
                "command": "kubectl get pods",
                "wall_s": 19.5,
                "requests": 195,
                "measured_delay_s": float("nan"),
                "predicted_delay_s": 18.8,
            },
            {
                "group_versions": 192,
                "limit": "kubectl v1.23.3",
                "command": "kubectl api-resources",
                "wall_s": 19.1,
                "requests": 194,
                "measured_delay_s": float("nan"),
                "predicted_delay_s": 18.8,
            },
        ]
    )
    values = discovery_findings(sweep).set_index("finding")["value"]
    assert (
        values["192 group-versions, kubectl v1.23.3: get pods"]
        == "wall 19.50 s, 195 GETs (model's longest wait 18.80 s)"
    )
    assert "api-resources" in " ".join(values.index)


def test_list_findings_ratios_and_mismatches():
    lists = pd.DataFrame(
        [
            {
                "resource": "secrets",
                "kind": "rv0",
                "items": 10,
                "bytes": 1_000_000,
                "latency_s": 0.01,
                "served_from": "cache",
                "expected_from_cache": True,
            },
            {
                "resource": "secrets",
                "kind": "consistent",
                "items": 10,
                "bytes": 1_000_000,
                "latency_s": 0.02,
                "served_from": "etcd",
                "expected_from_cache": True,
            },
            {
                "resource": "secrets",
                "kind": "metadata-only",
                "items": 10,
                "bytes": 10_000,
                "latency_s": 0.01,
                "served_from": "cache",
                "expected_from_cache": True,
            },
        ]
    )
    values = list_findings(lists).set_index("finding")["value"]
    assert values["secrets: metadata-only response"].startswith("100.0x")
    assert "unlike the APF estimator" in values["secrets: consistent place"]
    # Sizes in crdscale's binary units, labelled: 1,000,000 B is 976.56 KiB (not "1.00 MB").
    assert values["secrets: rv0"].startswith("10.0 ms, 976.56 KiB, served from cache")


def _row(
    kind,
    apiserver,
    served_from,
    items=200,
    latency_s=0.01,
    cpu_s=0.005,
    alloc_bytes=1e6,
    fetched=200,
    status=200,
    expected_from_cache=True,
):
    return {
        "resource": "listprobes.g",
        "kind": kind,
        "apiserver": apiserver,
        "served_from": served_from,
        "items": items,
        "bytes": items * 1000,
        "latency_s": latency_s,
        "cpu_s": cpu_s,
        "alloc_bytes": alloc_bytes,
        "etcd_cpu_s": 0.001,
        "fetched_objects": fetched,
        "status": status,
        "expected_from_cache": expected_from_cache,
    }


TWO_SERVERS = pd.DataFrame(
    [
        _row("rv0", "default", "cache", latency_s=0.010, cpu_s=0.004, alloc_bytes=2e6),
        _row("rv0", "--watch-cache=false", "etcd", latency_s=0.080, cpu_s=0.040, alloc_bytes=20e6),
        # Both servers send an Exact LIST at a revision before the objects to etcd: nothing to pair.
        _row("exact-old", "default", "etcd", items=0, fetched=0, expected_from_cache=False),
        _row("exact-old", "--watch-cache=false", "etcd", items=0, fetched=0, expected_from_cache=False),
        # etcd reads every object and filters; the cache's CPU is below the noise.
        _row("field-selector", "default", "cache", items=20, cpu_s=-0.0001, fetched=200),
        _row("field-selector", "--watch-cache=false", "etcd", items=20, latency_s=0.1, cpu_s=0.03, fetched=200),
        _row("label-selector", "default", "cache", items=20),
        _row("label-selector", "--watch-cache=false", "etcd", items=19),
    ]
)


def test_cache_vs_etcd_pairs_by_the_place_the_server_reported():
    table = cache_vs_etcd(TWO_SERVERS).set_index("kind")
    rv0 = table.loc["rv0"]
    assert rv0["same_response"] and rv0["latency_ratio"] == pytest.approx(8.0)
    assert rv0["cpu_ratio"] == pytest.approx(10.0) and rv0["alloc_ratio"] == pytest.approx(10.0)
    assert (rv0["apiserver_cache"], rv0["apiserver_etcd"]) == ("default", "--watch-cache=false")
    assert list(table.index) == ["rv0", "exact-old", "field-selector", "label-selector"]  # the probe's order
    old = table.loc["exact-old"]
    assert not old["same_response"] and old["note"] == "only served from etcd"
    assert old["latency_ratio"] != old["latency_ratio"]  # NaN: no cache row
    selected = table.loc["field-selector"]
    assert selected["latency_ratio"] == pytest.approx(10.0)
    assert selected["cpu_ratio"] != selected["cpu_ratio"]  # a ratio over noise is no ratio
    assert (selected["fetched_etcd"], selected["items"]) == (200, 20)
    assert table.loc["label-selector", "note"].startswith("different items")


def test_cache_vs_etcd_pairs_two_places_on_one_server_and_skips_failed_rows():
    one_server = pd.DataFrame(
        [
            _row("rv0", "default", "cache"),
            _row("consistent", "default", "etcd"),
            _row("exact", "default", "cache"),
            _row("exact", "default", "etcd", status=500),
        ]
    )
    table = cache_vs_etcd(one_server).set_index("kind")
    assert table.loc["rv0", "note"] == "only served from cache"
    assert table.loc["exact", "note"] == "only served from cache"
    assert cache_vs_etcd(one_server.iloc[0:0]).empty


def test_list_findings_with_an_etcd_only_server():
    values = list_findings(TWO_SERVERS).set_index("finding")["value"]
    assert values["listprobes.g: rv0, etcd vs watch cache"].startswith(
        "80.0 vs 10.0 ms (latency 8.0x, CPU 10.0x, allocated 10.0x)"
    )
    # The etcd-only server's rows are not held against the APF estimator's assumption.
    assert not any(k.endswith("place") for k in values.index)


def test_apf_findings():
    seats = pd.DataFrame(
        [
            {
                "resource": "s",
                "kind": "rv0",
                "bytes": 10e6,
                "served_from": "etcd",
                "object_count_seats": 1,
                "size_based_seats": 100,
                "observed_matches": "size-based",
            },
            {
                "resource": "s",
                "kind": "x",
                "bytes": 1e3,
                "served_from": "cache",
                "object_count_seats": 1,
                "size_based_seats": 1,
                "observed_matches": "object-count,size-based",
            },
        ]
    )
    values = apf_findings(seats).set_index("finding")["value"]
    assert values["LISTs where the estimators differ"] == "1 of 2"
    assert values["s: rv0"].startswith("9.54 MiB from etcd")
