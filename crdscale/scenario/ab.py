"""An A/B of a change: the base scenario and the scenario with a change, run in interleaved pairs until the
difference is as tight as asked.

Layout::

    runs/<UTC timestamp>-ab-<name>/
        ab.json                               the base scenario, the change, every run with its side and status
        <UTC timestamp>-p01-base/             ordinary run directories, one per side and pair
        <UTC timestamp>-p01-changed/
        verdict.md, verdict.json, flame.html  written when it ends (crdscale.report.verdict, .diffflame)

**Interleaved and counterbalanced.** Pairs alternate which side runs first (base, changed; changed, base;
...), so drift on a shared machine (a neighbour's load, a warming page cache) hits both sides alike and a
linear drift cancels over two pairs.

**Until tight.** After each pair (from ``min_pairs``) the runs are compared with repeats pooled
(:func:`crdscale.analysis.compare.compare_runs`: a configuration's interval comes from its repeats'
spread), and the A/B stops when the 95 % interval of the per-CRD total difference is within ``until`` of
the base's per-CRD total (``--until 10%``), or at ``max_pairs``, saying how many more pairs the asked
precision would need (the half-width falls as one over the square root of the pairs).

Resumable: reopening the directory (``--resume``) keeps completed runs and continues.

**Arms.** One A/B can also weigh several changes, each an *arm*, against one shared base (``crdscale ab
--each``: the seven gates of ``scenarios/gates.toml`` in one directory)::

    runs/<UTC timestamp>-ab-<name>/
        ab.json                                the base scenario, the arms, every run with its arm and status
        <UTC timestamp>-r01-base/              one run per configuration (the base and each arm) and round
        <UTC timestamp>-r01-<arm>/
        verdict.md, verdict.json               one row per arm; verdict-<arm>.md each arm's own verdict

Each round runs every configuration once, in an order that moves from round to round (:func:`arm_order`: odd
rounds rotate the configurations by one more each time, even rounds run the previous round backwards), so over
every two rounds a linear drift adds the same to every configuration. The arms are judged together
(:meth:`AB.comparison` with ``spread="pooled"``): each arm's difference to the base gets its interval from the
spread pooled over every configuration's repeats (:mod:`crdscale.analysis.pooled`), with many more degrees of
freedom than one arm's and the base's repeats alone have.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crdscale import __version__
from crdscale.analysis.compare import compare_runs
from crdscale.analysis.perobject import kind_label, main_kind
from crdscale.errors import CrdscaleError, UsageError
from crdscale.fsutil import write_json_atomic
from crdscale.results.store import cell_prefix, open_store
from crdscale.rundir import read_run
from crdscale.scenario.check import check_cells
from crdscale.scenario.clusterjob import CLUSTER_KEY, check_cells_for_pods
from crdscale.scenario.config import build_scenario, resolve_paths
from crdscale.scenario.matrix import Cell
from crdscale.units import fmt_bytes, fmt_duration

log = logging.getLogger(__name__)

AB_MANIFEST = "ab.json"
SIDES = ("base", "changed")
BASE = SIDES[0]
# An arm's name names its run directories, its verdict-<arm>.md and its configuration in the comparison.
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
MAX_ARMS = 12
BUILD_KEYS = ("target.patches", "target.build_tags")  # changes that need kube-apiserver built with them


@dataclass(frozen=True)
class Change:
    """What the changed side sets on top of the base scenario: dotted scenario keys -> values
    (``target.patches``, ``target.build_tags``, ``target.feature_gates``, ``target.apiserver_flags``, ...),
    and a short ``name`` for titles (``known-cost.diff``)."""

    overrides: dict[str, Any]
    name: str

    def describe(self) -> str:
        return ", ".join(f"{k} = {json.dumps(v)}" for k, v in self.overrides.items())

    def check_for_pods(self) -> None:
        """UsageError (one line) when the change needs a kube-apiserver built with it: a pod of
        ``crdscale ab --cluster`` runs the crdscale image's binaries, released builds only."""
        for key in BUILD_KEYS:
            if self.overrides.get(key):
                raise UsageError(
                    f"--cluster: {key} needs a kube-apiserver built with the change, and the crdscale image "
                    f"carries released builds only; run this A/B here (without --cluster)"
                )


@dataclass(frozen=True)
class Arm:
    """One change of an A/B with arms: ``name`` (names its runs, ``r01-<name>``, and ``verdict-<name>.md``)
    and the :class:`Change` it makes to the base."""

    name: str
    change: Change

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.change.name, "overrides": self.change.overrides}


def check_arms(arms: list[Arm]) -> None:
    """UsageError (one line) for arms that cannot run side by side: a bad or repeated name, no change, two arms
    making the same change, more than :data:`MAX_ARMS`."""
    if len(arms) < 1:
        raise UsageError("an A/B with arms needs at least one arm")
    if len(arms) > MAX_ARMS:
        raise UsageError(f"{len(arms)} arms: at most {MAX_ARMS} (each round runs every arm and the base)")
    seen: dict[str, str] = {}
    for arm in arms:
        if not ARM_NAME.fullmatch(arm.name) or arm.name == BASE:
            raise UsageError(
                f"arm {arm.name!r}: a name of letters, digits, '.', '_' and '-' (at most 40), not {BASE!r}"
            )
        if arm.name in seen.values():
            raise UsageError(f"arm {arm.name!r} is named twice")
        if not arm.change.overrides:
            raise UsageError(
                f"arm {arm.name!r} changes nothing: give it a --patch, --build-tag, --feature-gate or --apiserver-flag"
            )
        key = json.dumps(arm.change.overrides, sort_keys=True)
        if key in seen:
            raise UsageError(f"arms {seen[key]!r} and {arm.name!r} make the same change ({arm.change.describe()})")
        seen[key] = arm.name


def arm_order(round_: int, configurations: tuple[str, ...]) -> tuple[str, ...]:
    """The order round ``round_`` (1-based) runs ``configurations`` in: odd round ``2q+1`` rotates them by
    ``q``, even round ``2q+2`` runs round ``2q+1`` backwards. Over two rounds every configuration sits at
    mirrored places (a linear drift adds the same to each); the rotation changes who goes first."""
    q = (round_ - 1) // 2
    shift = q % len(configurations)
    forward = configurations[shift:] + configurations[:shift]
    return forward if round_ % 2 == 1 else forward[::-1]


@dataclass
class Precision:
    """How tight the per-CRD total difference is after ``pairs`` pairs."""

    pairs: int
    difference: float
    low: float
    high: float
    base_total: float
    per: str = "CRD"  # "CRD", or "custom resource" for runs that grow objects
    arm: str = ""  # the arm, in an A/B with arms

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def relative(self) -> float:
        """Half-width over the base's per-CRD total (inf when unknown)."""
        if not self.base_total or not math.isfinite(self.half_width):
            return math.inf
        return self.half_width / abs(self.base_total)

    def pairs_needed(self, until: float) -> int:
        """Pairs the asked precision needs, if the half-width keeps falling as 1/sqrt(pairs)."""
        if self.relative <= until:
            return self.pairs
        if not math.isfinite(self.relative):
            return self.pairs + 1
        return math.ceil(self.pairs * (self.relative / until) ** 2)

    def line(self) -> str:
        return (f"{self.arm}: " if self.arm else "") + (
            f"after {self.pairs} {'run(s)' if self.arm else 'pair(s)'}: total per {self.per} {fmt_bytes(self.difference)} "
            f"[{fmt_bytes(self.low)}, {fmt_bytes(self.high)}], half-width {100 * self.relative:.1f}% of the base's "
            f"{fmt_bytes(self.base_total)}"
        )


def precision(comparison, run: str | None = None) -> Precision | None:
    """The difference ``--until`` judges (changed against base, or the arm ``run`` against it) and its
    interval: the per-CRD total, or for runs that grow objects (their CRDs installed before the first step:
    no per-CRD fit) the per-object total. None when neither has an interval yet."""
    if run is None:
        pairs = sum(1 for label in comparison.labels if label.startswith("changed"))
    else:
        pairs = sum(1 for label in comparison.labels if comparison.replicates.get(label, label) == run)
    candidates = []
    objects = comparison.per_object_joint
    if objects is not None and not objects.empty:
        # Runs that grow objects install their CRDs before the first step: their per-CRD fit means nothing.
        # The custom resources' total, not a control kind's that may come first.
        kind = main_kind(objects["kind"])
        rows = objects[(objects["cause"] == "total") & (objects["kind"] == kind)]
        rows = rows[rows["run"] == run] if run is not None else rows
        candidates += [(r, "per_object_reference", kind_label(kind)) for r in rows.to_dict("records")]
    else:
        joint = comparison.joint
        rows = joint[(joint["cause"] == "total") & (joint["metric"] == "bytes")] if joint is not None else []
        rows = rows[rows["run"] == run] if run is not None and len(rows) else rows
        candidates += [(r, "per_crd_reference", "CRD") for r in (rows.to_dict("records") if len(rows) else [])]
    for r, reference, per in candidates:
        low, high = float(r["difference_low"]), float(r["difference_high"])
        if math.isfinite(low) and math.isfinite(high):
            return Precision(pairs, float(r["difference"]), low, high, float(r[reference]), per, run or "")
    return None


def run_name(pair: int, side: str) -> str:
    return f"p{pair:02d}-{side}"


def arm_run_name(round_: int, configuration: str) -> str:
    """``r01-base``, ``r01-<arm>``: a run of an A/B with arms."""
    return f"r{round_:02d}-{configuration}"


def parse_run_name(name: str) -> tuple[int, str]:
    """``(pair, side)`` of :func:`run_name`'s ``p01-base``; UsageError for anything else."""
    pair, _, side = name.partition("-")
    if not (pair.startswith("p") and pair[1:].isdigit() and int(pair[1:]) >= 1 and side in SIDES):
        raise UsageError(f"{name!r}: not an A/B run (p01-base, p01-changed, p02-changed, ...)")
    return int(pair[1:]), side


def is_ab_directory(path: str | Path) -> bool:
    """Whether ``path`` is an A/B directory (it holds :data:`AB_MANIFEST`)."""
    return (Path(path) / AB_MANIFEST).is_file()


def side_order(pair: int) -> tuple[str, str]:
    """Which side runs first in pair ``pair`` (1-based): base first in odd pairs, changed first in even ones."""
    return SIDES if pair % 2 == 1 else SIDES[::-1]


@dataclass
class ABRun:
    pair: int
    side: str
    run_dir: str | None = None  # relative to the A/B directory
    status: str = "pending"
    seconds: float | None = None

    @property
    def name(self) -> str:
        """``p01-base``: what names its run directory, and its index's cell on a cluster."""
        return run_name(self.pair, self.side)

    @property
    def label(self) -> str:
        # ",repeat=N": compare pools a configuration's repeats (crdscale.analysis.compare.configurations).
        return f"{self.side},repeat={self.pair}"


@dataclass
class AB:
    """An A/B directory. Create with :meth:`create`, reopen with :meth:`open`."""

    path: Path
    scenario_user: dict
    scenario_overrides: dict
    scenario_file: str | None
    change: Change
    runs: list[ABRun] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    arms: list[Arm] = field(default_factory=list)  # an A/B with arms; empty for one change ("changed")

    @property
    def sides(self) -> tuple[str, ...]:
        """The configurations, base first: ``base, changed``, or ``base`` and each arm's name."""
        return (BASE, *(a.name for a in self.arms)) if self.arms else SIDES

    def change_of(self, side: str) -> Change | None:
        """What ``side`` changes (None for the base)."""
        if side == BASE:
            return None
        if not self.arms and side == "changed":
            return self.change
        arm = next((a for a in self.arms if a.name == side), None)
        if arm is None:
            raise UsageError(f"{side!r}: not a side of this A/B ({', '.join(self.sides)})")
        return arm.change

    def order(self, pair: int) -> tuple[str, ...]:
        """The order pair (round) ``pair`` runs its sides in: :func:`side_order`, or :func:`arm_order`."""
        return arm_order(pair, self.sides) if self.arms else side_order(pair)

    def name_of(self, pair: int, side: str) -> str:
        """``p01-base`` (:func:`run_name`), or ``r01-<arm>`` in an A/B with arms (:func:`arm_run_name`)."""
        return arm_run_name(pair, side) if self.arms else run_name(pair, side)

    def side_scenario(self, side: str):
        """The validated scenario of one side: the file's keys, ``--set`` overrides, then the change."""
        overrides = dict(self.scenario_overrides)
        change = self.change_of(side)
        if change is not None:
            overrides.update(change.overrides)
        scenario = build_scenario(
            self.scenario_user, where=f"{self.scenario_file or 'scenario'} ({side})", overrides=overrides
        )
        scenario.source_path = self.scenario_file
        resolve_paths(scenario)
        if self.arms:
            scenario.raw["ab"] = {
                "side": side,
                "change": change.name if change else BASE,
                "overrides": change.overrides if change else {},
            }
        else:
            scenario.raw["ab"] = {"side": side, "change": self.change.name, "overrides": self.change.overrides}
        return scenario

    @classmethod
    def check(cls, scenario, change: Change | None, *, arms: list[Arm] | None = None) -> AB:
        """Validate both sides (every arm's and the base, with ``arms``) as ``run --check`` does (nothing built,
        nothing created); an unsaved A/B."""
        if scenario.matrix:
            raise UsageError("an A/B takes a scenario without a [matrix]: the change is its one axis")
        if arms:
            check_arms(arms)
            change = Change({}, ", ".join(a.name for a in arms))
        elif change is None or not change.overrides:
            raise UsageError("an A/B needs a change: --patch, --build-tag, --feature-gate or --apiserver-flag")
        ab = cls(
            Path("."),
            dict(scenario.user),
            dict(scenario.overrides),
            scenario.source_path,
            change,
            arms=list(arms or []),
        )
        check_cells(scenario, [(Cell(side, {}), ab.side_scenario(side)) for side in ab.sides])
        return ab

    def describe(self) -> str:
        """What the A/B changes, in one line."""
        if not self.arms:
            return self.change.describe()
        return "; ".join(f"{a.name}: {a.change.describe()}" for a in self.arms)

    @classmethod
    def create(
        cls,
        parent: str | Path,
        scenario,
        change: Change | None,
        *,
        checked: AB | None = None,
        arms: list[Arm] | None = None,
    ) -> AB:
        """A new A/B directory under ``parent``. Both sides (every arm) are validated (``run --check``) before it
        exists (``checked``: the unsaved A/B :meth:`check` returned, when the caller validated them already)."""
        ab = checked or cls.check(scenario, change, arms=arms)
        base = Path(parent) / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-ab-{scenario.name}"
        path, n = base, 1
        while path.exists():
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        path.mkdir(parents=True)
        ab.path = path
        ab.manifest = ab.new_manifest(scenario.name)
        ab.save()
        return ab

    def new_manifest(self, name: str) -> dict:
        """The ``ab.json`` of a new A/B of the scenario ``name``, before its runs are recorded."""
        return {
            "kind": "ab",
            "crdscale_version": __version__,
            "name": name,
            "status": "running",
            "scenario_file": self.scenario_file,
            "scenario": self.scenario_user,
            "overrides": self.scenario_overrides,
            "change": {"name": self.change.name, "overrides": self.change.overrides},
            **({"arms": [a.to_json() for a in self.arms]} if self.arms else {}),
            "runs": [],
        }

    @classmethod
    def open(cls, path: str | Path) -> AB:
        path = Path(path)
        try:
            manifest = json.loads((path / AB_MANIFEST).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise UsageError(f"{path}: not an A/B directory ({AB_MANIFEST}: {err})") from None
        if manifest.get("kind") != "ab" or not isinstance(manifest.get("change"), dict):
            raise UsageError(f"{path}/{AB_MANIFEST}: not written by crdscale ab")
        change = Change(dict(manifest["change"].get("overrides") or {}), str(manifest["change"].get("name", "change")))
        runs = [
            ABRun(int(r["pair"]), str(r["side"]), r.get("run_dir"), r.get("status", "pending"), r.get("seconds"))
            for r in manifest.get("runs", [])
        ]
        try:
            arms = [
                Arm(str(a["name"]), Change(dict(a.get("overrides") or {}), str(a.get("title") or a["name"])))
                for a in manifest.get("arms") or []
            ]
        except (KeyError, TypeError, AttributeError):
            raise UsageError(f"{path}/{AB_MANIFEST}: its arms are not as crdscale ab writes them") from None
        return cls(
            path, manifest["scenario"], manifest.get("overrides") or {}, manifest.get("scenario_file"), change,
            runs, manifest, arms,
        )  # fmt: skip

    def save(self) -> None:
        self.manifest["runs"] = [r.__dict__ for r in self.runs]
        write_json_atomic(self.path / AB_MANIFEST, self.manifest)

    def completed(self) -> list[ABRun]:
        return [r for r in self.runs if r.status == "completed" and r.run_dir]

    def paired(self) -> set[int]:
        """The pairs (rounds) whose every side completed."""
        done = {(r.pair, r.side) for r in self.completed()}
        return {p for p in {r.pair for r in self.runs} if all((p, s) in done for s in self.sides)}

    def complete_pairs(self) -> int:
        return len(self.paired())

    def comparison(self):
        """Base against changed, repeats pooled: a :class:`~crdscale.analysis.compare.Comparison`. With arms,
        the base against every arm, each run completed (in a complete round or not), labelled
        ``<arm>,repeat=<round>`` (the arm's name alone when no configuration ran twice), the intervals from the
        spread pooled over every configuration (:mod:`crdscale.analysis.pooled`)."""
        if self.arms:
            return self._arms_comparison()
        done = self.paired()
        runs = sorted((r for r in self.completed() if r.pair in done), key=lambda r: (r.side != "base", r.pair))
        if len(runs) < 2:
            raise UsageError(f"{self.path}: no complete base/changed pair yet")
        return compare_runs([self.path / r.run_dir for r in runs], [r.label for r in runs])

    def _arms_comparison(self):
        order = {side: i for i, side in enumerate(self.sides)}
        runs = sorted((r for r in self.completed() if r.side in order), key=lambda r: (order[r.side], r.pair))
        if not any(r.side == BASE for r in runs) or len({r.side for r in runs}) < 2:
            raise UsageError(f"{self.path}: no completed base run and arm run yet")
        repeated = len(runs) > len({r.side for r in runs})
        labels = [f"{r.side},repeat={r.pair}" if repeated else r.side for r in runs]
        return compare_runs([self.path / r.run_dir for r in runs], labels, spread="pooled")

    def arm_runs(self, side: str) -> int:
        """How many runs of ``side`` completed."""
        return sum(1 for r in self.completed() if r.side == side)

    def run(
        self,
        run_cell: Callable[[Any, Path, str], Path],
        *,
        until: float | None,
        min_pairs: int = 2,
        max_pairs: int = 6,
    ) -> Precision | None:
        """Run pairs (each side by ``run_cell(scenario, directory, name)``): ``min_pairs`` without ``until``;
        with it, from ``min_pairs`` on until the total's half-width is within ``until``, at most ``max_pairs``.
        With arms, rounds (:func:`arm_order`) alike, until every arm's half-width is (the widest one returned)."""
        sides = {side: self.side_scenario(side) for side in self.sides}
        last = max_pairs if until is not None else min_pairs
        reached: Precision | None = None
        for pair in range(1, last + 1):
            for side in self.order(pair):
                self._run_side(pair, side, sides[side], run_cell, last)
            if pair < min_pairs or (self.arms and until is None):
                continue  # arms: every run compared after a round only when it decides something
            reached = self.widest() if self.arms else precision(self.comparison())
            if reached is None:
                continue
            log.info(reached.line())
            if until is None:
                continue
            if reached.relative <= until:
                break
            seconds = [r.seconds for r in self.completed() if r.seconds]
            more = reached.pairs_needed(until) - reached.pairs
            eta = len(self.sides) * more * sum(seconds) / len(seconds) if seconds else None
            log.info(
                f"{more} more pair(s) would bring it within ±{100 * until:g}%"
                + (f" (about {fmt_duration(eta)})" if eta else "")
            )
        self.manifest["status"] = "completed"
        self.save()
        return reached

    def precisions(self, comparison=None) -> dict[str, Precision | None]:
        """Each arm's :class:`Precision` (its difference to the base and that interval)."""
        comparison = self.comparison() if comparison is None else comparison
        return {a.name: precision(comparison, a.name) for a in self.arms}

    def widest(self, comparison=None) -> Precision | None:
        """The arm whose interval is widest relative to the base (what ``--until`` waits for); None while an
        arm has no interval."""
        found = self.precisions(comparison)
        if not found or any(p is None for p in found.values()):
            return None
        return max(found.values(), key=lambda p: p.relative)

    def plan(self, pairs: int) -> list[ABRun]:
        """The runs of pairs 1 to ``pairs`` in the order they run (:func:`side_order`), recorded when new;
        those not completed yet are what a cluster's Job runs, one index each, in this order."""
        out = []
        for pair in range(1, pairs + 1):
            for side in side_order(pair):
                state = next((r for r in self.runs if r.pair == pair and r.side == side), None)
                if state is None:
                    state = ABRun(pair, side)
                    self.runs.append(state)
                out.append(state)
        return out

    # --- on a cluster (crdscale ab --cluster): the runs as one Indexed Job, as a matrix's cells ---

    def check_for_pods(self) -> None:
        """UsageError (one line) when a pod of ``crdscale ab --cluster`` cannot run a side as this machine
        would (:func:`crdscale.scenario.clusterjob.check_cells_for_pods`), or when the change needs a
        kube-apiserver built with it: the crdscale image carries released builds only."""
        if self.arms:
            raise UsageError("--cluster: an A/B with arms runs here only (its rounds are not planned as a Job)")
        self.change.check_for_pods()
        check_cells_for_pods([(Cell(side, {}), self.side_scenario(side)) for side in SIDES])

    def gather(self, results_url: str | None = None) -> list[str]:
        """Copy each run's newest run directory from the results store of a cluster A/B into the A/B
        directory and record it (completed or failed, as its run manifest says); returns the runs gathered.
        As :func:`crdscale.scenario.clusterjob.gather` does for a matrix's cells."""
        table = self.manifest[CLUSTER_KEY]
        store = open_store(results_url or table["results"])
        gathered = []
        for state in self.runs:
            runs = store.list_prefixes(cell_prefix(table["experiment_id"], state.name))
            if not runs:
                continue
            for name in runs:
                if not (self.path / name).is_dir():
                    store.get_tree(cell_prefix(table["experiment_id"], state.name, name), self.path / name)
            newest = runs[-1]  # run directory names start with their UTC start time
            try:
                status = read_run(self.path / newest).status
            except UsageError:
                status = "failed"
            state.run_dir, state.status = newest, "completed" if status == "completed" else "failed"
            gathered.append(state.name)
        if self.runs and all(r.status == "completed" for r in self.runs):
            self.manifest["status"] = "completed"
        self.save()
        return gathered

    def run_one(self, name: str, run_cell: Callable[[Any, Path, str], Path]) -> ABRun:
        """Run the one side ``name`` names (``p02-changed``): what a pod of ``crdscale ab --cluster`` runs."""
        pair, side = parse_run_name(name)
        if not any(r.pair == pair and r.side == side for r in self.runs):
            raise UsageError(f"{name}: not a run of this A/B")
        self._run_side(pair, side, self.side_scenario(side), run_cell, max(r.pair for r in self.runs))
        return next(r for r in self.runs if r.pair == pair and r.side == side)

    def _run_side(self, pair: int, side: str, scenario, run_cell, last: int) -> None:
        state = next((r for r in self.runs if r.pair == pair and r.side == side), None)
        if state is None:
            state = ABRun(pair, side)
            self.runs.append(state)
        if state.status == "completed":
            return
        if self.arms:
            log.info(f"round {pair}/{last}: {side}" + (f" ({self.change_of(side).name})" if side != BASE else ""))
        else:
            log.info(f"pair {pair}/{last}: {side}" + (" (with the change)" if side == "changed" else ""))
        before = {p.name for p in self.path.iterdir()}
        state.status = "running"
        self.save()
        started = time.monotonic()
        try:
            run_dir = Path(run_cell(scenario, self.path, self.name_of(pair, side)))
        except CrdscaleError as err:
            created = sorted(p.name for p in self.path.iterdir() if p.name not in before and p.is_dir())
            state.run_dir = created[-1] if created else None
            state.status = "interrupted" if err.exit_code == 130 else "failed"
            self.manifest["status"] = state.status
            self.save()
            raise
        state.seconds = round(time.monotonic() - started, 1)
        state.run_dir = run_dir.name
        state.status = "completed"
        self.save()
