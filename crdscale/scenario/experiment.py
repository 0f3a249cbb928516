"""An experiment directory: the cells of a scenario's ``[matrix]``, run one after another.

Layout::

    runs/<UTC timestamp>-<name>/
        experiment.json                    the scenario (file keys, --set overrides, matrix),
                                           every cell with its run directory and status
        <UTC timestamp>-<cell name>/       an ordinary run directory per cell (and per attempt)
        report/                            written by `crdscale report EXPERIMENT_DIR`

:class:`Experiment` runs the cells it has no completed run for, so running it
again after an interruption (``crdscale run --resume DIR``) skips completed
cells and redoes the interrupted one in a fresh run directory (the partial
one stays, listed among the cell's attempts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crdscale import __version__
from crdscale.errors import CrdscaleError, UsageError
from crdscale.rundir import layout, read_experiment_manifest, write_experiment_manifest
from crdscale.scenario.check import check_cells
from crdscale.scenario.config import Scenario, build_scenario
from crdscale.scenario.matrix import Cell, expand
from crdscale.units import fmt_duration

log = logging.getLogger(__name__)


def _utc_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class CellState:
    """A cell as the experiment manifest records it."""

    cell: Cell
    scenario: Scenario
    run_dir: str | None = None  # relative to the experiment directory
    status: str = "pending"  # pending, running, completed, interrupted, failed
    seconds: float | None = None
    attempts: list[str] | None = None


def eta_seconds(done: list[float], remaining: int) -> float | None:
    """Time left: the mean duration of the cells done so far times the cells left (None before the first)."""
    if not done:
        return None
    return sum(done) / len(done) * remaining


def _check_cells(scenario: Scenario, cells: list[CellState]) -> None:
    """:func:`~crdscale.scenario.check.check_cells` of every cell, so the last cell's bad path
    or version stops the experiment before the first cell runs, not hours later."""
    check_cells(scenario, [(state.cell, state.scenario) for state in cells])


def new_manifest(scenario: Scenario) -> dict[str, Any]:
    """The ``experiment.json`` of a new experiment of ``scenario``, before its cells are recorded."""
    return {
        "kind": "experiment",
        "crdscale_version": __version__,
        "name": scenario.name,
        "status": "running",
        "started_at": _utc_iso(),
        "ended_at": None,
        "scenario_file": scenario.source_path,
        # Enough to rebuild every cell on --resume, even if the file changed since.
        "scenario": {**scenario.user, "matrix": scenario.matrix},
        "overrides": scenario.overrides,
        "cells": [],
    }


class Experiment:
    """An experiment directory. Create with :meth:`create`, reopen with :meth:`open`."""

    def __init__(self, path: Path, scenario: Scenario, cells: list[CellState], manifest: dict[str, Any]):
        self.path = Path(path)
        self.scenario = scenario
        self.cells = cells
        self.manifest = manifest

    @classmethod
    def create(cls, parent: str | Path, scenario: Scenario, *, check: bool = True) -> Experiment:
        """A new experiment directory for ``scenario`` (which must have a matrix) under ``parent``
        (``check=False``: the caller has checked its cells already)."""
        if not scenario.matrix:
            raise UsageError("an experiment needs a scenario with a [matrix] table")
        cells = [CellState(c, s) for c, s in expand(scenario)]
        if check:
            _check_cells(scenario, cells)  # before the directory exists: a bad path leaves nothing behind
        base = Path(parent) / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{scenario.name}"
        path, n = base, 1
        while path.exists():
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        path.mkdir(parents=True)
        experiment = cls(path, scenario, cells, new_manifest(scenario))
        experiment.save()
        return experiment

    @classmethod
    def open(cls, path: str | Path) -> Experiment:
        """Reopen an experiment directory (its scenario is rebuilt from the manifest)."""
        path = Path(path)
        manifest = read_experiment_manifest(path)
        if not isinstance(manifest.get("scenario"), dict) or not isinstance(manifest.get("cells", []), list):
            raise UsageError(
                f"{path}/{layout.EXPERIMENT_MANIFEST}: no scenario table or no cell list; not written by crdscale"
            )
        scenario = build_scenario(
            manifest["scenario"],
            where=f"{path}/{layout.EXPERIMENT_MANIFEST}",
            overrides=manifest.get("overrides") or {},
        )
        scenario.source_path = manifest.get("scenario_file")
        recorded = {c["name"]: c for c in manifest.get("cells", []) if isinstance(c, dict) and "name" in c}
        cells = []
        for cell, sc in expand(scenario):
            r = recorded.get(cell.name, {})
            cells.append(
                CellState(cell, sc, r.get("run_dir"), r.get("status", "pending"), r.get("seconds"), r.get("attempts"))
            )
        return cls(path, scenario, cells, manifest)

    def save(self) -> None:
        self.manifest["cells"] = [
            {
                "name": c.cell.name,
                "values": c.cell.values,
                "repeat": c.cell.repeat,
                "run_dir": c.run_dir,
                "status": c.status,
                "seconds": c.seconds,
                "attempts": c.attempts or [],
            }
            for c in self.cells
        ]
        write_experiment_manifest(self.path, self.manifest)

    def completed_runs(self) -> list[tuple[str, Path]]:
        """``(cell name, run directory)`` of every completed cell, in matrix order."""
        return [(c.cell.name, self.path / c.run_dir) for c in self.cells if c.status == "completed" and c.run_dir]

    def run(
        self,
        run_cell: Callable[[Scenario, Path, str], Path],
        *,
        only: Collection[str] | None = None,
    ) -> list[Path]:
        """Run every cell not completed yet, one after another.

        ``run_cell(scenario, experiment_dir, cell_name)`` runs one cell and
        returns its run directory (raising :class:`CrdscaleError` when the run
        failed or was interrupted; the run directory it created is found by its
        manifest). Progress and an ETA over the whole matrix are logged (INFO).
        Returns the run directories of the completed cells. ``only``: run just the cells of
        these names (a pod of a cluster experiment runs one, :mod:`crdscale.scenario.clusterjob`).
        """
        todo = [c for c in self.cells if c.status != "completed" and (only is None or c.cell.name in only)]
        _check_cells(self.scenario, todo)
        done_seconds = [c.seconds for c in self.cells if c.status == "completed" and c.seconds]
        skipped = len(self.cells) - len(todo)
        if skipped:
            log.info(f"experiment {self.path.name}: {skipped} of {len(self.cells)} cells already completed, skipped")
        self.manifest.update(status="running", ended_at=None)
        for index, state in enumerate(todo):
            position = self.cells.index(state) + 1
            eta = eta_seconds(done_seconds, len(todo) - index)
            log.info(
                f"cell {position}/{len(self.cells)} {state.cell.name}: starting"
                + (f" (ETA for the matrix: {fmt_duration(eta)})" if eta is not None else "")
            )
            before = {p.name for p in self.path.iterdir()}
            state.status = "running"
            self.save()
            started = time.monotonic()
            try:
                run_dir = Path(run_cell(state.scenario, self.path, state.cell.name))
            except CrdscaleError as err:
                created = sorted(p.name for p in self.path.iterdir() if p.name not in before and p.is_dir())
                if created:
                    state.run_dir = created[-1]
                    state.attempts = (state.attempts or []) + created
                state.status = "interrupted" if err.exit_code == 130 else "failed"
                self.manifest.update(status=state.status, ended_at=_utc_iso())
                self.save()
                raise
            state.seconds = time.monotonic() - started
            state.run_dir = run_dir.name
            state.attempts = (state.attempts or []) + [run_dir.name]
            state.status = "completed"
            done_seconds.append(state.seconds)
            self.save()
            left = len(todo) - index - 1
            eta = eta_seconds(done_seconds, left)
            log.info(
                f"cell {position}/{len(self.cells)} {state.cell.name}: completed in "
                f"{fmt_duration(state.seconds)}" + (f"; {left} left, ETA {fmt_duration(eta)}" if left else "")
            )
        if all(c.status == "completed" for c in self.cells):
            self.manifest.update(status="completed", ended_at=_utc_iso())
        self.save()
        return [p for _n, p in self.completed_runs()]
