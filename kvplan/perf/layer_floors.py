"""Measured per-layer kernel floors of MoE and MLA layers beyond a dense layer's. Pure:
standard library only.

The step model (perf/step.py step_terms) charges a decode step's weight and KV bytes at the
HBM rate; every fixed cost of a layer's kernels (launches, activation quantization, routing,
small GEMMs that never reach the HBM rate) sits in the fitted step overhead, fitted on dense
models only. A MoE layer's fused-MoE kernel (routing, token alignment, grouped GEMMs over up to
256 experts) and an MLA block (two down-projections, their norms, the latent BMMs and the
decode kernel) cost more, per layer and step, than the dense MLP and attention block the fit
stands for. At decode batch sizes (t = 1-64 tokens in the step) that is:

    extra layer time = MLA layers × MLA_EXTRA(t)
                       + MoE layers × MOE_EXTRA(t) × routed-expert bytes per layer on this
                         GPU / REF_EXPERT_BYTES                                 seconds

Measured, not fitted: aiconfigurator's kernel tables on H200 (ai-dynamo/aiconfigurator, commit
095f58a5, aic-core/src/aiconfigurator_core/systems/data/h200_sxm/{gemm,attention,moe,mla,
mla_bmm}/<engine>/<version>/*.parquet; benchmarks/layer_floor_tables.py derives the numbers
below and its docstring the definitions): each extra is a block's measured time minus its bytes
at the H200 datasheet rate, minus the same for the dense block of Llama-3.1-70B at TP 8 (FP8)
measured by the same collector, engine and GPU. The MoE reference is DeepSeek-V3's routed
experts at TP 8 (REF_EXPERT_BYTES per GPU, FP8); another MoE layer's extra scales with its
routed-expert bytes per GPU (Qwen3-235B's 128 smaller experts, 0.21 × DeepSeek-V3's, measured
4-57 µs where this scaling gives 4-25: the same order). Fine-grained MoE layers only (at least
perf/moe_gemm.py's MIN_EXPERTS routed experts, the tables' shapes): Mixtral's 8 or Llama 4
Scout's 16 large experts run closer to dense GEMMs and get none. MLA at 16 heads per GPU (TP
8), bf16 latent KV over 1,024 tokens. Between grid points t is interpolated linearly in log t;
outside 1-64 the end values hold (prefill steps: a few ms on steps of hundreds; the fused-MoE
compute rate at large t is perf/moe_gemm.py's).

Applies on the engines whose Calibration.moe_kernels names a table set below (vLLM, SGLang,
TensorRT-LLM; any release: the tables time vLLM 0.14.0 (MLA: 0.19.0), SGLang 0.5.9 and
TensorRT-LLM 1.2.0rc5 (MLA: 1.3.0rc10)), on every GPU: measured on H200 and taken as they are
on the others (MEASURED_CLASSES; the plan says so, Performance.routed_experts.layer_floors).
Leaving them out off Hopper would make every other GPU look faster on MoE models by exactly
what is not measured there: AMD GPUs have no tables, and on B200 the engines run other kernels
(FlashInfer, TensorRT-LLM-gen, DeepGEMM MoE) than the Triton and CUTLASS ones aiconfigurator's
B200 tables time beside them (those give larger extras still: benchmarks/layer_floor_tables.py
docstring). SGLang's MLA block is composed from its parts without norms and RoPE: a lower
bound.
"""

from __future__ import annotations

import math

GRID_TOKENS = (1, 2, 4, 8, 16, 32, 64)
MEASURED_CLASSES = ("Hopper",)  # GPU classes (perf/arch.py arch_class) the tables measured
SOURCE = ("aiconfigurator 095f58a5 H200 kernel tables: vLLM 0.14.0/0.19.0, SGLang 0.5.9, "
          "TensorRT-LLM 1.2.0rc5/1.3.0rc10")
# DeepSeek-V3's routed experts per MoE layer on one GPU at TP 8, FP8: 256 × 3 × 7168 × 2048 / 8
REF_EXPERT_BYTES = 256 * 3 * 7168 * 2048 // 8

# kernel family (engines/base.py Calibration.moe_kernels) → (MLA extra, MoE extra) µs per
# layer at GRID_TOKENS; benchmarks/layer_floor_tables.py's output at aiconfigurator 095f58a5
FLOORS_US: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    # vLLM 0.14.0 Triton fused_moe; MLA: vLLM 0.19.0's attention module
    "vllm-triton-fused-moe": ((44.1, 46.5, 47.6, 52.2, 55.8, 59.3, 62.2),
                              (18.8, 16.9, 15.3, 27.0, 27.5, 33.5, 38.9)),
    # SGLang 0.5.9 Triton fused_moe; MLA from its parts (a lower bound)
    "sglang-triton-fused-moe": ((19.8, 16.5, 17.0, 9.6, 9.2, 11.6, 19.4),
                                (20.9, 23.1, 24.9, 48.6, 68.8, 46.2, 85.4)),
    # TensorRT-LLM 1.2.0rc5 PyTorch flow, CUTLASS MoE; MLA: 1.3.0rc10's attention module
    "trtllm-cutlass-moe": ((10.0, 7.2, 10.0, 13.6, 16.2, 22.0, 18.8),
                           (70.0, 73.8, 71.3, 87.3, 85.8, 70.5, 118.6)),
}


def _at(values: tuple[float, ...], tokens: float) -> float:
    """values at `tokens`, linear in log2 tokens between GRID_TOKENS, held outside them."""
    x = math.log2(min(max(tokens, GRID_TOKENS[0]), GRID_TOKENS[-1]))
    i = min(int(x), len(values) - 2)
    return values[i] + (values[i + 1] - values[i]) * (x - i)


def extra_s(family: str, *, mla_layers: int, moe_layers: int, expert_bytes: float,
            tokens: float, moe_tokens: float) -> float:
    """Seconds one step's MLA and MoE layers take beyond dense layers' (module docstring):
    `tokens` the step's tokens on this GPU, `moe_tokens` those meeting in its MoE layers
    (× DP ranks), `expert_bytes` routed-expert bytes per MoE layer on this GPU.
    0.0 for a family without tables."""
    floors = FLOORS_US.get(family)
    if floors is None or (not mla_layers and not moe_layers):
        return 0.0
    mla_us = mla_layers * _at(floors[0], tokens) if mla_layers else 0.0
    moe_us = (moe_layers * _at(floors[1], moe_tokens) * expert_bytes / REF_EXPERT_BYTES
              if moe_layers else 0.0)
    return (mla_us + moe_us) * 1e-6


def note(family: str, klass: str, *, mla_layers: int, moe_layers: int,
         expert_bytes: float) -> str:
    """What the plan says of the floors: the milliseconds added per step at 1 and 64 tokens,
    and where they were measured; "" for a model without MoE or MLA layers or an engine
    without tables."""
    if family not in FLOORS_US or (not mla_layers and not moe_layers):
        return ""
    lo, hi = (extra_s(family, mla_layers=mla_layers, moe_layers=moe_layers,
                      expert_bytes=expert_bytes, tokens=t, moe_tokens=t) * 1e3
              for t in (GRID_TOKENS[0], GRID_TOKENS[-1]))
    where = ("" if klass in MEASURED_CLASSES else
             f"; not measured on {klass} GPUs, the H200 figures assumed")
    return (f"MoE/MLA layers' kernel floors beyond a dense layer's: +{lo:.1f} ms per step at "
            f"1 token, +{hi:.1f} ms at {GRID_TOKENS[-1]} ({SOURCE}{where})")
