"""The test node's configuration files, kernel-setting bookkeeping and bridge subnet choice
(crdscale.cluster.node), and the OCI archives its images come in (crdscale.image.oci)."""

from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import os
import tarfile
from pathlib import Path

import pytest
import tomllib
from cryptography import x509

from crdscale.cluster import node, pki
from crdscale.image.oci import ImageConfig, tar_layer, write_oci_archive

LAYOUT = node.NodeLayout(Path("/cache/instances/k1-37-1-ab12"), "k1-37-1-ab12")


def test_containerd_config_keeps_everything_under_the_node():
    text = node.containerd_config(LAYOUT, sandbox_image="crdscale.local/pause:v1.37.1", runc=Path("/usr/sbin/runc"))
    config = tomllib.loads(text)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert config["version"] == 2
    assert config["grpc"]["address"] == str(LAYOUT.containerd_socket)
    assert all(config[key].startswith(str(LAYOUT.dir)) for key in ("root", "state"))
    assert cri["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE here
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["sandbox_image"] == "crdscale.local/pause:v1.37.1"
    assert cri["cni"]["conf_dir"] == str(LAYOUT.cni_conf_dir)
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc["SystemdCgroup"] is False  # cgroupfs, as the kubelet
    assert runc["Root"].startswith(str(LAYOUT.dir))


def test_kubelet_configuration_for_a_shared_cgroup_v1_machine(tmp_path):
    creds = pki.Credentials(tmp_path)
    config = node.kubelet_configuration(LAYOUT, creds, address="10.213.1.1", port=10250, healthz_port=10248)
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs" and config["cgroupRoot"] == "/crdscale-k1-37-1-ab12"
    assert config["protectKernelDefaults"] is False and config["makeIPTablesUtilChains"] is False
    assert config["failSwapOn"] is False
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authentication"]["x509"]["clientCAFile"] == str(creds.ca_cert)
    assert config["authorization"]["mode"] == "Webhook"
    assert "staticPodPath" not in config
    assert config["containerRuntimeEndpoint"] == f"unix://{LAYOUT.containerd_socket}"
    assert config["imageGCHighThresholdPercent"] == 100  # images imported without a registry stay


def test_cni_network_is_a_plain_bridge_without_nat():
    conf = node.cni_conflist(LAYOUT, ipaddress.ip_network("10.213.7.0/24"))
    (bridge,) = conf["plugins"]
    assert bridge["bridge"] == LAYOUT.bridge and len(LAYOUT.bridge) <= 15
    assert bridge["isGateway"] is False and bridge["ipMasq"] is False
    (ranges,) = bridge["ipam"]["ranges"]
    assert ranges == [{"subnet": "10.213.7.0/24", "rangeStart": "10.213.7.2", "gateway": "10.213.7.1"}]
    assert bridge["ipam"]["dataDir"].startswith(str(LAYOUT.dir))


def test_free_subnet_skips_what_is_routed_here(monkeypatch):
    used = [ipaddress.ip_network("10.213.1.0/24"), ipaddress.ip_network("10.213.2.128/25")]
    monkeypatch.setattr(node, "_routed_networks", lambda: used)
    assert node.free_subnet() == ipaddress.ip_network("10.213.3.0/24")
    monkeypatch.setattr(node, "_routed_networks", lambda: [ipaddress.ip_network("10.0.0.0/8")])
    with pytest.raises(node.ClusterError):
        node.free_subnet()


def test_kernel_settings_are_restored_as_they_were(tmp_path, monkeypatch):
    monkeypatch.setattr(node, "PROC_SYS", tmp_path)
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "panic").write_text("1\n")
    (tmp_path / "kernel" / "panic_on_oops").write_text("0\n")
    before = node.read_sysctls()
    assert before == {"kernel/panic": "1", "kernel/panic_on_oops": "0"}  # the others do not exist here
    (tmp_path / "kernel" / "panic").write_text("10\n")  # as the kubelet does
    assert node.restore_sysctls(before) == {"kernel/panic": ("1", "10")}
    assert node.read_sysctls() == before


def test_node_ready_reads_the_ready_condition():
    assert node.node_ready({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert not node.node_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not node.node_ready({})


def test_client_certificates_name_user_and_groups(tmp_path):
    creds = pki.create_credentials(tmp_path / "pki")
    cert, key = tmp_path / "kubelet.crt", tmp_path / "kubelet.key"
    pki.issue_client_certificate(creds, "system:node:n1", ("system:nodes",), cert, key)
    parsed = x509.load_pem_x509_certificate(cert.read_bytes())
    names = {a.oid: a.value for a in parsed.subject}
    assert names[x509.NameOID.COMMON_NAME] == "system:node:n1"
    assert names[x509.NameOID.ORGANIZATION_NAME] == "system:nodes"
    assert parsed.issuer == x509.load_pem_x509_certificate(creds.ca_cert.read_bytes()).subject
    assert oct(key.stat().st_mode & 0o777) == "0o600"


def test_tar_layer_is_deterministic_with_parents_and_modes(tmp_path):
    program = tmp_path / "hello"
    program.write_bytes(b"\x7fELF...")
    files = {"usr/bin/hello": program, "etc/motd": b"hi\n"}
    layer = tar_layer(files, modes={"usr/bin/hello": 0o755}, symlinks={"bin": "usr/bin"})
    assert layer == tar_layer(
        dict(reversed(files.items())), modes={"usr/bin/hello": 0o755}, symlinks={"bin": "usr/bin"}
    )
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["bin", "etc", "etc/motd", "usr", "usr/bin", "usr/bin/hello"]
    by_name = {m.name: m for m in members}
    assert by_name["usr/bin/hello"].mode == 0o755 and by_name["etc/motd"].mode == 0o644
    assert by_name["bin"].issym() and by_name["bin"].linkname == "usr/bin"
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in members)


def test_oci_archive_is_an_image_layout_named_for_containerd(tmp_path):
    layer = tar_layer({"pause": b"binary"}, modes={"pause": 0o755})
    digest = write_oci_archive(
        tmp_path / "a.tar", [layer], config=ImageConfig(entrypoint=["/pause"]), ref="x.local/p:1"
    )
    assert digest == write_oci_archive(
        tmp_path / "b.tar", [layer], config=ImageConfig(entrypoint=["/pause"]), ref="x.local/p:1"
    )
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tar:
        blobs = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert json.loads(blobs["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (manifest_desc,) = json.loads(blobs["index.json"])["manifests"]
    assert manifest_desc["digest"] == digest
    assert manifest_desc["annotations"]["io.containerd.image.name"] == "x.local/p:1"
    for name, data in blobs.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    manifest = json.loads(blobs["blobs/sha256/" + digest.split(":")[1]])
    config = json.loads(blobs["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    assert config["config"]["Entrypoint"] == ["/pause"]
    # diff_ids name the uncompressed layer, whatever compression the blob has
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]


def test_a_node_needs_a_kubelet_with_failcgroupv1():
    with pytest.raises(node.UsageError, match="older than v1.31"):
        node.check_host("1.24.0")


def test_images_load_refuses_a_missing_archive_in_one_line(tmp_path, capsys):
    from crdscale.cli.main import main

    assert main(["image", "load", str(tmp_path / "nope.tar")]) != 0
    err = capsys.readouterr().err
    assert "no image archive at" in err and "Traceback" not in err


@pytest.fixture
def bare_host(tmp_path, monkeypatch):
    """A host with no node: empty cgroup and network trees, no kubelet socket, no kubelet process."""
    cgroups, net = tmp_path / "cgroup", tmp_path / "net"
    (cgroups / node.TRACKING_CONTROLLER).mkdir(parents=True)
    (cgroups / node.TRACKING_CONTROLLER / "cgroup.procs").write_text("1\n")
    (net / "eth0").mkdir(parents=True)
    monkeypatch.setattr(node, "CGROUP_ROOT", cgroups)
    monkeypatch.setattr(node, "NET_CLASS", net)
    monkeypatch.setattr(node, "KUBELET_DEVICE_PLUGIN_SOCKET", tmp_path / "device-plugins" / "kubelet.sock")
    monkeypatch.setattr(node, "_host_kubelets", lambda: [])
    return tmp_path


def test_a_free_host_has_no_other_node(bare_host):
    assert node.other_nodes() == []


def test_another_caches_node_is_seen_by_its_cgroup_and_bridge(bare_host):
    """A node started with another CRDSCALE_CACHE is in no instance registry of ours: the host tells."""
    cgroup = bare_host / "cgroup" / node.TRACKING_CONTROLLER / "crdscale-cold-ci" / "kubepods"
    cgroup.mkdir(parents=True)
    (cgroup / "cgroup.procs").write_text("4242\n4243\n")
    (bare_host / "cgroup" / node.TRACKING_CONTROLLER / "crdscale-left-empty").mkdir()  # no processes: not a node
    other = bare_host / "cgroup" / node.TRACKING_CONTROLLER / "crdscale-limits-7" / "cell"
    other.mkdir(parents=True)
    (other / "cgroup.procs").write_text("77\n")  # a crdscale-* cgroup without a node's node/kubepods children
    (bare_host / "net" / node.NodeLayout(Path("/x"), "cold-ci").bridge).mkdir()
    (bare_host / "net" / "crdscale0").mkdir()  # not a node's bridge name
    found = node.other_nodes()
    assert found == [
        "cgroup /crdscale-cold-ci holds 2 processes",
        f"bridge {node.NodeLayout(Path('/x'), 'cold-ci').bridge}",
    ]


def test_a_live_kubelet_socket_is_another_node_and_a_stale_one_is_not(bare_host):
    import socket

    path = node.KUBELET_DEVICE_PLUGIN_SOCKET
    path.parent.mkdir(parents=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    try:
        assert node.other_nodes() == [f"a kubelet serves {path}"]
    finally:
        server.close()
    assert path.is_socket() and node.other_nodes() == []  # left behind, nobody listening


def test_host_kubelets_are_those_in_our_mount_namespace_outside_crdscale_cgroups(tmp_path):
    proc = tmp_path / "proc"
    ours = os.readlink("/proc/self/ns/mnt")

    def process(pid: str, comm: str, mnt: str, cgroup: str) -> None:
        (proc / pid / "ns").mkdir(parents=True)
        (proc / pid / "comm").write_text(comm + "\n")
        os.symlink(mnt, proc / pid / "ns" / "mnt")
        (proc / pid / "cgroup").write_text(f"5:pids:{cgroup}\n")

    (proc / "self" / "ns").mkdir(parents=True)
    os.symlink(ours, proc / "self" / "ns" / "mnt")
    process("10", "kubelet", ours, "/system.slice/kubelet.service")  # the host's own kubelet
    process("11", "kubelet", "mnt:[1]", "/docker/abc")  # kind's, in its container's mount namespace
    process("12", "kubelet", ours, "/crdscale-k1/node")  # a crdscale node's: its cgroup tells
    process("13", "containerd", ours, "/system.slice/containerd.service")
    assert node._host_kubelets(proc) == [10]


def test_check_host_refuses_a_node_seen_on_the_host(bare_host, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(bare_host / "cache"))
    monkeypatch.setattr(node.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node, "host_tools", lambda: None)
    node.check_host()
    (bare_host / "net" / "crdscale0a1b2c").mkdir()
    with pytest.raises(node.UsageError, match=r"another node runs on this host \(bridge crdscale0a1b2c\)"):
        node.check_host()


def test_import_names_the_image_by_tag_and_by_digest(tmp_path):
    """`run --cluster --image REF@DIGEST` on a node without a registry: the CRI looks the image up as
    REPOSITORY@sha256:..., so the import adds that name beside the tag."""
    from crdscale.image.containerd import import_commands

    layer = tar_layer({"hello": b"hi\n"})
    digest = write_oci_archive(tmp_path / "a.tar", [layer], config=ImageConfig(), ref="localhost:5000/me/hello:v1")
    commands = import_commands("ctr", "/run/c.sock", tmp_path / "a.tar")
    base = ["ctr", "--address", "/run/c.sock", "-n", "k8s.io", "images"]
    assert commands == [
        [*base, "import", str(tmp_path / "a.tar")],
        [*base, "tag", "--force", "localhost:5000/me/hello:v1", f"localhost:5000/me/hello@{digest}"],
    ]


def test_an_archive_without_index_is_imported_by_its_own_names(tmp_path):
    from crdscale.image.containerd import import_commands

    with tarfile.open(tmp_path / "docker.tar", "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"[]"))
    assert [c[6] for c in import_commands("ctr", "/s", tmp_path / "docker.tar")] == ["import"]


@pytest.mark.parametrize(
    ("name", "repository"),
    [
        ("docker.io/library/crdscale:0.1", "docker.io/library/crdscale"),
        ("localhost:5000/me/hello:v1", "localhost:5000/me/hello"),
        ("localhost:5000/me/hello", "localhost:5000/me/hello"),
        ("ghcr.io/me/crdscale:1@sha256:ab", "ghcr.io/me/crdscale"),
    ],
)
def test_repository_drops_tag_and_digest(name, repository):
    from crdscale.image.oci import repository as repo

    assert repo(name) == repository
