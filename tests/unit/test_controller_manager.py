"""kube-controller-manager in the local control plane, without starting anything: its build
layout (one module, one go build, only the missing binaries), credentials, command line,
scrape jobs and scenario keys."""

import logging
import os
import shutil

import pytest
import yaml
from cryptography import x509

from crdscale.cluster import binaries, gobuild, pki
from crdscale.cluster.local import CONTROLLER_MANAGER, LocalControlPlane
from crdscale.errors import UsageError
from crdscale.rundir import layout
from crdscale.scenario.config import load_scenario

HELLO = 'package main\n\nimport "fmt"\n\nfunc main() {{ fmt.Println("{}") }}\n'


def two_mains(out_dir):
    return gobuild.GoProgram(
        binary_name="first",
        out_dir=out_dir,
        go_directive="go 1.22",
        requires={},
        main_go=HELLO.format("first"),
        more_mains={"second": HELLO.format("second")},
    )


def test_kubernetes_module_builds_both_binaries_side_by_side(tmp_path):
    gomod = tmp_path / "k.mod"
    gomod.write_text(
        "module k8s.io/kubernetes\n\ngo 1.26.0\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n)\n"
    )
    program = binaries.kube_apiserver_program("v1.37.1", module_info={"GoMod": str(gomod)})
    # kubelet and kube-scheduler are built only for a test node (binaries.node_binaries).
    assert list(program.mains) == ["kube-apiserver", CONTROLLER_MANAGER, "kubelet", "kube-scheduler"]
    assert set(program.source_files()) == {f"cmd/{name}/main.go" for name in program.mains}
    assert "app.NewControllerManagerCommand()" in program.mains[CONTROLLER_MANAGER]
    assert program.binary_path(CONTROLLER_MANAGER).parent == program.binary.parent
    assert program.package(CONTROLLER_MANAGER) == "./cmd/kube-controller-manager"
    with pytest.raises(KeyError):
        program.binary_path("kube-proxy")


def test_single_program_keeps_its_layout(tmp_path):
    program = binaries.etcd_program("v3.6.16")
    assert program.source_files() == {"main.go": binaries.ETCD_MAIN}
    assert program.package("etcd") == "."


@pytest.mark.external
@pytest.mark.skipif(not shutil.which("go"), reason="needs Go")
def test_one_go_build_for_both_then_only_the_missing_one(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="crdscale.cluster.gobuild")
    program = two_mains(tmp_path / "out")
    assert program.missing() == ["first", "second"]
    gobuild.build(program)
    lines = caplog.messages
    assert program.missing() == []
    assert sum("go build ..." in line for line in lines) == 1
    assert "building first and second" in lines[0]
    first_mtime = program.binary.stat().st_mtime_ns
    program.binary_path("second").unlink()
    caplog.clear()
    gobuild.build(program, names=["second"])
    assert "building second from" in caplog.messages[0]
    assert program.binary.stat().st_mtime_ns == first_mtime  # the other binary was left alone
    assert os.access(program.binary_path("second"), os.X_OK)
    assert (program.out_dir / "build-second.json").is_file()
    assert not (program.out_dir / ".partial").exists()
    caplog.clear()
    gobuild.build(program)
    assert caplog.messages == []  # nothing missing: no build at all


def test_controller_manager_credentials(tmp_path):
    creds = pki.create_credentials(tmp_path / "pki")
    ca = x509.load_pem_x509_certificate(creds.ca_cert.read_bytes())
    client = x509.load_pem_x509_certificate(creds.controller_manager_client_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(creds.controller_manager_serving_cert.read_bytes())
    assert client.subject.rfc4514_string() == f"CN={pki.CONTROLLER_MANAGER_USER}"
    assert client.issuer == ca.subject and serving.issuer == ca.subject
    client.verify_directly_issued_by(ca)
    serving.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    for key in (creds.controller_manager_client_key, creds.controller_manager_serving_key, creds.ca_key):
        assert key.stat().st_mode & 0o777 == 0o600


def _planned(tmp_path, monkeypatch, **kwargs):
    """A control plane with state as start() records it, without starting anything."""
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    cp = LocalControlPlane(name="t", **kwargs)
    cp.state = {
        "server": "https://127.0.0.1:6443",
        "ports": {"apiserver": 6443, "etcd_client": 2379, "controller_manager": 10257},
        "controller_manager": {"enabled": cp.controller_manager},
    }
    return cp, pki.Credentials(tmp_path / "pki")


def test_controller_manager_command_line(tmp_path, monkeypatch):
    cp, creds = _planned(tmp_path, monkeypatch, controller_manager_controllers=["*", "-ttl"])
    argv = cp.controller_manager_argv(tmp_path / "kcm", creds)
    flags = dict(a.split("=", 1) for a in argv[1:])
    assert flags["--controllers"] == "*,-ttl"
    assert flags["--bind-address"] == "127.0.0.1" and flags["--secure-port"] == "10257"
    assert flags["--service-account-private-key-file"] == str(creds.sa_private_key)
    assert flags["--root-ca-file"] == str(creds.ca_cert)
    assert flags["--use-service-account-credentials"] == "true"
    assert "/metrics" in flags["--authorization-always-allow-paths"].split(",")
    for key in ("--kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig"):
        assert flags[key] == str(cp.controller_manager_kubeconfig)
    assert cp.controller_manager_metrics_url == "https://127.0.0.1:10257/metrics"
    # a loaded machine must not cost it its lease (it exits then, and the run fails)
    assert flags["--leader-elect-renew-deadline"] == "40s" and flags["--leader-elect-lease-duration"] == "60s"


def test_controller_manager_kubeconfig_uses_its_client_certificate(tmp_path, monkeypatch):
    cp, creds = _planned(tmp_path, monkeypatch)
    cp.state_dir.mkdir(parents=True)
    cp._write_controller_manager_kubeconfig(creds)
    cfg = yaml.safe_load(cp.controller_manager_kubeconfig.read_text())
    user = cfg["users"][0]["user"]
    assert user == {
        "client-certificate": str(creds.controller_manager_client_cert),
        "client-key": str(creds.controller_manager_client_key),
    }
    assert cfg["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert cp.controller_manager_kubeconfig.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("enabled", [True, False])
def test_service_account_admission_follows_the_controller_manager(tmp_path, monkeypatch, enabled):
    """With a controller-manager, service accounts exist and get tokens, so the admission plugin
    that needs them runs, as in real clusters; without one it stays off, as before."""
    cp, creds = _planned(tmp_path, monkeypatch, controller_manager=enabled)
    argv = cp._apiserver_argv(tmp_path / "kube-apiserver", creds, 6443, [])
    assert ("--disable-admission-plugins=ServiceAccount" in argv) is not enabled


def test_instances_recorded_before_the_controller_manager_ran_none(tmp_path, monkeypatch):
    cp, _ = _planned(tmp_path, monkeypatch)
    del cp.state["controller_manager"]
    assert not cp.runs_controller_manager


def test_no_controllers_is_a_usage_error():
    with pytest.raises(UsageError, match="at least one controller"):
        LocalControlPlane(name="t", controller_manager_controllers=[])
    LocalControlPlane(name="t", controller_manager=False, controller_manager_controllers=[])


def test_prometheus_scrapes_the_controller_manager(tmp_path, monkeypatch):
    from crdscale.collect import sources

    monkeypatch.setattr(
        sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})()
    )
    prom = sources.LocalPrometheus(
        "127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2", controller_manager_target="127.0.0.1:3"
    )
    jobs = {job["job_name"]: job for job in prom.config()["scrape_configs"]}
    kcm = jobs[sources.CONTROLLER_MANAGER_JOB]
    assert kcm["scheme"] == "https" and kcm["tls_config"] == {"ca_file": str(tmp_path / "ca")}
    assert "authorization" not in kcm  # /metrics is open on loopback; no admin token leaves for it
    assert "rest_client_requests_total" in kcm["params"]["name[]"]
    assert prom.job_interval_s[sources.CONTROLLER_MANAGER_JOB] == 1.0
    bare = sources.LocalPrometheus("127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2")
    assert sources.CONTROLLER_MANAGER_JOB not in {j["job_name"] for j in bare.config()["scrape_configs"]}


def test_direct_scraper_reads_the_controller_manager(monkeypatch):
    from datetime import datetime, timezone

    from crdscale.collect import sources

    body = "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1234\n"
    asked = []

    class Resp:
        text, content, status_code = body, body.encode(), 200

        def raise_for_status(self):
            pass

    class Cluster:
        def get(self, *a, **k):
            raise sources.ClusterError("down")

    scraper = sources.DirectScraper(
        Cluster(), controller_manager_metrics_url="https://127.0.0.1:3/metrics", ca_file="/ca.crt"
    )
    monkeypatch.setattr(scraper._session, "get", lambda url, **kw: asked.append((url, kw)) or Resp())
    rows = scraper.sample(datetime.now(timezone.utc))
    got = {(r["job"], r["metric"]): r["value"] for r in rows}
    assert got[(sources.CONTROLLER_MANAGER_JOB, "process_resident_memory_bytes")] == 1234
    assert asked[0][1]["verify"] == "/ca.crt"


def test_proc_sampler_job_per_component():
    from crdscale.collect.sources import ProcSampler

    rows = ProcSampler(os.getpid(), job=layout.CONTROLLER_MANAGER_PROC_JOB).sample(
        __import__("datetime").datetime.now(__import__("datetime").timezone.utc)
    )
    assert {r["job"] for r in rows} == {"kube-controller-manager-proc"}
    assert layout.PROC_JOBS["kube-controller-manager"] == layout.CONTROLLER_MANAGER_PROC_JOB


def test_scenario_runs_the_controller_manager_by_default():
    scenario = load_scenario(None)
    assert scenario.target.controller_manager is True
    assert scenario.target.controller_manager_controllers == ["*", "-podgc"]
    off = load_scenario(None, overrides={"target.controller_manager": False})
    assert off.target.controller_manager is False


def test_scenario_rejects_an_empty_controller_list():
    with pytest.raises(UsageError, match="controller_manager_controllers"):
        load_scenario(None, overrides={"target.controller_manager_controllers": []})
    with pytest.raises(UsageError, match="controller names"):
        load_scenario(None, overrides={"target.controller_manager_controllers": [""]})


def test_up_with_no_controllers_fails_before_anything_starts(tmp_path, monkeypatch, capsys):
    from crdscale.cli.main import main

    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    assert main(["up", "--name", "x", "--controllers", " , "]) == 2
    assert "at least one controller" in capsys.readouterr().err
    assert not (tmp_path / "cache" / "instances" / "x").exists()
