"""CRD set summary/hash and the JSONL event log."""

from __future__ import annotations

import copy
import json

from crdscale.crds.generate import GeneratorParams, generate_crds
from crdscale.crds.summary import count_properties, crd_set_sha256, summarize
from crdscale.ownership import ownership_labels


def test_hash_ignores_order_server_fields_and_ownership_labels():
    crds = generate_crds(GeneratorParams(crd_count=5, group_count=2, property_count=4))
    as_served = copy.deepcopy(crds[::-1])
    for crd in as_served:
        crd["metadata"].update(uid="u", resourceVersion="9", labels=ownership_labels("r"))
        crd["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
    assert crd_set_sha256(as_served) == crd_set_sha256(crds)
    changed = copy.deepcopy(crds)
    changed[0]["spec"]["scope"] = "Namespaced"
    assert crd_set_sha256(changed) != crd_set_sha256(crds)


def test_summary_numbers():
    crds = generate_crds(GeneratorParams(crd_count=4, group_count=2, property_count=10, versions=2))
    summary = summarize(crds)
    assert (summary.count, summary.groups, summary.group_versions, summary.versions) == (4, 2, 4, 8)
    assert summary.properties_min == summary.properties_max == 20 and summary.properties_total == 80
    assert summary.schema_bytes_min <= summary.schema_bytes_median <= summary.schema_bytes_max
    assert json.loads(json.dumps(summary.to_dict()))["sha256"] == summary.sha256
    assert "group-versions:  4" in summary.render()


def test_count_properties_follows_items_and_additional_properties():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}},
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"c": {}}}},
        },
    }
    assert count_properties(schema) == 4
