"""Long and recheck tests stay out of a run unless -m names them as a word: CI's `-m "not alongside ..."`
once ran the long ones ("alongside" contains "long"), which build releases for an hour."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LONG_TEST = "tests/integration/test_history_releases.py"


def _collected(markexpr: str | None) -> str:
    args = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", LONG_TEST]
    if markexpr is not None:
        args += ["-m", markexpr]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120).stdout


@pytest.mark.parametrize("markexpr", [None, "not alongside and not extra_binaries and not extra_versions"])
def test_long_tests_are_left_out(markexpr):
    out = _collected(markexpr)
    assert "test_history_releases.py::" not in out, out
    assert "deselected" in out or "no tests collected" in out, out


def test_asking_for_long_runs_them():
    assert "test_history_releases.py::" in _collected("long")
