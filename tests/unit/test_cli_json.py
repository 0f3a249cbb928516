"""`-o json` on status, analyze and every probe: one valid JSON document on stdout, nothing else."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crdscale.analysis.run import analyze_run
from crdscale.cli import probe as probe_cli
from crdscale.cli.common import jsonable
from crdscale.cli.main import build_parser, main
from crdscale.cluster.instances import InstanceInfo

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"


def test_jsonable_turns_pandas_and_numpy_into_json_types():
    frame = pd.DataFrame(
        {"a": [1, 2], "b": [0.5, math.nan], "t": pd.to_datetime(["2026-11-22T03:15:00Z", None], utc=True)}
    )
    value = {
        "frame": frame,
        "n": np.int64(3),
        "x": np.float32(1.5),
        "nan": math.nan,
        "ok": np.bool_(True),
        "path": Path("/tmp/x"),
        "series": pd.Series({"k": np.float64(2.0)}),
        "nat": pd.NaT,
    }
    out = json.loads(json.dumps(jsonable(value), allow_nan=False))
    assert out["frame"] == [{"a": 1, "b": 0.5, "t": "2026-11-22T03:15:00.000Z"}, {"a": 2, "b": None, "t": None}]
    assert out["n"] == 3 and out["x"] == 1.5 and out["nan"] is None and out["ok"] is True
    assert out["path"] == "/tmp/x" and out["series"] == {"k": 2.0} and out["nat"] is None


def test_status_json(monkeypatch, capsys):
    instance = InstanceInfo(
        "default",
        "ready",
        "https://127.0.0.1:6443",
        "/k/kubeconfig",
        {"kube-apiserver": "v1.37.1", "etcd": "v3.6.16"},
        "2026-11-22T03:15:00Z",
        {"etcd": True, "kube-apiserver": True},
    )
    monkeypatch.setattr("crdscale.cluster.local.list_instances", lambda: [instance])
    monkeypatch.setattr("crdscale.cli.status._unfinished_runs", lambda: [])
    assert main(["status", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "instances": [
            {
                "name": "default",
                "status": "ready",
                "server": "https://127.0.0.1:6443",
                "kubeconfig": "/k/kubeconfig",
                "versions": {"kube-apiserver": "v1.37.1", "etcd": "v3.6.16"},
                "created_at": "2026-11-22T03:15:00Z",
                "processes_alive": {"etcd": True, "kube-apiserver": True},
                "has_node": False,
            }
        ],
        "runs": [],
    }
    monkeypatch.setattr("crdscale.cluster.local.list_instances", lambda: [])
    assert main(["status", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"instances": [], "runs": []}


def test_analyze_json_carries_the_fits(capsys):
    from crdscale.analysis.percrd import unattributed_share
    from crdscale.rundir import read_run

    assert main(["analyze", str(REFERENCE), "--no-write", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # the whole of stdout is one document
    (run,) = doc["runs"]
    analysis = analyze_run(read_run(REFERENCE))
    assert run["run_dir"] == str(analysis.run_dir) and run["heap_profiles"] == len(analysis.profiles)
    assert run["phases"] == analysis.phases and run["written"] == []
    fits = analysis.fits
    want = fits[(fits.phase == "served") & (fits.metric == "bytes") & (fits.cause == "total")].iloc[0]
    (got,) = [f for f in run["fits"] if (f["phase"], f["metric"], f["cause"]) == ("served", "bytes", "total")]
    assert got["per_crd"] == pytest.approx(want["per_crd"]) and got["per_crd_low"] == pytest.approx(want["per_crd_low"])
    assert run["unattributed_share"]["served"] == pytest.approx(unattributed_share(fits, "served"))
    assert len(run["fits"]) == len(fits) and len(run["install_serve"]) == len(analysis.install_serve)
    assert doc["per_property"] is None and doc["metric"] == "bytes"


@pytest.mark.parametrize("probe", ["discovery", "list", "apf", "clientmem"])
def test_every_probe_takes_output_json(probe):
    args = build_parser().parse_args(["probe", probe, "-o", "json"])
    assert args.output == "json"
    assert build_parser().parse_args(["probe", probe]).output == "table"


class _FakeRun:
    def __init__(self, name, args, parameters):
        self.dir = Path("/runs/20261122T031500Z-probe-" + name)
        self.run_id = "r1"
        self.cluster = argparse.Namespace(server="https://127.0.0.1:6443")
        self.server_version = "v1.37.1"
        self.manifest = {"status": "running"}

    def finish(self, status, reason=None, **extra):
        self.manifest.update(status=status, reason=reason, **extra)


@pytest.mark.parametrize("quiet", [False, True])
def test_probe_json_is_the_only_stdout(monkeypatch, capsys, quiet):
    monkeypatch.setattr(probe_cli, "ProbeRun", _FakeRun)
    table = pd.DataFrame({"kind": ["rv0", "exact"], "bytes": [1000, np.nan], "served_from": ["cache", "etcd"]})

    def body(run):
        probe_cli._print(table, ["kind", "bytes", "served_from"])  # the human table
        return 1, {"served_from": {"rv0": "cache"}}, {"lists": table}

    args = argparse.Namespace(output="json", quiet=quiet)
    assert probe_cli._run("list", args, {"repeats": 1}, body) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["probe"] == "list" and doc["status"] == "failed" and doc["exit_code"] == 1
    assert doc["run_dir"] == "/runs/20261122T031500Z-probe-list" and doc["server_version"] == "v1.37.1"
    assert doc["parameters"] == {"repeats": 1} and doc["result"] == {"served_from": {"rv0": "cache"}}
    assert doc["tables"]["lists"] == [
        {"kind": "rv0", "bytes": 1000.0, "served_from": "cache"},
        {"kind": "exact", "bytes": None, "served_from": "etcd"},
    ]
    assert ("served_from" in captured.err) != quiet  # the human table went to stderr, or nowhere with -q


def test_probe_table_output_unchanged(monkeypatch, capsys):
    monkeypatch.setattr(probe_cli, "ProbeRun", _FakeRun)

    def body(run):
        print("the table")
        return 0, {}, {"t": pd.DataFrame()}

    assert probe_cli._run("apf", argparse.Namespace(output="table", quiet=True), {}, body) == 0
    assert capsys.readouterr().out == "the table\n\nrun directory: /runs/20261122T031500Z-probe-apf\n"
