"""vLLM's start-up memory accounting, by version era. Pure functions of model, GPU, deployment.

Sources: reference/ENGINE_MEMORY.md §1 (vLLM wheels 0.11.0 … 0.33.0 read file by file) and
the start-up logs in benchmarks/data/vllm_calibration.csv. File paths are vLLM repo paths.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from ..errors import InvalidInputError
from ..knobs import FP8_LEAST, VLLM_FP8_REFUSAL, Knobs, Layout, parse_mm_limits
from ..model.expert import deepep_low_latency_bytes, redundant_expert_bytes
from ..model.forward import (  # noqa: F401 - re-exported: the constants calibrate.py reports
    CUDAGRAPH_BYTES_PER_LAYER_GRAPH,
    CUDAGRAPH_POOL_BYTES,
    FORWARD_HIDDEN_BUFFERS,
    FORWARD_HIDDEN_BUFFERS_V0,
    SAMPLER_BYTES_PER_LOGIT,
    SAMPLER_V0_BYTES_PER_LOGIT_BEYOND_DTYPE,
    activation_bytes,
    cudagraph_bytes,
    cudagraph_capture_sizes,
    sampler_rows_factor,
)
from ..model.kv import KvLayout, LayerKv, kv_layout, layer_specs, stage_kv
from ..model.multimodal import DEFAULT_LIMIT_V1, EncoderProfile, encoder_profile
from ..model.weights import (
    LoraSlots,
    WeightMemory,
    draft_layer_count,
    draft_weight_bytes,
    lora_slots,
    pp_layer_ranges,
    weight_memory_per_stage,
)
from ..specs import (
    Deployment,
    EngineOptions,
    GpuSpec,
    ModelSpec,
    NodeLaunch,
    PlanLora,
    PlanMultimodal,
    PlanOffload,
    PlanSpeculative,
    Problem,
    QuantSpec,
    Recommendations,
    Source,
    SpeculativeConfig,
    StageBreakdown,
    Workload,
)
from ..units import DTYPE_BYTES, GiB, fast_init, largest_true
from ..versions import parse_version
from . import flags as known_flags
from . import interconnect, multinode
from .base import (
    Calibration,
    Coefficients,
    DeploySyntax,
    Engine,
    EnvFlag,
    FlagReleases,
    Kernel,
    MemoryResult,
    TokenSplit,
    batched_tokens_flag_value,
    engine_options,
    knob_flags,
    memory_notes,
    memory_result,
    option_flags,
)

# ------------------------------------------------------------------------ eras


@dataclass(frozen=True)
class Era:
    """What changed between vLLM releases that moves the numbers (ENGINE_MEMORY §1.2–1.7)."""

    name: str
    first: tuple[int, int, int]
    default_utilization: float  # vllm/config/cache.py gpu_memory_utilization
    cudagraph_in_budget: bool  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default "1"
    batch_row_160gib: bool  # get_batch_defaults has a ≥160 GiB row
    null_block_in_fit_check: bool  # admission check plans against available − one block
    printed_tokens: Literal["blocks", "concurrency"]  # how "GPU KV cache size" is computed
    yarn_keeps_max_position: bool  # default max_model_len rule for yarn rope scaling
    group_rule: Literal["min", "max_if_close"]  # hybrid group size (kv_cache_planning.py)
    async_in_flight: bool  # sliding windows hold max_concurrent_batches × tokens in flight
    mamba_align_pages: bool  # prefix caching puts Mamba layers in "align" mode (3 pages)
    v0: bool = False  # the V0 engine: 256 seqs, whole-prompt profiling, no hybrid KV manager
    # automatic prefix caching when no flag sets it. V0 off: EngineArgs.enable_prefix_caching
    # `bool = False` (vllm/engine/arg_utils.py 0.5.0–0.6.4.post1), then None →
    # bool(envs.VLLM_USE_V1) (0.6.5–0.7.3), VLLM_USE_V1 defaulting to "0" (vllm/envs.py). V1
    # on: _set_default_args_v1 "V1 enables prefix caching by default" (0.8.0; 0.11.0 likewise)
    prefix_caching: bool = True


ERAS: tuple[Era, ...] = (
    # V0 (read in 0.6.6; vllm/worker/worker.py determine_num_available_blocks, vllm/config.py):
    # util 0.90; max_num_seqs 256; max_num_batched_tokens = max(max_model_len, 2048) unless
    # chunked prefill (auto-on above 32K tokens; then 2048), so the profile prefills a whole
    # max_model_len prompt; "# GPU blocks: B" = (total × util − peak) // block bytes; every
    # layer allocated as full attention; CUDA graphs captured outside the budget.
    Era(name="v0 ≤0.7", first=(0, 0, 0), default_utilization=0.90, cudagraph_in_budget=False,
        batch_row_160gib=False, null_block_in_fit_check=False, printed_tokens="blocks",
        yarn_keeps_max_position=False, group_rule="min", async_in_flight=False,
        mamba_align_pages=False, v0=True, prefix_caching=False),
    # Read in 0.11.0, 0.12.0, 0.15.1; the 0.19.0 logs in the calibration file print the graph
    # estimate "not subtracted from KV in this version". Hybrid groups use the smallest bucket.
    Era(name="v1 0.11–0.19", first=(0, 8, 0), default_utilization=0.90, cudagraph_in_budget=False,
        batch_row_160gib=False, null_block_in_fit_check=False, printed_tokens="blocks",
        yarn_keeps_max_position=False, group_rule="min", async_in_flight=False,
        mamba_align_pages=False),
    # 0.20.0: graph estimate subtracted by default; util default 0.92 (changed in 0.16–0.20);
    # group size = largest bucket when it is < 1.5 × the smallest.
    Era(name="v1 0.20–0.21", first=(0, 20, 0), default_utilization=0.92, cudagraph_in_budget=True,
        batch_row_160gib=False, null_block_in_fit_check=False, printed_tokens="blocks",
        yarn_keeps_max_position=False, group_rule="max_if_close", async_in_flight=False,
        mamba_align_pages=False),
    # 0.22.0: "GPU KV cache size" = int(concurrency × max_model_len).
    Era(name="v1 0.22–0.25", first=(0, 22, 0), default_utilization=0.92, cudagraph_in_budget=True,
        batch_row_160gib=False, null_block_in_fit_check=False, printed_tokens="concurrency",
        yarn_keeps_max_position=False, group_rule="max_if_close", async_in_flight=False,
        mamba_align_pages=False),
    # 0.26.0: the KV sizing of sliding windows counts the batches in flight: 2 ×
    # max_num_batched_tokens (max_concurrent_batches, 2 under async scheduling at PP 1;
    # vllm/config/vllm.py). Async scheduling itself is on by default earlier (from 0.14:
    # Calibration.cpu_overlap_from below, vllm issue #27679 / PR #27614); the eras before 0.26
    # are planned without the in-flight term.
    Era(name="v1 0.26–0.29", first=(0, 26, 0), default_utilization=0.92, cudagraph_in_budget=True,
        batch_row_160gib=False, null_block_in_fit_check=False, printed_tokens="concurrency",
        yarn_keeps_max_position=False, group_rule="max_if_close", async_in_flight=True,
        mamba_align_pages=False),
    # 0.30.0, 0.33.0: total-consumed profiling, ≥160 GiB batch row, null block in the fit
    # check, yarn models keep max_position_embeddings; Mamba "align" mode under prefix caching
    # (read in 0.33.0; its first release is UNVERIFIED, assumed 0.30).
    Era(name="v1 0.30+", first=(0, 30, 0), default_utilization=0.92, cudagraph_in_budget=True,
        batch_row_160gib=True, null_block_in_fit_check=True, printed_tokens="concurrency",
        yarn_keeps_max_position=True, group_rule="max_if_close", async_in_flight=True,
        mamba_align_pages=True),
)
NEWEST_MODELLED = "0.33.0"
# Releases whose files (or logs) were read; a version between them has uncertain boundaries.
READ_VERSIONS = {(0, 6, 6), (0, 11, 0), (0, 12, 0), (0, 15, 1), (0, 19, 0), (0, 20, 0), (0, 22, 0),
                 (0, 26, 0), (0, 30, 0), (0, 33, 0)}
UNREAD_RANGES = (((0, 7, 0), (0, 10, 99)), ((0, 16, 0), (0, 19, 99)), ((0, 21, 0), (0, 21, 99)),
                 ((0, 23, 0), (0, 25, 99)),
                 ((0, 27, 0), (0, 29, 99)))


def select_era(version: str) -> tuple[Era, list[Problem]]:
    """The modelled era for a version, plus a warning when the version is older than or between
    the releases read (one newer than the newest: planner.newer_than_modelled)."""
    era, problems = _select_era(version)
    return era, [p.model_copy() for p in problems]


@lru_cache(maxsize=256)
def _select_era(version: str) -> tuple[Era, tuple[Problem, ...]]:
    v = parse_version(version)
    problems = []
    if v < (0, 5, 0):
        problems.append(Problem(
            code="engine-version-not-modelled", severity="warning",
            message=f"vLLM {version} predates the V0 releases kvplan read (0.6.x); using the "
            f"{ERAS[0].name} accounting, which may differ."))
    elif v not in READ_VERSIONS and any(lo <= v <= hi for lo, hi in UNREAD_RANGES):
        problems.append(Problem(
            code="engine-version-boundary-uncertain", severity="warning",
            message=f"vLLM {version} lies in a range whose sources were not read; era boundaries "
            "there are uncertain (nearest read release's accounting used)."))
    era = [e for e in ERAS if e.first <= v][-1]
    if (0, 8, 0) <= v < (0, 11, 0):
        problems.append(Problem(
            code="engine-version-boundary-uncertain", severity="warning",
            message=f"vLLM {version} defaults to the V1 engine but predates the 0.11 accounting "
            f"kvplan read; using {era.name} (set VLLM_USE_V1=0 deployments to 0.7 for V0)."))
    return era, tuple(problems)


# --------------------------------------------------------------- calibrated constants
# Fitted by benchmarks/calibrate.py on the vLLM 0.19.0 H100 rows of
# benchmarks/data/vllm_calibration.csv (DEBUG profile lines: "torch peak increase",
# "non-torch forward increase", "estimated CUDA graph memory"). Rerun it when rows are added.

# Non-torch growth between the init snapshot and the end of profiling.
NON_TORCH_BYTES_TP1 = int(0.25 * GiB)  # cuBLAS workspaces, backend buffers (TP1 PP1 rows)
NON_TORCH_BYTES_PP_ONLY = int(0.07 * GiB)  # multi-process PP stages (TP1 PP2/PP4 rows)
# TP > 1 adds NCCL's connection buffers and the custom all-reduce buffers, by interconnect
# (engines/interconnect.py): 1.75 GiB on NVSwitch H100/H200, 0.05 GiB on PCIe pairs. The
# calibration rows measured ≈1.82 GiB above TP1 on H100 SXM (TP2/TP4) and 0.05 GiB on L40S TP2
# (benchmarks/calibrate.py reports the measured figure).
# Memory in use before vLLM's init snapshot (CUDA context 0.51 GiB + cuBLAS 0.19 GiB), measured
# on one H200 with torch 2.11 / CUDA 13 (reference/ENGINE_MEMORY.md §1.9a, GPUS.md).
STARTUP_OVERHEAD_BYTES = int(0.70 * GiB)

DEFAULT_BLOCK_SIZE = 16  # vllm/config/cache.py; FlashAttention/FlashInfer accept 16
# --block-size choices: vllm/config/cache.py BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]
# (V1 releases); the V0 argument parser (vllm/engine/arg_utils.py, 0.6–0.7) offered
# choices=[8, 16, 32, 64, 128]. Anything else is refused when the arguments are parsed.
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
BLOCK_SIZES_V0 = (8, 16, 32, 64, 128)


# ----------------------------------------------------------------------- defaults


def derived_max_model_len(m: ModelSpec, era: Era) -> tuple[int, str]:
    """vLLM's default max_model_len (vllm/config/model.py _get_and_verify_max_len): the minimum
    of the length keys present (model_max_length overrides), scaled by the RoPE factor except
    for su/longrope/llama3 (and, from 0.30, yarn); ≤0.26 yarn → original × factor."""
    keys = m.max_len_keys
    if "model_max_length" in keys:
        length, rule = keys["model_max_length"], "model_max_length"
    elif keys:
        key = min(keys, key=lambda k: keys[k])
        length, rule = keys[key], key
    else:
        return 2048, "no length key in the config (vLLM's 2048 fallback)"
    rt, factor = m.rope_type, m.rope_factor
    if m.model_type == "gemma3":  # the global layers' linear scaling is not a longer context
        return length, rule + " (Gemma 3: RoPE scaling not applied)"
    no_scale = {"su", "longrope", "llama3"}
    if era.yarn_keeps_max_position:
        no_scale |= {"yarn", "deepseek_yarn"}
    if rt and factor and rt not in no_scale:
        if rt == "yarn" and m.rope_original_max_position:
            length = m.rope_original_max_position
            rule = "original_max_position_embeddings"
        length = int(length * factor)
        rule += f" × rope factor {factor:g} ({rt})"
    return length, rule


def batch_defaults(gpu_total_bytes: int, gpu_name: str, era: Era,
                   usage: str = "serve") -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs) by usage context — `vllm serve`
    (OPENAI_API_SERVER) or the offline `LLM` class — device memory and name
    (vllm/engine/arg_utils.py get_batch_defaults; ENGINE_MEMORY §1.7):
    ≥160 GiB (0.30+) 16384/16384 tokens, 1024 seqs; ≥70 GiB non-A100 16384 (LLM) / 8192 (serve)
    tokens, 1024 seqs; other GPUs 8192 / 2048 tokens, 256 seqs."""
    mem_gib = gpu_total_bytes / GiB
    name = gpu_name.lower()
    llm = usage == "llm"
    if era.v0:
        return 2048, 256, "V0 defaults (max(max_model_len, 2048) tokens without chunked prefill)"
    if era.batch_row_160gib and mem_gib >= 160:
        return 16384, 1024, "≥160 GiB GPU class"
    if mem_gib >= 70 and "a100" not in name and "gb10" not in name:
        return (16384 if llm else 8192), 1024, "≥70 GiB non-A100 GPU class"
    return (8192 if llm else 2048), 256, "default GPU class (<70 GiB or A100)"


def default_block_size(m: ModelSpec, gpu: GpuSpec, version: str) -> int:
    """Tokens per block when --block-size is not given: 16 (FlashAttention/FlashInfer accept it,
    vllm/config/cache.py DEFAULT_BLOCK_SIZE), except MLA, whose default backend dictates it
    (vllm/platforms/cuda.py): 0.11.0 forced FlashMLA (64) on Hopper and CUTLASS MLA (128) on
    Blackwell; the 0.19.0 H100 logs show 16-token blocks (FLASH_ATTN_MLA, Hopper's default in
    0.33), and 0.33 puts FlashInfer-MLA (32) first on Blackwell. Pre-Hopper GPUs use Triton MLA
    (16). Releases 0.12–0.18 are assumed to behave like 0.11 (UNVERIFIED)."""
    if m.mla is None:
        return DEFAULT_BLOCK_SIZE
    new = parse_version(version) >= (0, 19, 0)
    cc = gpu.compute_capability or ""
    if cc.startswith("10."):  # datacenter Blackwell (sm100/sm103)
        return 32 if new else 128
    if cc.startswith("9."):  # Hopper
        return 16 if new else 64
    return DEFAULT_BLOCK_SIZE


# ------------------------------------------------------------------ memory model


def non_torch_bytes(d: Deployment, gpu: GpuSpec) -> int:
    """Non-torch memory growth during start-up: cuBLAS/backend buffers (TP1 rows), + NCCL and
    custom all-reduce buffers at TP > 1 as the interconnect sets them (engines/interconnect.py)."""
    base = NON_TORCH_BYTES_PP_ONLY if d.pipeline_parallel_size > 1 else NON_TORCH_BYTES_TP1
    return base + interconnect.tp_bytes(gpu, d.tensor_parallel_size, "vllm")


@fast_init
@dataclass(frozen=True)
class StageMemory:
    layers: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    layout: KvLayout
    bytes_per_token: int  # Σ over this stage's attention layers, one GPU
    num_blocks: int
    weights_tensor_bytes: int  # weights_bytes before the caching allocator's rounding

    @property
    def bytes_per_block(self) -> int:
        return self.layout.bytes_per_block


def budget_bytes(total_bytes: int, utilization: float) -> int:
    """requested_memory = ceil(total × gpu_memory_utilization) (vllm/v1/worker/utils.py)."""
    return math.ceil(total_bytes * utilization)


def in_flight_tokens(d: Deployment, era: Era) -> int:
    """Tokens a sliding window must keep beyond W − 1 for requests in flight:
    max_num_batched_tokens, × max_concurrent_batches from 0.26 (2 with async scheduling at PP 1,
    else the PP size; vllm/config/vllm.py)."""
    if not era.async_in_flight:
        return d.max_num_batched_tokens
    batches = 2 if d.pipeline_parallel_size == 1 else d.pipeline_parallel_size
    return batches * d.max_num_batched_tokens


def mamba_pages_per_request(d: Deployment, era: Era) -> int:
    """Pages a Mamba/GDN layer holds per request: 1 (mode none), or 3 in "align" mode, which
    prefix caching selects from 0.30 (2 + one prefill checkpoint; MambaModelConfig, 0.33), plus
    num_speculative_tokens with speculative decoding (ENGINE_MEMORY §1.3)."""
    spec = (d.speculative_config.num_speculative_tokens or 0) if d.speculative_config else 0
    return (3 if era.mamba_align_pages and d.enable_prefix_caching else 1) + spec


def largest_fitting_len(fits: Callable[[int], bool], cap: int) -> int:
    """vLLM's binary search over 1…cap for the largest length whose request fits (0 if none)."""
    return largest_true(fits, cap)


def plan_memory(m: ModelSpec, gpu: GpuSpec, d: Deployment, quant: QuantSpec | None,
                era: Era, model_max_len: int) -> MemoryResult:
    """Per-worker budget → KV bytes → layer groups and blocks (minimum over PP stages) →
    capacity and fit, as the common memory result."""
    tp, pp = d.tensor_parallel_size, d.pipeline_parallel_size
    requested = budget_bytes(d.gpu_total_bytes, d.gpu_memory_utilization)
    ep = _expert_ranks(m, d)
    weights = weight_memory_per_stage(m, tp=tp, pp=pp, dtype=d.dtype, quant=quant, ep=ep)
    # EPLB: ceil((E + R) / ep) physical experts per rank (fused_moe/layer.py)
    redundant = redundant_expert_bytes(m, ep=ep, redundant=d.num_redundant_experts,
                                       dtype=d.dtype, quant=quant, pp=pp)
    a2a = a2a_buffer_bytes(m, d)
    draft = draft_memory(m, d)
    mm = mm_profile(m, d, era)
    stages: list[StageMemory] = []
    lora_parts: list[LoraSlots | None] = []
    # the same on every stage: non-torch memory, and the activations of each non-last stage
    nt = non_torch_bytes(d, gpu) + a2a
    held_mm = mm.held_bytes if mm else 0
    act_middle = (activation_bytes(m, d, last_stage=False, eager_v0=era.v0) + held_mm
                  if pp > 1 else 0)
    sizes = cudagraph_capture_sizes(d)  # the same on every stage
    block_fixed = d.user_set("block_size")
    # A stage before the last, without LoRA, is a function of its layer count and weights where
    # every layer is alike (stage_kv reads only the count): a long PP split's middle stages are
    # worked out once
    alike: dict[tuple[int, WeightMemory], StageMemory] = {}
    for s, layer_range in enumerate(pp_layer_ranges(m.num_layers, pp)):
        layers = len(layer_range)
        last = s == pp - 1
        key = (layers, weights[s])
        if not last and not d.enable_lora and not m.layer_types and key in alike:
            stages.append(alike[key])
            lora_parts.append(None)
            continue
        # The draft lives beside the LM head (last stage); LoRA slots beside every layer. Both
        # are built inside load_model, so "Model loading took" includes them.
        lora = lora_slots(m, layer_range, tp=tp, max_loras=d.max_loras, rank=d.max_lora_rank,
                          dtype=d.dtype, ep=ep) if d.enable_lora else None
        lora_parts.append(lora)
        extra = (draft.allocated_bytes if last else 0) + (lora.gpu_bytes if lora else 0) + redundant
        extra_tensor = ((draft.tensor_bytes if last else 0) + (lora.gpu_bytes if lora else 0)
                        + redundant)
        stage_weights = weights[s].allocated_bytes + extra
        # The encoder's dummy outputs and pixel inputs are held through the LM's profile forward
        # on every worker (each TP rank encodes the full batch; PP stages: assumed the same).
        act = (activation_bytes(m, d, last_stage=True, eager_v0=era.v0) + held_mm
               if last else act_middle)
        graphs = cudagraph_bytes(d, layers + (draft.layers if last else 0), sizes)
        if d.kv_cache_memory_bytes is not None:
            kv = d.kv_cache_memory_bytes  # the override replaces the whole budget computation
        else:
            kv = requested - stage_weights - act - nt - (graphs if era.cudagraph_in_budget else 0)
        if last and draft.kv_specs:  # the draft's layers share the target's blocks
            specs = layer_specs(m, layer_range, tp=tp, kv_dtype=d.kv_cache_dtype,
                                state_dtype=d.dtype, hybrid_manager=d.hybrid_kv_cache_manager)
            specs = specs + draft.kv_specs
            layout = kv_layout(specs, block_size=d.block_size,
                               block_size_fixed=block_fixed,
                               group_rule=era.group_rule)
            per_token = sum(x.bytes_per_token for x in specs)
        else:  # memoised per model and stage (kv.stage_kv)
            layout, per_token = stage_kv(m, layer_range, tp=tp, kv_dtype=d.kv_cache_dtype,
                                         state_dtype=d.dtype,
                                         hybrid_manager=d.hybrid_kv_cache_manager,
                                         block_size=d.block_size,
                                         block_size_fixed=block_fixed,
                                         group_rule=era.group_rule)
        stage = alike[key] = StageMemory(layers, stage_weights, act, nt, graphs, kv, layout,
                                         per_token, max(0, kv) // layout.bytes_per_block,
                                         weights[s].tensor_bytes + extra_tensor)
        stages.append(stage)
    worst = min(stages, key=lambda st: (st.num_blocks, -st.bytes_per_block))
    num_blocks = worst.num_blocks
    flight, mamba_pages = in_flight_tokens(d, era), mamba_pages_per_request(d, era)

    def need(length: int) -> int:
        return max(st.layout.blocks_per_request(length, in_flight=flight, mamba_pages=mamba_pages)
                   for st in stages)

    def largest_len(blocks: int, cap: int) -> int:
        """largest_fitting_len(need(n) + null <= blocks); closed form when every stage holds
        only full-attention/MLA groups (need(n) = groups × cdiv(n, block size) per stage)."""
        if all(g.kind in ("full", "mla") for st in stages for g in st.layout.groups):
            return max(0,
                       min([cap] + [(blocks - null) // len(st.layout.groups) * st.layout.block_size
                                       for st in stages]))
        return largest_fitting_len(lambda n: need(n) + null <= blocks, cap)

    if d.max_model_len is None:
        raise ValueError("vLLM's accounting runs on a resolved max_model_len")
    max_len = d.max_model_len
    bpr = need(max_len)
    null = 1 if era.null_block_in_fit_check else 0
    concurrency = num_blocks / bpr
    if era.printed_tokens == "concurrency":
        tokens = int(concurrency * max_len)
    else:  # ≤0.20: (num_blocks // groups) × block size
        tokens = num_blocks // len(worst.layout.groups) * worst.layout.block_size
    problems: list[Problem] = []
    fits = True
    if any(st.kv_cache_bytes <= 0 for st in stages):
        fits = False
        problems.append(Problem(
            code="no-kv-memory", severity="error",
            message="No memory left for the KV cache after weights, activations and runtime "
            f"buffers (needs {-min(st.kv_cache_bytes for st in stages) / GiB:.2f} GiB more per "
            "GPU); vLLM stops with 'No available memory for the cache blocks'."))
    elif num_blocks < bpr + null:
        fits = False
        est = largest_len(num_blocks, max_len)
        problems.append(Problem(
            code="max-model-len-too-long", severity="error",
            message=f"One request of max_model_len {d.max_model_len} needs "
            f"{bpr * worst.bytes_per_block / GiB:.2f} GiB of KV cache but "
            f"{worst.kv_cache_bytes / GiB:.2f} GiB is available; vLLM's estimated maximum "
            f"model length is {est}."))
    if worst.layout.padding_layers:
        pad = worst.layout.padding_layers
        problems.append(Problem(
            code="kv-padding-layers", severity="info",
            message=f"vLLM adds {pad} virtual padding layer(s) to equalise the hybrid layer groups "
            f"('Add {pad} padding layers'); their pages are allocated but unused"))
    free_at_init = d.gpu_total_bytes - d.other_processes_bytes - STARTUP_OVERHEAD_BYTES
    if d.kv_cache_memory_bytes is None and requested > free_at_init:
        fits = False
        shared = (f" ({d.other_processes_bytes / GiB:.2f} GiB held by other processes)"
                  if d.other_processes_bytes else "")
        problems.append(Problem(
            code="startup-free-memory", severity="error",
            message=f"gpu_memory_utilization {d.gpu_memory_utilization} asks for "
            f"{requested / GiB:.2f} GiB but only ≈{free_at_init / GiB:.2f} GiB is free once the "
            f"CUDA context exists{shared}; vLLM refuses to start ('Free memory on device … is "
            "less than desired GPU memory utilization')."))
    elif not era.cudagraph_in_budget and not d.enforce_eager:
        outside = d.gpu_total_bytes - requested - STARTUP_OVERHEAD_BYTES - d.other_processes_bytes
        if outside < worst.cudagraph_bytes:
            problems.append(Problem(
                code="cudagraph-headroom", severity="warning",
                message="This vLLM version captures CUDA graphs "
                f"(≈{worst.cudagraph_bytes / GiB:.2f} GiB) outside the utilization budget, but "
                f"only ≈{max(0, outside) / GiB:.2f} GiB is left"
                " there: graph capture may run out of memory. Lower --gpu-memory-utilization."))
    problems += feature_problems(m, d, draft, lora_parts) + mm_problems(m, d, era, mm)
    return memory_result(
        gpu, d, era=era.name, budget_bytes=requested, stages=_breakdowns(stages),
        cudagraph_in_budget=_graphs_in_budget(d, era),
        estimated=["activation_bytes", "non_torch_bytes", "cudagraph_bytes"],
        bytes_per_token=worst.bytes_per_token, block_size=worst.layout.block_size,
        num_blocks=num_blocks, reserved_blocks=null, tokens=tokens,
        max_model_len=max_len, max_concurrency=concurrency,
        max_model_len_fit=largest_len(num_blocks, model_max_len), fits=fits, problems=problems,
        notes=_notes(d, era), request_blocks=lambda length: worst.layout.blocks_per_request(
            length, in_flight=flight, mamba_pages=mamba_pages),
        speculative=speculative_section(d, draft), lora=lora_section(m, d, lora_parts),
        offload=offload_section(d, worst.bytes_per_block, worst.layout.block_size, tokens),
        multimodal=mm_section(m, d, mm))


def _breakdowns(stages: list[StageMemory]) -> list[StageBreakdown]:
    """One StageBreakdown per stage; alike middle stages (one StageMemory) share one."""
    made: dict[int, StageBreakdown] = {}
    for st in stages:
        if id(st) not in made:
            made[id(st)] = StageBreakdown(
                layers=st.layers, weights_bytes=st.weights_bytes,
                weights_tensor_bytes=st.weights_tensor_bytes,
                activation_bytes=st.activation_bytes, non_torch_bytes=st.non_torch_bytes,
                cudagraph_bytes=st.cudagraph_bytes, kv_cache_bytes=st.kv_cache_bytes,
                num_blocks=st.num_blocks, bytes_per_block=st.bytes_per_block)
    return [made[id(st)] for st in stages]


def _graphs_in_budget(d: Deployment, era: Era) -> bool:
    return era.cudagraph_in_budget and not d.enforce_eager


def _notes(d: Deployment, era: Era) -> dict[str, str]:
    inside = _graphs_in_budget(d, era)
    return memory_notes(
        budget=f"total × gpu_memory_utilization {d.gpu_memory_utilization:g}"
        if d.kv_cache_memory_bytes is None else "--kv-cache-memory-bytes",
        activation="estimate: profile run + sampler",
        non_torch="estimate: cuBLAS, NCCL, all-reduce", kv="what vLLM allocates",
        kv_tokens_label="GPU KV cache size",
        cudagraph=f"estimate, {'inside' if inside else 'outside'} the budget")


# ------------------------------------------------- speculative decoding, LoRA, KV offloading
# docs/features.md. No vLLM start-up log with these features was available to replay (the
# calibration CSVs have none), so these terms come from source reading alone.


@dataclass(frozen=True)
class DraftMemory:
    """A speculative-decoding draft on one GPU of the last PP stage."""

    layers: int  # decoder layers the draft runs (each adds an attention layer's KV cache)
    tensor_bytes: int
    allocated_bytes: int
    kv_specs: list[LayerKv]


NO_DRAFT = DraftMemory(0, 0, 0, [])


def draft_memory(m: ModelSpec, d: Deployment) -> DraftMemory:
    """The draft's weights and KV layers. vLLM V1 registers the draft's attention layers in the
    same forward context as the target's, so get_kv_cache_spec returns them with the target's
    and they share the target's block pool and block ids (vllm/v1/worker/gpu_model_runner.py
    get_kv_cache_spec; vllm/v1/spec_decode/eagle.py): every block gains one page per draft
    layer, i.e. KV bytes per token grow by the draft layers' (no separate draft pool; the
    drafter finds its layers inside the shared kv_cache_groups in vLLM's main-branch sources)."""
    sc = d.speculative_config
    if sc is None:
        return NO_DRAFT
    tp = d.tensor_parallel_size
    tensor, allocated = draft_weight_bytes(m, sc, tp=tp, dtype=d.dtype)
    n = draft_layer_count(m, sc)
    if sc.method == "mtp":  # the MTP layers are shaped like the target's last layer
        last = m.num_layers - 1
        specs = layer_specs(m, range(last, last + 1), tp=tp, kv_dtype=d.kv_cache_dtype,
                            state_dtype=d.dtype, hybrid_manager=d.hybrid_kv_cache_manager) * n
    elif sc.draft is not None and n:
        specs = layer_specs(sc.draft, range(n), tp=tp, kv_dtype=d.kv_cache_dtype,
                            state_dtype=d.dtype, hybrid_manager=d.hybrid_kv_cache_manager)
    else:
        specs = []
    return DraftMemory(n, tensor, allocated, specs)


def resolve_speculative(m: ModelSpec, knobs: Any, era: Era,
                        sources: dict[str, Source]) -> SpeculativeConfig | None:
    """--speculative-config checked as vLLM checks it (vllm/config/speculative.py):
    eagle/eagle3/draft_model need a draft ("model"); mtp needs the target's MTP layers and
    defaults num_speculative_tokens to num_nextn_predict_layers; the others need it given."""
    sc = knobs.speculative_config
    if sc is None:
        return None
    sources["speculative_config"] = "cli"
    if era.v0:
        raise InvalidInputError("kvplan models speculative decoding for vLLM's V1 engine only "
                                "(V0 ran the draft in a separate worker with its own KV cache)",
                                hint="plan with --engine-version 0.11.0 or later")
    k = sc.num_speculative_tokens
    if sc.method == "draft_model" and sc.model == m.id and m.mtp_layers:
        sc = sc.model_copy(update={"method": "mtp", "draft": None})  # the target's own MTP layers
    if sc.method == "mtp":
        if not m.mtp_layers:
            raise InvalidInputError(f"{m.id} has no multi-token-prediction layers "
                                    "(num_nextn_predict_layers) for method mtp",
                                    hint="use eagle, eagle3 or draft_model with a draft model, "
                                    "or ngram")
        k = k or m.mtp_layers
    elif sc.method != "ngram":
        if sc.model is None:
            raise InvalidInputError(f"--speculative-config method {sc.method} needs \"model\": "
                                    "the draft model or EAGLE head",
                                    hint='e.g. {"method": "eagle3", "model": "ORG/HEAD", '
                                    '"num_speculative_tokens": 3}')
        if sc.draft is None:
            raise InvalidInputError(f"the draft model {sc.model!r} was not loaded",
                                    hint="plan through kvplan.api.plan or the CLI, which resolve "
                                    "it by name, or set SpeculativeConfig.draft")
    if k is None:
        raise InvalidInputError("--speculative-config needs num_speculative_tokens",
                                hint='add "num_speculative_tokens": 3 (vLLM requires it)')
    return sc.model_copy(update={"num_speculative_tokens": k})


LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm/config/lora.py MaxLoRARanks


def resolve_lora(knobs: Any, sources: dict[str, Source]) -> dict[str, Any]:
    """--enable-lora with vLLM's defaults (vllm/config/lora.py): max_loras 1,
    max_lora_rank 16, max_cpu_loras = max_loras (and never below it). Without --enable-lora
    vLLM builds no LoRA config and ignores the other three flags."""
    if not knobs.enable_lora:
        return {}
    sources["enable_lora"] = "cli"
    if knobs.max_lora_rank is not None and knobs.max_lora_rank not in LORA_RANKS:
        raise InvalidInputError(f"--max-lora-rank must be one of {', '.join(map(str, LORA_RANKS))} "
                                f"for vLLM (its MaxLoRARanks), got {knobs.max_lora_rank}",
                                hint="SGLang and TensorRT-LLM take other ranks",
                                code="out-of-range",
                                knob="max_lora_rank")
    loras = knobs.max_loras or 1
    values = {"enable_lora": True, "max_loras": loras, "max_lora_rank": knobs.max_lora_rank or 16,
              "max_cpu_loras": knobs.max_cpu_loras or loras}
    for key in ("max_loras", "max_lora_rank", "max_cpu_loras"):
        sources[key] = "cli" if getattr(knobs, key) is not None else "engine-default"
    if values["max_cpu_loras"] < loras:
        raise InvalidInputError(f"--max-cpu-loras {values['max_cpu_loras']} is below --max-loras "
                                f"{loras}", hint="vLLM requires max_cpu_loras ≥ max_loras")
    return values


class VllmOptions(EngineOptions):
    """vLLM's own settings, resolved."""

    usage_context: Literal["serve", "llm"] = "serve"
    limit_mm_per_prompt: dict[str, int] | None = Field(
        None, description="vLLM --limit-mm-per-prompt: items per prompt by modality (None: the "
        "engine default)")
    kv_offloading_size: float | None = Field(None, gt=0, description="GiB, whole deployment")
    kv_offloading_backend: str | None = None


def opts(d: Deployment) -> VllmOptions:
    return engine_options(d, VllmOptions)


def resolve_offload(knobs: Any, era: Era, sources: dict[str, Source]) -> dict[str, Any]:
    """--kv-offloading-size GiB (backend native by default); without a size vLLM offloads
    nothing and ignores the backend (vllm/config/vllm.py _post_init_kv_transfer_config)."""
    if knobs.kv_offloading_size is None:
        return {}
    if era.v0:
        raise InvalidInputError("--kv-offloading-size is a V1 setting (V0 swapped with "
                                "--swap-space)", hint="plan with --engine-version 0.11.1 or later")
    sources["kv_offloading_size"] = "cli"
    sources["kv_offloading_backend"] = "cli" if knobs.kv_offloading_backend else "engine-default"
    return {"kv_offloading_size": knobs.kv_offloading_size,
            "kv_offloading_backend": knobs.kv_offloading_backend or "native"}


def speculative_section(d: Deployment, draft: DraftMemory) -> PlanSpeculative | None:
    sc = d.speculative_config
    if sc is None:
        return None
    return PlanSpeculative(
        method=sc.method, draft_model=sc.draft.id if sc.draft is not None else sc.model,
        num_speculative_tokens=sc.num_speculative_tokens or 0, draft_layers=draft.layers,
        draft_weights_bytes=draft.allocated_bytes,
        draft_kv_bytes_per_token=sum(x.bytes_per_token for x in draft.kv_specs),
        sampler_rows_factor=sampler_rows_factor(d))


def lora_section(m: ModelSpec, d: Deployment, parts: list[LoraSlots | None]) -> PlanLora | None:
    if not d.enable_lora or not parts or parts[0] is None:
        return None
    whole = lora_slots(m, range(m.num_layers), tp=1, max_loras=1, rank=d.max_lora_rank,
                       dtype=d.dtype)
    cpu = d.max_cpu_loras or d.max_loras
    return PlanLora(max_loras=d.max_loras, max_lora_rank=d.max_lora_rank, max_cpu_loras=cpu,
                    gpu_bytes=max(p.gpu_bytes for p in parts if p is not None),
                    adapter_bytes=whole.adapter_bytes,
                    host_bytes_per_worker=cpu * whole.adapter_bytes,
                    modules=list(whole.modules))


def offload_section(d: Deployment, bytes_per_block: int, block_size: int,
                    gpu_tokens: int) -> PlanOffload | None:
    """Native CPU offloading: kv_offloading_size GiB per engine (DP replica), split evenly over
    its TP × PP workers; each worker's CPU blocks = its bytes // the GPU bytes per block
    (vllm/config/vllm.py: cpu_bytes_to_use = size × 2^30; vllm/v1/kv_offload/cpu/spec.py:
    num_cpu_blocks = cpu bytes // bytes per offloaded block, block_size_factor 1)."""
    o = opts(d)
    if o.kv_offloading_size is None:
        return None
    per_replica = int(o.kv_offloading_size * GiB)
    per_worker = per_replica // (d.tensor_parallel_size * d.pipeline_parallel_size)
    blocks = per_worker // bytes_per_block
    tokens = blocks * block_size
    return PlanOffload(backend=o.kv_offloading_backend or "native",
                       host_bytes=per_replica * d.data_parallel_size,
                       host_bytes_per_worker=per_worker, cpu_blocks=blocks, cpu_tokens=tokens,
                       effective_cached_tokens=gpu_tokens + tokens)


def a2a_problems(m: ModelSpec, d: Deployment) -> list[Problem]:
    """A --all2all-backend (VLLM_ALL2ALL_BACKEND before 0.11.1) that nothing reads at this
    layout: vLLM dispatches through the all-to-all backend only when
    FusedMoEParallelConfig.use_all2all_kernels, `dp_size > 1 and use_ep`
    (vllm/model_executor/layers/fused_moe/config.py, 0.10.0 - 0.12.0), on a MoE model; the
    sequence-parallel MoE that also reads it needs the same (moe_token_split). The launch line
    keeps the setting the user gave (as every setting the user gave), and the warning names it
    as the line spells it: VLLM_ALL2ALL_BACKEND=… before --all2all-backend exists (ENV_FLAGS)."""
    backend = d.moe_a2a_backend
    if backend is None or (m.moe is not None and d.data_parallel_size > 1
                           and d.enable_expert_parallel):
        return []
    why = ("the model has no experts" if m.moe is None else
           "-dp is 1" if d.data_parallel_size <= 1 else "expert parallelism is off")
    rule = ENV_FLAGS[A2A_ENV]
    given = (f"{rule.flag} {backend}" if rule.has_flag(d.engine_version or NEWEST_MODELLED)
             else f"{A2A_ENV}={backend}")
    return [Problem(
        code="a2a-backend-unused", severity="warning",
        message=f"{given} (kvplan's --moe-a2a-backend) has no effect here: {why}; the launch "
        "line keeps it as given. vLLM runs its MoE all-to-all kernels only with data "
        "parallelism above 1 and expert parallelism (FusedMoEParallelConfig.use_all2all_kernels "
        "= dp_size > 1 and use_ep, vllm/model_executor/layers/fused_moe/config.py); -dp 2 or "
        "more with --enable-expert-parallel would use it")]


def feature_problems(m: ModelSpec, d: Deployment, draft: DraftMemory,
                     lora_parts: list[LoraSlots | None]) -> list[Problem]:
    out = a2a_problems(m, d)
    sc = d.speculative_config
    if sc is not None:
        out.append(Problem(
            code="speculative-decoding-estimate", severity="info",
            message=f"speculative decoding ({sc.method}, {sc.num_speculative_tokens} tokens): the "
            f"draft adds {draft.allocated_bytes / GiB:.2f} GiB of weights and {draft.layers} "
            "layer(s) to every KV block; modelled from vLLM's source, not yet checked against a "
            "start-up log"))
        if sc.method == "mtp":
            out.append(Problem(
                code="mtp-head-counted", severity="info",
                message="the MTP layers' own LM head is counted; if vLLM shares the target's, the "
                "draft holds vocab × hidden bytes less (UNVERIFIED)"))
    skipped = sorted({k for p in lora_parts if p is not None for k in p.skipped})
    if skipped:
        out.append(Problem(
            code="lora-partly-modelled", severity="warning",
            message=f"LoRA slots for {', '.join(skipped)} are not modelled; the LoRA memory shown "
            "covers the dense attention and MLP projections only"))
    if opts(d).kv_offloading_size is not None and opts(d).kv_offloading_backend == "lmcache":
        out.append(Problem(
            code="lmcache-capacity", severity="info",
            message="with the lmcache backend LMCache owns the host pool (its own chunking and "
            "eviction); the offload figures assume vLLM's native block layout"))
    return out


# ------------------------------------------------------------------------ multimodal
# docs/features.md. vLLM 0.11.0 read (vllm/v1/worker/gpu_model_runner.py profile_run,
# vllm/v1/worker/utils.py MultiModalBudget, vllm/config/multimodal.py); checked against the
# 0.19.0 gemma-3 and Llama-4-Scout start-up logs in benchmarks/data/vllm_llmd_extra.csv.
# 0.11.x copies each dummy encoder output into a zero tensor of encoder-budget rows before
# caching it (vLLM PR #25810, first released in 0.11.0); the 0.19.0 logs fit the outputs as
# they are. Releases 0.12–0.18 are assumed to behave like 0.19 (UNVERIFIED).
MM_EXPANDED_OUTPUTS = ((0, 11, 0), (0, 12, 0))


def mm_image_limit(d: Deployment) -> int:
    """Images per prompt vLLM accepts: --limit-mm-per-prompt's "image" count, else 999 (V1)."""
    given = opts(d).limit_mm_per_prompt or {}
    return given.get("image", DEFAULT_LIMIT_V1)


def mm_profile(m: ModelSpec, d: Deployment, era: Era) -> EncoderProfile | None:
    """The image encoder's share of vLLM V1's profile run (kvplan.multimodal.encoder_profile);
    None for text-only models, towers whose token count is unknown, and V0 (not modelled)."""
    v = m.vision
    if v is None or not v.max_tokens_per_image or era.v0:
        return None
    lo, hi = MM_EXPANDED_OUTPUTS
    return encoder_profile(
        v, limit=mm_image_limit(d), max_num_batched_tokens=d.max_num_batched_tokens,
        max_num_seqs=d.max_num_seqs, max_model_len=d.max_model_len or 0,
        text_hidden_size=v.text_hidden_size, dtype_bytes=DTYPE_BYTES[d.dtype],
        expand_to_budget=lo <= parse_version(d.engine_version) < hi)


def mm_section(m: ModelSpec, d: Deployment, mm: EncoderProfile | None) -> PlanMultimodal | None:
    if mm is None:
        return None
    return PlanMultimodal(
        modality="image", limit_per_prompt=mm.limit_per_prompt,
        limit_source="cli" if "image" in (opts(d).limit_mm_per_prompt or {})
        else "engine-default",
        max_tokens_per_item=mm.max_tokens_per_item, embeds_per_item=mm.embeds_per_item,
        encoder_budget_tokens=mm.encoder_budget_tokens, profile_items=mm.items,
        profile_bytes=mm.held_bytes, images_per_request=0, image_tokens_per_request=0)


def mm_problems(m: ModelSpec, d: Deployment, era: Era, mm: EncoderProfile | None) -> list[Problem]:
    v = m.vision
    if v is None:
        return []
    if era.v0 or not v.max_tokens_per_image:
        return [Problem(code="multimodal-not-modelled", severity="info",
                        message="the image encoder's profile-run memory is not modelled for this "
                        + ("vLLM version (V0)" if era.v0 else "vision tower")
                        + "; the KV budget may be smaller than shown")]
    if mm is None:
        return []
    if mm.items == 0:
        return [Problem(code="multimodal-encoder-off", severity="info",
                        message="--limit-mm-per-prompt image 0: vLLM skips the image encoder's "
                        "profiling and encoder cache; requests with images are refused")]
    out = []
    if "image" not in (opts(d).limit_mm_per_prompt or {}):
        out.append(Problem(
            code="mm-limit-unset", severity="warning",
            message=f"{m.id} takes images and --limit-mm-per-prompt is unset: vLLM's default "
            f"({DEFAULT_LIMIT_V1} per prompt) profiles the encoder with {mm.items} dummy "
            f"image(s) of {mm.max_tokens_per_item} tokens ({mm.held_bytes / GiB:.2f} GiB held "
            "through the profile, in the activation figure). '{\"image\": 0}' frees it for "
            "text-only traffic; a per-prompt limit shrinks the batch only below max_num_seqs × "
            "limit items, but makes vLLM refuse prompts with more images"))
    return out


# ------------------------------------------------------------------ the engine


def era_of(dep: Deployment) -> Era:
    return select_era(dep.engine_version)[0]


_IMAGE = re.compile(r"vllm[-/_]openai[^:\s\"']{0,200}:v?(\d+\.\d+(?:\.\d+)?)")
_PIP = re.compile(r"\bvllm==(\d+\.\d+(?:\.\d+)?)")
# vLLM's own ROCm image, vllm/vllm-openai-rocm:v<release>: the release pipeline
# tags it (.buildkite/scripts/annotate-rocm-release.sh, `vllm/vllm-openai-rocm:v${RELEASE_VERSION}`)
# and docs/getting_started/installation/gpu.rocm.inc.md calls it the official image, published
# from January 2026 (vLLM PR #32580); the earliest release kvplan saw tagged is v0.14.1
# (vllm-project/recipes PR #214). It is built for gfx90a, gfx942 and gfx950
# (docker/Dockerfile.rocm_base PYTORCH_ROCM_ARCH). Before it, AMD published rocm/vllm images
# whose tags name a ROCm and a vLLM release and a date (ROCm/k8s-device-plugin
# example/vllm-serve/deployment.yaml: rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4),
# which no rule derives from the release.
ROCM_IMAGE_FROM = (0, 14, 1)


def rocm_image(version: str, gfx: str) -> tuple[str, str | None]:
    if parse_version(version) >= ROCM_IMAGE_FROM:
        return f"vllm/vllm-openai-rocm:v{version}", None
    return "rocm/vllm:TAG", (
        f"Set the image TAG to the rocm/vllm tag (AMD's images) that ships vLLM {version}: "
        "its tags name the ROCm and vLLM releases and a date (rocm6.2_mi300_ubuntu20.04_py3.9_"
        "vllm_0.6.4); vLLM publishes vllm/vllm-openai-rocm itself from 0.14.1.")


# AMD's ROCm builds name the release inside the tag: rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715,
# rocm/vllm:rocm6.3.1_instinct_vllm0.8.3_20250415 (ROCm docs, "vLLM inference performance testing
# version history", rocm.docs.amd.com docs-7.1.0 how-to/rocm-for-ai/inference/benchmark-docker/
# previous-versions/vllm-history.html: each tag with its vLLM release)
_ROCM_IMAGE = re.compile(r"\brocm/vllm:[^\s\"':]{0,200}?_vllm_?v?(\d+\.\d+(?:\.\d+)?)")
# vLLM flag → (knob, kind). Kinds: int, hint (human-readable int: 32k = 32000, 32K = 32768 —
# vllm/engine/arg_utils.py human_readable_int), float, str, bool.
CLI_FLAGS: dict[str, tuple[str, str]] = {
    "--tensor-parallel-size": ("tensor_parallel_size", "int"),
    "-tp": ("tensor_parallel_size", "int"),
    "--pipeline-parallel-size": ("pipeline_parallel_size", "int"),
    "-pp": ("pipeline_parallel_size", "int"),
    "--data-parallel-size": ("data_parallel_size", "int"), "-dp": ("data_parallel_size", "int"),
    # nodes: vllm/engine/arg_utils.py `--nnodes`/`-n` (multi-node multiprocessing, 0.11.1+;
    # engines/multinode.py); the GPUs per node follow from tp × pp × dp ÷ nodes
    "--nnodes": ("nodes", "int"), "-n": ("nodes", "int"),
    "--max-model-len": ("max_model_len", "hint"), "--max-num-seqs": ("max_num_seqs", "int"),
    "--max-num-batched-tokens": ("max_num_batched_tokens", "hint"),
    "--gpu-memory-utilization": ("gpu_memory_utilization", "float"),
    "--dtype": ("dtype", "str"), "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--quantization": ("quantization", "str"), "-q": ("quantization", "str"),
    "--block-size": ("block_size", "int"), "--enforce-eager": ("enforce_eager", "bool"),
    "--kv-cache-memory-bytes": ("kv_cache_memory_bytes", "hint"),
    "--model": ("model", "str"), "--revision": ("revision", "str"),
    "--enable-prefix-caching": ("enable_prefix_caching", "bool"),
    "--enable-expert-parallel": ("enable_expert_parallel", "bool"),
    # EPLB's redundant experts: --num-redundant-experts N up to 0.11.2 (deprecated from 0.10.2,
    # "will be removed in v0.12.0"; gone in 0.12.0), --eplb-config '{"num_redundant_experts": N}'
    # or --eplb-config.num_redundant_experts N from 0.10.2 (EPLB_CONFIG_FROM, FLAG_RELEASES;
    # combine_flags folds it into the knob)
    "--num-redundant-experts": ("num_redundant_experts", "int"),
    "--eplb-config": ("eplb_config", "str"),
    # the MoE all-to-all backend (ParallelConfig.all2all_backend, 0.11.1+; VLLM_ALL2ALL_BACKEND
    # before and beside it: ENV_FLAGS)
    "--all2all-backend": ("moe_a2a_backend", "str"),
    "--disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", "bool"),
    "--speculative-config": ("speculative_config", "str"),
    "--enable-lora": ("enable_lora", "bool"), "--max-loras": ("max_loras", "int"),
    "--max-lora-rank": ("max_lora_rank", "int"), "--max-cpu-loras": ("max_cpu_loras", "int"),
    "--kv-offloading-size": ("kv_offloading_size", "float"),
    "--kv-offloading-backend": ("kv_offloading_backend", "str"),
    "--limit-mm-per-prompt": ("limit_mm_per_prompt", "str"),
}
# vllm/engine/arg_utils.py store_true / BooleanOptionalAction flags seen in deployment files.
BOOLEAN_FLAGS = frozenset({
    "--enforce-eager", "--trust-remote-code", "--enable-prefix-caching", "--enable-chunked-prefill",
    "--enable-expert-parallel", "--disable-log-requests", "--disable-log-stats",
    "--enable-log-requests", "--enable-auto-tool-choice", "--enable-lora",
    "--disable-custom-all-reduce", "--async-scheduling", "--disable-frontend-multiprocessing",
    "--enable-reasoning", "--disable-sliding-window", "--skip-tokenizer-init",
    "--enable-sleep-mode",
    "--headless", "--disable-hybrid-kv-cache-manager",
})


# EPLB's flags, read in the PyPI wheels' vllm/engine/arg_utils.py: --enable-eplb and
# --num-redundant-experts from 0.9.2 (vLLM PR #18343) through 0.11.2 (EngineArgs.add_cli_args
# of 0.9.0 and 0.9.1 has neither); --eplb-config (a JSON
# EPLBConfig, vllm/config/parallel.py: num_redundant_experts, window_size, …) first in 0.10.2,
# which deprecates --num-redundant-experts ("[DEPRECATED] --num-redundant-experts will be removed
# in v0.12.0.", still in 0.11.0 and 0.11.2); 0.12.0 has no --num-redundant-experts (argparse
# refuses it). 0.10.0 and 0.10.1.1 have no --eplb-config.
EPLB_CONFIG_FROM = (0, 10, 2)
# `kvplan check` refuses each spelling where the release's parser does (DeploySyntax.
# flag_releases). Checked again in the PyPI wheels' vllm/engine/arg_utils.py: 0.11.2 still
# add_argument("--num-redundant-experts", …, help="[DEPRECATED] --num-redundant-experts will be
# removed in v0.12.0.", deprecated=True); 0.12.0 has no such argument (EngineArgs.
# num_redundant_experts is gone too), so FlexibleArgumentParser stops on it as unrecognized;
# --eplb-config first in 0.10.2.
FLAG_RELEASES = {
    # --enable-eplb and --num-redundant-experts: parallel_group arguments first in 0.9.2 (not in
    # 0.9.0's or 0.9.1's add_cli_args); before it no spelling of EPLB, so `plan` drops the knob
    "--num-redundant-experts": FlagReleases(
        first="0.9.2", removed="0.12.0",
        instead_after="--eplb-config '{{\"num_redundant_experts\":{value}}}'",
        source="vllm/engine/arg_utils.py, vLLM 0.9.1, 0.9.2, 0.11.2 and 0.12.0"),
    "--enable-eplb": FlagReleases(
        first="0.9.2", source="vllm/engine/arg_utils.py, vLLM 0.9.1 and 0.9.2"),
    # --data-parallel-size-local, --data-parallel-address and --data-parallel-rpc-port (a
    # data-parallel deployment over several nodes: engines/multinode.py) are not in 0.8.5's
    # parallel group and are in 0.9.0's, 0.9.2's and 0.10.0's
    **{name: FlagReleases(first="0.9.0", source="vllm/engine/arg_utils.py, vLLM 0.8.5 and 0.9.0")
       for name in ("--data-parallel-size-local", "--data-parallel-address",
                    "--data-parallel-rpc-port")},
    "--eplb-config": FlagReleases(
        first=".".join(map(str, EPLB_CONFIG_FROM)), instead_before="--num-redundant-experts N",
        source="vllm/engine/arg_utils.py, vLLM 0.10.1.1 and 0.10.2"),
    # EngineArgs' add_cli_args in the PyPI wheels' vllm/engine/arg_utils.py: cache_group's
    # --kv-cache-memory-bytes (CacheConfig.kv_cache_memory_bytes) is not in 0.10.1.1 and is in
    # 0.10.2, 0.11.0 and 0.12.0
    "--kv-cache-memory-bytes": FlagReleases(
        first="0.10.2", source="vllm/engine/arg_utils.py, vLLM 0.10.1.1 and 0.10.2"),
    # --kv-offloading-size and --kv-offloading-backend (cache_kwargs["kv_offloading_size"],
    # ["kv_offloading_backend"]): not in 0.11.0, both in 0.11.1, 0.11.2 and 0.12.0
    "--kv-offloading-size": FlagReleases(
        first="0.11.1", source="vllm/engine/arg_utils.py, vLLM 0.11.0 and 0.11.1"),
    "--kv-offloading-backend": FlagReleases(
        first="0.11.1", source="vllm/engine/arg_utils.py, vLLM 0.11.0 and 0.11.1"),
    # --enable-prefix-caching is action='store_true' up to 0.6.4.post1 (no --no- form) and
    # argparse.BooleanOptionalAction from 0.6.5 (read in 0.6.5, 0.6.6, 0.7.3, 0.8.0); before
    # 0.6.5 prefix caching is off unless the flag is given (EngineArgs.enable_prefix_caching:
    # bool = False), so nothing need be written
    "--no-enable-prefix-caching": FlagReleases(
        first="0.6.5",
        instead_before="no flag (prefix caching is off by default in that release)",
        source="vllm/engine/arg_utils.py, vLLM 0.6.4.post1 and 0.6.5"),
    # EngineArgs.add_cli_args: '--enable-expert-parallel' (store_true) is not in 0.7.3 and is in
    # 0.8.0–0.8.5, 0.9.0, 0.9.2 and 0.10.0
    "--enable-expert-parallel": FlagReleases(
        first="0.8.0", source="vllm/engine/arg_utils.py, vLLM 0.7.3 and 0.8.0"),
    # '--data-parallel-size', '-dp' is in none of 0.7.3, 0.8.0, 0.8.1 and 0.8.2 (their
    # VLLM_DP_SIZE, vllm/envs.py, is read by offline data-parallel scripts, not by the server's
    # parser) and is in 0.8.3, 0.8.4, 0.8.5, 0.9.0, 0.9.2 and 0.10.0
    **{name: FlagReleases(first="0.8.3", source="vllm/engine/arg_utils.py, vLLM 0.8.2 and 0.8.3")
       for name in ("--data-parallel-size", "-dp")},
    # '--limit-mm-per-prompt' is not in 0.5.0–0.5.4 and is in 0.5.5 (type=nullable_kvs); the
    # forms of its value by release: MM_JSON_FROM below
    "--limit-mm-per-prompt": FlagReleases(
        first="0.5.5", source="vllm/engine/arg_utils.py, vLLM 0.5.4 and 0.5.5"),
}
# The dotted form of a JSON flag, `--eplb-config.num_redundant_experts 8` for
# --eplb-config '{"num_redundant_experts": 8}' (vLLM PR #18208): FlexibleArgumentParser.parse_args
# in the 0.9.0 wheel's vllm/utils.py is the first to read it (0.8.5's has no dotted keys), and
# it reads the same in 0.10.2 (vllm/utils/__init__.py) and 0.12.0 (vllm/utils/argparse_utils.py):
# every `--FLAG.KEY VALUE` / `--FLAG.KEY=VALUE` (VALUE JSON-decoded from 0.10.2, text before; a
# dotted KEY nests) merged into one object that is passed as `--FLAG JSON` after the other
# arguments, so it replaces a whole `--FLAG '{…}'` also written (argparse keeps the last).
# kvplan reads --eplb-config's and --speculative-config's dotted keys (DeploySyntax.dotted_json);
# the release check then needs 0.9.0 (DOTTED_FROM), and --eplb-config its own 0.10.2.
DOTTED_FROM = "0.9.0"
# Fp8Config.get_min_capability returns 75 from this release (80 before): engine.fp8_least
FP8_TURING_FROM = (0, 14, 0)


def prefix_caching_flag(dep: Deployment) -> list[str]:
    """The flag that sets prefix caching as planned where the release's default differs:
    --enable-prefix-caching on V0 (off by default), --no-enable-prefix-caching on V1 (on by
    default); the V0 releases before 0.6.5 have no --no- form and need none (off already)."""
    version = dep.engine_version or NEWEST_MODELLED
    if dep.enable_prefix_caching:
        return [] if era_of(dep).prefix_caching else ["--enable-prefix-caching"]
    off = "--no-enable-prefix-caching"
    return [off] if FLAG_RELEASES[off].in_release(version) else []


def eplb_flags(dep: Deployment) -> list[str]:
    """--enable-eplb and the redundant experts in the spelling of the planned release."""
    n = dep.num_redundant_experts
    if not n:
        return []
    if parse_version(dep.engine_version or NEWEST_MODELLED) >= EPLB_CONFIG_FROM:
        return ["--enable-eplb", "--eplb-config",
                json.dumps({"num_redundant_experts": n}, separators=(",", ":"))]
    return ["--enable-eplb", "--num-redundant-experts", str(n)]


def combine_flags(knobs: dict[str, Any], model: str | None) -> dict[str, Any]:
    """A deployment file's --eplb-config JSON → the num_redundant_experts knob (its other
    EPLBConfig keys are not modelled); a ValueError names what cannot be read."""
    raw = knobs.pop("eplb_config", None)
    if raw is None:
        return knobs

    def shown(value: object) -> str:  # a value as a message quotes it: 60 characters at most
        text = repr(value)
        return text if len(text) <= 60 else text[:60] + "…"

    try:
        cfg = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError(f"--eplb-config {shown(raw)} is not JSON (vLLM reads it as an "
                         "EPLBConfig object, e.g. '{\"num_redundant_experts\": 32}')") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"--eplb-config {shown(raw)} is not a JSON object")
    n = cfg.get("num_redundant_experts")
    if n is None:
        return knobs
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"--eplb-config num_redundant_experts {shown(n)} is not an integer ≥ 0")
    old = knobs.get("num_redundant_experts")
    if old is not None and old != n:
        raise ValueError(f"contradictory flags: --num-redundant-experts {old} and --eplb-config "
                         f"num_redundant_experts {n}")
    knobs["num_redundant_experts"] = n
    return knobs


# vLLM took --limit-mm-per-prompt as key=value pairs (image=4,video=1) until JSON replaced them
# (vLLM PR #16789, first released in 0.8.5, kept the old form as a fallback with a warning);
# 0.10.0 refuses it at argument parsing (vLLM issue #21615; 0.11.0 vllm/engine/arg_utils.py
# parses the flag with json.loads only).
MM_LEGACY_REFUSED_FROM = (0, 10, 0)
# Read in the PyPI wheels' vllm/engine/arg_utils.py: 0.5.5, 0.7.3 and 0.8.4 parse the value with
# nullable_kvs alone (split on "," then "=", each count int(): '{"image": 4}' raises "Each item
# should be in the form KEY=VALUE" and the server does not start); 0.8.5, 0.9.0 and 0.9.2 pass
# it to json.loads when it matches ^{.*}$ and to the deprecated nullable_kvs otherwise (parse_type);
# 0.10.0 has no nullable_kvs. So the releases before 0.8.5 take only the key=value form.
MM_JSON_FROM = (0, 8, 5)


def mm_limit_value(limits: Mapping[str, int], version: str | None) -> str:
    """--limit-mm-per-prompt's value in the form `version` parses: JSON from MM_JSON_FROM,
    image=4,video=0 before."""
    if parse_version(version or NEWEST_MODELLED) >= MM_JSON_FROM:
        return json.dumps(dict(limits), separators=(",", ":"))
    return ",".join(f"{k}={v}" for k, v in limits.items())


# Latency model (kvplan/perf/step.py). Coefficients fitted by benchmarks/perf_fit.py →
# benchmarks/data/perf_fit.json ("coefficients"; method and leave-one-group-out errors in
# docs/performance.md). Shared by the engines in the fit (engines/sglang.py), fitted on rows
# served through Dynamo's front end (dynamo_front_end_ms, which no plan carries);
# request_overhead_ms, the engine server's own, is set from one independent `vllm serve` run
# (benchmarks/perf_fit.py KVCACHED). `perf_fit.py --check` checks these equal the committed fit.
# Calibrated releases: those with rows in benchmarks/data/perf_calibration.csv. Batching style
# (vLLM docs): V1 schedules prefill chunks into decode steps (chunked prefill on by default).
CALIBRATION = Calibration(
    style="mixed",
    coefficients=Coefficients(gemm_efficiency=0.561, bandwidth_efficiency=1.0,
                              step_overhead_ms=5.0515, layer_overhead_us=0.0,
                              seq_overhead_us=28.9102, allreduce_latency_us=0.0003,
                              request_overhead_ms=34.0309, burst_share=0.1768,
                              dynamo_front_end_ms=30.3475),
    versions=("0.12.0",),
    # Async scheduling (vllm/config/scheduler.py SchedulerConfig.async_scheduling: "helps to
    # avoid gaps in GPU utilization"; vllm PR #19970) overlaps the scheduler's work for the next
    # step with the GPU's current step. Opt-in (--async-scheduling) up to 0.12 (vllm-project/
    # recipes PR #131, 2025-12-01; the calibration rows are 0.12.0), on by default (None → on
    # unless incompatible, vllm/config/vllm.py) after vllm PR #27614, merged after 2025-12-18
    # (vllm-project/vllm-gaudi PR #768 adapts to it, after #741 of that date): first release
    # 0.14.0 (inferred from those dates; confirmed in the released sources: SchedulerConfig.
    # async_scheduling is False in v0.13.0's vllm/config/scheduler.py, None in v0.14.0's, and
    # v0.14.0's vllm/config/vllm.py turns None on unless PP > 1, a draft method other than
    # EAGLE/MTP, disable_padded_drafter_batch, or an executor other than mp/uni/
    # external_launcher); on in 0.20.2 (vllm-project/vllm-ascend PR #9567) and
    # 0.22 (RBLN-SW/vllm-rbln PR #581 review). Checked on the vLLM 0.23 L4 rows of
    # benchmarks/data/perf_latency_public.csv (docs/performance-latency.md).
    cpu_overlap_from="0.14.0",
    # v0.14.0 vllm/config/vllm.py keeps async scheduling on for drafts in EagleModelTypes
    # (eagle, eagle3, mtp and the <family>_mtp types, which kvplan names "mtp") and turns it
    # off for any other method (ngram, draft models) and with disable_padded_drafter_batch
    overlap_drafts=frozenset({"eagle", "eagle3", "mtp"}),
    # The OpenAI-compatible front end: one API-server process per replica unless
    # --api-server-count says more (vllm PR #17546; its default is the data-parallel size with
    # internal load balancing, vllm/entrypoints/cli/serve.py: one per DP rank, the unit kvplan's
    # performance figures describe) takes every request through one asyncio loop
    # (HTTP, chat template, tokenisation, output processing; vLLM's v0.6.0 blog post,
    # 2024-09-05, measured the HTTP API server at 33 % of the execution time of Llama 3 8B on
    # one H100, before it got its own process). No public source gives its time per request,
    # so this is the ONE constant fitted on the traffic development set (docs/traffic.md,
    # benchmarks/traffic_validation.py frontend_fit): the largest service time no vLLM run
    # there contradicts, 1 / 212.76 req/s = 4.70 ms, the fastest burst (GPUStack's performance
    # lab, gpt-oss-20b on one H100, vLLM 0.11.0, 1,000 chat requests of 128 in / 4 out sent at
    # once; the engine alone simulates 551 req/s there). Applied to every vLLM release.
    frontend_service_ms=4.70,
    # routed experts: vLLM's Triton fused_moe (vllm/model_executor/layers/fused_moe/
    # fused_moe.py) for bf16 and fp8 experts, timed per GPU in aiconfigurator's vLLM 0.14.0
    # tables (perf/moe_gemm.py)
    moe_kernels="vllm-triton-fused-moe",
    # --- bwmxfp4 --- gpt-oss's MXFP4 experts on Blackwell: FlashInfer's TRT-LLM-gen MXFP4 ×
    # BF16 MoE on SM100/SM103 by default (the 0.10.2-0.19.0 wheels, docs/moe-gemm.md;
    # vllm/model_executor/layers/fused_moe/oracle/mxfp4.py _get_priority_backends at commit
    # 001eda31: FLASHINFER_TRTLLM_MXFP4_BF16 first, "Only includes BF16 backends. MXFP8
    # backends are selected via env vars", VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8 default off);
    # every other backend it falls to keeps bf16 activations too (_backend_activation_key:
    # None, i.e. BF16, for all but the env-selected MXFP8 ones): Marlin on SM120, and on
    # ROCm CDNA4 AITER's CK MoE (with VLLM_ROCM_USE_AITER=1) or the OAI Triton kernels
    mxfp4_expert_dtype=(("Blackwell", "bfloat16"), ("Blackwell Ultra", "bfloat16"),
                        ("Blackwell (GB202)", "bfloat16"), ("CDNA4", "bfloat16")))


def _expert_ranks(m: ModelSpec, d: Deployment) -> int:
    """GPUs the routed experts are split over. MoE layers span T × D GPUs whenever -dp > 1
    (FusedMoEParallelConfig.make, flatten_tp_across_dp, vllm/model_executor/layers/fused_moe/
    config.py 0.8-0.11): whole experts with EP, else a TP slice of every expert over T × D,
    sized as whole experts over T × D (the same bytes when T × D divides the experts, up to
    quantization blocks)."""
    if m.moe is None or not (d.enable_expert_parallel or d.data_parallel_size > 1):
        return 1
    return d.tensor_parallel_size * d.data_parallel_size


def moe_layout(dep: Deployment) -> tuple[bool, int, bool]:
    """vLLM: every MoE model with -dp > 1 shares its MoE layers over the DP ranks (DP
    attention); EP over T × D; all-to-all kernels only with EP and -dp > 1
    (FusedMoEParallelConfig.use_all2all_kernels = dp_size > 1 and use_ep) and a DeepEP
    backend. The allgather_reducescatter backend (the default, vllm/envs.py 0.11.0,
    ParallelConfig.all2all_backend 0.33.0) and naive dispatch by gathering every rank's tokens
    and combine by a reduce-scatter (AgRsAll2AllManager / NaiveAll2AllManager,
    vllm/distributed/device_communicators/all2all.py 0.11.0; FusedMoE.forward_impl
    do_naive_dispatch_combine): the gather/scatter form (perf/expert.py), not top-k."""
    tp, dp = dep.tensor_parallel_size, dep.data_parallel_size
    ep = tp * dp if dep.enable_expert_parallel else 1
    return dp > 1, ep, dp > 1 and dep.enable_expert_parallel and (
        dep.moe_a2a_backend or "").startswith("deepep")


# Sequence-parallel MoE is each model file's own: FusedMoE(is_sequence_parallel=...) defaults
# to False (fused_moe/layer.py make_parallel_config, 0.33.0), and only the files below pass
# ParallelConfig.use_sequence_parallel_moe and slice their tokens. Architecture (the HF
# config's, as vllm/model_executor/models/registry.py maps it) → (first release read with it,
# first release read with the "scatter" form or None: "chunk" throughout). Read in the
# releases 0.11.0, 0.14.0, 0.18.0, 0.22.0, 0.25.0, 0.26.0, 0.29.0 and 0.33.0: a row's
# first release is the first of those that has it (exact for 0.11.0: 0.10.2 has no
# sequence-parallel MoE). "chunk": sequence_parallel_chunk in the MoE block after a whole
# all-reduce; "scatter": a reduce-scatter in its place before the MoE block.
_DEEPSEEK = ((0, 11, 0), (0, 25, 0))  # models/deepseek_v2.py: DeepseekV2MoE.forward chunks
# 0.11.0 - 0.24.0; DeepseekV2DecoderLayer.forward reduce-scatters from 0.25.0
# (reduce_results=not use_sequence_parallel_moe); DeepseekV32 moved to vllm/models/deepseek_v32
# (nvidia/model.py DeepseekV32DecoderLayer: sp_reduce_scatter, read at 0.33.0)
SEQUENCE_PARALLEL_MOE: dict[str, tuple[tuple[int, int, int], tuple[int, int, int] | None]] = {
    "DeepseekV2ForCausalLM": _DEEPSEEK, "DeepseekV3ForCausalLM": _DEEPSEEK,
    "DeepseekV32ForCausalLM": _DEEPSEEK,
    "DeepseekForCausalLM": ((0, 14, 0), (0, 25, 0)),  # deepseek_v2.py from 0.14.0
    "GlmMoeDsaForCausalLM": ((0, 18, 0), (0, 25, 0)),  # deepseek_v2.py, then deepseek_v32
    # qwen3_moe.py Qwen3MoeSparseMoeBlock: chunk, 0.11.0 - 0.33.0; qwen3_vl_moe.py builds on
    # its Qwen3MoeModel
    "Qwen3MoeForCausalLM": ((0, 11, 0), None),
    "Qwen3VLMoeForConditionalGeneration": ((0, 11, 0), None),
    # qwen3_next.py: chunk 0.11.0 - 0.25.0; use_attn_reduce_scatter_for_moe from 0.26.0
    "Qwen3NextForCausalLM": ((0, 11, 0), (0, 26, 0)),
    # qwen3_5.py use_attn_reduce_scatter_for_moe (0.26.0; the MoE causal LM from 0.29.0)
    "Qwen3_5ForConditionalGeneration": ((0, 26, 0), (0, 26, 0)),
    "Qwen3_5MoeForCausalLM": ((0, 29, 0), (0, 29, 0)),
    "GptOssForCausalLM": ((0, 11, 0), None),  # gpt_oss.py MLPBlock
    # llama4.py Llama4MoE; mllama4.py runs Llama4ForCausalLM as its language model
    "Llama4ForCausalLM": ((0, 11, 0), None), "Llama4ForConditionalGeneration": ((0, 11, 0), None),
    "GraniteMoeForCausalLM": ((0, 11, 0), None),  # granitemoe.py
    "MiMoV2FlashForCausalLM": ((0, 14, 0), None),  # mimo_v2_flash.py, mimo_v2.py from 0.22.0
    "NemotronHForCausalLM": ((0, 14, 0), None),  # nemotron_h.py
    "PanguProMoEV2ForCausalLM": ((0, 14, 0), None), "PanguUltraMoEForCausalLM": ((0, 14, 0), None),
    "AXK1ForCausalLM": ((0, 18, 0), None),  # AXK1.py
}


def moe_token_split(dep: Deployment, m: ModelSpec | None = None) -> TokenSplit:
    """vLLM's sequence-parallel MoE (ParallelConfig.use_sequence_parallel_moe: an
    all2all backend among allgather_reducescatter, naive, deepep_high_throughput,
    deepep_low_latency, with EP, TP > 1 and DP > 1; vllm/config/parallel.py 0.11.0 - 0.33.0;
    0.19+ maps naive to allgather_reducescatter): each TP rank runs the MoE on its 1/TP of the
    tokens and all-gathers the output, in the model files of SEQUENCE_PARALLEL_MOE only; other
    MoE models (Mixtral, GLM-4.5, Qwen2-MoE, ...) run the MoE on every TP rank's copy. 0.11 -
    0.24 keep the attention all-reduce and slice (sequence_parallel_chunk,
    DeepseekV2MoE.forward); from 0.25.0 DeepSeek's reduce-scatter replaces it
    (DeepseekV2DecoderLayer.forward, reduce_results=not use_sequence_parallel_moe). 0.10.2 has
    no sequence-parallel MoE: every TP rank dispatches its copy. `m` None: DeepSeek's file."""
    v = parse_version(dep.engine_version or NEWEST_MODELLED)
    if v < (0, 11, 0) or (dep.moe_a2a_backend or "allgather_reducescatter") not in \
            VLLM_A2A_BACKENDS or not (dep.enable_expert_parallel and dep.tensor_parallel_size > 1
                                      and dep.data_parallel_size > 1):
        return ""
    row: tuple[tuple[int, int, int], tuple[int, int, int] | None] = _DEEPSEEK
    if m is not None:
        arch = m.architectures[0] if m.architectures else ""
        if arch not in SEQUENCE_PARALLEL_MOE:
            return ""
        row = SEQUENCE_PARALLEL_MOE[arch]
    since, scatter = row
    if v < since:
        return ""
    return "scatter" if scatter is not None and v >= scatter else "chunk"


# vLLM's DeepEP buffers (vllm/distributed/device_communicators/all2all.py @00143004):
# high-throughput: VLLM_DEEPEP_BUFFER_SIZE_MB (1024) MiB of NVLink buffer (+ as much RDMA
# across nodes); low-latency: the same NVLink buffer + DeepEP's low-latency RDMA size for
# VLLM_MOE_DP_CHUNK_SIZE (256) tokens per DP rank (FusedMoEConfig.max_num_tokens, vllm/envs.py).
# Built with the MoE layers, so the profile counts them as non-torch memory.
DEEPEP_BUFFER_BYTES = 1024 * 1024 * 1024
MOE_DP_CHUNK_TOKENS = 256
VLLM_A2A_BACKENDS = ("allgather_reducescatter", "naive", "deepep_high_throughput",
                     "deepep_low_latency")


def a2a_buffer_bytes(m: ModelSpec, d: Deployment) -> int:
    """One GPU's DeepEP buffer, when the all-to-all kernels run (EP with -dp > 1:
    FusedMoEParallelConfig.use_all2all_kernels) through a DeepEP backend; 0 otherwise."""
    backend = d.moe_a2a_backend or ""
    if m.moe is None or not backend.startswith("deepep") or not (
            d.enable_expert_parallel and d.data_parallel_size > 1):
        return 0
    if backend == "deepep_high_throughput":
        return DEEPEP_BUFFER_BYTES
    experts = m.moe.num_experts + d.num_redundant_experts
    return DEEPEP_BUFFER_BYTES + deepep_low_latency_bytes(MOE_DP_CHUNK_TOKENS, m.hidden_size,
                                                          experts)


def _a2a_backend(knobs: Knobs, sources: dict[str, Source]) -> str | None:
    backend = knobs.moe_a2a_backend
    if backend is not None and backend not in VLLM_A2A_BACKENDS:
        raise InvalidInputError(f"--moe-a2a-backend {backend} is not one vLLM has (its "
                                "--all2all-backend)",
                                hint="use " + ", ".join(VLLM_A2A_BACKENDS),
                                code="out-of-range", knob="moe_a2a_backend")
    sources["moe_a2a_backend"] = "cli" if backend is not None else "engine-default"
    return backend


def _redundant(m: ModelSpec, knobs: Knobs, expert_parallel: bool,
               sources: dict[str, Source]) -> int:
    """--num-redundant-experts: EPLB needs expert parallelism on a MoE model (vLLM's
    ParallelConfig: enable_eplb requires enable_expert_parallel)."""
    n = knobs.num_redundant_experts or 0
    if n and not (expert_parallel and m.moe is not None):
        raise InvalidInputError("--num-redundant-experts needs --enable-expert-parallel on a "
                                "mixture-of-experts model", hint="add --enable-expert-parallel, "
                                "or drop it", code="out-of-range", knob="num_redundant_experts")
    sources["num_redundant_experts"] = "cli" if knobs.num_redundant_experts is not None \
        else "engine-default"
    return n


# --- checkenv --- environment variables some vLLM releases read in place of a flag
# (`kvplan check`). VLLM_ALL2ALL_BACKEND picks the MoE all-to-all backend:
# - 0.9.0-0.11.0: the only way (vllm/envs.py; read by the device communicator,
#   vllm/distributed/device_communicators/cuda_communicator.py; not in 0.8.5's envs.py), default
#   "naive" up to 0.10.2 and "allgather_reducescatter" from 0.11.0 (envs.py);
# - 0.11.1-0.13.0: --all2all-backend exists (vllm/engine/arg_utils.py, ParallelConfig.
#   all2all_backend default None) and wins: ParallelConfig.__post_init__ reads the variable only
#   when the flag is unset (vllm/config/parallel.py 0.11.1, 0.13.0);
# - 0.14.0-0.15.1: the flag defaults to allgather_reducescatter and __post_init__ overwrites it
#   whenever the variable is set (envs.is_set; vllm/config/parallel.py 0.14.0, 0.15.1): the
#   variable wins;
# - 0.16.0 and later: gone from vllm/envs.py and vllm/config/parallel.py (vLLM PR #33535).
A2A_ENV = "VLLM_ALL2ALL_BACKEND"
ENV_FLAGS = {A2A_ENV: EnvFlag(
    "--all2all-backend", reads=("0.9.0", "0.15.1"), env_wins=("0.14.0", "0.15.1"),
    flag_from="0.11.1",
    source="vllm/envs.py, vllm/config/parallel.py")}


class VllmEngine(Engine):
    name = "vllm"
    label = "vLLM"
    newest_version = NEWEST_MODELLED
    flags = knob_flags(CLI_FLAGS, (
        "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
        "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_dtype",
        "dtype", "quantization", "block_size", "kv_cache_memory_bytes"))
    # not a flag: which entry point runs the engine (vllm/usage/usage_lib.py UsageContext)
    settings = {"usage_context": "vllm serve (OPENAI_API_SERVER) or the LLM class (LLM_CLASS)"}
    # What vLLM does instead of knobs it lacks: host memory for KV blocks is --kv-offloading-size
    # (GiB; the flag this module plans, CLI_FLAGS)
    instead = dict.fromkeys(
        ("enable_hierarchical_cache", "hicache_size", "host_cache_size"),
        "--kv-offloading-size (GiB of host memory for KV blocks), which kvplan plans")

    def moe_layout(self, dep: Deployment) -> tuple[bool, int, bool]:
        return moe_layout(dep)

    def moe_token_split(self, dep: Deployment, m: ModelSpec | None = None) -> TokenSplit:
        return moe_token_split(dep, m)
    syntax = DeploySyntax(
        cli_flags=CLI_FLAGS, boolean_flags=BOOLEAN_FLAGS, executables=(("vllm", "serve"),),
        modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"),
        image_versions=(_IMAGE, _ROCM_IMAGE), pip_version=_PIP,
        image_entrypoints=(re.compile(r"vllm[-/_]openai"),), positional_model=True,
        known_flags=known_flags.VLLM, dotted_mm_limit=True,
        config_yaml=True,
        # --- flagrel --- EPLB's spellings by release; --eplb-config's dotted keys
        flag_releases=FLAG_RELEASES,
        dotted_json=frozenset({"--eplb-config", "--speculative-config"}),
        dotted_from=DOTTED_FROM,
        # --- schemas (#23) --- the vllm/vllm-openai image (tag v + release); Dynamo's
        # components/src/dynamo/vllm backend and its nvcr.io/nvidia/ai-dynamo/vllm-runtime
        # image; the stacks built on vLLM (base.STACKS); FlexibleArgumentParser takes
        # `--flag_name` (vllm/utils/argparse_utils.py, 0.11)
        image="vllm/vllm-openai:v{v}", dynamo_module="dynamo.vllm",
        dynamo_image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:{v}", rocm_image=rocm_image,
        stacks=frozenset({"kserve", "llm-d", "production-stack", "ray-serve-llm", "nim"}),
        underscore_flags=True, combine=combine_flags,
        versioned_env=ENV_FLAGS,  # --- checkenv ---
        # --- emitport --- `vllm serve` listens on all interfaces, port 8000
        # (vllm/entrypoints/openai/cli_args.py FrontendArgs: host None, port 8000, in every
        # snapshot read)
        port=8000,
        # --- emitshm --- docs/deployment/k8s.md (vllm-project/vllm@051f9b87): "vLLM needs to
        # access the host's shared memory for tensor parallel inference", an emptyDir of medium
        # Memory, sizeLimit "2Gi", mounted at /dev/shm
        shm_size="2Gi")
    calibration = CALIBRATION
    # --- whatif --- the kernels vLLM serves each checkpoint format with, a real checkpoint's
    # or a what-if's (Engine.checkpoint_kernels): the method it detects in the checkpoint
    # (vllm/model_executor/layers/quantization/__init__.py names) and its config's
    # get_min_capability, in vLLM's order of preference:
    # * nvfp4: modelopt.py ModelOptNvFp4Config.get_min_capability, read in the PyPI wheels:
    #   80 in v0.10.0-v0.13.0, 75 from v0.14.0 (v0.14.0-v0.19.1 and vllm-project/vllm@00155cde;
    #   vllm-project/vllm#29901 added Marlin kernels for Turing, sm75). Below 10.0 the weights run
    #   weight-only through FP4 Marlin (utils/marlin_utils_fp4.py is_fp4_marlin_supported:
    #   has_device_capability(80) to v0.13.0, (75) from v0.14.0). compressed-tensors NVFP4
    #   checkpoints (the same format here) follow its schemes' get_min_capability
    #   (compressed_tensors_w4a16_nvfp4.py 80 to v0.15.0, 75 from v0.16.0; the W4A4 scheme
    #   falls back to it without CUTLASS FP4): on a 7.5 GPU v0.14.0 and v0.15.x refuse them
    #   where kvplan plans them, a gap kvplan does not model (one format for both).
    # * modelopt-fp8 (a ModelOpt FP8 checkpoint: quant_algo FP8 in hf_quant_config.json or a
    #   config.json quantization_config of quant_method modelopt): detected as "modelopt"
    #   (ModelOptFp8Config.override_quantization_method; quant_method modelopt is set from
    #   producer.name: config/model.py _parse_quant_hf_config v0.11.0-v0.13.0,
    #   transformers_utils/model_arch_config_convertor.py v0.19.1), whose
    #   ModelOptFp8Config.get_min_capability is 89 in every release read (v0.10.0-v0.19.1,
    #   @00155cde). VllmConfig._get_quantization_config raises ("The quantization method
    #   modelopt is not supported for the current GPU. Minimum capability: 89") before any
    #   kernel is chosen: unlike an fp8 checkpoint (Fp8Config 80, FP8 Marlin below 8.9,
    #   knobs.capability_problems) there is no weight-only fallback on Ampere.
    # * mxfp4 (gpt-oss's own layout, quant_method "mxfp4"): mxfp4.py Mxfp4Config 80
    #   (vllm-project/vllm@007d5005; its MoE runs Marlin or Triton on 16-bit activations below
    #   10.0, FlashInfer's FP4 kernels on Blackwell).
    # * quark-mxfp4 (AMD Quark's, the mxfp4 what-if): quark/schemes/quark_w4a4_mxfp4.py,
    #   emulated (dequantized to 16-bit) where the platform has no MX support; 8.0 is kvplan's
    #   floor, the bf16 GEMM it falls back to.
    # * w8a8: compressed_tensors W8A8Int8 75.
    # * awq: awq_marlin.py AWQMarlinConfig 80, else awq.py AWQConfig 75 ("The AWQ kernel only
    #   supports Turing or newer GPUs"): AWQMarlinConfig.override_quantization_method keeps
    #   "awq" where check_marlin_supported fails (vllm-project/vllm@0322f292, @000796ac).
    checkpoint_kernels = {
        "nvfp4": (Kernel("modelopt_fp4", (7, 5), since="0.14.0"),
                  Kernel("modelopt_fp4", (8, 0), until="0.14.0")),
        "modelopt-fp8": (Kernel("modelopt", (8, 9)),),
        "mxfp4": (Kernel("mxfp4", (8, 0)),),
        "quark-mxfp4": (Kernel("quark", (8, 0)),),
        "w8a8": (Kernel("compressed-tensors", (7, 5)),),
        "awq": (Kernel("awq_marlin", (8, 0)), Kernel("awq", (7, 5))),
    }
    # vllm/v1/metrics/loggers.py (PrometheusStatLogger, v0.10+): gauges
    # vllm:num_requests_waiting and vllm:kv_cache_usage_perc (1 = 100 %)
    autoscale_metrics = {"queue": "vllm:num_requests_waiting",
                         "kv_usage": "vllm:kv_cache_usage_perc"}
    models_vision_encoder = True  # multimodal.py: the encoder's profiling run is modelled

    def image_problems(self, mm: PlanMultimodal, *, images: int, text_tokens: int,
                       request_tokens: int | None, max_model_len: int) -> list[Problem]:
        """vLLM refuses a prompt longer than max_model_len or with more images than
        --limit-mm-per-prompt allows (vllm/multimodal/processing.py validate_num_items): the
        deployment does not serve the workload planned, an error as for a text request longer
        than the context (workload-longer-than-context)."""
        problems: list[Problem] = []
        if request_tokens and max_model_len and request_tokens > max_model_len:
            problems.append(Problem(
                code="images-exceed-max-model-len", severity="error",
                message=f"{images} image(s) of {mm.max_tokens_per_item} tokens + {text_tokens} "
                f"text tokens = {request_tokens} tokens per request, above max_model_len "
                f"{max_model_len}: vLLM refuses such prompts"))
        if images > mm.limit_per_prompt:
            problems.append(Problem(
                code="images-above-mm-limit", severity="error",
                message=f"--images-per-request {images} is above --limit-mm-per-prompt image "
                f"{mm.limit_per_prompt}: vLLM refuses such prompts ('At most "
                f"{mm.limit_per_prompt} image(s) may be provided in one prompt')"))
        return problems

    def deploy_problems(self, knobs: Mapping[str, Any], version: str | None) -> list[Problem]:
        """--limit-mm-per-prompt in the key=value form, which 0.10.0 and later refuse, or in
        JSON, which the releases before 0.8.5 refuse (MM_JSON_FROM)."""
        raw = knobs.get("limit_mm_per_prompt")
        v = version or self.newest_version
        if not isinstance(raw, str):
            return []
        if raw.strip().startswith("{"):
            if parse_version(v) >= MM_JSON_FROM:
                return []
            try:
                fixed = mm_limit_value(parse_mm_limits(raw), v)
            except ValueError:
                return []  # not JSON of counts: the knob's own validation names it
            return [Problem(code="mm-limit-json-form", severity="error",
                            message=f"--limit-mm-per-prompt {raw}: vLLM {v} refuses the JSON "
                            f"form (its parser takes KEY=VALUE pairs only; JSON from 0.8.5, "
                            f"vllm/engine/arg_utils.py); write {fixed}")]
        if parse_version(v) < MM_LEGACY_REFUSED_FROM:
            return []
        try:
            fixed = json.dumps(parse_mm_limits(raw))
        except ValueError:
            return []  # not the key=value form either: the knob's own validation names it
        return [Problem(code="mm-limit-legacy-form", severity="error",
                        message=f"--limit-mm-per-prompt {raw}: vLLM {v} refuses the key=value "
                        f"form (JSON only from 0.10.0); write '{fixed}'")]

    # --- fp8cap --- Fp8Config.get_min_capability (vllm/model_executor/layers/quantization/
    # fp8.py), checked when the model's quantization config is built: 80 up to 0.13.0, 75 from
    # 0.14.0 (FP8 Marlin on Turing, vllm-project/vllm PR #29901; read in the PyPI wheels of
    # 0.13.0 and 0.14.0–0.19.1)
    fp8_refusal = VLLM_FP8_REFUSAL

    def fp8_least(self, version: str) -> tuple[int, int]:
        return (7, 5) if parse_version(version) >= FP8_TURING_FROM else FP8_LEAST

    checkpoint_kv_override = (
        "vLLM was reported to refuse an explicit --kv-cache-dtype bfloat16 on such a checkpoint "
        "(vllm-project/vllm#34752, 2026-02, open; its fix, PR #34762, closed unmerged)")

    def checkpoint_kv_dtype(self, m: ModelSpec, version: str) -> str | None:
        """vLLM ≥ 0.13 resolves `--kv-cache-dtype auto` from a ModelOpt checkpoint's
        kv_cache_quant_algo / kv_cache_scheme: FP8 → fp8_e4m3, the only mapping
        (vllm/utils/torch_utils.py resolve_kv_cache_dtype_string and
        MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP, called by EngineArgs.create_engine_config;
        PR #29980, merged 2025-12, first in 0.13.0).
        Earlier releases load the checkpoint's k/v scales but allocate the model dtype."""
        q = m.quantization
        if q is None or q.kv_cache_quant_algo != "FP8" or parse_version(version) < (0, 13, 0):
            return None
        return "fp8_e4m3"

    def era(self, version: str) -> tuple[str, list[Problem]]:
        era, problems = select_era(version)
        return era.name, problems

    def eras(self) -> list[tuple[str, str]]:
        return [(e.name, ".".join(map(str, e.first))) for e in ERAS]

    def resolve(self, m: ModelSpec, gpu: GpuSpec, layout: Layout, knobs: Knobs,
                version: str) -> Deployment:
        era = select_era(version)[0]
        sources: dict[str, Source] = dict(layout.sources)

        def pick(key: str, default: Any, default_source: Source) -> Any:
            value = getattr(knobs, key)
            sources[key] = "cli" if value is not None else default_source
            return default if value is None else value

        derived_len, _ = derived_max_model_len(m, era)
        max_len = pick("max_model_len", derived_len, "model-config")
        if max_len > derived_len:
            raise InvalidInputError(
                f"--max-model-len {max_len} exceeds the model's maximum of {derived_len} tokens; "
                "vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
                hint=f"use --max-model-len {derived_len} or less",
                code="max-model-len-above-model-maximum", knob="max_model_len")
        usage = knobs.usage_context or "serve"
        tokens_default, seqs_default, _ = batch_defaults(layout.gpu_total_bytes, gpu.device_name,
                                                         era, usage)
        seqs = pick("max_num_seqs", seqs_default, "engine-default")
        tokens = pick("max_num_batched_tokens", tokens_default, "engine-default")
        if sources["max_num_batched_tokens"] == "engine-default" and era.v0 and max_len <= 32768:
            tokens = max(max_len, 2048)  # V0 without chunked prefill: a whole prompt per step
        elif sources["max_num_batched_tokens"] == "engine-default":
            tokens = min(tokens, seqs * max_len)  # arg_utils: never more than seqs × length
        if sources["max_num_seqs"] == "engine-default":
            seqs = min(seqs, tokens)
        elif seqs > tokens:  # SchedulerConfig._verify_args (vllm/config/scheduler.py; every era)
            given = "as given" if sources["max_num_batched_tokens"] == "cli" else \
                "vLLM's default here"
            raise InvalidInputError(
                f"vLLM refuses --max-num-seqs {seqs} above max_num_batched_tokens {tokens} "
                f"({given}): its scheduler config requires max_num_batched_tokens ≥ "
                "max_num_seqs, so the server does not start",
                hint=f"pass --max-num-batched-tokens {seqs} or more, or --max-num-seqs {tokens} "
                "or less", code="max-num-seqs-above-batched-tokens", knob="max_num_seqs")
        util = pick("gpu_memory_utilization", era.default_utilization, "engine-default")
        block = pick("block_size", default_block_size(m, gpu, version), "engine-default")
        sizes = BLOCK_SIZES_V0 if era.v0 else BLOCK_SIZES
        if block not in sizes:
            raise InvalidInputError(f"--block-size {block} is not one vLLM {version} accepts",
                                    hint="use one of " + ", ".join(map(str, sizes)),
                                    code="block-size-invalid", knob="block_size")
        prefix_caching = bool(pick("enable_prefix_caching", era.prefix_caching, "engine-default"))
        expert_parallel = bool(pick("enable_expert_parallel", False, "engine-default"))
        hybrid = not knobs.disable_hybrid_kv_cache_manager and not era.v0
        if knobs.disable_hybrid_kv_cache_manager is not None:
            sources["hybrid_kv_cache_manager"] = "cli"
        else:
            if m.attention_chunk_size:
                hybrid = False  # auto-disabled for chunked local attention (vllm/config/vllm.py)
            sources["hybrid_kv_cache_manager"] = "engine-default"
        if not hybrid and m.linear_attention is not None:
            raise InvalidInputError("this model has linear-attention (Mamba-style) layers, which "
                                    "need the hybrid KV cache manager",
                                    hint="drop --disable-hybrid-kv-cache-manager")
        if knobs.kv_cache_memory_bytes is not None:
            sources["kv_cache_memory_bytes"] = "cli"
        eager = bool(pick("enforce_eager", False, "engine-default"))
        spec = resolve_speculative(m, knobs, era, sources)
        lora = resolve_lora(knobs, sources)
        offload = resolve_offload(knobs, era, sources)
        if knobs.limit_mm_per_prompt is not None:
            sources["limit_mm_per_prompt"] = "cli"
        q = layout.quant
        return Deployment(
            engine=self.name, engine_version=version, era=era.name,
            tensor_parallel_size=layout.tensor_parallel_size,
            pipeline_parallel_size=layout.pipeline_parallel_size,
            data_parallel_size=layout.data_parallel_size, dtype=layout.dtype,
            kv_cache_dtype=layout.kv_cache_dtype, quantization=q.method if q else None, quant=q,
            max_model_len=max_len, max_num_seqs=seqs, max_num_batched_tokens=tokens,
            gpu_memory_utilization=util, block_size=block, enforce_eager=eager,
            kv_cache_memory_bytes=knobs.kv_cache_memory_bytes,
            gpu_total_bytes=layout.gpu_total_bytes,
            other_processes_bytes=layout.other_processes_bytes,
            enable_prefix_caching=prefix_caching,
            hybrid_kv_cache_manager=hybrid, enable_expert_parallel=expert_parallel,
            num_redundant_experts=_redundant(m, knobs, expert_parallel, sources),
            moe_a2a_backend=_a2a_backend(knobs, sources),
            speculative_config=spec, **lora, sources=sources,
            options=VllmOptions(usage_context=usage, **offload,
                                limit_mm_per_prompt=knobs.limit_mm_per_prompt))

    def memory(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment) -> MemoryResult:
        era = era_of(dep)
        return plan_memory(m, gpu, dep, dep.quant, era, derived_max_model_len(m, era)[0])

    def fraction_needed(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment, res: MemoryResult,
                        blocks: int) -> float | None:
        """(non-KV + blocks × bytes_per_block) / total on the neediest stage, in hundredths
        rounded up (may exceed 1.0: then no utilization holds them)."""
        need = 0
        for st in res.stages:
            non_kv = st.weights_bytes + st.activation_bytes + st.non_torch_bytes
            if res.memory.cudagraph_in_budget:
                non_kv += st.cudagraph_bytes
            need = max(need, non_kv + blocks * st.bytes_per_block)
        return math.ceil(need / dep.gpu_total_bytes * 100) / 100

    def fraction_ceiling(self, dep: Deployment, res: MemoryResult) -> float:
        """Free memory after the CUDA context must cover the budget, and (in eras that do not
        budget CUDA graphs) the graphs must fit outside it."""
        outside = STARTUP_OVERHEAD_BYTES + dep.other_processes_bytes
        if not era_of(dep).cudagraph_in_budget:
            outside += max(st.cudagraph_bytes for st in res.stages)
        return math.floor((dep.gpu_total_bytes - outside) / dep.gpu_total_bytes * 100) / 100

    def layout_problems(self, m: ModelSpec) -> list[Problem]:
        return []  # vLLM's layouts, recurrent state pools included, are modelled (kv.py)

    def max_seqs_cap(self, gpu: GpuSpec, dep: Deployment) -> int | None:
        return batch_defaults(dep.gpu_total_bytes, gpu.device_name, era_of(dep),
                              opts(dep).usage_context)[1]

    def node_launch(self, command: str, nodes: int, gpus_per_node: int, version: str
                    ) -> list[NodeLaunch] | None:
        """`vllm serve` on every node (--nnodes/--node-rank, from 0.11.1), else over Ray."""
        return multinode.vllm(command, nodes, version)

    def command(self, ref: str, dep: Deployment, rec: Recommendations, workload: Workload,
                revision: str | None) -> str:
        """`vllm serve` with the user's explicit flags and the recommended values. max_num_seqs
        is only set from a workload or the user's flag: the no-preemption bound alone would
        throttle short requests."""
        exe, sub = self.syntax.executables[0]  # `vllm serve` (a subclass's own entrypoint)
        args = [exe, *([sub] if sub else []), ref]
        if revision:
            args += ["--revision", revision]
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            if getattr(dep, key) != 1:
                args += [self.flags[key], str(getattr(dep, key))]
        if rec.max_model_len.value:
            args += [self.flags["max_model_len"], str(rec.max_model_len.value)]
        has_workload = workload.sizes_batch()
        if rec.max_num_seqs.value and (has_workload or dep.user_set("max_num_seqs")):
            args += [self.flags["max_num_seqs"], str(rec.max_num_seqs.value)]
        if dep.kv_cache_memory_bytes is not None:
            args += [self.flags["kv_cache_memory_bytes"], str(dep.kv_cache_memory_bytes)]
        elif rec.gpu_memory_utilization.value:
            args += [self.flags["gpu_memory_utilization"], f"{rec.gpu_memory_utilization.value:g}"]
        if (batched := batched_tokens_flag_value(rec, dep)) is not None:
            args += [self.flags["max_num_batched_tokens"], str(batched)]
        if dep.user_set("dtype"):
            args += [self.flags["dtype"], dep.dtype]
        if dep.user_set("kv_cache_dtype") and dep.kv_cache_dtype.startswith("fp8"):
            args += [self.flags["kv_cache_dtype"], dep.kv_cache_dtype]
        if dep.user_set("quantization") and dep.quantization:
            args += [self.flags["quantization"], dep.quantization]
        if dep.user_set("block_size"):
            args += [self.flags["block_size"], str(dep.block_size)]
        if dep.enforce_eager:
            args.append("--enforce-eager")
        if dep.enable_expert_parallel:
            args.append("--enable-expert-parallel")
        args += eplb_flags(dep)
        env: list[str] = []  # before 0.11.1 the backend is only an environment variable
        if dep.moe_a2a_backend:
            rule = ENV_FLAGS[A2A_ENV]
            if rule.has_flag(dep.engine_version or NEWEST_MODELLED):
                args += [rule.flag, dep.moe_a2a_backend]
            else:
                env = [f"{A2A_ENV}={dep.moe_a2a_backend}"]
        if dep.user_set("enable_prefix_caching"):  # as the user asked, where not the default
            args += prefix_caching_flag(dep)
        if dep.user_set("hybrid_kv_cache_manager") and not dep.hybrid_kv_cache_manager:
            args.append("--disable-hybrid-kv-cache-manager")
        args += feature_flags(dep)
        return shlex.join(env + args)


ENGINE = VllmEngine()


# speculative_config keys other engines read and vLLM's JSON does not take: SGLang's tree shape,
# TensorRT-LLM's eagle3_one_model
NOT_VLLM_SPEC_KEYS = frozenset({"eagle_topk", "num_draft_tokens", "eagle3_one_model"})


def feature_flags(dep: Deployment) -> list[str]:
    """The serve-line flags of the optional features, as the user gave them."""
    args: list[str] = []
    sc = dep.speculative_config
    if sc is not None:
        given = sc.given or {k: v for k, v in sc.model_dump().items() if v is not None}
        # SGLang's and TensorRT-LLM's keys are not vLLM's (vLLM would refuse them in its JSON)
        given = {k: v for k, v in given.items() if k not in NOT_VLLM_SPEC_KEYS}
        args += ["--speculative-config", json.dumps(given, separators=(",", ":"))]
    if dep.enable_lora:
        args.append("--enable-lora")
        for key in ("max_loras", "max_lora_rank", "max_cpu_loras"):
            if dep.user_set(key):
                args += ["--" + key.replace("_", "-"), str(getattr(dep, key))]
    o = opts(dep)
    if o.limit_mm_per_prompt is not None:  # JSON from 0.8.5 (the only form ≥ 0.10), else k=v
        args += ["--limit-mm-per-prompt", mm_limit_value(o.limit_mm_per_prompt,
                                                         dep.engine_version)]
    return args + option_flags(dep, CLI_FLAGS)  # KV offloading
