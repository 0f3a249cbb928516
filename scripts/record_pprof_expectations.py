"""Record `go tool pprof` outputs beside the test profiles in tests/data/profiles/.

For every case below, runs ``go tool pprof <args> PROFILE`` and writes
``<profile stem>.<case>.txt`` whose first line is ``# args: <args>`` (the
tests replay the same options through crdscale and compare numbers).

Usage: python scripts/record_pprof_expectations.py [tests/data/profiles]
Needs Go on PATH; re-run after replacing a fixture profile.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HEAP_CASES = {
    "top-inuse_space": ["-top", "-nodecount=40", "-sample_index=inuse_space"],
    "top-inuse_objects": ["-top", "-nodecount=40", "-sample_index=inuse_objects"],
    "top-alloc_space": ["-top", "-nodecount=40", "-sample_index=alloc_space"],
    "top-alloc_objects": ["-top", "-nodecount=40", "-sample_index=alloc_objects"],
    "top-cum": ["-top", "-nodecount=40", "-cum"],
    "top-all": ["-top", "-nodefraction=0"],
    "top-exact-bytes": ["-top", "-nodecount=40", "-unit=B"],
    "top-lines": ["-top", "-nodecount=30", "-lines"],
    "top-filefunctions": ["-top", "-nodecount=30", "-filefunctions"],
}
KUBE_CASES = {
    "top-focus-openapi": ["-top", "-nodecount=30", "-focus=kube-openapi"],
    "top-focus-ignore": ["-top", "-nodecount=30", "-focus=apiextensions", "-ignore=cacher|json"],
    "peek-crdhandler": ["-peek", r"crdHandler\)\.getOrCreateServingInfoFor$"],
}
SAMPLE_CASES = {
    "top-focus-ignore": ["-top", "-nodecount=30", "-focus=main", "-ignore=small"],
    "peek-main": ["-peek", r"main\.(deep|maps)$"],
}
OTHER_CASES = {"top-default": ["-top", "-nodecount=40"], "top-all": ["-top", "-nodefraction=0"]}
DIFFS = [("go-sample-heap2", "go-sample-heap")]


def run(args: list[str], profile: Path) -> str:
    out = subprocess.run(["go", "tool", "pprof", *args, str(profile)], capture_output=True, text=True, check=True)
    return out.stdout


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/profiles")
    for old in root.glob("*.txt"):
        old.unlink()
    for profile in sorted(root.glob("*.pb.gz")):
        stem = profile.name.removesuffix(".pb.gz")
        head = subprocess.run(["go", "tool", "pprof", "-raw", str(profile)], capture_output=True, text=True).stdout
        sample_types = re.search(r"^Samples:\n(.*)$", head, re.M)
        types = sample_types.group(1) if sample_types else ""
        cases = dict(HEAP_CASES) if "inuse_space" in types else dict(OTHER_CASES)
        if not stem.startswith("go-sample"):
            cases.pop("top-all", None)  # every node of a kube-apiserver profile: too big a fixture
        if "inuse_space" in types and stem.startswith("kube-"):
            cases.update(KUBE_CASES)
        if stem.startswith("go-sample-heap"):
            cases.update(SAMPLE_CASES)
        for case, args in cases.items():
            text = run(args, profile)
            (root / f"{stem}.{case}.txt").write_text(f"# args: {' '.join(args)}\n{text}")
    for new, base in DIFFS:
        args = ["-top", "-nodecount=40", f"-diff_base={base}.pb.gz"]
        text = subprocess.run(["go", "tool", "pprof", *args, f"{new}.pb.gz"], cwd=root, capture_output=True,
                              text=True, check=True).stdout
        (root / f"{new}.diff-{base}.txt").write_text(f"# args: {' '.join(args)}\n{text}")


if __name__ == "__main__":
    main()
