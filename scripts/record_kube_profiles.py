"""Record a small real run directory from a local kube-apiserver (test fixtures, benchmark input).

Starts etcd + kube-apiserver by hand on 127.0.0.1 (binaries from crdscale's
cache, self-signed serving cert, a token file), takes a
baseline heap profile, then for each CRD count creates generated CRDs, waits
until they are Established (profile ``-installed``), LISTs each new resource
once so its storage is built, settles, and profiles again. Also scrapes
``/metrics`` for RSS and heap in use at every profile. Writes the run-directory
layout ``crdscale analyze`` reads:

    OUT/manifest.json, OUT/events.jsonl, OUT/profiles/heap-stepNN-crdsNNNN[-installed].pb.gz,
    OUT/metrics/series.parquet

Usage:
  python scripts/record_kube_profiles.py OUT --counts 0,10,20,40 [--properties 30] [--extra]

``--extra`` also saves a goroutine profile and a 5 s CPU profile at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import requests
import urllib3

from crdscale.cluster.local import free_ports
from crdscale.collect.promtext import parse_exposition
from crdscale.crds.generate import generate_crds, preset
from crdscale.paths import binaries_dir
from crdscale.rundir import RunWriter

SERIES = ("process_resident_memory_bytes", "go_memstats_heap_inuse_bytes")


@contextlib.contextmanager
def control_plane(workdir: Path):
    """etcd + kube-apiserver started here and stopped on exit (only the PIDs we started)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    workdir.mkdir(parents=True, exist_ok=True)
    api_port, etcd_port, peer_port = free_ports(3)
    token = secrets.token_hex(16)
    (workdir / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (workdir / "sa.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (workdir / "sa.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    etcd_bin = binaries_dir("etcd", "v3.6.16") / "etcd"
    api_bin = binaries_dir("kube-apiserver", "v1.37.1") / "kube-apiserver"
    client = f"http://127.0.0.1:{etcd_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    procs = []
    try:
        procs.append(
            subprocess.Popen(
                [
                    str(etcd_bin),
                    "--data-dir",
                    str(workdir / "etcd"),
                    "--listen-client-urls",
                    client,
                    "--advertise-client-urls",
                    client,
                    "--listen-peer-urls",
                    peer,
                    "--initial-advertise-peer-urls",
                    peer,
                    "--initial-cluster",
                    f"default={peer}",
                    "--unsafe-no-fsync",
                ],
                stdout=open(workdir / "etcd.log", "wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    str(api_bin),
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={api_port}",
                    f"--etcd-servers={client}",
                    f"--cert-dir={workdir / 'certs'}",
                    f"--token-auth-file={workdir / 'tokens.csv'}",
                    "--authorization-mode=RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={workdir / 'sa.pub'}",
                    f"--service-account-signing-key-file={workdir / 'sa.key'}",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--disable-admission-plugins=ServiceAccount",
                    "--profiling=true",
                    # 127.0.0.1 cannot be advertised through the endpoint reconciler; nothing here needs it.
                    "--endpoint-reconciler-type=none",
                ],
                stdout=open(workdir / "kube-apiserver.log", "wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        urllib3.disable_warnings()
        session = requests.Session()
        session.verify = False  # loopback only, self-signed serving cert
        # Without this, REQUESTS_CA_BUNDLE in the environment silently overrides verify=False.
        session.trust_env = False
        session.headers["Authorization"] = f"Bearer {token}"
        server = f"https://127.0.0.1:{api_port}"
        cluster = SimpleNamespace(
            session=session,
            url=lambda path: server + path,
            get=lambda path, timeout=60, **kw: session.get(server + path, timeout=timeout, **kw),
        )
        cluster.get_json = lambda path, **kw: cluster.get(path, **kw).json()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if cluster.get("/readyz", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if any(p.poll() is not None for p in procs):
                raise SystemExit(f"a process exited; see {workdir}/*.log")
            time.sleep(0.5)
        else:
            raise SystemExit("kube-apiserver not ready in 300 s")
        yield cluster
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)


def create_crd(cluster, crd: dict) -> None:
    resp = cluster.session.post(
        cluster.url("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"), json=crd, timeout=60
    )
    if resp.status_code not in (200, 201, 409):
        raise SystemExit(f"creating {crd['metadata']['name']}: HTTP {resp.status_code} {resp.text[:300]}")


def wait_established(cluster, names: list[str], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            obj = cluster.get_json(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
            if conds.get("Established") == "True":
                pending.discard(name)
        time.sleep(0.5)
    if pending:
        raise SystemExit(f"not Established after {timeout_s} s: {sorted(pending)[:5]}")


def list_resource(cluster, crd: dict) -> None:
    group = crd["spec"]["group"]
    plural = crd["spec"]["names"]["plural"]
    for version in crd["spec"]["versions"]:
        if not version.get("served", True):
            continue
        if crd["spec"]["scope"] == "Namespaced":
            path = f"/apis/{group}/{version['name']}/namespaces/default/{plural}"
        else:
            path = f"/apis/{group}/{version['name']}/{plural}"
        for _ in range(60):
            resp = cluster.get(path, timeout=60)
            if resp.status_code == 200:
                break
            time.sleep(0.5)  # discovery/handler may lag Established by a moment


def scrape(cluster) -> list[dict]:
    now = datetime.now(timezone.utc)
    text = cluster.get("/metrics", timeout=60).text
    rows = []
    for name, labels, value in parse_exposition(text):
        if name in SERIES:
            rows.append(
                {
                    "timestamp": now,
                    "job": "kube-apiserver",
                    "metric": name,
                    "labels": json.dumps(labels, sort_keys=True),
                    "value": float(value),
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--counts", default="0,10,20,40")
    ap.add_argument("--properties", type=int, default=30)
    ap.add_argument("--groups", type=int, default=5)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--extra", action="store_true")
    ap.add_argument("--workdir", default="/tmp/crdscale-record", help="etcd data, certs and logs")
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    run = RunWriter.create_at(Path(args.out))
    run.fsync = False
    out = run.path
    crds = generate_crds(
        preset("apigen", crd_count=max(counts), group_count=args.groups, property_count=args.properties, seed=1)
    )
    events = run.events
    series: list[dict] = []
    with control_plane(Path(args.workdir)) as cluster:
        manifest = {
            "name": "recorded-fixture",
            "status": "running",
            "versions": {"kube-apiserver": cluster.get_json("/version")["gitVersion"], "etcd": "v3.6.16"},
            "scenario": {
                "crds": {"count": max(counts), "groups": args.groups, "property_count": args.properties},
                "steps": {"counts": counts, "serve": "list"},
            },
        }
        run.write_manifest(manifest)

        def profile(step: int, n: int, phase: str | None) -> None:
            time.sleep(args.settle)
            series.extend(scrape(cluster))
            name = run.write_profile(
                "heap", step, n, phase, cluster.get("/debug/pprof/heap", params={"gc": "1"}).content
            )
            print(f"{name}", file=sys.stderr)

        installed = 0
        for step, count in enumerate(counts):
            new = crds[installed:count]
            events.emit("step.start", step=step, crds_before=installed, crds_in_step=len(new))
            for crd in new:
                create_crd(cluster, crd)
            wait_established(cluster, [c["metadata"]["name"] for c in new])
            if new:
                profile(step, count, "installed")
                for crd in new:
                    list_resource(cluster, crd)
            installed = count
            profile(step, count, None)
            events.emit("step.end", step=step, crds=count, install_s=0.0, serve_s=0.0)
        if args.extra:
            (out / "extra").mkdir(exist_ok=True)
            for kind in ("goroutine", "cpu", "allocs"):
                params = {"seconds": "5"} if kind == "cpu" else {}
                path = "/debug/pprof/profile" if kind == "cpu" else f"/debug/pprof/{kind}"
                (out / "extra" / f"{kind}.pb.gz").write_bytes(cluster.get(path, params=params).content)
    run.write_series(pd.DataFrame(series), csv=False)
    run.finish("completed")


if __name__ == "__main__":
    main()
