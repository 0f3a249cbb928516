"""Benchmark: `crdscale footprint`'s prediction against a measured run, on a CRD set the fit never saw;
with --speed, how long it takes to read a provider's CRDs, beside kubectl reading the same files.

Generates a CRD set unlike the footprint sweep's (default: 400 apigen CRDs, 150 properties,
2 served versions, seed 7; the sweep has 120 CRDs, seed 2, 10/100/300 properties, 1 or 3
versions), predicts what it adds with `crdscale footprint -o json` (the model the CLI picks:
calibrated on this machine, else shipped; --shipped forces the shipped one), then installs it
on a local kube-apiserver in steps under the sweep's own conditions (LISTed and watched, 5 s
settle, heap profile after GC) and prints predicted vs measured growth of the served heap and
of RSS once the whole set is in: relative error and whether the measurement falls inside the
95% prediction interval. It reports; it does not assert (the goal: served heap within 20 %).

--speed [DIR] times `crdscale footprint DIR --shipped -o json` as a user runs it (a new process,
imports included; default DIR: the 1,848 real provider CRDs of
../shared/data/crossplane-terrajet-2021-crds.tar.gz, unpacked to a temporary directory) against
kubectl reading the same files: `kubectl label --local --dry-run=client -f DIR k=v -o name` reads,
decodes and prints every object with no server (`kubectl apply/create --dry-run=client` cannot: they
need the server's discovery to map kinds, and spend ~30 s failing to reach a fake one); with
--kubeconfig also `kubectl apply --dry-run=client -f DIR -o name` against that live server
(discovery only, nothing written). Each command runs --repeat times (default 3); it prints the median
and best wall time, the median CPU time (user + system of the process and its children: the machine
may be shared, and CPU time does not count waiting for it) and the load average before and after.

--validation compares the models with the measurements committed in benchmarks/footprint-measured.toml
(each with the command and run that measured it; no server needed): every set is predicted now, with
the model the CLI would use (--shipped: the shipped one), and the table gives predicted vs measured
for served heap, settled and peak RSS growth, the relative error, whether the measurement is inside
the 95 % interval, and the empirical coverage: over all rows, and over the held-out rows only
(sets that informed no modelling decision, per the model's provenance.uses). --measure RUN_DIR prints
a run's measured growths as a block for that file.

--objects-validation does the same for heap per custom resource: the shipped per-object terms
(`crdscale footprint --objects`) against the object runs in benchmarks/objects-measured.toml (the
cells each term was fitted on, and runs of other CRDs, counts and shapes it never saw: held out).

Usage: python benchmarks/footprint.py --validation [--shipped] [--model FILE] [-o json]
       python benchmarks/footprint.py --objects-validation [-o json]
       python benchmarks/footprint.py --measure RUN_DIR
       python benchmarks/footprint.py [--kube-version 1.37.1] [--crds 400] [--properties 150]
                                      [--versions 2] [--seed 7] [--steps 4] [--out DIR] [--shipped] [-o json]
       python benchmarks/footprint.py --speed [DIR] [--repeat 3] [--kubectl PATH] [--kubeconfig FILE] [-o json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from crdscale.analysis.targets import TOTAL
from crdscale.cli.common import run_with_progress
from crdscale.crds.generate import generate_crds, preset, write_crds
from crdscale.footprint.calibrate import read_run_input, sweep_scenario
from crdscale.footprint.fit import final_growth, training_rows
from crdscale.footprint.model import RSS, RSS_PEAK
from crdscale.paths import runs_dir
from crdscale.scenario.config import build_scenario

MEASURES = (
    (TOTAL, "served_heap_bytes", "served heap growth"),
    (RSS, "rss_bytes", "RSS settled growth"),
    (RSS_PEAK, "rss_peak_bytes", "RSS peak growth"),
)
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
REAL_CRDS = SHARED_DATA / "crossplane-terrajet-2021-crds.tar.gz"
MEASURED = Path(__file__).resolve().parent / "footprint-measured.toml"
# A measured set's [set] key -> where its CRDs come from: the shared real set, or a generated one.
SHARED_SET = "shared:crossplane-terrajet-2021"
# kubectl needs a kubeconfig even with --local; nothing listens on port 1.
NO_SERVER_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
users: [{name: none, user: {token: none}}]
"""


def timed(cmd: list[str], repeat: int, env: dict | None = None) -> dict:
    """Run ``cmd`` ``repeat`` times: wall seconds (median, best), CPU seconds (median), its stdout's lines."""
    walls, cpus, lines = [], [], 0
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        lines = len(done.stdout.splitlines())
    return {
        "command": " ".join(cmd),
        "wall_s_median": statistics.median(walls),
        "wall_s_best": min(walls),
        "cpu_s_median": statistics.median(cpus),
        "stdout_lines": lines,
    }


def _any_kubectl() -> str:
    """kubectl on PATH, else any version crdscale has built, else one built now (minutes)."""
    from crdscale.cluster.binaries import kubectl
    from crdscale.paths import binaries_dir

    cached = sorted(binaries_dir("kubectl", "v0").parent.glob("v*/kubectl"))
    if shutil.which("kubectl") or not cached:
        return str(kubectl().path)
    return str(cached[-1])


def speed(args) -> int:
    with tempfile.TemporaryDirectory(prefix="crdscale-footprint-speed-") as tmp:
        crds_dir = args.speed
        if crds_dir is None:
            with tarfile.open(REAL_CRDS) as archive:
                archive.extractall(tmp, filter="data")
            crds_dir = Path(tmp) / "crds"
        files = [p for p in Path(crds_dir).rglob("*") if p.suffix in (".yaml", ".yml", ".json")]
        size = sum(p.stat().st_size for p in files)
        kubeconfig = Path(tmp) / "no-server.kubeconfig"
        kubeconfig.write_text(NO_SERVER_KUBECONFIG)
        kubectl_path = args.kubectl or _any_kubectl()
        load_before = os.getloadavg()
        rows = [
            timed(
                [sys.executable, "-m", "crdscale", "footprint", str(crds_dir), "--shipped", "-o", "json"], args.repeat
            ),
            timed(
                [kubectl_path, "label", "--local", "--dry-run=client", "-f", str(crds_dir), "crdscale-bench=read"]
                + ["-o", "name", "--kubeconfig", str(kubeconfig)],
                args.repeat,
            ),
        ]
        if args.kubeconfig:
            rows.append(
                timed(
                    [kubectl_path, "apply", "--dry-run=client", "-f", str(crds_dir), "-o", "name"]
                    + ["--kubeconfig", str(args.kubeconfig)],
                    args.repeat,
                )
            )
        load_after = os.getloadavg()
    result = {
        "files": len(files),
        "bytes": size,
        "cpus": os.cpu_count(),
        "load_average_before": load_before[0],
        "load_average_after": load_after[0],
        "repeat": args.repeat,
        "results": rows,
    }
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{len(files):,} files, {size / 2**20:.1f} MiB of YAML; {os.cpu_count()} CPUs, load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after; {args.repeat} runs each"
    )
    print(f"{'wall median':>12}{'wall best':>11}{'CPU median':>12}  command")
    for r in rows:
        print(f"{r['wall_s_median']:>11.2f}s{r['wall_s_best']:>10.2f}s{r['cpu_s_median']:>11.2f}s  {r['command']}")
    return 0


def predicted(crds_dir: Path, kube_version: str, shipped: bool, quiet: bool = False) -> dict:
    """`crdscale footprint CRDS -o json`, run as a user would (its warnings pass through to stderr
    unless ``quiet``: they are in the JSON too)."""
    cmd = [sys.executable, "-m", "crdscale", "footprint", str(crds_dir), "--kube-version", kube_version, "-o", "json"]
    cmd += ["--top", "0"] + (["--shipped"] if shipped else [])
    out = subprocess.run(
        cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if quiet else None, text=True
    )
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
    return run_dir, run_growth_by_target(run_dir)


def run_growth_by_target(run_dir: Path) -> dict[str, float]:
    """A run's growth at its last step by target (bytes): heap by cause and ``total`` from its last
    profile, ``rss`` (settled) and ``rss_peak`` as crdscale.footprint.model.RSS_DEFINITIONS says."""
    run = read_run_input(run_dir)
    growth = final_growth(training_rows(run.points, {str(run.path): run.features}))
    out = dict(zip(growth["target"], growth["added"]))
    if run.rss:
        out[RSS_PEAK] = run.rss["peak"]
        out["rss_end"] = run.rss["end"]
    return out


def measure(run_dir: Path) -> int:
    """Print a run's measured growths as a [[measurement]] block for benchmarks/footprint-measured.toml."""
    run = read_run_input(run_dir)
    growth = run_growth_by_target(run_dir)
    installed = int(final_growth(training_rows(run.points, {str(run.path): run.features}))["installed"].max())
    print("[[measurement]]")
    print(f'run = "{run_dir.parent.name}/{run_dir.name}"')
    print(f'kube_version = "{run.kube_version}"')
    print(f"crds = {installed}  # installed at the last profile, of {run.features['crds']:.0f} in the set")
    print(f'status = "{run.manifest.get("status")}"')
    for key, target in (("heap_bytes", TOTAL), ("rss_settled_bytes", RSS), ("rss_peak_bytes", RSS_PEAK)):
        if target in growth:
            print(f"{key} = {growth[target]:.0f}")
    if "rss_end" in growth:
        print(f"rss_end_bytes = {growth['rss_end']:.0f}  # after the hold, if any")
    return 0


def _set_source(entry: dict, tmp: Path) -> Path:
    """The CRDs a measured set names: the shared tarball (read as is) or a generated set, regenerated."""
    if entry["set"] == SHARED_SET or "shared" in entry:
        path = REAL_CRDS if entry["set"] == SHARED_SET else SHARED_DATA / entry["shared"]
        if not path.is_file():
            raise SystemExit(f"{path}: the shared real CRD set is not there")
        return path
    g = entry["generate"]
    params = preset(
        g.get("preset", "apigen"),
        crd_count=g["count"],
        group_count=g["groups"],
        property_count=g["property_count"],
        versions=g.get("versions", 1),
        seed=g["seed"],
    )
    out = tmp / entry["set"].replace(":", "-")
    if not out.exists():
        write_crds(generate_crds(params), out)
    return out


def predicted_prefix(source: Path, kube_version: str, shipped: bool, crds: int | None, model_file=None) -> dict:
    """What `crdscale footprint SOURCE -o json` says (its keys), for the first ``crds`` CRDs of the source in
    the order a run installs them (a run stopped early, e.g. by its memory guard, measured a prefix)."""
    from crdscale.crds.load import load_crds
    from crdscale.footprint.features import add_features, crd_features
    from crdscale.footprint.model import predict
    from crdscale.footprint.store import choose_model, read_model

    # --model FILE stands for its own version; the other versions keep the CLI's choice.
    own = model_file is not None and read_model(model_file).kube_version.lstrip("v") == kube_version.lstrip("v")
    chosen = choose_model(kube_version, path=model_file if own else None, shipped_only=shipped)
    measures = load_crds(source, measure=crd_features).measures
    features = add_features(measures[:crds] if crds else measures)
    rows = {
        r.target: {"value": r.value, "low": r.low, "high": r.high} for r in predict(chosen.model, features).itertuples()
    }
    return {
        "features": features,
        "served_heap_bytes": rows.get(TOTAL),
        "rss_bytes": rows.get(RSS),
        "rss_peak_bytes": rows.get(RSS_PEAK),
        "model": {"origin": chosen.origin, "path": str(chosen.path), "provenance": chosen.model.provenance},
    }


def validation(args) -> int:
    """Predicted vs measured for every committed measurement, and the intervals' empirical coverage."""
    import tomllib

    data = tomllib.loads(MEASURED.read_text())
    sets = {s["set"]: s for s in data["set"]}
    rows = []
    with tempfile.TemporaryDirectory(prefix="crdscale-footprint-validation-") as tmp:
        for m in data["measurement"]:
            entry = sets[m["set"]]
            prediction = predicted_prefix(
                _set_source(entry, Path(tmp)), m["kube_version"], args.shipped, m.get("crds"), args.model
            )
            uses = prediction["model"]["provenance"].get("uses", {})
            # Held out: named as validation, and in no other role (a set that informed the error model,
            # say, is no longer evidence about it).
            held_out = any(entry["held_out_as"] in str(v) for v in uses.get("validation", [])) and not any(
                entry["held_out_as"] in str(v) for role, items in uses.items() if role != "validation" for v in items
            )
            growth = {TOTAL: m.get("heap_bytes"), RSS: m.get("rss_settled_bytes"), RSS_PEAK: m.get("rss_peak_bytes")}
            for r in compare(prediction, growth):
                if r["measured"] is not None:
                    rows.append(
                        {
                            "set": m["set"],
                            "run": m.get("run"),
                            "kube_version": m["kube_version"],
                            "held_out": held_out,
                            **r,
                        }
                    )
    coverage = _coverage(rows)
    if args.output == "json":
        print(json.dumps({"results": rows, "coverage": coverage}, indent=2))
        return 0
    print(
        f"{'set':<44}{'version':>8}  {'quantity':<20}{'predicted':>12}  {'95% interval':<26}{'measured':>12}"
        f"{'error':>8}  in"
    )
    for r in rows:
        interval = "-" if r["low"] is None else f"[{mib(r['low'])}, {mib(r['high'])}]"
        error = "?" if r["error"] is None else f"{100 * r['error']:+.1f}%"
        inside_text = {True: "yes", False: "no", None: "-"}[r["inside_interval"]]
        name = r["set"] + (" (held out)" if r["held_out"] else "")
        print(
            f"{name:<44}{r['kube_version']:>8}  {r['what']:<20}{mib(r['predicted']):>12}  {interval:<26}"
            f"{mib(r['measured']):>12}{error:>8}  {inside_text}"
        )
    _print_coverage(coverage)
    return 0


def _coverage(rows: list[dict]) -> dict:
    """How many rows' measurements fall inside their intervals: over all rows, and over the held-out ones."""
    inside = [r for r in rows if r["inside_interval"] is not None]
    held = [r for r in inside if r["held_out"]]
    return {
        "all": {"inside": sum(r["inside_interval"] for r in inside), "rows": len(inside)},
        "held_out": {"inside": sum(r["inside_interval"] for r in held), "rows": len(held)},
    }


def _print_coverage(coverage: dict) -> None:
    for key, label in (("all", "all rows"), ("held_out", "held-out rows")):
        c = coverage[key]
        share = f"{c['inside'] / c['rows']:.0%}" if c["rows"] else "-"
        print(f"coverage of the 95% intervals, {label}: {c['inside']} of {c['rows']} inside ({share})")


OBJECTS_MEASURED = Path(__file__).with_name("objects-measured.toml")


def objects_validation(args) -> int:
    """Heap per custom resource: the shipped per-object terms against committed measurements of object runs
    (benchmarks/objects-measured.toml), and the intervals' empirical coverage. A run the term was fitted on
    counts as fitting (its leave-one-cell-out error is the honest one: crdscale footprint fit objects); the
    others are held out."""
    import tomllib

    from crdscale.footprint.objects import OBJECT_FEATURES
    from crdscale.footprint.store import read_object_term

    rows = []
    for m in tomllib.loads(OBJECTS_MEASURED.read_text())["measurement"]:
        term = read_object_term(m["kube_version"])
        if term is None:
            continue
        value, low, high = term.per_object({f: float(m[f]) for f in OBJECT_FEATURES})
        fitted = m["run"] in (term.provenance.get("uses") or {}).get("object_fitting", [])
        rows.append(
            {
                **m,
                "held_out": not fitted,
                "predicted": value,
                "low": low,
                "high": high,
                "error": (value - m["heap_per_object"]) / m["heap_per_object"],
                "inside_interval": low <= m["heap_per_object"] <= high,
            }
        )
    coverage = _coverage(rows)
    if args.output == "json":
        print(json.dumps({"results": rows, "coverage": coverage}, indent=2))
        return 0
    print(
        f"{'run':<46}{'version':>8}  {'object':<24}{'predicted':>11}  {'95% interval':<20}{'measured':>11}{'error':>8}  in"
    )
    for r in rows:
        kib = lambda v: f"{v / 1024:,.1f}"  # noqa: E731
        what = f"{r['shape']} {r['sent_bytes']:,} B, {r['nodes']:,.0f} values"
        name = r["run"] + (" (held out)" if r["held_out"] else "")
        print(
            f"{name:<46}{r['kube_version']:>8}  {what:<24}{kib(r['predicted']):>8} KiB  "
            f"[{kib(r['low'])}, {kib(r['high'])}]".ljust(20 + 57 + 24)
            + f"{kib(r['heap_per_object']):>8} KiB{100 * r['error']:+7.1f}%  {'yes' if r['inside_interval'] else 'no'}"
        )
    _print_coverage(coverage)
    return 0


def compare(prediction: dict, growth: dict[str, float]) -> list[dict]:
    rows = []
    for target, key, label in MEASURES:
        p, m = prediction.get(key) or {"value": None, "low": None, "high": None}, growth.get(target)
        inside = None if p["low"] is None or m is None else p["low"] <= m <= p["high"]
        rows.append(
            {
                "what": label,
                "target": target,
                "predicted": p["value"],
                "low": p["low"],
                "high": p["high"],
                "measured": m,
                "error": None if not m or p["value"] is None else (p["value"] - m) / m,
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
    parser.add_argument(
        "--speed",
        nargs="?",
        type=Path,
        const=None,
        default=False,
        metavar="DIR",
        help="time footprint on DIR (default: the shared real provider CRDs) beside kubectl reading it",
    )
    parser.add_argument("--repeat", type=int, default=3, help="--speed: runs per command")
    parser.add_argument("--kubectl", help="--speed: this kubectl (default: crdscale's)")
    parser.add_argument("--kubeconfig", help="--speed: also time kubectl apply --dry-run=client against this server")
    parser.add_argument("--validation", action="store_true", help="the committed measurements vs the models")
    parser.add_argument(
        "--objects-validation",
        action="store_true",
        help="heap per custom resource: benchmarks/objects-measured.toml vs the shipped per-object terms",
    )
    parser.add_argument("--model", help="--validation: this model file for its kube-apiserver version")
    parser.add_argument("--measure", type=Path, metavar="RUN_DIR", help="a run's growths, for footprint-measured.toml")
    args = parser.parse_args(argv)
    if args.validation:
        return validation(args)
    if args.objects_validation:
        return objects_validation(args)
    if args.measure:
        return measure(args.measure)
    if args.speed is not False:
        return speed(args)

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
