"""Record `go tool pprof` outputs beside the test profiles in tests/data/profiles/.

For every case below, runs ``go tool pprof <args> PROFILE`` and writes
``<profile stem>.<case>.txt`` whose first line is ``# args: <args>``, then
one ``# stderr: <line>`` per line pprof wrote to stderr (its "Focus
expression matched no samples" warnings), then what pprof printed (the tests
replay the same options through crdscale and compare the text). pprof runs
with ``TZ=UTC`` so the ``Time:`` lines do not depend on the machine.

``kube-apiserver-heap-crds0160.pb.gz`` is ``data/reference-run/profiles/
heap-step04-crds0160.pb.gz`` (kube-apiserver v1.37.1): it holds generic Go
functions whose type arguments have parameter lists, which pprof drops from
the names it prints and filters on.

Usage: python scripts/record_pprof_expectations.py [tests/data/profiles]
Needs Go on PATH; re-run after replacing a fixture profile.
"""

from __future__ import annotations

import os
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
# -show/-hide/-tagfocus/-mean, each alone and combined.
SAMPLE_FILTER_CASES = {
    "top-show": ["-top", "-nodecount=30", r"-show=main\."],
    "top-hide": ["-top", "-nodecount=30", "-hide=runtime"],
    "top-tagfocus-range": ["-top", "-nodecount=30", "-tagfocus=bytes=1kb:4kb"],
    "top-tagfocus-max": ["-top", "-nodecount=30", "-tagfocus=:64"],
    "top-mean": ["-top", "-nodecount=30", "-mean", "-sample_index=alloc_space"],
    "peek-mean": ["-peek", r"main\.(deep|maps)$", "-mean"],
}
KUBE_FILTER_CASES = {
    "top-show-hide": ["-top", "-nodecount=30", "-show=apiextensions|kube-openapi", "-hide=json"],
    "top-hide-cum": ["-top", "-nodecount=30", "-hide=runtime|reflect", "-cum"],
    "top-tagfocus-large": ["-top", "-nodecount=30", "-tagfocus=bytes=4kb:", "-sample_index=alloc_space"],
    "top-mean": ["-top", "-nodecount=30", "-mean", "-sample_index=inuse_space"],
    "top-all-filters": ["-top", "-nodecount=30", "-focus=apiextensions", "-show=k8s.io", "-tagfocus=bytes=:1kb"],
}
CPU_CASES = {
    "top-mean": ["-top", "-nodecount=30", "-mean"],
    "top-show-noinlines": ["-top", "-nodecount=30", "-show=main", "-noinlines"],
}
# A synthetic profile with string and numeric labels (Go's heap/CPU fixtures have no string labels).
LABELED = "synthetic-labels"
LABELED_CASES = {
    "top-tagfocus-key": ["-top", "-nodefraction=0", "-tagfocus=verb=list|watch"],
    "top-tagfocus-any": ["-top", "-nodefraction=0", "-tagfocus=verb:get,resource:crd"],
    "top-tagfocus-unit": ["-top", "-nodefraction=0", "-tagfocus=request=2kb:"],
    "top-mean": ["-top", "-nodefraction=0", "-mean", "-sample_index=1"],
}
OTHER_CASES = {"top-default": ["-top", "-nodecount=40"], "top-all": ["-top", "-nodefraction=0"]}
# Generic functions: pprof prints and matches `hmac.New[go.shape.interface { BlockSize int; ... }]`
# (the profile says `BlockSize() int`), and `handler3..buildDiscoveryCacheLocked.Merge[...]` for
# `handler3.(*OpenAPIService).buildDiscoveryCacheLocked.Merge[...]`. No spaces in the args: the
# tests split the "# args:" line on whitespace.
GENERICS = "kube-apiserver-heap-crds0160"
GENERIC_CASES = {
    "top-show-generics": ["-top", "-nodefraction=0", "-sample_index=alloc_space", r"-show=go\.shape"],
    "top-lines-generics": ["-top", "-nodecount=20", "-lines", "-sample_index=alloc_space", r"-show=go\.shape"],
    # Only in the parameter lists pprof drops: matches no sample.
    "top-focus-dropped-params": ["-top", "-nodecount=20", "-sample_index=alloc_space", r"-focus=Sum\("],
    "top-hide-dropped-params": ["-top", "-nodecount=20", "-sample_index=alloc_space", r"-hide=\(int,"],
    # Only in the shortened name.
    "top-focus-shortened": ["-top", "-nodecount=20", "-sample_index=alloc_space", r"-focus=handler3\.\.build"],
    "peek-generics": ["-peek", r"hmac\.New\[", "-sample_index=alloc_space"],
}
# (profile, -diff_base profile, suffix of the case name, more args)
DIFFS = [
    ("go-sample-heap2", "go-sample-heap", "", []),
    ("go-sample-heap2", "go-sample-heap", "-hide-mean", ["-hide=runtime", "-mean"]),
    # The merged header: the base's earlier Time; the generic names of both.
    (GENERICS, "kube-apiserver-heap-crds0060", "", ["-sample_index=alloc_space", r"-show=go\.shape|openapi"]),
    # CPU: the earlier Time (the base's) and the two durations added up.
    ("kube-apiserver-cpu", "go-sample-cpu", "", []),
]


def write_labeled_profile(root: Path) -> None:
    """Write ``synthetic-labels.pb.gz``: a few stacks labelled with verb/resource strings and a request size."""
    from crdscale.analysis.pprof.testing import encode_profile, synthetic_profile

    stacks = [
        (["json.Unmarshal", "handler.list", "main"], [3, 3000]),
        (["json.Marshal", "handler.get", "main"], [2, 1000]),
        (["cache.Add", "watch.Run", "main"], [5, 9000]),
        (["json.Unmarshal", "handler.get", "main"], [1, 4096]),
        (["schema.New", "crd.Install", "main"], [4, 6000]),
    ]
    labels = [
        {"verb": "list", "resource": "pods", "request": (4096, "bytes")},
        {"verb": "get", "resource": "crd", "request": (512, "bytes")},
        {"verb": "watch", "resource": "crd", "request": (1024, "bytes")},
        {"verb": "get", "resource": "pods", "request": (2048, "bytes")},
        {"resource": "crd"},
    ]
    profile = synthetic_profile(stacks, [("samples", "count"), ("space", "bytes")], time_nanos=1, labels=labels)
    (root / f"{LABELED}.pb.gz").write_bytes(encode_profile(profile))


def run(args: list[str], profile: Path, cwd: Path | None = None) -> str:
    """pprof's stdout, after one ``# stderr:`` line per line it wrote to stderr."""
    out = subprocess.run(
        ["go", "tool", "pprof", *args, str(profile)],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env={**os.environ, "TZ": "UTC"},
    )
    return "".join(f"# stderr: {line}\n" for line in out.stderr.splitlines()) + out.stdout


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/profiles")
    for old in root.glob("*.txt"):
        old.unlink()
    if not (root / f"{LABELED}.pb.gz").exists():
        write_labeled_profile(root)
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
        if "inuse_space" in types and stem.startswith("kube-"):
            cases.update(KUBE_FILTER_CASES)
        if stem.startswith("go-sample-heap"):
            cases.update(SAMPLE_CASES)
        if stem == "go-sample-heap":
            cases.update(SAMPLE_FILTER_CASES)
        if stem == "go-sample-cpu":
            cases.update(CPU_CASES)
        if stem == LABELED:
            cases = dict(LABELED_CASES)
        if stem == GENERICS:
            cases = dict(GENERIC_CASES)
        for case, args in cases.items():
            (root / f"{stem}.{case}.txt").write_text(f"# args: {' '.join(args)}\n{run(args, profile)}")
    for new, base, suffix, extra in DIFFS:
        args = ["-top", "-nodecount=40", f"-diff_base={base}.pb.gz", *extra]
        text = run(args, Path(f"{new}.pb.gz"), cwd=root)
        (root / f"{new}.diff-{base}{suffix}.txt").write_text(f"# args: {' '.join(args)}\n{text}")


if __name__ == "__main__":
    main()
