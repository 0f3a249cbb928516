"""The ``crdscale`` command: one module per subcommand under ``crdscale.cli``.

Each subcommand module defines ``Command`` with a docstring (its help text),
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import signal
import sys
from collections.abc import Sequence

from crdscale import __version__
from crdscale.allocator import keep_freed_memory
from crdscale.errors import CrdscaleError, UsageError

# name -> module under crdscale.cli; the order is the order of `crdscale --help`.
SUBCOMMANDS = {
    "up": "up",
    "down": "down",
    "status": "status",
    "binaries": "binaries",
    "generate": "generate",
    "install": "install",
    "clean": "clean",
    "run": "run",
    "top": "top",
    "analyze": "analyze",
    "report": "report",
    "compare": "compare",
    "footprint": "footprint",
    "lab": "lab",
    "probe": "probe",
    "recover": "recover",
}

# The optional extras of pyproject.toml by the modules they bring, and the commands that need
# them: a missing one is named in one line instead of an ImportError deep in a traceback.
EXTRAS = {
    "report": ("jupytext", "nbclient", "nbconvert", "nbformat", "papermill", "ipykernel", "jinja2"),
    "lab": ("jupyterlab",),
}
COMMAND_EXTRAS = {"report": ("report",), "lab": ("report", "lab")}

DESCRIPTION = """\
Profile kube-apiserver as CustomResourceDefinitions pile up.

Typical flow:
  crdscale up                                  # local etcd + kube-apiserver on 127.0.0.1
  crdscale generate -g 50 -c 500 -o crds/      # synthetic CRDs
  crdscale install crds/ --step 100 --serve watch
  crdscale run                                 # the default scenario, end to end
  crdscale top runs/<run>/profiles/heap-step05-crds0500.pb.gz
  crdscale lab runs/<run>                      # the run's notebooks in JupyterLab
  crdscale down
"""


def _load(module_name: str):
    return importlib.import_module(f"crdscale.cli.{module_name}").Command


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI's parser; with ``only`` (a subcommand), one that knows just it: importing every
    command's module costs ~1 s of CPU (pandas, requests...) that one command may not need."""
    parser = argparse.ArgumentParser(
        prog="crdscale",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"crdscale {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            command = _load(module_name)
        except ModuleNotFoundError as err:
            if err.name == f"crdscale.cli.{module_name}":
                continue  # not built yet
            raise
        doc = (command.__doc__ or "").strip()
        sub = subparsers.add_parser(
            name,
            help=doc.splitlines()[0] if doc else None,
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(sub)
        sub.set_defaults(_command=command)
    return parser


def require_extras(command: str) -> None:
    """UsageError naming the extra (and the pip command) when a module ``command`` needs is missing."""
    for extra in COMMAND_EXTRAS.get(command, ()):
        for module in EXTRAS[extra]:
            if importlib.util.find_spec(module) is None:
                raise UsageError(
                    f"crdscale {command} needs the '{extra}' extra ({module} is not installed): "
                    f"pip install 'crdscale[{extra}]'"
                )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the exit code (tests call this directly)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_command", None):
        parser.print_help()
        return 2
    keep_freed_memory()  # numpy's temporaries of a few MB are reused, not faulted in again
    try:
        require_extras(args.command)
        return int(args._command.run(args) or 0)
    except CrdscaleError as err:
        print(f"crdscale: error: {err}", file=sys.stderr)
        if err.details:
            print(err.details.rstrip(), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("crdscale: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
