"""Benchmark: 500 generated CRDs to Established, crdscale versus kubectl.

Each contender gets a fresh local control plane (etcd + kube-apiserver on
127.0.0.1) and the same CRD files:

* kubectl: ``kubectl create -f DIR`` then
  ``kubectl wait --for condition=Established crd --all``;
* crdscale: ``crdscale install DIR`` (one step, no serving), as a subprocess
  so process start-up and file parsing count for both.

Prints both wall times and the ratio crdscale/kubectl (goal: <= 0.8). It
reports; it does not assert. kubectl is the one on PATH if it is a genuine
build, else built from Go modules like the API server.

Usage: python benchmarks/install.py [--crds 500] [--groups 50] [--properties 100] [--repeat 1]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crdscale.cluster import binaries
from crdscale.cluster.local import LocalControlPlane
from crdscale.crds.generate import GeneratorParams, generate_crds, write_crds


def _run(argv: list[str], env: dict[str, str]) -> float:
    """Run ``argv``; returns wall seconds. Raises with the output tail on failure."""
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): " + " | ".join(tail))
    return elapsed


def time_kubectl(kubectl: Path, crd_dir: Path, work: Path) -> dict[str, float]:
    with LocalControlPlane(name=f"bench-kubectl-{os.getpid()}") as cp:
        # A fresh discovery cache per run, as on a first install.
        env = dict(os.environ, KUBECONFIG=str(cp.kubeconfig), KUBECACHEDIR=str(work / "kubectl-cache"))
        create = _run([str(kubectl), "create", "-f", str(crd_dir)], env)
        wait = _run([str(kubectl), "wait", "--for", "condition=Established", "crd", "--all", "--timeout=600s"], env)
    return {"create_s": create, "wait_s": wait, "total_s": create + wait}


def time_crdscale(crd_dir: Path, work: Path, concurrency: int) -> dict[str, float]:
    with LocalControlPlane(name=f"bench-crdscale-{os.getpid()}") as cp:
        env = dict(os.environ)
        total = _run(
            [
                sys.executable,
                "-m",
                "crdscale",
                "install",
                str(crd_dir),
                "--quiet",
                "--concurrency",
                str(concurrency),
                "--kubeconfig",
                str(cp.kubeconfig),
                "--out",
                str(work / f"crdscale-run-{time.monotonic_ns()}"),
            ],
            env,
        )
    return {"total_s": total}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crds", type=int, default=500)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--properties", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1, help="runs per contender (medians are reported)")
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(message)s")  # crdscale's build and start-up lines on stderr
    logging.getLogger("crdscale").setLevel(logging.INFO)

    kubectl = binaries.kubectl().path
    print(f"kubectl: {kubectl}")
    with tempfile.TemporaryDirectory(prefix="crdscale-bench-") as tmp:
        work = Path(tmp)
        crd_dir = work / "crds"
        write_crds(
            generate_crds(
                GeneratorParams(crd_count=args.crds, group_count=args.groups, property_count=args.properties)
            ),
            crd_dir,
        )
        print(f"{args.crds} CRDs in {args.groups} groups, {args.properties} properties each")
        kubectl_runs, crdscale_runs = [], []
        for n in range(args.repeat):
            # Alternate the order so a warm page cache or CPU boost favours neither.
            order = ("kubectl", "crdscale") if n % 2 == 0 else ("crdscale", "kubectl")
            for who in order:
                if who == "kubectl":
                    run = time_kubectl(kubectl, crd_dir, work)
                    kubectl_runs.append(run["total_s"])
                    print(
                        f"kubectl  run {n + 1}: create {run['create_s']:.2f} s + wait {run['wait_s']:.2f} s "
                        f"= {run['total_s']:.2f} s",
                        flush=True,
                    )
                else:
                    run = time_crdscale(crd_dir, work, args.concurrency)
                    crdscale_runs.append(run["total_s"])
                    print(f"crdscale run {n + 1}: {run['total_s']:.2f} s", flush=True)
    k, c = statistics.median(kubectl_runs), statistics.median(crdscale_runs)
    print(f"kubectl:  {k:.2f} s")
    print(f"crdscale: {c:.2f} s")
    print(f"ratio crdscale/kubectl: {c / k:.2f} (goal <= 0.8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
