"""The typed scenario: one declaration per key gives the sections, their defaults, `--set` typing and the
checks; hostile values stop `run --check` with one line naming the key; nothing outside
``scenario/config.py`` reads a scenario setting by string key."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from crdscale.errors import UsageError
from crdscale.scenario import config
from crdscale.scenario.config import KEYS, SECTIONS, parse_override, parse_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_sections_are_typed_and_hold_the_declared_defaults():
    s = parse_scenario(None)
    assert s.target.kube_version == "1.37.1" and s.steps.concurrency == 8
    assert s.steps.memory_guard_mib == 1024  # the one default (issue 30: the runner's fallback of 0 is gone)
    assert s.steps.on_rejected == "stop" and s.probes.options == {}  # unset keys: their declared `unset`
    for section, cls in SECTIONS.items():
        if section:
            assert dataclasses.is_dataclass(getattr(s, section)) and type(getattr(s, section)) is cls
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.steps.concurrency = 1  # type: ignore[misc]


def test_a_section_refuses_string_keyed_reads():
    s = parse_scenario(None)
    with pytest.raises(TypeError):
        s.steps["concurrency"]  # type: ignore[index]  # noqa: B018
    assert not hasattr(s.target, "get")


def test_raw_keeps_what_the_manifest_records():
    s = parse_scenario('[steps]\nsettle_seconds = 2\n[target]\nenv = { GOGC = "50" }\n')
    assert s.raw["steps"]["settle_seconds"] == 2 and "on_rejected" not in s.raw["steps"]
    assert s.raw["target"]["env"] == {"GOGC": "50"} == s.target.env


def test_keys_carry_their_bounds():
    by_name = {k.name: k for k in KEYS}
    assert by_name["metrics.scrape_interval_seconds"].unit == "s"
    assert by_name["steps.memory_guard_mib"].default == 1024 and by_name["steps.memory_guard_mib"].unit == "MiB"
    assert by_name["steps.settle_seconds"].type == (int, float)
    assert by_name["target.env"].type is dict and by_name["crds.categories"].type is list


@pytest.mark.parametrize(
    ("sets", "fragment"),
    [
        (["steps.settle_seconds=nan"], "'steps.settle_seconds' must be a finite number"),
        (["steps.settle_seconds=inf"], "'steps.settle_seconds' must be a finite number"),
        (["steps.establish_timeout_seconds=nan"], "'steps.establish_timeout_seconds' must be a finite number"),
        (["steps.qps=inf"], "'steps.qps' must be a finite number"),
        (["steps.hold_seconds=-inf"], "'steps.hold_seconds' must be a finite number"),
        (["steps.settle_queues_timeout_seconds=nan"], "'steps.settle_queues_timeout_seconds' must be a finite"),
        (["metrics.scrape_interval_seconds=1e-300"], "'metrics.scrape_interval_seconds' must be >= 0.1"),
        (["metrics.scrape_interval_seconds=nan"], "'metrics.scrape_interval_seconds' must be a finite number"),
        (["steps.settle_seconds=-1"], "'steps.settle_seconds' must be >= 0"),
        (["steps.count=1000000000"], "'steps.count' must be <= 10,000"),
        (["steps.concurrency=0"], "'steps.concurrency' must be > 0"),
        (["steps.memory_guard_mib=-5"], "'steps.memory_guard_mib' must be >= 0"),
        (["metrics.apiserver_cpu_budget_percent=250"], "'metrics.apiserver_cpu_budget_percent' must be <= 100 %"),
        (["name=" + "n" * 300], "'name' must be at most 100 characters, got 300"),
        (["steps.on_rejected=maybe"], "'steps.on_rejected' must be one of stop, continue"),
        (["objects.control=pods"], "'objects.control' must be one of configmaps, secrets"),
        (["crds.categories=[1, 2]"], "'crds.categories' entries must each be a string, got 1"),
        (['crds.source=""'], "'crds.source' must not be empty"),
    ],
)
def test_hostile_values_are_refused_in_one_line_naming_the_key(sets, fragment):
    overrides = dict(s.split("=", 1) for s in sets)
    overrides = {k: parse_override(k, v) for k, v in overrides.items()}
    with pytest.raises(UsageError) as err:
        parse_scenario(None, where="my.toml", overrides=overrides)
    message = str(err.value)
    assert message.startswith("my.toml: ") and fragment in message and "\n" not in message, message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[matrix]\nrepeat = 1000000000\n", "'matrix.repeat' must be an integer from 1 to 1000"),
        (
            "[matrix]\n"
            + "".join(f'"crds.{k}" = {list(range(1, 41))}\n' for k in ("count", "groups", "seed"))
            + f'"steps.count" = {list(range(1, 41))}\n"steps.concurrency" = {list(range(1, 41))}\n',
            "cells, more than 10,000",
        ),
    ],
)
def test_huge_matrices_are_refused_at_once(text, fragment):
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(").replace(".", r"\.")):
        parse_scenario(text, where="my.toml")


def test_a_new_target_key_is_one_field(monkeypatch):
    """A key is a field of its section: the declaration is all `--set`, the checks and a matrix axis need."""

    @dataclasses.dataclass(frozen=True)
    class Target(config.Target):
        build_tags: list[str] = config.key([], "Go build tags")

    sections = {**SECTIONS, "target": Target}
    monkeypatch.setattr(config, "SECTIONS", sections)
    keys = config._keys()
    monkeypatch.setattr(config, "KEYS", keys)
    schema = {"": {}}
    for k in keys:
        schema.setdefault(k.section, {})[k.key] = k.type
    monkeypatch.setattr(config, "SCHEMA", schema)
    monkeypatch.setattr(config, "Target", Target)
    assert parse_override("target.build_tags", "a,b") == ["a", "b"]
    s = parse_scenario(None, overrides={"target.build_tags": ["a"]})
    assert s.target.build_tags == ["a"]
    s = parse_scenario('[matrix]\n"target.build_tags" = [["a"], ["b"]]\n')
    assert s.matrix == {"target.build_tags": [["a"], ["b"]]}


# --- no string-keyed reads of scenario settings outside scenario/config.py ---------------------

SECTION_NAMES = {s for s in SECTIONS if s}
# Modules that read a run manifest's recorded scenario (a JSON dict, not a Scenario) may subscript it.
ALLOWED = {"crdscale/scenario/config.py"}


def _string_keyed_reads(text: str, name: str) -> list[str]:
    """``x.<section>["key"]``, ``x.<section>.get("key")`` and ``x.raw["<section>"]`` reads in ``text``."""
    tree = ast.parse(text, filename=name)
    found = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            target, index = node.value, node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            target, index = node.func.value, node.args[0]
        if not (isinstance(target, ast.Attribute) and isinstance(index, ast.Constant) and isinstance(index.value, str)):
            continue
        if target.attr in SECTION_NAMES and _looks_like_scenario(target.value):
            found.append(f"{name}:{node.lineno}")
        elif target.attr == "raw" and index.value in SECTION_NAMES:
            found.append(f"{name}:{node.lineno}")
    return found


def _looks_like_scenario(node: ast.AST) -> bool:
    """``sc``, ``scenario``, ``self.scenario``, ``cell.scenario``...: the names a Scenario goes by."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in {"sc", "scenario", "base", "built", "cell_scenario"} or name.endswith("scenario")


def test_no_string_keyed_scenario_reads_outside_config():
    paths = [
        p
        for folder in ("crdscale", "scripts", "benchmarks")
        for p in sorted((ROOT / folder).rglob("*.py"))
        if str(p.relative_to(ROOT)) not in ALLOWED
    ]
    found = [hit for p in paths for hit in _string_keyed_reads(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == [], f"read scenario settings as attributes (scenario.steps.concurrency): {found}"


def test_the_guard_finds_a_string_keyed_read():
    text = (
        'def f(sc, self):\n    return sc.steps["concurrency"], self.scenario.target.get("controller_manager", True)\n'
    )
    assert _string_keyed_reads(text, "m.py") == ["m.py:2", "m.py:2"]
    assert _string_keyed_reads("def f(sc):\n    return sc.raw['steps']\n", "m.py") == ["m.py:2"]
    assert _string_keyed_reads("def f(run):\n    return run.manifest['steps']\n", "m.py") == []
