"""Per-CRD fits: a known slope comes back from synthetic profiles; a recorded
real run reports a positive cost for the OpenAPI and schema causes."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crdscale.analysis.percrd import (
    TOTAL,
    fit_per_crd,
    fit_per_property,
    linear_fit,
    profile_points,
    t_quantile,
    unattributed_share,
)
from crdscale.analysis.pprof.testing import encode_profile, synthetic_profile
from crdscale.analysis.run import analyze_run
from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.rundir import RunWriter, read_run

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = DATA / "run-kube-apiserver"

OPENAPI = ["k8s.io/kube-openapi/pkg/builder3.BuildOpenAPISpecFromRoutes", "main.main"]
SCHEMA = ["k8s.io/apiextensions-apiserver/pkg/apiserver/schema.NewStructural", "main.main"]
UNKNOWN = ["main.mystery", "main.main"]

# Known costs per CRD (bytes, objects) and fixed bases.
PER_CRD = {"openapi": (20_000, 40), "crd-schema": (5_000, 10), "other": (1_000, 2)}
BASE = {"openapi": (1_000_000, 100), "crd-schema": (0, 0), "other": (30_000_000, 5000)}
STACKS = {"openapi": OPENAPI, "crd-schema": SCHEMA, "other": UNKNOWN}


def _profile(crds: int, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed + crds)
    stacks = []
    for cause, stack in STACKS.items():
        b = BASE[cause][0] + PER_CRD[cause][0] * crds
        o = BASE[cause][1] + PER_CRD[cause][1] * crds
        if noise:
            b = int(b * (1 + rng.normal(0, noise)))
        stacks.append((stack, [int(o), int(b)]))
    return synthetic_profile(stacks)


def test_t_quantile_matches_tables():
    for dof, want in [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)]:
        assert t_quantile(0.975, dof) == pytest.approx(want, abs=1e-4)


# What the hand-written incomplete-beta bisection gave before t_quantile became scipy.stats.t.ppf:
# the intervals of earlier runs stay the same to 1e-9.
HAND_WRITTEN_T = {
    (0.9, 1): 3.077683537174835,
    (0.9, 3): 1.6377443536962346,
    (0.9, 30): 1.3104150253916487,
    (0.95, 2): 2.919985580354023,
    (0.95, 5): 2.0150483733327746,
    (0.95, 100): 1.660234326085174,
    (0.975, 1): 12.70620473617464,
    (0.975, 2): 4.302652729749298,
    (0.975, 3): 3.1824463052839747,
    (0.975, 10): 2.2281388519863867,
    (0.975, 30): 2.042272456300907,
    (0.995, 1): 63.65674116287073,
    (0.995, 5): 4.032142983555332,
    (0.995, 100): 2.625890521437668,
}


def test_t_quantile_table_is_scipys():
    from scipy.special import stdtrit

    from crdscale.analysis.intervals import _T975

    for dof in range(1, len(_T975) + 1):
        assert t_quantile(0.975, dof) == float(stdtrit(dof, 0.975))
        assert t_quantile(0.025, float(dof)) == -float(stdtrit(dof, 0.975))
    assert t_quantile(0.975, 31) == pytest.approx(float(stdtrit(31, 0.975)), rel=1e-12)  # past it: scipy


@pytest.mark.parametrize(("p", "dof"), sorted(HAND_WRITTEN_T))
def test_t_quantile_equals_the_former_hand_written_numerics(p, dof):
    assert t_quantile(p, dof) == pytest.approx(HAND_WRITTEN_T[(p, dof)], rel=1e-9)
    assert t_quantile(1 - p, dof) == pytest.approx(-HAND_WRITTEN_T[(p, dof)], rel=1e-9)


def test_linear_fit_exact_line():
    fit = linear_fit([0, 10, 20, 40], [5, 25, 45, 85])
    assert fit.slope == pytest.approx(2.0) and fit.intercept == pytest.approx(5.0)
    assert fit.slope_low == pytest.approx(2.0) and fit.slope_high == pytest.approx(2.0)
    assert fit.r2 == pytest.approx(1.0)


def test_linear_fit_needs_two_counts():
    with pytest.raises(UsageError):
        linear_fit([10, 10], [1, 2])
    two = linear_fit([0, 10], [0, 10])
    assert math.isnan(two.slope_low)


def test_fit_recovers_known_slopes_exactly():
    points = profile_points((n, None, _profile(n)) for n in (0, 100, 200, 300, 400))
    fits, residuals = fit_per_crd(points)
    served = fits[fits["phase"] == "served"].set_index(["metric", "cause"])
    for cause, (per_bytes, per_objects) in PER_CRD.items():
        assert served.loc[("bytes", cause), "per_crd"] == pytest.approx(per_bytes)
        assert served.loc[("objects", cause), "per_crd"] == pytest.approx(per_objects)
        assert served.loc[("bytes", cause), "base"] == pytest.approx(BASE[cause][0], abs=1e-3)
    assert served.loc[("bytes", TOTAL), "per_crd"] == pytest.approx(sum(v[0] for v in PER_CRD.values()))
    assert np.abs(residuals["residual"]).max() < 1e-3
    assert unattributed_share(fits) == pytest.approx(1_000 / 26_000)


def test_fit_with_noise_has_interval_around_truth():
    points = profile_points((n, None, _profile(n, noise=0.01)) for n in (0, 50, 100, 150, 200, 250))
    fits, _ = fit_per_crd(points)
    row = fits[(fits["metric"] == "bytes") & (fits["cause"] == "openapi")].iloc[0]
    assert row["per_crd_low"] < 20_000 < row["per_crd_high"]
    # 40 objects of 500 B per CRD: Go samples ~1 in 1,000 such objects, so ~10 samples would carry
    # the whole growth in a real profile; the fits say what that sampling alone gives.
    assert row["sampling_se"] > 0


def test_unsampled_points_get_their_interval_from_the_increments():
    from crdscale.analysis.intervals import growth_fit

    rng = np.random.default_rng(4)
    crds = np.array([0, 50, 100, 150, 200, 250])
    steps = 20_000 * np.diff(crds) + rng.normal(0, 60_000, len(crds) - 1)
    values = 1e6 + np.r_[0, np.cumsum(steps)]
    fit = growth_fit(crds, values)
    assert fit.per_unit == pytest.approx((values[-1] - values[0]) / 250)
    assert fit.estimate.dof == 4 and fit.increments == 5
    assert fit.estimate.low < 20_000 < fit.estimate.high
    assert fit.estimate.high - fit.estimate.low < 10_000


def test_installed_and_served_phases_share_the_baseline():
    pts = [(0, None, _profile(0))]
    pts += [(n, "installed", _profile(n // 2)) for n in (100, 200)]  # installing costs half
    pts += [(n, None, _profile(n)) for n in (100, 200)]
    fits, _ = fit_per_crd(profile_points(pts))
    by = fits.set_index(["phase", "metric", "cause"])["per_crd"]
    assert by[("served", "bytes", "openapi")] == pytest.approx(20_000)
    assert by[("installed", "bytes", "openapi")] == pytest.approx(10_000)


def test_bytes_per_property():
    per_crd = pd.DataFrame(
        {"cause": ["openapi"] * 3, "properties": [10, 50, 100], "per_crd": [1_000 + 300 * p for p in (10, 50, 100)]}
    )
    fit = fit_per_property(per_crd).iloc[0]
    assert fit["per_property"] == pytest.approx(300)
    assert fit["fixed_per_crd"] == pytest.approx(1_000)


def _write_run(tmp_path: Path) -> Path:
    run = RunWriter.create_at(tmp_path / "run")
    run.write_manifest({"name": "synthetic"})
    for step, n in enumerate((0, 100, 200, 300)):
        run.write_profile("heap", step, n, None, encode_profile(_profile(n)))
    run.close()
    return run.path


def test_analyze_cli_on_synthetic_run(tmp_path, capsys):
    run = _write_run(tmp_path)
    assert main(["analyze", str(run)]) == 0
    out = capsys.readouterr().out
    assert "openapi" in out and "19.53 KiB" in out  # 20000 B per CRD
    table = pd.read_csv(run / "analysis" / "percrd.csv")
    assert {"phase", "metric", "cause", "per_crd", "per_crd_low", "per_crd_high", "base", "share"} <= set(table.columns)
    assert (run / "analysis" / "percrd.parquet").is_file()


def test_analyze_cli_errors(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope")]) == 2
    empty = RunWriter.create_at(tmp_path / "empty")
    empty.write_manifest({"name": "empty"})
    assert main(["analyze", str(empty.path)]) == 2
    assert "two or more CRD counts" in capsys.readouterr().err


@pytest.mark.skipif(not RUN.is_dir(), reason="recorded run not present")
def test_recorded_real_run_has_positive_openapi_and_schema_cost(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    analysis = analyze_run(read_run(run))
    served = analysis.fits[(analysis.fits["phase"] == "served") & (analysis.fits["metric"] == "bytes")]
    per_crd = served.set_index("cause")["per_crd"]
    assert per_crd["openapi"] > 0
    assert per_crd["crd-schema"] > 0
    assert per_crd[TOTAL] > 0
    assert unattributed_share(analysis.fits) < 0.25


def test_analyze_several_runs_fits_bytes_per_property(tmp_path, capsys):
    runs = []
    for properties in (10, 50, 100):
        run = RunWriter.create_at(tmp_path / f"run{properties}")
        run.write_manifest({"scenario": {"crds": {"property_count": properties}}})
        for step, n in enumerate((0, 100, 200)):
            stacks = [(OPENAPI, [n, 1_000_000 + n * (2_000 + 300 * properties)]), (UNKNOWN, [1, 5_000_000])]
            run.write_profile("heap", step, n, None, encode_profile(synthetic_profile(stacks)))
        run.close()
        runs.append(str(run.path))
    assert main(["analyze", *runs]) == 0
    table = pd.read_csv(Path(runs[0]) / "analysis" / "per_property.csv").set_index("cause")
    assert table.loc["openapi", "per_property"] == pytest.approx(300)
    assert table.loc["openapi", "fixed_per_crd"] == pytest.approx(2_000)
    assert "Per schema property" in capsys.readouterr().out


def test_install_serve_split_recovers_both_costs():
    """installed profile at N holds the N-100 CRDs served in earlier steps; paired increments
    (install a step, then serve it) separate what an Established CRD costs from what serving it adds."""
    import numpy as np
    import pandas as pd

    from crdscale.analysis.percrd import fit_install_serve, served_counts

    rng = np.random.default_rng(1)
    base, per_installed, per_served = 50e6, 100e3, 450e3
    rows = [(0, "served", "zap", "bytes", base)]
    for n in (100, 200, 300, 400, 500):
        rows.append(
            (n, "installed", "zap", "bytes", base + per_installed * n + per_served * (n - 100) + rng.normal(0, 2e3))
        )
        rows.append((n, "served", "zap", "bytes", base + (per_installed + per_served) * n + rng.normal(0, 2e3)))
    points = pd.DataFrame(rows, columns=["crds", "phase", "cause", "metric", "value"])
    counts = served_counts(points).set_index(["crds", "phase"])
    assert tuple(counts.loc[(300, "installed")]) == (300, 200)
    fit = fit_install_serve(points).iloc[0]
    assert abs(fit.per_installed - per_installed) < 1e3 and abs(fit.per_served - per_served) < 1e3
    assert fit.per_installed_low < per_installed < fit.per_installed_high
    assert fit.per_served_low < per_served < fit.per_served_high


def test_install_serve_split_needs_both_phases():
    import pandas as pd

    from crdscale.analysis.percrd import fit_install_serve

    points = pd.DataFrame(
        [(0, "served", "x", "bytes", 1.0), (10, "served", "x", "bytes", 2.0)],
        columns=["crds", "phase", "cause", "metric", "value"],
    )
    assert fit_install_serve(points).empty
