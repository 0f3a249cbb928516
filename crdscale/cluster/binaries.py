"""Find or build the binaries an experiment needs.

Order of preference for kube-apiserver: an explicit path (flag), a local
Kubernetes source tree when one is asked for (built and cached per commit and
uncommitted diff, see :mod:`crdscale.cluster.kubesource`),
``CRDSCALE_KUBE_APISERVER``, ``$KUBEBUILDER_ASSETS/kube-apiserver`` (the envtest
convention) when no version was asked for, the per-version cache, a build from
Go modules. etcd: an explicit path, ``system`` (an ``etcd`` on PATH, e.g.
Debian's 3.4), or a version built from Go modules (default).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from crdscale.cluster import gobuild, kubesource, patches, toolchain
from crdscale.cluster.versions import (
    DEFAULT_ETCD_VERSION,
    DEFAULT_KUBE_VERSION,
    DEFAULT_VERSITYGW_VERSION,
    KNOWN_SERVED_KUBE_VERSIONS,
    nearest_version,
    normalize_version,
    staging_version,
)
from crdscale.errors import BinaryError, UsageError
from crdscale.fsutil import write_json_atomic
from crdscale.paths import binaries_dir

log = logging.getLogger(__name__)

KUBE_APISERVER_ENV = "CRDSCALE_KUBE_APISERVER"
KUBE_CONTROLLER_MANAGER_ENV = "CRDSCALE_KUBE_CONTROLLER_MANAGER"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBELET_ENV = "CRDSCALE_KUBELET"
KUBELET = "kubelet"
KUBE_SCHEDULER = "kube-scheduler"
ETCD_ENV = "CRDSCALE_ETCD"
# The Go module etcd is built from (its major version is in the path: only v3.x.y exists).
ETCD_MODULE = "go.etcd.io/etcd/server/v3"

KUBE_APISERVER_MAIN = """\
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
"""

# As upstream's cmd/kube-controller-manager (the same in v1.24 and v1.37): the blank imports
# register client-go's metrics (rest_client_*, workqueue_*) and CronJob's time zones.
KUBE_CONTROLLER_MANAGER_MAIN = """\
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
"""

# As upstream's cmd/kubelet (v1.37): the blank imports register the JSON log format and
# client-go's metrics, as in the released kubelet.
KUBELET_MAIN = """\
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
"""

# As upstream's cmd/kube-scheduler (v1.37). A test node's pods need a scheduler to reach it.
KUBE_SCHEDULER_MAIN = """\
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
"""

# The programs built from k8s.io/kubernetes' module beside kube-apiserver, in the same
# cache directory (one go build). A binary joins the cache directory without touching
# the ones already there: only the missing ones are built.
KUBERNETES_MORE_MAINS = {
    KUBE_CONTROLLER_MANAGER: KUBE_CONTROLLER_MANAGER_MAIN,
    KUBELET: KUBELET_MAIN,
    KUBE_SCHEDULER: KUBE_SCHEDULER_MAIN,
}
# Built only for a test node (crdscale.cluster.node), never for a cell's control plane.
NODE_PROGRAMS = (KUBELET, KUBE_SCHEDULER)
# Measured here (2 cores, warm Go build cache, kube-apiserver of the same version built).
KUBERNETES_MORE_DURATIONS = {
    KUBE_CONTROLLER_MANAGER: "3-5 minutes on 2 cores beside a built kube-apiserver",
    KUBELET: "1-2 minutes on 2 cores beside a built kube-apiserver and kube-controller-manager",
    KUBE_SCHEDULER: "1-2 minutes on 2 cores beside a built kube-apiserver and kube-controller-manager",
}

ETCD_MAIN = """\
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
"""

KUBECTL_MAIN = """\
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
"""

# k8s.io/kubernetes' go.mod: `k8s.io/api => ./staging/src/k8s.io/api` (module, directory in the tree).
_STAGING_LINE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+(\./staging/\S+)", re.M)


@dataclass(frozen=True)
class Binary:
    """A resolved binary: where it is, what version it claims, and where it came from."""

    path: Path
    version: str
    source: str  # "flag", "env", "kubebuilder-assets", "cache", "built", "system"
    # For a build from a local source tree: what went in (KubeSource.facts()), for run manifests.
    built_from: dict | None = None


def _explicit(path: str | os.PathLike, source: str, version: str = "unknown") -> Binary:
    p = Path(path).expanduser()
    if not (p.is_file() and os.access(p, os.X_OK)):
        raise BinaryError(f"{p} (from {source}) is not an executable file")
    return Binary(p.resolve(), version, source)


def _version_ldflags(version: str, commit: str, build_date: str, tree_state: str = "clean") -> list[str]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    # /version reports component-base's values; client-go keeps its own copy.
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitCommit={commit}",
            f"-X {pkg}.gitTreeState={tree_state}",
            f"-X {pkg}.buildDate={build_date}",
        ]
    return flags


def _download_kubernetes_module(version: str) -> dict:
    info = gobuild.module_download("k8s.io/kubernetes", version)
    if info.get("Error"):
        reason = info["Error"].splitlines()[-1].strip()
        suggestion = nearest_version(version, KNOWN_SERVED_KUBE_VERSIONS)
        hint = f"; try --kube-version {suggestion.lstrip('v')}" if suggestion else ""
        raise BinaryError(f"the Go module proxy does not serve k8s.io/kubernetes {version} ({reason}){hint}")
    return info


def kube_apiserver_program(
    version: str, *, module_info: dict, changes: patches.BuildChanges | None = None, go: str = "local"
) -> gobuild.GoProgram:
    """The throwaway module that builds kube-apiserver ``version``.

    ``module_info`` is ``go mod download -json`` output for ``k8s.io/kubernetes@version``:
    its go.mod lists the staging modules (``=> ./staging/...``), each replaced here
    by the published module at ``v0.Y.Z``. With ``changes``, each module a diff touches
    is replaced instead by its patched copy (:func:`crdscale.cluster.patches.patched_module_paths`;
    made by :func:`kube_apiserver`), the build tags are passed to ``go build``, and the cache
    directory is named by what changed (:meth:`~crdscale.cluster.patches.BuildChanges.cache_name`).
    The modules keep the versions the release selects, so Go's build cache reuses every
    package the diffs leave alone (see :func:`kube_apiserver_source_program`).
    """
    changes = changes or patches.BuildChanges()
    # ``go``: "local" (the go on PATH), "release" (the Go the release names, crdscale.cluster.toolchain)
    # or a Go version; any but local builds into its own cache directory (``v1.24.0-go1.18.1``).
    chain = release_toolchain(version, module_info, go)
    gomod_text = Path(module_info["GoMod"]).read_text()
    staging = _staging_modules(gomod_text, f"k8s.io/kubernetes {version}")
    zero = staging_version(version)
    info = dict(module_info)
    if info.get("Info") and Path(info["Info"]).is_file():  # the .info file carries Time and Origin
        info.update({k: v for k, v in json.loads(Path(info["Info"]).read_text()).items() if k in ("Time", "Origin")})
    commit = (info.get("Origin") or {}).get("Hash", "unknown")
    build_date = info.get("Time") or "1970-01-01T00:00:00Z"
    replaces = {mod: f"{mod} {zero}" for mod in staging}
    patched = patches.patched_module_paths(changes.diffs, version) if changes.diffs else {}
    replaces.update({mod: str(path) for mod, path in patched.items()})
    usual = "8-11 minutes on 2 cores for kube-apiserver, 3-5 more for kube-controller-manager"
    if changes.diffs:
        # Measured for the known-cost fixture (tests/data/patches), which patches k8s.io/apiserver's
        # watch cache: everything importing it compiles again.
        usual = "5-10 minutes on 2 cores after a build of the release, as long as a cold build without one"
    return gobuild.GoProgram(
        binary_name="kube-apiserver",
        out_dir=binaries_dir("kube-apiserver", changes.cache_name(version) + (f"-{chain.version}" if chain else "")),
        go=str(chain.go) if chain else "",
        go_directive=_kubernetes_go_line(gomod_text),
        requires={"k8s.io/kubernetes": version},
        replaces=replaces,
        main_go=KUBE_APISERVER_MAIN,
        more_mains=dict(KUBERNETES_MORE_MAINS),
        more_durations=dict(KUBERNETES_MORE_DURATIONS),
        ldflags=_version_ldflags(version, commit, build_date, "dirty" if changes.diffs else "clean"),
        usual_duration=usual,
        origin="Go modules with " + ", ".join(d.name for d in changes.diffs) if changes.diffs else "Go modules",
        tags=changes.tags,
    )


@dataclass(frozen=True)
class Toolchain:
    """The Go a release is built with when not the local one: ``version`` (go1.18.1), its ``go`` binary,
    and ``release``: the Go the release itself names."""

    version: str
    go: Path
    release: str


def release_toolchain(version: str, module_info: dict, go: str = "local") -> Toolchain | None:
    """The toolchain ``go`` asks for release ``version`` (None for the local go), fetched from the module proxy."""
    if go in ("", "local"):
        return None
    named = toolchain.release_go_version(module_info["Dir"]).version
    if go == "release":
        wanted = toolchain.release_toolchain_version(named)
        if wanted != named:
            log.warning(
                f"{version} names {named}, a toolchain the Go module proxy does not serve; building it with "
                f"{wanted}, the newest served patch of that Go (its provenance says go_is_release: false)"
            )
    else:
        wanted = toolchain.check_toolchain_version(go)
    if wanted == gobuild.go_version():
        # This machine's Go is the one asked for: the local build (and its cache directory) is that build,
        # not a second 10-50 minute one (v1.37.1 names go1.26.8, the Go here).
        return None
    return Toolchain(wanted, toolchain.toolchain_go(wanted), named)


def go_facts(program: gobuild.GoProgram, module_info: dict) -> dict:
    """Which Go built ``program``, the Go its release names, and whether they are the same."""
    release = toolchain.release_go_version(module_info["Dir"])
    built_with = gobuild.go_version(program.go or None)
    return {"go": built_with, "release_go": release.version, "release_go_source": release.source,
            "go_is_release": built_with == release.version}  # fmt: skip


def _staging_modules(gomod_text: str, what: str) -> dict[str, str]:
    """k8s.io/kubernetes' staging modules from its go.mod: module path -> directory in the tree."""
    staging = dict(_STAGING_LINE.findall(gomod_text))
    if not staging:
        raise BinaryError(f"{what}: no ./staging replacements found in its go.mod")
    return staging


def _kubernetes_go_line(gomod_text: str) -> str:
    return next((line.strip() for line in gomod_text.splitlines() if line.startswith("go ")), "go 1.22")


def kube_apiserver_source_program(source: kubesource.KubeSource) -> gobuild.GoProgram:
    """The throwaway module that builds kube-apiserver from the local tree ``source``.

    It requires k8s.io/kubernetes at the tree's base release and replaces it
    with the tree. With ``-trimpath`` Go keys a compiled package by module
    path@version, Go version and file contents, not by directory, so every
    package the patch leaves alone has the same build-cache key as in the
    released build and only the patched packages and their importers are
    compiled again. The staging modules (k8s.io/apiserver, ...) come from the
    tree's ``staging/src/k8s.io`` when it has one, else from the base
    release's published ``v0.Y.Z`` modules, as in :func:`kube_apiserver_program`.
    From the tree they are labelled with the versions the released build
    selects, for the same reason (see :func:`_staging_selected_at_release`).
    """
    gomod_text = (source.dir / "go.mod").read_text()
    staging = _staging_modules(gomod_text, str(source.dir))
    zero = _staging_version_or_none(source.base_version)
    requires = {kubesource.KUBERNETES_MODULE: source.base_version}
    if source.staging_in_tree:
        replaces = {mod: str(source.dir / rel) for mod, rel in staging.items()}
        if zero:
            requires.update({mod: zero for mod in _staging_selected_at_release(source.dir, staging)})
    elif zero:
        replaces = {mod: f"{mod} {zero}" for mod in staging}
    else:
        raise BinaryError(
            f"{source.dir} has no {kubesource.STAGING_DIR} and its base {source.base_version} is not "
            f"a release whose staging modules are published; use a full checkout"
        )
    return gobuild.GoProgram(
        binary_name="kube-apiserver",
        out_dir=binaries_dir("kube-apiserver", source.cache_name),
        go_directive=_kubernetes_go_line(gomod_text),
        requires=requires,
        replaces={kubesource.KUBERNETES_MODULE: str(source.dir), **replaces},
        main_go=KUBE_APISERVER_MAIN,
        more_mains=dict(KUBERNETES_MORE_MAINS),
        ldflags=_version_ldflags(
            source.version, source.commit or "unknown", source.commit_date, "dirty" if source.dirty else "clean"
        ),
        # Measured for a one-line patch in cmd/kube-apiserver/app; a patch deep in staging
        # (apimachinery, apiserver) recompiles everything importing it, up to a cold build.
        usual_duration="under a minute after a build of the release it is based on, 10-25 minutes cold, on 2 cores",
        origin=str(source.dir),
    )


_ZERO_REQUIREMENT = re.compile(r"(?:^|\s)(k8s\.io/[\w.-]+)\s+v0\.0\.0(?=\s|$)", re.M)


def _staging_selected_at_release(tree: Path, staging: dict[str, str]) -> set[str]:
    """The staging modules that the released build selects at ``v0.Y.Z`` rather than ``v0.0.0``.

    In the tree every staging go.mod requires its siblings at ``v0.0.0``; the
    published modules require them at ``v0.Y.Z``. So in the released build a
    staging module another staging module requires is selected at ``v0.Y.Z``,
    and one only k8s.io/kubernetes requires stays at the ``v0.0.0`` of its
    go.mod (checked against v1.37.1's build list). Requiring the same here keeps
    each package's ``module path@version`` -- part of Go's cache key -- as in the
    released build; with all at ``v0.37.1`` a one-line patch took 4.9 min instead of 40 s.
    """
    wanted: set[str] = set()
    for rel in staging.values():
        try:
            text = (tree / rel / "go.mod").read_text()
        except OSError:
            continue
        wanted.update(m for m in _ZERO_REQUIREMENT.findall(text) if m in staging)
    return wanted


def _staging_version_or_none(version: str) -> str | None:
    """``v0.Y.Z`` for a release ``v1.Y.Z``; ``None`` for a pre-release such as ``v1.38.0-alpha.0``."""
    try:
        return staging_version(version)
    except UsageError:
        return None


def kube_apiserver_from_source(tree: str | os.PathLike, *, base_version: str | None = None) -> Binary:
    """kube-apiserver built from the Kubernetes source tree ``tree``, cached by what went in
    (commit and uncommitted diff, or the files of a tree without git; see
    :mod:`crdscale.cluster.kubesource`). ``base_version`` (default: the pinned one) is the
    release a tree without git tags is based on. ``Binary.built_from`` says what went in."""
    fallback = normalize_version(base_version or DEFAULT_KUBE_VERSION)
    source = kubesource.read_source(tree, fallback_version=fallback)
    program = kube_apiserver_source_program(source)
    if program.binary.is_file() and os.access(program.binary, os.X_OK):
        return Binary(program.binary, source.version, "cache", source.facts())
    write_json_atomic(program.out_dir / "source.json", source.facts())  # the cache directory explains itself
    path = gobuild.build(program, names=[n for n in program.mains if n not in NODE_PROGRAMS])
    # Edited while Go compiled it: the binary may hold either state, so it must not be cached as this one.
    if kubesource.read_source(tree, fallback_version=fallback) != source:
        path.unlink(missing_ok=True)
        raise BinaryError(
            f"{source.dir} changed while kube-apiserver was being built from it; run again to build its new state"
        )
    return Binary(path, source.version, "built", source.facts())


def kube_apiserver(
    version: str | None = None,
    *,
    binary: str | None = None,
    source: str | os.PathLike | None = None,
    changes: patches.BuildChanges | None = None,
    go: str = "local",
) -> Binary:
    """Resolve kube-apiserver: explicit ``binary``, a build from the source tree ``source``,
    env, envtest assets, cache, or a fresh build of a released version.

    ``version`` ``None`` means the pinned default (and allows ``KUBEBUILDER_ASSETS``); with
    ``source`` it is the release a tree without git tags is based on. ``source`` wins over
    ``$CRDSCALE_KUBE_APISERVER``: a tree asked for by name must be what runs. ``changes``
    (diffs and build tags on the released version) are built and cached apart from the release;
    ``Binary.built_from`` is then their provenance.
    """
    if binary and source:
        raise UsageError("give either a kube-apiserver binary or a Kubernetes source tree to build, not both")
    if changes or go not in ("", "local"):
        if binary or source:
            raise UsageError(
                "patches, build tags and target.go apply to a released version built from Go modules, "
                "not to a given kube-apiserver binary or source tree"
            )
        version = normalize_version(version or DEFAULT_KUBE_VERSION)
        return _kube_apiserver_changed(version, changes or patches.BuildChanges(), go)
    if binary:
        return _explicit(binary, "flag", version or "unknown")
    if source:
        return kube_apiserver_from_source(source, base_version=version)
    if os.environ.get(KUBE_APISERVER_ENV):
        return _explicit(os.environ[KUBE_APISERVER_ENV], f"${KUBE_APISERVER_ENV}", version or "unknown")
    if version is None and os.environ.get("KUBEBUILDER_ASSETS"):
        candidate = Path(os.environ["KUBEBUILDER_ASSETS"]) / "kube-apiserver"
        if candidate.is_file():
            return _explicit(candidate, "kubebuilder-assets")
    version = normalize_version(version or DEFAULT_KUBE_VERSION)
    cached = cached_kube_apiserver(version)
    if cached:
        return Binary(cached, version, "cache")
    info = _download_kubernetes_module(version)
    program = kube_apiserver_program(version, module_info=info)
    # The kubelet only when a test node asks for it (kubelet()): cells never run one.
    path = gobuild.build(program, names=[n for n in program.mains if n not in NODE_PROGRAMS])
    return Binary(path, version, "built")


def _kube_apiserver_changed(version: str, changes: patches.BuildChanges, go: str = "local") -> Binary:
    """kube-apiserver ``version`` with ``changes`` (and built by the Go ``go`` names), from the cache
    or built (the patched module copies made first). A diff that does not apply stops it with one
    line before any build."""
    facts = changes.provenance() if changes else {}
    local = go in ("", "local")
    cached = cached_kube_apiserver(version, changes) if local else None
    if cached:
        return Binary(cached, version, "cache", facts)
    info = _download_kubernetes_module(version)
    if changes.diffs:
        patches.patched_modules(changes.diffs, version)
    program = kube_apiserver_program(version, module_info=info, changes=changes, go=go)
    if not local:
        facts.update(go_facts(program, info))
    if not program.missing([program.binary_name]):
        return Binary(program.binary, version, "cache", facts)
    write_json_atomic(program.out_dir / "changes.json", facts)  # the cache directory explains itself
    path = gobuild.build(program, names=[n for n in program.mains if n not in NODE_PROGRAMS])
    return Binary(path, version, "built", facts)


def cached_kube_apiserver(version: str, changes: patches.BuildChanges | None = None) -> Path | None:
    """The kube-apiserver ``version`` (``vX.Y.Z``, with ``changes``) built earlier, or ``None``."""
    name = changes.cache_name(version) if changes else version
    cached = binaries_dir("kube-apiserver", name) / "kube-apiserver"
    return cached if cached.is_file() and os.access(cached, os.X_OK) else None


def built_with_go(binary: Path) -> str | None:
    """The Go a cached build was built with, as its ``build.json`` records it (None when it does not)."""
    try:
        return json.loads((binary.parent / "build.json").read_text()).get("go")
    except (OSError, ValueError, AttributeError):
        return None


def release_go_named(version: str) -> str | None:
    """The Go release ``version``'s own sources name, when its module is downloaded here (nothing is fetched)."""
    source = gobuild.downloaded_module_dir("k8s.io/kubernetes", version)
    if source is None:
        return None
    try:
        return toolchain.release_go_version(source).version
    except BinaryError:
        return None


def cached_build(version: str, changes: patches.BuildChanges | None = None, go: str = "local") -> Path | None:
    """The kube-apiserver a run of release ``version`` with ``changes`` and ``target.go`` = ``go`` would start,
    when it was built here already; None when it was not, or when which Go ``"release"`` means is not known
    without a download (the release's module not fetched yet). Nothing is downloaded or built.

    Each Go builds into a cache directory of its own (``v1.24.0-go1.18.1``) unless it is this machine's
    Go, whose build is the ordinary one (as :func:`release_toolchain` decides)."""
    if go in ("", "local"):
        return cached_kube_apiserver(version, changes)
    if go == "release":
        wanted = release_go_named(version)
        if wanted is None:
            return None
    else:
        wanted = toolchain.normalize_go_version(go)
    if wanted == gobuild.go_version():
        return cached_kube_apiserver(version, changes)
    name = changes.cache_name(version) if changes else version
    candidates = [binaries_dir("kube-apiserver", f"{name}-{wanted}") / "kube-apiserver"]
    if go == "release":  # built with a later patch of its Go when the proxy lacks the one it names
        minor = ".".join(wanted.split(".")[:2])
        later = binaries_dir("kube-apiserver", name).parent.glob(f"{name}-{minor}.*/kube-apiserver")
        candidates += sorted(later, key=lambda p: toolchain.go_version_tuple(p.parent.name[len(name) + 1 :]))[::-1]
    return next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


def kube_controller_manager(
    version: str | None = None,
    *,
    source: str | os.PathLike | None = None,
    changes: patches.BuildChanges | None = None,
    go: str = "local",
) -> Binary:
    """Resolve kube-controller-manager: ``$CRDSCALE_KUBE_CONTROLLER_MANAGER``, else built from
    the same modules as kube-apiserver ``version`` (or the source tree ``source``, or the
    release with ``changes``) into the same cache directory. When kube-apiserver is already
    there only kube-controller-manager is built (Go's build cache holds the packages they share)."""
    if os.environ.get(KUBE_CONTROLLER_MANAGER_ENV):
        return _explicit(
            os.environ[KUBE_CONTROLLER_MANAGER_ENV], f"${KUBE_CONTROLLER_MANAGER_ENV}", version or "unknown"
        )
    if source:
        tree = kubesource.read_source(source, fallback_version=normalize_version(version or DEFAULT_KUBE_VERSION))
        program = kube_apiserver_source_program(tree)
        found, kcm_version, built_from = "cache", tree.version, tree.facts()
    else:
        kcm_version = normalize_version(version or DEFAULT_KUBE_VERSION)
        built_from = changes.provenance() if changes else None
        cached = binaries_dir("kube-apiserver", changes.cache_name(kcm_version) if changes else kcm_version)
        local = go in ("", "local")
        if (
            local
            and (cached / KUBE_CONTROLLER_MANAGER).is_file()
            and os.access(cached / KUBE_CONTROLLER_MANAGER, os.X_OK)
        ):
            return Binary(cached / KUBE_CONTROLLER_MANAGER, kcm_version, "cache", built_from)
        if changes and changes.diffs:
            patches.patched_modules(changes.diffs, kcm_version)
        program = kube_apiserver_program(
            kcm_version, module_info=_download_kubernetes_module(kcm_version), changes=changes, go=go
        )
        found = "cache"
    if program.missing([KUBE_CONTROLLER_MANAGER]):
        gobuild.build(program, names=[KUBE_CONTROLLER_MANAGER])
        found = "built"
    return Binary(program.binary_path(KUBE_CONTROLLER_MANAGER), kcm_version, found, built_from)


def node_binaries(version: str | None = None) -> dict[str, Binary]:
    """The kubelet and kube-scheduler of a test node (:mod:`crdscale.cluster.node`), name ->
    :class:`Binary`: ``$CRDSCALE_KUBELET`` for the kubelet, else built from the same modules as
    kube-apiserver ``version`` into the same cache directory -- by one ``go build`` with
    whatever else of that directory is missing, so the binaries already there stay as they are."""
    node_version = normalize_version(version or DEFAULT_KUBE_VERSION)
    found: dict[str, Binary] = {}
    if os.environ.get(KUBELET_ENV):
        found[KUBELET] = _explicit(os.environ[KUBELET_ENV], f"${KUBELET_ENV}", node_version)
    out_dir = binaries_dir("kube-apiserver", node_version)
    for name in NODE_PROGRAMS:
        if name not in found and os.access(out_dir / name, os.X_OK) and (out_dir / name).is_file():
            found[name] = Binary(out_dir / name, node_version, "cache")
    if len(found) < len(NODE_PROGRAMS):
        program = kube_apiserver_program(node_version, module_info=_download_kubernetes_module(node_version))
        # With kube-apiserver missing too, one go build makes them all (shared packages compile once).
        gobuild.build(program, names=program.missing())
        for name in NODE_PROGRAMS:
            found.setdefault(name, Binary(program.binary_path(name), node_version, "built"))
    return found


def etcd_program(version: str) -> gobuild.GoProgram:
    return gobuild.GoProgram(
        binary_name="etcd",
        out_dir=binaries_dir("etcd", version),
        go_directive="go 1.24",
        requires={ETCD_MODULE: version},
        main_go=ETCD_MAIN,
        usual_duration="2-4 minutes on 2 cores",
    )


def system_etcd() -> str | None:
    """The etcd on PATH (Debian's etcd-server installs /usr/bin/etcd), or ``None``."""
    return shutil.which("etcd") or ("/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None)


def etcd(spec: str | None = None) -> Binary:
    """Resolve etcd from ``spec``: ``None`` (default version), ``"system"`` (etcd on PATH,
    e.g. Debian's ``etcd-server`` 3.4), a version such as ``3.6.16``, or a path."""
    spec = spec or os.environ.get(ETCD_ENV) or DEFAULT_ETCD_VERSION
    if spec == "system":
        found = system_etcd()
        if not found:
            raise BinaryError(
                "no etcd on PATH for --etcd system; install Debian's etcd-server (apt-get install etcd-server)"
            )
        return Binary(Path(found), _etcd_reported_version(Path(found)), "system")
    if "/" in spec:
        b = _explicit(spec, "flag")
        return Binary(b.path, _etcd_reported_version(b.path), b.source)
    version = normalize_version(spec)
    return _cached_or_built(etcd_program(version), ETCD_MODULE, version)


def _cached_or_built(program: gobuild.GoProgram, module: str, version: str) -> Binary:
    """``program``'s cached binary, else built from ``module`` at ``version`` once the Go module
    proxy has said it serves it (a one-line error instead of a failed build several minutes in)."""
    if program.binary.is_file() and os.access(program.binary, os.X_OK):
        return Binary(program.binary, version, "cache")
    info = gobuild.module_download(module, version)
    if info.get("Error"):
        raise BinaryError(f"the Go module proxy does not serve {module} {version}: {info['Error'].splitlines()[-1]}")
    return Binary(gobuild.build(program), version, "built")


def _etcd_reported_version(path: Path) -> str:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.search(r"etcd Version:\s*(\S+)", out)
    return ("v" + m.group(1).lstrip("v")) if m else "unknown"


def prometheus(path: str | None = None) -> Binary:
    """A ``prometheus`` binary: explicit path, on PATH, or Debian's ``/usr/bin/prometheus``."""
    if path:
        return _explicit(path, "flag")
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None)
    if not found:
        raise BinaryError(
            "no prometheus binary found; install Debian's prometheus package (apt-get install prometheus)"
        )
    try:
        out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=20)
        m = re.search(r"version (\S+)", out.stdout + out.stderr)
        version = m.group(1) if m else "unknown"
    except (OSError, subprocess.SubprocessError):
        version = "unknown"
    return Binary(Path(found), version, "system")


def _go_directive(gomod_text: str, floor: str = "1.24") -> str:
    """The ``go`` line for a throwaway module requiring a module whose go.mod is ``gomod_text``:
    that module's own line (``go 1.26.0``) when it is newer than ``floor``, else ``go <floor>``
    (old modules say ``go 1.16``)."""
    m = re.search(r"^go\s+(\d+(?:\.\d+){1,2})\s*$", gomod_text, re.M)
    if m:
        theirs = m.group(1)
        if tuple(map(int, theirs.split("."))) > tuple(map(int, floor.split("."))):
            return f"go {theirs}"
    return f"go {floor}"


def kubectl_program(version: str, *, gomod_text: str = "") -> gobuild.GoProgram:
    """The throwaway module that builds kubectl ``version`` (``vX.Y.Z``) from ``k8s.io/kubectl v0.Y.Z``.

    ``gomod_text`` is that module's go.mod (its ``go`` line decides ours).
    """
    zero = staging_version(version)
    return gobuild.GoProgram(
        binary_name="kubectl",
        out_dir=binaries_dir("kubectl", version),
        go_directive=_go_directive(gomod_text),
        requires={"k8s.io/kubectl": zero, "k8s.io/component-base": zero},
        main_go=KUBECTL_MAIN,
        ldflags=_version_ldflags(version, "unknown", "1970-01-01T00:00:00Z"),
        usual_duration="3-5 minutes on 2 cores",
    )


def kubectl(version: str | None = None) -> Binary:
    """A real kubectl: on PATH if it is a genuine build (only when no ``version`` is asked for),
    else built from Go modules (``k8s.io/kubectl`` at the staging version matching ``version``)
    and cached per version."""
    found = shutil.which("kubectl")
    if found and version is None:
        try:
            out = subprocess.run(
                [found, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=20
            ).stdout
            m = re.search(r'"gitVersion":\s*"(v\d+\.\d+\.\d+)"', out)
            if m:  # builds with a suffix (e.g. "-dispatcher") are wrappers, not kubectl
                return Binary(Path(found), m.group(1), "system")
        except (OSError, subprocess.SubprocessError):
            pass
    version = normalize_version(version or DEFAULT_KUBE_VERSION)
    cached = binaries_dir("kubectl", version) / "kubectl"
    if cached.is_file() and os.access(cached, os.X_OK):
        return Binary(cached, version, "cache")
    zero = staging_version(version)
    info = gobuild.module_download("k8s.io/kubectl", zero)
    if info.get("Error"):
        raise BinaryError(f"the Go module proxy does not serve k8s.io/kubectl {zero}: {info['Error'].splitlines()[-1]}")
    program = kubectl_program(version, gomod_text=Path(info["GoMod"]).read_text())
    return Binary(gobuild.build(program), version, "built")


def crdscale_client() -> Binary:
    """crdscale-client (:mod:`crdscale.cluster.goclient`): client-go informers, discovery and
    cache-memory modes, built from Go modules and cached per client-go version and source."""
    # lazy: would bring yaml into --help
    from crdscale.cluster import goclient

    program = goclient.program()
    source = "cache" if program.binary.is_file() else "built"
    return Binary(goclient.binary(), program.out_dir.name, source)


# versitygw: an S3 gateway over a local directory (its posix backend), the real S3-compatible
# server the results-store tests talk to. Its main package is the module's own cmd/versitygw,
# which cannot be imported: the throwaway module only names it in a tools file and builds it.
VERSITYGW_MODULE = "github.com/versity/versitygw"
VERSITYGW_PACKAGE = VERSITYGW_MODULE + "/cmd/versitygw"
VERSITYGW_TOOLS_GO = f"""\
//go:build tools

package tools

import _ "{VERSITYGW_PACKAGE}"
"""


def versitygw_program(version: str = DEFAULT_VERSITYGW_VERSION) -> gobuild.GoProgram:
    return gobuild.GoProgram(
        binary_name="versitygw",
        out_dir=binaries_dir("versitygw", version),
        go_directive="go 1.25.0",  # versitygw v1.8.0's own go line
        requires={VERSITYGW_MODULE: version},
        main_go=VERSITYGW_TOOLS_GO,
        build_package=VERSITYGW_PACKAGE,
        usual_duration="3-4 minutes on 2 cores",
    )


def versitygw(version: str | None = None) -> Binary:
    """versitygw (an S3-compatible gateway; tests serve a directory as a bucket store with it),
    built from Go modules and cached per version."""
    version = normalize_version(version or DEFAULT_VERSITYGW_VERSION)
    return _cached_or_built(versitygw_program(version), VERSITYGW_MODULE, version)


# The OCI distribution registry (CNCF distribution), for testing `crdscale image build --push`
# against a real registry. Not built by bootstrap: 15 min on the loaded 2-core machine.
REGISTRY_MODULE = "github.com/distribution/distribution/v3"
REGISTRY_PACKAGE = REGISTRY_MODULE + "/cmd/registry"
DEFAULT_REGISTRY_VERSION = "v3.1.2"


def registry_program(version: str = DEFAULT_REGISTRY_VERSION) -> gobuild.GoProgram:
    return gobuild.GoProgram(
        binary_name="registry",
        out_dir=binaries_dir("registry", version),
        go_directive="go 1.25.0",
        requires={REGISTRY_MODULE: version},
        main_go=VERSITYGW_TOOLS_GO.replace(VERSITYGW_PACKAGE, REGISTRY_PACKAGE),
        build_package=REGISTRY_PACKAGE,
        usual_duration="5-15 minutes on 2 cores",
    )


def cached_registry(version: str = DEFAULT_REGISTRY_VERSION) -> Path | None:
    """The registry built earlier (``crdscale binaries --registry``), or ``None``."""
    path = registry_program(version).binary
    return path if path.is_file() and os.access(path, os.X_OK) else None


def registry(version: str = DEFAULT_REGISTRY_VERSION) -> Binary:
    program = registry_program(version)
    if cached_registry(version):
        return Binary(program.binary, version, "cache")
    return Binary(gobuild.build(program), version, "built")
