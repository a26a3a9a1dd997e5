"""Every MoE plan says where its routed experts' rate comes from (docs/moe-gemm.md): a measured
fused-MoE kernel table (engine release, layout, GPU, dtype) or the dense GEMM rate,
extrapolated; in plan.performance.calibration and as one line of the text table."""

from __future__ import annotations

import json

from clirun import call

R1 = "deepseek-ai/DeepSeek-R1"


def _calibration(*args: str) -> str:
    code, out, err = call("plan", *args, "--offline", "--json")
    assert "Traceback" not in err, err
    assert code == 0, err
    return json.loads(out)["performance"]["calibration"]


def test_tp8_h200_names_the_vllm_table() -> None:
    cal = _calibration(R1, "--gpu", "h200-sxm-141gb", "-tp", "8")
    # the coefficients' source first, unchanged, then the experts' rate
    assert cal.startswith("bundled: Hopper × vLLM")
    assert cal.endswith("; routed experts: measured fused-MoE rate (vLLM 0.14.0, TP-split; "
                        "aiconfigurator 095f58a5 table: h200-sxm-141gb, fp8_block)")


def test_expert_parallel_names_the_ep_size() -> None:
    cal = _calibration(R1, "--gpu", "h200-sxm-141gb", "-tp", "1", "-dp", "8",
                       "--enable-expert-parallel")
    assert "routed experts: measured fused-MoE rate (vLLM 0.14.0, EP 8;" in cal


def test_amd_and_coarse_moe_say_dense_rate_extrapolated() -> None:
    for args in ((R1, "--gpu", "mi300x", "-tp", "8"),
                 ("mistralai/Mixtral-8x7B-Instruct-v0.1", "--gpu", "h100", "-tp", "2")):
        cal = _calibration(*args)
        assert cal.endswith("; routed experts: dense GEMM rate (no measured MoE kernel table: "
                            "extrapolated)"), args


def test_dense_model_says_nothing_about_experts() -> None:
    assert "routed experts" not in _calibration("meta-llama/Llama-3.1-8B-Instruct",
                                                "--gpu", "h100")


def test_text_table_has_one_routed_experts_line() -> None:
    code, out, err = call("plan", R1, "--gpu", "h200-sxm-141gb", "-tp", "8", "--offline")
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if "routed experts" in ln]
    assert len(lines) == 1 and "measured" in lines[0] and "vLLM 0.14.0, TP-split" in lines[0]
    code, out, err = call("plan", R1, "--gpu", "mi300x", "-tp", "8", "--offline")
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if "routed experts" in ln]
    assert "dense rate" in line and "extrapolated" in line
