"""Damaged run directories: each way a copy of a reference run can be broken so that its files contradict
each other, as :mod:`crdscale.rundir.evidence` must find.

Each :class:`Damage` edits a copy of ``data/reference-run`` in place (``damage.apply(run, other)``, where
``other`` is a copy of ``data/reference-run-v1.24.0``, the profiles of another build) and names the
evidence problem it must cause. tests/unit/test_damaged_runs.py runs each one through the CLI, and
draws combinations of them with Hypothesis. Nothing is committed: every damage is made from the
reference runs in a temporary directory.
"""

from __future__ import annotations

import gzip
import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from crdscale.analysis.pprof.schema import profile_message_class
from crdscale.rundir import layout

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"
REFERENCE_124 = ROOT / "data" / "reference-run-v1.24.0"


def copy_run(source: Path, to: Path, *, new_run_id: bool = False) -> Path:
    """A copy of a run directory without derived files; ``new_run_id``: a different run as far as
    ``compare`` can tell (its manifest's run_id changed)."""
    shutil.copytree(source, to, ignore=shutil.ignore_patterns("analysis", "report", "notebooks"))
    if new_run_id:
        edit_manifest(to, lambda m: {**m, "run_id": f"{m.get('run_id')}-copy-{uuid.uuid4().hex[:4]}"})
    return to


def edit_manifest(run: Path, edit: Callable[[dict], dict]) -> None:
    path = run / layout.MANIFEST
    path.write_text(json.dumps(edit(json.loads(path.read_text())), indent=2))


def edit_events(run: Path, edit: Callable[[dict], dict | None]) -> None:
    """Apply ``edit(event) -> event | None`` to each event (None drops it)."""
    path = run / layout.EVENTS
    events = [edit(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(e) + "\n" for e in events if e is not None))


def edit_series(run: Path, edit) -> None:
    """Rewrite the run's exported series as ``edit(frame)``."""
    path = run / layout.SERIES
    frame = pd.read_parquet(path)
    edit(frame).to_parquet(path, index=False)


def edit_profile(path: Path, edit: Callable) -> None:
    """Rewrite one profile file after ``edit(message)`` changed its ``profile.proto`` message."""
    msg = profile_message_class().FromString(gzip.decompress(path.read_bytes()))
    edit(msg)
    path.write_bytes(gzip.compress(msg.SerializeToString(), mtime=0))


SERVED = {step: f"profiles/heap-step{step:02d}-crds{40 * step:04d}.pb.gz" for step in range(5)}


def _foreign_period(run: Path, other: Path) -> None:
    # Another Go program's heap profile: sampled every 512 bytes instead of kube-apiserver's 512 KiB.
    edit_profile(run / SERVED[2], lambda msg: setattr(msg, "period", 512))


def _other_build(run: Path, other: Path) -> None:
    shutil.copyfile(other / SERVED[2], run / SERVED[2])


def _swapped_steps(run: Path, other: Path) -> None:
    a, b = run / SERVED[1], run / SERVED[3]
    tmp = a.with_suffix(".swap")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def _identical_profiles(run: Path, other: Path) -> None:
    for path in sorted((run / "profiles").glob("heap-*.pb.gz")):
        if path.name != Path(SERVED[0]).name:
            shutil.copyfile(run / SERVED[0], path)


def _crd_count_falls(run: Path, other: Path) -> None:
    # Step 3 says 20 CRDs after 80 at step 2 (its events and its files' names agree, as a rename would leave them).
    def edit(e: dict) -> dict:
        if e.get("step") == 3 and "crds" in e:
            e = {**e, "crds": 20}
            if "file" in e:
                e["file"] = e["file"].replace("crds0120", "crds0020")
        return e

    edit_events(run, edit)
    for path in (run / "profiles").glob("*-step03-crds0120*"):
        path.rename(path.with_name(path.name.replace("crds0120", "crds0020")))


def _status_disagrees(run: Path, other: Path) -> None:
    reason = "memory guard: RSS 1.1 GiB passed the limit of 1 GiB"
    edit_events(run, lambda e: {**e, "status": "failed", "reason": reason} if e["kind"] == "run.end" else e)


def _nan_series(run: Path, other: Path) -> None:
    edit_series(run, lambda f: f.assign(value=float("nan")))


def _duplicated_rows(run: Path, other: Path) -> None:
    edit_series(run, lambda f: pd.concat([f, f.assign(value=f["value"] * 10)], ignore_index=True))


def _series_years_away(run: Path, other: Path) -> None:
    edit_series(run, lambda f: f.assign(timestamp=pd.to_datetime(f["timestamp"], utc=True) + pd.Timedelta(days=3652)))


def _no_series_rows(run: Path, other: Path) -> None:
    edit_series(run, lambda f: f.iloc[0:0])


def _series_is_a_directory(run: Path, other: Path) -> None:
    path = run / layout.SERIES
    path.unlink()
    path.mkdir()


def _version_disagrees(run: Path, other: Path) -> None:
    def edit(m: dict) -> dict:
        m["versions"]["kube-apiserver"] = "v1.24.0"
        m["scenario"]["target"]["kube_version"] = "1.24.0"
        return m

    edit_manifest(run, edit)


@dataclass(frozen=True)
class Damage:
    """One way to break a run: its ``name``, what it does (``apply(run, other)``), the evidence problem
    ``code`` it must cause, and whether ``analyze`` must refuse the run (else it states the problem)."""

    name: str
    apply: Callable[[Path, Path], None]
    code: str
    refused: bool

    def __str__(self) -> str:
        return self.name


DAMAGES = (
    Damage("foreign-sample-period", _foreign_period, "profile-sample-period", True),
    Damage("profile-of-another-build", _other_build, "profile-binary", True),
    Damage("steps-swapped", _swapped_steps, "profile-time-order", True),
    Damage("profiles-byte-identical", _identical_profiles, "profile-duplicate", True),
    Damage("crd-count-falls", _crd_count_falls, "crd-count-falls", True),
    Damage("status-disagrees", _status_disagrees, "status-disagrees", False),
    Damage("series-all-nan", _nan_series, "series-not-finite", False),
    Damage("series-duplicated-at-10x", _duplicated_rows, "series-duplicate-timestamps", False),
    Damage("series-10-years-away", _series_years_away, "series-outside-run", False),
    Damage("series-no-rows", _no_series_rows, "series-row-count", False),
    Damage("series-is-a-directory", _series_is_a_directory, "series-not-a-file", False),
    Damage("version-disagrees", _version_disagrees, "version-disagrees", False),
)
