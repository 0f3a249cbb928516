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

An A/B with arms (`crdscale ab --each`) is kept alike: ab.json, verdict.md, verdict.json and every
verdict-<arm>.md in data/ab/<name>/, and each arm's summary.json in data/ab/<name>/<arm>/ (the arm as the
changed side, its differences' intervals from the spread pooled over every configuration; ``rounds`` and
``configurations`` say so). With --rows FILE, a ``[[row]]`` per arm is appended to that results file (one row
per gate, with the command that measured them all), for each arm no row's ``ab`` points to yet; the rows
already there are left as they are, byte for byte (the script names those not measured yet that the new rows
answer, to delete by hand):

    python scripts/make_ab_summary.py RECORDED_ARMS_DIR data/ab/gates-arms --rows docs/results/changes-2026.toml
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import sys
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's crdscale

from crdscale.cli.ab import parse_arm  # noqa: E402
from crdscale.errors import UsageError  # noqa: E402
from crdscale.fsutil import write_json_atomic  # noqa: E402
from crdscale.report.ab import arms_verdict  # noqa: E402
from crdscale.scenario.ab import AB, AB_MANIFEST, BASE  # noqa: E402

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


def _lists(frame, sides: dict[str, str] | None = None) -> list[dict]:
    """Each side's LIST cost per kind and LIST kind: the mean over its runs (``run`` is ``side,repeat=N``);
    ``sides``: configuration -> the side it is written as (an arm as ``changed``), the others left out."""
    if frame is None or not len(frame):
        return []
    data = frame.copy()
    data["side"] = data["run"].str.split(",").str[0]
    if sides is not None:
        data = data[data["side"].isin(sides)]
        data["side"] = data["side"].map(sides)
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


def summarize_arm(ab: AB, comparison, arm: str) -> dict:
    """summary.json's content for one arm of an A/B with arms: the arm as the changed side."""
    user = ab.scenario_user
    one_crd_step = (user.get("steps") or {}).get("grow") == "objects" and (user.get("objects") or {}).get(
        "crd_steps", 1
    ) <= 1
    per_object = comparison.per_object_joint
    per_crd = comparison.joint
    return {
        "name": ab.manifest.get("name"),
        "change": ab.change_of(arm).name,
        "arm": arm,
        "pairs": ab.arm_runs(arm),
        "rounds": len({r.pair for r in ab.completed()}),
        "configurations": len(ab.sides),
        "spread": "pooled",
        "run_seconds": [r.seconds for r in ab.completed() if r.side in (BASE, arm)],
        "per_object": _differences(
            per_object[per_object["run"] == arm] if len(per_object) else per_object,
            ("kind", "cause"),
            "per_object_reference",
            "per_object",
        ),
        "per_crd": []
        if one_crd_step
        else _differences(
            per_crd[per_crd["run"] == arm] if len(per_crd) else per_crd, ("cause",), "per_crd_reference", "per_crd"
        ),
        "lists": _lists(comparison.object_lists, {BASE: "base", arm: "changed"}),
    }


def arm_flags(arm) -> list[str]:
    """The command-line words of an arm's change: ``--feature-gate X=false``, ``--apiserver-flag=--y=1``, ..."""
    words = []
    for key, value in arm.change.overrides.items():
        if key == "target.feature_gates":
            words += [f"--feature-gate {gate}={str(on).lower()}" for gate, on in value.items()]
        elif key == "target.apiserver_flags":
            words += [f"--apiserver-flag={v}" for v in value]
        elif key == "target.build_tags":
            words += [f"--build-tag {v}" for v in value]
        elif key == "target.patches":
            words += [f"--patch {shlex.quote(v)}" for v in value]
    return words


def arms_command(ab: AB) -> str:
    """The command that runs the A/B ``ab`` again: each arm that --each names as it is named as a flag after
    --each, the others as --arm 'NAME: FLAGS'."""
    each, named = [], []
    for arm in ab.arms:
        words = " ".join(arm_flags(arm))
        try:
            alone = parse_arm(words).name == arm.name  # --each would name it so
        except UsageError:
            alone = False
        (each if alone else named).append(words if alone else f"--arm {shlex.quote(f'{arm.name}: {words}')}")
    rounds = max((r.pair for r in ab.completed()), default=1)
    parts = [f"crdscale ab {ab.scenario_file or 'SCENARIO'}", *(["--each"] if each else []), *each, *named]
    return " \\\n    ".join([*parts, f"--min-pairs {rounds}"])


def _gate_words(verdict: dict, arm: str, version: str) -> str:
    """``ListFromCacheSnapshot (beta, on in v1.37.1) set to false``, from the arm's recorded provenance."""
    try:
        gates = json.loads(verdict["provenance"].get("feature_gates", "{}"))
    except (TypeError, json.JSONDecodeError):
        gates = {}
    if len(gates) != 1:
        return arm
    ((name, gate),) = gates.items()
    default = "on" if gate.get("default") else "off"
    return f"{name} ({gate.get('stage', '?')}, {default} in {version}) set to {str(gate.get('enabled')).lower()}"


def _shown(path: Path, root: Path) -> str:
    """``path`` relative to the checkout (as a row's ``ab`` names a summary), else as it is."""
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def arm_rows(ab: AB, verdict: dict, out: Path, root: Path) -> list[str]:
    """One ``[[row]]`` (TOML text) per arm: its quantity, the summary it is rendered from, the command."""
    version = f"v{(ab.scenario_user.get('target') or {}).get('kube_version', '?')}"
    command = arms_command(ab)
    rows = []
    for arm in verdict["arms"]:
        where = _shown(out / arm["name"], root)
        quantity = f"{_gate_words(arm['verdict'], arm['name'], version)}: heap per CRD, per custom resource, LIST cost"
        detail = (
            f"One arm of {len(ab.arms)} against one shared base (`crdscale ab --each`): {verdict['rounds']} rounds of "
            f"{len(ab.sides)} configurations, each round in a rotated order. {verdict['model']} Its own verdict: "
            f"`{_shown(out / ('verdict-' + arm['name'] + '.md'), root)}`."
        )
        rows.append(
            "\n[[row]]\n"
            f"quantity = {json.dumps(quantity)}\n"
            f"ab = {json.dumps(str(where))}\n"
            f"command = '''\n{command}\n'''\n"
            f'detail = """\n{detail}\n"""\n'
        )
    return rows


def append_rows(rows_file: Path, ab: AB, verdict: dict, out: Path, root: Path) -> list[str]:
    """Append to ``rows_file`` the rows of the arms no row's ``ab`` points to yet (the file's text otherwise
    untouched); returns the quantities of the rows not measured yet whose command makes one of the arms' changes."""
    data = tomllib.loads(rows_file.read_text())
    existing = {r.get("ab") for r in data.get("row", [])}
    new = [row for row in arm_rows(ab, verdict, out, root) if tomllib.loads(row)["row"][0]["ab"] not in existing]
    if new:
        with open(rows_file, "a") as f:
            f.write("".join(new))
    changes = [w for arm in ab.arms for w in arm_flags(arm)]
    return [
        r["quantity"]
        for r in data.get("row", [])
        if r.get("measured") is False and any(w in r.get("command", "") for w in changes)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ab_dir")
    ap.add_argument("out")
    ap.add_argument("--rows", metavar="FILE", help="an A/B with arms: append a results row per arm to FILE")
    args = ap.parse_args()
    ab, out = AB.open(args.ab_dir), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if ab.arms:
        main_arms(ab, out, args.rows)
        return
    for name in (AB_MANIFEST, "verdict.md", "verdict.json"):
        if (ab.path / name).is_file():  # a shrunk A/B (data/ab-known-cost) has no verdict: `crdscale report` redoes it
            shutil.copy2(ab.path / name, out / name)
    write_json_atomic(out / SUMMARY, summarize(ab))
    print(out)


def main_arms(ab: AB, out: Path, rows: str | None) -> None:
    comparison = ab.comparison()
    names = [AB_MANIFEST, "verdict.md", "verdict.json", *(f"verdict-{a.name}.md" for a in ab.arms)]
    for name in names:
        if (ab.path / name).is_file():
            shutil.copy2(ab.path / name, out / name)
    for arm in ab.arms:
        if arm.name in comparison.compared:
            (out / arm.name).mkdir(exist_ok=True)
            write_json_atomic(out / arm.name / SUMMARY, summarize_arm(ab, comparison, arm.name))
    print(out)
    if rows:
        verdict = json.loads(json.dumps(arms_verdict(ab, comparison).to_json(), default=str))
        root = Path(__file__).resolve().parent.parent
        for quantity in append_rows(Path(rows), ab, verdict, out, root):
            print(f"not measured yet, answered by a new row (delete it by hand): {quantity}")


if __name__ == "__main__":
    main()
