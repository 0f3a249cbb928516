"""Decoding profile.proto into tables: heap, allocs, CPU, goroutine."""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from crdscale.analysis.pprof.schema import FILE_DESCRIPTOR, protobuf_backend
from crdscale.analysis.pprof.testing import encode_profile, truncate_stacks
from crdscale.collect.pprof import read_profile
from crdscale.errors import ProfileError

DATA = Path(__file__).resolve().parents[1] / "data" / "profiles"
KUBE_HEAP = DATA / "kube-apiserver-heap-crds0060.pb.gz"


def test_fast_protobuf_backend():
    assert protobuf_backend() == "upb"
    assert b"crdscale.perftools.profiles" in FILE_DESCRIPTOR


@pytest.mark.parametrize(
    "name,kind,types,default",
    [
        ("kube-apiserver-heap-crds0060", "heap", ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"], 3),
        ("go-sample-allocs", "allocs", ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"], 1),
        ("kube-apiserver-cpu", "cpu", ["samples", "cpu"], 1),
        ("kube-apiserver-goroutine", "goroutine", ["goroutine"], 0),
    ],
)
def test_kinds_and_sample_types(name, kind, types, default):
    profile = read_profile(DATA / f"{name}.pb.gz")
    assert profile.meta.kind == kind
    assert profile.sample_types == types
    assert list(profile.samples.columns) == types
    assert profile.sample_index() == default
    assert profile.meta.time is not None
    assert all(profile.samples[t].dtype == np.int64 for t in types)


def test_heap_values_are_as_go_wrote_them():
    """Go scales heap samples itself; the totals equal pprof's exact byte totals."""
    profile = read_profile(KUBE_HEAP)
    recorded = (DATA / "kube-apiserver-heap-crds0060.top-exact-bytes.txt").read_text()
    total = re.search(r"of (\d+)B total", recorded).group(1)
    assert profile.total("inuse_space") == int(total)
    assert profile.meta.period_type.type == "space" and profile.meta.period == 512 * 1024
    assert profile.unit("inuse_space") == "bytes" and profile.unit("inuse_objects") == "count"


def test_cpu_metadata():
    profile = read_profile(DATA / "kube-apiserver-cpu.pb.gz")
    assert profile.meta.duration_nanos > 0
    assert profile.meta.period_type.unit == "nanoseconds" and profile.meta.period > 0
    assert profile.unit("cpu") == "nanoseconds"


def test_stacks_locations_and_inlined_frames():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    stacks = profile.stacks
    assert list(stacks.columns) == ["sample", "depth", "location"]
    assert (stacks.groupby("sample")["depth"].min() == 0).all()
    assert set(stacks["location"]) <= set(profile.locations["location"])
    locs = profile.locations
    assert list(locs.columns) == ["location", "address", "mapping", "inline_depth", "function", "line", "column"]
    # main.small is inlined into main.deep: one location, two frames.
    fn_id = profile.functions.set_index("name").loc["main.small", "function"]
    inlined = locs[(locs["function"] == fn_id)]
    assert (inlined["inline_depth"] == 0).all()
    assert locs["location"].isin(inlined["location"]).sum() > len(inlined)
    frames = profile.frames()
    assert {"sample", "depth", "location", "inline_depth", "function", "name", "filename", "line"} <= set(
        frames.columns
    )
    assert len(frames) > len(stacks)  # inlined frames expand stacks


def test_labels_bytes():
    profile = read_profile(KUBE_HEAP)
    labels = profile.labels
    assert list(labels.columns) == ["sample", "key", "str", "num", "num_unit"]
    sizes = labels[labels["key"] == "bytes"]
    assert len(sizes) > 0 and (sizes["num"] > 0).all() and sizes["str"].isna().all()


def test_plain_and_gzip_inputs_are_the_same():
    gz = KUBE_HEAP.read_bytes()
    a, b = read_profile(gz), read_profile(gzip.decompress(gz))
    assert a.samples.equals(b.samples)
    assert a.stacks.equals(b.stacks)


def test_encode_round_trip():
    profile = read_profile(KUBE_HEAP)
    again = read_profile(encode_profile(profile))
    assert again.samples.equals(profile.samples)
    assert again.total("inuse_space") == profile.total("inuse_space")
    assert len(again.labels) == len(profile.labels)


def test_truncate_stacks():
    profile = read_profile(KUBE_HEAP)
    cut = truncate_stacks(profile, 32)
    assert cut.stacks["depth"].max() == 31
    assert cut.total() == profile.total()


def test_dangling_references_are_profile_errors():
    profile = read_profile(DATA / "go-sample-goroutine.pb.gz")
    broken = read_profile(DATA / "go-sample-goroutine.pb.gz")
    broken.stacks = broken.stacks.assign(location=broken.stacks["location"] + 10_000)
    data = encode_profile(broken, prune=False)
    with pytest.raises(ProfileError, match="unknown location"):
        read_profile(data)
    assert read_profile(encode_profile(profile)).total() == profile.total()


@pytest.mark.parametrize("path", sorted(DATA.glob("*.pb.gz")), ids=lambda p: p.name)
def test_numpy_wire_decoding_agrees_with_protobuf(path):
    """The numpy decoder reads what protobuf's own parser reads (Go mixes packed and unpacked lists)."""
    from crdscale.analysis.pprof.schema import profile_message_class

    msg = profile_message_class().FromString(gzip.decompress(path.read_bytes()))
    profile = read_profile(path)
    assert profile.n_samples == len(msg.sample)
    assert profile.stacks["location"].tolist() == [loc for s in msg.sample for loc in s.location_id]
    assert profile.samples.to_numpy().ravel().tolist() == [v for s in msg.sample for v in s.value]
    assert profile.labels["num"].tolist() == [lab.num for s in msg.sample for lab in s.label]
    assert profile.locations["function"].tolist() == [
        ln.function_id for loc in msg.location for ln in (loc.line or [SimpleNamespace(function_id=0)])
    ]
    assert profile.functions["name"].tolist() == [msg.string_table[f.name].decode() for f in msg.function]
    assert profile.mappings["memory_limit"].tolist() == [m.memory_limit for m in msg.mapping]


def test_unpacked_and_split_repeated_fields_decode_alike():
    """Protobuf allows repeated numbers unpacked, or packed in several chunks; both mean the same list."""
    from crdscale.analysis.pprof import wire

    def varint(v):
        out = bytearray()
        while True:
            out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                return bytes(out)

    packed = bytes([0x0A, 3]) + varint(1) + varint(300)[:1] + varint(300)[1:]
    unpacked = bytes([0x08]) + varint(1) + bytes([0x08]) + varint(300) + bytes([0x0A, 1]) + varint(5)
    data = packed + bytes([0x0A, 1]) + varint(5) + unpacked
    buf = wire.buffer(data)
    fields = wire.walk(buf, np.array([0, len(packed) + 3]), np.array([len(packed) + 3, len(data)]))
    values, counts = wire.packed_varints(buf, fields.select(1), 2)
    assert values.tolist() == [1, 300, 5, 1, 300, 5] and counts.tolist() == [3, 3]
    with pytest.raises(wire.WireError):
        wire.walk(buf, np.array([0]), np.array([len(packed) - 1]))  # cut inside a field
