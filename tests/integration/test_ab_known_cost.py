"""crdscale ab judged on changes of known cost, on the real control plane (v1.37.1 and its patched builds).

tests/data/patches/known-cost-v1.37.1.diff makes kube-apiserver hold exactly 2 MiB more per served CRD
version and 64 KiB more per custom resource; noop-v1.37.1.diff changes a comment. `crdscale ab --patch`
must recover both known costs within its 95 % intervals, the point within 15 % of the truth, and give
the no-op diff intervals that contain 0.

As cheap as the question allows: one scenario measures both costs (30 CRDs installed in 3 steps, then 50
custom resources each, 1,500 in all, in 3 steps), and GODEBUG=memprofilerate=16384 samples the heap every
16 KiB, so a 64 KiB allocation is seen with probability 0.98 rather than 0.12 (Go's default 512 KiB) and
one pair is enough. Fewer does not do: with 8 CRDs and 400 objects in 2 steps each, what else the heap
holds at a profile (a few MB, up or down) put the per-CRD point 42 % off and the per-object interval at
±60 KiB. Each A/B builds its patched kube-apiserver and kube-controller-manager first, after
v1.37.1's build (cached by the diff's sha256: free once built).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from crdscale.cli.main import main

PATCHES = Path(__file__).parent.parent / "data" / "patches"
PER_CRD = 2 << 20  # the known-cost diff's bytes per served CRD version (each CRD serves one)
PER_OBJECT = 64 << 10  # and per custom resource

SCENARIO = """\
name = "ab-known-cost-small"
[target]
kube_version = "1.37.1"
env = { GODEBUG = "memprofilerate=16384" }
[crds]
source = "generate"
preset = "apigen"
count = 30
groups = 3
property_count = 20
scope = "Namespaced"
seed = 1
[steps]
grow = "objects"
count = 3
serve = "watch"
settle_seconds = 10
[objects]
count = 50
bytes = 1024
shape = "flat"
crd_steps = 3
[profiles]
kinds = ["heap"]
installed_phase = false
[metrics]
apiserver_metrics_interval_seconds = 5
apiserver_cpu_budget_percent = 0
"""

pytestmark = [pytest.mark.slow, pytest.mark.long]


def _ab(tmp_path: Path, diff: str, capsys) -> dict:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(SCENARIO)
    started = time.monotonic()
    code = main(
        ["ab", str(scenario), "--patch", str(PATCHES / diff), "--min-pairs", "1", "--out", str(tmp_path), "-o", "json"]
    )
    assert code == 0
    verdict = json.loads(capsys.readouterr().out)
    print(f"{diff}: A/B of 1 pair in {time.monotonic() - started:.0f} s")
    return verdict


def _within(estimate: dict, truth: float) -> None:
    assert estimate["low"] <= truth <= estimate["high"], estimate
    assert abs(estimate["difference"] - truth) <= 0.15 * truth, estimate


def test_known_cost_diff_is_recovered(tmp_path, capsys):
    verdict = _ab(tmp_path, "known-cost-v1.37.1.diff", capsys)
    _within(verdict["per_crd"], PER_CRD)
    _within(verdict["per_object"], PER_OBJECT)


def test_noop_diff_contains_zero(tmp_path, capsys):
    verdict = _ab(tmp_path, "noop-v1.37.1.diff", capsys)
    for per in ("per_crd", "per_object"):
        assert verdict[per]["low"] <= 0 <= verdict[per]["high"], (per, verdict[per])
