"""The test tree itself: pytest (rootdir-relative, no packages) refuses two test modules with one
basename in one session. `make unit` alone would not notice; this does (it broke CI twice)."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
