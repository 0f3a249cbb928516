"""A 2-cell matrix (GOGC 100 vs 50, 3 steps x 20 CRDs) on the real local control
plane: Ctrl-C during the second cell, `crdscale run --resume` skips the first and
redoes the second, and `crdscale report EXPERIMENT_DIR` renders the comparison."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from crdscale.cli.main import main
from crdscale.rundir import layout
from crdscale.rundir.events import read_events

REPO = Path(__file__).resolve().parents[2]

GOGC = """\
name = "gogc"
[crds]
count = 20
groups = 2
property_count = 20
[steps]
count = 3
serve = "watch"
settle_seconds = 1
[profiles]
installed_phase = false
[metrics]
scrape_interval_seconds = 1
[matrix]
"target.env.GOGC" = ["100", "50"]
"""


def _experiment(out: Path, timeout_s: float = 120) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [p for p in out.iterdir() if (p / layout.EXPERIMENT_MANIFEST).is_file()] if out.is_dir() else []
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError("no experiment directory appeared")


def _cells(experiment: Path) -> list[dict]:
    return json.loads((experiment / layout.EXPERIMENT_MANIFEST).read_text())["cells"]


def _wait_second_cell_step(experiment: Path, timeout_s: float = 300) -> None:
    """Until the second cell's run has finished its first step (so the interruption lands mid-cell)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cells = _cells(experiment)
        if cells[0]["status"] == "completed" and cells[1]["status"] == "running":
            runs = [p for p in experiment.iterdir() if p.is_dir() and p.name.endswith("GOGC=50")]
            for run in runs:
                events = run / "events.jsonl"
                if events.is_file() and any(e["kind"] == "step.end" for e in read_events(events)):
                    return
        time.sleep(0.5)
    raise AssertionError(f"second cell never got going: {_cells(experiment)}")


def test_matrix_runs_resumes_after_sigint_and_compares(tmp_path):
    scenario = tmp_path / "gogc.toml"
    scenario.write_text(GOGC)
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "run", str(scenario), "--out", str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        experiment = _experiment(out)
        _wait_second_cell_step(experiment)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "cell 1/2 GOGC=100: completed" in stderr and "ETA" in stderr
    cells = _cells(experiment)
    assert [c["status"] for c in cells] == ["completed", "interrupted"]
    first_run = cells[0]["run_dir"]
    interrupted = cells[1]["run_dir"]
    assert json.loads((experiment / interrupted / "manifest.json").read_text())["status"] == "interrupted"

    assert main(["run", "--resume", str(experiment)]) == 0
    cells = _cells(experiment)
    assert [c["status"] for c in cells] == ["completed", "completed"]
    assert cells[0]["run_dir"] == first_run  # not run again
    assert cells[1]["run_dir"] != interrupted and cells[1]["attempts"] == [interrupted, cells[1]["run_dir"]]
    manifest = json.loads((experiment / cells[1]["run_dir"] / "manifest.json").read_text())
    assert manifest["scenario"]["target"]["env"] == {"GOGC": "50"}
    assert manifest["scenario"]["experiment"]["cell"] == "GOGC=50"

    assert main(["report", str(experiment)]) == 0
    report = experiment / "report"
    findings = (report / "findings.md").read_text()
    assert findings.startswith("# crdscale comparison: GOGC=100 vs GOGC=50")
    assert "GOGC=50 holds" in findings and "GOGC=50" in findings
    assert (report / "report-nocode.html").stat().st_size > 10_000
