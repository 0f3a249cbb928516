"""Commands that write to a cluster other than a crdscale local instance (install, the probes, a run against a
kubeconfig) name the cluster and its context and ask first: ``--yes`` goes ahead, a non-interactive stdin
without it is refused in one line (exit 2) before anything connects, and a local instance is never asked about."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cluster import instances
from crdscale.errors import ClusterError

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "data" / "crds" / "tree"
SERVER = "https://prod.example.invalid:6443"
KUBECONFIG = f"""apiVersion: v1
kind: Config
current-context: prod-admin
contexts: [{{name: prod-admin, context: {{cluster: prod, user: admin}}}}]
clusters: [{{name: prod, cluster: {{server: "{SERVER}"}}}}]
users: [{{name: admin, user: {{token: x}}}}]
"""

COMMANDS = {
    "install": ["install", str(CRDS), "--quiet"],
    "probe": ["probe", "list", "-q"],
    "run": ["run"],
}


class Connected(ClusterError):
    """Raised by the faked connection: the command got past the confirmation."""


@pytest.fixture
def kubeconfig(tmp_path, monkeypatch):
    path = tmp_path / "prod.yaml"
    path.write_text(KUBECONFIG)
    monkeypatch.setattr(instances, "list_instances", lambda: [])  # no local instance is up

    def connect(*_a, **_k):
        raise Connected("connected")

    import crdscale.cluster.clients as clients

    monkeypatch.setattr(clients, "connect", connect)
    # A run against a kubeconfig checks the cluster first, then runs: both stand for "went ahead".
    import crdscale.cli.run as run_cli

    monkeypatch.setattr(run_cli, "_check", lambda *_a, **_k: [])
    monkeypatch.setattr(run_cli, "run_with_progress", connect)
    monkeypatch.chdir(tmp_path)
    return path


def _stdin(monkeypatch, tty: bool, answer: str = ""):
    stdin = io.StringIO(answer)
    stdin.isatty = lambda: tty
    monkeypatch.setattr("sys.stdin", stdin)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_non_interactive_without_yes_is_refused_naming_the_cluster(kubeconfig, monkeypatch, capsys, command):
    _stdin(monkeypatch, tty=False)
    assert main([*COMMANDS[command], "--kubeconfig", str(kubeconfig)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert SERVER in err[0] and "context prod-admin" in err[0] and "--yes" in err[0]
    assert "connected" not in err[0]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_yes_goes_ahead(kubeconfig, monkeypatch, capsys, command):
    _stdin(monkeypatch, tty=False)
    assert main([*COMMANDS[command], "--kubeconfig", str(kubeconfig), "--yes"]) == Connected.exit_code
    assert "connected" in capsys.readouterr().err


@pytest.mark.parametrize(("answer", "went_ahead"), [("y\n", True), ("yes\n", True), ("\n", False), ("n\n", False)])
def test_a_terminal_is_asked(kubeconfig, monkeypatch, capsys, answer, went_ahead):
    _stdin(monkeypatch, tty=True, answer=answer)
    code = main([*COMMANDS["install"], "--kubeconfig", str(kubeconfig)])
    captured = capsys.readouterr()
    assert SERVER in captured.out and "Go ahead? [y/N]" in captured.out  # input() prompts on stdout
    assert code == (Connected.exit_code if went_ahead else 2)
    assert ("connected" in captured.err) == went_ahead


def test_a_local_instance_is_not_asked_about(kubeconfig, monkeypatch, capsys):
    ready = instances.InstanceInfo("ci", "ready", SERVER + "/", str(kubeconfig), {}, "", {})
    monkeypatch.setattr(instances, "list_instances", lambda: [ready])
    _stdin(monkeypatch, tty=False)
    assert main([*COMMANDS["install"], "--kubeconfig", str(kubeconfig)]) == Connected.exit_code
