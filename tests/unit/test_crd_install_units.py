"""Installer, server and cleanup pieces that need no API server."""

from __future__ import annotations

import pytest

from crdscale.crds import clean as clean_mod
from crdscale.crds.generate import GeneratorParams, generate_crds
from crdscale.crds.install import (
    conditions_true,
    owned_body,
    resource_ref,
    split_steps,
    storage_version,
)
from crdscale.errors import UsageError
from crdscale.ownership import MANAGED_BY_LABEL, RUN_ID_LABEL, ownership_labels


def test_split_steps():
    items = list(range(10))
    assert split_steps(items, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert split_steps(items, 0) == [items]
    assert split_steps(items, 50) == [items]
    assert split_steps([], 3) == []
    with pytest.raises(UsageError):
        split_steps(items, -1)


def test_owned_body_adds_labels_and_drops_server_fields_without_touching_input():
    crd = generate_crds(GeneratorParams(crd_count=1, group_count=1, property_count=2))[0]
    crd["metadata"].update(labels={"team": "a"}, resourceVersion="12", uid="u", creationTimestamp="t")
    crd["status"] = {"conditions": []}
    body = owned_body(crd, "run-1")
    assert body["metadata"]["labels"] == {"team": "a", **ownership_labels("run-1")}
    assert "resourceVersion" not in body["metadata"] and "uid" not in body["metadata"]
    assert "status" not in body
    assert crd["metadata"]["labels"] == {"team": "a"} and "status" in crd


def test_storage_version_and_resource_ref():
    crd = generate_crds(GeneratorParams(crd_count=1, group_count=1, property_count=2, versions=3, scope="Namespaced"))[
        0
    ]
    assert storage_version(crd) == "v1"
    ref = resource_ref(crd)
    assert ref.namespaced and ref.path == f"/apis/{crd['spec']['group']}/v1/{crd['spec']['names']['plural']}"


def test_conditions_true():
    obj = {
        "status": {
            "conditions": [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "False"}]
        }
    }
    assert conditions_true(obj) == {"NamesAccepted"}
    assert conditions_true({}) == set()


class _NoNetwork:
    """A Cluster stand-in that fails the test if anything is sent."""

    server = "https://127.0.0.1:1"

    def url(self, path):
        return self.server + path

    @property
    def session(self):
        raise AssertionError("no request may be sent for a foreign object")


@pytest.mark.parametrize("labels", [None, {}, {MANAGED_BY_LABEL: "helm"}, {RUN_ID_LABEL: "x"}])
def test_delete_refuses_objects_without_ownership_labels(labels):
    item = {"metadata": {"name": "things.example.org", "uid": "u", "resourceVersion": "1", "labels": labels}}
    error = clean_mod._delete(_NoNetwork(), "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", item, None)
    assert "not crdscale's" in error


def test_delete_of_one_run_refuses_another_runs_objects():
    item = {"metadata": {"name": "a", "uid": "u", "resourceVersion": "1", "labels": ownership_labels("run-b")}}
    assert "not crdscale's" in clean_mod._delete(_NoNetwork(), "/api/v1/namespaces", item, "run-a")


def test_clean_needs_exactly_one_target():
    with pytest.raises(UsageError):
        clean_mod.clean(_NoNetwork())
    with pytest.raises(UsageError):
        clean_mod.clean(_NoNetwork(), run_id="r", all_owned=True)


def test_namespaced_item_paths():
    item = {"metadata": {"name": "cm", "namespace": "ns"}}
    assert clean_mod._item_path("/api/v1/configmaps", item) == "/api/v1/namespaces/ns/configmaps/cm"
    crd = {"metadata": {"name": "a.b.c"}}
    assert clean_mod._item_path("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).endswith("/a.b.c")
