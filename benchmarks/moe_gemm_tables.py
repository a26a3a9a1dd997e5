"""Derive kvplan/perf/moe_gemm.py's curves from aiconfigurator's measured kernel tables.

    python benchmarks/moe_gemm_tables.py AICONFIGURATOR_CHECKOUT

AICONFIGURATOR_CHECKOUT: a checkout of ai-dynamo/aiconfigurator (commit 095f58a5 was used);
its tables are `aic-core/src/aiconfigurator_core/systems/data/<gpu>/<op>/<engine>/<version>/
<op>_perf.parquet` (op: moe, gemm). Needs pyarrow (not a kvplan dependency: this script is
run by hand when the tables change; its output is pasted into kvplan/perf/moe_gemm.py).

For each (engine table, GPU, dtype, expert shard width band) it prints the measured ratio, at
a number of routed tokens per expert t = tokens × top_k / experts, of the fused-MoE kernel's
FLOP rate to the dense GEMM FLOP rate of the same collector, GPU, engine release and dtype:

    MoE FLOP rate  = 6 × hidden × (inter / moe_tp) × tokens × top_k / latency
    dense FLOP rate = median over the gemm table's rows with 2048 ≤ m ≤ 16384, n, k ≥ 1024
                      of 2 m n k / latency
    ratio(t)       = median over the MoE shapes of the MoE FLOP rate at t / dense FLOP rate

EP curves (kvplan's expert-parallel layers): moe_ep_size 2-64 with moe_tp 1, the same
fine-grained shapes, balanced routing (moe_ep_curve says why), one curve per EP size over all
widths.
MoE rows used otherwise: expert parallelism 1, fine-grained experts (num_experts ≥ 128), moe_tp 1-8,
token distribution power_law_1.01, shard width inter / moe_tp in the band (0, 256],
(256, 768] or above 768; each shape's rate is interpolated log-linearly in t. The dense
reference is the dtype kvplan's fitted rate stands for (perf/step.py compute_dtype_for):
bf16 for bf16 experts, per-tensor fp8 for both per-tensor and block-scaled fp8 experts.
"MXFP4" lines (main_mxfp4): gpt-oss's weight-only MXFP4 experts (MXFP4_TABLES: vLLM 0.24.0's
OAI Triton MXFP4 rows on H100/H200, gpt-oss's own 32- and 128-expert shapes; SGLang 0.5.10's
int4 Marlin rows on A100 as a proxy; vLLM 0.24.0's FlashInfer TRT-LLM MXFP4 × BF16 rows on
B200) against the same table set's dense bf16 GEMM, and Marlin's MXFP4 beside its int4 rate
where one table times both ("Marlin" lines). "MXFP8" lines (MXFP8_TABLES): MXFP4 experts
with MXFP8 activations (SGLang 0.5.14's FlashInfer TRT-LLM MoE, TensorRT-LLM 1.3.0rc10's
TRT-LLM-gen MoE on B200, gpt-oss's own shapes) against the same table set's dense fp8 GEMM.
"DeepGEMM" lines (main_deepgemm, DEEPGEMM_TABLES): SGLang's DeepEP MoE expert compute
(DeepEPMoE.run_moe_core with moe_runner_backend deep_gemm: DeepGEMM's grouped FP8 GEMMs on a
synthetic dispatch output, no dispatch or combine; collector/wideep/sglang/collect_deepep_moe.py)
from the wideep_{context,generation}_moe_perf tables, DeepSeek-V3's shape at moe_ep_size 2-256,
uniform (balanced) routing, against the same table set's dense per-tensor fp8 GEMM; one curve
per EP size from the context rows, and from the generation rows for decode steps behind
DeepEP's low-latency kernels where they reach t ≥ 128 (EP ≥ 32: DECODE_EP_CURVES).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Any

GRID = (128, 256, 512)
EP_SIZES = (2, 4, 8, 16, 32, 64)  # expert-parallel group sizes of the EP curves
DATA = "aic-core/src/aiconfigurator_core/systems/data"
BANDS = ((0, 256), (256, 768), (768, 1 << 20))  # expert shard width inter / moe_tp, (lo, hi]
# kernel family (engines/base.py Calibration.moe_kernels) → the tables that time it:
# (GPU dir, engine dir, version, (MoE dtype, dense dtype) pairs, MoE kernel_source,
# dense kernel_source)
_VLLM = ("vllm_fused_moe", "vllm_default")
_SGL = ("sglang_fused_moe_triton", "sglang")
# TensorRT-LLM's PyTorch flow with its default CUTLASS MoE backend: the H200 table names the
# kernel "moe_torch_flow", the H100 and B200 tables "moe_torch_flow_cutlass"
_TRT = ("moe_torch_flow", "torch_flow")
_TRT_C = ("moe_torch_flow_cutlass", "torch_flow")
_BF16_FP8 = (("bfloat16", "bfloat16"), ("fp8", "fp8"), ("fp8_block", "fp8"))
TABLES = {
    "vllm-triton-fused-moe": (("a100_sxm", "vllm", "0.14.0", (("bfloat16", "bfloat16"),), *_VLLM),
                              ("h100_sxm", "vllm", "0.14.0", _BF16_FP8, *_VLLM),
                              ("h200_sxm", "vllm", "0.14.0", _BF16_FP8, *_VLLM)),
    "sglang-triton-fused-moe": (("a100_sxm", "sglang", "0.5.9", (("bfloat16", "bfloat16"),),
                                 *_SGL),
                                ("h100_sxm", "sglang", "0.5.9",
                                 (("bfloat16", "bfloat16"), ("fp8_block", "fp8")), *_SGL),
                                ("h200_sxm", "sglang", "0.5.9",
                                 (("bfloat16", "bfloat16"), ("fp8_block", "fp8")), *_SGL)),
    "trtllm-cutlass-moe": (("h100_sxm", "trtllm", "1.2.0rc5", _BF16_FP8, *_TRT_C),
                           ("h200_sxm", "trtllm", "1.2.0rc5", _BF16_FP8, *_TRT),
                           ("b200_sxm", "trtllm", "1.2.0rc5",
                            (*_BF16_FP8, ("nvfp4", "nvfp4")), *_TRT_C)),
    # --- moe3 --- TensorRT-LLM on Blackwell (SM100) runs FP8 block-scaled experts through
    # DeepGEMM's grouped GEMM (CutlassFusedMoE's FP8 block-scale path is Hopper-only): the
    # B200 table times them only under kernel_source "deepgemm"; the dense reference stays
    # the per-tensor fp8 GEMM kvplan's fitted rate stands for (the table's DeepGEMM dense
    # fp8_block GEMM is printed alongside, "DeepGEMM dense")
    "trtllm-deepgemm-moe": (("b200_sxm", "trtllm", "1.2.0rc5", (("fp8_block", "fp8"),),
                             "deepgemm", "torch_flow"),),
    # --- fimoe --- vLLM's FP8 block-scaled experts with expert parallelism on Hopper run
    # FlashInfer's CUTLASS MoE (FlashInferExperts; fused_moe/oracle/fp8.py
    # _get_priority_backends, 0.16-0.33: docs/moe-gemm.md). vLLM 0.24.0's tables time it
    # (kernel_source below: moe_tp 1, moe_ep_size 2-256 only, so only "EP" lines print) against
    # the same release's dense per-tensor fp8 GEMM (CutlassFP8ScaledMMLinearKernel)
    "vllm-flashinfer-cutlass-moe": tuple(
        (gpu, "vllm", "0.24.0", (("fp8_block", "fp8"),),
         "vllm_fp8moe_flashinfer_cutlass_flashinferexperts", "CutlassFP8ScaledMMLinearKernel")
        for gpu in ("h100_sxm", "h200_sxm")),
}
# --- mxfp4 --- gpt-oss's MXFP4 routed experts (kvplan dtype "mxfp4": weight-only, bf16
# activations) per kernel family that runs them (kvplan/perf/moe_gemm.py KERNEL_ROUTES; which
# engine release runs which kernel: docs/moe-gemm.md): (GPU dir, engine dir, version, MoE
# dtype, MoE kernel_source, dense bf16 kernel_source, fewest experts of the shapes read).
# The OAI Triton rows time gpt-oss's own shapes only (hidden = moe_intermediate = 2880, 32 and
# 128 experts, top-4), so 32-expert shapes count there; the A100 Marlin rows are SGLang's
# Marlin MoE with int4 weights (no table times MXFP4 Marlin on A100): a proxy over the
# fine-grained shapes (≥ 128 experts), as the bf16 curves.
_OAI = "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic"
_LINEAR = "torch.nn.functional.linear"
_FI_BF16 = "vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16_trtllmmxfp4expertsmonolithic"
MXFP4_TABLES = {
    "vllm-oai-triton-mxfp4": (("h100_sxm", "vllm", "0.24.0", "w4a16_mxfp4", _OAI, _LINEAR, 32),
                              ("h200_sxm", "vllm", "0.24.0", "w4a16_mxfp4", _OAI, _LINEAR, 32)),
    "marlin-moe-int4-proxy": (("a100_sxm", "sglang", "0.5.10", "int4_wo", "sglang_marlin_moe",
                               "sglang", 128),),
    # vLLM before 0.12 on Hopper runs Marlin (no triton_kernels in the wheel): vLLM 0.14.0's
    # own fused_marlin_moe timed with int4 weights (collector/vllm/collect_moe_v1.py), a proxy
    "vllm-marlin-int4-proxy": (("h100_sxm", "vllm", "0.14.0", "int4_wo", "vllm_marlin_moe",
                                "vllm_default", 128),
                               ("h200_sxm", "vllm", "0.14.0", "int4_wo", "vllm_marlin_moe",
                                "vllm_default", 128)),
    # --- bwmxfp4 --- vLLM on Blackwell (SM100) runs FlashInfer's TRT-LLM-gen MXFP4 x BF16
    # experts by default (fused_moe/oracle/mxfp4.py _get_priority_backends): gpt-oss's own
    # shapes, against the same table set's dense bf16 GEMM
    "vllm-flashinfer-trtllm-mxfp4-bf16": (("b200_sxm", "vllm", "0.24.0", "w4a16_mxfp4", _FI_BF16,
                                           _LINEAR, 32),),
}
# --- bwmxfp4 --- MXFP4 experts with MXFP8 activations (kvplan dtype "mxfp4_mxfp8": SGLang's
# and TensorRT-LLM's default on SM100, docs/moe-gemm.md) per kernel family, against the same
# table set's dense per-tensor fp8 GEMM (the rate kvplan charges those experts at): gpt-oss's
# own shapes (32 and 128 experts). (GPU dir, engine dir, version, MoE kernel_source, dense fp8
# kernel_source)
MXFP8_TABLES = {
    "sglang-flashinfer-mxfp4-mxfp8": (("b200_sxm", "sglang", "0.5.14",
                                       "sglang_flashinfer_trtllm_moe",
                                       "sglang_sgl_kernel_fp8_scaled_mm"),),
    "trtllm-gen-mxfp4-mxfp8": (("b200_sxm", "trtllm", "1.3.0rc10", "moe_torch_flow",
                                "torch_flow"),),
}
# Marlin's MXFP4 against its int4 rate where one table times both (printed for the proxy):
# (GPU dir, engine dir, version, MXFP4 kernel_source, int4 kernel_source, dense kernel_source)
MARLIN_PAIRS = (
    ("h100_sxm", "vllm", "0.24.0",
     "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu",
     "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts", _LINEAR),
    ("h100_sxm", "sglang", "0.5.14", "sglang_marlin_moe_situ_as_silu", "sglang_marlin_moe",
     "sglang_torch_linear"),
)
# --- deepgemm --- SGLang's DeepEP MoE (DeepGEMM grouped GEMMs) on Hopper: kernel family →
# (GPU dir, SGLang version) of the wideep_{context,generation}_moe_perf tables; dense reference:
# the same version's gemm_perf per-tensor fp8 rows (kernel_source "sglang")
DEEPGEMM_TABLES = {
    "sglang-deepgemm-moe": (("h100_sxm", "0.5.10"), ("h200_sxm", "0.5.10")),
}
DEEPGEMM_EP_SIZES = (2, 4, 8, 16, 32, 64, 128, 256)
# the dense GEMM each MoE kernel_source also has its own table rows for (printed for reference)
OWN_DENSE = {"deepgemm": ("fp8_block", "deepgemm")}


def _read(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # optional: only this script needs it

    return pq.read_table(path).to_pylist()


def _interp(points: list[tuple[float, float]], t: float) -> float | None:
    """Log-linear interpolation of (t, rate) points at t; None outside their range."""
    for (t0, r0), (t1, r1) in zip(points, points[1:], strict=False):
        if t0 <= t <= t1:
            f = (math.log(t) - math.log(t0)) / (math.log(t1) - math.log(t0)) if t1 > t0 else 0.0
            return r0 + f * (r1 - r0)
    return None


def _median_curve(shapes: dict[tuple[Any, ...], list[tuple[float, float]]]) -> dict[int, float]:
    """At each GRID point (tokens per expert), the median over shapes of each shape's
    interpolated FLOP/s (shapes without a measurement around that point left out)."""
    out: dict[int, float] = {}
    for t in GRID:
        vals = [v for pts in shapes.values() if (v := _interp(sorted(pts), t)) is not None]
        if vals:
            out[t] = statistics.median(vals)
    return out


def dense_rate(rows: list[dict[str, Any]], dtype: str, source: str) -> float:
    rates = [2 * r["m"] * r["n"] * r["k"] / (r["latency"] * 1e-3)
             for r in rows if r["gemm_dtype"] == dtype and r["kernel_source"] == source
             and 2048 <= r["m"] <= 16384
             and r["n"] >= 1024 and r["k"] >= 1024]
    return statistics.median(rates)


def moe_curve(rows: list[dict[str, Any]], dtype: str, band: tuple[int, int], source: str,
              min_experts: int = 128) -> dict[int, float]:
    shapes: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for r in rows:
        if (r["moe_dtype"] != dtype or r["kernel_source"] != source or r["moe_ep_size"] != 1
                or r["num_experts"] < min_experts
                or r["moe_tp_size"] not in (1, 2, 4, 8) or r["distribution"] != "power_law_1.01"):
            continue
        if not band[0] < r["inter_size"] // r["moe_tp_size"] <= band[1]:
            continue
        key = (r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"], r["moe_tp_size"])
        t = r["num_tokens"] * r["topk"] / r["num_experts"]
        width = r["inter_size"] / r["moe_tp_size"]
        flops = 6 * r["hidden_size"] * width * r["num_tokens"] * r["topk"]
        shapes.setdefault(key, []).append((t, flops / (r["latency"] * 1e-3)))
    return _median_curve(shapes)


def moe_ep_curve(rows: list[dict[str, Any]], dtype: str, ep: int, source: str,
                 distribution: str = "balanced") -> dict[int, float]:
    """The EP curve: rows with moe_ep_size = ep and moe_tp 1 (each GPU holds num_experts / ep
    whole experts, full inter width). num_tokens is the whole EP group's tokens (aiconfigurator
    queries the table with num_tokens × attention_dp_size, operators/moe.rs MoE::query), so
    t = num_tokens × topk / num_experts as at EP 1 and one GPU's FLOPs are 1/ep of the layer's.
    Balanced routing: with power_law_1.01 the collector moves the most loaded rank's experts to
    the timed rank (collector/helper.py power_law_logits_v3), so those rows time the slowest
    rank of that synthetic skew (load imbalance, not the kernel's rate; printed alongside)."""
    shapes: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for r in rows:
        if (r["moe_dtype"] != dtype or r["kernel_source"] != source or r["moe_ep_size"] != ep
                or r["moe_tp_size"] != 1 or r["num_experts"] < 128
                or r["distribution"] != distribution):
            continue
        key = (r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"])
        t = r["num_tokens"] * r["topk"] / r["num_experts"]
        flops = 6 * r["hidden_size"] * r["inter_size"] * r["num_tokens"] * r["topk"] / ep
        shapes.setdefault(key, []).append((t, flops / (r["latency"] * 1e-3)))
    return _median_curve(shapes)


def moe_narrow_ep2_curve(rows: list[dict[str, Any]], dtype: str, source: str
                         ) -> dict[int, float]:
    """The shard-≤256 band where no EP-1 row has it (the B200 DeepGEMM rows): rows with
    moe_ep_size 2, any moe_tp, shard inter / moe_tp ≤ 256, balanced routing; one GPU does
    1/2 of its TP shard's FLOPs (the expert map drops the other rank's tokens)."""
    shapes: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for r in rows:
        width = r["inter_size"] // r["moe_tp_size"]
        if (r["moe_dtype"] != dtype or r["kernel_source"] != source or r["moe_ep_size"] != 2
                or r["num_experts"] < 128 or r["distribution"] != "balanced" or width > 256):
            continue
        key = (r["hidden_size"], r["inter_size"], r["num_experts"], r["moe_tp_size"])
        t = r["num_tokens"] * r["topk"] / r["num_experts"]
        flops = 6 * r["hidden_size"] * width * r["num_tokens"] * r["topk"] / 2
        shapes.setdefault(key, []).append((t, flops / (r["latency"] * 1e-3)))
    return _median_curve(shapes)


def main(root: str) -> None:
    base = Path(root) / DATA
    for family, tables in TABLES.items():
        for gpu, engine, version, dtypes, moe_source, gemm_source in tables:
            moe = _read(base / gpu / "moe" / engine / version / "moe_perf.parquet")
            gemm = _read(base / gpu / "gemm" / engine / version / "gemm_perf.parquet")
            for moe_dtype, dense_dtype in dtypes:
                d = dense_rate(gemm, dense_dtype, gemm_source)
                if moe_source in OWN_DENSE:
                    own = dense_rate(gemm, *OWN_DENSE[moe_source])
                    print(f"{family} {gpu} {version} DeepGEMM dense {OWN_DENSE[moe_source][0]} "
                          f"{own / 1e12:.0f} TFLOP/s (per-tensor fp8 {d / 1e12:.0f})")
                if moe_source in OWN_DENSE:
                    narrow = moe_narrow_ep2_curve(moe, moe_dtype, moe_source)
                    print(f"{family} {gpu} {version} MoE {moe_dtype} shard (0, 256] at EP 2 "
                          "(no EP-1 row): ratio ("
                          + ", ".join(f"({t}, {v / d:.3f})" for t, v in narrow.items()) + ")")
                for band in BANDS:
                    curve = moe_curve(moe, moe_dtype, band, moe_source)
                    cells = ", ".join(f"({t}, {v / d:.3f})" for t, v in curve.items())
                    print(f"{family} {gpu} {engine} {version} MoE {moe_dtype} shard "
                          f"({band[0]}, {band[1]}] vs dense {dense_dtype} {d / 1e12:.0f} "
                          f"TFLOP/s: MoE {', '.join(f'{v / 1e12:.0f}' for v in curve.values())}"
                          f" TFLOP/s; ratio ({cells})")
                for ep in EP_SIZES:
                    curve = moe_ep_curve(moe, moe_dtype, ep, moe_source)
                    skew = moe_ep_curve(moe, moe_dtype, ep, moe_source, "power_law_1.01")
                    cells = ", ".join(f"({t}, {v / d:.3f})" for t, v in curve.items())
                    print(f"{family} {gpu} {engine} {version} MoE {moe_dtype} EP {ep} "
                          f"vs dense {dense_dtype}: ratio ({cells}); slowest rank at "
                          f"power_law_1.01: {', '.join(f'{v / d:.3f}' for v in skew.values())}")


def main_mxfp4(root: str) -> None:
    """The MXFP4 curves (MXFP4_TABLES) against the same table set's dense bf16 GEMM rate, and
    Marlin's MXFP4 and int4 rates side by side (MARLIN_PAIRS)."""
    base = Path(root) / DATA
    for family, tables in MXFP4_TABLES.items():
        for gpu, engine, version, moe_dtype, moe_source, gemm_source, fewest in tables:
            moe = _read(base / gpu / "moe" / engine / version / "moe_perf.parquet")
            gemm = _read(base / gpu / "gemm" / engine / version / "gemm_perf.parquet")
            d = dense_rate(gemm, "bfloat16", gemm_source)
            for band in BANDS:
                curve = moe_curve(moe, moe_dtype, band, moe_source, fewest)
                cells = ", ".join(f"({t}, {v / d:.3f})" for t, v in curve.items())
                print(f"MXFP4 {family} {gpu} {engine} {version} {moe_source} {moe_dtype} shard "
                      f"({band[0]}, {band[1]}] vs dense bfloat16 {d / 1e12:.0f} TFLOP/s: "
                      f"ratio ({cells})")
    for gpu, engine, version, fp4_source, int4_source, gemm_source in MARLIN_PAIRS:
        moe = _read(base / gpu / "moe" / engine / version / "moe_perf.parquet")
        gemm = _read(base / gpu / "gemm" / engine / version / "gemm_perf.parquet")
        d = dense_rate(gemm, "bfloat16", gemm_source)
        for source, dtype in ((fp4_source, "w4a16_mxfp4"), (int4_source, "int4_wo")):
            for band in BANDS:
                curve = moe_curve(moe, dtype, band, source, 32)
                cells = ", ".join(f"({t}, {v / d:.3f})" for t, v in curve.items())
                print(f"Marlin {gpu} {engine} {version} {dtype} shard ({band[0]}, {band[1]}]: "
                      f"ratio ({cells})")
    for family, mx8 in MXFP8_TABLES.items():
        for gpu, engine, version, moe_source, gemm_source in mx8:
            moe = _read(base / gpu / "moe" / engine / version / "moe_perf.parquet")
            gemm = _read(base / gpu / "gemm" / engine / version / "gemm_perf.parquet")
            d = dense_rate(gemm, "fp8", gemm_source)
            for band in BANDS:
                curve = moe_curve(moe, "w4a8_mxfp4_mxfp8", band, moe_source, 32)
                cells = ", ".join(f"({t}, {v / d:.3f})" for t, v in curve.items())
                print(f"MXFP8 {family} {gpu} {engine} {version} {moe_source} shard "
                      f"({band[0]}, {band[1]}] vs dense fp8 {d / 1e12:.0f} TFLOP/s: "
                      f"ratio ({cells})")


def wideep_curve(rows: list[dict[str, Any]], ep: int, distribution: str = "uniform"
                 ) -> dict[int, float]:
    """One EP size's curve from SGLang's wideep rows (kernel_source deepepmoe, fp8_block): as
    moe_ep_curve, whose token and FLOP accounting they share (num_tokens is the whole EP
    group's; one GPU holds num_experts / ep whole experts); uniform: every local expert gets
    t tokens."""
    return moe_ep_curve(rows, "fp8_block", ep, "deepepmoe", distribution)


def main_deepgemm(root: str) -> None:
    """The DeepGEMM EP curves (DEEPGEMM_TABLES): context rows (DeepEP normal dispatch output,
    contiguous grouped GEMM) per EP size against the same SGLang release's dense per-tensor fp8
    GEMM; the generation rows (low-latency dispatch output, masked grouped GEMM, CUDA graph)
    printed alongside at the same grid where they reach it."""
    base = Path(root) / DATA
    for family, tables in DEEPGEMM_TABLES.items():
        for gpu, version in tables:
            gemm = _read(base / gpu / "gemm" / "sglang" / version / "gemm_perf.parquet")
            d = dense_rate(gemm, "fp8", "sglang")
            own = dense_rate(gemm, "fp8_block", "sglang")
            print(f"DeepGEMM {family} {gpu} sglang {version} dense fp8 {d / 1e12:.0f} TFLOP/s "
                  f"(dense fp8_block {own / 1e12:.0f})")
            moe = {phase: _read(base / gpu / "moe" / "sglang" / version
                                / f"wideep_{phase}_moe_perf.parquet")
                   for phase in ("context", "generation")}
            for ep in DEEPGEMM_EP_SIZES:
                ctx = wideep_curve(moe["context"], ep)
                gen = wideep_curve(moe["generation"], ep)
                cells = ", ".join(f"({t}, {v / d:.3f})" for t, v in ctx.items())
                print(f"DeepGEMM {family} {gpu} sglang {version} EP {ep} vs dense fp8: context "
                      f"ratio ({cells}); generation "
                      + (", ".join(f"{t}: {v / d:.3f}" for t, v in gen.items()) or "-"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
    main_mxfp4(sys.argv[1] if len(sys.argv) > 1 else ".")
    main_deepgemm(sys.argv[1] if len(sys.argv) > 1 else ".")
