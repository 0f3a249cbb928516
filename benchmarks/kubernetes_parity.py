"""Parity: does kubernetes' config loader pass the kubeconfig/auth cases crdscale's own code passes?

Issue 22 asked to replace ``crdscale/cluster/kubeconfig.py`` and ``crdscale/cluster/auth.py``
with the official client's ``kubernetes.config`` (``load_kube_config`` /
``new_client_from_config``, ``KubeConfigMerger`` for a ``$KUBECONFIG`` list) wherever it passes
the behaviours crdscale's auth tests check. The cases are crdscale.testing.kubeconfig_parity's
scenarios; tests/unit/test_kubeconfig_parity.py holds crdscale to every one of them (and
kubernetes to the outcomes docs/dependencies.md records, where it is installed). This script
prints kubernetes' column: one row per scenario, ``ok`` or the exact way it fails.

``kubernetes`` is not a crdscale dependency; run this in a scratch venv that has it::

    python3 -m venv /tmp/deps-venv
    /tmp/deps-venv/bin/pip install -r requirements.lock --no-deps && /tmp/deps-venv/bin/pip install kubernetes
    PYTHONPATH=$PWD /tmp/deps-venv/bin/python benchmarks/kubernetes_parity.py [--json OUT]

Reports only; exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from crdscale.testing import kubeconfig_parity as parity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    parity.quiet_kubernetes_logs()
    out = parity.measure(["kubernetes"])
    names = list(out["scenarios"])
    print(f"kubernetes: {out['kubernetes_version'] or 'not installed'}; {len(names)} scenarios")
    results = out["results"].get("kubernetes")
    if results is not None:
        print("| scenario | kubernetes |")
        print("|---|---|")
        for name in names:
            print(f"| {name} | " + results[name].replace("|", "/") + " |")
        print(f"kubernetes: {sum(v == 'ok' for v in results.values())}/{len(names)} pass")
    print(f"({time.monotonic() - started:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
