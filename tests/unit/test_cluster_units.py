"""Unit tests for the cluster layer that need no network or binaries."""

import os
import stat

import pytest
from cryptography import x509

from crdscale.cluster import binaries, gobuild, pki, versions
from crdscale.cluster.process import ProcessRecord
from crdscale.errors import UsageError
from crdscale.proc import start_ticks as _proc_start_ticks


@pytest.mark.parametrize("text,expected", [("1.24.0", "v1.24.0"), ("v1.37.1", "v1.37.1"), (" 1.36.0 ", "v1.36.0")])
def test_normalize_version(text, expected):
    assert versions.normalize_version(text) == expected


@pytest.mark.parametrize("bad", ["1.24", "latest", "v1.2.3-rc.1", ""])
def test_normalize_version_rejects_garbage(bad):
    with pytest.raises(UsageError):
        versions.normalize_version(bad)


def test_staging_version_maps_kubernetes_to_v0():
    assert versions.staging_version("v1.37.1") == "v0.37.1"
    assert versions.staging_version("v1.24.17") == "v0.24.17"


@pytest.mark.parametrize(
    "wanted,expected",
    [
        ("v1.37.3", "v1.37.2"),  # unserved patch -> the served one below it
        ("v1.36.6", "v1.36.0"),
        ("v1.35.0", "v1.34.0"),  # no 1.35 served -> nearest minor (ties prefer... either side)
        ("v1.24.5", "v1.24.0"),
    ],
)
def test_nearest_served_version(wanted, expected):
    got = versions.nearest_version(wanted, versions.KNOWN_SERVED_KUBE_VERSIONS)
    if wanted == "v1.35.0":
        assert got in ("v1.34.0", "v1.36.0")
    else:
        assert got == expected


def test_kube_apiserver_module_replaces_every_staging_module(tmp_path):
    gomod = tmp_path / "k.mod"
    gomod.write_text(
        "module k8s.io/kubernetes\n\ngo 1.26.0\n\nrequire (\n\tk8s.io/api v0.0.0\n)\n\n"
        "replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n"
    )
    program = binaries.kube_apiserver_program(
        "v1.37.1", module_info={"GoMod": str(gomod), "Time": "2026-09-23T17:06:22Z", "Origin": {"Hash": "abc"}}
    )
    text = program.go_mod()
    assert "go 1.26.0" in text
    assert "k8s.io/kubernetes v1.37.1" in text
    assert "\tk8s.io/api => k8s.io/api v0.37.1" in text
    assert "\tk8s.io/client-go => k8s.io/client-go v0.37.1" in text
    assert "github.com/x/y" not in text  # only staging modules are replaced
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.1" in program.ldflags
    assert "app.NewAPIServerCommand()" in program.main_go


def test_build_reports_failing_step_and_log(tmp_path, monkeypatch):
    if not gobuild.shutil.which("go"):
        pytest.skip("needs Go")
    program = gobuild.GoProgram(
        binary_name="broken",
        out_dir=tmp_path,
        go_directive="go 1.22",
        requires={},
        main_go="package main\nfunc main() { undefined() }\n",
    )
    with pytest.raises(gobuild.BinaryError) as err:
        gobuild.build(program)
    assert "go build" in str(err.value) and str(program.log_path) in str(err.value)
    assert "\n" not in str(err.value)
    assert "undefined" in err.value.details


def test_credentials_are_private_and_valid_for_loopback(tmp_path):
    creds = pki.create_credentials(tmp_path / "pki")
    for private in (creds.serving_key, creds.sa_private_key, creds.token_file, tmp_path / "pki" / "ca.key"):
        assert stat.S_IMODE(os.stat(private).st_mode) == 0o600, private
    cert = x509.load_pem_x509_certificate(creds.serving_cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    token, user, _uid, groups = creds.token_file.read_text().strip().split(",")
    assert len(token) >= 32 and user == pki.ADMIN_USER and "system:masters" in groups


def test_process_record_detects_recycled_pid():
    me = ProcessRecord("self", os.getpid(), _proc_start_ticks(os.getpid()), "")
    assert me.alive()
    impostor = ProcessRecord("self", os.getpid(), (me.start_ticks or 0) + 1, "")
    assert not impostor.alive()


def test_instance_whose_starter_died_before_any_server_is_stale(tmp_path, monkeypatch):
    import subprocess

    from crdscale.cluster.instances import list_instances
    from crdscale.fsutil import write_json_atomic

    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    starter = {"name": "starter", "pid": dead.pid, "start_ticks": 1, "log": ""}
    write_json_atomic(
        tmp_path / "instances" / "x" / "instance.json",
        {"name": "x", "status": "starting", "created_at": "2026-01-01T00:00:00Z", "starter": starter, "processes": []},
    )
    me = {"name": "starter", "pid": os.getpid(), "start_ticks": _proc_start_ticks(os.getpid()), "log": ""}
    write_json_atomic(
        tmp_path / "instances" / "y" / "instance.json",
        {"name": "y", "status": "starting", "created_at": "2026-01-01T00:00:01Z", "starter": me, "processes": []},
    )
    assert {i.name: i.status for i in list_instances()} == {"x": "stale", "y": "starting"}


# Recorded from `go mod tidy` of kube-apiserver v1.32.13 and v1.31.14 against this machine's module
# proxy (2026-11-24): a mirror that serves k8s.io/kubernetes@V but not all of its staging modules.
TIDY_UNSERVED_LOG = """\
go: crdscale.local/kube-apiserver/cmd/kube-controller-manager imports
\tk8s.io/kubernetes/pkg/controller/endpointslice imports
\tk8s.io/endpointslice/metrics: k8s.io/endpointslice@v0.32.13: reading https://proxy.golang.org/k8s.io/endpointslice/@v/v0.32.13.zip: 403 Forbidden
\tserver response: This module version is not available.
\tk8s.io/endpointslice/util: k8s.io/endpointslice@v0.32.13: reading https://proxy.golang.org/k8s.io/endpointslice/@v/v0.32.13.zip: 403 Forbidden
\tk8s.io/cluster-bootstrap/util/tokens: k8s.io/cluster-bootstrap@v0.31.14: verifying module: k8s.io/cluster-bootstrap@v0.31.14: reading https://proxy.golang.org/sumdb/sum.golang.org/lookup/k8s.io/cluster-bootstrap@v0.31.14: 404 Not Found
"""


def test_a_tidy_failure_names_the_modules_the_proxy_does_not_serve(tmp_path):
    from crdscale.cluster.gobuild import _failure_reason, unserved_modules

    assert unserved_modules(TIDY_UNSERVED_LOG) == ["k8s.io/endpointslice@v0.32.13", "k8s.io/cluster-bootstrap@v0.31.14"]
    log_file = tmp_path / "build.log"
    log_file.write_text(TIDY_UNSERVED_LOG)
    reason = _failure_reason("go mod tidy", log_file)
    assert "checksum database lacks k8s.io/endpointslice@v0.32.13 and 1 more" in reason
    assert "another patch release" in reason
    # A compile error is not the proxy's: nothing is added.
    assert _failure_reason("go build", log_file) == ""
    log_file.write_text("./main.go:3:1: syntax error\n")
    assert _failure_reason("go mod tidy", log_file) == ""
