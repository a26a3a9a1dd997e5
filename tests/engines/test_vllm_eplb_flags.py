"""vLLM's EPLB redundant experts in the spelling of each release, and `kvplan check` reading both.

Read in the PyPI wheels' vllm/engine/arg_utils.py: 0.10.0 and 0.10.1.1 have --enable-eplb and
--num-redundant-experts N only; 0.10.2 adds --eplb-config (a JSON EPLBConfig whose field is
num_redundant_experts, vllm/config/parallel.py) and marks --num-redundant-experts "[DEPRECATED]
… will be removed in v0.12.0." (so do 0.11.0 and 0.11.2); 0.12.0 has no --num-redundant-experts.
"""

from __future__ import annotations

import json

import pytest
from clirun import run

from kvplan import plan
from kvplan.deploy.commands import DeployParseError, Templates, parse_args

DSR1 = "deepseek-ai/DeepSeek-R1"


def _vllm_knobs(text: str) -> dict:
    return parse_args(text.split(), "vllm", file="x", line=1, templates=Templates({}),
                      text=text).knobs


@pytest.mark.parametrize(("version", "flags"), [
    ("0.10.1", "--enable-eplb --num-redundant-experts 32"),
    ("0.10.2", "--enable-eplb --eplb-config '{\"num_redundant_experts\":32}'"),
    ("0.12.0", "--enable-eplb --eplb-config '{\"num_redundant_experts\":32}'"),
    (None, "--enable-eplb --eplb-config '{\"num_redundant_experts\":32}'"),  # newest modelled
])
def test_launch_line_spells_redundant_experts_as_the_release_does(version, flags):
    p = plan(DSR1, "h200", tensor_parallel_size=1, data_parallel_size=8,
             enable_expert_parallel=True, num_redundant_experts=32, engine_version=version)
    assert flags in p.command
    if version != "0.10.1":
        assert "--num-redundant-experts" not in p.command  # 0.12.0 refuses it


@pytest.mark.parametrize("flags", [
    "--num-redundant-experts 32",
    "--eplb-config {\"num_redundant_experts\":32}",
    "--eplb-config={\"num_redundant_experts\":32,\"window_size\":1000}",
])
def test_check_reads_both_spellings(flags):
    k = _vllm_knobs(f"vllm serve {DSR1} -dp 8 --enable-expert-parallel --enable-eplb {flags}")
    assert k["num_redundant_experts"] == 32 and "eplb_config" not in k


@pytest.mark.parametrize(("flags", "needle"), [
    ("--eplb-config not-json", "is not JSON"),
    ("--eplb-config {\"num_redundant_experts\":-1}", "not an integer"),
    ("--num-redundant-experts 16 --eplb-config {\"num_redundant_experts\":32}", "contradictory"),
])
def test_check_names_an_unreadable_eplb_config(flags, needle):
    with pytest.raises(DeployParseError, match=needle):
        _vllm_knobs(f"vllm serve {DSR1} -dp 8 --enable-expert-parallel {flags}")


def test_the_launch_line_round_trips_through_check(capsys, tmp_path):
    p = plan(DSR1, "h200", tensor_parallel_size=1, data_parallel_size=8,
             enable_expert_parallel=True, num_redundant_experts=32)
    f = tmp_path / "serve.sh"
    f.write_text(p.command + "\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h200", "--json")
    row = json.loads(out)["deployments"][0]
    assert code in (0, 1) and row["plan"] is not None
    assert row["plan"]["command"] == p.command  # 32 redundant experts read back, written again
    assert row["plan"]["memory"]["weights_bytes"] == p.memory.weights_bytes
