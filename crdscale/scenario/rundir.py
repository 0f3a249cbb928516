"""A self-describing run directory.

Layout::

    runs/<UTC timestamp>-<name>/
        manifest.json        scenario, versions, machine, times, status (+ reason), outputs
        events.jsonl         append-only log of steps and phases
        crds/summary.json    the CRD set summary and sha256
        profiles/            heap-step03-crds0300.pb.gz ... (gzip pprof, `go tool pprof` opens them)
        metrics/series.parquet (+ series.csv.gz)   tidy time series
        probes/              per-step probe tables

Every file is written atomically; no credential is ever written here.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from crdscale import __version__
from crdscale.fsutil import read_json, write_atomic, write_json_atomic

MANIFEST = "manifest.json"

RUN_README = """\
# A crdscale run

| file | what it is | open it with |
|---|---|---|
| `manifest.json` | scenario, versions (kube-apiserver, etcd, Go, Prometheus, crdscale), machine, start/end, `status` and `reason` | any JSON viewer |
| `events.jsonl` | append-only log of steps and phases with UTC timestamps | `crdscale.collect.events.read_events` |
| `crds/summary.json` | the CRD set: count, groups, schema sizes, sha256 | |
| `profiles/heap-stepNN-crdsNNNN[-installed].pb.gz` | Go heap profiles (gc=1) after step NN with NNNN CRDs; `-installed` = Established but not yet served | `crdscale top FILE`, `go tool pprof FILE` |
| `profiles/cpu-stepNN-crdsNNNN-install.pb.gz` | CPU profile sampled while step NN installed | same |
| `metrics/series.parquet` (`.csv`) | tidy time series: timestamp (UTC), job, metric, labels, value | pandas |
| `probes/` | per-step probe tables, when the scenario ran probes | pandas |
| `logs/` | kube-apiserver and etcd logs of a local target | |
| `analysis/`, `report/` | written by `crdscale analyze` and `crdscale report` | |
"""
STATUSES = ("running", "completed", "failed", "interrupted")


def utc_stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def utc_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def machine_facts() -> dict[str, Any]:
    """CPU count, memory, kernel, OS and Python: enough to compare runs across machines."""
    mem_total = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total = int(line.split()[1]) * 1024
                break
    except OSError:
        pass
    cpu_model = None
    try:
        cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                          if line.startswith("model name")), None)
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": cpu_model, "memory_bytes": mem_total,
            "kernel": platform.release(), "os": platform.platform(), "python": sys.version.split()[0]}


class RunDirectory:
    """A run directory and its manifest. Create with :meth:`create`, reopen with :meth:`open`."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def create(cls, parent: str | Path, name: str) -> "RunDirectory":
        base = Path(parent) / f"{utc_stamp()}-{name}"
        path, n = base, 1
        while path.exists():  # two runs in the same second
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        for sub in ("profiles", "metrics", "crds", "probes"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        write_atomic(path / "README.md", RUN_README)
        return cls(path)

    @classmethod
    def open(cls, path: str | Path) -> "RunDirectory":
        from crdscale.errors import UsageError

        run = cls(Path(path))
        if not (run.path / MANIFEST).is_file():
            raise UsageError(f"{path} is not a crdscale run directory (no {MANIFEST})")
        return run

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def profiles_dir(self) -> Path:
        return self.path / "profiles"

    @property
    def metrics_dir(self) -> Path:
        return self.path / "metrics"

    @property
    def probes_dir(self) -> Path:
        return self.path / "probes"

    def manifest(self) -> dict[str, Any]:
        return read_json(self.manifest_path) if self.manifest_path.is_file() else {}

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        manifest = self.manifest()
        manifest.update(fields)
        self.write_manifest(manifest)
        return manifest

    def start_manifest(self, *, run_id: str, scenario: dict[str, Any], scenario_file: str | None) -> dict[str, Any]:
        manifest = {
            "crdscale_version": __version__,
            "run_id": run_id,
            "status": "running",
            "reason": None,
            "started_at": utc_iso(),
            "ended_at": None,
            "scenario_file": scenario_file,
            "scenario": scenario,
            "machine": machine_facts(),
            "versions": {"crdscale": __version__},
        }
        self.write_manifest(manifest)
        return manifest

    def finish(self, status: str, reason: str | None = None) -> dict[str, Any]:
        assert status in STATUSES, status
        return self.update_manifest(status=status, reason=reason, ended_at=utc_iso())

    def write_file(self, relative: str, data: bytes | str) -> Path:
        return write_atomic(self.path / relative, data)
