"""Measured fused-MoE GEMM rates: routed-expert FLOPs at their own rate. Pure: standard library.

The step model (perf/step.py step_terms) charges a step's GEMM FLOPs at the GPU's datasheet
peak × the engine's fitted `gemm_efficiency` × the GPU class's factor (perf/arch.py), fitted
on dense models. A MoE layer's routed experts run as one fused grouped GEMM over all experts
(vLLM's Triton `fused_moe`: each expert a GEMM of its t routed tokens against a shard of
hidden × moe_intermediate_size / TP), which runs at a fraction of the dense GEMM's rate:

    expert compute time = expert FLOPs / (dense rate × ratio(t))      seconds
    t = tokens × DP ranks meeting in the layer × top_k / num_experts   routed tokens per expert

ratio(t) is measured, not fitted: aiconfigurator's kernel tables (ai-dynamo/aiconfigurator,
commit 095f58a5, aic-core/src/aiconfigurator_core/systems/data/<gpu>/{moe,gemm}/<engine>/
<version>/{moe,gemm}_perf.parquet) time each engine's fused MoE for fine-grained MoE shapes
(128-512 experts: Qwen3-30B/235B, DeepSeek-V3, Kimi-K2, GLM-4.5, ...) at moe_tp 1-8 and up to
16384 tokens, and dense GEMMs through the same engine on the same GPU and release: vLLM 0.14.0
(Triton fused_moe; A100-SXM4-80GB, H100 80GB HBM3, H200), SGLang 0.5.9 (its Triton fused_moe;
the same GPUs), TensorRT-LLM 1.2.0rc5 (PyTorch flow, CUTLASS MoE; H100, H200, B200).
ratio = the MoE's achieved FLOP/s (6 × hidden × inter / moe_tp × tokens × top_k / latency) ÷
the dense GEMMs' median FLOP/s (rows 2048 ≤ m ≤ 16384, n, k ≥ 1024) of the dtype kvplan's
fitted rate stands for (bf16; per-tensor fp8 for fp8 experts of either scaling; nvfp4); the
median over the shapes of one expert shard-width band (inter / moe_tp: ≤ 256, ≤ 768, above),
power_law_1.01 routing, expert parallelism 1. benchmarks/moe_gemm_tables.py derives the
numbers below from the tables. A ratio of the collector's own rates: the peak and the clock
cancel; kvplan's fitted dense rate (which absorbs the engine's other costs) stays the
reference.

Outside the measured range: below the GPU's ridge point in tokens per expert (peak FLOP/s ×
bytes per expert weight / (2 × HBM bytes/s): a routed token does 2 FLOPs per weight element
read) the grouped GEMM is weight-bound, which the step's expert-bytes term already
charges, so the ratio is held at its ridge value (no double count at decode; rows an engine
pads and computes whatever the tokens read the curve at their own count: padded_rows); between grid
points it is interpolated linearly in log t, and held at the last point above 512 tokens per
expert (fewer shapes reach beyond it on Hopper: the tables stop at 16384 tokens).

Applies where a table exists: MoE layers of at least MIN_EXPERTS routed experts (KEY_MIN_EXPERTS
where a table times fewer: gpt-oss-20b's 32), on engines
whose calibration names the kernel family (engines/base.py Calibration.moe_kernels; any
release of the engine, UNVERIFIED beyond the timed one), on the GPUs and expert dtypes of
CURVES: bf16, FP8 (per-tensor, or block-scaled: `QuantSpec.block_size`), NVFP4 (TensorRT-LLM
on B200), MXFP4 (gpt-oss under vLLM: KERNEL_ROUTES sends it to the OAI Triton MXFP4 table on
H100/H200 (RELEASE_ROUTES: vLLM's own int4 Marlin table, a stated proxy, before 0.12) and to
SGLang's int4 Marlin table, a stated proxy, on A100, and to the FlashInfer TRT-LLM MXFP4 ×
BF16 table on B200; with MXFP8 activations, "mxfp4_mxfp8", SGLang's and TensorRT-LLM's B200
tables; docs/moe-gemm.md);
TensorRT-LLM's block-scaled FP8 experts on B200 read DeepGEMM's table
(KERNEL_ROUTES: CUTLASS runs FP8 block scales on Hopper only). Everything else keeps the
dense rate (ratio 1): other GPUs, coarse MoE layers, int4 experts, MXFP4 on other engines
and GPUs (and gpt-oss-20b on A100: no 32-expert Marlin table), FP8 checkpoints on Ampere
(weight-only Marlin), AMD GPUs (no public same-GPU MoE-vs-dense timing found; aiconfigurator
has no AMD system), and DeepEP layouts other than FP8 block-scaled experts on H100/H200 (those
read SGLang 0.5.10's DeepEP MoE table, DeepGEMM's grouped GEMMs: DEEPEP_ROUTES, as do vLLM
0.11's every layout and 0.12-0.14's MoE TP < 8 and EP: VLLM_DEEPGEMM, layout_family; vLLM
0.15+ behind DeepEP high-throughput runs FlashInfer CUTLASS instead and reads its table,
behind DeepEP low-latency DeepGEMM's masked GEMM: VLLM_DEEPEP_HT_FI_CUTLASS).
Expert parallelism without DeepEP reads EP_CURVES (the same tables' moe_ep_size 2-64
rows), except where the engine runs another kernel for it: vLLM's FP8 block-scaled experts
on Hopper run FlashInfer CUTLASS with EP from 0.15 (and every layout in 0.15-0.16), which
read vLLM 0.24.0's FlashInfer CUTLASS table (VLLM_FI_CUTLASS, layout_family); 0.10.x EP
layouts keep the dense rate (EP_UNTIMED);
DP attention without EP reads CURVES at the group-wide shard width (curve_for_layout,
perf/expert.py). Performance.routed_experts says which (table_label, table_source, DENSE_RATE).
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
# curve per width band (≤ 256, ≤ 768, above); benchmarks/moe_gemm_tables.py's output at
# aiconfigurator 095f58a5 (each entry's comment: the dense reference it divides by)
CURVES: dict[tuple[str, str, str], tuple[Curve, Curve, Curve]] = {
    # vLLM's Triton fused_moe (vllm/model_executor/layers/fused_moe/fused_moe.py): vLLM 0.14.0
    ("vllm-triton-fused-moe", "a100-sxm-80gb", "bfloat16"):  # dense bfloat16 255 TFLOP/s
    (
        ((128, 0.301), (256, 0.315), (512, 0.311)),
        ((128, 0.318), (256, 0.37), (512, 0.363)),
        ((128, 0.311), (256, 0.353), (512, 0.338))),
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "bfloat16"):  # dense bfloat16 799 TFLOP/s
    (
        ((128, 0.159), (256, 0.193), (512, 0.225)),
        ((128, 0.192), (256, 0.228), (512, 0.249)),
        ((128, 0.179), (256, 0.227), (512, 0.255))),
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8"):  # dense fp8 538 TFLOP/s
    (
        ((128, 0.274), (256, 0.306), (512, 0.322)),
        ((128, 0.333), (256, 0.371), (512, 0.389)),
        ((128, 0.351), (256, 0.391), (512, 0.415))),
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"):  # dense fp8 538 TFLOP/s
    (
        ((128, 0.445), (256, 0.516), (512, 0.558)),
        ((128, 0.565), (256, 0.671), (512, 0.734)),
        ((128, 0.657), (256, 0.789), (512, 0.852))),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "bfloat16"):  # dense bfloat16 766 TFLOP/s
    (
        ((128, 0.212), (256, 0.255), (512, 0.275)),
        ((128, 0.24), (256, 0.281), (512, 0.308)),
        ((128, 0.232), (256, 0.279), (512, 0.305))),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8"):  # dense fp8 615 TFLOP/s
    (
        ((128, 0.27), (256, 0.304), (512, 0.322)),
        ((128, 0.337), (256, 0.377), (512, 0.392)),
        ((128, 0.355), (256, 0.397), (512, 0.419))),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"):  # dense fp8 615 TFLOP/s
    (
        ((128, 0.414), (256, 0.478), (512, 0.515)),
        ((128, 0.528), (256, 0.608), (512, 0.66)),
        ((128, 0.598), (256, 0.698), (512, 0.756))),
    # SGLang's Triton fused_moe (python/sglang/srt/layers/moe/fused_moe_triton): SGLang 0.5.9
    ("sglang-triton-fused-moe", "a100-sxm-80gb", "bfloat16"):  # dense bfloat16 238 TFLOP/s
    (
        ((128, 0.313), (256, 0.371), (512, 0.41)),
        ((128, 0.343), (256, 0.43), (512, 0.473)),
        ((128, 0.359), (256, 0.444), (512, 0.469))),
    ("sglang-triton-fused-moe", "h100-sxm-80gb", "bfloat16"):  # dense bfloat16 716 TFLOP/s
    (
        ((128, 0.191), (256, 0.23), (512, 0.251)),
        ((128, 0.247), (256, 0.323), (512, 0.419)),
        ((128, 0.211), (256, 0.262), (512, 0.3))),
    ("sglang-triton-fused-moe", "h100-sxm-80gb", "fp8_block"):  # dense fp8 939 TFLOP/s
    (
        ((128, 0.262), (256, 0.319), (512, 0.312)),
        ((128, 0.398), (256, 0.524), (512, 0.593)),
        ((128, 0.513), (256, 0.679), (512, 0.807))),
    ("sglang-triton-fused-moe", "h200-sxm-141gb", "bfloat16"):  # dense bfloat16 680 TFLOP/s
    (
        ((128, 0.247), (256, 0.28), (512, 0.31)),
        ((128, 0.256), (256, 0.321), (512, 0.348)),
        ((128, 0.272), (256, 0.329), (512, 0.367))),
    ("sglang-triton-fused-moe", "h200-sxm-141gb", "fp8_block"):  # dense fp8 1012 TFLOP/s
    (
        ((128, 0.258), (256, 0.345), (512, 0.348)),
        ((128, 0.384), (256, 0.448), (512, 0.526)),
        ((128, 0.518), (256, 0.639), (512, 0.73))),
    # TensorRT-LLM's PyTorch flow, default CUTLASS MoE backend: TensorRT-LLM 1.2.0rc5
    ("trtllm-cutlass-moe", "h100-sxm-80gb", "bfloat16"):  # dense bfloat16 723 TFLOP/s
    (
        ((128, 0.199), (256, 0.267), (512, 0.273)),
        ((128, 0.282), (256, 0.401), (512, 0.455)),
        ((128, 0.342), (256, 0.481), (512, 0.587))),
    ("trtllm-cutlass-moe", "h100-sxm-80gb", "fp8"):  # dense fp8 863 TFLOP/s
    (
        ((128, 0.229), (256, 0.266), (512, 0.25)),
        ((128, 0.359), (256, 0.479), (512, 0.533)),
        ((128, 0.514), (256, 0.716), (512, 0.873))),
    ("trtllm-cutlass-moe", "h100-sxm-80gb", "fp8_block"):  # dense fp8 863 TFLOP/s
    (
        ((128, 0.13), (256, 0.142), (512, 0.151)),
        ((128, 0.222), (256, 0.248), (512, 0.261)),
        ((128, 0.357), (256, 0.413), (512, 0.443))),
    ("trtllm-cutlass-moe", "h200-sxm-141gb", "bfloat16"):  # dense bfloat16 751 TFLOP/s
    (
        ((128, 0.245), (256, 0.277), (512, 0.345)),
        ((128, 0.343), (256, 0.436), (512, 0.541)),
        ((128, 0.444), (256, 0.574), (512, 0.697))),
    ("trtllm-cutlass-moe", "h200-sxm-141gb", "fp8"):  # dense fp8 882 TFLOP/s
    (
        ((128, 0.253), (256, 0.282), (512, 0.324)),
        ((128, 0.427), (256, 0.509), (512, 0.578)),
        ((128, 0.629), (256, 0.821), (512, 0.978))),
    ("trtllm-cutlass-moe", "h200-sxm-141gb", "fp8_block"):  # dense fp8 882 TFLOP/s
    (
        ((128, 0.12), (256, 0.133), (512, 0.14)),
        ((128, 0.237), (256, 0.263), (512, 0.277)),
        ((128, 0.403), (256, 0.475), (512, 0.521))),
    ("trtllm-cutlass-moe", "b200", "bfloat16"):  # dense bfloat16 1443 TFLOP/s
    (
        ((128, 0.176), (256, 0.224), (512, 0.226)),
        ((128, 0.301), (256, 0.402), (512, 0.479)),
        ((128, 0.395), (256, 0.56), (512, 0.721))),
    ("trtllm-cutlass-moe", "b200", "fp8"):  # dense fp8 1626 TFLOP/s
    (
        ((128, 0.172), (256, 0.201), (512, 0.179)),
        ((128, 0.338), (256, 0.403), (512, 0.426)),
        ((128, 0.538), (256, 0.722), (512, 0.817))),
    ("trtllm-cutlass-moe", "b200", "nvfp4"):  # dense nvfp4 2798 TFLOP/s
    (
        ((128, 0.089), (256, 0.104), (512, 0.094)),
        ((128, 0.169), (256, 0.199), (512, 0.223)),
        ((128, 0.363), (256, 0.44), (512, 0.518))),
    # --- moe3 --- TensorRT-LLM on Blackwell: FP8 block-scaled experts run DeepGEMM's grouped
    # GEMM (KERNEL_ROUTES says why); the B200 table's kernel_source "deepgemm" rows
    # (TensorRT-LLM 1.2.0rc5) against its per-tensor fp8 GEMM (1626 TFLOP/s; DeepGEMM's own
    # dense fp8_block GEMM: 1015). No shard-≤256 row at EP 1: that band reads the rows with
    # moe_tp 8 / 16 and EP 2 (the 256/384-expert shapes of hidden 6144 / 7168 and
    # moe_intermediate 2048, DeepSeek-V3's among them: 128- or 256-column shards, balanced
    # routing, one GPU's FLOPs = 1/2 of its TP shard's), the nearest layout timed; no
    # fine-grained shape wider than 768 columns at EP 1: that band keeps the dense rate.
    ("trtllm-deepgemm-moe", "b200", "fp8_block"):  # dense fp8 1626 TFLOP/s
    (
        ((128, 0.12), (256, 0.132), (512, 0.139)),
        ((128, 0.235), (256, 0.283), (512, 0.318)),
        ()),
    # --- mxfp4 --- gpt-oss's MXFP4 experts (weight-only, bf16 activations) against the same
    # table set's dense bf16 GEMM (torch.nn.functional.linear); benchmarks/moe_gemm_tables.py
    # "MXFP4" lines. vLLM 0.24.0's OAI Triton MXFP4 experts (kernel_source
    # vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic, w4a16_mxfp4): gpt-oss's own
    # shapes (hidden = moe_intermediate = 2880, 32 and 128 experts, top-4) at moe_tp 1-2
    # (2880 / 1440 columns) and 4-8 (720 / 360); none at ≤ 256 columns (dense rate there)
    ("vllm-oai-triton-mxfp4", "h100-sxm-80gb", "mxfp4"):  # dense bfloat16 774 TFLOP/s
    (
        (),
        ((128, 0.279), (256, 0.383), (512, 0.444)),
        ((128, 0.388), (256, 0.504), (512, 0.598))),
    ("vllm-oai-triton-mxfp4", "h200-sxm-141gb", "mxfp4"):  # dense bfloat16 770 TFLOP/s
    (
        (),
        ((128, 0.289), (256, 0.396), (512, 0.461)),
        ((128, 0.396), (256, 0.512), (512, 0.597))),
    # A100 (SM80): vLLM runs MXFP4 experts in Marlin; no table times MXFP4 Marlin on A100. A
    # proxy: SGLang 0.5.10's Marlin MoE with int4 weights (kernel_source sglang_marlin_moe,
    # int4_wo; sglang/jit_kernel/csrc/gemm/marlin_moe/marlin_template.h, the Neural Magic
    # Marlin MoE template that vLLM's moe_wna16_marlin_gemm also instantiates, here kU4B8
    # where gpt-oss runs kFE2M1f) over the fine-grained shapes (≥ 128 experts: none of 32,
    # so gpt-oss-20b keeps the dense rate on A100), against SGLang 0.5.10's dense bf16 GEMM.
    # On H100, where tables time both, Marlin's MXFP4 runs at 0.82-0.94 of its int4 rate
    # (vLLM 0.24.0, SGLang 0.5.14): the proxy errs fast by about a tenth
    ("marlin-moe-int4-proxy", "a100-sxm-80gb", "mxfp4"):  # dense bfloat16 239 TFLOP/s
    (
        ((128, 0.347), (256, 0.394), (512, 0.417)),
        ((128, 0.421), (256, 0.47), (512, 0.514)),
        ((128, 0.457), (256, 0.516), (512, 0.551))),
    # Hopper before vLLM 0.12 (RELEASE_ROUTES: Marlin): vLLM 0.14.0's own fused_marlin_moe
    # timed with int4 weights (kernel_source vllm_marlin_moe, int4_wo;
    # collector/vllm/collect_moe_v1.py), the function vLLM's MXFP4 Marlin path calls with
    # weight type float4_e2m1f: a proxy (the same 0.82-0.94 caveat), ≥ 128 experts, against
    # vLLM 0.14.0's dense bf16 GEMM
    ("vllm-marlin-int4-proxy", "h100-sxm-80gb", "mxfp4"):  # dense bfloat16 799 TFLOP/s
    (
        ((128, 0.19), (256, 0.214), (512, 0.226)),
        ((128, 0.231), (256, 0.264), (512, 0.278)),
        ((128, 0.259), (256, 0.293), (512, 0.315))),
    ("vllm-marlin-int4-proxy", "h200-sxm-141gb", "mxfp4"):  # dense bfloat16 766 TFLOP/s
    (
        ((128, 0.2), (256, 0.225), (512, 0.238)),
        ((128, 0.246), (256, 0.278), (512, 0.297)),
        ((128, 0.273), (256, 0.312), (512, 0.334))),
    # --- bwmxfp4 --- Blackwell: vLLM runs gpt-oss's MXFP4 experts in FlashInfer's TRT-LLM-gen
    # MXFP4 × BF16 MoE by default (engines/vllm.py Calibration.mxfp4_expert_dtype says why);
    # vLLM 0.24.0's B200 table times it (kernel_source vllm_gptossmxfp4moe_flashinfer_trtllm_
    # mxfp4_bf16_trtllmmxfp4expertsmonolithic, w4a16_mxfp4) on gpt-oss's own shapes (32 and
    # 128 experts) at moe_tp 1-8; none at ≤ 256 columns (dense rate there)
    ("vllm-flashinfer-trtllm-mxfp4-bf16", "b200", "mxfp4"):  # dense bfloat16 1524 TFLOP/s
    (
        (),
        ((128, 0.204), (256, 0.232), (512, 0.248)),
        ((128, 0.292), (256, 0.319), (512, 0.334))),
    # --- bwmxfp4 --- MXFP4 experts with MXFP8 activations ("mxfp4_mxfp8": SGLang's and
    # TensorRT-LLM's default on SM100, engines/<engine>.py Calibration.mxfp4_expert_dtype)
    # against the same table set's dense per-tensor fp8 GEMM; gpt-oss's own shapes (32 and 128
    # experts), none at ≤ 256 columns (dense rate there). SGLang 0.5.14's FlashInfer TRT-LLM
    # MoE (kernel_source sglang_flashinfer_trtllm_moe, w4a8_mxfp4_mxfp8; the collector runs
    # moe_runner_backend flashinfer_mxfp4 with precision "default", collector/sglang/
    # collect_moe.py), moe_tp 1-8
    ("sglang-flashinfer-mxfp4-mxfp8", "b200", "mxfp4_mxfp8"):  # dense fp8 1881 TFLOP/s
    (
        (),
        ((128, 0.376), (256, 0.511), (512, 0.542)),
        ((128, 0.576), (256, 0.877), (512, 0.971))),
    # TensorRT-LLM 1.3.0rc10's TRT-LLM-gen MoE (kernel_source moe_torch_flow, w4a8_mxfp4_mxfp8;
    # the collector pins moe_backend TRTLLM for gpt-oss on SM100, collector/trtllm/
    # collect_moe.py, as 1.3's AUTO resolves it), moe_tp 1 only: the > 768 band
    ("trtllm-gen-mxfp4-mxfp8", "b200", "mxfp4_mxfp8"):  # dense fp8 1874 TFLOP/s
    (
        (),
        (),
        ((128, 0.577), (256, 0.736), (512, 0.919))),
}

# --- mxfp4 --- the fewest routed experts a key's table times, where not MIN_EXPERTS: the OAI
# Triton MXFP4 tables time gpt-oss-20b's own 32-expert shape (and gpt-oss-120b's 128)
KEY_MIN_EXPERTS: dict[tuple[str, str, str], int] = {
    ("vllm-oai-triton-mxfp4", "h100-sxm-80gb", "mxfp4"): 32,
    ("vllm-oai-triton-mxfp4", "h200-sxm-141gb", "mxfp4"): 32,
    # --- bwmxfp4 ---
    ("vllm-flashinfer-trtllm-mxfp4-bf16", "b200", "mxfp4"): 32,
    ("sglang-flashinfer-mxfp4-mxfp8", "b200", "mxfp4_mxfp8"): 32,
    ("trtllm-gen-mxfp4-mxfp8", "b200", "mxfp4_mxfp8"): 32,
}

# --- moe3 --- (engine kernel family, GPU id, MoE kernel dtype) → the kernel family that runs
# those experts where it is not the engine's default one. TensorRT-LLM's CUTLASS MoE runs FP8
# block scales on Hopper only (tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py
# CutlassFusedMoE: "fp8 block scales (SM90 Hopper only)", 1.0-1.2; later releases'
# can_implement table: FP8_BLOCK_SCALES on SM 90/120); on SM100 FP8 block-scaled experts run
# in DeepGemmFusedMoE (moe_config.backend DEEPGEMM: TensorRT-LLM's own DeepSeek-V3 FP8
# block-scale accuracy tests pick it on SM 100/103, tests/integration/defs/accuracy/
# test_llm_api_pytorch.py test_fp8_blockscale; WideEPMoE's SM100 path routes block FP8 to
# the same DeepGEMM op, fused_moe/ops MoEOpSelector). aiconfigurator's collector times them
# so (collector/trtllm/collect_moe.py: moe_backend "deepgemm" on SM100/103, kernel_source
# "deepgemm"). Only B200 has a TensorRT-LLM 1.2 table; GB200 (tables from 1.3.0rc10 on) keeps
# the dense rate.
KERNEL_ROUTES: dict[tuple[str, str, str], str] = {
    ("trtllm-cutlass-moe", "b200", "fp8_block"): "trtllm-deepgemm-moe",
    # --- mxfp4 --- vLLM's MXFP4 experts (gpt-oss; docs/moe-gemm.md, which kernel runs them):
    # vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend picks the Triton
    # backend (OAI triton_kernels matmul_ogs, fused_moe/gpt_oss_triton_kernels_moe.py) on
    # SM90 where triton_kernels imports (bundled as vllm.third_party.triton_kernels from 0.12;
    # 0.10.2 / 0.11.0 only where installed beside the wheel), and Marlin
    # (fused_marlin_moe → moe_wna16_marlin_gemm, FP4 weight type) below SM90 in every release
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "mxfp4"): "vllm-oai-triton-mxfp4",
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "mxfp4"): "vllm-oai-triton-mxfp4",
    ("vllm-triton-fused-moe", "a100-sxm-80gb", "mxfp4"): "marlin-moe-int4-proxy",
    # --- bwmxfp4 --- and on SM100 FlashInfer's TRT-LLM-gen MXFP4 × BF16 MoE (every release
    # from 0.10.2 where flashinfer is installed, a wheel dependency from 0.12; docs/moe-gemm.md)
    ("vllm-triton-fused-moe", "b200", "mxfp4"): "vllm-flashinfer-trtllm-mxfp4-bf16",
    # SGLang: moe_runner_backend flashinfer_mxfp4 on SM100 (server_args.py), MXFP8
    # activations; TensorRT-LLM: W4A8_MXFP4_MXFP8 (model_config.py get_mxfp4_quant_algo) in
    # the TRT-LLM-gen MoE, which 1.3's AUTO backend picks for gpt-oss on SM100 and its gpt-oss
    # deployment guide sets (moe_config.backend TRTLLM); a 1.2 deployment left at the default
    # CUTLASS backend runs CUTLASS's W4A8 MXFP4 MoE instead, which no table times
    ("sglang-triton-fused-moe", "b200", "mxfp4_mxfp8"): "sglang-flashinfer-mxfp4-mxfp8",
    ("trtllm-cutlass-moe", "b200", "mxfp4_mxfp8"): "trtllm-gen-mxfp4-mxfp8",
}


# --- mxfp4 --- routes that depend on the engine release: (engine kernel family, GPU id, MoE
# kernel dtype) → (first release of KERNEL_ROUTES' route, the family that runs before it).
# vLLM's MXFP4 experts on Hopper: Triton needs the triton_kernels module, which the wheel
# bundles from 0.12.0 (vllm/third_party/triton_kernels; utils/import_utils.py
# has_triton_kernels); 0.10.x-0.11.x wheels do not ship it, so get_mxfp4_backend
# (quantization/mxfp4.py) falls to Marlin unless it was installed beside vLLM (GPUStack's
# runner image for 0.11.0, gpustack/runner pack/cuda/Dockerfile @ 01961f47, installs vLLM,
# FlashInfer 0.3.1 and LMCache, not triton_kernels)
RELEASE_ROUTES: dict[tuple[str, str, str], tuple[tuple[int, ...], str]] = {
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "mxfp4"): ((0, 12, 0), "vllm-marlin-int4-proxy"),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "mxfp4"): ((0, 12, 0), "vllm-marlin-int4-proxy"),
}


def kernel_family(kernels: str, gpu_id: str, kernel_dtype: str,
                  release: tuple[int, ...] | None = None) -> str:
    """The kernel family that runs an engine's routed experts of `kernel_dtype` on `gpu_id`
    in `release` (None: the newest): RELEASE_ROUTES' older family before its first release,
    else KERNEL_ROUTES' entry, else the engine's own (Calibration.moe_kernels)."""
    key = (kernels, gpu_id, kernel_dtype)
    older = RELEASE_ROUTES.get(key)
    if older is not None and release is not None and release < older[0]:
        return older[1]
    return KERNEL_ROUTES.get(key, kernels)


# --- moe2 --- expert parallelism: (kernel family, GPU id, MoE kernel dtype) → (EP size, curve)
# per EP size of the tables (2-64), EP ranks each holding num_experts / EP whole experts (full
# moe_intermediate width, moe_tp 1), balanced routing; t = the whole EP group's tokens × top_k /
# num_experts, as at EP 1 (aiconfigurator queries its tables with num_tokens ×
# attention_dp_size, aic-core/rust/aiconfigurator-core/src/operators/moe.rs MoE::query). The
# kernels are the same fused MoE with an expert map (vLLM's, SGLang's Triton, TensorRT-LLM's
# CUTLASS), fed every token of the group: not DeepEP's dispatch nor DeepGEMM's grouped GEMM.
# benchmarks/moe_gemm_tables.py's "EP" lines at aiconfigurator 095f58a5.
EP_CURVES: dict[tuple[str, str, str], tuple[tuple[int, Curve], ...]] = {
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "bfloat16"): (
        (2, ((128, 0.194), (256, 0.228), (512, 0.241))),
        (4, ((128, 0.178), (256, 0.209), (512, 0.212))),
        (8, ((128, 0.149), (256, 0.171), (512, 0.176))),
        (16, ((128, 0.116), (256, 0.133), (512, 0.127))),
        (32, ((128, 0.097), (256, 0.104), (512, 0.091))),
        (64, ((128, 0.044), (256, 0.048), (512, 0.04))),
    ),
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8"): (
        (2, ((128, 0.35), (256, 0.378), (512, 0.386))),
        (4, ((128, 0.303), (256, 0.325), (512, 0.334))),
        (8, ((128, 0.245), (256, 0.269), (512, 0.267))),
        (16, ((128, 0.186), (256, 0.2), (512, 0.189))),
        (32, ((128, 0.125), (256, 0.132), (512, 0.119))),
        (64, ((128, 0.062), (256, 0.067), (512, 0.056))),
    ),
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): (
        (2, ((128, 0.616), (256, 0.722), (512, 0.729))),
        (4, ((128, 0.491), (256, 0.572), (512, 0.584))),
        (8, ((128, 0.353), (256, 0.393), (512, 0.394))),
        (16, ((128, 0.221), (256, 0.24), (512, 0.238))),
        (32, ((128, 0.127), (256, 0.134), (512, 0.132))),
        (64, ((128, 0.066), (256, 0.069), (512, 0.059))),
    ),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "bfloat16"): (
        (2, ((128, 0.251), (256, 0.267), (512, 0.269))),
        (4, ((128, 0.222), (256, 0.243), (512, 0.243))),
        (8, ((128, 0.178), (256, 0.191), (512, 0.195))),
        (16, ((128, 0.139), (256, 0.147), (512, 0.14))),
        (32, ((128, 0.096), (256, 0.1), (512, 0.09))),
        (64, ((128, 0.048), (256, 0.052), (512, 0.043))),
    ),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8"): (
        (2, ((128, 0.348), (256, 0.365), (512, 0.377))),
        (4, ((128, 0.298), (256, 0.321), (512, 0.321))),
        (8, ((128, 0.239), (256, 0.264), (512, 0.254))),
        (16, ((128, 0.18), (256, 0.193), (512, 0.178))),
        (32, ((128, 0.12), (256, 0.126), (512, 0.111))),
        (64, ((128, 0.058), (256, 0.063), (512, 0.052))),
    ),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): (
        (2, ((128, 0.572), (256, 0.651), (512, 0.678))),
        (4, ((128, 0.458), (256, 0.515), (512, 0.52))),
        (8, ((128, 0.325), (256, 0.353), (512, 0.349))),
        (16, ((128, 0.204), (256, 0.216), (512, 0.211))),
        (32, ((128, 0.116), (256, 0.121), (512, 0.118))),
        (64, ((128, 0.06), (256, 0.062), (512, 0.053))),
    ),
    ("sglang-triton-fused-moe", "h100-sxm-80gb", "bfloat16"): (
        (2, ((128, 0.245), (256, 0.283), (512, 0.309))),
        (4, ((128, 0.224), (256, 0.265), (512, 0.284))),
        (8, ((128, 0.199), (256, 0.238), (512, 0.249))),
        (16, ((128, 0.18), (256, 0.213), (512, 0.236))),
        (32, ((128, 0.169), (256, 0.218), (512, 0.237))),
        (64, ((128, 0.143), (256, 0.183), (512, 0.213))),
    ),
    ("sglang-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): (
        (2, ((128, 0.473), (256, 0.664), (512, 0.756))),
        (4, ((128, 0.409), (256, 0.548), (512, 0.619))),
        (8, ((128, 0.311), (256, 0.389), (512, 0.423))),
        (16, ((128, 0.266), (256, 0.334), (512, 0.32))),
        (32, ((128, 0.241), (256, 0.314), (512, 0.299))),
        (64, ((128, 0.175), (256, 0.227), (512, 0.268))),
    ),
    ("sglang-triton-fused-moe", "h200-sxm-141gb", "bfloat16"): (
        (2, ((128, 0.291), (256, 0.321), (512, 0.354))),
        (4, ((128, 0.276), (256, 0.305), (512, 0.324))),
        (8, ((128, 0.233), (256, 0.27), (512, 0.285))),
        (16, ((128, 0.225), (256, 0.257), (512, 0.286))),
        (32, ((128, 0.197), (256, 0.245), (512, 0.277))),
        (64, ((128, 0.172), (256, 0.215), (512, 0.25))),
    ),
    ("sglang-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): (
        (2, ((128, 0.557), (256, 0.651), (512, 0.7))),
        (4, ((128, 0.446), (256, 0.51), (512, 0.583))),
        (8, ((128, 0.367), (256, 0.41), (512, 0.459))),
        (16, ((128, 0.305), (256, 0.358), (512, 0.357))),
        (32, ((128, 0.272), (256, 0.337), (512, 0.323))),
        (64, ((128, 0.183), (256, 0.245), (512, 0.286))),
    ),
    ("trtllm-cutlass-moe", "h100-sxm-80gb", "bfloat16"): (
        (2, ((128, 0.391), (256, 0.635), (512, 0.758))),
        (4, ((128, 0.368), (256, 0.607), (512, 0.718))),
        (8, ((128, 0.345), (256, 0.563), (512, 0.714))),
        (16, ((128, 0.298), (256, 0.472), (512, 0.614))),
        (32, ((128, 0.224), (256, 0.393), (512, 0.514))),
        (64, ((128, 0.143), (256, 0.161), (512, 0.197))),
    ),
    ("trtllm-cutlass-moe", "h100-sxm-80gb", "fp8"): (
        (2, ((128, 0.581), (256, 0.853), (512, 0.996))),
        (4, ((128, 0.537), (256, 0.761), (512, 0.951))),
        (8, ((128, 0.473), (256, 0.664), (512, 0.799))),
        (16, ((128, 0.383), (256, 0.532), (512, 0.612))),
        (32, ((128, 0.214), (256, 0.318), (512, 0.416))),
        (64, ((128, 0.14), (256, 0.18), (512, 0.172))),
    ),
    ("trtllm-cutlass-moe", "h100-sxm-80gb", "fp8_block"): (
        (2, ((128, 0.454), (256, 0.528), (512, 0.506))),
        (4, ((128, 0.437), (256, 0.538), (512, 0.521))),
        (8, ((128, 0.416), (256, 0.515), (512, 0.508))),
        (16, ((128, 0.376), (256, 0.46), (512, 0.461))),
        (32, ((128, 0.3), (256, 0.368), (512, 0.395))),
        (64, ((128, 0.186), (256, 0.249), (512, 0.285))),
    ),
    ("trtllm-cutlass-moe", "h200-sxm-141gb", "bfloat16"): (
        (2, ((128, 0.527), (256, 0.761), (512, 0.839))),
        (4, ((128, 0.494), (256, 0.71), (512, 0.812))),
        (8, ((128, 0.418), (256, 0.67), (512, 0.727))),
        (16, ((128, 0.355), (256, 0.523), (512, 0.626))),
        (32, ((128, 0.261), (256, 0.418), (512, 0.538))),
        (64, ((128, 0.162), (256, 0.175), (512, 0.188))),
    ),
    ("trtllm-cutlass-moe", "h200-sxm-141gb", "fp8"): (
        (2, ((128, 0.697), (256, 0.935), (512, 1.112))),
        (4, ((128, 0.613), (256, 0.853), (512, 0.997))),
        (8, ((128, 0.519), (256, 0.732), (512, 0.835))),
        (16, ((128, 0.435), (256, 0.563), (512, 0.63))),
        (32, ((128, 0.234), (256, 0.345), (512, 0.417))),
        (64, ((128, 0.147), (256, 0.171), (512, 0.161))),
    ),
    ("trtllm-cutlass-moe", "h200-sxm-141gb", "fp8_block"): (
        (2, ((128, 0.531), (256, 0.616), (512, 0.552))),
        (4, ((128, 0.503), (256, 0.605), (512, 0.561))),
        (8, ((128, 0.474), (256, 0.565), (512, 0.537))),
        (16, ((128, 0.422), (256, 0.485), (512, 0.473))),
        (32, ((128, 0.329), (256, 0.379), (512, 0.418))),
        (64, ((128, 0.201), (256, 0.254), (512, 0.283))),
    ),
    ("trtllm-cutlass-moe", "b200", "bfloat16"): (
        (2, ((128, 0.438), (256, 0.672), (512, 0.834))),
        (4, ((128, 0.384), (256, 0.605), (512, 0.775))),
        (8, ((128, 0.33), (256, 0.546), (512, 0.686))),
        (16, ((128, 0.306), (256, 0.452), (512, 0.549))),
        (32, ((128, 0.218), (256, 0.287), (512, 0.372))),
        (64, ((128, 0.123), (256, 0.183), (512, 0.214))),
    ),
    ("trtllm-cutlass-moe", "b200", "fp8"): (
        (2, ((128, 0.632), (256, 0.911), (512, 0.984))),
        (4, ((128, 0.558), (256, 0.802), (512, 0.868))),
        (8, ((128, 0.433), (256, 0.622), (512, 0.666))),
        (16, ((128, 0.33), (256, 0.417), (512, 0.451))),
        (32, ((128, 0.192), (256, 0.233), (512, 0.265))),
        (64, ((128, 0.099), (256, 0.127), (512, 0.15))),
    ),
    ("trtllm-cutlass-moe", "b200", "nvfp4"): (
        (2, ((128, 0.37), (256, 0.474), (512, 0.53))),
        (4, ((128, 0.312), (256, 0.415), (512, 0.485))),
        (8, ((128, 0.308), (256, 0.363), (512, 0.41))),
        (16, ((128, 0.195), (256, 0.259), (512, 0.313))),
        (32, ((128, 0.129), (256, 0.168), (512, 0.182))),
        (64, ((128, 0.066), (256, 0.087), (512, 0.103))),
    ),
    # --- moe3 --- DeepGEMM on B200 (TensorRT-LLM 1.2.0rc5, KERNEL_ROUTES), moe_tp 1, balanced
    ("trtllm-deepgemm-moe", "b200", "fp8_block"): (
        (2, ((128, 0.276), (256, 0.34), (512, 0.367))),
        (4, ((128, 0.313), (256, 0.415), (512, 0.467))),
        (8, ((128, 0.27), (256, 0.34), (512, 0.373))),
        (16, ((128, 0.274), (256, 0.367), (512, 0.427))),
        (32, ((128, 0.209), (256, 0.266), (512, 0.305))),
        (64, ((128, 0.121), (256, 0.152), (512, 0.164))),
    ),
}


# --- deepgemm --- DeepGEMM's grouped FP8 GEMMs on Hopper: SGLang 0.5.10's wideep tables
# (aic-core/.../systems/data/<gpu>/moe/sglang/0.5.10/wideep_context_moe_perf.parquet,
# kernel_source "deepepmoe", moe_dtype fp8_block) time DeepEPMoE.run_moe_core alone: the collector
# (collector/sglang/collect_wideep_deepep_moe.py at feebdae3, which added these tables;
# collector/wideep/sglang/collect_deepep_moe.py at 095f58a5) builds SGLang with moe_a2a_backend
# "deepep" and moe_runner_backend "deep_gemm", hands run_moe_core a synthetic
# DeepEPNormalDispatchOutput (FP8 hidden states + block scales already on the rank) and times that
# call with CUDA events: the local permute, DeepGEMM's contiguous grouped GEMMs, the activation
# and the un-permute, no dispatch or combine (kvplan charges those in perf/expert.py).
# DeepSeek-V3's shape (hidden 7168, moe_intermediate 2048, 256 experts, top-8) on one GPU holding
# 256 / EP whole experts, num_tokens = the whole EP group's tokens; uniform routing (every local
# expert gets t tokens); against SGLang 0.5.10's dense per-tensor fp8 GEMM (H100 939, H200 1059
# TFLOP/s). No EP-2 row reaches t = 128 (EP 2-3 read EP 4's curve: ep_read); held at 64 above, as
# EP_CURVES. The context (prefill, normal-mode) rows; decode steps read them at the ridge floor,
# as every curve, except behind DeepEP's low-latency kernels at EP ≥ 32 (DECODE_EP_CURVES: the
# generation rows, masked GEMM under a CUDA graph, 2.5-5x faster there;
# benchmarks/moe_gemm_tables.py "DeepGEMM" lines).
_DEEPGEMM_H100: tuple[tuple[int, Curve], ...] = (
    (4, ((128, 0.493), (256, 0.827), (512, 1.04))),
    (8, ((128, 0.433), (256, 0.715), (512, 0.948))),
    (16, ((128, 0.346), (256, 0.577), (512, 0.788))),
    (32, ((128, 0.238), (256, 0.413), (512, 0.601))),
    (64, ((128, 0.12), (256, 0.226), (512, 0.402))),
)
_DEEPGEMM_H200: tuple[tuple[int, Curve], ...] = (
    (4, ((128, 0.569), (256, 0.889), (512, 1.046))),
    (8, ((128, 0.475), (256, 0.756), (512, 0.953))),
    (16, ((128, 0.358), (256, 0.585), (512, 0.788))),
    (32, ((128, 0.224), (256, 0.414), (512, 0.592))),
    (64, ((128, 0.111), (256, 0.213), (512, 0.396))),
)
EP_CURVES.update({
    ("sglang-deepgemm-moe", "h100-sxm-80gb", "fp8_block"): _DEEPGEMM_H100,
    ("sglang-deepgemm-moe", "h200-sxm-141gb", "fp8_block"): _DEEPGEMM_H200,
    # vLLM's DeepGEMM experts (DeepGemmExperts / TritonOrDeepGemmExperts: the same DeepGEMM
    # grouped GEMMs behind vLLM's own permute): SGLang's table as a proxy (PROXIES)
    ("vllm-deepgemm-moe", "h100-sxm-80gb", "fp8_block"): _DEEPGEMM_H100,
    ("vllm-deepgemm-moe", "h200-sxm-141gb", "fp8_block"): _DEEPGEMM_H200,
})

# --- fimoe --- vLLM's FP8 block-scaled experts on Hopper with expert parallelism run
# FlashInfer's CUTLASS MoE (FlashInferExperts) in 0.15-0.33 (VLLM_FI_CUTLASS says which
# releases, docs/moe-gemm.md which kernel runs). vLLM 0.24.0's tables time it (kernel_source
# vllm_fp8moe_flashinfer_cutlass_flashinferexperts, fp8_block: moe_tp 1, moe_ep_size 2-256,
# the fine-grained shapes, balanced routing) against the same release's dense per-tensor fp8
# GEMM (CutlassFP8ScaledMMLinearKernel: H100 844, H200 917 TFLOP/s); benchmarks/
# moe_gemm_tables.py's "EP" lines of vllm-flashinfer-cutlass-moe. vLLM 0.15.0-0.16.0 run it
# for TP-split layouts too: those read the EP curve at EP = MoE TP (TP_AS_EP, a proxy, PROXIES)
_FI_CUTLASS_H100 = (
    (2, ((128, 0.417), (256, 0.494), (512, 0.487))),
    (4, ((128, 0.402), (256, 0.484), (512, 0.472))),
    (8, ((128, 0.381), (256, 0.452), (512, 0.43))),
    (16, ((128, 0.329), (256, 0.408), (512, 0.376))),
    (32, ((128, 0.233), (256, 0.301), (512, 0.301))),
    (64, ((128, 0.15), (256, 0.194), (512, 0.186))),
)
_FI_CUTLASS_H200 = (
    (2, ((128, 0.449), (256, 0.519), (512, 0.501))),
    (4, ((128, 0.43), (256, 0.496), (512, 0.48))),
    (8, ((128, 0.406), (256, 0.466), (512, 0.437))),
    (16, ((128, 0.349), (256, 0.418), (512, 0.386))),
    (32, ((128, 0.247), (256, 0.307), (512, 0.31))),
    (64, ((128, 0.156), (256, 0.201), (512, 0.192))),
)
for _fam in ("vllm-flashinfer-cutlass-moe", "vllm-flashinfer-cutlass-moe-tp",
             "vllm-flashinfer-cutlass-moe-deepep"):  # --- deepep --- behind DeepEP HT, a proxy
    EP_CURVES[(_fam, "h100-sxm-80gb", "fp8_block")] = _FI_CUTLASS_H100
    EP_CURVES[(_fam, "h200-sxm-141gb", "fp8_block")] = _FI_CUTLASS_H200

# --- deepgemm --- decode steps behind DeepEP's low-latency kernels (SGLang deepep_mode auto
# for decode batches, vLLM deepep_low_latency): DeepGEMM's masked grouped GEMM, which the same
# set's wideep_generation_moe_perf rows time (DeepEPLLDispatchOutput, masked_m per expert,
# under a CUDA graph; uniform routing; ≤ 128 requests per rank, so t ≥ 128 only from EP 32),
# against the same dense fp8 rate. Below EP 32 decode steps read the context curve.
DECODE_EP_CURVES: dict[tuple[str, str, str], tuple[tuple[int, Curve], ...]] = {}
for _gpu, _dec in (("h100-sxm-80gb", ((32, ((128, 0.594),)),
                                      (64, ((128, 0.52), (256, 0.874))))),
                   ("h200-sxm-141gb", ((32, ((128, 0.686),)),
                                       (64, ((128, 0.588), (256, 0.886)))))):
    for _fam in ("sglang-deepgemm-moe", "vllm-deepgemm-moe"):
        DECODE_EP_CURVES[(_fam, _gpu, "fp8_block")] = _dec


def decode_curve_for_layout(kernels: str, gpu_id: str, kernel_dtype: str, num_experts: int,
                            ep: int) -> Curve:
    """Decode steps' curve behind DeepEP's low-latency kernels: DECODE_EP_CURVES at the
    largest measured EP size ≤ ep (held at 64 above); () where none (decode steps then read
    the layout's own curve)."""
    eps = DECODE_EP_CURVES.get((kernels, gpu_id, kernel_dtype), ())
    fit = [c for e, c in eps if e <= ep]
    return fit[-1] if fit and num_experts >= MIN_EXPERTS else ()


# --- deepgemm --- DeepEP layouts (SGLang --moe-a2a-backend deepep, vLLM's deepep all2all
# backends): the engine's default family → the DeepGEMM family that runs behind DeepEP (SGLang:
# DeepEP selects moe_runner_backend deep_gemm for FP8 block-scaled experts, docs/moe-gemm.md;
# vLLM: DeepGEMM's experts in 0.11-0.14, and behind deepep_low_latency from 0.15 —
# VLLM_DEEPEP_HT_FI_CUTLASS sends 0.15+ high-throughput to FlashInfer CUTLASS); other DeepEP
# experts keep the dense rate (DEEPEP_DENSE_RATE)
DEEPEP_ROUTES: dict[tuple[str, str, str], str] = {
    ("sglang-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): "sglang-deepgemm-moe",
    ("sglang-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): "sglang-deepgemm-moe",
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): "vllm-deepgemm-moe",
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): "vllm-deepgemm-moe",
}
# --- deepgemm --- vLLM releases that run DeepGEMM for FP8 block-scaled experts on Hopper
# without DeepEP (docs/moe-gemm.md, which kernel runs): (first release, first release past the
# range, first release that leaves MoE TP ≥ tp_limit to Triton, tp_limit). 0.11.0:
# VLLM_USE_DEEP_GEMM default 1 → DeepGEMM at every layout; 0.12.0-0.14.0: oracle/fp8.py
# select_fp8_moe_backend switches DeepGEMM off by default at MoE TP ≥ 8, on below it and with
# EP (MoE TP 1). 0.10.x (VLLM_USE_DEEP_GEMM default 0: Triton) keeps what it read before;
# 0.15 and later: VLLM_FI_CUTLASS.
VLLM_DEEPGEMM: dict[tuple[str, str, str], tuple[tuple[int, ...], tuple[int, ...],
                                                tuple[int, ...], int]] = {
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): ((0, 11), (0, 15), (0, 12), 8),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): ((0, 11), (0, 15), (0, 12), 8),
}
# --- fimoe --- vLLM releases whose FP8 block-scaled experts on Hopper run FlashInfer's CUTLASS
# MoE (oracle/fp8.py): (first release, first release past the TP-split range). 0.15.0 and
# 0.16.0: FLASHINFER_CUTLASS is the first backend of select_fp8_moe_backend's list that
# supports block FP8 on SM90, in every layout (0.15.0's FlashInferExperts
# _supports_parallel_config also wants dp_size 1 or dp_size = ep_size: DP without EP, or
# -tp > 1 with -dp > 1 and EP, fall to DeepGEMM or Triton there, not told apart here);
# 0.17.0-0.33.0 (read: 0.17.0, 0.18.0, 0.19.0, 0.20.0, 0.24.0, 0.28.0, 0.33.0; the releases
# between them not read, the same code at both ends): _get_priority_backends "On Hopper for
# Block Fp8, prefer Triton for TP and FI CUTLASS for EP" (moe_parallel_config.ep_size > 1), the
# default all2all backend allgather_reducescatter (standard activation format, which
# FlashInferExperts takes) and flashinfer-python a wheel dependency. EP layouts from the
# first release, and the newest (release None), read vllm-flashinfer-cutlass-moe; TP-split
# layouts before the second vllm-flashinfer-cutlass-moe-tp (a proxy).
VLLM_FI_CUTLASS: dict[tuple[str, str, str], tuple[tuple[int, ...], tuple[int, ...]]] = {
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): ((0, 15), (0, 17)),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): ((0, 15), (0, 17)),
}

# --- dgpad --- the rows vLLM's DeepGEMM experts compute without DeepEP or DP (TP-split, or
# EP over the TP ranks). vLLM runs DeepGEMM's contiguous grouped GEMM
# (m_grouped_fp8_gemm_nt_contiguous), rows in 128-row blocks of one expert each
# (DeepGEMM get_mk_alignment_for_contiguous_layout), at every step size on Hopper from 0.11.1:
# is_deep_gemm_e8m0_used() (VLLM_USE_DEEP_GEMM_E8M0 default 1, no architecture check)
# short-circuits _valid_deep_gemm's M >= 128 test in fused_experts; in 0.11.0 the Hopper switch
# (VLLM_USE_DEEP_GEMM_E8M0_HOPPER) is off, so steps under 128 tokens run the Triton fused_moe.
# With no per-expert counts (MoEPrepareAndFinalizeNoEP: expert_tokens_meta None) vLLM sizes the
# buffer for the worst case, M_sum = round_up(tokens × top_k + local experts × 127, 128)
# (model_executor/layers/fused_moe/deep_gemm_utils.py; with --enable-expert-parallel and no DP
# there is no all-to-all, the same sizing over the rank's local experts). Modes: "all": the
# blocks no token fills keep expert id 0 (torch.zeros) and DeepGEMM computes every block
# (0.11.x-0.12.x); "routed": they are -1, and DeepGEMM skips the math of each 64-row half whose
# first row is -1 (scheduler.cuh is_computation_valid), so each routed expert computes its rows
# in 64-row halves (0.13.0-0.14.x; the skipped blocks still load and store their tiles, not
# charged). Read in the 0.11.0, 0.11.1, 0.12.0, 0.13.0 and 0.14.0 sdists and DeepGEMM at the
# commits their tools/install_deepgemm.sh pins (ea9c5d92, 594953ac), which the docker image
# builds (the wheel does not depend on deep_gemm: without it vLLM runs the Triton fused_moe,
# whose work follows the routed tokens). (first release, first release past, mode, the fewest
# step tokens that run DeepGEMM).
DEEPGEMM_BLOCK_ROWS = 128
DEEPGEMM_HALF_ROWS = 64
# PerfContext.expert_padding: (mode, the fewest step tokens that run it, experts on the GPU)
Padding = tuple[str, int, int] | tuple[()]
VLLM_DEEPGEMM_ROWS: tuple[tuple[tuple[int, ...], tuple[int, ...], str, int], ...] = (
    ((0, 11, 0), (0, 11, 1), "all", DEEPGEMM_BLOCK_ROWS),
    ((0, 11, 1), (0, 13), "all", 0),
    ((0, 13), (0, 15), "routed", 0),
)


def deepgemm_rows(family: str, release: tuple[int, ...] | None) -> tuple[str, int]:
    """How vLLM's DeepGEMM experts pad their rows (VLLM_DEEPGEMM_ROWS): ("all" | "routed",
    the fewest step tokens that run DeepGEMM), or ("", 0) (the routed tokens' own rows:
    another kernel, or a release not read)."""
    if family != "vllm-deepgemm-moe" or release is None:
        return "", 0
    return next(((mode, least) for lo, hi, mode, least in VLLM_DEEPGEMM_ROWS
                 if lo <= release < hi), ("", 0))


def padding_note(padding: Padding) -> str:
    """What Performance.routed_experts.padding says of PerfContext.expert_padding ("" for
    none)."""
    if not padding:
        return ""
    mode, least, local = padding
    b, h = DEEPGEMM_BLOCK_ROWS, DEEPGEMM_HALF_ROWS
    which, cost = ((f"every {b}-row block", "a decode step costs about the same at any batch")
                   if mode == "all" else
                   (f"the routed experts' rows in {h}-row halves",
                    f"at least {h} rows for every expert a step reaches"))
    when = f" (from {least} tokens a step: smaller steps run Triton)" if least else ""
    return (f"vLLM's DeepGEMM experts compute {which} of a buffer sized for all {local} "
            f"experts on the GPU, round_up(tokens × top_k + {local} × {b - 1}, {b}) rows a "
            f"layer{when}: {cost} (docs/moe-gemm.md)")


def padded_rows(mode: str, pairs: float, local: int, local_pairs: float,
                touched: float) -> float:
    """Rows one MoE layer's grouped GEMM computes on a GPU holding `local` experts, for
    `pairs` = tokens × top_k (every rank's, as M_sum counts them), `local_pairs` of them
    routed to this GPU's experts, `touched` of its experts reached (expected count):
    "all": M_sum = round_up(pairs + local × 127, 128), every block;
    "routed": each touched expert's rows in 64-row halves, the last one half full on average:
    max(touched × 64, local_pairs + touched × 32);
    "": local_pairs."""
    if mode == "all":
        b = DEEPGEMM_BLOCK_ROWS
        return math.ceil((pairs + local * (b - 1)) / b) * b
    if mode == "routed":
        h = DEEPGEMM_HALF_ROWS
        return max(touched * h, local_pairs + touched * h / 2)
    return local_pairs


# families whose TP-split layouts read the EP curve at EP = the MoE TP size (a proxy: one GPU
# holds every expert's 1/TP slice, the table times EP ranks of whole experts — the same FLOPs
# and weight bytes per GPU at the same t, other GEMM shapes)
TP_AS_EP = frozenset({"vllm-deepgemm-moe", "vllm-flashinfer-cutlass-moe-tp"})


# --- deepep --- vLLM behind its DeepEP all2all backends (--all2all-backend, kvplan
# --moe-a2a-backend deepep_high_throughput / deepep_low_latency), FP8 block-scaled experts on
# Hopper: the first release that runs FlashInfer's CUTLASS MoE behind DeepEP high-throughput.
# Read in the wheels 0.15.0, 0.16.0, 0.17.0, 0.20.0, 0.24.0, 0.33.0 (docs/moe-gemm.md, "vLLM
# behind DeepEP"): DeepEP HT's prepare/finalize (DeepEPHTPrepareAndFinalize) hands the experts
# the standard activation format; FusedMoEParallelConfig.use_batched_activation_format is true
# only for deepep_low_latency (and pplx / nixl_ep), vllm/model_executor/layers/fused_moe/
# config.py. oracle/fp8.py select_fp8_moe_backend takes the first backend whose experts class
# supports the configuration: FLASHINFER_CUTLASS comes first of those that take block FP8 on
# SM90 (0.15-0.16: the list's order; 0.17-0.33: _get_priority_backends moves it to the front
# "for EP", moe_parallel_config.ep_size > 1), and FlashInferExperts takes the standard format
# (0.15.0 only where dp_size is 1 or equals ep_size: -tp 1; -tp > 1 with -dp falls to
# DeepGEMM's TritonOrDeepGemmExperts there, not told apart). Low-latency's batched format
# rules out every standard-format class (activation_format check in
# FusedMoEExperts.is_supported_config, modular_kernel.py), so BATCHED_DEEPGEMM
# (BatchedDeepGemmExperts: DeepGEMM's fp8_m_grouped_gemm_nt_masked) runs where deep_gemm imports
# (vendored in the wheel from 0.20, vllm/third_party/deep_gemm; the docker image before);
# 0.33.0's Humming batched experts, listed before it, are turned down under EP
# (get_humming_moe_gemm_type: grouped_contiguous with use_ep, the batched class is
# grouped_masked). So high-throughput reads vllm-flashinfer-cutlass-moe-deepep: the FlashInfer
# CUTLASS EP rows, a proxy (PROXIES: aiconfigurator's collector/vllm/collect_moe.py builds one
# FusedMoE with dp_size 1, so no all2all: the experts see the whole EP group's tokens and skip
# the non-local ones; behind DeepEP HT they see only the tokens dispatched to them); low-latency
# keeps DEEPEP_ROUTES' DeepGEMM proxy (its masked rows as the decode curve).
VLLM_DEEPEP_HT_FI_CUTLASS: dict[tuple[str, str, str], tuple[int, ...]] = {
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): (0, 15),
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): (0, 15),
}


def _deepep_family(key: tuple[str, str, str], release: tuple[int, ...] | None,
                   low_latency: bool) -> str:
    """The kernel family behind DeepEP (layout_family): vLLM 0.15+ high-throughput
    FlashInfer CUTLASS (VLLM_DEEPEP_HT_FI_CUTLASS), else DEEPEP_ROUTES' DeepGEMM family
    (`key`'s own where none: the dense rate)."""
    first = VLLM_DEEPEP_HT_FI_CUTLASS.get(key)
    if first is not None and not low_latency and (release is None or release >= first):
        return "vllm-flashinfer-cutlass-moe-deepep"
    return DEEPEP_ROUTES.get(key, key[0])


def layout_family(kernels: str, gpu_id: str, kernel_dtype: str,
                  release: tuple[int, ...] | None, *, moe_tp: int, ep: int,
                  deepep: bool, low_latency: bool = False) -> str:
    """The kernel family that runs a layout's routed experts: behind DeepEP (`low_latency`:
    its low-latency kernels) _deepep_family (`kernels` itself where none: the dense rate);
    vLLM's DeepGEMM in the releases
    of VLLM_DEEPGEMM (every layout in 0.11, below MoE TP 8 or with EP from 0.12, `ep` > 1 or
    `moe_tp` the MoE layer's own TP size); FlashInfer's CUTLASS MoE in the releases of
    VLLM_FI_CUTLASS (EP from 0.15, TP-split in 0.15-0.16); else `kernels` (release None: the
    newest)."""
    key = (kernels, gpu_id, kernel_dtype)
    if deepep:
        return _deepep_family(key, release, low_latency)
    fi = VLLM_FI_CUTLASS.get(key)
    if fi is not None and (release is None or release >= fi[0]):
        if ep > 1:
            return "vllm-flashinfer-cutlass-moe"
        if release is not None and release < fi[1]:
            return "vllm-flashinfer-cutlass-moe-tp"
    span = VLLM_DEEPGEMM.get(key)
    if span is None or release is None or not span[0] <= release < span[1]:
        return kernels
    if ep <= 1 and release >= span[2] and moe_tp >= span[3]:
        return kernels
    return DEEPEP_ROUTES.get(key, kernels)


def moe_kernel_dtype(compute_dtype: str, quant_method: str | None, block_scaled: bool,
                     what_if: bool = False) -> str:
    """The MoE table's dtype of a deployment's experts, `compute_dtype` their GEMM dtype
    (perf/step.py expert_dtype_for): unquantized bf16/fp16 → 'bfloat16';
    FP8 experts run in FP8 → 'fp8_block' with block scales, else 'fp8'; NVFP4 experts run in
    FP4 → 'nvfp4'; a real MXFP4 checkpoint's experts (gpt-oss) with 16-bit activations →
    'mxfp4' (weight-only: vLLM's Triton, Marlin or, on Blackwell, FlashInfer TRT-LLM MXFP4 ×
    BF16 MoE; KERNEL_ROUTES), with FP8 (MXFP8) activations → 'mxfp4_mxfp8'; '' for any
    other (int4, FP8 on GPUs without FP8, NVFP4 without FP4 tensor cores, MXFP4 run in FP4, a
    what-if MXFP4 checkpoint (AMD Quark's scheme, emulated in 16-bit off CDNA4) — no table
    wired for them)."""
    if quant_method is None:
        return "bfloat16" if compute_dtype in ("bfloat16", "float16") else ""
    if quant_method == "fp8" and compute_dtype == "fp8":
        return "fp8_block" if block_scaled else "fp8"
    if quant_method == "nvfp4" and compute_dtype == "fp4":
        return "nvfp4"
    if quant_method == "mxfp4" and not what_if and compute_dtype in ("bfloat16", "float16"):
        return "mxfp4"
    if quant_method == "mxfp4" and not what_if and compute_dtype == "fp8":
        return "mxfp4_mxfp8"  # --- bwmxfp4 --- MXFP8 activations (SGLang, TensorRT-LLM, SM100)
    return ""


def expert_weight_bytes(kernel_dtype: str, compute_dtype: str) -> float:
    """Bytes read per routed-expert weight element (ridge_tokens): MXFP4 ½ B + one e8m0 scale
    per 32 (4.25 bits; with bf16 or MXFP8 activations alike); else the GEMM dtype's width
    (fp8 1, fp4 ½, 16-bit 2)."""
    if kernel_dtype in ("mxfp4", "mxfp4_mxfp8"):
        return 4.25 / 8
    return {"fp8": 1.0, "fp4": 0.5}.get(compute_dtype, 2.0)


def curve_for(kernels: str, gpu_id: str, kernel_dtype: str, num_experts: int,
              shard_width: int) -> Curve:
    """The measured ratio curve of one deployment's experts, () where none is measured.
    kernels: the engine's fused-MoE kernel family (Calibration.moe_kernels); num_experts:
    routed experts per MoE layer (below MIN_EXPERTS: none); shard_width:
    moe_intermediate_size / TP, the columns of one expert on one GPU."""
    bands = CURVES.get((kernels, gpu_id, kernel_dtype))
    fewest = KEY_MIN_EXPERTS.get((kernels, gpu_id, kernel_dtype), MIN_EXPERTS)
    if bands is None or shard_width <= 0 or num_experts < fewest:
        return ()
    band = next((i for i, hi in enumerate(WIDTH_BANDS) if shard_width <= hi), len(WIDTH_BANDS))
    return bands[band]


def layout_ep(kernels: str, *, tp: int, group: int, ep: int) -> int:
    """The EP size whose EP_CURVES a layout reads: `ep`, or for the TP-split layouts of a
    TP_AS_EP family the MoE TP size (max of `tp` and `group`); ≤ 1: a TP-split curve."""
    return max(tp, group) if ep <= 1 and kernels in TP_AS_EP else ep


def ep_read(kernels: str, gpu_id: str, kernel_dtype: str, ep: int) -> int:
    """The timed EP size whose curve an `ep`-rank layout reads (0: none): the largest timed
    size ≤ ep (held at 64 above), and below the smallest timed size that size's. DeepGEMM's
    tables time no EP-2 row at 128 tokens per expert or more (EP_CURVES starts at 4); at a
    fixed number of tokens per expert their ratio never rises with EP (fewer local experts,
    a smaller grid: H200 at t = 128 0.569 / 0.475 / 0.358 at EP 4 / 8 / 16, at t = 32
    0.478 / 0.364 / 0.222 at EP 2 / 4 / 8: rows of the table _DEEPGEMM_H200 is read from,
    h200_sxm/moe/sglang/0.5.10/wideep_context_moe_perf.parquet), so EP 4's curve is a lower
    bound on EP 2-3's rate: their experts' time is at most the one charged."""
    timed = [e for e, _ in EP_CURVES.get((kernels, gpu_id, kernel_dtype), ())]
    if ep <= 1 or not timed:
        return 0
    return max((e for e in timed if e <= ep), default=timed[0])


def curve_for_layout(kernels: str, gpu_id: str, kernel_dtype: str, num_experts: int,
                     intermediate: int, *, tp: int, group: int, ep: int) -> Curve:
    """The measured curve of one MoE layout: experts split over `ep` expert-parallel ranks
    (> 1: EP_CURVES at the EP size ep_read picks), else a TP slice of every expert over the
    `group` GPUs the layer spans (1: the replica's own tp), whose shard is
    moe_intermediate_size / group columns. () where none is measured, and for the EP layouts
    of EP_UNTIMED (the engine runs another kernel there)."""
    if ep > 1 and (kernels, gpu_id, kernel_dtype) in EP_UNTIMED:
        return ()
    ep = layout_ep(kernels, tp=tp, group=group, ep=ep)  # --- deepgemm --- TP as EP: a proxy
    if ep > 1:
        read = ep_read(kernels, gpu_id, kernel_dtype, ep)
        curves = dict(EP_CURVES.get((kernels, gpu_id, kernel_dtype), ()))
        return curves[read] if read and num_experts >= MIN_EXPERTS else ()
    if kernels in TP_AS_EP:
        return ()
    return curve_for(kernels, gpu_id, kernel_dtype, num_experts,
                     -(-intermediate // max(tp, group)))


# where each kernel family's tables come from (aiconfigurator 095f58a5): engine and release
TABLE_RELEASES = {"vllm-triton-fused-moe": "vLLM 0.14.0",
                  "sglang-triton-fused-moe": "SGLang 0.5.9",
                  "trtllm-cutlass-moe": "TensorRT-LLM 1.2.0rc5",
                  "trtllm-deepgemm-moe": "TensorRT-LLM 1.2.0rc5 DeepGEMM",
                  # --- mxfp4 ---
                  "vllm-oai-triton-mxfp4": "vLLM 0.24.0 OAI Triton MXFP4",
                  "marlin-moe-int4-proxy": "SGLang 0.5.10 Marlin int4 (proxy for MXFP4 Marlin)",
                  "vllm-marlin-int4-proxy": "vLLM 0.14.0 Marlin int4 (proxy for MXFP4 Marlin)",
                  # --- bwmxfp4 ---
                  "vllm-flashinfer-trtllm-mxfp4-bf16": "vLLM 0.24.0 FlashInfer TRT-LLM MXFP4 x "
                                                       "BF16",
                  "sglang-flashinfer-mxfp4-mxfp8": "SGLang 0.5.14 FlashInfer TRT-LLM MXFP4 x "
                                                   "MXFP8",
                  "trtllm-gen-mxfp4-mxfp8": "TensorRT-LLM 1.3.0rc10 TRT-LLM-gen MXFP4 x MXFP8",
                  # --- deepgemm ---
                  "sglang-deepgemm-moe": "SGLang 0.5.10 DeepEP MoE (DeepGEMM)",
                  "vllm-deepgemm-moe": "SGLang 0.5.10 DeepEP MoE (DeepGEMM; proxy for vLLM's "
                                       "DeepGEMM experts)",
                  # --- fimoe ---
                  "vllm-flashinfer-cutlass-moe": "vLLM 0.24.0 FlashInfer CUTLASS MoE",
                  "vllm-flashinfer-cutlass-moe-tp": "vLLM 0.24.0 FlashInfer CUTLASS MoE (EP "
                                                    "rows; proxy for its TP-split run)",
                  # --- deepep ---
                  "vllm-flashinfer-cutlass-moe-deepep": "vLLM 0.24.0 FlashInfer CUTLASS MoE "
                                                        "(proxy behind DeepEP high-throughput)"}


def table_label(kernels: str, ep: int) -> str:
    """The measured table's engine release and layout, e.g. "vLLM 0.14.0, EP 8"."""
    return f"{TABLE_RELEASES.get(kernels, kernels)}, {f'EP {ep}' if ep > 1 else 'TP-split'}"


# --- mxfp4 --- kernel families whose table times another kernel than the one that runs: what
# stands in for what (table_source appends it)
PROXIES = {"marlin-moe-int4-proxy": "SGLang's Marlin MoE with int4 weights (int4_wo) as a proxy "
                                    "for vLLM's MXFP4 Marlin MoE",
           "vllm-marlin-int4-proxy": "vLLM's Marlin MoE with int4 weights (int4_wo) as a proxy "
                                     "for its MXFP4 Marlin MoE (vLLM before 0.12: no "
                                     "triton_kernels)",
           # --- deepgemm ---
           "vllm-deepgemm-moe": "SGLang's DeepEP MoE expert compute (DeepGEMM grouped GEMMs, "
                                "whole experts per EP rank) as a proxy for vLLM's DeepGEMM "
                                "experts (TP-split layouts: the EP curve at EP = MoE TP)",
           # --- fimoe ---
           "vllm-flashinfer-cutlass-moe-tp": "FlashInfer CUTLASS MoE's expert-parallel rows "
                                             "(whole experts per EP rank) as a proxy for its "
                                             "TP-split run in vLLM 0.15-0.16 (the EP curve at "
                                             "EP = MoE TP)",
           # --- deepep ---
           "vllm-flashinfer-cutlass-moe-deepep": "FlashInfer CUTLASS MoE's expert-parallel rows "
                                                 "(timed without an all2all: every EP-group "
                                                 "token fed, non-local ones skipped) as a proxy "
                                                 "for the same experts behind vLLM's DeepEP "
                                                 "high-throughput dispatch (0.15+)"}


def ep_note(layout: int, read: int) -> str:
    """What table_source adds when a layout of `layout` EP ranks reads another timed EP
    size's curve (ep_read), else ""."""
    if read <= 0 or read == layout:
        return ""
    why = ("the largest timed size below it" if read < layout else
           "the smallest timed size: a lower bound on its rate, an upper bound on its time")
    return f"; EP {layout} reads EP {read}'s curve ({why})"


def table_source(gpu_id: str, kernel_dtype: str, kernels: str = "") -> str:
    """Where the measured table is: aiconfigurator's commit, the GPU and the experts' dtype,
    and what stands in for the kernel where the table is a proxy (PROXIES)."""
    proxy = f"; {PROXIES[kernels]}" if kernels in PROXIES else ""
    return f"aiconfigurator 095f58a5 table: {gpu_id}, {kernel_dtype}{proxy}"


# why routed experts run at the dense GEMM rate (Performance.routed_experts.source)
DENSE_RATE = "no measured MoE kernel table: extrapolated"
DEEPEP_DENSE_RATE = "DeepEP with DeepGEMM: no measured MoE kernel table; extrapolated"

# --- moe4 --- (kernel family, GPU id, MoE kernel dtype) whose expert-parallel layouts run a
# kernel the EP_CURVES' table does not time → why they keep the dense rate. vLLM's FP8
# block-scaled experts with expert parallelism on Hopper: the MoE's own TP size is 1 there,
# so vLLM 0.14.0 picks DeepGEMM (vllm/model_executor/layers/fused_moe/oracle/fp8.py
# select_fp8_moe_backend: VLLM_USE_DEEP_GEMM and VLLM_MOE_USE_DEEP_GEMM default 1, switched
# off by default only at MoE TP ≥ 8; TritonOrDeepGemmExperts then runs DeepGEMM for every
# shape, VLLM_USE_DEEP_GEMM_E8M0 default 1 in vllm/utils/deep_gemm.py is_deep_gemm_e8m0_used)
# wherever deep_gemm is installed (0.11.0 too: DeepGEMM at every MoE TP), and vLLM 0.16.0-
# 0.19.0 prefer FlashInfer's CUTLASS MoE for block FP8 with EP on SM90 (oracle/fp8.py
# select_fp8_moe_backend / _get_priority_backends; flashinfer-python is a dependency of the
# wheel). aiconfigurator's vLLM tables time the Triton fused_experts()
# (collector/vllm/collect_moe_v1.py / _v2.py: fused_experts(..., quant_config=...), whose
# allow_deep_gemm defaults to False in 0.14.0 and which is Triton-only in 0.19.0). --- fimoe ---
# vLLM 0.24.0's tables time FlashInfer CUTLASS (layout_family routes 0.16 and later there,
# VLLM_FI_CUTLASS, from 0.15) and 0.11-0.14 read the DeepGEMM proxy (VLLM_DEEPGEMM), so this
# reason is left to the EP layouts of the releases neither covers: 0.10.x and older.
VLLM_EP_FP8_BLOCK = ("vLLM EP, FP8 block-scaled experts on Hopper: no table wired for this "
                     "release (before 0.11; 0.15-0.33 FlashInfer CUTLASS reads vLLM 0.24.0's "
                     "table); extrapolated")
EP_UNTIMED: dict[tuple[str, str, str], str] = {
    ("vllm-triton-fused-moe", "h100-sxm-80gb", "fp8_block"): VLLM_EP_FP8_BLOCK,
    ("vllm-triton-fused-moe", "h200-sxm-141gb", "fp8_block"): VLLM_EP_FP8_BLOCK,
}


def dense_reason(key: tuple[str, ...], ep: int) -> str:
    """Why a layout of `key` (kernel family, GPU id, kernel dtype) keeps the dense rate:
    EP_UNTIMED's reason for its expert-parallel layouts, else DENSE_RATE."""
    if ep > 1 and len(key) == 3:
        return EP_UNTIMED.get((key[0], key[1], key[2]), DENSE_RATE)
    return DENSE_RATE


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
