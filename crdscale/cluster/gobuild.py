"""Build Go programs from throwaway modules in the cache.

kube-apiserver, etcd and kubectl are not downloaded as release binaries: a
generated module (``go.mod`` + a few-line ``main.go``, never committed) requires
the upstream module and ``go build`` compiles it with the installed Go.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from crdscale.errors import BinaryError
from crdscale.fsutil import write_atomic, write_json_atomic
from crdscale.timeutil import utc_iso


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

    @property
    def binary(self) -> Path:
        return self.out_dir / self.binary_name

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


def go_binary() -> str:
    go = shutil.which("go")
    if not go:
        raise BinaryError(
            "Go is not installed (needed to build kube-apiserver/etcd from Go modules); install Go >= 1.22"
        )
    return go


def go_version() -> str:
    """``go1.26.8`` or ``"none"``."""
    try:
        out = subprocess.run([go_binary(), "env", "GOVERSION"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip() or "unknown"
    except (BinaryError, OSError, subprocess.SubprocessError):
        return "none"


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


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def build(program: GoProgram, *, echo=None) -> Path:
    """Build ``program`` unless its binary already exists; return the binary path.

    ``echo`` is a callable for progress lines (``None`` = quiet). On failure raises
    :class:`BinaryError` naming the failing step and the log file.
    """
    say = echo or (lambda _msg: None)
    with _build_lock(program.out_dir):
        if program.binary.is_file() and os.access(program.binary, os.X_OK):
            return program.binary
        src = program.out_dir / "src"
        src.mkdir(parents=True, exist_ok=True)
        write_atomic(src / "go.mod", program.go_mod())
        write_atomic(src / "main.go", program.main_go)
        (src / "go.sum").unlink(missing_ok=True)
        say(
            f"building {program.binary_name} from {program.origin} in {program.out_dir} "
            f"(usually {program.usual_duration}); log: {program.log_path}"
        )
        env = dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
        started = time.monotonic()
        tmp_binary = program.binary.with_name(program.binary_name + ".partial")
        steps = [
            ("go mod tidy", [go_binary(), "mod", "tidy"]),
            (
                "go build",
                [go_binary(), "build", "-trimpath", "-ldflags", " ".join(program.ldflags), "-o", str(tmp_binary), "."],
            ),
        ]
        with open(program.log_path, "w") as log:
            for step, cmd in steps:
                say(f"  {step} ...")
                log.write(f"$ {' '.join(cmd)}\n")
                log.flush()
                rc = _run_with_heartbeat(cmd, cwd=src, env=env, log=log, say=say, started=started, step=step)
                if rc != 0:
                    raise BinaryError(
                        f"building {program.binary_name}: step '{step}' failed (exit {rc}); see {program.log_path}",
                        details=_log_tail(program.log_path),
                    )
        os.replace(tmp_binary, program.binary)
        elapsed = time.monotonic() - started
        write_json_atomic(
            program.out_dir / "build.json",
            {
                "binary": str(program.binary),
                "go": go_version(),
                "seconds": round(elapsed, 1),
                "built_at": utc_iso(),
            },
        )
        say(f"built {program.binary} in {elapsed / 60:.1f} min")
        return program.binary


def _run_with_heartbeat(cmd, *, cwd, env, log, say, started, step, every_s: float = 60.0) -> int:
    """Run ``cmd`` with output to ``log``; print an elapsed-time line every ``every_s`` seconds."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    done = threading.Event()

    def heartbeat():
        while not done.wait(every_s):
            say(f"  {step}: still running, {(time.monotonic() - started) / 60:.1f} min elapsed")

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


def module_download(path: str, version: str) -> dict:
    """``go mod download -json path@version``: fetches the module zip (needed to build) and
    returns go's JSON, which has an ``Error`` key when the proxy refuses the version."""
    proc = subprocess.run(
        [go_binary(), "mod", "download", "-json", f"{path}@{version}"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=dict(os.environ, GOFLAGS="-mod=mod"),
        cwd=os.path.expanduser("~"),
    )
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"Error": (proc.stderr or proc.stdout).strip() or f"go mod download exited {proc.returncode}"}


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


def stderr_echo(msg: str) -> None:
    print(f"crdscale: {msg}", file=sys.stderr, flush=True)
