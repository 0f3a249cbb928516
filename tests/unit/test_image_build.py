"""The pieces of `crdscale image build` that need no debootstrap, network or root."""

from __future__ import annotations

import io
import tarfile

import pytest

from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.image import build, oci
from crdscale.rundir.writer import image_facts


def _names(entries) -> dict[str, oci._Entry]:
    return {e.name: e for e in entries}


def test_base_layer_leaves_out_caches_logs_and_host_identity(tmp_path):
    root = tmp_path / "rootfs"
    for d in ("var/lib/apt/lists", "var/log/apt", "var/cache/ldconfig", "usr/bin", "tmp/junk", "dev", "etc"):
        (root / d).mkdir(parents=True)
    (root / "var/lib/apt/lists/deb.debian.org_Packages").write_text("x")
    (root / "var/log/apt/history.log").write_text("Start-Date: today")
    (root / "var/cache/ldconfig/aux-cache").write_bytes(b"\0")
    (root / "etc/machine-id").write_text("0123456789abcdef\n")
    (root / "etc/resolv.conf").write_text("nameserver 10.0.0.1\n")
    (root / "usr/bin/python3").write_text("elf")
    (root / ".complete").write_text("key\n")
    entries = _names(build._base_entries(root))
    assert "usr/bin/python3" in entries
    for gone in (
        "var/lib/apt/lists",
        "var/log/apt",
        "var/cache/ldconfig/aux-cache",
        "tmp/junk",
        "etc/resolv.conf",
        ".complete",
    ):
        assert gone not in entries
    assert entries["tmp"].kind == tarfile.DIRTYPE and entries["tmp"].mode == 0o1777
    assert entries["var/log"].kind == tarfile.DIRTYPE and entries["proc"].kind == tarfile.DIRTYPE
    assert entries["etc/machine-id"].data == b""  # systemd's "not yet set"; each container is its own machine


def test_base_key_changes_with_packages():
    assert build.base_key() == build.base_key()
    assert build.base_key(packages=("python3",)) != build.base_key()


def test_requirements_are_pyprojects_with_the_extras_asked():
    root = build.checkout_root()
    core = build.requirements(root, ())
    with_s3 = build.requirements(root, ("s3",))
    assert any(r.startswith("pandas") for r in core) and not any(r.startswith("minio") for r in core)
    assert set(with_s3) - set(core) == {"minio>=7.2"}
    with pytest.raises(UsageError, match="no extra 'nope'"):
        build.requirements(root, ("nope",))


def test_crdscale_layer_is_the_package_and_its_command():
    files = build.crdscale_files(build.checkout_root(), "3.11")
    site = "opt/crdscale/venv/lib/python3.11/site-packages"
    assert f"{site}/crdscale/cli/main.py" in files and f"{site}/crdscale/cluster/goclient/main.go" in files
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in files)
    script = files["opt/crdscale/venv/bin/crdscale"]
    assert script.startswith(b"#!/opt/crdscale/venv/bin/python\n")
    layer = build.crdscale_layer(build.checkout_root(), "3.11")
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        assert tar.getmember("opt/crdscale/venv/bin/crdscale").mode == 0o755
        assert tar.getmember("work").isdir()


def test_binaries_keep_their_cache_paths_in_the_image(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))
    cached = tmp_path / "kube-apiserver" / "v1.37.1" / "kube-apiserver"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"elf")
    assert (
        build._image_path(cached, "kube-apiserver", "v1.37.1")
        == "opt/crdscale/cache/kube-apiserver/v1.37.1/kube-apiserver"
    )
    elsewhere = tmp_path.parent / "etcd"
    assert build._image_path(elsewhere, "etcd", "v3.6.16") == "opt/crdscale/cache/etcd/v3.6.16/etcd"


def test_layers_are_cached_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))
    made = []

    def make(tar):
        made.append(tar)
        tar.write_bytes(oci.tar_layer({"a": b"1"}))

    first, reused1 = build._cached_layer("x-1", make)
    second, reused2 = build._cached_layer("x-1", make)
    assert (reused1, reused2) == (False, True) and len(made) == 1 and first == second


def test_image_config_names_its_content_and_finds_the_binaries():
    content = build.content_digest(["sha256:" + "a" * 64, "sha256:" + "b" * 64])
    assert content == build.content_digest(["sha256:" + "a" * 64, "sha256:" + "b" * 64])
    doc = build.image_config(build.ImageSpec(kube_versions=("v1.37.1",)), content).document([])
    env = dict(e.split("=", 1) for e in doc["config"]["Env"])
    assert env["CRDSCALE_IMAGE_CONTENT"] == content and env["CRDSCALE_CACHE"] == "/opt/crdscale/cache"
    assert doc["config"]["Entrypoint"] == ["/opt/crdscale/venv/bin/crdscale"]


def test_run_manifest_records_the_image_it_ran_in():
    assert image_facts({}) is None
    env = {
        "CRDSCALE_IMAGE_CONTENT": "sha256:c",
        "CRDSCALE_IMAGE_DIGEST": "sha256:d",
        "CRDSCALE_IMAGE_REF": "crdscale:1",
    }
    assert image_facts(env) == {"content": "sha256:c", "digest": "sha256:d", "ref": "crdscale:1"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tag", "Bad Ref"], "not an image reference"),
        (["--containerd-address", "/x.sock"], "--containerd-address goes with --load"),
        (["--load", "--containerd-address", "/nonexistent.sock"], "no containerd socket"),
        (["--extra", "nope"], "no extra 'nope'"),
        (["--kube-version", "one"], "version"),
    ],
)
def test_bad_flags_fail_before_building(argv, message, capsys):
    assert main(["image", "build", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_shadow_loses_the_day_it_was_made(tmp_path):
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc/shadow").write_text("root:*:20416:0:99999:7:::\ndaemon:*:20416:0:99999:7:::\n")
    (root / "etc/shadow-").write_text("root:*:20400:0:99999:7:::\n")
    (root / "etc/shadow").chmod(0o640)
    entries = _names(build._base_entries(root))
    assert entries["etc/shadow"].data == b"root:*::0:99999:7:::\ndaemon:*::0:99999:7:::\n"
    assert entries["etc/shadow"].mode == 0o640 and "etc/shadow-" not in entries
