"""SGLang's start-up memory accounting (0.5.23; reference/ENGINE_MEMORY.md §2). Pure functions.

The KV pool is what `mem_fraction_static` of the free memory measured before the weights load
leaves after the weights: rest = f × free_before_load − weights
(sglang/srt/mem_cache/kv_cache_configurator.py). Activations and CUDA graphs live in the
(1 − f) remainder, which SGLang does not measure; kvplan estimates them and warns when they
would not fit there.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import Field

from ..errors import InvalidInputError
from ..knobs import Knobs, Layout
from ..model import forward
from ..model.kv import kv_bytes_per_token_per_layer, layer_specs
from ..model.weights import heaviest_stage
from ..specs import (
    Deployment,
    EngineOptions,
    GpuSpec,
    ModelSpec,
    NodeLaunch,
    PlanLora,
    PlanOffload,
    PlanSpeculative,
    Problem,
    Recommendations,
    Source,
    SpeculativeConfig,
    StageBreakdown,
    VisionSpec,
    Workload,
)
from ..units import DTYPE_BYTES, GiB, MiB
from ..versions import parse_version
from . import flags as known_flags
from . import interconnect, multinode
from . import sglang_mixed_chunk as MC
from . import sglang_parallel as SP
from .base import (
    Calibration,
    Coefficients,
    DenseMlpMode,
    DeploySyntax,
    Engine,
    FlagReleases,
    GatherAllReduce,
    Kernel,
    MemoryResult,
    TokenSplit,
    ValueFrom,
    batched_tokens_flag_value,
    engine_options,
    knob_flags,
    memory_notes,
    memory_result,
    option_flags,
)
from .sglang_parallel import PARALLEL_CLI_FLAGS

NEWEST_MODELLED = "0.5.23"
# DP attention's gather (dp_attention.py DpPaddingMode): MAX_LEN (all-gather) first in
# 0.4.9.post4 (0.4.9 - 0.4.9.post3 have none; read at 0.4.9, .post1, .post3, .post4, .post5,
# .post6, 0.4.10); extend batches forced to SUM_LEN (all-reduce) from 0.5.3 (read at 0.5.3;
# 0.5.2 picks by cost for every batch)
DP_MAX_LEN_FROM = ((0, 4, 9), 4)  # (release, .postN)
DP_EXTEND_SUM_LEN_FROM = (0, 5, 3)
SWA_FULL_TOKENS_RATIO = 0.8  # --swa-full-tokens-ratio default (server_args.py)
# Memory in use before the weights load at TP1 (CUDA context, cuBLAS): 0.59 GiB on H200 in a
# public SGLang log ("Load weight begin. avail mem=…": PR 4826 TP1 139.21 GB free of 139.80).
# An estimate; the TP1 rows of benchmarks/data/sglang_logs.csv range 0.3–0.9 GiB (the
# benchmark reports its leave-one-out error). TP > 1 adds NCCL and custom all-reduce buffers by
# interconnect (engines/interconnect.py): SGLang connects them before loading, in
# `get_available_gpu_memory(distributed=True)`'s all-reduce and PyNccl's warm-up all-reduce.
CONTEXT_BYTES_TP1 = int(0.59 * GiB)
# A KV pool shorter than the context length does not stop SGLang: the worker caps each request
# at max_req_len = min(context_len − 1, pool − 1) and the prompt at max_req_input_len =
# max_req_len − 5 (python/sglang/srt/managers/tp_worker.py, 0.5.23 wheel: get_worker_info logs
# "KV pool holds %d tokens, fewer than --context-length %d … Not an error"; the same min() in
# the 0.4.x tp_worker.py). That holds for a default and a given --context-length alike (it is
# model_config.context_len either way). A longer prompt is aborted ("Input length … exceeds the
# maximum allowed length", managers/utils.py validate_input_length) or cut with
# --allow-auto-truncate. Only a pool too small for any prompt stops it: 0.4.x asserts
# max_req_input_len > 0 ("Memory pool size is too small"), i.e. at least 7 tokens.
MIN_POOL_TOKENS = 7


def context_bytes(tp: int, gpu: GpuSpec | None = None, tp1_bytes: int | None = None) -> int:
    """Memory in use before the weights: the TP1 context + what TP adds on this interconnect
    (a PCIe part when `gpu` is None)."""
    base = CONTEXT_BYTES_TP1 if tp1_bytes is None else tp1_bytes
    return base + interconnect.tp_bytes(gpu, tp, "sglang")


def gpu_mem_mib(gpu: GpuSpec, total_bytes: int) -> int:
    """nvidia-smi memory.total in MiB (what SGLang's defaults read), else the CUDA total."""
    return gpu.smi_total_mib or total_bytes // MiB


def chunked_prefill_default(mem_mib: int) -> int:
    """--chunked-prefill-size by GPU memory (sglang/srt/arg_groups/memory_hook.py)."""
    gib = mem_mib / 1024
    if gib < 20:
        return 2048
    if gib < 60:
        return 4096
    if gib < 160:
        return 8192
    return 16384


def decode_graph_max_bs(mem_mib: int, tp: int) -> int:
    """--cuda-graph-max-bs by GPU memory and TP (same function)."""
    gib = mem_mib / 1024
    if gib < 20:
        return 8
    if gib < 35:
        return 48 if tp < 4 else 160
    if gib < 60:
        return 32 if tp < 4 else 160
    if gib < 160:
        return 256 if tp < 4 else 512
    return 512


def prefill_graph_sizes(max_tokens: int) -> int:
    """Prefill CUDA-graph token buckets: 4…32 step 4, 48…256 step 16, 288…512 step 32,
    576…1024 step 64, 1280…4096 step 256, 4608… step 512 (cuda_graph_hook.py)."""
    steps = [(4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256),
             (4608, max_tokens, 512)]
    return sum(len(range(a, min(b, max_tokens) + 1, s)) for a, b, s in steps if a <= max_tokens)


def default_mem_fraction(mem_mib: int, tp: int, pp: int, chunked: int, decode_bs: int,
                         mla: bool, graph_extra: float = 0.0, a2a_extra: float = 0.0) -> float:
    """mem_fraction_static = round((gpu_mem − reserved) / gpu_mem, 3) with reserved (MiB) =
    512 + 1.5 × max(chunked, 2048) + tp·pp/8 × 1024 + 2 × decode_bs + (1536 for MLA, else 8 ×
    prefill graph sizes) + `graph_extra` (DP attention), at least 10240 MiB on GPUs above
    60 GiB, then + `a2a_extra` (DeepEP; sglang_parallel.graph_reserve_extra_mib). H100 80GB
    TP1 → 0.830."""
    reserved = 512 + 1.5 * max(chunked, 2048) + tp * pp / 8 * 1024 + 2 * decode_bs
    reserved += (1536 if mla else 8 * prefill_graph_sizes(chunked)) + graph_extra
    if mem_mib > 60 * 1024:
        reserved = max(reserved, 10240)
    reserved += a2a_extra
    return round((mem_mib - reserved) / mem_mib, 3)


# Before 0.5.3 (PR sgl-project/sglang#10975, 2025-09, replaced them with the GPU-size rule):
# mem_fraction_static by TP size, ×0.95 for multimodal models; chunked prefill 2048 and CUDA
# graphs up to batch 8 below 25,000 MiB, else 8192 and 160 (older server_args.py; ENGINE_MEMORY
# §2 "Older SGLang defaults"). Public 0.4.x logs confirm 0.88 at TP1 and 0.85 at TP4
# (benchmarks/data/sglang_logs.csv). No separate sliding-window pool in those releases.
LEGACY_BEFORE = (0, 5, 3)


def legacy_mem_fraction(tp: int, multimodal: bool) -> float:
    f = 0.79 if tp >= 16 else 0.81 if tp >= 8 else 0.85 if tp >= 4 else 0.87 if tp >= 2 else 0.88
    return round(f * 0.95, 3) if multimodal else f


def legacy_chunked_prefill(mem_mib: int) -> int:
    return 2048 if mem_mib < 25000 else 8192


# 0.4.10 – 0.5.2: memory reserved for activations and CUDA graphs by GPU tier
# (python/sglang/srt/server_args.py `__post_init__`, read at 0.5.0rc0 in a fork snapshot,
# ikingye/sglang@3451f77e; the RTX 5080 log of 2025-08 in benchmarks/data/sglang_logs.csv
# matches it). MiB of nvidia-smi memory → reserved MiB, with P = tp × pp.
TIER_FROM = (0, 4, 10)


def tier_mem_fraction(mem_mib: int, tp: int, pp: int, vision: VisionSpec | None) -> float:
    """round((mem − reserved) / mem, 3), reserved = (2.8 + P/10) GiB below 35 GiB, (9.5 + P/2)
    below 90 GiB, (12 + P/2) below 160 GiB, else 32 GiB; then × the VLM factor 0.95 ×
    clamp(1 − 0.1 × (vit_layers × vit_hidden² / (24 × 1024²) − 1), 0.8, 1.05) (not rounded)."""
    p = tp * pp
    gib = 1024
    if mem_mib < 35 * gib:
        reserved = (2.8 + p / 10) * gib
    elif mem_mib < 90 * gib:
        reserved = (9.5 + p / 2) * gib
    elif mem_mib < 160 * gib:
        reserved = (12 + p / 2) * gib
    else:
        reserved = 32 * gib
    f = round((mem_mib - reserved) / mem_mib, 3)
    if vision is not None:
        ratio = vision.num_layers * vision.hidden_size ** 2 / (24 * 1024 ** 2)
        f *= 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return f


def tier_chunked_prefill(mem_mib: int) -> int:
    return 2048 if mem_mib < 35 * 1024 else 8192 if mem_mib < 160 * 1024 else 16384


def tier_decode_graph_bs(mem_mib: int, tp: int) -> int:
    """cuda_graph_max_bs: 8 (TP < 4) or 80 below 35 GiB, else the model runner's 160."""
    return (8 if tp < 4 else 80) if mem_mib < 35 * 1024 else 160


@dataclass(frozen=True)
class Defaults:
    era: str
    chunked_prefill: int
    decode_graph_bs: int
    mem_fraction: float
    swa_pool: bool


def defaults(v: tuple[int, int, int], m: ModelSpec, mem_mib: int, tp: int, pp: int,
             chunked: int | None = None, graph_bs: int | None = None,
             parallel: Deployment | None = None) -> Defaults:
    """The release's defaults for one GPU (nvidia-smi MiB): before 0.4.10 the TP table, 0.4.10 –
    0.5.2 the GPU tiers, from 0.5.3 the reserved-memory formula (`default_mem_fraction`), which
    reserves 2 MiB per decode graph batch size: a --cuda-graph-max-bs the user gives
    (`graph_bs`) replaces the GPU's default there (sglang/srt/arg_groups/memory_hook.py
    handle_gpu_memory_settings keeps a given max_bs; reserve_for_graph_mb adds max_bs × 2)."""
    if v < TIER_FROM:
        c = chunked or legacy_chunked_prefill(mem_mib)
        return Defaults("sglang 0.4.x accounting", c,
                        graph_bs or (8 if mem_mib < 25000 else 160),
                        legacy_mem_fraction(tp, m.vision is not None), False)
    if v < LEGACY_BEFORE:
        return Defaults("sglang 0.4.10–0.5.2 accounting", chunked or tier_chunked_prefill(mem_mib),
                        graph_bs or tier_decode_graph_bs(mem_mib, tp),
                        tier_mem_fraction(mem_mib, tp, pp, m.vision),
                        False)
    c = chunked or chunked_prefill_default(mem_mib)
    bs = graph_bs or decode_graph_max_bs(mem_mib, tp)
    graph_extra = a2a_extra = 0.0
    if parallel is not None:  # DP attention / DeepEP (sglang_parallel): `tp` is --tp-size
        a2a_extra = 2048.0 if parallel.moe_a2a_backend == "deepep" else 0.0
        graph_extra = SP.graph_reserve_extra_mib(parallel, bs) - a2a_extra
    f = default_mem_fraction(mem_mib, tp, pp, c, bs, mla_view(m).mla is not None, graph_extra,
                             a2a_extra)
    return Defaults(f"sglang {NEWEST_MODELLED} accounting", c, bs, f, True)


def context_length(m: ModelSpec) -> int:
    """SGLang's default context length: the first present of max_sequence_length, seq_length,
    max_seq_len, model_max_length, max_position_embeddings, times the rope factor unless the
    scaling names original_max_position_embeddings or is llama3
    (sglang/srt/utils/hf_transformers/common.py). Unlike vLLM the first key wins."""
    keys = m.max_len_keys
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                "max_position_embeddings"):
        if key in keys:
            length = keys[key]
            break
    else:
        return 2048
    if (m.rope_factor and m.rope_type not in (None, "llama3") and not m.rope_original_max_position
            and m.model_type != "gemma3"):  # Gemma 3: scaling of the global layers only (as vLLM)
        length = int(length * m.rope_factor)
    return length


def mla_view(m: ModelSpec) -> ModelSpec:
    """The model as SGLang's cache sees it: SGLang treats MiniCPM3ForCausalLM as MLA
    (python/sglang/srt/configs/model_config.py: attention_arch MLA, kv_lora_rank,
    qk_rope_head_dim) and pools the latent, where vLLM caches per-head K and V."""
    if m.mla is None and m.mla_projections is not None:
        return m.model_copy(update={"mla": m.mla_projections})
    return m


def cell_bytes(m: ModelSpec, tp: int, kv_dtype: str, swa_pool: bool = True,
               draft_layers: int = 0) -> tuple[int, int, int]:
    """(cell bytes per token, full-attention layers, SWA layers): MHA/GQA
    kv_heads_per_gpu × 2 × head_dim × layers × dt; MLA (kv_lora + rope) × layers × dt; hybrid
    SWA models count the sliding layers at swa_full_tokens_ratio (model_config.py); without
    the SWA pool (before 0.5.3) every layer counts fully. At 0.5.0rc0 the only hybrid pool is
    opt-in (`--hybrid-kvcache-ratio`, Llama 4 only: configs/model_config.py is_hybrid_model,
    read in the ikingye/sglang@3451f77e snapshot), so by default every layer is full there.

    `draft_layers` (EAGLE / EAGLE-3 / NEXTN / STANDALONE drafts, 0.5.23): the target's cell
    also pays for the draft's pool, which holds as many tokens, priced like a target layer:
    int(cell × (1 + d / n)), or per_layer × (full + d + ratio × swa) for hybrid SWA models
    (model_executor/pool_configurator.py DefaultPoolConfigurator / HybridSWAPoolConfigurator)."""
    m = mla_view(m)
    per_layer = kv_bytes_per_token_per_layer(m, tp=tp, kv_dtype=kv_dtype)
    specs = layer_specs(m, range(m.num_layers), tp=tp, kv_dtype=kv_dtype, state_dtype=kv_dtype,
                        hybrid_manager=swa_pool)
    swa = sum(1 for s in specs if s.kind == "sliding")
    full = sum(1 for s in specs if s.kind in ("full", "mla"))
    if swa:
        return int(per_layer * (full + draft_layers + SWA_FULL_TOKENS_RATIO * swa)), full, swa
    cell = per_layer * full
    if draft_layers and full:
        cell = int(cell * (1 + draft_layers / full))
    return cell, full, swa


def max_running_requests(tokens: int, ctx: int) -> int:
    """min(clamp(int(tokens / context_len × 512), 2048, 4096), tokens // 2) (scheduler.py)."""
    return max(1, min(max(2048, min(4096, int(tokens / ctx * 512))), tokens // 2))


@dataclass(frozen=True)
class SglangResult:
    free_before_bytes: int
    mem_fraction: float
    rest_bytes: int  # the KV pool
    cell_bytes: int
    tokens: int  # max_total_num_tokens
    context_len: int
    max_running_requests: int
    chunked_prefill_size: int
    problems: list[Problem]

    @property
    def fits(self) -> bool:
        """SGLang starts: a KV pool exists and holds a prompt (MIN_POOL_TOKENS); a pool shorter
        than the context length only caps the requests (a warning, not a refusal)."""
        return self.rest_bytes > 0 and self.tokens >= MIN_POOL_TOKENS


def plan_memory(m: ModelSpec, *, total_bytes: int, tp: int, weights_bytes: int, kv_dtype: str,
                mem_fraction: float, ctx: int, chunked: int, runtime_bytes: int,
                max_total_tokens: int | None = None, swa_pool: bool = True,
                gpu: GpuSpec | None = None, draft_layers: int = 0,
                group: int | None = None, ctx_given: bool = False) -> SglangResult:
    """rest = f × free_before_load − weights; tokens = rest // cell (page size 1), capped by
    --max-total-tokens; the (1 − f) remainder must hold `runtime_bytes` (activations, graphs).
    `tp` sizes the cell (one attention group); `group` (SGLang's --tp-size, T × D under DP
    attention; default `tp`) the communicators connected before loading. `ctx_given`: the user
    passed --context-length (the warning for a pool shorter than it words it so)."""
    free_before = total_bytes - context_bytes(group or tp, gpu)
    valid = mem_fraction > 0 and free_before > 0  # else SGLang has no budget: it does not start
    budget = math.floor(mem_fraction * free_before) if valid else 0
    rest = budget - weights_bytes
    cell, _, _ = cell_bytes(m, tp, kv_dtype, swa_pool, draft_layers)
    tokens = max(0, rest) // cell
    if max_total_tokens:
        tokens = min(tokens, max_total_tokens)
    problems = []
    if rest <= 0 and not valid:
        problems.append(Problem(
            code="no-kv-memory", severity="error",
            message=f"SGLang does not start: on {total_bytes / GiB:.2f} GiB nothing is left for "
            f"the weights ({weights_bytes / GiB:.2f} GiB) or the KV cache once it reserves its "
            "own memory"))
    elif rest <= 0:
        problems.append(Problem(
            code="no-kv-memory", severity="error",
            message=f"the weights ({weights_bytes / GiB:.2f} GiB) exceed mem_fraction_static "
            f"{mem_fraction} × {free_before / GiB:.2f} GiB free: SGLang stops with 'Loaded weights "
            "leave no GPU memory for the KV cache'"))
    elif tokens < MIN_POOL_TOKENS:
        problems.append(Problem(
            code="kv-pool-too-small", severity="error",
            message=f"the KV pool holds {tokens:,} tokens: SGLang stops with 'Memory pool size is "
            f"too small' (it needs {MIN_POOL_TOKENS} to admit any prompt)"))
    elif tokens < ctx:
        problems.append(context_above_pool(tokens, ctx, ctx_given))
    reserve = free_before - budget
    if valid and runtime_bytes > reserve:
        problems.append(Problem(
            code="runtime-headroom", severity="warning",
            message=f"the (1 − mem_fraction_static) reserve is {reserve / GiB:.2f} GiB but "
            f"activations and CUDA graphs need ≈{runtime_bytes / GiB:.2f} GiB: expect an "
            "out-of-memory error under load; lower --mem-fraction-static or "
            "--chunked-prefill-size"))
    return SglangResult(free_before, mem_fraction, rest, cell, tokens, ctx,
                        max_running_requests(tokens, ctx) if tokens else 0, chunked, problems)


def context_above_pool(tokens: int, ctx: int, ctx_given: bool) -> Problem:
    """The warning for a KV pool shorter than the context length (MIN_POOL_TOKENS's note):
    SGLang starts and caps requests at pool − 1 tokens; --context-length {pool} states it."""
    cap = (f"SGLang starts anyway and caps each request at {tokens - 1:,} tokens (its prompt "
           f"below {tokens - 6:,}): a longer prompt is refused, or cut with --allow-auto-truncate")
    if ctx_given:
        return Problem(
            code="context-length-above-kv-pool", severity="warning",
            message=f"--context-length {ctx:,} is longer than the KV pool's {tokens:,} tokens; "
            f"{cap}. Pass --context-length {tokens} (or less) to state the real limit, or see "
            "next-steps to hold a full-length request")
    return Problem(
        code="context-length-above-kv-pool", severity="warning",
        message=f"the KV pool holds {tokens:,} tokens, fewer than the model's {ctx:,}-token "
        f"context length; {cap}. Pass --context-length {tokens} to make that limit explicit, "
        "or see next-steps to hold a full-length request")


# ------------------------------------------------------------ speculative decoding
# docs/features.md. SGLang runs the draft in its own ModelRunner (is_draft_worker) that shares
# the target's req_to_token pool and token allocator, and owns a KV pool of its own with the
# same max_total_num_tokens (speculative/eagle_worker.py; model_executor/pool_configurator.py
# MemoryPoolConfig "shared between target and draft workers"). Read in sgl-project/sglang
# main-branch sources (pool_configurator.py @003fca80, arg_groups/speculative_hook.py
# @004c82e0, eagle_worker.py @00559eac); the draft-layer scaling of the cell is applied to
# kvplan's newest era (0.5.3+), the boundary of that change was not pinned.

# --speculative-algorithm ↔ kvplan's generic method (NEXTN is SGLang's alias of EAGLE run with
# the target's own MTP layers as the draft: speculative_hook.py
# _resolve_speculative_algorithm_alias)
SPEC_ALGORITHMS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp",
                   "STANDALONE": "draft_model", "NGRAM": "ngram"}
SPEC_FLAGS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE",
              "ngram": "NGRAM"}
# max_running_requests is reset to 48 for speculative decoding unless given: for the whole
# server, before the DP-attention split (spec_max_running_per_rank). Read in the PyPI wheels'
# python/sglang/srt/server_args.py (`if self.max_running_requests is None:
# self.max_running_requests = 48`, EAGLE / EAGLE3 and NEXTN as EAGLE; STANDALONE from 0.5.2,
# NGRAM from 0.5.3) in 0.4.4.post4, 0.4.5, 0.4.6, 0.4.8, 0.4.10, 0.5.1, 0.5.2, 0.5.3, 0.5.6,
# 0.5.9, and arg_groups/speculative_hook.py _handle_eagle_family / _handle_ngram ("Max running
# requests is reset to 48 for speculative decoding") in 0.5.14, 0.5.20, 0.5.23. Earlier: 0.4.3
# resets nothing, 0.4.3.post4 and 0.4.4 reset it to 32 (EAGLE only); kvplan's release numbers
# drop the .postN that separates them, so 48 is applied from SPEC_HEADROOM_BOTH_FROM on.
SPEC_MAX_RUNNING_REQUESTS = 48
# NGRAM's --speculative-num-draft-tokens default (speculative_hook.py _handle_ngram)
NGRAM_DRAFT_TOKENS = 12
# Targets whose draft path defaults to the model itself (their MTP layers), with the automatic
# (num_steps, topk, num_draft_tokens) = (3, 1, 4); Llama targets get (5, 4, 8), the rest (3, 1, 4)
# (speculative_hook.py _handle_eagle_family, _auto_choose_speculative_params).
MTP_ARCHITECTURES = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
    "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM",
    "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM"})
# Before this release the draft is not priced into the target's cell: the target pool is sized
# alone and the draft's pool (with a headroom) comes out of the (1 − f) reserve
# (model_runner.py init_memory_pool `draft_runner_cache_size`, read in 0.4.x copies and
# reproduced by the 2025-01 SGLang docs log in reference/sglang_logs_more.csv).
# UNVERIFIED boundary: the 2025-01-28 log still has the old rule
SPEC_HEADROOM_BOTH_FROM = (0, 4, 3)


def spec_max_running_per_rank(dep: Deployment) -> int:
    """The requests one rank runs when SGLang resets --max-running-requests to 48: the whole
    server's 48, split over the attention-DP ranks under DP attention, max(1, 48 // dp_size)
    (python/sglang/srt/managers/tp_worker.py `max_running_requests // (dp_size if
    enable_dp_attention else 1)`, 0.4.3 - 0.5.6; model_executor/model_runner.py
    `// self.dp_size`, 0.5.9; mem_cache/kv_cache_configurator.py resolve_max_num_reqs
    `max(1, max_num_reqs // self.attn_dp_size)`, 0.5.23). Before 0.5.23's max(1, …) a
    dp_size above 48 gives 0 and start-up stops ("max_running_request is zero"); kvplan keeps 1."""
    ranks = dep.data_parallel_size if SP.dp_attention(dep) else 1
    return max(1, SPEC_MAX_RUNNING_REQUESTS // ranks)


# Drafts SGLang refuses with DP attention at start-up, in every release that has them:
# STANDALONE from its first release, 0.5.2 (python/sglang/srt/server_args.py: an assert, "Currently
# standalone speculative decoding does not support dp attention."; a ValueError from 0.5.3;
# arg_groups/speculative_hook.py _handle_eagle_family in 0.5.14 - 0.5.23), NGRAM from its first,
# 0.5.3 (server_args.py _handle_speculative_decoding, then speculative_hook.py _handle_ngram:
# "Currently ngram speculative decoding does not support dp attention.").
SPEC_WITHOUT_DP_ATTENTION = {"draft_model": "standalone", "ngram": "ngram"}


def check_spec_dp_attention(sc: SpeculativeConfig | None, *, data_parallel_size: int,
                            dp_attention: bool, expert_parallel: bool) -> None:
    """Refuse a STANDALONE or NGRAM draft under DP attention, as SGLang does at start-up.
    kvplan turns DP attention on for --enable-dp-attention, and for expert parallelism over
    -dp > 1 (sglang_parallel.dp_attention)."""
    if sc is None or sc.method not in SPEC_WITHOUT_DP_ATTENTION or data_parallel_size <= 1 \
            or not (dp_attention or expert_parallel):
        return
    name = SPEC_WITHOUT_DP_ATTENTION[sc.method]
    why = "--enable-dp-attention" if dp_attention else \
        f"--enable-expert-parallel over -dp {data_parallel_size}, which SGLang runs with " \
        "--enable-dp-attention"
    raise InvalidInputError(
        f"SGLang refuses --speculative-algorithm {SPEC_FLAGS[sc.method]} with DP attention "
        f"({why}): \"Currently {name} speculative decoding does not support dp attention.\" "
        "(python/sglang/srt/arg_groups/speculative_hook.py, 0.5.23)",
        hint="use EAGLE, EAGLE3 or NEXTN, which run with DP attention, or plan without DP "
        f"attention (-dp {data_parallel_size} without --enable-dp-attention and "
        "--enable-expert-parallel: whole replicas)",
        code="speculative-invalid", knob="speculative_config")


def auto_spec_params(algorithm: str, architecture: str) -> tuple[int, int, int]:
    """(num_steps, eagle_topk, num_draft_tokens) SGLang picks when none is given."""
    if algorithm != "STANDALONE" and architecture == "LlamaForCausalLM":
        return 5, 4, 8
    return 3, 1, 4


def draft_layer_count(m: ModelSpec, sc: SpeculativeConfig) -> int:
    """eagle_draft_num_layers: the draft config's num_nextn_predict_layers if set, else its
    num_hidden_layers (model_runner.py); the target's MTP layers for NEXTN; 0 for NGRAM."""
    if sc.method == "ngram":
        return 0
    if sc.method == "mtp":
        return m.mtp_layers
    d = sc.draft
    return 0 if d is None else (d.mtp_layers or d.num_layers)


def spec_headroom_tokens(sc: SpeculativeConfig, version: tuple[int, int, int], reqs: int) -> int:
    """Extra draft-pool tokens before 0.5.3 (model_runner.py init_memory_pool):
    reqs × steps + 100 in the 0.4.x copy the 2025-01 log matches; later
    reqs × steps × topk + reqs × num_draft_tokens + 100 (then the target's pool too)."""
    steps = sc.num_speculative_tokens or 0
    if version < SPEC_HEADROOM_BOTH_FROM:
        return reqs * steps + 100
    return reqs * steps * (sc.eagle_topk or 1) + reqs * (sc.num_draft_tokens or 0) + 100


def resolve_speculative(m: ModelSpec, sc: SpeculativeConfig | None,
                        sources: dict[str, Source]) -> SpeculativeConfig | None:
    """The generic knob as SGLang takes it: EAGLE / EAGLE3 / STANDALONE need a draft path;
    NEXTN (and EAGLE without a draft on an MTP architecture) needs the target's MTP layers;
    num_steps, topk and num_draft_tokens are all given or all chosen by SGLang; topk 1 forces
    num_draft_tokens = num_steps + 1 (speculative_hook.py)."""
    if sc is None:
        return None
    sources["speculative_config"] = "cli"
    arch = m.architectures[0] if m.architectures else ""
    if sc.method == "eagle" and sc.model is None and arch in MTP_ARCHITECTURES:
        sc = sc.model_copy(update={"method": "mtp"})
    if sc.method == "draft_model" and sc.model == m.id and m.mtp_layers:
        sc = sc.model_copy(update={"method": "mtp", "draft": None})
    algo = SPEC_FLAGS[sc.method]
    if sc.method == "mtp" and not m.mtp_layers:
        raise InvalidInputError(f"{m.id} has no MTP layers (num_nextn_predict_layers) for "
                                "--speculative-algorithm NEXTN",
                                hint="use EAGLE, EAGLE3 or STANDALONE with "
                                "--speculative-draft-model-path, or NGRAM",
                                code="speculative-invalid", knob="speculative_config")
    if sc.method in ("eagle", "eagle3", "draft_model"):
        if sc.model is None:
            raise InvalidInputError(f"--speculative-algorithm {algo} needs "
                                    "--speculative-draft-model-path (the draft / EAGLE head)",
                                    hint="add the draft path, or use NEXTN (models with MTP "
                                    "layers) or NGRAM, which need no draft",
                                    code="speculative-invalid", knob="speculative_config")
        if sc.draft is None:
            raise InvalidInputError(f"the draft model {sc.model!r} was not loaded",
                                    hint="plan through kvplan.api.plan or the CLI, which resolve "
                                    "it by name, or set SpeculativeConfig.draft")
    steps, topk, tokens = sc.num_speculative_tokens, sc.eagle_topk, sc.num_draft_tokens
    if sc.method == "ngram":
        tokens = tokens or NGRAM_DRAFT_TOKENS
    elif steps is None:
        if topk is not None or tokens is not None:
            raise InvalidInputError("SGLang needs --speculative-num-steps with "
                                    "--speculative-eagle-topk / --speculative-num-draft-tokens",
                                    hint="give all three, or none for SGLang's automatic choice",
                                    code="speculative-invalid", knob="speculative_config")
        steps, topk, tokens = auto_spec_params(algo, arch)
    else:
        topk = topk or 1  # kvplan's choice for a vLLM-style knob; the launch line spells it out
        if topk == 1 or tokens is None:
            if topk > 1:
                raise InvalidInputError("--speculative-eagle-topk above 1 needs "
                                        "--speculative-num-draft-tokens",
                                        hint="e.g. --speculative-num-draft-tokens 8",
                                        code="speculative-invalid", knob="speculative_config")
            tokens = steps + 1  # SGLang adjusts it to num_steps + 1 when topk is 1
    return sc.model_copy(update={"num_speculative_tokens": steps, "eagle_topk": topk,
                                 "num_draft_tokens": tokens})


def spec_flags(sc: SpeculativeConfig) -> list[str]:
    """The launch-line flags of a resolved SpeculativeConfig (the user's tree shape only)."""
    args = ["--speculative-algorithm", SPEC_FLAGS[sc.method]]
    if sc.method in ("eagle", "eagle3", "draft_model") and sc.model:
        args += ["--speculative-draft-model-path", sc.model]
    given = sc.given
    if "num_speculative_tokens" in given and sc.num_speculative_tokens:
        args += ["--speculative-num-steps", str(sc.num_speculative_tokens)]
        if sc.method != "ngram":
            args += ["--speculative-eagle-topk", str(sc.eagle_topk or 1)]
    if sc.num_draft_tokens and ("num_speculative_tokens" in given or "num_draft_tokens" in given):
        args += ["--speculative-num-draft-tokens", str(sc.num_draft_tokens)]
    return args


@dataclass(frozen=True)
class DraftMemory:
    """A speculative-decoding draft on one GPU. Its weights load after the target's KV pool is
    sized (eagle_worker.py builds the draft ModelRunner after the target's), so they come out
    of the (1 − f) reserve; its KV pool is priced into the target's cell from 0.5.3
    (`in_cell`), and before that also comes out of the reserve."""

    layers: int  # eagle_draft_num_layers
    tensor_bytes: int
    weights_bytes: int
    kv_bytes_per_token: int  # the draft pool's own bytes per token (its layers × per-layer)
    in_cell: bool


NO_DRAFT = DraftMemory(0, 0, 0, 0, False)


def draft_memory(m: ModelSpec, dep: Deployment, version: tuple[int, int, int]) -> DraftMemory:
    """Draft weights as kvplan sizes them for vLLM (weights.draft_tensors), except that SGLang's
    NEXTN draft shares the target's LM head (eagle_worker.py set_embed_and_head for every
    non-EAGLE3 draft), so the MTP head is not counted; KV per token = layers × the draft's
    per-layer bytes (MTP: the target's)."""
    from ..model.weights import _rank_bytes, draft_tensors

    sc = dep.speculative_config
    if sc is None:
        return NO_DRAFT
    tp = dep.tensor_parallel_size
    tensors = [x for x in draft_tensors(m, sc)
               if not (sc.method == "mtp" and x[0].name.endswith("shared_head.head"))]
    tensor, allocated = _rank_bytes(tensors, tp, dep.dtype)
    n = draft_layer_count(m, sc)
    spec_model = m if sc.method == "mtp" or sc.draft is None else sc.draft
    per_layer = kv_bytes_per_token_per_layer(spec_model, tp=tp,
                                             kv_dtype=dep.kv_cache_dtype) if n else 0
    return DraftMemory(n, tensor, allocated, n * per_layer, n > 0 and version >= LEGACY_BEFORE)


def legacy_draft_pool(m: ModelSpec, dep: Deployment, res: SglangResult, draft: DraftMemory,
                      version: tuple[int, int, int]) -> tuple[int, int, int]:
    """Before 0.5.3: (printed max_total_num_tokens, draft pool tokens, bytes outside the
    fraction). max_num_reqs = --max-running-requests, else 48 once SGLang resets it for
    speculative decoding (server_args.py, same UNVERIFIED boundary), else clamp(int(tokens /
    ctx × 512), 2048, 4096) (model_runner.py init_memory_pool)."""
    sc = dep.speculative_config
    assert sc is not None
    reqs = (dep.max_num_seqs if dep.user_set("max_num_seqs")
            else SPEC_MAX_RUNNING_REQUESTS if version >= SPEC_HEADROOM_BOTH_FROM
            else min(max(int(res.tokens / res.context_len * 512), 2048), 4096))
    pool = res.tokens + spec_headroom_tokens(sc, version, reqs)
    if dep.max_total_tokens:
        pool = min(pool, dep.max_total_tokens)
    if version < SPEC_HEADROOM_BOTH_FROM:
        return res.tokens, pool, pool * draft.kv_bytes_per_token
    extra_target = (pool - res.tokens) * res.cell_bytes
    return pool, pool, pool * draft.kv_bytes_per_token + extra_target


def speculative_section(dep: Deployment, draft: DraftMemory, res: SglangResult,
                        plain_cell: int, pool_tokens: int) -> PlanSpeculative:
    sc = dep.speculative_config
    assert sc is not None
    per_token = res.cell_bytes - plain_cell if draft.in_cell else draft.kv_bytes_per_token
    return PlanSpeculative(
        method=sc.method, draft_model=sc.draft.id if sc.draft is not None else sc.model,
        num_speculative_tokens=sc.num_speculative_tokens or 0, draft_layers=draft.layers,
        draft_weights_bytes=draft.weights_bytes, draft_kv_bytes_per_token=per_token,
        sampler_rows_factor=1, eagle_topk=sc.eagle_topk, num_draft_tokens=sc.num_draft_tokens,
        draft_pool_tokens=pool_tokens)


def speculative_problems(dep: Deployment, draft: DraftMemory, spec: PlanSpeculative,
                         version: tuple[int, int, int]) -> list[Problem]:
    sc = dep.speculative_config
    assert sc is not None
    where = ("priced into the target's cell, so both pools hold max_total_num_tokens"
             if draft.in_cell else "outside mem_fraction_static, from the (1 − f) reserve")
    out = [Problem(
        code="speculative-decoding-estimate", severity="info",
        message=f"SGLang speculative decoding ({SPEC_FLAGS[sc.method]}, steps "
        f"{sc.num_speculative_tokens}, topk {sc.eagle_topk}, draft tokens {sc.num_draft_tokens}): "
        f"the draft's {draft.weights_bytes / GiB:.2f} GiB of weights load after the KV pool, in "
        f"the (1 − f) reserve; its KV pool of {spec.draft_pool_tokens:,} tokens "
        f"({draft.layers} layer(s)) is {where}; modelled from SGLang's source")]
    if sc.method == "draft_model" and draft.in_cell:
        out.append(Problem(
            code="standalone-draft-priced-as-target", severity="info",
            message="SGLang prices a STANDALONE draft's KV like target layers "
            "(pool_configurator.py assumes equal per-layer size); a draft with a different head "
            f"layout allocates {draft.kv_bytes_per_token:,} B per token, not the "
            f"{spec.draft_kv_bytes_per_token:,} "
            "B budgeted"))
    if not draft.in_cell and sc.method != "ngram":
        out.append(Problem(
            code="engine-version-boundary-uncertain", severity="info",
            message="SGLang before 0.5.3: the target pool is sized without the draft and the draft "
            "pool (target tokens + a headroom) comes from the (1 − f) reserve; the releases where "
            "this rule and its headroom changed were not pinned"))
    if not dep.user_set("max_num_seqs") and version >= SPEC_HEADROOM_BOTH_FROM:
        ranks = dep.data_parallel_size if SP.dp_attention(dep) else 1
        split = (f", for the whole server: each of the {ranks} DP-attention ranks runs "
                 f"{SPEC_MAX_RUNNING_REQUESTS} // {ranks} = {spec_max_running_per_rank(dep)}"
                 if ranks > 1 else "")
        out.append(Problem(
            code="speculative-max-running-requests", severity="info",
            message=f"SGLang resets --max-running-requests to {SPEC_MAX_RUNNING_REQUESTS} with "
            f"speculative decoding unless it is given{split}; set it to use the pool's "
            "concurrency"))
    return out


# deployment-file flags → parts of the speculative_config knob (SGLang's argparse also takes
# unique prefixes: the 2025 docs write --speculative-algo / --speculative-draft)
SPEC_CLI_FLAGS: dict[str, tuple[str, str]] = {
    "--speculative-algorithm": ("speculative_algorithm", "str"),
    "--speculative-algo": ("speculative_algorithm", "str"),
    "--speculative-draft-model-path": ("speculative_draft_model_path", "str"),
    "--speculative-draft-model": ("speculative_draft_model_path", "str"),
    "--speculative-draft": ("speculative_draft_model_path", "str"),
    "--speculative-num-steps": ("speculative_num_steps", "int"),
    "--speculative-eagle-topk": ("speculative_eagle_topk", "int"),
    "--speculative-num-draft-tokens": ("speculative_num_draft_tokens", "int"),
}


def combine_spec_flags(knobs: dict[str, Any], model: str | None) -> dict[str, Any]:
    """SGLang's separate --speculative-* flags → one speculative_config mapping (ValueError
    naming the flag when they cannot be read)."""
    parts = {k: knobs.pop(k) for k in [k for k in knobs if k.startswith("speculative_")]}
    if not parts:
        return knobs
    algo = parts.get("speculative_algorithm")
    if algo is None:
        raise ValueError("--speculative-* flags without --speculative-algorithm: SGLang "
                         "ignores them")
    method = SPEC_ALGORITHMS.get(str(algo).upper())
    if method is None:
        raise ValueError(f"--speculative-algorithm {algo} is not modelled by kvplan (it models "
                         + ", ".join(SPEC_ALGORITHMS) + ")")
    draft = parts.get("speculative_draft_model_path")
    if method == "mtp" and draft is not None and draft != model:
        method = "eagle"  # NEXTN is EAGLE: a separate draft path is an EAGLE draft
    value: dict[str, Any] = {"method": method}
    if draft is not None and method != "mtp":
        value["model"] = draft
    for flag, key in (("speculative_num_steps", "num_speculative_tokens"),
                      ("speculative_eagle_topk", "eagle_topk"),
                      ("speculative_num_draft_tokens", "num_draft_tokens")):
        if flag in parts:
            value[key] = parts[flag]
    knobs["speculative_config"] = value
    return knobs


def combine_flags(knobs: dict[str, Any], model: str | None) -> dict[str, Any]:
    """combine_spec_flags, then SGLang's layout spelling
    (sglang_parallel.combine_parallel_flags)."""
    return SP.combine_parallel_flags(combine_spec_flags(knobs, model))


# ------------------------------------------------------- hierarchical (host) KV cache

# SGLang refuses to start when the host pool would leave less than this much host memory
# available (sglang/srt/mem_cache/pool_host/base.py HICACHE_HOST_MEMORY_RESERVE_BYTES,
# sgl-project/sglang@049f8e64; older releases subtracted 10 × 10^9 B the same way).
HICACHE_HOST_RESERVE_BYTES = 10 * GiB
HICACHE_PAGE_SIZE = 1  # --page-size default; kvplan models SGLang's pool at page size 1


class SglangOptions(EngineOptions):
    """SGLang's own settings, resolved."""

    enable_hierarchical_cache: bool = False
    hicache_ratio: float = Field(2.0, gt=0, description="host/device pool tokens")
    hicache_size: int = Field(0, ge=0, description="GB of host KV per GPU (0 = ratio)")
    lora_paths: list[str] | None = Field(None, description="--lora-paths as given")
    cuda_graph_max_bs: int | None = Field(None, description="--cuda-graph-max-bs as given")
    # --- mixedchunk ---
    enable_mixed_chunk: bool = False
    # --- sgdense --- --moe-dense-tp-size (1 or unset)
    moe_dense_tp_size: int | None = Field(None, description="--moe-dense-tp-size as given")


def opts(d: Deployment) -> SglangOptions:
    return engine_options(d, SglangOptions)


def _own_options(knobs: Any, sources: dict[str, Source]) -> dict[str, Any]:
    """The SglangOptions the user gave (--lora-paths is resolved with the other LoRA knobs)."""
    out: dict[str, Any] = {}
    for key in SglangOptions.model_fields:
        value = getattr(knobs, key)
        if key != "lora_paths" and value is not None:
            out[key] = value
            sources[key] = "cli"
    return out


def hicache_tokens(device_tokens: int, bytes_per_token: int, ratio: float, size_gb: int,
                   page_size: int = HICACHE_PAGE_SIZE) -> int:
    """Host pool tokens per GPU (sglang/srt/mem_cache/pool_host/base.py HostKVCache.__init__):
    size = int(hicache_size × 10^9 // size_per_token) when --hicache-size > 0, else
    int(device pool tokens × hicache_ratio); then page-aligned as (size // page + 1) × page."""
    size = int(size_gb * 10**9 // bytes_per_token) if size_gb > 0 else int(device_tokens * ratio)
    return (size // page_size + 1) * page_size


def hicache_section(m: ModelSpec, dep: Deployment, res: SglangResult
                    ) -> tuple[PlanOffload | None, list[Problem]]:
    """--enable-hierarchical-cache: every TP × PP rank pins a host pool mirroring its device
    pool layout (size_per_token = the device cell bytes: kv heads per GPU × head_dim × 2 ×
    layers × dtype, or MLA's latent), so the host needs ranks × tokens × cell bytes, plus the
    10 GiB SGLang keeps free. Capacity for prefix reuse grows; running requests still need
    device tokens, so max concurrency is unchanged."""
    problems: list[Problem] = []
    given = [k for k in ("hicache_ratio", "hicache_size") if dep.user_set(k)]
    o = opts(dep)
    if not o.enable_hierarchical_cache:
        if given:
            problems.append(Problem(
                code="hicache-off", severity="warning",
                message=f"{', '.join('--' + k.replace('_', '-') for k in given)} has no effect "
                "without --enable-hierarchical-cache (SGLang builds no host pool)"))
        return None, problems
    _, _, swa = cell_bytes(m, dep.tensor_parallel_size, dep.kv_cache_dtype)
    if swa or m.linear_attention is not None:
        problems.append(Problem(
            code="hicache-hybrid-not-modelled", severity="warning",
            message="the hierarchical cache of a sliding-window or hybrid model keeps separate "
            "host pools kvplan does not model; the host tier is not shown"))
        return None, problems
    per_gpu_tokens = hicache_tokens(res.tokens, res.cell_bytes, o.hicache_ratio, o.hicache_size)
    per_gpu_bytes = per_gpu_tokens * res.cell_bytes
    ranks = dep.tensor_parallel_size * dep.pipeline_parallel_size
    gpus = ranks * dep.data_parallel_size
    host = per_gpu_bytes * gpus
    problems.append(Problem(
        code="hicache-host-memory", severity="info",
        message=f"the hierarchical cache pins {per_gpu_bytes / GiB:.2f} GiB of host memory per GPU"
        + (f" ({host / GiB:.2f} GiB for all {gpus} GPUs)" if gpus > 1 else "")
        + "; SGLang refuses to start unless the host has that much available beyond "
        f"{HICACHE_HOST_RESERVE_BYTES // GiB} GiB"))
    if per_gpu_tokens <= res.tokens:
        problems.append(Problem(
            code="hicache-smaller-than-device", severity="warning",
            message=f"the host pool ({per_gpu_tokens:,} tokens) is not larger than the device pool "
            f"({res.tokens:,}): SGLang warns that the L2 cache is ineffective; raise "
            "--hicache-ratio or --hicache-size"))
    return PlanOffload(backend="sglang-hicache", host_bytes=host,
                       host_bytes_per_worker=per_gpu_bytes,
                       cpu_blocks=per_gpu_tokens // HICACHE_PAGE_SIZE, cpu_tokens=per_gpu_tokens,
                       effective_cached_tokens=res.tokens + per_gpu_tokens), problems


# ------------------------------------------------------------------------ LoRA
# docs/features.md. Read in sgl-project/sglang main-branch copies: lora/mem_pool.py
# LoRAMemoryPool (@00639c4d: init_buffers, get_lora_A_shape / get_lora_B_shape,
# get_embedding_lora_*_shape), lora/utils.py (@01235a16: get_default_hidden_dim,
# get_stacked_multiply, get_normalized_target_modules, ROW_PARALLELISM_LINEAR_LORA_NAMES),
# lora/lora_manager.py init_lora_shapes (@db922586: "all" = every linear module of the model
# plus embed_tokens and lm_head), arg_groups/lora_hook.py check_lora_server_args (@47ed7ecf),
# server_args.py (max_loras_per_batch 8; max_lora_rank, lora_target_modules and
# max_loaded_loras None). model_executor/model_runner.py calls init_lora_manager() before
# init_memory_pool() in every copy read (0.4.x to main), so the pool is already allocated
# when the free memory is measured: it comes out of mem_fraction_static's rest, like weights.
# Adapters themselves are read into host memory and copied into a pool slot when a batch
# needs them (lora/lora.py LoRAAdapter.initialize_weights, "initialize the LoRA weights to cpu").

MAX_LORAS_PER_BATCH = 8  # --max-loras-per-batch default (server_args.py)
LORA_RANK_ASSUMED = 16  # kvplan's assumption when SGLang would read the rank from --lora-paths
# --lora-target-modules names → SGLang's normalized pool names (utils.py params_mapping)
LORA_MODULE_NAMES = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
                     "qkv_proj": "qkv_proj", "o_proj": "o_proj", "gate_proj": "gate_up_proj",
                     "up_proj": "gate_up_proj", "gate_up_proj": "gate_up_proj",
                     "down_proj": "down_proj", "embed_tokens": "embed_tokens", "lm_head": "lm_head"}
LORA_LINEAR = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
LORA_ALL = (*LORA_LINEAR, "embed_tokens", "lm_head")


@dataclass(frozen=True)
class LoraPool:
    """SGLang's LoRA pool on one GPU, and one adapter's host copy."""

    gpu_bytes: int  # every A/B buffer, each rounded to 512 bytes by the caching allocator
    adapter_bytes: int  # one adapter at max_lora_rank, unsharded, in the model dtype
    modules: tuple[str, ...]
    skipped: tuple[str, ...]  # buffers kvplan does not size (MoE experts, MLA, linear attention)


def normalize_lora_modules(names: list[str]) -> tuple[str, ...]:
    """--lora-target-modules → pool module names; "all" (alone) → every linear module plus
    embed_tokens and lm_head. ValueError naming what SGLang (or kvplan) does not take."""
    if "all" in names:
        if len(names) != 1:
            raise ValueError("'all' must be the only --lora-target-modules value (SGLang "
                             "asserts it)")
        return LORA_ALL
    unknown = sorted({n for n in names if n.split(".")[-1] not in LORA_MODULE_NAMES})
    if unknown:
        raise ValueError(f"--lora-target-modules {' '.join(unknown)}: kvplan sizes "
                         + ", ".join(LORA_MODULE_NAMES) + " or all")
    return tuple(sorted({LORA_MODULE_NAMES[n.split(".")[-1]] for n in names}))


def lora_pool(m: ModelSpec, *, tp: int, max_loras: int, rank: int, modules: tuple[str, ...],
              dtype: str) -> LoraPool:
    """LoRAMemoryPool buffers on one TP rank, for every decoder layer (mem_pool.py sizes them by
    num_hidden_layers), n = max_loras_per_batch, r = max_lora_rank:
    qkv_proj A (n, 3r, hidden), B (n, (q + 2 kv) / tp, r) — KV heads replicated when fewer than
    tp ranks (q / tp + 2 head_dim); o_proj A (n, r, q / tp), B (n, hidden, r); gate_up_proj
    A (n, 2r, hidden), B (n, 2 inter / tp, r) (non-gated MLP: r and inter); down_proj A (n, r,
    inter / tp), B (n, hidden, r); embed_tokens A (n, r, vocab), B (n, hidden, r), unsharded;
    lm_head A (n, r, hidden), B (n, padded vocab / tp, r). q = heads × head_dim,
    kv = kv_heads × head_dim. MoE models (expert parallelism off, so moe_tp = tp): every layer
    gets gate_up_proj_moe A (n, E, 2r, hidden), B (n, E, 2 moe_inter / tp, r) and
    down_proj_moe A (n, E, r, moe_inter / tp), B (n, E, hidden, r) instead of the dense pair;
    shared-expert buffers are not sized (listed in `skipped`)."""
    from ..model.weights import ALLOC_ROUND, _round_up

    dt = DTYPE_BYTES[dtype]
    h, hd = m.hidden_size, m.head_dim
    q_full, kv_full = m.num_attention_heads * hd, m.num_kv_heads * hd
    q_rank = q_full // tp
    qkv_rank = q_rank + 2 * max(1, m.num_kv_heads // tp) * hd
    gate = 2 if m.mlp_gated else 1
    gpu = adapter = 0
    used: set[str] = set()
    skipped: set[str] = set()

    def buf(*dims: int) -> int:
        return _round_up(max_loras * math.prod(dims) * dt, ALLOC_ROUND)

    for i in range(m.num_layers):
        kind = m.layer_types[i] if m.layer_types else "full"
        attn = [x for x in ("qkv_proj", "o_proj") if x in modules]
        if attn and kind == "linear":
            skipped.add("linear-attention projections")
        elif attn and kind != "none" and (m.mla is not None or m.mla_projections is not None):
            skipped.add("MLA projections")
        elif kind != "none":
            if "qkv_proj" in attn:
                gpu += buf(3 * rank, h) + buf(qkv_rank, rank)
                adapter += rank * (3 * h + q_full + 2 * kv_full)
            if "o_proj" in attn:
                gpu += buf(rank, q_rank) + buf(h, rank)
                adapter += rank * (q_full + h)
            used.update(attn)
        mlp = [x for x in ("gate_up_proj", "down_proj") if x in modules]
        if mlp and m.moe is not None:  # per-expert 4D buffers on every layer (init_buffers)
            experts, inter = m.moe.num_experts, m.moe.expert_intermediate_size
            if "gate_up_proj" in mlp:
                gpu += buf(experts, gate * rank, h) + buf(experts, gate * inter // tp, rank)
                adapter += experts * gate * rank * (h + inter)
            if "down_proj" in mlp:
                gpu += buf(experts, rank, inter // tp) + buf(experts, h, rank)
                adapter += experts * rank * (inter + h)
            if m.moe.shared_expert_intermediate_size:
                skipped.add("shared-expert buffers")
            used.update(f"{x}_moe" for x in mlp)
            continue
        if not mlp or (m.mlp_layers is not None and i not in m.mlp_layers):
            continue
        inter = m.intermediate_size
        if "gate_up_proj" in mlp:
            gpu += buf(gate * rank, h) + buf(gate * inter // tp, rank)
            adapter += gate * rank * (h + inter)
        if "down_proj" in mlp:
            gpu += buf(rank, inter // tp) + buf(h, rank)
            adapter += rank * (inter + h)
        used.update(mlp)
    vocab_gpu, vocab_adapter, vocab_used = _lora_vocab_buffers(m, tp, rank, modules, buf)
    used.update(vocab_used)
    return LoraPool(gpu + vocab_gpu, (adapter + vocab_adapter) * dt, tuple(sorted(used)),
                    tuple(sorted(skipped)))


def _lora_vocab_buffers(m: ModelSpec, tp: int, rank: int, modules: tuple[str, ...],
                        buf: Callable[..., int]) -> tuple[int, int, list[str]]:
    """lora_pool's embed_tokens and lm_head buffers: (GPU bytes, adapter elements, modules)."""
    from ..model.weights import vocab_rows_per_rank

    h = m.hidden_size
    gpu = adapter = 0
    used = []
    if "embed_tokens" in modules:
        gpu += buf(rank, m.vocab_size) + buf(h, rank)
        adapter += rank * (m.vocab_size + h)
        used.append("embed_tokens")
    if "lm_head" in modules:
        shard = m.vocab_size if tp == 1 else vocab_rows_per_rank(m.vocab_size, tp)
        gpu += buf(rank, h) + buf(shard, rank)
        adapter += rank * (h + m.vocab_size)
        used.append("lm_head")
    return gpu, adapter, used


def resolve_lora(knobs: Any, sources: dict[str, Source]) -> dict[str, Any]:
    """SGLang's LoRA settings (check_lora_server_args): --lora-paths turns LoRA on unless
    --enable-lora is false; without --lora-paths SGLang needs both --max-lora-rank and
    --lora-target-modules; --max-loaded-loras ≥ --max-loras-per-batch and ≥ the adapters given.
    With --lora-paths SGLang reads rank and modules from the adapters, which kvplan cannot:
    rank 16 and the four linear modules are assumed (source kvplan-default)."""
    paths = knobs.lora_paths or []
    if not (knobs.enable_lora or (paths and knobs.enable_lora is None)):
        return {}
    sources["enable_lora"] = "cli"
    loras = knobs.max_loras or MAX_LORAS_PER_BATCH
    if not paths and not (knobs.max_lora_rank and knobs.lora_target_modules):
        raise InvalidInputError("SGLang LoRA without --lora-paths needs both --max-lora-rank and "
                                "--lora-target-modules (SGLang refuses to start)",
                                hint="e.g. --max-lora-rank 16 --lora-target-modules all",
                                code="lora-invalid", knob="enable_lora")
    try:
        modules = (normalize_lora_modules(knobs.lora_target_modules) if knobs.lora_target_modules
                   else LORA_LINEAR)
    except ValueError as e:
        raise InvalidInputError(str(e), hint="q_proj k_proj v_proj o_proj gate_proj up_proj "
                                "down_proj, or all", code="lora-invalid",
                                knob="lora_target_modules") from None
    loaded = knobs.max_cpu_loras
    if loaded is not None and loaded < loras:
        raise InvalidInputError(f"--max-loaded-loras {loaded} is below --max-loras-per-batch "
                                f"{loras}", hint="SGLang requires max_loaded_loras ≥ "
                                "max_loras_per_batch", code="lora-invalid", knob="max_cpu_loras")
    if loaded is not None and len(paths) > loaded:
        raise InvalidInputError(f"{len(paths)} --lora-paths exceed --max-loaded-loras {loaded}",
                                hint="raise --max-loaded-loras or load fewer adapters at start",
                                code="lora-invalid", knob="max_cpu_loras")
    sources["max_loras"] = "cli" if knobs.max_loras else "engine-default"
    sources["max_lora_rank"] = "cli" if knobs.max_lora_rank else "kvplan-default"
    sources["lora_target_modules"] = "cli" if knobs.lora_target_modules else "kvplan-default"
    if loaded is not None:
        sources["max_cpu_loras"] = "cli"
    out: dict[str, Any] = {"enable_lora": True, "max_loras": loras,
                           "max_lora_rank": knobs.max_lora_rank or LORA_RANK_ASSUMED,
                           "max_cpu_loras": loaded, "lora_target_modules": list(modules)}
    if paths:
        out["lora_paths"] = list(paths)
        sources["lora_paths"] = "cli"
    return out


def lora_problems(dep: Deployment, pool: LoraPool) -> list[Problem]:
    out = []
    assumed = [what for key, what in (("max_lora_rank", f"rank {dep.max_lora_rank}"),
                                      ("lora_target_modules", "the modules "
                                       + ", ".join(pool.modules)))
               if dep.sources.get(key) == "kvplan-default"]
    if assumed:
        out.append(Problem(
            code="lora-assumed", severity="warning",
            message="SGLang reads the LoRA rank and target modules from the --lora-paths "
            f"adapters, which kvplan does not open: the pool is sized for {' and '.join(assumed)}; "
            "pass --max-lora-rank / --lora-target-modules to pin it (the pool grows linearly "
            "with the rank)"))
    if pool.skipped:
        out.append(Problem(
            code="lora-partly-modelled", severity="warning",
            message="SGLang LoRA buffers not sized by kvplan: " + ", ".join(pool.skipped)
            + "; the KV pool is overstated by their size"))
    if dep.pipeline_parallel_size > 1:
        out.append(Problem(
            code="lora-pp-upper-bound", severity="info",
            message="the LoRA pool is counted for every decoder layer on each pipeline stage "
            "(mem_pool.py sizes it by num_hidden_layers): an upper bound"))
    return out


def lora_section(dep: Deployment, pool: LoraPool | None) -> PlanLora | None:
    """The plan's LoRA section: max_cpu_loras = --max-loaded-loras, else the adapters loaded at
    start (--lora-paths; more can be loaded at run time up to the cap)."""
    if pool is None:
        return None
    cpu = dep.max_cpu_loras if dep.max_cpu_loras is not None else len(opts(dep).lora_paths or [])
    return PlanLora(max_loras=dep.max_loras, max_lora_rank=dep.max_lora_rank, max_cpu_loras=cpu,
                    gpu_bytes=pool.gpu_bytes, adapter_bytes=pool.adapter_bytes,
                    host_bytes_per_worker=cpu * pool.adapter_bytes, modules=list(pool.modules))


def lora_flags(dep: Deployment) -> list[str]:
    """The launch-line LoRA flags, SGLang's names, as the user set them."""
    if not dep.enable_lora:
        return []
    args = ["--enable-lora"]
    paths = opts(dep).lora_paths
    if paths:
        args += ["--lora-paths", *paths]
    if dep.user_set("max_loras"):
        args += ["--max-loras-per-batch", str(dep.max_loras)]
    if dep.user_set("max_lora_rank"):
        args += ["--max-lora-rank", str(dep.max_lora_rank)]
    if dep.user_set("lora_target_modules") and dep.lora_target_modules:
        modules = dep.lora_target_modules
        args += ["--lora-target-modules", *(["all"] if tuple(modules) == LORA_ALL else modules)]
    if dep.max_cpu_loras is not None:
        args += ["--max-loaded-loras", str(dep.max_cpu_loras)]
    return args


# ------------------------------------------------------------------ the engine

# the release with its .postN (lmsysorg/sglang:v0.4.1.post6-cu124): flags and values that
# first appear in a post release are told apart by it (FLAG_RELEASES)
_IMAGE = re.compile(r"sglang[^:\s\"']{0,200}:v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)")
_PIP = re.compile(r"\bsglang(?:\[[\w,]+\])?==(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)")
# SGLang's ROCm images: lmsysorg/sglang:v<release>-rocm<NNN>-<family>, mi30x for
# gfx942 (MI300X, MI325X) and mi35x for gfx950 (MI355X), one per ROCm build of the release
# (.github/workflows/release-docker-amd.yml, sgl-project/sglang@0221e896: rocm700 and rocm720
# then); no image for other targets. Which ROCm builds a release has is not derivable from it.
ROCM_FAMILIES = {"gfx942": "mi30x", "gfx950": "mi35x"}


def rocm_image(version: str, gfx: str) -> tuple[str, str | None] | None:
    family = ROCM_FAMILIES.get(gfx)
    if family is None:
        return None
    return f"lmsysorg/sglang:v{version}-ROCM-{family}", (
        f"Set ROCM in the image tag to a ROCm build SGLang published for v{version} (rocm700, "
        "rocm720: the release's lmsysorg/sglang tags on Docker Hub list them; older releases "
        "are tagged v<release>-rocm<NNN> without the GPU family).")


# the radix (prefix) cache is on by default; this flag turns it off (server_args.py, 0.5.x)
RADIX_CACHE_OFF = "--disable-radix-cache"
# sglang/srt/server_args.py flag → (knob, kind; "off": the flag sets its knob False)
CLI_FLAGS: dict[str, tuple[str, str]] = {
    "--model-path": ("model", "str"), "--model": ("model", "str"),
    "--tp-size": ("tensor_parallel_size", "int"), "--tp": ("tensor_parallel_size", "int"),
    "--pp-size": ("pipeline_parallel_size", "int"), "--dp-size": ("data_parallel_size", "int"),
    # nodes: sglang/srt/server_args.py `--nnodes` (0.5.x); --tp is the total over the nodes
    "--nnodes": ("nodes", "int"),
    "--context-length": ("max_model_len", "int"),
    "--mem-fraction-static": ("gpu_memory_utilization", "float"),
    "--max-running-requests": ("max_num_seqs", "int"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--dtype": ("dtype", "str"), "--quantization": ("quantization", "str"),
    "--chunked-prefill-size": ("max_num_batched_tokens", "int"),
    "--cuda-graph-max-bs": ("cuda_graph_max_bs", "int"),
    "--max-total-tokens": ("max_total_tokens", "int"), "--revision": ("revision", "str"),
    **SPEC_CLI_FLAGS,
    "--enable-hierarchical-cache": ("enable_hierarchical_cache", "bool"),
    "--hicache-ratio": ("hicache_ratio", "float"), "--hicache-size": ("hicache_size", "int"),
    "--enable-lora": ("enable_lora", "bool"), "--max-loras-per-batch": ("max_loras", "int"),
    "--max-lora-rank": ("max_lora_rank", "int"), "--max-loaded-loras": ("max_cpu_loras", "int"),
    "--lora-paths": ("lora_paths", "list"),
    "--lora-target-modules": ("lora_target_modules", "list"),
    **PARALLEL_CLI_FLAGS,
    # --- mixedchunk --- (docs/sglang-mixed-chunk.md)
    "--enable-mixed-chunk": ("enable_mixed_chunk", "bool"),
    # --- sgdense --- (docs/expert-parallel.md)
    "--moe-dense-tp-size": ("moe_dense_tp_size", "int"),
    RADIX_CACHE_OFF: ("enable_prefix_caching", "off"),
}
# Flags only some releases have (DeploySyntax.flag_releases), read in the PyPI wheels'
# sglang/srt/server_args.py (argparse: an unknown flag stops the server): pipeline parallelism's
# --pipeline-parallel-size / --pp-size is in none of 0.3.0, 0.3.6, 0.4.0–0.4.5, 0.4.6 and
# 0.4.6.post1, and in 0.4.6.post2, 0.4.6.post3, 0.4.6.post5 and 0.4.7–0.4.10 (FlagReleases
# compares the .postN).
PP_FROM = "0.4.6.post2"
FLAG_RELEASES = {
    name: FlagReleases(first=PP_FROM, source="sglang/srt/server_args.py, SGLang 0.4.6.post1 and "
                       "0.4.6.post2")
    for name in ("--pp-size", "--pipeline-parallel-size")
}
# --kv-cache-dtype: not in 0.2.10–0.2.13, first in 0.2.14 with choices ["auto", "fp8_e5m2"], the
# same in every release read up to 0.4.1.post5 (0.2.15, 0.3.0–0.3.6, 0.4.0, 0.4.0.post1/.post2,
# 0.4.1–0.4.1.post5); 0.4.1.post6 adds "fp8_e4m3" (["auto", "fp8_e5m2", "fp8_e4m3"], as in
# 0.4.1.post7; 0.5.23 still lists it, sglang/srt/arg_groups/fields/model.py). No release takes a
# bare "fp8": before 0.4.1.post6 the FP8 KV cache is E5M2 only (kv_cache_dtype_arg).
KV_E4M3_FROM = "0.4.1.post6"
FLAG_RELEASES["--kv-cache-dtype"] = FlagReleases(
    first="0.2.14", source="sglang/srt/server_args.py, SGLang 0.2.13 and 0.2.14",
    values={"fp8_e4m3": ValueFrom(KV_E4M3_FROM, before="fp8_e5m2", source="sglang/srt/"
                                  "server_args.py choices, SGLang 0.4.1.post5 and 0.4.1.post6")})
BOOLEAN_FLAGS = frozenset({
    "--trust-remote-code", "--disable-cuda-graph", "--enable-torch-compile",
    "--enable-metrics", "--disable-radix-cache", "--enable-mixed-chunk",
    "--disable-custom-all-reduce", "--skip-tokenizer-init", "--enable-expert-parallel",
    "--enable-hierarchical-cache",
})


def _runtime(dep: Deployment, d: Defaults) -> tuple[Deployment, Deployment]:
    """The deployments whose forward pass and decode graphs SGLang runs: chunked-prefill
    tokens, and decode graphs up to --cuda-graph-max-bs."""
    # under DP attention each rank prefills --chunked-prefill-size // dp tokens a step
    # (server_args.py _handle_data_parallelism, after the fraction is set)
    chunk = ENGINE.rank_batched_tokens(dep, d.chunked_prefill)
    run = dep.model_copy(update={"max_num_batched_tokens": chunk,
                                 "max_num_seqs": min(d.decode_graph_bs * 2, 4096)})
    return run, run.model_copy(update={"max_num_seqs": d.decode_graph_bs})


# --max-prefill-tokens default (SGLang 0.5.6.post2 python/sglang/srt/server_args.py
# ServerArgs.max_prefill_tokens): prefill tokens one scheduling step may admit
MAX_PREFILL_TOKENS = 16384

# Latency model (kvplan/perf/step.py). Coefficients fitted by benchmarks/perf_fit.py →
# benchmarks/data/perf_fit.json ("coefficients"; method and leave-one-group-out errors in
# docs/performance.md). All are shared with vLLM in the fit, the request overheads too: SGLang's
# own is not identified by its two groups, one prefill-first, one mixed-chunk (perf_fit.py fit();
# request_overhead_ms from a plain vLLM server, dynamo_front_end_ms for the rows served through
# Dynamo, which no plan carries); `perf_fit.py --check` checks these equal the committed fit.
# Calibrated releases: those with rows in benchmarks/data/perf_calibration.csv. Batching style
# (SGLang docs): a prefill batch runs while decoding pauses (lock-step waves, so burst_share, the
# mixed style's share of a burst queue, does not act on SGLang's TTFT); --enable-mixed-chunk turns
# it mixed (launch_batching).
CALIBRATION = Calibration(
    style="separate",
    coefficients=Coefficients(gemm_efficiency=0.561, bandwidth_efficiency=1.0,
                              step_overhead_ms=5.0515, layer_overhead_us=0.0,
                              seq_overhead_us=28.9102, allreduce_latency_us=0.0003,
                              request_overhead_ms=34.0309, burst_share=0.1768,
                              dynamo_front_end_ms=30.3475),
    versions=("0.5.1.post1", "0.5.6.post2", "0.5.8.post1"),
    # routed experts: SGLang's own Triton fused_moe (python/sglang/srt/layers/moe/
    # fused_moe_triton), timed per GPU in aiconfigurator's SGLang 0.5.9 tables (perf/moe_gemm.py)
    moe_kernels="sglang-triton-fused-moe",
    # --- bwmxfp4 --- gpt-oss's MXFP4 experts on SM100/SM103: server_args.py picks
    # moe_runner_backend "flashinfer_mxfp4" for GptOssForCausalLM on SM100 (is_sm100_supported),
    # and quantization/mxfp4.py Mxfp4MoEMethod.apply quantizes the activations to MXFP8
    # (mxfp8_quantize) under the default --flashinfer-mxfp4-moe-precision "default" ("bf16"
    # keeps them bf16) before FlashInfer's trtllm_fp4_block_scale_moe: FP4 × FP8 MMAs at the
    # FP8 rate. SM120 (triton_kernel or flashinfer_mxfp4 by release) not verified: not named
    mxfp4_expert_dtype=(("Blackwell", "fp8"), ("Blackwell Ultra", "fp8")))


def _from_checkpoint(dep: Deployment) -> bool:
    """The KV dtype is the one the checkpoint declares: the engine's auto picks it, no flag."""
    return dep.sources.get("kv_cache_dtype") == "model-config"


class SglangEngine(Engine):
    name = "sglang"
    label = "SGLang"
    newest_version = NEWEST_MODELLED
    flags = knob_flags(CLI_FLAGS, (
        "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_model_len",
        "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_dtype",
        "dtype", "quantization", "max_total_tokens", "enable_lora", "max_loras", "max_lora_rank",
        "max_cpu_loras", "lora_paths", "lora_target_modules"))
    settings = {"speculative_config": "--speculative-algorithm and its flags (combine_spec_flags)",
                "enable_expert_parallel": "--ep-size over every GPU of the MoE group "
                "(combine_parallel_flags)"}
    # What SGLang does instead of knobs it lacks (python/sglang/srt/server_args.py: `parser.
    # add_argument("--disable-cuda-graph", action="store_true")` in 0.4–0.5 add_cli_args, the
    # ServerArgs fields page_size ("The number of tokens in a page.", default 1 as planned:
    # HICACHE_PAGE_SIZE), enable_hierarchical_cache and hicache_size ("The size of host KV cache
    # memory pool in gigabytes"), sgl-project/sglang@001067ff; arg_groups/fields/memory.py in
    # the 0.5.23 wheel)
    instead = {
        "enforce_eager": "--disable-cuda-graph (kvplan does not model it: the plan keeps "
                         "SGLang's CUDA graphs)",
        "block_size": "--page-size (kvplan plans SGLang's KV pool at its default page size, 1)",
        **dict.fromkeys(("kv_offloading_size", "host_cache_size"),
                        "--enable-hierarchical-cache with --hicache-size (GB of host KV per GPU), "
                        "which kvplan plans"),
    }
    syntax = DeploySyntax(cli_flags=CLI_FLAGS, boolean_flags=BOOLEAN_FLAGS,
                          modules=("sglang.launch_server",), image_versions=(_IMAGE,),
                          pip_version=_PIP, known_flags=known_flags.SGLANG,
                          executables=(("sglang", "serve"),),  # sglang/cli/main.py (0.5+)
                          positional_model=True,  # `sglang serve MODEL` (sglang/cli/serve.py)
                          combine=combine_flags,
                          flag_releases=FLAG_RELEASES,  # --- flagrel ---
                          # --- schemas (#23) --- lmsysorg/sglang image (tag v + release); Dynamo's
                          # dynamo.sglang backend, nvcr.io/nvidia/ai-dynamo/sglang-runtime
                          image="lmsysorg/sglang:v{v}", dynamo_module="dynamo.sglang",
                          dynamo_image="nvcr.io/nvidia/ai-dynamo/sglang-runtime:{v}",
                          rocm_image=rocm_image,
                          # --- emitport --- ServerArgs.port 30000 (python/sglang/srt/
                          # server_args.py, in every snapshot read, the newest
                          # sgl-project/sglang@001067ff)
                          port=30000,
                          # ServerArgs.host "127.0.0.1" (server_args.py 0.4.3-0.5.9;
                          # arg_groups/arg_utils.py 0.5.23, PyPI wheels)
                          loopback_host=True,
                          # --- emitshm --- its multi-GPU Kubernetes example mounts an emptyDir
                          # of medium Memory, sizeLimit 10Gi, at /dev/shm (docker/k8s-sglang-
                          # distributed-sts.yaml, sgl-project/sglang@0e6ed14d)
                          shm_size="10Gi")
    calibration = CALIBRATION
    # --- whatif --- the kernels SGLang serves each checkpoint format with, a real checkpoint's
    # or a what-if's (Engine.checkpoint_kernels): python/sglang/srt/layers/quantization/
    # __init__.py names and each config's get_min_capability, in SGLang's order of preference:
    # * nvfp4: modelopt_quant.py ModelOptFp4Config 100 (Blackwell only: the NVFP4 Marlin
    #   fallback of PR #19652 was reverted by PR #22047, 2026-04).
    # * mxfp4 (gpt-oss's own layout): mxfp4.py Mxfp4Config 80 (sgl-project/sglang@0043c43a).
    #   AMD Quark's MXFP4 (the mxfp4 what-if) is served on ROCm only and not modelled here.
    # * w8a8: compressed_tensors W8A8Int8 75.
    # * awq: awq.py AWQMarlinConfig 80, else AWQConfig 75 (override_quantization_method keeps
    #   "awq" where check_marlin_supported fails; sgl-project/sglang@0149944f).
    checkpoint_kernels = {
        "nvfp4": (Kernel("modelopt_fp4", (10, 0)),),
        "mxfp4": (Kernel("mxfp4", (8, 0)),),
        "w8a8": (Kernel("compressed-tensors", (7, 5)),),
        "awq": (Kernel("awq_marlin", (8, 0)), Kernel("awq", (7, 5))),
    }

    def moe_layout(self, dep: Deployment) -> tuple[bool, int, bool]:
        """DP attention shares the MoE layers; tokens go all-to-all only through DeepEP (else
        SGLang gathers every DP rank's tokens and scatters the outputs: dp_attention.py)."""
        shared = SP.dp_attention(dep)
        ep = SP.group_size(dep) if dep.enable_expert_parallel else 1
        return shared, ep, dep.moe_a2a_backend == "deepep" and SP.group_size(dep) > 1

    def moe_token_split(self, dep: Deployment, m: ModelSpec | None = None) -> TokenSplit:
        """With an a2a backend the MoE layers run on SCATTERED tokens: the attention output is
        reduce-scattered over the attention TP group and all-gathered before the next
        attention (python/sglang/srt/layers/communicator.py LayerScatterModes._compute_mlp_mode
        and CommunicateWithAllReduceAndLayerNormFn._scatter_hidden_states_and_residual, 0.4.9
        and 0.5.6.post2; 0.5.23 layer_boundary/factories.py _ffn_on_rank_rows with
        moe/utils.py is_moe_input_scattered_across_dp_ranks). Without one (FULL) the MoE
        gathers every DP rank's tokens once ("gathered": dp_gather_partial from the
        attention's partial sums, dp_attention.py _dp_gather_via_all_gather reduce-scatters
        them over the attention TP group before the all-gather over the G GPUs)."""
        if dep.moe_a2a_backend == "deepep":
            return "scatter"
        return "gathered" if SP.dp_attention(dep) else ""

    def dense_mlp_mode(self, dep: Deployment) -> DenseMlpMode:
        """Under DP attention a dense layer's MLP runs in ScatterMode.FULL ("full"), with or
        without an a2a backend, unless --moe-dense-tp-size 1 (SCATTERED: "local"):
        LayerScatterModes._compute_mlp_mode, python/sglang/srt/layers/communicator.py 0.4.9,
        0.4.10.post2, 0.5.1, 0.5.6.post2; in 0.5.23 layer_boundary/factories.py
        _ffn_on_rank_rows (dense: is_dense_ffn_fully_dp, layout.py: moe_dense_tp_size == 1).
        FULL spans tp_size = G GPUs (CommunicateContext.process_group_sizes):
        CommunicateWithAllReduceAndLayerNormFn._gather_hidden_states_and_residual
        dp_gather_partial's the attention output into the D ranks' buffer, DeepseekV2MLP runs
        at tp_size G (models/deepseek_v2.py, mlp_tp_size None), and
        CommunicateSummableTensorPairFn._scatter_hidden_states hands each rank its rows back.
        With --moe-dense-tp-size 1 the MLP is whole (mlp_tp_rank, mlp_tp_size = 0, 1) and runs
        on the GPU's own 1/T of the rows (_scatter_hidden_states_and_residual)."""
        if not SP.dp_attention(dep):
            return ""
        # a Deployment built by hand carries the base EngineOptions: the default
        return "local" if getattr(dep.options, "moe_dense_tp_size", None) == 1 else "full"

    def dp_gather_all_reduce(self, dep: Deployment) -> GatherAllReduce:
        """DpPaddingMode (python/sglang/srt/layers/dp_attention.py): SUM_LEN gathers by
        _dp_gather_via_all_reduce (the buffer zeroed but for the rank's rows, all-reduced over
        the G GPUs) and the layer's output is all-reduced (use_reduce_scatter only with
        MAX_LEN: LayerCommunicator.should_use_reduce_scatter), MAX_LEN by all_gather_into_tensor
        and dp_reduce_scatter_tensor. 0.4.9 - 0.4.9.post3 have only the all-reduce
        ("always"); 0.4.9.post4 - 0.5.2 pick by cost for every batch (MAX_LEN when sum × 2 >
        max × D: kvplan's ranks are balanced, ""); 0.5.3 - 0.5.23 return SUM_LEN for any batch
        with an extend (get_dp_padding_mode(is_extend_in_batch, ...)): "prefill". Not
        modelled: 0.5.23's SUM_LEN for decode batches without an a2a backend whose buffer fits
        the custom all-reduce's workspace (_decode_sum_len_fits_custom_all_reduce, one node)."""
        if not SP.dp_attention(dep):
            return ""
        text = dep.engine_version or NEWEST_MODELLED
        v = parse_version(text)
        post = re.search(r"\.post(\d+)", text)
        if (v, int(post.group(1)) if post else 0) < DP_MAX_LEN_FROM:
            return "always"
        return "prefill" if v >= DP_EXTEND_SUM_LEN_FROM else ""

    def rank_batched_tokens(self, dep: Deployment, tokens: int) -> int:
        """--chunked-prefill-size // dp under DP attention (_handle_data_parallelism)."""
        return max(1, tokens // dep.data_parallel_size) if SP.dp_attention(dep) else tokens
    # python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector, v0.4–0.5): gauges
    # sglang:num_queue_reqs (requests in the waiting queue) and sglang:token_usage
    autoscale_metrics = {"queue": "sglang:num_queue_reqs", "kv_usage": "sglang:token_usage"}

    def launch_batching(self, flags: Sequence[str], budget: int) -> dict[str, Any]:
        """--enable-mixed-chunk (SGLang 0.5.6.post2, python/sglang/srt/managers/scheduler.py
        get_new_batch_prefill: with chunked prefill on, a prefill batch is mixed with the
        running decodes, mix_with_running) turns the prefill-first waves into mixed steps that
        admit whole prompts (schedule_policy.py PrefillAdder.add_one_req). A step's prefill
        tokens are capped by --chunked-prefill-size (`budget`) and by --max-prefill-tokens
        (server_args.py: default 16384), less the running requests' decode tokens
        (PrefillAdder: mixed_with_decode_tokens = running_bs)."""
        if "--enable-mixed-chunk" not in flags:
            return {}
        max_prefill = MAX_PREFILL_TOKENS
        if "--max-prefill-tokens" in flags:
            i = list(flags).index("--max-prefill-tokens")
            max_prefill = int(flags[i + 1])
        return MC.mixed_batching(budget, max_prefill)

    def batching(self, dep: Deployment, budget: int) -> dict[str, Any]:
        """The mixed batching of launch_batching when the plan has --enable-mixed-chunk
        (at the default --max-prefill-tokens, which kvplan does not take), unless SGLang turns
        it off (speculative decoding: sglang_mixed_chunk.active)."""
        if not MC.active(opts(dep).enable_mixed_chunk, dep):
            return {}
        return MC.mixed_batching(budget, MAX_PREFILL_TOKENS)

    def draft_shares_lm_head(self, method: str) -> bool:
        """EAGLE and NEXTN (MTP) drafts read the target's LM head (SGLang's draft models)."""
        return method in ("eagle", "mtp")

    def _defaults(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment) -> Defaults:
        mem = (gpu_mem_mib(gpu, dep.gpu_total_bytes) if not dep.user_set("gpu_total_bytes")
               else dep.gpu_total_bytes // MiB)
        chunked = dep.max_num_batched_tokens if dep.user_set("max_num_batched_tokens") else None
        return defaults(parse_version(dep.engine_version), m, mem, SP.group_size(dep),
                        dep.pipeline_parallel_size, chunked, opts(dep).cuda_graph_max_bs,
                        parallel=dep)

    # --- fp8cap --- python/sglang/srt/layers/quantization/fp8.py Fp8Config.get_min_capability:
    # 80 on CUDA (MXFP8: 100); model_loader/loader.py _get_quantization_config raises below it
    # (sgl-project/sglang@005cbe0e; the check vLLM's loader had, which SGLang's adapts)
    fp8_refusal = ("SGLang refuses them when it loads the model ('The quantization method fp8 is "
                   "not supported for the current GPU. Minimum capability: 80')")

    checkpoint_kv_override = (
        "SGLang takes --kv-cache-dtype bf16 over the checkpoint's from the release after "
        "sgl-project/sglang PR #11749 (merged 2025-10-17); earlier releases refuse the value "
        "(server_args.py choices)")

    def checkpoint_kv_dtype(self, m: ModelSpec, version: str) -> str | None:
        """SGLang's `--kv-cache-dtype auto` takes fp8_e4m3 when the checkpoint's quant config
        says kv_cache_quant_algo FP8 (srt/model_executor/model_runner.py
        configure_kv_cache_dtype; ModelOptFp8Config/ModelOptFp4Config read it from
        hf_quant_config.json or config.json's kv_cache_scheme, srt/layers/quantization/
        modelopt_quant.py). Added by PR #3223 (merged 2025-01-30): from 0.4.3 here, the first
        release after it (the exact first release was not pinned)."""
        q = m.quantization
        if q is None or q.kv_cache_quant_algo != "FP8" or parse_version(version) < (0, 4, 3):
            return None
        return "fp8_e4m3"

    def era(self, version: str) -> tuple[str, list[Problem]]:
        v = parse_version(version)
        problems = []
        if TIER_FROM <= v < LEGACY_BEFORE:
            problems.append(Problem(
                code="engine-version-boundary-uncertain", severity="info",
                message=f"sglang {version}: the GPU-tier mem-fraction rule read at 0.5.0rc0 is "
                "applied from 0.4.10 to 0.5.2; its exact first release was not pinned"))
        return "", problems

    def eras(self) -> list[tuple[str, str]]:
        return [("sglang 0.4.x accounting", "0.0.0"),
                ("sglang 0.4.10–0.5.2 accounting", ".".join(map(str, TIER_FROM))),
                (f"sglang {NEWEST_MODELLED} accounting", ".".join(map(str, LEGACY_BEFORE)))]

    def resolve(self, m: ModelSpec, gpu: GpuSpec, layout: Layout, knobs: Knobs,
                version: str) -> Deployment:
        sources: dict[str, Source] = dict(layout.sources)
        model_ctx = context_length(m)
        ctx = knobs.max_model_len or model_ctx
        if ctx > model_ctx:
            raise InvalidInputError(f"--context-length {ctx} exceeds the model's {model_ctx} "
                                    "tokens",
                                    hint="SGLang refuses it unless "
                                    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
                                    code="max-model-len-above-model-maximum", knob="max_model_len")
        default_sources: tuple[tuple[str, Source], ...] = (
            ("max_model_len", "model-config"), ("max_num_batched_tokens", "engine-default"),
            ("gpu_memory_utilization", "engine-default"), ("max_num_seqs", "engine-default"),
            ("max_total_tokens", "engine-default"), ("enable_prefix_caching", "engine-default"))
        for key, default_source in default_sources:
            sources[key] = "cli" if getattr(knobs, key) is not None else default_source
        spec = resolve_speculative(m, knobs.speculative_config, sources)
        own = _own_options(knobs, sources)
        if own.get("enable_mixed_chunk"):
            MC.check_release(parse_version(version), version, layout.pipeline_parallel_size)
        lora = resolve_lora(knobs, sources)
        paths = lora.pop("lora_paths", None)
        parallel = SP.resolve_parallel(m, knobs, sources)
        check_spec_dp_attention(spec, data_parallel_size=layout.data_parallel_size,
                                dp_attention=parallel["enable_dp_attention"],
                                expert_parallel=parallel["enable_expert_parallel"])
        q = layout.quant
        dep = Deployment(
            **parallel,
            engine=self.name, engine_version=version,
            tensor_parallel_size=layout.tensor_parallel_size,
            pipeline_parallel_size=layout.pipeline_parallel_size,
            data_parallel_size=layout.data_parallel_size, dtype=layout.dtype,
            # SGLang's choices are fp8_e4m3 / fp8_e5m2 (server_args.py): a generic fp8 runs as
            # e4m3 (e5m2 before KV_E4M3_FROM), and the plan's inputs say so (what `kvplan check`
            # reads from its line)
            kv_cache_dtype=self.kv_cache_dtype_arg(layout.kv_cache_dtype, version),
            quantization=q.method if q else None, quant=q,
            max_model_len=ctx, max_num_seqs=knobs.max_num_seqs or 1,
            max_num_batched_tokens=knobs.max_num_batched_tokens or 1,
            max_total_tokens=knobs.max_total_tokens, gpu_memory_utilization=1.0, block_size=1,
            enable_prefix_caching=knobs.enable_prefix_caching is not False,
            **lora, options=SglangOptions(**own, lora_paths=paths),
            gpu_total_bytes=layout.gpu_total_bytes,
            other_processes_bytes=layout.other_processes_bytes, speculative_config=spec,
            sources=sources)
        d = self._defaults(m, gpu, dep)
        return dep.model_copy(update={
            "era": d.era, "gpu_memory_utilization": knobs.gpu_memory_utilization or d.mem_fraction,
            "max_num_batched_tokens": d.chunked_prefill})

    def memory(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment) -> MemoryResult:
        d = self._defaults(m, gpu, dep)
        tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
        # MoE layers span --tp-size GPUs (T × D under DP attention); attention and the KV cell
        # one attention group of T (sglang_parallel)
        group = SP.group_size(dep)
        wm = heaviest_stage(m, tp=group, pp=pp, dtype=dep.dtype, quant=dep.quant,
                            ep=SP.expert_parallel_size(m, dep))
        wm = replace(wm, reserved_bytes=wm.reserved_bytes + SP.extra_weight_bytes(m, dep),
                     tensor_bytes=wm.tensor_bytes + SP.extra_weight_bytes(m, dep))
        a2a = SP.a2a_buffer_bytes(m, dep)
        run, graphs_dep = _runtime(dep, d)
        activation = forward.activation_bytes(m, run, last_stage=True)
        ctx = int(dep.max_model_len or context_length(m))
        draft = draft_memory(m, dep, parse_version(dep.engine_version))
        graphs = forward.cudagraph_bytes(graphs_dep, math.ceil(m.num_layers / pp) + draft.layers)
        lora_p = (lora_pool(m, tp=tp, max_loras=dep.max_loras, rank=dep.max_lora_rank,
                          modules=tuple(dep.lora_target_modules or LORA_LINEAR), dtype=dep.dtype)
                if dep.enable_lora else None)
        # the LoRA pool is allocated before the KV pool is sized: it counts like weights
        lora_bytes = lora_p.gpu_bytes if lora_p else 0
        # SGLang measures free memory before loading: other processes' memory is gone from it
        res = plan_memory(m, total_bytes=dep.gpu_total_bytes - dep.other_processes_bytes, tp=tp,
                          weights_bytes=wm.reserved_bytes + lora_bytes,
                          kv_dtype=dep.kv_cache_dtype, mem_fraction=dep.gpu_memory_utilization,
                          ctx=ctx, chunked=d.chunked_prefill,
                          runtime_bytes=activation + graphs + a2a + draft.weights_bytes,
                          max_total_tokens=dep.max_total_tokens, swa_pool=d.swa_pool, gpu=gpu,
                          draft_layers=draft.layers if draft.in_cell else 0, group=group,
                          ctx_given=dep.user_set("max_model_len"))
        spec = None
        if dep.speculative_config is not None:
            version = parse_version(dep.engine_version)
            plain_cell = cell_bytes(m, tp, dep.kv_cache_dtype, d.swa_pool)[0]
            pool = res.tokens
            reqs = res.max_running_requests
            if not draft.in_cell and draft.layers:
                printed, pool, outside = legacy_draft_pool(m, dep, res, draft, version)
                res = plan_memory(
                    m, total_bytes=dep.gpu_total_bytes - dep.other_processes_bytes, tp=tp,
                    weights_bytes=wm.reserved_bytes + lora_bytes, kv_dtype=dep.kv_cache_dtype,
                    mem_fraction=dep.gpu_memory_utilization, ctx=ctx, chunked=d.chunked_prefill,
                    runtime_bytes=activation + graphs + a2a + draft.weights_bytes + outside,
                    max_total_tokens=dep.max_total_tokens, swa_pool=d.swa_pool, gpu=gpu,
                    group=group, ctx_given=dep.user_set("max_model_len"))
                reqs = max_running_requests(printed, ctx) if printed else 0
                res = replace(res, tokens=printed)
                if version >= SPEC_HEADROOM_BOTH_FROM and printed:
                    reqs = min(spec_max_running_per_rank(dep), printed)
            elif version >= SPEC_HEADROOM_BOTH_FROM and res.tokens:
                reqs = min(spec_max_running_per_rank(dep), res.tokens)
            res = replace(res, max_running_requests=reqs)
            spec = speculative_section(dep, draft, res, plain_cell, pool)
            res = replace(res,
                          problems=res.problems + speculative_problems(dep, draft, spec, version))
        # the host pool mirrors the target's device pool only (its cell without the draft)
        target_cell = cell_bytes(m, tp, dep.kv_cache_dtype, d.swa_pool)[0]
        offload, hicache_problems = hicache_section(m, dep, replace(res, cell_bytes=target_cell))
        stage = StageBreakdown(
            layers=m.num_layers // pp,
            weights_bytes=wm.reserved_bytes + draft.weights_bytes + lora_bytes,
            weights_tensor_bytes=wm.tensor_bytes + draft.tensor_bytes + lora_bytes,
            activation_bytes=activation, non_torch_bytes=context_bytes(group, gpu),
            cudagraph_bytes=graphs + a2a, kv_cache_bytes=res.rest_bytes, num_blocks=res.tokens,
            bytes_per_block=res.cell_bytes)
        return memory_result(
            gpu, dep, era=d.era,
            budget_bytes=math.floor(max(dep.gpu_memory_utilization, 0.0)
                                    * max(res.free_before_bytes, 0)),
            stages=[stage], cudagraph_in_budget=False,
            estimated=["activation_bytes", "non_torch_bytes", "cudagraph_bytes"],
            bytes_per_token=res.cell_bytes, block_size=1, num_blocks=res.tokens, reserved_blocks=0,
            tokens=res.tokens, max_model_len=ctx, max_concurrency=res.tokens / ctx,
            max_model_len_fit=min(context_length(m), res.tokens), fits=res.fits,
            problems=(res.problems + hicache_problems
                      + (lora_problems(dep, lora_p) if lora_p else [])
                      + MC.problems(opts(dep).enable_mixed_chunk, dep)),
            offload=offload, lora=lora_section(dep, lora_p),
            notes=memory_notes(
                budget=f"mem_fraction_static {dep.gpu_memory_utilization:g} × free memory "
                "before loading" if dep.gpu_memory_utilization > 0 else "none: the default "
                "mem_fraction_static formula leaves nothing on this device",
                activation="estimate: must fit in the (1 − fraction) reserve",
                non_torch="estimate: CUDA context, NCCL", kv="the KV pool",
                kv_tokens_label="max_total_num_tokens",
                cudagraph="estimate, outside the fraction" + (
                    f"; with DeepEP's all-to-all buffer ({a2a / GiB:.2f} GiB, sized from "
                    "DeepEP's config)" if a2a else "")),
            request_blocks=lambda length: length, speculative=spec,
            engine_defaults={"max_num_seqs": res.max_running_requests or None}
            | ({"gpu_memory_utilization": None} if dep.gpu_memory_utilization <= 0 else {}))

    def fraction_needed(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment, res: MemoryResult,
                        blocks: int) -> float | None:
        """(tokens × cell + weights) / free_before_load, in thousandths rounded up."""
        st = res.stages[0]
        free_before = dep.gpu_total_bytes - dep.other_processes_bytes - st.non_torch_bytes
        weights = st.weights_bytes - _draft_weights(res)  # the draft loads outside the fraction
        need = blocks * res.kv_cache.bytes_per_token + weights
        if free_before <= 0:
            return None  # nothing is free before loading: no fraction holds anything
        return math.ceil(need / free_before * 1000) / 1000

    def fraction_ceiling(self, dep: Deployment, res: MemoryResult) -> float:
        """The (1 − f) remainder must hold the activations and CUDA graphs."""
        st = res.stages[0]
        free_before = dep.gpu_total_bytes - dep.other_processes_bytes - st.non_torch_bytes
        return math.floor((free_before - st.activation_bytes - st.cudagraph_bytes
                           - _draft_weights(res)) / free_before * 1000) / 1000

    def tp_flag(self, dep: Deployment, tp: int) -> str:
        """--tp-size counts every GPU of the group: T × D under DP attention (sglang_parallel)."""
        return SP.tp_flag(dep, tp)

    def node_launch(self, command: str, nodes: int, gpus_per_node: int, version: str
                    ) -> list[NodeLaunch] | None:
        """The same server line on every node with --nnodes/--node-rank/--dist-init-addr."""
        return multinode.sglang(command, nodes)

    def kv_cache_dtype_arg(self, kv_dtype: str, version: str | None = None) -> str:
        """--kv-cache-dtype takes fp8_e4m3 and fp8_e5m2, not a bare fp8 (server_args.py
        choices): a generic fp8 runs as E4M3, or as E5M2 in the releases before KV_E4M3_FROM,
        whose only FP8 choice it is (the same byte a value, so the same plan)."""
        if kv_dtype != "fp8":
            return kv_dtype
        refused = FLAG_RELEASES["--kv-cache-dtype"].value_refused(
            "fp8_e4m3", version or NEWEST_MODELLED)
        return refused.before if refused else "fp8_e4m3"

    def command(self, ref: str, dep: Deployment, rec: Recommendations, workload: Workload,
                revision: str | None) -> str:
        args = ["python", "-m", "sglang.launch_server", "--model-path", ref]
        args += SP.launch_flags(dep)  # --tp-size/--dp-size, DP attention, --ep-size, DeepEP
        if dep.pipeline_parallel_size != 1:
            args += [self.flags["pipeline_parallel_size"], str(dep.pipeline_parallel_size)]
        if rec.max_model_len.value:
            args += [self.flags["max_model_len"], str(rec.max_model_len.value)]
        if rec.gpu_memory_utilization.value:
            args += [self.flags["gpu_memory_utilization"], f"{rec.gpu_memory_utilization.value:g}"]
        has_workload = workload.sizes_batch()
        if rec.max_num_seqs.value and (has_workload or dep.user_set("max_num_seqs")):
            args += [self.flags["max_num_seqs"],
                     str(SP.launch_max_running(dep, int(rec.max_num_seqs.value)))]
        if (batched := batched_tokens_flag_value(rec, dep)) is not None:
            args += [self.flags["max_num_batched_tokens"], str(batched)]
        if dep.max_total_tokens:
            args += [self.flags["max_total_tokens"], str(dep.max_total_tokens)]
        if dep.kv_cache_dtype.startswith("fp8") and not _from_checkpoint(dep):
            args += [self.flags["kv_cache_dtype"],
                     self.kv_cache_dtype_arg(dep.kv_cache_dtype, dep.engine_version)]
        if dep.user_set("dtype"):
            args += [self.flags["dtype"], dep.dtype]
        if dep.user_set("quantization") and dep.quantization:
            args += [self.flags["quantization"], dep.quantization]
        args += option_flags(dep, CLI_FLAGS)  # the SglangOptions the user gave
        if not dep.enable_prefix_caching:
            args.append(RADIX_CACHE_OFF)
        if revision:
            args += ["--revision", revision]
        if dep.speculative_config is not None:
            args += spec_flags(dep.speculative_config)
        args += lora_flags(dep)
        return shlex.join(args)



def _draft_weights(res: MemoryResult) -> int:
    return res.speculative.draft_weights_bytes if res.speculative else 0


ENGINE = SglangEngine()
