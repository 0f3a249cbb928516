"""crdscale-client: real client-go clients, built from Go modules and driven by crdscale.

Client-side results (informer connections, discovery throttling, cache memory)
should come from client-go itself, not from a Python imitation of it. The Go
source is ``main.go`` next to this file (package data); :func:`program` embeds
it into a throwaway module in the cache that requires pinned client-go
modules, built on first use like kube-apiserver (:mod:`crdscale.cluster.gobuild`)
and cached per client-go version and source hash.

Every mode prints JSON lines on stdout (``{"event": ..., "t": seconds since the
process started, ...}``); :func:`parse_lines` reads them. Modes:

* ``informers`` -- :class:`InformerClients`: long-running processes, one
  dynamic (or metadata) informer per resource fed on stdin, all of one process
  sharing one HTTP/2 connection; ``synced`` and periodic ``mem`` events.
* ``discovery`` -- :func:`run_once`: a cold discovery through client-go's
  token bucket; ``request``, ``wait`` and ``summary`` events.
* ``cachemem`` -- :func:`run_once`: one informer cache (Secrets, ConfigMaps,
  CRDs or a custom resource), full, metadata-only or through a transform that
  strips ``managedFields`` and CRD schemas; one ``cachemem`` event with peak Go
  heap, heap after a forced GC, peak RSS and what the cache still holds of
  what the transform strips.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from crdscale.cluster import gobuild
from crdscale.cluster.kubeconfig import KubeconfigFiles
from crdscale.errors import ClusterError
from crdscale.paths import binaries_dir
from crdscale.proc import stop_child

BINARY_NAME = "crdscale-client"
# client-go's go.mod says "go 1.26.0"; the module proxy serves v0.37.1 (kube 1.37.1, our default server).
CLIENT_GO_VERSION = "v0.37.1"
GO_DIRECTIVE = "go 1.26.0"
USUAL_DURATION = "2-4 minutes on 2 cores"


def source() -> str:
    """The Go source of crdscale-client (``main.go``, shipped as package data)."""
    return resources.files(__package__).joinpath("main.go").read_text()


def build_version(client_go: str = CLIENT_GO_VERSION, main_go: str | None = None) -> str:
    """Cache key: the client-go version plus a hash of the source, e.g. ``v0.37.1-3f2a9c01d2``,
    so that editing ``main.go`` builds a new binary instead of reusing a stale one."""
    digest = hashlib.sha256((main_go if main_go is not None else source()).encode()).hexdigest()[:10]
    return f"{client_go}-{digest}"


def program(client_go: str = CLIENT_GO_VERSION) -> gobuild.GoProgram:
    """The throwaway module that builds crdscale-client against ``client_go`` (``vX.Y.Z``)."""
    main_go = source()
    return gobuild.GoProgram(
        binary_name=BINARY_NAME,
        out_dir=binaries_dir(BINARY_NAME, build_version(client_go, main_go)),
        go_directive=GO_DIRECTIVE,
        # api and apimachinery at the same version: client-go's own go.mod pins them so; the
        # apiextensions types (typed CRD caches, as kube-apiserver and controller-runtime hold them)
        # are released with them.
        requires={
            "k8s.io/client-go": client_go,
            "k8s.io/api": client_go,
            "k8s.io/apimachinery": client_go,
            "k8s.io/apiextensions-apiserver": client_go,
        },
        main_go=main_go,
        usual_duration=USUAL_DURATION,
    )


def binary() -> Path:
    """Path of crdscale-client, built first if needed (minutes, once per source version).

    Raises :class:`BinaryError` when Go is missing or the build fails.
    """
    prog = program()
    if prog.binary.is_file() and os.access(prog.binary, os.X_OK):
        return prog.binary
    return gobuild.build(prog)


def parse_line(line: str) -> dict | None:
    """One JSON event from a line of crdscale-client's stdout, or ``None`` for anything else."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def parse_lines(lines: Iterable[str]) -> list[dict]:
    """JSON events from crdscale-client's stdout, in order; other lines (none expected) are skipped."""
    return [e for e in map(parse_line, lines) if e is not None]


def connection(kubeconfig, context: str | None = None) -> tuple[list[str], dict[str, str]]:
    """``(flags, environment)`` naming the cluster for crdscale-client (or any client-go program).

    The kubeconfig files go in ``$KUBECONFIG``, not ``--kubeconfig``: that flag takes one
    file and merges nothing, while ``$KUBECONFIG`` is merged by client-go by the rules
    crdscale follows (:mod:`crdscale.cluster.kubeconfig`), so the child reaches the same
    cluster as the same user, runs the same exec plugin itself and nothing secret is
    copied. ``--context`` is passed when one was chosen.
    """
    files = KubeconfigFiles.parse(kubeconfig)
    return ([f"--context={context}"] if context else []), files.child_env()


def run_once(
    mode: str,
    args: Sequence[str],
    *,
    timeout_s: float = 600.0,
    env: dict | None = None,
) -> list[dict]:
    """Run crdscale-client ``mode`` to completion; returns its events.

    Raises :class:`ClusterError` when it exits non-zero (with its ``error`` event's message).
    """
    path = binary()
    proc = subprocess.run(
        [str(path), mode, *args], capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **(env or {})}
    )
    events = parse_lines(proc.stdout.splitlines())
    if proc.returncode != 0:
        message = next((e.get("message") for e in events if e["event"] == "error"), None)
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise ClusterError(f"crdscale-client {mode}: {message or tail[0]}")
    return events


# --- informers ---------------------------------------------------------------------


@dataclass
class _Process:
    """One informers process and what its stdout said so far."""

    proc: subprocess.Popen
    synced: dict[str, dict] = field(default_factory=dict)  # "group/version/resource" -> synced event
    watch_errors: list[dict] = field(default_factory=list)
    last_mem: dict | None = None
    stopped: dict | None = None
    resources: set[str] = field(default_factory=set)
    reader: threading.Thread | None = None


def gvr_key(group: str, version: str, resource: str) -> str:
    """``group/version/resource`` (``/v1/pods`` for the core group): how synced events are matched."""
    return f"{group}/{version}/{resource}"


class InformerClients:
    """``clients`` crdscale-client informer processes sharing the resources they are given.

    Each process is one client (one ``rest.Config``, one HTTP/2 connection), as one
    provider's controller manager; a resource group always goes to the same process,
    groups are dealt out round-robin in the order they first appear.

    Parameters:
        kubeconfig, context: the cluster (kubeconfig: one file or a list, see :func:`connection`).
        clients: number of processes.
        kind: ``dynamic`` (full objects) or ``metadata``.
        qps, burst: client-side limiter of each process (default: controller-runtime's 20, 30).
        mem_interval_s: how often each process reports Go heap and RSS.
    """

    def __init__(
        self,
        kubeconfig,
        context: str | None = None,
        *,
        clients: int = 1,
        kind: str = "dynamic",
        qps: float = 20.0,
        burst: int = 30,
        mem_interval_s: float = 10.0,
    ):
        if clients < 1:
            raise ValueError("clients must be >= 1")
        path = binary()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._group_owner: dict[str, int] = {}
        self.processes: list[_Process] = []
        args, env = connection(kubeconfig, context)
        argv_tail = [
            *args,
            f"--kind={kind}",
            f"--qps={qps:g}",
            f"--burst={burst}",
            f"--mem-interval={mem_interval_s:g}s",
        ]
        for index in range(clients):
            proc = subprocess.Popen(
                [str(path), "informers", *argv_tail, f"--name=crdscale-client/informers-{index}"],
                # stdin stays open for the life of the client: when crdscale exits, even by
                # SIGKILL, the pipe closes and the process ends on its own.
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
                env={**os.environ, **env},
            )
            entry = _Process(proc)
            self.processes.append(entry)
            entry.reader = threading.Thread(
                target=self._read, args=(entry,), name=f"crdscale-client-{index}", daemon=True
            )
            entry.reader.start()

    @property
    def pids(self) -> list[int]:
        """Process ids of the client processes."""
        return [p.proc.pid for p in self.processes]

    def _read(self, entry: _Process) -> None:
        for line in iter(entry.proc.stdout.readline, ""):
            event = parse_line(line)
            if event is None:
                continue
            with self._changed:
                kind = event["event"]
                if kind == "synced":
                    entry.synced[gvr_key(event["group"], event["version"], event["resource"])] = event
                elif kind == "watch_error":
                    entry.watch_errors.append(event)
                elif kind == "mem":
                    entry.last_mem = event
                elif kind == "stopped":
                    entry.stopped = event
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def add(self, refs: Iterable[tuple[str, str, str]]) -> list[str]:
        """Start informers for ``(group, version, resource)`` triples (each only once);
        returns the key of every triple given, in order."""
        added = []
        with self._lock:
            for group, version, resource in refs:
                key = gvr_key(group, version, resource)
                owner = self._group_owner.setdefault(group, len(self._group_owner) % len(self.processes))
                entry = self.processes[owner]
                added.append(key)
                if key in entry.resources:
                    continue
                if entry.proc.poll() is not None:
                    raise ClusterError(
                        f"crdscale-client informers (pid {entry.proc.pid}) exited with {entry.proc.returncode}"
                    )
                entry.resources.add(key)
                entry.proc.stdin.write(json.dumps({"group": group, "version": version, "resource": resource}) + "\n")
            for entry in self.processes:
                entry.proc.stdin.flush()
        return added

    def synced(self) -> dict[str, dict]:
        """Every synced informer so far: key -> its ``synced`` event (``seconds`` from start to synced)."""
        with self._lock:
            return {k: v for p in self.processes for k, v in p.synced.items()}

    def wait_synced(self, keys: Iterable[str], timeout_s: float) -> dict[str, dict]:
        """Wait until every key has synced or ``timeout_s`` passed; returns the synced ones among ``keys``."""
        wanted = set(keys)
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                done = {k: v for p in self.processes for k, v in p.synced.items() if k in wanted}
                remaining = deadline - time.monotonic()
                if len(done) == len(wanted) or remaining <= 0 or all(p.proc.poll() is not None for p in self.processes):
                    return done
                self._changed.wait(min(remaining, 1.0))

    def memory(self) -> list[dict]:
        """The latest ``mem`` event of each process (Go heap bytes, RSS KiB), or ``{}`` before the first."""
        with self._lock:
            return [dict(p.last_mem or {}, pid=p.proc.pid) for p in self.processes]

    def watch_errors(self) -> list[dict]:
        with self._lock:
            return [e for p in self.processes for e in p.watch_errors]

    def close(self, timeout_s: float = 10.0) -> list[dict]:
        """Stop every process (closing stdin ends it; SIGTERM, then SIGKILL if it lingers).

        Returns each process's final ``stopped`` event (peak Go heap, RSS) where it sent one.
        """
        for entry in self.processes:
            try:
                entry.proc.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        for entry in self.processes:
            try:
                entry.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stop_child(entry.proc, grace_s=3)
            if entry.reader is not None:
                entry.reader.join(timeout=2)  # the last lines (the "stopped" event) are still being read
        with self._lock:
            return [dict(p.stopped, pid=p.proc.pid) for p in self.processes if p.stopped]

    def exit_codes(self) -> dict[int, int | None]:
        """pid -> exit code (``None`` while a process still runs)."""
        return {p.proc.pid: p.proc.poll() for p in self.processes}

    def __enter__(self) -> InformerClients:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
