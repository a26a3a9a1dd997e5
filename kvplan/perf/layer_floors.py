"""Measured per-layer kernel floors of MoE and MLA layers beyond a dense layer's. Pure:
standard library only.

The step model (perf/step.py step_terms) charges a step's weights, KV and FLOPs at the GPU's
rates; every fixed cost of a layer's kernels (launches, activation quantization, routing, small
GEMMs that never reach the HBM rate) sits in the fitted step overhead, fitted on dense models
only. A fine-grained MoE layer's fused-MoE kernel (routing, token alignment, grouped GEMMs over
up to 256 experts) and an MLA block (two down-projections, their norms, the latent BMMs, the
decode kernel) cost more than the dense MLP and attention block the fit stands for:

    extra step time = MLA layers × MLA_EXTRA(t)
                      + MoE layers × (ROUTED[kernel dtype](t') × routed-expert elements per
                        layer on this GPU / REF_EXPERT_ELEMENTS
                        + SHARED[kernel dtype](t') where the layer has a shared expert)
                                                                                seconds
    t = the step's tokens on this GPU, t' = those meeting in its MoE layers (× DP ranks)

Measured, not fitted: aiconfigurator's kernel tables on H200 (ai-dynamo/aiconfigurator, commit
095f58a5, aic-core/src/aiconfigurator_core/systems/data/h200_sxm/{gemm,attention,moe,mla,
mla_bmm}/<engine>/<version>/*.parquet). benchmarks/layer_floor_tables.py derives FLOORS_US and
its docstring gives the definitions: each extra is a block's measured time minus what kvplan
charges for it (its bytes at the datasheet rate or, where more, its FLOPs at the engine's fitted
rate), minus the same for the dense block of Llama-3.1-70B at TP 8 measured by the same
collector, engine and GPU (at min(t, 64) tokens: the fit's constant does not grow with the
step). The MoE reference is DeepSeek-V3's routed experts at TP 8, one row per experts' kernel
dtype the engine's tables time (block-scaled FP8, per-tensor FP8, bf16; others, such as MXFP4,
get none); the shared expert's two GEMMs give SHARED (their cost beyond their bytes: per call,
so not scaled by the shared expert's size); another MoE layer's routed extra scales with its
routed-expert elements per GPU (Qwen3-235B's 128 smaller experts, 0.21 × DeepSeek-V3's: measured
4-57 µs at t ≤ 64 where this scaling gives 4-25, the same order). Fine-grained MoE layers only
(perf/moe_gemm.py's MIN_EXPERTS, the tables' shapes): Mixtral's 8 or Llama 4 Scout's 16 large
experts run closer to dense GEMMs and get none. MLA at 16 heads per GPU (TP 8), bf16 latent KV
over 1,024 tokens. Between grid points t is interpolated linearly in log t; above 1,024 tokens
(prefill steps) the last value holds.

Up to 64 tokens the extras are fixed per-kernel costs; above, mostly how far the fused-MoE
kernel's achieved bandwidth falls short of the HBM rate (2.2 of 4.8 TB/s for vLLM's at 1,024
tokens), a property of the kernel on the GPU measured. Applies on the engines whose
Calibration.moe_kernels names a table set below (vLLM, SGLang, TensorRT-LLM; any release: the
tables time vLLM 0.14.0 (MLA: 0.19.0), SGLang 0.5.9, TensorRT-LLM 1.2.0rc5 (MLA: 1.3.0rc10)):
on Hopper (MEASURED_CLASSES) the whole grid; on other GPU classes the fixed costs only, held
above FIXED_TOKENS, and the plan says so (Performance.routed_experts.layer_floors). Leaving even
those out off Hopper would make every other GPU look faster on MoE models by exactly what is not
measured there: AMD GPUs have no tables, and on B200 the engines run other kernels (FlashInfer,
TensorRT-LLM-gen, DeepGEMM MoE) than the Triton and CUTLASS ones aiconfigurator's B200 tables
time (those give larger extras still). SGLang's MLA block is composed from its parts without
norms and RoPE: a lower bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GRID_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # powers of two (_at)
MEASURED_CLASSES = ("Hopper",)  # GPU classes (perf/arch.py arch_class) the tables measured
# above this step size the extras are the kernels' bandwidth on the GPU measured, not fixed
# costs: other GPU classes hold the value at it (held_tokens)
FIXED_TOKENS = 64
SOURCE = ("aiconfigurator 095f58a5 H200 kernel tables: vLLM 0.14.0/0.19.0, SGLang 0.5.9, "
          "TensorRT-LLM 1.2.0rc5/1.3.0rc10")
# DeepSeek-V3's routed experts per MoE layer on one GPU at TP 8: 256 × 3 × 7168 × 2048 / 8
REF_EXPERT_ELEMENTS = 256 * 3 * 7168 * 2048 // 8
BYTES_PER_ELEMENT = {"fp8_block": 1, "fp8": 1, "bfloat16": 2}  # of the MoE kernel dtypes timed


@dataclass(frozen=True)
class Floors:
    """One engine's extras, µs per layer at GRID_TOKENS: the MLA block's, and by the experts'
    MoE kernel dtype (perf/moe_gemm.py moe_kernel_dtype) the routed experts' and the shared
    expert's."""

    mla: tuple[float, ...]
    routed: dict[str, tuple[float, ...]]
    shared: dict[str, tuple[float, ...]]

# kernel family (engines/base.py Calibration.moe_kernels) → its Floors;
# benchmarks/layer_floor_tables.py's output at aiconfigurator 095f58a5
FLOORS_US: dict[str, Floors] = {
    # vLLM 0.14.0 Triton fused_moe; MLA: vLLM 0.19.0's attention module
    "vllm-triton-fused-moe": Floors(
        mla=(44.1, 46.5, 47.6, 52.2, 55.8, 59.3, 62.2, 70.2, 88.6, 138.7, 168.0),
        routed={
            "fp8_block": (18.8, 16.9, 15.3, 27.0, 27.5, 33.5, 38.9, 26.7, 106.5, 194.6, 310.1),
            "fp8": (26.9, 26.5, 32.5, 48.4, 99.3, 85.1, 144.8, 148.0, 231.6, 306.2, 473.3),
            "bfloat16": (43.3, 32.0, 28.0, 37.0, 37.5, 42.0, 25.6, 65.5, 96.2, 409.3, 584.1),
        },
        shared={
            "fp8_block": (61.8, 67.3, 58.7, 59.3, 60.0, 61.6, 63.1, 67.9, 78.5, 100.0, 144.4),
            "fp8": (24.0, 24.8, 24.7, 25.1, 25.4, 25.9, 27.4, 37.5, 52.8, 66.8, 97.0),
            "bfloat16": (8.2, 7.8, 8.2, 8.1, 8.5, 8.6, 8.8, 10.3, 9.3, 8.9, 8.8),
        },
    ),
    # SGLang 0.5.9 Triton fused_moe (no per-tensor FP8 rows); MLA from its parts (a lower
    # bound)
    "sglang-triton-fused-moe": Floors(
        mla=(19.8, 16.5, 17.0, 9.6, 9.2, 11.6, 19.4, 24.0, 32.6, 66.0, 88.7),
        routed={
            "fp8_block": (20.9, 23.1, 24.9, 48.6, 68.8, 46.2, 85.4, 93.7, 110.7, 227.8, 327.0),
            "bfloat16": (37.2, 35.7, 32.4, 43.0, 52.1, 46.6, 23.2, 54.3, 87.5, 523.1, 572.4),
        },
        shared={
            "fp8_block": (14.9, 15.7, 15.8, 16.6, 17.3, 14.3, 17.2, 15.7, 23.0, 21.8, 23.9),
            "bfloat16": (10.3, 9.4, 8.8, 8.3, 8.4, 9.4, 9.6, 10.6, 12.0, 9.6, 7.9),
        },
    ),
    # TensorRT-LLM 1.2.0rc5 PyTorch flow, CUTLASS MoE; MLA: 1.3.0rc10's attention module
    "trtllm-cutlass-moe": Floors(
        mla=(10.0, 7.2, 10.0, 13.6, 16.2, 22.0, 18.8, 22.4, 36.8, 71.9, 146.4),
        routed={
            "fp8_block": (70.0, 73.8, 71.3, 87.3, 85.8, 70.5, 118.6, 153.8, 279.5, 519.5, 797.6),
            "fp8": (12.0, 16.7, 7.5, 18.8, 20.6, 4.4, 44.8, 67.2, 124.4, 209.5, 357.1),
            "bfloat16": (35.5, 35.5, 18.0, 32.7, 23.4, 0.0, 9.1, 29.1, 113.9, 183.9, 376.1),
        },
        shared={
            "fp8_block": (16.7, 16.6, 16.8, 16.9, 17.0, 15.7, 15.7, 17.8, 19.0, 21.4, 29.0),
            "fp8": (30.6, 30.7, 31.3, 30.9, 31.6, 31.9, 32.5, 33.8, 34.1, 38.8, 46.4),
            "bfloat16": (7.4, 7.5, 7.6, 7.4, 7.8, 8.0, 8.2, 9.2, 8.3, 5.7, 3.6),
        },
    ),
}


def _at(values: tuple[float, ...], tokens: float, held: float = GRID_TOKENS[-1]) -> float:
    """values at `tokens`, linear in log2 tokens between GRID_TOKENS, held outside them (and
    above `held`)."""
    x = math.log2(min(max(tokens, GRID_TOKENS[0]), held, GRID_TOKENS[-1]))
    i = min(int(x), len(values) - 2)
    return values[i] + (values[i + 1] - values[i]) * (x - i)


def held_tokens(klass: str) -> int:
    """The step size above which the floors hold on a GPU class: the whole grid where they
    were measured; elsewhere FIXED_TOKENS, the fixed per-kernel costs only."""
    return GRID_TOKENS[-1] if klass in MEASURED_CLASSES else FIXED_TOKENS


def extra_s(family: str, kernel: str, *, mla_layers: int, moe_layers: int,
            expert_bytes: float, tokens: float, moe_tokens: float, shared: bool = False,
            held: int = GRID_TOKENS[-1]) -> float:
    """Seconds one step's MLA and MoE layers take beyond dense layers' (module docstring):
    `kernel` the experts' MoE kernel dtype (no MoE extra for one the family's tables do not
    time), `tokens` the step's tokens on this GPU, `moe_tokens` those meeting in its MoE
    layers (× DP ranks), `expert_bytes` routed-expert bytes per MoE layer on this GPU,
    `shared` whether each MoE layer has a shared expert, `held` the step size above which the
    values hold (held_tokens). 0.0 for a family without tables."""
    floors = FLOORS_US.get(family)
    if floors is None:
        return 0.0
    us = mla_layers * _at(floors.mla, tokens, held) if mla_layers else 0.0
    routed, extra = floors.routed.get(kernel), floors.shared.get(kernel)
    if moe_layers and routed is not None:
        us += (moe_layers * _at(routed, moe_tokens, held) * expert_bytes
               / (REF_EXPERT_ELEMENTS * BYTES_PER_ELEMENT[kernel]))
    if moe_layers and extra is not None and shared:
        # two GEMM calls' cost beyond their bytes (which step_terms charges): per call, not
        # per element, so not scaled by the shared expert's size
        us += moe_layers * _at(extra, moe_tokens, held)
    return us * 1e-6


def note(family: str, klass: str, kernel: str, *, mla_layers: int, moe_layers: int,
         expert_bytes: float, shared: bool = False) -> str:
    """What the plan says of the floors: the milliseconds added per step at 1 token and where
    they stop growing, and what was measured; "" for a model without MoE or MLA layers or an
    engine without tables."""
    floors = FLOORS_US.get(family)
    if floors is None or (not mla_layers and not moe_layers):
        return ""
    held = held_tokens(klass)
    lo, hi = (extra_s(family, kernel, mla_layers=mla_layers, moe_layers=moe_layers,
                      expert_bytes=expert_bytes, tokens=t, moe_tokens=t,
                      shared=shared, held=held) * 1e3
              for t in (GRID_TOKENS[0], held))
    untimed = bool(moe_layers) and kernel not in floors.routed
    if untimed and not mla_layers:
        return (f"MoE layers' kernel floors: not timed for {kernel or 'these'} experts, none "
                f"added ({SOURCE})")
    caveats = [f"{kernel or 'these'} experts not timed: MLA layers only"] if untimed else []
    if klass not in MEASURED_CLASSES:
        caveats.append(f"not measured on {klass} GPUs: the H200 fixed costs assumed, held "
                       f"above {held} tokens")
    return (f"MoE/MLA layers' kernel floors beyond a dense layer's: +{lo:.1f} ms per step at "
            f"1 token, +{hi:.1f} ms at {held} ({SOURCE}"
            + "".join(f"; {c}" for c in caveats) + ")")
