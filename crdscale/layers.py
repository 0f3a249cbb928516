"""The package's import graph and its layers contract, checked by ``make lint``.

crdscale is laid out in the order an experiment flows (``crdscale/__init__.py``), and each layer may
import only from the layers below it. The graph is read from the source with :mod:`ast`, not by
importing anything, and counts every import: at module level, inside functions and under
``TYPE_CHECKING``, because a function-level import is still an arrow, one that only shows up late.

``python -m crdscale.layers`` prints every cycle and every arrow that runs up the layers, and exits
non-zero when there is one (the ``lint`` target of the Makefile, so CI runs it). It needs nothing
but the standard library: import-linter would say the same with one dependency more.
:func:`import_graph` and :func:`check` are what ``tests/unit/test_layers.py`` holds the package to.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "crdscale"

# The contract, lowest layer first: a module may import its own layer and the layers below, never
# one above. A name is a module or a package and everything under it; the longest name that matches
# a module decides its layer (``analysis.pprof`` before ``analysis``).
#
# - The leaves: no crdscale import beyond each other. errors, units, paths, ... and models/ (the APF,
#   token-bucket and scrape-cost arithmetic that probes, the installer, the collector and the
#   analysis share).
# - analysis.pprof: the pprof profile format (decode, select, text), like google/pprof's profile
#   package. It imports nothing of crdscale's but errors and units; the collector checks the profiles
#   it fetches with it and the run directory decodes them, so it sits below both.
# - image.oci, image.containerd: the OCI archive format and containerd's import, which a node uses
#   to load its sandbox image; the image builder (image.build, image.push) sits higher.
# - rundir/: the run directory's layout, manifest, events and reader, read by every layer above.
# - cluster -> crds -> collect -> analysis, the flow of an experiment (crdscale/__init__.py).
#   footprint/ (the cost model fitted from runs, made from analysis/footprint.py) and
#   footprint_models/ (its fitted coefficients) read analysis' results: they sit beside it.
# - results/: where finished runs are kept (directories, S3 through a local gateway it starts).
# - scenario/ orchestrates a run: it brings a cluster up, installs CRDs, collects, records the
#   harness' cost with analysis' helpers and stores the run in results/. So it sits above all of
#   them and below report/ and cli/: it is `crdscale run` as a library, which the cli parses and
#   renders. image/ (building the image a run in a cluster uses) sits with it, and so do
#   footprint.calibrate and footprint.terms: fitting the model re-reads each run's scenario (its
#   CRD set, through scenario.config and scenario.runner), while predicting stays beside analysis.
# - report/ reads finished runs and their analyses; cli/ is on top, run by __main__.
# - Tooling about the package itself sits above everything, and nothing of the flow imports it:
#   docs_reference (the generated reference pages read the CLI and the scenario keys), testing/
#   (cases the tests share) and this contract.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "units", "paths", "fsutil", "timeutil", "proc", "schema", "ownership", "allocator", "models"),
    ("analysis.pprof", "image.oci", "image.containerd"),
    ("rundir", "outputs"),  # outputs: where commands write, which asks rundir.layout what a run directory is
    ("cluster",),
    ("crds",),
    ("collect",),
    ("analysis", "footprint", "footprint_models"),
    ("results",),
    ("scenario", "image", "footprint.calibrate", "footprint.terms"),
    ("report",),
    ("cli",),
    ("__main__", "layers", "docs_reference", "testing"),
)

# Imports the layers allow but the design does not: (importer, imported, why).
FORBIDDEN: tuple[tuple[str, str, str], ...] = (
    ("analysis", "cluster", "analysis is pure: it takes data and never starts a process or opens a socket"),
    ("analysis", "collect", "analysis is pure: it takes data and never starts a process or opens a socket"),
)

# Arrows known to break the contract, each with the branch that is removing it: reported, not
# failed on, until that work lands. An entry that matches nothing any more is reported as one to
# delete. (importer, imported: a module or package as in LAYERS, or ``name$`` for that module alone;
# who and why)
PENDING: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Arrow:
    """One import: ``importer`` imports ``imported``, at ``line`` of ``path``."""

    importer: str
    imported: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} ({self.path}:{self.line})"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    # A package's own __init__ is level 1 of itself; a module's is its parent package.
    keep = len(base) - node.level + (1 if is_package else 0)
    prefix = base[:keep]
    return ".".join(prefix + ([node.module] if node.module else []))


def import_graph(root: Path | None = None, package: str = PACKAGE) -> dict[str, list[Arrow]]:
    """Every module of ``package`` (under ``root``, the directory holding it) and its imports of others.

    An ``import a.b`` is an arrow to ``a.b``; ``from a import b`` is an arrow to ``a.b`` when that is
    a module and to ``a`` otherwise. Imports of modules outside the package are left out.
    """
    root = root if root is not None else Path(__file__).resolve().parent.parent
    files = sorted((root / package).rglob("*.py"))
    modules = {_module_name(f, root): f for f in files}
    graph: dict[str, list[Arrow]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        arrows: list[Arrow] = []
        rel = str(path.relative_to(root))

        for node in ast.walk(tree):  # every node: imports in functions, classes and ifs too
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            arrows += [Arrow(name, t, rel, node.lineno) for t in targets if t in modules and t != name]
        graph[name] = arrows
    return graph


def find_cycle(graph: Mapping[str, Iterable[Arrow]]) -> list[Arrow] | None:
    """One import cycle (its arrows, in order) or None when the graph has none."""
    edges = {
        m: sorted({a.imported: a for a in arrows}.values(), key=lambda a: a.imported) for m, arrows in graph.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Arrow] = []

    def visit(module: str) -> list[Arrow] | None:
        state[module] = 1
        for arrow in edges.get(module, ()):
            seen = state.get(arrow.imported)
            if seen == 1:
                start = next((i for i, a in enumerate(path) if a.importer == arrow.imported), len(path))
                return [*path[start:], arrow]
            if seen is None:
                path.append(arrow)
                found = visit(arrow.imported)
                if found:
                    return found
                path.pop()
        state[module] = 2
        return None

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges) + 100))
    for module in sorted(edges):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def find_cycles(graph: Mapping[str, Iterable[Arrow]]) -> list[list[Arrow]]:
    """Cycles until none is left: each found, then its last arrow set aside to find the next."""
    remaining = {m: list(arrows) for m, arrows in graph.items()}
    cycles = []
    while (cycle := find_cycle(remaining)) is not None:
        cycles.append(cycle)
        last = cycle[-1]
        remaining[last.importer] = [a for a in remaining[last.importer] if a.imported != last.imported]
    return cycles


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS, package: str = PACKAGE) -> int | None:
    """The index of ``module``'s layer in ``layers`` (None for the package's own ``__init__``)."""
    parts = module.split(".")
    if parts[0] != package or len(parts) < 2:
        return None
    best: tuple[int, int] | None = None  # (length of the matching name, layer)
    for index, layer in enumerate(layers):
        for name in layer:
            if _under(module, name, package) and (best is None or name.count(".") + 1 > best[0]):
                best = (name.count(".") + 1, index)
    if best is None:
        raise ValueError(f"{module} is in no layer of the contract: add it to crdscale.layers.LAYERS")
    return best[1]


def _under(module: str, name: str, package: str = PACKAGE) -> bool:
    """Whether ``module`` (``crdscale.a.b``) is ``name`` (``a`` or ``a.b``) or inside it; ``name$``
    is that module alone."""
    full = f"{package}.{name.removesuffix('$')}"
    return module == full or (not name.endswith("$") and module.startswith(full + "."))


def pending(arrow: Arrow, entries: tuple[tuple[str, str, str], ...] = PENDING, package: str = PACKAGE) -> str | None:
    """Who is removing ``arrow``, when it is one of :data:`PENDING`'s; else None."""
    for importer, imported, who in entries:
        if _under(arrow.importer, importer, package) and _under(arrow.imported, imported, package):
            return who
    return None


def back_arrows(
    graph: Mapping[str, Iterable[Arrow]], layers: tuple[tuple[str, ...], ...] = LAYERS, package: str = PACKAGE
) -> list[Arrow]:
    """The imports that run up the layers: from a module to one in a higher layer (one per
    importer, imported and line)."""
    found: dict[tuple[str, str, int], Arrow] = {}
    for arrows in graph.values():
        for arrow in arrows:
            low, high = layer_of(arrow.importer, layers, package), layer_of(arrow.imported, layers, package)
            if low is not None and high is not None and high > low:
                found.setdefault((arrow.importer, arrow.imported, arrow.line), arrow)
    return list(found.values())


@dataclass
class Verdict:
    """What :func:`check` found: ``cycles``, ``back`` and ``forbidden`` (with why) break the
    contract; ``pending`` are the known ones (:data:`PENDING`, with who is removing each);
    ``stale`` the PENDING entries that match nothing any more."""

    cycles: list[list[Arrow]]
    back: list[Arrow]
    pending: list[tuple[Arrow, str]]
    stale: list[tuple[str, str, str]]
    forbidden: list[tuple[Arrow, str]] = field(default_factory=list)

    @property
    def kept(self) -> bool:
        return not self.cycles and not self.back and not self.forbidden

    def lines(self) -> list[str]:
        """The verdict as text, one problem a line (a cycle's arrows indented under it)."""
        out = []
        for cycle in self.cycles:
            out.append("import cycle: " + " -> ".join([cycle[0].importer, *(a.imported for a in cycle)]))
            out += [f"    {arrow}" for arrow in cycle]
        out += [f"import runs up the layers: {arrow}" for arrow in self.back]
        out += [f"forbidden import ({why}): {arrow}" for arrow, why in self.forbidden]
        out += [f"pending ({who}): {arrow}" for arrow, who in self.pending]
        out += [f"PENDING entry matches nothing any more, delete it: {entry[0]} -> {entry[1]}" for entry in self.stale]
        return out


def check(
    graph: Mapping[str, Iterable[Arrow]],
    layers: tuple[tuple[str, ...], ...] = LAYERS,
    entries: tuple[tuple[str, str, str], ...] = PENDING,
    package: str = PACKAGE,
    forbidden: tuple[tuple[str, str, str], ...] = FORBIDDEN,
) -> Verdict:
    """Hold ``graph`` to the contract: no cycle, no import up ``layers`` and none of ``forbidden``,
    except the arrows of ``entries``."""
    for module in graph:  # every module has a place, imports or not (a ValueError names one that has none)
        layer_of(module, layers, package)
    known: list[tuple[Arrow, str]] = []
    rest: dict[str, list[Arrow]] = {}
    for module, arrows in graph.items():
        rest[module] = []
        for arrow in arrows:
            who = pending(arrow, entries, package)
            low, high = layer_of(arrow.importer, layers, package), layer_of(arrow.imported, layers, package)
            if who is None or (low is not None and high is not None and high < low):  # down: not what it means
                rest[module].append(arrow)
            elif not any(k[0].importer == arrow.importer and k[0].imported == arrow.imported for k in known):
                known.append((arrow, who))
    matched = [e for e in entries if any(pending(a, (e,), package) for a, _who in known)]
    stale = [e for e in entries if e not in matched]
    banned = [
        (arrow, why)
        for arrows in rest.values()
        for arrow in arrows
        for importer, imported, why in forbidden
        if _under(arrow.importer, importer, package) and _under(arrow.imported, imported, package)
    ]
    return Verdict(find_cycles(rest), back_arrows(rest, layers, package), known, stale, banned)


def main(argv: list[str] | None = None) -> int:
    """Print the cycles and the back-arrows of the package; 1 when there is any, else 0.

    ``argv`` may name the directory holding the ``crdscale`` package to check (default: this one's).
    """
    argv = sys.argv[1:] if argv is None else argv
    graph = import_graph(Path(argv[0]) if argv else None)
    try:
        verdict = check(graph)
    except ValueError as err:
        print(f"layers contract: {err}", file=sys.stderr)
        return 1
    for line in verdict.lines():
        print(line)
    if not verdict.kept:
        problems = len(verdict.cycles) + len(verdict.back) + len(verdict.forbidden)
        print(f"{problems} layering problem(s): the contract is crdscale/layers.py's", file=sys.stderr)
        return 1
    waiting = f" ({len(verdict.pending)} pending arrow(s) above, each with who removes it)" if verdict.pending else ""
    print(
        f"layers contract kept: {len(graph)} modules, no import cycle, no import up the layers, none forbidden{waiting}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
