"""Print a pprof-like top table of a profile (same numbers as `go tool pprof -top`).

Examples:
  crdscale top runs/<run>/profiles/heap-step05-crds0500.pb.gz
  crdscale top heap.pb.gz --sample-index alloc_space --cum --nodecount 30
  crdscale top heap-step05-crds0500.pb.gz --base heap-step00-crds0000.pb.gz
  crdscale top heap.pb.gz --focus 'kube-openapi' --ignore 'cacher'
  crdscale top heap.pb.gz --peek 'crdHandler'
  crdscale top heap.pb.gz --by-cause
  crdscale top heap.pb.gz --callgrind heap.callgrind   # then: kcachegrind heap.callgrind
  crdscale top heap.pb.gz --folded heap.folded         # then: flamegraph.pl heap.folded

Like `go tool pprof -top`, nodes whose cum is below --nodefraction of the
total (default 0.005) are left out and the header says how many; use
--nodefraction 0 to list every node. Reads gzip or plain profile.proto
(heap, allocs, CPU, goroutine).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crdscale.errors import UsageError

PPROF_DEFAULT_NODEFRACTION = 0.005


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("profile", help="profile.proto file (gzip or plain)")
        parser.add_argument("--base", help="subtract this profile first (pprof -diff_base); percentages are of the base")
        parser.add_argument("--sample-index", "--sample_index", dest="sample_index",
                            help="sample type: inuse_space, inuse_objects, alloc_space, alloc_objects, cpu, samples,"
                                 " or its position (default: the profile's default)")
        parser.add_argument("--focus", help="keep samples with a frame matching this regexp (function, file or binary)")
        parser.add_argument("--ignore", help="drop samples with a frame matching this regexp (wins over --focus)")
        parser.add_argument("--granularity", default="functions",
                            choices=["functions", "filefunctions", "files", "lines", "addresses"])
        parser.add_argument("--cum", action="store_true", help="sort by cum instead of flat")
        parser.add_argument("--nodecount", type=int, default=0, help="show at most N nodes (0: all that pass --nodefraction)")
        parser.add_argument("--nodefraction", type=float, default=PPROF_DEFAULT_NODEFRACTION,
                            help="hide nodes whose |cum| is below this share of the total (default 0.005, as pprof; 0 = none)")
        parser.add_argument("--noinlines", action="store_true", help="attribute inlined frames to their caller")
        parser.add_argument("--unit", default="minimum", help="display unit, e.g. B, kB, MB, ms (default: as pprof picks)")
        parser.add_argument("--peek", metavar="REGEXP", help="print callers and callees of matching nodes instead")
        parser.add_argument("--by-cause", action="store_true", help="print the attribution by cause instead")
        parser.add_argument("-o", "--output", help="also write the full table (every node) as .csv or .parquet")
        parser.add_argument("--callgrind", metavar="FILE",
                            help="also write the profile in Callgrind format (KCachegrind/QCachegrind, no Go needed)")
        parser.add_argument("--folded", metavar="FILE", help="also write folded stacks for flame graphs")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        from crdscale.analysis import views
        from crdscale.analysis.profile import read_profile

        if args.nodefraction < 0 or args.nodefraction > 1:
            raise UsageError("--nodefraction must be between 0 and 1")
        if args.nodecount < 0:
            raise UsageError("--nodecount must be >= 0")
        profile = read_profile(args.profile)
        base = read_profile(args.base) if args.base else None

        if args.callgrind or args.folded:
            from crdscale.analysis import export

            if args.callgrind:
                export.to_callgrind(profile, args.callgrind, args.sample_index, base)
            if args.folded:
                export.write_folded(profile, args.folded, args.sample_index)
        if args.by_cause:
            _print_causes(profile, base, args.sample_index)
            return 0
        if args.peek:
            table = views.peek(profile, args.peek, args.sample_index, granularity=args.granularity,
                               focus=args.focus, ignore=args.ignore, base=base, noinlines=args.noinlines)
            sys.stdout.write(views.format_peek(table, profile, args.unit))
            return 0

        options = dict(granularity=args.granularity, focus=args.focus, ignore=args.ignore, base=base,
                       sort="cum" if args.cum else "flat", noinlines=args.noinlines)
        table = views.top(profile, args.sample_index, nodecount=args.nodecount,
                          nodefraction=args.nodefraction, **options)
        sys.stdout.write(views.format_top(table, profile, args.unit))
        if table.attrs.get("dropped_nodes"):
            print(f"crdscale: {table.attrs['dropped_nodes']} small nodes not shown (--nodefraction 0 shows them)",
                  file=sys.stderr)
        if args.output:
            from crdscale.analysis.export import write_table

            full = views.top(profile, args.sample_index, **options)
            write_table(full, Path(args.output))
        return 0


def _print_causes(profile, base, sample_index) -> None:
    from crdscale.analysis.attribution import attribution_table
    from crdscale.analysis.views import scaled_label

    table = attribution_table(profile, sample_index)
    unit = table.attrs["unit"]
    if base is not None:
        base_table = attribution_table(base, sample_index).set_index("cause")["value"]
        table["value"] = table["value"] - table["cause"].map(base_table).fillna(0).astype("int64")
        growth = int(table["value"].sum())
        table["share"] = table["value"] / growth if growth else 0.0
        table = table.sort_values("value", ascending=False, kind="stable")
        print(f"Growth by cause ({table.attrs['sample_type']}), profile minus base: "
              f"{scaled_label(growth, unit, 'auto')}")
    else:
        print(f"By cause ({table.attrs['sample_type']}), total {scaled_label(table.attrs['total'], unit, 'auto')}")
    for row in table.itertuples(index=False):
        print(f"{scaled_label(int(row.value), unit, 'auto'):>12} {100 * row.share:6.2f}%  {row.cause}")
