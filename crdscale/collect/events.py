"""Append-only JSON-lines event log: what happened when, for plots later.

One line per event: ``{"ts": "2026-11-22T03:15:00.123456Z", "kind": "step.start", ...}``.
Each line is flushed and fsync'ed as it is written, so a run that is killed
keeps every event up to the kill; readers can tail the file while it grows.
The scenario runner and the installer share one :class:`EventLog`.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator


def utc_now_iso() -> str:
    """Current time as an ISO-8601 UTC string with microseconds and a ``Z`` suffix."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventLog:
    """Append-only JSONL file; thread-safe.

    Parameters:
        path: file to append to (created with its parents if missing).
        fsync: fsync after each line (default). Tests may turn it off for speed.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._lock = threading.Lock()
        # Line-buffered text in append mode: concurrent writers in other
        # processes still get whole lines because each write is one call.
        self._file = open(self.path, "a", encoding="utf-8")

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one event and return it as written (``ts`` and ``kind`` first)."""
        event = {"ts": utc_now_iso(), "kind": kind, **fields}
        line = json.dumps(event, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._file.closed:
                raise ValueError(f"event log {self.path} is closed")
            self._file.write(line)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        return event

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> "EventLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the events of a JSONL log in order; a torn last line (a killed writer) is skipped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
