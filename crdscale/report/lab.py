"""JupyterLab on the notebooks: the user's own copies bound to a run, and the server showing them.

``crdscale lab`` calls :func:`bind_notebooks` for each run (or A/B) directory, makes
jupytext's notebook view the default for ``.py`` files (:func:`install_lab_settings`),
then runs a :class:`LabServer` until Ctrl-C.

A run's copies live in ``RUN_DIR/notebooks/NAME.ipynb``: the notebook's
``run_dir`` parameter set by papermill, executed once so figures show on
opening. A copy that exists is never written again, so the user's edits stay.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import requests

from crdscale.errors import CrdscaleError
from crdscale.proc import start_ticks
from crdscale.report.ab import ab_notebook, refuse_arms
from crdscale.report.render import (
    CELL_TIMEOUT_S,
    KERNEL_NAME,
    CellFailure,
    default_notebooks_dir,
    execute_notebook,
    find_failure,
    notebook_plan,
    one_parameters_cell,
    unfinished_cell,
)
from crdscale.rundir import layout, read_run
from crdscale.scenario.ab import AB, is_ab_directory
from crdscale.scenario.history import HISTORY_NOTEBOOK, is_history_directory

log = logging.getLogger(__name__)

# JupyterLab settings defaults shipped with crdscale; JupyterLab reads every
# <app dir>/settings/overrides.d/*.json. Makes "Jupytext Notebook" the default viewer of
# .py files (what `jupytext-config set-default-viewer python` writes into user settings),
# and turns off JupyterLab's news and update checks, which would go to the network.
SETTINGS = Path(__file__).with_name("jupyterlab-settings.json")
SETTINGS_NAME = "crdscale.json"
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 20


@dataclass
class BoundNotebook:
    """A run's copy of a notebook: ``created`` False when it existed already and was kept as it was."""

    source: Path
    path: Path
    created: bool
    failure: CellFailure | None = None


def bind_notebooks(
    run_dir: str | Path,
    notebooks_dir: str | Path | None = None,
    *,
    execute: bool = True,
    timeout: int = CELL_TIMEOUT_S,
) -> list[BoundNotebook]:
    """The run's own copies of the notebooks that apply to it (see :func:`notebook_plan`), creating
    those missing: ``run_dir`` set as a papermill parameter, executed unless ``execute`` is False.

    A copy is written under a temporary name and linked into place only if no file took
    the name meanwhile: an existing copy is never overwritten, a half-executed one never
    left under the real name. A notebook that fails keeps its output up to the failing
    cell, in ``failure``. What is executed or written, and what failed, is logged at INFO.
    """
    # Absolute: the copy runs in RUN_DIR/notebooks/, where a relative run_dir names nothing.
    run_dir, plan = lab_plan(Path(run_dir).resolve(), Path(notebooks_dir or default_notebooks_dir()).resolve())
    out = run_dir / layout.NOTEBOOKS
    bound = []
    for source in plan:
        path = out / f"{source.stem}.ipynb"
        if path.exists():
            bound.append(BoundNotebook(source, path, created=False))
            continue
        out.mkdir(parents=True, exist_ok=True)
        partial = out / f".{source.stem}.{os.getpid()}.partial.ipynb"
        log.info(f"{'executing' if execute else 'writing'} {path}")
        try:
            nb, stopped = execute_notebook(
                source, partial, {"run_dir": str(run_dir)}, cwd=out, timeout=timeout, prepare_only=not execute
            )
            failure = None
            if execute:
                text = source.read_text(encoding="utf-8")
                failure = find_failure(nb, str(source), text) or (
                    unfinished_cell(nb, str(source), stopped, text) if stopped else None
                )
            _as_opened(nb, partial)
            try:
                os.link(partial, path)  # fails if the name was taken meanwhile: never overwrite
            except FileExistsError:
                bound.append(BoundNotebook(source, path, created=False))
                continue
        finally:
            partial.unlink(missing_ok=True)
        if failure:
            log.info(f"notebook failed: {failure.describe()} (the copy keeps the output before it)")
        bound.append(BoundNotebook(source, path, created=True, failure=failure))
    return bound


def lab_plan(path: Path, notebooks_dir: Path) -> tuple[Path, list[Path]]:
    """The directory the notebooks are bound to and the notebooks that apply to it: a history
    (``crdscale history``) gets the history notebook, an A/B directory (``crdscale ab``) the A/B notebook,
    a run those of :func:`notebook_plan`."""
    if is_history_directory(path):  # a history (crdscale history): its one notebook, on the whole directory
        return path, [notebooks_dir / f"{HISTORY_NOTEBOOK}.py"]
    if is_ab_directory(path):
        ab = AB.open(path)
        refuse_arms(ab, "crdscale lab")
        return ab.path, [ab_notebook(notebooks_dir)]
    run = read_run(path)
    return run.path, notebook_plan(run, notebooks_dir)


def _as_opened(nb, path: Path) -> None:
    """Write the copy as JupyterLab should open it, unmodified: one parameters cell (the run's
    ``run_dir``, :func:`one_parameters_cell`) and no pairing with a ``.py`` file
    (jupytext's ``formats``: the copy has no ``.py`` beside it) nor papermill's copy of the input, and the
    kernelspec of the kernel JupyterLab starts."""
    import nbformat  # lazy: the optional report extra
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel  # lazy: the optional report extra

    one_parameters_cell(nb)
    nb.metadata.get("jupytext", {}).pop("formats", None)
    nb.metadata.pop("papermill", None)
    try:  # the kernel JupyterLab will start, as it would write it back (else the copy opens modified)
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        nb.metadata["kernelspec"] = {"display_name": spec.display_name, "language": spec.language, "name": KERNEL_NAME}
    except NoSuchKernel:
        pass
    nbformat.write(nb, str(path))  # validates


def lab_settings_dir() -> Path:
    """Where this JupyterLab reads settings defaults from: ``<app dir>/settings/overrides.d``."""
    from jupyterlab.commands import get_app_dir  # lazy: the optional lab extra

    return Path(get_app_dir()) / "settings" / "overrides.d"


def install_lab_settings(target_dir: str | Path | None = None) -> Path:
    """Put crdscale's JupyterLab defaults (:data:`SETTINGS`) into ``target_dir`` (default
    :func:`lab_settings_dir`) unless the same file is there. Returns its path; OSError when
    the directory is not writable."""
    target = Path(target_dir or lab_settings_dir()) / SETTINGS_NAME
    wanted = SETTINGS.read_bytes()
    if not (target.is_file() and target.read_bytes() == wanted):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(wanted)
        os.replace(tmp, target)
    return target


class LabServer:
    """JupyterLab serving ``root`` on 127.0.0.1, a port the OS picks, with a random token.

    The server runs in its own session so that Ctrl-C in the terminal reaches crdscale
    only, which then stops it (SIGTERM: JupyterLab shuts its kernels down) and kills any
    kernel it left behind. Its output goes to ``log``, in a private directory removed on stop.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self.token = secrets.token_hex(24)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._runtime = Path(tempfile.mkdtemp(prefix="crdscale-lab-"))  # mode 0700: the token is in there
        self.log = self._runtime / "jupyterlab.log"

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    def url(self, path: str | Path | None = None) -> str:
        """The URL (token included) opening ``path`` (a file under ``root``), else JupyterLab's start page."""
        if path is None:
            return f"{self.base_url}lab?token={self.token}"
        relative = Path(path).resolve().relative_to(self.root).as_posix()
        return f"{self.base_url}lab/tree/{quote(relative)}?token={self.token}"

    def start(self, timeout: float = START_TIMEOUT_S) -> LabServer:
        """Start JupyterLab and wait until it answers (CrdscaleError, with its log tail, when it does not)."""
        env = {**os.environ, "JUPYTER_TOKEN": self.token, "JUPYTER_RUNTIME_DIR": str(self._runtime)}
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--ServerApp.ip={LOOPBACK}",
            "--ServerApp.port=0",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
        ]
        if os.geteuid() == 0:
            command.append("--allow-root")  # JupyterLab refuses root otherwise (containers, CI)
        with open(self.log, "ab") as log:
            # The token goes by environment, not argv: other users can read argv in ps.
            self.proc = subprocess.Popen(
                command,
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        info = self._runtime / f"jpserver-{self.proc.pid}.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._fail(f"JupyterLab exited with code {self.proc.returncode} while starting")
            if self.port is None and info.is_file():
                try:
                    self.port = int(json.loads(info.read_text())["port"])
                except (ValueError, KeyError):
                    pass  # written but not complete yet
            if self.port is not None and self._answers():
                return self
            time.sleep(0.25)
        self._fail(f"JupyterLab did not answer within {timeout:.0f} s")
        return self

    def _answers(self) -> bool:
        try:
            return requests.get(f"{self.base_url}api/status", params={"token": self.token}, timeout=2).ok
        except requests.RequestException:
            return False

    def _fail(self, message: str) -> None:
        tail = self.log.read_text(errors="replace").splitlines()[-15:] if self.log.is_file() else []
        self.stop()
        raise CrdscaleError(message, details="\n".join(tail) or None)

    def wait(self) -> int:
        """Block until the server exits by itself; its exit code."""
        return self.proc.wait() if self.proc else 0

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the server and every kernel it started; idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            kernels = _children(proc.pid)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            # Kernels run in sessions of their own; JupyterLab shuts them down on SIGTERM,
            # these are the ones a hung server left.
            for pid, ticks in kernels:
                if start_ticks(pid) == ticks:  # still that process, not a reused PID
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        shutil.rmtree(self._runtime, ignore_errors=True)

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _children(pid: int) -> list[tuple[int, int]]:
    """``(pid, start ticks)`` of the processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2 :].split()[1]) == pid:
            child = int(stat.parent.name)
            ticks = start_ticks(child)
            if ticks is not None:
                found.append((child, ticks))
    return found
