"""The footprint's terms measured on runs, besides the model itself: the state terms
(:class:`~crdscale.footprint.states.StateTerms`) and the per-object term
(:class:`~crdscale.footprint.objects.ObjectTerm`), behind ``crdscale footprint fit states`` and
``crdscale footprint fit objects``.

State terms, per version, from three experiments:

* installed: per cause, the share of its served cost already there once installed (each run's
  paired installed/served increments, "Installing vs serving" of `crdscale analyze`, averaged over
  the runs of the version: mean installed / (mean installed + mean served), clipped to [0, 1]; a share
  outside it is the installed profile's transient, e.g. v1.24.0's OpenAPI still rebuilding after the
  settle, or noise) -- ``scenarios/repeatability.toml``;
* watched: kube-controller-manager's per-CRD delta on installed CRDs: the total heap per CRD of a
  controller_manager=true cell minus its false cell, per version (what `crdscale compare FALSE TRUE`
  prints; ``scenarios/controller-manager.toml``), else docs/results/seeds.toml's controller-manager row
  (:data:`WATCH_KIB`: its cells were not kept on this machine, so the measured values are recorded here);
* openapi-v2: the fetched spec's cost per CRD (`crdscale analyze`'s "After a GET of /openapi/v2",
  total) of each cell, linear in served versions and properties per CRD, solved from the cells' two
  schema sizes with their standard errors (:func:`~crdscale.footprint.states.fit_openapi_v2_term`;
  ``scenarios/openapi-v2.toml``).

The per-object term, from the cells of ``scenarios/objects-shapes.toml``: each cell gives heap per custom
resource (``crdscale analyze``'s fit over its object steps) and settled kube-apiserver RSS per custom
resource; its objects' features come from rebuilding a few of them with the run's own generator settings.
The form is chosen by leave-one-cell-out (:func:`~crdscale.footprint.objects.choose_form`, the rule fixed
before the cells ran); validation runs (other object runs, never fitted on) are predicted and compared.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crdscale.analysis import registry
from crdscale.analysis.compare import compare_runs
from crdscale.analysis.run import analyze_run
from crdscale.analysis.targets import TOTAL
from crdscale.crds.objects import CUSTOM_RESOURCES, custom_resource
from crdscale.errors import UsageError
from crdscale.footprint.calibrate import run_dirs_of
from crdscale.footprint.features import features_from_summary
from crdscale.footprint.model import LinearModel
from crdscale.footprint.objects import (
    FORMS,
    ObjectTerm,
    choose_form,
    fit_object_term,
    leave_one_cell_out,
    mean_features,
)
from crdscale.footprint.states import StateTerms, fit_openapi_v2_term
from crdscale.rundir import read_run
from crdscale.scenario.config import build_scenario
from crdscale.scenario.runner import load_crd_set

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
SAMPLE_OBJECTS = 5  # objects rebuilt per cell for its features (salts 0..4: they differ by their strings only)
RULE = (
    "lowest mean absolute leave-one-cell-out relative error; within 1 percentage point, fewer columns "
    "(written down before the cells ran)"
)


def _version(run) -> str:
    version = (run.manifest.get("versions") or {}).get("kube-apiserver")
    if not version:
        raise UsageError(f"{run.path}: its manifest records no kube-apiserver version")
    return version.lstrip("v")


# -- state terms


def installed_shares(paths: Iterable[str | Path]) -> dict[str, tuple[dict[str, float], list[str]]]:
    """version -> (cause -> installed share, the runs)."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0]))
    runs: dict[str, list[str]] = defaultdict(list)
    for path in run_dirs_of(paths):
        run = read_run(path)
        split = analyze_run(run).install_serve
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


def openapi_v2_terms(paths: Iterable[str | Path]) -> dict[str, tuple[LinearModel, list[str]]]:
    """version -> (LinearModel of the fetched spec per CRD, lines naming each run and its estimate)."""
    observations: dict[str, list] = defaultdict(list)
    lines: dict[str, list[str]] = defaultdict(list)
    dofs: dict[str, list[int]] = defaultdict(list)
    for path in run_dirs_of(paths):
        run = read_run(path)
        table = registry.table(analyze_run(run).results, "openapi_v2")
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


def controller_manager_deltas(paths: Iterable[str | Path]) -> dict[str, tuple[tuple[float, float, float], str]]:
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


def parse_watch(items: Iterable[str]) -> dict[str, tuple[tuple[float, ...], str]]:
    """``VERSION=VALUE,LOW,HIGH`` (KiB per CRD) -> version -> (the three, where they came from)."""
    out = {}
    for item in items:
        version, _, values = item.partition("=")
        parts = [float(v) for v in values.split(",")]
        if len(parts) != 3:
            raise UsageError(f"--watch {item}: give VERSION=VALUE,LOW,HIGH (KiB)")
        out[version.lstrip("v")] = (tuple(parts), f"--watch {item} (KiB)")
    return out


def fit_state_terms(
    installed: Sequence[str | Path],
    openapi_v2: Sequence[str | Path],
    *,
    controller_manager: Sequence[str | Path] = (),
    watch: Iterable[str] = (),
    method: str = "crdscale footprint fit states",
) -> tuple[dict[str, StateTerms], list[str]]:
    """The :class:`StateTerms` of every version both ``installed`` (repeatability runs) and ``openapi_v2``
    experiments ran, with ``provenance.uses`` naming the runs behind each term; and the versions left out
    (only one of the two ran them). The watched term: ``controller_manager`` cells, else ``watch``
    (``VERSION=VALUE,LOW,HIGH`` KiB), else :data:`WATCH_KIB`. UsageError for a version without one."""
    kib = {v: (k, WATCH_SOURCE) for v, k in WATCH_KIB.items()}
    kib.update(parse_watch(watch))
    kib.update(controller_manager_deltas(controller_manager))
    shares = installed_shares(installed)
    v2 = openapi_v2_terms(openapi_v2)
    out = {}
    for version in sorted(set(shares) & set(v2)):
        if version not in kib:
            raise UsageError(
                f"no kube-controller-manager delta for v{version}: pass --controller-manager or --watch {version}=V,LOW,HIGH"
            )
        share, share_runs = shares[version]
        where = os.path.commonpath([str(Path(p).resolve()) for p in openapi_v2])
        model, v2_lines = v2[version]
        watched, watch_source = kib[version]
        out[version] = StateTerms(
            version,
            share,
            tuple(v * 1024 for v in watched),
            V2_FEATURES,
            model,
            {
                "method": method,
                "date": dt.date.today().isoformat(),
                "uses": {
                    "state_installed": [
                        f"{', '.join(map(str, installed))}: installed/served increments of runs {', '.join(share_runs)} "
                        f"(kube-controller-manager off)"
                    ],
                    "state_watched": [watch_source],
                    "state_openapi_v2": [f"cells of scenarios/openapi-v2.toml under {where}:", *v2_lines],
                },
            },
        )
    return out, sorted(set(shares) ^ set(v2))


# -- the per-object term


def object_cell(path: str | Path) -> dict[str, Any]:
    """One object run's heap and RSS per custom resource and its objects' mean features (``run, path,
    kube_version, shape, sent_bytes, crds, objects, features, heap, heap_low, heap_high, rss``)."""
    path = Path(path)
    run = read_run(path)
    manifest = run.manifest
    # A matrix cell's manifest adds which cell it is ("experiment"): not a scenario key.
    recorded = {k: v for k, v in manifest["scenario"].items() if k != "experiment"}
    scenario = build_scenario(recorded, where=str(path))
    if not scenario.grows_objects:
        raise UsageError(f'{path}: not a run that grows objects (steps.grow = "objects")')
    crds, _ = load_crd_set(scenario)
    shape, size = scenario.objects.shape, int(scenario.objects.bytes)
    crd = crds[0]  # with the payload field the flat, nested and list shapes need (load_crd_set adds it)
    namespace = "ns" if crd["spec"].get("scope", "Namespaced") == "Namespaced" else None
    labels = {"app.kubernetes.io/managed-by": "crdscale", "crdscale.io/run": manifest.get("run_id", "run")}
    samples = [
        custom_resource(crd, f"obj-{i:06d}", namespace=namespace, labels=labels, size=size, shape=shape, salt=i)
        for i in range(SAMPLE_OBJECTS)
    ]
    per_object = registry.table(analyze_run(run).results, "per_object")
    mine = per_object[per_object["kind"] == CUSTOM_RESOURCES]

    def one(metric: str, cause: str) -> dict | None:
        rows = mine[(mine["metric"] == metric) & (mine["cause"] == cause)]
        return rows.iloc[0].to_dict() if len(rows) else None

    heap, rss = one("bytes", "total"), one("series", "kube-apiserver RSS")
    if heap is None:
        raise UsageError(f"{path}: no heap per custom resource (did its object steps complete?)")
    return {
        "run": path.name,
        "path": str(path),
        "kube_version": (manifest.get("versions") or {}).get("kube-apiserver", "").lstrip("v"),
        "shape": shape,
        "sent_bytes": size,
        "crds": len(crds),
        "objects": int(heap["objects"]),
        "features": mean_features(samples),
        "heap": float(heap["per_object"]),
        "heap_low": float(heap["per_object_low"]),
        "heap_high": float(heap["per_object_high"]),
        "rss": None if rss is None else float(rss["per_object"]),
    }


def _predicted(term: ObjectTerm, c: Mapping[str, Any]) -> dict[str, Any]:
    value, low, high = term.per_object(c["features"])
    return {
        **{k: c[k] for k in ("run", "shape", "sent_bytes", "heap", "heap_low", "heap_high")},
        **c["features"],
        "predicted": value,
        "low": low,
        "high": high,
        "error": (value - c["heap"]) / c["heap"],
        "inside": low <= c["heap"] <= high,
    }


def fit_object_cells(
    runs: Sequence[str | Path], validate: Sequence[str | Path] = (), *, method: str = "crdscale footprint fit objects"
) -> tuple[ObjectTerm, dict[str, Any]]:
    """The per-object term fitted on the cells ``runs`` (run or experiment directories, one kube-apiserver
    version), and the result ``crdscale footprint fit objects -o json`` prints: ``kube_version, form,
    form_errors, term, cells`` (each predicted, with its leave-one-cell-out error per form) and ``validation``
    (the ``validate`` runs predicted, never fitted on). UsageError or ValueError when they cannot give one."""
    cells = [object_cell(p) for p in run_dirs_of(runs)]
    versions = {c["kube_version"] for c in cells}
    if len(versions) != 1:
        raise UsageError(f"cells of one kube-apiserver version, got {', '.join(sorted(versions))}")
    version = versions.pop()
    features, heap = [c["features"] for c in cells], [c["heap"] for c in cells]
    form, errors = choose_form(features, heap)
    loo = {f: leave_one_cell_out(features, heap, f) for f in FORMS}
    rss = [c["rss"] if c["rss"] is not None else math.nan for c in cells]
    experiments = sorted({Path(c["path"]).parent.name for c in cells})
    term = fit_object_term(
        version,
        features,
        heap,
        form,
        rss=rss,
        provenance={
            "experiment": f"scenarios/objects-shapes.toml ({', '.join(experiments)})",
            "method": method,
            "date": dt.date.today().isoformat(),
            "form_rule": RULE,
            "form_errors": errors,
            "uses": {"object_fitting": [c["run"] for c in cells]},
        },
    )
    validation = [object_cell(p) for p in run_dirs_of(validate)] if validate else []
    if validation:
        term.provenance["uses"]["object_validation"] = [v["run"] for v in validation]
    result = {
        "kube_version": version,
        "form": form,
        "form_errors": errors,
        "term": term.to_dict(),
        "cells": [
            {**_predicted(term, c), "loo_error": {f: float(loo[f][i]) for f in FORMS}} for i, c in enumerate(cells)
        ],
        "validation": [_predicted(term, v) for v in validation],
    }
    return term, result


def object_fit_lines(result: Mapping[str, Any], term: ObjectTerm) -> list[str]:
    """The text of ``crdscale footprint fit objects``: the form, coefficients, spread, and each cell."""
    out = [
        f"kube-apiserver v{result['kube_version']}: {len(result['cells'])} cells; form {result['form']!r} ("
        + ", ".join(f"{f} {e:.1%}" for f, e in result["form_errors"].items())
        + " mean |LOO error|)",
        "  coefficients: " + ", ".join(f"{c} {v:,.1f}" for c, v in zip(term.columns, term.coef, strict=True)),
        f"  log sd {term.log_sd:.3f} on {term.dof} d.f.; settled RSS per heap byte "
        f"{term.rss_per_heap[0]:.2f} [{term.rss_per_heap[1]:.2f}, {term.rss_per_heap[2]:.2f}]",
    ]
    for title, rows in (("cells", result["cells"]), ("validation (never fitted)", result["validation"])):
        if rows:
            out.append(f"  {title}:")
        for r in rows:
            out.append(
                f"    {r['shape']:<7} {r['sent_bytes']:>8,} B {r['nodes']:>7,.0f} values: measured "
                f"{r['heap'] / 1024:8.1f} KiB [{r['heap_low'] / 1024:.1f}, {r['heap_high'] / 1024:.1f}], predicted "
                f"{r['predicted'] / 1024:8.1f} KiB [{r['low'] / 1024:.1f}, {r['high'] / 1024:.1f}] "
                f"{r['error']:+.1%} {'inside' if r['inside'] else 'OUTSIDE'}  {r['run']}"
            )
    return out
