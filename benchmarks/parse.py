"""Benchmark: crdscale (parse + top + attribution, one process) vs `go tool pprof -top`.

For a sweep of kube-apiserver heap profiles (default: the recorded fixtures
under tests/data, repeated to 10 files; or pass a run directory or files),
times crdscale decoding each profile, computing the full top table and the
attribution by cause, all in this one Python process, against running
``go tool pprof -top`` once per profile. Prints both times and the ratio
(goal: at most 0.3). Reports only; asserts nothing.

Usage: python benchmarks/parse.py [RUN_DIR | PROFILE ...] [--count 10]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from itertools import cycle, islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_profiles() -> list[Path]:
    found = sorted((ROOT / "tests" / "data" / "run-kube-apiserver" / "profiles").glob("heap-*.pb.gz"))
    found += sorted((ROOT / "tests" / "data" / "profiles").glob("kube-apiserver-heap-*.pb.gz"))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", help="a run directory or heap profiles")
    ap.add_argument("--count", type=int, default=10, help="number of profiles in the sweep (cycled)")
    args = ap.parse_args()

    t_import = time.perf_counter()
    from crdscale.analysis.attribution import attribution_table
    from crdscale.analysis.pprof import read_profile, top
    from crdscale.analysis.pprof.schema import protobuf_backend
    import_s = time.perf_counter() - t_import

    paths: list[Path] = []
    for item in args.inputs:
        p = Path(item)
        paths += sorted((p / "profiles").glob("heap-*.pb.gz")) if p.is_dir() else [p]
    paths = paths or default_profiles()
    if not paths:
        print("no heap profiles found", file=sys.stderr)
        return 2
    sweep = list(islice(cycle(paths), args.count))

    backend = protobuf_backend()
    print(f"protobuf backend: {backend}" + ("" if backend == "upb" else "  (NOT the fast upb backend!)"))
    print(f"profiles: {len(sweep)} ({len(set(sweep))} distinct, {sum(p.stat().st_size for p in sweep) / 1e6:.1f} MB gz)")

    start = time.perf_counter()
    for path in sweep:
        profile = read_profile(path)
        top(profile, "inuse_space")
        attribution_table(profile, "inuse_space")
    ours = time.perf_counter() - start
    print(f"crdscale parse+top+attribution: {ours:.3f} s ({1000 * ours / len(sweep):.1f} ms/profile; "
          f"+{import_s:.2f} s one-time import)")

    go = shutil.which("go")
    if go is None:
        print("go not on PATH: no comparison")
        return 0
    subprocess.run([go, "tool", "pprof", "-top", str(sweep[0])], capture_output=True)  # warm the tool build cache
    start = time.perf_counter()
    for path in sweep:
        subprocess.run([go, "tool", "pprof", "-top", "-sample_index=inuse_space", str(path)],
                       capture_output=True, check=True)
    theirs = time.perf_counter() - start
    print(f"go tool pprof -top, once per profile: {theirs:.3f} s ({1000 * theirs / len(sweep):.1f} ms/profile)")
    ratio = ours / theirs
    print(f"ratio crdscale / pprof: {ratio:.2f} (goal <= 0.3: {'met' if ratio <= 0.3 else 'NOT met'})")
    # The import (pandas, numpy, protobuf) is paid once per process; shown apart so both views are visible.
    print(f"ratio including crdscale's one-time import: {(ours + import_s) / theirs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
