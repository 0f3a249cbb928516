"""The package's import graph: no cycle, counting function-level imports, no import up the layers, and
no function-level import without its reason (crdscale/layers.py's contract, which `make lint` runs)."""

import shutil
import textwrap
from pathlib import Path

import pytest

from crdscale import layers
from crdscale.layers import Arrow, LazyImport, check, find_cycle, import_graph, lazy_imports, unexplained

ROOT = Path(layers.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_package_keeps_the_layers_contract(graph):
    verdict = check(graph, lazy=lazy_imports())
    assert not verdict.cycles, "import cycle(s):\n" + "\n".join(verdict.lines())
    assert not verdict.back, "import(s) up the layers:\n" + "\n".join(verdict.lines())
    assert not verdict.lazy, "function-level import(s) without a reason:\n" + "\n".join(verdict.lines())


def test_every_pending_exception_still_matches_an_import(graph):
    """An exception whose import is gone must go too, or it would hide the next one."""
    assert not check(graph).stale, "delete these from crdscale.layers.PENDING: " + str(check(graph).stale)


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "crdscale" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_the_graph_counts_imports_in_functions_under_type_checking_and_relative(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "units.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from crdscale import errors\n",
            "cluster/__init__.py": "",
            "cluster/a.py": "def f():\n    from .b import thing\n",
            "cluster/b.py": "import os\nimport crdscale.errors\n",
            "cluster/c.py": "from crdscale.cluster import a, b\n",
        },
    )
    graph = import_graph(root)
    imported = {m: sorted(a.imported for a in arrows) for m, arrows in graph.items() if arrows}
    assert imported == {
        "crdscale.units": ["crdscale.errors"],
        "crdscale.cluster.a": ["crdscale.cluster.b"],
        "crdscale.cluster.b": ["crdscale.errors"],
        "crdscale.cluster.c": ["crdscale.cluster.a", "crdscale.cluster.b"],
    }


def test_a_cycle_is_printed_arrow_by_arrow():
    graph = {
        "crdscale.a": [Arrow("crdscale.a", "crdscale.b", "crdscale/a.py", 3)],
        "crdscale.b": [Arrow("crdscale.b", "crdscale.c", "crdscale/b.py", 9)],
        "crdscale.c": [Arrow("crdscale.c", "crdscale.a", "crdscale/c.py", 40)],
        "crdscale.d": [Arrow("crdscale.d", "crdscale.a", "crdscale/d.py", 1)],
    }
    cycle = find_cycle(graph)
    assert [(a.importer, a.imported) for a in cycle] == [
        ("crdscale.a", "crdscale.b"),
        ("crdscale.b", "crdscale.c"),
        ("crdscale.c", "crdscale.a"),
    ]
    assert str(cycle[-1]) == "crdscale.c -> crdscale.a (crdscale/c.py:40)"
    del graph["crdscale.c"]
    assert find_cycle(graph) is None


@pytest.fixture
def package_copy(tmp_path):
    """The package's sources in a temporary directory, to break on purpose."""
    shutil.copytree(ROOT / "crdscale", tmp_path / "crdscale", ignore=shutil.ignore_patterns("*.json", "__pycache__"))
    return tmp_path


def _append(root: Path, module: str, text: str) -> None:
    path = root / module
    path.write_text(path.read_text() + "\n\n" + textwrap.dedent(text))


def test_the_contract_fails_on_a_back_arrow_added_in_a_function(package_copy, capsys):
    assert layers.main([str(package_copy)]) == 0
    capsys.readouterr()
    # The cluster layer reaching up to the CLI, late, as function-level imports hide it.
    _append(package_copy, "crdscale/cluster/local.py", "def _late():\n    from crdscale.cli import main\n")
    assert layers.main([str(package_copy)]) == 1
    out = capsys.readouterr().out
    assert "import runs up the layers: crdscale.cluster.local -> crdscale.cli.main (crdscale/cluster/local.py:" in out


def test_the_contract_fails_on_a_cycle_and_prints_it(package_copy, capsys):
    # percrd is what analysis.run orchestrates: importing it back closes a cycle, within one layer.
    _append(
        package_copy, "crdscale/analysis/percrd.py", "def _late():\n    from crdscale.analysis.run import analyze\n"
    )
    assert layers.main([str(package_copy)]) == 1
    out = capsys.readouterr().out
    assert "import cycle: crdscale.analysis.percrd -> crdscale.analysis.run -> crdscale.analysis.percrd" in out


def test_a_module_outside_every_layer_is_refused(package_copy):
    (package_copy / "crdscale" / "newthing.py").write_text("")
    with pytest.raises(ValueError, match="crdscale.newthing is in no layer"):
        check(import_graph(package_copy))


def test_pending_entries_only_excuse_their_own_arrows():
    graph = {
        "crdscale.rundir.reader": [Arrow("crdscale.rundir.reader", "crdscale.analysis.percrd", "r.py", 1)],
        "crdscale.cluster.local": [Arrow("crdscale.cluster.local", "crdscale.analysis.percrd", "l.py", 2)],
        "crdscale.analysis.percrd": [],
    }
    entries = (("rundir.reader", "analysis", "someone"), ("crds", "cli", "nobody"))
    verdict = check(graph, entries=entries)
    assert [(a.importer, who) for a, who in verdict.pending] == [("crdscale.rundir.reader", "someone")]
    assert [a.importer for a in verdict.back] == ["crdscale.cluster.local"]
    assert verdict.stale == [("crds", "cli", "nobody")]


def test_analysis_never_imports_collect_or_cluster():
    graph = {
        "crdscale.analysis.percrd": [Arrow("crdscale.analysis.percrd", "crdscale.collect.pprof", "p.py", 7)],
        "crdscale.collect.pprof": [],
    }
    verdict = check(graph, entries=())
    assert not verdict.kept and not verdict.back
    assert [(str(a), why.split(":")[0]) for a, why in verdict.forbidden] == [
        ("crdscale.analysis.percrd -> crdscale.collect.pprof (p.py:7)", "analysis is pure")
    ]


def test_a_function_level_import_without_a_reason_fails_the_contract(package_copy, capsys):
    """An import added inside a function, with no ``# lazy:`` comment: `make lint` fails and names it."""
    assert layers.main([str(package_copy)]) == 0
    capsys.readouterr()
    _append(package_copy, "crdscale/units.py", "def _late():\n    import fractions\n\n    return fractions\n")
    assert layers.main([str(package_copy)]) == 1
    out = capsys.readouterr().out
    assert "function-level import, no reason" in out
    assert "crdscale.units imports fractions in a function (crdscale/units.py:" in out


@pytest.mark.parametrize(
    "body",
    [
        "    import fractions  # lazy: only for exact ratios\n",
        "    # lazy: only for exact ratios\n    import fractions\n    import decimal\n",
        "    # Exact ratios need them,\n    # lazy: and nothing else does.\n    import fractions\n",
    ],
    ids=["on its line", "above its block", "in the comment above"],
)
def test_a_function_level_import_with_its_reason_keeps_it(package_copy, body):
    _append(package_copy, "crdscale/units.py", "def _late():\n" + body + "    return fractions\n")
    assert layers.main([str(package_copy)]) == 0


def test_a_reason_covers_its_block_only(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "units.py": "def f():\n    # lazy: exact ratios\n    import fractions\n\n    import decimal\n",
        },
    )
    found = {lazy.imported: lazy.reason for lazy in lazy_imports(root)}
    assert found == {("fractions",): "# lazy: exact ratios", ("decimal",): None}


def test_a_function_level_import_of_what_the_top_imports_fails_even_with_a_reason(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "class E(Exception): ...\n",
            "units.py": "from crdscale.errors import E\n\n\ndef f():\n    from crdscale.errors import E  # lazy: why not\n",
        },
    )
    [(lazy, why)] = unexplained(lazy_imports(root), entries=())
    assert (lazy.importer, lazy.line, why) == ("crdscale.units", 5, "already imported at the top of the module")


def test_lazy_entries_give_the_reason_as_data_for_their_own_imports_only():
    def late(importer: str, *imported: str) -> LazyImport:
        return LazyImport(importer, imported, importer.replace(".", "/") + ".py", 3, None)

    entries = (("collect.probes.clientmem$", "*", "its child"), ("rundir.reader$", "analysis", "pending"))
    imports = [
        late("crdscale.collect.probes.clientmem", "pandas", "..fixtures:ProbeFixtures"),
        late("crdscale.rundir.reader", "crdscale.analysis.percrd:profile_points"),
        late("crdscale.rundir.reader", "crdscale.cluster.local:thing"),
        late("crdscale.collect.probes.listcost", "pandas"),
    ]
    bad = [(lazy.importer, lazy.imported) for lazy, _why in unexplained(imports, entries)]
    assert bad == [
        ("crdscale.rundir.reader", ("crdscale.cluster.local:thing",)),
        ("crdscale.collect.probes.listcost", ("pandas",)),
    ]
