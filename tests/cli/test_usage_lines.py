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


EXAMPLES = {"check": "Example: kvplan check deploy/k8s.yaml Dockerfile --gpu h100 "
                     "--min-concurrency 8",
            "calibrate": "Example: kvplan calibrate results/*.json --gpu h100 -o "
                         "h100-vllm.cal.json \\"}


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_the_example_is_printed_as_written(capsys, command):
    """click rewraps a paragraph (it split `meta-llama/…` and `--min-concurrency` at their
    hyphens); the example paragraph is kept as written."""
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert any(line.strip() == EXAMPLES[command] for line in out.splitlines()), out


@pytest.mark.parametrize("command", ["check", "calibrate"])
def test_every_option_says_what_it_does(command):
    from kvplan.cli import click_app

    cmd = click_app().commands[command]
    bare = [p.opts[0] for p in cmd.params if p.param_type_name == "option" and not p.help]
    assert bare == []
