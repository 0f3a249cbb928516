"""Experiment directories without a cluster: cells run in order, an interrupted
cell stops the matrix, --resume skips what completed and redoes the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.errors import RunInterrupted, UsageError
from crdscale.rundir import layout
from crdscale.scenario.config import parse_scenario
from crdscale.scenario.experiment import Experiment, eta_seconds
from crdscale.units import fmt_duration

GOGC = """
name = "gogc"
[crds]
count = 20
groups = 2
[steps]
count = 3
[matrix]
"target.env.GOGC" = ["100", "50", "25"]
"""


class FakeRunner:
    """Makes a run directory per cell; raises RunInterrupted for the cells named in ``interrupt``."""

    def __init__(self, interrupt=()):
        self.calls: list[str] = []
        self.interrupt = set(interrupt)

    def __call__(self, scenario, parent: Path, name: str) -> Path:
        self.calls.append(name)
        run = parent / f"2026-{len(self.calls):02d}-{name}"
        run.mkdir()
        assert scenario.raw["experiment"]["cell"] == name
        if name in self.interrupt:
            raise RunInterrupted("run interrupted (SIGINT received)")
        return run


def test_cells_run_in_order_and_resume_redoes_the_interrupted_one(tmp_path, caplog):
    caplog.set_level("INFO", logger="crdscale")
    scenario = parse_scenario(GOGC)
    experiment = Experiment.create(tmp_path, scenario)
    assert layout.is_experiment_directory(experiment.path) and (experiment.path / layout.EXPERIMENT_MANIFEST).is_file()
    first = FakeRunner(interrupt={"GOGC=50"})
    with pytest.raises(RunInterrupted):
        experiment.run(first)
    assert first.calls == ["GOGC=100", "GOGC=50"]
    again = Experiment.open(experiment.path)
    assert [c.status for c in again.cells] == ["completed", "interrupted", "pending"]
    assert again.manifest["status"] == "interrupted"
    assert again.cells[1].attempts == ["2026-02-GOGC=50"]

    second = FakeRunner()
    runs = again.run(second)
    assert second.calls == ["GOGC=50", "GOGC=25"]  # the completed cell is skipped
    assert [p.name for p in runs] == ["2026-01-GOGC=100", "2026-01-GOGC=50", "2026-02-GOGC=25"]
    done = Experiment.open(experiment.path)
    assert done.manifest["status"] == "completed"
    assert done.cells[1].attempts == ["2026-02-GOGC=50", "2026-01-GOGC=50"]  # the partial run stays listed
    assert [n for n, _p in done.completed_runs()] == ["GOGC=100", "GOGC=50", "GOGC=25"]
    messages = [record.getMessage() for record in caplog.records]
    assert any("1 of 3 cells already completed" in m for m in messages)
    assert any("ETA" in m for m in messages)


def test_resume_rebuilds_cells_from_the_manifest_not_the_file(tmp_path):
    path = tmp_path / "gogc.toml"
    path.write_text(GOGC)
    from crdscale.scenario.config import load_scenario

    experiment = Experiment.create(tmp_path / "runs", load_scenario(path, overrides={"steps.count": 2}))
    path.write_text("this is not TOML any more")
    reopened = Experiment.open(experiment.path)
    assert [c.scenario.target.env for c in reopened.cells] == [{"GOGC": "100"}, {"GOGC": "50"}, {"GOGC": "25"}]
    assert all(c.scenario.steps.count == 2 for c in reopened.cells)


def test_not_an_experiment(tmp_path):
    with pytest.raises(UsageError):
        Experiment.open(tmp_path)
    with pytest.raises(UsageError):
        Experiment.create(tmp_path, parse_scenario(None))


def test_eta_and_durations():
    assert eta_seconds([], 3) is None
    assert eta_seconds([60, 120], 2) == 180
    assert [fmt_duration(s) for s in (42, 185, 3720)] == ["42s", "3m05s", "1h02m"]
