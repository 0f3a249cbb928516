"""LIST, APF and client-memory probes on the local control plane."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crdscale.cli.main import main
from crdscale.collect.probes import apfseats, clientmem, listcost, listobjects
from crdscale.collect.probes.configs import ListProbeConfig
from crdscale.collect.probes.fixtures import ProbeFixtures
from crdscale.ownership import new_run_id
from crdscale.rundir import read_run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cr_lists(cluster):
    """The LIST probe over 2,000 small custom resources (one measurement per kind)."""
    config = ListProbeConfig(custom_resources=2000, cr_bytes=200, repeats=1)
    tables = listcost.probe(cluster, run_id=new_run_id(), config=config)
    return tables


def test_every_list_kind_answers_with_the_right_items(cr_lists):
    lists = cr_lists["lists"].set_index("kind")
    assert (lists["status"] == 200).all(), lists["status"]
    assert lists.loc["rv0", "items"] == 2000
    assert lists.loc["consistent", "items"] == 2000
    assert lists.loc["exact", "items"] == 2000
    assert lists.loc["exact-old", "items"] == 0
    assert lists.loc["paged", "items"] == 2000 and lists.loc["paged", "pages"] == 4
    assert lists.loc["label-selector", "items"] == 200
    assert lists.loc["namespaced", "items"] == 1000
    assert lists.loc["field-selector-namespace", "items"] == 1000
    assert lists.loc["field-selector-name", "items"] == 1
    assert lists.loc["metadata-only", "items"] == 2000
    assert lists.loc["table", "items"] == 2000
    assert lists.loc["metadata-only", "bytes"] < lists.loc["rv0", "bytes"]
    assert (lists["latency_s"] > 0).all()


def test_cache_or_etcd_is_read_from_the_servers_counters(cr_lists):
    served = cr_lists["lists"].set_index("kind")["served_from"]
    assert (served != "unknown").all(), served.to_dict()
    assert served["rv0"] == "cache"
    # An Exact LIST at a revision from before the CRD existed cannot come from the
    # new watch cache's snapshots: etcd serves it (v1.34+ serves other Exact LISTs from cache).
    assert served["exact-old"] == "etcd"


def test_apf_estimates_for_measured_lists(cr_lists):
    table = apfseats.compare(cr_lists["lists"], cr_lists["stats"], None)
    assert table["object_count_seats"].between(1, 10).all()
    assert table["size_based_seats"].between(1, 100).all()
    single = table.set_index("kind").loc["field-selector-name"]
    assert single["object_count_seats"] == 1 and single["size_based_seats"] == 1


def test_metadata_only_is_10x_smaller_for_100kb_secrets(cluster):
    config = ListProbeConfig(
        custom_resources=0,
        secrets=20,
        secret_bytes=100_000,
        namespaces=1,
        repeats=1,
        kinds=("rv0", "metadata-only", "metadata-only-rv0"),
    )
    run_id = new_run_id()
    with ProbeFixtures(cluster, run_id) as fixtures:
        populated = listobjects.populate(fixtures, config)
        lists = listcost.measure_lists(cluster, populated, repeats=1, kinds=config.kinds).set_index("kind")
        ns = populated.namespaces[0]
        reports = {r["mode"]: r for r in clientmem.measure(cluster, f"/api/v1/namespaces/{ns}/secrets")}
    assert lists.loc["rv0", "items"] >= 20
    assert lists.loc["metadata-only", "bytes"] * 10 <= lists.loc["rv0", "bytes"]
    assert reports["metadata"]["bytes"] * 10 <= reports["full"]["bytes"]
    assert reports["full"]["items"] == reports["metadata"]["items"] == 20
    assert reports["full"]["peak_rss_kib"] > reports["metadata"]["peak_rss_kib"]


def test_apf_probe_observes_the_servers_seats(local_cluster, tmp_path):
    code = main(
        [
            "probe",
            "apf",
            "-q",
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "--runs-dir",
            str(tmp_path),
            "--custom-resources",
            "300",
            "--cr-bytes",
            "2000",
            "--repeats",
            "1",
            "--kinds",
            "rv0",
            "consistent",
            "exact",
            "field-selector-name",
        ]
    )
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    seats = pd.read_parquet(run_dir / "probes" / "apf-step00.parquet")
    assert len(seats) == 4
    # The server ran an estimator for the impersonated, non-exempt user, and v1.37's
    # estimator (SizeBasedListCostEstimate on by default) agrees with our size-based model.
    assert seats["observed_seats"].notna().all(), seats
    assert seats["observed_matches"].str.contains("size-based").all(), seats.to_string()
    # Each level's seat limit is the server's own (nominal limit and hand size), never an observation.
    levels = read_run(run_dir).probe_table("apf", "levels")
    limit = levels.set_index("priority_level").loc["global-default"]
    assert limit["nominal_limit_seats"] > 0 and limit["hand_size"] > 0
    assert (seats["level_max_seats"] == limit["max_seats"]).all(), (seats.to_string(), levels.to_string())


def test_list_cli_prints_the_table(local_cluster, tmp_path, capsys):
    code = main(
        [
            "probe",
            "list",
            "-q",
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "--runs-dir",
            str(tmp_path),
            "--custom-resources",
            "100",
            "--repeats",
            "1",
            "--no-etcd-comparison",
            "--load",
            "1,2",
            "--load-requests",
            "10",
            "--load-seconds",
            "10",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "served_from" in out and "cache" in out and "etcd" in out
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "probes" / "list-step00.parquet").exists()
    load = pd.read_parquet(run_dir / "probes" / "list-load-step00.parquet")
    assert set(load["concurrency"]) == {1, 2}
    assert (load["rss_max_bytes"] > 0).all()


def test_list_cli_serves_the_same_lists_from_etcd_and_from_the_cache(local_cluster, tmp_path, capsys):
    """The default server answers from its watch cache, a second kube-apiserver with
    --watch-cache=false on the same etcd from etcd: the server's own counters say so."""
    code = main(
        [
            "probe",
            "list",
            "-q",
            "-o",
            "json",
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "--runs-dir",
            str(tmp_path),
            "--custom-resources",
            "200",
            "--pods",
            "30",
            "--pod-bytes",
            "20000",
            "--repeats",
            "1",
            "--kinds",
            "rv0",
            "consistent",
            "field-selector",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0, document
    lists = pd.DataFrame(document["tables"]["lists"])
    default = lists[lists["apiserver"] == "default"].set_index(["resource", "kind"])
    etcd_only = lists[lists["apiserver"] == "--watch-cache=false"].set_index(["resource", "kind"])
    assert len(default) == len(etcd_only) == 6, lists[["resource", "kind", "apiserver", "served_from"]]
    assert (default["served_from"] == "cache").all(), default["served_from_evidence"]
    assert (etcd_only["served_from"] == "etcd").all(), etcd_only["served_from_evidence"]
    assert etcd_only["served_from_evidence"].str.contains("etcd_lists+1 ", regex=False).all()
    assert (lists["cost_source"] == "proc").all() and lists["cpu_s"].notna().all()

    comparison = pd.DataFrame(document["tables"]["comparison"]).set_index(["resource", "kind"])
    assert comparison["same_response"].all(), comparison["note"]
    assert (comparison["latency_ratio"] > 0).all()
    crs = comparison.loc[[r for r in comparison.index if r[0].startswith("listprobes.")]].droplevel(0)
    assert crs.loc["rv0", "items"] == 200
    # A field other than namespace or name: etcd reads all 200, the cache evaluates its own 200.
    assert (crs.loc["field-selector", "items"], crs.loc["field-selector", "fetched_etcd"]) == (20, 200)
    pods = comparison.loc["pods"]
    # spec.nodeName has an index in the Pods' watch cache: it reads only the node's 3 Pods; etcd reads all 30.
    assert (pods.loc["field-selector", "fetched_cache"], pods.loc["field-selector", "fetched_etcd"]) == (3, 30)
    ratios = document["result"]["etcd_over_cache"]
    assert len(ratios) == 6 and all(r["latency"] is None or r["latency"] > 0 for r in ratios.values())

    (run_dir,) = tmp_path.iterdir()
    run = read_run(run_dir)
    assert set(run.probe_table("list")["apiserver"]) == {"default", "--watch-cache=false"}
    assert list(run.probe_table("list", "apiservers")["apiserver"]) == ["default", "--watch-cache=false"]
    # The second kube-apiserver is stopped and forgotten by the instance again.
    names = [p.name for p in type(local_cluster).attach(local_cluster.name).processes]
    assert "kube-apiserver" in names and not [n for n in names if n.startswith("kube-apiserver-")], names
