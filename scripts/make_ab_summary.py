"""Keep the small summary of a recorded A/B directory (`crdscale ab`) under data/ab/<name>/, for the rows of
docs/results/changes-2026.toml (the docs generator renders a row's numbers from it).

Kept: ab.json (the scenario, the change, every run with its side and seconds), verdict.md and verdict.json
as the A/B wrote them, and summary.json, what the verdict does not hold, each side the mean of its runs:

- ``per_object``: heap bytes per object of every kind (custom resources, and a control kind such as
  ConfigMaps) by cause, changed minus base, with the 95 % interval of the difference (repeats pooled);
- ``per_crd``: heap bytes per CRD by cause, likewise (empty when the runs have no per-CRD fit);
- ``lists``: what one LIST of each kind's objects cost on each side (``objects.list_repeats``): latency
  p50 and p95, kube-apiserver and etcd CPU seconds per LIST, items, and where it was served.

The run directories (profiles, series: megabytes a run) stay where they were recorded; `crdscale report`
and `crdscale lab` need them, the results page does not. A few tens of KiB an A/B.

    python scripts/make_ab_summary.py RECORDED_AB_DIR data/ab/<name>
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's crdscale

from crdscale.fsutil import write_json_atomic  # noqa: E402
from crdscale.scenario.ab import AB, AB_MANIFEST  # noqa: E402

SUMMARY = "summary.json"
LIST_FIGURES = ("latency_p50_s", "latency_p95_s", "apiserver_cpu_s", "etcd_cpu_s", "items", "bytes")


def _number(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _differences(frame, keys: tuple[str, ...], base: str, changed: str) -> list[dict]:
    if frame is None or not len(frame):
        return []
    rows = []
    for r in frame.to_dict("records"):
        if r.get("metric", "bytes") != "bytes":
            continue
        row = {k: r[k] for k in keys}
        row.update(
            base=_number(r[base]),
            changed=_number(r[changed]),
            difference=_number(r["difference"]),
            low=_number(r["difference_low"]),
            high=_number(r["difference_high"]),
        )
        rows.append(row)
    return rows


def _lists(frame) -> list[dict]:
    """Each side's LIST cost per kind and LIST kind: the mean over its runs (``run`` is ``side,repeat=N``)."""
    if frame is None or not len(frame):
        return []
    data = frame.copy()
    data["side"] = data["run"].str.split(",").str[0]
    rows = []
    for (side, kind, request), group in data.groupby(["side", "kind", "list"], sort=True):
        row = {"side": side, "kind": kind, "list": request, "runs": int(len(group))}
        row.update({f: _number(group[f].astype(float).mean()) for f in LIST_FIGURES})
        row["served_from"] = "/".join(dict.fromkeys(str(p) for p in group["served_from"]))
        rows.append(row)
    return rows


def summarize(ab: AB) -> dict:
    """summary.json's content for the A/B ``ab`` (its complete pairs, repeats pooled)."""
    comparison = ab.comparison()
    # A run that grows objects installs its CRDs in objects.crd_steps steps: with one, no per-CRD fit means anything.
    user = ab.scenario_user
    one_crd_step = (user.get("steps") or {}).get("grow") == "objects" and (user.get("objects") or {}).get(
        "crd_steps", 1
    ) <= 1
    return {
        "name": ab.manifest.get("name"),
        "change": ab.change.name,
        "pairs": ab.complete_pairs(),
        "run_seconds": [r.seconds for r in ab.completed()],
        "per_object": _differences(
            comparison.per_object_joint, ("kind", "cause"), "per_object_reference", "per_object"
        ),
        "per_crd": [] if one_crd_step else _differences(comparison.joint, ("cause",), "per_crd_reference", "per_crd"),
        "lists": _lists(comparison.object_lists),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ab_dir")
    ap.add_argument("out")
    args = ap.parse_args()
    ab, out = AB.open(args.ab_dir), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in (AB_MANIFEST, "verdict.md", "verdict.json"):
        if (ab.path / name).is_file():  # a shrunk A/B (data/ab-known-cost) has no verdict: `crdscale report` redoes it
            shutil.copy2(ab.path / name, out / name)
    write_json_atomic(out / SUMMARY, summarize(ab))
    print(out)


if __name__ == "__main__":
    main()
