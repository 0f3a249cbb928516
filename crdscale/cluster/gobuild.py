"""Build Go programs from throwaway modules in the cache.

kube-apiserver, etcd and kubectl are not downloaded as release binaries: a
generated module (``go.mod`` + a few-line ``main.go``, never committed) requires
the upstream module and ``go build`` compiles it with the installed Go.

Several programs from the same upstream modules (kube-apiserver and
kube-controller-manager from ``k8s.io/kubernetes``) share one module: one
``cmd/<name>/main.go`` each, built by one ``go build -o DIR ./cmd/a ./cmd/b``
into the same cache directory, so they compile their common packages once and
run the same code as each other. Only the binaries missing from the directory
are built; Go's build cache makes a later one cost little more than its own
packages and the link.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from crdscale.errors import BinaryError, UsageError
from crdscale.fsutil import write_atomic, write_json_atomic
from crdscale.timeutil import utc_iso

log = logging.getLogger(__name__)


@dataclass
class GoProgram:
    """A Go main package to build into ``out_dir/binary_name``.

    Attributes:
        binary_name: file name of the result, e.g. ``kube-apiserver``.
        out_dir: cache directory for this component and version.
        go_directive: the ``go`` line of the generated go.mod, e.g. ``go 1.26.0``.
        requires: module path -> version.
        replaces: module path -> ``"path version"`` replacement.
        main_go: source of ``main.go``.
        ldflags: ``-X`` settings etc.
        usual_duration: human text such as ``"8-11 minutes on 2 cores"``, printed up front.
        origin: what it is built from, for the progress line (``"Go modules"``, a source tree).
        more_mains: further binaries from the same module, name -> ``main.go`` source; with
            any, every program's source is ``cmd/<name>/main.go``.
        more_durations: name -> usual duration of building that binary alone after the others.
        tags: ``go build -tags`` values (checked by :func:`check_build_tags`).
        build_package: for a program whose ``main`` package lives in a required module (a
            ``cmd/...`` that cannot be imported), its import path: ``main_go`` is then only a
            ``//go:build tools`` file importing it, so ``go mod tidy`` keeps the requirement.
    """

    binary_name: str
    out_dir: Path
    go_directive: str
    requires: dict[str, str]
    main_go: str
    replaces: dict[str, str] = field(default_factory=dict)
    ldflags: list[str] = field(default_factory=list)
    usual_duration: str = "a few minutes"
    origin: str = "Go modules"
    more_mains: dict[str, str] = field(default_factory=dict)
    more_durations: dict[str, str] = field(default_factory=dict)
    build_package: str = ""
    tags: tuple[str, ...] = ()
    # The go binary to build with: "" is the go on PATH; a toolchain's bin/go (crdscale.cluster.toolchain)
    # builds a release with the Go it shipped with.
    go: str = ""

    @property
    def binary(self) -> Path:
        return self.out_dir / self.binary_name

    @property
    def mains(self) -> dict[str, str]:
        """Every binary this module builds, name -> ``main.go`` source (the primary first)."""
        return {self.binary_name: self.main_go, **self.more_mains}

    def binary_path(self, name: str) -> Path:
        if name not in self.mains:
            raise KeyError(f"{self.binary_name}'s module builds no {name!r}")
        return self.out_dir / name

    def missing(self, names: Sequence[str] | None = None) -> list[str]:
        """The binaries among ``names`` (default: all) not yet in the cache directory."""
        wanted = list(self.mains) if names is None else list(names)
        return [n for n in wanted if not _executable(self.binary_path(n))]

    def source_files(self) -> dict[str, str]:
        """Relative path -> contents of the generated module's Go sources."""
        if not self.more_mains:
            return {"main.go": self.main_go}
        return {f"cmd/{name}/main.go": text for name, text in self.mains.items()}

    def package(self, name: str) -> str:
        """The ``go build`` argument for binary ``name``."""
        if self.more_mains:
            return f"./cmd/{name}"
        return self.build_package or "."

    @property
    def log_path(self) -> Path:
        return self.out_dir / "build.log"

    def go_mod(self) -> str:
        lines = ["module crdscale.local/" + self.binary_name, "", self.go_directive, ""]
        lines.append("require (")
        lines += [f"\t{path} {version}" for path, version in self.requires.items()]
        lines.append(")")
        if self.replaces:
            lines += ["", "replace ("]
            lines += [f"\t{path} => {target}" for path, target in self.replaces.items()]
            lines.append(")")
        return "\n".join(lines) + "\n"


# `go help buildconstraint`: a build tag is made of letters, digits, underscores and dots.
_BUILD_TAG = re.compile(r"^[A-Za-z0-9_.]+$")


def check_build_tags(tags) -> tuple[str, ...]:
    """``tags`` (a list, or one comma-separated string) as a tuple, each once, in order;
    :class:`UsageError` naming the first tag with a character Go refuses."""
    if isinstance(tags, str):
        tags = [t for t in tags.split(",") if t.strip()]
    checked: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str) or not _BUILD_TAG.match(tag):
            raise UsageError(f"build tag {tag!r}: Go build tags are made of letters, digits, underscores and dots only")
        checked.setdefault(tag, None)
    return tuple(checked)


def go_binary() -> str:
    go = shutil.which("go")
    if not go:
        raise BinaryError(
            "Go is not installed (needed to build kube-apiserver/etcd from Go modules); install Go >= 1.22"
        )
    return go


def go_version(go: str | None = None) -> str:
    """``go1.26.8`` (of ``go``, default the go on PATH) or ``"none"``."""
    try:
        env = dict(os.environ, GOTOOLCHAIN="local")
        if go:
            env.pop("GOROOT", None)
        out = subprocess.run(
            [go or go_binary(), "env", "GOVERSION"], capture_output=True, text=True, timeout=30, env=env
        )
        return out.stdout.strip() or "unknown"
    except (BinaryError, OSError, subprocess.SubprocessError):
        return "none"


# The variables crdscale reads of `go env`, asked in one call: the module cache (patches, downloaded_module_dir)
# and where modules and checksums come from (crdscale.cluster.releases).
GO_ENV_NAMES = ("GOFLAGS", "GOMODCACHE", "GONOSUMDB", "GOPRIVATE", "GOPROXY", "GOSUMDB")
_GO_ENV: dict[tuple, dict[str, str]] = {}
_GO_ENV_LOCK = threading.Lock()


# The variables of `go env` that decide where modules and their checksums come from.
MODULE_SOURCE_NAMES = ("GOFLAGS", "GONOSUMDB", "GOPRIVATE", "GOPROXY", "GOSUMDB")


def per_module_source(filename: str) -> str:
    """``filename`` (``answers.json``) for the module source ``go env`` names now (``answers-<digest>.json``, the
    digest of :data:`MODULE_SOURCE_NAMES`; their environment values when Go is not installed): a cache of what
    one proxy or checksum database serves says nothing about another's."""
    try:
        env = go_env(*MODULE_SOURCE_NAMES)
    except BinaryError:
        env = {name: os.environ.get(name, "") for name in MODULE_SOURCE_NAMES}
    digest = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:12]
    stem, dot, suffix = filename.rpartition(".")
    return f"{stem}-{digest}{dot}{suffix}"


def _go_env_key(go: str) -> tuple:
    """What a ``go env`` answer depends on besides go's own defaults: the go binary and the environment it
    starts with (any GO* variable, e.g. GOMODCACHE or GOPATH set by a test or CI; HOME and XDG_CONFIG_HOME,
    where go's env file and its default GOPATH are)."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("GO") or k in ("HOME", "XDG_CONFIG_HOME"))
    return go, tuple(env)


def go_env(*names: str) -> dict[str, str]:
    """``go env`` of ``names`` (name -> value, ``""`` for an unset one) as the go on PATH sees them: the
    environment first, then go's env file (``go env -w``), then its defaults.

    Asked once per process, in one ``go env -json`` of :data:`GO_ENV_NAMES` and ``names``, and again only
    when the environment that decides the answer changes (a test that sets GOMODCACHE gets its own). When go
    cannot answer (no answer within 30 s, no JSON), the environment's own values. :class:`BinaryError` when
    Go is not installed."""
    go = go_binary()
    with _GO_ENV_LOCK:
        known = _GO_ENV.setdefault(_go_env_key(go), {})
        if not known.keys() >= set(names):
            asked = sorted({*GO_ENV_NAMES, *names} - known.keys())
            try:
                out = subprocess.run(
                    [go, "env", "-json", *asked], capture_output=True, text=True, timeout=30,
                    env=dict(os.environ, GOTOOLCHAIN="local"),
                )  # fmt: skip
                answer = json.loads(out.stdout or "{}")
            except (OSError, subprocess.SubprocessError, ValueError):
                answer = {}
            for name in asked:
                value = answer.get(name) if isinstance(answer, dict) else None
                known[name] = value if isinstance(value, str) else os.environ.get(name, "")
        return {n: known[n] for n in names}


def escape_module_path(path: str) -> str:
    """A module path as Go's module cache, proxies and the checksum database spell it: an upper-case letter
    is ``!`` + its lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)


@contextmanager
def _build_lock(out_dir: Path):
    """Only one process builds a given component version at a time; others wait for it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# How `go mod tidy` reports a module version the proxy (or its checksum database) does not serve:
#   k8s.io/endpointslice@v0.32.13: reading https://proxy.golang.org/k8s.io/endpointslice/@v/v0.32.13.zip: 403 Forbidden
#   k8s.io/cluster-bootstrap@v0.31.14: verifying module: ...: reading https://.../lookup/...: 404 Not Found
# A mirror can hold k8s.io/kubernetes@V and lack some of its staging modules at V, so the version
# check passes and only the build finds out.
_UNSERVED = re.compile(
    r"(?P<module>[\w.\-/]+@v[\w.\-+]+): (?:verifying module: \S+: )?reading https?://\S+: (?P<code>40[34])"
)


def unserved_modules(log_text: str) -> list[str]:
    """The ``module@version``s a failed ``go mod tidy`` could not get from the module proxy or its
    checksum database, in the order the log names them, each once."""
    seen: dict[str, None] = {}
    for m in _UNSERVED.finditer(log_text):
        seen.setdefault(m.group("module"), None)
    return list(seen)


# A compiler error as go build prints it (with -trimpath, files are module@version paths):
#   k8s.io/apiserver@v0.37.1/pkg/storage/cacher/watch_cache.go:226:7: undefined: store.Nope
_COMPILER_ERROR = re.compile(r"^(?:\./)?(?P<where>[^\s:]+\.go:\d+(?::\d+)?): (?P<message>.+)$", re.M)


def first_compiler_error(log_text: str) -> str | None:
    """``file.go:line:col: message`` of the first compiler error in the log of the last step
    (the text after its last ``$ command`` line), or ``None``."""
    last_step = log_text.rsplit("\n$ ", 1)[-1]
    m = _COMPILER_ERROR.search(last_step)
    return f"{m['where']}: {m['message'].strip()}" if m else None


def _failure_reason(step: str, log_path: Path) -> str:
    """What to say after 'step failed': the modules the proxy does not serve, or the first
    compiler error, when that is why."""
    if step == "go build":
        try:
            error = first_compiler_error(log_path.read_text(errors="replace"))
        except OSError:
            return ""
        return f": {error}" if error else ""
    if step != "go mod tidy":
        return ""
    try:
        missing = unserved_modules(log_path.read_text(errors="replace"))
    except OSError:
        return ""
    if not missing:
        return ""
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    return (
        f": the Go module proxy or its checksum database lacks {missing[0]}{more} (a mirror can lack a "
        f"release's staging modules or their checksums); choose another patch release of the same minor"
    )


def build(program: GoProgram, *, names: Sequence[str] | None = None) -> Path:
    """Build the binaries ``names`` of ``program`` (default: all of them) that its cache
    directory lacks, in one ``go build``; return the primary binary's path (which exists
    only if it was among ``names`` or built before).

    Progress lines (what is built, a heartbeat every minute) go to this module's logger at INFO.
    On failure raises :class:`BinaryError` naming the failing step and the log file.
    """
    with _build_lock(program.out_dir):
        missing = program.missing(names)
        if not missing:
            return program.binary
        src = program.out_dir / "src"
        src.mkdir(parents=True, exist_ok=True)
        write_atomic(src / "go.mod", program.go_mod())
        if program.more_mains:  # a single-program layout left by an older build
            (src / "main.go").unlink(missing_ok=True)
        for relative, text in program.source_files().items():
            (src / relative).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(src / relative, text)
        (src / "go.sum").unlink(missing_ok=True)
        what = " and ".join(missing)
        if len(missing) < len(program.mains) and len(missing) == 1 and missing[0] in program.more_durations:
            usually = program.more_durations[missing[0]]  # beside binaries already built: Go's cache has most
        else:
            usually = program.usual_duration
        log.info(
            f"building {what} from {program.origin} in {program.out_dir} (usually {usually}); log: {program.log_path}"
        )
        env = dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
        go = program.go or go_binary()
        if program.go:
            # That toolchain finds its GOROOT beside its binary; cgo and vet find its tools first on PATH.
            env.pop("GOROOT", None)
            env["PATH"] = f"{Path(program.go).parent}{os.pathsep}{env.get('PATH', '')}"
        started = time.monotonic()
        # Built into a side directory and moved in when all succeeded: a binary in the cache
        # directory is always a complete one.
        partial = program.out_dir / ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        if program.more_mains:
            target, packages = str(partial) + os.sep, [program.package(n) for n in missing]
        else:
            target, packages = str(partial / program.binary_name), [program.package(program.binary_name)]
        steps = [
            ("go mod tidy", [go, "mod", "tidy"]),
            (
                "go build",
                [
                    go,
                    "build",
                    "-trimpath",
                    *(["-tags", ",".join(program.tags)] if program.tags else []),
                    "-ldflags",
                    " ".join(program.ldflags),
                    "-o",
                    target,
                    *packages,
                ],
            ),
        ]
        # Appended to: the log of the binaries built earlier into this directory stays.
        with open(program.log_path, "a") as output:
            output.write(f"# {utc_iso()}: building {what}\n")
            for step, cmd in steps:
                log.info(f"  {step} ...")
                output.write(f"$ {' '.join(cmd)}\n")
                output.flush()
                rc = _run_with_heartbeat(cmd, cwd=src, env=env, output=output, started=started, step=step)
                if rc != 0:
                    raise BinaryError(
                        f"building {what}: step '{step}' failed (exit {rc})"
                        f"{_failure_reason(step, program.log_path)}; see {program.log_path}",
                        details=_log_tail(program.log_path),
                    )
        for name in missing:
            os.replace(partial / name, program.binary_path(name))
        shutil.rmtree(partial, ignore_errors=True)
        elapsed = time.monotonic() - started
        facts = {"go": go_version(program.go or None), "seconds": round(elapsed, 1), "built_at": utc_iso()}
        for name in missing:
            # build.json: the primary binary's build, as before; build-<name>.json for the others.
            json_name = "build.json" if name == program.binary_name else f"build-{name}.json"
            write_json_atomic(
                program.out_dir / json_name, {"binary": str(program.binary_path(name)), "built_with": missing, **facts}
            )
        log.info(f"built {what} in {program.out_dir} in {elapsed / 60:.1f} min")
        return program.binary


def _run_with_heartbeat(cmd, *, cwd, env, output, started, step, every_s: float = 60.0) -> int:
    """Run ``cmd`` with its output to the file ``output``; log an elapsed-time line every ``every_s`` seconds."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
    done = threading.Event()

    def heartbeat():
        while not done.wait(every_s):
            log.info(f"  {step}: still running, {(time.monotonic() - started) / 60:.1f} min elapsed")

    thread = threading.Thread(target=heartbeat, daemon=True)
    thread.start()
    try:
        return proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        done.set()


def module_download(path: str, version: str, *, timeout_s: float = 1800) -> dict:
    """``go mod download -json path@version``: fetches the module zip (needed to build) and
    returns go's JSON, which has an ``Error`` key when the proxy refuses the version (or
    gave no answer within ``timeout_s``)."""
    try:
        proc = subprocess.run(
            [go_binary(), "mod", "download", "-json", f"{path}@{version}"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(os.environ, GOFLAGS="-mod=mod"),
            cwd=os.path.expanduser("~"),
        )
    except subprocess.TimeoutExpired:
        return {"Error": f"go mod download {path}@{version}: no answer within {timeout_s:g} s"}
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"Error": (proc.stderr or proc.stdout).strip() or f"go mod download exited {proc.returncode}"}


def downloaded_module_dir(path: str, version: str) -> Path | None:
    """The directory of module ``path@version`` in Go's module cache when it was downloaded already, else
    None: asks nothing of the proxy (:func:`go_env` ``GOMODCACHE`` only). Paths with capitals are escaped as Go does."""
    try:
        root = go_env("GOMODCACHE")["GOMODCACHE"]
    except BinaryError:
        return None
    if not root:
        return None
    found = Path(root) / escape_module_path(f"{path}@{version}")
    return found if found.is_dir() else None


def module_info(path: str, version: str, *, timeout_s: float) -> dict:
    """``go list -m -json path@version``: the module's ``.info`` from the module cache or the
    proxy (a few hundred bytes, no download), so whether a version exists is answered in well
    under a second. Returns go's JSON; on failure ``{"Error": last line of go's message}``, plus
    ``"Unreachable": True`` when go could not ask (no answer within ``timeout_s``, no network)."""
    try:
        proc = subprocess.run(
            [go_binary(), "list", "-m", "-json", f"{path}@{version}"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(os.environ, GOFLAGS="-mod=mod", GOWORK="off", GO111MODULE="on"),
            cwd=os.path.expanduser("~"),
        )
    except subprocess.TimeoutExpired:
        return {"Error": f"no answer within {timeout_s:g} s", "Unreachable": True}
    if proc.returncode == 0:
        try:
            return json.loads(proc.stdout)
        except json.JSONDecodeError:
            pass
    message = (proc.stderr or proc.stdout).strip() or f"go list exited {proc.returncode}"
    # The proxy answers 404/410 (or 403 "not available") for a version that does not exist;
    # anything else (DNS, refused connection, TLS) means the question could not be asked.
    refused = any(
        word in message for word in ("404", "410", "403", "not available", "unknown revision", "invalid version")
    )
    answer: dict = {"Error": " ".join(message.splitlines()[-1].split())}
    if not refused:
        answer["Unreachable"] = True
    return answer
