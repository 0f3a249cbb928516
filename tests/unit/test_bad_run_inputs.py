"""Bad run directories and output paths given to analyze, report, compare and top: each is one
line on stderr with its exit code (crdscale.errors) and no traceback, found before any notebook
runs; what is still usable is used with a stated warning (a profile left out, a run that failed),
never dropped or invented in silence. Everything runs on copies of the reference run."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from crdscale.analysis.run import analyze_run
from crdscale.cli.main import main
from crdscale.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"
CPU_PROFILE = ROOT / "tests" / "data" / "profiles" / "go-sample-cpu.pb.gz"
SERVED_3 = "profiles/heap-step03-crds0120.pb.gz"


def _copy(tmp_path: Path, name: str = "run") -> Path:
    """A copy of the reference run that compare takes for another run (its own run_id: a copy that
    keeps it is the reference run compared with itself, which compare refuses)."""
    run = tmp_path / name
    shutil.copytree(REFERENCE, run, ignore=shutil.ignore_patterns("analysis", "report", "notebooks"))
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "run_id": f"{manifest['run_id']}-{name}"}))
    return run


def _rewrite_events(run: Path, edit) -> None:
    """Apply ``edit(event) -> event | None`` to each event of the run (None drops it)."""
    path = run / "events.jsonl"
    events = [edit(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(e) + "\n" for e in events if e is not None))


def _truncated_series(run: Path) -> None:
    path = run / "metrics" / "series.parquet"
    path.write_bytes(path.read_bytes()[:3000])


def _empty_series(run: Path) -> None:
    (run / "metrics" / "series.parquet").write_bytes(b"")


def _manifest(value) -> callable:
    return lambda run: (run / "manifest.json").write_text(json.dumps(value))


def _renamed_profile(run: Path) -> None:
    (run / SERVED_3).rename(run / "profiles" / "heap-step03-crds9999.pb.gz")


def _event_disagrees(run: Path) -> None:
    _rewrite_events(run, lambda e: {**e, "crds": 9999} if e.get("file") == SERVED_3 else e)


def _no_profile_events(run: Path) -> None:
    _rewrite_events(run, lambda e: None if e["kind"] == "profile" else e)


def _bad_event_time(run: Path) -> None:
    with open(run / "events.jsonl", "a") as f:
        f.write('{"ts": "yesterday", "kind": "step.end"}\n')


def _analysis_is_a_file(run: Path) -> None:
    shutil.rmtree(run / "analysis", ignore_errors=True)  # a copy may hold one from an earlier analyze
    (run / "analysis").write_text("not a directory")


def _experiment(value) -> callable:
    return lambda run: (run / "experiment.json").write_text(json.dumps(value))


# (id, how to break a copy of the reference run, argv with {run} and {out}, exit code, what the line says)
CASES = [
    ("analyze-truncated-series", _truncated_series, ["analyze", "--no-write", "{run}"], 2, "not a readable parquet"),
    ("analyze-empty-series", _empty_series, ["analyze", "--no-write", "{run}"], 2, "Parquet file size is 0 bytes"),
    ("report-truncated-series", _truncated_series, ["report", "{run}", "--out", "{out}"], 2, "not a readable parquet"),
    ("report-empty-series", _empty_series, ["report", "{run}", "--out", "{out}"], 2, "not a readable parquet"),
    ("compare-truncated-series", _truncated_series, ["compare", str(REFERENCE), "{run}"], 2, "not a readable parquet"),
    ("compare-empty-series", _empty_series, ["compare", "{run}", str(REFERENCE)], 2, "not a readable parquet"),
    ("analyze-manifest-array", _manifest([1, 2]), ["analyze", "{run}"], 2, "holds a JSON list, not an object"),
    ("analyze-manifest-string", _manifest("run"), ["analyze", "{run}"], 2, "holds a JSON str, not an object"),
    ("report-manifest-array", _manifest([]), ["report", "{run}", "--out", "{out}"], 2, "JSON list, not an object"),
    ("compare-manifest-array", _manifest([]), ["compare", "{run}", str(REFERENCE)], 2, "JSON list, not an object"),
    ("analyze-renamed-profile", _renamed_profile, ["analyze", "--no-write", "{run}"], 2, "its name says 9999 CRDs"),
    ("report-renamed-profile", _renamed_profile, ["report", "{run}", "--out", "{out}"], 2, "its name says 9999"),
    ("compare-renamed-profile", _renamed_profile, ["compare", str(REFERENCE), "{run}"], 2, "its name says 9999"),
    ("analyze-event-disagrees", _event_disagrees, ["analyze", "--no-write", "{run}"], 2, "its event in events.jsonl"),
    ("analyze-no-profile-events", _no_profile_events, ["analyze", "--no-write", "{run}"], 2, "records none of its 9"),
    ("analyze-bad-event-time", _bad_event_time, ["analyze", "--no-write", "{run}"], 2, "not an ISO 8601 timestamp"),
    ("report-experiment-array", _experiment([]), ["report", "{run}", "--out", "{out}"], 2, "JSON list, not an object"),
    ("report-experiment-no-scenario", _experiment({}), ["report", "{run}", "--out", "{out}"], 2, "no scenario table"),
    ("analyze-cannot-write", _analysis_is_a_file, ["analyze", "{run}"], 2, "cannot create"),
    ("compare-same-run", None, ["compare", "{run}", "{run}"], 2, "are the same run"),
    ("compare-same-run-two-paths", None, ["compare", "{run}", "{run}/../run/"], 2, "are the same run"),
    ("report-out-is-a-file", None, ["report", "{run}", "--out", "{run}/manifest.json"], 2, "inside the input"),
    (
        "compare-out-is-a-file",
        None,
        ["compare", str(REFERENCE), "{run}", "--out", "{run}/README.md"],
        2,
        "inside the input",
    ),
    (
        "top-callgrind-no-directory",
        None,
        ["top", f"{REFERENCE}/{SERVED_3}", "--callgrind", "{out}/missing/heap.callgrind"],
        2,
        "--callgrind",
    ),
    (
        "top-callgrind-under-a-file",
        None,
        ["top", f"{REFERENCE}/{SERVED_3}", "--callgrind", "{run}/manifest.json/heap.callgrind"],
        2,
        "inside the run directory",
    ),
    (
        "top-folded-is-a-directory",
        None,
        ["top", f"{REFERENCE}/{SERVED_3}", "--folded", "{run}"],
        2,
        "inside the run directory",
    ),
]


@pytest.mark.parametrize(("breakage", "argv", "code", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_its_exit_code(tmp_path, capsys, breakage, argv, code, says):
    run = _copy(tmp_path)
    if breakage:
        breakage(run)
    out = tmp_path / "out"
    args = [a.format(run=run, out=out) for a in argv]
    assert main(args) == code
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crdscale: error: "), captured.err
    assert says in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert not (out / "notebooks").exists()  # found before any notebook ran


def test_a_relative_path_to_the_same_run_is_the_same_run(tmp_path, monkeypatch):
    run = _copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    from crdscale.analysis.compare import compare_runs

    with pytest.raises(UsageError, match="same run"):
        compare_runs(["run", run])
    os.symlink(run, tmp_path / "link")
    with pytest.raises(UsageError, match="same run"):
        compare_runs([run, "link"])


# --- what is left out is said ---------------------------------------------------------


def test_a_cpu_profile_under_a_heap_name_is_left_out_and_named(tmp_path, capsys):
    run = _copy(tmp_path)
    shutil.copyfile(CPU_PROFILE, run / SERVED_3)
    assert main(["analyze", "--no-write", str(run)]) == 0
    out = capsys.readouterr().out
    answer, _, first, second = out.splitlines()[:4]
    assert answer.startswith("**kube-apiserver v1.37.1 holds ")  # the answer in one sentence first
    assert first == f"Run: {run}  (8 heap profiles fitted; 1 left out)"  # never "9 heap profiles"
    assert second.startswith(f"warning: left out of the fits: {SERVED_3}: a cpu profile")
    assert "phase served, 4 points" in out

    assert main(["analyze", "--no-write", str(run), "-o", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)["runs"][0]
    assert doc["heap_profiles"] == 8
    assert [s["file"] for s in doc["skipped_profiles"]] == [SERVED_3]
    assert "a cpu profile" in doc["skipped_profiles"][0]["reason"]
    assert f"left out of the fits: {SERVED_3}" in captured.err


def test_a_profile_no_event_records_and_an_event_without_its_file_are_left_out_and_named(tmp_path):
    from crdscale.rundir import read_run

    run = _copy(tmp_path)
    shutil.copyfile(run / "profiles" / "heap-step04-crds0160.pb.gz", run / "profiles" / "heap-step05-crds0200.pb.gz")
    (run / "profiles" / "heap-step01-crds0040-installed.pb.gz").unlink()
    analysis = analyze_run(read_run(run))
    skipped = {s.file: s.reason for s in analysis.skipped}
    assert "no profile event" in skipped["profiles/heap-step05-crds0200.pb.gz"]
    assert "the file is missing" in skipped["profiles/heap-step01-crds0040-installed.pb.gz"]
    assert analysis.points["crds"].max() == 160  # the unrecorded file's name invented nothing
    assert len(analysis.profiles) == 8


def test_event_lines_that_are_not_events_are_counted(tmp_path):
    from crdscale.rundir import read_run

    run = _copy(tmp_path)
    with open(run / "events.jsonl", "a") as f:
        f.write('not json\n[1, 2]\n{"kind": "no time"}\n')
    data = read_run(run)
    assert len(data.skipped_event_lines) == 3
    assert any("3 line(s) that are not events" in w for w in analyze_run(data).warnings)


@pytest.fixture
def failed_run(tmp_path):
    run = _copy(tmp_path, "failed")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(status="failed", reason="memory guard: RSS 9.8 GiB passed the limit of 9.5 GiB")
    (run / "manifest.json").write_text(json.dumps(manifest))
    # Its events say so too (a manifest and a run.end that disagree are an evidence problem of their own).
    _rewrite_events(
        run, lambda e: {**e, "status": "failed", "reason": manifest["reason"]} if e["kind"] == "run.end" else e
    )
    return run


def test_a_failed_run_is_stated_with_its_reason_everywhere(failed_run, capsys):
    from crdscale.report.findings import compute_findings, findings_markdown
    from crdscale.report.render import summary_cells
    from crdscale.rundir import read_run

    reason = "the run failed: memory guard: RSS 9.8 GiB passed the limit of 9.5 GiB"
    assert main(["analyze", "--no-write", str(failed_run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    after_run = lines[next(i for i, line in enumerate(lines) if line.startswith("Run: ")) + 1]
    assert after_run == f"warning: {reason}; its numbers cover only what it recorded before it stopped"

    assert main(["compare", str(failed_run), str(REFERENCE)]) == 0
    assert f"> **Warning:** failed: {reason}" in capsys.readouterr().out

    data = read_run(failed_run)
    findings = compute_findings(data.manifest, analyze_run(data))
    md = findings_markdown(findings)
    assert md.splitlines()[2].startswith(f"> **Warning:** {reason}")  # right under the title
    first_screen = summary_cells("title", findings, None)[0].source
    assert reason in first_screen.split("## What was run")[0]


def test_an_abandoned_run_is_stated(tmp_path, capsys):
    run = _copy(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(status="running", reason=None, runner={"pid": 2**22 + 7, "start_ticks": 1})
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["analyze", "--no-write", str(run)]) == 0
    captured = capsys.readouterr()
    assert "warning: the run was abandoned: its runner died without recording how the run ended" in captured.out
    assert f"crdscale recover {run}" in captured.err
