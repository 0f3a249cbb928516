"""`crdscale run` end to end on the real local control plane: a completed run,
Ctrl-C in the middle of a step, the API server dying mid-run, and a remote target
given as kubeconfig + Prometheus URL."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from crdscale.cli.main import main
from crdscale.cluster.local import LocalControlPlane
from crdscale.collect.sources import LocalPrometheus
from crdscale.paths import instances_dir
from crdscale.rundir import layout, read_run

REPO = Path(__file__).resolve().parents[2]

SMALL = """\
name = "small"
[crds]
count = 60
groups = 6
property_count = 20
[steps]
count = 3
serve = "watch"
settle_seconds = 2
[metrics]
scrape_interval_seconds = 1
apiserver_metrics_interval_seconds = 5  # the default 20 s would leave a short run two samples
apiserver_cpu_budget_percent = 0  # a fixed cadence to check gaps against (the budget: test_collect_sources_cadence)
"""


def _only_run(parent: Path) -> Path:
    runs = [p for p in parent.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def _events(run: Path) -> list[dict]:
    return read_run(run).read_jsonl(layout.EVENTS)


def _check_readable(run: Path) -> dict:
    manifest = json.loads((run / "manifest.json").read_text())
    _events(run)
    for profile in (run / "profiles").glob("*.pb.gz"):
        gzip.decompress(profile.read_bytes())
    for table in (run / "metrics").glob("*.parquet"):
        pd.read_parquet(table)
    assert not list(run.rglob("*.tmp")), "half-written files left behind"
    return manifest


def _no_credentials_in(run: Path, plane_token: str | None = None) -> None:
    for f in run.rglob("*"):
        if f.is_file():
            assert f.name not in ("tokens.csv", "admin.token", "ca.key", "apiserver.key", "sa.key", "kubeconfig")
            if plane_token:
                assert plane_token.encode() not in f.read_bytes(), f


def test_small_scenario_completes_with_profiles_and_metrics(tmp_path):
    scenario = tmp_path / "small.toml"
    scenario.write_text(
        SMALL.replace("settle_seconds = 2", "settle_seconds = 2\nhold_seconds = 3")
        + '[profiles]\nkinds = ["heap", "goroutine", "cpu"]\ncpu_seconds = 2\n'
    )
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs")]) == 0
    run = _only_run(tmp_path / "runs")
    manifest = _check_readable(run)
    assert manifest["status"] == "completed" and manifest["reason"] is None
    assert manifest["versions"]["kube-apiserver"] == "v1.37.1" and manifest["versions"]["etcd"] == "v3.6.16"
    assert manifest["crds"]["count"] == 60 and len(manifest["crds"]["sha256"]) == 64

    profiles = sorted(p.name for p in (run / "profiles").iterdir())
    for name in [
        "heap-step00-crds0000.pb.gz",
        "heap-step01-crds0020.pb.gz",
        "heap-step02-crds0040.pb.gz",
        "heap-step03-crds0060.pb.gz",
        "heap-step03-crds0060-installed.pb.gz",
        "goroutine-step03-crds0060.pb.gz",
        "cpu-step01-crds0020-install.pb.gz",
    ]:
        assert name in profiles
    from crdscale.collect.pprof import read_profile

    for name in profiles:
        read_profile(run / "profiles" / name)  # parses as pprof

    steps = [e for e in _events(run) if e["kind"] == "step.end"]
    assert [e["crds"] for e in steps] == [20, 40, 60]
    assert [e["seconds"] for e in _events(run) if e["kind"] == "hold.start"] == [3]
    # /proc sampling is the complete series (3x the 1 s interval, to the end); the /metrics
    # scrapes only have to reach the end: on a loaded machine one scrape can outlast the interval.
    proc = manifest["metrics"]["resolution_proc"]
    assert proc["max_gap_s"] <= 3 and proc["end_gap_s"] <= 3
    assert manifest["metrics"]["resolution"]["end_gap_s"] <= 10
    assert (run / layout.PROMETHEUS_TSDB).is_dir() and manifest["binaries"]["prometheus"]["sha256"]
    assert not _instance_processes_left(manifest["run_id"])

    series = pd.read_parquet(run / "metrics" / "series.parquet")
    window = manifest["metrics"]["window"]
    start, end = pd.Timestamp(window["start"]), pd.Timestamp(window["end"])
    # /proc at the run's 1 s interval; kube-apiserver's /metrics at its own (longer) interval.
    apiserver_s = manifest["metrics"]["job_interval_s"]["kube-apiserver"]
    for job, seconds in (("kube-apiserver-proc", 1), ("kube-apiserver", apiserver_s)):
        rss = series[(series.metric == "process_resident_memory_bytes") & (series.job == job)]
        interval = pd.Timedelta(seconds=seconds)
        assert rss.timestamp.min() <= start + 2 * interval, job
        assert rss.timestamp.max() >= end - 3 * interval, job
        gaps = rss.timestamp.sort_values().diff().dropna()
        assert gaps.max() <= 3 * interval and abs(gaps.median() - interval) < pd.Timedelta(seconds=0.2), (
            job,
            gaps.describe(),
        )
    assert apiserver_s >= 5
    assert RECORDED_EVERYWHERE <= set(series.metric)
    _no_credentials_in(run)
    # The controller-manager ran beside it (on by default): recorded, scraped and sampled.
    kcm = "kube-controller-manager"
    assert manifest["versions"][kcm] == "v1.37.1"
    binary = manifest["binaries"][kcm]
    assert binary["sha256"] == hashlib.sha256(Path(binary["path"]).read_bytes()).hexdigest()
    assert manifest["controller_manager"]["enabled"] and manifest["controller_manager"]["controllers"] == [
        "*",
        "-podgc",
    ]
    assert any(f.startswith("--service-account-private-key-file=") for f in manifest["controller_manager"]["flags"])
    for job in (kcm, layout.CONTROLLER_MANAGER_PROC_JOB):
        assert len(series[(series.job == job) & (series.metric == "process_resident_memory_bytes")]) >= 3, job
    assert (run / "logs" / f"{kcm}.log").is_file()


# Recorded series every kube-apiserver version exposes, histograms and summaries included: a
# scrape that negotiates native histograms (or filters families by name[]) must not lose them.
RECORDED_EVERYWHERE = {
    "process_open_fds",
    "go_memstats_heap_inuse_bytes",
    "apiserver_request_total",
    "apiserver_request_duration_seconds_bucket",
    "apiserver_request_duration_seconds_count",
    "etcd_request_duration_seconds_count",
    "go_gc_duration_seconds_count",
}


def _start_run(tmp_path: Path, scenario_text: str) -> tuple[subprocess.Popen, Path]:
    scenario = tmp_path / "s.toml"
    scenario.write_text(scenario_text)
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "run", str(scenario), "--out", str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, out


def _wait_for_event(out: Path, predicate, timeout_s: float = 180) -> tuple[Path, dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if out.is_dir():
            for run in out.iterdir():
                if (run / "events.jsonl").is_file():
                    for event in _events(run):
                        if predicate(event):
                            return run, event
        time.sleep(0.1)
    raise AssertionError("event never seen")


def _instance_processes_left(run_id: str) -> bool:
    return (instances_dir() / f"run-{run_id}").exists()


def _instance_processes(run_id: str):
    return LocalControlPlane.attach(f"run-{run_id}").processes


def test_sigint_mid_step_leaves_an_interrupted_readable_run_and_no_process(tmp_path):
    # Slow enough that the signal lands mid-run: after step 2 starts, four 5-second settles are left. Each
    # settle before it (baseline, step 1 installed, step 1) is waited for, so no longer than that.
    slow = SMALL.replace("settle_seconds = 2", "settle_seconds = 5")
    proc, out = _start_run(tmp_path, slow)
    run, _ = _wait_for_event(out, lambda e: e["kind"] == "step.start" and e["step"] == 2)
    run_id = json.loads((run / "manifest.json").read_text())["run_id"]
    records = _instance_processes(run_id)
    assert records and all(r.alive() for r in records)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr.splitlines()[-1]
    manifest = _check_readable(run)
    assert manifest["status"] == "interrupted" and "SIGINT" in manifest["reason"]
    assert not any(r.alive() for r in records)
    assert not (instances_dir() / f"run-{run_id}").exists()
    assert (run / "metrics" / "series.parquet").is_file()  # what was collected is kept


def test_kill_9_of_the_runner_loses_no_series_and_down_leaves_no_process(tmp_path):
    """An OOM kill or a closed laptop: the manifest stays 'running', the run reads as
    'abandoned', `crdscale down` stops everything (Prometheus too) and `crdscale recover`
    exports the series collected up to the kill from the run's own Prometheus database."""
    slow = SMALL.replace("settle_seconds = 2", "settle_seconds = 5")  # as the SIGINT test's
    proc, out = _start_run(tmp_path, slow)
    run, _ = _wait_for_event(out, lambda e: e["kind"] == "step.start" and e["step"] == 2)
    time.sleep(3)  # a few scrapes into step 2
    run_id = json.loads((run / "manifest.json").read_text())["run_id"]
    records = _instance_processes(run_id)
    assert {"etcd", "kube-apiserver", "prometheus"} <= {r.name for r in records}
    assert all(r.alive() for r in records)
    prometheus_dir = instances_dir() / f"run-{run_id}" / "prometheus"  # its config and log, not in /tmp
    assert (prometheus_dir / "prometheus.yml").is_file()
    killed_at = pd.Timestamp.now(tz="UTC")
    proc.kill()
    proc.communicate(timeout=30)
    assert read_run(run).status == "abandoned"
    assert all(r.alive() for r in records)  # nothing stops them but us
    assert main(["down", f"run-{run_id}"]) == 0
    assert not any(r.alive() for r in records)
    assert not prometheus_dir.exists()
    assert main(["recover", str(run)]) == 0
    recovered = read_run(run)
    assert recovered.status == "abandoned" and "runner died" in recovered.manifest["reason"]
    rss = recovered.series[recovered.series.metric == "process_resident_memory_bytes"]
    assert len(rss) >= 10
    # Both recordings survive: /metrics from the Prometheus database, /proc from the chunks.
    assert {"kube-apiserver", "kube-apiserver-proc"} <= set(rss.job)
    started = pd.Timestamp(recovered.manifest["started_at"])
    assert rss.timestamp.max() >= killed_at - pd.Timedelta(seconds=5)  # up to the kill
    assert rss.timestamp.min() >= started - pd.Timedelta(seconds=1)


def test_apiserver_death_fails_the_run_within_30_seconds(tmp_path):
    # The kill lands as step 1's first settle starts; the settle outlasts the 30 s the run has to fail in,
    # so only the death can end it. (The baseline settle before it is waited for too: no longer than that.)
    slow = SMALL.replace("settle_seconds = 2", "settle_seconds = 40")
    proc, out = _start_run(tmp_path, slow)
    run, _ = _wait_for_event(out, lambda e: e["kind"] == "settle.start" and e.get("label", "").startswith("step 1"))
    run_id = json.loads((run / "manifest.json").read_text())["run_id"]
    apiserver = next(r for r in _instance_processes(run_id) if r.name == "kube-apiserver")
    killed_at = time.monotonic()
    os.kill(apiserver.pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - killed_at < 30
    assert proc.returncode != 0
    manifest = _check_readable(run)
    assert manifest["status"] == "failed" and "kube-apiserver" in manifest["reason"]
    assert len(stderr.strip().splitlines()[-1]) < 400


def test_remote_target_by_kubeconfig_and_prometheus_url(tmp_path):
    with LocalControlPlane(name=f"remote-{os.getpid()}") as plane:
        creds = plane.credentials
        prom = LocalPrometheus(
            f"127.0.0.1:{plane.ports['apiserver']}",
            creds.ca_cert,
            creds.admin_token_file,
            f"127.0.0.1:{plane.ports['etcd_client']}",
        ).start()
        try:
            scenario = tmp_path / "remote.toml"
            scenario.write_text(SMALL.replace("count = 60", "count = 30").replace("groups = 6", "groups = 3"))
            code = main(
                [
                    "run",
                    str(scenario),
                    "--out",
                    str(tmp_path / "runs"),
                    "--kubeconfig",
                    str(plane.kubeconfig),
                    "--prometheus-url",
                    prom.url,
                ]
            )
            assert code == 0
            run = _only_run(tmp_path / "runs")
            manifest = _check_readable(run)
            assert manifest["status"] == "completed"
            assert manifest["target"]["kind"] == "kubeconfig" and manifest["metrics"]["source"] == "remote-prometheus"
            series = pd.read_parquet(run / "metrics" / "series.parquet")
            assert (series.metric == "process_resident_memory_bytes").any()
            assert (run / "profiles" / "heap-step03-crds0030.pb.gz").is_file()
            _no_credentials_in(run, creds.admin_token())
            # it cleaned nothing up and left the user's cluster running
            assert plane.connect().server_version() == "v1.37.1"
        finally:
            prom.stop()


def test_unreachable_cluster_fails_in_seconds(tmp_path, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
        "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: x}\n"
    )
    started = time.monotonic()
    code = main(["run", "--kubeconfig", str(kubeconfig), "--yes", "--out", str(tmp_path / "runs")])
    assert time.monotonic() - started < 15
    assert code == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("crdscale: error: run failed: target unreachable") and "127.0.0.1:1" in err[-1]
    run = _only_run(tmp_path / "runs")
    assert json.loads((run / "manifest.json").read_text())["status"] == "failed"


def test_without_prometheus_metrics_come_from_direct_scrapes(tmp_path):
    scenario = tmp_path / "direct.toml"
    scenario.write_text(
        SMALL.replace("count = 60", "count = 20")
        .replace("groups = 6", "groups = 2")
        .replace("count = 3", "count = 2")
        .replace("[metrics]\n", '[metrics]\nsource = "direct"\n')
    )
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs")]) == 0
    run = _only_run(tmp_path / "runs")
    manifest = _check_readable(run)
    assert manifest["status"] == "completed" and manifest["metrics"]["source"] == "direct-scrape"
    series = pd.read_parquet(run / "metrics" / "series.parquet")
    rss = series[(series.metric == "process_resident_memory_bytes") & (series.job == "kube-apiserver")]
    gaps = rss.timestamp.sort_values().diff().dropna()
    assert len(rss) >= 5 and gaps.median() < pd.Timedelta(seconds=1.5)  # one scrape a second
    assert (series.job == "etcd").any()
    assert RECORDED_EVERYWHERE <= set(series.metric)
