"""Key material written for requests/ssl lives in a private directory that outlives no process."""

import os
import stat
import subprocess
import sys

from crdscale.cluster.auth import CREDENTIALS_PREFIX, _PrivateFiles, remove_orphaned_credentials


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_files_are_private_and_named_after_the_process(tmp_path):
    files = _PrivateFiles(parent=str(tmp_path))
    path = files.write("client.key", b"secret")
    directory = os.path.dirname(path)
    assert os.path.basename(directory).startswith(f"{CREDENTIALS_PREFIX}{os.getpid()}-")
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700 and stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_directories_of_dead_processes_are_removed_by_the_next_one(tmp_path):
    orphan = tmp_path / f"{CREDENTIALS_PREFIX}{_dead_pid()}-abc"
    alive = tmp_path / f"{CREDENTIALS_PREFIX}{os.getppid()}-def"  # our parent still runs
    old_style = tmp_path / f"{CREDENTIALS_PREFIX}xyz"  # no pid in the name: left alone
    other = tmp_path / "crdscale-lab-123-x"
    for d in (orphan, alive, old_style, other):
        d.mkdir()
        (d / "0001-ca.crt").write_bytes(b"x")
    _PrivateFiles(parent=str(tmp_path)).write("ca.crt", b"y")
    assert not orphan.exists() and alive.exists() and old_style.exists() and other.exists()
    assert remove_orphaned_credentials(tmp_path) == []
