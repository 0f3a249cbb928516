"""Record the Status bodies kube-apiserver answers with, for the fake API server of the unit tests.

    python scripts/record_fakeapi_status.py KUBECONFIG tests/data/fakeapi/status.json

Against a disposable (local) cluster: creates one labelled CRD, provokes
AlreadyExists, Conflict, Invalid, a failed delete precondition and NotFound,
deletes the CRD again, and writes the answers with the names and uids turned
into ``{name}``/``{want}``/``{have}`` placeholders. A 429 cannot be provoked
on demand; ``too_many_requests`` is kept from the existing file (APF's rejection
is plain text, not a Status: ``k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go``).
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from pathlib import Path

from crdscale.cluster.clients import connect
from crdscale.fsutil import read_json, write_json_atomic
from crdscale.ownership import ownership_labels

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _crd(group: str, schema_type: str | None = "object") -> dict:
    schema = {"type": schema_type} if schema_type else {"properties": {"x": {"type": "string"}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}", "labels": ownership_labels("status-recording")},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }


def _template(body: dict, **values: str) -> dict:
    text = json.dumps(body)
    for placeholder, value in values.items():
        text = text.replace(value, "{" + placeholder + "}")
    return json.loads(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kubeconfig")
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    cluster = connect(args.kubeconfig)
    out: dict = {"_recorded_from": f"{cluster.server_version()} by scripts/record_fakeapi_status.py"}
    group = f"status-{secrets.token_hex(3)}.crdscale.io"
    crd = _crd(group)
    name = crd["metadata"]["name"]
    created = cluster.post(CRDS, crd).json()
    try:
        out["already_exists"] = _template(cluster.post(CRDS, crd).json(), name=name)
        stale = dict(created, metadata={**created["metadata"], "resourceVersion": "1"})
        out["conflict"] = _template(cluster.put(f"{CRDS}/{name}", stale).json(), name=name)
        bad = _crd(f"bad-{group}", schema_type=None)
        out["invalid"] = _template(cluster.post(CRDS, bad).json(), name=bad["metadata"]["name"])
        wrong = "00000000-0000-0000-0000-000000000000"
        answer = cluster.delete(f"{CRDS}/{name}", {"preconditions": {"uid": wrong}}).json()
        out["precondition"] = _template(answer, name=name, want=wrong, have=created["metadata"]["uid"])
        out["precondition"]["message"] = out["precondition"]["message"].replace("UID", "{key}")
        missing = f"missing.{group}"
        out["not_found"] = _template(cluster.get(f"{CRDS}/{missing}").json(), name=missing)
    finally:
        cluster.delete(f"{CRDS}/{name}")
        time.sleep(0.5)
        cluster.close()
    previous = read_json(args.out) if args.out.exists() else {}
    out["too_many_requests"] = previous.get("too_many_requests")
    write_json_atomic(args.out, out)
    print(f"{args.out}: {', '.join(k for k in out if not k.startswith('_'))}")


if __name__ == "__main__":
    main()
