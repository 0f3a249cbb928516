"""Run directories to and from a real S3-compatible server (versitygw over a local directory).

versitygw is built from Go modules and cached like etcd (scripts/bootstrap.sh builds it), so
this runs in CI; the S3 client is crdscale's own (MinIO's library), configured only through
the environment an AWS tool reads.
"""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

import pytest

from crdscale.errors import UsageError
from crdscale.results.store import open_store
from crdscale.results.versitygw import LocalS3
from crdscale.rundir.reader import read_run

# versitygw: make test builds it while the other tests run (scripts/test.sh).
pytestmark = [pytest.mark.integration, pytest.mark.extra_binaries]
REFERENCE_RUN = Path(__file__).resolve().parents[2] / "data" / "reference-run"


@pytest.fixture(scope="module")
def s3():
    with LocalS3() as server:
        yield server


@pytest.fixture
def s3_env(s3, monkeypatch, tmp_path):
    for name, value in s3.client_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-such-credentials"))
    return s3


def _same_tree(a: Path, b: Path) -> None:
    files_a = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    _, mismatch, errors = filecmp.cmpfiles(a, b, files_a, shallow=False)
    assert not mismatch and not errors


def test_run_directories_round_trip(s3_env, tmp_path):
    bucket = s3_env.make_bucket("results")
    store = open_store(f"{bucket}/team/experiments")
    for cell in ("cell-000", "cell-001"):
        store.put_tree(REFERENCE_RUN, f"exp-1/{cell}")
    store.put_tree(REFERENCE_RUN / "profiles", "exp-2/cell-000")

    assert store.list_prefixes("") == ["exp-1", "exp-2"]
    assert store.list_prefixes("exp-1") == ["cell-000", "cell-001"]
    assert store.list_prefixes("exp-1/") == ["cell-000", "cell-001"]
    assert store.list_prefixes("exp-9") == []
    with pytest.raises(UsageError, match="without '..'"):
        store.list_prefixes("../other")

    out = tmp_path / "gathered" / "cell-001"
    store.get_tree("exp-1/cell-001", out)
    _same_tree(REFERENCE_RUN, out)
    # What came back is a run directory crdscale reads as the original.
    original, gathered = read_run(REFERENCE_RUN), read_run(out)
    assert gathered.manifest == original.manifest
    # The objects are files of the server's directory: the bucket holds exactly what was put.
    on_disk = s3_env.data / "results" / "team" / "experiments" / "exp-1" / "cell-000"
    _same_tree(REFERENCE_RUN, on_disk)


def test_a_second_put_replaces_files(s3_env, tmp_path):
    store = open_store(s3_env.make_bucket("again"))
    run = tmp_path / "run"
    shutil.copytree(REFERENCE_RUN, run)
    store.put_tree(run, "e/c")
    (run / "manifest.json").write_text('{"status": "finished"}\n')
    store.put_tree(run, "e/c")
    store.get_tree("e/c", tmp_path / "back")
    assert (tmp_path / "back" / "manifest.json").read_text() == '{"status": "finished"}\n'


def test_errors_are_one_line(s3_env, tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="NoSuchBucket"):
        open_store("s3://no-such-bucket/x").put_tree(REFERENCE_RUN, "e")
    with pytest.raises(UsageError, match="nothing under s3://again2/missing"):
        open_store(s3_env.make_bucket("again2")).get_tree("missing", tmp_path / "out")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(UsageError, match="SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied"):
        open_store("s3://again2").list_prefixes("")
    with pytest.raises(UsageError, match="do not go in the URL"):
        open_store("s3://key:secret@bucket/x")
