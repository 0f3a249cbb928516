"""Evaluate a change to kube-apiserver: the scenario as released (A) and with the change (B), run in
interleaved pairs, ending in verdict.md to paste into the pull request.

A change is any of (repeatable, combined):
  --patch FILE            a unified diff as a forge serves <pull request>.diff, applied to the
                          released version's module sources (no kubernetes checkout needed)
  --build-tag TAG         a Go build tag, e.g. fieldsv1string (#137581)
  --feature-gate NAME=BOOL  a feature gate of that version, e.g. CBORServingAndStorage=true
  --apiserver-flag FLAG   a kube-apiserver flag, e.g. --watch-cache-sizes=widgets.example.com#0

Everything is validated as `crdscale run --check` validates a scenario, before anything is built: a
diff that does not apply, a gate the version does not define, a flag the binary does not know.

Pairs alternate which side runs first (A B, B A, ...), so drift on a shared machine hits both sides.
With --until 10% pairs continue (from --min-pairs, at most --max-pairs) until the 95% interval of
the per-CRD total difference is within 10% of A's per-CRD total; the output says how many pairs that
took, or how many more it would need. Without --until, --min-pairs pairs run.

It ends by writing, in the A/B directory: verdict.md (at most 60 lines: one sentence with the
per-CRD and per-custom-resource difference by cause and its 95% interval, a table by cause, peak and
settled RSS and CPU, the frames that grew or shrank most, provenance), verdict.json, and flame.html
(an interactive differential flame graph). verdict.md is printed.

Examples:
  crdscale ab scenarios/reference.toml --patch 142066.diff --until 10%
  crdscale ab scenarios/objects.toml --build-tag fieldsv1string --min-pairs 3
  crdscale ab scenarios/reference.toml --feature-gate CBORServingAndStorage=true
  crdscale ab --resume runs/20261127T170000Z-ab-reference
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from crdscale.errors import UsageError

log = logging.getLogger(__name__)


def parse_until(text: str) -> float:
    value = text.strip().rstrip("%")
    try:
        number = float(value) / (100 if text.strip().endswith("%") else 1)
    except ValueError:
        raise UsageError(f"--until {text!r}: a precision such as 10% or 0.1") from None
    if not (0 < number < 10):  # NaN fails too
        raise UsageError(f"--until {text!r}: must be between 0 and 1000%")
    return number


def change_from_args(args):
    """The :class:`~crdscale.scenario.ab.Change` the flags ask for."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.ab import Change

    overrides: dict = {}
    names = []
    if args.patch:
        overrides["target.patches"] = [str(Path(p).expanduser().resolve()) for p in args.patch]
        names += [Path(p).name for p in args.patch]
    if args.build_tag:
        overrides["target.build_tags"] = list(args.build_tag)
        names += [f"-tags {t}" for t in args.build_tag]
    if args.feature_gate:
        gates = {}
        for item in args.feature_gate:
            name, sep, value = item.partition("=")
            if not sep or value.lower() not in ("true", "false") or not name:
                raise UsageError(f"--feature-gate {item!r}: NAME=true or NAME=false")
            gates[name] = value.lower() == "true"
        overrides["target.feature_gates"] = gates
        names += [f"{k}={str(v).lower()}" for k, v in gates.items()]
    if args.apiserver_flag:
        overrides["target.apiserver_flags"] = list(args.apiserver_flag)
        names += list(args.apiserver_flag)
    if not overrides:
        raise UsageError("ab needs a change: --patch, --build-tag, --feature-gate or --apiserver-flag")
    return Change(overrides, ", ".join(names))


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("scenario", nargs="?", help="scenario file (default: the built-in default scenario)")
        parser.add_argument("--patch", action="append", default=[], metavar="FILE", help="a unified diff (repeatable)")
        parser.add_argument("--build-tag", action="append", default=[], metavar="TAG", help="a Go build tag")
        parser.add_argument(
            "--feature-gate", action="append", default=[], metavar="NAME=BOOL", help="a feature gate of that version"
        )
        parser.add_argument(
            "--apiserver-flag",
            action="append",
            default=[],
            metavar="FLAG",
            help="a kube-apiserver flag (repeatable), e.g. --apiserver-flag=--watch-cache-sizes=x.example.com#0",
        )
        parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="as in run")
        parser.add_argument("--until", metavar="PRECISION", help="pairs until the total's 95%% interval is this tight")
        parser.add_argument("--min-pairs", type=int, default=2, metavar="N", help="pairs before judging (default 2)")
        parser.add_argument("--max-pairs", type=int, default=6, metavar="N", help="with --until: at most (default 6)")
        parser.add_argument("--out", metavar="DIR", help="parent of the A/B directory (default: runs/)")
        parser.add_argument("--resume", metavar="AB_DIR", help="continue an interrupted A/B")
        parser.add_argument("--check", action="store_true", help="validate both sides and exit; nothing is built")
        parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="stdout format")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
        from crdscale.cli.common import run_with_progress
        from crdscale.cli.run import _parse_sets
        from crdscale.paths import runs_dir
        from crdscale.scenario.ab import AB
        from crdscale.scenario.config import load_scenario

        until = parse_until(args.until) if args.until else None
        if not 1 <= args.min_pairs <= 50 or not args.min_pairs <= args.max_pairs <= 50:
            raise UsageError("--min-pairs and --max-pairs: 1 <= min <= max <= 50")
        if args.resume:
            if args.scenario or args.set or args.patch or args.build_tag or args.feature_gate or args.apiserver_flag:
                raise UsageError("--resume takes the scenario and the change from the A/B directory")
            ab = AB.open(args.resume)
        else:
            change = change_from_args(args)
            scenario = load_scenario(args.scenario, overrides=_parse_sets(args.set))
            if args.check:
                AB.check(scenario, change)
                print(f"ok: base and changed ({change.describe()}) can run")
                return 0
            ab = AB.create(args.out or runs_dir(), scenario, change)
        log.info(f"A/B {ab.path}: {ab.change.describe()}")
        reached = ab.run(run_with_progress, until=until, min_pairs=args.min_pairs, max_pairs=args.max_pairs)
        verdict = write_verdict(ab)
        if args.output == "json":
            print(json.dumps(verdict.to_json(), indent=2, default=str))
        else:
            print(verdict.markdown(), end="")
            print(ab.path / "verdict.md")
        if until is not None and reached is not None and reached.relative > until:
            log.warning(
                f"not within ±{100 * until:g}% after {reached.pairs} pairs "
                f"(±{100 * reached.relative:.1f}%); about {reached.pairs_needed(until)} pairs would be: "
                f"crdscale ab --resume {ab.path} --until {args.until} --max-pairs {reached.pairs_needed(until)}"
            )
        return 0


def write_verdict(ab):
    """verdict.md, verdict.json and flame.html of an A/B directory; returns the verdict."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.fsutil import write_atomic
    from crdscale.report.verdict import build_verdict
    from crdscale.scenario.ab import precision

    comparison = ab.comparison()
    reached = precision(comparison)
    changes = {"change": ab.change.describe()}
    for record in _change_provenance(comparison):
        changes.update(record)
    verdict = build_verdict(
        comparison, change=ab.change.name, changes=changes, pairs=reached.pairs if reached else None
    )
    write_atomic(ab.path / "verdict.md", verdict.markdown())
    write_atomic(ab.path / "verdict.json", json.dumps(verdict.to_json(), indent=2, default=str) + "\n")
    try:
        _write_flame(ab, comparison)
    except (ImportError, ValueError) as err:  # plotly missing (report extra), or a run without two profiles
        log.warning(f"no flame.html: {err}")
    return verdict


def _change_provenance(comparison) -> list[dict]:
    """What the changed side's manifest records of its change (diffs with sha256 and files, tags, gates)."""
    label = comparison.first_run(comparison.compared[0])
    manifest = comparison.manifests.get(label) or {}
    change = (manifest.get("target") or {}).get("change") or manifest.get("change")
    if not isinstance(change, dict):
        return []
    return [
        {key: json.dumps(value, default=str) if not isinstance(value, str) else value}
        for key, value in change.items()
        if value not in ([], {}, "", None)  # what the change left alone says nothing
    ]


def _write_flame(ab, comparison) -> None:
    # lazy: would bring pandas, numpy, pyarrow into --help
    from crdscale.report.diffflame import (
        diff_icicle_figure,
        diff_icicle_nodes,
        run_growth_stacks,
        write_diff_flame_html,
    )
    from crdscale.rundir import read_run

    def pooled(side: str):
        stacks = [run_growth_stacks(read_run(ab.path / r.run_dir)) for r in ab.completed() if r.side == side]
        total = stacks[0]
        for more in stacks[1:]:
            total = total.add(more, fill_value=0)
        return total / len(stacks)

    nodes = diff_icicle_nodes(pooled("base"), pooled("changed"))
    title = f"{ab.change.name}: heap growth per CRD, changed minus base (mean of the pairs)"
    write_diff_flame_html(diff_icicle_figure(nodes, title=title), ab.path / "flame.html")
