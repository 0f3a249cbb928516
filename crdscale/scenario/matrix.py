"""Experiment matrices: one scenario, several runs that differ in a few keys.

A scenario file may hold a ``[matrix]`` table whose axes are dotted scenario
keys, each with the list of values to try, and an optional ``repeat``::

    [matrix]
    "target.kube_version" = ["1.24.0", "1.37.1"]
    "target.env.GOGC" = ["100", "50"]
    repeat = 2

The cells are the cross product of the axes in file order (the first axis
varies slowest), each repeated ``repeat`` times. Every cell is an ordinary
scenario: the file's keys, then ``--set`` overrides, then the cell's values;
all cells are validated before anything runs. A cell's name says its values
(``kube_version=1.24.0,GOGC=50``, plus ``,repeat=2`` when repeated), is
stable across invocations, and names the cell's run directory.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass
from typing import Any

from crdscale.errors import UsageError
from crdscale.scenario.config import Scenario, build_scenario, resolve_paths

# Characters kept in a cell name; anything else (path separators, spaces, quotes) becomes "_".
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")
_MAX_VALUE_CHARS = 40


@dataclass(frozen=True)
class Cell:
    """One run of a matrix: ``values`` maps axis (dotted key) -> value; ``repeat`` is 1-based."""

    name: str
    values: dict[str, Any]
    repeat: int = 1


def axis_labels(axes: list[str]) -> dict[str, str]:
    """Short label per axis: the key's last part (``GOGC``), or the whole key when two axes share it."""
    short = {axis: axis.rsplit(".", 1)[-1] for axis in axes}
    taken = [s for s in short.values()]
    return {axis: (s if taken.count(s) == 1 else axis) for axis, s in short.items()}


def format_value(value: Any) -> str:
    """A value as it appears in a cell name: file-name safe, at most ~40 characters (longer values
    keep their start and a short hash, so different values never share a name)."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, list):
        text = "+".join(format_value(v) for v in value) or "none"
    elif isinstance(value, dict):  # a whole table, e.g. "target.env" = [{GOGC = "50"}, {GOMEMLIMIT = "1GiB"}]
        text = "+".join(f"{k}={format_value(v)}" for k, v in value.items()) or "none"
    elif isinstance(value, str):
        text = value.lstrip("-")  # "--v=2" reads better as "v=2"
    else:
        text = str(value)
    text = _UNSAFE.sub("_", text) or "none"
    if len(text) > _MAX_VALUE_CHARS:
        digest = hashlib.sha256(repr(value).encode()).hexdigest()[:8]
        text = f"{text[: _MAX_VALUE_CHARS - 9]}~{digest}"
    return text


def matrix_cells(matrix: dict[str, Any]) -> list[Cell]:
    """The cells of a flattened ``[matrix]`` table (:attr:`Scenario.matrix`), in run order."""
    repeat = int(matrix.get("repeat", 1))
    axes = [k for k in matrix if k != "repeat"]
    labels = axis_labels(axes)
    cells = []
    for combo in itertools.product(*(matrix[a] for a in axes)):
        values = dict(zip(axes, combo))
        base = ",".join(f"{labels[a]}={format_value(v)}" for a, v in values.items()) or "base"
        for r in range(1, repeat + 1):
            cells.append(Cell(f"{base},repeat={r}" if repeat > 1 else base, values, r))
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"matrix: two cells would both be named {dup!r}: the axes repeat a value")
    return cells


def cell_where(scenario: Scenario, cell: Cell) -> str:
    """How errors name a cell: ``patch.toml [matrix] cell kube_source=none``."""
    return f"{scenario.source_path or 'scenario'} [matrix] cell {cell.name}"


def cell_scenario(scenario: Scenario, cell: Cell) -> Scenario:
    """The scenario of one cell: the file's keys, the ``--set`` overrides, then the cell's values.

    ``raw`` (what the run manifest records) gains ``experiment = {name, cell,
    values, repeat}`` so a cell's run directory says which cell it was.
    Raises UsageError naming the cell when its values are not a valid scenario.
    """
    built = build_scenario(
        scenario.user, where=cell_where(scenario, cell), overrides={**scenario.overrides, **cell.values}
    )
    built.source_path = scenario.source_path
    resolve_paths(built)
    built.raw["experiment"] = {
        "name": scenario.name,
        "cell": cell.name,
        "values": dict(cell.values),
        "repeat": cell.repeat,
    }
    return built


def expand(scenario: Scenario) -> list[tuple[Cell, Scenario]]:
    """Every cell of the scenario's matrix with its validated scenario (one ``base`` cell without a matrix)."""
    if not scenario.matrix:
        return [(Cell("base", {}), scenario)]
    return [(cell, cell_scenario(scenario, cell)) for cell in matrix_cells(scenario.matrix)]
