"""A run's evidence checks itself (issue 31, part 2): copies of the reference runs damaged so that their
files contradict each other (crdscale.testing.damage), each found by crdscale.rundir.evidence and named
where the numbers are, then refused (one line, exit 2) or stated beside the numbers.

One test per damage through the CLI, the reference runs with no problem and their numbers unchanged,
the report's first screen and findings.md, compare's refusals and warnings, and a Hypothesis property over
combinations of damages (CRDSCALE_HYPOTHESIS_EXAMPLES examples, default 8; every one copies a run and
analyzes it, about two seconds each).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from crdscale.analysis.run import analyze_run
from crdscale.cli.main import main
from crdscale.rundir import layout, read_run
from crdscale.rundir.evidence import REFUSE, SERIES, UNRELIABLE, Evidence, Problem
from crdscale.testing.damage import DAMAGES, REFERENCE, REFERENCE_124, copy_run

BY_NAME = {d.name: d for d in DAMAGES}


@pytest.fixture(scope="module")
def other(tmp_path_factory) -> Path:
    """A copy of the v1.24.0 reference run: profiles of another build."""
    return copy_run(REFERENCE_124, tmp_path_factory.mktemp("other") / "ref124")


def damaged(tmp_path: Path, other: Path, *names: str) -> Path:
    run = copy_run(REFERENCE, tmp_path / "-".join(names), new_run_id=True)
    for name in names:
        BY_NAME[name].apply(run, other)
    return run


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crdscale: error: "), err
    assert "Traceback" not in err
    return lines[0]


# --- the reference runs --------------------------------------------------------------


@pytest.mark.parametrize("source", [REFERENCE, REFERENCE_124], ids=["v1.37.1", "v1.24.0"])
def test_the_reference_runs_have_no_evidence_problem_and_keep_every_row(source):
    run = read_run(source)
    assert run.evidence.problems == ()
    assert run.evidence.build_id and run.evidence.binary.endswith("/kube-apiserver")
    assert run.series.equals(run.recorded_series)  # nothing left out: every number as before
    assert run.file_warnings == []


def test_the_reference_analysis_says_nothing_of_evidence(capsys):
    assert main(["analyze", "--no-write", str(REFERENCE)]) == 0
    out = capsys.readouterr().out
    assert "evidence problem" not in out and "RSS grows 2.19 MiB per CRD" in out


# --- each damage, through the CLI -----------------------------------------------------


@pytest.mark.parametrize("damage", DAMAGES, ids=str)
def test_each_damage_is_named_then_refused_or_stated(tmp_path, capsys, other, damage):
    run = damaged(tmp_path, other, damage.name)
    code = main(["analyze", "--no-write", str(run)])
    captured = capsys.readouterr()
    if damage.refused:
        assert code == 2
        line = one_error_line(captured.err)
        assert "evidence problem" in line and f"({damage.code})" in line and "refuse" in line
        assert captured.out == ""
    else:
        assert code == 0, captured.err
        assert "error" not in captured.err and "Traceback" not in captured.err
        warnings = [line for line in captured.out.splitlines() if line.startswith("warning: ")]
        assert re.match(r"warning: \d evidence problems? in this run's files \(", warnings[0]), warnings  # counted
        assert any(f"({damage.code}:" in w for w in warnings), warnings


def test_a_foreign_profile_is_named_with_its_period_and_its_binary(tmp_path, capsys, other):
    run = damaged(tmp_path, other, "foreign-sample-period")
    assert main(["analyze", "--no-write", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "profiles/heap-step02-crds0080.pb.gz samples every 512 bytes, not every 524,288" in line

    run = damaged(tmp_path, other, "profile-of-another-build")
    problems = {p.code: p for p in read_run(run).evidence.problems}
    assert problems["profile-binary"].files == ("profiles/heap-step02-crds0080.pb.gz",)
    assert "v1.24.0/kube-apiserver" in problems["profile-binary"].what


def test_swapped_steps_name_both_profiles(tmp_path, other):
    run = damaged(tmp_path, other, "steps-swapped")
    (problem,) = read_run(run).evidence.problems
    assert problem.code == "profile-time-order" and problem.severity == REFUSE
    assert {"profiles/heap-step01-crds0040.pb.gz", "profiles/heap-step03-crds0120.pb.gz"} <= set(problem.files)


def test_byte_identical_profiles_are_one_problem_naming_them(tmp_path, other):
    run = damaged(tmp_path, other, "profiles-byte-identical")
    (problem,) = read_run(run).evidence.problems  # copies are not also "out of order"
    assert problem.code == "profile-duplicate" and len(problem.files) == 9 and problem.steps == (0, 1, 2, 3, 4)


def test_a_falling_crd_count_names_its_step(tmp_path, other):
    run = damaged(tmp_path, other, "crd-count-falls")
    (problem,) = read_run(run).evidence.problems
    assert problem.what.startswith("step 3 records 20 CRDs after 80 at step 2") and problem.steps == (2, 3)


@pytest.mark.parametrize(
    "name",
    ["series-all-nan", "series-duplicated-at-10x", "series-10-years-away", "series-no-rows", "series-is-a-directory"],
)
def test_a_damaged_series_gives_no_rss_figure(tmp_path, capsys, other, name):
    run = damaged(tmp_path, other, name)
    assert main(["analyze", "--no-write", str(run), "-o", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)["runs"][0]
    assert doc["series_fits"] == []  # no "RSS per CRD 0 B [0 B, 0 B]", no 31.36 MiB from rows at 10x
    assert any(BY_NAME[name].code in w for w in doc["warnings"])
    (item,) = [e for e in doc["evidence"] if e["code"] == BY_NAME[name].code]  # and as data
    assert item["affects"] == "series" and item["severity"] in (REFUSE, UNRELIABLE)
    assert item["message"] in " ".join(doc["warnings"]) and item["files"] == [layout.SERIES]
    assert f"{BY_NAME[name].code}" in captured.err  # -o json: the warnings on stderr
    # The heap numbers are the reference's, untouched.
    reference = analyze_run(read_run(REFERENCE))
    total = [f for f in doc["fits"] if f["cause"] == "total" and f["phase"] == "served" and f["metric"] == "bytes"]
    assert total[0]["per_crd"] == pytest.approx(
        reference.fits.query("cause == 'total' and phase == 'served' and metric == 'bytes'")["per_crd"].iloc[0]
    )


def test_some_rows_outside_the_run_are_left_out_and_the_rest_kept(tmp_path, other):
    import pandas as pd

    from crdscale.testing.damage import edit_series

    run = copy_run(REFERENCE, tmp_path / "run")
    first = pd.Timestamp("2026-11-23T10:43:40Z")
    edit_series(
        run,
        lambda f: f.assign(
            timestamp=f["timestamp"].where(f["timestamp"] > first, f["timestamp"] - pd.Timedelta(days=400))
        ),
    )
    data = read_run(run)
    (problem,) = data.evidence.problems
    assert problem.code == "series-outside-run" and problem.severity == UNRELIABLE and problem.affects == SERIES
    assert 0 < len(data.series) < len(data.recorded_series)


def test_a_status_the_events_deny_is_stated_everywhere(tmp_path, capsys, other):
    from crdscale.report.findings import compute_findings, findings_markdown
    from crdscale.report.render import summary_cells

    run = damaged(tmp_path, other, "status-disagrees")
    data = read_run(run)
    findings = compute_findings(data.manifest, analyze_run(data))
    md = findings_markdown(findings)
    said = "1 evidence problem in this run's files (status-disagrees)"
    assert said in md.split("## ")[0]  # before any section: under the title
    assert "the run.end event in events.jsonl says failed (memory guard" in md
    first_screen = summary_cells("title", findings, None)[0].source
    assert said in first_screen.split("## What was run")[0]


# --- compare --------------------------------------------------------------------------


def test_a_copy_compared_with_its_run_is_refused(tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(REFERENCE, copy)  # cp -r: the same run_id
    assert main(["compare", str(REFERENCE), str(copy)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "are the same run (run_id 20261123t104324-64b6" in line and "a run compared with itself" in line


def test_compare_states_a_damaged_series_and_headlines_no_rss_from_it(tmp_path, capsys, other):
    run = damaged(tmp_path, other, "series-all-nan")
    assert main(["compare", str(REFERENCE_124), str(run)]) == 0
    out = capsys.readouterr().out
    head = out.split("## What was run")[0]
    assert "peak RSS 0 B" not in head and "evidence problem" in head and "series-not-finite" in head


def test_compare_names_a_version_the_server_denies(tmp_path, capsys, other):
    run = damaged(tmp_path, other, "version-disagrees")
    assert main(["compare", str(REFERENCE), str(run)]) == 0
    head = capsys.readouterr().out.split("## What was run")[0]
    assert "manifest.json says kube-apiserver v1.24.0, but the server said otherwise: v1.37.1" in head
    assert "both runs' heap profiles sampled one build (build ID 0889ada25438" in head
    assert main(["compare", str(REFERENCE), str(run), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # As data too: the run's own problem and the pair's, each with the label of the run it is about.
    assert [(e["run"], e["code"], e["severity"], e["affects"]) for e in doc["evidence"]] == [
        (doc["labels"][1], "version-disagrees", UNRELIABLE, "version")
    ] * 2
    assert all(f"{e['run']}: evidence: {e['message']} (" in " ".join(doc["warnings"]) for e in doc["evidence"])
    assert "both runs' heap profiles sampled one build" in doc["evidence"][1]["message"]


def test_the_reference_runs_json_has_an_empty_evidence_list(capsys):
    assert main(["analyze", "--no-write", str(REFERENCE), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["evidence"] == []


def test_a_refused_run_stops_compare_and_report_before_any_notebook(tmp_path, capsys, other):
    run = damaged(tmp_path, other, "steps-swapped")
    assert main(["compare", str(REFERENCE), str(run)]) == 2
    assert "(profile-time-order)" in one_error_line(capsys.readouterr().err)
    out = tmp_path / "report"
    assert main(["report", str(run), "--out", str(out)]) == 2
    assert "(profile-time-order)" in one_error_line(capsys.readouterr().err)
    assert not (out / "notebooks").exists() and not (out / layout.FINDINGS_MD).exists()


# --- the verdicts, as data -----------------------------------------------------------


def test_evidence_refuses_only_what_its_problems_affect(tmp_path):
    from crdscale.errors import EvidenceError, UsageError

    series = Problem("series-not-finite", "all NaN", affects=SERIES)
    status = Problem("status-disagrees", "failed", affects="all", severity=UNRELIABLE)
    evidence = Evidence((series, status))
    evidence.require("heap", tmp_path)  # neither refuses the heap numbers
    assert evidence.warnings()[0].startswith("2 evidence problems in this run's files (series-not-finite, ")
    heap = Problem("profile-duplicate", "two copies")
    with pytest.raises(EvidenceError, match="1 evidence problem refuses its heap numbers: two copies") as err:
        Evidence((series, heap)).require("heap", tmp_path)
    assert isinstance(err.value, UsageError) and err.value.exit_code == 2


def test_a_problem_takes_its_numbers_and_severity_from_its_code():
    from crdscale.rundir.evidence import CODES, HEAP, VERSION

    assert Problem("profile-duplicate", "two copies").affects == HEAP
    assert Problem("version-disagrees", "v1.24.0").severity == UNRELIABLE
    assert Problem("version-disagrees", "v1.24.0").affects == VERSION
    assert Problem("series-not-finite", "all NaN", severity=REFUSE).severity == REFUSE  # nothing finite left
    assert all((c.affects, c.severity) != ("", "") for c in CODES.values())
    with pytest.raises(ValueError, match="not in CODES"):
        Problem("no-such-check", "?")
    item = Problem("crd-count-falls", "step 3 records 20 CRDs", ("profiles/a.pb.gz",), (2, 3)).to_json(run="B")
    assert item == {
        "run": "B",
        "code": "crd-count-falls",
        "severity": REFUSE,
        "affects": HEAP,
        "message": "step 3 records 20 CRDs",
        "consequence": "the heap numbers are refused",
        "files": ["profiles/a.pb.gz"],
        "steps": [2, 3],
    }


def test_a_godebug_memprofilerate_sets_the_expected_period():
    from crdscale.rundir.evidence import GO_HEAP_PERIOD, expected_period
    from crdscale.rundir.manifest import Manifest

    def manifest(env):
        return Manifest.of({"scenario": {"target": {"env": env}}})

    assert expected_period(manifest({})) == GO_HEAP_PERIOD == 524288
    assert expected_period(manifest({"GODEBUG": "gctrace=1,memprofilerate=1"})) == 1
    assert expected_period(manifest({"GODEBUG": "memprofilerate=0"})) == GO_HEAP_PERIOD  # 0: no profiles at all


# --- combinations, generated ----------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("CRDSCALE_HYPOTHESIS_EXAMPLES", "8"))
# Damages that edit the same file are alternatives: one of each group at most.
GROUPS = (
    ("foreign-sample-period", "profile-of-another-build", "steps-swapped", "profiles-byte-identical"),
    ("crd-count-falls",),
    ("status-disagrees",),
    ("series-all-nan", "series-duplicated-at-10x", "series-10-years-away", "series-no-rows", "series-is-a-directory"),
    ("version-disagrees",),
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 8,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
@given(st.tuples(*(st.none() | st.sampled_from(group) for group in GROUPS)))
def test_damages_combined_are_each_named_or_refused(tmp_path_factory, other, drawn):
    names = [name for name in drawn if name]
    tmp = tmp_path_factory.mktemp("combined")
    run = damaged(tmp, other, *names) if names else copy_run(REFERENCE, tmp / "intact", new_run_id=True)
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["analyze", "--no-write", str(run)])
    assert "Traceback" not in err.getvalue()
    refused = [BY_NAME[n] for n in names if BY_NAME[n].refused]
    if refused:
        assert code == 2
        line = one_error_line(err.getvalue())
        assert "evidence problem" in line and "refuse" in line
    else:
        assert code == 0, err.getvalue()
        for name in names:
            assert f"({BY_NAME[name].code}:" in out.getvalue(), (name, out.getvalue()[:2000])
        if not names:
            assert "evidence problem" not in out.getvalue()


def test_every_problem_the_checks_make_is_in_the_catalogue_and_the_docs():
    import crdscale.rundir.evidence as evidence

    source = Path(evidence.__file__).read_text()
    made = set(re.findall(r'(?:Problem|_about)\(\s*"([a-z-]+)"', source))
    assert made == set(evidence.CODES)
    page = (Path(__file__).resolve().parents[2] / "docs" / "explanation" / "evidence.md").read_text()
    assert [code for code in evidence.CODES if f"| `{code}` |" not in page] == []
    assert {d.code for d in DAMAGES} <= set(evidence.CODES)
