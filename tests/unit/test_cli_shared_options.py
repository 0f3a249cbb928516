"""Options several commands take are declared once (crdscale.cli.common): the same flag, default and help in
every command that has it."""

from __future__ import annotations

import argparse
import importlib

import pytest

from crdscale.cli import common


def _option(command: str, flag: str) -> argparse.Action:
    parser = argparse.ArgumentParser()
    importlib.import_module(f"crdscale.cli.{command}").Command.add_arguments(parser)
    return next(a for a in parser._actions if flag in a.option_strings)


def _said(action: argparse.Action) -> str:
    return repr((action.option_strings, action.default, action.help, action.metavar, action.choices, action.type))


@pytest.mark.parametrize(
    "flag, commands",
    [
        ("--notebooks", ["report", "lab", "compare"]),
        ("--timeout", ["report", "lab"]),
        ("--set", ["run", "ab", "history"]),
        ("--output", ["compare", "recover", "ab", "footprint"]),
    ],
)
def test_one_declaration(flag, commands):
    said = {command: _said(_option(command, flag)) for command in commands}
    assert len(set(said.values())) == 1, said


def test_the_cell_timeout_is_the_renderers():
    from crdscale.report.render import CELL_TIMEOUT_S

    assert _option("report", "--timeout").default == common.CELL_TIMEOUT_S == CELL_TIMEOUT_S
