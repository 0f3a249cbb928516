"""Open the notebooks in JupyterLab, bound to run directories.

Examples:
  crdscale lab                                  # the shipped notebooks, on data/reference-run
  crdscale lab runs/20261122T031500Z-default    # that run's own notebooks
  crdscale lab runs/<run-a> runs/<run-b> --no-execute
  crdscale lab runs/20261127T180250Z-ab-reference  # an A/B: the A/B notebook on it

For each RUN_DIR, the notebooks that apply to it (memory and heap attribution;
discovery, LIST and APF when the run has their probe tables; for an A/B
directory of 'crdscale ab', the A/B notebook) are copied once
into RUN_DIR/notebooks/NAME.ipynb with run_dir set (papermill's parameters
cell) and executed, so they open with their figures. A copy that exists is
never overwritten: edit it freely; delete it to get a fresh one. Without
RUN_DIR, the notebooks/ of this checkout open as they are (py:percent files,
shown as notebooks), reading data/reference-run.

JupyterLab listens on 127.0.0.1 only, on a free port, with a random token; the
URL of the first notebook is printed on stdout. Ctrl-C (or SIGTERM) stops it
and its kernels.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from pathlib import Path

from crdscale.cli.common import add_notebook_arguments

log = logging.getLogger(__name__)


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "run_dirs",
            nargs="*",
            metavar="RUN_DIR",
            help="run directory written by `crdscale run` or a probe, or an A/B directory (`crdscale ab`)",
        )
        parser.add_argument(
            "--no-execute", action="store_true", help="write new copies with run_dir set but do not run them first"
        )
        add_notebook_arguments(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would bring pandas, numpy, pyarrow, requests into --help
        from crdscale.report.lab import LabServer, bind_notebooks, install_lab_settings
        from crdscale.report.render import default_notebooks_dir

        notebooks_dir = (Path(args.notebooks) if args.notebooks else default_notebooks_dir()).resolve()
        if args.run_dirs:
            bound = [
                b
                for run_dir in args.run_dirs
                for b in bind_notebooks(run_dir, notebooks_dir, execute=not args.no_execute, timeout=args.timeout)
            ]
            paths = [b.path for b in bound]
            for b in bound:
                if not b.created:
                    log.info(f"kept your copy {b.path}")
            root = Path(os.path.commonpath([Path(r).resolve() for r in args.run_dirs]))
        else:
            root = notebooks_dir.resolve()
            paths = sorted(root.glob("*.py"), key=lambda p: (p.stem != "memory", p.name))
        try:
            install_lab_settings()
        except OSError as err:
            log.warning(
                f"could not install the JupyterLab settings ({err}); open .py notebooks with "
                "right click > Open With > Notebook"
            )

        # SIGTERM ends the lab as Ctrl-C does: the server and its kernels are stopped. SIGINT is set
        # too: a process started in the background by a non-interactive shell (a script's `&`, CI)
        # inherits SIGINT ignored, and Python then leaves it ignored.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        server = LabServer(root)
        try:
            server.start()
            for path in paths[1:]:
                log.info(f"also: {server.url(path)}")
            log.info("JupyterLab is running; Ctrl-C stops it")
            print(server.url(paths[0]) if paths else server.url(), flush=True)
            code = server.wait()
            log.info(f"JupyterLab exited with code {code}")
            return 1 if code else 0
        except KeyboardInterrupt:
            log.info("stopping JupyterLab")
            return 0
        finally:
            server.stop()
