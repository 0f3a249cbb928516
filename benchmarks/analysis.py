"""Benchmark: how long do ``crdscale analyze`` and ``crdscale report`` take on a big run? (issue 13, goal ≤ 60 s together)

Times the two commands a researcher runs after a long experiment, each as its own process,
on a copy of the run directory (both write into it: ``analysis/`` and ``report/``), and
prints wall and CPU seconds of each, the sum, and the run's size (CRDs, heap profiles and
their bytes, series rows) so a number can be read against the work behind it::

    crdscale run benchmarks/scale-5000.toml --out /tmp/scale5k
    python benchmarks/analysis.py /tmp/scale5k/<run>               # add -o json for scripts

Exits 1 when analyze + report together take longer than ``--goal`` seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crdscale.rundir import read_run


def timed(argv: list[str]) -> dict:
    """Run ``argv``; wall seconds and the CPU seconds of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[2:])} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def run_size(run_dir: Path) -> dict:
    run = read_run(run_dir)
    profiles = sorted((run_dir / "profiles").glob("*.pb.gz"))
    return {
        "crds": run.manifest.crds.count,
        "profiles": len(profiles),
        "profile_bytes": sum(p.stat().st_size for p in profiles),
        "series_rows": 0 if run.series is None else len(run.series),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--goal", type=float, default=60.0, help="seconds for analyze + report (default 60)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    if not (args.run_dir / "manifest.json").is_file():
        parser.error(f"{args.run_dir} is not a run directory (no manifest.json)")

    with tempfile.TemporaryDirectory(prefix="crdscale-bench-") as tmp:
        # A copy, so the benchmark measures a first analysis and leaves the recorded run as it was.
        run_dir = Path(
            shutil.copytree(
                args.run_dir,
                Path(tmp) / args.run_dir.name,
                ignore=shutil.ignore_patterns("analysis", "report", "prometheus"),
            )
        )
        size = run_size(run_dir)
        cli = [sys.executable, "-m", "crdscale"]
        analyze = timed([*cli, "analyze", str(run_dir), "-o", "json"])
        report = timed([*cli, "report", str(run_dir)])
    total = round(analyze["wall_s"] + report["wall_s"], 2)
    result = {
        "run": str(args.run_dir),
        **size,
        "analyze": analyze,
        "report": report,
        "total_wall_s": total,
        "goal_s": args.goal,
        "met": total <= args.goal,
    }
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        print(
            f"run: {args.run_dir} ({size['crds']} CRDs, {size['profiles']} heap profiles, "
            f"{size['profile_bytes'] / 2**20:.1f} MiB, {size['series_rows']:,} series rows)"
        )
        for name in ("analyze", "report"):
            print(f"  crdscale {name:<8} {result[name]['wall_s']:7.1f} s wall  {result[name]['cpu_s']:7.1f} s CPU")
        print(
            f"  together        {total:7.1f} s wall  (goal {args.goal:.0f} s: {'met' if result['met'] else 'NOT met'})"
        )
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
