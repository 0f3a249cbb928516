"""Install, serve and clean CRD sets on the real local control plane."""

from __future__ import annotations

import json
import uuid

import pytest

from crdscale.cli.main import main
from crdscale.cluster.local import LocalControlPlane
from crdscale.crds.clean import clean
from crdscale.crds.generate import GeneratorParams, generate_crds, write_crds
from crdscale.crds.install import CRD_PATH, CrdRejected, Installer, conditions_true
from crdscale.crds.serve import ResourceServer
from crdscale.ownership import new_run_id, owned_selector
from crdscale.rundir import layout, read_run

pytestmark = pytest.mark.integration


def _owned_crds(cluster, run_id=None):
    return cluster.get_json(CRD_PATH, params={"labelSelector": owned_selector(run_id)})["items"]


def _foreign_crd(suffix: str) -> dict:
    group = f"foreign-{suffix}.example.org"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}", "labels": {"app.kubernetes.io/managed-by": "someone-else"}},
        "spec": {
            "group": group,
            "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
            "scope": "Cluster",
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
            ],
        },
    }


def test_install_200_in_4_steps_serve_list_then_clean_leaves_foreign_crd(local_cluster, cluster, tmp_path):
    crd_dir = tmp_path / "crds"
    crds = generate_crds(GeneratorParams(crd_count=200, group_count=20, property_count=20, seed=11))
    write_crds(crds, crd_dir)
    out = tmp_path / "run"
    kubeconfig = str(local_cluster.kubeconfig)

    assert (
        main(
            [
                "install",
                str(crd_dir),
                "--step",
                "50",
                "--serve",
                "list",
                "--quiet",
                "--kubeconfig",
                kubeconfig,
                "--out",
                str(out),
            ]
        )
        == 0
    )

    (run_dir,) = out.iterdir()  # --out is the parent of the run directory
    run = read_run(run_dir)
    assert run.status == "completed" and run.manifest["kind"] == "install"
    events = run.read_jsonl(layout.EVENTS)
    step_ends = [e for e in events if e["kind"] == "step.end"]
    assert [e["step"] for e in step_ends] == [1, 2, 3, 4]
    assert all(e["established"] == 50 for e in step_ends)
    assert [e["crds"] for e in step_ends] == [50, 100, 150, 200]
    serve_ends = [e for e in events if e["kind"] == "serve.end"]
    assert [e["listed"] for e in serve_ends] == [50, 50, 50, 50]
    records = run.read_jsonl(layout.CRD_RECORDS)
    assert len(records) == 200
    assert all(r["action"] == "created" for r in records)
    assert all(r["created_at"] <= r["established_at"] and r["names_accepted_at"] for r in records)

    run_id = run.manifest["run_id"]
    installed = _owned_crds(cluster, run_id)
    assert len(installed) == 200
    assert all("Established" in conditions_true(c) for c in installed)

    foreign = _foreign_crd(uuid.uuid4().hex[:6])
    response = cluster.post(CRD_PATH, foreign, timeout=30)
    assert response.status_code == 201, response.text
    try:
        assert main(["clean", "--all-owned", "--kubeconfig", kubeconfig]) == 0
        assert _owned_crds(cluster) == []
        survivor = cluster.get(f"{CRD_PATH}/{foreign['metadata']['name']}")
        assert survivor.status_code == 200
        assert survivor.json()["metadata"].get("deletionTimestamp") is None
    finally:
        cluster.delete(f"{CRD_PATH}/{foreign['metadata']['name']}", timeout=30)


def test_rejection_is_recorded_existing_is_skipped_or_updated_and_watch_serves(cluster):
    run_id = new_run_id()
    good = generate_crds(
        GeneratorParams(
            crd_count=3, group_count=1, property_count=5, seed=12, group_suffix="reject.crdscale.example.org"
        )
    )
    bad = json.loads(json.dumps(good[0]))
    bad["metadata"]["name"] = "wrong-name.reject.crdscale.example.org"  # must be <plural>.<group>
    try:
        with Installer(cluster, run_id) as installer, ResourceServer(cluster, "watch", run_id=run_id) as server:
            result = installer.install_step(1, good[:2] + [bad])
            assert result.count("created") == 2
            [rejected] = result.rejected
            assert rejected.action == "rejected" and rejected.http_status == 422
            assert "metadata.name" in rejected.message
            served = server.serve(1, result.served_resources())
            assert served.listed == 2 and served.watches_requested == 2
            assert server.open_watches == 2

            again = installer.install_step(2, good[:1])  # present already: skipped by default
            assert again.count("skipped") == 1 and again.established == 0

        with Installer(cluster, run_id, existing="update", on_rejected="stop") as installer:
            updated = installer.install_step(1, good[:1])
            assert updated.count("updated") == 1 and updated.established == 1
            with pytest.raises(CrdRejected, match="wrong-name") as err:
                installer.install_step(2, [bad, good[2]])
            assert err.value.result.rejected
    finally:
        result = clean(cluster, run_id=run_id)
    assert result.remaining.get("customresourcedefinitions") == []
    assert result.gone["customresourcedefinitions"] == result.found["customresourcedefinitions"] >= 2


def test_install_and_clean_on_a_second_instance_through_kubeconfig(cluster, tmp_path):
    """The same commands against another API server only touch that one."""
    crd_dir = tmp_path / "crds"
    write_crds(
        generate_crds(
            GeneratorParams(
                crd_count=10, group_count=2, property_count=5, seed=13, group_suffix="second.crdscale.example.org"
            )
        ),
        crd_dir,
    )
    before = {c["metadata"]["uid"] for c in _owned_crds(cluster)}
    with LocalControlPlane(name=f"crds-second-{uuid.uuid4().hex[:4]}") as second:
        kubeconfig = str(second.kubeconfig)
        assert (
            main(
                [
                    "install",
                    str(crd_dir),
                    "--step",
                    "5",
                    "--serve",
                    "watch",
                    "--quiet",
                    "--kubeconfig",
                    kubeconfig,
                    "--out",
                    str(tmp_path / "run"),
                ]
            )
            == 0
        )
        other = second.connect()
        assert len(_owned_crds(other)) == 10
        assert {c["metadata"]["uid"] for c in _owned_crds(cluster)} == before
        assert main(["clean", "--all-owned", "--kubeconfig", kubeconfig]) == 0
        assert _owned_crds(other) == []
        other.close()
