"""Every notebook in notebooks/ executes through its generated .ipynb: the memory and
attribution notebooks on the reference run (data/reference-run), the probe notebooks on
recorded probe tables (tests/data/probe-tables). No cluster needed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytest.importorskip("jupytext")
pytest.importorskip("nbclient")
pytest.importorskip("papermill")

import nbformat  # noqa: E402

from crdscale.report.render import (  # noqa: E402
    PROBE_NOTEBOOKS,
    execute_notebook,
    find_failure,
    read_notebook,
    unfinished_cell,
)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))
REFERENCE = ROOT / "data" / "reference-run"
PROBE_TABLES = ROOT / "tests" / "data" / "probe-tables"
TIMEOUT_S = 300


def test_there_are_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"memory", "attribution"}
    assert (REFERENCE / "manifest.json").is_file()


def _parameters(notebook: Path) -> dict:
    """The memory and attribution notebooks run with their own default (the reference run, relative
    to notebooks/ as JupyterLab opens them); probe notebooks get the recorded probe tables."""
    if notebook.stem in PROBE_NOTEBOOKS:
        prefix = PROBE_NOTEBOOKS[notebook.stem]
        if not any((PROBE_TABLES / "probes").glob(f"{prefix}-step*.parquet")):
            pytest.skip(f"no recorded {prefix} probe table under {PROBE_TABLES}/probes")
        return {"run_dir": str(PROBE_TABLES)}
    return {}


@pytest.mark.timeout(TIMEOUT_S + 60)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(notebook: Path, tmp_path: Path):
    generated = tmp_path / f"{notebook.stem}.ipynb"  # the executed .ipynb, as papermill writes it
    nb, stopped = execute_notebook(notebook, generated, _parameters(notebook), cwd=notebook.parent, timeout=TIMEOUT_S)
    source = notebook.read_text()
    failure = find_failure(nb, str(notebook), source) or (
        stopped and unfinished_cell(nb, str(notebook), stopped, source)
    )
    assert not failure, failure.describe()
    assert nbformat.read(str(generated), as_version=4).cells == nb.cells
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    if notebook.stem in ("memory", "attribution"):
        images = sum("image/png" in o.get("data", {}) for c in code for o in c.outputs)
        assert images >= 3, "expected the notebook's figures as PNG outputs"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_conventions(notebook: Path):
    """py:percent, a parameters cell with run_dir, Markdown explanations, no helper functions."""
    nb = read_notebook(notebook)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "run_dir" in params[0].source
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= 3
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        defined = [
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
        ]
        assert not defined, f"{notebook.name}: define helpers in the package, not in the notebook"
