"""Atomic file writes (a reader never sees a half-written file, even after a crash), file digests, output folders."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from crdscale.errors import UsageError


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


def read_json_object(path: str | Path, *, missing: str | None = None) -> dict[str, Any]:
    """A JSON file that must hold an object (a run's manifest.json, crds.json...); :class:`UsageError`
    (one line) when it cannot be read, is not JSON or holds something else: ``missing`` when given is the
    error for a file that does not exist."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        if missing is not None and isinstance(err, FileNotFoundError):
            raise UsageError(missing) from None
        raise UsageError(f"{path}: cannot read ({err.strerror or err})") from None
    except ValueError as err:  # also UnicodeDecodeError
        raise UsageError(f"{path}: not JSON ({err})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: holds a JSON {type(value).__name__}, not an object")
    return value


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_output_dir(path: str | Path, flag: str = "--out") -> Path:
    """UsageError (one line) when ``path`` exists and is not a directory, or cannot be made or
    written; returns it made (an output folder of reports)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot create ({err.strerror or err})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: not writable")
    return path


def read_bounded(path: str | Path, limit: int) -> bytes:
    """The bytes of ``path``, reading at most ``limit + 1`` of them (a file symlinked to ``/dev/zero``, or
    a FIFO that never ends, is not read until memory runs out): the caller refuses ``len(data) > limit``.
    OSError as ``open`` raises it (a directory: IsADirectoryError)."""
    with open(path, "rb") as f:
        chunks, size = [], 0
        while size <= limit:
            chunk = f.read(min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)
