"""What a pod's memory and CPU limits do to a cell of `crdscale run --cluster`, measured on the test node.

``memory``: large cells (provider-like generated CRDs as benchmarks/scale-5000.toml, 2,000 and 5,000
of them) each in a pod with a generous limit, so the limit does not shape the peak: the pod cgroup's
peak (``memory.max_usage_in_bytes``: page cache included, so etcd's files and the run directory
count), its anonymous part at its largest, each process's peak RSS from the host's ``/proc``
(kube-apiserver, etcd, kube-controller-manager, crdscale's Python, crdscale-client), against the
prediction ``run --cluster`` sized the pod from (``experiment.json``).

``cpu``: one small cell at several CPU limits (``--cpus``: a CFS quota below 1, whole CPUs above),
interleaved (0.5, 1, 2, 2, 1, 0.5 with ``--repeat 2``) so a drift of the shared machine's load falls
on every limit alike: install and Established time, informers' sync (``serve_s``), discovery wall
time, kube-apiserver CPU seconds per CRD, the harness's CPU share, heap per CRD, and the pod
cgroup's throttled time.

``--where node`` (default) needs what `crdscale up --node` and `crdscale image build` need (root,
containerd, runc, CNI plugins, debootstrap) and versitygw: it uses the node of ``--instance`` (or starts
one and stops it at the end), builds and loads the image, serves results from versitygw on the node
bridge's host address. ``--where local`` runs each cell here with `crdscale run` (no Prometheus, as in
the image) inside a cgroup limited as the kubelet limits a pod (``memory.limit_in_bytes``, a CFS quota
of CPUs x 100 ms): the same accounting, no node needed. Prints one JSON document (docs/results/
cluster.toml's pod-limit rows) and writes it to OUT/pod-limits-WHERE-MODE-HHMMSS.json, with each
cell's 1 s samples in OUT/pod-samples-*.csv.

    sudo PYTHONPATH=$PWD python scripts/pod_limits.py memory --instance NAME --out DIR   # heavy: under a lock
    sudo PYTHONPATH=$PWD python scripts/pod_limits.py cpu --instance NAME --out DIR [--cpus 0.5 1 2] [--repeat 2]
    sudo PYTHONPATH=$PWD python scripts/pod_limits.py cpu --where local --out DIR
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

IMAGE = "crdscale:pod-limits"
NAMESPACE = "crdscale-limits"
SECRET = "crdscale-results"
GIB = 2**30

# benchmarks/scale-5000.toml's CRDs (provider preset, 40 properties in forProvider, one served
# version, watched by client-go informers); COUNT and GROUPS filled in per cell.
LARGE = """\
name = "pod-memory-{count}"
[target]
kube_version = "1.37.1"
[crds]
source = "generate"
preset = "provider"
count = {count}
groups = {groups}
property_count = 40
versions = 1
seed = 1
[steps]
count = {steps}
serve = "watch"
settle_seconds = 10
establish_timeout_seconds = 1800
concurrency = 8
[profiles]
kinds = ["heap"]
installed_phase = false
"""
# (CRDs, groups, steps, pod memory limit): groups and steps as the scale benchmarks; the limits are
# well above the footprint prediction (7.1 and 15.5 GiB) so that the limit does not shape the peak.
LARGE_CELLS = {2000: (40, 4, "12GiB"), 5000: (100, 10, "20GiB")}

SMALL = """\
name = "pod-cpu"
[target]
kube_version = "1.37.1"
[crds]
source = "generate"
preset = "provider"
count = 200
groups = 10
property_count = 40
versions = 1
seed = 1
[steps]
count = 3
serve = "watch"
settle_seconds = 10
concurrency = 8
[probes]
each_step = ["discovery"]
[profiles]
kinds = ["heap"]
installed_phase = false
"""

# Process names (/proc/PID/comm, 15 characters at most) -> the part of the pod they are.
PARTS = {
    "kube-apiserver": "kube-apiserver",
    "etcd": "etcd",
    "kube-controller": "kube-controller-manager",
    "crdscale": "crdscale (Python)",
    "python3": "crdscale (Python)",
    "python": "crdscale (Python)",
    "crdscale-client": "crdscale-client",
}


def crdscale(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "crdscale", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        raise SystemExit(f"crdscale {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stat(path: Path) -> dict[str, int]:
    text = _read(path) or ""
    return {k: int(v) for k, v in (line.split() for line in text.splitlines() if len(line.split()) == 2)}


def _rss(pid: str) -> tuple[str, int] | None:
    """(comm, VmRSS bytes) of a process, None when it is gone."""
    comm, status = _read(Path(f"/proc/{pid}/comm")), _read(Path(f"/proc/{pid}/status"))
    if comm is None or status is None:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return comm.strip(), int(line.split()[1]) * 1024
    return comm.strip(), 0


def hierarchy(root: Path, controller: str) -> Path:
    """The cgroup v1 hierarchy holding ``controller``: its own mount, or a co-mount such as
    ``cpu,cpuacct`` (only a directory with ``cgroup.procs`` is one: the tmpfs above takes any mkdir)."""
    for path in [root / controller, *sorted(root.glob(f"*{controller}*"))]:
        if (path / "cgroup.procs").is_file() and controller in path.name.split(","):
            return path
    raise SystemExit(f"no cgroup v1 hierarchy with {controller} under {root}")


@dataclass
class PodPeaks:
    """What one pod's cgroup and processes reached (bytes; CPU in seconds)."""

    uid: str
    max_usage: int = 0  # memory.max_usage_in_bytes: anon + page cache, the kernel's own peak
    limit: int = 0
    failcnt: int = 0
    peak_rss: int = 0  # the cgroup's anonymous memory (memory.stat total_rss) at its largest
    cache_at_peak_rss: int = 0
    peak_cache: int = 0
    parts: dict[str, int] = field(default_factory=dict)  # part -> its processes' peak RSS (summed per sample)
    peak_process_sum: int = 0  # the pod's processes' RSS summed, at its largest
    parts_at_peak_sum: dict[str, int] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    throttled_seconds: float = 0.0
    throttled_periods: int = 0
    samples: int = 0


class PodSampler(threading.Thread):
    """Every ``interval_s``, every pod cgroup under the node's ``kubepods``: memory and CPU from the
    cgroup v1 files, each process's RSS from /proc (found through the pids hierarchy). A pod's
    cgroup goes soon after the pod ends, so its numbers are the last ones seen."""

    def __init__(self, cgroup_root: str, csv_path: Path, interval_s: float = 1.0):
        super().__init__(daemon=True)
        from crdscale.cluster.node import CGROUP_ROOT

        self.root = cgroup_root.strip("/")
        self.cgroups = CGROUP_ROOT
        self.interval_s = interval_s
        self.pods: dict[str, PodPeaks] = {}
        self.stopped = threading.Event()
        self.csv = open(csv_path, "w", newline="")  # noqa: SIM115 -- closed in run()
        self.writer = csv.writer(self.csv)
        self.writer.writerow(
            ["t", "pod", "usage", "max_usage", "rss", "cache", "cpu_s", "throttled_s", *sorted(set(PARTS.values()))]
        )

    def pod_dirs(self) -> dict[str, str]:
        """uid -> the pod's cgroup path below the hierarchy root (Guaranteed pods sit in kubepods itself);
        for a local cell (:class:`LocalCell`) its own cgroup."""
        if self.root.startswith(LOCAL_CGROUP_PREFIX):
            return {self.root.rsplit("/", 1)[-1]: self.root}
        base = self.cgroups / "memory" / self.root / "kubepods"
        found = {}
        for pattern in ("pod*", "*/pod*"):
            for path in base.glob(pattern) if base.is_dir() else ():
                found[path.name[3:]] = str(path.relative_to(self.cgroups / "memory"))
        return found

    def sample(self) -> None:
        now = time.time()
        for uid, rel in self.pod_dirs().items():
            mem = self.cgroups / "memory" / rel
            peaks = self.pods.setdefault(uid, PodPeaks(uid))
            usage, max_usage = _read(mem / "memory.usage_in_bytes"), _read(mem / "memory.max_usage_in_bytes")
            if usage is None or max_usage is None:
                continue
            stat = _stat(mem / "memory.stat")
            rss, cache = stat.get("total_rss", 0), stat.get("total_cache", 0)
            peaks.max_usage = max(peaks.max_usage, int(max_usage))
            peaks.limit = int(_read(mem / "memory.limit_in_bytes") or 0)
            peaks.failcnt = int(_read(mem / "memory.failcnt") or 0)
            if rss > peaks.peak_rss:
                peaks.peak_rss, peaks.cache_at_peak_rss = rss, cache
            peaks.peak_cache = max(peaks.peak_cache, cache)
            usage_ns = _read(hierarchy(self.cgroups, "cpuacct") / rel / "cpuacct.usage")
            if usage_ns:
                peaks.cpu_seconds = int(usage_ns) / 1e9
            cpu_stat = _stat(hierarchy(self.cgroups, "cpu") / rel / "cpu.stat")
            peaks.throttled_seconds = cpu_stat.get("throttled_time", 0) / 1e9
            peaks.throttled_periods = cpu_stat.get("nr_throttled", 0)
            parts: dict[str, int] = {}
            for procs in (self.cgroups / "pids" / rel).rglob("cgroup.procs"):
                for pid in (_read(procs) or "").split():
                    got = _rss(pid)
                    if got:
                        part = PARTS.get(got[0], "other")
                        parts[part] = parts.get(part, 0) + got[1]
            for part, value in parts.items():
                peaks.parts[part] = max(peaks.parts.get(part, 0), value)
            if sum(parts.values()) > peaks.peak_process_sum:
                peaks.peak_process_sum, peaks.parts_at_peak_sum = sum(parts.values()), parts
            peaks.samples += 1
            self.writer.writerow(
                [f"{now:.1f}", uid, usage.strip(), max_usage.strip(), rss, cache, f"{peaks.cpu_seconds:.2f}",
                 f"{peaks.throttled_seconds:.2f}", *(parts.get(p, 0) for p in sorted(set(PARTS.values())))]
            )  # fmt: skip

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                started = time.monotonic()
                self.sample()
                self.stopped.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
        finally:
            self.csv.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join()


@dataclass
class Setup:
    instance: str
    cgroup_root: str
    kubeconfig: str
    bucket: str
    env: dict
    s3: object
    own_node: bool


def setup(instance: str | None, out: Path) -> Setup:
    from crdscale.cluster import node
    from crdscale.cluster.local import LocalControlPlane
    from crdscale.results.versitygw import LocalS3

    own = instance is None
    if own:
        instance = f"limits-{os.getpid()}"
        crdscale("up", "--node", "--name", instance)
    cp = LocalControlPlane.attach(instance)
    crdscale("image", "build", "--out", str(out / "image.tar"), "--tag", IMAGE)
    crdscale("image", "load", str(out / "image.tar"), "--instance", instance)
    s3 = LocalS3(root=out / "s3", host=node.host_address(cp.state)).start()
    bucket = s3.make_bucket("results")
    cluster = cp.connect()
    cluster.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    path = f"/api/v1/namespaces/{NAMESPACE}/secrets"
    cluster.delete(f"{path}/{SECRET}")  # a new server, new keys
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET}, "stringData": s3.client_env()}
    cluster.post(path, secret)
    cluster.close()
    env = {**s3.client_env(), "AWS_SHARED_CREDENTIALS_FILE": str(out / "none")}
    return Setup(instance, cp.state["node"]["cgroup"], str(cp.kubeconfig), bucket, env, s3, own)


def teardown(s: Setup) -> None:
    s.s3.stop()
    if s.own_node:
        crdscale("down", s.instance)


def run_cell(s: Setup, scenario: Path, label: str, out: Path, *, cpus: float, memory: str | None) -> dict:
    """One ``run --cluster`` of ``scenario`` with the pod sampled throughout; its facts."""
    from crdscale.scenario import fanout
    from crdscale.scenario.clusterjob import CLUSTER_KEY, gather
    from crdscale.scenario.experiment import Experiment

    # --cluster runs a [matrix]'s cells: the version becomes a one-value axis (one Job index).
    matrix = scenario.with_name(f"{scenario.stem}-matrix.toml")
    matrix.write_text(
        scenario.read_text().replace('kube_version = "1.37.1"\n', "", 1)
        + '\n[matrix]\n"target.kube_version" = ["1.37.1"]\n'
    )
    sampler = PodSampler(s.cgroup_root, out / f"pod-samples-{label}.csv")
    sampler.start()
    args = [
        "run", str(matrix), "--cluster", "--kubeconfig", s.kubeconfig, "--namespace", NAMESPACE, "--image", IMAGE,
        "--parallelism", "1", "--cpus", f"{cpus:g}", "--results", f"{s.bucket}/limits", "--results-secret", SECRET,
        "--out", str(out / label),
    ]  # fmt: skip
    if memory:
        args += ["--memory", memory]
    started = time.monotonic()
    proc = crdscale(*args, env=s.env, check=False)
    seconds = time.monotonic() - started
    time.sleep(2)
    sampler.stop()
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
    experiment = Experiment.open(next(p for p in (out / label).iterdir() if (p / "experiment.json").is_file()))
    os.environ.update(s.env)
    gather(experiment)
    table = experiment.manifest[CLUSTER_KEY]
    (predicted,) = table["predicted_peak_bytes"].values()  # one cell per experiment here
    facts: dict = {
        "label": label,
        "cpus": cpus,
        "memory_limit": table["jobs"][-1]["resources"]["memory"] if table.get("jobs") else memory,
        # What run --cluster would have requested without --memory: the prediction + 25 %.
        "default_request_gib": round(fanout.pod_resources([predicted["value"]], 1).memory_bytes / GIB, 2),
        "wall_seconds": round(seconds, 1),
        "exit": proc.returncode,
        "predicted_gib": round(predicted["value"] / GIB, 2),
        "predicted_high_gib": round(predicted["high"] / GIB, 2),
        "pods": [pod_facts(p) for p in sampler.pods.values() if p.samples],
    }
    runs = experiment.completed_runs()
    if runs:
        facts["run"] = run_facts(Path(runs[0][1]))
        first = facts["run"].pop("first_step_epoch", None)
        if first is not None:
            facts["pod_at_0_crds"] = pod_at(out / f"pod-samples-{label}.csv", first)
    return facts


def pod_at(samples_csv: Path, epoch: float) -> dict | None:
    """The pod's last sample before ``epoch`` (the first step's start: control plane up, 0 CRDs), in GiB."""
    import pandas as pd

    samples = pd.read_csv(samples_csv)
    before = samples[samples["t"] <= epoch]
    if before.empty:
        return None
    row = before.iloc[-1]
    parts = {p: round(float(row[p]) / GIB, 3) for p in sorted(set(PARTS.values())) if p in row}
    return {
        "usage_gib": round(float(row["usage"]) / GIB, 3),
        "anon_gib": round(float(row["rss"]) / GIB, 3),
        "process_sum_gib": round(sum(parts.values()), 3),
        "parts_gib": parts,
    }


LOCAL_CGROUP_PREFIX = "pod-limits-"
CFS_PERIOD_US = 100_000  # the kubelet's cpuCFSQuotaPeriod default


class LocalCell:
    """A cgroup of this machine limited as the kubelet limits a pod (memory.limit_in_bytes, a CFS
    quota of ``cpus`` x the 100 ms period), for a cell run here by ``crdscale run`` inside it: the
    same accounting as a pod's cgroup (page cache included), without a node."""

    CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")

    def __init__(self, label: str, *, cpus: float, memory_bytes: int):
        from crdscale.cluster.node import CGROUP_ROOT

        self.rel = f"{LOCAL_CGROUP_PREFIX}{os.getpid()}/{label}"
        roots = {c: hierarchy(CGROUP_ROOT, c) for c in self.CONTROLLERS}
        self.dirs = [r / self.rel for r in dict.fromkeys(roots.values())]  # a co-mount once
        for d in self.dirs:
            d.mkdir(parents=True, exist_ok=True)
        mem, cpu = roots["memory"] / self.rel, roots["cpu"] / self.rel
        (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
        (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(int(cpus * CFS_PERIOD_US)))

    def join(self) -> None:
        """Move the calling process into the cgroup (a preexec_fn: the child joins before exec)."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        for d in self.dirs:
            for path in (d, d.parent):
                try:
                    path.rmdir()
                except OSError:
                    pass


def run_local_cell(scenario: Path, label: str, out: Path, *, cpus: float, memory: str) -> dict:
    """One ``crdscale run`` of ``scenario`` here, in a :class:`LocalCell`, sampled throughout; its facts."""
    from crdscale.scenario import fanout
    from crdscale.scenario.clusterjob import predict_peak_bytes
    from crdscale.scenario.config import load_scenario
    from crdscale.units import parse_bytes

    predicted = predict_peak_bytes(load_scenario(scenario))
    cell = LocalCell(label, cpus=cpus, memory_bytes=parse_bytes(memory))
    sampler = PodSampler(cell.rel, out / f"pod-samples-{label}.csv")
    sampler.start()
    started = time.monotonic()
    # No Prometheus, as in a pod (the image has none): the cell scrapes directly.
    argv = [sys.executable, "-m", "crdscale", "run", str(scenario), "--set", 'metrics.source="direct"']
    proc = subprocess.run([*argv, "--out", str(out / label)], capture_output=True, text=True, preexec_fn=cell.join)
    seconds = time.monotonic() - started
    time.sleep(2)
    sampler.stop()
    cell.remove()
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
    facts: dict = {
        "label": label,
        "where": "local cgroup (the kubelet's limits: memory.limit_in_bytes, CFS quota)",
        "cpus": cpus,
        "memory_limit": memory,
        "default_request_gib": round(fanout.pod_resources([predicted.value], 1).memory_bytes / GIB, 2),
        "wall_seconds": round(seconds, 1),
        "exit": proc.returncode,
        "predicted_gib": round(predicted.value / GIB, 2),
        "predicted_high_gib": round(predicted.high / GIB, 2),
        "pods": [pod_facts(p) for p in sampler.pods.values() if p.samples],
    }
    run_dir = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    if run_dir is not None and run_dir.is_dir():
        facts["run"] = run_facts(run_dir)
        first = facts["run"].pop("first_step_epoch", None)
        if first is not None:
            facts["pod_at_0_crds"] = pod_at(out / f"pod-samples-{label}.csv", first)
    return facts


def pod_facts(p: PodPeaks) -> dict:
    return {
        "uid": p.uid,
        "samples": p.samples,
        "limit_gib": round(p.limit / GIB, 2),
        "max_usage_gib": round(p.max_usage / GIB, 3),
        "failcnt": p.failcnt,
        "peak_anon_gib": round(p.peak_rss / GIB, 3),
        "cache_at_peak_anon_gib": round(p.cache_at_peak_rss / GIB, 3),
        "peak_cache_gib": round(p.peak_cache / GIB, 3),
        "part_peaks_gib": {k: round(v / GIB, 3) for k, v in sorted(p.parts.items())},
        "peak_process_sum_gib": round(p.peak_process_sum / GIB, 3),
        "parts_at_peak_sum_gib": {k: round(v / GIB, 3) for k, v in sorted(p.parts_at_peak_sum.items())},
        "cpu_seconds": round(p.cpu_seconds, 1),
        "throttled_seconds": round(p.throttled_seconds, 1),
        "throttled_periods": p.throttled_periods,
    }


def run_facts(path: Path) -> dict:
    """The cell's own numbers, from its run directory: times, CPU, heap per CRD, harness share."""
    import pandas as pd

    from crdscale.rundir import read_run

    run = read_run(path)
    events = [e for e in run.read_jsonl("events.jsonl")]
    steps = [e for e in events if e.get("kind") == "step.end" and "install_s" in e]
    established = [e for e in events if e.get("kind") == "established"]
    series = run.series
    crds = steps[-1]["crds"] if steps else 0
    starts = [e["ts"] for e in events if e.get("kind") == "step.start"]

    def peak(job: str, metric: str = "process_resident_memory_bytes") -> float | None:
        rows = series[(series["job"] == job) & (series["metric"] == metric)]
        return float(rows["value"].max()) if len(rows) else None

    cpu = series[(series["job"] == "kube-apiserver-proc") & (series["metric"] == "process_cpu_seconds_total")]
    first = pd.Timestamp(starts[0]) if starts else None
    apiserver_rss = series[
        (series["job"] == "kube-apiserver-proc") & (series["metric"] == "process_resident_memory_bytes")
    ]
    at_0 = (
        apiserver_rss[apiserver_rss["timestamp"] <= first]["value"] if first is not None else apiserver_rss["value"][:0]
    )
    facts = {
        "run": path.name,
        "first_step_epoch": first.timestamp() if first is not None else None,
        "apiserver_rss_at_0_gib": round(float(at_0.iloc[-1]) / GIB, 3) if len(at_0) else None,
        "crds": crds,
        "install_s": round(sum(e["install_s"] for e in steps), 1),
        "established_s": round(sum(e.get("duration_s", 0) for e in established), 1),
        "serve_s": round(sum(e.get("serve_s") or 0 for e in steps), 1),
        "elapsed_s": round(steps[-1]["elapsed_s"], 1) if steps else None,
        "apiserver_rss_peak_gib": round((peak("kube-apiserver-proc") or 0) / GIB, 3),
        "kcm_rss_peak_gib": round((peak("kube-controller-manager-proc") or 0) / GIB, 3),
        "etcd_rss_peak_gib": round((peak("etcd") or 0) / GIB, 3),
        "apiserver_cpu_s": round(float(cpu["value"].max() - cpu["value"].min()), 1) if len(cpu) else None,
        "harness": run.manifest.get("harness"),
    }
    if crds and facts["apiserver_cpu_s"] is not None:
        facts["apiserver_cpu_s_per_crd"] = round(facts["apiserver_cpu_s"] / crds, 3)
    if run.has_probe_table("discovery"):
        # A cold client's discovery after each step, median over the steps (ms): client-go with its
        # default limiter, and the two-request aggregated discovery.
        disc = run.probe_table("discovery").dropna(subset=["wall_s"])
        client_go = disc[(disc["mode"] == "client-go") & (disc["limit"] != "disabled")]
        facts["discovery_ms"] = {
            "client-go": round(float(client_go["wall_s"].median()) * 1e3, 1),
            "aggregated": round(float(disc[disc["mode"] == "aggregated"]["wall_s"].median()) * 1e3, 1),
        }
    crdscale("analyze", str(path))
    percrd = path / "analysis" / "percrd.csv"
    if percrd.is_file():
        table = pd.read_csv(percrd)
        from crdscale.analysis.targets import TOTAL

        heap = table[(table["metric"] == "bytes") & (table["cause"] == TOTAL)]
        facts["heap_per_crd_kb"] = {
            row.phase: [round(row.per_crd / 1e3, 1), round(row.per_crd_low / 1e3, 1), round(row.per_crd_high / 1e3, 1)]
            for row in heap.itertuples()
        }
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["memory", "cpu"])
    parser.add_argument("--instance", help="a running instance with a node (default: start one, stop it at the end)")
    parser.add_argument("--out", type=Path, required=True, help="working directory")
    parser.add_argument("--counts", type=int, nargs="+", default=sorted(LARGE_CELLS), help="memory: CRD counts")
    parser.add_argument("--cpus", type=float, nargs="+", default=[0.5, 1, 2], help="cpu: the limits compared")
    parser.add_argument("--repeat", type=int, default=2, help="cpu: runs per limit (interleaved)")
    parser.add_argument(
        "--where",
        choices=["node", "local"],
        default="node",
        help="node: pods of run --cluster on the test node; local: crdscale run here in a cgroup with the same limits",
    )
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"mode": args.mode, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cells": []}
    load = os.getloadavg()
    result["load_before"] = [round(x, 2) for x in load]
    local = args.where == "local"
    s = None if local else setup(args.instance, out)

    def cell(scenario: Path, label: str, cpus: float, memory: str) -> dict:
        if local:
            return run_local_cell(scenario, label, out, cpus=cpus, memory=memory)
        return run_cell(s, scenario, label, out, cpus=cpus, memory=memory)

    try:
        if args.mode == "memory":
            for count in args.counts:
                groups, steps, memory = LARGE_CELLS[count]
                scenario = out / f"pod-memory-{count}.toml"
                scenario.write_text(LARGE.format(count=count, groups=groups, steps=steps))
                facts = cell(scenario, f"{args.where}-memory-{count}", 2, memory)
                result["cells"].append(facts)
                print(json.dumps(facts), file=sys.stderr)
        else:
            scenario = out / "pod-cpu.toml"
            scenario.write_text(SMALL)
            order = []
            for r in range(args.repeat):
                order += args.cpus if r % 2 == 0 else list(reversed(args.cpus))
            for i, cpus in enumerate(order):
                facts = cell(scenario, f"{args.where}-cpu-{cpus:g}-{i}", cpus, "4GiB")
                result["cells"].append(facts)
                print(json.dumps(facts), file=sys.stderr)
    finally:
        if s is not None:
            teardown(s)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    result["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    text = json.dumps(result, indent=2)
    (out / f"pod-limits-{args.where}-{args.mode}-{time.strftime('%H%M%S')}.json").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
