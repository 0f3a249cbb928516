"""kube-controller-manager's and etcd's heap profiles on the real local control plane (v1.37.1): one of
each at every mark kube-apiserver is profiled at, and their per-CRD cost in `analyze -o json`.
About a minute: 45 CRDs in 3 steps."""

from __future__ import annotations

import json
import math

from crdscale.cli.main import main
from crdscale.rundir import layout, read_run

SCENARIO = """\
name = "components"
[crds]
count = 45
groups = 5
property_count = 20
[steps]
count = 3
serve = "watch"
settle_seconds = 2
[metrics]
scrape_interval_seconds = 1
apiserver_metrics_interval_seconds = 5
"""


def test_both_components_are_profiled_at_every_mark_and_analyzed(tmp_path, capsys):
    scenario = tmp_path / "components.toml"
    scenario.write_text(SCENARIO)
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs")]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    run = read_run(run_dir)
    marks = list(zip(run.profiles["step"], run.profiles["crds"], run.profiles["phase"].fillna("served")))
    assert len(marks) == 7  # the baseline, and each of 3 steps installed and served
    recorded = run.manifest.components
    for component in layout.OTHER_COMPONENTS:
        rows = run.component_profiles(component)
        assert list(zip(rows["step"], rows["crds"], rows["phase"].fillna("served"))) == marks, component
        for file in rows["file"]:
            assert run.read_profile(file).sample_types[-2:] == ["inuse_objects", "inuse_space"]
        assert recorded[component]["taken"] == len(marks) and "skipped" not in recorded[component]
        # What it costs a step, said in the manifest: well under a second per profile on loopback.
        assert recorded[component]["seconds"] / len(marks) < 2.0
    assert "etcd-proc" in set(run.series["job"])
    capsys.readouterr()

    assert main(["analyze", str(run_dir), "--no-write", "-o", "json"]) == 0
    found = json.loads(capsys.readouterr().out)["runs"][0]
    assert found["components_skipped"] is None  # none left out
    served = {(r["component"], r["metric"]): r for r in found["components"] if r["phase"] == "served"}
    for component in layout.COMPONENTS:
        row = served[(component, "bytes")]
        assert math.isfinite(row["per_crd"]) and row["per_crd_low"] <= row["per_crd"] <= row["per_crd_high"]
        assert row["n"] == 4 and row["source"] == "heap profiles"
        assert (component, "rss_bytes") in served
