"""Assemble recorded runs of one scenario into a small A/B directory with arms (`crdscale ab --each`), the fixture
tests/data/ab-arms/.

Each run is shrunk as scripts/make_run_fixture.py shrinks a run (the served heap profiles of kube-apiserver only,
their in-use samples; the RSS and CPU series), its LIST tables (probes/*.parquet) and CRD set summary are kept, and
it is renamed after its round and configuration (`<UTC start>-r01-base`, `<UTC start>-r01-<arm>`). ab.json
records the scenario of the first A/B given, the arms and every run.

tests/data/ab-arms/ is scenarios/gates.toml on v1.37.1 (12 CRDs, 1,800 custom resources, LISTs), assembled from
two recorded A/Bs of it (`crdscale ab scenarios/gates.toml --feature-gate CBORServingAndStorage=true
--min-pairs 3`, and the first pair of `... --feature-gate ListFromCacheSnapshot=false`, interrupted in its
second): the base and CBORServingAndStorage=true 3 runs each, ListFromCacheSnapshot=false 1 (its second run
recorded as interrupted). Its runs were not made in rotated rounds; the analysis does not need them to be.

    A=.../20261127T234641Z-ab-gates L=.../20261128T002711Z-ab-gates   # the two recorded A/B directories
    python scripts/make_arms_fixture.py tests/data/ab-arms --scenario-from $A \\
        --arm CBORServingAndStorage:CBORServingAndStorage=true --arm ListFromCacheSnapshot:ListFromCacheSnapshot=false \\
        --run 1:base:$A/20261127T234647Z-p01-base --run 1:CBORServingAndStorage:$A/20261127T235256Z-p01-changed \\
        --run 1:ListFromCacheSnapshot:$L/20261128T003944Z-p01-changed \\
        --run 2:base:$A/20261128T000322Z-p02-base --run 2:CBORServingAndStorage:$A/20261127T235818Z-p02-changed \\
        --run 3:base:$A/20261128T001138Z-p03-base --run 3:CBORServingAndStorage:$A/20261128T001807Z-p03-changed \\
        --interrupted 2:ListFromCacheSnapshot
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's crdscale

from make_run_fixture import shrink_run  # noqa: E402

from crdscale.fsutil import write_json_atomic  # noqa: E402
from crdscale.scenario.ab import AB_MANIFEST, arm_run_name  # noqa: E402

SERIES = ["process_resident_memory_bytes", "process_cpu_seconds_total"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--scenario-from", required=True, help="a recorded A/B directory of the scenario")
    ap.add_argument("--arm", action="append", default=[], help="NAME:GATE=true|false")
    ap.add_argument("--run", action="append", default=[], help="ROUND:CONFIGURATION:RUN_DIR")
    ap.add_argument("--interrupted", action="append", default=[], help="ROUND:CONFIGURATION")
    args = ap.parse_args()
    out = Path(args.out)
    source = json.loads((Path(args.scenario_from) / AB_MANIFEST).read_text())
    arms = []
    for spec in args.arm:
        name, _, gate = spec.partition(":")
        gate_name, _, value = gate.partition("=")
        overrides = {"target.feature_gates": {gate_name: value == "true"}}
        arms.append({"name": name, "title": gate, "overrides": overrides})
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    runs = []
    for spec in args.run:
        round_, config, run_dir = spec.split(":", 2)
        run_dir = Path(run_dir)
        name = f"{run_dir.name.split('-')[0]}-{arm_run_name(int(round_), config)}"
        shrink_run(run_dir, out / name, served_only=True, series_metrics=SERIES)
        for kept in ("probes", "crds"):
            if (run_dir / kept).is_dir():
                shutil.copytree(run_dir / kept, out / name / kept, dirs_exist_ok=True)
        seconds = next((r.get("seconds") for r in source.get("runs", []) if r.get("run_dir") == run_dir.name), None)
        runs.append({"pair": int(round_), "side": config, "run_dir": name, "status": "completed", "seconds": seconds})
    for spec in args.interrupted:
        round_, config = spec.split(":", 1)
        runs.append({"pair": int(round_), "side": config, "run_dir": None, "status": "interrupted", "seconds": None})
    manifest = {
        "kind": "ab",
        "crdscale_version": source.get("crdscale_version"),
        "name": source["name"],
        "status": "interrupted" if args.interrupted else "completed",
        "scenario_file": source.get("scenario_file"),
        "scenario": source["scenario"],
        "overrides": source.get("overrides") or {},
        "change": {"name": ", ".join(a["name"] for a in arms), "overrides": {}},
        "arms": arms,
        "runs": runs,
    }
    write_json_atomic(out / AB_MANIFEST, manifest)
    print(out)


if __name__ == "__main__":
    main()
