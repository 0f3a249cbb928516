"""Generate a synthetic CRD set (a superset of terrajet-scale's `apigen generate`).

Examples:
  crdscale generate -g 50 -c 500 --property-count 100 -o crds/
  crdscale generate --preset provider -g 10 -c 200 -o provider-crds/
  crdscale generate -g 2 -c 4 -o - > stream.yaml

Same parameters and seed give the same CRDs. Prints a summary of the set, and a
progress bar on stderr for large sets. Sets crdscale could not install are refused
before they are generated: a CRD over etcd's 1.5 MiB request limit, a set over the
local etcd's 8 GiB quota, or one needing more memory than the machine has available.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crdscale.cli.options import any_int, nonnegative_int
from crdscale.crds.generate import (
    FORMATS,
    PRESETS,
    SCOPES,
    SHAPES,
    check_crd_size,
    check_output,
    dump_yaml,
    estimate_set,
    iter_crds,
    parse_type_weights,
    preset,
    write_crds,
)
from crdscale.crds.summary import summarize
from crdscale.errors import UsageError
from crdscale.outputs import check_not_in_run, is_nonempty_directory, relocate, replacing_directory
from crdscale.proc import available_memory_bytes


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-g",
            "--gv-count",
            "--groups",
            dest="groups",
            type=nonnegative_int,
            required=True,
            help="number of API groups; CRDs are spread over them round-robin",
        )
        parser.add_argument(
            "-c", "--crd-count", "--crds", dest="crds", type=nonnegative_int, required=True, help="number of CRDs"
        )
        parser.add_argument(
            "--property-count",
            type=nonnegative_int,
            default=None,
            help="properties per CRD schema, nested ones included; 0 = random 1..100 per CRD (apigen)",
        )
        parser.add_argument(
            "--preset",
            choices=sorted(PRESETS),
            default="apigen",
            help="starting point for the options below (default: apigen)",
        )
        parser.add_argument("--versions", type=nonnegative_int, help="versions per CRD, each repeating the schema")
        parser.add_argument(
            "--depth", type=nonnegative_int, dest="max_depth", help="maximum nesting levels of properties"
        )
        parser.add_argument("--type-mix", help="property type weights, e.g. string=5,object=2,array=1,integer")
        parser.add_argument("--description-length", type=nonnegative_int, help="characters of description per property")
        parser.add_argument("--scope", choices=SCOPES, help="CRD scope; mixed alternates")
        parser.add_argument("--printer-columns", type=nonnegative_int, help="additional printer columns per version")
        parser.add_argument("--categories", help="comma-separated spec.names.categories")
        parser.add_argument(
            "--shape", choices=SHAPES, help="flat (apigen) or provider (spec.forProvider/status.atProvider)"
        )
        parser.add_argument(
            "--cel-rules",
            type=nonnegative_int,
            help="upjet-shaped CEL rules on each version's spec, one per top-level parameter up to this many "
            "(provider shape; real providers of 2026 carry ~2 per CRD)",
        )
        parser.add_argument("--group-suffix", help="DNS suffix of generated groups")
        parser.add_argument("--seed", type=any_int, default=0, help="random seed (default 0)")
        parser.add_argument(
            "-o",
            "--output",
            help="directory for one file per CRD, a file with --single-file, or - for a YAML stream on stdout; "
            "omitted: print the summary only",
        )
        parser.add_argument("--single-file", action="store_true", help="write one multi-document YAML stream")
        parser.add_argument("--format", choices=FORMATS, default="yaml", help="file format per CRD (default yaml)")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        overrides = {"crd_count": args.crds, "group_count": args.groups, "seed": args.seed}
        for name in (
            "property_count",
            "versions",
            "max_depth",
            "description_length",
            "scope",
            "printer_columns",
            "shape",
            "group_suffix",
            "cel_rules",
        ):
            value = getattr(args, name)
            if value is not None:
                overrides[name] = value
        if args.type_mix:
            overrides["type_weights"] = parse_type_weights(args.type_mix)
        if args.categories is not None:
            overrides["categories"] = tuple(c.strip() for c in args.categories.split(",") if c.strip())
        params = preset(args.preset, **overrides)
        if args.output and args.output != "-":
            check_output(args.output, single_file=args.single_file)  # before minutes of generating
            check_not_in_run(args.output, "-o")
            if not args.single_file and is_nonempty_directory(args.output):
                # Writing into it would leave the union of two sets, which footprint and install then count.
                raise UsageError(f"-o {args.output}: is not empty; choose a new or empty directory")
        # Refuse what could not be installed before generating it (limits named in the message).
        estimate = estimate_set(params, available_memory=available_memory_bytes())
        crds = []
        with _progress(params.crd_count, "generating") as bar:
            for crd in iter_crds(params):
                check_crd_size(crd)
                crds.append(crd)
                bar.update(1)

        report = sys.stdout
        if args.output == "-":
            report = sys.stderr
            for crd in crds:
                sys.stdout.write("---\n" + dump_yaml(crd))
            sys.stdout.flush()
        elif args.output:
            with _progress(len(crds), "writing") as bar:
                written = _write(_counted(crds, bar), args.output, single_file=args.single_file, fmt=args.format)
            where = args.output if args.single_file else f"{len(written)} files in {args.output}"
            print(f"wrote {where}", file=report)
        if params.crd_count >= PROGRESS_FROM:
            print(f"estimated before generating: {estimate.line()}", file=sys.stderr)
        print(summarize(crds).render(), file=report)
        return 0


# Sets this large take over a second to generate or write: show a bar (on stderr, like every
# progress bar of crdscale's CLI; the library stays quiet).
PROGRESS_FROM = 2000


def _progress(total: int, what: str):
    # lazy: would bring tqdm into --help
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=what,
        unit="CRD",
        file=sys.stderr,
        disable=total < PROGRESS_FROM,
        mininterval=1.0,
        leave=False,
        dynamic_ncols=True,
    )


def _write(crds, output: str, *, single_file: bool, fmt: str) -> list:
    """write_crds, a directory into a sibling renamed into place under a lock: a concurrent generate
    into the same directory is refused instead of leaving a mixture of two sets."""
    if single_file:
        return write_crds(crds, output, single_file=True, fmt=fmt)
    with replacing_directory(output, "-o") as staging:
        written = write_crds(crds, staging, fmt=fmt)
    return [relocate(path, staging, Path(output).absolute()) for path in written]


def _counted(crds, bar):
    for crd in crds:
        yield crd
        bar.update(1)
