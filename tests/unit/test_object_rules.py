"""The per-object attribution rules on stacks recorded from a real run.

tests/data/objects/ holds heap profiles of kube-apiserver v1.37.1 from
`crdscale run scenarios/objects.toml` (2 CRDs; then 4,000 flat custom resources
and 4,000 ConfigMaps of 1 KiB) and, ``-cbor``, from the CBORServingAndStorage
cell of `scenarios/objects-cbor.toml`, trimmed to the samples that stand for
256 KiB or more in use (crdscale.analysis.pprof.testing.encode_profile).
"""

from pathlib import Path

import numpy as np
import pytest

from crdscale.analysis.attribution import OBJECT_RULES, RULES, attribute, classify_stack
from crdscale.analysis.pprof.decode import parse_profile

DATA = Path(__file__).parent.parent / "data" / "objects"


@pytest.fixture(scope="module")
def before():
    return parse_profile((DATA / "heap-crds2-objects0.pb.gz").read_bytes())


@pytest.fixture(scope="module")
def after():
    return parse_profile((DATA / "heap-crds2-cr4000-cm4000.pb.gz").read_bytes())


# (a frame the recorded stack holds, leaf first as pprof prints them -> the cause OBJECT_RULES gives)
RECORDED = [
    (
        [
            "encoding/json.(*decodeState).objectInterface",
            "sigs.k8s.io/structured-merge-diff/v6/value.unmarshal",
            "k8s.io/apimachinery/pkg/runtime.toUnstructured",
            "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta.SetObjectMeta",
            "k8s.io/apiserver/pkg/storage/etcd3.decodeObj",
        ],
        "managed-fields",
    ),
    (
        [
            "bytes.Clone",
            "k8s.io/apimachinery/pkg/apis/meta/v1.(*FieldsV1).SetRawBytes",
            "k8s.io/apimachinery/pkg/apis/meta/v1.(*ObjectMeta).Unmarshal",
            "k8s.io/api/core/v1.(*ConfigMap).Unmarshal",
        ],
        "managed-fields",
    ),
    (
        [
            "reflect.mapassign_faststr",
            "k8s.io/apimachinery/pkg/runtime.structToUnstructured",
            "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta.SetObjectMeta",
            "k8s.io/apiserver/pkg/storage/cacher.(*watchCache).processEvent",
        ],
        "object-metadata",
    ),
    (
        [
            "k8s.io/apiserver/pkg/storage/etcd3.(*resourceSizeEstimator).updateKey",
            "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).startWatching",
        ],
        "size-estimator",
    ),
    (
        [
            "k8s.io/apimachinery/pkg/runtime.DeepCopyJSONValue",
            "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.(*Unstructured).DeepCopy",
            "k8s.io/apiserver/pkg/storage/cacher.(*watchCache).processEvent",
        ],
        "unstructured",
    ),
    (
        [
            "sigs.k8s.io/json/internal/golang/encoding/json.unquote",
            "sigs.k8s.io/json/internal/golang/encoding/json.(*decodeState).objectInterface",
            "k8s.io/apiserver/pkg/storage/etcd3.decodeObj",
        ],
        "unstructured",
    ),
    (
        [
            "k8s.io/apimachinery/pkg/apis/meta/v1.(*ObjectMeta).Unmarshal",
            "k8s.io/api/core/v1.(*ConfigMap).Unmarshal",
            "k8s.io/apimachinery/pkg/runtime/serializer/protobuf.(*Serializer).Decode",
        ],
        "typed-objects",
    ),
    (
        [
            "k8s.io/utils/third_party/forked/golang/btree.(*node[go.shape.*uint8]).mutableFor",
            "k8s.io/apiserver/pkg/storage/cacher/store.(*btreeStore).addOrUpdateElem",
        ],
        "watch-cache",
    ),
]


@pytest.mark.parametrize("frames, cause", RECORDED, ids=[c for _, c in RECORDED])
def test_object_rules_row_by_row(frames, cause):
    assert classify_stack(frames, OBJECT_RULES) == cause


def test_recorded_stacks_hold_these_frames(after):
    """Every frame the rows above name is in the recorded profile (the rows are not made up)."""
    from crdscale.analysis.pprof.decode import function_arrays

    names = set(map(str, function_arrays(after)["name"]))
    for frames, _ in RECORDED:
        for frame in frames:
            assert frame in names, frame


CBOR = [
    "github.com/fxamacker/cbor/v2.(*decoder).parseMapToMap",
    "github.com/fxamacker/cbor/v2.(*decMode).Unmarshal",
    "k8s.io/apimachinery/pkg/runtime/serializer/cbor.(*serializer).unmarshal",
    "k8s.io/apiserver/pkg/storage/etcd3.decodeObj",
]


def test_cbor_decoded_custom_resources_are_unstructured():
    from crdscale.analysis.pprof.decode import function_arrays

    cbor = parse_profile((DATA / "heap-crds2-cr4000-cm4000-cbor.pb.gz").read_bytes())
    names = set(map(str, function_arrays(cbor)["name"]))
    assert set(CBOR) <= names
    assert classify_stack(CBOR, OBJECT_RULES) == "unstructured"
    assert classify_stack(CBOR, RULES) == "watch-cache"  # RULES charges the whole decode to the cache


def test_objects_grow_the_object_causes(before, after):
    """4,000 custom resources and 4,000 ConfigMaps: the object causes hold megabytes that RULES
    alone charges to the watch cache, and the per-CRD table (RULES) is unchanged by them."""

    grown = {}
    for rules in (OBJECT_RULES, RULES):
        b = attribute(before, rules).assign(v=before.values("inuse_space")).groupby("cause")["v"].sum()
        a = attribute(after, rules).assign(v=after.values("inuse_space")).groupby("cause")["v"].sum()
        grown[rules is OBJECT_RULES] = a.sub(b, fill_value=0)
    objects, plain = grown[True], grown[False]
    for cause in ("managed-fields", "unstructured", "typed-objects", "object-metadata"):
        assert objects.get(cause, 0) > 2 * 2**20, cause
    assert "managed-fields" not in plain.index
    # What the object rows claim comes out of the watch cache's share, not from elsewhere.
    moved = sum(objects.get(c, 0) for c in ("managed-fields", "unstructured", "typed-objects", "object-metadata"))
    assert plain["watch-cache"] - objects.get("watch-cache", 0) == pytest.approx(moved, rel=0.35)
    assert np.isclose(objects.sum(), plain.sum())


CONSISTENCY_CHECK = [
    "k8s.io/apimachinery/pkg/runtime.DeepCopyJSONValue",
    "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.(*Unstructured).DeepCopy",
    "k8s.io/apiextensions-apiserver/pkg/apiserver.schemaCoercingConverter.Convert",
    "k8s.io/apiserver/pkg/storage/etcd3.(*store).GetList",
    "k8s.io/apiserver/pkg/storage/cacher/consistency.(*Checker).calculateStoreDigest",
    "k8s.io/apiserver/pkg/storage/cacher/consistency.(*Checker).CalculateDigests",
]


def test_the_consistency_checkers_list_is_its_own_transient_cause():
    """Recorded in a ConfigMap step of `scenarios/objects-124680.toml` (v1.37.1, 2,500 custom resources
    stored; samples of 256 KiB or more under the checker): the watch cache's consistency check was
    LISTing the custom resources from etcd when the profile was taken. Its decoded page looks like the
    objects' own causes (managedFields, Unstructured, metadata) and had been charged to the ConfigMaps."""
    from crdscale.analysis.pprof.decode import function_arrays

    profile = parse_profile((DATA / "heap-consistency-check-cr2500.pb.gz").read_bytes())
    assert set(CONSISTENCY_CHECK) <= set(map(str, function_arrays(profile)["name"]))
    assert classify_stack(CONSISTENCY_CHECK, OBJECT_RULES) == "consistency-check"
    causes = attribute(profile, OBJECT_RULES)["cause"]
    by_cause = profile.samples["inuse_space"].groupby(causes.to_numpy()).sum()
    assert set(by_cause.index) == {"consistency-check"} and by_cause.sum() > 90 * 2**20
