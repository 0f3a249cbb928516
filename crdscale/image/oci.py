"""OCI image archives assembled by crdscale itself (no Docker daemon, no registry).

A layer is a deterministic tar (sorted entries, zero times and owners), so the same files
give the same digest; :func:`write_oci_archive` writes an OCI image layout as one tar that
``ctr -n k8s.io images import`` accepts.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from crdscale.fsutil import write_atomic

LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
# containerd names an imported image after this annotation (the full reference).
CONTAINERD_NAME_ANNOTATION = "io.containerd.image.name"
OCI_REF_ANNOTATION = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class ImageConfig:
    """What runs in the image: its entrypoint, arguments and environment."""

    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str = "/"
    user: str = ""
    architecture: str = "amd64"
    os: str = "linux"

    def to_json(self, diff_ids: Sequence[str]) -> dict:
        config: dict = {"Env": [f"{k}={v}" for k, v in sorted(self.env.items())], "WorkingDir": self.working_dir}
        if self.entrypoint:
            config["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            config["Cmd"] = list(self.cmd)
        if self.user:
            config["User"] = self.user
        return {
            "architecture": self.architecture,
            "os": self.os,
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": list(diff_ids)},
        }


def _info(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size = kind, mode, size
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def tar_layer(
    files: Mapping[str, Path | bytes],
    *,
    modes: Mapping[str, int] | None = None,
    symlinks: Mapping[str, str] | None = None,
) -> bytes:
    """An uncompressed, deterministic layer tar: ``files`` maps a path in the image to a local
    file or its bytes (mode 0644 unless ``modes`` says otherwise, e.g. 0o755 for programs),
    ``symlinks`` a path to its target; parent directories are added (0755)."""
    modes = dict(modes or {})
    entries: dict[str, tuple[bytes, int, bytes | str]] = {}
    for path, content in files.items():
        data = content if isinstance(content, bytes) else Path(content).read_bytes()
        entries[str(PurePosixPath(path.lstrip("/")))] = (tarfile.REGTYPE, modes.get(path, 0o644), data)
    for path, target in (symlinks or {}).items():
        entries[str(PurePosixPath(path.lstrip("/")))] = (tarfile.SYMTYPE, 0o777, target)
    for path in list(entries):
        for parent in PurePosixPath(path).parents:
            if str(parent) != ".":
                entries.setdefault(str(parent), (tarfile.DIRTYPE, 0o755, b""))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(entries):
            kind, mode, payload = entries[name]
            if kind == tarfile.REGTYPE:
                tar.addfile(_info(name, kind, mode, len(payload)), io.BytesIO(payload))
            elif kind == tarfile.SYMTYPE:
                info = _info(name, kind, mode)
                info.linkname = payload
                tar.addfile(info)
            else:
                tar.addfile(_info(name + "/", kind, mode))
    return buf.getvalue()


def _descriptor(media_type: str, data: bytes) -> dict:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}


def write_oci_archive(out: Path, layers: Sequence[bytes | Path], *, config: ImageConfig, ref: str) -> str:
    """Write an OCI image layout tar of ``layers`` (uncompressed layer tars, bytes or files)
    to ``out``, named ``ref`` (``registry/name:tag``); return the manifest digest (``sha256:…``)."""
    layer_data = [layer if isinstance(layer, bytes) else Path(layer).read_bytes() for layer in layers]
    layer_descs = [_descriptor(LAYER_MEDIA_TYPE, data) for data in layer_data]
    config_data = _json_bytes(config.to_json([d["digest"] for d in layer_descs]))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": _descriptor(CONFIG_MEDIA_TYPE, config_data),
        "layers": layer_descs,
    }
    manifest_data = _json_bytes(manifest)
    manifest_desc = _descriptor(MANIFEST_MEDIA_TYPE, manifest_data)
    manifest_desc["annotations"] = {CONTAINERD_NAME_ANNOTATION: ref, OCI_REF_ANNOTATION: ref}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest_desc]}
    files = {"oci-layout": _json_bytes({"imageLayoutVersion": "1.0.0"}), "index.json": _json_bytes(index)}
    for data in (*layer_data, config_data, manifest_data):
        files["blobs/sha256/" + hashlib.sha256(data).hexdigest()] = data
    write_atomic(Path(out), tar_layer(files))
    return manifest_desc["digest"]


def _json_bytes(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
