"""Scenario files: the default is valid, user files overlay it, bad keys are named."""

import pytest

from crdscale.errors import UsageError
from crdscale.scenario.config import load_scenario, parse_scenario


def test_default_scenario_is_the_documented_one():
    s = load_scenario(None)
    assert s.is_local and s.target.kube_version == "1.37.1"
    params = s.generator_params()
    assert (params.crd_count, params.group_count, params.property_count) == (500, 50, 100)
    assert s.step_sizes(500) == [100] * 5
    assert s.steps.serve == "watch" and s.profiles.kinds == ["heap"]
    assert s.metrics.scrape_interval_seconds == 1


def test_user_file_only_needs_the_keys_it_changes():
    s = parse_scenario('name = "small"\n[crds]\ncount = 60\ngroups = 6\n[steps]\ncount = 3\nserve = "list"\n')
    assert s.name == "small" and s.step_sizes(60) == [20, 20, 20]
    assert s.steps.settle_seconds == 15  # from the default


def test_step_size_wins_and_last_step_takes_the_rest():
    s = parse_scenario("[steps]\nsize = 40\n")
    assert s.step_sizes(100) == [40, 40, 20]


@pytest.mark.parametrize(
    "text,fragment",
    [
        ('[steps]\ncount = "five"', "'steps.count' must be an integer"),
        ("[steps]\ncount = true", "'steps.count' must be an integer"),
        ("[stepz]\ncount = 1", "unknown key 'stepz'"),
        ("[steps]\nsizee = 3", "unknown key 'steps.sizee'"),
        ('[steps]\nserve = "poll"', "'steps.serve' must be one of none, list, watch"),
        ('[profiles]\nkinds = ["heap", "mutex"]', "'profiles.kinds' must be one of"),
        ("[crds]\ngroups = 600", "group count cannot be greater than CRD count"),
        ('[target]\nkind = "kubeconfig"', "'target.kubeconfig' is required"),
        ('[target]\napiserver_flags = ["v=2"]', "'target.apiserver_flags' entries"),
        ("[metrics]\nscrape_interval_seconds = 0", "'metrics.scrape_interval_seconds' must be >= 0.1"),
        ("name = ", "not valid TOML"),
        ('name = "../elsewhere"', "'name' names the run directory"),
        ('name = ""', "'name' names the run directory"),
    ],
)
def test_bad_scenarios_name_the_key_in_one_line(text, fragment):
    with pytest.raises(UsageError) as err:
        parse_scenario(text, where="my.toml")
    message = str(err.value)
    assert message.startswith("my.toml: ") and fragment in message and "\n" not in message


def test_overrides_reach_sections_and_top_level_keys():
    from crdscale.cli.run import _parse_sets

    overrides = _parse_sets(['name="v1-24"', 'target.kube_version="1.24.0"', "steps.count=2", "steps.serve=list"])
    s = parse_scenario(None, overrides=overrides)
    assert (s.name, s.target.kube_version, s.steps.count, s.steps.serve) == ("v1-24", "1.24.0", 2, "list")
    assert "v1.24.0" in s.description  # derived from the overridden settings
    with pytest.raises(UsageError, match="unknown key 'steps.cuont'"):
        parse_scenario(None, overrides=_parse_sets(["steps.cuont=2"]))


def test_every_key_is_declared_once_and_default_toml_agrees():
    """KEYS is the one declaration: default.toml holds exactly its defaults (no key missing or extra,
    the same values), and every key has a type and one line of help for the scenario reference."""
    from crdscale.scenario.config import KEYS, SCHEMA, default_text, scenario_reference, tomllib

    defaults = {}
    for name, value in tomllib.loads(default_text()).items():  # sections and top-level keys, one level down
        items = value.items() if isinstance(value, dict) else [(None, value)]
        defaults.update({f"{name}.{key}" if key else name: v for key, v in items})
    declared = {k.name: k.default for k in KEYS if k.default is not None}
    assert defaults == declared
    assert len({k.name for k in KEYS}) == len(KEYS)
    assert {(k.section, k.key) for k in KEYS} == {(s, key) for s, keys in SCHEMA.items() for key in keys}
    rows = list(scenario_reference())
    assert len(rows) == len(KEYS)
    for (section, key, type_name, _default, help_text), declared in zip(rows, KEYS):
        assert type_name and help_text and "\n" not in help_text and len(declared.help) <= 110, (section, key)
        assert help_text.startswith(declared.help)  # then its unit and bounds
    assert ("target", "kube_version", "a string", "1.37.1") == rows[3][:4]


OBJECTS_OK = '[steps]\ngrow = "objects"\ncount = 2\n[objects]\ncount = 10\ncontrol = ["configmaps", "secrets"]\n'


def test_objects_section_plans_one_kind_per_step():
    from crdscale.scenario.config import parse_scenario

    scenario = parse_scenario(OBJECTS_OK)
    assert scenario.grows_objects
    assert scenario.object_steps() == [
        ("customresources", 5),
        ("configmaps", 5),
        ("secrets", 5),
        ("customresources", 5),
        ("configmaps", 5),
        ("secrets", 5),
    ]
    assert "10 flat custom resources of 1024 bytes per CRD" in scenario.description
    assert parse_scenario(None).object_steps() == []


@pytest.mark.parametrize(
    "text, message",
    [
        ('[steps]\ngrow = "objects"\n[objects]\ncount = 10\nbytes = 2000000\n', "request limit"),
        ("[objects]\ncount = 10\n", 'steps.grow = "objects"'),
        ('[steps]\ngrow = "objects"\n', "'objects.count' > 0"),
        ('[steps]\ngrow = "pods"\n', "'steps.grow' must be one of"),
        ('[steps]\ngrow = "objects"\n[objects]\ncount = 10\nshape = "round"\n', "'objects.shape'"),
        ('[steps]\ngrow = "objects"\n[objects]\ncount = 10\ncontrol = ["pods"]\n', "'objects.control'"),
        ('[steps]\ngrow = "objects"\n[objects]\ncount = 10\ncontrol = ["secrets", "secrets"]\n', "twice"),
        ('[steps]\ngrow = "objects"\ncount = 5\n[objects]\ncount = 3\n', "fewer than steps.count"),
        ('[steps]\ngrow = "objects"\n[objects]\ncount = 10\nlist_repeats = -1\n', "'objects.list_repeats'"),
        ('[steps]\ngrow = "objects"\n[objects]\ncount = 10\nlist_kinds = ["table"]\n', "'objects.list_kinds'"),
        (
            '[steps]\ngrow = "objects"\n[objects]\ncount = 10\napply = "server-side-apply"\nmanaged_fields = false\n',
            "always records managedFields",
        ),
    ],
)
def test_objects_section_errors_are_one_line(text, message):
    from crdscale.scenario.config import parse_scenario

    with pytest.raises(UsageError, match=message) as err:
        parse_scenario(text)
    assert "\n" not in str(err.value)
