"""What activating part of a CRD set costs: Crossplane v2's activation patterns, applied before a prediction.

Crossplane v2 installs a provider's managed resources as ManagedResourceDefinitions and makes a CRD only of
those a ``ManagedResourceActivationPolicy`` activates (``apiextensions.crossplane.io/v1alpha1``,
``spec.activate``: a list of patterns). A pattern is matched against the CRD's name (``plural.group``, the
MRD's name) as Go's ``path/filepath.Match`` matches it (crossplane ``apis/apiextensions/v1alpha1``
``ActivationPolicy.Match``): ``*`` any run of characters but ``/``, ``?`` one, ``[a-z]`` and ``[^a-z]`` a
class, ``\\`` escapes; so ``*.network.azure.upbound.io`` is the network family, ``*`` everything. Policies
add up: a CRD any pattern matches is activated.

:func:`predict_activation` reads a set once and predicts it whole and its activated part with one model,
and what activating only that part saves (whole minus activated, with the interval of two sets straying
from the model alike, :func:`~crdscale.footprint.model.predict_difference`): ``crdscale footprint
--activate PATTERN`` and ``--activate-policy FILE``. A malformed pattern or policy is a :class:`UsageError`
(one line, exit 2); Crossplane itself would silently activate nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crdscale.analysis.targets import TOTAL
from crdscale.crds.load import read_objects_file
from crdscale.errors import UsageError
from crdscale.footprint.model import RSS, RSS_PEAK, predict_difference
from crdscale.footprint.prediction import (
    MINOR_SHARE,
    CrdSet,
    FootprintPrediction,
    Row,
    _rows,
    _set_lines,
    _top_lines,
    choose,
    definitions,
    footprint_of,
    model_json,
    read_crd_set,
)
from crdscale.units import fmt_bytes

if TYPE_CHECKING:
    from crdscale.cluster.kubeconfig import KubeconfigFiles

POLICY_KIND = "ManagedResourceActivationPolicy"
POLICY_GROUP = "apiextensions.crossplane.io"
SAVED_DEFINITION = (
    "what activating only the matched CRDs saves: the whole set's prediction minus the activated part's, with "
    "an additive interval that takes the two as straying from the model alike (as OLD NEW does); peak RSS is "
    "not differenced: the peak excess is one install's burst, so the peak saves what settled RSS saves"
)


@dataclass(frozen=True)
class Pattern:
    """One activation pattern, where it came from (``--activate`` or a policy file) and its compiled form."""

    text: str
    origin: str
    regex: re.Pattern[str] = field(compare=False, repr=False)

    def match(self, name: str) -> bool:
        return self.regex.fullmatch(name) is not None


def _class_char(text: str, i: int, bad) -> tuple[str, int]:
    """One character of a ``[...]`` class at ``text[i]`` (an escape taken whole) and the index after it."""
    if i >= len(text):
        raise bad("'[' without its ']'")
    c = text[i]
    if c == "\\":
        if i + 1 >= len(text):
            raise bad("ends in a lone '\\'")
        return text[i + 1], i + 2
    if c in "-]":
        raise bad(f"'{c}' where a class needs a character (escape it as '\\{c}')")
    return c, i + 1


def compile_pattern(text: str, origin: str = "--activate", where: str | None = None) -> Pattern:
    """``text`` as Go's ``filepath.Match`` reads it, compiled, from ``origin``; UsageError naming ``where``
    (default ``origin``) for a pattern Go calls malformed (an unclosed or empty class, a lone trailing
    ``\\``), an empty one, or one that can match no CRD name (whitespace, ``/``, a backwards range)."""

    def bad(why: str) -> UsageError:
        return UsageError(
            f"{where or origin}: {text!r} is not an activation pattern: {why} (patterns match CRD names, "
            f"e.g. '*.network.azure.upbound.io' or 'buckets.s3.aws.upbound.io')"
        )

    if not text:
        raise bad("it is empty")
    if re.search(r"[\s/]", text):
        raise bad("a CRD name has no whitespace or '/'")
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "\\":
            if i + 1 >= len(text):
                raise bad("it ends in a lone '\\'")
            out.append(re.escape(text[i + 1]))
            i += 2
        elif c == "[":
            i += 1
            negated = i < len(text) and text[i] == "^"
            i += negated
            ranges: list[str] = []
            while not (i < len(text) and text[i] == "]" and ranges):
                lo, i = _class_char(text, i, bad)
                hi = lo
                if i < len(text) and text[i] == "-":
                    hi, i = _class_char(text, i + 1, bad)
                    if hi < lo:
                        raise bad(f"the range {lo}-{hi} is backwards")
                ranges.append(re.escape(lo) + ("-" + re.escape(hi) if hi != lo else ""))
            i += 1
            out.append("[" + ("^" if negated else "") + "".join(ranges) + "]")
        else:
            out.append(re.escape(c))
            i += 1
    return Pattern(text, origin, re.compile("".join(out)))


def read_policy(path: str | Path) -> list[Pattern]:
    """The patterns of every ``ManagedResourceActivationPolicy`` in the YAML/JSON file ``path`` (documents, or a
    kubectl List's items; other kinds are ignored), each compiled; UsageError (one line) for a file that
    cannot be read, holds no policy, or a policy without a non-empty ``spec.activate`` list of strings."""
    where = f"--activate-policy {path}"
    objects = read_objects_file(path, where)
    policies = [o for o in objects if o.get("kind") == POLICY_KIND]
    if not policies:
        kinds = sorted({str(o.get("kind")) for o in objects}) or ["nothing"]
        raise UsageError(f"{where}: no {POLICY_KIND} in it (it holds {', '.join(kinds)})")
    out = []
    for policy in policies:
        name = (policy.get("metadata") or {}).get("name") or "?"
        group = str(policy.get("apiVersion") or "").partition("/")[0]
        if group != POLICY_GROUP:
            raise UsageError(
                f"{where}: {POLICY_KIND} {name} has apiVersion {policy.get('apiVersion')!r}; Crossplane's is "
                f"{POLICY_GROUP}/v1alpha1"
            )
        activate = (policy.get("spec") or {}).get("activate")
        if not isinstance(activate, list) or not activate or not all(isinstance(p, str) for p in activate):
            raise UsageError(f"{where}: {POLICY_KIND} {name} needs spec.activate, a non-empty list of patterns")
        out += [compile_pattern(p, f"{path}: {POLICY_KIND} {name}", f"{where} ({name})") for p in activate]
    return out


def activation_patterns(patterns: tuple[str, ...] | list[str] = (), policies=()) -> list[Pattern]:
    """``--activate`` patterns and those of ``--activate-policy`` files, compiled, in the order given (one
    pattern given twice is kept once)."""
    out = [compile_pattern(p) for p in patterns or ()]
    for path in policies or ():
        out += read_policy(path)
    seen, unique = set(), []
    for p in out:
        if p.text not in seen:
            seen.add(p.text)
            unique.append(p)
    if not unique:
        raise UsageError("activation needs a pattern: --activate PATTERN or --activate-policy FILE")
    return unique


@dataclass
class ActivationPrediction:
    """What activating part of a set costs, by :func:`predict_activation`: the ``whole`` set's prediction, the
    ``active`` part's, and ``saved`` (target -> row: whole minus activated, additive interval); ``matched``:
    how many CRDs each pattern matched (a CRD counts for each pattern that matches it)."""

    whole: FootprintPrediction
    active: FootprintPrediction
    patterns: list[Pattern]
    matched: dict[str, int]
    saved: dict[str, Row]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The data of :meth:`to_json`."""

        def part(p: FootprintPrediction) -> dict[str, Any]:
            return {k: v for k, v in p.to_dict().items() if k not in ("kube_version", "model", "definitions")}

        chosen = self.whole.chosen
        return {
            "kube_version": chosen.model.kube_version,
            "source": self.whole.crd_set.label,
            "patterns": [{"pattern": p.text, "from": p.origin, "crds": self.matched[p.text]} for p in self.patterns],
            "activated": {"crds": len(self.active.crd_set.names), "of": len(self.whole.crd_set.names)},
            "activated_names": self.active.crd_set.names,
            "whole": part(self.whole),
            "active": part(self.active),
            "saved": [{"target": t, **v} for t, v in self.saved.items()],
            "warnings": self.warnings,
            "definitions": {**definitions(), "saved": SAVED_DEFINITION},
            "model": model_json(chosen),
        }

    def to_json(self) -> str:
        """``crdscale footprint --activate ... -o json``."""
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """The whole set, the patterns and what each matched, and one table: whole, activated, saved."""
        whole, active = self.whole, self.active
        n, k = len(whole.crd_set.names), len(active.crd_set.names)
        lines = _set_lines(whole.crd_set.label, whole.features, whole.crd_set.skipped)
        count = len(self.patterns)
        lines.append(f"Activated: {k:,} of {n:,} CRDs ({k / n:.1%}) by {count} pattern{'s' if count > 1 else ''}:")
        width = max(len(p.text) for p in self.patterns)
        for p in self.patterns:
            m = self.matched[p.text]
            src = "" if p.origin == "--activate" else f"  from {p.origin}"
            lines.append(f"  {p.text:<{width}}  {m:>6,} CRD{'s' if m != 1 else ' '}{src}")
        lines += _set_lines("  the activated part", active.features, {})
        lines.append(
            f"Predicted on kube-apiserver v{whole.chosen.model.kube_version}, served (95% prediction intervals; "
            f"saved: whole minus activated):"
        )
        lines += _table(whole.rows, active.rows, self.saved)
        lines += _top_lines(active.top)
        lines.append(whole.chosen.describe())
        return "\n".join(lines)


def _cell(row: Row | None, *, signed: bool = False) -> str:
    """``6.5 MiB [4.8, 8.7]``: the value's unit for its bounds too."""
    if row is None or row["value"] is None:
        return "-"
    value = fmt_bytes(row["value"], signed=signed)
    if row["low"] is None:
        return value
    unit = value.rsplit(" ", 1)[-1]
    if unit == "B":
        return f"{value} [{row['low']:,.0f}, {row['high']:,.0f}]"
    bounds = (fmt_bytes(row[b], unit=unit).rsplit(" ", 1)[0] for b in ("low", "high"))
    return f"{value} [{', '.join(bounds)}]"


def _table(whole: dict[str, Row], active: dict[str, Row], saved: dict[str, Row]) -> list[str]:
    """Total and RSS first, then the causes of at least MINOR_SHARE of the whole set's heap, the rest summed;
    peak RSS saves what settled RSS saves (it is not differenced)."""
    total = (whole.get(TOTAL) or {}).get("value") or 0.0
    heads = {TOTAL: "heap, total", RSS_PEAK: "RSS, peak growth", RSS: "RSS, settled growth"}
    causes = [t for t in whole if t not in heads]
    major = [t for t in causes if abs(whole[t]["value"] or 0.0) >= MINOR_SHARE * abs(total)]
    minor = [t for t in causes if t not in major]
    cells = [
        (name, _cell(whole[t]), _cell(active.get(t)), "as settled" if t == RSS_PEAK else _cell(saved.get(t)))
        for t, name in heads.items()
        if t in whole
    ]
    cells += [(f"heap: {t}", _cell(whole[t]), _cell(active.get(t)), _cell(saved.get(t))) for t in major]
    if minor:

        def summed(rows: dict[str, Row]) -> Row:
            return {"value": sum((rows.get(t) or {}).get("value") or 0.0 for t in minor), "low": None, "high": None}

        cells.append(
            (f"heap: {len(minor)} other causes", _cell(summed(whole)), _cell(summed(active)), _cell(summed(saved)))
        )
    widths = [max(len(c[i]) for c in cells) for i in (1, 2)]
    head = f"  {'':<24} {'whole set':<{widths[0]}}  {'activated':<{widths[1]}}  saved"
    return [head] + [f"  {n:<24} {w:<{widths[0]}}  {a:<{widths[1]}}  {s}" for n, w, a, s in cells]


def predict_activation(
    source: str | Path | None = None,
    patterns: tuple[str, ...] | list[str] = (),
    policies: tuple[str | Path, ...] | list[str | Path] = (),
    *,
    kube_version: str = "1.37.1",
    model: str | Path | None = None,
    shipped: bool = False,
    top: int = 10,
    kubeconfig: KubeconfigFiles | None = None,
    context: str | None = None,
) -> ActivationPrediction:
    """What activating the CRDs of ``source`` that ``patterns`` (Crossplane activation patterns) and the
    ``ManagedResourceActivationPolicy`` files ``policies`` match costs, served on ``kube_version``: the whole
    set, the activated part and what activating only it saves (``crdscale footprint --activate``).

    Parameters as :func:`~crdscale.footprint.prediction.predict_footprint`'s; ``top``: the activated part's
    costliest CRDs. Returns an :class:`ActivationPrediction`. UsageError (one line) for a malformed pattern
    or policy, or patterns that match none of the set's CRDs.
    """
    compiled = activation_patterns(patterns, policies)
    chosen = choose(kube_version, model=model, shipped=shipped)
    crd_set = read_crd_set(source, kubeconfig=kubeconfig, context=context)
    matched = {p.text: sum(p.match(n) for n in crd_set.names) for p in compiled}
    keep = [i for i, name in enumerate(crd_set.names) if any(p.match(name) for p in compiled)]
    if not keep:
        example = crd_set.names[0]
        raise UsageError(
            f"no CRD of {crd_set.label} matches {', '.join(repr(p.text) for p in compiled)}: patterns match CRD "
            f"names (plural.group, e.g. {example!r}, or '*.{example.partition('.')[2]}' for its group)"
        )
    active_set = CrdSet(
        f"{crd_set.label} (activated)",
        [crd_set.names[i] for i in keep],
        [crd_set.per_crd[i] for i in keep],
        {},
        [],
    )
    whole = footprint_of(chosen, crd_set, top=0)
    active = footprint_of(chosen, active_set, top=top)
    saved = _rows(predict_difference(chosen.model, active_set.features(), crd_set.features()).itertuples(index=False))
    warnings = [
        f"--activate: {p.text!r} ({p.origin}) matches no CRD of {crd_set.label}"
        for p in compiled
        if not matched[p.text]
    ]
    for w in whole.warnings + active.warnings:
        if w not in warnings:
            warnings.append(w)
    return ActivationPrediction(whole, active, compiled, matched, saved, warnings)
