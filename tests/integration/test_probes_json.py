"""`crdscale probe ... -o json` and `crdscale status -o json` on the local control plane:
stdout is one JSON document a script can read, carrying the same tables the probe printed."""

from __future__ import annotations

import json

import pytest

from crdscale.cli.main import main

pytestmark = pytest.mark.integration


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)  # all of stdout, or this raises


@pytest.mark.parametrize(
    ("argv", "table", "column"),
    [
        (["discovery", "--limits", "disabled", "--no-kubectl"], "summary", "group_versions"),
        (
            ["list", "--custom-resources", "20", "--repeats", "1", "--kinds", "rv0", "consistent"],
            "lists",
            "served_from",
        ),
        (
            ["apf", "--custom-resources", "20", "--repeats", "1", "--kinds", "rv0", "--no-observe"],
            "seats",
            "size_based_seats",
        ),
        (["clientmem", "--objects", "3", "--object-bytes", "10000"], "clientmem", "peak_rss_mib"),
    ],
    ids=["discovery", "list", "apf", "clientmem"],
)
def test_probe_prints_json(local_cluster, tmp_path, capsys, argv, table, column):
    code = main(
        ["probe", *argv, "-q", "-o", "json", "--kubeconfig", str(local_cluster.kubeconfig), "--runs-dir", str(tmp_path)]
    )
    doc = _json(capsys)
    assert code == 0 and doc["exit_code"] == 0 and doc["status"] == "completed"
    assert doc["probe"] == argv[0] and doc["server_version"].startswith("v1.")
    (run_dir,) = tmp_path.iterdir()
    assert doc["run_dir"] == str(run_dir)
    rows = doc["tables"][table]
    assert rows and all(column in row for row in rows)


def test_status_json_lists_the_running_instance(local_cluster, capsys):
    assert main(["status", "-o", "json"]) == 0
    instances = {i["name"]: i for i in _json(capsys)["instances"]}
    mine = instances[local_cluster.name]
    assert mine["status"] == "ready" and mine["kubeconfig"] == str(local_cluster.kubeconfig)
    assert mine["server"].startswith("https://127.0.0.1:")
