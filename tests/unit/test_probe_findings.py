"""Findings tables of the probe notebooks, on small hand-made probe tables."""

from __future__ import annotations

import pandas as pd

from crdscale.analysis.probes import apf_findings, discovery_findings, list_findings


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
            {"group_versions": 192, "limit": "kubectl v1.23.3", "command": "kubectl get pods", "wall_s": 19.5,
             "requests": 195, "measured_delay_s": float("nan"), "predicted_delay_s": 18.8},
            {"group_versions": 192, "limit": "kubectl v1.23.3", "command": "kubectl api-resources", "wall_s": 19.1,
             "requests": 194, "measured_delay_s": float("nan"), "predicted_delay_s": 18.8},
        ]
    )
    values = discovery_findings(sweep).set_index("finding")["value"]
    assert values["192 group-versions, kubectl v1.23.3: get pods"] == "wall 19.50 s, 195 GETs (model's longest wait 18.80 s)"
    assert "api-resources" in " ".join(values.index)


def test_list_findings_ratios_and_mismatches():
    lists = pd.DataFrame(
        [
            {"resource": "secrets", "kind": "rv0", "items": 10, "bytes": 1_000_000, "latency_s": 0.01, "served_from": "cache", "expected_from_cache": True},
            {"resource": "secrets", "kind": "consistent", "items": 10, "bytes": 1_000_000, "latency_s": 0.02, "served_from": "etcd", "expected_from_cache": True},
            {"resource": "secrets", "kind": "metadata-only", "items": 10, "bytes": 10_000, "latency_s": 0.01, "served_from": "cache", "expected_from_cache": True},
        ]
    )
    values = list_findings(lists).set_index("finding")["value"]
    assert values["secrets: metadata-only response"].startswith("100.0x")
    assert "unlike the APF estimator" in values["secrets: consistent place"]


def test_apf_findings():
    seats = pd.DataFrame(
        [
            {"resource": "s", "kind": "rv0", "bytes": 10e6, "served_from": "etcd", "object_count_seats": 1, "size_based_seats": 100, "observed_matches": "size-based"},
            {"resource": "s", "kind": "x", "bytes": 1e3, "served_from": "cache", "object_count_seats": 1, "size_based_seats": 1, "observed_matches": "object-count,size-based"},
        ]
    )
    values = apf_findings(seats).set_index("finding")["value"]
    assert values["LISTs where the estimators differ"] == "1 of 2"
