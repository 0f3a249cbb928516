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

On your cluster: --cluster submits the pairs' runs as one Kubernetes Indexed Job,
as 'run --cluster' submits a matrix's cells (the same flags: --image, --results,
--parallelism, ...), one index per run in pair order (p01-base, p01-changed,
p02-changed, p02-base, ...), so with --parallelism 1 they run interleaved as here,
and with --parallelism 2 a pair's two sides run at the same time. Each pod starts
its own control plane and leaves its run directory in the results store; when
the Job is done they are gathered into the A/B directory and the verdict written.
--min-pairs pairs are submitted; with --until the output says how many more pairs
the asked precision needs, and 'crdscale ab --resume AB_DIR --min-pairs N'
submits the missing ones. After --detach (or Ctrl-C, which leaves the Job
running), 'crdscale status AB_DIR' follows it, 'crdscale down AB_DIR' stops it and
'crdscale ab --resume AB_DIR' gathers the runs and writes the verdict. A change
that needs a build (--patch, --build-tag) runs here only: the image carries
released builds.

Several changes at once, each an ARM against one shared base: --each makes every
--patch, --build-tag, --feature-gate and --apiserver-flag given its own arm (named
after the gate, the tag, the diff's file or the flag), and --arm 'NAME: FLAGS'
(repeatable) makes an arm of several changes. Rounds then run the base and every
arm once each, odd rounds in an order rotated by one more each time, even rounds
the previous round backwards (a linear drift adds the same to every arm over two
rounds); --min-pairs and --max-pairs count rounds. 7 arms of 3 rounds are 24 runs,
where 7 A/Bs of 3 pairs are 42. Each arm's difference to the base gets its 95%
interval from the spread pooled over every configuration's repeats (the model:
each configuration its own mean, one common spread; 8 configurations of 3 runs
give t with 16 degrees of freedom, where one arm and the base alone give about
4). A configuration whose repeats spread out of line with the others' (an F test
at 1%) keeps its own spread (Welch-Satterthwaite). With one round nothing is
pooled: each run keeps its fit's interval. It ends with verdict.md (one row per
arm: heap per CRD and per custom resource, LIST cost, peak RSS, each with its
interval), verdict.json (every arm) and verdict-ARM.md (each arm's own verdict,
as for one change). Arms run here only (not with --cluster). With --until, rounds
continue until every arm's interval is that tight.

Examples:
  crdscale ab scenarios/reference.toml --patch 142066.diff --until 10%
  crdscale ab scenarios/objects.toml --build-tag fieldsv1string --min-pairs 3
  crdscale ab scenarios/reference.toml --feature-gate CBORServingAndStorage=true
  crdscale ab --resume runs/20261127T170000Z-ab-reference
  crdscale ab scenarios/gates.toml --each --min-pairs 3 \
      --feature-gate ShardedListAndWatch=true --feature-gate ListFromCacheSnapshot=false
  crdscale ab scenarios/objects.toml --arm 'budget: --patch 142066.diff --apiserver-flag=--watch-cache-max-bytes-per-resource=100Mi' \
      --arm 'pr: --patch 142066.diff'
  crdscale ab scenarios/reference.toml --feature-gate CBORServingAndStorage=true --cluster \
      --image registry.example/crdscale:0.1.0 --results s3://bucket/crdscale --min-pairs 3
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
from pathlib import Path

from crdscale.cli import cluster
from crdscale.cli.cluster import follow_job
from crdscale.cli.common import add_cluster_arguments, add_output_argument, add_set_argument
from crdscale.errors import CrdscaleError, UsageError

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
    change = _change(args)
    if change is None:
        raise UsageError("ab needs a change: --patch, --build-tag, --feature-gate or --apiserver-flag")
    return change


def _change(args):
    """The change of ``args``' --patch, --build-tag, --feature-gate and --apiserver-flag; None without any."""
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
        return None
    return Change(overrides, ", ".join(names))


def _has_change(args) -> bool:
    return bool(args.patch or args.build_tag or args.feature_gate or args.apiserver_flag)


def _slug(text: str) -> str:
    """An arm's name made of ``text``: what an arm's name may hold (scenario.ab.ARM_NAME), at most 40."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:40] or "arm"


def _each(args) -> list:
    """--each: every change given its own arm, named after the gate, the tag, the diff's file or the flag."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.ab import Arm

    arms = []
    for dest, option, name in (
        ("patch", "patch", lambda v: Path(v).stem),
        ("build_tag", "build_tag", lambda v: v),
        ("feature_gate", "feature_gate", lambda v: v.partition("=")[0]),
        ("apiserver_flag", "apiserver_flag", lambda v: v.lstrip("-").partition("=")[0]),
    ):
        for value in getattr(args, dest):
            one = argparse.Namespace(patch=[], build_tag=[], feature_gate=[], apiserver_flag=[])
            setattr(one, option, [value])
            base, n = _slug(name(value)), 1
            taken = {a.name for a in arms}
            while (arm_name := base if n == 1 else f"{base}-{n}") in taken:
                n += 1
            arms.append(Arm(arm_name, _change(one)))
    return arms


def _arm_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="--arm", add_help=False, exit_on_error=False)
    for flag in ("--patch", "--build-tag", "--feature-gate", "--apiserver-flag"):
        parser.add_argument(flag, action="append", default=[])
    return parser


def parse_arm(text: str):
    """--arm 'NAME: --feature-gate X=true --apiserver-flag=--y=1': an :class:`~crdscale.scenario.ab.Arm`
    (its name, when not given, that of its one change as --each names it)."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.ab import Arm

    name, sep, rest = text.partition(":")
    if not sep or name.strip().startswith("-") or " " in name.strip():
        name, rest = "", text
    try:
        words = shlex.split(rest)
        args, unknown = _arm_parser().parse_known_args(words)
    except (ValueError, argparse.ArgumentError) as err:
        raise UsageError(f"--arm {text!r}: {err}") from None
    if unknown:
        raise UsageError(
            f"--arm {text!r}: {unknown[0]!r} is not --patch, --build-tag, --feature-gate or --apiserver-flag"
        )
    change = _change(args)
    if change is None:
        raise UsageError(
            f"--arm {text!r}: no change (NAME: --patch FILE, --build-tag TAG, --feature-gate G=BOOL, --apiserver-flag=FLAG)"
        )
    if not name.strip():
        named = _each(args)
        if len(named) != 1:
            raise UsageError(f"--arm {text!r}: an arm of several changes needs a name ('NAME: ...')")
        return named[0]
    return Arm(name.strip(), change)


def arms_from_args(args) -> list:
    """The arms --each and --arm ask for (empty for an A/B of one change)."""
    if args.arm and _has_change(args) and not args.each:
        raise UsageError("--arm: put every change in an --arm, or add --each to make each of the others an arm too")
    arms = (_each(args) if args.each else []) + [parse_arm(text) for text in args.arm]
    if args.each and not arms:
        raise UsageError(
            "--each: give the changes, each its own arm (--feature-gate, --apiserver-flag, --build-tag, --patch)"
        )
    return arms


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
        parser.add_argument(
            "--each", action="store_true", help="every change given is its own arm against one shared base"
        )
        parser.add_argument(
            "--arm",
            action="append",
            default=[],
            metavar="'NAME: FLAGS'",
            help="an arm of one or more changes, e.g. 'lfcs: --feature-gate ListFromCacheSnapshot=false' (repeatable)",
        )
        add_set_argument(parser)
        parser.add_argument("--until", metavar="PRECISION", help="pairs until the total's 95%% interval is this tight")
        parser.add_argument(
            "--min-pairs", type=int, default=2, metavar="N", help="pairs (rounds, with arms) before judging (default 2)"
        )
        parser.add_argument("--max-pairs", type=int, default=6, metavar="N", help="with --until: at most (default 6)")
        parser.add_argument("--out", metavar="DIR", help="parent of the A/B directory (default: runs/)")
        parser.add_argument("--resume", metavar="AB_DIR", help="continue an interrupted A/B")
        parser.add_argument("--check", action="store_true", help="validate both sides and exit; nothing is built")
        add_output_argument(parser, human="text")

        add_cluster_arguments(parser, default="$KUBECONFIG, else ~/.kube/config; only with --cluster")
        cluster.add_arguments(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help; tests patch common.run_with_progress
        from crdscale.cli.common import run_with_progress
        from crdscale.cli.run import _parse_sets
        from crdscale.paths import runs_dir
        from crdscale.scenario.ab import AB
        from crdscale.scenario.config import load_scenario

        until = parse_until(args.until) if args.until else None
        if not 1 <= args.min_pairs <= 50 or not args.min_pairs <= args.max_pairs <= 50:
            raise UsageError("--min-pairs and --max-pairs: 1 <= min <= max <= 50")
        cluster.check_flags(args)
        if (args.kubeconfig or args.context) and not (args.cluster or args.resume):
            raise UsageError("--kubeconfig and --context go with --cluster: an A/B here starts its own control planes")
        if args.resume:
            if args.scenario or args.set or _has_change(args) or args.each or args.arm:
                raise UsageError("--resume takes the scenario and the change from the A/B directory")
            ab = AB.open(args.resume)
            if is_cluster_ab(ab):
                return resume_on_cluster(args, ab, until)
            if args.cluster or cluster.cluster_flags_given(args):
                flag = "--cluster" if args.cluster else cluster.cluster_flags_given(args)[0]
                raise UsageError(f"{flag}: {args.resume} ran on this machine; resume it here (without {flag})")
        else:
            arms = arms_from_args(args)
            if arms:
                return run_arms(args, arms, until)
            change = change_from_args(args)
            if args.cluster:
                change.check_for_pods()  # before the diff is read: a pod could not build it anyway
                cluster.check_submission(args, resume=False)
            scenario = load_scenario(args.scenario, overrides=_parse_sets(args.set))
            if args.cluster:
                return submit_to_cluster(args, scenario, change, until)
            if args.check:
                AB.check(scenario, change)
                print(f"ok: base and changed ({change.describe()}) can run")
                return 0
            ab = AB.create(args.out or runs_dir(), scenario, change)
        log.info(f"A/B {ab.path}: {ab.describe()}")
        ab.run(run_with_progress, until=until, min_pairs=args.min_pairs, max_pairs=args.max_pairs)
        return finish(ab, args, until)


def run_arms(args: argparse.Namespace, arms: list, until: float | None) -> int:
    """``crdscale ab SCENARIO --each ...`` / ``--arm ...``: every arm checked, then rounds, then the verdicts."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help; tests patch common.run_with_progress
    from crdscale.cli.common import run_with_progress
    from crdscale.cli.run import _parse_sets
    from crdscale.paths import runs_dir
    from crdscale.scenario.ab import AB
    from crdscale.scenario.config import load_scenario

    if args.cluster:
        raise UsageError("--cluster: an A/B with arms runs here only; give each change its own 'crdscale ab --cluster'")
    scenario = load_scenario(args.scenario, overrides=_parse_sets(args.set))
    checked = AB.check(scenario, None, arms=arms)
    if args.check:
        print(f"ok: base and {len(arms)} arm(s) can run: {checked.describe()}")
        return 0
    ab = AB.create(args.out or runs_dir(), scenario, None, checked=checked)
    log.info(f"A/B {ab.path}: base and {len(arms)} arm(s): {ab.describe()}")
    ab.run(run_with_progress, until=until, min_pairs=args.min_pairs, max_pairs=args.max_pairs)
    return finish(ab, args, until)


def finish(ab, args: argparse.Namespace, until: float | None) -> int:
    """Write and print the verdict; with ``until``, say how many pairs the asked precision would need."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.ab import precision

    if ab.arms:
        return finish_arms(ab, args, until)
    verdict = write_verdict(ab)
    if args.output == "json":
        print(json.dumps(verdict.to_json(), indent=2, default=str))
    else:
        print(verdict.markdown(), end="")
        print(ab.path / "verdict.md")
    reached = precision(ab.comparison())
    if until is not None and reached is not None and reached.relative > until:
        more = "--min-pairs" if is_cluster_ab(ab) else "--max-pairs"
        log.warning(
            f"not within ±{100 * until:g}% after {reached.pairs} pairs "
            f"(±{100 * reached.relative:.1f}%); about {reached.pairs_needed(until)} pairs would be: "
            f"crdscale ab --resume {ab.path} --until {args.until} {more} {reached.pairs_needed(until)}"
        )
    return 0


def finish_arms(ab, args: argparse.Namespace, until: float | None) -> int:
    """Write verdict.md, verdict.json and each arm's verdict-ARM.md and print the first (or the JSON); with
    ``until``, say how many rounds the widest arm's interval would need."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.report.ab import write_arms_verdict_files

    verdict = write_arms_verdict_files(ab)
    if args.output == "json":
        print(json.dumps(verdict.to_json(), indent=2, default=str))
    else:
        print(verdict.markdown(), end="")
        print(ab.path / "verdict.md")
    reached = verdict.widest
    if until is not None and reached is not None and reached.relative > until:
        log.warning(
            f"{reached.arm} not within ±{100 * until:g}% after {reached.pairs} rounds "
            f"(±{100 * reached.relative:.1f}%); about {reached.pairs_needed(until)} rounds would be: "
            f"crdscale ab --resume {ab.path} --until {args.until} --max-pairs {reached.pairs_needed(until)}"
        )
    return 0


# --------------------------------------------------------------------------
# On a cluster: the runs as one Indexed Job (crdscale.cli.cluster does the same for a matrix)
# --------------------------------------------------------------------------


def is_cluster_ab(ab) -> bool:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.clusterjob import CLUSTER_KEY

    return isinstance(ab.manifest.get(CLUSTER_KEY), dict)


def submit_to_cluster(args: argparse.Namespace, scenario, change, until: float | None) -> int:
    """``crdscale ab SCENARIO --cluster ...``: both sides checked as for a pod, ``--min-pairs`` pairs' runs
    as one Indexed Job (index = run, in pair order), then followed, gathered and judged."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.cluster.clients import connect
    from crdscale.ownership import new_run_id
    from crdscale.paths import runs_dir
    from crdscale.scenario import clusterjob, fanout
    from crdscale.scenario.ab import AB

    ab = AB.check(scenario, change)
    ab.check_for_pods()
    if args.check:
        print(f"ok: base and changed ({change.describe()}) can run in pods")
        return 0
    runs = [r.name for r in ab.plan(args.min_pairs)]
    run_id = new_run_id()
    experiment_id = fanout.experiment_id(f"ab-{scenario.name}", run_id)
    peaks = _peaks(ab, runs)
    resources = cluster._resources(args, peaks, args.cpus or cluster.DEFAULT_CPUS)
    manifest = ab.new_manifest(scenario.name)
    manifest["runs"] = [r.__dict__ for r in ab.runs]
    plan = cluster._plan(experiment_id, run_id, manifest, runs, resources, args)
    if args.print_manifests:
        manifest[clusterjob.CLUSTER_KEY] = cluster._cluster_table(plan, args, None, peaks)
        cluster.print_manifests(plan, "ab")
        return 0
    client = connect(cluster._user_kubeconfig(args.kubeconfig), args.context)
    try:
        client.server_version()
        table = cluster._cluster_table(plan, args, client, peaks)
        plan.create_namespace = not clusterjob.namespace_exists(client, plan.namespace)
        if plan.results_secret:
            clusterjob.check_secret(client, plan.namespace, plan.results_secret)
        if not plan.create_namespace:
            clusterjob.create(client, plan, dry_run=True)  # the server validates every object first
        ab = AB.create(args.out or runs_dir(), scenario, change, checked=ab)
        ab.manifest[clusterjob.CLUSTER_KEY] = table
        ab.save()
        plan.experiment = dict(ab.manifest)
        cluster._create(client, ab, plan)
        log.info(
            f"A/B {ab.path}: job {plan.namespace}/{plan.job_name}, {len(runs)} runs ({args.min_pairs} pairs), "
            f"parallelism {plan.parallelism}, each pod {resources.cpus:g} CPUs and "
            f"{resources.memory_bytes / 2**30:.2f} GiB"
        )
        return _follow(client, ab, args, until)
    finally:
        client.close()


def resume_on_cluster(args: argparse.Namespace, ab, until: float | None) -> int:
    """``crdscale ab --resume AB_DIR`` of a cluster A/B: gather what the store holds; a new Job for the runs
    of ``--min-pairs`` pairs (at least those planned) that did not complete; the verdict once all did."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.ownership import new_run_id
    from crdscale.scenario import clusterjob

    cluster.check_submission(args, resume=True)
    table = ab.manifest[clusterjob.CLUSTER_KEY]
    client = clusterjob.connect_experiment(ab, args.kubeconfig, args.context)
    try:
        active = clusterjob.active_jobs(client, ab)
        if active:
            raise UsageError(
                f"job {active[0]} of this A/B is still running; wait for it (crdscale status {ab.path}) "
                f"or stop it (crdscale down {ab.path})"
            )
        gathered = ab.gather(args.results)
        log.info(f"gathered {len(gathered)} of {len(ab.runs)} runs from the results store")
        pairs = max([args.min_pairs, *(r.pair for r in ab.runs)])
        missing = [r.name for r in ab.plan(pairs) if r.status != "completed"]
        ab.save()
        if not missing:
            return finish(ab, args, until)
        ab.check_for_pods()
        peaks = _peaks(ab, missing)
        resources = cluster._resources(args, peaks, args.cpus or table.get("cpus") or cluster.DEFAULT_CPUS)
        attempt = len(table.get("jobs", []))
        plan = cluster._plan(
            table["experiment_id"], new_run_id(), dict(ab.manifest), missing, resources, args, attempt=attempt,
            table=table,
        )  # fmt: skip
        if args.print_manifests:
            cluster.print_manifests(plan, "ab")
            return 0
        table.update(image=plan.image, results=plan.results, results_secret=plan.results_secret)
        if plan.results_secret:
            clusterjob.check_secret(client, plan.namespace, plan.results_secret)
        clusterjob.create(client, plan, dry_run=True)
        cluster._create(client, ab, plan)
        log.info(f"A/B {ab.path.name}: job {plan.job_name} runs {len(missing)} runs: {', '.join(missing)}")
        return _follow(client, ab, args, until)
    finally:
        client.close()


def _peaks(ab, runs: list[str]) -> dict:
    """Predicted peak memory of each run's pod (:func:`crdscale.scenario.clusterjob.cell_peaks`)."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario import clusterjob
    from crdscale.scenario.ab import parse_run_name
    from crdscale.scenario.matrix import Cell

    sides = {side: ab.side_scenario(side) for side in ("base", "changed")}
    return clusterjob.cell_peaks([(Cell(name, {}), sides[parse_run_name(name)[1]]) for name in runs])


def _follow(client, ab, args: argparse.Namespace, until: float | None) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario import clusterjob

    when_done = f"when done, gather the runs and write the verdict with: crdscale ab --resume {ab.path}"
    states = follow_job(client, ab, args, when_done)
    if states is None:
        return 0
    failed = [c for c, st in clusterjob.cell_states(states).items() if st.state != clusterjob.SUCCEEDED]
    ab.gather(args.results)
    if failed:
        raise CrdscaleError(
            f"{len(failed)} run(s) failed ({', '.join(failed[:3])}{', ...' if len(failed) > 3 else ''}); "
            f"their last log lines: crdscale status {ab.path}; rerun them: crdscale ab --resume {ab.path}"
        )
    return finish(ab, args, until)


def write_verdict(ab):
    """verdict.md, verdict.json and flame.html of an A/B directory; returns the verdict."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.report.ab import write_verdict_files

    return write_verdict_files(ab)
