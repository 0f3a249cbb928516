"""Benchmark: crdscale (decode + top + attribution, one process) vs `go tool pprof -top`.

For a sweep of kube-apiserver heap profiles, times crdscale reading and
decoding each profile, computing the full top table and the attribution by
cause, all in this one Python process (with the malloc settings the crdscale
CLI uses, ``crdscale/allocator.py``), against running ``go tool pprof -top``
once per profile, in the same run. Prints both times (wall clock and CPU) and
the ratios; the goal (issue 13) is at most 0.2 on large real profiles
(2,000-CRD kube-apiserver heap profiles: 400-570 KB, ~12,000 samples).
Reports only; asserts nothing.

Inputs: run directories (their heap profiles), directories of ``*.pb.gz``, or
profile files; default: the small recorded fixtures under tests/data. Large
profiles stay out of git; record some with the scenario beside this file and
pass the run directory::

    crdscale run benchmarks/scale-2000.toml --out /tmp/scale        # 2,000 CRDs, ~20-30 min
    python benchmarks/parse.py /tmp/scale/<run> --repeat 3

Usage: python benchmarks/parse.py [RUN_DIR | DIR | PROFILE ...] [--count N] [--repeat R]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from itertools import cycle, islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.2


def default_profiles() -> list[Path]:
    return sorted((ROOT / "tests" / "data" / "profiles").glob("kube-apiserver-heap-*.pb.gz"))


def heap_profiles(item: Path) -> list[Path]:
    """Heap profiles named by a run directory, a directory of profiles, or a file."""
    if not item.is_dir():
        return [item]
    from crdscale.errors import UsageError
    from crdscale.rundir import read_run

    try:
        run = read_run(item)
    except UsageError:
        return sorted(p for p in item.rglob("*.pb.gz") if "heap" in p.name)
    heap = run.profiles[run.profiles["kind"] == "heap"]
    return [run.profile_path(f) for f in heap["file"]]


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", type=Path, help="run directories, directories of profiles, or profiles")
    ap.add_argument("--count", type=int, default=0, help="profiles in the sweep, cycled (default: each once)")
    ap.add_argument("--repeat", type=int, default=1, help="time the whole sweep this many times; the best counts")
    args = ap.parse_args()

    t_import = time.perf_counter()
    from crdscale.allocator import keep_freed_memory
    from crdscale.analysis.attribution import attribution_table
    from crdscale.analysis.pprof import parse_profile, top
    from crdscale.analysis.pprof.schema import protobuf_backend

    import_s = time.perf_counter() - t_import
    keep_freed_memory()  # as the crdscale CLI does (crdscale/allocator.py)

    paths = [p for item in args.inputs for p in heap_profiles(item)] or default_profiles()
    if not paths:
        print("no heap profiles found", file=sys.stderr)
        return 2
    sweep = list(islice(cycle(paths), args.count or len(paths)))

    from crdscale.units import fmt_bytes

    backend = protobuf_backend()
    print(f"protobuf backend: {backend}" + ("" if backend == "upb" else "  (NOT the fast upb backend!)"))
    sizes = [p.stat().st_size for p in sweep]
    print(
        f"profiles: {len(sweep)} ({len(set(sweep))} distinct, {fmt_bytes(min(sizes), digits=0)}-"
        f"{fmt_bytes(max(sizes), digits=0)} gz, {fmt_bytes(sum(sizes))} in all)"
    )

    def ours_once() -> tuple[float, float, int]:
        wall, cpu = time.perf_counter(), cpu_seconds(resource.RUSAGE_SELF)
        samples = 0
        for path in sweep:
            profile = parse_profile(path.read_bytes(), str(path))
            top(profile, "inuse_space")
            attribution_table(profile, "inuse_space")
            samples += profile.n_samples
        return time.perf_counter() - wall, cpu_seconds(resource.RUSAGE_SELF) - cpu, samples

    go = shutil.which("go")
    if go is None:
        print("go not on PATH: no comparison")
    else:
        subprocess.run([go, "tool", "pprof", "-top", str(sweep[0])], capture_output=True)  # warm the tool build cache

    def theirs_once() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
        for path in sweep:
            subprocess.run(
                [go, "tool", "pprof", "-top", "-sample_index=inuse_space", str(path)], capture_output=True, check=True
            )
        return time.perf_counter() - wall, cpu_seconds(resource.RUSAGE_CHILDREN) - cpu

    # Interleave the two so that both see the same load on a shared machine.
    ours, theirs = [], []
    for _ in range(max(args.repeat, 1)):
        ours.append(ours_once())
        if go is not None:
            theirs.append(theirs_once())
    o_wall, o_cpu, samples = min(ours)
    n = len(sweep)
    print(
        f"crdscale decode+top+attribution: {o_wall:.3f} s wall, {o_cpu:.3f} s CPU "
        f"({1000 * o_wall / n:.0f} ms/profile, {samples // n} samples/profile; +{import_s:.2f} s one-time import)"
    )
    if go is None:
        return 0
    t_wall, t_cpu = min(theirs)
    print(
        f"go tool pprof -top, once per profile: {t_wall:.3f} s wall, {t_cpu:.3f} s CPU "
        f"({1000 * t_wall / n:.0f} ms/profile)"
    )
    ratio = o_wall / t_wall
    print(
        f"ratio crdscale / pprof: {ratio:.2f} wall, {o_cpu / t_cpu:.2f} CPU "
        f"(goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})"
    )
    # The import (pandas, numpy, protobuf) is paid once per process; shown apart so both views are visible.
    print(f"ratio including crdscale's one-time import: {(o_wall + import_s) / t_wall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
