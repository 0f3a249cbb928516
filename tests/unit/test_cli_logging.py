"""Library messages go through ``logging``; only the CLI prints them, and every command shares one
definition of its cluster flags."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crdscale.cli.common import FIND_CLUSTER
from crdscale.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_instances(monkeypatch, tmp_path):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))


def test_cli_prints_library_lines_with_its_prefix(no_instances, capsys):
    assert main(["down"]) == 0
    assert capsys.readouterr().err == "crdscale: no local instances\n"
    logging.getLogger("crdscale.cluster.local").warning("a %s", "warning")
    assert capsys.readouterr().err == "crdscale: warning: a warning\n"


def test_quiet_keeps_warnings_only(no_instances, capsys):
    assert main(["-q", "down"]) == 0
    assert capsys.readouterr().err == ""
    logging.getLogger("crdscale.cluster.local").warning("still shown")
    assert capsys.readouterr().err == "crdscale: warning: still shown\n"
    main(["down"])  # the next command is back at INFO
    assert capsys.readouterr().err == "crdscale: no local instances\n"


def test_library_alone_prints_nothing():
    """No handler outside the CLI: not even Python's last-resort handler prints a warning (notebooks stay quiet)."""
    code = "import logging, crdscale.cluster.gobuild; logging.getLogger('crdscale.cluster.gobuild').warning('x')"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert proc.stderr == ""


def _subparsers(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _subparsers(sub, (*path, name))


def test_every_cluster_flag_comes_from_add_cluster_arguments():
    seen = []
    for path, parser in _subparsers(build_parser()):
        flags = {option: action for action in parser._actions for option in action.option_strings}
        if "--kubeconfig" not in flags:
            continue
        seen.append(" ".join(path))
        kubeconfig, context = flags["--kubeconfig"], flags.get("--context")
        assert kubeconfig.help.startswith("kubeconfig file, or FILE:FILE:... merged as kubectl merges $KUBECONFIG")
        assert kubeconfig.metavar == "PATH"
        assert context is not None and context.help == "kubeconfig context (default: its current context)"
        # run and history start their own control planes without --kubeconfig; status and down act on the
        # cluster an EXPERIMENT recorded; ab takes one only with --cluster (never a local instance)
        if path[0] not in ("run", "history", "status", "down", "ab"):
            assert FIND_CLUSTER in kubeconfig.help
    assert {"install", "clean", "run", "footprint", "probe list"} <= set(seen)


def test_run_context_needs_a_kubeconfig_target(no_instances, capsys):
    assert main(["run", "--context", "eks", "--check"]) == 2
    assert "--context names a context of --kubeconfig" in capsys.readouterr().err
