"""Print the predictions quoted in docs/how-to/provider-cost.md, from the shipped models (no server).

Usage:
  python scripts/provider_cost_numbers.py [--versions 1.37.1,1.32.2,1.24.17,1.24.0]

Generates the page's sets with `crdscale generate` into a temporary directory (600 provider-like CRDs of 100
properties, seed 3; the two "releases": 600 CRDs x 1 version and 700 x 2, 30 properties, seed 3) and runs
`crdscale footprint ... --shipped -o json` on them and on ../shared/data/crossplane-terrajet-2021-crds.tar.gz:
the heap per --state, the terrajet set's served heap and RSS, what the upgrade adds, and the terrajet set with
10 and 100 custom resources per CRD (--objects, on the versions with a per-object term). Markdown rows, MiB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from crdscale.footprint.store import object_term_versions

ROOT = Path(__file__).resolve().parents[1]
TERRAJET = ROOT.parent / "shared" / "data" / "crossplane-terrajet-2021-crds.tar.gz"
STATES = ("installed", "watched", "served", "openapi-v2")
MIB = 2**20


def crdscale(*args: str, parse: bool = True) -> dict:
    done = subprocess.run([sys.executable, "-m", "crdscale", *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"provider_cost_numbers: crdscale {' '.join(args)}: {done.stderr.strip()}")
    return json.loads(done.stdout) if parse else {}


def mib(p: dict) -> str:
    low, high = p.get("low"), p.get("high")
    interval = f" [{low / MIB:,.1f}, {high / MIB:,.1f}]" if low is not None and high is not None else ""
    return f"{p['value'] / MIB:,.1f} MiB{interval}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", default="1.37.1,1.32.2,1.24.17,1.24.0")
    args = parser.parse_args(argv)
    versions = args.versions.split(",")
    with tempfile.TemporaryDirectory(prefix="crdscale-provider-cost-") as tmp:
        sets = {
            "p600": ["-c", "600", "--property-count", "100"],
            "old": ["-c", "600", "--property-count", "30", "--versions", "1"],
            "new": ["-c", "700", "--property-count", "30", "--versions", "2"],
        }
        for name, extra in sets.items():
            crdscale(
                "generate",
                "--preset",
                "provider",
                "-g",
                "60",
                "--seed",
                "3",
                *extra,
                "-o",
                f"{tmp}/{name}/",
                parse=False,
            )
        print("| `--state` | " + " | ".join(f"v{v}" for v in versions) + " |")
        print("|---|" + "---|" * len(versions))
        for state in STATES:
            cells = [
                mib(crdscale("footprint", f"{tmp}/p600/", "--kube-version", v, "--state", state, "--shipped", "-o",
                             "json")["served_heap_bytes"])
                for v in versions
            ]  # fmt: skip
            print(f"| `{state}` | " + " | ".join(cells) + " |")
        print()
        print("| kube-apiserver | quantity | predicted (95 % interval), 1,848 terrajet CRDs |")
        print("|---|---|---|")
        for v in versions:
            out = crdscale("footprint", str(TERRAJET), "--kube-version", v, "--shipped", "-o", "json")
            for key, label in (("served_heap_bytes", "served heap"), ("rss_bytes", "RSS, settled growth"),
                               ("rss_peak_bytes", "RSS, peak growth")):  # fmt: skip
                print(f"| v{v} | {label} | {mib(out[key])} |")
        print()
        for v in versions:
            diff = crdscale("footprint", f"{tmp}/old/", f"{tmp}/new/", "--kube-version", v, "--shipped", "-o", "json")
            by = {d["target"]: d for d in diff["difference"]}
            print(
                f"upgrade on v{v}: heap {mib(by['total'])} (OpenAPI {mib(by['openapi'])}), settled RSS {mib(by['rss'])}"
            )
        print()
        print("| kube-apiserver | custom resources (schema-shaped, 1 KiB) | their heap | served heap in all | "
              "RSS, settled growth in all |")  # fmt: skip
        print("|---|---|---|---|---|")
        for v in (v for v in versions if v in object_term_versions()):
            for per_crd in (10, 100):
                out = crdscale("footprint", str(TERRAJET), "--kube-version", v, "--shipped", "--objects",
                               str(per_crd), "-o", "json")  # fmt: skip
                print(
                    f"| v{v} | {per_crd} per CRD ({out['objects']['total']:,}) | {mib(out['objects']['heap_bytes'])} "
                    f"| {mib(out['served_heap_bytes'])} | {mib(out['rss_bytes'])} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
