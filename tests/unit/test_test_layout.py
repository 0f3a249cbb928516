"""The test tree itself: pytest (rootdir-relative, no packages) refuses two test modules with one
basename in one session. `make unit` alone would not notice; this does (it broke CI twice).
Helpers are shared through conftest.py fixtures, never by one test module importing another, and
tests use the package (shared harnesses live in crdscale/testing/), not files loaded by path or found
through a sys.path of their own."""

import ast
import re
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_no_test_module_imports_another_or_a_conftest():
    offenders = {
        str(p.relative_to(TESTS)): sorted(
            m for m in _imported_modules(p) if m.startswith(("test_", "conftest")) or m == "tests"
        )
        for p in TESTS.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_nothing_loads_a_file_by_path():
    by_path = re.compile(r"spec_from_file_location|run_path|SourceFileLoader|sys\.path\.(insert|append)")
    offenders = {
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("*.py")
        if by_path.search(p.read_text()) and p.name != Path(__file__).name
    }
    assert offenders == set()
