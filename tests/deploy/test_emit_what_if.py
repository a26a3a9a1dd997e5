"""A format what-if (`plan … -q awq` on an unquantized model, docs/what-if.md) plans a checkpoint
that does not exist yet: its launch line serves the folder the quantizer would write
(`./Llama-3.1-70B-Instruct-AWQ`) after a comment that says how. `--emit` refuses it in every
format (exit 2, nothing written), saying to quantize first and plan the result. It used to write
that local path into k8s/compose/skypilot files (which `kvplan check` then rejected) and, in the
formats that carry flags only, refuse with "takes quant_config={w_bit: from its environment"
(the comment read as a variable set before the server)."""

from __future__ import annotations

import pytest
from clirun import run

from kvplan.deploy.emit import FORMATS


@pytest.mark.parametrize("fmt", FORMATS)
def test_emit_refuses_a_quantization_what_if_in_every_format(capsys, tmp_path, fmt):
    out = tmp_path / "deploy.yaml"
    code, stdout, err = run(capsys, "plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100",
                            "-tp", "2", "-q", "awq", "--emit", fmt, "-o", str(out), "--offline")
    assert code == 2 and stdout == "" and not out.exists(), err
    flat = " ".join(err.split())
    assert "this plan is a what-if" in flat and "does not exist yet" in flat
    assert "quantize first" in flat and f"--emit {fmt}" in flat
    assert "environment" not in flat and "Traceback" not in flat
