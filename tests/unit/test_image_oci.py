"""The OCI image writer: deterministic layers and archives, a layout containerd accepts."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from crdscale.errors import UsageError
from crdscale.image import oci


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _members(tar_bytes: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return tar.getmembers()


def test_tar_layer_is_sorted_with_parents_and_fixed_metadata(tmp_path):
    exe = tmp_path / "tool"
    exe.write_bytes(b"#!/bin/sh\n")
    exe.chmod(0o755)
    layer = oci.tar_layer(
        {"/opt/b/data.txt": b"x", "opt/a/tool": exe, "etc/x": b"y"},
        modes={"etc/x": 0o600, "var/empty": 0o1777},
        symlinks={"usr/bin/tool": "/opt/a/tool"},
    )
    members = _members(layer)
    names = [m.name for m in members]
    assert names == [
        "etc",
        "etc/x",
        "opt",
        "opt/a",
        "opt/a/tool",
        "opt/b",
        "opt/b/data.txt",
        "usr",
        "usr/bin",
        "usr/bin/tool",
        "var",
        "var/empty",
    ]
    by = {m.name: m for m in members}
    assert by["opt"].isdir() and by["opt"].mode == 0o755
    assert by["opt/a/tool"].mode == 0o755 and by["opt/b/data.txt"].mode == 0o644 and by["etc/x"].mode == 0o600
    assert by["usr/bin/tool"].issym() and by["usr/bin/tool"].linkname == "/opt/a/tool"
    assert by["var/empty"].isdir() and by["var/empty"].mode == 0o1777
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" and m.gname == "" for m in members)
    assert all(not m.pax_headers for m in members)  # short ASCII names: no pax records at all


def test_tar_layer_same_inputs_same_bytes_whatever_the_files_times(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"payload")
    first = oci.tar_layer({"a/f": f, "b": b"1"})
    os.utime(f, (1_700_000_000, 1_700_000_000))
    assert oci.tar_layer({"b": b"1", "a/f": f}) == first


def test_source_date_epoch_sets_mtimes(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert {m.mtime for m in _members(oci.tar_layer({"a": b"1"}))} == {1_700_000_000}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(UsageError):
        oci.tar_layer({"a": b"1"})


def test_bad_layer_paths_are_refused():
    for bad in ("", "/", "../etc/passwd", "a/../../b"):
        with pytest.raises(UsageError):
            oci.tar_layer({bad: b"x"})


def test_tree_entries_keep_links_modes_and_skip(tmp_path):
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    (root / "var/cache/apt").mkdir(parents=True)
    (root / "var/cache/apt/pkgcache.bin").write_bytes(b"junk")
    (root / "bin/sh").write_bytes(b"shell")
    (root / "bin/sh").chmod(0o755)
    os.link(root / "bin/sh", root / "bin/dash")
    (root / "lib").symlink_to("usr/lib")
    out = oci.write_layer(tmp_path / "l.tar", oci.tree_entries(root, under="/", skip=["var/cache/apt"]))
    members = {m.name: m for m in _members(out.read_bytes())}
    assert "var/cache/apt" not in members and "var/cache" in members
    assert members["bin/dash"].isfile() and members["bin/sh"].islnk() and members["bin/sh"].linkname == "bin/dash"
    assert members["lib"].issym() and members["lib"].linkname == "usr/lib"
    assert members["bin/dash"].mode == 0o755


def test_compressed_layer_is_deterministic_and_names_its_diff_id(tmp_path):
    layer = oci.tar_layer({"a": b"1" * 10000})
    one = oci.compress_layer(layer, tmp_path / "one.tar.gz")
    two = oci.compress_layer(layer, tmp_path / "two.tar.gz")
    assert one.path.read_bytes() == two.path.read_bytes()
    raw = one.path.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip MTIME field
    assert raw[3] & 0x08 == 0  # no FNAME flag: no file name in the header
    assert gzip.decompress(raw) == layer
    assert one.diff_id == _sha(layer) and one.digest == _sha(raw)
    assert Path(str(one.path) + oci.DIFF_ID_SUFFIX).read_text().strip() == one.diff_id


def _write(tmp_path: Path, name: str, ref: str = "crdscale:dev") -> tuple[Path, str]:
    base = oci.tar_layer({"etc/os-release": b"ID=test\n"})
    app = oci.tar_layer({"opt/app/run": b"#!/bin/sh\necho hi\n"}, modes={"opt/app/run": 0o755})
    config = oci.ImageConfig(entrypoint=["/opt/app/run"], env={"B": "2", "A": "1"}, labels={"x": "y"})
    out = tmp_path / name
    return out, oci.write_oci_archive(out, [base, app], config=config, ref=ref)


def test_same_inputs_same_digest_and_same_archive(tmp_path):
    out1, d1 = _write(tmp_path, "one.tar")
    out2, d2 = _write(tmp_path, "two.tar")
    assert d1 == d2 and d1.startswith("sha256:") and len(d1) == 71
    assert out1.read_bytes() == out2.read_bytes()
    _, d3 = _write(tmp_path, "three.tar", ref="crdscale:other")  # the name is not part of the image
    assert d3 == d1


def test_layout_validates(tmp_path):
    out, digest = _write(tmp_path, "img.tar")
    with tarfile.open(out) as tar:
        names = tar.getnames()
        blobs = {
            n.split("/")[-1]: tar.extractfile(n).read()
            for n in names
            if n.startswith("blobs/sha256/") and tar.getmember(n).isfile()
        }
        layout = json.loads(tar.extractfile("oci-layout").read())
        index = json.loads(tar.extractfile("index.json").read())
    assert layout == {"imageLayoutVersion": "1.0.0"}
    assert names[:3] == ["blobs", "blobs/sha256", names[2]] and "index.json" in names
    for hexdigest, data in blobs.items():  # every blob is named by its content
        assert hashlib.sha256(data).hexdigest() == hexdigest
    (entry,) = index["manifests"]
    assert index["mediaType"] == oci.MEDIA_INDEX and entry["mediaType"] == oci.MEDIA_MANIFEST
    assert entry["digest"] == digest and entry["size"] == len(blobs[digest[7:]])
    assert entry["annotations"] == {
        "io.containerd.image.name": "docker.io/library/crdscale:dev",
        "org.opencontainers.image.ref.name": "dev",
    }
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest = json.loads(blobs[digest[7:]])
    assert manifest["schemaVersion"] == 2 and manifest["mediaType"] == oci.MEDIA_MANIFEST
    assert manifest["config"]["mediaType"] == oci.MEDIA_CONFIG
    config = json.loads(blobs[manifest["config"]["digest"][7:]])
    assert [layer["mediaType"] for layer in manifest["layers"]] == [oci.MEDIA_LAYER_GZIP] * 2
    diff_ids = [_sha(gzip.decompress(blobs[layer["digest"][7:]])) for layer in manifest["layers"]]
    assert config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
    assert config["config"]["Env"] == ["A=1", "B=2"] and config["config"]["Entrypoint"] == ["/opt/app/run"]
    assert config["created"] == "1970-01-01T00:00:00Z" and (config["architecture"], config["os"]) == ("amd64", "linux")
    assert len(config["history"]) == 2
    read = oci.read_oci_archive(out)
    assert read.manifest_digest == digest and read.config == config


def test_gzipped_layer_files_are_used_as_they_are(tmp_path):
    layer = oci.tar_layer({"a": b"1"})
    blob = oci.compress_layer(layer, tmp_path / "cached.tar.gz")
    config = oci.ImageConfig()
    from_file = oci.write_oci_archive(tmp_path / "a.tar", [blob.path], config=config, ref="x:1")
    from_bytes = oci.write_oci_archive(tmp_path / "b.tar", [layer], config=config, ref="x:1")
    Path(str(blob.path) + oci.DIFF_ID_SUFFIX).unlink()  # without the sidecar the diff_id is computed
    assert from_file == from_bytes == oci.write_oci_archive(tmp_path / "c.tar", [blob.path], config=config, ref="x:1")


@pytest.mark.parametrize(
    "ref, full",
    [
        ("crdscale", "docker.io/library/crdscale:latest"),
        ("crdscale:dev", "docker.io/library/crdscale:dev"),
        ("me/crdscale:1", "docker.io/me/crdscale:1"),
        ("ghcr.io/me/crdscale", "ghcr.io/me/crdscale:latest"),
        ("localhost:5000/crdscale:v1.2", "localhost:5000/crdscale:v1.2"),
        ("127.0.0.1:5000/a/b:t", "127.0.0.1:5000/a/b:t"),
    ],
)
def test_normalize_ref(ref, full):
    assert oci.normalize_ref(ref) == full


@pytest.mark.parametrize("bad", ["", "Crdscale", "crdscale@sha256:abc", "a b", "crdscale:"])
def test_bad_refs(bad):
    with pytest.raises(UsageError):
        oci.normalize_ref(bad)
