"""Hostile values for flags and input files that used to end in a traceback, a hang or a misleading exit
(issue 31): each is now one line on stderr and a documented exit code, found before any work."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cli.options import fraction, number, positive_int

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "data" / "reference-run" / "profiles" / "heap-step01-crds0040.pb.gz"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRDSCALE_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("KUBECONFIG", raising=False)


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e999", "x", ""])
def test_finite_number_type_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        number()(text)


def test_number_type_ranges():
    assert fraction("0") == 0 and fraction("1") == 1
    for bad in ("-0.1", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be >= 0 and <= 1"):
            fraction(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="must be >= 1"):
        positive_int("0")
    with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
        positive_int("9" * 40)
    assert math.isclose(number(minimum=0, exclusive_minimum=True)("0.5"), 0.5)


ARGPARSE_REFUSED = [
    ["top", str(PROFILE), "--nodefraction", "nan"],
    ["top", str(PROFILE), "--nodecount", "-1"],
    ["run", "--cluster", "--print-manifests", "--cpus", "nan"],
    ["install", "crds", "--qps", "nan"],
    ["install", "crds", "--qps", "inf"],
    ["install", "crds", "--serve-clients", "0"],
    ["install", "crds", "--timeout", "-1"],
    ["install", "crds", "--hold", "-1"],
    ["report", "run", "--timeout", "0"],
    ["report", "run", "--timeout", "-5"],
    ["up", "--timeout", "nan"],
    ["clean", "--all-owned", "--timeout", "inf"],
    ["lab", "run", "--timeout", "0"],
    ["generate", "-g", "1", "-c", "-1"],
]


@pytest.mark.parametrize("argv", ARGPARSE_REFUSED, ids=lambda a: " ".join(a[:1] + a[-2:]))
def test_refused_by_the_flag_type(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(f"crdscale {argv[0]}: error: argument")


def _random_kubeconfig(tmp: Path) -> str:
    path = tmp / "kc"
    path.write_bytes(bytes(range(128, 256)) * 20)
    return str(path)


@pytest.mark.parametrize(
    "argv, code, says",
    [
        (["generate", "-g", "1", "-c", "1", "--type-mix", "string=inf"], 2, "finite"),
        (["generate", "-g", "1", "-c", "1", "--type-mix", "string=1e308,object=1e308"], 2, "finite"),
        (["generate", "-g", "1", "-c", "1", "--property-count", "10000000"], 2, "request limit"),
        (["generate", "-g", "1", "-c", "1", "--description-length", "5000000"], 2, "request limit"),
        (["footprint", "--kubeconfig", "{kc}"], 2, "not UTF-8"),
        (["run", "--check", "--kubeconfig", "{kc}"], 2, "not UTF-8"),
        (["status", "--kubeconfig-only"], 1, "no ready local instance"),
        (["top", "a\x00b"], 2, "NUL byte"),
        (["run", "--check", "a\x00b"], 2, "NUL byte"),
        (["generate", "-g", "1", "-c", "1", "-o", "/tmp/" + "d/" * 2100], 2, "File name too long"),
        (["generate", "-g", "1", "-c", "1", "--group-suffix", "Bad_Suffix"], 2, "DNS-1123"),
        (["generate", "-g", "1", "-c", "1", "--group-suffix", "EXAMPLE.COM"], 2, "DNS-1123"),
        (["generate", "-g", "1", "-c", "1", "--group-suffix", "a" * 60 + ".b" * 100], 2, "over kube-apiserver's 253"),
        (["generate", "-g", "1", "-c", "1", "--categories", "Has Space,UPPER"], 2, "DNS-1035"),
        (["top", "{tmp}"], 6, "cannot read"),
    ],
    ids=lambda v: str(v)[:40] if isinstance(v, list) else None,
)
def test_one_line_and_exit_code(argv, code, says, tmp_path, capsys):
    args = [a.format(kc=_random_kubeconfig(tmp_path), tmp=tmp_path) for a in argv]
    started = time.monotonic()
    assert main(args) == code
    assert time.monotonic() - started < 10  # refused from the arguments, not after the work
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("crdscale: error: ") and says in err[0], err


def test_a_profile_directory_inside_a_run_is_one_line(tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ROOT / "data" / "reference-run", run, ignore=shutil.ignore_patterns("analysis", "report"))
    target = run / "profiles" / "heap-step03-crds0120.pb.gz"
    target.unlink()
    target.mkdir()
    assert main(["analyze", str(run), "--no-write"]) == 6
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("crdscale: error: ") and "Is a directory" in err[-1]
