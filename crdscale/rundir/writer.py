"""The one writer of run directories: ``crdscale run``, ``crdscale install`` and every probe use it.

Every file is written atomically (a reader never sees half a file, even after a
crash); the event log is appended line by line. No credential is ever written
here: callers pass data, never kubeconfigs or tokens.
"""

from __future__ import annotations

import io
import json
import os
import platform
import shutil
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from crdscale import __version__
from crdscale.errors import UsageError
from crdscale.fsutil import sha256_file, write_atomic, write_json_atomic
from crdscale.proc import start_ticks
from crdscale.rundir import layout
from crdscale.rundir.events import EventLog
from crdscale.rundir.manifest import Manifest
from crdscale.timeutil import utc_iso, utc_stamp

# "abandoned" is never written by a runner: the reader reports it for a "running"
# manifest whose runner process is gone, and `crdscale recover` records it.
STATUSES = ("running", "completed", "failed", "interrupted", "abandoned")

# Python packages whose versions change crdscale's numbers (decoding, fits, parquet).
PROVENANCE_PACKAGES = (
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "protobuf",
    "matplotlib",
    "requests",
    "jupytext",
    "nbclient",
    "papermill",
)


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
        cpu_model = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            None,
        )
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_bytes": mem_total,
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
    }


def package_versions(names: tuple[str, ...] = PROVENANCE_PACKAGES) -> dict[str, str | None]:
    """Installed versions of the Python packages behind the numbers (``None``: not installed)."""
    versions: dict[str, str | None] = {"crdscale": __version__}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


# Set in crdscale's image (crdscale.image.build): what the run ran in. The content digest is in
# the image's config; the manifest digest cannot be (the config is part of what it hashes), so the
# pod that runs a cell gets it, with the reference, in its environment.
IMAGE_ENVS = {"content": "CRDSCALE_IMAGE_CONTENT", "digest": "CRDSCALE_IMAGE_DIGEST", "ref": "CRDSCALE_IMAGE_REF"}


def image_facts(env: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """``{"digest", "content", "ref"}`` of the crdscale image the run is in (those set), or ``None`` outside one."""
    env = os.environ if env is None else env
    facts = {key: env[name] for key, name in IMAGE_ENVS.items() if env.get(name)}
    return facts or None


def binary_facts(paths: Mapping[str, str | Path | None]) -> dict[str, dict[str, Any]]:
    """``{name: {path, sha256, bytes}}`` for each binary that exists (provenance of a run)."""
    facts = {}
    for name, path in paths.items():
        if path and Path(path).is_file():
            facts[name] = {"path": str(path), "sha256": sha256_file(path), "bytes": Path(path).stat().st_size}
    return facts


class RunWriter:
    """Writes one run directory. Create a new one with :meth:`create`, continue one with :meth:`open`.

    Parameters:
        path: the run directory.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True):
        self.path = Path(path)
        self.fsync = fsync  # of each event line; recorders of fixtures may turn it off
        self._events: EventLog | None = None

    # ---------------------------------------------------------------- life cycle

    @classmethod
    def create(cls, parent: str | Path, name: str) -> RunWriter:
        """Make ``parent/<UTC timestamp>-<name>/`` (``-2``, ``-3``… for runs in the same second) with its README."""
        base = Path(parent) / f"{utc_stamp()}-{name}"
        path, n = base, 1
        while True:
            try:
                path.mkdir(parents=True)  # atomic claim: two runs in the same second get different names
                break
            except FileExistsError:
                n += 1
                path = base.with_name(f"{base.name}-{n}")
        return cls.create_at(path)

    @classmethod
    def create_at(cls, path: str | Path) -> RunWriter:
        """A run directory at exactly ``path`` (fixtures, recorders); made if missing."""
        path = Path(path)
        for sub in layout.SUBDIRECTORIES:
            (path / sub).mkdir(parents=True, exist_ok=True)
        write_atomic(path / layout.README, layout.RUN_README)
        return cls(path)

    @classmethod
    def open(cls, path: str | Path) -> RunWriter:
        """An existing run directory (raises :class:`UsageError` if it has no manifest)."""
        if not layout.is_run_directory(path):
            raise UsageError(f"{path} is not a crdscale run directory (no {layout.MANIFEST})")
        return cls(Path(path))

    @property
    def events(self) -> EventLog:
        """The run's event log, opened on first use."""
        if self._events is None or self._events.closed:
            self._events = EventLog(self.path / layout.EVENTS, fsync=self.fsync)
        return self._events

    def close(self) -> None:
        if self._events is not None:
            self._events.close()

    # ---------------------------------------------------------------- manifest

    def read_manifest(self) -> Manifest:
        """The manifest as written so far (empty before :meth:`start_manifest`)."""
        if not (self.path / layout.MANIFEST).is_file():
            return Manifest()
        return Manifest.load(self.path)

    def manifest(self) -> dict[str, Any]:
        """The manifest's JSON as a plain dict (a copy): :meth:`read_manifest` gives it typed."""
        return self.read_manifest().to_json()

    def write_manifest(self, manifest: Manifest | Mapping[str, Any]) -> Manifest:
        """Write the whole manifest; a JSON object is checked against :class:`Manifest` first
        (TypeError when a block is not an object). Returns what was written."""
        if not isinstance(manifest, Manifest):
            manifest = Manifest().merged(**manifest)
        manifest.write(self.path)
        return manifest

    def update_manifest(self, **fields: Any) -> Manifest:
        """Merge top-level ``fields`` into the manifest (each checked against its :class:`Manifest`
        field) and write it; returns the new manifest."""
        return self.write_manifest(self.read_manifest().merged(**fields))

    def update_manifest_block(self, key: str, **fields: Any) -> Manifest:
        """Merge ``fields`` into the manifest's block ``key`` (``metrics``...; made when missing) and
        write it; returns the new manifest."""
        return self.write_manifest(self.read_manifest().merged_block(key, **fields))

    def start_manifest(self, *, run_id: str, kind: str = "scenario", **fields: Any) -> Manifest:
        """The first manifest: status ``running``, start time, machine, package versions, runner pid.

        ``kind`` is ``scenario`` (``crdscale run``), ``install`` or ``probe``; ``fields``
        are kind-specific (``scenario``, ``scenario_file``, ``probe``, ``parameters``…).
        """
        manifest = {
            "kind": kind,
            "crdscale_version": __version__,
            "run_id": run_id,
            "status": "running",
            "reason": None,
            "started_at": utc_iso(),
            "ended_at": None,
            **fields,
            "machine": machine_facts(),
            **({"image": image} if (image := image_facts()) else {}),
            "versions": {"crdscale": __version__},
            "packages": package_versions(),
            "runner": {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid()), "argv": sys.argv[:]},
        }
        return self.write_manifest(manifest)

    def record_binaries(
        self, paths: Mapping[str, str | Path | None], built_from: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """Record path, size and sha256 of the binaries a run used (kube-apiserver, etcd, Prometheus…),
        and for those built from a local source tree, what went in (``built_from``: name -> facts,
        see :meth:`crdscale.cluster.kubesource.KubeSource.facts`)."""
        facts = binary_facts(paths)
        for name, source in (built_from or {}).items():
            if name in facts and source:
                facts[name]["built_from"] = dict(source)
        self.write_manifest(self.read_manifest().with_binaries(facts))

    def finish(self, status: str, reason: str | None = None, **fields: Any) -> Manifest:
        """Record the final ``status`` (one of :data:`STATUSES`) and its reason; closes the event log."""
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        self.close()
        return self.update_manifest(status=status, reason=reason, ended_at=utc_iso(), **fields)

    # ---------------------------------------------------------------- data

    def write_file(self, relative: str, data: bytes | str) -> Path:
        """Any file by its path inside the run directory (atomically)."""
        return write_atomic(self.path / relative, data)

    def write_json(self, relative: str, obj: Any) -> Path:
        return write_json_atomic(self.path / relative, obj)

    def write_crd_summary(self, summary: dict[str, Any]) -> Path:
        return self.write_json(layout.CRD_SUMMARY, summary)

    def write_profile(
        self, kind: str, step: int, crds: int, phase: str | None, data: bytes, component: str = layout.APISERVER
    ) -> str:
        """Save a profile of ``component`` (default kube-apiserver) and log a ``profile`` event; returns its
        path inside the run directory. kube-apiserver's events carry no ``component``, as they always did."""
        name = layout.ProfileName(kind, step, crds, phase, component)
        self.write_file(name.relative, data)
        whose = {} if component == layout.APISERVER else {"component": component}
        self.events.emit(
            "profile", file=name.relative, profile=kind, step=step, crds=crds, phase=phase, bytes=len(data), **whose
        )
        return name.relative

    def write_series(self, frame: pd.DataFrame, *, csv: bool = True) -> Path:
        """The tidy metrics table as parquet (and csv, for people without pandas)."""
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        path = self.write_file(layout.SERIES, buf.getvalue())
        if csv:
            self.write_file(layout.SERIES_CSV, frame.to_csv(index=False))
        return path

    def write_series_chunk(self, frame: pd.DataFrame, source: str = "scrape") -> Path | None:
        """Samples ``source`` collected since its last chunk, as its next numbered chunk under
        ``metrics/chunks/`` (read back by :attr:`Run.series` when the run never wrote its final series)."""
        if frame is None or len(frame) == 0:
            return None
        folder = self.path / layout.SERIES_CHUNKS
        folder.mkdir(parents=True, exist_ok=True)
        seq = len(list(folder.glob(f"series-{source}-*.parquet")))  # one writer per source: no race
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        return self.write_file(f"{layout.SERIES_CHUNKS}/series-{source}-{seq:05d}.parquet", buf.getvalue())

    def drop_series_chunks(self) -> None:
        """Remove the chunks once the final series (which holds them all) is written."""
        shutil.rmtree(self.path / layout.SERIES_CHUNKS, ignore_errors=True)

    @property
    def prometheus_tsdb(self) -> Path:
        """Where a local Prometheus keeps its database for this run."""
        return self.path / layout.PROMETHEUS_TSDB

    def record_process(self, name: str, pid: int) -> None:
        """Note a harness process (Prometheus, a client program) in the manifest and the events,
        so that ``crdscale recover`` can stop it if the runner dies."""
        self.write_manifest(
            self.read_manifest().with_process({"name": name, "pid": pid, "start_ticks": start_ticks(pid)})
        )
        self.events.emit("process.start", name=name, pid=pid, start_ticks=start_ticks(pid))

    def write_probe_table(self, name: str, step: int, frame: pd.DataFrame, table: str | None = None) -> Path | None:
        """One probe table (``probes/<name>[-<table>]-stepNN.parquet``); empty tables are not written."""
        if frame is None or len(frame) == 0:
            return None
        buf = io.BytesIO()
        _parquet_safe(frame).to_parquet(buf, index=False)
        return self.write_file(layout.probe_table_relative(name, step, table), buf.getvalue())

    def write_jsonl(self, relative: str, records: list[dict[str, Any]]) -> Path:
        return self.write_file(relative, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))

    def copy_log(self, source: str | Path) -> None:
        """Copy a component log into ``logs/`` (they explain failures and hold no credentials)."""
        target = self.path / layout.LOGS / Path(source).name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(source, target)
        except OSError:
            pass


def _parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding mixed types (None and numbers, dicts) become strings so pyarrow accepts them."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object:
            values = out[col].dropna()
            if len(values) and not all(isinstance(v, str) for v in values):
                out[col] = out[col].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v, default=str))
    return out


def write_experiment_manifest(experiment_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Atomically write an experiment directory's manifest (see :mod:`crdscale.scenario.experiment`)."""
    return write_json_atomic(Path(experiment_dir) / layout.EXPERIMENT_MANIFEST, manifest)
