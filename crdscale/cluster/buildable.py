"""Can crdscale get this kube-apiserver or etcd? Answered in seconds, without building.

:func:`plan_kube_apiserver` and :func:`plan_etcd` follow the order of
:func:`crdscale.cluster.binaries.kube_apiserver` and :func:`~crdscale.cluster.binaries.etcd`
(an explicit binary, a source tree, the environment, the cache, a build from Go
modules) but stop short of building: a cached binary is always accepted, and a
version to build is asked of the Go module proxy with ``go list -m``, which
reads the module's few-hundred-byte ``.info`` rather than its zip. A released
module version never changes, so a "served" answer is kept for good in
``<cache>/go-module-versions-<digest>.json`` (one file per module source); a refusal is kept for :data:`REFUSED_TTL_S`
only, since a release may appear later.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from crdscale.cluster import binaries, gobuild
from crdscale.cluster.binaries import ETCD_ENV, ETCD_MODULE, KUBE_APISERVER_ENV, cached_kube_apiserver, etcd_program
from crdscale.cluster.kubesource import KUBERNETES_MODULE, check_tree
from crdscale.cluster.versions import (
    DEFAULT_ETCD_VERSION,
    DEFAULT_KUBE_VERSION,
    KNOWN_SERVED_KUBE_VERSIONS,
    nearest_version,
    normalize_version,
    version_tuple,
)
from crdscale.errors import BinaryError, UsageError
from crdscale.fsutil import write_json_atomic
from crdscale.paths import cache_dir

# One question to the proxy takes 0.1-0.6 s here; a matrix asks its versions in parallel, so a
# whole check stays under 5 s even when the proxy is slow to answer.
PROXY_TIMEOUT_S = 4.0
# How long "the proxy does not serve vX.Y.Z" is believed: a release tagged later becomes servable.
REFUSED_TTL_S = 3600.0
# apiextensions.k8s.io/v1 (the only CRD version crdscale installs) is served from 1.16 on.
MIN_KUBE_MINOR = 16
CACHE_FILE = "go-module-versions.json"


@dataclass(frozen=True)
class ModuleAnswer:
    """What the Go module proxy said about ``path@version``: ``served`` True/False, or ``None``
    when it could not be asked (``reason`` says why)."""

    served: bool | None
    reason: str = ""


@dataclass(frozen=True)
class Plan:
    """How a binary will be had: ``what`` names it (``kube-apiserver v1.37.1``), ``how`` says from
    where (``cached: PATH``, ``to build from Go modules, usually ...``); ``warning`` when part of it
    could not be checked."""

    what: str
    how: str
    warning: str | None = None


def _cache_path() -> Path:
    """The answers' file (``go-module-versions-<digest>.json``, one per module source: :func:`gobuild.per_module_source`)."""
    return cache_dir() / gobuild.per_module_source(CACHE_FILE)


def _read_cache() -> dict:
    try:
        data = json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cached_answer(entry) -> ModuleAnswer | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("served"), bool):
        return None
    if not entry["served"] and time.time() - float(entry.get("checked_at", 0)) > REFUSED_TTL_S:
        return None
    return ModuleAnswer(entry["served"], str(entry.get("reason", "")))


def ask_proxy(path: str, version: str, *, timeout_s: float = PROXY_TIMEOUT_S) -> ModuleAnswer:
    """Ask ``go list -m`` whether ``path@version`` exists (the one place this module runs go;
    unit tests replace it)."""
    try:
        info = gobuild.module_info(path, version, timeout_s=timeout_s)
    except BinaryError as err:  # no Go: nothing can be built from modules either
        raise BinaryError(f"{err} (to build {path} {version})") from err
    if not info.get("Error"):
        return ModuleAnswer(True)
    return ModuleAnswer(None if info.get("Unreachable") else False, str(info["Error"]))


def module_answers(pairs, *, timeout_s: float = PROXY_TIMEOUT_S) -> dict[tuple[str, str], ModuleAnswer]:
    """``{(module path, version): ModuleAnswer}`` for every pair, from the cache file or the proxy
    (asked in parallel). Answers of the proxy are written back to the cache."""
    pairs = sorted(set(pairs))
    cache = _read_cache()
    answers: dict[tuple[str, str], ModuleAnswer] = {}
    todo = []
    for pair in pairs:
        cached = _cached_answer(cache.get("@".join(pair)))
        if cached is None:
            todo.append(pair)
        else:
            answers[pair] = cached
    if todo:
        with ThreadPoolExecutor(max_workers=min(8, len(todo))) as pool:
            asked = list(pool.map(lambda p: ask_proxy(*p, timeout_s=timeout_s), todo))
        now = time.time()
        for pair, answer in zip(todo, asked):
            answers[pair] = answer
            if answer.served is not None:
                cache["@".join(pair)] = {"served": answer.served, "reason": answer.reason, "checked_at": now}
        try:
            write_json_atomic(_cache_path(), cache)
        except OSError:
            pass  # a read-only cache only costs the next check another question
    return answers


def _executable(path: str, source: str) -> Path:
    """``path`` checked as :func:`~crdscale.cluster.binaries.kube_apiserver` checks an explicit binary."""
    return binaries._explicit(path, source).path


def kube_version(text: str) -> str:
    """``text`` as a release crdscale can build kube-apiserver from (``vX.Y.Z``, ``1.16 <= Y``);
    :class:`UsageError` saying what a version looks like otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"not a version: {text!r} (expected a release X.Y.Z, e.g. 1.37.1)")
    try:
        version = normalize_version(text)
    except UsageError:
        raise UsageError(
            f"not a version: {text!r} (expected a release X.Y.Z, e.g. 1.37.1; crdscale builds "
            f"released versions, or the tree named by target.kube_source)"
        ) from None
    major, minor, _ = version_tuple(version)
    if major != 1 or minor < MIN_KUBE_MINOR:
        raise UsageError(
            f"kube-apiserver {version} is not supported: crdscale installs apiextensions.k8s.io/v1 CRDs, "
            f"served from 1.{MIN_KUBE_MINOR}.0 on"
        )
    return version


def etcd_version(text: str) -> str:
    """``text`` as an etcd release ``v3.Y.Z``; :class:`UsageError` otherwise."""
    try:
        version = normalize_version(text)
    except UsageError:
        raise UsageError(
            f"not an etcd version: {text!r} (expected X.Y.Z such as {DEFAULT_ETCD_VERSION.lstrip('v')}, "
            f'"system" for the etcd on PATH, or a path to an etcd binary)'
        ) from None
    if version_tuple(version)[0] != 3:
        raise UsageError(f"etcd {version} cannot be built: crdscale builds etcd from {ETCD_MODULE} (v3.Y.Z only)")
    return version


def kube_modules_needed(kube_version_text: str, *, binary: str | None, source: str | None) -> list[tuple[str, str]]:
    """The ``(module, version)`` :func:`plan_kube_apiserver` will ask the proxy about (none if cached)."""
    if binary or source or os.environ.get(KUBE_APISERVER_ENV):
        return []
    try:
        version = kube_version(kube_version_text)
    except UsageError:
        return []
    return [] if cached_kube_apiserver(version) else [(KUBERNETES_MODULE, version)]


def etcd_modules_needed(spec: str | None) -> list[tuple[str, str]]:
    """The ``(module, version)`` :func:`plan_etcd` will ask the proxy about (none if cached)."""
    spec = spec or os.environ.get(ETCD_ENV) or DEFAULT_ETCD_VERSION
    if spec == "system" or "/" in spec:
        return []
    try:
        version = etcd_version(spec)
    except UsageError:
        return []
    return [] if etcd_program(version).binary.is_file() else [(ETCD_MODULE, version)]


def _served(answers, module: str, version: str, hint: str = "") -> str | None:
    """``None`` when the proxy serves ``module@version``, a warning when it could not be asked;
    :class:`BinaryError` (as the build would raise) when it refused."""
    answer = answers.get((module, version)) or module_answers([(module, version)])[(module, version)]
    if answer.served is False:
        raise BinaryError(f"the Go module proxy does not serve {module} {version} ({answer.reason}){hint}")
    if answer.served is None:
        return f"could not ask the Go module proxy about {module} {version} ({answer.reason}); the build will tell"
    return None


def plan_kube_apiserver(
    version_text: str, *, binary: str | None = None, source: str | None = None, answers=None
) -> Plan:
    """Where kube-apiserver will come from for a local target with these scenario keys
    (``target.kube_version``, ``apiserver_binary``, ``kube_source``). Raises :class:`UsageError`
    for a malformed version or source tree, :class:`BinaryError` for a missing binary or a
    version the module proxy does not serve."""
    answers = answers if answers is not None else {}
    if binary:
        return Plan("kube-apiserver", f"{_executable(binary, 'target.apiserver_binary')} (target.apiserver_binary)")
    if source:
        tree = check_tree(source)
        base = kube_version(version_text) if version_text else DEFAULT_KUBE_VERSION
        return Plan("kube-apiserver", f"to build from {tree} (cached per commit and diff; base {base} if untagged)")
    if os.environ.get(KUBE_APISERVER_ENV):
        path = _executable(os.environ[KUBE_APISERVER_ENV], f"${KUBE_APISERVER_ENV}")
        return Plan("kube-apiserver", f"{path} (${KUBE_APISERVER_ENV})")
    version = kube_version(version_text)
    cached = cached_kube_apiserver(version)
    if cached:
        return Plan(f"kube-apiserver {version}", f"cached: {cached}")
    suggestion = nearest_version(version, KNOWN_SERVED_KUBE_VERSIONS)
    hint = f'; try kube_version = "{suggestion.lstrip("v")}"' if suggestion else ""
    warning = _served(answers, KUBERNETES_MODULE, version, hint)
    gobuild.go_binary()  # no Go, no build: say so now
    return Plan(
        f"kube-apiserver {version}", "to build from Go modules (usually 8-11 minutes on 2 cores)", warning=warning
    )


def etcd_given(spec: str | None, name: str) -> str | None:
    """What the user gave etcd's spec as, for an error to start with: ``name`` (the scenario key or the flag
    ``spec`` was written as) when ``spec`` is set, else ``$CRDSCALE_ETCD`` when that is, else None (the
    pinned default: nothing the user wrote)."""
    if spec:
        return name
    return f"${ETCD_ENV}" if os.environ.get(ETCD_ENV) else None


def plan_etcd(spec: str | None, *, answers=None, given: str = "target.etcd") -> Plan:
    """Where etcd will come from for ``spec`` (a version, ``system`` or a path; empty: ``$CRDSCALE_ETCD`` or
    the pinned default), written as ``given`` (``target.etcd``, or a command's ``--etcd``). Raises as
    :func:`plan_kube_apiserver`; the errors do not name where ``spec`` came from, which the caller puts in
    front (:func:`etcd_given`)."""
    answers = answers if answers is not None else {}
    source = etcd_given(spec, given) or "the default"
    spec = spec or os.environ.get(ETCD_ENV) or DEFAULT_ETCD_VERSION
    if spec == "system":
        found = binaries.system_etcd()
        if not found:
            raise BinaryError(
                'no etcd on PATH for "system"; install Debian\'s etcd-server (apt-get install etcd-server)'
            )
        return Plan("etcd", f"{found} (system)")
    if "/" in spec:
        path = Path(spec).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BinaryError(f"{path} is not an executable file")
        return Plan("etcd", f"{path.resolve()} ({source})")
    version = etcd_version(spec)
    binary = etcd_program(version).binary
    if binary.is_file():
        return Plan(f"etcd {version}", f"cached: {binary}")
    warning = _served(answers, ETCD_MODULE, version)
    gobuild.go_binary()
    return Plan(f"etcd {version}", "to build from Go modules (usually 2-4 minutes on 2 cores)", warning=warning)
