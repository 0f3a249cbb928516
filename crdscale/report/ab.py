"""An A/B directory (``crdscale ab``) said in words, tables and a rendered report.

The numbers are the A/B's comparison (:meth:`crdscale.scenario.ab.AB.comparison`: base against changed,
repeats pooled) and its verdict (:mod:`crdscale.report.verdict`). :func:`write_verdict_files` writes
``verdict.md``, ``verdict.json`` and ``flame.html`` into the A/B directory when an A/B ends;
:func:`render_ab_report` executes ``notebooks/ab.py`` on it and writes, through the same pipeline as a
run's report (:func:`crdscale.report.render.write_report`), into ``AB_DIR/report/``::

    findings.md          the comparison's tables (base against changed), figures
    findings.json        the same numbers, unformatted
    *.png, *.svg         figures: the difference by cause, the pairs' differences
    report.html, report-nocode.html   the verdict, then the notebook: per-cause differences, the pairs'
                         spread, the frames that changed and the differential flame graph (interactive)
    notebooks/ab.ipynb

The flame graph pools each side's runs: the mean growth per CRD by stack over its runs.

An A/B with arms (``crdscale ab --each``) ends in :func:`write_arms_verdict_files`: ``verdict.md`` (one row
per arm, :class:`~crdscale.report.verdict.ArmsVerdict`), ``verdict.json`` and each arm's ``verdict-<arm>.md``;
no flame graph or rendered report (``crdscale compare`` on an arm's and the base's runs shows them).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pandas as pd

from crdscale.analysis.perobject import main_kind
from crdscale.analysis.pooled import common_spread
from crdscale.analysis.targets import TOTAL
from crdscale.errors import UsageError
from crdscale.fsutil import check_output_dir, write_atomic
from crdscale.report import plots
from crdscale.report.compare import comparison_content
from crdscale.report.diffflame import (
    diff_icicle_figure,
    diff_icicle_nodes,
    frame_differences,
    mean_growth_stacks,
    run_growth_stacks,
    write_diff_flame_html,
)
from crdscale.report.figures import FigureSpec, new_figure
from crdscale.report.render import CELL_TIMEOUT_S, default_notebooks_dir, write_report
from crdscale.report.verdict import ArmsVerdict, arm_lists, build_verdict
from crdscale.rundir import read_run
from crdscale.scenario.ab import AB, BASE, SIDES, precision

log = logging.getLogger(__name__)

AB_NOTEBOOK = "ab"


def side_growth(ab: AB, side: str) -> pd.Series:
    """The mean heap growth per CRD by folded stack over one side's completed runs (in complete pairs)."""
    runs = [r for r in ab.completed() if r.side == side and r.pair in ab.paired()]
    if not runs:
        raise ValueError(f"{ab.path}: no completed {side} run in a complete pair")
    return mean_growth_stacks([run_growth_stacks(read_run(ab.path / r.run_dir)) for r in runs])


def flame_nodes(ab: AB) -> pd.DataFrame:
    """The differential flame graph's nodes (:func:`crdscale.report.diffflame.diff_icicle_nodes`) of the A/B."""
    return diff_icicle_nodes(side_growth(ab, "base"), side_growth(ab, "changed"))


def flame_figure(ab: AB, nodes: pd.DataFrame | None = None, *, colour: str = "growth"):
    """The A/B's differential flame graph: changed minus base, heap growth per CRD, each side's mean;
    coloured by ``colour`` (growth or cause) first."""
    nodes = flame_nodes(ab) if nodes is None else nodes
    return diff_icicle_figure(
        nodes, title=f"{ab.change.name}: heap growth per CRD, changed minus base (mean of the pairs)", colour=colour
    )


def frames_changed(ab: AB) -> pd.DataFrame:
    """Bytes per CRD by function, each side's mean over its runs, largest ``|difference|`` first
    (:func:`crdscale.report.diffflame.frame_differences`)."""
    return frame_differences(side_growth(ab, "base"), side_growth(ab, "changed"))


def pair_differences(ab: AB, comparison) -> pd.DataFrame:
    """One row per complete pair: which side ran first, each side's per-CRD (or per-object, for runs that
    grow objects) heap total and their difference (changed minus base), in bytes; the pairs' spread is
    what the pooled interval is made of."""
    per_object = comparison.per_object_joint is not None and not comparison.per_object_joint.empty
    if per_object:
        frame = comparison.per_object
        rows = frame[frame["cause"] == TOTAL]
        value = "per_object"
    else:
        frame = comparison.per_crd
        rows = frame[(frame["cause"] == TOTAL) & (frame["metric"] == "bytes") & (frame["phase"] == "served")]
        value = "per_crd"
    by_label = rows.groupby("run")[value].first()
    out = []
    for pair in sorted(ab.paired()):
        labels = {side: f"{side},repeat={pair}" for side in SIDES}
        if not all(label in by_label.index for label in labels.values()):
            continue
        base, changed = (float(by_label[labels[s]]) for s in SIDES)
        first = next(r.side for r in ab.runs if r.pair == pair)
        out.append((pair, first, base, changed, changed - base))
    unit = "bytes per custom resource" if per_object else "bytes per CRD"
    table = pd.DataFrame(out, columns=["pair", "first", "base", "changed", "difference"])
    table.attrs["unit"] = unit
    return table


def change_provenance(comparison, run: str | None = None) -> dict:
    """What the changed side's (or arm ``run``'s) manifest records of its change (diffs with sha256 and
    files, tags, gates)."""
    label = comparison.first_run(comparison.compared[0] if run is None else run)
    manifest = comparison.manifests.get(label) or {}
    change = (manifest.get("target") or {}).get("change") or manifest.get("change")
    if not isinstance(change, dict):
        return {}
    return {
        key: json.dumps(value, default=str) if not isinstance(value, str) else value
        for key, value in change.items()
        if value not in ([], {}, "", None)  # what the change left alone says nothing
    }


def ab_verdict(ab: AB, comparison=None):
    """The A/B's :class:`~crdscale.report.verdict.Verdict` (its comparison computed when not given)."""
    comparison = ab.comparison() if comparison is None else comparison
    reached = precision(comparison)
    changes = {"change": ab.change.describe(), **change_provenance(comparison)}
    return build_verdict(comparison, change=ab.change.name, changes=changes, pairs=reached.pairs if reached else None)


def write_verdict_files(ab: AB):
    """``verdict.md``, ``verdict.json`` and ``flame.html`` of an A/B directory; returns the verdict."""
    comparison = ab.comparison()
    verdict = ab_verdict(ab, comparison)
    write_atomic(ab.path / "verdict.md", verdict.markdown())
    write_atomic(ab.path / "verdict.json", json.dumps(verdict.to_json(), indent=2, default=str) + "\n")
    try:
        write_diff_flame_html(flame_figure(ab), ab.path / "flame.html")
    except (ImportError, ValueError) as err:  # plotly missing (report extra), or a run without two profiles
        log.warning(f"no flame.html: {err}")
    return verdict


# --------------------------------------------------------------------------
# An A/B with arms
# --------------------------------------------------------------------------


def _per_crd_shown(ab: AB) -> bool:
    """Whether the runs have a per-CRD fit: not when they grow objects after installing every CRD in one step."""
    user = ab.scenario_user
    steps, objects = user.get("steps") or {}, user.get("objects") or {}
    return not (steps.get("grow") == "objects" and objects.get("crd_steps", 1) <= 1)


def headline_spread(comparison) -> dict:
    """The spread pooled over every configuration's runs of the headline figure (the custom resources' total
    heap per object, else the total heap per CRD): ``what``, ``sd``, ``dof`` and the configurations whose
    spread is out of line (``own``, :func:`crdscale.analysis.pooled.common_spread`)."""
    config = comparison.replicates
    per_object = comparison.per_object
    if comparison.per_object_joint is not None and not comparison.per_object_joint.empty and len(per_object):
        kind = main_kind(per_object["kind"])
        rows = per_object[(per_object["kind"] == kind) & (per_object["cause"] == "total")]
        rows = rows[rows["metric"] == "bytes"] if "metric" in rows else rows
        what, column = "total heap per custom resource", "per_object"
    else:
        frame = comparison.per_crd
        rows = frame[(frame["cause"] == "total") & (frame["metric"] == "bytes") & (frame["phase"] == "served")]
        what, column = "total heap per CRD", "per_crd"
    values: dict[str, list[float]] = {}
    for r in rows.to_dict("records"):
        values.setdefault(config.get(r["run"], r["run"]), []).append(float(r[column]))
    spread = common_spread(values)
    dof = spread.dof if spread.usable else 0
    return {"what": what, "sd": spread.sd if dof else None, "dof": dof, "own": sorted(spread.own)}


def arms_verdict(ab: AB, comparison=None) -> ArmsVerdict:
    """The :class:`~crdscale.report.verdict.ArmsVerdict` of an A/B with arms, each arm's own verdict in it."""
    comparison = ab.comparison() if comparison is None else comparison
    per_crd_shown = _per_crd_shown(ab)
    completed = [r for r in ab.completed() if r.side in ab.sides]
    rounds = len({r.pair for r in completed})
    base_runs = ab.arm_runs(BASE)
    arms = []
    for arm in ab.arms:
        if arm.name not in comparison.compared:
            log.warning(f"arm {arm.name}: no completed run yet; left out of the verdict")
            continue
        runs = ab.arm_runs(arm.name)
        mine = {label for label in comparison.labels if comparison.replicates.get(label, label) in (BASE, arm.name)}
        notes = [w for w in comparison.warnings if w.split(":", 1)[0] in mine][:2]
        design = (
            f"{runs} run(s) of {arm.name} and {base_runs} of the base, in {rounds} round(s) beside "
            f"{len(ab.arms) - 1} other arm(s); intervals from the spread pooled over all {len(ab.sides)} "
            f"configurations' runs (`verdict.md` says how)."
        )
        changes = {"change": arm.change.describe(), **change_provenance(comparison, arm.name)}
        verdict = build_verdict(
            comparison, change=arm.change.name, changes=changes, pairs=runs, run=arm.name, notes=notes, design=design
        )
        arms.append(
            {
                "name": arm.name,
                "change": arm.change.name,
                "runs": runs,
                "per_crd": verdict.per_crd if per_crd_shown else None,
                "per_object": verdict.per_object,
                "lists": arm_lists(comparison, arm.name),
                "peak_rss": next((p for p in verdict.process if p["figure"] == "peak RSS"), None),
                "verdict": verdict,
            }
        )
    provenance = {"base": arms[0]["verdict"].provenance.get("base")} if arms else {}
    provenance["scenario"] = ab.scenario_file or ab.manifest.get("name", "")
    return ArmsVerdict(
        name=str(ab.manifest.get("name", "")),
        rounds=rounds,
        runs=len(completed),
        arms=arms,
        spread=headline_spread(comparison),
        per_crd_shown=per_crd_shown,
        provenance=provenance,
        widest=ab.widest(comparison),
    )


def write_arms_verdict_files(ab: AB) -> ArmsVerdict:
    """``verdict.md``, ``verdict.json`` and each arm's ``verdict-<arm>.md`` of an A/B with arms."""
    verdict = arms_verdict(ab)
    for arm in verdict.arms:
        write_atomic(ab.path / f"verdict-{arm['name']}.md", arm["verdict"].markdown())
    write_atomic(ab.path / "verdict.md", verdict.markdown())
    write_atomic(ab.path / "verdict.json", json.dumps(verdict.to_json(), indent=2, default=str) + "\n")
    return verdict


# --------------------------------------------------------------------------
# The rendered report
# --------------------------------------------------------------------------


def render_ab_report(
    ab_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    notebooks_dir: str | Path | None = None,
    timeout: int | None = None,
):
    """Findings, figures and HTML of an A/B directory (see the module docstring); out defaults to
    ``AB_DIR/report``. Returns a :class:`crdscale.report.render.ReportResult`."""
    ab = AB.open(Path(ab_dir).resolve())
    refuse_arms(ab, "crdscale report")
    notebook = ab_notebook(notebooks_dir)
    # Computed before the kernel starts and anything is written: an A/B without a complete pair is said
    # before minutes of notebook.
    comparison = ab.comparison()
    out = check_output_dir(Path(out_dir).resolve() if out_dir else ab.path / "report")
    return write_report(
        out,
        [(notebook, {"run_dir": str(ab.path)})],
        lambda: ab_report_content(ab, comparison),
        timeout=timeout or CELL_TIMEOUT_S,
    )


def refuse_arms(ab: AB, command: str) -> None:
    """UsageError (one line) for an A/B with arms: its report and notebook are an A/B of one change's."""
    if ab.arms:
        raise UsageError(
            f"{command}: {ab.path.name} has {len(ab.arms)} arms: its verdicts are verdict.md and verdict-<arm>.md; "
            f"'crdscale compare' on an arm's and the base's runs shows the rest"
        )


def ab_notebook(notebooks_dir: str | Path | None = None) -> Path:
    """``notebooks/ab.py`` (of ``notebooks_dir``); UsageError when it is not there."""
    notebooks_dir = (Path(notebooks_dir) if notebooks_dir else default_notebooks_dir()).resolve()
    notebook = notebooks_dir / f"{AB_NOTEBOOK}.py"
    if not notebook.is_file():
        raise UsageError(f"notebook {notebook} not found (use --notebooks DIR: the notebooks/ of a crdscale checkout)")
    return notebook


def ab_report_content(ab: AB, comparison):
    """What an A/B's report says besides its notebook: the verdict first, the comparison's findings and
    figures (:func:`crdscale.report.compare.comparison_content`) and the pairs' differences."""
    import nbformat  # lazy: the optional report extra

    content = comparison_content(comparison)
    verdict = ab_verdict(ab, comparison)
    fig, ax = new_figure(10, 3.5)
    plots.plot_pair_differences(ax, pair_differences(ab, comparison))
    title = f"crdscale A/B: {ab.change.name} ({ab.path.name})"
    return replace(
        content,
        title=title,
        figures=[*content.figures, FigureSpec("pair-differences", "The pairs' differences, changed minus base", fig)],
        first_cells=lambda _pngs: [nbformat.v4.new_markdown_cell(f"# {title}\n\n{verdict.markdown()}")],
    )
