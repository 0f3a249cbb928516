"""The feature gates a Kubernetes version defines, read from its Go module sources.

``--feature-gates`` of kube-apiserver (and kube-controller-manager) accepts the gates
registered in the binary: k8s.io/kubernetes' ``pkg/features`` (which also lists many of the
staging modules' gates), k8s.io/apiserver's and k8s.io/apiextensions-apiserver's
``pkg/features``, component-base's logging, metrics and zpages gates, client-go's
``features`` (since 1.30), and ``AllAlpha``/``AllBeta``. Two formats exist:

* up to 1.30: ``map[featuregate.Feature]featuregate.FeatureSpec{X: {Default: false, PreRelease: featuregate.Alpha}}``;
* from 1.31: ``map[featuregate.Feature]featuregate.VersionedSpecs{X: {{Version: version.MustParse("1.31"), ...}, ...}}``,
  where a gate's stage at a version is its last spec at or before that version.

:func:`gates_for` parses them once per version and caches the list under crdscale's cache
(``feature-gates/<version>.json``); :func:`check_feature_gates` validates a scenario's
``{Name = bool}`` against it and returns each gate with its stage, for provenance.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from crdscale.cluster import patches
from crdscale.cluster.versions import normalize_version, staging_version, version_tuple
from crdscale.errors import UsageError
from crdscale.fsutil import write_json_atomic
from crdscale.paths import cache_dir

# Bump when the parser changes: cached lists of an older parser are read again.
PARSER_VERSION = 2

# Where each module defines gates (directories: every non-test .go file in them).
GATE_SOURCES: tuple[tuple[str, str], ...] = (
    ("k8s.io/kubernetes", "pkg/features"),
    ("k8s.io/apiserver", "pkg/features"),
    ("k8s.io/apiextensions-apiserver", "pkg/features"),
    ("k8s.io/component-base", "logs/api/v1"),
    ("k8s.io/component-base", "metrics/features"),
    ("k8s.io/component-base", "zpages/features"),
    ("k8s.io/client-go", "features"),
    # kube-apiserver lists these too (v1.37.1: ControllerManagerReleaseLeaderElectionLockOnExit).
    ("k8s.io/controller-manager", "pkg/features"),
)
# component-base's featuregate package defines these two toggles itself, in every version.
BUILT_IN = {"AllAlpha": "alpha", "AllBeta": "beta"}

STAGES = {"Alpha": "alpha", "Beta": "beta", "GA": "GA", "Deprecated": "deprecated", "PreAlpha": "pre-alpha"}

_COMMENT = re.compile(r"//[^\n]*")
_CONST = re.compile(r"\b([A-Za-z_]\w*)\s+(?:featuregate\.)?Feature\s*=\s*\"([\w.-]+)\"")
_MAP = re.compile(r"map\[(?:featuregate\.)?Feature\]\s*(?:featuregate\.)?(FeatureSpec|VersionedSpecs)\s*\{")
_KEY = re.compile(r"(?:([A-Za-z_]\w*)\.)?([A-Za-z_]\w*)\s*:\s*\{")
_DEFAULT = re.compile(r"\bDefault:\s*(true|false)\b")
_STAGE = re.compile(r"\bPreRelease:\s*(?:featuregate\.)?(\w+)")
_LOCKED = re.compile(r"\bLockToDefault:\s*true\b")
_SPEC_VERSION = re.compile(
    r"\bVersion:\s*version\.(?:MustParse\(\"v?(\d+)\.(\d+)[^\"]*\"\)|MajorMinor\((\d+),\s*(\d+)\))"
)


@dataclass(frozen=True)
class Gate:
    """A feature gate as a version defines it.

    Attributes:
        name: as ``--feature-gates`` spells it.
        stage: ``"alpha"``, ``"beta"``, ``"GA"``, ``"deprecated"`` (or ``"pre-alpha"``) at that version.
        default: its default at that version.
        locked: ``LockToDefault``: setting it to anything but its default is refused.
        since: for versioned specs, the version its stage dates from (``"1.31"``); ``""`` otherwise.
    """

    name: str
    stage: str
    default: bool
    locked: bool = False
    since: str = ""


def _close(text: str, start: int) -> int:
    """Index just past the brace matching the ``{`` at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError("unbalanced braces")


def _entries(body: str):
    """``(identifier, value text)`` for each ``Key: {...}`` entry of a map literal's body."""
    i = 0
    while True:
        m = _KEY.search(body, i)
        if not m:
            return
        end = _close(body, m.end() - 1)
        yield m.group(2), body[m.end() - 1 : end]
        i = end


def _spec(text: str) -> tuple[str, bool, bool]:
    default = _DEFAULT.search(text)
    stage = _STAGE.search(text)
    raw = stage.group(1) if stage else "GA"
    return STAGES.get(raw, raw.lower()), bool(default and default.group(1) == "true"), bool(_LOCKED.search(text))


def parse_gate_sources(texts: list[str], kube_version: str) -> dict[str, Gate]:
    """Gate name -> :class:`Gate` at ``kube_version`` from Go source texts (feature files).

    A key that names a constant (``genericfeatures.WatchList``) is resolved through the
    ``X featuregate.Feature = "Name"`` constants of all ``texts``; one that names none
    is taken as the name (gates are named after their constants)."""
    _, minor, _ = version_tuple(kube_version)
    stripped = [_COMMENT.sub("", t) for t in texts]
    names = {ident: name for t in stripped for ident, name in _CONST.findall(t)}
    gates: dict[str, Gate] = {}
    for text in stripped:
        for m in _MAP.finditer(text):
            body = text[m.end() - 1 : _close(text, m.end() - 1)][1:-1]
            versioned = m.group(1) == "VersionedSpecs"
            for ident, value in _entries(body):
                name = names.get(ident, ident)
                if not versioned:
                    stage, default, locked = _spec(value)
                    gates[name] = Gate(name, stage, default, locked)
                    continue
                specs = []
                for spec_match in re.finditer(r"\{[^{}]*\}", value[1:-1]):
                    spec_text = spec_match.group(0)
                    v = _SPEC_VERSION.search(spec_text)
                    at = (int(v.group(1) or v.group(3)), int(v.group(2) or v.group(4))) if v else (0, 0)
                    specs.append((at, spec_text))
                if not specs:
                    continue
                specs.sort(key=lambda s: s[0])
                current = [s for s in specs if s[0] <= (1, minor)] or specs[:1]
                at, spec_text = current[-1]
                stage, default, locked = _spec(spec_text)
                gates[name] = Gate(name, stage, default, locked, f"{at[0]}.{at[1]}" if at != (0, 0) else "")
    for name, stage in BUILT_IN.items():
        gates.setdefault(name, Gate(name, stage, False))
    return dict(sorted(gates.items()))


def _source_texts(kube_version: str, *, download: bool) -> list[str]:
    texts = []
    for module, directory in GATE_SOURCES:
        version = kube_version if module == patches.KUBERNETES_MODULE else staging_version(kube_version)
        root = patches.module_source(module, version, download=download)
        folder = root / directory
        if not folder.is_dir():
            continue  # e.g. client-go has no features package before 1.30
        texts += [p.read_text() for p in sorted(folder.glob("*.go")) if not p.name.endswith("_test.go")]
    return texts


def gates_cache_dir() -> Path:
    """``<cache>/feature-gates``: one parsed list per version."""
    return cache_dir() / "feature-gates"


def gates_for(kube_version: str, *, download: bool = True) -> dict[str, Gate]:
    """The feature gates Kubernetes ``kube_version`` defines, name -> :class:`Gate` at that
    version; parsed from its module sources (fetched when missing and ``download``) once
    and cached. Raises :class:`UsageError` when the sources cannot be had."""
    kube_version = normalize_version(kube_version)
    cached = gates_cache_dir() / f"{kube_version}.json"
    try:
        data = json.loads(cached.read_text())
        if data.get("parser") == PARSER_VERSION:
            return {g["name"]: Gate(**g) for g in data["gates"]}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    gates = parse_gate_sources(_source_texts(kube_version, download=download), kube_version)
    write_json_atomic(
        cached, {"parser": PARSER_VERSION, "version": kube_version, "gates": [asdict(g) for g in gates.values()]}
    )
    return gates


def _other_versions(kube_version: str) -> dict[str, dict[str, Gate]]:
    """Every other version whose gate list is cached, version -> its gates (newest first)."""
    found = {}
    for path in sorted(gates_cache_dir().glob("v*.json"), reverse=True):
        if path.stem == kube_version:
            continue
        try:
            data = json.loads(path.read_text())
            found[path.stem] = {g["name"]: Gate(**g) for g in data["gates"]}
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def check_feature_gates(
    gates: Mapping[str, object], kube_version: str, *, known: Mapping[str, Gate] | None = None
) -> dict[str, dict]:
    """Validate ``{Name: bool}`` against the gates ``kube_version`` defines (``known``, default
    :func:`gates_for`); return name -> ``{"enabled", "stage", "default", "locked"}`` for provenance.

    Raises :class:`UsageError` (one line) for a value that is not a boolean, a gate locked to
    its default set otherwise, a gate of another version (named, when a cached list has it),
    and an unknown gate (with the nearest names).
    """
    kube_version = normalize_version(kube_version)
    known = gates_for(kube_version) if known is None else known
    record: dict[str, dict] = {}
    for name, value in gates.items():
        if not isinstance(value, bool):
            raise UsageError(f"feature gate {name}: {value!r} is not true or false")
        gate = known.get(name)
        if gate is None:
            raise UsageError(_unknown_gate(name, kube_version, known))
        if gate.locked and value != gate.default:
            raise UsageError(
                f"feature gate {name} is {gate.stage} and locked to {str(gate.default).lower()} in {kube_version}; "
                f"kube-apiserver refuses {str(value).lower()}"
            )
        record[name] = {"enabled": value, "stage": gate.stage, "default": gate.default, "locked": gate.locked}
    return record


def _unknown_gate(name: str, kube_version: str, known: Mapping[str, Gate]) -> str:
    for other, other_gates in _other_versions(kube_version).items():
        if name in other_gates:
            return (
                f"{name} is not a feature gate of {kube_version} "
                f"({other} has it, {other_gates[name].stage}); choose a version that has it"
            )
    by_lower = {n.lower(): n for n in known}
    nearest = [by_lower[name.lower()]] if name.lower() in by_lower else []
    nearest += [n for n in difflib.get_close_matches(name, list(known), n=3, cutoff=0.6) if n not in nearest]
    hint = f"; nearest: {', '.join(nearest[:3])}" if nearest else ""
    return f"unknown feature gate {name} for {kube_version}{hint}"


def gates_from_help(help_text: str) -> dict[str, str]:
    """Gate name -> stage from a binary's ``--help`` (its ``--feature-gates`` list:
    ``kube:CBORServingAndStorage=true|false (ALPHA - default=false)``), to compare with the
    sources. Gates without a stage in parentheses (GA ones) are ``"GA"``."""
    found: dict[str, str] = {}
    for m in re.finditer(r"^\s+(?:\w+:)?([A-Z]\w+)=true\|false(?: \((\w+)(?:-\w+)?)?", help_text, re.M):
        raw = (m.group(2) or "GA").upper()
        stage = {"ALPHA": "alpha", "BETA": "beta", "DEPRECATED": "deprecated", "PRE": "pre-alpha"}.get(raw, "GA")
        found[m.group(1)] = stage
    return found
