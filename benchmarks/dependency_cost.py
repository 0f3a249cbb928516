"""What importing a library costs: wall time, peak RSS and modules loaded, each in a fresh interpreter.

Compares the packages issue 22 names (``kubernetes``, ``prometheus-api-client``) with the crdscale
modules they would replace, and lists what each package would add to an install of crdscale (its
dependency closure minus crdscale's own, with installed sizes from the wheels' RECORD files).

    PYTHONPATH=$PWD /tmp/deps-venv/bin/python benchmarks/dependency_cost.py [--repeat 5]

(the scratch venv of benchmarks/kubernetes_parity.py: requirements.lock plus the packages measured).
Each import runs ``--repeat`` times; the median is printed. Reports only; exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# (what, import statement): what crdscale imports today beside what would replace it.
IMPORTS = [
    ("python, nothing imported", "pass"),
    ("requests", "import requests"),
    ("crdscale.cluster.clients (kubeconfig + auth + requests)", "import crdscale.cluster.clients"),
    ("kubernetes.config (load_kube_config)", "import kubernetes.config"),
    (
        "kubernetes.config + kubernetes.client.CoreV1Api",
        "import kubernetes.config, kubernetes.client; kubernetes.client.CoreV1Api",
    ),
    ("crdscale.collect.prometheus", "import crdscale.collect.prometheus"),
    ("prometheus_api_client.PrometheusConnect", "from prometheus_api_client import PrometheusConnect"),
    ("prometheus_api_client.MetricRangeDataFrame", "from prometheus_api_client import MetricRangeDataFrame"),
]

PROBE = """
import resource, sys, time
started = time.perf_counter()
exec({statement!r})
elapsed = time.perf_counter() - started
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(sys.modules))
"""


def measure_import(statement: str, repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", PROBE.format(statement=statement)], capture_output=True, text=True, check=True
        ).stdout.split()
        runs.append((float(out[0]), int(out[1]), int(out[2])))
    return {
        "seconds": statistics.median(r[0] for r in runs),
        "rss_mib": statistics.median(r[1] for r in runs) / 1024,
        "modules": statistics.median(r[2] for r in runs),
    }


def closure(name: str, extras: tuple[str, ...] = ()) -> set[str]:
    """The installed distributions ``name`` (with ``extras``) needs, itself included."""
    env = default_environment()
    seen: set[str] = set()
    todo = [(name, extras)]
    while todo:
        dist_name, dist_extras = todo.pop()
        key = canonicalize_name(dist_name)
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.distribution(dist_name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in ("", *dist_extras)):
                continue
            todo.append((req.name, tuple(req.extras)))
    return seen


def crdscale_closure() -> set[str]:
    """What crdscale with its ``report`` and ``lab`` extras installs (from pyproject.toml: crdscale
    itself need not be installed in the scratch venv)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = default_environment()
    seen: set[str] = set()
    for extra in ("", "report", "lab"):
        lines = project["dependencies"] if not extra else project["optional-dependencies"][extra]
        for line in lines:
            req = Requirement(line)
            if req.name != "crdscale" and (req.marker is None or req.marker.evaluate({**env, "extra": extra})):
                seen |= closure(req.name, tuple(req.extras))
    return seen


def installed_mib(name: str) -> float:
    dist = metadata.distribution(name)
    return sum((f.size or 0) for f in (dist.files or [])) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    out: dict = {"imports": {}, "adds": {}}
    print("| import | seconds (median) | peak RSS MiB | modules |")
    print("|---|---|---|---|")
    for what, statement in IMPORTS:
        try:
            m = measure_import(statement, args.repeat)
        except subprocess.CalledProcessError:
            print(f"| {what} | not importable | | |")
            continue
        out["imports"][what] = m
        print(f"| {what} | {m['seconds']:.2f} | {m['rss_mib']:.0f} | {m['modules']:.0f} |")
    ours = crdscale_closure()
    for package in ("kubernetes", "prometheus-api-client", "pyprof2calltree"):
        try:
            metadata.distribution(package)
        except metadata.PackageNotFoundError:
            continue
        added = sorted(closure(package) - ours)
        size = sum(installed_mib(d) for d in added)
        out["adds"][package] = {"distributions": added, "installed_mib": size}
        print(f"{package} adds {len(added)} distributions, {size:.1f} MiB installed: {', '.join(added)}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
