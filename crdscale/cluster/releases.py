"""Which Kubernetes releases can be built here: for each minor, the newest patch release whose modules the
Go module proxy serves (k8s.io/kubernetes and every staging module it replaces at ``v0.Y.Z``).

The proxy's version list is incomplete (``go list -m -versions k8s.io/kubernetes`` names only some
releases), so patches are asked for one by one, newest first (``go list -m -json``: the ``.info`` and
``.mod`` files only, well under a second each, no zip). A release whose staging module is missing cannot be
built (``go mod tidy`` would fail minutes in); it is named with the missing module, and the next older patch
is tried.

An ``.info`` is not enough: ``go list -m`` reads only that, but a build downloads the zip and verifies it
against the checksum database (sum.golang.org, asked through the proxy). A mirror can serve a module's
``.info`` and refuse its zip (k8s.io/endpointslice v0.32.13 here: 403), or serve a module whose checksum it
cannot (k8s.io/legacy-cloud-providers v0.27.16: the lookup is 404), and the build then fails in
``go mod tidy``. So a staging module counts as served only when its zip answers a HEAD request
(:func:`zip_served`) and the checksum database has it (:func:`checksum_known`, skipped when ``GOSUMDB=off``
or ``GONOSUMDB`` covers it): two small HTTP requests.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from crdscale.cluster import gobuild
from crdscale.cluster.binaries import cached_kube_apiserver
from crdscale.cluster.versions import staging_version, version_tuple
from crdscale.errors import UsageError
from crdscale.fsutil import write_json_atomic
from crdscale.paths import cache_dir

# The newest patch of a minor is under this (1.24 went to .17, 1.27 to .16; later ones stay lower).
MAX_PATCH = 24
_STAGING = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.M)
# Staging modules no kube-apiserver or kube-controller-manager build imports: examples and generators. The
# proxy lacks some of them for some patches (sample-cli-plugin of most 1.27 patches), which is harmless.
UNUSED_STAGING = frozenset(
    {"k8s.io/sample-apiserver", "k8s.io/sample-cli-plugin", "k8s.io/sample-controller", "k8s.io/code-generator"}
)

Lookup = Callable[[str, str], dict]


# One lookup in the checksum database: a few hundred bytes; the proxy answers well under a second here.
SUMDB_TIMEOUT_S = 10.0


def _lookup(path: str, version: str) -> dict:
    """``go list -m -json path@version``, with an ``Error`` also when go could not download the module:
    its zip refused (:func:`zip_served`) or its checksum unknown (:func:`checksum_known`)."""
    info = gobuild.module_info(path, version, timeout_s=30)
    if info.get("Error"):
        return info
    if zip_served(path, version) is False:
        return {"Error": f"{path}@{version}: the proxy serves its .info but refuses its .zip"}
    if checksum_known(path, version) is False:
        return {"Error": f"{path}@{version}: the checksum database has no entry for it (go verifies every download)"}
    return info


# The variables that decide where modules and their checksums come from.
_GO_ENV_NAMES = ("GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOFLAGS")


def _go_env() -> dict[str, str]:
    """``go env`` of the variables that decide where modules and checksums come from (:func:`gobuild.go_env`)."""
    return gobuild.go_env(*_GO_ENV_NAMES)


def _matches_prefix_patterns(patterns: str, path: str) -> bool:
    """Go's GONOSUMDB/GOPRIVATE matching: comma-separated globs, each matching a leading run of path elements."""
    parts = path.split("/")
    for pattern in filter(None, (p.strip() for p in patterns.split(","))):
        n = pattern.count("/") + 1
        if len(parts) >= n and fnmatch.fnmatchcase("/".join(parts[:n]), pattern):
            return True
    return False


def _http_status(url: str, method: str = "GET") -> int | None:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=SUMDB_TIMEOUT_S) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return None


def _http_proxy(env: dict[str, str]) -> str | None:
    """The first HTTP(S) proxy of ``GOPROXY`` (go asks it first), or None (``direct``, ``off``, a file:// one)."""
    proxies = [p for p in re.split(r"[,|]", env.get("GOPROXY") or "") if p.startswith(("http://", "https://"))]
    return proxies[0].rstrip("/") if proxies else None


def zip_served(
    path: str, version: str, *, env: dict[str, str] | None = None, status: Callable[..., int | None] = _http_status
) -> bool | None:
    """Whether the first HTTP proxy of ``GOPROXY`` serves ``path@version``'s zip (a HEAD request: no
    download). A mirror can serve a module's ``.info`` (all ``go list -m`` reads) and refuse its zip
    (k8s.io/endpointslice v0.32.13 here: 403). None when it could not be asked."""
    proxy = _http_proxy(_go_env() if env is None else env)
    if proxy is None:
        return None
    code = status(f"{proxy}/{gobuild.escape_module_path(path)}/@v/{version}.zip", "HEAD")
    if code == 200:
        return True
    if code in (403, 404, 410):
        return False
    return None


def checksum_known(
    path: str, version: str, *, env: dict[str, str] | None = None, status: Callable[[str], int | None] = _http_status
) -> bool | None:
    """Whether ``go`` will find ``path@version``'s checksum: True when the checksum database (through the
    first HTTP proxy of ``GOPROXY``) has it, or when go does not check it (``GOSUMDB=off``, ``GONOSUMDB`` or
    ``GOPRIVATE`` covers the path, ``-insecure``); False when the database answers 404/410; None when it could
    not be asked (no HTTP proxy, no answer): then the build is left to find out."""
    env = _go_env() if env is None else env
    sumdb = (env.get("GOSUMDB") or "sum.golang.org").split()
    if sumdb[0] == "off" or "-insecure" in (env.get("GOFLAGS") or ""):
        return True
    if _matches_prefix_patterns(env.get("GONOSUMDB") or env.get("GOPRIVATE") or "", path):
        return True
    name = sumdb[0].split("+", 1)[0]
    if len(sumdb) > 1:
        base = sumdb[1].rstrip("/")
    else:
        proxy = _http_proxy(env)
        if proxy is None:
            return None
        base = f"{proxy}/sumdb/{name}"
    code = status(f"{base}/lookup/{gobuild.escape_module_path(path)}@{version}")
    if code == 200:
        return True
    if code in (404, 410):
        return False
    return None


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


def staging_errors(version: str, info: dict, lookup: Lookup = _lookup) -> dict[str, dict]:
    """The staging modules of ``k8s.io/kubernetes@version`` (``info``: its ``go list -m -json``) the proxy does
    not serve whole, module -> its lookup's answer (``Error``, and ``Unreachable`` when it could not be asked)."""
    gomod = info.get("GoMod")
    text = Path(gomod).read_text() if gomod and Path(gomod).is_file() else ""
    zero = staging_version(version)
    modules = [m for m in _STAGING.findall(text) if m not in UNUSED_STAGING]
    with ThreadPoolExecutor(max_workers=8) as pool:  # each answer is a round trip to the proxy
        answers = list(pool.map(lambda m: lookup(m, zero), modules))
    return {m: answer for m, answer in zip(modules, answers) if answer.get("Error")}


def missing_staging(version: str, info: dict, lookup: Lookup = _lookup) -> list[str]:
    """The staging modules of ``k8s.io/kubernetes@version`` (``info``: its ``go list -m -json``) the proxy lacks."""
    return list(staging_errors(version, info, lookup))


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


# ---------------------------------------------------------------- the answers, cached

# How long an answer about a release is believed: a newer patch may be released meanwhile, a mirror may fill in
# a module. Each minor's choice (``"1.27": {"version", "passed_over", "checked_at"}``) and each release asked
# about (``"v1.27.16": {"missing", "checked_at"}``) are kept in one file of the cache, one file per Go module
# source: what one proxy (or checksum database) lacks, another may serve.
CHOICE_TTL_S = 24 * 3600.0
CHOICE_CACHE = "history-releases.json"


def choice_cache_path() -> Path:
    """The answers' file (``history-releases-<digest>.json``, one per module source: :func:`gobuild.per_module_source`)."""
    return cache_dir() / gobuild.per_module_source(CHOICE_CACHE)


def read_answers(path: Path) -> dict:
    """The cached answers (:data:`CHOICE_CACHE`); ``{}`` when there are none or the file is unreadable."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_answers(path: Path, answers: dict) -> None:
    try:
        write_json_atomic(path, answers)
    except OSError:
        pass  # a read-only cache only costs the next check its questions again


def _fresh(entry, now: float) -> dict | None:
    """A cached answer still believed (younger than :data:`CHOICE_TTL_S`), else None."""
    if isinstance(entry, dict) and now - float(entry.get("checked_at", 0)) < CHOICE_TTL_S:
        return entry
    return None


def cached_choice(minor: str, answers: dict, now: float, lookup: Lookup | None = None) -> ReleaseChoice:
    """:func:`newest_buildable` of ``minor`` from the cached ``answers`` while believed, else asked (with
    ``lookup``, default :func:`_lookup`) and added to them."""
    entry = _fresh(answers.get(minor), now)
    if entry:
        return ReleaseChoice(minor, entry.get("version"), list(entry.get("passed_over") or []))
    choice = newest_buildable(minor, lookup or _lookup)
    answers[minor] = {"version": choice.version, "passed_over": choice.passed_over, "checked_at": now}
    return choice


def _minor(version: str) -> str:
    """``v1.27.16`` -> ``1.27``."""
    return ".".join(version.lstrip("v").split(".")[:2])


def built_here(version: str) -> bool:
    """A kube-apiserver of release ``version`` was built here already (with any Go): nothing to ask the proxy."""
    if cached_kube_apiserver(version):
        return True
    return any((d / "kube-apiserver").is_file() for d in (cache_dir() / "kube-apiserver").glob(f"{version}-go*"))


@dataclass(frozen=True)
class Unbuildable:
    """A release the Go module proxy does not serve whole: the staging modules it lacks (``missing``), and
    the newest patch of its minor it serves whole (``newest``; None when it serves none)."""

    version: str
    missing: list[str]
    newest: str | None

    @property
    def minor(self) -> str:
        return _minor(self.version)

    def reason(self) -> str:
        """``the Go module proxy (or its checksum database) lacks k8s.io/api v0.27.16 (and 2 more)``."""
        more = f" (and {len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
        return (
            f"the Go module proxy (or its checksum database) lacks {self.missing[0]} "
            f"{staging_version(self.version)}{more}"
        )

    def fix(self, key: str) -> str:
        """The release to take instead, as ``key`` names one: ``--versions`` (a history takes the minor) or a
        scenario key (``kube_version``)."""
        if self.newest is None:
            return f"no {self.minor} patch is served whole"
        if key == "--versions":
            return f"the minor's newest buildable patch: --versions {self.minor} ({self.newest})"
        return f'the newest {self.minor} patch it serves whole: {key} = "{self.newest.lstrip("v")}"'


def unbuildable(version: str, *, lookup: Lookup | None = None, cache_path: Path | None = None) -> Unbuildable | None:
    """Whether release ``version`` (``v1.27.16``) can be built from the Go module proxy's modules: None when it
    can, when a build of it is cached here (it may have been built elsewhere), or when the proxy could not
    say (the build will tell); else what it lacks and its minor's newest patch served whole.

    ``lookup``: :func:`_lookup` by default. The answers are cached with the minors' choices (:data:`CHOICE_TTL_S`
    in ``cache_path``, default :func:`choice_cache_path`): asked again, a release costs a
    file read."""
    if built_here(version):
        return None
    cache_path = cache_path or choice_cache_path()
    answers = read_answers(cache_path)
    found = unbuildable_from(version, answers, time.time(), lookup or _lookup)
    write_answers(cache_path, answers)
    return found


def unbuildable_from(
    version: str, answers: dict, now: float, lookup: Lookup, info: dict | None = None
) -> Unbuildable | None:
    """:func:`unbuildable` (but for a cached build) on the cached ``answers``, added to; ``info``:
    k8s.io/kubernetes' lookup when the caller has it."""
    minor = _minor(version)
    chosen = _fresh(answers.get(minor), now)
    if chosen and chosen.get("version") == version:
        return None  # the minor's newest patch served whole
    entry = _fresh(answers.get(version), now)
    if entry is None:
        info = info if info is not None else lookup("k8s.io/kubernetes", version)
        if info.get("Error"):
            return None  # not served at all, or no answer: the question about k8s.io/kubernetes itself says so
        errors = staging_errors(version, info, lookup)
        if any(answer.get("Unreachable") for answer in errors.values()):
            return None  # not an answer to keep: the build will tell
        entry = answers[version] = {"missing": list(errors), "checked_at": now}
    if not entry.get("missing"):
        return None
    return Unbuildable(version, list(entry["missing"]), cached_choice(minor, answers, now, lookup).version)


def recorded_lookup(path: str | Path) -> Lookup:
    """A lookup answering from a recorded JSON file (``{"k8s.io/api@v0.24.17": {...}}``), for tests."""
    answers = json.loads(Path(path).read_text())

    def lookup(module: str, version: str) -> dict:
        return answers.get(f"{module}@{version}", {"Error": f"{module}@{version}: not found"})

    return lookup
