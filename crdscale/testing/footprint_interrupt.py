"""Interrupt ``crdscale footprint`` with SIGINT at random points (issue 31 part 4), shared by the unit test
(a few tries) and the integration one (50): each try must end with exit 130 and the one line
``crdscale: interrupted`` (or exit 0 when the command finished first), no traceback, within a bound, and
leave no process of its session behind (a hung or orphaned worker)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
# ../shared/data beside the checkout (or beside the main checkout, from a worktree under ../wt/).
REAL_CRDS = next(
    (
        p / "shared" / "data" / "crossplane-terrajet-2021-crds.tar.gz"
        for p in (ROOT.parent, ROOT.parent.parent)
        if (p / "shared" / "data" / "crossplane-terrajet-2021-crds.tar.gz").is_file()
    ),
    ROOT.parent / "shared" / "data" / "crossplane-terrajet-2021-crds.tar.gz",
)
# Above crdscale.crds.load.PARALLEL_MIN_BYTES (4 MiB), so footprint parses them in worker processes.
SET_BYTES = 5 << 20
# A try that has not ended this long after its SIGINT hangs.
STOP_BOUND_S = 20


def extract_set(dest: Path, nbytes: int = SET_BYTES) -> Path:
    """The first CRD files of the terrajet set (by name) up to ``nbytes`` of YAML, into ``dest``/crds."""
    out = dest / "crds"
    out.mkdir(parents=True)
    total = 0
    with tarfile.open(REAL_CRDS) as archive:
        members = sorted(
            (m for m in archive.getmembers() if m.isfile() and m.name.endswith(".yaml")), key=lambda m: m.name
        )
        for member in members:
            if total >= nbytes:
                break
            data = archive.extractfile(member).read()
            (out / Path(member.name).name).write_bytes(data)
            total += len(data)
    return out


def _session_processes(sid: int) -> list[int]:
    """Live (not zombie) processes whose session is ``sid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            found.append(int(entry))
    return found


@dataclass
class Try:
    delay_s: float
    code: int | None
    stderr: str
    leftover: list[int]
    stop_s: float | None

    @property
    def before_python(self) -> bool:
        """The signal came while Python itself was starting (loading its ``site`` module): no program can
        handle that, so the try says nothing about crdscale (counted apart, not as a problem)."""
        return "Fatal Python error: init_" in self.stderr

    def problem(self) -> str | None:
        """What is wrong with this try, or None."""
        if self.before_python:
            return None
        if self.code is None:
            return f"hung: still running {STOP_BOUND_S} s after SIGINT at {self.delay_s:.2f} s"
        if self.leftover:
            return f"left processes {self.leftover} after SIGINT at {self.delay_s:.2f} s"
        if "Traceback" in self.stderr:
            return f"traceback after SIGINT at {self.delay_s:.2f} s: {self.stderr[-2000:]}"
        if self.code == 130:
            if self.stderr.strip().splitlines() != ["crdscale: interrupted"]:
                return f"exit 130 with stderr {self.stderr!r} (SIGINT at {self.delay_s:.2f} s)"
            return None
        if self.code == 0:
            return None  # finished before the signal
        return f"exit {self.code} after SIGINT at {self.delay_s:.2f} s: {self.stderr[-500:]!r}"


def _wait_for_work(proc: subprocess.Popen, crds: Path, limit_s: float = 120) -> None:
    """Until crdscale reads the CRDs (one of its descriptors is under ``crds``): the random point is then in
    its work, not in Python's start-up, where a SIGINT ends the interpreter before any program runs (exit -2,
    or a KeyboardInterrupt in the import of the package, which runpy makes before crdscale's code)."""
    fds, end = Path(f"/proc/{proc.pid}/fd"), time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < end:
        try:
            if any(os.readlink(fd).startswith(str(crds)) for fd in fds.iterdir()):
                return
        except OSError:
            pass
        time.sleep(0.005)


def interrupt_once(crds: Path, delay_s: float, env: dict) -> Try:
    """Start ``crdscale footprint CRDS`` in its own session, SIGINT its process group after ``delay_s``
    (as a terminal's Ctrl-C does), and report how it ended."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "footprint", str(crds)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        # A shell's background job ignores SIGINT, and an ignored signal stays ignored across exec (Python
        # then installs no KeyboardInterrupt): the command gets a terminal's default, as in a foreground shell.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        text=True,
    )
    sid = proc.pid
    _wait_for_work(proc, crds)
    signalled = False
    try:
        proc.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        os.killpg(sid, signal.SIGINT)
        signalled = True
    sent = time.monotonic()
    try:
        _, stderr = proc.communicate(timeout=STOP_BOUND_S)
        code, stop_s = proc.returncode, (time.monotonic() - sent if signalled else None)
    except subprocess.TimeoutExpired:
        code, stop_s, stderr = None, None, ""
    time.sleep(0.2)  # a worker the parent left behind would still be there
    leftover = _session_processes(sid)
    for pid in leftover + ([sid] if code is None else []):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if code is None:
        proc.wait()
    return Try(delay_s, code, stderr, leftover, stop_s)


def interrupt_many(crds: Path, tries: int, max_delay_s: float, env: dict, seed: int = 31) -> list[Try]:
    """``tries`` interrupts at delays spread uniformly over [0.05 s, the window] (seeded). The window starts
    at ``max_delay_s`` and shrinks to 90 % of any try that finished before its signal: on a loaded machine
    a whole run's length varies, and a window longer than the run interrupts nothing."""
    rng = random.Random(seed)
    out = []
    for _ in range(tries):
        start = time.monotonic()
        done = interrupt_once(crds, rng.uniform(0.05, max_delay_s), env)
        if done.code == 0 and done.stop_s is None:
            max_delay_s = min(max_delay_s, 0.9 * (time.monotonic() - start))
        out.append(done)
    return out


def environment(tmp: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(CRDSCALE_CACHE=str(tmp / "cache"), CRDSCALE_RUNS=str(tmp / "runs"), HOME=str(tmp))
    return env
