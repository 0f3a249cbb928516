"""Object generation: every shape and control kind hits the requested JSON size within 5 %."""

import pytest

from crdscale.crds import objects
from crdscale.crds.generate import generate_crds, preset
from crdscale.errors import UsageError

SIZES = (1024, 10 * 1024, 100 * 1024, 1024 * 1024)


@pytest.fixture(scope="module")
def crd():
    for_provider = generate_crds(preset("provider", crd_count=1, group_count=1, property_count=60))[0]
    return objects.with_payload_field(for_provider)


@pytest.mark.parametrize("shape", objects.SHAPES)
@pytest.mark.parametrize("size", SIZES)
def test_custom_resource_size_within_5_percent(crd, shape, size):
    obj = objects.custom_resource(crd, "cr-1", namespace="ns", labels={"a": "b"}, size=size, shape=shape)
    assert abs(objects.json_bytes(obj) - size) <= 0.05 * size
    assert obj["metadata"] == {"name": "cr-1", "namespace": "ns", "labels": {"a": "b"}}
    assert obj["kind"] == crd["spec"]["names"]["kind"]


@pytest.mark.parametrize("kind", objects.CONTROL_KINDS)
@pytest.mark.parametrize("size", SIZES)
def test_control_objects_same_bytes(kind, size):
    obj = objects.control_object(kind, "c-1", namespace="ns", labels={}, size=size)
    assert abs(objects.json_bytes(obj) - size) <= 0.05 * size


def test_shapes_differ():
    crd = objects.with_payload_field(generate_crds(preset("apigen", crd_count=1, group_count=1))[0])
    flat, nested, listed = (
        objects.custom_resource(crd, "x", namespace=None, labels={}, size=4096, shape=s)
        for s in ("flat", "nested", "list")
    )
    assert all(isinstance(v, str) for v in flat[objects.PAYLOAD_FIELD].values())
    assert all(isinstance(v, dict) for v in nested[objects.PAYLOAD_FIELD].values())
    assert isinstance(listed[objects.PAYLOAD_FIELD]["items"], list)


def test_schema_shape_follows_the_crd_schema(crd):
    obj = objects.custom_resource(crd, "x", namespace=None, labels={}, size=8192, shape="schema")
    schema = objects.storage_schema(crd)

    def check(value, node):
        if "enum" in node:
            assert value in node["enum"]
        elif node.get("type") == "object":
            assert isinstance(value, dict)
            for key, sub in value.items():
                assert key in node.get("properties", {}), key
                check(sub, node["properties"][key])
        elif node.get("type") == "array":
            assert isinstance(value, list)
        elif node.get("type") == "string":
            assert isinstance(value, str)
        elif node.get("type") == "integer":
            assert isinstance(value, int) and not isinstance(value, bool)

    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    check(body, schema)


def test_payload_field_keeps_unknown_fields():
    crd = generate_crds(preset("apigen", crd_count=1, group_count=1))[0]
    out = objects.with_payload_field(crd)
    assert "payload" not in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    node = out["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["payload"]
    assert node == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_sizes_checked():
    with pytest.raises(UsageError, match="request limit"):
        objects.check_size(2 * 1024 * 1024)
    with pytest.raises(UsageError, match="> 0"):
        objects.check_size(0)
    crd = objects.with_payload_field(generate_crds(preset("apigen", crd_count=1, group_count=1))[0])
    with pytest.raises(UsageError, match="cannot build"):
        objects.custom_resource(crd, "x", namespace=None, labels={}, size=50, shape="flat")
    with pytest.raises(UsageError, match="shape"):
        objects.custom_resource(crd, "x", namespace=None, labels={}, size=1024, shape="round")


def test_objects_vary_by_salt():
    a = objects.config_map("a", namespace="n", labels={}, size=2048, salt=1)
    b = objects.config_map("a", namespace="n", labels={}, size=2048, salt=2)
    assert a["data"] != b["data"] and objects.json_bytes(a) == objects.json_bytes(b)


def test_without_managed_fields():
    obj = objects.config_map("a", namespace="n", labels={}, size=1024)
    assert objects.without_managed_fields(obj)["metadata"]["managedFields"] == [{}]
    assert "managedFields" not in obj["metadata"]


def test_a_target_lists_its_objects_cluster_wide(crd):
    from crdscale.crds.populate import control_target, custom_resource_target

    target = custom_resource_target(crd, "crdscale-objects-x").list_target()
    group, version = objects.api_version(crd).split("/")
    assert (target.group, target.version, target.resource) == (group, version, crd["spec"]["names"]["plural"])
    assert target.collection_path() == f"/apis/{group}/{version}/{crd['spec']['names']['plural']}"
    cm = control_target("configmaps", "crdscale-configmaps-x").list_target()
    assert cm.group_resource == "configmaps" and cm.collection_path("ns") == "/api/v1/namespaces/ns/configmaps"
