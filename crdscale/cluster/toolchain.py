"""The Go toolchain a Kubernetes release was built with, fetched from the Go module proxy.

A difference between two releases built with this machine's Go mixes Kubernetes' changes with the Go
runtime's (a release of 2022 ran go1.18's GC pacer, without ``GOMEMLIMIT``). So a release can be built
with its own Go (``target.go = "release"``):

- **Which Go**: read from the release's own sources, in the order Kubernetes itself keeps it:
  ``.go-version`` (1.28 on), ``build/build-image/cross/VERSION`` (``v1.24.0-go1.18.1-bullseye.0``), the
  ``golang: upstream version`` entry of ``build/dependencies.yaml``; the ``go`` line of ``go.mod`` is only
  a minimum, used last and said so.
- **Getting it**: the toolchain is a module, ``golang.org/toolchain@v0.0.1-go1.18.10.linux-amd64``, which
  ``go mod download`` puts into the module cache like any other (no release-binary download); its ``bin/go``
  is then the compiler, with the module directory as its GOROOT.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from crdscale.cluster import gobuild
from crdscale.errors import BinaryError, UsageError

TOOLCHAIN_MODULE = "golang.org/toolchain"
CHOICES = ("release", "local")  # or an explicit version such as "1.18.10" / "go1.18.10"
_GO_VERSION = re.compile(r"^(?:go)?(\d+)\.(\d+)(?:\.(\d+))?$")
_CROSS = re.compile(r"-go(\d+\.\d+(?:\.\d+)?)(?:-|$)")


@dataclass(frozen=True)
class ReleaseGo:
    """The Go a release names: ``version`` (``go1.18.1``) and where it was read (``source``); ``exact`` is
    False when only ``go.mod``'s minimum was found."""

    version: str
    source: str
    exact: bool = True


def normalize_go_version(text: str) -> str:
    """``1.18.10``, ``go1.18.10`` -> ``go1.18.10``; UsageError (one line) for anything else."""
    match = _GO_VERSION.match(str(text).strip())
    if not match:
        raise UsageError(f"{text!r} is not a Go version (e.g. 1.18.10), 'release' or 'local'")
    return "go" + ".".join(g for g in match.groups() if g is not None)


def go_version_tuple(version: str) -> tuple[int, int, int]:
    match = _GO_VERSION.match(version)
    if not match:
        raise ValueError(f"not a Go version: {version!r}")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def release_go_version(source_dir: str | os.PathLike) -> ReleaseGo:
    """The Go version a Kubernetes release's sources (the ``k8s.io/kubernetes`` module directory) name."""
    root = Path(source_dir)
    dot = root / ".go-version"
    if dot.is_file() and dot.read_text().strip():
        return ReleaseGo(normalize_go_version(dot.read_text().strip()), ".go-version")
    cross = root / "build" / "build-image" / "cross" / "VERSION"
    if cross.is_file():
        match = _CROSS.search(cross.read_text().strip())
        if match:
            return ReleaseGo(normalize_go_version(match[1]), "build/build-image/cross/VERSION")
    deps = root / "build" / "dependencies.yaml"
    if deps.is_file():
        match = re.search(r'name:\s*"golang: upstream version"\s*\n\s*version:\s*([0-9.]+)', deps.read_text())
        if match:
            return ReleaseGo(normalize_go_version(match[1]), "build/dependencies.yaml")
    gomod = root / "go.mod"
    if gomod.is_file():
        match = re.search(r"^go (\d+\.\d+(?:\.\d+)?)\s*$", gomod.read_text(), re.M)
        if match:
            return ReleaseGo(normalize_go_version(match[1]), "go.mod (a minimum)", exact=False)
    raise BinaryError(f"{root}: names no Go version (.go-version, build/build-image/cross/VERSION, go.mod)")


def _platform() -> str:
    machine = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
    return f"{platform.system().lower()}-{machine}"


def toolchain_module_version(go_version: str) -> str:
    """``go1.18.10`` -> ``v0.0.1-go1.18.10.linux-amd64`` (this machine's platform)."""
    return f"v0.0.1-{normalize_go_version(go_version)}.{_platform()}"


def _go(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [gobuild.go_binary(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, GOFLAGS="-mod=mod", GOWORK="off", GO111MODULE="on", GOTOOLCHAIN="local"),
        cwd=os.path.expanduser("~"),
    )


@functools.lru_cache(maxsize=1)
def available_toolchains() -> tuple[str, ...]:
    """Every Go version the module proxy serves a toolchain of for this platform (``go1.18.10``, ...)."""
    try:
        proc = _go("list", "-m", "-versions", TOOLCHAIN_MODULE, timeout=60)
    except subprocess.TimeoutExpired:
        raise BinaryError("the Go module proxy did not list golang.org/toolchain within 60 s") from None
    if proc.returncode != 0:
        raise BinaryError(f"go list -m -versions {TOOLCHAIN_MODULE}: {proc.stderr.strip().splitlines()[-1:]}")
    suffix = f".{_platform()}"
    versions = []
    for v in proc.stdout.split()[1:]:
        name = v[len("v0.0.1-") : -len(suffix)] if v.startswith("v0.0.1-go") and v.endswith(suffix) else ""
        if _GO_VERSION.match(name):  # releases only: no betas or release candidates
            versions.append(name)
    return tuple(versions)


def check_toolchain_version(go_version: str, served: tuple[str, ...] | None = None) -> str:
    """``go_version`` normalised, or UsageError naming the nearest served ones when the proxy has no such toolchain."""
    version = normalize_go_version(go_version)
    served = available_toolchains() if served is None else served
    if version in served:
        return version
    try:
        minor = go_version_tuple(version)[:2]
    except ValueError:
        minor = None
    same_minor = [v for v in served if minor and go_version_tuple(v)[:2] == minor]
    hint = f"; served for go{minor[0]}.{minor[1]}: {', '.join(same_minor)}" if same_minor else ""
    raise UsageError(f"the Go module proxy has no toolchain {version}{hint}")


def newest_patch(go_version: str, served: tuple[str, ...] | None = None) -> str:
    """The newest served toolchain of ``go_version``'s minor (a release names the patch it shipped with; a
    later patch of the same minor has the same GC and runtime behaviour and its security fixes)."""
    served = available_toolchains() if served is None else served
    minor = go_version_tuple(normalize_go_version(go_version))[:2]
    same = [v for v in served if go_version_tuple(v)[:2] == minor]
    if not same:
        raise UsageError(f"the Go module proxy serves no toolchain of go{minor[0]}.{minor[1]}")
    return max(same, key=go_version_tuple)


def release_toolchain_version(named: str, served: tuple[str, ...] | None = None) -> str:
    """The toolchain that builds a release whose sources name Go ``named``: that one when the module proxy serves
    it, else the newest served patch of its minor (v1.26.13 names go1.20.13, which the proxy does not serve as a
    toolchain; go1.20.14 has the same GC and runtime). A build's provenance says which (``go_is_release``)."""
    served = available_toolchains() if served is None else served
    version = normalize_go_version(named)
    return version if version in served else newest_patch(version, served)


def toolchain_go(go_version: str) -> Path:
    """The ``go`` binary of toolchain ``go_version``, downloaded into the module cache once (a few hundred MB)."""
    version = normalize_go_version(go_version)
    info = gobuild.module_download(TOOLCHAIN_MODULE, toolchain_module_version(version))
    if info.get("Error") or not info.get("Dir"):
        raise BinaryError(f"Go toolchain {version}: {str(info.get('Error', 'no directory')).splitlines()[-1]}")
    go = Path(info["Dir"]) / "bin" / "go"
    if not go.is_file():
        raise BinaryError(f"Go toolchain {version}: {go} is missing from the module")
    _set_executable(Path(info["Dir"]))
    return go


def _set_executable(root: Path) -> None:
    """Module zips do not keep executable bits: set them on the toolchain's commands (``bin/*`` and
    ``pkg/tool/*/*``), as go's own toolchain switch does after a download. The files stay read-only."""
    commands = [*root.glob("bin/*"), *root.glob("pkg/tool/*/*")]
    for path in commands:
        mode = path.stat().st_mode
        if path.is_file() and 0o555 & ~mode:
            try:
                path.chmod(mode | 0o555)
            except OSError as err:
                raise BinaryError(f"Go toolchain in {root}: cannot make {path.name} executable ({err})") from None
