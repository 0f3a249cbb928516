"""Atomic file writes (a reader never sees a half-written file, even after a crash) and file digests."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: str | Path, data: bytes | str, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through a temp file in the same directory and ``os.replace``.

    ``mode`` (e.g. ``0o600`` for credentials) is applied before the file becomes visible.
    Returns the path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_json_atomic(path: str | Path, obj: Any, *, mode: int | None = None) -> Path:
    """Atomically write ``obj`` as indented JSON (keys kept in insertion order)."""
    return write_atomic(path, json.dumps(obj, indent=2, default=str) + "\n", mode=mode)


def read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
