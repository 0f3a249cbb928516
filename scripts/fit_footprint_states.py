"""Measure the terms `crdscale footprint --state` derives the states besides served with, per version.

Usage:
  crdscale run scenarios/repeatability.toml --out /work/runs     # installed vs served, kube-controller-manager off
  crdscale run scenarios/openapi-v2.toml --out /work/runs        # before and after a GET of /openapi/v2
  crdscale run scenarios/controller-manager.toml --out /work/runs # installed only, without and with it
  python scripts/fit_footprint_states.py --installed REPEATABILITY_EXPERIMENT --openapi-v2 OPENAPI_V2_EXPERIMENT \
      [--controller-manager CONTROLLER_MANAGER_EXPERIMENT]

Writes crdscale/footprint_models/states-v<version>.json for every version both experiments ran
(crdscale.analysis.footprint.StateTerms), with provenance.uses naming the runs behind each term:

* installed: per cause, the share of its served cost already there once installed (each run's
  paired installed/served increments, "Installing vs serving" of `crdscale analyze`, averaged over
  the runs of the version: mean installed / (mean installed + mean served), clipped to [0, 1]; a share
  outside it is the installed profile's transient, e.g. v1.24.0's OpenAPI still rebuilding after the
  settle, or noise);
* watched: kube-controller-manager's per-CRD delta on installed CRDs: with --controller-manager, the
  total heap per CRD of its controller_manager=true cell minus its false cell, per version (what
  `crdscale compare FALSE TRUE` prints); otherwise docs/results/seeds.toml's controller-manager row
  (its cells were not kept on this machine, so the measured values are recorded below; --watch
  VERSION=VALUE,LOW,HIGH in KiB replaces them);
* openapi-v2: the fetched spec's cost per CRD (`crdscale analyze`'s "After a GET of /openapi/v2",
  total) of each cell, linear in served versions and properties per CRD, solved from the cells' two
  schema sizes with their standard errors (crdscale.analysis.footprint.fit_openapi_v2_term).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path

import numpy as np

from crdscale.analysis.compare import compare_runs
from crdscale.analysis.footprint import StateTerms, features_from_summary, fit_openapi_v2_term
from crdscale.analysis.targets import TOTAL
from crdscale.errors import CrdscaleError, UsageError
from crdscale.footprint_models import states_path
from crdscale.fsutil import write_atomic
from crdscale.rundir import read_run
from crdscale.scenario.calibrate import run_dirs_of

# kube-controller-manager's per-CRD delta on installed, unserved CRDs (KiB: value, low, high), 160 apigen
# CRDs of 100 properties, 45 s settle: docs/results/seeds.toml, row "installed only, with and without
# kube-controller-manager" (crdscale run scenarios/controller-manager.toml; crdscale compare of its cells).
WATCH_KIB = {"1.37.1": (344.0, 170.0, 519.0), "1.24.0": (994.0, 848.0, 1141.0)}
WATCH_SOURCE = (
    "docs/results/seeds.toml row 'installed only, with and without kube-controller-manager' "
    "(crdscale run scenarios/controller-manager.toml; crdscale compare of its controller_manager=false/true cells): "
    "160 apigen CRDs, 100 properties, 45 s settle"
)
V2_FEATURES = ["served_versions", "properties"]


def _version(run) -> str:
    version = (run.manifest.get("versions") or {}).get("kube-apiserver")
    if not version:
        raise UsageError(f"{run.path}: its manifest records no kube-apiserver version")
    return version.lstrip("v")


def installed_shares(paths) -> dict[str, tuple[dict[str, float], list[str]]]:
    """version -> (cause -> installed share, the runs)."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0]))
    runs: dict[str, list[str]] = defaultdict(list)
    for path in run_dirs_of(paths):
        run = read_run(path)
        split = run.analysis().install_serve
        split = split[(split["metric"] == "bytes") & (split["cause"] != TOTAL)]
        if not len(split):
            raise UsageError(
                f"{path}: no installed profiles (profiles.installed_phase) to split installing from serving"
            )
        version = _version(run)
        runs[version].append(run.path.name)
        for r in split.itertuples(index=False):
            acc = sums[version][r.cause]
            acc[0] += r.per_installed
            acc[1] += r.per_served
            acc[2] += 1
    out = {}
    for version, causes in sums.items():
        shares = {}
        for cause, (installed, served, n) in causes.items():
            whole = (installed + served) / n
            if whole > 0:
                shares[cause] = float(np.clip(installed / n / whole, 0.0, 1.0))
        out[version] = (shares, runs[version])
    return out


def openapi_v2_terms(paths) -> dict[str, tuple[object, list[str]]]:
    """version -> (LinearModel of the fetched spec per CRD, lines naming each run and its estimate)."""
    observations: dict[str, list] = defaultdict(list)
    lines: dict[str, list[str]] = defaultdict(list)
    dofs: dict[str, list[int]] = defaultdict(list)
    for path in run_dirs_of(paths):
        run = read_run(path)
        table = run.analysis().openapi_v2
        if not len(table):
            raise UsageError(f"{path}: no openapiv2 profiles (profiles.openapi_v2) to measure the v2 spec with")
        total = table[(table["metric"] == "bytes") & (table["cause"] == TOTAL)].iloc[0]
        features = features_from_summary(run.manifest["crds"])
        per_crd = {f: features[f] / features["crds"] for f in V2_FEATURES}
        version = _version(run)
        observations[version].append((per_crd, float(total["per_crd"]), float(total["per_crd_se"])))
        dofs[version].append(int(total["dof"]))
        lines[version].append(
            f"{run.path.parent.name}/{run.path.name}{'' if run.status == 'completed' else f' ({run.status})'}: {total['per_crd'] / 1024:,.1f} KiB per CRD "
            f"[{total['per_crd_low'] / 1024:,.1f}, {total['per_crd_high'] / 1024:,.1f}] at "
            f"{per_crd['served_versions']:g} served versions and {per_crd['properties']:,.0f} properties per CRD"
        )
    return {v: (fit_openapi_v2_term(obs, V2_FEATURES, min(dofs[v])), lines[v]) for v, obs in observations.items()}


def controller_manager_deltas(paths) -> dict[str, tuple[tuple[float, float, float], str]]:
    """version -> ((delta, low, high) KiB per installed CRD, a line naming the two cells), from cells that
    differ in target.controller_manager."""
    cells: dict[str, dict[bool, Path]] = defaultdict(dict)
    for path in run_dirs_of(paths):
        run = read_run(path)
        on = ((run.manifest.get("scenario") or {}).get("target") or {}).get("controller_manager")
        if on is None:
            raise UsageError(f"{path}: its scenario does not say whether kube-controller-manager ran")
        version = _version(run)
        if bool(on) in cells[version]:
            raise UsageError(f"{path}: a second controller_manager={str(on).lower()} cell for v{version}")
        cells[version][bool(on)] = Path(path)
    out = {}
    for version, pair in cells.items():
        if set(pair) != {False, True}:
            raise UsageError(f"v{version}: needs one cell without and one with kube-controller-manager")
        joint = compare_runs([pair[False], pair[True]]).joint
        row = joint[(joint["metric"] == "bytes") & (joint["cause"] == TOTAL)]
        if not len(row):
            raise UsageError(f"v{version}: no per-CRD difference of total heap between {pair[False]} and {pair[True]}")
        r = row.iloc[0]
        kib = (float(r["difference"]) / 1024, float(r["difference_low"]) / 1024, float(r["difference_high"]) / 1024)
        line = (
            f"scenarios/controller-manager.toml, crdscale compare {pair[False].parent.name}/{pair[False].name} "
            f"{pair[True].name}: {kib[0]:+,.1f} KiB [{kib[1]:,.1f}, {kib[2]:,.1f}] per installed CRD"
        )
        out[version] = (kib, line)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--installed", nargs="+", required=True, metavar="RUN_OR_EXPERIMENT")
    parser.add_argument("--openapi-v2", nargs="+", required=True, metavar="RUN_OR_EXPERIMENT")
    parser.add_argument("--controller-manager", nargs="+", default=[], metavar="RUN_OR_EXPERIMENT")
    parser.add_argument("--watch", action="append", default=[], metavar="VERSION=VALUE,LOW,HIGH")
    args = parser.parse_args(argv)
    try:
        watch = dict(WATCH_KIB)
        watch_source = dict.fromkeys(watch, WATCH_SOURCE)
        for item in args.watch:
            version, _, values = item.partition("=")
            parts = [float(v) for v in values.split(",")]
            if len(parts) != 3:
                raise UsageError(f"--watch {item}: give VERSION=VALUE,LOW,HIGH (KiB)")
            watch[version.lstrip("v")] = tuple(parts)
            watch_source[version.lstrip("v")] = f"--watch {item} (KiB)"
        for version, (kib, line) in controller_manager_deltas(args.controller_manager).items():
            watch[version], watch_source[version] = kib, line
        shares = installed_shares(args.installed)
        v2 = openapi_v2_terms(args.openapi_v2)
        for version in sorted(set(shares) & set(v2)):
            if version not in watch:
                raise UsageError(
                    f"no kube-controller-manager delta for v{version}: pass --controller-manager or --watch {version}=V,LOW,HIGH"
                )
            share, share_runs = shares[version]
            where = os.path.commonpath([str(Path(p).resolve()) for p in args.openapi_v2])
            model, v2_lines = v2[version]
            terms = StateTerms(
                version,
                share,
                tuple(v * 1024 for v in watch[version]),
                V2_FEATURES,
                model,
                {
                    "method": "scripts/fit_footprint_states.py",
                    "date": date.today().isoformat(),
                    "uses": {
                        "state_installed": [
                            f"{', '.join(args.installed)}: installed/served increments of runs {', '.join(share_runs)} "
                            f"(kube-controller-manager off)"
                        ],
                        "state_watched": [watch_source[version]],
                        "state_openapi_v2": [f"cells of scenarios/openapi-v2.toml under {where}:", *v2_lines],
                    },
                },
            )
            path = write_atomic(states_path(version), json.dumps(terms.to_dict(), indent=1) + "\n")
            print(path)
        missing = sorted(set(shares) ^ set(v2))
        if missing:
            print(f"left out (only one experiment ran them): {', '.join(missing)}", file=sys.stderr)
    except CrdscaleError as err:
        print(f"fit_footprint_states: {err}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
