"""Discovery probe on the local control plane: legacy and aggregated request counts with 60 extra groups."""

from __future__ import annotations

import json
import time

import pytest

from crdscale.cli.main import main
from crdscale.collect.probes import discovery
from crdscale.collect.probes.fixtures import ProbeFixtures, sweep_crds
from crdscale.models.tokenbucket import PRESETS
from crdscale.ownership import new_run_id, owned_selector

pytestmark = pytest.mark.integration

EXTRA_GROUPS = 60


def test_discovery_with_60_extra_groups(local_cluster):
    cluster = local_cluster.connect()
    run_id = new_run_id()
    base = discovery.count_group_versions(cluster)
    with ProbeFixtures(cluster, run_id) as fixtures:
        fixtures.install_crds(sweep_crds(0, EXTRA_GROUPS, fixtures.labels, fixtures.instance))
        group_versions = discovery.count_group_versions(cluster)
        assert group_versions == base + EXTRA_GROUPS

        legacy = discovery.legacy_discovery(cluster, PRESETS["disabled"])
        assert legacy.summary["errors"] == 0
        assert legacy.summary["group_versions"] == group_versions
        assert legacy.summary["requests"] == 2 + group_versions

        # The aggregated document is rebuilt asynchronously after CRD changes: wait until it settles
        # (same ETag twice in a row) before checking counts and revalidation.
        deadline = time.monotonic() + 60
        while True:
            aggregated = discovery.aggregated_discovery(cluster)
            settled = aggregated.get("revalidate_status") == 304 and aggregated.get("group_versions") == group_versions
            if settled or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert aggregated["supported"], "v1.37 serves aggregated discovery"
        assert aggregated["requests"] == 2
        assert aggregated["group_versions"] == group_versions
        assert aggregated["revalidate_status"] == 304
        assert aggregated["bytes"] < legacy.summary["bytes"]

    # Cleanup removed exactly our CRDs.
    left = cluster.get_json(
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions?labelSelector={owned_selector(run_id)}"
    )
    assert left["items"] == []


def test_discovery_cli_writes_a_run_directory(local_cluster, tmp_path):
    code = main(
        [
            "probe",
            "discovery",
            "-q",
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "--runs-dir",
            str(tmp_path),
            "--limits",
            "disabled",
            "300,50",
            "--no-kubectl",
        ]
    )
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    assert run_dir.name.endswith("-probe-discovery")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert "probes/discovery-step00.parquet" in manifest["tables"]
    assert "probes/discovery-requests-step00.parquet" in manifest["tables"]


def test_sweep_measured_delay_agrees_with_the_token_bucket(local_cluster):
    # A scaled-down sweep: 60 group-versions at (20, 10) waits (62 - 20) / 10 = 4.2 s for the last token.
    from crdscale.models.tokenbucket import parse_rate_limit

    cluster = local_cluster.connect()
    base = discovery.count_group_versions(cluster)
    target = max(60, base + 5)
    tables = discovery.sweep(cluster, run_id=new_run_id(), targets=[target], limits=[parse_rate_limit("20,10")])
    sweep = tables["sweep"].set_index("limit")
    assert set(sweep.index) == {"disabled", "(20, 10)"}
    row = sweep.loc["(20, 10)"]
    assert row["group_versions"] == target
    assert row["predicted_delay_s"] > 3.0
    checked = discovery.agreement(tables["sweep"])
    assert len(checked) == 1 and checked["within_tolerance"].all(), checked.to_string()
