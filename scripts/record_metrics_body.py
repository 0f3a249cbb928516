"""Record a kube-apiserver ``/metrics`` body for the exposition-parser tests.

    python scripts/record_metrics_body.py KUBECONFIG tests/data/metrics/kube-apiserver-v1.37.1.txt

A local control plane's body is several megabytes; this keeps every family's
``# HELP``/``# TYPE`` lines and its first samples, as many per family as fit
in ``--max-bytes``, so the file stays small and keeps the variety (counters,
gauges, histograms, summaries, many label shapes).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crdscale.cluster.clients import connect
from crdscale.fsutil import write_atomic


def families(text: str) -> list[tuple[list[str], list[str]]]:
    """``(comment lines, sample lines)`` per metric family, in exposition order."""
    out: list[tuple[list[str], list[str]]] = []
    for line in text.splitlines():
        if line.startswith("# HELP") or (line.startswith("#") and not out):
            out.append(([line], []))
        elif line.startswith("#"):
            out[-1][0].append(line)
        elif line:
            if not out:
                out.append(([], []))
            out[-1][1].append(line)
    return out


def trim(text: str, max_bytes: int) -> str:
    """At most ``k`` samples per family, with the largest ``k`` that keeps the body under ``max_bytes``."""
    blocks = families(text)
    for per_family in (200, 100, 60, 40, 25, 15, 10, 6, 4, 2, 1):
        body = "".join("\n".join(comments + samples[:per_family]) + "\n" for comments, samples in blocks)
        if len(body.encode()) <= max_bytes:
            return body
    raise SystemExit(f"even one sample per family exceeds {max_bytes} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kubeconfig")
    ap.add_argument("out", type=Path)
    ap.add_argument("--max-bytes", type=int, default=280_000)
    args = ap.parse_args()
    cluster = connect(args.kubeconfig)
    try:
        resp = cluster.get("/metrics", timeout=60)
        resp.raise_for_status()
        body = trim(resp.text, args.max_bytes)
    finally:
        cluster.close()
    write_atomic(args.out, body)
    print(f"{args.out}: {len(body.encode()):,} bytes of {len(resp.content):,}, {len(families(body))} families")


if __name__ == "__main__":
    main()
