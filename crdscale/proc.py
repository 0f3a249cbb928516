"""Facts about local processes, read from /proc: enough to tell a live process from a reused pid,
and what a process costs (CPU, memory, fds) without asking it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def stat_fields(pid: int, task: str | None = None) -> list[str] | None:
    """Fields 3… of /proc/PID/stat (``[0]`` is the state), or None when there is no such process;
    of one thread's /proc/PID/task/TASK/stat when ``task`` is given.

    The command name (field 2) may contain spaces and parentheses; fields resume after the last ')'.
    """
    try:
        stat = Path(f"/proc/{pid}/task/{task}/stat" if task else f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat), or None
    when there is no such process or it is a zombie (it has exited already)."""
    fields = stat_fields(pid)
    if fields is None or fields[0] == "Z":
        return None
    return int(fields[19])


def is_alive(pid: int, ticks: int | None) -> bool:
    """Is the process that had start time ``ticks`` still running as ``pid``?"""
    now = start_ticks(pid)
    return now is not None and (ticks is None or now == ticks)


def cpu_seconds(pid: int, fields: list[str] | None = None) -> float | None:
    """User + system CPU time of ``pid`` so far, in seconds (``None`` when it is gone)."""
    fields = fields or stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid`` in bytes (field 2 of /proc/PID/statm), ``None`` when it is gone."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


def thread_cpu_seconds(pid: int) -> float | None:
    """CPU time of ``pid`` in seconds, its live threads to the nanosecond (``/proc/PID/task/*/schedstat``).

    ``/proc/PID/stat`` counts in clock ticks (10 ms): too coarse to tell what one
    few-millisecond request cost. Threads that already exited have no schedstat left; their
    time is what ``/proc/PID/stat`` counts beyond the live threads' own ticks, added at tick
    resolution (so a long-lived process that ended threads is not undercounted). Falls back
    to :func:`cpu_seconds` where the kernel keeps no schedstat.
    """
    total = cpu_seconds(pid)
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    if total is None:
        return None
    live_ns, live_s = 0, 0.0
    for task in tasks:
        try:
            ns = int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except FileNotFoundError:
            if task == str(pid) and Path(f"/proc/{pid}/task/{task}").is_dir():
                return total  # no schedstat at all, not a thread that just ended
            continue
        except (OSError, ValueError, IndexError):
            continue
        fields = stat_fields(pid, task)
        if fields is None:  # the thread ended between the two reads
            continue
        live_ns += ns
        live_s += cpu_seconds(pid, fields)
    exited = max(0.0, total - live_s)
    return live_ns / 1e9 + exited


def thread_count(fields: list[str]) -> int:
    return int(fields[17])


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


def stop_child(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Stop a child we started: SIGTERM, then SIGKILL if it outlives ``grace_s``; always reaped
    (no zombie left). A process that already exited is only reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
            return
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()
