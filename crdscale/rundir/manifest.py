"""A run's ``manifest.json``, typed: :class:`Manifest` and its blocks, the one way it is read and written.

The manifest is plain JSON that the runner (``crdscale run``), ``crdscale install`` and
every probe fill in as they go (:meth:`crdscale.rundir.RunWriter.update_manifest`). Code
reads it through the typed fields::

    m = Manifest.load(run_dir)
    m.status, m.versions.kube_apiserver, m.crds.sha256, m.metrics.scrape_interval_s,
    m.scenario.target.env, m.binaries["kube-apiserver"].built_from, m.harness.apiserver_scrapes.count

Reading is tolerant: manifests written by older crdscale (the committed reference runs,
test fixtures) miss blocks and keys, and a missing block reads as an empty one whose
fields are ``None`` (an empty block is falsy, as the ``{}`` it stands for). Keys no
field names are kept: every block keeps the JSON it was read from, so
:meth:`Manifest.to_json` gives back exactly what was read or written, key for key and
in the same order (the run directory's bytes do not depend on this module).

A :class:`Manifest` is also a read-only mapping over that JSON (``m["versions"]``,
``m.get("harness")``), for notebooks and scripts written before the typed fields; new
code reads the fields.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from crdscale.fsutil import read_json_object, write_json_atomic
from crdscale.rundir import layout

# Kinds of run directory, the manifest's ``kind``: ``crdscale run``, ``crdscale install``, ``crdscale probe``.
KINDS = ("scenario", "install", "probe")


def _key(name: str, parse=None, *, empty=None) -> Any:
    """A field read from the JSON key ``name`` (when it differs from the field's name, e.g.
    ``kube-apiserver``), through ``parse(value, strict, where)`` when given; ``empty()`` when missing."""
    metadata = {"key": name, "parse": parse}
    return field(default_factory=empty, metadata=metadata) if empty else field(default=None, metadata=metadata)


@dataclass(frozen=True)
class Block:
    """A JSON object of the manifest: typed fields over the JSON it was read from (``json``).

    Falsy when the JSON object is empty or absent, as ``manifest.get(key) or {}`` was."""

    json: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False, kw_only=True)

    @classmethod
    def from_json(cls, value: Any, *, strict: bool = False, where: str = "manifest"):
        """The block from a JSON object; ``None`` or (unless ``strict``) any other value gives an
        empty block. ``strict`` raises TypeError for a value that is not an object (a writer's bug)."""
        if not isinstance(value, Mapping):
            if strict and value is not None:
                raise TypeError(f"{where}: expected a JSON object, got {type(value).__name__}")
            return cls()
        values = {}
        for f in fields(cls):
            if f.name == "json":
                continue
            key = f.metadata.get("key") or f.name
            if key in value:
                parse = f.metadata.get("parse")
                values[f.name] = parse(value[key], strict, f"{where}.{key}") if parse else value[key]
        return cls(**values, json=value)

    def __bool__(self) -> bool:
        return bool(self.json)

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the JSON that no field names (a component's version, an extra probe result)."""
        return self.json.get(key, default)

    def to_json(self) -> dict[str, Any]:
        """The JSON object, as read or written (a copy)."""
        return copy.deepcopy(dict(self.json))


def _block(cls):
    return lambda value, strict, where: cls.from_json(value, strict=strict, where=where)


def _blocks(cls):
    """``{name: cls}`` from a JSON object of objects (binaries, object kinds); other values left out."""

    def parse(value, strict, where):
        if not isinstance(value, Mapping):
            if strict and value is not None:
                raise TypeError(f"{where}: expected a JSON object, got {type(value).__name__}")
            return {}
        return {k: cls.from_json(v, strict=strict, where=f"{where}.{k}") for k, v in value.items()}

    return parse


def _block_list(cls):
    def parse(value, strict, where):
        if not isinstance(value, list | tuple):
            if strict and value is not None:
                raise TypeError(f"{where}: expected a JSON array, got {type(value).__name__}")
            return ()
        return tuple(cls.from_json(v, strict=strict, where=f"{where}[{i}]") for i, v in enumerate(value))

    return parse


def _mapping(value, strict, where) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        if strict and value is not None:
            raise TypeError(f"{where}: expected a JSON object, got {type(value).__name__}")
        return {}
    return value


def _sequence(value, strict, where) -> tuple:
    if not isinstance(value, list | tuple):
        if strict and value is not None:
            raise TypeError(f"{where}: expected a JSON array, got {type(value).__name__}")
        return ()
    return tuple(value)


# ---------------------------------------------------------------- provenance


@dataclass(frozen=True)
class Machine(Block):
    """Where the run ran (:func:`crdscale.rundir.writer.machine_facts`)."""

    cpus: int | None = None
    cpu_model: str | None = None
    memory_bytes: int | None = None
    kernel: str | None = None
    os: str | None = None
    python: str | None = None


@dataclass(frozen=True)
class Image(Block):
    """The crdscale image the run ran in (:func:`crdscale.rundir.writer.image_facts`)."""

    digest: str | None = None
    content: str | None = None
    ref: str | None = None


@dataclass(frozen=True)
class Versions(Block):
    """Versions of what ran: crdscale, the target's kube-apiserver and etcd, the Go that built
    kube-apiserver and the local Go toolchain; others (kube-controller-manager...) by :meth:`get`."""

    crdscale: str | None = None
    kube_apiserver: str | None = _key("kube-apiserver")
    etcd: str | None = None
    kube_apiserver_go: str | None = _key("kube-apiserver-go")
    go_toolchain: str | None = _key("go-toolchain")


@dataclass(frozen=True)
class Binary(Block):
    """One binary a run used (:func:`crdscale.rundir.writer.binary_facts`); ``built_from`` for a
    build from a local source tree (:meth:`crdscale.cluster.kubesource.KubeSource.facts`)."""

    path: str | None = None
    sha256: str | None = None
    bytes: int | None = None
    built_from: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, value: Any, *, strict: bool = False, where: str = "manifest"):
        if isinstance(value, str) and not strict:  # a binary recorded as its path alone
            return cls(path=value)
        return super().from_json(value, strict=strict, where=where)


@dataclass(frozen=True)
class Runner(Block):
    """The process that wrote the run (a ``running`` manifest whose runner is gone was abandoned)."""

    pid: int | None = None
    start_ticks: int | None = None
    argv: tuple[str, ...] = _key("argv", _sequence, empty=tuple)


@dataclass(frozen=True)
class Process(Block):
    """A harness process the run started (Prometheus, a client program): ``crdscale recover`` stops it."""

    name: str | None = None
    pid: int | None = None
    start_ticks: int | None = None


@dataclass(frozen=True)
class Target(Block):
    """The API server measured: ``kind`` (``local``, ``kubeconfig``) and its URL."""

    kind: str | None = None
    server: str | None = None
    kubeconfig: str | None = None  # a probe's: the file's path, never its content


# ---------------------------------------------------------------- the scenario as run


@dataclass(frozen=True)
class ScenarioTarget(Block):
    """The scenario's ``[target]`` as run (the keys readers of a run use)."""

    kind: str | None = None
    kube_version: str | None = None
    etcd: str | None = None
    env: Mapping[str, str] = _key("env", _mapping, empty=dict)
    apiserver_flags: tuple[str, ...] = _key("apiserver_flags", _sequence, empty=tuple)
    controller_manager: bool | None = None


@dataclass(frozen=True)
class ScenarioCrds(Block):
    """The scenario's ``[crds]``: where the CRDs came from."""

    source: str | None = None
    preset: str | None = None
    seed: int | None = None
    count: int | None = None
    property_count: int | None = None


@dataclass(frozen=True)
class ScenarioSteps(Block):
    """The scenario's ``[steps]``."""

    count: int | None = None
    serve: str | None = None
    settle_seconds: float | None = None
    grow: str | None = None


@dataclass(frozen=True)
class ScenarioMetrics(Block):
    """The scenario's ``[metrics]``."""

    source: str | None = None
    scrape_interval_seconds: float | None = None


@dataclass(frozen=True)
class ExperimentCell(Block):
    """What a matrix cell's scenario adds: which experiment and cell it is."""

    name: str | None = None
    cell: str | None = None


@dataclass(frozen=True)
class ScenarioRecord(Block):
    """The merged scenario TOML the run ran (:attr:`crdscale.scenario.config.Scenario.raw`),
    typed where readers of a run look; the whole of it in ``json``."""

    name: str | None = None
    description: str | None = None
    target: ScenarioTarget = _key("target", _block(ScenarioTarget), empty=ScenarioTarget)
    crds: ScenarioCrds = _key("crds", _block(ScenarioCrds), empty=ScenarioCrds)
    steps: ScenarioSteps = _key("steps", _block(ScenarioSteps), empty=ScenarioSteps)
    metrics: ScenarioMetrics = _key("metrics", _block(ScenarioMetrics), empty=ScenarioMetrics)
    experiment: ExperimentCell = _key("experiment", _block(ExperimentCell), empty=ExperimentCell)


# ---------------------------------------------------------------- what the run recorded


@dataclass(frozen=True)
class CrdSet(Block):
    """The CRD set summary (:meth:`crdscale.crds.summary.CrdSetSummary.to_dict`); the whole of
    it (what the footprint features read) in ``json``."""

    count: int | None = None
    groups: int | None = None
    properties_median: float | None = None
    properties_total: int | None = None
    schema_bytes_median: float | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class ObjectKind(Block):
    """A kind's first object as sent and as stored (a run that grew objects)."""

    sent_bytes: int | None = None
    stored_bytes: int | None = None


@dataclass(frozen=True)
class Objects(Block):
    """A run that grew objects: the scenario's ``[objects]`` plus, per kind, what one object
    weighs (``kinds``) and its resource (``resources``)."""

    kinds: Mapping[str, ObjectKind] = _key("kinds", _blocks(ObjectKind), empty=dict)
    resources: Mapping[str, Any] = _key("resources", _mapping, empty=dict)

    def kinds_json(self) -> dict[str, Any]:
        """``kinds`` as the JSON the amplification functions take."""
        return {k: v.to_json() for k, v in self.kinds.items()}


@dataclass(frozen=True)
class Resolution(Block):
    """How dense a record of the memory series is (:func:`crdscale.collect.metrics.resolution`)."""

    metric: str | None = None
    samples: int | None = None
    median_gap_s: float | None = None
    max_gap_s: float | None = None
    end_gap_s: float | None = None


@dataclass(frozen=True)
class Window(Block):
    """The time window the run's series were exported for (ISO 8601, UTC)."""

    start: str | None = None
    end: str | None = None


@dataclass(frozen=True)
class MetricsRecord(Block):
    """How the run's metrics were collected (the source's ``describe()``) and what came out."""

    source: str | None = None
    scrape_interval_s: float | None = None
    job_interval_s: Mapping[str, float] = _key("job_interval_s", _mapping, empty=dict)
    cadence_changes: tuple = _key("cadence_changes", _sequence, empty=tuple)
    window: Window = _key("window", _block(Window), empty=Window)
    rows: int | None = None
    series: tuple[str, ...] = _key("series", _sequence, empty=tuple)
    resolution: Resolution = _key("resolution", _block(Resolution), empty=Resolution)
    resolution_proc: Resolution = _key("resolution_proc", _block(Resolution), empty=Resolution)
    recovered_from: str | None = None


@dataclass(frozen=True)
class Scrapes(Block):
    """What the harness's /metrics scrapes cost kube-apiserver (:func:`crdscale.analysis.harness.scrape_cost`)."""

    count: int | None = None
    cpu_seconds_estimate: float | None = None
    cpu_per_wall_second: float | None = None


@dataclass(frozen=True)
class Harness(Block):
    """The load the harness put on the machine (:func:`crdscale.analysis.harness.harness_cost`)."""

    crdscale_cpu_seconds: float | None = None
    prometheus_cpu_seconds: float | None = None
    kube_apiserver_cpu_seconds: float | None = None
    harness_share_of_apiserver_cpu: float | None = None
    scrape_share_of_apiserver_cpu: float | None = None
    apiserver_scrapes: Scrapes = _key("apiserver_scrapes", _block(Scrapes), empty=Scrapes)


@dataclass(frozen=True)
class InstallStep(Block):
    """One step of ``crdscale install``: its number, duration and per-outcome counts (in ``json``)."""

    step: int | None = None
    duration_s: float | None = None


# ---------------------------------------------------------------- the manifest


@dataclass(frozen=True, eq=False)
class Manifest(Block, Mapping[str, Any]):
    """A run directory's ``manifest.json``. Build it with :meth:`load` or :meth:`from_json`.

    Equal to another manifest (or a dict) with the same JSON. Keys no field names (a probe's
    results, a fixture's ``name``) are in ``json`` and in the mapping. Change one with
    :meth:`merged` (which keeps the fields and the JSON together), not ``dataclasses.replace``.
    """

    kind: str | None = None  # one of KINDS
    crdscale_version: str | None = None
    run_id: str | None = None
    status: str | None = None  # one of crdscale.rundir.writer.STATUSES
    reason: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    scenario: ScenarioRecord = _key("scenario", _block(ScenarioRecord), empty=ScenarioRecord)
    scenario_file: str | None = None
    machine: Machine = _key("machine", _block(Machine), empty=Machine)
    image: Image = _key("image", _block(Image), empty=Image)
    versions: Versions = _key("versions", _block(Versions), empty=Versions)
    packages: Mapping[str, str | None] = _key("packages", _mapping, empty=dict)
    runner: Runner = _key("runner", _block(Runner), empty=Runner)
    binaries: Mapping[str, Binary] = _key("binaries", _blocks(Binary), empty=dict)
    crds: CrdSet = _key("crds", _block(CrdSet), empty=CrdSet)
    objects: Objects = _key("objects", _block(Objects), empty=Objects)
    controller_manager: Mapping[str, Any] = _key("controller_manager", _mapping, empty=dict)
    components: Mapping[str, Any] = _key("components", _mapping, empty=dict)
    target: Target = _key("target", _block(Target), empty=Target)
    processes: tuple[Process, ...] = _key("processes", _block_list(Process), empty=tuple)
    metrics: MetricsRecord = _key("metrics", _block(MetricsRecord), empty=MetricsRecord)
    metrics_error: str | None = None
    harness: Harness = _key("harness", _block(Harness), empty=Harness)
    # crdscale install
    sources: tuple[str, ...] = _key("sources", _sequence, empty=tuple)
    skipped_documents: Mapping[str, Any] = _key("skipped_documents", _mapping, empty=dict)
    options: Mapping[str, Any] = _key("options", _mapping, empty=dict)
    duration_s: float | None = None
    steps: tuple[InstallStep, ...] = _key("steps", _block_list(InstallStep), empty=tuple)
    # crdscale probe
    probe: str | None = None
    parameters: Mapping[str, Any] = _key("parameters", _mapping, empty=dict)
    seconds: float | None = None
    tables: tuple[str, ...] = _key("tables", _sequence, empty=tuple)

    # ------------------------------------------------------------ reading

    @classmethod
    def load(cls, run_dir: str | Path) -> Manifest:
        """The manifest of a run directory; UsageError (one line) when it is missing, not JSON or
        not a JSON object."""
        path = Path(run_dir) / layout.MANIFEST
        value = read_json_object(path, missing=f"{run_dir} is not a crdscale run directory (no {layout.MANIFEST})")
        return cls.from_json(value, where=str(path))

    @classmethod
    def of(cls, manifest: Manifest | Mapping[str, Any] | None) -> Manifest:
        """``manifest`` itself, or the manifest of a JSON object (a test's dict); empty for ``None``."""
        return manifest if isinstance(manifest, Manifest) else cls.from_json(manifest or {})

    # ------------------------------------------------------------ writing

    def merged(self, **fields: Any) -> Manifest:
        """This manifest with top-level ``fields`` set (added at the end, or replaced in place), each
        checked against its field's type: a block must be given a JSON object (TypeError otherwise).
        Values are stored as the JSON they will be written as (tuples become lists, paths strings)."""
        given = _as_json(fields)
        Manifest.from_json(given, strict=True, where="manifest")  # the check; unknown keys are the caller's
        return Manifest.from_json({**self.json, **given})

    def merged_block(self, key: str, **fields: Any) -> Manifest:
        """This manifest with ``fields`` merged into its block ``key`` (a new block when missing),
        as ``manifest.setdefault(key, {}).update(fields)`` did."""
        block = self.json.get(key)
        return self.merged(**{key: {**(block if isinstance(block, Mapping) else {}), **fields}})

    def with_binaries(self, facts: Mapping[str, Mapping[str, Any]]) -> Manifest:
        """This manifest with the binaries in ``facts`` recorded (others kept)."""
        return self.merged_block("binaries", **facts)

    def with_process(self, entry: Mapping[str, Any]) -> Manifest:
        """This manifest with one more harness process recorded."""
        processes = self.json.get("processes")
        return self.merged(processes=[*(processes if isinstance(processes, list) else []), dict(entry)])

    def write(self, run_dir: str | Path) -> Path:
        """Write ``manifest.json`` atomically (indented JSON, keys in the order written)."""
        return write_json_atomic(Path(run_dir) / layout.MANIFEST, self.json)

    # ------------------------------------------------------------ the mapping (the JSON)

    def __getitem__(self, key: str) -> Any:
        return self.json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.json)

    def __len__(self) -> int:
        return len(self.json)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Manifest):
            return dict(self.json) == dict(other.json)
        if isinstance(other, Mapping):
            return dict(self.json) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Manifest(kind={self.kind!r}, run_id={self.run_id!r}, status={self.status!r})"

    # Block.get is Mapping.get here: the JSON's top-level keys.
    def get(self, key: str, default: Any = None) -> Any:
        return self.json.get(key, default)


def reference_rows() -> list[tuple[str, str, str]]:
    """``(key, its typed fields or type, what it holds)`` per top-level key of :class:`Manifest`, in
    the order a run writes them (the generated run-directory reference)."""
    rows = []
    for f in fields(Manifest):
        if f.name == "json":
            continue
        default = f.default_factory() if callable(f.default_factory) else None
        if isinstance(default, Block):
            inner = [g.metadata.get("key") or g.name for g in fields(type(default)) if g.name != "json"]
            rows.append((f.metadata.get("key") or f.name, ", ".join(inner), _summary(type(default))))
        else:
            rows.append((f.metadata.get("key") or f.name, str(f.type), _SCALARS.get(f.name, "")))
    return rows


def _summary(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split("\n\n")[0].split())


# What the top-level keys that are not blocks hold (the blocks say it in their docstrings).
_SCALARS = {
    "kind": "which command wrote the run: " + ", ".join(KINDS),
    "crdscale_version": "the crdscale that wrote the run",
    "run_id": "the run's id (labels every object it created in the cluster)",
    "status": "running, completed, failed, interrupted or abandoned",
    "reason": "why the run did not complete",
    "started_at": "when the run started (UTC, ISO 8601)",
    "ended_at": "when it ended",
    "scenario_file": "the scenario file the run was given",
    "packages": "versions of the Python packages behind the numbers",
    "binaries": "per binary (kube-apiserver, etcd, prometheus...): path, sha256, bytes, built_from",
    "controller_manager": "whether a local kube-controller-manager ran, with which controllers and flags",
    "components": "per component besides kube-apiserver (kube-controller-manager, etcd): the heap profiles "
    "taken at every profile mark and where from, or why there are none (`skipped`)",
    "processes": "harness processes the run started (name, pid, start_ticks): `crdscale recover` stops them",
    "metrics_error": "why the metrics series could not be exported",
    "sources": "`crdscale install`: the CRD sources",
    "skipped_documents": "`crdscale install`: documents of the sources that were not CRDs",
    "options": "`crdscale install`: its options",
    "duration_s": "`crdscale install`: how long it took",
    "steps": "`crdscale install`: per step, its number, duration and counts of each outcome",
    "probe": "`crdscale probe`: which probe",
    "parameters": "`crdscale probe`: its configuration",
    "seconds": "`crdscale probe`: how long it took",
    "tables": "`crdscale probe`: the tables it wrote; its results follow as further keys",
}


def _as_json(value: Any) -> Any:
    """``value`` as the JSON it is written as (what reading the file back gives)."""
    return json.loads(json.dumps(value, default=str))
