"""Robustness: thousands of mutated and truncated profiles (seeded) either
decode into a usable Profile or raise ProfileError, never anything else."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from crdscale.analysis.attribution import attribute
from crdscale.analysis.pprof import views
from crdscale.collect.pprof import read_profile
from crdscale.errors import ProfileError

DATA = Path(__file__).resolve().parents[1] / "data" / "profiles"
SEEDS = {"go-sample-goroutine.pb.gz": 1500, "go-sample-cpu.pb.gz": 1500, "go-sample-heap.pb.gz": 400}


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(8)
    if kind == 0:  # truncate
        return bytes(b[: rng.randrange(len(b) + 1)])
    if kind == 1:  # flip bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:  # overwrite a run with random bytes
        i = rng.randrange(len(b))
        for j in range(i, min(len(b), i + rng.randint(1, 16))):
            b[j] = rng.randrange(256)
        return bytes(b)
    if kind == 3:  # delete a run
        i = rng.randrange(len(b))
        del b[i : i + rng.randint(1, 32)]
        return bytes(b)
    if kind == 4:  # insert random bytes
        i = rng.randrange(len(b) + 1)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        return bytes(b)
    if kind == 5:  # duplicate a slice (repeated fields, odd lengths)
        i = rng.randrange(len(b))
        j = min(len(b), i + rng.randint(1, 64))
        b[j:j] = b[i:j]
        return bytes(b)
    if kind == 6:  # pure noise
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 256)))
    # extreme varints: 0xff runs
    i = rng.randrange(len(b))
    b[i:i] = b"\xff" * rng.randint(1, 12)
    return bytes(b)


def _exercise(data: bytes) -> None:
    try:
        profile = read_profile(data)
    except ProfileError as err:
        assert "\n" not in str(err)
        return
    # A mutation that still decodes must give a profile every view can handle.
    views.top(profile, nodefraction=0.005, nodecount=10)
    attribute(profile)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_mutated_profiles_raise_only_profile_error(name: str):
    gz = (DATA / name).read_bytes()
    raw = gzip.decompress(gz)
    rng = random.Random(f"crdscale-fuzz-{name}")
    for i in range(SEEDS[name]):
        # Half the inputs mutate the plain protobuf (reaches the decoder and the
        # validation), half the gzip stream (reaches the decompressor).
        source = raw if i % 2 == 0 else gz
        _exercise(_mutate(rng, source))


def test_empty_and_non_profile_inputs():
    for data in (b"", b"\x1f\x8b", b"not a profile", gzip.compress(b""), gzip.compress(b"\x00\x01\x02")):
        with pytest.raises(ProfileError):
            read_profile(data)


def test_unreadable_path(tmp_path):
    with pytest.raises(ProfileError):
        read_profile(tmp_path / "missing.pb.gz")
    with pytest.raises(ProfileError):
        read_profile(tmp_path)  # a directory
