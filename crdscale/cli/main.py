"""The ``crdscale`` command: one module per subcommand under ``crdscale.cli``.

Each subcommand module defines ``Command`` with a docstring (its help text),
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import ast
import errno
import importlib
import importlib.util
import logging
import os
import signal
import sys
from collections.abc import Collection, Sequence

from crdscale import __version__
from crdscale.allocator import keep_freed_memory
from crdscale.errors import CrdscaleError, UsageError

# name -> module under crdscale.cli; the order is the order of `crdscale --help`. A two-word name is a
# command under another whose own positionals leave no room for argparse's subcommands (`crdscale
# footprint CRD_SOURCE...`): main() joins its two words of the command line into the name.
SUBCOMMANDS = {
    "up": "up",
    "down": "down",
    "status": "status",
    "binaries": "binaries",
    "image": "image",
    "generate": "generate",
    "install": "install",
    "clean": "clean",
    "run": "run",
    "top": "top",
    "analyze": "analyze",
    "report": "report",
    "compare": "compare",
    "ab": "ab",
    "history": "history",
    "footprint": "footprint",
    "footprint fit": "footprint_fit",
    "lab": "lab",
    "probe": "probe",
    "recover": "recover",
    "cell": "cell",
}

# The optional extras of pyproject.toml by the modules they bring, and the commands that need
# them: a missing one is named in one line instead of an ImportError deep in a traceback.
_REPORT_MODULES = ("jupytext", "nbclient", "nbconvert", "nbformat", "papermill", "ipykernel", "jinja2", "plotly")
# Each extra lists every module it brings (lab includes report's), so a command names the one extra it needs at once.
EXTRAS = {"report": _REPORT_MODULES, "lab": (*_REPORT_MODULES, "jupyterlab")}
COMMAND_EXTRAS = {"report": ("report",), "lab": ("lab",)}

DESCRIPTION = """\
Profile kube-apiserver as CustomResourceDefinitions pile up.

First look, no cluster needed (a committed real run):
  crdscale analyze data/reference-run          # heap per CRD by cause, with 95% intervals
  crdscale lab data/reference-run              # its notebooks in JupyterLab
  crdscale compare data/reference-run-v1.24.0 data/reference-run

Typical flow on a real API server:
  crdscale run                                 # the default scenario, end to end, on a local kube-apiserver
  crdscale report runs/<run>                   # notebooks -> HTML report + findings.md
  crdscale up                                  # or step by step: local etcd + kube-apiserver on 127.0.0.1
  crdscale generate -g 50 -c 500 -o crds/      # synthetic CRDs
  crdscale install crds/ --step 100 --serve watch
  crdscale top runs/<run>/profiles/heap-step05-crds0500.pb.gz
  crdscale down

Docs: docs/ (make docs builds the site), starting with docs/tutorials/first-look.md.
"""


def _load(module_name: str):
    return importlib.import_module(f"crdscale.cli.{module_name}").Command


def _help_from_source(module_name: str) -> str | None:
    """The help text of a subcommand module (its ``Command`` docstring, or the module's when the class
    reuses it) read from the source without importing it, so `crdscale --help` imports no subcommand."""
    spec = importlib.util.find_spec(f"crdscale.cli.{module_name}")
    if spec is None or not spec.origin:
        return None
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Command":
            doc = ast.get_docstring(node)
            reuses_module_doc = any(
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__doc__" for t in stmt.targets)
                and isinstance(stmt.value, ast.Name)
                and stmt.value.id == "__doc__"
                for stmt in node.body
            )
            return ast.get_docstring(tree) if doc is None and reuses_module_doc else doc
    return None


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (crdscale's own options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _join_command(argv: list[str], command: str | None) -> tuple[list[str], str | None]:
    """``argv`` and ``command`` with a two-word command of :data:`SUBCOMMANDS` (``footprint fit``) as one word."""
    if command is None:
        return argv, command
    at = argv.index(command)
    pair = f"{command} {argv[at + 1]}" if at + 1 < len(argv) else None
    if pair in SUBCOMMANDS:
        return [*argv[:at], pair, *argv[at + 2 :]], pair
    return argv, command


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``crdscale`` parser. ``load``: the subcommands whose modules are imported and whose arguments are
    added (default: all of them); the others appear in ``crdscale --help`` with their help read from source."""
    parser = argparse.ArgumentParser(
        prog="crdscale",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"crdscale {__version__}")
    # dest differs from the subcommands' own --quiet: a subparser's default would overwrite it.
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument(
        "-q", "--quiet", dest="log_quiet", action="store_true", help="print warnings and errors only (no progress)"
    )
    noise.add_argument("-v", "--verbose", dest="log_verbose", action="store_true", help="also print debug lines")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        command = None
        if load is None or name in load:
            command = _load(module_name)
            doc = (command.__doc__ or "").strip()
        else:
            doc = _help_from_source(module_name)
            if doc is None:  # no docstring found in the source: ask the module itself
                command = _load(module_name)
                doc = (command.__doc__ or "").strip()
            doc = doc.strip()
        sub = subparsers.add_parser(
            name,
            help=doc.splitlines()[0] if doc else None,
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command is not None:
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


class _StderrHandler(logging.Handler):
    """The library's ``logging`` under ``crdscale`` as the CLI prints its own lines: ``crdscale: MESSAGE``
    on the current ``sys.stderr`` (``crdscale: warning: MESSAGE`` from WARNING up), written above a
    progress bar when one is drawn so the bar is not torn."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        return f"crdscale: warning: {message}" if record.levelno >= logging.WARNING else f"crdscale: {message}"

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            tqdm = sys.modules.get("tqdm")  # imported only by commands that draw bars
            if tqdm is not None:
                tqdm.tqdm.write(line, file=sys.stderr)
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def log_to_stderr(level: int = logging.INFO) -> None:
    """Attach the CLI's handler to the ``crdscale`` logger once, at ``level`` (notebooks and library
    users never call this: the package's ``NullHandler`` keeps them quiet)."""
    logger = logging.getLogger("crdscale")
    logger.setLevel(level)
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())


def _log_level(args: argparse.Namespace) -> int:
    if args.log_verbose:
        return logging.DEBUG
    return logging.WARNING if args.log_quiet else logging.INFO


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the exit code (tests call this directly)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while the subcommand's modules load or its flags are read
        print("crdscale: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any("\x00" in arg for arg in argv):  # no shell can pass one; os calls would raise ValueError deep inside
        print("crdscale: error: an argument contains a NUL byte", file=sys.stderr)
        return UsageError.exit_code
    # Only the subcommand named is imported: `crdscale --help` and `crdscale X --help` stay fast.
    argv, command_name = _join_command(argv, _command_in(argv))
    parser = build_parser(load=[command_name] if command_name in SUBCOMMANDS else ())
    args = parser.parse_args(argv)
    if not getattr(args, "_command", None):
        parser.print_help()
        return 2
    keep_freed_memory()  # numpy's temporaries of a few MB are reused, not faulted in again
    log_to_stderr(_log_level(args))
    if sys.stdout is None:  # started with stdout closed (`>&-`): what the command prints would be lost
        print("crdscale: error: standard output is closed; redirect it (> FILE or > /dev/null)", file=sys.stderr)
        return 1
    try:
        require_extras(args.command)
        code = int(args._command.run(args) or 0)
        sys.stdout.flush()  # a full disk (`> /dev/full`) fails here, not silently at exit
        return code
    except CrdscaleError as err:
        print(f"crdscale: error: {err}", file=sys.stderr)
        if err.details:
            print(err.details.rstrip(), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("crdscale: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except BrokenPipeError:
        # The reader went away (`crdscale generate -o - | head`): stop quietly, with the status of a
        # process ended by SIGPIPE as other Unix tools, and keep Python's exit flush off the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE
    except OSError as err:
        if err.errno in PATH_ERRNOS:  # a path the user gave that cannot be used: theirs to change
            where = f": {err.filename}" if err.filename else ""
            print(f"crdscale: error: {err.strerror or err}{where}"[:1000], file=sys.stderr)
            return UsageError.exit_code
        if err.errno not in WRITE_ERRNOS:
            raise
        # A full disk or a closed descriptor: one line, and Python's exit flush kept off the broken stdout.
        _detach_stdout()
        print(f"crdscale: error: cannot write output: {err.strerror or err}", file=sys.stderr)
        return 1


# Write failures that are the machine's, not crdscale's: a full disk (or quota), a closed or broken
# descriptor, an I/O error of the device. Anything else raised as OSError keeps its traceback.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EBADF, errno.EIO, errno.EFBIG})

# A path given that cannot be used as one: too long, a loop of links, a read-only file system, no
# permission, a file where a directory is needed or the reverse. Raised wherever the path is first used,
# they are one line naming the path (exit 2) instead of a traceback.
PATH_ERRNOS = frozenset(
    {errno.ENAMETOOLONG, errno.ELOOP, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR}
)


def _detach_stdout() -> None:
    """Point stdout's descriptor at /dev/null and drop its buffer, so the interpreter's exit flush cannot fail
    again (and print 'Exception ignored' with exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
