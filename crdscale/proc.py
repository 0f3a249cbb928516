"""Facts about local processes, read from /proc: enough to tell a live process from a reused pid."""

from __future__ import annotations

from pathlib import Path


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat), or None
    when there is no such process or it is a zombie (it has exited already)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; fields resume after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_alive(pid: int, ticks: int | None) -> bool:
    """Is the process that had start time ``ticks`` still running as ``pid``?"""
    now = start_ticks(pid)
    return now is not None and (ticks is None or now == ticks)


def available_memory_bytes(meminfo: str | None = None) -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes: what can be allocated without swapping
    or the OOM killer (``None`` where the kernel does not say)."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            return None
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None
