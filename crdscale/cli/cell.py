from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from crdscale.errors import UsageError

log = logging.getLogger(__name__)


class Command:
    """Run one cell of a cluster experiment: what each pod of 'crdscale run --cluster' runs.

    SPEC_DIR holds the experiment's experiment.json and indexes.json (the Job's
    ConfigMap, mounted); the cell is indexes.json[INDEX], INDEX from --index or
    $JOB_COMPLETION_INDEX (set by the Job controller). SPEC_DIR may hold an A/B's
    ab.json instead ('crdscale ab --cluster'): the cell is then one side of one
    pair (p02-changed). The cell runs exactly as 'crdscale run' runs it on this machine, in OUT/<experiment id>/, on a control
    plane of its own. Its run directory, failed or not, then goes to the results
    store at <experiment id>/<cell name>/<run directory>/, where 'crdscale report
    EXPERIMENT' finds it. Exits non-zero when the cell failed, so the Job retries
    the index (backoffLimitPerIndex); exit 2 (a bad scenario) is not retried.

    Examples (in a pod; by hand only to debug an image):
      JOB_COMPLETION_INDEX=0 crdscale cell /etc/crdscale/experiment --results file:///tmp/results
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("spec_dir", metavar="SPEC_DIR", help="directory with experiment.json and indexes.json")
        parser.add_argument("--index", type=int, help="completion index (default: $JOB_COMPLETION_INDEX)")
        parser.add_argument("--results", metavar="URL", required=True, help="results store (file:///PATH, s3://...)")
        parser.add_argument("--out", metavar="DIR", default="runs", help="where the cell's run directory is written")

    @staticmethod
    def run(args) -> int:
        # lazy: would bring pandas, numpy, pyarrow into --help
        from crdscale.cli.common import run_with_progress
        from crdscale.fsutil import read_json, write_json_atomic
        from crdscale.results.store import cell_prefix, open_store
        from crdscale.rundir import layout
        from crdscale.scenario.experiment import Experiment
        from crdscale.scenario.fanout import EXPERIMENT_KEY, INDEXES_KEY

        spec = Path(args.spec_dir)
        try:
            manifest = read_json(spec / EXPERIMENT_KEY)
            indexes = json.loads((spec / INDEXES_KEY).read_text())
        except (OSError, ValueError) as err:
            raise UsageError(f"{spec}: no readable {EXPERIMENT_KEY} and {INDEXES_KEY} ({err})") from None
        index = args.index
        if index is None:
            text = os.environ.get("JOB_COMPLETION_INDEX", "")
            if not text.isdigit():
                raise UsageError("no --index and no $JOB_COMPLETION_INDEX")
            index = int(text)
        if not 0 <= index < len(indexes):
            raise UsageError(f"index {index}: this Job has indexes 0-{len(indexes) - 1}")
        cell = indexes[index]
        experiment_id = (manifest.get("cluster") or {}).get("experiment_id")
        if not isinstance(experiment_id, str) or not experiment_id:
            raise UsageError(f"{spec}/{EXPERIMENT_KEY}: not a cluster experiment's (no cluster.experiment_id)")
        store = open_store(args.results)  # before the run: a bad URL fails in a second, not after it
        folder = Path(args.out) / experiment_id
        if manifest.get("kind") == "ab":  # an A/B's run ('crdscale ab --cluster'): one side of one pair
            # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
            from crdscale.scenario.ab import AB, AB_MANIFEST

            write_json_atomic(folder / AB_MANIFEST, manifest)
            ab, experiment = AB.open(folder), None
            ab.check_for_pods()
        else:
            ab = None
            write_json_atomic(folder / layout.EXPERIMENT_MANIFEST, manifest)
            experiment = Experiment.open(folder)
            if cell not in {c.cell.name for c in experiment.cells}:
                raise UsageError(f"index {index}: cell {cell!r} is not in the experiment's matrix")
        log.info(f"experiment {experiment_id}: index {index} is cell {cell}")
        before = {p.name for p in folder.iterdir()}
        try:
            if ab is not None:
                ab.run_one(cell, run_with_progress)
            else:
                experiment.run(run_with_progress, only={cell})
        finally:
            # Failed or interrupted runs too: their logs say why, and a retry leaves its own directory.
            for run_dir in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in before):
                store.put_tree(run_dir, cell_prefix(experiment_id, cell, run_dir.name))
                log.info(f"stored {run_dir.name} in {args.results}")
        return 0
