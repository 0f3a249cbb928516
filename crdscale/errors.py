"""One exception family for everything a user can cause.

The CLI turns a :class:`CrdscaleError` into a one-line message on stderr and
its ``exit_code``; anything else is a bug and keeps its traceback. Two exits
are not errors of this family: 130 after Ctrl-C, and 141 (128 + SIGPIPE, as
other Unix tools) when the reader of stdout went away (``... -o - | head``),
which ends the command quietly.
"""

from __future__ import annotations


class CrdscaleError(Exception):
    """Base of all user-facing errors. ``str(err)`` is a single line."""

    exit_code = 1

    def __init__(self, message: str, *, details: str | None = None):
        # One line only: the CLI prints it as is, and multi-line messages hide
        # the part that matters in scrollback. Supporting evidence (a log tail)
        # goes in ``details``, printed after the line.
        super().__init__(" ".join(str(message).split()))
        self.details = details


class UsageError(CrdscaleError):
    """Bad flags, bad scenario file, bad input file."""

    exit_code = 2


class EvidenceError(UsageError):
    """A run directory whose files contradict each other where its numbers come from (a profile of
    another program or build, profiles swapped or saved twice, a CRD count that falls): the numbers
    are refused (exit 2, as any bad input file; see crdscale.rundir.evidence)."""


class BinaryError(CrdscaleError):
    """A binary could not be found or built (kube-apiserver, etcd, prometheus, kubectl)."""

    exit_code = 3


class ClusterError(CrdscaleError):
    """The API server (local or remote) is unreachable, unready or died."""

    exit_code = 4


class CRDError(CrdscaleError):
    """A CRD file is malformed, or the server rejected a CRD."""

    exit_code = 5


class ProfileError(CrdscaleError):
    """Input that is not a valid pprof profile."""

    exit_code = 6


class RunInterrupted(CrdscaleError):
    """The user pressed Ctrl-C or sent SIGTERM."""

    exit_code = 130
