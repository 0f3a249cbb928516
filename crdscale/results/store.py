"""Results stores: where cells' run directories go, named by a URL.

A store holds trees of files under prefixes (``EXPERIMENT/CELL/...``). Each URL scheme has one
factory, registered with :func:`register_scheme`; the built-in ones live in their own modules,
imported only when their scheme is used, so a missing optional library (``minio`` for ``s3://``)
matters only to those who ask for that store.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from crdscale.errors import CrdscaleError, UsageError


class StoreError(CrdscaleError):
    """A results store refused a request or could not be reached (credentials, bucket, network)."""

    exit_code = 4


class ResultStore(Protocol):
    """A tree of files under prefixes ("directories" separated by ``/``)."""

    url: str

    def put_tree(self, local_dir: Path, prefix: str) -> None:
        """Copy every file under ``local_dir`` to ``prefix/<relative path>``."""

    def get_tree(self, prefix: str, local_dir: Path) -> None:
        """Copy every file under ``prefix/`` into ``local_dir/<relative path>``; :class:`StoreError`
        when there is none."""

    def list_prefixes(self, prefix: str) -> list[str]:
        """The immediate children of ``prefix`` that hold files, as prefixes relative to the
        store's root without a trailing ``/`` (``"exp/cell-000"``), sorted; ``""`` = the root."""


StoreFactory = Callable[[str], ResultStore]
_FACTORIES: dict[str, StoreFactory] = {}
# Schemes whose module registers its factory when imported (kept lazy: their libraries are optional).
_BUILTIN_MODULES = {"s3": "crdscale.results.s3"}


def register_scheme(scheme: str, factory: StoreFactory) -> None:
    """Make ``open_store`` hand URLs ``scheme://...`` to ``factory(url)``."""
    _FACTORIES[scheme.lower()] = factory


def open_store(url: str) -> ResultStore:
    """The store named by ``url`` (e.g. ``s3://bucket/prefix``). Raises :class:`UsageError` for
    a URL no registered scheme serves."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _FACTORIES and scheme in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[scheme])
    if scheme not in _FACTORIES:
        known = ", ".join(f"{s}://" for s in sorted(set(_FACTORIES) | set(_BUILTIN_MODULES)))
        raise UsageError(f"no results store for {url!r}; known: {known}")
    return _FACTORIES[scheme](url)


def join_key(*parts: str) -> str:
    """Prefixes and relative paths joined with single slashes, without leading or trailing ones."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))
