"""Every MoE plan says where its routed experts' rate comes from (docs/moe-gemm.md): a measured
fused-MoE kernel table (engine release, layout, GPU, dtype) or the dense GEMM rate,
extrapolated; in plan.performance.routed_experts and as one line of the text table."""

from __future__ import annotations

import json
from typing import Any

from clirun import call

R1 = "deepseek-ai/DeepSeek-R1"


def _performance(*args: str) -> dict[str, Any]:
    """plan.performance, its routed_experts without public_check (what the public MoE rows
    say: tests/perf/test_moe_validation.py), which every MoE plan has, layer_floors
    (tests/perf/test_layer_floors.py) and padding, null in every deployment here (vLLM's
    DeepGEMM padding: tests/perf/test_moe_gemm.py)."""
    code, out, err = call("plan", *args, "--offline", "--json")
    assert "Traceback" not in err, err
    assert code == 0, err
    perf: dict[str, Any] = json.loads(out)["performance"]
    if perf["routed_experts"] is not None:
        assert "public MoE rows" in perf["routed_experts"].pop("public_check")
        perf["routed_experts"].pop("layer_floors")
        assert perf["routed_experts"].pop("padding") is None, args
    return perf


def test_tp8_h200_names_the_vllm_table() -> None:
    perf = _performance(R1, "--gpu", "h200-sxm-141gb", "-tp", "8")
    # the coefficients' source is its own field, unchanged by the experts' rate
    assert perf["calibration"].startswith("bundled: Hopper × vLLM")
    assert "routed experts" not in perf["calibration"]
    assert perf["routed_experts"] == {
        "rate": "measured", "table": "vLLM 0.14.0, TP-split",
        "source": "aiconfigurator 095f58a5 table: h200-sxm-141gb, fp8_block"}


def test_expert_parallel_names_the_ep_size() -> None:
    perf = _performance("Qwen/Qwen3-30B-A3B", "--gpu", "h100", "-tp", "1", "-dp", "8",
                        "--enable-expert-parallel")
    assert perf["routed_experts"]["rate"] == "measured"
    assert perf["routed_experts"]["table"] == "vLLM 0.14.0, EP 8"


def test_vllm_expert_parallel_fp8_block_says_which_kernel_runs() -> None:
    # --- fimoe --- vLLM runs FlashInfer CUTLASS (0.15-0.33, the default 0.33.0 read) for FP8
    # block-scaled experts with EP on Hopper: vLLM 0.24.0's FlashInfer CUTLASS table; 0.10.x
    # keeps the dense rate, said so; --- deepgemm --- 0.12-0.14 run DeepGEMM there:
    # SGLang's DeepEP MoE table, a proxy
    perf = _performance(R1, "--gpu", "h200-sxm-141gb", "-tp", "1", "-dp", "8",
                        "--enable-expert-parallel")
    re = perf["routed_experts"]
    assert re["rate"] == "measured"
    assert re["table"] == "vLLM 0.24.0 FlashInfer CUTLASS MoE, EP 8"
    unread = _performance(R1, "--gpu", "h200-sxm-141gb", "-tp", "1", "-dp", "8",
                          "--enable-expert-parallel", "--engine-version", "0.10.1")
    assert unread["routed_experts"]["rate"] == "dense"
    assert "before 0.11" in unread["routed_experts"]["source"]
    old = _performance(R1, "--gpu", "h200-sxm-141gb", "-tp", "1", "-dp", "8",
                       "--enable-expert-parallel", "--engine-version", "0.14.0")["routed_experts"]
    assert old["rate"] == "measured"
    assert old["table"] == ("SGLang 0.5.10 DeepEP MoE (DeepGEMM; proxy for vLLM's DeepGEMM "
                            "experts), EP 8")
    assert "proxy" in old["source"]


def test_amd_and_coarse_moe_say_dense_rate_extrapolated() -> None:
    for args in ((R1, "--gpu", "mi300x", "-tp", "8"),
                 ("mistralai/Mixtral-8x7B-Instruct-v0.1", "--gpu", "h100", "-tp", "2")):
        assert _performance(*args)["routed_experts"] == {
            "rate": "dense", "table": None,
            "source": "no measured MoE kernel table: extrapolated"}, args


def test_dense_model_has_no_routed_experts() -> None:
    assert _performance("meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100")[
        "routed_experts"] is None


def test_text_table_has_one_routed_experts_line() -> None:
    code, out, err = call("plan", R1, "--gpu", "h200-sxm-141gb", "-tp", "8", "--offline")
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if "routed experts" in ln]
    assert len(lines) == 1 and "measured" in lines[0] and "vLLM 0.14.0, TP-split" in lines[0]
    code, out, err = call("plan", R1, "--gpu", "mi300x", "-tp", "8", "--offline")
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if "routed experts" in ln]
    assert "dense rate" in line and "extrapolated" in line
