"""crdscale's own image: the cells of a matrix, each in a pod, run from it.

Four kinds of layer, bottom first, so a rebuild reuses what did not change:

1. **base**: a minimal Debian rootfs (``debootstrap --variant=minbase``) with Debian's Python,
   from Debian's archive: no container registry is involved. Cached by suite, package list
   and mirror.
2. **python**: a venv at ``/opt/crdscale/venv`` holding crdscale's requirements (core plus
   the extras asked, ``s3`` by default) at the versions of ``requirements.lock``, installed
   by pip inside the rootfs (chroot). Cached by the base and the lock's hash.
3. **Go binaries**, one layer per kube-apiserver version (with its kube-controller-manager)
   and one for etcd, crdscale-client and kubectl, at the paths crdscale's cache uses
   (``$CRDSCALE_CACHE=/opt/crdscale/cache``), so the crdscale in the pod finds them as it
   finds them here. Taken from this machine's cache, built first when missing.
4. **crdscale** itself, the package files of this checkout: the layer that changes most.

Nothing in a layer depends on when or where it was built (see :mod:`crdscale.image.oci`);
the rootfs is stripped of logs, caches, apt lists and the ldconfig aux cache, and Python's
bytecode is hash-checked (``SOURCE_DATE_EPOCH``) instead of stamped with file times.
"""

from __future__ import annotations

import configparser
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import crdscale
from crdscale import __version__
from crdscale.cluster import binaries
from crdscale.errors import BinaryError, UsageError
from crdscale.image import oci
from crdscale.paths import cache_dir
from crdscale.rundir.writer import IMAGE_ENVS

log = logging.getLogger(__name__)

IMAGE_HOME = "opt/crdscale"
VENV = f"{IMAGE_HOME}/venv"
IMAGE_CACHE = f"{IMAGE_HOME}/cache"
WORKDIR = "work"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# Python and what pip needs to fetch over HTTPS; nothing else (minbase has no apt recommends).
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates")
DEFAULT_EXTRAS = ("s3",)
# Left out of the base layer: what differs between two debootstraps of the same packages, or
# is only a cache (relative to the rootfs; whole directories where they are directories).
ROOTFS_SKIP = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "var/cache/ldconfig/aux-cache",
    "var/cache/debconf/config.dat-old",
    "var/cache/debconf/templates.dat-old",
    "var/lib/dpkg/status-old",
    "var/lib/dpkg/diversions-old",
    "etc/passwd-",
    "etc/group-",
    "etc/shadow-",
    "etc/gshadow-",
    "var/log",
    "debootstrap",
    "etc/machine-id",
    "etc/hostname",
    "etc/resolv.conf",
    "root/.cache",
    "tmp",
    "run",
    "dev",
    "proc",
    "sys",
)
# Directories the base layer must have although their contents are left out.
ROOTFS_EMPTY_DIRS = {"tmp": 0o1777, "run": 0o755, "dev": 0o755, "proc": 0o555, "sys": 0o555, "var/log": 0o755}


@dataclass(frozen=True)
class ImageSpec:
    """What goes into the image.

    Attributes:
        kube_versions: kube-apiserver (+ kube-controller-manager) versions, ``vX.Y.Z``.
        kubectl_versions: kubectl versions to include.
        etcd_version: etcd version (``None``: the pinned one).
        client: include crdscale-client (client-go informers, discovery).
        extras: crdscale's optional extras to install beside its core requirements.
        ref: the image's name, e.g. ``crdscale:0.1.0``.
    """

    kube_versions: tuple[str, ...]
    kubectl_versions: tuple[str, ...] = ()
    etcd_version: str | None = None
    client: bool = True
    extras: tuple[str, ...] = DEFAULT_EXTRAS
    ref: str = f"crdscale:{__version__}"


@dataclass
class BuiltImage:
    """The result of :func:`build_image`: the archive, its digest and how each layer was had."""

    path: Path
    digest: str
    ref: str
    content: str
    layers: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def image_cache() -> Path:
    return cache_dir() / "image"


def checkout_root() -> Path:
    """The crdscale checkout this package runs from (its requirements.lock and pyproject.toml)."""
    root = Path(crdscale.__file__).resolve().parent.parent
    if not (root / "requirements.lock").is_file() or not (root / "pyproject.toml").is_file():
        raise UsageError(
            f"crdscale image build needs a crdscale checkout (requirements.lock, pyproject.toml); {root} has none"
        )
    return root


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def check_build_tools() -> None:
    """Fail before anything slow when the base cannot be built here."""
    if not shutil.which("debootstrap"):
        raise BinaryError("crdscale image build needs debootstrap (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise BinaryError("crdscale image build runs debootstrap and chroot, which need root")


# --- layer 1: base -------------------------------------------------------------------------


# Changed when what the base layer holds changes (ROOTFS_SKIP, the shadow file's dates...).
BASE_LAYOUT = 2


def base_key(suite: str = DEBIAN_SUITE, packages: Sequence[str] = DEBIAN_PACKAGES, mirror: str = DEBIAN_MIRROR) -> str:
    """Names the rootfs by what went into debootstrap (the rootfs is kept per key)."""
    return _sha256(json.dumps({"suite": suite, "packages": sorted(packages), "mirror": mirror}))[:16]


def base_layer_key(key: str) -> str:
    """Names the base layer: the rootfs and how it is turned into a layer."""
    return _sha256(json.dumps({"rootfs": key, "skip": ROOTFS_SKIP, "layout": BASE_LAYOUT}))[:16]


def _undated_shadow(text: str) -> bytes:
    """/etc/shadow with the "last changed" field (days since 1970: the day debootstrap ran)
    emptied, which means "no password ageing" for these locked system accounts."""
    lines = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3:
            fields[2] = ""
        lines.append(":".join(fields))
    return ("\n".join(lines) + "\n").encode()


def _run(cmd: Sequence[str], *, what: str, log_path: Path, env: Mapping[str, str] | None = None) -> None:
    with open(log_path, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        rc = subprocess.run(list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
        raise BinaryError(f"{what} failed (exit {rc}); see {log_path}", details=tail)


def rootfs(key: str | None = None) -> Path:
    """The Debian rootfs of the base layer, made by debootstrap once per key and kept (the
    python layer is installed inside it)."""
    key = key or base_key()
    root = image_cache() / "rootfs" / key
    if (root / ".complete").is_file():
        return root
    with _locked(image_cache() / "rootfs" / f"{key}.lock"):
        if (root / ".complete").is_file():
            return root
        partial = root.with_name(key + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        log_path = image_cache() / "rootfs" / f"{key}.log"
        log.info("debootstrap %s (%s) into %s; log: %s", DEBIAN_SUITE, ", ".join(DEBIAN_PACKAGES), partial, log_path)
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(DEBIAN_PACKAGES)}",
                DEBIAN_SUITE,
                str(partial),
                DEBIAN_MIRROR,
            ],
            what="debootstrap",
            log_path=log_path,
        )
        # Bytecode checked by hash rather than by the .py's mtime: layer mtimes are all 0.
        _run(
            [
                "chroot",
                str(partial),
                "/usr/bin/python3",
                "-m",
                "compileall",
                "-q",
                "-f",
                "--invalidation-mode",
                "checked-hash",
                "/usr/lib/python3",
                *[f"/usr/lib/{p.name}" for p in (partial / "usr/lib").glob("python3.*")],
            ],
            what="compiling Python's standard library",
            log_path=log_path,
        )
        shutil.rmtree(root, ignore_errors=True)
        os.replace(partial, root)
        (root / ".complete").write_text(key + "\n")
    return root


def python_version(root: Path) -> str:
    """``3.11`` for the Debian Python in ``root``."""
    versions = sorted(p.name[len("python") :] for p in (root / "usr/lib").glob("python3.*") if p.is_dir())
    if not versions:
        raise BinaryError(f"no Python in {root}/usr/lib")
    return versions[-1]


def _base_entries(root: Path):
    entries = oci.tree_entries(root, skip=(*ROOTFS_SKIP, ".complete", IMAGE_HOME))
    extra = oci.layer_entries({}, modes=ROOTFS_EMPTY_DIRS)
    machine_id = oci.layer_entries({"etc/machine-id": b"", "etc/hostname": b""})
    by_name = {e.name: e for e in [*entries, *extra, *machine_id]}
    shadow = by_name.get("etc/shadow")
    if shadow is not None and shadow.path is not None:
        by_name["etc/shadow"] = oci._Entry(
            "etc/shadow", shadow.kind, shadow.mode, data=_undated_shadow(shadow.path.read_text())
        )
    return [by_name[k] for k in sorted(by_name, key=lambda n: n.split("/"))]


def _cached_layer(name: str, make) -> tuple[oci.LayerBlob, bool]:
    """The gzipped layer ``name`` from the image cache, made by ``make(tar_path)`` when missing.
    Returns ``(blob, reused)``."""
    layers = image_cache() / "layers"
    layers.mkdir(parents=True, exist_ok=True)
    gz = layers / f"{name}.tar.gz"
    with _locked(layers / f"{name}.lock"):
        if gz.is_file() and Path(str(gz) + oci.DIFF_ID_SUFFIX).is_file():
            return oci._gzip_blob(gz), True
        tar = layers / f"{name}.tar"
        try:
            make(tar)
            blob = oci.compress_layer(tar, gz)
        finally:
            tar.unlink(missing_ok=True)
    return blob, False


# --- layer 2: python ------------------------------------------------------------------------


def requirements(root: Path, extras: Sequence[str]) -> list[str]:
    """crdscale's requirements from pyproject.toml: the core ones and those of ``extras``."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    known = project.get("optional-dependencies", {})
    reqs = list(project["dependencies"])
    for extra in extras:
        if extra not in known:
            raise UsageError(f"crdscale has no extra {extra!r}; known: {', '.join(sorted(known))}")
        reqs += [r for r in known[extra] if not r.startswith("crdscale")]
    return reqs


def python_key(base: str, checkout: Path, extras: Sequence[str]) -> str:
    lock = (checkout / "requirements.lock").read_bytes()
    return _sha256(json.dumps({"base": base, "lock": _sha256(lock), "reqs": requirements(checkout, extras)}))[:16]


# pip settings of this machine that the chroot's pip needs too (a private index, a proxy's CA).
PIP_PASSED_ENVS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT")


def host_pip_cert() -> Path | None:
    """The CA bundle this machine's pip verifies PyPI with, when one is configured
    (``PIP_CERT``, ``[global] cert`` of /etc/pip.conf, ``REQUESTS_CA_BUNDLE``): behind a
    TLS-intercepting proxy the rootfs' own CA certificates would refuse PyPI."""
    candidates = [os.environ.get("PIP_CERT")]
    parser = configparser.ConfigParser()
    parser.read(["/etc/pip.conf", Path.home() / ".config/pip/pip.conf", Path.home() / ".pip/pip.conf"])
    candidates.append(parser.get("global", "cert", fallback=None))
    candidates.append(os.environ.get("REQUESTS_CA_BUNDLE"))
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def _install_venv(root: Path, checkout: Path, extras: Sequence[str], log_path: Path) -> Path:
    """pip-install crdscale's requirements, pinned by the lock, into ``/opt/crdscale/venv`` in
    the rootfs ``root`` (chroot: the venv's paths and interpreter are the image's own)."""
    venv = root / VENV
    shutil.rmtree(root / IMAGE_HOME, ignore_errors=True)
    (root / "tmp").mkdir(exist_ok=True)
    shutil.copy(checkout / "requirements.lock", root / "tmp/requirements.lock")
    (root / "tmp/requirements.txt").write_text("\n".join(requirements(checkout, extras)) + "\n")
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")  # pip reaches PyPI from inside
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "SOURCE_DATE_EPOCH": str(oci.source_date_epoch()),  # hash-checked .pyc, no file times inside
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **{name: os.environ[name] for name in PIP_PASSED_ENVS if os.environ.get(name)},
    }
    cert = host_pip_cert()
    if cert:  # for this install only: the image keeps Debian's CA certificates
        shutil.copy(cert, root / "tmp/pip-ca.crt")
        env["PIP_CERT"] = "/tmp/pip-ca.crt"
    try:
        _run(
            ["chroot", str(root), "/usr/bin/python3", "-m", "venv", f"/{VENV}"],
            what="python3 -m venv",
            log_path=log_path,
            env=env,
        )
        _run(
            [
                "chroot",
                str(root),
                f"/{VENV}/bin/pip",
                "install",
                "-q",
                "--only-binary=:all:",
                "-c",
                "/tmp/requirements.lock",
                "-r",
                "/tmp/requirements.txt",
            ],
            what="pip install (requirements.lock)",
            log_path=log_path,
            env=env,
        )
    finally:
        (root / "etc/resolv.conf").unlink(missing_ok=True)
        for name in ("requirements.lock", "requirements.txt", "pip-ca.crt"):
            (root / "tmp" / name).unlink(missing_ok=True)
        shutil.rmtree(root / "root/.cache", ignore_errors=True)
    return venv


# --- layer 3: Go binaries -------------------------------------------------------------------


def _image_path(binary: Path, component: str, version: str) -> str:
    """Where a binary goes in the image: its place in crdscale's cache, under the image's cache."""
    try:
        rel = binary.resolve().relative_to(cache_dir().resolve()).as_posix()
    except ValueError:  # from $CRDSCALE_KUBE_APISERVER, PATH...: where the cache would keep it
        rel = f"{component}/{version}/{binary.name}"
    return f"{IMAGE_CACHE}/{rel}"


def binary_sets(spec: ImageSpec) -> list[tuple[str, dict[str, Path]]]:
    """``[(layer name, {path in the image: binary here})]``: one set per kube-apiserver version,
    then one with etcd, crdscale-client and kubectl. Builds what the cache lacks."""
    sets = []
    for version in spec.kube_versions:
        apiserver = binaries.kube_apiserver(version)
        kcm = binaries.kube_controller_manager(version)
        sets.append(
            (
                f"kube-{apiserver.version}",
                {
                    _image_path(apiserver.path, "kube-apiserver", apiserver.version): apiserver.path,
                    _image_path(kcm.path, "kube-apiserver", kcm.version): kcm.path,
                },
            )
        )
    tools: dict[str, Path] = {}
    etcd = binaries.etcd(spec.etcd_version)
    tools[_image_path(etcd.path, "etcd", etcd.version)] = etcd.path
    if spec.client:
        client = binaries.crdscale_client()
        tools[_image_path(client.path, "crdscale-client", client.version)] = client.path
    for version in spec.kubectl_versions:
        kubectl = binaries.kubectl(version)
        tools[_image_path(kubectl.path, "kubectl", kubectl.version)] = kubectl.path
    sets.append(("tools", tools))
    return sets


def _files_key(files: Mapping[str, Path]) -> str:
    """Names the layer of ``files`` by their image paths and content identity here (size and
    mtime in ns: a rebuilt binary is a new file), without reading hundreds of MiB each time."""
    facts = {name: [path.stat().st_size, path.stat().st_mtime_ns, str(path.resolve())] for name, path in files.items()}
    return _sha256(json.dumps(facts, sort_keys=True))[:16]


# --- layer 4: crdscale ----------------------------------------------------------------------


def crdscale_files(checkout: Path, python: str) -> dict[str, Path | bytes]:
    """crdscale's package files (as a wheel would install them) plus its metadata and the
    ``crdscale`` command, at their places in the venv."""
    site = f"{VENV}/lib/python{python}/site-packages"
    package = checkout / "crdscale"
    files: dict[str, Path | bytes] = {}
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            files[f"{site}/{path.relative_to(checkout).as_posix()}"] = path
    dist = f"{site}/crdscale-{__version__}.dist-info"
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: crdscale\nVersion: {__version__}\n".encode()
    files[f"{dist}/entry_points.txt"] = b"[console_scripts]\ncrdscale = crdscale.cli.main:main\n"
    files[f"{dist}/INSTALLER"] = b"crdscale image build\n"
    files[f"{dist}/top_level.txt"] = b"crdscale\n"
    files[f"{VENV}/bin/crdscale"] = (
        f"#!/{VENV}/bin/python\nimport sys\nfrom crdscale.cli.main import main\nsys.exit(main())\n".encode()
    )
    return files


def crdscale_layer(checkout: Path, python: str) -> bytes:
    """The top layer: :func:`crdscale_files`, the command executable, and the working directory."""
    return oci.tar_layer(crdscale_files(checkout, python), modes={f"{VENV}/bin/crdscale": 0o755, WORKDIR: 0o755})


# --- the image ------------------------------------------------------------------------------


def image_config(spec: ImageSpec, content: str) -> oci.ImageConfig:
    return oci.ImageConfig(
        entrypoint=[f"/{VENV}/bin/crdscale"],
        env={
            "PATH": f"/{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "CRDSCALE_CACHE": f"/{IMAGE_CACHE}",
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            IMAGE_ENVS["content"]: content,  # the run manifest records it
        },
        working_dir=f"/{WORKDIR}",
        labels={
            "org.opencontainers.image.title": "crdscale",
            "org.opencontainers.image.version": __version__,
            "io.crdscale.kube-versions": ",".join(spec.kube_versions),
        },
    )


def content_digest(diff_ids: Sequence[str]) -> str:
    """What the image holds, named without the config (which holds this name, so the manifest
    digest cannot be in the image itself): sha256 over the layers' diff_ids, bottom first."""
    return "sha256:" + _sha256("\n".join(diff_ids))


def build_image(spec: ImageSpec, out: Path) -> BuiltImage:
    """Build the image ``spec`` into the OCI archive ``out``; see the module doc for its layers."""
    started = time.monotonic()
    checkout = checkout_root()
    oci.split_ref(spec.ref)  # a bad name fails before anything is built
    check_build_tools()
    # The Go binaries first: a version the module proxy refuses fails before debootstrap.
    sets = binary_sets(spec)
    key = base_key()
    root = rootfs(key)
    python = python_version(root)
    report: list[dict] = []

    def note(kind: str, blob: oci.LayerBlob, reused: bool) -> oci.LayerBlob:
        report.append({"layer": kind, "digest": blob.digest, "bytes": blob.size, "cached": reused})
        log.info(
            "layer %-24s %s %7.1f MiB %s", kind, blob.digest[:19], blob.size / 2**20, "cached" if reused else "built"
        )
        return blob

    base_name = f"base-{base_layer_key(key)}"
    blobs = [note("base", *_cached_layer(base_name, lambda tar: oci.write_layer(tar, _base_entries(root))))]

    pkey = python_key(key, checkout, spec.extras)

    def make_python(tar: Path) -> None:
        with _locked(image_cache() / "rootfs" / f"{key}.lock"):
            venv = _install_venv(root, checkout, spec.extras, image_cache() / "layers" / f"python-{pkey}.log")
            try:
                oci.write_layer(tar, oci.tree_entries(venv, under=VENV))
            finally:
                shutil.rmtree(root / IMAGE_HOME, ignore_errors=True)

    blobs.append(note("python", *_cached_layer(f"python-{pkey}", make_python)))
    for name, files in sets:
        blobs.append(
            note(
                name,
                *_cached_layer(
                    f"bin-{name}-{_files_key(files)}", lambda tar, f=files: oci.write_layer(tar, oci.layer_entries(f))
                ),
            )
        )
    app = crdscale_layer(checkout, python)  # small: made every time, cached by content for concurrent builds
    blobs.append(note("crdscale", *_cached_layer(f"crdscale-{_sha256(app)[:16]}", lambda tar: tar.write_bytes(app))))
    content = content_digest([b.diff_id for b in blobs])
    digest = oci.write_oci_archive(out, [b.path for b in blobs], config=image_config(spec, content), ref=spec.ref)
    return BuiltImage(out, digest, oci.normalize_ref(spec.ref), content, report, time.monotonic() - started)
