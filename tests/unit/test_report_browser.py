"""The HTML report opens in headless Chromium without console errors, and its first
screen shows the first figure. Needs Debian's `chromium` (scripts/bootstrap.sh installs
it as root); skipped only where it is not installed. No cluster needed: the report is
rendered from the reference run."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
    pytest.mark.external,
]

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def report_dir(reference_report):
    """The reference run's report, rendered once with test_report_render.py's (conftest.py)."""
    assert reference_report.code == 0, reference_report.stdout
    return Path(reference_report.out)


def _chromium(html: Path, screenshot: Path, size: str = "1400,1000") -> str:
    proc = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={size}",
            "--hide-scrollbars",
            f"--user-data-dir={screenshot.parent / 'profile'}",
            f"--screenshot={screenshot}",
            html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert screenshot.is_file(), proc.stderr[-2000:]
    return proc.stderr


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["report-nocode.html", "report.html"])
def test_report_opens_without_console_errors_and_shows_the_first_figure(report_dir, tmp_path, name):
    stderr = _chromium(report_dir / name, tmp_path / "shot.png")
    console = [line for line in stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "\n".join(console)

    import matplotlib.image as mpimg
    import numpy as np

    shot = mpimg.imread(tmp_path / "shot.png")[:, :, :3]
    assert shot.shape[:2] == (1000, 1400)

    # The first figure (memory over time) draws RSS in red and the heap in blue: both must be on screen.
    def near(rgb):  # noqa: E306 - a local predicate in a test, not a notebook
        return (np.abs(shot - np.array(rgb) / 255).max(axis=2) < 0.08).sum()

    assert near((0xD6, 0x27, 0x28)) > 300, "RSS line (red) of the first figure not on the first screen"
    assert near((0x1F, 0x77, 0xB4)) > 300, "heap line (blue) of the first figure not on the first screen"


def test_report_loads_nothing_from_the_network(report_dir):
    for name in ("report.html", "report-nocode.html"):
        html = (report_dir / name).read_text()
        assert not re.search(r'<(script|link|img)[^>]+(src|href)="https?://', html), name
