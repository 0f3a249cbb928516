"""A deterministic OCI image writer: layers as tar files and an OCI image-layout archive.

No Docker daemon and no builder: an image is a few JSON documents and gzipped tar files
named by their sha256 (the OCI image spec), so crdscale writes them itself. Everything that
would make two builds of the same inputs differ is fixed: entries sorted by name, every mtime
``$SOURCE_DATE_EPOCH`` (default 0), uid/gid 0 with no user or group names, no pax headers
beyond what a long or non-ASCII name needs, gzip headers without a file name or time. The
same inputs therefore give the same layer digests, config digest and manifest digest.

The archive is an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/...``) in one
tar, which ``ctr images import`` (containerd), ``skopeo copy oci-archive:`` and
``podman load`` accept. ``index.json`` names the image twice, as BuildKit does:
``io.containerd.image.name`` with the full reference (``docker.io/library/crdscale:tag``:
the name a pod's ``image: crdscale:tag`` resolves to) and ``org.opencontainers.image.ref.name``
with the tag.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from crdscale.errors import UsageError

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
# Written beside a gzipped layer by compress_layer: the sha256 of its uncompressed tar (the
# config's diff_id), so a cached layer is not decompressed again just to name it.
DIFF_ID_SUFFIX = ".diff_id"
_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


def source_date_epoch() -> int:
    """The mtime of every entry and the image's ``created``: ``$SOURCE_DATE_EPOCH`` or 0."""
    value = os.environ.get("SOURCE_DATE_EPOCH", "0").strip() or "0"
    try:
        return max(0, int(value))
    except ValueError:
        raise UsageError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, not {value!r}") from None


@dataclass(frozen=True)
class ImageConfig:
    """What a container of the image runs, as in the OCI image config's ``config`` object.

    Attributes:
        entrypoint: the command, e.g. ``["/opt/crdscale/bin/crdscale"]``.
        cmd: default arguments after it.
        env: environment variables (written sorted by name).
        working_dir: the container's working directory.
        user: ``uid[:gid]`` or a name; empty = root.
        labels: image labels (``org.opencontainers.image.*``).
        architecture, os: the platform (``amd64``/``linux``).
    """

    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str = "/"
    user: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    architecture: str = "amd64"
    os: str = "linux"

    def document(self, diff_ids: Sequence[str]) -> dict:
        """The config JSON for layers whose uncompressed digests are ``diff_ids`` (bottom first)."""
        config: dict = {"Env": [f"{k}={v}" for k, v in sorted(self.env.items())], "WorkingDir": self.working_dir}
        if self.entrypoint:
            config["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            config["Cmd"] = list(self.cmd)
        if self.user:
            config["User"] = self.user
        if self.labels:
            config["Labels"] = dict(sorted(self.labels.items()))
        created = _iso(source_date_epoch())
        return {
            "created": created,
            "architecture": self.architecture,
            "os": self.os,
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": list(diff_ids)},
            "history": [{"created": created, "created_by": "crdscale image build"} for _ in diff_ids],
        }


def _iso(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- layers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    name: str  # relative, no leading "/", no trailing "/"
    kind: bytes  # tarfile.REGTYPE, DIRTYPE, SYMTYPE, LNKTYPE
    mode: int
    data: bytes | None = None
    path: Path | None = None
    linkname: str = ""


def _clean(name: str) -> str:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise UsageError(f"a layer entry needs a path inside the image, not {name!r}")
    return "/".join(parts)


def _with_parents(entries: Iterable[_Entry]) -> list[_Entry]:
    """``entries`` sorted by name, with a 0755 directory for every parent not given."""
    by_name = {e.name: e for e in entries}
    for name in list(by_name):
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            by_name.setdefault(parent, _Entry(parent, tarfile.DIRTYPE, 0o755))
    # Sorted by path components, so a directory comes right before its contents ("a/b" < "a-b").
    return [by_name[k] for k in sorted(by_name, key=lambda n: n.split("/"))]


def _write_entries(out: BinaryIO, entries: Sequence[_Entry]) -> None:
    mtime = source_date_epoch()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            info = tarfile.TarInfo(e.name + ("/" if e.kind == tarfile.DIRTYPE else ""))
            info.type, info.mode, info.mtime = e.kind, e.mode, mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if e.kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = e.linkname
                tar.addfile(info)
            elif e.kind == tarfile.REGTYPE:
                if e.path is not None:
                    with open(e.path, "rb") as f:
                        info.size = os.fstat(f.fileno()).st_size
                        tar.addfile(info, f)
                else:
                    info.size = len(e.data or b"")
                    tar.addfile(info, io.BytesIO(e.data or b""))
            else:
                tar.addfile(info)


def _file_mode(path: Path) -> int:
    return 0o755 if os.stat(path).st_mode & 0o111 else 0o644


def layer_entries(
    files: Mapping[str, Path | bytes],
    *,
    modes: Mapping[str, int] | None = None,
    symlinks: Mapping[str, str] | None = None,
) -> list[_Entry]:
    modes = {_clean(k): v for k, v in (modes or {}).items()}
    links = {_clean(k): v for k, v in (symlinks or {}).items()}
    names = {_clean(k) for k in files}
    entries = []
    for name, value in files.items():
        name = _clean(name)
        if isinstance(value, Path):
            mode = modes.get(name, _file_mode(value))
            entries.append(_Entry(name, tarfile.REGTYPE, mode, path=value))
        else:
            entries.append(_Entry(name, tarfile.REGTYPE, modes.get(name, 0o644), data=bytes(value)))
    for name, target in links.items():
        entries.append(_Entry(name, tarfile.SYMTYPE, 0o777, linkname=target))
    for name, mode in modes.items():  # a mode for a name that is no file or link: a directory
        if name not in names and name not in links:
            entries.append(_Entry(name, tarfile.DIRTYPE, mode))
    return _with_parents(entries)


def tar_layer(
    files: Mapping[str, Path | bytes],
    *,
    modes: Mapping[str, int] | None = None,
    symlinks: Mapping[str, str] | None = None,
) -> bytes:
    """An uncompressed layer tar holding ``files`` (path in the image -> a file to copy or its
    bytes) and ``symlinks`` (path -> target), with every parent directory (0755).

    ``modes`` sets permission bits by path (default: 0755 for an executable source file, else
    0644); a path in ``modes`` that is neither a file nor a link is an empty directory. The tar
    is deterministic: entries sorted, mtime ``$SOURCE_DATE_EPOCH`` or 0, owner 0:0.
    """
    buf = io.BytesIO()
    _write_entries(buf, layer_entries(files, modes=modes, symlinks=symlinks))
    return buf.getvalue()


def tree_entries(root: Path, *, under: str = "", skip: Iterable[str] = ()) -> list[_Entry]:
    """The entries of directory ``root``, placed at ``under`` in the image: files (their
    permission bits), directories, symlinks, hard links (as links to the first name in sorted
    order). Device nodes, sockets and FIFOs are left out (the runtime provides ``/dev``);
    ``skip`` lists relative paths (files or whole directories) to leave out."""
    root = Path(root)
    skipped = {s.strip("/") for s in skip}
    prefix = _clean(under) + "/" if under.strip("/") else ""
    entries: list[_Entry] = []
    first_link: dict[tuple[int, int], str] = {}
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir
        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if rel in skipped:
                continue
            full = Path(dirpath, d)
            if full.is_symlink():  # os.walk lists a link to a directory among directories
                found.append((rel, full))
            else:
                keep.append(d)
                found.append((rel, full))
        dirnames[:] = keep
        for f in filenames:
            rel = f"{rel_dir}/{f}" if rel_dir else f
            if rel not in skipped:
                found.append((rel, Path(dirpath, f)))
    for rel, full in sorted(found, key=lambda item: item[0].split("/")):
        st = os.lstat(full)
        name = prefix + rel
        perm = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            entries.append(_Entry(name, tarfile.SYMTYPE, 0o777, linkname=os.readlink(full)))
        elif stat.S_ISDIR(st.st_mode):
            entries.append(_Entry(name, tarfile.DIRTYPE, perm))
        elif stat.S_ISREG(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and key in first_link:
                entries.append(_Entry(name, tarfile.LNKTYPE, perm, linkname=first_link[key]))
            else:
                first_link.setdefault(key, name)
                entries.append(_Entry(name, tarfile.REGTYPE, perm, path=full))
    return _with_parents(entries)


def write_layer(out: Path, entries: Sequence[_Entry]) -> Path:
    """Write the entries (from :func:`layer_entries` or :func:`tree_entries`) as an
    uncompressed tar file ``out`` (for layers too large to hold in memory)."""
    partial = out.with_name(out.name + ".partial")
    with open(partial, "wb") as f:
        _write_entries(f, entries)
    os.replace(partial, out)
    return out


@dataclass(frozen=True)
class LayerBlob:
    """A gzipped layer in a file: ``digest`` names the blob, ``diff_id`` its uncompressed tar."""

    path: Path
    digest: str
    diff_id: str
    size: int


def compress_layer(layer: bytes | Path, out: Path) -> LayerBlob:
    """Gzip a layer tar (bytes or a file) into ``out`` deterministically (no name, mtime 0,
    level 6) and write its diff_id beside it (``out`` + ``.diff_id``)."""
    diff = hashlib.sha256()
    partial = out.with_name(out.name + ".partial")
    with open(partial, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
            for chunk in _chunks(layer):
                diff.update(chunk)
                gz.write(chunk)
    os.replace(partial, out)
    diff_id = "sha256:" + diff.hexdigest()
    Path(str(out) + DIFF_ID_SUFFIX).write_text(diff_id + "\n")
    return LayerBlob(out, "sha256:" + _sha256_file(out), diff_id, out.stat().st_size)


def _chunks(layer: bytes | Path) -> Iterable[bytes]:
    if isinstance(layer, (bytes, bytearray, memoryview)):
        view = memoryview(layer)
        for i in range(0, len(view), _CHUNK):
            yield bytes(view[i : i + _CHUNK])
        return
    with open(layer, "rb") as f:
        while chunk := f.read(_CHUNK):
            yield chunk


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _gzip_blob(path: Path) -> LayerBlob:
    """A layer already gzipped: its diff_id from the sidecar file when there is one."""
    sidecar = Path(str(path) + DIFF_ID_SUFFIX)
    if sidecar.is_file():
        diff_id = sidecar.read_text().strip()
    else:
        h = hashlib.sha256()
        with gzip.open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        diff_id = "sha256:" + h.hexdigest()
    return LayerBlob(path, "sha256:" + _sha256_file(path), diff_id, path.stat().st_size)


# --- references --------------------------------------------------------------------------------


def normalize_ref(ref: str) -> str:
    """A Docker-style reference in full: ``crdscale:1`` -> ``docker.io/library/crdscale:1``,
    ``ghcr.io/me/crdscale`` -> ``ghcr.io/me/crdscale:latest`` (the name a kubelet pulls)."""
    name, tag = split_ref(ref)
    return f"{name}:{tag}"


def split_ref(ref: str) -> tuple[str, str]:
    """``(repository with registry, tag)`` of a reference; tag ``latest`` when none is given."""
    ref = ref.strip()
    if "@" in ref:
        raise UsageError(f"give the image a tag, not a digest: {ref!r}")
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
    else:
        name, tag = ref, "latest"
    if not re.fullmatch(r"[\w][\w.-]{0,127}", tag) or not re.fullmatch(r"[a-z0-9]+(?:[._:/-]+[a-z0-9]+)*", name):
        raise UsageError(f"not an image reference: {ref!r} (e.g. crdscale:dev or registry.example/team/crdscale:1)")
    first, _, rest = name.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        name = "docker.io/" + (name if rest else "library/" + name)
    return name, tag


# --- the archive -------------------------------------------------------------------------------


def _json_bytes(doc: dict) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image_documents(blobs: Sequence[LayerBlob], config: ImageConfig) -> tuple[bytes, bytes]:
    """``(config JSON, manifest JSON)`` for gzipped layers ``blobs`` (bottom first)."""
    config_json = _json_bytes(config.document([b.diff_id for b in blobs]))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": _digest(config_json), "size": len(config_json)},
        "layers": [{"mediaType": MEDIA_LAYER_GZIP, "digest": b.digest, "size": b.size} for b in blobs],
    }
    return config_json, _json_bytes(manifest)


def layer_blobs(layers: Sequence[bytes | Path], workdir: Path) -> list[LayerBlob]:
    """Each layer as a gzipped blob: bytes and uncompressed tar files are compressed into
    ``workdir``; gzipped files are used as they are."""
    blobs = []
    for i, layer in enumerate(layers):
        if isinstance(layer, Path) and _is_gzip(layer):
            blobs.append(_gzip_blob(layer))
        else:
            blobs.append(compress_layer(layer, workdir / f"layer{i}.tar.gz"))
    return blobs


def write_oci_archive(out: Path, layers: Sequence[bytes | Path], *, config: ImageConfig, ref: str) -> str:
    """Write an OCI image-layout tar ``out`` of ``layers`` (bottom first: uncompressed tar bytes,
    a tar file, or a gzipped tar file with an optional ``.diff_id`` sidecar) and ``config``,
    named ``ref`` (e.g. ``crdscale:dev``). Returns the manifest digest ``sha256:...``, the
    image's identity: the same inputs give the same digest."""
    out = Path(out)
    name, tag = split_ref(ref)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".oci-", dir=out.parent) as tmp:
        blobs = layer_blobs(layers, Path(tmp))
        config_json, manifest_json = image_documents(blobs, config)
        manifest_digest = _digest(manifest_json)
        index = {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                {
                    "mediaType": MEDIA_MANIFEST,
                    "digest": manifest_digest,
                    "size": len(manifest_json),
                    "platform": {"architecture": config.architecture, "os": config.os},
                    "annotations": {ANNOTATION_CONTAINERD_NAME: f"{name}:{tag}", ANNOTATION_REF_NAME: tag},
                }
            ],
        }
        small = {
            "oci-layout": _json_bytes({"imageLayoutVersion": "1.0.0"}),
            "index.json": _json_bytes(index),
            f"blobs/sha256/{_digest(config_json)[7:]}": config_json,
            f"blobs/sha256/{manifest_digest[7:]}": manifest_json,
        }
        files: dict[str, Path | bytes] = dict(small)
        for b in blobs:
            files[f"blobs/sha256/{b.digest[7:]}"] = b.path
        modes = {k: 0o644 for k in files}
        partial = out.with_name(out.name + ".partial")
        with open(partial, "wb") as f:
            _write_entries(f, layer_entries(files, modes=modes))
        os.replace(partial, out)
    return manifest_digest


@dataclass
class OciArchive:
    """An OCI image-layout tar read back: its index, manifest and config, and blob access."""

    path: Path
    index: dict
    manifest_digest: str
    manifest: dict
    config: dict

    def blob(self, digest: str) -> bytes:
        with tarfile.open(self.path) as tar:
            f = tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            return f.read() if f else b""

    def copy_blob(self, digest: str, dest: BinaryIO) -> None:
        with tarfile.open(self.path) as tar:
            f = tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            if f is None:
                raise KeyError(digest)
            shutil.copyfileobj(f, dest, _CHUNK)


def read_oci_archive(path: Path) -> OciArchive:
    """Read an archive written by :func:`write_oci_archive` (its first manifest)."""
    with tarfile.open(path) as tar:

        def read(name: str) -> dict:
            f = tar.extractfile(name)
            if f is None:
                raise KeyError(name)
            return json.loads(f.read())

        index = read("index.json")
        digest = index["manifests"][0]["digest"]
        manifest = read(f"blobs/sha256/{digest[7:]}")
        config = read(f"blobs/sha256/{manifest['config']['digest'][7:]}")
    return OciArchive(Path(path), index, digest, manifest, config)


def archive_images(path: Path) -> list[tuple[str, str]]:
    """``(name, manifest digest)`` of each image the archive's ``index.json`` names in full
    (``docker.io/library/crdscale:0.1``, as ``ctr images import`` names it); ``[]`` for an archive
    without ``index.json`` (an older ``docker save``) or whose images carry only a tag."""
    try:
        with tarfile.open(path) as tar:
            member = tar.extractfile("index.json")
            index = json.loads(member.read()) if member else {}
    except KeyError:
        return []
    found = []
    for manifest in index.get("manifests", []):
        annotations = manifest.get("annotations") or {}
        name = annotations.get(ANNOTATION_CONTAINERD_NAME) or annotations.get(ANNOTATION_REF_NAME) or ""
        if "/" in name and manifest.get("digest", "").startswith("sha256:"):
            found.append((name, manifest["digest"]))
    return found


def repository(name: str) -> str:
    """``name`` without its tag or digest: ``registry.example:5000/a/b:1`` -> ``registry.example:5000/a/b``."""
    name = name.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
