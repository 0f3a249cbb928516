"""A history on the real control plane: two releases (v1.24.0 with its own go1.18.1, v1.37.1 whose Go is this
machine's), a tiny provider-like workload with custom resources, one run each; then its page's numbers.
About 4 minutes once both builds are cached (2 min 23 s and 1 min 40 s per run here); cold, v1.24.0's build with
go1.18.1 adds 12-16 minutes of both cores (45 min on a shared machine), so it is left out of make test: run it with
`pytest -m long tests/integration/test_history_releases.py`. The history's logic (cells, resume, the page) is covered
by tests/unit/test_history_command.py with fakes and a recorded history."""

from __future__ import annotations

import json

import pytest

from crdscale.cli.main import main
from crdscale.report.history import load_history
from crdscale.rundir import read_run
from crdscale.scenario.history import open_history

# v1.24.0 built with go1.18.1: not among the binaries make test builds.
pytestmark = pytest.mark.long

TINY = [
    "--set", "crds.count=20", "--set", "crds.groups=2", "--set", "objects.crd_steps=2",
    "--set", "objects.count=4", "--set", "steps.count=2", "--set", "steps.settle_seconds=3",
]  # fmt: skip


@pytest.mark.timeout(900)
def test_a_history_of_two_releases(tmp_path, capsys):
    args = ["history", "--versions", "1.24.0,1.37.1", "--repeats", "1", *TINY, "--out", str(tmp_path)]
    assert main(args) == 0
    path = capsys.readouterr().out.strip().splitlines()[-1]
    experiment = open_history(path)
    assert [c.status for c in experiment.cells] == ["completed", "completed"]
    v124 = read_run(experiment.path / experiment.cells[0].run_dir)
    # Built with the Go v1.24.0 shipped with, and its provenance says so.
    change = json.loads((v124.path / "manifest.json").read_text())["change"]
    assert change["built_go"] == "go1.18.1" and change["go_is_release"] is True
    # A finished history runs nothing again.
    assert main(["history", "--resume", path]) == 0
    assert [c.attempts for c in open_history(path).cells] == [c.attempts for c in experiment.cells]

    history = load_history(path)
    assert history.versions == ["v1.24.0", "v1.37.1"]
    totals = history.releases[history.releases["cause"] == "total"].set_index(["quantity", "version"])
    for quantity in ("heap per CRD", "heap per custom resource", "RSS per CRD", "CPU per CRD", "peak RSS"):
        assert (quantity, "v1.37.1") in totals.index, quantity
    zap = history.releases[
        (history.releases["quantity"] == "heap per CRD") & (history.releases["cause"] == "zap-counters")
    ]
    assert zap.set_index("version")["value"]["v1.24.0"] > 100 * 1024  # one etcd client logger per CRD in v1.24.0
