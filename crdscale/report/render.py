"""Execute the notebooks against a run and render the report.

``crdscale report RUN_DIR`` calls :func:`render_report`, which writes into
the output directory (default ``RUN_DIR/report/``; the names are
:mod:`crdscale.rundir.layout`'s)::

    findings.md            headline, provenance, key numbers, figures: paste into an issue or KEP
    findings.json          the same numbers, unformatted
    *.png, *.svg           the figures findings.md shows
    report.html            summary + every notebook, with code
    report-nocode.html     the same without code cells (what to attach)
    notebooks/*.ipynb      each notebook as executed (partial when a cell failed)

Notebooks are jupytext ``py:percent`` files; each is read with jupytext and
executed by papermill: its ``run_dir`` goes in a cell papermill inserts after
the cell tagged ``parameters``, and it runs in a ``python3`` kernel of the
current interpreter. A failing notebook keeps its output up to the failing
cell, which :class:`CellFailure` names by file and line.

:func:`write_report` is the pipeline itself, shared with comparisons
(:func:`crdscale.report.compare.render_comparison`): each caller gives its
notebooks with their parameters and a :class:`ReportContent` (title, figures,
findings, first cells).
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import crdscale
from crdscale.analysis.run import analyze_run
from crdscale.errors import UsageError
from crdscale.fsutil import check_output_dir
from crdscale.outputs import relocate, replacing_directory
from crdscale.report import figures, series
from crdscale.report.findings import (
    compute_findings,
    findings_markdown,
    headline,
    numbers_markdown,
    provenance_markdown,
    warnings_markdown,
)
from crdscale.rundir import Run, layout, read_run
from crdscale.rundir.evidence import HEAP
from crdscale.units import is_missing

log = logging.getLogger(__name__)

# The notebooks every report runs, in order; probe notebooks join when the run has their tables.
CORE_NOTEBOOKS = ("memory", "attribution")
PROBE_NOTEBOOKS = {"discovery": "discovery", "list": "list", "apf": "apf"}  # notebook -> probe table prefix
KERNEL_NAME = "python3"
CELL_TIMEOUT_S = 600

# The lab template, without anything loaded from the network (require.js, MathJax, mermaid,
# widgets): the report must open offline and without console errors.
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""


def default_notebooks_dir() -> Path:
    """``notebooks/`` of the source tree crdscale runs from."""
    return Path(crdscale.__file__).resolve().parents[1] / "notebooks"


@dataclass
class CellFailure:
    """Where a notebook failed: the cell (0-based among all cells), its line in the ``.py`` file and the error."""

    notebook: str
    cell_index: int
    line: int | None
    source_head: str
    ename: str
    evalue: str

    def describe(self) -> str:
        where = f"{self.notebook}:{self.line}" if self.line else self.notebook
        return (
            f"{where}: cell {self.cell_index} ({self.source_head!r}) raised {self.ename}: "
            f"{self.evalue.splitlines()[0] if self.evalue else ''}"
        )


@dataclass
class ReportResult:
    """What :func:`render_report` wrote, and which notebooks failed."""

    out_dir: Path
    html: Path
    html_nocode: Path
    findings_md: Path
    figures: list[Path] = field(default_factory=list)
    notebooks: list[Path] = field(default_factory=list)
    failures: list[CellFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def relocated(self, staging: Path, final: Path) -> ReportResult:
        """The same result with paths under ``staging`` named as under ``final`` (where it was renamed to)."""

        def move(p: Path) -> Path:
            return relocate(p, staging, final)

        return ReportResult(
            move(self.out_dir),
            move(self.html),
            move(self.html_nocode),
            move(self.findings_md),
            [move(p) for p in self.figures],
            [move(p) for p in self.notebooks],
            self.failures,
        )


# --------------------------------------------------------------------------
# Which notebooks
# --------------------------------------------------------------------------


def notebook_plan(run: Run, notebooks_dir: str | Path) -> list[Path]:
    """The notebooks a report on ``run_dir`` runs: the core ones, then each probe notebook
    whose probe left tables in the run."""
    notebooks_dir = Path(notebooks_dir)
    plan = [notebooks_dir / f"{name}.py" for name in CORE_NOTEBOOKS]
    plan += [notebooks_dir / f"{name}.py" for name, probe in PROBE_NOTEBOOKS.items() if run.has_probe_table(probe)]
    missing = [p for p in plan if not p.is_file()]
    if missing:
        raise UsageError(
            f"notebook {missing[0]} not found (use --notebooks DIR: the notebooks/ of a crdscale checkout)"
        )
    return plan


# --------------------------------------------------------------------------
# One notebook
# --------------------------------------------------------------------------


def read_notebook(path: str | Path):
    """A jupytext ``py:percent`` file (or an ``.ipynb``) as an nbformat notebook."""
    import jupytext  # lazy: the optional report extra

    return jupytext.read(str(path))


def find_failure(nb, name: str, source_text: str | None = None) -> CellFailure | None:
    """The first cell of an executed notebook with an error output; its line in ``source_text``
    (the ``.py`` file) when the cell's first line can be found there."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
                line = None
                if source_text and first:
                    line = next((i + 1 for i, ln in enumerate(source_text.splitlines()) if ln == first), None)
                return CellFailure(name, index, line, first[:80], output.get("ename", ""), output.get("evalue", ""))
    return None


def execute_notebook(
    source: str | Path,
    output: str | Path,
    parameters: dict,
    *,
    cwd: str | Path,
    timeout: int = CELL_TIMEOUT_S,
    kernel_name: str = KERNEL_NAME,
    prepare_only: bool = False,
):
    """Run the notebook ``source`` with papermill: ``parameters`` injected after the cell tagged
    ``parameters``, every cell executed in a fresh kernel of this interpreter (working directory
    ``cwd``), the result written to ``output`` (``.ipynb``) after each cell. ``prepare_only``
    writes the parameterized notebook without running it.

    Stops at the first failing cell, leaving its error in the outputs. Returns
    ``(executed notebook, reason)``: ``reason`` is ``None``, or a one-line reason
    when the kernel died or a cell timed out (no error output then).
    """
    import nbformat  # lazy: the optional report extra
    import papermill  # lazy: the optional report extra

    nb = read_notebook(source)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    reason = None
    try:
        # language: how papermill writes the parameters; a .py without jupytext's header has none.
        # The kernel shares our stderr: only its errors belong there, not its transport warnings.
        papermill.execute_notebook(
            nb,
            str(output),
            parameters=parameters,
            kernel_name=kernel_name,
            language="python",
            cwd=str(cwd),
            execution_timeout=timeout,
            progress_bar=False,
            log_output=False,
            prepare_only=prepare_only,
            extra_arguments=["--IPKernelApp.log_level=ERROR"],
        )
    except papermill.PapermillExecutionError:
        pass  # the error is in the failing cell's outputs; find_failure reads it
    except Exception as err:  # DeadKernelError, CellTimeoutError, a kernel that never started
        reason = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    if output.is_file():  # papermill saves after every cell, also when one failed
        return nbformat.read(str(output), as_version=4), reason
    return nb, reason


def unfinished_cell(nb, name: str, reason: str, source_text: str | None = None) -> CellFailure:
    """The failure of a notebook stopped without an error output: the first code cell left unexecuted."""
    index = next(
        (i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("execution_count") is None),
        len(nb.cells) - 1,
    )
    cell = nb.cells[index] if nb.cells else None
    first = next((ln for ln in (cell.source.splitlines() if cell else []) if ln.strip()), "")
    line = None
    if source_text and first:
        line = next((i + 1 for i, ln in enumerate(source_text.splitlines()) if ln == first), None)
    ename, _, evalue = reason.partition(": ")
    return CellFailure(name, index, line, first[:80], ename, evalue)


# --------------------------------------------------------------------------
# The combined report
# --------------------------------------------------------------------------


def summary_cells(title: str, findings, headline_png: bytes | None):
    """The report's first cells: title and headline sentence, what was run, the headline
    figure (a Markdown attachment, so it shows with and without code) and the key numbers."""
    import nbformat  # lazy: the optional report extra

    first = [
        f"# {title}",
        "",
        *warnings_markdown(findings.warnings),
        f"**{headline(findings.numbers)}**",
        "",
        "## What was run",
        "",
        provenance_markdown(findings.provenance),
    ]
    cells = [nbformat.v4.new_markdown_cell("\n".join(first))]
    if headline_png:
        cell = nbformat.v4.new_markdown_cell("![How memory grew and what one CRD costs](attachment:headline.png)")
        cell["attachments"] = {"headline.png": {"image/png": base64.b64encode(headline_png).decode("ascii")}}
        cells.append(cell)
    cells.append(
        nbformat.v4.new_markdown_cell(
            "## Key numbers\n\n"
            + numbers_markdown(findings.numbers)
            + "\n\nThe notebooks below show how these were computed: memory and CPU over time, then the heap by cause."
        )
    )
    return cells


# A notebook cell tagged so shows what the report's first cells already show (what was run, the key
# numbers): a notebook opened alone keeps it, the combined report leaves it out.
SUMMARY_TAG = "summary"


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def one_parameters_cell(nb):
    """``nb`` (as papermill executed it) with a single parameters cell: the injected values take the
    place of the defaults' cell, tagged ``parameters``, so the notebook shows ``run_dir`` once."""
    injected = [i for i, c in enumerate(nb.cells) if "injected-parameters" in _tags(c)]
    if not injected:
        return nb
    cell = nb.cells[injected[0]]
    cell.metadata["tags"] = ["parameters" if t == "injected-parameters" else t for t in _tags(cell)]
    nb.cells = [c for i, c in enumerate(nb.cells) if i == injected[0] or "parameters" not in _tags(c)]
    return nb


def combine(parts: Sequence, first_cells: Sequence = ()):
    """One notebook: ``first_cells`` then the cells of each executed notebook in order, each with one
    parameters cell; with ``first_cells``, the notebooks' cells tagged :data:`SUMMARY_TAG` are left
    out (the first cells show the same tables)."""
    import nbformat  # lazy: the optional report extra

    nb = nbformat.v4.new_notebook()
    nb.metadata = copy.deepcopy(parts[0].metadata) if parts else {}
    nb.cells = [copy.deepcopy(c) for c in first_cells]
    for part in parts:
        cells = one_parameters_cell(copy.deepcopy(part)).cells
        nb.cells.extend(c for c in cells if not (first_cells and SUMMARY_TAG in _tags(c)))
    return nb


def export_html(nb, path: str | Path, *, title: str, with_code: bool = True) -> Path:
    """Write ``nb`` as self-contained HTML (images embedded; nothing fetched from the network);
    ``with_code=False`` leaves out code cells' input and the prompts."""
    import jinja2  # lazy: the optional report extra
    from nbconvert import HTMLExporter  # lazy: the optional report extra

    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[jinja2.DictLoader({"crdscale.html.j2": _TEMPLATE})],
        template_file="crdscale.html.j2",
    )
    if not with_code:
        exporter.exclude_input = True
        exporter.exclude_input_prompt = True
        exporter.exclude_output_prompt = True
    nb = copy.deepcopy(nb)
    nb.metadata["title"] = title
    body, _resources = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def _json_safe(value):
    return None if is_missing(value) else value


@dataclass
class ReportContent:
    """What a report says besides its notebooks, computed while they execute (see :func:`write_report`).

    Attributes:
        title: the HTML reports' title.
        figures: saved as ``<name>.png`` and ``<name>.svg`` (:class:`crdscale.report.figures.FigureSpec`).
        findings_md: ``findings.md`` given the figures as ``(caption, PNG file name)`` and the name of
            the HTML report to attach.
        findings_json: ``findings.json``: the same numbers, unformatted.
        first_cells: the report's first cells (before the notebooks') given each figure's PNG bytes by name.
    """

    title: str
    figures: Sequence
    findings_md: Callable[[list[tuple[str, str]], str], str]
    findings_json: dict
    first_cells: Callable[[dict[str, bytes]], Sequence]


def write_report(
    out: Path,
    notebooks: Sequence[tuple[Path, dict]],
    content: Callable[[], ReportContent],
    *,
    timeout: int = CELL_TIMEOUT_S,
) -> ReportResult:
    """The one report pipeline, for a run (:func:`render_report`) and for a comparison
    (:func:`crdscale.report.compare.render_comparison`): into the directory ``out``, execute each
    notebook ``(path, parameters)`` into ``notebooks/`` while ``content()`` is computed here, save its
    figures as PNG and SVG, write ``findings.md`` and ``findings.json``, then the report (first cells,
    then every executed notebook) as HTML with and without code.

    A notebook that fails does not stop the report: its partial output is kept and the failure is in
    ``result.failures``. Validate inputs before calling: the kernels start first.
    """
    import IPython  # noqa: F401  # lazy: the report extra's, imported before the kernels start (below)
    import matplotlib  # lazy: only when drawing; Agg is chosen before pyplot loads

    matplotlib.use("Agg")

    # IPython is imported above, before the kernel threads start: they import it (jupyter_client's
    # kernelspec), and matplotlib saving a figure meanwhile reads sys.modules["IPython"], which would be
    # half-initialised then (AttributeError: 'IPython' has no attribute 'version_info').
    # The notebooks run in their own kernels while this process analyses and draws the figures:
    # each waits on its kernel, so on two cores the report takes about as long as its slowest part.

    # Written into a sibling and renamed into place under a lock: a second report into ``out`` at the same
    # time is refused, never mixed with this one, and an error leaves the previous report as it was.
    with replacing_directory(out) as staging:
        result = _execute_and_write(staging, notebooks, content, timeout)
    return result.relocated(staging, Path(out).absolute())


def _execute_and_write(
    out: Path, notebooks: Sequence[tuple[Path, dict]], content: Callable[[], ReportContent], timeout: int
) -> ReportResult:
    workers = max(1, min(len(notebooks), os.cpu_count() or 1))
    pool = ThreadPoolExecutor(max_workers=workers)
    running = [(path, out / "notebooks" / f"{path.stem}.ipynb") for path, _params in notebooks]
    futures = [
        pool.submit(execute_notebook, path, target, params, cwd=path.parent, timeout=timeout)
        for (path, params), (_path, target) in zip(notebooks, running)
    ]
    log.info(f"executing {', '.join(p.name for p, _t in running)} in {workers} kernel(s) at once")
    try:
        return _write(out, content(), running, futures)
    finally:
        # On an error here, the kernels still finish their notebooks (and save them) before we return.
        pool.shutdown(wait=True, cancel_futures=True)


def _write(out: Path, content: ReportContent, running, futures) -> ReportResult:
    """Figures, findings and HTML of ``content`` while ``futures`` (one per notebook of ``running``) execute."""
    import matplotlib.pyplot as plt  # lazy: pyplot (~0.3 s) only when drawing

    figure_files, captions, pngs = [], [], {}
    for spec in content.figures:
        png, svg = out / f"{spec.name}.png", out / f"{spec.name}.svg"
        spec.figure.savefig(png, dpi=110)
        spec.figure.savefig(svg)
        plt.close(spec.figure)
        figure_files += [png, svg]
        captions.append((spec.caption, png.name))
        pngs[spec.name] = png.read_bytes()

    html, html_nocode = out / layout.REPORT_HTML, out / layout.REPORT_NOCODE_HTML
    findings_md = out / layout.FINDINGS_MD
    findings_md.write_text(content.findings_md(captions, html_nocode.name), encoding="utf-8")
    (out / layout.FINDINGS_JSON).write_text(
        json.dumps(content.findings_json, indent=2, default=str) + "\n", encoding="utf-8"
    )

    executed, written, failures = [], [], []
    for (path, target), future in zip(running, futures):
        nb, stopped = future.result()
        written.append(target)
        executed.append(nb)
        source_text = path.read_text(encoding="utf-8")
        failure = find_failure(nb, str(path), source_text)
        if failure is None and stopped:
            failure = unfinished_cell(nb, str(path), stopped, source_text)
        if failure:
            failures.append(failure)
            log.info(f"notebook failed: {failure.describe()}")

    report = combine(executed, content.first_cells(pngs))
    export_html(report, html, title=content.title, with_code=True)
    export_html(report, html_nocode, title=content.title, with_code=False)
    return ReportResult(out, html, html_nocode, findings_md, figure_files, written, failures)


def render_report(
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    notebooks_dir: str | Path | None = None,
    timeout: int = CELL_TIMEOUT_S,
) -> ReportResult:
    """Findings, figures and HTML for one run directory (see the module docstring).

    Raises UsageError when ``run_dir`` is not a run with heap profiles at two
    or more CRD counts. A notebook that fails does not stop the report: its
    partial output is kept and the failure is in ``result.failures``.
    """

    data = read_run(Path(run_dir).resolve())
    run_dir = data.path
    out = check_output_dir(Path(out_dir).resolve() if out_dir else data.path / layout.REPORT)
    notebooks_dir = (Path(notebooks_dir) if notebooks_dir else default_notebooks_dir()).resolve()
    plan = notebook_plan(data, notebooks_dir)
    # What can be wrong with the run's files is found before the kernels start (they take minutes):
    # an unreadable series, a profile whose name disagrees with its event, too few CRD counts.
    data.series  # noqa: B018
    data.evidence.require(HEAP, run_dir)  # a foreign, swapped or copied profile (crdscale.rundir.evidence)
    if data.heap_profiles()["crds"].nunique() < 2:
        raise UsageError(f"{run_dir}: needs heap profiles at two or more CRD counts under profiles/")
    return write_report(
        out,
        [(path, {"run_dir": str(run_dir)}) for path in plan],
        lambda: run_report_content(data),
        timeout=timeout,
    )


def run_report_content(data: Run) -> ReportContent:
    """What the report on one run says besides its notebooks: the analysis, its findings and figures."""

    run_dir = data.path
    log.info(f"analysing {run_dir}")
    analysis = analyze_run(data)
    for warning in analysis.warnings:  # also on the report's first screen and in findings.md
        log.warning(warning)
    findings = compute_findings(data.manifest, analysis, series.memory_frame(data.series, data.start))
    scenario = data.manifest.scenario.name or run_dir.name
    title = f"crdscale report: {scenario} ({run_dir.name})"
    return ReportContent(
        title=title,
        figures=figures.standard_figures(data, analysis),
        findings_md=lambda captions, html: findings_markdown(
            findings, captions, title=f"crdscale findings: {scenario}", report_html=html
        ),
        findings_json={
            "run_dir": str(run_dir),
            "status": data.status,
            "reason": data.manifest.reason,
            "warnings": findings.warnings,
            "evidence": [p.to_json() for p in data.evidence.problems],
            "provenance": findings.provenance,
            "numbers": [{k: _json_safe(v) for k, v in row.items()} for row in findings.numbers.to_dict("records")],
        },
        first_cells=lambda pngs: summary_cells(title, findings, pngs.get("headline")),
    )
