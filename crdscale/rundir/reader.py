"""The one reader of run directories: :func:`read_run` returns a typed :class:`Run`.

Everything else — analysis, reports, notebooks, the CLI — gets a run's data
from here: manifest, events, metrics series, profiles with their step, CRD
count, phase and time, probe tables and the CRD-set summary. Tables are read
on first use and kept, so a notebook may touch ``run.series`` often.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from crdscale.errors import UsageError
from crdscale.proc import is_alive
from crdscale.rundir import layout
from crdscale.rundir.events import read_events

TIDY_COLUMNS = ["timestamp", "job", "metric", "labels", "value"]
PROFILE_COLUMNS = ["file", "kind", "step", "crds", "phase", "timestamp", "bytes"]


def events_frame(events: Iterable[Mapping]) -> pd.DataFrame:
    """Events as a DataFrame: ``ts`` (UTC), ``kind`` and every other field as a column, in time order."""
    frame = pd.DataFrame(list(events))
    if frame.empty:
        return pd.DataFrame(columns=["ts", "kind"])
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True, format="ISO8601")
    return frame.sort_values("ts", kind="stable").reset_index(drop=True)


def run_start(events: pd.DataFrame, series: pd.DataFrame | None = None) -> pd.Timestamp | None:
    """Time zero of a run's plots: when metrics collection started (the ``metrics.start``
    event; the control plane's start-up before it has no samples), else the first
    event, else the first sample; ``None`` for an empty run."""
    if len(events):
        started = events.loc[events["kind"] == "metrics.start", "ts"]
        return started.iloc[0] if len(started) else events["ts"].min()
    if series is not None and len(series):
        return pd.to_datetime(series["timestamp"], utc=True).min()
    return None


class Run:
    """One run directory, read. Build it with :func:`read_run`.

    Attributes:
        path: the run directory.
        manifest: ``manifest.json`` as a dict (scenario, versions, binaries, machine, status…).
    """

    def __init__(self, path: Path, manifest: dict[str, Any]):
        self.path = path
        self.manifest = manifest

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, status={self.status!r})"

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def status(self) -> str:
        """``completed``, ``failed``, ``interrupted``, ``running`` — or ``abandoned`` when the
        manifest says running but the runner process that wrote it is gone (``kill -9``, OOM)."""
        status = self.manifest.get("status", "unknown")
        runner = self.manifest.get("runner") or {}
        if status == "running" and runner.get("pid") and not is_alive(int(runner["pid"]), runner.get("start_ticks")):
            return "abandoned"
        return status

    # ------------------------------------------------------------ tables

    @cached_property
    def events(self) -> pd.DataFrame:
        """``events.jsonl`` as a frame (``ts`` UTC, ``kind``, fields as columns); empty if none."""
        path = self.path / layout.EVENTS
        return events_frame(read_events(path) if path.is_file() else [])

    @cached_property
    def series(self) -> pd.DataFrame:
        """The tidy metrics table ``timestamp (UTC), job, metric, labels, value``; empty if none."""
        path = self.path / layout.SERIES
        if path.is_file():
            series = pd.read_parquet(path)
        else:  # a run that never exported (its runner died): the chunks written while it went
            chunks = sorted((self.path / layout.SERIES_CHUNKS).glob("series-*.parquet"))
            if not chunks:
                return pd.DataFrame(columns=TIDY_COLUMNS)
            series = pd.concat([pd.read_parquet(c) for c in chunks], ignore_index=True)
        if len(series):
            series = series.assign(timestamp=pd.to_datetime(series["timestamp"], utc=True))
        return series

    @property
    def start(self) -> pd.Timestamp | None:
        """Time zero of the run's plots (see :func:`run_start`)."""
        return run_start(self.events, self.series)

    @cached_property
    def profiles(self) -> pd.DataFrame:
        """Every profile file: ``file`` (path inside the run), ``kind``, ``step``, ``crds``,
        ``phase`` (None = end of step), ``timestamp`` (UTC, from its ``profile`` event; NaT if
        unknown) and ``bytes``, ordered by file name (step, then installed before served)."""
        folder = self.path / layout.PROFILES
        taken = {}
        if len(self.events) and "file" in self.events.columns:
            for e in self.events[self.events["kind"] == "profile"].itertuples(index=False):
                taken[e.file] = e.ts
        rows = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            name = layout.parse_profile_filename(path.name)
            if name is None:
                continue
            rows.append(
                (
                    name.relative,
                    name.kind,
                    name.step,
                    name.crds,
                    name.phase,
                    taken.get(name.relative, pd.NaT),
                    path.stat().st_size,
                )
            )
        frame = pd.DataFrame(rows, columns=PROFILE_COLUMNS)
        frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
        return frame

    def heap_profiles(self) -> pd.DataFrame:
        """The rows of :attr:`profiles` that are heap profiles."""
        return self.profiles[self.profiles["kind"] == "heap"].reset_index(drop=True)

    def profile_marks(self) -> pd.DataFrame:
        """When each heap profile was taken: ``timestamp, crds, phase`` (``served`` for the end of a step)."""
        heap = self.heap_profiles().dropna(subset=["timestamp"])
        return pd.DataFrame(
            {"timestamp": heap["timestamp"], "crds": heap["crds"].astype(int), "phase": heap["phase"].fillna("served")}
        ).reset_index(drop=True)

    def profile_path(self, file: str) -> Path:
        """Absolute path of a profile given its ``file`` entry (for ``go tool pprof`` and friends)."""
        return self.path / file

    def profile_bytes(self, file: str) -> bytes:
        return (self.path / file).read_bytes()

    def read_profile(self, file: str):
        """A profile decoded (:class:`crdscale.analysis.pprof.Profile`) given its ``file`` entry."""
        from crdscale.analysis.pprof.decode import parse_profile

        return parse_profile(self.profile_bytes(file), name=str(self.path / file))

    def probe_table(self, name: str, table: str | None = None) -> pd.DataFrame:
        """All steps of one probe table concatenated, with a ``step`` column (empty if none)."""
        stem = layout.probe_stem(name, table)
        frames = []
        folder = self.path / layout.PROBES
        for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
            parsed = layout.parse_probe_table_name(path.name)
            if parsed and parsed[0] == stem:
                frames.append(pd.read_parquet(path).assign(step=parsed[1]))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def probe_tables(self) -> list[str]:
        """Paths (inside the run) of every probe table."""
        folder = self.path / layout.PROBES
        return (
            [
                f"{layout.PROBES}/{p.name}"
                for p in sorted(folder.glob("*.parquet"))
                if layout.parse_probe_table_name(p.name)
            ]
            if folder.is_dir()
            else []
        )

    def has_probe_table(self, name: str, table: str | None = None) -> bool:
        stem = layout.probe_stem(name, table)
        folder = self.path / layout.PROBES
        return folder.is_dir() and any(
            (p := layout.parse_probe_table_name(f.name)) and p[0] == stem for f in folder.glob("*.parquet")
        )

    @cached_property
    def crd_summary(self) -> dict[str, Any] | None:
        path = self.path / layout.CRD_SUMMARY
        return json.loads(path.read_text()) if path.is_file() else None

    def read_jsonl(self, relative: str) -> list[dict[str, Any]]:
        """Records of a JSON-lines file inside the run (e.g. ``crds.jsonl`` of ``crdscale install``)."""
        path = self.path / relative
        return list(read_events(path)) if path.is_file() else []

    def output_dir(self, name: str = layout.ANALYSIS) -> Path:
        """Where derived files go (``analysis/``, ``report/``), created on demand."""
        path = self.path / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ------------------------------------------------------------ analysis

    def analysis(self, rules: Sequence | None = None, confidence: float = 0.95):
        """Per-CRD cost fits of this run (:class:`crdscale.analysis.percrd.RunAnalysis`).

        Decodes every heap profile; the result for the default rules is kept.
        Raises UsageError unless there are heap profiles at two or more CRD counts.
        """
        from crdscale.analysis.attribution import RULES
        from crdscale.analysis.percrd import analyze

        key = (id(rules) if rules is not None else None, confidence)
        cache = self.__dict__.setdefault("_analyses", {})
        if key not in cache:
            heap = self.heap_profiles()
            if heap["crds"].nunique() < 2:
                raise UsageError(f"{self.path}: needs heap profiles at two or more CRD counts under {layout.PROFILES}/")
            decoded = (
                (int(r.crds), r.phase if isinstance(r.phase, str) else None, self.read_profile(r.file))
                for r in heap.itertuples(index=False)
            )
            cache[key] = analyze(
                decoded,
                manifest=self.manifest,
                series=self.series,
                marks=self.profile_marks(),
                rules=rules if rules is not None else RULES,
                confidence=confidence,
                run_dir=self.path,
                profile_files=[str(self.path / f) for f in heap["file"]],
            )
        return cache[key]


def read_run(path: str | Path) -> Run:
    """Open a run directory. Raises :class:`UsageError` (one line) if it is not one."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    manifest_path = path / layout.MANIFEST
    if not manifest_path.is_file():
        raise UsageError(f"{path} is not a crdscale run directory (no {layout.MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text())
    except ValueError as err:
        raise UsageError(f"{manifest_path}: not JSON ({err})") from None
    return Run(path, manifest)


def read_experiment_manifest(path: str | Path) -> dict[str, Any]:
    """An experiment directory's manifest. Raises :class:`UsageError` (one line) if it has none."""
    manifest_path = Path(path) / layout.EXPERIMENT_MANIFEST
    if not manifest_path.is_file():
        raise UsageError(f"{path} is not a crdscale experiment directory (no {layout.EXPERIMENT_MANIFEST})")
    try:
        return json.loads(manifest_path.read_text())
    except ValueError as err:
        raise UsageError(f"{manifest_path}: not JSON ({err})") from None
