"""One owner of which marks a series is fitted per CRD at (crdscale.analysis.rundata.crd_step_marks): the steps
that added CRDs, never the object steps that stay at the last CRD count. analyze, compare (and so ab and a
history) and the components' fits agree, on a recorded run that grew 200 custom resources after its 40 CRDs."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.analysis.compare import compare_runs
from crdscale.analysis.run import analyze_run
from crdscale.analysis.rundata import crd_step_marks, heap_profile_set
from crdscale.rundir import read_run

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "data" / "history-small"
OBJECTS = SMALL / "v1.37.1"  # CRD steps at 20 and 40 CRDs, then 2 object steps at 40


def test_marks_leave_the_object_steps_out():
    run = read_run(OBJECTS)
    assert len(run.object_steps) == 2 and len(run.profile_marks()) == 5
    marks = crd_step_marks(run)
    assert list(marks["crds"]) == [0, 20, 40]
    assert crd_step_marks(run, heap_profile_set(run)).equals(marks)


def test_compare_fits_rss_and_cpu_per_crd_at_the_crd_steps_as_analyze_does():
    comparison = compare_runs([SMALL / "v1.24.0", OBJECTS], ["v1.24.0", "v1.37.1"])
    fits = comparison.series_fits.set_index(["run", "phase", "metric"])
    points = comparison.series_points
    assert sorted(points[points["run"] == "v1.37.1"]["crds"].unique()) == [0, 20, 40]
    assert (points.groupby(["run", "metric"]).size() == 3).all()  # one point per CRD step, none at the object steps
    own = analyze_run(read_run(OBJECTS)).series_fits.set_index(["phase", "metric"])
    assert fits.loc[("v1.37.1", "served", "rss_bytes"), "per_crd"] == pytest.approx(
        own.loc[("served", "rss_bytes"), "per_crd"]
    )
    # With the object steps' points (as compare fitted before), v1.37.1's RSS was 4.45 MB per CRD; at its CRD steps 6.02.
    assert fits.loc[("v1.37.1", "served", "rss_bytes"), "per_crd"] == pytest.approx(6_017_433.6)
    assert fits.loc[("v1.37.1", "served", "cpu_seconds"), "per_crd"] == pytest.approx(0.14825)
    # The components' kube-apiserver RSS is read at the same marks.
    components = comparison.results["components"]["component_fits"].set_index(["run", "component", "metric"])
    assert components.loc[("v1.37.1", "kube-apiserver", "rss_bytes"), "n"] == 3
