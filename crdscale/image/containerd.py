"""Import an OCI image archive into a containerd, so a kubelet using it runs the image without a registry.

One owner for ``ctr images import``: ``crdscale image build --load`` (any containerd) and
``crdscale image load`` (the test node's) both come here.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from crdscale.errors import BinaryError
from crdscale.image import oci

# The namespace the kubelet's CRI plugin keeps its images in.
KUBELET_NAMESPACE = "k8s.io"


def import_commands(ctr: str, address: str, archive: Path, namespace: str = KUBELET_NAMESPACE) -> list[list[str]]:
    """The ``ctr`` command lines that put ``archive`` into the containerd at ``address``: the
    import (its images under their names, ``REPOSITORY:TAG``), then for each image the archive
    names a second name ``REPOSITORY@sha256:<manifest digest>``.

    Why the second name: a pod's ``image: crdscale:0.1@sha256:...`` (``run --cluster --image
    REF@DIGEST``) is looked up by the CRI as ``docker.io/library/crdscale@sha256:...`` (a tag
    beside a digest is dropped), which a plain import does not create; with no registry it would
    never be found. ``ctr images import --digests`` names it ``import-<date>@sha256:...`` unless
    ``--base-name`` is given, which fits one repository per archive; a tag per image fits any."""
    base = [ctr, "--address", address, "-n", namespace, "images"]
    commands = [[*base, "import", str(archive)]]
    for name, digest in oci.archive_images(archive):
        commands.append([*base, "tag", "--force", name, f"{oci.repository(name)}@{digest}"])
    return commands


def import_archive(archive: Path, *, address: str, namespace: str = KUBELET_NAMESPACE, ctr: str | None = None) -> str:
    """Import the OCI (or docker) ``archive`` into the containerd at ``address`` by name and by
    digest (:func:`import_commands`); returns ctr's output (the names imported and tagged)."""
    ctr = ctr or shutil.which("ctr") or next((p for p in ("/usr/bin/ctr", "/usr/sbin/ctr") if Path(p).is_file()), None)
    if not ctr:
        raise BinaryError("importing an image needs containerd's ctr (apt-get install containerd)")
    out = []
    for argv in import_commands(ctr, address, Path(archive), namespace):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            last = ((proc.stderr or proc.stdout).strip().splitlines() or ["?"])[-1]
            raise BinaryError(f"ctr images {argv[6]} into {address} failed: {last}")
        out.append(proc.stdout.strip())
    return "\n".join(o for o in out if o)
