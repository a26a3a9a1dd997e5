"""Measured fused-MoE GEMM rates: routed-expert FLOPs at their own rate. Pure: standard library.

The step model (perf/step.py step_terms) charges a step's GEMM FLOPs at the GPU's datasheet
peak × the engine's fitted `gemm_efficiency` × the GPU class's factor (perf/arch.py), fitted
on dense models. A MoE layer's routed experts run as one fused grouped GEMM over all experts
(vLLM's Triton `fused_moe`: each expert a GEMM of its t routed tokens against a shard of
hidden × moe_intermediate_size / TP), which runs at a fraction of the dense GEMM's rate:

    expert compute time = expert FLOPs / (dense rate × ratio(t))      seconds
    t = tokens × DP ranks meeting in the layer × top_k / num_experts   routed tokens per expert

ratio(t) is measured, not fitted: aiconfigurator's kernel tables (ai-dynamo/aiconfigurator,
commit 095f58a5, aic-core/src/aiconfigurator_core/systems/data/<gpu>/{moe,gemm}/vllm/0.14.0/
{moe,gemm}_perf.parquet; collected with vLLM 0.14.0 on A100-SXM4-80GB, H100 80GB HBM3, H200)
time the fused MoE (kernel_source vllm_fused_moe) of fine-grained MoE shapes (128-512
experts: Qwen3-30B/235B, DeepSeek-V3, Kimi-K2, GLM-4.5, ...) at moe_tp 1-8 and 1-16384 tokens,
and dense GEMMs (vllm_default) on the same GPU and release. ratio = the MoE's achieved FLOP/s
(6 × hidden × inter / moe_tp × tokens × top_k / latency) ÷ the dense GEMMs' median FLOP/s
(rows 2048 ≤ m ≤ 16384, n, k ≥ 1024) of the dtype kvplan's fitted rate stands for (bf16, or
per-tensor fp8 for fp8 experts of either scaling); the median over the shapes of one expert
shard-width band (inter / moe_tp: ≤ 256, ≤ 768, above), power_law_1.01 routing, expert
parallelism 1. benchmarks/moe_gemm_tables.py derives the numbers below from the tables.
A ratio of the collector's own rates: the peak and the clock cancel; kvplan's fitted dense
rate (which absorbs the engine's other costs) stays the reference.

Outside the measured range: below the GPU's ridge point in tokens per expert (peak FLOP/s ×
bytes per expert weight / (2 × HBM bytes/s): a routed token does 2 FLOPs per weight element
read) the grouped GEMM is weight-bound, which the step's expert-bytes term already
charges, so the ratio is held at its ridge value (no double count at decode); between grid
points it is interpolated linearly in log t, and held at the last point above 512 tokens per
expert (fewer shapes reach beyond it on Hopper: the tables stop at 16384 tokens).

Applies where a table exists: MoE layers of at least MIN_EXPERTS routed experts, on engines
whose calibration names the kernel family (engines/base.py Calibration.moe_kernels: vLLM, any
release; timed on 0.14.0, UNVERIFIED for others), on the A100 SXM4 80GB, H100 SXM and H200
SXM, for bf16 experts and fp8 experts (per-tensor, or block-scaled: `QuantSpec.block_size`).
Everything else keeps the dense rate (ratio 1): other engines (SGLang's and TensorRT-LLM's own
MoE kernels), other GPUs, coarse MoE layers, MXFP4/NVFP4/int4 experts (gpt-oss on Ampere and
Hopper runs vLLM's MXFP4 Marlin or Triton path, vllm/model_executor/layers/quantization/
mxfp4.py `get_mxfp4_backend`: Marlin below SM90 or without triton_kernels, else Triton; no
table times them), FP8 checkpoints on Ampere (weight-only Marlin). Expert parallelism: the
shard width is taken as moe_intermediate_size / TP (UNVERIFIED with EP, where an expert is
not split).
"""

from __future__ import annotations

import math

Curve = tuple[tuple[float, float], ...]  # (routed tokens per expert, ratio to the dense rate)

# the tables' fine-grained shapes have 128-512 routed experts; coarser MoE layers (Mixtral's 8,
# Llama 4's 16, Qwen1.5-MoE's 60, DeepSeek-V2-Lite's 64) are outside them and keep the dense rate
MIN_EXPERTS = 128

# expert shard width bands (hidden × width per expert per GPU), upper bounds inclusive
WIDTH_BANDS = (256, 768)

# (kernel family: engines/base.py Calibration.moe_kernels, GPU id, MoE kernel dtype) → one
# curve per width band (≤ 256, ≤ 768, above);
# benchmarks/moe_gemm_tables.py output at aiconfigurator 095f58a5, vLLM 0.14.0 tables
_VLLM_SOURCE = ("ai-dynamo/aiconfigurator 095f58a5 systems/data/{gpu}/moe/vllm/0.14.0/"
                "moe_perf.parquet ÷ gemm/vllm/0.14.0/gemm_perf.parquet")
CURVES: dict[tuple[str, str, str], tuple[Curve, Curve, Curve]] = {
    # A100: dense bf16 255 TFLOP/s; fused MoE 77-94
    ("vllm-triton-fused-moe", "a100-sxm-80gb", "bfloat16"): (
        ((128, 0.301), (256, 0.315), (512, 0.311)),
        ((128, 0.318), (256, 0.370), (512, 0.363)),
        ((128, 0.311), (256, 0.353), (512, 0.338))),
    # H100: dense bf16 799, fp8 538 TFLOP/s
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "bfloat16"): (
        ((128, 0.159), (256, 0.193), (512, 0.225)),
        ((128, 0.192), (256, 0.228), (512, 0.249)),
        ((128, 0.179), (256, 0.227), (512, 0.255))),
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8"): (
        ((128, 0.274), (256, 0.306), (512, 0.322)),
        ((128, 0.333), (256, 0.371), (512, 0.389)),
        ((128, 0.351), (256, 0.391), (512, 0.415))),
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): (
        ((128, 0.445), (256, 0.516), (512, 0.558)),
        ((128, 0.565), (256, 0.671), (512, 0.734)),
        ((128, 0.657), (256, 0.789), (512, 0.852))),
    # H200: dense bf16 766, fp8 615 TFLOP/s
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "bfloat16"): (
        ((128, 0.212), (256, 0.255), (512, 0.275)),
        ((128, 0.240), (256, 0.281), (512, 0.308)),
        ((128, 0.232), (256, 0.279), (512, 0.305))),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8"): (
        ((128, 0.270), (256, 0.304), (512, 0.322)),
        ((128, 0.337), (256, 0.377), (512, 0.392)),
        ((128, 0.355), (256, 0.397), (512, 0.419))),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): (
        ((128, 0.414), (256, 0.478), (512, 0.515)),
        ((128, 0.528), (256, 0.608), (512, 0.660)),
        ((128, 0.598), (256, 0.698), (512, 0.756))),
}


def moe_kernel_dtype(compute_dtype: str, quant_method: str | None, block_scaled: bool) -> str:
    """The MoE table's dtype of a deployment's experts: unquantized bf16/fp16 → 'bfloat16';
    FP8 experts run in FP8 → 'fp8_block' with block scales, else 'fp8'; '' for any other
    (weight-only paths: MXFP4, int4, FP8 on GPUs without FP8 — no table times them)."""
    if quant_method is None:
        return "bfloat16" if compute_dtype in ("bfloat16", "float16") else ""
    if quant_method == "fp8" and compute_dtype == "fp8":
        return "fp8_block" if block_scaled else "fp8"
    return ""


def curve_for(kernels: str, gpu_id: str, kernel_dtype: str, num_experts: int,
              shard_width: int) -> Curve:
    """The measured ratio curve of one deployment's experts, () where none is measured.
    kernels: the engine's fused-MoE kernel family (Calibration.moe_kernels); num_experts:
    routed experts per MoE layer (below MIN_EXPERTS: none); shard_width:
    moe_intermediate_size / TP, the columns of one expert on one GPU."""
    bands = CURVES.get((kernels, gpu_id, kernel_dtype))
    if bands is None or shard_width <= 0 or num_experts < MIN_EXPERTS:
        return ()
    band = next((i for i, hi in enumerate(WIDTH_BANDS) if shard_width <= hi), len(WIDTH_BANDS))
    return bands[band]


def ridge_tokens(peak_flops_per_s: float, bandwidth_bytes_per_s: float,
                 bytes_per_weight: float) -> float:
    """Routed tokens per expert at which a grouped GEMM turns from weight-bound to
    compute-bound: 2 t FLOPs per weight element read (bytes_per_weight bytes), so
    t = peak × bytes_per_weight / (2 × bandwidth). 0 without a bandwidth."""
    if bandwidth_bytes_per_s <= 0:
        return 0.0
    return peak_flops_per_s * bytes_per_weight / (2 * bandwidth_bytes_per_s)


def ratio(curve: Curve, tokens_per_expert: float, floor_tokens: float = 0.0) -> float:
    """The curve at max(tokens_per_expert, floor_tokens): log-linear between its points,
    held at its ends; 1.0 for an empty curve."""
    if not curve:
        return 1.0
    t = max(tokens_per_expert, floor_tokens)
    if t <= curve[0][0]:
        return curve[0][1]
    for (t0, r0), (t1, r1) in zip(curve, curve[1:], strict=False):
        if t <= t1:
            return r0 + (r1 - r0) * (math.log(t) - math.log(t0)) / (math.log(t1) - math.log(t0))
    return curve[-1][1]
