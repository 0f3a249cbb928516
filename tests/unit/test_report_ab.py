"""`crdscale report` and `crdscale lab` on an A/B directory, on the recorded known-cost A/B
(data/ab-known-cost: v1.37.1 against v1.37.1 holding 2 MiB more per served CRD version, 3 pairs): the
pairs' differences, the frames that changed, the differential flame graph embedded in the one HTML
report (plotly.js inside) and rendered by headless Chromium (skipped only where chromium is missing),
and the A/B notebook bound to the A/B for JupyterLab."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.report import ab as abreport
from crdscale.report.diffflame import PLOTLY_MIME, FlameView, diff_icicle_figure
from crdscale.scenario.ab import AB, is_ab_directory

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "data" / "ab-known-cost"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INJECTED = 2 * 2**20  # tests/data/patches/known-cost-v1.37.1.diff: bytes per served CRD version


@pytest.fixture
def ab_copy(tmp_path):
    """A copy of the recorded A/B (reports and notebooks are written into it)."""
    return Path(shutil.copytree(RECORDED, tmp_path / RECORDED.name))


@pytest.fixture(scope="module")
def recorded():
    ab = AB.open(RECORDED)
    return ab, ab.comparison()


def test_the_fixture_is_an_ab_directory_of_three_pairs(recorded):
    ab, comparison = recorded
    assert is_ab_directory(RECORDED) and not is_ab_directory(ROOT / "data" / "reference-run")
    assert ab.paired() == {1, 2, 3} and comparison.reference == "base" and comparison.compared == ["changed"]


def test_each_pair_has_its_difference_and_who_ran_first(recorded):
    ab, comparison = recorded
    pairs = abreport.pair_differences(ab, comparison)
    assert list(pairs["pair"]) == [1, 2, 3] and list(pairs["first"]) == ["base", "changed", "base"]
    assert pairs.attrs["unit"] == "bytes per CRD"
    # Each pair sees the injected bytes; their mean is the pooled difference of the verdict.
    assert all(0.8 * INJECTED < d < 1.2 * INJECTED for d in pairs["difference"])
    joint = comparison.joint
    total = joint[(joint["cause"] == "total") & (joint["metric"] == "bytes")].iloc[0]
    assert pairs["difference"].mean() == pytest.approx(total["difference"], rel=1e-6)


def test_the_frame_that_changed_is_the_crd_handler_holding_the_injected_bytes(recorded):
    ab, _comparison = recorded
    frames = abreport.frames_changed(ab)
    top = frames.iloc[0]
    assert top["name"].startswith("k8s.io/apiextensions-apiserver/pkg/apiserver.")
    assert top["cause"] == "crd-handler"
    assert top["difference"] == pytest.approx(INJECTED, rel=0.15)
    assert (frames["difference"] == frames["changed"] - frames["base"]).all()
    assert frames["difference"].abs().is_monotonic_decreasing


def test_flame_view_carries_plotly_json_for_jupyterlab_and_html_for_the_report(recorded):
    ab, _comparison = recorded
    nodes = abreport.flame_nodes(ab)
    bundle = FlameView(abreport.flame_figure(ab, nodes))._repr_mimebundle_()
    assert bundle[PLOTLY_MIME]["data"][0]["type"] == "icicle"
    assert "Plotly.newPlot" in bundle["text/html"] and '<script src="http' not in bundle["text/html"]
    by_cause = diff_icicle_figure(nodes, colour="cause")
    assert by_cause.layout.updatemenus[0].active == 1
    assert isinstance(by_cause.data[0].marker.colors[0], str)  # a cause's colour, not a difference
    with pytest.raises(ValueError, match="colour"):
        diff_icicle_figure(nodes, colour="rainbow")


@pytest.mark.timeout(600)
def test_report_on_an_ab_embeds_the_flame_graph_and_chromium_draws_it(ab_copy, tmp_path, capsys):
    assert main(["report", str(ab_copy)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    html = Path(out[-1])
    assert html == ab_copy / "report" / "report-nocode.html"
    text = html.read_text()
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="https?://', text)  # opens offline
    assert "Plotly.newPlot" in text and '"type":"icicle"' in text
    assert "crdscale verdict: known-cost-v1.37.1.diff" in text
    assert text.count("crdscale verdict:") == 1  # the notebook's own verdict cell is the report's first cells'
    assert (ab_copy / "report" / "pair-differences.png").is_file()
    findings = json.loads((ab_copy / "report" / "findings.json").read_text())
    assert findings["reference"] == "base"
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000", "--dump-dom", html.as_uri()],
        capture_output=True, text=True, timeout=180,
    ).stdout  # fmt: skip
    assert 'class="trace icicle"' in dom
    assert dom.count('class="slice cursor-pointer"') > 50  # the boxes were drawn


def test_lab_binds_the_ab_notebook_to_the_ab_directory(ab_copy):
    from crdscale.report.lab import bind_notebooks

    bound = bind_notebooks(ab_copy, execute=False)
    assert [(b.path.relative_to(ab_copy).as_posix(), b.created) for b in bound] == [("notebooks/ab.ipynb", True)]
    nb = json.loads(bound[0].path.read_text())
    params = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and f"run_dir = {json.dumps(str(ab_copy))}" in "".join(params[0]["source"])
    assert [b.created for b in bind_notebooks(ab_copy, execute=False)] == [False]


def test_report_on_an_ab_without_a_pair_is_one_line(tmp_path, capsys):
    empty = tmp_path / "ab"
    empty.mkdir()
    manifest = json.loads((RECORDED / "ab.json").read_text())
    (empty / "ab.json").write_text(json.dumps({**manifest, "runs": []}))
    assert main(["report", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no complete base/changed pair yet" in err and len(err.splitlines()) == 1
    assert not (empty / "report").exists()
