"""Unit tests need no network: the Go module proxy, which `crdscale run` asks whether a version to
build exists (crdscale.cluster.buildable) and serves whole (crdscale.cluster.releases), answers "served" here
unless a test fakes it otherwise, and nothing is remembered outside the test.

Fixtures shared by several modules live here: ``reference_report``, the report of the committed
reference run, rendered once per test run, also when ``make test`` runs the unit tests on several
xdist workers.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
from contextlib import redirect_stdout
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference-run"


@pytest.fixture(autouse=True)
def _no_module_proxy(monkeypatch, tmp_path):
    from crdscale.cluster import buildable

    monkeypatch.setattr(buildable, "ask_proxy", lambda *_a, **_k: buildable.ModuleAnswer(True))
    # ...and its answers stay out of the real cache (~/.cache/crdscale/go-module-versions.json).
    monkeypatch.setattr(buildable, "_cache_path", lambda: tmp_path / buildable.CACHE_FILE)
    # Every release is served whole (its staging modules' zips and checksums), the answers kept in the test's own
    # choice cache (not ~/.cache/crdscale/history-releases.json).
    from crdscale.cluster import releases

    monkeypatch.setattr(releases, "_lookup", lambda module, version: {})
    monkeypatch.setattr(releases, "choice_cache_path", lambda: tmp_path / releases.CHOICE_CACHE)


@dataclass(frozen=True)
class RenderedReport:
    """``crdscale report`` on the reference run: its exit code, what it printed, and its output directory."""

    code: int
    stdout: str
    out: str


@pytest.fixture(scope="session")
def reference_report(tmp_path_factory) -> RenderedReport:
    """``crdscale report data/reference-run --out DIR`` run once, with a relative RUN_DIR and --out as
    people type them (the notebooks run elsewhere and must still find the run). Under xdist the
    first worker to ask renders it into the run's shared base directory and the others read it."""
    pytest.importorskip("nbclient")
    from crdscale.cli.main import main

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the base directory every worker's own lies in
    done = root / "reference-report.json"
    with open(root / "reference-report.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker rendering it: wait for its result
        if done.is_file():
            return RenderedReport(**json.loads(done.read_text()))
        out = root / "reference-report"
        out.mkdir()
        buf = io.StringIO()
        cwd = os.getcwd()
        os.chdir(REFERENCE.parent)
        try:
            with redirect_stdout(buf):
                code = main(["report", REFERENCE.name, "--out", os.path.relpath(out)])
        finally:
            os.chdir(cwd)
        result = RenderedReport(code, buf.getvalue(), str(out))
        done.write_text(json.dumps(asdict(result)))
        return result
