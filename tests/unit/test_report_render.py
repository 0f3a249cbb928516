"""`crdscale report` on the reference run: HTML with embedded figures (with and without
code), findings.md/json whose numbers are the analysis functions' own, figures as PNG
and SVG; a failing notebook is named by file:line and its partial output kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("nbclient")

from crdscale.analysis.percrd import unattributed_share  # noqa: E402
from crdscale.analysis.run import analyze_run
from crdscale.cli.main import main  # noqa: E402
from crdscale.report.render import notebook_plan  # noqa: E402
from crdscale.rundir import (
    RunWriter,  # noqa: E402
    read_run,  # noqa: E402
)
from crdscale.units import fmt_value  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"


@pytest.fixture(scope="module")
def report(reference_report):
    """The reference run's report, rendered once with test_report_browser.py's (conftest.py)."""
    return reference_report.code, reference_report.stdout, Path(reference_report.out)


@pytest.mark.timeout(600)
def test_report_writes_html_findings_and_figures(report):
    code, stdout, out = report
    assert code == 0
    assert stdout.strip().splitlines()[-1] == str(out / "report-nocode.html")  # the HTML path is printed last
    for name in (
        "report.html",
        "report-nocode.html",
        "findings.md",
        "findings.json",
        "notebooks/memory.ipynb",
        "notebooks/attribution.ipynb",
    ):
        assert (out / name).is_file(), name
    for stem in ("headline", "memory-over-time", "memory-vs-crds", "heap-by-cause"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (out / f"{stem}.svg").read_bytes()[:2000]


def test_html_embeds_figures_and_says_what_was_run(report):
    _, _, out = report
    full = (out / "report.html").read_text()
    nocode = (out / "report-nocode.html").read_text()
    for html in (full, nocode):
        assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', html)) >= 8
        assert "What was run" in html and "v1.37.1" in html and "v3.6.16" in html
        assert "Reference run: 160 generated CRDs" in html
        # nothing loaded from the network: the report opens offline
        assert not re.search(r'<(script|link)[^>]+(src|href)="https?://', html)
    assert 'jp-Editor jp-InputArea-editor"' in full and ">read_run<" in full
    assert 'jp-Editor jp-InputArea-editor"' not in nocode and ">read_run<" not in nocode
    # the summary comes first: headline figure before the first notebook's title
    assert nocode.index("How memory grew and what one CRD costs") < nocode.index("Memory and CPU of kube-apiserver")


def test_each_figure_and_table_appears_once_and_no_reprs(report):
    """A cell that returns its figure while pyplot also shows it doubles the figure; a cell ending in a
    plot call prints ``<Axes: ...>``; a notebook table the summary already has shows twice."""
    import hashlib
    from collections import Counter

    _, _, out = report
    for name in ("report.html", "report-nocode.html"):
        html = (out / name).read_text()
        images = re.findall(r'<img[^>]+src="data:image/png;base64,([^"]+)"', html)
        assert len(images) >= 8, name
        counts = Counter(hashlib.sha256(i.encode()).hexdigest() for i in images)
        assert set(counts.values()) == {1}, f"{name}: a figure appears more than once"
        assert "&lt;Axes" not in html and "<Axes" not in html, name
        assert "matplotlib.legend.Legend object" not in html, name
        for heading in ("What-was-run", "Key-numbers"):
            assert len(re.findall(rf'<h2 id="{heading}"', html)) == 1, (name, heading)


def test_figure_titles_say_version_and_crd_count():
    """The headline figure is pasted alone into issues: each figure names what was measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from crdscale.report.figures import standard_figures

    run = read_run(REFERENCE)
    specs = standard_figures(run, analyze_run(run))
    assert [s.name for s in specs] == ["headline", "memory-over-time", "memory-vs-crds", "heap-by-cause"]
    for spec in specs:
        texts = [spec.figure.get_suptitle()] + [ax.get_title() for ax in spec.figure.axes]
        assert any("kube-apiserver v1.37.1, 160 CRDs" in t for t in texts), spec.name
        plt.close(spec.figure)


def test_findings_numbers_equal_the_analysis(report):
    _, _, out = report
    analysis = analyze_run(read_run(REFERENCE))
    doc = json.loads((out / "findings.json").read_text())
    assert doc["evidence"] == []  # the reference run's files agree (crdscale.rundir.evidence)
    found = {n["key"]: n for n in doc["numbers"]}
    fits = analysis.fits
    total = fits[(fits.phase == "served") & (fits.metric == "bytes") & (fits.cause == "total")].iloc[0]
    assert found["heap_per_crd"]["value"] == total["per_crd"]
    assert found["heap_per_crd"]["low"] == total["per_crd_low"]
    assert found["heap_per_crd"]["high"] == total["per_crd_high"]
    assert found["unattributed_share"]["value"] == unattributed_share(fits)
    for key, row in found.items():
        if key.startswith("cause:"):
            fit = fits[(fits.phase == "served") & (fits.metric == "bytes") & (fits.cause == key[6:])].iloc[0]
            assert row["value"] == fit["per_crd"]
    md = (out / "findings.md").read_text()
    assert fmt_value(total["per_crd"], "bytes/CRD") in md
    assert fmt_value(unattributed_share(fits), "share") in md
    assert "| **CRD set sha256** | " + analysis.manifest["crds"]["sha256"] in md
    for png in re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", md):
        assert (out / png).is_file() and (out / png).with_suffix(".svg").is_file()


def test_probe_notebooks_join_only_with_probe_tables(tmp_path):
    notebooks = ROOT / "notebooks"
    assert [p.stem for p in notebook_plan(read_run(REFERENCE), notebooks)] == ["memory", "attribution"]
    run = RunWriter.create_at(tmp_path)
    run.start_manifest(run_id="r")
    run.write_probe_table("list", 1, pd.DataFrame({"a": [1]}))
    assert [p.stem for p in notebook_plan(read_run(tmp_path), notebooks)] == ["memory", "attribution", "list"]


BROKEN = """# %% [markdown]
# # A notebook that breaks

# %% tags=["parameters"]
run_dir = "x"

# %%
before = "kept output"
print(before)

# %%
raise RuntimeError("boom in cell")

# %%
print("never runs")
"""

OK = """# %% tags=["parameters"]
run_dir = "x"

# %%
print("fine")
"""


@pytest.mark.timeout(300)
def test_failing_notebook_is_named_and_partial_output_kept(tmp_path, capsys):
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    (notebooks / "memory.py").write_text(BROKEN)
    (notebooks / "attribution.py").write_text(OK)
    out = tmp_path / "out"
    code = main(["report", str(REFERENCE), "--out", str(out), "--notebooks", str(notebooks)])
    captured = capsys.readouterr()
    assert code == 1
    assert f"{notebooks / 'memory.py'}:12: cell" in captured.err  # file:line of the failing cell
    assert "RuntimeError: boom in cell" in captured.err
    assert captured.out.strip().splitlines()[-1] == str(out / "report-nocode.html")
    html = (out / "report.html").read_text()
    assert "kept output" in html and "boom in cell" in html and "never runs" in html  # the source, unexecuted
    executed = json.loads((out / "notebooks" / "memory.ipynb").read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert any("kept output" in "".join(o.get("text", "")) for o in outputs)
    assert "fine" in (out / "report.html").read_text()  # the next notebook still ran


def test_not_a_run_directory(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a crdscale run directory" in capsys.readouterr().err


def test_report_cli_imports_stay_light():
    import subprocess
    import sys

    code = (
        "import sys; from crdscale.cli.main import build_parser; build_parser(); "
        "heavy = [m for m in ('matplotlib', 'nbclient', 'nbconvert', 'jupytext', 'pandas') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    heavy_now = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert not {"matplotlib", "nbclient", "nbconvert", "jupytext"} & set(heavy_now.split(","))


def test_reference_run_is_small():
    size = sum(p.stat().st_size for p in REFERENCE.rglob("*") if p.is_file())
    assert size < 10 * 2**20


@pytest.mark.timeout(300)
def test_write_report_is_the_one_pipeline(tmp_path):
    """Run reports and comparisons both go through write_report: the caller gives notebooks with their
    parameters and the content; figures, findings and both HTML files come out under layout's names."""
    import nbformat

    from crdscale.report.figures import FigureSpec, new_figure
    from crdscale.report.render import ReportContent, write_report
    from crdscale.rundir import layout

    notebook = tmp_path / "tiny.py"
    notebook.write_text('# %% tags=["parameters"]\nrun_dir = "x"\n\n# %%\nprint(f"given {run_dir}")\n')
    seen = {}

    def content():
        fig, ax = new_figure(4, 3)
        ax.plot([0, 1], [0, 1])
        return ReportContent(
            title="tiny report",
            figures=[FigureSpec("line", "A line", fig)],
            findings_md=lambda captions, html: f"captions {captions} html {html}\n",
            findings_json={"numbers": [1, 2]},
            first_cells=lambda pngs: seen.update(pngs) or [nbformat.v4.new_markdown_cell("# first cell here")],
        )

    out = tmp_path / "out"
    out.mkdir()
    result = write_report(out, [(notebook, {"run_dir": "the-run"})], content, timeout=120)
    assert result.ok and result.notebooks == [out / "notebooks" / "tiny.ipynb"]
    assert result.html == out / layout.REPORT_HTML and result.html_nocode == out / layout.REPORT_NOCODE_HTML
    assert result.findings_md.read_text() == "captions [('A line', 'line.png')] html report-nocode.html\n"
    assert json.loads((out / layout.FINDINGS_JSON).read_text()) == {"numbers": [1, 2]}
    assert [p.name for p in result.figures] == ["line.png", "line.svg"]
    assert seen["line"][:8] == b"\x89PNG\r\n\x1a\n"  # the first cells get the figures' PNG bytes
    html = result.html.read_text()
    assert html.index("first cell here") < html.index("given the-run")
    assert "given the-run" in result.html_nocode.read_text() and 'print(f"given' not in result.html_nocode.read_text()
