"""Benchmark: `crdscale footprint`'s prediction against a measured run, on a CRD set the fit never saw.

Generates a CRD set unlike the footprint sweep's (default: 400 apigen CRDs, 150 properties,
2 served versions, seed 7; the sweep has 120 CRDs, seed 2, 10/100/300 properties, 1 or 3
versions), predicts what it adds with `crdscale footprint -o json` (the model the CLI picks:
calibrated on this machine, else shipped; --shipped forces the shipped one), then installs it
on a local kube-apiserver in steps under the sweep's own conditions (LISTed and watched, 5 s
settle, heap profile after GC) and prints predicted vs measured growth of the served heap and
of RSS once the whole set is in: relative error and whether the measurement falls inside the
95% prediction interval. It reports; it does not assert (the goal: served heap within 20 %).

Usage: python benchmarks/footprint.py [--kube-version 1.37.1] [--crds 400] [--properties 150]
                                      [--versions 2] [--seed 7] [--steps 4] [--out DIR] [--shipped] [-o json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from crdscale.analysis.footprint import RSS, TOTAL, final_growth, training_rows
from crdscale.cli.common import run_with_progress
from crdscale.crds.generate import generate_crds, preset, write_crds
from crdscale.paths import runs_dir
from crdscale.scenario.calibrate import read_run_input, sweep_scenario
from crdscale.scenario.config import build_scenario

MEASURES = ((TOTAL, "served_heap_bytes", "served heap growth"), (RSS, "rss_bytes", "RSS growth"))


def predicted(crds_dir: Path, kube_version: str, shipped: bool) -> dict:
    """`crdscale footprint CRDS -o json`, run as a user would (its warnings pass through to stderr)."""
    cmd = [sys.executable, "-m", "crdscale", "footprint", str(crds_dir), "--kube-version", kube_version, "-o", "json"]
    out = subprocess.run(cmd + (["--shipped"] if shipped else []), check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout)


def measured(crds_dir: Path, kube_version: str, steps: int, out: Path) -> tuple[Path, dict[str, float]]:
    """Run the set under the sweep's conditions; its run directory and growth by target (bytes) at the last step."""
    sweep = sweep_scenario(kube_version)
    scenario = build_scenario(
        sweep.user,
        where="footprint benchmark",
        overrides={
            "name": "footprint-benchmark",
            "crds.source": str(crds_dir),
            "steps.count": steps,
            "target.kube_version": kube_version,
            "description": f"footprint benchmark: the CRDs in {crds_dir}",
        },
    )
    run_dir = Path(run_with_progress(scenario, out))
    run = read_run_input(run_dir)
    growth = final_growth(training_rows(run.points, {str(run.path): run.features}))
    return run_dir, dict(zip(growth["target"], growth["added"]))


def compare(prediction: dict, growth: dict[str, float]) -> list[dict]:
    rows = []
    for target, key, label in MEASURES:
        p, m = prediction[key], growth.get(target)
        inside = None if p["low"] is None or m is None else p["low"] <= m <= p["high"]
        rows.append(
            {
                "what": label,
                "target": target,
                "predicted": p["value"],
                "low": p["low"],
                "high": p["high"],
                "measured": m,
                "error": None if not m else (p["value"] - m) / m,
                "inside_interval": inside,
            }
        )
    return rows


def mib(v) -> str:
    return "?" if v is None else f"{v / 2**20:,.1f} MiB"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kube-version", default="1.37.1")
    parser.add_argument("--crds", type=int, default=400)
    parser.add_argument("--properties", type=int, default=150)
    parser.add_argument("--versions", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None, help="parent of the run directory (default: ./runs)")
    parser.add_argument("--shipped", action="store_true", help="predict with the shipped model, not a calibrated one")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)

    params = preset(
        "apigen",
        crd_count=args.crds,
        group_count=max(1, args.crds // 10),
        property_count=args.properties,
        versions=args.versions,
        seed=args.seed,
    )
    with tempfile.TemporaryDirectory(prefix="crdscale-footprint-bench-") as tmp:
        crds_dir = Path(tmp) / "crds"
        write_crds(generate_crds(params), crds_dir)
        prediction = predicted(crds_dir, args.kube_version, args.shipped)
        run_dir, growth = measured(crds_dir, args.kube_version, args.steps, args.out or runs_dir())
    rows = compare(prediction, growth)
    result = {
        "kube_version": args.kube_version,
        "crd_set": {**params.to_dict(), **prediction["features"]},
        "model": prediction["model"],
        "warnings": prediction["warnings"],
        "run_dir": str(run_dir),
        "results": rows,
    }
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    f = prediction["features"]
    print(
        f"CRD set: {f['crds']:.0f} CRDs, {f['served_versions']:.0f} served versions, "
        f"{f['properties'] / f['served_versions']:.0f} properties per version, seed {args.seed}"
    )
    origin, prov = prediction["model"]["origin"], prediction["model"]["provenance"]
    print(
        f"model: {origin} ({prediction['model']['path']}); fitted on {prov.get('experiment')}, "
        f"{prov.get('machine')}, {prov.get('date')}"
    )
    for warning in prediction["warnings"]:
        print(f"warning: {warning}")
    print(f"run: {run_dir}")
    print(f"{'':<20}{'predicted':>12}  {'95% interval':<28}{'measured':>12}{'error':>9}  in interval")
    for r in rows:
        interval = "-" if r["low"] is None else f"[{mib(r['low'])}, {mib(r['high'])}]"
        error = "?" if r["error"] is None else f"{100 * r['error']:+.1f}%"
        inside = {True: "yes", False: "no", None: "-"}[r["inside_interval"]]
        print(f"{r['what']:<20}{mib(r['predicted']):>12}  {interval:<28}{mib(r['measured']):>12}{error:>9}  {inside}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
