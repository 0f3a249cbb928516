"""`make demo`: run the default scenario on a local control plane, then report on it.

1. ``crdscale run`` (the built-in default: 500 generated CRDs in 5 steps on a
   local kube-apiserver, 5-8 minutes) writes ``runs/<timestamp>-default/``;
2. ``crdscale report`` executes the notebooks on that run and writes
   ``<run>/report/`` (HTML, findings.md, figures).

The last line printed is the path of the HTML report.
Extra arguments go to ``crdscale run`` (e.g. ``--set steps.count=3``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from crdscale.paths import runs_dir

BIN = Path(sys.executable).parent


def newest_run(parent: Path, before: set[Path]) -> Path | None:
    """The run directory ``crdscale run`` just created under ``parent`` (absent from ``before``)."""
    new = [p for p in parent.glob("*") if p.is_dir() and p not in before and (p / "manifest.json").is_file()]
    return max(new, key=lambda p: p.stat().st_mtime) if new else None


def main(argv: list[str]) -> int:
    parent = runs_dir()
    parent.mkdir(parents=True, exist_ok=True)
    before = set(parent.glob("*"))
    crdscale = str(BIN / "crdscale")
    code = subprocess.call([crdscale, "run", "--out", str(parent), *argv])
    run = newest_run(parent, before)
    if run is None:
        print("demo: crdscale run left no run directory", file=sys.stderr)
        return code or 1
    if code != 0:
        # An interrupted or failed run keeps what it recorded; report on it if it can be.
        print(f"demo: crdscale run exited with {code}; reporting on what {run} holds", file=sys.stderr)
    # `crdscale report` prints the findings.md path, then the HTML report's path last.
    report = subprocess.call([crdscale, "report", str(run)])
    return code or report


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
