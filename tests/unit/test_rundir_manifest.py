"""The typed run manifest: old manifests read tolerantly, and written back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscale.errors import UsageError
from crdscale.fsutil import write_json_atomic
from crdscale.rundir import Manifest, RunWriter, layout, read_run
from crdscale.rundir.manifest import Binary, CrdSet, Harness, MetricsRecord

ROOT = Path(__file__).resolve().parents[2]
COMMITTED_RUNS = [ROOT / "data" / "reference-run", ROOT / "data" / "reference-run-v1.24.0"]
FIXTURES = [ROOT / "tests" / "data" / "run-kube-apiserver", ROOT / "tests" / "data" / "probe-tables"]


@pytest.mark.parametrize("run_dir", COMMITTED_RUNS, ids=lambda p: p.name)
def test_a_committed_run_is_written_back_byte_for_byte(run_dir, tmp_path):
    manifest = Manifest.load(run_dir)
    RunWriter(tmp_path).write_manifest(manifest)
    assert (tmp_path / layout.MANIFEST).read_bytes() == (run_dir / layout.MANIFEST).read_bytes()
    # ... also when its JSON goes through update_manifest, as a writer adds blocks one by one.
    again = RunWriter(tmp_path / "again")
    again.path.mkdir()
    for key, value in json.loads((run_dir / layout.MANIFEST).read_text()).items():
        again.update_manifest(**{key: value})
    assert (again.path / layout.MANIFEST).read_bytes() == (run_dir / layout.MANIFEST).read_bytes()


def test_the_reference_run_reads_typed():
    m = read_run(COMMITTED_RUNS[0]).manifest
    assert (m.kind, m.status, m.reason, m.run_id) == ("scenario", "completed", None, "20261123t104324-64b6")
    assert m.versions.kube_apiserver == "v1.37.1" and m.versions.kube_apiserver_go == "go1.26.8"
    assert m.crds.count == 160 and m.crds.sha256.startswith("18316151")
    assert m.scenario.name == "reference" and m.scenario.target.env == {} and m.scenario.steps.count == 4
    assert m.metrics.scrape_interval_s == 1.0 and m.metrics.resolution.samples == 60
    assert m.harness.harness_share_of_apiserver_cpu == 0.356 and not m.harness.apiserver_scrapes
    assert [p.name for p in m.processes] == ["prometheus"] and m.runner.pid == 489
    assert m.binaries["etcd"].path.endswith("/etcd") and m.machine.cpus == 2


@pytest.mark.parametrize("run_dir", FIXTURES, ids=lambda p: p.name)
def test_old_and_hand_made_manifests_read_with_empty_blocks(run_dir):
    m = Manifest.load(run_dir)
    assert m.status == "completed" and m.versions.kube_apiserver == "v1.37.1"
    assert not m.harness and not m.metrics and not m.binaries and m.runner.pid is None
    assert m.harness.harness_share_of_apiserver_cpu is None and m.metrics.resolution.max_gap_s is None
    assert m.to_json() == json.loads((run_dir / layout.MANIFEST).read_text())


def test_blocks_of_the_wrong_type_read_as_empty_and_are_refused_when_written(tmp_path):
    m = Manifest.from_json({"status": "failed", "metrics": "oops", "binaries": {"etcd": "/bin/etcd"}, "processes": 3})
    assert not m.metrics and m.processes == () and m.binaries == {"etcd": Binary(path="/bin/etcd")}
    run = RunWriter(tmp_path)
    run.update_manifest(status="running")
    with pytest.raises(TypeError, match="manifest.metrics: expected a JSON object, got int"):
        run.update_manifest(metrics=3)
    with pytest.raises(TypeError, match=r"manifest.processes\[0\]"):
        run.update_manifest(processes=["prometheus"])
    assert run.read_manifest() == {"status": "running"}  # nothing written by a refused update


def test_update_manifest_writes_what_a_dict_merge_wrote(tmp_path):
    """The bytes of the writer before the typed manifest: a dict updated and dumped with default=str."""
    updates = [
        {"kind": "probe", "status": "running", "scenario_file": tmp_path / "s.toml", "target": {"kind": "local"}},
        {"versions": {"crdscale": "0.1.0", "kube-apiserver": "v1.37.1"}, "steps": ({"step": 1, "created": 2},)},
        {"tables": ("probes/list-step01.parquet",), "agreement_within_tolerance": True, "ratio": float("nan")},
        {"status": "completed", "target": {"kind": "local", "server": "https://127.0.0.1:1"}},
    ]
    run, legacy = RunWriter(tmp_path / "new"), {}
    run.path.mkdir()
    for fields in updates:
        written = run.update_manifest(**fields)
        legacy.update(fields)
        write_json_atomic(tmp_path / "legacy.json", legacy)
        assert (run.path / layout.MANIFEST).read_bytes() == (tmp_path / "legacy.json").read_bytes()
    assert written.get("agreement_within_tolerance") is True and written.tables == ("probes/list-step01.parquet",)
    assert written.scenario_file == str(tmp_path / "s.toml") and written.steps[0].step == 1


def test_record_binaries_and_processes_keep_their_blocks(tmp_path):
    run = RunWriter(tmp_path)
    run.start_manifest(run_id="r")
    (tmp_path / "etcd").write_bytes(b"x")
    run.record_binaries({"etcd": tmp_path / "etcd", "missing": None})
    run.record_binaries({"kube-apiserver": tmp_path / "etcd"}, built_from={"kube-apiserver": {"tree": "/src"}})
    run.record_process("prometheus", 1)
    m = run.read_manifest()
    assert list(m.binaries) == ["etcd", "kube-apiserver"] and m.binaries["etcd"].bytes == 1
    assert m.binaries["kube-apiserver"].built_from == {"tree": "/src"}
    assert [(p.name, p.pid) for p in m.processes] == [("prometheus", 1)]
    assert list(m)[-2:] == ["binaries", "processes"]  # new blocks go last, as setdefault put them


def test_a_manifest_is_a_read_only_mapping_over_its_json():
    m = Manifest.from_json({"status": "completed", "versions": {"etcd": "v3.6.16"}})
    assert m["versions"]["etcd"] == "v3.6.16" and m.get("harness") is None and "status" in m and len(m) == 2
    assert m == {"status": "completed", "versions": {"etcd": "v3.6.16"}} and Manifest.of(dict(m)) == m
    assert m.versions.get("etcd") == "v3.6.16"
    with pytest.raises(TypeError):
        m["status"] = "failed"  # type: ignore[index]


def test_blocks_are_falsy_when_empty():
    assert not CrdSet.from_json(None) and not MetricsRecord.from_json({}) and Harness.from_json({"a": 1})


@pytest.mark.parametrize(
    ("text", "error"),
    [("", "not JSON"), ("[1]", "holds a JSON list, not an object")],
)
def test_a_bad_manifest_file_is_one_line(tmp_path, text, error):
    (tmp_path / layout.MANIFEST).write_text(text)
    with pytest.raises(UsageError, match=error):
        Manifest.load(tmp_path)
    with pytest.raises(UsageError, match="no manifest.json"):
        Manifest.load(tmp_path / "nothing")


def test_update_manifest_block_merges_into_one_block(tmp_path):
    run = RunWriter(tmp_path)
    run.update_manifest(metrics={"source": "direct", "rows": 1}, status="running")
    m = run.update_manifest_block("metrics", rows=5, window={"start": "a", "end": "b"})
    assert m.metrics.to_json() == {"source": "direct", "rows": 5, "window": {"start": "a", "end": "b"}}
    assert m.metrics.window.end == "b" and list(m) == ["metrics", "status"]
    assert run.update_manifest_block("harness", crdscale_cpu_seconds=1.0).harness.crdscale_cpu_seconds == 1.0


def test_the_reference_lists_every_key_a_run_writes():
    from crdscale.rundir.manifest import reference_rows

    keys = [key for key, _inner, _doc in reference_rows()]
    written = json.loads((COMMITTED_RUNS[0] / layout.MANIFEST).read_text())
    assert set(written) <= set(keys) and all(doc for _key, _inner, doc in reference_rows())
