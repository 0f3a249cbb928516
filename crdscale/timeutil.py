"""UTC timestamps in the three shapes crdscale writes: one place, so files and logs agree."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def utc_stamp(when: datetime | None = None) -> str:
    """``20261122T031500Z``: sortable, for directory names."""
    return (when or utc_now()).strftime("%Y%m%dT%H%M%SZ")


def utc_iso(when: datetime | None = None) -> str:
    """``2026-11-22T03:15:00Z``: seconds, for manifests."""
    return (when or utc_now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_iso_micro(when: datetime | None = None) -> str:
    """``2026-11-22T03:15:00.123456Z``: microseconds, for events."""
    return (when or utc_now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso_from_epoch(seconds: float) -> str:
    """``utc_iso`` of a ``time.time()`` value."""
    return utc_iso(datetime.fromtimestamp(seconds, timezone.utc))
