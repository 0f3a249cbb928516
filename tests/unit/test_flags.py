"""Component flags: a binary's own flag set (read once, cached by its sha256) and the validation
of a scenario's extra flags against it, crdscale's own flags and the version's gates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crdscale.cluster import flags, gates, patches
from crdscale.errors import UsageError

DATA = Path(__file__).parent.parent / "data"

# As pflag prints kube-apiserver's --help (excerpt).
HELP = """\
The Kubernetes API server validates and configures data
Usage:
  kube-apiserver [flags]

Generic flags:

      --advertise-address ip                      The IP address on which to advertise the apiserver to members of the cluster.
      --feature-gates colonSeparatedMultimapStringString
                A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:
                kube:AllAlpha=true|false (ALPHA - default=false)
                kube:CBORServingAndStorage=true|false (ALPHA - default=false)
      --max-requests-inflight int                 This and --max-mutating-requests-inflight are summed (default 400)
      --profiling                                 Enable profiling via web interface host:port/debug/pprof/ (default true)
      --watch-cache-sizes strings                 Watch cache size settings for some resources (pods, nodes, etc.), comma separated.
      --etcd-servers strings                      List of etcd servers to connect with (scheme://ip:port), comma separated.
      --watch-cache                               Enable watch caching in the apiserver (default true)

Global flags:

  -h, --help                     help for kube-apiserver
  -v, --v Level                  number for the log level verbosity
      --version version[=false]  --version, --version=raw prints version information and quits
"""


@pytest.fixture
def fake_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "help.txt").write_text(HELP)
    binary = tmp_path / "kube-apiserver"
    binary.write_text(f"#!/bin/sh\necho run >> {tmp_path}/calls\ncat {tmp_path}/help.txt\n")
    binary.chmod(0o755)
    return binary


def test_help_is_parsed_into_names_and_value_types():
    found, short = flags.parse_help(HELP)
    assert found["advertise-address"] == "ip"
    assert found["watch-cache-sizes"] == "strings"
    assert found["feature-gates"] == "colonSeparatedMultimapStringString"
    assert found["profiling"] == "" and found["watch-cache"] == ""  # booleans
    assert found["version"] == ""  # version[=false]: the value is optional
    assert found["v"] == "Level" and short == {"h": "help", "v": "v"}
    assert "max-mutating-requests-inflight" not in found  # named in a description, not a flag


def test_flag_set_is_read_once_per_binary(fake_binary, tmp_path):
    first = flags.flag_set(fake_binary)
    second = flags.flag_set(fake_binary)
    assert first == second
    assert (tmp_path / "calls").read_text().count("run") == 1
    fake_binary.write_text(fake_binary.read_text() + "# another build\n")
    assert flags.flag_set(fake_binary).sha256 != first.sha256
    assert (tmp_path / "calls").read_text().count("run") == 2


def test_good_flags_are_recorded(fake_binary):
    known = flags.flag_set(fake_binary)
    got = flags.check_flags(
        ["--watch-cache-sizes=widgets.example.org#0", "--max-requests-inflight", "800", "--watch-cache", "-v=2"],
        known,
    )
    assert got == [
        {"flag": "watch-cache-sizes", "value": "widgets.example.org#0"},
        {"flag": "max-requests-inflight", "value": "800"},
        {"flag": "watch-cache", "value": None},
        {"flag": "v", "value": "2"},
    ]


@pytest.mark.parametrize(
    "items, message",
    [
        (["--watch-cache-size=x#0"], "kube-apiserver has no flag --watch-cache-size; nearest: --watch-cache-sizes"),
        (["--no-such-flag-at-all=1"], "kube-apiserver has no flag --no-such-flag-at-all"),
        (
            ["--etcd-servers=http://127.0.0.1:1"],
            "--etcd-servers is set by crdscale for kube-apiserver (crdscale starts the etcd kube-apiserver talks to); "
            "remove it",
        ),
        (["--profiling=false"], "--profiling is set by crdscale for kube-apiserver"),
        (["--v=2", "--"], "a bare -- in the flags ends the binary's flags"),
        (["--max-requests-inflight"], "--max-requests-inflight needs a value (int)"),
        (["watch-cache"], "flag 'watch-cache' does not start with --"),
    ],
)
def test_bad_flags_are_one_line(fake_binary, items, message):
    with pytest.raises(UsageError) as err:
        flags.check_flags(items, flags.flag_set(fake_binary))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_feature_gates_in_flags_are_checked_against_the_version(fake_binary, tmp_path, monkeypatch):
    (tmp_path / "cache" / "feature-gates").mkdir(parents=True)
    for name in ("v1.37.1.json", "v1.28.15.json"):
        shutil.copy(DATA / "gates" / name, tmp_path / "cache" / "feature-gates" / name)
    monkeypatch.setattr(patches, "module_source", lambda *a, **k: pytest.fail("the recorded list is cached"))
    items = ["--feature-gates=kube:CBORServingAndStorage=true,WatchList=false"]
    assert flags.feature_gates_in_flags(items) == {"CBORServingAndStorage": True, "WatchList": False}
    record = flags.check_component_flags(items, fake_binary, kube_version="v1.37.1")
    assert record["feature_gates"]["CBORServingAndStorage"]["stage"] == "alpha"
    assert record["flags"] == [{"flag": "feature-gates", "value": items[0].split("=", 1)[1]}]
    with pytest.raises(UsageError, match="not a feature gate of v1.28.15"):
        flags.check_component_flags(items, fake_binary, kube_version="v1.28.15")
    assert gates.gates_for("v1.28.15")  # from the cache, without sources


def test_controller_manager_reserves_its_own_flags(fake_binary):
    known = flags.FlagSet("kcm", "0", {"controllers": "strings", "concurrent-gc-syncs": "int32"}, {})
    with pytest.raises(UsageError, match="target.controller_manager_controllers"):
        flags.check_flags(
            ["--controllers=*"], known, component="kube-controller-manager", reserved=flags.CONTROLLER_MANAGER_RESERVED
        )
    assert flags.check_flags(
        ["--concurrent-gc-syncs=30"],
        known,
        component="kube-controller-manager",
        reserved=flags.CONTROLLER_MANAGER_RESERVED,
    ) == [{"flag": "concurrent-gc-syncs", "value": "30"}]


def test_released_flag_set_only_once_built(fake_binary, tmp_path):
    assert flags.released_flag_set("v1.37.1") is None
    built = tmp_path / "cache" / "kube-apiserver" / "v1.37.1"
    built.mkdir(parents=True)
    shutil.copy(fake_binary, built / "kube-apiserver")
    assert "watch-cache-sizes" in flags.released_flag_set("v1.37.1").flags


@pytest.mark.parametrize("component", ["kube-apiserver", "kube-controller-manager"])
def test_recorded_v1_37_1_flag_sets(component):
    """Against the flag sets recorded from v1.37.1's binaries (tests/data/flags/)."""
    data = json.loads((DATA / "flags" / f"{component}-v1.37.1.json").read_text())
    known = flags.FlagSet(component, data["sha256"], data["flags"], data["short"])
    reserved = flags.CONTROLLER_MANAGER_RESERVED if component == "kube-controller-manager" else flags.APISERVER_RESERVED
    assert set(reserved) <= set(known.flags)  # every flag crdscale reserves exists in that version
    assert "feature-gates" in known.flags
    with pytest.raises(UsageError, match="nearest: --feature-gates"):
        flags.check_flags(["--feature-gate=X=true"], known, component=component, reserved=reserved)
