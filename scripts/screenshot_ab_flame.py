"""Screenshots of an A/B's differential flame graph for the docs, taken in headless Chromium.

The figure is the one `crdscale report AB_DIR` embeds in its HTML report (and `crdscale ab` writes as
flame.html), drawn from the committed known-cost A/B (data/ab-known-cost), once coloured by growth and
once by cause:

    python scripts/screenshot_ab_flame.py [AB_DIR] [--out docs/assets]

writes OUT/ab-flame-growth.png and OUT/ab-flame-cause.png. Needs chromium (scripts/bootstrap.sh).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from crdscale.report.ab import flame_figure, flame_nodes
from crdscale.report.diffflame import COLOURINGS, write_diff_flame_html
from crdscale.scenario.ab import AB

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ab_dir", nargs="?", default=str(ROOT / "data" / "ab-known-cost"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "assets"))
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    ab = AB.open(args.ab_dir)
    nodes = flame_nodes(ab)
    with tempfile.TemporaryDirectory() as tmp:
        for colour in COLOURINGS:
            html = write_diff_flame_html(flame_figure(ab, nodes, colour=colour), Path(tmp) / f"{colour}.html")
            shot = Path(args.out) / f"ab-flame-{colour}.png"
            subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 f"--user-data-dir={tmp}/profile", "--window-size=1400,760", "--hide-scrollbars",
                 "--virtual-time-budget=10000", f"--screenshot={shot}", html.as_uri()],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            print(shot)


if __name__ == "__main__":
    main()
