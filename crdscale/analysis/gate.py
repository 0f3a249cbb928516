"""Regression conditions on a comparison: ``--fail-on 'total.per_crd > +10%'`` for a CI gate.

A condition names a figure of :class:`~crdscale.analysis.compare.Comparison`, a comparison and a
threshold on the *difference* (compared run minus reference):

    total.per_crd > +10%          heap per served CRD (all causes), relative to the reference's
    zap-counters.per_crd > 50KiB  one cause of heap per served CRD, absolute
    total.per_object > 1KiB       heap per custom resource (runs that grew objects)
    rss.per_crd > +20%            a process series' slope per CRD (rss, heap_inuse, cpu, goroutine_count, open_fds)
    rss_peak > +200MiB            a series' peak (``_peak``) or last value (``_end``)
    kcm.per_crd > +10%            kube-controller-manager's heap per served CRD (``etcd.per_crd``: etcd's)
    etcd.rss.per_crd > +50KiB     a component's RSS per served CRD (``kcm.rss.per_crd``)

A condition is a **regression only when the interval's bound crosses the threshold**, not the point
estimate alone: ``>`` needs the interval's low end above the threshold, ``<`` its high end below.
So a noisy run that merely *might* have grown never fails a build, and a run that surely grew does.
Figures without an interval (a series' peak or end in a single run per side) are judged on their
point estimate, and the result says so.

Pure: parsing and evaluation take strings and tables; the CLI (``crdscale compare``) writes the
JUnit XML and the markdown summary this module renders.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from xml.etree import ElementTree

import pandas as pd

from crdscale.analysis.attribution import OBJECT_RULES, OTHER, RULES
from crdscale.errors import UsageError
from crdscale.rundir.layout import CONTROLLER_MANAGER, ETCD
from crdscale.units import fmt_value, parse_bytes

# Series of Comparison.series_joint / .end, by the short name a condition uses, with their unit.
SERIES = {
    "rss": ("rss_bytes", "bytes"),
    "heap_inuse": ("heap_inuse_bytes", "bytes"),
    "cpu": ("cpu_seconds", "seconds"),
    "goroutine_count": ("goroutines", "count"),
    "open_fds": ("open_fds", "count"),
}
# The other processes of the control plane (crdscale.analysis.components), by the name a condition uses:
# COMPONENT.per_crd is its heap per served CRD, COMPONENT.rss.per_crd its RSS per served CRD.
COMPONENTS = {"kcm": CONTROLLER_MANAGER, CONTROLLER_MANAGER: CONTROLLER_MANAGER, ETCD: ETCD}
COMPONENT_METRICS = {"": "bytes", "rss": "rss_bytes"}
TOTAL = "total"
CAUSES = tuple(sorted({r.name for r in RULES} | {r.name for r in OBJECT_RULES} | {OTHER, TOTAL}))
OPS = (">=", "<=", ">", "<")

_CONDITION = re.compile(r"\s*(?P<subject>[A-Za-z0-9_.\-]+)\s*(?P<op>>=|<=|>|<)\s*(?P<threshold>\S+)\s*")
_RELATIVE = re.compile(r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))%")
_SECONDS = re.compile(r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>ms|s)")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class Condition:
    """One parsed ``--fail-on`` expression.

    ``kind`` is ``per_crd`` or ``per_object`` (heap by ``name``, a cause or ``total``), ``series``
    (a series' slope per CRD), ``peak`` or ``end`` (a series' peak or last value), or ``component``
    (``name`` a component of :data:`COMPONENTS`, its ``metric`` per served CRD: ``bytes`` of heap or
    ``rss_bytes``). ``threshold`` is in the figure's unit, or a fraction of the reference's value when
    ``relative``."""

    text: str
    kind: str
    name: str
    op: str
    threshold: float
    relative: bool
    metric: str = "bytes"

    @property
    def unit(self) -> str:
        return SERIES[self.name][1] if self.name in SERIES else "bytes"

    def threshold_text(self) -> str:
        if self.relative:
            return f"{self.threshold * 100:+g}% of the reference"
        sign = "+" if self.threshold > 0 else ""
        return sign + fmt_value(self.threshold, self.unit)


def _threshold(text: str, unit: str, where: str) -> tuple[float, bool]:
    relative = _RELATIVE.fullmatch(text)
    if relative:
        value = float(relative["number"]) / 100
        if not math.isfinite(value):
            raise UsageError(f"{where}: the threshold {text!r} is not a finite percentage")
        return value, True
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if unit == "bytes":
        try:
            return sign * float(parse_bytes(body)), False
        except ValueError:
            raise UsageError(
                f"{where}: the threshold {text!r} is not a size or a percentage (e.g. +10%, 200MiB, -50KiB)"
            ) from None
    if unit == "seconds":
        seconds = _SECONDS.fullmatch(body)
        if seconds:
            scale = 1e-3 if seconds["unit"] == "ms" else 1.0
            return sign * float(seconds["number"]) * scale, False
    if _NUMBER.fullmatch(body):
        value = sign * float(body)
        if math.isfinite(value):
            return value, False
    raise UsageError(f"{where}: the threshold {text!r} is not a number or a percentage (e.g. +10%, 0.5, 2s)")


def parse_condition(text: str) -> Condition:
    """``"total.per_crd > +10%"`` -> :class:`Condition`. Raises UsageError (one line) naming what is wrong:
    an unknown cause or series (with the known names), an unknown operator or an unparsable threshold."""
    where = f"--fail-on {text!r}"
    match = _CONDITION.fullmatch(text or "")
    if not match:
        raise UsageError(f"{where}: expected SUBJECT OP THRESHOLD, e.g. 'total.per_crd > +10%' or 'rss_peak > +200MiB'")
    subject, op = match["subject"], match["op"]
    component = _component(subject, where)
    if component:
        name, metric = component
        threshold, relative = _threshold(match["threshold"], "bytes", where)
        return Condition(text.strip(), "component", name, op, threshold, relative, metric)
    if "." in subject:
        name, _, figure = subject.rpartition(".")
        if figure in ("per_crd", "per_object") and name in CAUSES:
            kind = figure
        elif figure == "per_crd" and name in SERIES:
            kind = "series"
        elif figure not in ("per_crd", "per_object"):
            raise UsageError(f"{where}: {figure!r} is not a figure; use NAME.per_crd or NAME.per_object")
        else:
            known = ", ".join(CAUSES + tuple(SERIES) + tuple(COMPONENTS) if figure == "per_crd" else CAUSES)
            raise UsageError(f"{where}: unknown cause, series or component {name!r}; known: {known}")
    else:
        name, _, figure = subject.rpartition("_")
        if figure not in ("peak", "end") or name not in SERIES:
            known = ", ".join(f"{s}_peak, {s}_end" for s in SERIES)
            raise UsageError(f"{where}: unknown figure {subject!r}; known: CAUSE.per_crd, CAUSE.per_object, {known}")
        kind = figure
    unit = SERIES[name][1] if name in SERIES else "bytes"
    threshold, relative = _threshold(match["threshold"], unit, where)
    return Condition(text.strip(), kind, name, op, threshold, relative)


def _component(subject: str, where: str) -> tuple[str, str] | None:
    """``(component, metric)`` of a subject naming a component (``kcm.per_crd``, ``etcd.rss.per_crd``), None
    for any other subject; UsageError for a component's figure that does not exist."""
    first, _, rest = subject.partition(".")
    if first not in COMPONENTS:
        return None
    middle, _, figure = rest.rpartition(".")
    if figure != "per_crd" or middle not in COMPONENT_METRICS:
        raise UsageError(
            f"{where}: {first} has {first}.per_crd (heap per served CRD) and {first}.rss.per_crd (RSS per served CRD)"
        )
    return COMPONENTS[first], COMPONENT_METRICS[middle]


@dataclass(frozen=True)
class GateResult:
    """One condition judged for one compared run (or configuration)."""

    condition: Condition
    run: str
    reference_value: float | None
    difference: float | None
    low: float | None
    high: float | None
    threshold: float | None
    regression: bool
    message: str

    def to_json(self) -> dict:
        return {
            "condition": self.condition.text,
            "run": self.run,
            "reference_value": self.reference_value,
            "difference": self.difference,
            "difference_low": self.low,
            "difference_high": self.high,
            "threshold": self.threshold,
            "regression": self.regression,
            "message": self.message,
        }


def _crosses(op: str, value: float, threshold: float) -> bool:
    return {">": value > threshold, ">=": value >= threshold, "<": value < threshold, "<=": value <= threshold}[op]


Figure = tuple[str, "float | None", "float | None", "float | None", "float | None"]


def _figures(comparison, condition: Condition, run: str) -> list[Figure]:
    """``(what, reference value, difference, low, high)`` of the condition's figure for ``run``: one
    per object kind for per-object figures, else one; ``[]`` when the runs do not hold it."""
    if condition.kind == "component":
        table = (getattr(comparison, "results", None) or {}).get("components", {}).get("components")
        if table is None or not len(table):
            return []
        rows = table[
            (table["run"] == run) & (table["component"] == condition.name) & (table["metric"] == condition.metric)
        ]
        return [
            ("", _float(r.get("per_crd_reference")), _float(r["difference"]), _float(r.get("difference_low")),
             _float(r.get("difference_high")))
            for r in rows.to_dict("records")
            if _float(r["difference"]) is not None
        ]  # fmt: skip
    if condition.kind in ("per_crd", "per_object", "series"):
        if condition.kind == "per_crd":
            table, key, column, ref_column = comparison.joint, condition.name, "cause", "per_crd_reference"
        elif condition.kind == "per_object":
            table, key, column, ref_column = (
                comparison.per_object_joint,
                condition.name,
                "cause",
                "per_object_reference",
            )
        else:
            table, key, column, ref_column = (
                comparison.series_joint,
                SERIES[condition.name][0],
                "metric",
                "per_crd_reference",
            )
        if table is None or not len(table) or column not in table.columns:
            return []
        rows = table[(table["run"] == run) & (table[column] == key)]
        if condition.kind == "per_crd" and "metric" in rows.columns:
            rows = rows[rows["metric"] == "bytes"]
        return [
            (
                str(row["kind"]) if condition.kind == "per_object" else "",
                _float(row.get(ref_column)),
                _float(row["difference"]),
                _float(row.get("difference_low")),
                _float(row.get("difference_high")),
            )
            for row in rows.to_dict("records")
            if _float(row["difference"]) is not None
        ]
    metric = SERIES[condition.name][0]
    column = "peak" if condition.kind == "peak" else "last"
    reference = comparison.end_value(comparison.reference, metric, column)
    compared = comparison.end_value(run, metric, column)
    if reference is None or compared is None:
        return []
    return [("", reference, compared - reference, None, None)]


def _float(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def evaluate(comparison, conditions: list[Condition]) -> list[GateResult]:
    """Judge every condition for every compared run (or configuration) of ``comparison``."""
    results = []
    for condition in conditions:
        for run in comparison.compared:
            figures = _figures(comparison, condition, run)
            if not figures:
                message = "not measured in both runs: judged as passing"
                if condition.kind == "component":
                    message = f"{condition.name} not profiled in both runs: judged as passing"
                results.append(GateResult(condition, run, None, None, None, None, None, False, message))
            for what, reference, difference, low, high in figures:
                results.append(_judge(condition, f"{run} {what}".strip(), reference, difference, low, high))
    return results


def _judge(condition: Condition, run: str, reference, difference: float, low, high) -> GateResult:
    threshold = condition.threshold * abs(reference or 0.0) if condition.relative else condition.threshold
    has_interval = low is not None and high is not None
    upward = condition.op in (">", ">=")
    judged = (low if upward else high) if has_interval else difference
    regression = _crosses(condition.op, judged, threshold)
    unit = condition.unit
    interval = (
        f" [{fmt_value(low, unit)}, {fmt_value(high, unit)}]"
        if has_interval
        else " (no interval: point estimate judged)"
    )
    what = f"the interval's {'low' if upward else 'high'} end" if has_interval else "the point estimate"
    message = (
        f"{'regression' if regression else 'ok'}: difference {fmt_value(difference, unit)}{interval}; {what} "
        f"{fmt_value(judged, unit)} {'crosses' if regression else 'does not cross'} the threshold "
        f"{condition.op} {fmt_value(threshold, unit)}"
    )
    return GateResult(condition, run, reference, difference, low, high, threshold, regression, message)


def regressed(results: list[GateResult]) -> bool:
    return any(r.regression for r in results)


def summary_markdown(results: list[GateResult]) -> str:
    """The gate's result as a markdown section: one line of verdict, then a row per condition and run."""
    failed = [r for r in results if r.regression]
    head = (
        f"**Gate: {len(failed)} of {len(results)} condition(s) regressed.**"
        if failed
        else f"**Gate: passed ({len(results)} condition(s)).**"
    )
    lines = [
        "## Gate",
        "",
        head,
        "",
        "A condition regresses only when its 95% interval's bound crosses the threshold, not the point estimate alone.",
        "",
        "| condition | run | verdict |",
        "|---|---|---|",
    ]
    lines += [f"| `{r.condition.text}` | {r.run} | {r.message} |" for r in results]
    return "\n".join(lines) + "\n"


def junit_xml(results: list[GateResult], *, suite: str = "crdscale compare") -> str:
    """JUnit XML: one test case per condition and compared run; a ``<failure>`` for each regression."""
    failures = sum(r.regression for r in results)
    root = ElementTree.Element("testsuites", name=suite, tests=str(len(results)), failures=str(failures))
    tsuite = ElementTree.SubElement(root, "testsuite", name=suite, tests=str(len(results)), failures=str(failures))
    for r in results:
        case = ElementTree.SubElement(tsuite, "testcase", classname=suite, name=f"{r.condition.text} [{r.run}]")
        if r.regression:
            failure = ElementTree.SubElement(case, "failure", message=r.message)
            failure.text = r.message
        else:
            ElementTree.SubElement(case, "system-out").text = r.message
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def results_frame(results: list[GateResult]) -> pd.DataFrame:
    """The results as a table (for notebooks)."""
    return pd.DataFrame([r.to_json() for r in results])
