"""The same small matrix run here (`crdscale run`) and on a test node (`crdscale run --cluster
--parallelism 2`): wall time of each, and whether each cell's per-CRD costs agree within their
intervals (`crdscale compare LOCAL_RUN CLUSTER_RUN -o json`: the difference's interval holds 0).

Needs what `crdscale up --node` and `crdscale image build` need (root, containerd, runc, CNI
plugins, debootstrap) and versitygw (`crdscale binaries --versitygw`). Starts and stops its own
node and S3 server; prints one JSON document (the numbers of docs/results/cluster.toml).

    sudo PYTHONPATH=$PWD python scripts/cluster_vs_local.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = """\
name = "pod-vs-host"
[crds]
count = 40
groups = 2
property_count = 10
[steps]
count = 2
settle_seconds = 5
serve = "none"
[matrix]
"crds.property_count" = [10, 20]
repeat = 2
"""
IMAGE = "crdscale:bench"
NAMESPACE = "crdscale-bench"
SECRET = "crdscale-results"


def crdscale(*args: str, env: dict | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "crdscale", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        raise SystemExit(f"crdscale {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def cell_runs(experiment: Path) -> dict[str, Path]:
    """Cell name -> its completed run directory, from experiment.json."""
    from crdscale.scenario.experiment import Experiment

    return {name: Path(path) for name, path in Experiment.open(experiment).completed_runs()}


def agreement(local: Path, cluster: Path) -> list[dict]:
    """Per-CRD differences (cluster - local) of one cell, each with whether its interval holds 0."""
    doc = json.loads(crdscale("compare", str(local), str(cluster), "-o", "json"))
    rows = []

    def walk(node):
        if isinstance(node, dict):
            if {"difference", "difference_low", "difference_high", "metric"} <= node.keys():
                low, high = node["difference_low"], node["difference_high"]
                if low is not None and high is not None:
                    rows.append(
                        {
                            "metric": node["metric"],
                            "cause": node.get("cause", ""),
                            "per_crd_local": node.get("per_crd_reference"),
                            "per_crd_pod": node.get("per_crd"),
                            "agree": bool(low <= 0 <= high),
                        }
                    )
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    return rows


def main() -> int:
    from crdscale.cluster import node
    from crdscale.cluster.local import LocalControlPlane
    from crdscale.results.versitygw import LocalS3

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="working directory (default: a temporary one)")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="crdscale-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    scenario = work / "pod-vs-host.toml"
    scenario.write_text(SCENARIO)
    result: dict = {"scenario": SCENARIO}

    started = time.monotonic()
    local = Path(crdscale("run", str(scenario), "--out", str(work / "local")).strip().splitlines()[-1])
    result["local_seconds"] = round(time.monotonic() - started, 1)

    name = f"bench-{os.getpid()}"
    crdscale("up", "--node", "--name", name)
    s3 = None
    try:
        cp = LocalControlPlane.attach(name)
        crdscale("image", "build", "--out", str(work / "image.tar"), "--tag", IMAGE)
        crdscale("image", "load", str(work / "image.tar"), "--instance", name)
        s3 = LocalS3(host=node.host_address(cp.state)).start()
        bucket = s3.make_bucket("results")
        cluster = cp.connect()
        cluster.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET}, "stringData": s3.client_env()}
        cluster.post(f"/api/v1/namespaces/{NAMESPACE}/secrets", secret)
        cluster.close()
        env = {**s3.client_env(), "AWS_SHARED_CREDENTIALS_FILE": str(work / "none")}
        started = time.monotonic()
        out = crdscale(
            "run", str(scenario), "--cluster", "--kubeconfig", str(cp.kubeconfig), "--namespace", NAMESPACE,
            "--image", IMAGE, "--parallelism", "2", "--cpus", "1", "--memory", "2GiB", "--results",
            f"{bucket}/bench", "--results-secret", SECRET, "--out", str(work / "cluster"),
            env=env,
        )  # fmt: skip
        result["cluster_seconds"] = round(time.monotonic() - started, 1)
        experiment = Path(out.strip().splitlines()[-1])
        from crdscale.scenario.clusterjob import gather
        from crdscale.scenario.experiment import Experiment

        os.environ.update(env)
        gather(Experiment.open(experiment))
        crdscale("down", str(experiment))
    finally:
        if s3 is not None:
            s3.stop()
        crdscale("down", name)

    local_runs, pod_runs = cell_runs(local), cell_runs(experiment)
    cells = {}
    for cell, run in local_runs.items():
        if cell in pod_runs:
            rows = agreement(run, pod_runs[cell])
            cells[cell] = {"agree": sum(r["agree"] for r in rows), "of": len(rows), "rows": rows}
    result["cells"] = cells
    result["agree"] = sum(c["agree"] for c in cells.values())
    result["of"] = sum(c["of"] for c in cells.values())
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
