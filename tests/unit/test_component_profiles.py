"""kube-controller-manager's and etcd's heap profiles at every profile mark: names, the run directory, the
measurement, the endpoints.

tests/data/run-components is a v1.37.1 run of 300 CRDs in 6 steps, shrunk to the baseline and 100, 200
and 300 CRDs (served phase) with all three components' heap profiles and the RSS series
(scripts/make_run_fixture.py ... --components --served-only --series-metric process_resident_memory_bytes).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from crdscale.cluster import pki
from crdscale.cluster.local import CONTROLLER_MANAGER_OPEN_PATHS, LocalControlPlane
from crdscale.collect.pprof import fetch_component_profile
from crdscale.errors import ClusterError, UsageError
from crdscale.rundir import RunWriter, layout, read_run
from crdscale.scenario.config import parse_scenario
from crdscale.scenario.measurements import PROFILE, STEP_END, Mark, RunContext
from crdscale.scenario.measurements.componentprofiles import NOT_LOCAL, ComponentProfiles

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = DATA / "run-components"
OLD_RUN = DATA / "run-kube-apiserver"
KCM, ETCD = layout.CONTROLLER_MANAGER, layout.ETCD


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("heap", 3, 300), "heap-step03-crds0300.pb.gz"),
        (("heap", 3, 300, "installed"), "heap-step03-crds0300-installed.pb.gz"),
        (("heap", 3, 300, None, "kube-apiserver"), "heap-step03-crds0300.pb.gz"),
        (("heap", 3, 300, None, KCM), "kube-controller-manager-heap-step03-crds0300.pb.gz"),
        (("heap", 0, 0, "openapiv2", ETCD), "etcd-heap-step00-crds0000-openapiv2.pb.gz"),
    ],
)
def test_profile_names_round_trip_and_kube_apiserver_keeps_its_names(args, name):
    assert layout.profile_filename(*args) == name
    kind, step, crds, phase, component = (
        (*args, None, layout.APISERVER)[:5] if len(args) == 3 else (*args, layout.APISERVER)[:5]
    )
    assert layout.parse_profile_filename(name) == layout.ProfileName(kind, step, crds, phase, component)


def test_an_unknown_component_is_not_a_profile_name():
    assert layout.parse_profile_filename("kube-scheduler-heap-step01-crds0010.pb.gz") is None


# ---------------------------------------------------------------- writing and reading


def test_kube_apiserver_profiles_read_as_before_beside_the_components():
    run = read_run(RUN)
    assert list(run.profiles["file"]) == [f"profiles/heap-step{s:02d}-crds{c:04d}.pb.gz" for s, c in RUN_STEPS]
    assert run.unrecorded_profiles == []
    for component in (KCM, ETCD):
        files = run.component_profiles(component)
        assert list(files["crds"]) == [0, 100, 200, 300]
        assert all(Path(f).name.startswith(component + "-heap-") for f in files["file"])
        assert run.unrecorded_component_profiles(component) == []


RUN_STEPS = [(0, 0), (2, 100), (4, 200), (6, 300)]


def test_writer_names_the_component_in_the_event_only_when_it_is_not_kube_apiserver(tmp_path):
    writer = RunWriter.create_at(tmp_path / "run")
    writer.start_manifest(run_id="r")
    assert writer.write_profile("heap", 1, 10, None, b"\x1f\x8bx") == "profiles/heap-step01-crds0010.pb.gz"
    kcm = writer.write_profile("heap", 1, 10, None, b"\x1f\x8by", component=KCM)
    assert kcm == "profiles/kube-controller-manager-heap-step01-crds0010.pb.gz"
    writer.close()
    events = [e for e in read_run(writer.path).read_jsonl(layout.EVENTS) if e["kind"] == "profile"]
    assert "component" not in events[0] and events[1]["component"] == KCM
    run = read_run(writer.path)
    assert list(run.profiles["file"]) == ["profiles/heap-step01-crds0010.pb.gz"]
    assert list(run.component_profiles(KCM)["file"]) == [kcm]


def test_a_component_profile_no_event_records_is_left_out_of_its_own_list_only(tmp_path):
    copy = shutil.copytree(RUN, tmp_path / "run")
    events = (copy / layout.EVENTS).read_text().splitlines()
    gone = "profiles/etcd-heap-step06-crds0300.pb.gz"
    (copy / layout.EVENTS).write_text("\n".join(e for e in events if gone not in e) + "\n")
    run = read_run(copy)
    assert run.unrecorded_profiles == [] and run.unrecorded_component_profiles(KCM) == []
    assert [f for f, _ in run.unrecorded_component_profiles(ETCD)] == [gone]
    assert list(run.component_profiles(ETCD)["crds"]) == [0, 100, 200]


# ---------------------------------------------------------------- the measurement


class _Plane:
    """What the measurement asks of a local control plane."""

    def __init__(self, kcm: bool = True, opened: bool = True):
        self.runs_controller_manager = kcm
        self.opened = opened
        self.credentials = pki.Credentials(Path("/nonexistent"))

    def pprof_url(self, component):
        if not self.opened or (component == KCM and not self.runs_controller_manager):
            return None
        return f"http://127.0.0.1:1/{component}/debug/pprof"


def _context(tmp_path, scenario_text: str = ""):
    writer = RunWriter.create_at(tmp_path / "run")
    writer.start_manifest(run_id="r")
    messages = []
    progress = argparse.Namespace(message=messages.append)
    ctx = RunContext(parse_scenario(scenario_text or None), writer, writer.events, "r", progress)
    return ctx, writer, messages


def test_the_measurement_saves_both_profiles_at_every_profile_mark(tmp_path):
    ctx, writer, _ = _context(tmp_path)
    fetched = []

    def fetch(component, url):
        fetched.append((component, url))
        return (RUN / layout.PROFILES / f"{component}-heap-step00-crds0000.pb.gz").read_bytes()

    m = ComponentProfiles.create(ctx.scenario)
    m.fetch, m.plane = fetch, _Plane()
    m.start(ctx)
    for mark in (Mark(PROFILE, 0, 0), Mark(STEP_END, 0, 0), Mark(PROFILE, 1, 10, "installed"), Mark(PROFILE, 1, 10)):
        m.at(ctx, mark)
    m.stop(ctx)
    writer.close()
    assert [c for c, _ in fetched] == [KCM, ETCD] * 3
    run = read_run(writer.path)
    for component in (KCM, ETCD):
        got = run.component_profiles(component)
        assert list(zip(got["crds"], got["phase"].fillna("served"))) == [
            (0, "served"),
            (10, "installed"),
            (10, "served"),
        ]
        record = run.manifest.components[component]
        assert record["taken"] == 3 and record["profiles"] == ["heap"] and record["seconds"] >= 0
    assert len(run.profiles) == 0  # kube-apiserver's are another measurement's


def test_a_failing_profile_is_an_event_not_a_failed_run(tmp_path):
    ctx, writer, _ = _context(tmp_path)

    def fetch(component, url):
        if component == ETCD:
            raise ClusterError("GET etcd: ConnectionError")
        return (RUN / layout.PROFILES / "kube-controller-manager-heap-step00-crds0000.pb.gz").read_bytes()

    m = ComponentProfiles([KCM, ETCD], fetch=fetch, plane=_Plane())
    m.start(ctx)
    m.at(ctx, Mark(PROFILE, 0, 0))
    m.stop(ctx)
    writer.close()
    run = read_run(writer.path)
    errors = run.events[run.events["kind"] == "profile.error"]
    assert list(errors["component"]) == [ETCD] and "ConnectionError" in errors["error"].iloc[0]
    assert len(run.component_profiles(KCM)) == 1 and run.manifest.components[ETCD]["taken"] == 0


@pytest.mark.parametrize(
    ("plane", "why"),
    [
        (None, {KCM: NOT_LOCAL, ETCD: NOT_LOCAL}),
        (_Plane(kcm=False), {KCM: "runs no kube-controller-manager"}),
        (_Plane(opened=False), {KCM: "without /debug/pprof", ETCD: "without /debug/pprof"}),
    ],
)
def test_a_target_without_the_endpoints_is_skipped_with_why(tmp_path, plane, why):
    ctx, writer, messages = _context(tmp_path)
    fetched = []

    def fetch(component, url):
        fetched.append(component)
        return (RUN / layout.PROFILES / f"{component}-heap-step00-crds0000.pb.gz").read_bytes()

    m = ComponentProfiles([KCM, ETCD], fetch=fetch, plane=plane)
    m.start(ctx)
    m.at(ctx, Mark(PROFILE, 0, 0))
    m.stop(ctx)
    assert fetched == [c for c in (KCM, ETCD) if c not in why]
    record = writer.read_manifest().components
    for component, reason in why.items():
        assert reason in record[component]["skipped"]
        assert any(reason in line for line in messages)
    for component in set((KCM, ETCD)) - set(why):
        assert "skipped" not in record[component]


def test_the_scenario_turns_it_off():
    assert ComponentProfiles.create(parse_scenario("[profiles]\ncomponents = []\n")) is None
    assert ComponentProfiles.create(parse_scenario(None)).components == [KCM, ETCD]
    with pytest.raises(UsageError):
        parse_scenario('[profiles]\ncomponents = ["kube-scheduler"]\n')


def test_the_local_control_plane_serves_pprof_to_loopback(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    cp = LocalControlPlane(name="t")
    cp.state = {
        "ports": {"apiserver": 6443, "etcd_client": 2379, "controller_manager": 10257},
        "controller_manager": {"enabled": True},
    }
    argv = cp.controller_manager_argv(tmp_path / "kcm", pki.Credentials(tmp_path / "pki"))
    assert f"--authorization-always-allow-paths={CONTROLLER_MANAGER_OPEN_PATHS}" in argv
    assert {"/debug/pprof", "/debug/pprof/*", "/metrics"} <= set(CONTROLLER_MANAGER_OPEN_PATHS.split(","))
    assert cp.pprof_url(KCM) is None and cp.pprof_url(ETCD) is None  # an instance started without them
    cp.state["controller_manager"]["flags"] = argv[1:]
    cp.state["etcd_flags"] = ["--enable-pprof"]
    assert cp.pprof_url(KCM) == "https://127.0.0.1:10257/debug/pprof"
    assert cp.pprof_url(ETCD) == "http://127.0.0.1:2379/debug/pprof"
    assert cp.pprof_url("kube-scheduler") is None


def test_fetch_component_profile_checks_what_it_gets():
    asked = []

    def get(url, params, timeout):
        asked.append((url, params))
        return argparse.Namespace(status_code=200, content=b"\x1f\x8bprofile", text="")

    assert fetch_component_profile(get, "http://127.0.0.1:2379/debug/pprof/") == b"\x1f\x8bprofile"
    assert asked == [("http://127.0.0.1:2379/debug/pprof/heap", {"gc": "1"})]
    forbidden = lambda url, params, timeout: argparse.Namespace(status_code=403, content=b"", text="forbidden")  # noqa: E731
    with pytest.raises(ClusterError, match="HTTP 403"):
        fetch_component_profile(forbidden, "https://127.0.0.1:10257/debug/pprof")
    with pytest.raises(ValueError):
        fetch_component_profile(get, "http://x/debug/pprof", "cpu")
