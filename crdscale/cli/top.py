"""Print a pprof-like top table of a profile (same numbers as `go tool pprof -top`).

Examples:
  crdscale top runs/<run>/profiles/heap-step05-crds0500.pb.gz
  crdscale top heap.pb.gz --sample-index alloc_space --cum --nodecount 30
  crdscale top heap-step05-crds0500.pb.gz --diff_base heap-step00-crds0000.pb.gz
  crdscale top heap.pb.gz --focus 'kube-openapi' --ignore 'cacher'
  crdscale top heap.pb.gz --show 'k8s.io/' --hide '^runtime'
  crdscale top heap.pb.gz --tagfocus 'bytes=1kb:'       # objects of 1 kB and more
  crdscale top heap.pb.gz --mean --sample-index alloc_space   # bytes per allocation
  crdscale top heap.pb.gz --peek 'crdHandler'
  crdscale top heap.pb.gz --by-cause
  crdscale top heap.pb.gz -o json | jq '.rows[0]'
  crdscale top heap.pb.gz --callgrind heap.callgrind   # then: kcachegrind heap.callgrind
  crdscale top heap.pb.gz --folded heap.folded         # then: flamegraph.pl heap.folded

Like `go tool pprof -top`, nodes whose cum is below --nodefraction of the
total (default 0.005) are left out and the header says how many; use
--nodefraction 0 to list every node. The options mean what pprof's options of
the same name mean, and function names are pprof's (generic functions without
the parameter lists in their type arguments), for display and for the filters
alike. Reads gzip or plain profile.proto (heap, allocs, CPU, goroutine).

Units: the text output is pprof's, so its byte units are pprof's: "kB", "MB"
and "GB" are 2^10, 2^20 and 2^30 bytes (what the rest of crdscale calls KiB,
MiB and GiB). --by-cause prints crdscale's own table, in KiB/MiB/GiB; -o json
gives integers in the sample unit (bytes, count, nanoseconds).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from crdscale.analysis import pprof
from crdscale.analysis.pprof.options import GRANULARITIES, PPROF_NODE_FRACTION
from crdscale.cli.common import check_output_file, write_output_text, write_table
from crdscale.cli.options import fraction, nonnegative_int, pprof_unit
from crdscale.errors import UsageError
from crdscale.outputs import check_distinct, check_not_in_run, check_not_input


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("profile", help="profile.proto file (gzip or plain)")
        parser.add_argument(
            "--diff_base",
            "--diff-base",
            dest="diff_base",
            metavar="PROFILE",
            help="subtract this profile first (pprof -diff_base); percentages are of the base",
        )
        parser.add_argument(
            "--sample-index",
            "--sample_index",
            dest="sample_index",
            help="sample type: inuse_space, inuse_objects, alloc_space, alloc_objects, cpu, samples,"
            " or its position (default: the profile's default)",
        )
        parser.add_argument("--focus", help="keep samples with a frame matching this regexp (function, file or binary)")
        parser.add_argument("--ignore", help="drop samples with a frame matching this regexp (wins over --focus)")
        parser.add_argument("--show", help="keep only the frames matching this regexp in every stack")
        parser.add_argument("--hide", help="remove the frames matching this regexp from every stack")
        parser.add_argument(
            "--tagfocus",
            metavar="[KEY=]REGEXP|RANGE",
            help="keep samples whose labels match: KEY=REGEXP, or a numeric range such as "
            "bytes=1kb: or 64:4kb (heap profiles label each sample with its object size)",
        )
        parser.add_argument(
            "--mean", action="store_true", help="divide each value by the first sample type (e.g. bytes per object)"
        )
        parser.add_argument("--granularity", default="functions", choices=GRANULARITIES)
        parser.add_argument("--cum", action="store_true", help="sort by cum instead of flat")
        parser.add_argument(
            "--nodecount",
            type=nonnegative_int,
            default=0,
            help="show at most N nodes (0: all that pass --nodefraction)",
        )
        parser.add_argument(
            "--nodefraction",
            type=fraction,
            default=PPROF_NODE_FRACTION,
            help="hide nodes whose |cum| is below this share of the total (default 0.005, as pprof; 0 = none)",
        )
        parser.add_argument("--noinlines", action="store_true", help="attribute inlined frames to their caller")
        parser.add_argument(
            "--unit",
            default="minimum",
            type=pprof_unit,
            help="display unit as pprof names it, e.g. B, kB (2^10 B), MB (2^20 B), ms (default: as pprof picks)",
        )
        parser.add_argument("--peek", metavar="REGEXP", help="print callers and callees of matching nodes instead")
        parser.add_argument("--by-cause", action="store_true", help="print the attribution by cause instead")
        parser.add_argument(
            "-o",
            "--output",
            choices=["text", "json"],
            default="text",
            help="text (as pprof prints it) or json (the shown rows and header facts, for scripts)",
        )
        parser.add_argument(
            "--table", metavar="FILE", help="also write the full table (every node) as .csv or .parquet"
        )
        parser.add_argument(
            "--callgrind",
            metavar="FILE",
            help="also write the profile in Callgrind format (KCachegrind/QCachegrind, no Go needed)",
        )
        parser.add_argument("--folded", metavar="FILE", help="also write folded stacks for flame graphs")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
        from crdscale.collect.pprof import read_profile

        if args.nodefraction < 0 or args.nodefraction > 1:
            raise UsageError("--nodefraction must be between 0 and 1")
        if args.nodecount < 0:
            raise UsageError("--nodecount must be >= 0")
        outputs = (("--callgrind", args.callgrind), ("--folded", args.folded), ("--table", args.table))
        check_distinct(outputs)
        for flag, target in outputs:
            if target:  # before decoding: a path that cannot be written fails at once, an input is never overwritten
                check_not_input(target, (args.profile, args.diff_base), flag)
                check_not_in_run(target, flag)
                check_output_file(target, flag)
        profile = read_profile(args.profile)
        base = read_profile(args.diff_base) if args.diff_base else None

        if args.callgrind:
            # lazy: would bring pandas, numpy, pyarrow into --help
            from crdscale.analysis.export import callgrind

            write_output_text(args.callgrind, callgrind(profile, args.sample_index, base), "--callgrind")
        if args.folded:
            # lazy: would bring pandas, numpy, pyarrow into --help
            from crdscale.analysis.export import folded_text

            write_output_text(args.folded, folded_text(profile, args.sample_index), "--folded")
        if args.by_cause:
            _print_causes(profile, base, args.sample_index, args.output)
            return 0
        options = dict(
            granularity=args.granularity,
            focus=args.focus,
            ignore=args.ignore,
            show=args.show,
            hide=args.hide,
            tagfocus=args.tagfocus,
            diff_base=base,
            mean=args.mean,
            noinlines=args.noinlines,
        )
        if args.peek:
            table = pprof.peek(profile, args.peek, args.sample_index, **options)
            _warn_unmatched(table)
            if args.output == "json":
                _print_json(args.profile, table)
            else:
                sys.stdout.write(pprof.format_peek(table, profile, args.unit, base))
            return 0

        options["sort"] = "cum" if args.cum else "flat"
        table = pprof.top(
            profile, args.sample_index, nodecount=args.nodecount, nodefraction=args.nodefraction, **options
        )
        _warn_unmatched(table)
        if args.output == "json":
            _print_json(args.profile, table)
        else:
            sys.stdout.write(pprof.format_top(table, profile, args.unit, base))
            if table.attrs.get("dropped_nodes"):
                print(
                    f"crdscale: {table.attrs['dropped_nodes']} small nodes not shown (--nodefraction 0 shows them)",
                    file=sys.stderr,
                )
        if args.table:
            full = pprof.top(profile, args.sample_index, **options)
            write_table(full, Path(args.table))
        return 0


def _warn_unmatched(table) -> None:
    """pprof's notes on stderr about the filters ("Focus expression matched no samples")."""
    # lazy: would bring pandas, numpy, pyarrow into --help
    from crdscale.analysis.pprof.text import pprof_notes

    for line in pprof_notes(table):
        print(line, file=sys.stderr)


def _print_json(path: str, table) -> None:
    """The table's header facts (``attrs``) and rows as one JSON object; values in the sample unit."""
    facts = {k: v for k, v in table.attrs.items() if k not in ("output_unit",)}
    doc = {"profile": str(path), **facts, "rows": table.to_dict("records")}
    print(json.dumps(doc, indent=1, default=_json_default))


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _print_causes(profile, base, sample_index, output: str) -> None:
    # lazy: would bring pandas, numpy, pyarrow into --help
    from crdscale.analysis.attribution import attribution_table

    table = attribution_table(profile, sample_index)
    unit = table.attrs["unit"]
    fmt = _value_formatter(unit)
    if base is not None:
        base_table = attribution_table(base, sample_index).set_index("cause")["value"]
        table["value"] = table["value"] - table["cause"].map(base_table).fillna(0).astype("int64")
        growth = int(table["value"].sum())
        table["share"] = table["value"] / growth if growth else 0.0
        table = table.sort_values("value", ascending=False, kind="stable")
        table.attrs["total"] = growth
    if output == "json":
        _print_json(profile.source, table)
        return
    if base is not None:
        growth = table.attrs["total"]
        print(f"Growth by cause ({table.attrs['sample_type']}), profile minus base: {fmt(growth)}")
    else:
        print(f"By cause ({table.attrs['sample_type']}), total {fmt(table.attrs['total'])}")
    for row in table.itertuples(index=False):
        print(f"{fmt(int(row.value)):>12} {100 * row.share:6.2f}%  {row.cause}")


def _value_formatter(unit: str):
    """crdscale's own tables: bytes in KiB/MiB/GiB (units.fmt_bytes), other units as pprof scales them."""
    # lazy: would add a module to --help
    from crdscale.analysis.pprof import scaled_label
    from crdscale.units import fmt_bytes

    if unit == "bytes":
        return lambda v: fmt_bytes(v, digits=2)
    return lambda v: scaled_label(int(v), unit, "auto")
