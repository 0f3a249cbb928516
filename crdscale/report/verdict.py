"""The verdict of an A/B of a change: ``verdict.md`` (at most 60 lines) to paste into a pull request, and its JSON.

It opens with one sentence (what the change does per CRD and per custom resource, the cause that moved most,
95 % intervals, and whether the difference can be told from zero), then a table by cause, the process figures
(peak and settled RSS, CPU per CRD), the frames that grew or shrank most (as ``go tool pprof -diff_base`` shows
them, per CRD) and the provenance. Computed from a :class:`~crdscale.analysis.compare.Comparison` whose
reference is the base; pure apart from reading nothing at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from crdscale.analysis.perobject import kind_label, main_kind
from crdscale.analysis.pooled import value_differences
from crdscale.rundir.manifest import Manifest
from crdscale.units import fmt_bytes, fmt_value

MAX_LINES = 60
CAUSE_ROWS = 10
FRAME_ROWS = 4


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _signed_bytes(value: float | None) -> str:
    if value is None:
        return "n/a"
    return ("+" if value > 0 else "") + fmt_bytes(value)


def _interval(low, high) -> str:
    low, high = _finite(low), _finite(high)
    if low is None or high is None:
        return "no interval"
    return f"[{_signed_bytes(low)}, {_signed_bytes(high)}]"


def _told(low, high) -> bool:
    low, high = _finite(low), _finite(high)
    return low is not None and high is not None and (low > 0 or high < 0)


@dataclass(frozen=True)
class Verdict:
    """What ``verdict.md`` says, as data (``to_json``) and text (``markdown``)."""

    change: str
    base: str
    changed: str
    per_crd: dict
    per_object: dict | None
    causes: list[dict]
    process: list[dict]
    frames_grew: list[dict]
    frames_shrank: list[dict]
    provenance: dict = field(default_factory=dict)
    pairs: int | None = None
    notes: list[str] = field(default_factory=list)
    object_causes: list[dict] = field(default_factory=list)
    design: str | None = None  # the line on how the runs were made, when not "N interleaved ... pair(s)"

    @property
    def sentence(self) -> str:
        t = self.per_crd
        if self.per_object:  # runs that grow objects: their per-CRD fit means nothing
            return self._object_sentence()
        told = _told(t["low"], t["high"])
        parts = [
            f"**{self.change} changes kube-apiserver's heap by {_signed_bytes(t['difference'])} per served CRD "
            f"(95% CI {_interval(t['low'], t['high'])})"
        ]
        moved = next((c for c in self.causes if c["cause"] != "total"), None)
        if moved:
            parts.append(
                f", mostly {moved['cause']} ({_signed_bytes(moved['difference'])} "
                f"{_interval(moved['low'], moved['high'])})"
            )
        if self.per_object:
            o = self.per_object
            parts.append(
                f", and by {_signed_bytes(o['difference'])} per {kind_label(o.get('kind'))} "
                f"({_interval(o['low'], o['high'])})"
            )
        parts.append(
            "; the difference can be told from zero.**" if told else "; the difference cannot be told from zero.**"
        )
        return "".join(parts)

    def _object_sentence(self) -> str:
        """For runs that grow objects (no per-CRD fit): per custom resource first, by cause."""
        o = self.per_object
        moved = max(self.object_causes, key=lambda c: abs(c["difference"] or 0), default=None)
        cause = (
            f", mostly {moved['cause']} ({_signed_bytes(moved['difference'])} {_interval(moved['low'], moved['high'])})"
            if moved
            else ""
        )
        told = "can" if _told(o["low"], o["high"]) else "cannot"
        return (
            f"**{self.change} changes kube-apiserver's heap by {_signed_bytes(o['difference'])} per {kind_label(o.get('kind'))} "
            f"(95% CI {_interval(o['low'], o['high'])}){cause}; the difference {told} be told from zero.**"
        )

    def markdown(self) -> str:
        lines = [f"### crdscale verdict: {self.change}", "", self.sentence, ""]
        if self.design:
            lines += [self.design, ""]
        elif self.pairs:
            lines += [f"{self.pairs} interleaved base/changed pair(s), repeats pooled.", ""]
        if self.object_causes:
            lines += [
                "| cause | base per object | changed per object | difference | 95% CI | told from 0 |",
                "|---|---|---|---|---|---|",
            ]
            for c in self.object_causes:
                lines.append(
                    f"| {c['cause']} | {fmt_bytes(c['base'])} | {fmt_bytes(c['changed'])} | "
                    f"{_signed_bytes(c['difference'])} | {_interval(c['low'], c['high'])} | "
                    f"{'yes' if _told(c['low'], c['high']) else 'no'} |"
                )
            lines.append("")
        per_crd_known = _finite(self.per_crd.get("low")) is not None and not self.per_object
        lines += (
            [
                "| cause | base per CRD | changed per CRD | difference | 95% CI | told from 0 |",
                "|---|---|---|---|---|---|",
            ]
            if per_crd_known
            else []
        )
        for c in self.causes if per_crd_known else []:
            lines.append(
                f"| {c['cause']} | {fmt_bytes(c['base'])} | {fmt_bytes(c['changed'])} | "
                f"{_signed_bytes(c['difference'])} | {_interval(c['low'], c['high'])} | "
                f"{'yes' if _told(c['low'], c['high']) else 'no'} |"
            )
        if self.process:
            lines += ["", "| process | base | changed | difference | 95% CI |", "|---|---|---|---|---|"]
            for p in self.process:
                unit = p["unit"]
                interval = (
                    f"[{fmt_value(p['low'], unit)}, {fmt_value(p['high'], unit)}]"
                    if _finite(p.get("low")) is not None
                    else "no interval (means of the runs)"
                )
                lines.append(
                    f"| {p['figure']} | {fmt_value(p['base'], unit)} | {fmt_value(p['changed'], unit)} | "
                    f"{fmt_value(p['difference'], unit)} | {interval} |"
                )
        if self.frames_grew or self.frames_shrank:
            lines += [
                "",
                "Frames that moved most (flat, per CRD; `go tool pprof -diff_base` of the last profiles):",
                "",
            ]
            lines += [f"- grew {_signed_bytes(f['per_crd'])}: `{f['name']}`" for f in self.frames_grew]
            lines += [f"- shrank {_signed_bytes(f['per_crd'])}: `{f['name']}`" for f in self.frames_shrank]
        if self.provenance:
            lines += ["", "<details><summary>Provenance</summary>", ""]
            lines += [f"- {key}: {value}" for key, value in self.provenance.items()]
            lines += ["", "</details>"]
        for note in self.notes:
            lines += ["", f"_{note}_"]
        lines.append("")
        return "\n".join(lines[:MAX_LINES]) + ("\n" if len(lines) > MAX_LINES else "")

    def to_json(self) -> dict:
        return {
            "change": self.change,
            "base": self.base,
            "changed": self.changed,
            "sentence": self.sentence.strip("*"),
            "per_crd": self.per_crd,
            "per_object": self.per_object,
            "causes": self.causes,
            "process": self.process,
            "frames_grew": self.frames_grew,
            "frames_shrank": self.frames_shrank,
            "provenance": self.provenance,
            "pairs": self.pairs,
            "notes": self.notes,
            "object_causes": self.object_causes,
            **({"design": self.design} if self.design else {}),
        }


def _difference_row(r: dict, per: str) -> dict:
    """One cause's row of a joint table (``per``: ``per_crd`` or ``per_object``) as the verdict holds it."""
    return {
        "cause": r["cause"],
        "base": _finite(r[f"{per}_reference"]) or 0.0,
        "changed": _finite(r[per]) or 0.0,
        "difference": _finite(r["difference"]) or 0.0,
        "low": _finite(r["difference_low"]),
        "high": _finite(r["difference_high"]),
    }


def _cause_rows(joint: pd.DataFrame, run: str) -> list[dict]:
    if joint is None or joint.empty:
        return []
    rows = joint[(joint["run"] == run) & (joint["metric"] == "bytes")]
    records = [_difference_row(r, "per_crd") for r in rows.to_dict("records")]
    total = [r for r in records if r["cause"] == "total"]
    causes = [r for r in records if r["cause"] != "total" and (r["base"] or r["changed"])]
    causes.sort(key=lambda r: -abs(r["difference"]))
    return causes[:CAUSE_ROWS] + total


def _process_rows(comparison, run: str) -> list[dict]:
    rows = []
    for metric, column, figure in (("rss_bytes", "peak", "peak RSS"), ("rss_bytes", "last", "settled RSS")):
        base = comparison.end_value(comparison.reference, metric, column)
        changed = comparison.end_value(run, metric, column)
        if base is None or changed is None:
            continue
        rows.append({"figure": figure, "unit": "bytes", "base": base, "changed": changed, "difference": changed - base})
        if getattr(comparison, "spread", "own") == "pooled":  # one number a run: an interval from the pooled spread
            rows[-1].update(_pooled_end(comparison, run, metric, column))
    joint = comparison.series_joint
    if joint is not None and not joint.empty:
        for metric, figure, unit in (("rss_bytes", "RSS per CRD", "bytes"), ("cpu_seconds", "CPU per CRD", "s")):
            picked = joint[(joint["run"] == run) & (joint["metric"] == metric)]
            if picked.empty:
                continue
            r = picked.iloc[0]
            rows.append(
                {
                    "figure": figure,
                    "unit": unit,
                    "base": _finite(r["per_crd_reference"]),
                    "changed": _finite(r["per_crd"]),
                    "difference": _finite(r["difference"]),
                    "low": _finite(r["difference_low"]),
                    "high": _finite(r["difference_high"]),
                }
            )
    return rows


def _pooled_end(comparison, run: str, metric: str, column: str) -> dict:
    """``low``/``high`` of a run's end figure (peak or settled RSS), ``run`` against the reference, from the
    spread pooled over every configuration's runs; nothing when nothing was repeated."""
    end = comparison.end
    picked = end[end["metric"] == metric] if end is not None and len(end) else None
    if picked is None or not len(picked):
        return {}
    found = value_differences(picked, column, configuration=comparison.replicates, reference=comparison.reference)
    found = found[found["run"] == run]
    if found.empty:
        return {}
    r = found.iloc[0]
    return {"low": _finite(r["low"]), "high": _finite(r["high"])}


def _frames(profile_diff: pd.DataFrame, run: str) -> tuple[list[dict], list[dict]]:
    if profile_diff is None or profile_diff.empty or "flat_per_crd" not in profile_diff.columns:
        return [], []
    rows = profile_diff[profile_diff["run"] == run]
    ordered = rows.sort_values("flat_per_crd")
    shrank = [
        {"name": r["name"], "per_crd": float(r["flat_per_crd"])}
        for r in ordered.head(FRAME_ROWS).to_dict("records")
        if r["flat_per_crd"] < 0
    ]
    grew = [
        {"name": r["name"], "per_crd": float(r["flat_per_crd"])}
        for r in ordered.iloc[::-1].head(FRAME_ROWS).to_dict("records")
        if r["flat_per_crd"] > 0
    ]
    return grew, shrank


def _or(value, default):
    """``value`` unless the manifest left it out (``None``)."""
    return default if value is None else value


def _provenance(comparison, run: str, changes: dict | None) -> dict:
    out: dict[str, str] = {}
    for role, name in (("base", comparison.reference), ("changed", run)):
        label = comparison.first_run(name)
        manifest = Manifest.of(comparison.manifests.get(label))
        versions = manifest.versions
        apiserver = manifest.binaries.get("kube-apiserver")
        sha = (apiserver.sha256 or "") if apiserver is not None else ""
        out[role] = (
            f"{label}: run {_or(manifest.run_id, '?')}, kube-apiserver {_or(versions.kube_apiserver, '?')}"
            + (f" (binary sha256 {sha[:12]})" if sha else "")
            + f", Go {versions.kube_apiserver_go or _or(versions.go_toolchain, '?')}"
        )
    for key, value in (changes or {}).items():
        out[key] = value
    return out


def build_verdict(
    comparison,
    *,
    change: str = "the change",
    changes: dict | None = None,
    pairs: int | None = None,
    run: str | None = None,
    notes: list[str] | None = None,
    design: str | None = None,
) -> Verdict:
    """The verdict of ``comparison``'s first compared run (or configuration; ``run``: that one) against its
    reference (the base). ``changes``: provenance lines of what was changed (diffs with sha256 and files, tags,
    gates, flags); ``notes``: the notes to end with (the comparison's first two warnings when None);
    ``design``: the line on how the runs were made (else "N interleaved base/changed pair(s)")."""
    if not comparison.compared:
        raise ValueError("a verdict needs a changed run besides the base")
    run = comparison.compared[0] if run is None else run
    if run not in comparison.compared:
        raise ValueError(f"{run!r} is not compared in this comparison ({', '.join(comparison.compared)})")
    causes = _cause_rows(comparison.joint, run)
    total = next((c for c in causes if c["cause"] == "total"), None)
    per_crd = (
        {k: total[k] for k in ("base", "changed", "difference", "low", "high")}
        if total
        else {"base": None, "changed": None, "difference": None, "low": None, "high": None}
    )
    per_object = None
    object_causes: list[dict] = []
    joint = comparison.per_object_joint
    if joint is not None and not joint.empty:
        # One kind: the custom resources when the runs made any, not whichever kind comes first (a control
        # kind of ConfigMaps beside them once had its figure called "per custom resource").
        joint = joint[joint["kind"] == main_kind(joint["kind"])]
        rows = joint[(joint["run"] == run) & (joint["cause"] != "total")]
        object_causes = [
            _difference_row(r, "per_object")
            for r in rows.to_dict("records")
            if _finite(r["per_object_reference"]) or _finite(r["per_object"])
        ]
        object_causes.sort(key=lambda c: -abs(c["difference"]))
        object_causes = object_causes[:CAUSE_ROWS]
        picked = joint[(joint["run"] == run) & (joint["cause"] == "total")]
        if not picked.empty:
            r = picked.iloc[0]
            per_object = {
                "kind": r["kind"],
                "base": _finite(r["per_object_reference"]),
                "changed": _finite(r["per_object"]),
                "difference": _finite(r["difference"]),
                "low": _finite(r["difference_low"]),
                "high": _finite(r["difference_high"]),
            }
    grew, shrank = _frames(comparison.profile_diff, run)
    return Verdict(
        change=change,
        base=comparison.reference,
        changed=run,
        per_crd=per_crd,
        per_object=per_object,
        causes=causes,
        process=_process_rows(comparison, run),
        frames_grew=grew,
        frames_shrank=shrank,
        provenance=_provenance(comparison, run, changes),
        pairs=pairs,
        notes=list(comparison.warnings[:2]) if notes is None else notes,
        object_causes=object_causes,
        design=design,
    )


# --------------------------------------------------------------------------
# An A/B with arms: one verdict per arm, and one table of them all
# --------------------------------------------------------------------------

TOLD_NOT = "cannot be told from zero"


def _cell(d: dict | None, fmt=_signed_bytes) -> str:
    """``+1.2 KiB [-0.3 KiB, +2.7 KiB]``, and ", cannot be told from zero" when the interval holds 0."""
    if not d or d.get("difference") is None:
        return "n/a"
    low, high = _finite(d.get("low")), _finite(d.get("high"))
    interval = f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else " (no interval)"
    told = "" if _told(low, high) else f", {TOLD_NOT}"
    return f"{fmt(d['difference'])}{interval}{told}"


def _signed_ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{'+' if value > 0 else ''}{1000 * value:.2f} ms"


def arm_lists(comparison, run: str) -> list[dict]:
    """What a LIST of the custom resources cost, ``run`` against the reference, per LIST kind: kube-apiserver
    CPU seconds and p50 latency per LIST, each side the mean of its runs, the difference's interval from the
    spread pooled over every configuration (``spread="pooled"``) or none."""
    lists = comparison.object_lists
    if lists is None or lists.empty or "kind" not in lists.columns:
        return []
    lists = lists[lists["kind"] == main_kind(lists["kind"])]
    out: dict = {}
    for figure in ("apiserver_cpu_s", "latency_p50_s"):
        found = value_differences(
            lists, figure, by=["list"], configuration=comparison.replicates, reference=comparison.reference
        )
        for r in found[found["run"] == run].to_dict("records"):
            out.setdefault(r["list"], {"list": r["list"], "kind": kind_label(lists["kind"].iloc[0])})[figure] = {
                "base": _finite(r["base"]),
                "changed": _finite(r["value"]),
                "difference": _finite(r["difference"]),
                "low": _finite(r["low"]),
                "high": _finite(r["high"]),
            }
    return list(out.values())


@dataclass(frozen=True)
class ArmsVerdict:
    """``verdict.md`` of an A/B with arms: one row per arm (heap per CRD and per custom resource, LIST cost,
    peak RSS, each difference to the base with its interval), the model the intervals come from, and each
    arm's own :class:`Verdict` (``verdict-<arm>.md``)."""

    name: str
    rounds: int
    runs: int
    arms: list[dict]  # name, change, runs, per_crd, per_object, lists, peak_rss, verdict (a Verdict)
    spread: dict  # the headline's pooled sd, dof and the configurations that keep their own
    per_crd_shown: bool = True
    provenance: dict = field(default_factory=dict)
    widest: object | None = None  # crdscale.scenario.ab.Precision of the widest arm, for --until

    def model_line(self) -> str:
        dof = self.spread.get("dof")
        kept = self.spread.get("own") or []
        configurations = len(self.arms) + 1
        if not dof:
            return (
                "Each configuration ran once: each difference's interval comes from the two runs' own fits "
                "(Welch), nothing is pooled."
            )
        return (
            f"Each difference is the arm minus the base with its 95% interval from the spread pooled over the "
            f"{configurations} configurations' runs (each configuration its own mean, one common spread: "
            f"{dof} degrees of freedom for the {self.spread.get('what', 'total')}, pooled sd "
            f"{fmt_bytes(self.spread.get('sd') or 0)})"
            + (
                f"; {', '.join(kept)} spread out of line with the others (F test, 1%) and keep their own spread."
                if kept
                else "; no configuration's spread is out of line with the others' (F test, 1%)."
            )
        )

    def markdown(self) -> str:
        configurations = len(self.arms) + 1
        lines = [
            f"### crdscale verdict: {len(self.arms)} arm(s) against one base ({self.name})",
            "",
            f"{self.rounds} round(s) of the base and {len(self.arms)} arm(s) ({self.runs} runs of "
            f"{configurations} configurations), each round in a rotated order. {self.model_line()} "
            f'"{TOLD_NOT}" where the interval holds 0.',
            "",
        ]
        lists = list(dict.fromkeys(entry["list"] for arm in self.arms for entry in arm["lists"]))
        head = ["arm", "change", *(["heap per CRD"] if self.per_crd_shown else [])]
        kind = next((a["per_object"].get("kind") for a in self.arms if a["per_object"]), None)
        head += [f"heap per {kind_label(kind)}"] if kind else []
        head += [f"kube-apiserver CPU per {request} LIST" for request in lists] + ["peak RSS"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for arm in self.arms:
            cells = [f"[{arm['name']}](verdict-{arm['name']}.md)", f"`{arm['change']}`"]
            cells += [_cell(arm["per_crd"])] if self.per_crd_shown else []
            cells += [_cell(arm["per_object"])] if kind else []
            by_list = {e["list"]: e for e in arm["lists"]}
            cells += [_cell((by_list.get(request) or {}).get("apiserver_cpu_s"), _signed_ms) for request in lists]
            cells.append(_cell(arm["peak_rss"]))
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Each arm's own verdict (by cause, RSS, CPU, provenance): `verdict-<arm>.md`."]
        if self.provenance:
            lines += ["", "<details><summary>Provenance</summary>", ""]
            lines += [f"- {key}: {value}" for key, value in self.provenance.items()]
            lines += ["", "</details>"]
        lines.append("")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "kind": "arms",
            "name": self.name,
            "rounds": self.rounds,
            "runs": self.runs,
            "model": self.model_line(),
            "spread": self.spread,
            "provenance": self.provenance,
            "arms": [
                {**{k: v for k, v in arm.items() if k != "verdict"}, "verdict": arm["verdict"].to_json()}
                for arm in self.arms
            ],
        }
