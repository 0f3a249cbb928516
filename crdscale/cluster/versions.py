"""Pinned versions and version arithmetic.

kube-apiserver and etcd are built from Go modules; these are the defaults.
"""

from __future__ import annotations

import re

from crdscale.errors import UsageError

DEFAULT_KUBE_VERSION = "v1.37.1"
# etcd 3.6 supports watch-progress requests, so kube-apiserver >= 1.31 serves
# consistent LISTs from its watch cache, as in production clusters. Debian's
# etcd 3.4 (`--etcd system`) lacks them and LISTs then go to etcd.
DEFAULT_ETCD_VERSION = "v3.6.16"
# The S3-compatible server of the results-store tests (the only version the Go module proxy served, 2026-11).
DEFAULT_VERSITYGW_VERSION = "v1.8.0"

# k8s.io/kubernetes versions whose module zip the Go module proxy served here
# (checked 2026-11). Used only to suggest an alternative when one is refused.
KNOWN_SERVED_KUBE_VERSIONS = ("v1.37.2", "v1.37.1", "v1.37.0", "v1.36.0", "v1.34.0", "v1.25.16", "v1.24.17", "v1.24.0")

_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


def normalize_version(text: str) -> str:
    """``"1.24.0"`` -> ``"v1.24.0"``; raises :class:`UsageError` for anything not ``X.Y.Z``."""
    m = _SEMVER.match(text.strip())
    if not m:
        raise UsageError(f"not a version: {text!r} (expected X.Y.Z, e.g. 1.37.1)")
    return "v{}.{}.{}".format(*m.groups())


def version_tuple(version: str) -> tuple[int, int, int]:
    m = _SEMVER.match(version)
    if not m:
        raise UsageError(f"not a version: {version!r}")
    return tuple(int(x) for x in m.groups())  # type: ignore[return-value]


def staging_version(kube_version: str) -> str:
    """The ``k8s.io/<staging>`` module version matching ``k8s.io/kubernetes``: v1.Y.Z -> v0.Y.Z."""
    _, minor, patch = version_tuple(kube_version)
    return f"v0.{minor}.{patch}"


def nearest_version(wanted: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    """The candidate closest to ``wanted``: same minor first (closest patch, lower preferred),
    then the closest minor. ``None`` if there are no candidates."""
    want = version_tuple(wanted)
    parsed = []
    for c in candidates:
        try:
            parsed.append((version_tuple(c), c))
        except UsageError:
            continue
    if not parsed:
        return None

    def distance(item):
        (major, minor, patch), _ = item
        return (abs(major - want[0]), abs(minor - want[1]), patch > want[2], abs(patch - want[2]))

    return min((p for p in parsed if p[0] != want), key=distance, default=(None, None))[1]


# Its default set but the pod garbage collector: no kubelet runs here, and that controller
# deletes every Pod bound to a Node that does not exist 40 s after it appears (the list probes
# bind their Pods to such nodes, for spec.nodeName field selectors). It watches nothing of a
# CRD's, and its Pod and Node informers are shared with controllers that still run, so what
# kube-apiserver serves is unchanged. "podgc" is its name in v1.24 and an alias in v1.37.
DEFAULT_CONTROLLERS = ("*", "-podgc")
