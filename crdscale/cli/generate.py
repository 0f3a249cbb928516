"""Generate a synthetic CRD set (a superset of terrajet-scale's `apigen generate`).

Examples:
  crdscale generate -g 50 -c 500 --property-count 100 -o crds/
  crdscale generate --preset provider -g 10 -c 200 -o provider-crds/
  crdscale generate -g 2 -c 4 -o - > stream.yaml

Same parameters and seed give the same CRDs. Prints a summary of the set.
"""

from __future__ import annotations

import argparse
import sys

from crdscale.crds.generate import (
    FORMATS,
    PRESETS,
    SCOPES,
    SHAPES,
    dump_yaml,
    generate_crds,
    parse_type_weights,
    preset,
    write_crds,
)
from crdscale.crds.summary import summarize


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-g",
            "--gv-count",
            "--groups",
            dest="groups",
            type=int,
            required=True,
            help="number of API groups; CRDs are spread over them round-robin",
        )
        parser.add_argument("-c", "--crd-count", "--crds", dest="crds", type=int, required=True, help="number of CRDs")
        parser.add_argument(
            "--property-count",
            type=int,
            default=None,
            help="properties per CRD schema, nested ones included; 0 = random 1..100 per CRD (apigen)",
        )
        parser.add_argument(
            "--preset",
            choices=sorted(PRESETS),
            default="apigen",
            help="starting point for the options below (default: apigen)",
        )
        parser.add_argument("--versions", type=int, help="versions per CRD, each repeating the schema")
        parser.add_argument("--depth", type=int, dest="max_depth", help="maximum nesting levels of properties")
        parser.add_argument("--type-mix", help="property type weights, e.g. string=5,object=2,array=1,integer")
        parser.add_argument("--description-length", type=int, help="characters of description per property")
        parser.add_argument("--scope", choices=SCOPES, help="CRD scope; mixed alternates")
        parser.add_argument("--printer-columns", type=int, help="additional printer columns per version")
        parser.add_argument("--categories", help="comma-separated spec.names.categories")
        parser.add_argument(
            "--shape", choices=SHAPES, help="flat (apigen) or provider (spec.forProvider/status.atProvider)"
        )
        parser.add_argument("--group-suffix", help="DNS suffix of generated groups")
        parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
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
        ):
            value = getattr(args, name)
            if value is not None:
                overrides[name] = value
        if args.type_mix:
            overrides["type_weights"] = parse_type_weights(args.type_mix)
        if args.categories is not None:
            overrides["categories"] = tuple(c.strip() for c in args.categories.split(",") if c.strip())
        params = preset(args.preset, **overrides)
        crds = generate_crds(params)

        report = sys.stdout
        if args.output == "-":
            report = sys.stderr
            for crd in crds:
                sys.stdout.write("---\n" + dump_yaml(crd))
            sys.stdout.flush()
        elif args.output:
            written = write_crds(crds, args.output, single_file=args.single_file, fmt=args.format)
            where = args.output if args.single_file else f"{len(written)} files in {args.output}"
            print(f"wrote {where}", file=report)
        print(summarize(crds).render(), file=report)
        return 0
