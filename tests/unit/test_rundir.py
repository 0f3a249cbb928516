"""The run-directory package: layout, writer, declared events, reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from crdscale.analysis.run import analyze_run
from crdscale.analysis.rundata import heap_points, heap_profile_set
from crdscale.errors import UsageError
from crdscale.rundir import EVENT_KINDS, EventLog, RunWriter, layout, read_events, read_run

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference-run"


def test_writer_round_trip_and_reader(tmp_path):
    run = RunWriter.create(tmp_path, "t")
    run.start_manifest(run_id="r1", scenario={"name": "t"}, scenario_file=None)
    assert run.manifest()["status"] == "running"
    run.update_manifest(versions={"kube-apiserver": "v1.37.1"})
    run.events.emit("metrics.start", source="direct-scrape")
    run.write_profile("heap", 0, 0, None, b"p0")
    run.write_profile("heap", 1, 20, "installed", b"p1i")
    run.write_profile("heap", 1, 20, None, b"p1")
    run.write_series(
        pd.DataFrame(
            {
                "timestamp": [pd.Timestamp.now(tz="UTC").floor("s")],  # inside the run: a sample of it
                "job": ["kube-apiserver"],
                "metric": ["go_goroutines"],
                "labels": ["{}"],
                "value": [1.0],
            }
        )
    )
    run.write_probe_table("list", 1, pd.DataFrame({"a": [1]}))
    run.write_probe_table("list", 1, pd.DataFrame({"b": [2]}), table="load")
    final = run.finish("interrupted", "SIGINT")

    again = read_run(run.path)
    assert again.manifest == final
    assert again.status == "interrupted" and again.manifest["reason"] == "SIGINT" and again.manifest["ended_at"]
    assert again.manifest["machine"]["cpus"] >= 1
    assert again.manifest["packages"]["pandas"] == pd.__version__
    assert {p.name for p in run.path.iterdir()} >= {
        "README.md",
        "crds",
        "manifest.json",
        "metrics",
        "probes",
        "profiles",
        "events.jsonl",
    }
    profiles = again.profiles
    assert profiles["file"].tolist() == [
        "profiles/heap-step00-crds0000.pb.gz",
        "profiles/heap-step01-crds0020-installed.pb.gz",
        "profiles/heap-step01-crds0020.pb.gz",
    ]
    assert profiles["timestamp"].notna().all() and profiles["crds"].tolist() == [0, 20, 20]
    assert again.profile_marks()["phase"].tolist() == ["served", "installed", "served"]
    assert again.profile_bytes(profiles["file"].iloc[1]) == b"p1i"
    assert again.series["value"].tolist() == [1.0] and str(again.series["timestamp"].dt.tz) == "UTC"
    assert again.start == again.events["ts"].iloc[0]
    main = again.probe_table("list")
    assert list(main.columns) == ["a", "step"] and main["step"].tolist() == [1]
    assert list(again.probe_table("list", "load").columns) == ["b", "step"]
    assert again.has_probe_table("list") and not again.has_probe_table("apf")
    assert again.probe_tables() == ["probes/list-load-step01.parquet", "probes/list-step01.parquet"]


def test_two_runs_in_the_same_second_get_different_directories(tmp_path):
    first, second = RunWriter.create(tmp_path, "same"), RunWriter.create(tmp_path, "same")
    assert first.path != second.path and second.path.name.startswith(first.path.name)


def test_read_run_rejects_what_is_not_a_run(tmp_path):
    with pytest.raises(UsageError, match="not a crdscale run directory"):
        read_run(tmp_path)
    with pytest.raises(UsageError, match="not a directory"):
        read_run(tmp_path / "nope")
    (tmp_path / layout.MANIFEST).write_text("{")
    with pytest.raises(UsageError, match="not JSON"):
        read_run(tmp_path)
    with pytest.raises(UsageError):
        RunWriter.open(tmp_path / "nope")


def test_a_running_run_whose_runner_is_gone_is_abandoned(tmp_path):
    run = RunWriter.create(tmp_path, "t")
    run.start_manifest(run_id="r1")
    assert read_run(run.path).status == "running"  # this process is its runner
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    run.update_manifest(runner={"pid": child.pid, "start_ticks": 1})
    assert read_run(run.path).status == "abandoned"


def test_events_must_be_declared_with_their_fields(tmp_path):
    with EventLog(tmp_path / "e.jsonl", fsync=False) as log:
        with pytest.raises(ValueError, match="undeclared event kind"):
            log.emit("step.finished", step=1)
        with pytest.raises(ValueError, match="missing fields \\['crds'"):
            log.emit("step.end", step=1, install_s=1.0, serve_s=0.0)
        with pytest.raises(ValueError, match="undeclared fields \\['crds_total'\\]"):
            log.emit("step.end", step=1, crds=10, crds_total=10, install_s=1.0, serve_s=0.0)
        log.emit("step.end", step=1, crds=10, install_s=1.0, serve_s=0.0)
    assert all(kind.doc for kind in EVENT_KINDS.values())


def test_every_emitted_kind_is_declared():
    """Static check: each literal kind passed to emit()/_emit() in the package is declared."""
    import re

    root = Path(__file__).resolve().parents[2] / "crdscale"
    kinds = set()
    for path in root.rglob("*.py"):
        kinds |= set(re.findall(r"\.?_?emit\(\s*\"([a-z.]+)\"", path.read_text()))
    assert kinds and kinds <= set(EVENT_KINDS), kinds - set(EVENT_KINDS)


def test_event_log_appends_json_lines_with_utc_timestamps(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventLog(path) as log:
        log.emit("step.start", step=1, crds_before=0, crds_in_step=100)
    with EventLog(path, fsync=False) as log:  # append, not truncate
        threads = [
            threading.Thread(target=log.emit, args=("probe.start",), kwargs={"probe": "list", "step": i})
            for i in range(20)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with open(path, "a") as f:
        f.write('{"ts": "torn')  # a writer killed mid-line
    events = list(read_events(path))
    assert events[0]["kind"] == "step.start" and events[0]["step"] == 1
    assert events[0]["ts"].endswith("Z") and "T" in events[0]["ts"]
    assert sorted(e["step"] for e in events[1:]) == list(range(20))


def test_reference_run_reads_as_a_typed_run():
    run = read_run(REFERENCE)
    assert run.status == "completed"
    heap = run.heap_profiles()
    assert heap["crds"].tolist()[0] == 0 and heap["crds"].max() == 160
    assert heap["timestamp"].notna().all()
    assert {"timestamp", "job", "metric", "labels", "value"} <= set(run.series.columns)
    assert run.crd_summary is None or isinstance(run.crd_summary, dict)
    analysis = analyze_run(run)
    assert analysis is analyze_run(run)  # decoded once
    assert analysis.run_dir == run.path and len(analysis.profiles) == len(heap)


def test_heap_points_are_the_one_converter_of_heap_profile_rows():
    """Every fit (analyze, compare, calibrate) takes its points from rundata.heap_points: a profile row
    without a phase (None, NaN or "") is the end of a step, ``served``; a profile set aside is no point."""
    import dataclasses

    run = read_run(Path(__file__).resolve().parents[2] / "data" / "reference-run")
    found = heap_profile_set(run)
    points = heap_points(run, profiles=found)
    assert set(points["phase"]) <= {"served", "installed"}
    pd.testing.assert_frame_equal(points, analyze_run(run).points)

    rows = found.rows.copy()
    served = rows.index[rows["phase"].isna()]
    rows["phase"] = rows["phase"].astype(object)
    rows.loc[served[0], "phase"] = ""
    rows.loc[served[1], "phase"] = float("nan")
    rows.loc[served[2], "phase"] = None
    again = heap_points(run, profiles=dataclasses.replace(found, rows=rows))
    pd.testing.assert_frame_equal(again, points)

    left_out = dataclasses.replace(found, rows=rows.drop(index=served[0]).reset_index(drop=True))
    fewer = heap_points(run, profiles=left_out)
    assert len(fewer) < len(points) and int(rows.loc[served[0], "crds"]) not in set(
        fewer.loc[fewer["phase"] == "served", "crds"]
    )


def test_read_runs_refuses_one_run_twice(tmp_path):
    from crdscale.rundir import read_runs

    reference = Path(__file__).resolve().parents[2] / "data" / "reference-run"
    os.symlink(reference, tmp_path / "link")
    with pytest.raises(UsageError, match="are the same run"):
        read_runs([reference, tmp_path / "link"])
    assert [r.path for r in read_runs([reference, reference.parent / "reference-run-v1.24.0"])][0] == reference


def test_only_the_rundir_package_spells_run_directory_file_names():
    root = Path(__file__).resolve().parents[2] / "crdscale"
    spelled = {
        p.parent.name
        for p in root.rglob("*.py")
        for name in (
            '"manifest.json"',
            '"events.jsonl"',
            '"series.parquet"',
            '"metrics/series.parquet"',
            # what `crdscale report` and `crdscale compare --out` write: run reports and comparisons alike
            '"report.html"',
            '"report-nocode.html"',
            '"findings.md"',
            '"findings.json"',
        )
        if name in p.read_text()
    }
    assert spelled <= {"rundir"}, spelled


def test_analysis_does_no_file_io_and_does_not_import_collect():
    root = Path(__file__).resolve().parents[2] / "crdscale" / "analysis"
    offenders = []
    for path in root.rglob("*.py"):
        text = path.read_text()
        for needle in (
            "crdscale.collect",
            "open(",
            ".read_text(",
            ".read_bytes(",
            ".write_text(",
            ".write_bytes(",
            "to_parquet(",
            "to_csv(",
            "read_parquet(",
            "read_csv(",
        ):
            if needle in text:
                offenders.append(f"{path.relative_to(root)}: {needle}")
    assert not offenders, offenders


def _abandoned_run(parent: Path) -> RunWriter:
    run = RunWriter.create(parent, "dead")
    run.start_manifest(run_id="r-dead")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    run.update_manifest(runner={"pid": child.pid, "start_ticks": 1})
    run.events.emit("step.start", step=1, crds_before=0, crds_in_step=10)
    return run


def _tidy(seconds: list[int], value: float) -> pd.DataFrame:
    t0 = pd.Timestamp.now(tz="UTC").floor("s")  # while the run went: samples of it
    return pd.DataFrame(
        {
            "timestamp": [t0 + pd.Timedelta(seconds=s) for s in seconds],
            "job": "kube-apiserver",
            "metric": "process_resident_memory_bytes",
            "labels": "{}",
            "value": value,
        }
    )


def test_direct_scrape_chunks_are_read_back_and_recovered(tmp_path, monkeypatch, capsys):
    from crdscale.cli.main import main

    run = _abandoned_run(tmp_path)
    run.write_series_chunk(_tidy([0, 1, 2], 1.0))
    run.write_series_chunk(_tidy([3, 4], 2.0))
    assert len(read_run(run.path).series) == 5  # readable before any recovery
    monkeypatch.setenv("CRDSCALE_RUNS", str(tmp_path))
    assert main(["status"]) == 0
    assert f"run {run.path}: abandoned" in capsys.readouterr().out
    assert main(["recover", str(run.path), "-o", "json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["series_source"] == "direct-scrape chunks" and done["series_rows"] == 5
    after = read_run(run.path)
    assert after.status == "abandoned" and (run.path / layout.SERIES).is_file()
    assert not (run.path / layout.SERIES_CHUNKS).exists()
    assert main(["recover", str(run.path)]) == 0  # again: nothing to redo, still fine


def test_recover_refuses_a_completed_run(tmp_path, capsys):
    from crdscale.cli.main import main

    run = RunWriter.create(tmp_path, "ok")
    run.start_manifest(run_id="r")
    run.finish("completed")
    assert main(["recover", str(run.path)]) == 2
    assert "status is 'completed'" in capsys.readouterr().err


def test_direct_scraper_hands_chunks_to_its_sink():
    from crdscale.collect.sources import DirectScraper

    class Response:
        status_code = 200
        text = "# HELP x\nprocess_resident_memory_bytes 1.5e+08\ngo_goroutines 42\n"
        content = text.encode()

    class FakeCluster:
        def get(self, path, params=None, timeout=None):
            return Response()

    chunks = []
    scraper = DirectScraper(FakeCluster(), interval_s=0.05, sink=chunks.append, flush_s=0.1).start()
    deadline = time.monotonic() + 10
    while len(chunks) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    scraper.stop()
    assert len(chunks) >= 2
    frame = pd.concat(chunks)
    assert {
        "process_resident_memory_bytes",
        "go_goroutines",
        "scrape_duration_seconds",
        "scrape_body_size_bytes",
    } <= set(frame["metric"])
    # every row is handed over once
    assert not frame.duplicated(["timestamp", "metric"]).any()


def test_resolution_states_gaps_and_coverage():
    from crdscale.collect.metrics import resolution

    df = _tidy([0, 1, 2, 6, 7], 1.0)
    t0 = df["timestamp"].iloc[0]
    r = resolution(df, t0 - pd.Timedelta(seconds=1), t0 + pd.Timedelta(seconds=10))
    assert r["samples"] == 5 and r["median_gap_s"] == 1.0 and r["max_gap_s"] == 4.0
    assert r["start_gap_s"] == 1.0 and r["end_gap_s"] == 3.0


def test_memory_guard_fails_the_run_before_the_oom_killer():
    from crdscale.proc import available_memory_bytes
    from crdscale.scenario.runner import _Watchdog

    assert available_memory_bytes("MemTotal: 10 kB\nMemAvailable:    2048 kB\n") == 2 * 2**20
    assert available_memory_bytes() > 0

    class Alive:
        name, pid = "kube-apiserver", 1

        def alive(self):
            return True

    class Plane:
        processes = [Alive()]

    class Ok:
        status_code = 200

    class Cluster:
        server = "https://127.0.0.1:1"

        def get(self, path, timeout=None):
            return Ok()

    dog = _Watchdog(
        Cluster(), Plane(), interrupt_main=False, min_available_bytes=1024 * 2**20, available=lambda: 100 * 2**20
    )
    dog.start()
    dog.join(timeout=10)
    assert "memory guard" in dog.reason and "100 MiB" in dog.reason and "1,024 MiB guard" in dog.reason


def test_proc_sampler_reads_a_live_process():
    from crdscale.collect.sources import ProcSampler

    sampler = ProcSampler(os.getpid(), interval_s=0.05)
    rows = sampler.sample(pd.Timestamp.now(tz="UTC").to_pydatetime())
    values = {r["metric"]: r["value"] for r in rows}
    assert values["process_resident_memory_bytes"] > 10 * 2**20 and values["process_open_fds"] >= 3
    assert values["process_cpu_seconds_total"] > 0 and values["process_threads"] >= 1
    assert {r["job"] for r in rows} == {"kube-apiserver-proc"}
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert ProcSampler(gone.pid).sample(pd.Timestamp.now(tz="UTC").to_pydatetime()) == []


def test_thread_cpu_seconds_agree_with_the_tick_counters_at_finer_resolution():
    from crdscale.proc import cpu_seconds, rss_bytes, thread_cpu_seconds

    sum(i * i for i in range(300_000))  # some CPU of our own
    # ... and of threads that ended: their time is gone from /proc/PID/task, not from the total.
    import threading

    for _ in range(3):
        worker = threading.Thread(target=lambda: sum(i * i for i in range(400_000)))
        worker.start()
        worker.join()
    precise, ticks = thread_cpu_seconds(os.getpid()), cpu_seconds(os.getpid())
    assert abs(precise - ticks) < 0.05 + 0.01 * ticks
    assert precise != round(precise, 2) or precise == 0  # nanoseconds, not 10 ms ticks
    assert rss_bytes(os.getpid()) > 10 * 2**20
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert thread_cpu_seconds(gone.pid) is None and rss_bytes(gone.pid) is None


def test_watchdog_gives_a_slow_local_server_longer_than_a_remote_one():
    from crdscale.errors import ClusterError
    from crdscale.scenario.runner import _Watchdog

    class Unready:
        server = "https://127.0.0.1:1"

        def get(self, path, timeout=None):
            raise ClusterError("timed out")

    class Plane:
        processes = []

    assert _Watchdog(Unready(), None).unready_limit_s == 15.0
    assert _Watchdog(Unready(), Plane()).unready_limit_s == 180.0
    _Watchdog.CHECK_EVERY_S = 0.01
    try:
        dog = _Watchdog(Unready(), Plane(), interrupt_main=False, unready_limit_s=0.03)
        dog.start()
        dog.join(timeout=10)
    finally:
        _Watchdog.CHECK_EVERY_S = 5.0
    assert "not ready for 0 s although its process runs" in dog.reason
