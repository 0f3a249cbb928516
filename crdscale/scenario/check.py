"""Check a scenario before it runs: ``crdscale run --check``, and the first thing ``crdscale run`` does.

Everything a run needs that can be checked in seconds is checked for every
cell of a matrix before the first cell starts, before a run directory exists
and before a binary is resolved or built: the kube-apiserver and etcd crdscale
would build (versions the Go module proxy serves, a kube-apiserver release with
every staging module's zip and checksum; a cached binary always passes),
binaries and source trees the scenario names, the CRDs of ``crds.source``
(loaded as the run loads them, and each checked as kube-apiserver would check it:
field types, names, versions, storage version, structural schema; a few seconds for
two thousand CRDs), the kubeconfig files and context, Prometheus credential files,
probe names. A mistake is one line naming the cell and the key, not a failed run
after an 8-11 minute build, or after the cells before it ran.

Not checked here: whether a remote cluster answers.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from crdscale.cluster import buildable, flags, gates, gobuild, patches, releases, toolchain
from crdscale.cluster.binaries import built_with_go, cached_build, prometheus, release_go_named
from crdscale.cluster.clients import read_credentials
from crdscale.cluster.versions import normalize_version
from crdscale.collect.probes.configs import check_scenario_probes
from crdscale.crds import objects as gen
from crdscale.crds.generate import SET_LIMIT_BYTES, estimate_set, iter_crds
from crdscale.crds.load import load_crds, require_crds
from crdscale.errors import CrdscaleError, UsageError
from crdscale.proc import available_memory_bytes
from crdscale.scenario.config import Scenario, check_inputs
from crdscale.scenario.matrix import Cell, cell_where, expand
from crdscale.units import fmt_bytes


@dataclass
class CellReport:
    """What was checked for one cell: ``checks`` as ``(what, result)`` lines, ``warnings`` for the
    parts that could not be checked (e.g. the module proxy did not answer)."""

    cell: str
    checks: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _with_where(where: str, key: str, err: CrdscaleError) -> CrdscaleError:
    """``err`` again (same class, hence exit code) with the cell and key in front."""
    message = str(err)
    return type(err)(message if message.startswith(where) else f"{where}: '{key}': {message}")


def _check_target(scenario: Scenario, where: str, report: CellReport, answers) -> None:
    target = scenario.target
    if scenario.is_local:
        key = (
            "target.apiserver_binary"
            if target.apiserver_binary
            else ("target.kube_source" if target.kube_source else "target.kube_version")
        )
        try:
            plan = buildable.plan_kube_apiserver(
                target.kube_version,
                binary=target.apiserver_binary or None,
                source=target.kube_source or None,
                answers=answers,
            )
        except CrdscaleError as err:
            raise _with_where(where, key, err) from err
        how = plan.how
        if target.patches or target.build_tags:
            # The release's own binary is not what runs: a build with the changes below does, cached apart
            # by what changed.
            cached = _cached_changed_build(target)
            how = (
                f"cached: {cached} (built with the changes below)"
                if cached
                else "to build with the changes below (cached by their sha256), from the release's modules"
            )
        elif target.go not in ("", "local"):
            # The release itself, built with another Go than this machine's (when it is not the same one).
            cached = _cached_changed_build(target)
            go = "the Go it shipped with" if target.go == "release" else f"Go {target.go}"
            how = (
                f"cached: {cached} ({_built_with(cached, target)})" if cached else f"to build from Go modules with {go}"
            )
        if plan.what != "kube-apiserver" and not how.startswith("cached: "):
            _check_whole(normalize_version(target.kube_version), where, key)  # to build from the release's modules
        report.checks.append((plan.what, how))
        if plan.warning:
            report.warnings.append(plan.warning)
        try:
            plan = buildable.plan_etcd(target.etcd, answers=answers)
        except CrdscaleError as err:
            raise _with_where(where, buildable.etcd_given(target.etcd, "target.etcd") or "target.etcd", err) from err
        report.checks.append((plan.what, plan.how))
        if plan.warning:
            report.warnings.append(plan.warning)
        _check_changes(scenario, where, report)
        if scenario.metrics.source == "prometheus" and target.prometheus_url in (None, ""):
            try:
                found = prometheus()
            except CrdscaleError as err:
                raise _with_where(where, "metrics.source", err) from err
            report.checks.append(("prometheus", str(found.path)))
        return

    try:
        # What connecting will read, without running or sending anything: the files, the context,
        # its certificate and token files; then whether an exec plugin's command exists at all.
        server, credentials = read_credentials(target.kubeconfig, target.context or None)
        plugin = getattr(credentials.authenticator, "plugin", None)
        if plugin is not None and not (shutil.which(plugin.command) or Path(plugin.command).is_file()):
            hint = f" ({plugin.install_hint.splitlines()[0]})" if plugin.install_hint else ""
            raise UsageError(f"its exec plugin {plugin.command!r} is not installed (not on PATH){hint}")
    except CrdscaleError as err:
        raise _with_where(where, "target.kubeconfig", err) from err
    context = f", context {target.context}" if target.context else ""
    report.checks.append(("kubeconfig", f"{target.kubeconfig}{context} ({server})"))


def _check_whole(version: str, where: str, key: str) -> None:
    """UsageError (exit 2) when the Go module proxy does not serve release ``version`` whole: a staging module
    the build needs has no zip or no checksum, and ``go mod tidy`` would fail minutes in. A build of it
    cached here passes; the answer is cached as a history's choice of releases is."""
    found = releases.unbuildable(version)
    if found:
        raise UsageError(
            f"{where}: '{key}': kube-apiserver {version} cannot be built here: {found.reason()}; "
            f"{found.fix('kube_version')}"
        )


def _built_with(cached: Path, target) -> str:
    """How a cached release build was built: its Go, and whether that is the one its release names (the proxy
    can lack that patch as a toolchain: v1.26.13 names go1.20.13 and is built with go1.20.14)."""
    built = built_with_go(cached)
    if target.go != "release" or built is None:
        return f"built with {built or ('the Go it shipped with' if target.go == 'release' else 'Go ' + target.go)}"
    named = release_go_named(normalize_version(target.kube_version))
    if named is None or named == built:
        return f"built with {built}, the Go it shipped with" if named else f"built with {built}"
    return f"built with {built}, not the {named} it shipped with, which the Go module proxy does not serve"


def _cached_changed_build(target):
    """The build a target with changes (diffs, build tags, a Go) runs, when it is cached here; None when it
    is not, or when the changes cannot be read (:func:`_check_changes` says why, with the key)."""
    try:
        changes = (
            patches.build_changes(target.patches, target.build_tags) if (target.patches or target.build_tags) else None
        )
        return cached_build(normalize_version(target.kube_version), changes, target.go or "local")
    except CrdscaleError:
        return None


def _check_changes(scenario: Scenario, where: str, report: CellReport) -> None:
    """The changes to the release (diffs, build tags, feature gates, flags, the Go), each checked as the
    build and the start would check it, in seconds and before anything is built: a diff against the
    release's module sources, gates against those that version defines, flags against the binary's own
    (once the release is built; crdscale's own flags and a bare ``--`` always)."""
    t = scenario.target
    changed = bool(t.patches or t.build_tags or t.go not in ("", "local"))
    if changed and (t.apiserver_binary or t.kube_source):
        raise UsageError(
            f"{where}: 'target.patches', 'target.build_tags' and 'target.go' change a release built from Go "
            "modules; drop 'target.apiserver_binary' and 'target.kube_source'"
        )
    version = normalize_version(t.kube_version)
    try:
        tags = gobuild.check_build_tags(t.build_tags)
    except CrdscaleError as err:
        raise _with_where(where, "target.build_tags", err) from err
    if tags:
        report.checks.append(("build tags", ",".join(tags)))
    diffs = []
    if t.patches:
        try:
            diffs = [patches.read_diff(path) for path in t.patches]
            touched = patches.check(diffs, version)
        except CrdscaleError as err:
            raise _with_where(where, "target.patches", err) from err
        names = ", ".join(f"{d.name} (sha256 {d.sha256[:12]})" for d in diffs)
        report.checks.append(("patches", f"{names} apply to {', '.join(sorted(touched))} of {version}"))
    # A gate or a flag the diffs add is not in the release: accepted here, kube-apiserver checks it at start.
    new_gates, new_flags = patches.added_gates(diffs), patches.added_flags(diffs)
    known_gates = None
    if new_gates and (t.feature_gates or t.apiserver_flags):
        known_gates = dict(gates.gates_for(version))
        for name in new_gates:
            known_gates.setdefault(name, gates.Gate(name, "added by the diff", False, False, ""))
    if t.feature_gates:
        try:
            stages = gates.check_feature_gates(dict(t.feature_gates), version, known=known_gates)
        except CrdscaleError as err:
            raise _with_where(where, "target.feature_gates", err) from err
        listed = ", ".join(f"{name}={str(g['enabled']).lower()} ({g['stage']})" for name, g in stages.items())
        report.checks.append(("feature gates", listed))
    for key, component, items in (
        ("target.apiserver_flags", "kube-apiserver", t.apiserver_flags),
        ("target.controller_manager_flags", "kube-controller-manager", t.controller_manager_flags),
    ):
        if not items:
            continue
        reserved = (
            flags.CONTROLLER_MANAGER_RESERVED if component == "kube-controller-manager" else flags.APISERVER_RESERVED
        )
        known = None if t.apiserver_binary or t.kube_source else flags.released_flag_set(version, component)
        if known is not None and new_flags and component == "kube-apiserver":
            known = replace(known, flags={**new_flags, **known.flags})
        try:
            if known is None:
                flags.check_reserved(items, component=component, reserved=reserved)
            else:
                flags.check_flags(items, known, component=component, reserved=reserved)
                asked = flags.feature_gates_in_flags(items)
                if asked:
                    gates.check_feature_gates(asked, version, known=known_gates)
        except CrdscaleError as err:
            raise _with_where(where, key, err) from err
        if known is None:
            report.warnings.append(
                f"{key}: checked against crdscale's own flags only; the {component} binary's flag set is read "
                f"once {version} has been built"
            )
    if t.go not in ("", "local"):
        try:
            if t.go != "release":
                toolchain.check_toolchain_version(t.go)
        except CrdscaleError as err:
            raise _with_where(where, "target.go", err) from err
        report.checks.append(("go", f"{t.go} (toolchain from the Go module proxy, golang.org/toolchain)"))


def _check_crds(scenario: Scenario, where: str, report: CellReport, loaded: dict) -> None:
    crds = scenario.crds
    if crds.source == "generate":
        params = scenario.generator_params()
        try:
            estimate = estimate_set(params, available_memory=available_memory_bytes())
        except CrdscaleError as err:
            raise _with_where(where, "crds.count", err) from err
        report.checks.append(
            ("crds", f"generate {params.crd_count} CRDs in {params.group_count} groups, {estimate.line()}")
        )
        return

    # Loaded as the run will load them (crdscale.scenario.crdset), each CRD checked as kube-apiserver
    # would check it; a matrix's cells share a source's answer. Nothing of the CRDs is kept.
    key = str(crds.source)
    try:
        if key not in loaded:
            loaded[key] = load_crds(crds.source, measure=_nothing)
        require_crds(loaded[key], crds.source)
    except CrdscaleError as err:
        raise _with_where(where, "crds.source", err) from err
    found = loaded[key]
    crds_, files = len(found.names), found.files
    counted = f"{crds_:,} CRD{'s' if crds_ != 1 else ''} in {files:,} file{'s' if files != 1 else ''}"
    report.checks.append(("crds", f"{counted} under {crds.source}, each one kube-apiserver accepts"))


def _nothing(_crd: dict) -> None:
    """What loading keeps of each CRD to check it: nothing (a module-level function: worker processes run it)."""
    return None


def _check_objects(scenario: Scenario, where: str, report: CellReport) -> None:
    """``steps.grow = "objects"``: one object of the first generated CRD and of each control kind
    is built (a shape that cannot reach the size is an error now), and the total is checked
    against the local etcd's quota."""
    if not scenario.grows_objects:
        return

    o = scenario.objects
    crds = scenario.crds.count if scenario.crds.source == "generate" else None
    try:
        if crds is not None:
            crd = next(iter_crds(scenario.generator_params()))
            if o.shape != "schema":
                crd = gen.with_payload_field(crd)
            gen.custom_resource(crd, "check", namespace=None, labels={}, size=o.bytes, shape=o.shape)
        for kind in o.control:
            gen.control_object(kind, "check", namespace="check", labels={}, size=o.bytes)
    except UsageError as err:
        raise UsageError(f"{where}: [objects]: {err}") from None
    kinds = 1 + len(o.control)
    total = o.count * (crds or 0) * o.bytes * kinds
    if scenario.is_local and total > SET_LIMIT_BYTES:
        raise UsageError(
            f"{where}: [objects]: {fmt_bytes(total)} of objects exceed the local etcd's {fmt_bytes(SET_LIMIT_BYTES)} quota"
        )
    per = f"{o.count} per CRD" + (f" ({o.count * crds:,} in all)" if crds else "")
    control = f" + the same in {', '.join(o.control)}" if o.control else ""
    report.checks.append(("objects", f"{per} of {o.bytes} bytes, {o.shape}{control}, {fmt_bytes(total)} sent"))


def _check_probes(scenario: Scenario, where: str, report: CellReport) -> None:
    names = scenario.probes.each_step
    if not names and not scenario.probes.options:
        return

    try:
        # Every name is a probe and its options read into the probe's typed config.
        check_scenario_probes(scenario.probes.table())
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None  # err names the key: each_step's, or an options table
    if names:
        report.checks.append(("probes", ", ".join(names)))


def check_cell(
    scenario: Scenario, where: str, *, name: str = "base", answers=None, crd_sets: dict | None = None
) -> CellReport:
    """Check one (cell's) scenario; returns what was checked. Raises the :class:`CrdscaleError`
    the run would have raised later (same class and exit code), with ``where`` in front.
    ``crd_sets``: CRD sources already loaded (source -> :class:`~crdscale.crds.load.LoadedCrdSet`), filled in."""
    report = CellReport(name)
    check_inputs(scenario, where)
    _check_target(scenario, where, report, answers if answers is not None else {})
    _check_crds(scenario, where, report, crd_sets if crd_sets is not None else {})
    _check_objects(scenario, where, report)
    _check_probes(scenario, where, report)
    if scenario.target.prometheus_url:
        report.checks.append(("prometheus", f"{scenario.target.prometheus_url} (credential files present)"))
    return report


def _modules(cells: list[tuple[Cell, Scenario]]) -> list[tuple[str, str]]:
    pairs = []
    for _cell, sc in cells:
        if sc.is_local:
            t = sc.target
            pairs += buildable.kube_modules_needed(t.kube_version, binary=t.apiserver_binary, source=t.kube_source)
            pairs += buildable.etcd_modules_needed(t.etcd)
    return pairs


def _file_name(scenario: Scenario) -> str:
    """How errors name a scenario without a matrix, as parsing does: the file's name."""
    return Path(scenario.source_path).name if scenario.source_path else "default scenario"


def check_cells(scenario: Scenario, cells: list[tuple[Cell, Scenario]] | None = None) -> list[CellReport]:
    """Check every cell of ``scenario``'s matrix (one ``base`` cell without one), in matrix
    order, the module proxy asked once for all of them (in parallel). ``cells``: the expanded
    cells when the caller has them. Raises for the first bad cell."""
    cells = cells if cells is not None else expand(scenario)
    answers = buildable.module_answers(_modules(cells)) if shutil.which("go") else {}
    reports = []
    crd_sets: dict = {}
    for cell, sc in cells:
        where = cell_where(scenario, cell) if scenario.matrix else _file_name(scenario)
        reports.append(check_cell(sc, where, name=cell.name, answers=answers, crd_sets=crd_sets))
    return reports
