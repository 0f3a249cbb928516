"""`crdscale ab --cluster` without a cluster: the manifests it prints (one index per run, in pair order:
the interleaving kept), its one-line refusals before anything is created, a pod's `crdscale cell` running
one side of one pair from the ConfigMap's ab.json into the results store, and the runs gathered back
into the A/B directory and judged, as a matrix's cells are (`run --cluster`, tests/unit/test_cluster_fanout.py).
Runs are faked by copying the committed runs (as tests/unit/test_ab.py does)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
import yaml

from crdscale.cli.main import main
from crdscale.results.store import FileStore, cell_prefix
from crdscale.scenario import clusterjob, fanout
from crdscale.scenario.ab import AB, parse_run_name

ROOT = Path(__file__).resolve().parents[2]
RECORDED = {"base": ROOT / "data" / "reference-run", "changed": ROOT / "data" / "reference-run-v1.24.0"}
TINY = """\
name = "tiny"
[crds]
count = 4
groups = 2
property_count = 5
[steps]
count = 1
settle_seconds = 0
"""
FLAG = "--apiserver-flag=--v=1"


@pytest.fixture
def scenario_file(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")  # --print-manifests and refusals never reach a cluster
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def _manifests(capsys) -> list[dict]:
    return [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]


def test_print_manifests_one_index_per_run_in_pair_order(scenario_file, tmp_path, capsys):
    out = tmp_path / "runs"
    args = ["ab", str(scenario_file), FLAG, "--cluster", "--image", "crdscale:1", "--results", "pvc://results"]
    assert main([*args, "--min-pairs", "3", "--parallelism", "2", "--out", str(out), "--print-manifests"]) == 0
    docs = _manifests(capsys)
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "ConfigMap", "Job", "Role"]
    indexes = json.loads(docs[2]["data"][fanout.INDEXES_KEY])
    # A B, B A, A B: each pair swaps which side goes first, and the Job's indexes keep that order.
    assert indexes == ["p01-base", "p01-changed", "p02-changed", "p02-base", "p03-base", "p03-changed"]
    spec = json.loads(docs[2]["data"][fanout.EXPERIMENT_KEY])
    assert spec["kind"] == "ab" and spec["change"]["overrides"] == {"target.apiserver_flags": ["--v=1"]}
    assert spec["cluster"]["experiment_id"].startswith("ab-tiny-")
    assert [(r["pair"], r["side"]) for r in spec["runs"]] == [parse_run_name(n) for n in indexes]
    job = docs[3]["spec"]
    assert job["completionMode"] == "Indexed" and job["completions"] == 6 and job["parallelism"] == 2
    container = job["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["crdscale", "cell"]
    assert not out.exists()  # printing creates nothing


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--patch", "x.diff", "--cluster", "--image", "x", "--results", "pvc://c"], "target.patches needs a kube"),
        (["--build-tag", "fieldsv1string", "--cluster", "--image", "x", "--results", "pvc://c"], "target.build_tags"),
        ([FLAG, "--cluster", "--results", "pvc://c"], "--cluster needs --image"),
        ([FLAG, "--cluster", "--image", "x"], "--cluster needs --results"),
        ([FLAG, "--image", "x"], "--image goes with --cluster"),
        ([FLAG, "--kubeconfig", "k.yaml"], "--kubeconfig and --context go with --cluster"),
        (
            [FLAG, "--cluster", "--image", "x", "--results", "pvc://c", "--set", 'target.prometheus_url="http://p"'],
            "a pod collects its own metrics",
        ),
    ],
)
def test_refused_in_one_line_before_anything_is_created(scenario_file, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.diff").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    out = tmp_path / "runs"
    assert main(["ab", str(scenario_file), *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def _fake_run(scenario, parent: Path, name: str) -> Path:
    """What a pod's run leaves: a run directory named after the run (the committed runs, copied)."""
    side = scenario.raw["ab"]["side"]
    pair, _side = parse_run_name(name)
    out = parent / f"20261127T00000{pair}Z-{name}"
    shutil.copytree(RECORDED["base" if side == "changed" and pair % 2 == 0 else side], out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["run_id"] = f"{manifest['run_id']}-{name}"
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _submitted(tmp_path, scenario_file, pairs: int = 2) -> tuple[AB, Path]:
    """An A/B directory as `ab --cluster` leaves it after submitting, and its ConfigMap as a pod mounts it."""
    from crdscale.scenario.ab import Change
    from crdscale.scenario.config import load_scenario

    ab = AB.create(tmp_path / "runs", load_scenario(scenario_file), Change({"target.apiserver_flags": ["--v=1"]}, "v1"))
    runs = [r.name for r in ab.plan(pairs)]
    ab.manifest[clusterjob.CLUSTER_KEY] = {
        "experiment_id": "ab-tiny-x",
        "namespace": "ns",
        "results": f"file://{tmp_path / 'store'}",
        "parallelism": 1,
        "jobs": [{"name": "crdscale-ab-tiny-x", "indexes": runs}],
    }
    ab.save()
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / fanout.EXPERIMENT_KEY).write_text(json.dumps(ab.manifest))
    (spec / fanout.INDEXES_KEY).write_text(json.dumps(runs))
    return ab, spec


def test_a_pod_runs_one_side_of_one_pair_into_the_store(tmp_path, scenario_file, monkeypatch):
    from crdscale.cli import common

    ab, spec = _submitted(tmp_path, scenario_file)
    monkeypatch.setattr(common, "run_with_progress", _fake_run)
    store = f"file://{tmp_path / 'store'}"
    assert main(["cell", str(spec), "--index", "2", "--results", store, "--out", str(tmp_path / "pod")]) == 0
    stored = FileStore(store).list_prefixes(cell_prefix("ab-tiny-x", "p02-changed"))
    assert stored == ["20261127T000002Z-p02-changed"]
    assert main(["cell", str(spec), "--index", "9", "--results", store, "--out", str(tmp_path / "pod")]) == 2


def test_the_runs_are_gathered_and_judged_when_the_job_is_done(tmp_path, scenario_file, monkeypatch, capsys):
    from crdscale.cli import ab as abcli
    from crdscale.cli import common

    ab, spec = _submitted(tmp_path, scenario_file)
    monkeypatch.setattr(common, "run_with_progress", _fake_run)
    store = f"file://{tmp_path / 'store'}"
    for index in range(4):  # what the Job's four pods do
        assert main(["cell", str(spec), "--index", str(index), "--results", store, "--out", str(tmp_path / "pod")]) == 0
    states = [clusterjob.IndexState("crdscale-ab-tiny-x", i, n, clusterjob.SUCCEEDED) for i, n in enumerate(
        ["p01-base", "p01-changed", "p02-changed", "p02-base"])]  # fmt: skip
    monkeypatch.setattr(clusterjob, "follow", lambda _client, _ab: states)
    args = argparse.Namespace(detach=False, results=None, output="text", until=None)
    assert abcli._follow(None, ab, args, None) == 0
    reopened = AB.open(ab.path)
    assert reopened.complete_pairs() == 2 and reopened.manifest["status"] == "completed"
    assert [r.run_dir for r in reopened.runs] == [f"20261127T00000{r.pair}Z-{r.name}" for r in reopened.runs]
    out = capsys.readouterr().out
    assert "### crdscale verdict: v1" in out and "2 interleaved base/changed pair(s)" in out
    assert (ab.path / "verdict.md").is_file() and (ab.path / "flame.html").is_file()
