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


# ---------------------------------------------------------------- check, release by release
# FlexibleArgumentParser (vllm/utils.py in the 0.9.0 wheel, the first with dotted keys; 0.8.5 has
# none) passes `--eplb-config.num_redundant_experts 32` as --eplb-config '{"num_redundant_experts":
# 32}'; --eplb-config itself is first in 0.10.2 and --num-redundant-experts is gone from 0.12.0
# (vllm/engine/arg_utils.py of each wheel).


@pytest.mark.parametrize("flags", [
    "--eplb-config.num_redundant_experts 32",
    "--eplb-config.num_redundant_experts=32",
    "--eplb-config.window_size 1000 --eplb-config.num_redundant_experts 32",
])
def test_check_reads_the_dotted_form(flags):
    k = _vllm_knobs(f"vllm serve {DSR1} -dp 8 --enable-expert-parallel --enable-eplb {flags}")
    assert k["num_redundant_experts"] == 32 and "eplb_config" not in k


def test_dotted_keys_replace_a_json_eplb_config():
    """vLLM passes the dotted keys as one --eplb-config after the others, and argparse keeps the
    last: the JSON's 16 redundant experts are gone (EPLBConfig's default, 0), and check says so."""
    text = (f"vllm serve {DSR1} -dp 8 --enable-expert-parallel --enable-eplb "
            "--eplb-config {\"num_redundant_experts\":16} --eplb-config.window_size 500")
    found = parse_args(text.split()[2:], "vllm", file="x", line=1, templates=Templates({}),
                       text=text)
    assert "num_redundant_experts" not in found.knobs
    assert any("is replaced by the --eplb-config.KEY settings" in n for n in found.notes)


@pytest.mark.parametrize(("flags", "needle"), [
    ("--eplb-config.num_redundant_experts", "--eplb-config.num_redundant_experts is missing its "
     "value"),
    ("--eplb-config.num_redundant_experts lots", "not an integer"),
])
def test_check_names_an_unreadable_dotted_key(flags, needle):
    with pytest.raises(DeployParseError, match=needle) as e:
        _vllm_knobs(f"vllm serve {DSR1} -dp 8 --enable-expert-parallel {flags}")
    assert str(e.value).startswith("x:1: ")  # the file and line


@pytest.mark.parametrize("flag", ["--eplb-config", "--eplb-config.num_redundant_experts"])
def test_a_hostile_eplb_value_is_named_briefly(flag):
    """100,000 `[`: past Python's JSON nesting limit; named at its file and line, quoted short."""
    with pytest.raises(DeployParseError) as e:
        _vllm_knobs(f"vllm serve {DSR1} --enable-expert-parallel {flag} {'[' * 100_000}")
    assert str(e.value).startswith("x:1: --eplb-config ") and len(str(e.value)) < 300


def _check(capsys, tmp_path, version: str | None, flags: str) -> dict:
    f = tmp_path / "serve.sh"
    pin = f"# kvplan: engine-version={version}\n" if version else ""
    f.write_text(f"{pin}vllm serve {DSR1} -dp 8 --enable-expert-parallel --enable-eplb {flags}\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h200", "--json", "--offline")
    return json.loads(out)["deployments"][0]


def _refusals(row: dict) -> list[str]:
    return [p["message"] for p in row["problems"] if p["code"] == "unknown-flag"]


@pytest.mark.parametrize("version", ["0.12.0", "0.13.0", None])  # None: the newest modelled
def test_removed_num_redundant_experts_is_an_error_naming_the_new_spelling(capsys, tmp_path,
                                                                            version):
    row = _check(capsys, tmp_path, version, "--num-redundant-experts 32")
    assert row["status"] == "error" and row["exit_code"] == 2
    [message] = _refusals(row)
    assert "has no --num-redundant-experts flag (removed in 0.12.0" in message
    assert "write --eplb-config '{\"num_redundant_experts\":32}'" in message


@pytest.mark.parametrize("version", ["0.10.1", "0.11.2"])
def test_num_redundant_experts_is_fine_before_0_12(capsys, tmp_path, version):
    row = _check(capsys, tmp_path, version, "--num-redundant-experts 32")
    assert row["status"] in ("fits", "does-not-fit") and not _refusals(row)


# DeepSeek-R1 on 8 EP ranks: 256 routed experts → 32 a rank; with 32 redundant, ceil(288 / 8) =
# 36, so 4 more experts on every rank in each of its 58 MoE layers (61 layers, the first 3
# dense). One FP8 expert: gate, up and down of 7168 × 2048 one-byte weights plus their fp32
# 128 × 128 block scales, 56 × 16 of them each: 3 × (7168 × 2048 + 56 × 16 × 4) bytes.
FOUR_EXPERTS_BYTES = 4 * 58 * 3 * (7168 * 2048 + 56 * 16 * 4)  # 10,219,819,008


@pytest.mark.parametrize("version", ["0.10.2", "0.12.0", None])
def test_check_plans_the_dotted_form_with_its_redundant_experts(capsys, tmp_path, version):
    dotted = _check(capsys, tmp_path, version, "--eplb-config.num_redundant_experts 32")
    none = _check(capsys, tmp_path, version, "")
    assert not _refusals(dotted) and dotted["plan"] is not None
    assert "--eplb-config '{\"num_redundant_experts\":32}'" in dotted["plan"]["command"]
    grown = dotted["plan"]["memory"]["weights_bytes"] - none["plan"]["memory"]["weights_bytes"]
    assert grown == FOUR_EXPERTS_BYTES


@pytest.mark.parametrize("flags", ["--eplb-config.num_redundant_experts 32",
                                   "--eplb-config '{\"num_redundant_experts\":32}'"])
def test_eplb_config_before_0_10_2_is_an_error(capsys, tmp_path, flags):
    row = _check(capsys, tmp_path, "0.10.1", flags)
    [message] = _refusals(row)
    assert row["status"] == "error" and "vLLM 0.10.1 has no --eplb-config flag (first in 0.10.2" \
        in message and f"refuses {flags.split()[0]}" in message


@pytest.mark.parametrize(("version", "refused"), [("0.8.5", True), ("0.9.0", False)])
def test_dotted_keys_from_0_9_0(capsys, tmp_path, version, refused):
    f = tmp_path / "serve.sh"
    f.write_text(f"# kvplan: engine-version={version}\n"
                 "vllm serve qwen2.5-7b --max-model-len 8192 --compilation-config.level 3\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json", "--offline")
    row = json.loads(out)["deployments"][0]
    assert bool(_refusals(row)) == refused
    if refused:
        assert "reads a JSON flag's dotted keys (--FLAG.KEY VALUE) from 0.9.0" in \
            _refusals(row)[0]
