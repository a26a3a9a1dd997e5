"""Every command's usage line names its arguments as click does (MODEL, FILES..., [OUTPUT]),
not as typer 0.2x writes a required one (`{model}`): `kvplan plan --help` once read
`Usage: … plan [OPTIONS] {model}`."""

from __future__ import annotations

import pytest
from clirun import run

from kvplan.cli import COMMANDS

USAGE = {"plan": "[OPTIONS] MODEL", "compare": "[OPTIONS] MODEL", "sweep": "[OPTIONS] MODEL",
         "report": "[OPTIONS] TARGET", "check": "[OPTIONS] FILES...",
         "calibrate": "[OPTIONS] FILES...", "schema": "[OPTIONS] [OUTPUT]",
         "models": "[OPTIONS] [ARGS]...", "gpus": "[OPTIONS] [ARGS]..."}


def test_every_command_is_pinned():
    assert set(USAGE) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(USAGE))
def test_usage_line(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    first = out.splitlines()[0]
    assert first.endswith(f" {command} {USAGE[command]}"), first
    assert "{" not in first


@pytest.mark.parametrize("command", ["plan", "compare", "sweep"])
def test_a_missing_model_names_model(capsys, command):
    code, _, err = run(capsys, command, "--json")
    assert code == 2
    assert "Missing argument 'MODEL'" in err and "Traceback" not in err
