"""Outputs never destroy inputs: the checks every command that writes files makes, and the staged write.

* An output equal to an input, inside an input directory, or a directory holding an input is refused
  (:func:`check_not_input`): ``top P --folded P`` would overwrite the profile it reads.
* Writing into a run directory is reserved for ``crdscale analyze`` (:func:`check_not_in_run`): a run's
  files are its evidence.
* A non-empty output directory is refused unless ``--force`` (:func:`check_out_directory`).
* A directory is written into a temporary sibling and renamed into place, under a lock
  (:func:`replacing_directory`): a second writer gets a one-line error, a reader never sees a mixture of
  two writers, and a failed write leaves what was there before.

Every refusal is a one-line :class:`UsageError`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from crdscale.errors import UsageError


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_not_input(
    output: str | Path,
    inputs: Iterable[str | Path | None],
    flag: str,
    *,
    allow: Iterable[str | Path] = (),
) -> None:
    """UsageError (one line) when ``output`` is one of ``inputs``, lies inside an input directory, or is a
    directory holding an input: writing it would overwrite (or, replaced whole, delete) what is read.
    ``allow``: outputs inside an input that are its own (a run's ``report/``). ``None`` inputs are skipped."""
    out = _resolved(output)
    allowed = {_resolved(a) for a in allow}
    for given in inputs:
        if given is None or str(given) == "-":
            continue
        source = _resolved(given)
        if out == source:
            raise UsageError(f"{flag} {output}: is the input {given}; write somewhere else")
        if _inside(out, source) and not any(_inside(out, a) for a in allowed):
            raise UsageError(f"{flag} {output}: is inside the input {given}; write somewhere else")
        if _inside(source, out):
            raise UsageError(f"{flag} {output}: holds the input {given}; write somewhere else")


def check_distinct(outputs: Iterable[tuple[str, str | Path | None]]) -> None:
    """UsageError when two flags name the same output file (``--folded X --callgrind X`` loses one)."""
    seen: dict[Path, str] = {}
    for flag, path in outputs:
        if not path or str(path) == "-":
            continue
        key = _resolved(path)
        if key in seen:
            raise UsageError(f"{flag} {path}: also given to {seen[key]}; each output needs its own file")
        seen[key] = flag


def run_directory_of(path: str | Path) -> Path | None:
    """The run (or experiment) directory ``path`` is or lies in, else ``None``."""
    # lazy: rundir.layout (and its 10 modules) only when checking: generate, top and report --help do not load it
    from crdscale.rundir.layout import is_experiment_directory, is_run_directory

    resolved = _resolved(path)
    for folder in (resolved, *resolved.parents):
        try:
            if is_run_directory(folder) or is_experiment_directory(folder):
                return folder
        except OSError:  # an unreadable parent: not ours to judge
            return None
    return None


def check_not_in_run(output: str | Path, flag: str, *, allow: Iterable[str | Path] = ()) -> None:
    """UsageError when ``output`` is or lies in a run directory: only ``crdscale analyze`` writes there
    (``allow``: a place a command owns in a run, as ``report``'s default ``RUN_DIR/report``)."""
    run = run_directory_of(output)
    out = _resolved(output)
    if run is not None and not any(_inside(out, _resolved(a)) for a in allow):
        raise UsageError(
            f"{flag} {output}: is inside the run directory {run}; a run's files are written by crdscale run and "
            "analyze only, write somewhere else"
        )


def is_nonempty_directory(path: str | Path) -> bool:
    path = Path(path)
    try:
        return path.is_dir() and any(path.iterdir())
    except OSError:
        return False


def check_out_directory(
    output: str | Path,
    *,
    inputs: Iterable[str | Path | None] = (),
    flag: str = "--out",
    force: bool = False,
    allow: Iterable[str | Path] = (),
) -> Path:
    """All the checks on an output directory a flag names, before any work: not an input nor inside one
    nor holding one (:func:`check_not_input`), not in a run directory, not a file, and empty unless
    ``force``. Returns ``output`` as a Path (not created: :func:`replacing_directory` makes it)."""
    allow = list(allow)
    check_not_input(output, inputs, flag, allow=allow)
    check_not_in_run(output, flag, allow=allow)
    path = Path(output)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: exists and is not a directory")
    if not force and is_nonempty_directory(path):
        raise UsageError(f"{flag} {path}: is not empty (pass --force to replace it, or choose a new directory)")
    parent = next((p for p in (path.absolute().parent, *path.absolute().parents) if p.exists()), Path("/"))
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create it ({parent} is not a writable directory)")
    return path


@contextmanager
def replacing_directory(path: str | Path, flag: str = "--out") -> Iterator[Path]:
    """Yield an empty temporary sibling of ``path`` to write into; on success it replaces ``path``
    (renamed into place), on an error it is removed and ``path`` is left as it was.

    A lock on ``.<name>.lock`` next to ``path`` is held meanwhile: a second writer of the same
    directory gets a one-line UsageError at once instead of mixing its files with the first's."""
    path = Path(path).absolute()
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        lock_path = parent / f".{path.name}.lock"
        lock = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot create ({err.strerror or err})") from None
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UsageError(
                    f"{flag} {path}: another crdscale is writing it now; wait for it or choose another directory"
                ) from None
            raise
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp"))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp's 0700 would become the output's mode
        try:
            yield staging
            old = None
            if path.is_symlink() or path.exists():
                old = parent / f".{path.name}.{uuid.uuid4().hex[:8]}.old"
                os.rename(path, old)
            os.rename(staging, path)
            if old is not None:
                if old.is_dir() and not old.is_symlink():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    old.unlink()
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        finally:
            try:
                os.unlink(lock_path)  # while still held: the next writer makes a fresh one
            except OSError:
                pass
    finally:
        os.close(lock)


def relocate(path: Path, staging: Path, final: Path) -> Path:
    """``path`` written under ``staging`` as it is named once ``staging`` became ``final``."""
    try:
        return Path(final) / Path(path).relative_to(staging)
    except ValueError:
        return Path(path)
