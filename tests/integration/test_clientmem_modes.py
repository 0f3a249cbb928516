"""A controller's informer cache, measured with client-go on the real control plane: full, metadata-only and
transformed caches of 200 custom resources, with and without WatchList."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.collect.probes import clientmem
from crdscale.collect.probes.configs import ClientMemConfig
from crdscale.ownership import new_run_id

pytestmark = pytest.mark.integration

OBJECTS = 200


def test_every_mode_caches_every_object_and_metadata_is_cheaper_than_transform_than_full(cluster):
    config = ClientMemConfig(cache="custom-resources", objects=OBJECTS, object_bytes=1024)
    table = clientmem.probe(cluster, run_id=new_run_id(), config=config)
    assert set(table["client"]) == {"client-go"}
    assert sorted(zip(table["mode"], table["watch_list"])) == sorted(
        (mode, wl) for mode in ("full", "metadata", "transform") for wl in (False, True)
    )
    assert (table["items"] == OBJECTS).all() and (table["json_items"] == OBJECTS).all()
    for watch_list, runs in table.groupby("watch_list"):
        by = runs.set_index("mode")
        heap = by["heap_per_object_bytes"]
        assert heap["metadata"] < heap["transform"] < heap["full"], (watch_list, heap.to_dict())
        # The transform left no managedFields in the cache; the other modes keep the create's entry.
        assert by.loc["transform", "managed_fields"] == 0
        assert by.loc["full", "managed_fields"] >= OBJECTS and by.loc["metadata", "managed_fields"] >= OBJECTS
        assert by.loc["full", "ratio_to_full"] == 1.0
        assert by.loc["full", "decoded"] == "unstructured" and by.loc["metadata", "decoded"] == "metadata"


REAL_CRDS = Path(__file__).resolve().parents[3] / "shared" / "data" / "crossplane-terrajet-2021-crds.tar.gz"


@pytest.mark.skipif(not REAL_CRDS.is_file(), reason=f"no real CRD set at {REAL_CRDS}")
def test_the_transform_strips_the_schemas_of_a_typed_crd_cache(cluster):
    config = ClientMemConfig(
        cache="crds",
        crds_from=str(REAL_CRDS),
        crd_match=r"\.aws\.",
        crd_limit=20,
        modes=("full", "transform"),
        watch_list=("on",),
    )
    by = clientmem.probe(cluster, run_id=new_run_id(), config=config).set_index("mode")
    assert (by["decoded"] == "typed").all() and (by["items"] >= 20).all()
    assert by.loc["full", "schemas"] >= 20 and by.loc["transform", "schemas"] == 0
    assert by.loc["transform", "managed_fields"] == 0
    assert by.loc["transform", "heap_per_crd_bytes"] < by.loc["full", "heap_per_crd_bytes"]
