"""Which Kubernetes releases can be built here: for each minor, the newest patch release whose modules the
Go module proxy serves (k8s.io/kubernetes and every staging module it replaces at ``v0.Y.Z``).

The proxy's version list is incomplete (``go list -m -versions k8s.io/kubernetes`` names only some
releases), so patches are asked for one by one, newest first (``go list -m -json``: the ``.info`` and
``.mod`` files only, well under a second each, no zip). A release whose staging module is missing cannot be
built (``go mod tidy`` would fail minutes in); it is named with the missing module, and the next older patch
is tried.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from crdscale.cluster import gobuild
from crdscale.cluster.versions import staging_version, version_tuple
from crdscale.errors import UsageError

# The newest patch of a minor is under this (1.24 went to .17, 1.27 to .16; later ones stay lower).
MAX_PATCH = 24
_STAGING = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.M)
# Staging modules no kube-apiserver or kube-controller-manager build imports: examples and generators. The
# proxy lacks some of them for some patches (sample-cli-plugin of most 1.27 patches), which is harmless.
UNUSED_STAGING = frozenset(
    {"k8s.io/sample-apiserver", "k8s.io/sample-cli-plugin", "k8s.io/sample-controller", "k8s.io/code-generator"}
)

Lookup = Callable[[str, str], dict]


def _lookup(path: str, version: str) -> dict:
    return gobuild.module_info(path, version, timeout_s=30)


@dataclass
class ReleaseChoice:
    """A minor's newest buildable patch (``version``), or None with the reasons each newer patch was passed over."""

    minor: str
    version: str | None
    passed_over: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.version:
            skipped = f" (passed over: {'; '.join(self.passed_over)})" if self.passed_over else ""
            return f"{self.minor}: {self.version}{skipped}"
        return f"{self.minor}: none buildable ({'; '.join(self.passed_over) or 'no patch release served'})"


def missing_staging(version: str, info: dict, lookup: Lookup = _lookup) -> list[str]:
    """The staging modules of ``k8s.io/kubernetes@version`` (``info``: its ``go list -m -json``) the proxy lacks."""
    gomod = info.get("GoMod")
    text = Path(gomod).read_text() if gomod and Path(gomod).is_file() else ""
    zero = staging_version(version)
    modules = [m for m in _STAGING.findall(text) if m not in UNUSED_STAGING]
    with ThreadPoolExecutor(max_workers=8) as pool:  # each answer is a round trip to the proxy
        errors = list(pool.map(lambda m: bool(lookup(m, zero).get("Error")), modules))
    return [m for m, missing in zip(modules, errors) if missing]


def newest_buildable(minor: str, lookup: Lookup = _lookup, max_patch: int = MAX_PATCH) -> ReleaseChoice:
    """The newest patch of ``minor`` (``1.24``) that the proxy serves whole."""
    major_minor = minor.lstrip("v")
    if not re.fullmatch(r"1\.\d+", major_minor):
        raise UsageError(f"not a minor version: {minor!r} (e.g. 1.24)")
    choice = ReleaseChoice(major_minor, None)
    for patch in range(max_patch, -1, -1):
        version = f"v{major_minor}.{patch}"
        info = lookup("k8s.io/kubernetes", version)
        if info.get("Error"):
            if info.get("Unreachable"):
                raise UsageError(f"the Go module proxy did not answer for k8s.io/kubernetes {version}")
            continue  # not a release (or not served): the next older patch
        missing = missing_staging(version, info, lookup)
        if missing:
            choice.passed_over.append(f"{version} lacks {', '.join(missing[:3])} v{staging_version(version)[1:]}")
            continue
        choice.version = version
        return choice
    return choice


def minors_between(first: str, last: str) -> list[str]:
    """``1.24``..``1.37`` -> every minor in between, inclusive."""
    a, b = version_tuple(_as_version(first)), version_tuple(_as_version(last))
    if a[0] != 1 or b[0] != 1 or a > b:
        raise UsageError(f"a range of releases goes from an older 1.Y to a newer one, got {first}..{last}")
    return [f"1.{m}" for m in range(a[1], b[1] + 1)]


def _as_version(text: str) -> str:
    parts = text.strip().lstrip("v").split(".")
    return "v" + ".".join((parts + ["0", "0"])[:3])


def choose_releases(first: str, last: str, lookup: Lookup = _lookup) -> list[ReleaseChoice]:
    """:func:`newest_buildable` of every minor from ``first`` to ``last``; UsageError when none is buildable."""
    choices = [newest_buildable(m, lookup) for m in minors_between(first, last)]
    if not any(c.version for c in choices):
        raise UsageError(f"no release from {first} to {last} can be built from the Go module proxy's modules")
    return choices


def recorded_lookup(path: str | Path) -> Lookup:
    """A lookup answering from a recorded JSON file (``{"k8s.io/api@v0.24.17": {...}}``), for tests."""
    answers = json.loads(Path(path).read_text())

    def lookup(module: str, version: str) -> dict:
        return answers.get(f"{module}@{version}", {"Error": f"{module}@{version}: not found"})

    return lookup
