"""`crdscale image build` for real: debootstrap, the locked venv, the cached Go binaries; the
same digest twice (the second build from cached layers), and containerd imports the archive.

Needs root and debootstrap (scripts/bootstrap.sh installs it), Debian's archive and PyPI; the
containerd part needs Debian's containerd (started here by hand, on its own socket).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.image import oci

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.alongside,  # debootstrap and pip wait on the network: make test runs it during the unit tests
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("debootstrap"), reason="needs root and debootstrap"),
]


def _build(capsys, out: Path, *extra: str) -> tuple[dict[str, str], float]:
    started = time.monotonic()
    assert main(["image", "build", "--out", str(out), "--tag", "crdscale:it", *extra]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[0]: line.split()[1] for line in lines if line.strip()}, time.monotonic() - started


class Containerd:
    """Debian's containerd on a socket of its own, with root and state in a temporary directory."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="crdscale-ctd-", dir="/tmp"))  # socket paths are short
        self.socket = self.dir / "containerd.sock"
        config = self.dir / "config.toml"
        config.write_text(
            f'version = 2\nroot = "{self.dir}/root"\nstate = "{self.dir}/state"\n'
            f'[grpc]\n  address = "{self.socket}"\n'
            '[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true\n'
        )
        self.log = open(self.dir / "containerd.log", "wb")
        self.proc = subprocess.Popen(["containerd", "--config", str(config)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            assert self.proc.poll() is None and time.monotonic() < deadline, (self.dir / "containerd.log").read_text()
            time.sleep(0.2)

    def ctr(self, *args: str) -> str:
        cmd = ["ctr", "--address", str(self.socket), "-n", "k8s.io", *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        subprocess.run(["umount", "-R", str(self.dir / "root")], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def test_image_builds_reproducibly_and_containerd_imports_it(tmp_path, capsys):
    first, cold_s = _build(capsys, tmp_path / "one.tar")
    second, warm_s = _build(capsys, tmp_path / "two.tar")
    assert first["digest"] == second["digest"] and first["digest"].startswith("sha256:")
    assert warm_s < 180, f"the rebuild from cached layers took {warm_s:.0f} s (cold: {cold_s:.0f} s)"

    image = oci.read_oci_archive(tmp_path / "one.tar")
    assert image.manifest_digest == first["digest"]
    assert len(image.manifest["layers"]) == 5  # base, python, kube-v1.37.1, tools, crdscale
    env = dict(e.split("=", 1) for e in image.config["config"]["Env"])
    assert env["CRDSCALE_IMAGE_CONTENT"] == first["content"]

    if not (shutil.which("containerd") and shutil.which("ctr")):
        pytest.skip("containerd not installed: the archive was checked, not imported")
    containerd = Containerd()
    try:
        assert (
            main(
                [
                    "image",
                    "build",
                    "--out",
                    str(tmp_path / "three.tar"),
                    "--tag",
                    "crdscale:it",
                    "--load",
                    "--containerd-address",
                    str(containerd.socket),
                ]
            )
            == 0
        )
        listed = containerd.ctr("images", "ls")
        assert "docker.io/library/crdscale:it" in listed and first["digest"] in listed
        # ...and by digest, as a pod's `image: crdscale:it@sha256:...` is looked up (no registry to ask)
        third = oci.read_oci_archive(tmp_path / "three.tar").manifest_digest
        assert f"docker.io/library/crdscale@{third}" in listed
        assert "complete" in containerd.ctr("images", "check")
    finally:
        containerd.stop()
