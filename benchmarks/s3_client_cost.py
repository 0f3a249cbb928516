"""Which S3 client for ``s3://`` results: what ``minio`` and ``boto3`` cost crdscale.

For each client installed in the running interpreter: the median time, peak RSS and modules of
importing it and making an S3 client (fresh interpreter each, ``--repeat`` runs), the
distributions it would add to crdscale's locked environment (requirements.lock) with their
installed size, and the requirements it has that the lock's pins do not satisfy (which would
move a version of crdscale's environment). Run it in a scratch venv per client:

    python3 -m venv /tmp/v-minio && /tmp/v-minio/bin/pip install minio packaging
    python3 -m venv /tmp/v-boto3 && /tmp/v-boto3/bin/pip install boto3 packaging
    /tmp/v-minio/bin/python benchmarks/s3_client_cost.py
    /tmp/v-boto3/bin/python benchmarks/s3_client_cost.py

Reports only; exits 0.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dependency_cost import closure, installed_mib, measure_import  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = {
    "minio": "import minio; minio.Minio('127.0.0.1:9000', access_key='a', secret_key='b', secure=False)",
    "boto3": "import boto3; boto3.client('s3', region_name='us-east-1', aws_access_key_id='a', "
    "aws_secret_access_key='b', endpoint_url='http://127.0.0.1:9000')",
}


def locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith((" ", "#")) and "==" in line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def locked_only_for(client: str) -> set[str]:
    """``client`` and the locked packages that are there only because of it (every ``# via``
    of theirs is among them): what the lock would lose without it."""
    via: dict[str, set[str]] = {}
    current = None
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith((" ", "#")) and "==" in line:
            current = canonicalize_name(line.split("==")[0])
            via[current] = set()
        elif current and line.strip().startswith("#") and line.strip() not in ("# via",):
            who = line.strip().lstrip("#").strip().removeprefix("via").strip()
            if who:
                via[current].add(canonicalize_name(who.split(" ")[0]))
    only = {client}
    while True:
        more = {name for name, users in via.items() if name not in only and users and users <= only}
        if not more:
            return only
        only |= more


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    pins = locked()
    for client, statement in CLIENTS.items():
        try:
            version = metadata.version(client)
        except metadata.PackageNotFoundError:
            continue
        m = measure_import(statement, args.repeat)
        mine = locked_only_for(client)
        added = sorted(d for d in closure(client) if d not in pins or d in mine)
        size = sum(installed_mib(d) for d in added)
        conflicts = []
        for dist in closure(client):
            for line in metadata.distribution(dist).requires or []:
                req = Requirement(line)
                name = canonicalize_name(req.name)
                if req.marker is None and name in pins and not req.specifier.contains(pins[name], prereleases=True):
                    conflicts.append(f"{dist} needs {req} (locked {name}=={pins[name]})")
        print(
            f"{client} {version}: import + client {m['seconds']:.2f} s, {m['rss_mib']:.0f} MiB peak RSS, "
            f"{m['modules']:.0f} modules"
        )
        print(f"  adds {len(added)} distributions, {size:.1f} MiB installed: {', '.join(added)}")
        print(f"  against the lock: {'; '.join(conflicts) or 'no conflict'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
