"""crdscale ab with arms on the real control plane (v1.37.1): two arms of trivially different flags (kube-apiserver's
log verbosity, --v=1 and --v=2) against one base, one round of 3 CRDs. It checks the wiring end to end: every arm
validated against the binary, the round run in order, the directory resumable, verdict.md with a row per arm and
verdict-<arm>.md each; with one round nothing is pooled (each run keeps its own fit's interval). About 2 minutes
on 2 idle cores (3 runs of a few seconds of CRDs each, most of it starting etcd, kube-apiserver and Prometheus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.scenario.ab import AB

SCENARIO = """\
name = "ab-arms-small"
[target]
kube_version = "1.37.1"
[crds]
count = 3
groups = 1
property_count = 5
[steps]
count = 2
serve = "watch"
settle_seconds = 2
[profiles]
kinds = ["heap"]
installed_phase = false
[metrics]
scrape_interval_seconds = 1
apiserver_metrics_interval_seconds = 5
apiserver_cpu_budget_percent = 0
"""

pytestmark = [pytest.mark.slow, pytest.mark.long]


def test_two_arms_one_round(tmp_path: Path, capsys):
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SCENARIO)
    flags = ["--each", "--apiserver-flag=--v=1", "--apiserver-flag=--v=2", "--min-pairs", "1"]
    code = main(["ab", str(scenario), *flags, "--out", str(tmp_path), "-o", "json"])
    assert code == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["kind"] == "arms" and [a["name"] for a in verdict["arms"]] == ["v", "v-2"]
    assert verdict["rounds"] == 1 and verdict["runs"] == 3 and verdict["spread"]["dof"] == 0
    (directory,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    ab = AB.open(directory)
    assert [(r.pair, r.side, r.status) for r in ab.runs] == [(1, s, "completed") for s in ("base", "v", "v-2")]
    assert sorted(p.name.split("-", 1)[1] for p in directory.iterdir() if p.is_dir()) == [
        "r01-base",
        "r01-v",
        "r01-v-2",
    ]
    text = (directory / "verdict.md").read_text()
    assert "| [v](verdict-v.md) | `--v=1` |" in text and "| [v-2](verdict-v-2.md) | `--v=2` |" in text
    for arm in ("v", "v-2"):
        assert (directory / f"verdict-{arm}.md").read_text().startswith("### crdscale verdict: --v=")
    # Resumed: nothing runs again, the verdicts are written again alike.
    assert main(["ab", "--resume", str(directory), "--min-pairs", "1"]) == 0
    assert (directory / "verdict.md").read_text() == text
