"""Where things live inside a run directory: the only module that spells those names.

Layout of ``runs/<UTC timestamp>-<name>/``::

    README.md              what every file is (written when the directory is created)
    manifest.json          scenario, versions, environment, machine, times, status (+ reason)
    events.jsonl           append-only log of steps and phases (kinds: crdscale.rundir.events)
    crds/summary.json      the CRD set summary and sha256
    crds.jsonl             `crdscale install`: per CRD, when created, NamesAccepted, Established
    profiles/              heap-step03-crds0300[-installed].pb.gz ... (gzip pprof)
    metrics/series.parquet tidy time series (+ series.csv), exported at the end of the run
    metrics/prometheus/    the local Prometheus's TSDB (kept; survives a killed runner)
    metrics/chunks/        direct-scrape samples flushed every few seconds while the run goes
    probes/                <probe>[-<table>]-stepNN.parquet
    logs/                  kube-apiserver / etcd / kube-controller-manager logs of a local target
    analysis/, report/     written by ``crdscale analyze`` and ``crdscale report``

An experiment directory (a matrix of runs) holds ``experiment.json`` and one run
directory per cell.

Profiles are named ``{kind}-step{NN}-crds{NNNN}[-{phase}].pb.gz``; step 0 is the
baseline before any CRD. kube-controller-manager's and etcd's heap profiles, taken at the
same marks, are named the same with the component first (``etcd-heap-step03-crds0300.pb.gz``). ``phase`` is ``installed`` for a profile taken once a
step's CRDs are Established but before they are served, ``install`` for a CPU
profile sampled while the step installed; no phase means the end of the step
(after serving and settling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "manifest.json"
EXPERIMENT_MANIFEST = "experiment.json"
EVENTS = "events.jsonl"
README = "README.md"
CRD_SUMMARY = "crds/summary.json"
CRD_RECORDS = "crds.jsonl"  # `crdscale install`: per CRD, created / NamesAccepted / Established times
PROFILES = "profiles"
METRICS = "metrics"
SERIES = "metrics/series.parquet"
SERIES_CSV = "metrics/series.csv"
# Written while a run goes, so a runner killed mid-run loses nothing (see `crdscale recover`):
SERIES_CHUNKS = "metrics/chunks"  # direct scrapes, one parquet file every few seconds
PROMETHEUS_TSDB = "metrics/prometheus"  # a local Prometheus's own database (open it with Prometheus later)
# The series' ``job`` of kube-apiserver's own /metrics (Prometheus' job_name, the direct scraper's job).
APISERVER_JOB = "kube-apiserver"
# The series' ``job`` of a local kube-apiserver's /proc samples (RSS, CPU, fds, threads every
# interval), beside the ``kube-apiserver`` job of its /metrics.
PROC_JOB = "kube-apiserver-proc"
# The same for a local kube-controller-manager (its /metrics job is ``kube-controller-manager``).
CONTROLLER_MANAGER_PROC_JOB = "kube-controller-manager-proc"
# The same for a local etcd (its /metrics job is ``etcd``).
ETCD_PROC_JOB = "etcd-proc"
# The control plane's processes a run measures. kube-apiserver's profiles keep the names they always had
# (``heap-step03-crds0300.pb.gz``); the others' carry the component first
# (``kube-controller-manager-heap-step03-crds0300.pb.gz``, ``etcd-heap-...``), as clusterloader2 names its
# ``<component>_<measurement>`` files, so a file copied out of the run still says whose heap it is.
APISERVER = APISERVER_JOB
CONTROLLER_MANAGER = "kube-controller-manager"
ETCD = "etcd"
COMPONENTS = (APISERVER, CONTROLLER_MANAGER, ETCD)
# Those besides kube-apiserver whose heap a run profiles at every profile mark (``profiles.components``).
OTHER_COMPONENTS = (CONTROLLER_MANAGER, ETCD)
# Component -> its /proc job.
PROC_JOBS = {APISERVER_JOB: PROC_JOB, CONTROLLER_MANAGER: CONTROLLER_MANAGER_PROC_JOB, ETCD: ETCD_PROC_JOB}
PROBES = "probes"
LOGS = "logs"
ANALYSIS = "analysis"
REPORT = "report"
# What `crdscale report` and `crdscale compare --out` write into their output directory (default ``report/``):
REPORT_HTML = "report.html"  # summary + every notebook, with code
REPORT_NOCODE_HTML = "report-nocode.html"  # the same without code cells (what to attach)
FINDINGS_MD = "findings.md"  # headline, provenance, key numbers, figures
FINDINGS_JSON = "findings.json"  # the same numbers, unformatted
NOTEBOOKS = "notebooks"  # `crdscale lab`: the run's own executed copies of the notebooks

# Sub-directories made when a run directory is created.
SUBDIRECTORIES = (PROFILES, METRICS, "crds", PROBES)

# The profiles a scenario may take after each step (``profiles.kinds``), in the order its
# validation message and reference list them.
PROFILE_KINDS = ("heap", "allocs", "goroutine", "cpu")
# The phase of a profile taken after a client fetched /openapi/v2 (scenario key profiles.openapi_v2).
OPENAPI_V2_PHASE = "openapiv2"
# Profile phases in the order a step takes them: installed (Established, not yet served), served (the
# step's end) and openapiv2 (after a GET of /openapi/v2). A profile file names no phase for ``served``.
PHASES = ("installed", "served", OPENAPI_V2_PHASE)

_PROFILE_RE = re.compile(
    r"^(?:(?P<component>" + "|".join(re.escape(c) for c in OTHER_COMPONENTS) + r")-)?"
    r"(?P<kind>[a-z]+)-step(?P<step>\d+)-crds(?P<crds>\d+)(?:-(?P<phase>[a-z][a-z0-9]*))?\.pb\.gz$"
)
_PROBE_RE = re.compile(r"^(?P<stem>.+)-step(?P<step>\d+)\.parquet$")

RUN_README = f"""\
# A crdscale run

| file | what it is | open it with |
|---|---|---|
| `{MANIFEST}` | scenario, versions (kube-apiserver, etcd, Go, Prometheus, crdscale, Python packages), binary sha256, machine, start/end, `status` and `reason` | any JSON viewer |
| `{EVENTS}` | append-only log of steps and phases with UTC timestamps | `crdscale.rundir.read_run(DIR).events` |
| `{CRD_SUMMARY}` | the CRD set: count, groups, schema sizes, sha256 | |
| `{PROFILES}/heap-stepNN-crdsNNNN[-installed].pb.gz` | Go heap profiles (gc=1) after step NN with NNNN CRDs; `-installed` = Established but not yet served; `-openapiv2` = after a GET of /openapi/v2 | `crdscale top FILE`, `go tool pprof FILE` |
| `{PROFILES}/cpu-stepNN-crdsNNNN-install.pb.gz` | CPU profile sampled while step NN installed | same |
| `{PROFILES}/{CONTROLLER_MANAGER}-heap-stepNN-crdsNNNN[-phase].pb.gz`, `{PROFILES}/{ETCD}-heap-...` | the same heap profiles of kube-controller-manager and etcd (local targets; the manifest's `components` says why one is missing) | same |
| `{SERIES}` (`.csv`) | tidy time series: timestamp (UTC), job, metric, labels, value | `crdscale.rundir.read_run(DIR).series`, pandas |
| `{PROBES}/` | per-step probe tables, when the scenario ran probes | `read_run(DIR).probe_table(NAME)` |
| `{LOGS}/` | kube-apiserver, etcd and kube-controller-manager logs of a local target | |
| `{ANALYSIS}/`, `{REPORT}/` | written by `crdscale analyze` and `crdscale report` | |
"""


@dataclass(frozen=True)
class ProfileName:
    kind: str
    step: int
    crds: int
    phase: str | None = None
    component: str = APISERVER  # whose profile: kube-apiserver's names carry no component

    @property
    def filename(self) -> str:
        suffix = f"-{self.phase}" if self.phase else ""
        prefix = "" if self.component == APISERVER else f"{self.component}-"
        return f"{prefix}{self.kind}-step{self.step:02d}-crds{self.crds:04d}{suffix}.pb.gz"

    @property
    def relative(self) -> str:
        """Path inside the run directory, e.g. ``profiles/heap-step03-crds0300.pb.gz``."""
        return f"{PROFILES}/{self.filename}"


def profile_filename(kind: str, step: int, crds: int, phase: str | None = None, component: str = APISERVER) -> str:
    """``profile_filename("heap", 3, 300)`` -> ``heap-step03-crds0300.pb.gz``; with ``component="etcd"``
    -> ``etcd-heap-step03-crds0300.pb.gz``."""
    return ProfileName(kind, step, crds, phase, component).filename


def parse_profile_filename(name: str) -> ProfileName | None:
    """Inverse of :func:`profile_filename`; ``None`` for names that do not match."""
    m = _PROFILE_RE.match(name)
    if not m:
        return None
    return ProfileName(m["kind"], int(m["step"]), int(m["crds"]), m["phase"], m["component"] or APISERVER)


# The LISTs a run that grew objects times after its last object step (objects.list_repeats):
# probes/objects-lists-stepNN.parquet, rows of crdscale.collect.probes.listcost.measure_targets.
OBJECT_LISTS = ("objects", "lists")


def probe_stem(name: str, table: str | None = None) -> str:
    """``list`` for a probe's main table, ``list-load`` for its side table ``load``."""
    return f"{name}-{table}" if table else name


def probe_table_relative(name: str, step: int, table: str | None = None) -> str:
    """``probes/list-step03.parquet`` or, for a side table, ``probes/list-load-step03.parquet``."""
    return f"{PROBES}/{probe_stem(name, table)}-step{step:02d}.parquet"


def parse_probe_table_name(filename: str) -> tuple[str, int] | None:
    """``list-load-step03.parquet`` -> ``("list-load", 3)``; ``None`` for other names."""
    m = _PROBE_RE.match(filename)
    return (m["stem"], int(m["step"])) if m else None


def is_run_directory(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def is_experiment_directory(path: str | Path) -> bool:
    return (Path(path) / EXPERIMENT_MANIFEST).is_file()
