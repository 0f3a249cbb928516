"""`crdscale --help` and every `crdscale COMMAND --help` start fast: no heavy import before the command runs.

Each case runs in a fresh interpreter (imports are what is measured) and checks two things: which heavy
packages got imported, and the CPU time the child used. CPU time rather than wall time, because on a
shared CI machine the wall clock mostly measures the other jobs.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from crdscale.cli.main import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pandas", "numpy", "matplotlib", "scipy", "requests", "pyarrow")
HELP_CPU_SECONDS = 0.4

PROBE = """
import json, sys
from crdscale.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps(heavy), file=sys.stderr)
"""


def _help(args: list[str]) -> tuple[list[str], float]:
    """Heavy modules imported, and CPU seconds used, by `crdscale ARGS --help` in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args, "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert "usage: crdscale" in proc.stdout
    return json.loads(proc.stderr.strip().splitlines()[-1]), cpu


def test_top_level_help_imports_no_subcommand():
    heavy, cpu = _help([])
    assert heavy == []
    assert cpu <= HELP_CPU_SECONDS, f"crdscale --help used {cpu:.2f} CPU-s"


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_subcommand_help_is_fast(command):
    heavy, cpu = _help([command])
    assert not heavy, f"crdscale {command} --help imports {heavy}"
    assert cpu <= HELP_CPU_SECONDS, f"crdscale {command} --help used {cpu:.2f} CPU-s"


@pytest.mark.parametrize("probe", ["discovery", "list", "apf", "clientmem"])
def test_probe_help_is_fast(probe):
    heavy, cpu = _help(["probe", probe])
    assert not heavy, f"crdscale probe {probe} --help imports {heavy}"
    assert cpu <= HELP_CPU_SECONDS, f"crdscale probe {probe} --help used {cpu:.2f} CPU-s"


def test_top_level_help_lists_every_subcommand_with_its_summary():
    """Summaries read from source without importing match the modules' own docstrings."""
    from crdscale.cli.main import _load, build_parser

    lazy = build_parser(load=()).format_help()
    for name, module_name in SUBCOMMANDS.items():
        first = (_load(module_name).__doc__ or "").strip().splitlines()[0]
        assert name in lazy
        assert first.split()[0] in lazy
    assert lazy == build_parser().format_help()
