"""The run's event log: an append-only JSON-lines file, and the declared kinds of event.

One line per event: ``{"ts": "2026-11-22T03:15:00.123456Z", "kind": "step.start", ...}``.
Each line is flushed and fsync'ed as it is written, so a run that is killed
keeps every event up to the kill; readers can tail the file while it grows.

Every kind that crdscale writes is declared in :data:`EVENT_KINDS` with the
fields it must and may carry, so writers in different modules cannot drift
apart (``crds`` always means the CRDs installed so far; a step's own count is
``crds_in_step``). :meth:`EventLog.emit` refuses an undeclared kind or field.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crdscale.timeutil import utc_iso_micro


@dataclass(frozen=True)
class EventKind:
    """One kind of event: its name, the fields it always has, those it may have, and what it marks."""

    name: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    doc: str

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(self.required) | frozenset(self.optional)


_STEP_COUNTS = ("created", "updated", "skipped", "rejected", "failed", "established", "timed_out")
_STEP_SUMMARY = ("steps", "rss_bytes", "heap_inuse_bytes", "open_fds", "goroutines", "elapsed_s")
# Object steps (steps.grow = "objects"): the kind a step added, how many, and the objects and
# their JSON bytes per kind so far (crdscale.analysis.perobject's x).
_OBJECT_STEP = ("grow", "object_kind", "objects_in_step")
_SERVE_RESULT = (
    "mode",
    "resources",
    "listed",
    "list_errors",
    "list_p50_s",
    "list_max_s",
    "watches_requested",
    "watches_open",
    "duration_s",
    "clients",
)

EVENT_KINDS: dict[str, EventKind] = {
    k.name: k
    for k in (
        EventKind(
            "run.start",
            ("run_id",),
            ("scenario", "crds", "steps", "serve"),
            "a scenario run (or `crdscale install`) began; crds = size of the CRD set",
        ),
        EventKind(
            "run.end", ("status",), ("reason", "run_id", "duration_s"), "the run ended: completed, failed, interrupted"
        ),
        EventKind("target.start", ("target",), (), "the local control plane is starting"),
        EventKind("target.ready", ("server",), ("version",), "the API server answers"),
        EventKind("target.stop", (), (), "the local control plane was stopped"),
        EventKind("metrics.start", ("source",), ("interval_s",), "metrics collection started: time zero of the plots"),
        EventKind(
            "metrics.cadence",
            ("job", "interval_s", "previous_s"),
            ("reason", "scrape_duration_s", "up", "server_cores", "scrape_share"),
            "a /metrics job moved to a longer scrape interval: its scrapes outlasted the old one "
            "(reason `scrape duration`) or cost kube-apiserver more than its CPU budget (`cpu budget`)",
        ),
        EventKind(
            "settle.start",
            ("label", "seconds"),
            (),
            "the runner waits `seconds` (0: none) before profiling, then for the work queues (settle.drained); "
            "recorded at every settle",
        ),
        EventKind(
            "settle.drained",
            ("label", "drained", "seconds"),
            ("scrapes", "queues", "busy", "error"),
            "after the settle, the wait for kube-apiserver's CRD work queues ended: `drained` false = timeout or error",
        ),
        EventKind("hold.start", ("seconds",), ("crds",), "after the last step the run keeps serving `seconds`"),
        EventKind("hold.end", ("seconds",), ("crds",), "the hold after the last step ended"),
        EventKind("step.start", ("step", "crds_before", "crds_in_step"), ("run_id", *_OBJECT_STEP), "a step begins"),
        EventKind(
            "step.end",
            ("step", "crds", "install_s", "serve_s"),
            ("run_id", "crds_in_step", *_STEP_COUNTS, *_STEP_SUMMARY, *_OBJECT_STEP, "objects", "object_bytes"),
            "a step ended; crds = CRDs installed so far; objects (object_bytes) = objects (JSON bytes) per kind so far",
        ),
        EventKind(
            "objects.cached",
            ("step", "object_kind", "seconds"),
            (),
            "the watch cache serves every object the step wrote (waited `seconds` after the writes)",
        ),
        EventKind(
            "objects.lists.start",
            ("step", "kinds", "repeats"),
            (),
            "after the last object step, LISTs of every kind's objects are timed (objects.list_repeats)",
        ),
        EventKind("objects.lists.end", ("step", "rows"), (), "the LISTs were timed: `rows` rows in probes/"),
        EventKind("install.start", ("step", "crds_in_step"), ("run_id",), "create requests of a step begin"),
        EventKind(
            "install.end",
            ("step", "duration_s"),
            ("run_id", "crds_in_step", *_STEP_COUNTS),
            "every create request of the step was answered",
        ),
        EventKind(
            "established",
            ("step", "duration_s"),
            ("run_id", "established", "timed_out"),
            "every CRD of the step is Established (or timed out)",
        ),
        EventKind(
            "serve.start",
            ("step", "mode"),
            ("run_id", "resources", "clients"),
            "the step's resources are being LISTed / watched",
        ),
        EventKind("serve.end", ("step",), ("run_id", *_SERVE_RESULT), "serving the step's resources finished"),
        EventKind(
            "serve.client",
            ("client",),
            ("run_id", "pids", "clients", "qps", "burst", "reason"),
            "what serves watch mode: go-informers (crdscale-client pids) or python-watcher (reason: why)",
        ),
        EventKind(
            "profile",
            ("file", "profile", "step", "crds"),
            ("phase", "bytes", "component"),
            "a profile was saved; phase None = end of step; component (kube-controller-manager, etcd) "
            "when it is not kube-apiserver's",
        ),
        EventKind(
            "openapi_v2.fetch",
            ("step", "crds", "format", "bytes", "seconds"),
            ("run_id",),
            "/openapi/v2 was fetched (profiles.openapi_v2); the next profile has phase openapiv2",
        ),
        EventKind(
            "openapi_v2.error",
            ("step", "crds", "error"),
            ("run_id",),
            "GET /openapi/v2 failed (e.g. 504 after the server's request timeout): no openapiv2 profile this step",
        ),
        EventKind("profile.error", ("profile", "step", "error"), ("component",), "a profile could not be taken"),
        EventKind("probe.start", ("probe", "step"), (), "a probe began"),
        EventKind("probe.end", ("probe", "step"), ("status", "error"), "a probe ended"),
        EventKind(
            "process.start",
            ("name", "pid"),
            ("start_ticks", "cmdline"),
            "the harness started a process (so `crdscale down` can stop it after a crash)",
        ),
        EventKind("process.stop", ("name", "pid"), ("exit_code",), "a harness process stopped"),
    )
}


def check_event(kind: str, fields: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless ``kind`` is declared and ``fields`` fit its declaration."""
    declared = EVENT_KINDS.get(kind)
    if declared is None:
        raise ValueError(f"undeclared event kind {kind!r}; declare it in crdscale.rundir.events.EVENT_KINDS")
    missing = [f for f in declared.required if f not in fields]
    unknown = sorted(set(fields) - declared.fields)
    if missing or unknown:
        raise ValueError(f"event {kind!r}: missing fields {missing}, undeclared fields {unknown}")


class EventLog:
    """Append-only JSONL file; thread-safe. Only declared kinds (:data:`EVENT_KINDS`) are written.

    Parameters:
        path: file to append to (created with its parents if missing).
        fsync: fsync after each line (default). Tests may turn it off for speed.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._lock = threading.Lock()
        # Append mode: concurrent writers in other processes still get whole
        # lines because each write is one call.
        self._file = open(self.path, "a", encoding="utf-8")

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one event and return it as written (``ts`` and ``kind`` first)."""
        check_event(kind, fields)
        event = {"ts": utc_iso_micro(), "kind": kind, **fields}
        line = json.dumps(event, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._file.closed:
                raise ValueError(f"event log {self.path} is closed")
            self._file.write(line)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        return event

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records (JSON objects) of a JSONL log in order; a torn last line (a killed writer)
    and any line that is not a JSON object are skipped (:attr:`crdscale.rundir.Run.events` counts them)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record
