"""Process supervision: the processes crdscale starts beside a cluster, found again by pid.

A control plane (:mod:`crdscale.cluster.local`), its node (:mod:`crdscale.cluster.node`) and the
servers the harness starts beside them (an object store, say) record each process they start as a
:class:`ProcessRecord` and stop it with :func:`terminate_process`; they take their ports from
:func:`free_ports`. Processes run in their own sessions so they outlive the CLI that started them.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crdscale.proc import start_ticks

LOOPBACK = "127.0.0.1"
STOP_GRACE_S = 15.0


@dataclass
class ProcessRecord:
    """A process crdscale started or adopted: its pid with the start time that tells it from a
    recycled pid (``/proc/PID/stat``'s ticks), and its log."""

    name: str
    pid: int
    start_ticks: int | None
    log: str

    def alive(self) -> bool:
        ticks = start_ticks(self.pid)
        return ticks is not None and ticks == self.start_ticks

    def to_json(self) -> dict:
        return {"name": self.name, "pid": self.pid, "start_ticks": self.start_ticks, "log": self.log}

    @classmethod
    def from_json(cls, d: Mapping) -> ProcessRecord:
        return cls(d["name"], int(d["pid"]), d.get("start_ticks"), d.get("log", ""))


def terminate_process(record: ProcessRecord, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the process group of ``record``, then SIGKILL after ``grace_s``."""
    if not record.alive():
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(record.pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(record.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:  # reap it if it is our child, so it does not linger as a zombie
                os.waitpid(record.pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not record.alive():
                return
            time.sleep(0.1)


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int, host: str = LOOPBACK) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (0.5 s to answer)."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def log_tail(path: str | Path, lines: int = 20) -> str:
    """The last ``lines`` lines of the log at ``path`` (empty when it cannot be read): what an error shows."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
