"""Check a scenario before it runs: ``crdscale run --check``, and the first thing ``crdscale run`` does.

Everything a run needs that can be checked in seconds is checked for every
cell of a matrix before the first cell starts, before a run directory exists
and before a binary is resolved or built: the kube-apiserver and etcd crdscale
would build (versions the Go module proxy serves; a cached binary always
passes), binaries and source trees the scenario names, ``crds.source``, the
kubeconfig files and context, Prometheus credential files, probe names. A
mistake is one line naming the cell and the key, not a failed run after an
8-11 minute build, or after the cells before it ran.

Not checked here: whether a remote cluster answers, and the CRD files' contents
(loading thousands of CRDs can take minutes; the run loads them before it starts
a server or builds anything).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from crdscale.cluster import buildable
from crdscale.errors import CrdscaleError
from crdscale.scenario.config import Scenario, check_inputs
from crdscale.scenario.matrix import Cell, cell_where, expand


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
        report.checks.append((plan.what, plan.how))
        if plan.warning:
            report.warnings.append(plan.warning)
        try:
            plan = buildable.plan_etcd(target.etcd, answers=answers)
        except CrdscaleError as err:
            raise _with_where(where, "target.etcd", err) from err
        report.checks.append((plan.what, plan.how))
        if plan.warning:
            report.warnings.append(plan.warning)
        if scenario.metrics.source == "prometheus" and target.prometheus_url in (None, ""):
            from crdscale.cluster.binaries import prometheus

            try:
                found = prometheus()
            except CrdscaleError as err:
                raise _with_where(where, "metrics.source", err) from err
            report.checks.append(("prometheus", str(found.path)))
        return
    from crdscale.cluster.clients import read_credentials

    try:
        # What connecting will read, without running or sending anything: the files, the context,
        # its certificate and token files; then whether an exec plugin's command exists at all.
        server, credentials = read_credentials(target.kubeconfig, target.context or None)
        plugin = getattr(credentials.authenticator, "plugin", None)
        if plugin is not None and not (shutil.which(plugin.command) or Path(plugin.command).is_file()):
            from crdscale.errors import UsageError

            hint = f" ({plugin.install_hint.splitlines()[0]})" if plugin.install_hint else ""
            raise UsageError(f"its exec plugin {plugin.command!r} is not installed (not on PATH){hint}")
    except CrdscaleError as err:
        raise _with_where(where, "target.kubeconfig", err) from err
    context = f", context {target.context}" if target.context else ""
    report.checks.append(("kubeconfig", f"{target.kubeconfig}{context} ({server})"))


def _check_crds(scenario: Scenario, where: str, report: CellReport) -> None:
    crds = scenario.crds
    if crds.source == "generate":
        from crdscale.crds.generate import estimate_set
        from crdscale.proc import available_memory_bytes

        params = scenario.generator_params()
        try:
            estimate = estimate_set(params, available_memory=available_memory_bytes())
        except CrdscaleError as err:
            raise _with_where(where, "crds.count", err) from err
        report.checks.append(
            ("crds", f"generate {params.crd_count} CRDs in {params.group_count} groups, {estimate.line()}")
        )
        return
    from crdscale.crds.load import FILE_SUFFIXES, find_files

    try:
        files = find_files(crds.source)
    except CrdscaleError as err:
        raise _with_where(where, "crds.source", err) from err
    if not files:
        from crdscale.errors import CRDError

        raise CRDError(f"{where}: 'crds.source': no {'/'.join(FILE_SUFFIXES)} files under {crds.source}")
    report.checks.append(("crds", f"{len(files)} file(s) under {crds.source}"))


def _check_objects(scenario: Scenario, where: str, report: CellReport) -> None:
    """``steps.grow = "objects"``: one object of the first generated CRD and of each control kind
    is built (a shape that cannot reach the size is an error now), and the total is checked
    against the local etcd's quota."""
    if not scenario.grows_objects:
        return
    from crdscale.crds import objects as gen
    from crdscale.crds.generate import SET_LIMIT_BYTES, iter_crds
    from crdscale.errors import UsageError
    from crdscale.units import fmt_bytes

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
    if not names:
        return
    from crdscale.collect.probes.configs import check_scenario_probes
    from crdscale.errors import UsageError

    try:
        # Every name is a probe and its options read into the probe's typed config.
        check_scenario_probes(scenario.probes.table())
    except UsageError as err:
        raise UsageError(f"{where}: 'probes.each_step': {err}") from None
    report.checks.append(("probes", ", ".join(names)))


def check_cell(scenario: Scenario, where: str, *, name: str = "base", answers=None) -> CellReport:
    """Check one (cell's) scenario; returns what was checked. Raises the :class:`CrdscaleError`
    the run would have raised later (same class and exit code), with ``where`` in front."""
    report = CellReport(name)
    check_inputs(scenario, where)
    _check_target(scenario, where, report, answers if answers is not None else {})
    _check_crds(scenario, where, report)
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
    for cell, sc in cells:
        where = cell_where(scenario, cell) if scenario.matrix else _file_name(scenario)
        reports.append(check_cell(sc, where, name=cell.name, answers=answers))
    return reports
