"""The shape experiment on the local control plane: the same data as few large or many small Secrets."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crdscale.cli.main import main

pytestmark = pytest.mark.integration


def test_list_shapes_cli_loads_each_shape_and_states_the_ratios(local_cluster, tmp_path, capsys):
    code = main(
        [
            "probe",
            "list",
            "-q",
            "-o",
            "json",
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "--runs-dir",
            str(tmp_path),
            "--load-shapes",
            "4x1000000,400x10000",
            "--load",
            "1,4",
            "--load-requests",
            "20",
            "--load-seconds",
            "10",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    shapes = pd.DataFrame(out["tables"]["shapes"])
    assert set(shapes["shape"]) == {"4x1000000", "400x10000"}
    assert set(shapes["concurrency"]) == {1, 4}
    assert (shapes["requests"] == 20).all() and (shapes["errors"] == 0).all()
    # Both responses carry about 4 MB of data (Secrets' base64 makes it ~5.3 MB of JSON).
    per_request = shapes["bytes"] / shapes["requests"]
    assert per_request.between(4e6, 8e6).all(), per_request
    assert (shapes["cpu_s"] > 0).all() and (shapes["cpu_source"] == "proc").all()
    assert (shapes["heap_inuse_growth_bytes"] >= 0).all() and (shapes["heap_inuse_max_bytes"] > 0).all()
    findings = pd.DataFrame(out["tables"]["shape_findings"])
    assert len(findings) == 2 and set(findings["baseline_shape"]) == {"4x1000000"}
    assert (findings["objects_ratio"] == 100).all()
    assert findings["bytes_ratio"].between(0.8, 1.3).all()
    run_dir = tmp_path / next(p.name for p in tmp_path.iterdir())
    assert (run_dir / "probes" / "list-shapes-step00.parquet").exists()
