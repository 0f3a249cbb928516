"""Typed probe configuration: CLI flags generated from the configs, scenario options read into them,
one entry point for both (no server)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from crdscale.cli import probe as probe_cli
from crdscale.cli.main import build_parser
from crdscale.collect import probes
from crdscale.collect.probes import configs
from crdscale.errors import UsageError


def _parse(*argv: str):
    args = build_parser().parse_args(["probe", *argv])
    return configs.from_args(configs.PROBES[args.probe], args)


def test_flags_are_generated_from_the_fields():
    config = _parse("list", "--load", "1,4,16", "--kinds", "rv0", "consistent", "--secrets", "5", "--keep")
    assert config.load_levels == (1, 4, 16) and config.kinds == ("rv0", "consistent")
    assert config.secrets == 5 and config.keep and config.compare_etcd  # `probe list` compares with etcd
    assert not _parse("list", "--no-etcd-comparison").compare_etcd
    assert _parse("discovery", "--kubectl", "1.23.3,1.24.0", "--no-kubectl").kubectl_versions == ("1.23.3", "1.24.0")
    assert not _parse("apf", "--no-observe").observe
    assert _parse("apf").kinds == configs.LIST_KINDS


def test_the_cli_and_a_scenario_step_start_from_the_declared_defaults():
    # A scenario step: no second kube-apiserver, two discovery limits; the CLI: its own, said in one place.
    assert configs.from_options("list", {}).compare_etcd is False
    assert configs.from_options("discovery", {}).limit_names() == ("kubectl-1.24", "disabled")
    assert _parse("discovery").limit_names() == configs.DISCOVERY_LIMITS
    assert configs.from_options("clientmem", None) == configs.ClientMemConfig()
    assert _parse("clientmem") == configs.ClientMemConfig()
    assert configs.from_options("apf", {"custom_resources": 300, "kinds": ["rv0"]}) == configs.ApfConfig(
        custom_resources=300, kinds=("rv0",)
    )


def test_a_flag_means_one_thing_under_every_probe():
    """Each flag name has one default and one help text wherever it appears."""
    seen: dict[str, tuple] = {}
    for name, cls in configs.PROBES.items():
        parser = argparse.ArgumentParser()
        configs.add_arguments(parser, cls)
        for action in parser._actions:
            for flag in action.option_strings:
                if flag in ("-h", "--help"):
                    continue
                meaning = (action.default, action.help)
                assert seen.setdefault(flag, (name, meaning))[1] == meaning, (flag, name, seen[flag][0])


@pytest.mark.parametrize(
    "probe,opens_with",
    [
        ("clientmem", "what a controller's informer cache costs"),
        ("clientmem", "transform (full, through SetTransform stripping"),
        ("apf", "size-based one of the APF proposal"),
        ("list", "from the watch cache and\nfrom etcd"),
        ("discovery", "Crossplane one-pager"),
    ],
)
def test_each_probes_help_opens_with_what_it_measures(probe, opens_with):
    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices["probe"]._actions if a.dest == "probe")
    description = sub.choices[probe].description
    first_paragraph_and_next = "\n\n".join(description.split("\n\n")[:2])
    assert opens_with in first_paragraph_and_next


@pytest.mark.parametrize(
    "options,message",
    [
        ({"secret_bytes": 100}, "unknown key(s) secret_bytes"),
        ({"objects": "100"}, "objects = '100': expected <class 'int'>"),
        ({"object_bytes": 2_000_000}, "at most 1 MB"),
        ({"cache": "pods"}, "--cache 'pods': choose from"),
        ({"modes": "full,nope"}, "--modes 'full,nope': choose from full, metadata, transform"),
        ({"watch_list": []}, "--watch-list '': choose from off, on"),
        ({"crds_from": "x.yaml"}, "go with --cache crds"),
        ({"cache": "crds", "crd_match": "("}, "--crd-match '(':"),
        ({"cache": "crds", "crds_from": "/nonexistent/crds"}, "no such file or directory"),
    ],
)
def test_bad_scenario_options_are_one_line(options, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        configs.from_options("clientmem", options)


def test_bad_cli_values_fail_before_anything_starts():
    with pytest.raises(UsageError, match="--load '1,x'"):
        _parse("list", "--load", "1,x")
    with pytest.raises(UsageError, match="unknown LIST kinds: nope"):
        _parse("apf", "--kinds", "nope")
    with pytest.raises(UsageError, match="expected X.Y.Z"):
        _parse("discovery", "--kubectl", "latest")
    with pytest.raises(UsageError, match="at least two shapes"):
        _parse("list", "--load-shapes", "40x1000")


def test_a_scenario_step_and_the_cli_reach_the_same_entry_point(monkeypatch):
    from crdscale.collect.probes import clientmem

    calls = []

    def fake_run(cluster, config, writer, *, step, run_id):
        calls.append((config, step, run_id))
        return probes.ProbeResult("clientmem", {"clientmem": pd.DataFrame()}, "clientmem")

    monkeypatch.setattr(clientmem, "run", fake_run)
    probes.run_probe("clientmem", None, None, {"objects": 3, "modes": ["full"]}, step=2, run_id="r1")
    probes.run_probe("clientmem", None, None, _parse("clientmem", "--objects", "3", "--modes", "full"), run_id="r2")
    assert calls == [
        (configs.ClientMemConfig(objects=3, modes=("full",)), 2, "r1"),
        (configs.ClientMemConfig(objects=3, modes=("full",)), 0, "r2"),
    ]


class _FakeRun:
    def __init__(self, name, args, parameters):
        self.dir = Path("/runs/20261122T031500Z-probe-" + name)
        self.run_id, self.cluster, self.writer = "r1", argparse.Namespace(server="https://127.0.0.1:6443"), None
        self.server_version = "v1.37.1"
        self.parameters = parameters

    def finish(self, status, reason=None, **extra):
        pass


def test_the_cli_prints_each_section_and_puts_every_table_in_json(monkeypatch, capsys):
    table = pd.DataFrame({"kind": ["rv0"], "bytes": [2_000_000], "latency_s": [0.0123], "extra": [1]})

    def fake_run_probe(name, cluster, writer, config, *, run_id):
        section = probes.Section(
            "LISTs", "lists", ("kind", "bytes", "latency_s"), {"bytes": "MiB", "latency_s": "ms"}, "(MiB, ms)"
        )
        derived = {"comparison": pd.DataFrame({"x": [1]})}
        return probes.ProbeResult("list", {"lists": table}, "lists", derived, {"k": 1}, 0, [section])

    monkeypatch.setattr(probe_cli, "ProbeRun", _FakeRun)
    monkeypatch.setattr(probes, "run_probe", fake_run_probe)
    assert probe_cli.Command.run(build_parser().parse_args(["probe", "list", "-q", "--repeats", "1"])) == 0
    out = capsys.readouterr().out
    assert "LISTs\nkind bytes latency_s\n rv0 1.907      12.3\n(MiB, ms)" in out  # 2,000,000 B
    assert probe_cli.Command.run(build_parser().parse_args(["probe", "list", "-q", "-o", "json"])) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["tables"]) == {"lists", "comparison"} and doc["result"] == {"k": 1}
    assert doc["parameters"]["compare_etcd"] is True and doc["parameters"]["kinds"] == list(configs.LIST_KINDS)


def test_one_registry_names_each_probes_config_module_and_entry_point():
    """configs.PROBES is the one list of probes: the CLI's subcommands, a scenario's names and run_probe's
    entry points all come from it, and each class names its own module and entry point."""
    import importlib

    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices["probe"]._actions if a.dest == "probe")
    assert list(sub.choices) == list(configs.PROBES) == ["discovery", "list", "apf", "clientmem"]
    for name, cls in configs.PROBES.items():
        assert cls.name == name and cls.summary and cls.module.startswith("crdscale.collect.probes.")
        module = importlib.import_module(cls.module)
        assert cls.entry_point() is getattr(module, cls.entry)
        assert sub.choices[name].description.startswith(cls.__doc__.split("\n")[0])
    assert not hasattr(probes, "MODULES") and not hasattr(configs, "CONFIGS")


def test_contributing_describes_this_registry():
    """docs/contributing.md's "Add a probe" names the registry where it is, what a config class declares,
    and files that exist."""
    import importlib
    import re

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "contributing.md").read_text()
    section = text.split("## Add a probe", 1)[1].split("\n## ", 1)[0]
    assert "`PROBES` in `crdscale/collect/probes/configs.py`" in section
    for attribute in ("name", "module", "entry", "summary"):
        assert f"`{attribute}`" in section and hasattr(configs.ProbeConfig, attribute)
    for name in ("ProbeConfig", "option(", "validate()", "run_probe(", "write_tables", "Section", "-> ProbeResult"):
        assert name in section, name
    assert all(hasattr(probes, name) for name in ("run_probe", "write_tables", "Section", "ProbeResult"))
    assert hasattr(configs, "option") and hasattr(
        importlib.import_module("crdscale.collect.probes._http"), "fresh_transport"
    )
    for path in re.findall(r"`((?:crdscale|tests|docs)/[\w/.]+\.(?:py|toml))`", section):
        assert (root / path).is_file(), path


def test_configs_are_frozen_and_every_field_has_help():
    for cls in configs.PROBES.values():
        assert cls.__dataclass_params__.frozen
        for f in dataclasses.fields(cls):
            assert f.metadata.get("help"), (cls.__name__, f.name)


def test_the_probe_cli_is_dispatch_and_printing():
    assert len(Path(probe_cli.__file__).read_text().splitlines()) <= 200


def test_a_scenario_may_write_a_list_as_on_the_command_line():
    config = configs.from_options("list", {"load_levels": "1,4,16", "load_shapes": ["40x1000000", "4000x10000"]})
    assert config.load_levels == (1, 4, 16) and config.load_shapes == ("40x1000000", "4000x10000")


def test_a_scenarios_probes_are_checked_before_it_starts():
    checked = configs.check_scenario_probes({"each_step": ["apf"], "options": {"apf": {"repeats": 1}}})
    assert checked == {"apf": configs.ApfConfig(repeats=1)}
    with pytest.raises(UsageError, match="unknown probe 'nope'"):
        configs.check_scenario_probes({"each_step": ["nope"]})
    with pytest.raises(UsageError, match=r"\[probes.options\]: list not in"):
        configs.check_scenario_probes({"each_step": ["apf"], "options": {"list": {}}})
    # An options table's error is labelled with that table, not with each_step; its numbers by their keys.
    with pytest.raises(UsageError, match=r"^\[probes.options.apf\]: stats_wait_s must be a finite number"):
        configs.check_scenario_probes({"each_step": ["apf"], "options": {"apf": {"stats_wait_s": float("nan")}}})
    with pytest.raises(UsageError, match=r"^\[probes.options.clientmem\]: --cache 'pods': choose from"):
        configs.check_scenario_probes({"each_step": ["clientmem"], "options": {"clientmem": {"cache": "pods"}}})


def test_run_check_labels_a_probe_options_error_with_its_table(tmp_path, capsys):
    from crdscale.cli.main import main

    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[probes]\neach_step = ["apf"]\n[probes.options.apf]\nrepeats = "x"\n')
    assert main(["run", "--check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"crdscale: error: {path.name}: [probes.options.apf] repeats = 'x': expected <class 'int'>", err


def test_the_scenario_runner_runs_its_probe_steps_through_run_probe(monkeypatch):
    from crdscale.collect.probes import apfseats
    from crdscale.scenario.config import parse_scenario
    from crdscale.scenario.measurements import STEP_END, Mark, RunContext
    from crdscale.scenario.measurements.stepprobes import StepProbes

    calls, events = [], []

    def fake_run(cluster, config, writer, *, step, run_id):
        calls.append((cluster, config, writer, step, run_id))
        return probes.ProbeResult("apf", {}, "seats")

    monkeypatch.setattr(apfseats, "run", fake_run)
    scenario = parse_scenario('[probes]\neach_step = ["apf"]\noptions = { apf = { observe = false } }\n')
    emitter = argparse.Namespace(emit=lambda kind, **fields: events.append(kind))
    ctx = RunContext(scenario, "writer", emitter, "run-1", None, cluster="cluster")
    measurement = StepProbes.create(scenario)
    measurement.at(ctx, Mark(STEP_END, 0, 0))  # not at the baseline
    measurement.at(ctx, Mark(STEP_END, 3, 30))
    assert calls == [("cluster", configs.ApfConfig(observe=False), "writer", 3, "run-1")]
    assert events == ["probe.start", "probe.end"]
