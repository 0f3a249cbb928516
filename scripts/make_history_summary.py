"""Keep the small summary of a recorded release history (`crdscale history`) under data/history/<name>/, for
docs/results/history.toml (the docs generator renders each release's row and the changepoints from it).

Kept:
- findings.json: every number, as `crdscale history --show DIR -o json` prints it (releases, changes,
  changepoints, seeds);
- findings.md: the history's own page text (`crdscale report DIR` writes the same, with its figures);
- experiment.json and workload.toml: what ran, every cell's status;
- summary.json: what the page says beside the numbers: each release's Go (and whether it is the release's own),
  its runs' wall time, and the history's wall time from its first run's start to its last run's end.
- the figures (PNG) the page shows, into docs/assets/history-<figure>.png (--figures DIR: the history's
  report directory, written by `crdscale report DIR`).

The run directories (profiles, series: megabytes a run) stay where they were recorded; `crdscale report`
and `crdscale lab` need them, the results page does not.

    python scripts/make_history_summary.py HISTORY_DIR data/history/<name> [--figures HISTORY_DIR/report]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's crdscale

from crdscale.fsutil import write_json_atomic  # noqa: E402
from crdscale.report.history import COMPONENT_FIGURES, FIGURES, history_json, history_markdown, load_history  # noqa: E402
from crdscale.rundir import layout  # noqa: E402

SUMMARY = "summary.json"
FIGURE_DIR = ROOT / "docs" / "assets"


def _seconds(manifest: dict) -> float | None:
    try:
        start, end = (datetime.fromisoformat(manifest[k].replace("Z", "+00:00")) for k in ("started_at", "ended_at"))
    except (KeyError, AttributeError, ValueError):
        return None
    return (end - start).total_seconds()


def release_summary(history) -> dict:
    """Per release: its Go, whether the release shipped with it, and its runs' seconds; the history's span."""
    releases, starts, ends = {}, [], []
    for version, run_dirs in history.runs.items():
        gos, own, seconds = set(), set(), []
        for run_dir in run_dirs:
            manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
            gos.add((manifest.get("versions") or {}).get("kube-apiserver-go"))
            own.add((manifest.get("change") or {}).get("go_is_release"))
            seconds.append(_seconds(manifest))
            starts.append(manifest.get("started_at"))
            ends.append(manifest.get("ended_at"))
        releases[version] = {
            "go": ", ".join(sorted(g for g in gos if g)),
            "go_is_release": own.pop() if len(own) == 1 else None,
            "run_seconds": seconds,
        }
    span = _seconds({"started_at": min(s for s in starts if s), "ended_at": max(e for e in ends if e)})
    return {"releases": releases, "first_run_started": min(starts), "last_run_ended": max(ends), "span_seconds": span}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history_dir", type=Path)
    parser.add_argument("out", type=Path, help="data/history/<name>")
    parser.add_argument("--figures", type=Path, help="the history's report directory, whose PNGs the page shows")
    args = parser.parse_args(argv)
    history = load_history(args.history_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    findings = history_json(history)
    findings["history_dir"] = args.out.name  # not this machine's path
    write_json_atomic(args.out / layout.FINDINGS_JSON, findings)
    (args.out / layout.FINDINGS_MD).write_text(history_markdown(history) + "\n")
    for name in ("experiment.json", "workload.toml"):
        if (args.history_dir / name).exists():
            shutil.copyfile(args.history_dir / name, args.out / name)
    write_json_atomic(args.out / SUMMARY, release_summary(history))
    if args.figures:
        FIGURE_DIR.mkdir(parents=True, exist_ok=True)
        for stem, _quantity in (*FIGURES, *COMPONENT_FIGURES):
            png = args.figures / f"{stem}.png"
            if png.exists():
                shutil.copyfile(png, FIGURE_DIR / f"history-{stem}.png")
    print(f"{args.out}: {len(history.versions)} releases, {len(history.changepoints)} changepoints")
    return 0


if __name__ == "__main__":
    sys.exit(main())
