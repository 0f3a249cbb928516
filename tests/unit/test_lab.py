"""`crdscale lab`: the run's own notebook copies (bound by papermill, never overwritten), the
JupyterLab settings that open py:percent files as notebooks, the one-line error of a missing
extra, and, in headless Chromium, the memory notebook shown as notebook cells with outputs.
No cluster needed: everything runs on a copy of the reference run."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crdscale.cli import main as cli_main
from crdscale.cli.main import COMMAND_EXTRAS, EXTRAS, main
from crdscale.proc import start_ticks

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--hide-scrollbars"]


@pytest.fixture
def run_copy(tmp_path):
    run = tmp_path / "reference-run"
    shutil.copytree(REFERENCE, run)
    return run


# --- missing extras ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "module", "extra"),
    [
        (["report", str(REFERENCE)], "papermill", "report"),
        (["report", str(REFERENCE)], "jinja2", "report"),
        (["lab"], "jupyterlab", "lab"),
        (["lab"], "nbclient", "lab"),  # lab brings report's modules too: one pip command, not two in turn
    ],
)
def test_a_missing_extra_is_one_line_naming_it(monkeypatch, capsys, argv, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec gives None, import fails
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        f"crdscale: error: crdscale {argv[0]} needs the '{extra}' extra ({module} is not installed): "
        f"pip install 'crdscale[{extra}]'\n"
    )


def test_extras_table_matches_pyproject():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def modules(extra):
        names = set()
        for req in extras[extra]:
            name = re.split(r"[<>=!;\[ ]", req, maxsplit=1)[0].lower()
            names |= modules(req[req.index("[") + 1 : req.index("]")]) if name == "crdscale" else {name}
        return names

    for extra, needed in EXTRAS.items():
        assert set(needed) <= modules(extra), extra
    assert set(EXTRAS["report"]) == modules("report")
    assert all(set(c) <= set(EXTRAS) for c in COMMAND_EXTRAS.values())
    assert set(COMMAND_EXTRAS) <= set(cli_main.SUBCOMMANDS)


# --- the run's copies -----------------------------------------------------------------


def test_copies_are_bound_to_the_run_and_never_overwritten(run_copy, monkeypatch):
    from crdscale.report.lab import bind_notebooks

    # A relative RUN_DIR, as typed: the copies run in RUN_DIR/notebooks/, so they get the absolute path.
    monkeypatch.chdir(run_copy.parent)
    first = bind_notebooks(run_copy.name, execute=False)
    assert [(b.path.name, b.created) for b in first] == [("memory.ipynb", True), ("attribution.ipynb", True)]
    nb = json.loads(first[0].path.read_text())
    # One parameters cell, holding the run's run_dir (papermill's defaults cell is gone), and no pairing
    # with a .py file the copy does not have: the copy opens in JupyterLab as it was written.
    params = [c for c in nb["cells"] if {"parameters", "injected-parameters"} & set(c["metadata"].get("tags", []))]
    assert len(params) == 1 and params[0]["metadata"]["tags"] == ["parameters"]
    assert f"run_dir = {str(run_copy)!r}".replace("'", '"') in "".join(params[0]["source"])
    assert sum("run_dir =" in "".join(c["source"]) for c in nb["cells"]) == 1
    assert "formats" not in nb["metadata"].get("jupytext", {}) and "papermill" not in nb["metadata"]
    assert not list(first[0].path.parent.glob(".*partial*"))  # nothing half-written left

    edited = first[0].path.read_text().replace("Memory and CPU", "My own edit")
    first[0].path.write_text(edited)
    again = bind_notebooks(run_copy, execute=False)
    assert [b.created for b in again] == [False, False]
    assert first[0].path.read_text() == edited


def test_settings_make_jupytext_the_default_viewer_of_py_files(tmp_path):
    from crdscale.report.lab import install_lab_settings

    path = install_lab_settings(tmp_path / "overrides.d")
    settings = json.loads(path.read_text())
    assert settings["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["python"] == "Jupytext Notebook"
    assert install_lab_settings(tmp_path / "overrides.d") == path  # idempotent


def test_not_a_run_directory(tmp_path, capsys):
    assert main(["lab", str(tmp_path)]) == 2
    assert "not a crdscale run directory" in capsys.readouterr().err


# --- for real: crdscale lab, then headless Chromium ---------------------------------------


def _descendants(pid: int) -> dict[int, int]:
    """Every process below ``pid``, with its start time (to tell it from a later one with the same PID)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        children.setdefault(int(text[text.rindex(")") + 2 :].split()[1]), []).append(int(stat.parent.name))
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if start_ticks(child) is not None:
                found[child] = start_ticks(child)
            todo.append(child)
    return found


def _alive(pid: int, ticks: int) -> bool:
    return start_ticks(pid) == ticks


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _chromium(url: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    # virtual-time-budget: Chromium lets JupyterLab load and render before it dumps or shoots.
    return subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1400,2000",
            "--virtual-time-budget=30000",
            *args,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=150,
    )


@pytest.mark.external
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.timeout(600)
def test_lab_shows_the_memory_notebook_as_a_notebook_in_chromium(run_copy, tmp_path):
    lab = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "lab", run_copy.name],  # relative, as people type it
        cwd=run_copy.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started: dict[int, int] = {}
    try:
        lines: list[str] = []
        errors: list[str] = []
        # Both pipes are drained all along: JupyterLab logs every request to stderr, and a full
        # pipe would block it (then it cannot even stop on Ctrl-C).
        reader = threading.Thread(target=lambda: lines.extend(lab.stdout), daemon=True)
        drain = threading.Thread(target=lambda: errors.extend(lab.stderr), daemon=True)
        reader.start()
        drain.start()
        deadline = time.monotonic() + 420  # executing the two notebooks on 2 busy cores, then starting JupyterLab
        while not lines and lab.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert lines and lines[0].startswith("http://127.0.0.1:"), (lines, lab.poll(), "".join(errors)[-2000:])
        url = lines[0].strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/lab/tree/notebooks/memory\.ipynb\?token=[0-9a-f]{48}", url)
        started = _descendants(lab.pid)

        shot = Path(os.environ.get("CRDSCALE_LAB_SCREENSHOT", tmp_path / "memory-notebook.png"))
        # One page load both dumps the DOM and shoots the screen (JupyterLab loads once, not twice).
        dom = _chromium(url, tmp_path / "profile", "--dump-dom", f"--screenshot={shot}").stdout
        started |= _descendants(lab.pid)  # with the kernel JupyterLab started for the opened notebook

        assert "jp-Notebook" in dom, dom[-3000:]
        assert len(re.findall(r'class="[^"]*\bjp-Cell\b', dom)) >= 5
        assert "jp-OutputArea-output" in dom  # executed: outputs are there on opening
        assert re.search(r'<img[^>]+src="data:image/png;base64,', dom), "no figure among the rendered outputs"
        assert "Memory and CPU of kube-apiserver" in dom
        assert not re.search(r'class="[^"]*\bjp-FileEditor\b', dom)  # not opened as a text file
        assert not re.search(r'class="[^"]*\bjp-mod-dirty\b', dom)  # opens unmodified
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        lab.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            code = lab.wait(60)
        except subprocess.TimeoutExpired:  # once in a full CI run (not reproduced alone): say what was left
            left = {pid: _cmdline(pid) for pid in _descendants(lab.pid)}
            pytest.fail(
                f"crdscale lab still running 60 s after Ctrl-C; its processes {left}; "
                f"its stderr: {''.join(errors)[-2000:]!r}"
            )
        assert code == 0
        drain.join(10)
        assert "stopping JupyterLab" in "".join(errors)
        assert "notebook failed" not in "".join(errors)  # the copies found the (relative) run
        deadline = time.monotonic() + 20
        while any(_alive(*p) for p in started.items()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not [p for p in started.items() if _alive(*p)], "JupyterLab or its kernel outlived crdscale lab"
    finally:  # whatever failed, nothing this test started outlives it
        if lab.poll() is None:
            started |= _descendants(lab.pid)
            lab.kill()
        for pid, ticks in started.items():
            if _alive(pid, ticks):
                os.kill(pid, signal.SIGKILL)
        lab.wait(10)


@pytest.mark.external
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.timeout(600)
def test_lab_on_an_ab_draws_its_flame_graph_in_chromium(tmp_path):
    """`crdscale lab AB_DIR` opens the A/B notebook, whose differential flame graph JupyterLab draws with
    its plotly renderer (the copy is executed by papermill, so untrusted: HTML with scripts would not run)."""
    ab = Path(shutil.copytree(ROOT / "data" / "ab-known-cost", tmp_path / "ab"))
    lab = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "lab", str(ab)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started: dict[int, int] = {}
    try:
        lines: list[str] = []
        errors: list[str] = []
        threading.Thread(target=lambda: lines.extend(lab.stdout), daemon=True).start()
        threading.Thread(target=lambda: errors.extend(lab.stderr), daemon=True).start()
        deadline = time.monotonic() + 420
        while not lines and lab.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert lines and lines[0].startswith("http://127.0.0.1:"), (lines, lab.poll(), "".join(errors)[-2000:])
        url = lines[0].strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/lab/tree/notebooks/ab\.ipynb\?token=[0-9a-f]{48}", url)
        started = _descendants(lab.pid)
        dom = _chromium(url, tmp_path / "profile", "--dump-dom").stdout
        started |= _descendants(lab.pid)
        assert "jp-Notebook" in dom, dom[-3000:]
        assert 'class="trace icicle"' in dom  # drawn by plotly in the page, not left as text
        assert not re.search(r'class="[^"]*\bjp-mod-dirty\b', dom)  # opens unmodified
        lab.send_signal(signal.SIGINT)
        assert lab.wait(60) == 0
        assert "notebook failed" not in "".join(errors)
    finally:
        if lab.poll() is None:
            started |= _descendants(lab.pid)
            lab.kill()
        for pid, ticks in started.items():
            if _alive(pid, ticks):
                os.kill(pid, signal.SIGKILL)
        lab.wait(10)
