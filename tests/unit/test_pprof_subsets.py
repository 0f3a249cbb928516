"""Views that work on the samples they count only (most of a heap profile's samples hold
no bytes in use) must give what the whole profile gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crdscale.analysis.attribution import OTHER, attribute, cause_totals
from crdscale.analysis.pprof import parse_profile
from crdscale.analysis.pprof.decode import expand_stacks
from crdscale.analysis.pprof.graph import _distinct
from crdscale.analysis.pprof.wire import WireError, _decode_run

HEAP = Path(__file__).resolve().parents[1] / "data" / "profiles" / "kube-apiserver-heap-crds0060.pb.gz"


def _fresh():
    return parse_profile(HEAP.read_bytes(), HEAP.name)


def test_a_heap_profile_has_samples_without_bytes_in_use():
    values = _fresh().value_matrix()
    assert (values[:, 3] == 0).any() and (values[:, 3] != 0).any()  # inuse_space: the subset path is taken


def test_cause_totals_of_the_counted_samples_equal_the_whole_attribution():
    """cause_totals attributes only samples with a non-zero value; summing the per-sample
    causes of the whole profile must give the same numbers."""
    fresh = _fresh()
    subset = cause_totals(fresh, sample_types=["inuse_space"])["inuse_space"]
    whole = _fresh()
    causes = attribute(whole)["cause"]
    expected = pd.Series(whole.value_matrix()[:, 3], index=causes.index).groupby(causes.to_numpy()).sum()
    for cause, value in subset.items():
        assert value == expected.get(cause, 0), cause
    assert subset.get(OTHER) is not None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_of_some_samples_are_the_full_expansion_filtered(seed):
    profile = _fresh()
    chosen = np.random.default_rng(seed).random(profile.n_samples) < 0.3
    row, sample = expand_stacks(profile).rows_of(chosen)  # before the full expansion exists
    full = expand_stacks(_fresh())
    keep = chosen[full["sample"]]
    np.testing.assert_array_equal(row, full["row"][keep])
    np.testing.assert_array_equal(sample, full["sample"][keep])


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_packed_runs_decode_every_varint_length():
    runs = [[0, 1, 127, 128, 16383, 16384], [], [2**35, 2**63 + 5, 2**64 - 1], [300]]
    data = b"".join(b"".join(map(_varint, r)) for r in runs)
    buf = np.frombuffer(data + bytes(18), dtype=np.uint8)
    lengths = np.array([sum(len(_varint(v)) for v in r) for r in runs])
    end = np.cumsum(lengths)
    values, counts = _decode_run(buf, end - lengths, end)
    assert values.tolist() == [v for r in runs for v in r]
    assert counts.tolist() == [len(r) for r in runs]


@pytest.mark.parametrize(
    "runs",
    [
        [[1, 300, 127], [], [128, 5], [16383]],  # one- and two-byte varints only: the short path
        [[200], [7, 16383, 0]],  # a run opening with a two-byte varint
        [[5], [130]],
    ],
)
def test_packed_runs_of_short_varints_decode_alike(runs):
    """Runs whose varints are all 1-2 bytes (stack location ids) take a path of their own,
    with gaps between the runs as in a real message (other fields' bytes)."""
    gap = bytes([0x96, 0x12, 0x81])  # bytes >= 0x80 between runs must not join a varint
    chunks, start, end, pos = [], [], [], 0
    for r in runs:
        body = b"".join(map(_varint, r))
        chunks.append(gap + body)
        start.append(pos + len(gap))
        pos += len(gap) + len(body)
        end.append(pos)
    buf = np.frombuffer(b"".join(chunks) + bytes(18), dtype=np.uint8)
    values, counts = _decode_run(buf, np.array(start), np.array(end))
    assert values.tolist() == [v for r in runs for v in r]
    assert counts.tolist() == [len(r) for r in runs]


def test_packed_runs_refuse_a_varint_cut_at_the_end_of_its_range():
    buf = np.frombuffer(bytes([0x96, 0x01, 0x96]) + bytes(18), dtype=np.uint8)
    with pytest.raises(WireError):
        _decode_run(buf, np.array([0]), np.array([3]))


def test_distinct_is_unique():
    keys = np.array([5, 3, 5, 9, 3, 0], dtype=np.int64)
    np.testing.assert_array_equal(_distinct(keys), np.unique(keys))
    assert len(_distinct(np.zeros(0, dtype=np.int64))) == 0


def test_range_indexes_concatenates_ranges_and_depths():
    from crdscale.analysis.pprof.wire import range_indexes

    counts = np.array([2, 0, 3])
    assert range_indexes(np.array([10, 99, 4]), counts).tolist() == [10, 11, 4, 5, 6]
    assert range_indexes(0, counts).tolist() == [0, 1, 0, 1, 2]
    assert range_indexes(np.array([5]), np.array([2]), np.int32).dtype == np.int32
