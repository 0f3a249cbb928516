"""Where a cell run in a pod leaves its run directory: a results store named by a URL.

A store holds trees of files under ``/``-separated prefixes. A cluster
experiment (``crdscale run --cluster``) puts each cell's run directory at
``<experiment id>/<cell name>/<run directory name>/`` (:func:`cell_prefix`);
``crdscale report EXPERIMENT`` gets them back into the experiment directory.

Schemes live in :data:`SCHEMES` (scheme -> ``"module:Class"``, imported only
when a URL of that scheme is opened, so a scheme's client library is needed
only by its users). ``file:///path`` is built in: a directory, e.g. a
PersistentVolumeClaim mounted in the pod (``--results pvc://CLAIM`` mounts the
claim at :data:`PVC_MOUNT` and the pod uses ``file://`` + that path).
"""

from __future__ import annotations

import importlib
import logging
import shutil
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from crdscale.errors import UsageError

log = logging.getLogger(__name__)

# scheme -> "module:Class" of its ResultStore; the class is built with the URL.
SCHEMES: dict[str, str] = {
    "file": "crdscale.results.store:FileStore",
    "s3": "crdscale.results.s3:S3Store",  # pip install 'crdscale[s3]'
}

# `--results pvc://CLAIM`: not a store the submitting machine opens, but a claim the pods mount here.
PVC_SCHEME = "pvc"
PVC_MOUNT = "/var/lib/crdscale/results"


class ResultStore:
    """Trees of files under ``/``-separated prefixes (no leading ``/``; a prefix names a "directory").

    Subclasses implement the three methods; each raises :class:`UsageError` (one line) when the
    store cannot be reached or refuses, naming the URL.
    """

    url: str

    def put_tree(self, local_dir: Path, prefix: str) -> None:
        """Copy every file under ``local_dir`` to ``prefix/<its relative path>`` (overwriting)."""
        raise NotImplementedError

    def get_tree(self, prefix: str, local_dir: Path) -> None:
        """Copy every file under ``prefix/`` into ``local_dir`` (created), keeping relative paths."""
        raise NotImplementedError

    def list_prefixes(self, prefix: str) -> list[str]:
        """The names of the immediate children of ``prefix`` that hold files (as S3's
        ``Delimiter="/"`` common prefixes, without the parent or the trailing ``/``), sorted;
        empty when there are none."""
        raise NotImplementedError


def _clean_prefix(prefix: str) -> PurePosixPath:
    """A relative prefix with no ``..`` (a cell name never has one; a store must not be escaped)."""
    path = PurePosixPath(prefix.strip("/"))
    if path.is_absolute() or ".." in path.parts:
        raise UsageError(f"results prefix {prefix!r}: must be relative, without '..'")
    return path


class FileStore(ResultStore):
    """``file:///path``: a directory (on a mounted volume in a pod)."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise UsageError(f"results {url}: a file URL is file:///absolute/path")
        self.url = url
        self.root = Path(parts.path)

    def _path(self, prefix: str) -> Path:
        return self.root / _clean_prefix(prefix)

    def put_tree(self, local_dir: Path, prefix: str) -> None:
        target = self._path(prefix)
        try:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copytree(local_dir, target, dirs_exist_ok=True, symlinks=True)
        except OSError as err:
            raise UsageError(f"results {self.url}: cannot write {target}: {err.strerror or err}") from None
        log.info("results: %s -> %s", local_dir, target)

    def get_tree(self, prefix: str, local_dir: Path) -> None:
        source = self._path(prefix)
        if not source.is_dir():
            raise UsageError(f"results {self.url}: nothing under {prefix}")
        try:
            shutil.copytree(source, local_dir, dirs_exist_ok=True, symlinks=True)
        except OSError as err:
            raise UsageError(f"results {self.url}: cannot read {source}: {err.strerror or err}") from None

    def list_prefixes(self, prefix: str) -> list[str]:
        folder = self._path(prefix)
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(q.is_file() for q in p.rglob("*")))


def scheme_of(url: str) -> str:
    """The scheme of a results URL; UsageError (one line) when it has none or crdscale knows no store for it."""
    scheme = urlsplit(url).scheme
    known = sorted([*SCHEMES, PVC_SCHEME])
    if not scheme or scheme not in known:
        raise UsageError(f"--results {url}: unknown scheme {scheme or '(none)'!r}; known: {', '.join(known)}")
    return scheme


def open_store(url: str) -> ResultStore:
    """The :class:`ResultStore` of ``url`` (``file:///path``, or a registered scheme such as ``s3://``)."""
    scheme = scheme_of(url)
    if scheme == PVC_SCHEME:
        raise UsageError(
            f"results {url}: a claim is mounted by the pods; read it where it is mounted "
            f"(crdscale report EXPERIMENT --results file:///MOUNTED/PATH)"
        )
    module_name, _, class_name = SCHEMES[scheme].partition(":")
    return getattr(importlib.import_module(module_name), class_name)(url)


def cell_prefix(experiment_id: str, cell_name: str, run_name: str | None = None) -> str:
    """Where a cell's run directories go: ``<experiment id>/<cell name>[/<run directory name>]``."""
    parts = [experiment_id, cell_name] + ([run_name] if run_name else [])
    return "/".join(parts)
