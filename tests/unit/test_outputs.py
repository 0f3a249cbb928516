"""Outputs never destroy inputs (crdscale.outputs): an output equal to, inside or holding an input is
refused, a non-empty --out needs --force, a directory is written into a sibling and renamed under a lock,
writing into a run directory is for analyze only, and a failed write to stdout is one line."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.outputs import check_distinct, check_not_input, check_out_directory, replacing_directory

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"
PROFILE = REFERENCE / "profiles" / "heap-step03-crds0120.pb.gz"


def _one_error_line(capsys, says: str) -> None:
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("crdscale: error: ") and says in err[0], err


@pytest.fixture
def profile(tmp_path) -> Path:
    copy = tmp_path / "heap.pb.gz"
    copy.write_bytes(PROFILE.read_bytes())
    return copy


@pytest.mark.parametrize("flag", ["--folded", "--callgrind", "--table"])
def test_top_never_writes_onto_the_profile_it_reads(profile, capsys, flag):
    before = hashlib.sha256(profile.read_bytes()).hexdigest()
    assert main(["top", str(profile), flag, str(profile)]) == 2
    _one_error_line(capsys, "is the input")
    assert hashlib.sha256(profile.read_bytes()).hexdigest() == before


def test_top_refuses_one_file_for_two_outputs(profile, tmp_path, capsys):
    out = tmp_path / "same.txt"
    assert main(["top", str(profile), "--folded", str(out), "--callgrind", str(out)]) == 2
    _one_error_line(capsys, "each output needs its own file")
    assert not out.exists()


def test_top_writes_both_outputs(profile, tmp_path, capsys):
    folded, grind = tmp_path / "a.folded", tmp_path / "b.callgrind"
    assert main(["top", str(profile), "--folded", str(folded), "--callgrind", str(grind)]) == 0
    assert folded.read_text() and grind.read_text().startswith("# callgrind format")


def test_out_directory_checks(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    with pytest.raises(UsageError, match="is the input"):
        check_out_directory(run, inputs=[run])
    with pytest.raises(UsageError, match="holds the input"):
        check_out_directory(tmp_path, inputs=[run], force=True)
    with pytest.raises(UsageError, match="inside the input"):
        check_out_directory(run / "x", inputs=[run])
    check_out_directory(run / "report", inputs=[run], allow=[run / "report"])  # a run's own report/
    other = tmp_path / "other-run"
    other.mkdir()
    (other / "manifest.json").write_text("{}")
    with pytest.raises(UsageError, match="inside the run directory"):
        check_out_directory(other / "cmp", inputs=[run])
    full = tmp_path / "full"
    full.mkdir()
    (full / "findings.md").write_text("kept")
    with pytest.raises(UsageError, match="not empty"):
        check_out_directory(full, inputs=[run])
    assert check_out_directory(full, inputs=[run], force=True) == full
    check_not_input(tmp_path / "x", [None, "-"], "--out")
    with pytest.raises(UsageError, match="--b"):
        check_distinct([("--a", tmp_path / "f"), ("--b", str(tmp_path / "f"))])


def test_report_refuses_a_non_empty_out_before_any_work(tmp_path, capsys):
    out = tmp_path / "report"
    out.mkdir()
    (out / "findings.md").write_text("someone else's findings")
    assert main(["report", str(REFERENCE), "--out", str(out)]) == 2
    _one_error_line(capsys, "not empty")
    assert (out / "findings.md").read_text() == "someone else's findings"


def test_compare_out_onto_a_run_is_refused(tmp_path, capsys):
    assert main(["compare", str(REFERENCE), str(REFERENCE) + "-v1.24.0", "--out", str(REFERENCE)]) == 2
    _one_error_line(capsys, "is the input")


def test_replacing_directory_replaces_whole_and_keeps_the_old_on_error(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with replacing_directory(out) as staging:
            (staging / "half.txt").write_text("half")
            raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging, no lock left behind
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    with replacing_directory(out) as staging:
        (staging / "new.txt").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_second_writer_is_refused_while_the_first_writes(tmp_path):
    out = tmp_path / "out"
    with replacing_directory(out) as staging:
        (staging / "a").write_text("first")
        with pytest.raises(UsageError, match="another crdscale is writing it"):
            with replacing_directory(out):
                pass
    assert [p.name for p in out.iterdir()] == ["a"]


def test_generate_refuses_a_non_empty_directory(tmp_path, capsys):
    out = tmp_path / "crds"
    assert main(["generate", "-g", "1", "-c", "3", "-o", str(out)]) == 0
    assert len(list(out.iterdir())) == 3
    capsys.readouterr()
    assert main(["generate", "-g", "1", "-c", "4", "-o", str(out)]) == 2
    _one_error_line(capsys, "is not empty")
    assert len(list(out.iterdir())) == 3


def test_generate_into_a_run_directory_is_refused(tmp_path, capsys):
    assert main(["generate", "-g", "1", "-c", "1", "-o", str(REFERENCE / "crds-new")]) == 2
    _one_error_line(capsys, "inside the run directory")


@pytest.mark.parametrize(
    "argv",
    [
        ["top", str(PROFILE)],
        ["generate", "-g", "1", "-c", "2", "-o", "-"],
        ["analyze", str(REFERENCE), "--no-write"],
    ],
    ids=["top", "generate", "analyze"],
)
@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_a_failed_stdout_is_one_line_and_exit_1(argv, stdout):
    if stdout == "full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    target = open("/dev/full", "wb") if stdout == "full" else subprocess.DEVNULL  # noqa: SIM115
    pass_fds = ()
    command = [sys.executable, "-m", "crdscale", *argv]
    if stdout == "closed":
        command = ["sh", "-c", 'exec "$@" >&-', "sh", *command]
    try:
        done = subprocess.run(
            command,
            stdout=target,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            pass_fds=pass_fds,
            timeout=120,
        )
    finally:
        if stdout == "full":
            target.close()
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("crdscale: error:")]
    assert done.returncode == 1, done.stderr
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr


def test_a_profile_that_never_ends_is_read_only_up_to_the_limit(tmp_path, monkeypatch, capsys):
    from crdscale.analysis.pprof import decode

    monkeypatch.setattr(decode, "MAX_PROFILE_BYTES", 1 << 20)
    link = tmp_path / "zero.pb.gz"
    link.symlink_to("/dev/zero")
    assert main(["top", str(link)]) == 6
    _one_error_line(capsys, "larger than 1 MiB")
    assert main(["top", str(tmp_path)]) == 6
    _one_error_line(capsys, "cannot read")
