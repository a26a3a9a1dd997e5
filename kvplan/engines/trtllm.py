"""TensorRT-LLM's KV-cache sizing, both runtimes, as pure functions (reference/TRTLLM_MEMORY.md).

TensorRT-LLM has two runtimes that size the KV pool differently:

* **PyTorch runtime** (LLM API `backend="pytorch"`: `trtllm-serve <hf model>`, the default
  backend of `trtllm-serve` in the version read, tensorrt_llm/commands/serve.py @00209af):
  a temporary KV pool is built, a dummy batch of `max_num_tokens` context tokens is run, and
  the peak (torch peak + memory used outside torch) is read. Then
  (tensorrt_llm/_torch/pyexecutor/_util.py, `KvCacheCreator` / early-2025
  `estimate_max_kv_cache_tokens`):

      budget = fraction × (total − peak + temporary KV pool)
             = fraction × (total − weights − activation peak − non-torch)

  (the temporary pool is part of the peak and is added back, so it cancels out); tokens =
  budget // bytes_per_token; a user `max_tokens` wins when smaller; the final manager
  allocates ceil(tokens / tokens_per_block) blocks (resource_manager.py
  `KVCacheManager.calculate_max_num_blocks`, `ceil_div`; TRT#6294: max_tokens 860308 →
  "Allocated … (860320)" = 26885 × 32).

* **Engine runtime** (built engines: `trtllm-build`, Triton `tensorrtllm` backend,
  `trtllm-serve <engine dir>`): the engine, its execution context (activations fixed at
  build time), runtime buffers and decoder buffers are allocated first; then
  (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp `calculateFreeMemBytes`,
  `calculateMaxNumBlocks`):

      budget = fraction × (cudaMemGetInfo free + memory-pool free)
      tokens = min(budget // bytes_per_token, max_tokens); blocks = ceil(tokens / tokens_per_block)

Both: multi-GPU ranks agree on the smallest pool (MPI allreduce MIN); bytes per token are
per rank (KV heads / TP, layers of this PP stage).

Eras differ in defaults (fraction 0.85 in the GptSession era, 0.9 later; tokens_per_block 64
for engines built by older `trtllm-build`, 32 later and in the PyTorch runtime) and in how
the PyTorch estimate is carried (tokens, then a byte budget from PR #5933). For models
without variable sliding windows the byte and token forms give the same pool.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from ..errors import InvalidInputError
from ..knobs import Knobs, Layout, compute_capability
from ..model.forward import activation_bytes as _forward_activation_bytes
from ..model.forward import cudagraph_bytes as _forward_cudagraph_bytes
from ..model.kv import kv_heads_per_gpu
from ..model.weights import pp_layer_ranges, weight_memory_per_stage
from ..model.whatif import MODELOPT, MODELOPT_FP8, KvSwitch, WhatIfFormat
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
    StageBreakdown,
    Workload,
)
from ..units import DTYPE_BYTES, GiB, cdiv
from ..versions import parse_version
from . import multinode
from . import trtllm_features as F
from . import trtllm_parallel as TP
from .base import (
    Calibration,
    Coefficients,
    DeploySyntax,
    Engine,
    Kernel,
    MemoryResult,
    batched_tokens_flag_value,
    engine_options,
    knob_flags,
    memory_notes,
    memory_result,
)
from .trtllm_features import request_kv_tokens
from .trtllm_options import knobs_from_options, parse_options_document, yaml_knob_fields

Runtime = Literal["pytorch", "engine"]
RUNTIMES: tuple[Runtime, ...] = ("pytorch", "engine")
NEWEST_MODELLED = "1.2.0"  # the 2026 source snapshots read (serve.py @00209af, _util.py @0004396)


# ----------------------------------------------------------------------------- eras


@dataclass(frozen=True)
class TrtllmEra:
    """A stretch of TensorRT-LLM releases with the same KV sizing for one runtime."""

    name: str
    runtime: Runtime
    first: tuple[int, int, int]
    default_fraction: float
    tokens_per_block: int  # default
    budget_unit: Literal["tokens", "bytes"]  # how the PyTorch estimate is carried
    block_rounding: Literal["ceil", "floor"]  # tokens → blocks
    pinned: bool  # True: the boundary was read in a dated source; False: inferred from logs
    source: str


ERAS: tuple[TrtllmEra, ...] = (
    # Engine runtime.
    TrtllmEra("engine GptSession (≤0.7)", "engine", (0, 0, 0), 0.85, 64, "tokens", "ceil", False,
              "docs/source/reference/memory.md @5a211b9 (GptSession era): 'by default allocate 85% "
              "of the remaining free GPU memory'; tensorrt_llm/plugin/plugin.py older "
              "_tokens_per_block 64. Boundary not pinned: the v0.8 log TRT#1400 needs a fraction "
              "≥ 0.89 on an 80 GB A100, so 0.85 ends by 0.8"),
    TrtllmEra("engine executor 0.8–0.16", "engine", (0, 8, 0), 0.9, 64, "tokens", "ceil", False,
              "cpp/include/tensorrt_llm/executor/executor.h KvCacheConfig::kDefaultGpuMemFraction "
              "0.9F; memory.md @7ff5302 '90%'; 64-token blocks in the 0.12 (Suite.md) and 0.13 "
              "(TRT#2268: 631 blocks only with 64) logs"),
    TrtllmEra("engine executor 0.17+", "engine", (0, 17, 0), 0.9, 32, "tokens", "ceil", False,
              "newer tensorrt_llm/plugin/plugin.py: _tokens_per_block 32 (with paged context FMHA "
              "on by default); 32-token blocks in the 0.19 RTX 5090 log and the 2025-03 "
              "tensorrtllm_backend multimodal.md sample. The 64→32 switch lies between 0.13 and "
              "0.18 (not pinned)"),
    # PyTorch runtime.
    TrtllmEra("pytorch estimate_max_kv_cache_tokens (0.17–0.20)", "pytorch", (0, 17, 0), 0.9, 32,
              "tokens", "ceil", False,
              "_torch/pyexecutor/_util.py (early 2025): available_kv_mem = (total − peak + "
              "alloc_kv_tokens × kv_size) × fraction; max_tokens = available // kv_size"),
    TrtllmEra("pytorch KvCacheCreator (0.21–1.0)", "pytorch", (0, 21, 0), 0.9, 32, "tokens", "ceil",
              False,
              "_util.py KvCacheCreator (mid 2025): same formula, 'device total memory' and "
              "'tmp kv_mem' in the log line; KvCacheConfig.tokens_per_block default 32 "
              "(llmapi/llm_args.py)"),
    TrtllmEra("pytorch byte budget (1.1)", "pytorch", (1, 1, 0), 0.9, 32, "bytes", "ceil", False,
              "PR #5933 (review July 2025): the estimate returns bytes ('Estimated max memory in "
              "KV cache'), written to kv_cache_config.max_gpu_total_bytes; _util.py @0004396 "
              "`int(available_kv_mem)`; resource_manager.py snapshots with VSWA and "
              "`calculate_max_num_blocks_from_cpp` still use "
              "math.ceil(max_tokens / tokens_per_block)"),
    TrtllmEra("pytorch byte budget, whole blocks down (1.2+)", "pytorch", (1, 2, 0), 0.9, 32,
              "bytes", "floor", False,
              "later resource_manager.py snapshots (ranks agree through Distributed.allreduce "
              "MIN): "
              "blocks_in_primary_pool = int(max_tokens // tokens_per_block). First release not "
              "pinned; 1.2 assumed"),
)


def select_era(version: str, runtime: Runtime = "pytorch") -> tuple[TrtllmEra, list[Problem]]:
    """The era for a release and runtime, with a warning when the boundary is not pinned or the
    version lies outside what was read."""
    if runtime not in RUNTIMES:
        raise InvalidInputError(f"unknown TensorRT-LLM runtime {runtime!r}",
                                hint="use 'pytorch' (HF checkpoints) or 'engine' (built engines)")
    v = parse_version(version)
    eras = [e for e in ERAS if e.runtime == runtime]
    problems: list[Problem] = []
    if runtime == "pytorch" and v < eras[0].first:
        problems.append(Problem(
            code="engine-version-not-modelled", severity="warning",
            message=f"TensorRT-LLM {version} predates the PyTorch backend (first seen early 2025, "
            f"~0.17); using the {eras[0].name} accounting."))
    era = [e for e in eras if e.first <= v][-1] if v >= eras[0].first else eras[0]
    if not era.pinned and not problems and v <= parse_version(NEWEST_MODELLED):
        problems.append(Problem(
            code="engine-version-boundary-uncertain", severity="info",
            message=f"TensorRT-LLM {version}: {era.name}; the era boundaries are inferred from "
            "dated logs and source snapshots, not from release tags."))
    return era, problems


# ----------------------------------------------------------------------------- defaults

# tensorrt_llm/builder.py BuildConfig @008b2b8: max_batch_size 2048, max_num_tokens 8192,
# max_input_len 1024, max_seq_len None (deduced from the model config); trtllm-serve takes its
# flag defaults from BuildConfig (commands/serve.py @00209af). The 02/2025 dynamo log prints
# "max_seq_len=131072, max_num_requests=2048, max_num_tokens=8192" for a Llama-3-class model.
DEFAULT_MAX_BATCH_SIZE = 2048
DEFAULT_MAX_NUM_TOKENS = 8192
# serve.py @00209af: --backend default "pytorch". Earlier serve.py snapshots (the first one is
# a single click command "trtllm-serve") have `--backend` Choice(["pytorch"]) default None,
# "Default is cpp path", so they need `--backend pytorch`. The release of the switch is not
# pinned in the snapshots read; 1.0 assumed.
PYTORCH_DEFAULT_FROM = (1, 0, 0)
# The first release with a trtllm-serve command (docs/source/release-notes.md, "TensorRT-LLM
# Release 0.15.0": "Added a `trtllm-serve` command to start a FastAPI based server"); before it
# the engines were served through Triton's tensorrtllm_backend or the examples' scripts.
SERVE_FROM = (0, 15, 0)


@dataclass(frozen=True)
class Defaults:
    max_batch_size: int
    max_num_tokens: int
    max_seq_len: int
    free_gpu_memory_fraction: float
    tokens_per_block: int
    backend_flag_needed: bool  # `--backend pytorch` must be passed to trtllm-serve
    sources: dict[str, str]


def default_max_seq_len(m: ModelSpec) -> int:
    """max_seq_len when not given: the model config's max_position_embeddings (BuildConfig
    max_seq_len None → deduced from the model config; serve.py help text)."""
    return m.max_position_embeddings or 2048


def defaults(version: str, m: ModelSpec, runtime: Runtime = "pytorch") -> Defaults:
    era, _ = select_era(version, runtime)
    v = parse_version(version)
    return Defaults(
        max_batch_size=DEFAULT_MAX_BATCH_SIZE, max_num_tokens=DEFAULT_MAX_NUM_TOKENS,
        max_seq_len=default_max_seq_len(m), free_gpu_memory_fraction=era.default_fraction,
        tokens_per_block=era.tokens_per_block,
        backend_flag_needed=runtime == "pytorch" and v < PYTORCH_DEFAULT_FROM,
        sources={
            "max_batch_size": "tensorrt_llm/builder.py BuildConfig @008b2b8",
            "max_num_tokens": "tensorrt_llm/builder.py BuildConfig @008b2b8",
            "max_seq_len": "model config max_position_embeddings (BuildConfig max_seq_len None)",
            "free_gpu_memory_fraction": era.source,
            "tokens_per_block": era.source,
        })


# ----------------------------------------------------------------------------- bytes per token


def kv_bytes(elements: int, kv_dtype: str) -> int:
    """Bytes of `elements` KV values: 1 B for fp8/int8, 2 for fp16/bf16; NVFP4 half a byte +
    one FP8 scale per 16 values (resource_manager.py `get_cache_bytes_per_token`,
    `calculate_scaling_factor_size_bytes`)."""
    if kv_dtype == "nvfp4":
        return cdiv(elements, 2) + cdiv(elements, 16)
    return elements * kv_dtype_bytes(kv_dtype)


def kv_dtype_bytes(kv_dtype: str) -> int:
    """1 for fp8/int8 KV, 2 for fp16/bf16, as `get_cache_size_per_token` counts them."""
    if kv_dtype in ("int8", "fp8", "fp8_e4m3", "fp8_e5m2"):
        return 1
    if kv_dtype in DTYPE_BYTES:
        return DTYPE_BYTES[kv_dtype]
    raise InvalidInputError(f"unknown KV cache dtype {kv_dtype!r}",
                            hint="use auto, fp8, int8, float16 or bfloat16")


def attention_layers(m: ModelSpec) -> list[int]:
    """Layers that hold KV: every layer whose token mixer is attention (full, sliding,
    chunked); linear-attention (Mamba / Gated DeltaNet) and MLP-only layers hold none here."""
    if not m.layer_types:
        return list(range(m.num_layers))
    return [i for i, k in enumerate(m.layer_types) if k in ("full", "sliding", "chunked")]


def bytes_per_token(m: ModelSpec, *, tp: int = 1, pp: int = 1, kv_dtype: str,
                    attention_dp: bool = False, stage: int | None = None) -> int:
    """KV bytes per token on one rank: dtype bytes × attention layers on the PP stage ×
    (KV heads / TP, not split under attention-DP) × head_dim × 2 (K and V); MLA: head_dim =
    kv_lora_rank + qk_rope_head_dim and kv_factor 1, replicated on every TP rank
    (_torch/pyexecutor/resource_manager.py `get_cache_size_per_token`; the C++ engine
    runtime's `calculateCacheSizePerTokenForSingleWindowSize`).

    Sliding-window layers count as full layers here: the estimate multiplies by the number of
    attention layers. `stage` None = the stage with the most attention layers."""
    attn = set(attention_layers(m))
    stages = [sum(1 for i in r if i in attn) for r in pp_layer_ranges(m.num_layers, pp)]
    layers = max(stages) if stage is None else stages[stage]
    if m.mla is not None:
        return kv_bytes(layers * (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim), kv_dtype)
    heads = m.num_kv_heads if attention_dp else kv_heads_per_gpu(m, tp)
    return kv_bytes(layers * heads * m.head_dim * 2, kv_dtype)


# ----------------------------------------------------------------------------- budgets


def pytorch_budget_from_peak(*, total_bytes: int, peak_bytes: int, temp_kv_bytes: int,
                             fraction: float) -> int:
    """`_cal_max_memory`: (total − peak + temporary KV) × fraction, in bytes (floor)."""
    return math.floor((total_bytes - peak_bytes + temp_kv_bytes) * fraction)


def pytorch_budget(*, total_bytes: int, weights_bytes: int, activation_bytes: int,
                   non_torch_bytes: int, fraction: float) -> int:
    """The same with the peak written out: peak = weights + activation + non-torch +
    temporary KV, so the temporary pool cancels."""
    peak = weights_bytes + activation_bytes + non_torch_bytes
    return pytorch_budget_from_peak(total_bytes=total_bytes, peak_bytes=peak, temp_kv_bytes=0,
                                    fraction=fraction)


def engine_free_bytes(*, total_bytes: int, engine_bytes: int, exec_context_bytes: int,
                      runtime_buffer_bytes: int, decoder_bytes: int, context_bytes: int) -> int:
    """cudaMemGetInfo free when the C++ KVCacheManager sizes its pool: everything the engine
    allocated first is gone (engine weights, execution context = TRT activations fixed at
    build, runtime buffers, decoder buffers, CUDA context)."""
    return (total_bytes - engine_bytes - exec_context_bytes - runtime_buffer_bytes
            - decoder_bytes - context_bytes)


def engine_budget(*, free_bytes: int, fraction: float, memory_pool_free_bytes: int = 0) -> int:
    """`calculateFreeMemBytes`: (free + memory the pool can give back) × fraction."""
    _check_fraction(fraction)
    return math.floor((free_bytes + memory_pool_free_bytes) * fraction)


@dataclass(frozen=True)
class Pool:
    estimate_tokens: int  # budget // bytes_per_token, before the cap
    tokens: int  # whole blocks
    blocks: int


def pool(budget_bytes: int, bytes_per_token: int, tokens_per_block: int,
         max_tokens: int | None = None, rounding: Literal["ceil", "floor"] = "ceil") -> Pool:
    """tokens = budget // bytes_per_token, min with max_tokens, then whole blocks: rounded UP
    in the engine runtime and the PyTorch runtime up to 1.1 (ceilDiv / math.ceil; TRT#224: the
    logged count is rounded up to a block multiple at allocation; TRT#6294: 860308 → 860320),
    DOWN in later PyTorch snapshots (int(max_tokens // tokens_per_block))."""
    if bytes_per_token <= 0 or tokens_per_block <= 0:
        raise InvalidInputError("bytes per token and tokens per block must be positive")
    est = max(0, budget_bytes) // bytes_per_token
    tokens = min(est, max_tokens) if max_tokens is not None else est
    blocks = cdiv(tokens, tokens_per_block) if rounding == "ceil" else tokens // tokens_per_block
    return Pool(est, blocks * tokens_per_block, blocks)


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class TrtllmResult:
    runtime: Runtime
    bytes_per_token: int
    block_size: int  # tokens_per_block
    bytes_per_block: int
    num_blocks: int
    tokens: int
    kv_bytes: int  # the pool (negative = shortfall: nothing left for the KV cache)
    budget_bytes: int  # fraction × what is left, before the max_tokens cap
    max_seq_len: int
    problems: tuple[Problem, ...]
    explanation: str  # one line: how the budget was formed
    max_batch_size: int | None = None  # the scheduler's request cap, when known

    @property
    def fits(self) -> bool:
        return self.kv_bytes > 0 and self.tokens >= self.max_seq_len


def _finish(runtime: Runtime, *, budgets: Sequence[int], per_tokens: Sequence[int],
            tokens_per_block: int, max_tokens: int | None, max_seq_len: int, tp: int,
            m: ModelSpec, explanation: str, extra: list[Problem],
            rounding: Literal["ceil", "floor"]) -> TrtllmResult:
    """Per PP stage pools; every rank takes the smallest (allreduce MIN of max_tokens)."""
    pools = [pool(b, bpt, tokens_per_block, max_tokens, rounding)
             for b, bpt in zip(budgets, per_tokens, strict=True)]
    worst = min(range(len(pools)), key=lambda s: pools[s].blocks)
    p, budget, bpt = pools[worst], budgets[worst], per_tokens[worst]
    kv = p.blocks * bpt * tokens_per_block if budget > 0 else budget
    problems = list(extra)
    if budget <= 0:
        problems.append(Problem(
            code="no-kv-memory", severity="error",
            message=f"nothing is left for the KV cache ({-budget / GiB:.2f} GiB short): "
            + ("weights, the profiling batch and non-torch memory exceed the GPU; lower "
               "--max_num_tokens or add GPUs (--tp_size)" if runtime == "pytorch" else
               "the engine, its activations and buffers exceed the GPU; rebuild with a smaller "
               "max_num_tokens / max_batch_size or more GPUs")))
    elif p.tokens < max_seq_len:
        problems.append(Problem(
            code="max-model-len-too-long", severity="error",
            message=f"the KV cache holds {p.tokens:,} tokens, fewer than one max_seq_len "
            f"({max_seq_len:,}) request: TensorRT-LLM reduces the attention window to what fits "
            "(or fails with --fail_fast_on_attention_window_too_large); lower --max_seq_len or "
            "raise --kv_cache_free_gpu_memory_fraction"))
    if m.mla is None and tp > m.num_kv_heads:
        problems.append(Problem(
            code="kv-heads-replicated", severity="info",
            message=f"tp {tp} > {m.num_kv_heads} KV heads: kvplan counts one replicated KV head "
            "per rank; TensorRT-LLM's estimate divides head_dim × kv_heads by tp, so its token "
            "estimate may be larger than the pool it can allocate"))
    if m.linear_attention is not None:
        problems.append(Problem(
            code="layout-not-modelled", severity="warning",
            message="recurrent-state (Mamba / linear attention) layers get a separate state pool "
            "in TensorRT-LLM that kvplan does not size; tokens count the attention layers only"))
    if m.sliding_window and any(k == "sliding" for k in m.layer_types):
        problems.append(Problem(
            code="sliding-window-counted-full", severity="info",
            message="sliding-window layers are counted as full layers, as the estimate does; "
            "newer releases split the pool per window size (VSWA), which kvplan does not model"))
    return TrtllmResult(runtime, bpt, tokens_per_block, bpt * tokens_per_block, p.blocks, p.tokens,
                        kv, budget, max_seq_len, tuple(problems), explanation)


def plan_pytorch(m: ModelSpec, era: TrtllmEra, *, total_bytes: int, weights_bytes: Sequence[int],
                 activation_bytes: int, non_torch_bytes: int, kv_dtype: str, fraction: float,
                 tp: int = 1, max_seq_len: int, tokens_per_block: int | None = None,
                 max_tokens: int | None = None, attention_dp: bool = False,
                 spec_bytes_per_token: Sequence[int] | None = None,
                 draft_bytes_per_token: Sequence[int] | None = None) -> TrtllmResult:
    """PyTorch runtime: per PP stage, budget = fraction × (total − weights − activation peak
    of the max_num_tokens dummy batch − non-torch); tokens = min(budget // bytes_per_token,
    max_tokens), whole blocks, the smallest stage wins. `weights_bytes` has one entry per PP
    stage (per rank).

    Speculative decoding (engines/trtllm_features.py): `draft_bytes_per_token` (two-model: the
    draft's own manager) is in the estimate's bytes per token and in the pool;
    `spec_bytes_per_token` (one-model: layers appended to the target's manager) only in the
    final manager's. In the token eras the estimate (target + draft only) becomes max_tokens
    and the final manager takes min(max_tokens, fraction × free / its bytes per token), free
    being total − weights − non-torch (the profiling activations are gone); in the byte eras
    the byte budget is divided by the final manager's bytes per token."""
    _check_fraction(fraction)
    pp = len(weights_bytes)
    bpts = [bytes_per_token(m, tp=tp, pp=pp, kv_dtype=kv_dtype, attention_dp=attention_dp, stage=s)
            for s in range(pp)]
    budgets = [pytorch_budget(total_bytes=total_bytes, weights_bytes=w,
                              activation_bytes=activation_bytes,
                              non_torch_bytes=non_torch_bytes,
                              fraction=fraction) for w in weights_bytes]
    w = max(weights_bytes)
    expl = (f"{era.name}: {fraction} × ({total_bytes / GiB:.2f} GiB total − "
            f"{w / GiB:.2f} weights − "
            f"{activation_bytes / GiB:.2f} activation peak − {non_torch_bytes / GiB:.2f} non-torch)"
            + (f", capped at max_tokens {max_tokens:,}" if max_tokens is not None else ""))
    spec = list(spec_bytes_per_token or [0] * pp)
    draft = list(draft_bytes_per_token or [0] * pp)
    if any(spec) or any(draft):
        est = [b + d for b, d in zip(bpts, draft, strict=True)]
        final = [e + x for e, x in zip(est, spec, strict=True)]
        if era.budget_unit == "tokens" and any(spec):
            cap = min(max(0, b) // e for b, e in zip(budgets, est, strict=True))
            max_tokens = cap if max_tokens is None else min(cap, max_tokens)
            budgets = [math.floor((total_bytes - wb - non_torch_bytes) * fraction)
                       if b > 0 else b for wb, b in zip(weights_bytes, budgets, strict=True)]
        bpts = final
    return _finish("pytorch", budgets=budgets, per_tokens=bpts,
                   tokens_per_block=tokens_per_block or era.tokens_per_block, max_tokens=max_tokens,
                   max_seq_len=max_seq_len, tp=tp, m=m, explanation=expl, extra=[],
                   rounding=era.block_rounding)


def plan_engine(m: ModelSpec, era: TrtllmEra, *, total_bytes: int, engine_bytes: Sequence[int],
                exec_context_bytes: int, runtime_buffer_bytes: int, decoder_bytes: int,
                context_bytes: int, kv_dtype: str, fraction: float, tp: int = 1, max_seq_len: int,
                tokens_per_block: int | None = None, max_tokens: int | None = None,
                memory_pool_free_bytes: int = 0) -> TrtllmResult:
    """Engine runtime: per PP stage, budget = fraction × (total − engine − execution context −
    runtime buffers − decoder − CUDA context + pool free); same pool rules. `engine_bytes` has
    one entry per PP stage (per rank)."""
    _check_fraction(fraction, engine=True)
    pp = len(engine_bytes)
    bpts = [bytes_per_token(m, tp=tp, pp=pp, kv_dtype=kv_dtype, stage=s) for s in range(pp)]
    frees = [engine_free_bytes(total_bytes=total_bytes, engine_bytes=e,
                               exec_context_bytes=exec_context_bytes,
                               runtime_buffer_bytes=runtime_buffer_bytes,
                               decoder_bytes=decoder_bytes,
                               context_bytes=context_bytes) for e in engine_bytes]
    budgets = [engine_budget(free_bytes=f, fraction=fraction,
                             memory_pool_free_bytes=memory_pool_free_bytes)
               for f in frees]
    expl = (f"{era.name}: {fraction} × {min(frees) / GiB:.2f} GiB free after the engine "
            f"({max(engine_bytes) / GiB:.2f} GiB), execution context "
            f"({exec_context_bytes / GiB:.2f}), runtime buffers "
            f"({runtime_buffer_bytes / GiB:.2f}), decoder ({decoder_bytes / GiB:.2f}) "
            f"and CUDA context ({context_bytes / GiB:.2f})"
            + (f", capped at max_tokens {max_tokens:,}" if max_tokens is not None else ""))
    return _finish("engine", budgets=budgets, per_tokens=bpts,
                   tokens_per_block=tokens_per_block or era.tokens_per_block, max_tokens=max_tokens,
                   max_seq_len=max_seq_len, tp=tp, m=m, explanation=expl, extra=[],
                   rounding=era.block_rounding)


def _check_fraction(fraction: float, engine: bool = False) -> None:
    """Both runtimes assert freeMemFraction < 1.0 (kvCacheManager.cpp; resource_manager.py
    `calculate_max_num_blocks`)."""
    if not 0 < fraction < 1:
        raise InvalidInputError(
            f"free_gpu_memory_fraction {fraction} must be in (0, 1): TensorRT-LLM asserts "
            "'freeMemFraction … must be smaller than 1.0'", hint="its default is 0.9")


# ----------------------------------------------------------------------------- estimates
# Used for end-to-end plans only; each is labelled an estimate.

# Memory used outside torch before and during profiling (CUDA context, cuBLAS workspaces; NCCL
# at TP > 1): the vLLM H200 figure and the SGLang TP8 log's NCCL increment, as TGI's module
# uses them. Estimates, not TensorRT-LLM measurements.
CONTEXT_BYTES_TP1 = int(0.70 * GiB)
CONTEXT_BYTES_TP_EXTRA = int(1.92 * GiB)


def non_torch_estimate(tp: int) -> int:
    """Estimate of the non-torch memory in the profiled peak (CUDA context, + NCCL at TP > 1).
    CUDA graphs are not included."""
    return CONTEXT_BYTES_TP1 + (CONTEXT_BYTES_TP_EXTRA if tp > 1 else 0)


def dummy_requests(max_num_tokens: int, max_seq_len: int) -> int:
    """Requests of the profiling batch: prompts of min(max_num_tokens, input length) tokens
    until max_num_tokens are covered (_util.py `_create_dummy_context_requests`)."""
    return cdiv(max_num_tokens, max(1, min(max_num_tokens, max_seq_len)))


def activation_estimate(m: ModelSpec, *, tp: int, dtype: str, max_num_tokens: int,
                        max_seq_len: int, last_stage: bool = True) -> int:
    """Estimate of the dummy batch's torch peak above the weights: kvplan's vLLM forward +
    sampler peak for max_num_tokens tokens with one sampled row per dummy request
    (forward.py `activation_bytes`; its constants were fitted on vLLM logs, not on
    TensorRT-LLM)."""
    dep = Deployment(engine_version="0.33.0", tensor_parallel_size=tp, dtype=dtype,
                     kv_cache_dtype=dtype, max_model_len=max_seq_len,
                     max_num_seqs=dummy_requests(max_num_tokens, max_seq_len),
                     max_num_batched_tokens=max_num_tokens, gpu_memory_utilization=0.9,
                     block_size=32, gpu_total_bytes=1, sources={})
    return _forward_activation_bytes(m, dep, last_stage=last_stage)


# ----------------------------------------------------------------------------- flags


# trtllm-serve's flags (tensorrt_llm/commands/serve.py @00209af: click options
# --tensor_parallel_size/--tp_size, --pipeline_parallel_size/--pp_size,
# --moe_expert_parallel_size/--ep_size, --free_gpu_memory_fraction/
# --kv_cache_free_gpu_memory_fraction, --max_batch_size, --max_num_tokens, --max_seq_len,
# --max_beam_width, --backend, --config/--extra_llm_api_options, --trust_remote_code) are
# CLI_FLAGS below. The first serve.py snapshot already spells --tp_size, --pp_size, --ep_size,
# --max_batch_size, --max_num_tokens, --max_seq_len and --kv_cache_free_gpu_memory_fraction
# (default 0.9), but has no --extra_llm_api_options: a YAML line needs a release that has it.


def _fmt(x: float) -> str:
    return f"{x:g}"


def _kv_field(knob: str) -> str:
    """The kv_cache_config key that sets `knob` (FLAGS holds its dotted YAML path)."""
    section, _, key = FLAGS[knob].partition(".")
    assert section == "kv_cache_config", FLAGS[knob]
    return key


def kv_dtype_value(kv_cache_dtype: str) -> str:
    """kv_cache_config.dtype for kvplan's KV dtype: "fp8" for any FP8 cache (E4M3, the only
    one: resolve refuses fp8_e5m2), else the dtype as given."""
    return "fp8" if kv_cache_dtype.startswith("fp8") else kv_cache_dtype


def launch_command(model_ref: str, *, tp: int = 1, pp: int = 1, ep: int | None = None,
                   max_batch_size: int | None = None, max_num_tokens: int | None = None,
                   max_seq_len: int | None = None, free_gpu_memory_fraction: float | None = None,
                   kv_cache_dtype: str | None = None, max_tokens: int | None = None,
                   enable_block_reuse: bool | None = None, tokens_per_block: int | None = None,
                   backend_flag: bool = False,
                   extra_options_path: str = "extra_llm_api_options.yaml",
                   host: str | None = None, port: int | None = None,
                   host_cache_size: int | None = None,
                   sections: dict[str, dict[str, Any]] | None = None) -> tuple[str, str | None]:
    """The `trtllm-serve` line, and the YAML for --extra_llm_api_options when a setting has no
    flag (KV dtype, max_tokens cap, block reuse, tokens per block); None when not needed.
    The YAML's kv_cache_config replaces the flag-built one (serve.py merges it with
    update_llm_args_with_extra_dict), so it repeats free_gpu_memory_fraction."""
    args = ["trtllm-serve", model_ref]
    if backend_flag:
        args += [FLAGS["backend"], "pytorch"]
    if host:
        args += ["--host", host]
    if port:
        args += ["--port", str(port)]
    for flag, value in ((FLAGS["tensor_parallel_size"], tp if tp != 1 else None),
                        (FLAGS["pipeline_parallel_size"], pp if pp != 1 else None),
                        ("--ep_size", ep), (FLAGS["max_num_seqs"], max_batch_size),
                        (FLAGS["max_num_batched_tokens"], max_num_tokens),
                        (FLAGS["max_model_len"], max_seq_len)):
        if value is not None:
            args += [flag, str(value)]
    if free_gpu_memory_fraction is not None:
        args += [FLAGS["gpu_memory_utilization"], _fmt(free_gpu_memory_fraction)]
    kv: dict[str, Any] = {}
    if kv_cache_dtype and kv_cache_dtype != "auto":
        kv[_kv_field("kv_cache_dtype")] = kv_dtype_value(kv_cache_dtype)
    for knob, value in (("max_total_tokens", max_tokens),
                        ("enable_prefix_caching", enable_block_reuse),
                        ("block_size", tokens_per_block)):
        if value is not None:
            kv[_kv_field(knob)] = value
    if host_cache_size:
        kv["host_cache_size"] = host_cache_size
    if not kv and not sections:
        return shlex.join(args), None
    if kv and free_gpu_memory_fraction is not None:
        kv = {"free_gpu_memory_fraction": free_gpu_memory_fraction, **kv}
    args += [LAUNCH_FLAGS["extra_llm_api_options"], extra_options_path]
    sections = ({"kv_cache_config": kv} if kv else {}) | (sections or {})
    return shlex.join(args), _options_yaml(sections)


def _options_yaml(sections: dict[str, dict[str, Any]]) -> str:
    """The --extra_llm_api_options file: one YAML mapping per section, scalars and flow lists."""
    lines: list[str] = []
    for name, body in sections.items():
        if name == "enable_attention_dp":  # a top-level boolean, not a section
            lines.append(f"{name}: true")
            continue
        lines.append(f"{name}:")
        for key, value in body.items():
            text = ("true" if value else "false") if isinstance(value, bool) else (
                _fmt(value) if isinstance(value, float) else
                "[" + ", ".join(map(str, value)) + "]" if isinstance(value, (list, tuple))
                else str(value))
            lines.append(f"  {key}: {text}")
    return "\n".join(lines) + "\n"


def feature_sections(dep: Deployment) -> dict[str, dict[str, Any]]:
    """speculative_config and lora_config YAML sections for a launch file (llm_args.py names)."""
    out: dict[str, dict[str, Any]] = {}
    sc = dep.speculative_config
    if sc is not None:
        spec: dict[str, Any] = {"decoding_type": F.DECODING_TYPE_NAMES[sc.method]}
        if sc.method == "mtp":
            spec["num_nextn_predict_layers"] = sc.num_speculative_tokens
        else:
            spec["max_draft_len"] = sc.num_speculative_tokens
        if sc.model and sc.method in ("eagle3", "draft_model"):
            spec["speculative_model_dir"] = sc.model
        if sc.method == "eagle3" and sc.eagle3_one_model is not None:
            spec["eagle3_one_model"] = sc.eagle3_one_model
        out["speculative_config"] = spec
    if dep.enable_lora:
        lora: dict[str, Any] = {"max_lora_rank": dep.max_lora_rank, "max_loras": dep.max_loras,
                                "max_cpu_loras": dep.max_cpu_loras or dep.max_loras}
        if dep.lora_target_modules:
            lora["lora_target_modules"] = list(dep.lora_target_modules)
        out["lora_config"] = lora
    return out


# ----------------------------------------------------------------------------- the engine

# trtllm-serve flag → (knob, kind) (tensorrt_llm/commands/serve.py @00209af click options).
CLI_FLAGS: dict[str, tuple[str, str]] = {
    "--tp_size": ("tensor_parallel_size", "int"),
    "--tensor_parallel_size": ("tensor_parallel_size", "int"),
    "--pp_size": ("pipeline_parallel_size", "int"),
    "--pipeline_parallel_size": ("pipeline_parallel_size", "int"),
    "--max_batch_size": ("max_num_seqs", "int"),
    "--max_num_tokens": ("max_num_batched_tokens", "int"),
    "--max_seq_len": ("max_model_len", "int"),
    "--kv_cache_free_gpu_memory_fraction": ("gpu_memory_utilization", "float"),
    "--free_gpu_memory_fraction": ("gpu_memory_utilization", "float"),
    "--model": ("model", "str"), "--revision": ("revision", "str"),
    "--extra_llm_api_options": ("extra_llm_api_options", "str"),
    "--backend": ("backend", "str"),
    "--config": ("extra_llm_api_options", "str"),
    **TP.PARALLEL_CLI_FLAGS,
    # --- polish --- (serve.py @00209af: --max_beam_width, default BuildConfig's 1;
    # --gpus_per_node, default None = the GPUs the node has, read by get_llm_args)
    "--max_beam_width": ("max_beam_width", "int"),
    "--gpus_per_node": ("gpus_per_node", "int"),
}
# trtllm-serve's other flags (serve.py @00209af `serve` click options): valid, not modelled.
# Without them `kvplan check` took `--host 0.0.0.0 --port 8000` for typos the engine refuses.
KNOWN_FLAGS = frozenset("""
    --tokenizer --custom_tokenizer --host --port --custom_module_dirs --log_level
    --context_parallel_size --cp_size --moe_cluster_parallel_size --cluster_size
    --num_postprocess_workers --reasoning_parser --tool_parser --metadata_server_config_file
    --server_role --otlp_traces_endpoint --disagg_cluster_uri --media_io_kwargs --chat_template
    --help""".split())
BOOLEAN_FLAGS = frozenset({"--trust_remote_code", "--fail_fast_on_attention_window_too_large",
                           "--enable_chunked_prefill"})
# Knobs the --extra_llm_api_options YAML sets (llmapi/llm_args.py KvCacheConfig,
# DecodingBaseConfig, LoraConfig): knob → its dotted field there (FLAGS prefers a flag).
SETTINGS: dict[str, str] = {
    # (moe_expert_parallel_size is read, then folded into enable_expert_parallel: not a knob)
    **{k: v for k, v in yaml_knob_fields().items() if k != "expert_parallel_size"},
    "speculative_config": "speculative_config",
    "enable_expert_parallel": "--ep_size (every GPU; trtllm_parallel)",
    "data_parallel_size": "enable_attention_dp ranks (--tp_size = -tp × -dp)",
    **{k: f"lora_config.{k}" for k in ("max_loras", "max_lora_rank", "max_cpu_loras",
                                       "lora_target_modules")},
    "enable_lora": "lora_config"}
# generic knob → trtllm-serve's flag where it has one, else the options YAML's dotted field
FLAGS = knob_flags(CLI_FLAGS, (
    "tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_dtype", "max_total_tokens",
    "block_size", "enable_prefix_caching", "backend", "max_beam_width"), settings=SETTINGS)
# the launch line's other flags, from the same table
LAUNCH_FLAGS = knob_flags(CLI_FLAGS, ("revision", "extra_llm_api_options"))
# --- schemas (#23) --- Dynamo's dynamo.trtllm flag → trtllm-serve's flag for the same LLM API
# argument (trtllm_utils.py / main.py arg_map @e3619ce0: model, tensor_parallel_size,
# pipeline_parallel_size, moe_expert_parallel_size, max_batch_size, max_num_tokens, max_seq_len,
# kv_cache_config.free_gpu_memory_fraction)
DYNAMO_FLAGS = {"--model-path": "--model", "--tensor-parallel-size": "--tp_size",
                "--pipeline-parallel-size": "--pp_size", "--expert-parallel-size": "--ep_size",
                "--max-batch-size": "--max_batch_size", "--max-num-tokens": "--max_num_tokens",
                "--max-seq-len": "--max_seq_len",
                "--free-gpu-memory-fraction": "--kv_cache_free_gpu_memory_fraction"}
# ------------------------------------------------------------------ ModelOpt quantization
# TensorRT-LLM serves a checkpoint NVIDIA ModelOpt quantized beforehand; its hf_quant_config.json
# names the quant_algo and kv_cache_quant_algo (QuantSpec.from_modelopt, as model/quant.py reads
# it). kvplan plans it as a what-if of model/whatif.py (the JSON `what_if` record, the note, the
# recipe line before the serve line, the KV cache rule of WhatIfFormat.for_kv_request: the same
# as vLLM's and SGLang's --quantization nvfp4). Which script writes it:
# * PyTorch runtime (trtllm-serve's default from 1.0): a ModelOpt HF checkpoint, from
#   Model-Optimizer examples/llm_ptq/hf_ptq.py (model/whatif.py MODELOPT: --qformat,
#   --kv_cache_qformat whose default fp8 declares an FP8 KV cache, --export_path); TensorRT-LLM
#   docs/source/torch/features/quantization.md (1.0): "The PyTorch backend supports FP8 and
#   NVFP4 quantization ... generated by Model Optimizer"; requirements.txt pins
#   nvidia-modelopt[torch]~=0.37.0 (@000867d9, the CUDA 13 line), whose hf_ptq.py defaults to fp8.
# * TensorRT engine runtime: TensorRT-LLM examples/quantization/quantize.py (v0.12–1.x,
#   examples/quantization/README.md: --model_dir, --qformat fp8, --kv_cache_dtype fp8,
#   --output_dir), a TensorRT-LLM checkpoint trtllm-serve builds the engine from. Its
#   --kv_cache_dtype defaults to None: no KV cache quantizer (tensorrt_llm/quantization/
#   quantize_by_modelopt.py quantize_and_export adds the KV config only `if kv_cache_dtype is
#   not None`), so that recipe's default KV cache is 16-bit.
# ModelOpt leaves the LM head unquantized (modelopt/torch/quantization/config.py,
# _default_disabled_quantizer_cfg "*lm_head*") and embeddings are not Linear layers: both stay
# 16-bit. qformat → quant_algo, the least compute capability of its kernels and that
# architecture (docs/source/features/quantization.md, 1.0: FP8 on Hopper and Ada, FP4 on
# Blackwell; FP8 GEMMs need SM 8.9).
MODELOPT_QFORMATS: dict[str, tuple[str, tuple[int, int], str]] = {
    "fp8": ("FP8", (8, 9), "Ada or Hopper"),
    "nvfp4": ("NVFP4", (10, 0), "Blackwell"),
}
QUANTIZE_PY_KV = KvSwitch(
    " --kv_cache_dtype fp8", "",
    "quantize.py --kv_cache_dtype fp8 (the fp8 --kv-cache-dtype asked for): the checkpoint "
    "declares an FP8 KV cache",
    "quantize.py's default --kv_cache_dtype (none): the checkpoint declares no KV cache "
    "quantization; the KV cache stays 16-bit")


def _quantize_py(fmt: WhatIfFormat) -> WhatIfFormat:
    """The ModelOpt checkpoint of `fmt` as TensorRT-LLM's quantize.py writes it (same weights,
    no KV cache quantization unless asked)."""
    return replace(fmt.with_kv(False), kv=QUANTIZE_PY_KV,
                   quantizer=f"TensorRT-LLM quantize.py (ModelOpt --qformat {fmt.name})",
                   recipe="python examples/quantization/quantize.py --model_dir {model} "
                   f"--qformat {fmt.name}{{kv}} --output_dir {{out}}")


# the recipe of each --quantization, by runtime
QUANTIZE_FIRST: dict[Runtime, dict[str, WhatIfFormat]] = {
    "pytorch": {q: MODELOPT[q] for q in MODELOPT_QFORMATS},
    "engine": {q: _quantize_py(MODELOPT[q]) for q in MODELOPT_QFORMATS},
}


# ----------------------------------------------------------------------------- features
# Speculative decoding, LoRA and the host KV cache (engines/trtllm_features.py, docs/features.md).


class TrtllmOptions(EngineOptions):
    """TensorRT-LLM's own settings, resolved."""

    backend: Literal["pytorch", "tensorrt"] = Field(description="the runtime")
    host_cache_size: int = Field(0, ge=0, description="kv_cache_config.host_cache_size: bytes "
                                 "of host KV per GPU (0 = none)")
    # --- polish ---
    max_beam_width: int = Field(1, ge=1, description="--max_beam_width: most beams a request "
                                "may search (not modelled beyond 1: beam-search-not-modelled)")


def opts(d: Deployment) -> TrtllmOptions:
    return engine_options(d, TrtllmOptions)


def beam_problems(dep: Deployment) -> list[Problem]:
    """--max_beam_width above 1: not modelled. TensorRT-LLM reserves a request's blocks to
    completion as prompt_len // tokens_per_block context blocks, shared by the beams, plus
    (ceil((prompt + max_new_tokens) / tokens_per_block) − those) generation blocks per beam of
    the request's sampling beam width (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
    @b35ac1b getRemainingBlocksToCompletion); kvplan plans every request as one beam."""
    width = opts(dep).max_beam_width
    if width <= 1:
        return []
    return [Problem(
        code="beam-search-not-modelled", severity="warning",
        message=f"--max_beam_width {width}: beam search is not modelled. A request that asks "
        f"for B beams (up to {width}) holds its prompt's full blocks once and its generated "
        f"tokens' blocks B times, so it takes up to {width}× the KV of the one-beam request "
        "kvplan plans: the KV capacity is right, the concurrency for beam-search requests is "
        "overstated")]


def resolve_features(m: ModelSpec, knobs: Any, sources: dict[str, Any]) -> dict[str, Any]:
    """Deployment fields of the features, with TensorRT-LLM's defaults: LoraConfig
    max_lora_rank 64, max_loras 4, max_cpu_loras 4 (trtllm_features.DEFAULT_*)."""
    out: dict[str, Any] = {}
    sc = F.resolve_speculative(m, knobs.speculative_config)
    if sc is not None:
        sources["speculative_config"] = "cli"
        out["speculative_config"] = sc
    if knobs.enable_lora or knobs.lora_target_modules:
        sources["enable_lora"] = "cli"
        loras = knobs.max_loras or F.DEFAULT_MAX_LORAS
        out.update(enable_lora=True, max_loras=loras,
                   max_lora_rank=knobs.max_lora_rank or F.DEFAULT_MAX_LORA_RANK,
                   max_cpu_loras=knobs.max_cpu_loras or F.DEFAULT_MAX_CPU_LORAS,
                   lora_target_modules=knobs.lora_target_modules)
        for key in ("max_loras", "max_lora_rank", "max_cpu_loras", "lora_target_modules"):
            sources[key] = "cli" if getattr(knobs, key) is not None else "engine-default"
    if knobs.host_cache_size:
        sources["host_cache_size"] = "cli"
    if knobs.max_beam_width:
        sources["max_beam_width"] = "cli"
    return out


@dataclass(frozen=True)
class FeatureMemory:
    """What the features add on one GPU, per PP stage."""

    spec: F.TrtSpec | None
    stage_extra_bytes: list[int]  # draft weights (last stage) + PEFT device cache
    spec_bytes_per_token: list[int]  # one-model layers in the target's manager
    draft_bytes_per_token: list[int]  # two-model draft manager
    draft_weights_bytes: int
    peft: F.PeftCache | None
    problems: list[Problem]


def _draft_weight_bytes(m: ModelSpec, sc: Any, tp: int, dtype: str) -> int:
    """Draft tensor bytes on one TP rank, with kvplan's draft layouts (weights.draft_tensors):
    the EAGLE-3 head (layers, fc, norm, draft LM head, d2t), the whole DraftTarget model, or
    min(k, the checkpoint's) MTP layers without an LM head of their own (TensorRT-LLM's
    DeepseekV3MTPHead is a norm; the target's LM head is passed in)."""
    from ..model.weights import _rank_bytes, draft_tensors

    if sc.method == "mtp":
        n = min(sc.num_speculative_tokens or 1, m.mtp_layers)
        target = m.model_copy(update={"mtp_layers": n})
        items = [x for x in draft_tensors(target, sc) if not x[0].name.endswith("shared_head.head")]
    else:
        items = draft_tensors(m, sc)
    return _rank_bytes(items, tp, dtype)[0]


def feature_memory(m: ModelSpec, dep: Deployment, runtime: Runtime) -> FeatureMemory:
    """Draft weights and KV layers, PEFT cache pages; zero when a feature is off. The engine
    runtime (built engines) bakes speculative decoding and LoRA in at build time: not modelled."""
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    zero = [0] * pp
    sc = dep.speculative_config
    problems: list[Problem] = []
    if runtime != "pytorch" and (sc is not None or dep.enable_lora):
        what = " and ".join(x for x, on in (("speculative decoding", sc is not None),
                                             ("LoRA", dep.enable_lora)) if on)
        problems.append(Problem(
            code="feature-not-modelled", severity="warning",
            message=f"TensorRT-LLM {what} on a built engine (backend tensorrt): sized at build "
            "time, not modelled, so KV capacity is overstated (docs/features.md)"))
        return FeatureMemory(None, zero, zero, zero, 0, None, problems)
    spec = F.spec_shape(sc) if sc is not None else None
    extra, spec_bpt, draft_bpt, draft_w = list(zero), list(zero), list(zero), 0
    if spec is not None:
        draft_w = _draft_weight_bytes(m, sc, tp, dep.dtype) if spec.method != "ngram" else 0
        extra[-1] += draft_w
        if spec.one_model:
            per_layer = bytes_per_token(m.model_copy(update={"num_layers": 1, "layer_types": []}),
                                        tp=tp, kv_dtype=dep.kv_cache_dtype)
            spec_bpt[-1] = spec.spec_layers * per_layer
        elif sc is not None and sc.draft is not None:  # spec is not None: so is sc
            draft_bpt = [bytes_per_token(sc.draft, tp=tp, pp=pp, kv_dtype=dep.kv_cache_dtype,
                                         stage=s) for s in range(pp)]
        mode = ("one-model (the draft's layers join the target's KV manager)" if spec.one_model
                else "two-model (the draft has its own KV manager; the estimate shares the "
                "budget)" if spec.method != "ngram" else "no draft model")
        problems.append(Problem(
            code="speculative-decoding-estimate", severity="info",
            message=f"TensorRT-LLM {F.DECODING_TYPE_NAMES[spec.method]} speculative decoding, "
            f"{mode}: max_draft_len {spec.max_draft_len}, draft weights "
            f"{draft_w / GiB:.2f} GiB, each request holds "
            f"{spec.extra_kv_tokens + spec.max_draft_len} "
            f"extra KV tokens; a decode step runs 1 + {spec.max_draft_len} tokens per request, so "
            f"max_num_tokens {dep.max_num_batched_tokens:,} covers at most "
            f"{dep.max_num_batched_tokens // (1 + spec.max_draft_len):,} decoding requests per "
            "step. Modelled from source; no TensorRT-LLM log with speculative decoding was "
            "available"))
        if pp > 1:
            problems.append(Problem(
                code="speculative-pp-assumed", severity="info",
                message="with pipeline parallelism the draft's weights and one-model layers are "
                "placed on the last stage (resource_manager.py get_pp_layers)"))
    peft = None
    if dep.enable_lora:
        if not dep.lora_target_modules:
            problems.append(Problem(
                code="feature-not-modelled", severity="warning",
                message="TensorRT-LLM LoRA: the PEFT cache is sized from lora_config."
                "lora_target_modules (else from the adapters' own configs); none given, so its "
                "device memory is not subtracted and KV capacity is overstated"))
        elif m.mla is not None or m.moe is not None:
            problems.append(Problem(
                code="feature-not-modelled", severity="warning",
                message="TensorRT-LLM LoRA on an MLA or mixture-of-experts model: its module "
                "sizes are not modelled, so the PEFT cache is not subtracted"))
        else:
            attn = set(attention_layers(m))
            caches = [F.peft_cache(m, tp=tp, local_layers=max(1, sum(1 for i in rng if i in attn)),
                                   dtype=dep.dtype, max_lora_rank=dep.max_lora_rank,
                                   max_loras=dep.max_loras,
                                   max_cpu_loras=dep.max_cpu_loras or dep.max_loras,
                                   target_modules=dep.lora_target_modules)
                      for rng in pp_layer_ranges(m.num_layers, pp)]
            extra = [e + c.device_bytes for e, c in zip(extra, caches, strict=True)]
            peft = max(caches, key=lambda c: c.device_bytes)
    if opts(dep).host_cache_size and not dep.enable_prefix_caching:
        problems.append(Problem(
            code="host-cache-without-reuse", severity="info",
            message="kv_cache_config.host_cache_size holds blocks offloaded for reuse; with "
            "enable_block_reuse false they are never read back"))
    return FeatureMemory(spec, extra, spec_bpt, draft_bpt, draft_w, peft, problems)


def speculative_section(dep: Deployment, feat: FeatureMemory, r: TrtllmResult) -> Any:
    sc, spec = dep.speculative_config, feat.spec
    if sc is None or spec is None:
        return None
    return PlanSpeculative(
        method=sc.method, draft_model=sc.draft.id if sc.draft is not None else sc.model,
        num_speculative_tokens=spec.max_draft_len, draft_layers=spec.draft_layers,
        draft_weights_bytes=feat.draft_weights_bytes,
        draft_kv_bytes_per_token=max(feat.spec_bytes_per_token[-1],
                                     max(feat.draft_bytes_per_token)),
        sampler_rows_factor=1,
        draft_pool_tokens=r.tokens if any(feat.draft_bytes_per_token) else None)


def lora_section(dep: Deployment, feat: FeatureMemory) -> Any:
    if feat.peft is None:
        return None
    c = feat.peft
    return PlanLora(max_loras=dep.max_loras, max_lora_rank=dep.max_lora_rank,
                    max_cpu_loras=dep.max_cpu_loras or dep.max_loras, gpu_bytes=c.device_bytes,
                    adapter_bytes=c.adapter_bytes, host_bytes_per_worker=c.host_bytes,
                    modules=list(c.modules))


def host_cache_section(dep: Deployment, feat: FeatureMemory, r: TrtllmResult) -> Any:
    """kv_cache_config.host_cache_size bytes per GPU → secondary blocks of the target's manager
    (its bytes per token: target + one-model layers; resource_manager.py
    calculate_max_num_blocks; the engine runtime's calculateMaxNumBlocks takes the same
    hostCacheSize as its secondary pool)."""
    if not opts(dep).host_cache_size:
        return None
    bpt = r.bytes_per_token - max(feat.draft_bytes_per_token)
    blocks = F.secondary_blocks(opts(dep).host_cache_size, bpt, r.block_size)
    per_worker = blocks * r.block_size * bpt
    tokens = blocks * r.block_size
    return PlanOffload(backend="trtllm-host-cache",
                       host_bytes=per_worker * dep.tensor_parallel_size
                       * dep.pipeline_parallel_size,
                       host_bytes_per_worker=per_worker, cpu_blocks=blocks, cpu_tokens=tokens,
                       effective_cached_tokens=r.tokens + tokens)


def runtime_for(version: str, backend: str | None = None) -> Runtime:
    """The runtime a deployment uses: `--backend` when given (pytorch, or tensorrt = a built
    engine), else trtllm-serve's default: the C++ engine path before 1.0, PyTorch from 1.0
    (serve.py; `defaults().backend_flag_needed`)."""
    if backend is not None:
        return "pytorch" if backend == "pytorch" else "engine"
    return "pytorch" if parse_version(version) >= PYTORCH_DEFAULT_FROM else "engine"


def _dynamo_defaults(version: str | None) -> dict[str, Any]:
    """What dynamo.trtllm passes that this release's trtllm-serve would not: backend pytorch
    before PYTORCH_DEFAULT_FROM (DeploySyntax.dynamo_defaults; main.py arg_map @0567a73a)."""
    if runtime_for(version or TrtllmEngine.newest_version) == "pytorch":
        return {}
    return {"backend": "pytorch"}


class TrtllmEngine(Engine):
    name = "trtllm"
    label = "TensorRT-LLM"
    newest_version = NEWEST_MODELLED
    # flags where trtllm-serve has one, else the --extra_llm_api_options YAML field
    flags = FLAGS
    # speculative_config, LoRA and the host KV cache are modelled (engines/trtllm_features.py,
    # docs/features.md) and set in the options YAML
    # --quantization: a ModelOpt --qformat applied before serving (MODELOPT_QFORMATS)
    settings = {**SETTINGS, "quantization": "ModelOpt --qformat, before serving"}
    # What TensorRT-LLM does instead of knobs it lacks: host memory for KV blocks is
    # kv_cache_config.host_cache_size, bytes per GPU (tensorrt_llm/llmapi/llm_args.py
    # KvCacheConfig.host_cache_size; kvplan's --host-cache-size, engines/trtllm_features.py)
    instead = dict.fromkeys(
        ("kv_offloading_size", "enable_hierarchical_cache", "hicache_size"),
        "kv_cache_config.host_cache_size (bytes of host KV per GPU), which kvplan plans as "
        "--host-cache-size")
    # --- whatif --- the kernels of its ModelOpt formats (MODELOPT_QFORMATS), a real
    # checkpoint's (FP8 of any producer, a ModelOpt one included: MODELOPT_FP8) or a
    # quantize-first what-if's (build_quantization refuses one below them). A real checkpoint
    # below them is refused as on every engine: a gpu-capability error in the plan
    # (planner/whatif.py refusal), exit 1. The what-ifs it serves follow
    # (Engine.what_if_formats: fp8 and nvfp4, the latter telling a sweep and the hints that it
    # does)
    checkpoint_kernels = {q: (Kernel(algo, least),) for q, (algo, least, _a) in
                          {**MODELOPT_QFORMATS, MODELOPT_FP8: MODELOPT_QFORMATS["fp8"]}.items()}

    def kv_cache_dtype_arg(self, kv_dtype: str, version: str | None = None) -> str:
        return kv_dtype_value(kv_dtype)

    def build_quantization(self, m: ModelSpec, gpu: GpuSpec, knobs: Knobs,
                           version: str | None = None) -> tuple[ModelSpec, Knobs]:
        """--quantization names a ModelOpt qformat: the plan is of the checkpoint the
        runtime's recipe (QUANTIZE_FIRST) writes from the named (16-bit) model, a what-if of
        model/whatif.py with its KV cache as the one rule says (for_kv_request)."""
        qformat = (knobs.quantization or "").lower()
        cc = compute_capability(gpu)
        if not qformat:
            return m, knobs
        if m.quantization is not None:
            raise InvalidInputError(
                f"--quantization {qformat} needs a 16-bit model to quantize; {m.id} is already "
                f"{m.quantization.method}", hint="drop --quantization to serve it as it is",
                code="quantization-mismatch", knob="quantization")
        known = MODELOPT_QFORMATS.get(qformat)
        if known is None:
            raise InvalidInputError(
                f"--quantization {qformat!r}: kvplan sizes ModelOpt's "
                f"{' and '.join(MODELOPT_QFORMATS)} qformats for TensorRT-LLM",
                hint="use " + " or ".join(f"--quantization {f}" for f in MODELOPT_QFORMATS)
                + ", or plan a checkpoint already quantized in that format",
                code="quantization-mismatch", knob="quantization")
        algo, least, arch = known
        if cc is not None and self.checkpoint_refusal(qformat, gpu):
            runs = [f for f in MODELOPT_QFORMATS if not self.checkpoint_refusal(f, gpu)]
            raise InvalidInputError(
                f"--quantization {qformat}: TensorRT-LLM's {algo} kernels need {arch} "
                f"(compute capability ≥ {least[0]}.{least[1]}) and the {gpu.name} has {cc[0]}."
                f"{cc[1]}",
                hint=(f"use --quantization {' or '.join(runs)}, " if runs else "")
                + "drop --quantization (a 16-bit build), or plan a GPU that runs it",
                code="gpu-capability", knob="quantization")
        runtime = runtime_for(version or self.newest_version, knobs.backend)
        fmt = QUANTIZE_FIRST[runtime][qformat].for_kv_request(knobs.kv_cache_dtype)
        return (m.model_copy(update={"quantization": fmt.spec}),
                knobs.model_copy(update={"quantization": None}))

    def what_if_recipe(self, name: str, dep: Deployment) -> WhatIfFormat | None:
        return QUANTIZE_FIRST[runtime_for(dep.engine_version, opts(dep).backend)].get(name)

    # CUDA kernels only: TensorRT-LLM's support matrix lists NVIDIA GPUs alone
    # (docs/source/reference/support-matrix.md, v1.0)
    gpu_vendors = frozenset({"NVIDIA"})

    syntax = DeploySyntax(
        # trtllm-serve is a click group whose default command is `serve` (`trtllm-serve <model>`
        # = `trtllm-serve serve <model>`), also run under `python -m` (serve.py @00209af:
        # `main = DefaultGroup(...)`, `if __name__ == "__main__": main()`)
        cli_flags=CLI_FLAGS, executables=(("trtllm-serve", "serve"), ("trtllm-serve", None)),
        modules=("tensorrt_llm.commands.serve",),
        image_versions=(re.compile(r"tensorrt-llm/release:v?(\d+\.\d+(?:\.\d+)?)"),),
        pip_version=re.compile(r"\btensorrt[-_]llm==(\d+\.\d+(?:\.\d+)?)"),
        boolean_flags=BOOLEAN_FLAGS, known_flags=KNOWN_FLAGS, positional_model=True,
        # --- schemas (#23) --- NGC's release image (tag = the release);
        # Dynamo's dynamo.trtllm backend and its nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime
        # image (dynamo deploy/cloud/operator defaultTRTLLMRuntimeImage)
        image="nvcr.io/nvidia/tensorrt-llm/release:{v}", dynamo_module="dynamo.trtllm",
        dynamo_image="nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:{v}",
        # dynamo.trtllm's own argparse (ai-dynamo/dynamo components/backends/trtllm/src/dynamo/
        # trtllm/utils/trtllm_utils.py @e3619ce0): kebab-case flags that main.py passes to the LLM
        # API under trtllm-serve's names; --kv-block-size is the KV router's block size (not in
        # the engine's arg_map); --max-beam-width, --gpus-per-node are not modelled by kvplan
        dynamo_flags=DYNAMO_FLAGS,
        dynamo_own_flags={"--served-model-name": True, "--kv-block-size": True,
                          "--modality": True, "--next-endpoint": True,
                          "--publish-events-and-metrics": False, "--max-beam-width": True,
                          "--gpus-per-node": True},
        # --- emitmn --- dynamo.trtllm's main.py arg_map (ai-dynamo/dynamo components/backends/
        # trtllm/src/dynamo/trtllm/main.py @0567a73a) always passes backend "pytorch", also to a
        # release whose trtllm-serve defaults to the TensorRT engine (before PYTORCH_DEFAULT_FROM).
        # Its other defaults are trtllm-serve's: BuildConfig's max_batch_size, max_num_tokens,
        # max_seq_len (trtllm_utils.py cmd_line_args defaults), KvCacheConfig's
        # free_gpu_memory_fraction (None → 0.9, executor.h kDefaultGpuMemFraction) and
        # GUARANTEED_NO_EVICT scheduling; --kv-block-size 32 is the router's, equal to the
        # engine's tokens_per_block default
        dynamo_defaults=_dynamo_defaults,
        # --- emitport --- trtllm-serve's --port defaults to 8000 (tensorrt_llm/commands/
        # serve.py `@click.option("--port", type=int, default=8000)` in every snapshot read, before
        # and after the PyTorch backend became its default). --- emitshm --- no Kubernetes
        # example of its own: NVIDIA's quick start runs the release image with `docker run --ipc
        # host` (docs/source/quick-start-guide.md), the host's /dev/shm, so no shm_size (no limit)
        port=8000,
        # `@click.option("--host", type=str, default="localhost")` (tensorrt_llm/commands/
        # serve.py, NVIDIA/TensorRT-LLM@00209af1)
        loopback_host=True)
    # Latency model (kvplan/perf/step.py): in-flight batching mixes context and generation
    # requests in one step (vLLM's batching style). Own gemm_efficiency, bandwidth_efficiency,
    # seq_overhead_us, step_overhead_ms and layer_overhead_us fitted by benchmarks/perf_fit.py
    # (benchmarks/perf_arch.py fit_trtllm) on its Hopper rows: the offline throughput of
    # benchmarks/data/perf_throughput.csv (TensorRT-LLM's perf-overview pages v0.14.0, v1.0;
    # the MLPerf and Azure H100 rows are controls of cross-vendor pairs, not fitted) and the TPOT
    # of benchmarks/data/trtllm_latency.csv (353 dense TensorRT-LLM 1.0.0rc3 runs on H100,
    # aiconfigurator's silicon sample). All-reduce and request overheads, burst share and the
    # Dynamo front end stay vLLM's (TTFT is borrowed, docs/performance.md).
    calibration = Calibration(
        style="mixed",
        coefficients=Coefficients(gemm_efficiency=0.521, bandwidth_efficiency=1.0,
                                  step_overhead_ms=3.1543, layer_overhead_us=78.8512,
                                  seq_overhead_us=12.7834, allreduce_latency_us=0.0003,
                                  request_overhead_ms=34.0309, burst_share=0.1768,
                                  dynamo_front_end_ms=30.3475),
        versions=("0.14.0", "1.0.0"),
        ttft_from="vllm",
        # the default capacity scheduler policy, GUARANTEED_NO_EVICT: a request is admitted only
        # when its prompt + max new tokens fit in the KV blocks no running request will need,
        # and none is evicted (tensorrt_llm/llmapi/llm_args.py SchedulerConfig
        # capacity_scheduler_policy default; _torch/pyexecutor/scheduler BindCapacityScheduler;
        # docs/source/torch/scheduler.md; v0.14-1.x)
        admission="reserve",
        # the PyTorch backend's overlap scheduler prepares step N+1 on the CPU while the GPU runs
        # step N: on by default from v0.20.0 (release notes, breaking change: PR #4174 renamed
        # PyTorchConfig.enable_overlap_scheduler, default False, to disable_overlap_scheduler,
        # default False). The TensorRT engine runtime (trtllm-serve's default before 1.0, PR
        # #5717; --backend tensorrt) keeps enable_trt_overlap off: TrtllmEngine.batching turns
        # the overlap off for it. PP > 1 runs the pipeline loop without it (py_executor.py); a
        # draft other than MTP turns it off (py_executor_creator.py: the spec mode's
        # support_overlap_scheduler; Eagle3 only in its one-model form, not told apart here)
        cpu_overlap_from="0.20.0",
        overlap_drafts=frozenset({"mtp"}),
        # routed experts: the PyTorch flow's fused MoE with its default CUTLASS backend, timed
        # per GPU in aiconfigurator's TensorRT-LLM 1.2.0rc5 tables (perf/moe_gemm.py;
        # UNVERIFIED for other releases and for the TensorRT engine flow of 0.x)
        moe_kernels="trtllm-cutlass-moe",
        # --- bwmxfp4 --- gpt-oss's MXFP4 experts on Blackwell run W4A8: ModelConfig.
        # get_mxfp4_quant_algo (tensorrt_llm/_torch/model_config.py) returns W4A8_MXFP4_MXFP8
        # for get_sm_version() >= 100 (W4A8_MXFP4_FP8 with the TRITON MoE backend; FP8
        # activations either way), W4A16_MXFP4 below; OVERRIDE_QUANT_ALGO overrides it
        mxfp4_expert_dtype=(("Blackwell", "fp8"), ("Blackwell Ultra", "fp8"),
                            ("Blackwell (GB202)", "fp8")))

    options_file_flag = "--extra_llm_api_options"

    def options_from_document(self, doc: Any, path: str | None) -> dict[str, Any]:
        knobs = knobs_from_options(parse_options_document(doc, path=path))
        ep = knobs.pop("expert_parallel_size", None)  # moe_expert_parallel_size: every GPU
        if ep is not None and ep > 1:
            knobs["enable_expert_parallel"] = True
        return knobs

    def after_options(self, knobs: dict[str, Any]) -> dict[str, Any]:
        return TP.after_options(knobs)

    checkpoint_kv_override = (
        "TensorRT-LLM sizes the cache from the checkpoint's kv_cache_quant_algo "
        "(QuantConfig; tensorrt_llm/_torch/model_config.py, 1.0), not from a 16-bit request")

    def checkpoint_kv_dtype(self, m: ModelSpec, version: str) -> str | None:
        """TensorRT-LLM allocates the KV cache the checkpoint's quant config declares: the
        PyTorch runtime reads hf_quant_config.json's kv_cache_quant_algo (or config.json's
        kv_cache_scheme) into QuantConfig.kv_cache_quant_algo (tensorrt_llm/_torch/
        model_config.py, 1.0) and sizes the cache in FP8 from it; the TensorRT runtime builds
        the engine from the same QuantConfig (tensorrt_llm/models/modeling_utils.py)."""
        q = m.quantization
        return "fp8" if q is not None and q.kv_cache_quant_algo == "FP8" else None

    def era(self, version: str) -> tuple[str, list[Problem]]:
        era, problems = select_era(version, runtime_for(version))
        if parse_version(version) < SERVE_FROM:
            problems = [*problems, Problem(
                code="engine-version-no-serve-command", severity="warning",
                message=f"TensorRT-LLM {version} has no trtllm-serve (first in "
                f"{'.'.join(map(str, SERVE_FROM))}): the launch line is the later releases' "
                "form; serve this release through Triton's tensorrtllm_backend, or plan "
                f"--engine-version {'.'.join(map(str, SERVE_FROM))} or newer")]
        return era.name, problems  # the era in force is the resolved runtime's (MemoryResult.era)

    def eras(self) -> list[tuple[str, str]]:
        return [(e.name, ".".join(map(str, e.first))) for e in ERAS]

    def resolve(self, m: ModelSpec, gpu: GpuSpec, layout: Layout, knobs: Knobs,
                version: str) -> Deployment:
        runtime = runtime_for(version, knobs.backend)
        era = select_era(version, runtime)[0]
        d = defaults(version, m, runtime)
        sources = dict(layout.sources)
        default_sources: tuple[tuple[str, Source], ...] = (
            ("max_model_len", "model-config"), ("max_num_seqs", "engine-default"),
            ("max_num_batched_tokens", "engine-default"),
            ("gpu_memory_utilization", "engine-default"), ("block_size", "engine-default"),
            ("max_total_tokens", "engine-default"), ("enable_prefix_caching", "engine-default"),
            ("backend", "engine-default"))
        for key, default_source in default_sources:
            sources[key] = "cli" if getattr(knobs, key) is not None else default_source
        fraction = knobs.gpu_memory_utilization or d.free_gpu_memory_fraction
        if fraction >= 1:
            raise InvalidInputError("--kv_cache_free_gpu_memory_fraction must be below 1, got "
                                    f"{fraction:g}",
                                    hint="TensorRT-LLM asserts fraction < 1.0 (both runtimes); "
                                    "e.g. 0.95")
        if layout.kv_cache_dtype == "fp8_e5m2":
            # KvCacheConfig.dtype "fp8" is E4M3 (the FP8 KV quantization ModelOpt writes and the
            # attention kernels read, tensorrt_llm/llmapi/llm_args.py 1.x): no E5M2 cache
            raise InvalidInputError(
                "--kv-cache-dtype fp8_e5m2: TensorRT-LLM's FP8 KV cache is E4M3 "
                "(kv_cache_config.dtype fp8); it has no E5M2 one",
                hint="use --kv-cache-dtype fp8 (E4M3)", code="kv-cache-dtype-unsupported",
                knob="kv_cache_dtype")
        q = layout.quant
        features = resolve_features(m, knobs, sources)
        return Deployment(
            **features, engine=self.name, engine_version=version, era=era.name,
            tensor_parallel_size=layout.tensor_parallel_size,
            pipeline_parallel_size=layout.pipeline_parallel_size, dtype=layout.dtype,
            kv_cache_dtype=layout.kv_cache_dtype, quantization=q.method if q else None, quant=q,
            max_model_len=knobs.max_model_len or d.max_seq_len,
            max_num_seqs=knobs.max_num_seqs or d.max_batch_size,
            max_num_batched_tokens=knobs.max_num_batched_tokens or d.max_num_tokens,
            max_total_tokens=knobs.max_total_tokens, gpu_memory_utilization=fraction,
            **TP.resolve_parallel(m, knobs, sources),
            block_size=knobs.block_size or d.tokens_per_block,
            enable_prefix_caching=knobs.enable_prefix_caching is not False,
            options=TrtllmOptions(backend="pytorch" if runtime == "pytorch" else "tensorrt",
                                  host_cache_size=knobs.host_cache_size or 0,
                                  max_beam_width=knobs.max_beam_width or 1),
            gpu_total_bytes=layout.gpu_total_bytes,
            other_processes_bytes=layout.other_processes_bytes, sources=sources)

    def memory(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment) -> MemoryResult:
        runtime = runtime_for(dep.engine_version, opts(dep).backend)
        era = select_era(dep.engine_version, runtime)[0]
        tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
        seq = int(dep.max_model_len or 0)
        # attention DP: non-expert weights whole, experts over every GPU (trtllm_parallel)
        wtp, ep = TP.weight_layout(m, dep)
        wm = weight_memory_per_stage(m, tp=wtp, pp=pp, dtype=dep.dtype, quant=dep.quant, ep=ep)
        weights = [w.tensor_bytes for w in wm]
        act = activation_estimate(m, tp=tp, dtype=dep.dtype,
                                  max_num_tokens=dep.max_num_batched_tokens,
                                  max_seq_len=seq)
        nt = non_torch_estimate(TP.group_size(dep))
        others = dep.other_processes_bytes  # in the profiled peak / gone from free memory
        feat = feature_memory(m, dep, runtime)
        weights = [w + x for w, x in zip(weights, feat.stage_extra_bytes, strict=True)]
        common: dict[str, Any] = {"kv_dtype": dep.kv_cache_dtype,
                                  "fraction": dep.gpu_memory_utilization,
                                  "tp": tp, "max_seq_len": seq, "tokens_per_block": dep.block_size,
                                  "max_tokens": dep.max_total_tokens}
        problems: list[Problem] = []
        problems += beam_problems(dep)
        if runtime == "pytorch":
            r = plan_pytorch(m, era, total_bytes=dep.gpu_total_bytes, weights_bytes=weights,
                             activation_bytes=act, non_torch_bytes=nt + others,
                             spec_bytes_per_token=feat.spec_bytes_per_token,
                             draft_bytes_per_token=feat.draft_bytes_per_token,
                             attention_dp=TP.attention_dp(dep),
                             **{**common, "max_seq_len": request_kv_tokens(seq, feat.spec)})
            avail = dep.gpu_total_bytes - max(weights) - act - nt - others
            budget_note = (f"{dep.gpu_memory_utilization:g} × (total − profiled peak): "
                           "kv_cache_free_gpu_memory_fraction")
        else:
            r = plan_engine(m, era, total_bytes=dep.gpu_total_bytes, engine_bytes=weights,
                            exec_context_bytes=act, runtime_buffer_bytes=0, decoder_bytes=0,
                            context_bytes=nt + others, **common)
            avail = dep.gpu_total_bytes - max(weights) - act - nt - others
            budget_note = f"{dep.gpu_memory_utilization:g} × free memory after the engine loads"
            problems.append(Problem(
                code="engine-buffers-not-estimated", severity="warning",
                message="a built TensorRT-LLM engine (the default before 1.0) has runtime and "
                "decoder buffers (growing with max_batch_size × max_seq_len) that kvplan does not "
                "estimate: the KV pool is over-stated (benchmarks/trtllm_replay.py)"))
        # CUDA graphs: sized with vLLM's capture rule and per-graph constants (forward.py), an
        # estimate with no TensorRT-LLM measurement behind it, shown for information; they are
        # captured in the estimation pass, inside the profiled peak (fraction_ceiling).
        graphs = _forward_cudagraph_bytes(dep, math.ceil(m.num_layers / pp))
        stages = [StageBreakdown(layers=len(rng), weights_bytes=weights[s],
                                 weights_tensor_bytes=weights[s], activation_bytes=act,
                                 non_torch_bytes=nt, cudagraph_bytes=graphs,
                                 kv_cache_bytes=r.kv_bytes, num_blocks=r.num_blocks,
                                 bytes_per_block=r.bytes_per_block)
                  for s, rng in enumerate(pp_layer_ranges(m.num_layers, pp))]
        block = r.block_size
        model_max = default_max_seq_len(m)
        extra = request_kv_tokens(0, feat.spec)
        fit = max(0, min(model_max, r.tokens - extra))
        per_request = request_kv_tokens(seq, feat.spec)
        return memory_result(
            gpu, dep, era=era.name,
            budget_bytes=max(0, math.floor(avail * dep.gpu_memory_utilization)),
            stages=stages, cudagraph_in_budget=False,
            estimated=["activation_bytes", "non_torch_bytes", "cudagraph_bytes"],
            bytes_per_token=r.bytes_per_token, block_size=block, num_blocks=r.num_blocks,
            reserved_blocks=0, tokens=r.tokens, max_model_len=seq,
            max_concurrency=r.tokens / per_request if seq else 0.0, max_model_len_fit=fit,
            fits=r.fits, problems=problems + list(r.problems) + feat.problems,
            notes=memory_notes(budget=budget_note, activation="estimate: profiling dummy batch",
                               non_torch="estimate: CUDA context, NCCL",
                               kv="the KV pool (whole blocks)", kv_tokens_label="KV cache tokens",
                               cudagraph="estimate, outside the fraction"),
            request_blocks=lambda n: cdiv(request_kv_tokens(n, feat.spec), block),
            speculative=speculative_section(dep, feat, r),
            lora=lora_section(dep, feat),
            offload=host_cache_section(dep, feat, r))

    def _avail(self, dep: Deployment, res: MemoryResult) -> int:
        st = res.worst
        return (dep.gpu_total_bytes - st.weights_bytes - st.activation_bytes - st.non_torch_bytes
                - dep.other_processes_bytes)

    def fraction_needed(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment, res: MemoryResult,
                        blocks: int) -> float | None:
        """blocks × bytes per block / (total − profiled peak), in hundredths rounded up."""
        avail = self._avail(dep, res)
        if avail <= 0:
            return None
        return math.ceil(blocks * res.worst.bytes_per_block / avail * 100) / 100

    def fraction_ceiling(self, dep: Deployment, res: MemoryResult) -> float:
        """0.99: the fraction must stay below 1 (asserted by both runtimes), and nothing else
        bounds it. The CUDA graphs do not need the (1 − fraction) remainder: the PyTorch
        runtime captures them in the estimation pass, so they are part of the profiled peak the
        fraction applies to (tensorrt_llm/_torch/pyexecutor/_util.py, KvCacheCreator 1.0-1.2:
        the estimate reserves CUDA-graph warm-up blocks and logs "Memory used outside torch
        (e.g., NCCL and CUDA graphs)" as part of the peak). Lowering the engine default 0.9 to
        leave them room put a fraction in the launch line that the plan's own figures (at 0.9)
        did not describe, and `kvplan check` of that line planned another KV cache."""
        return 0.0 if self._avail(dep, res) <= 0 else 0.99

    def max_seqs_cap(self, gpu: GpuSpec, dep: Deployment) -> int | None:
        return dep.max_num_seqs

    def node_launch(self, command: str, nodes: int, gpus_per_node: int, version: str
                    ) -> list[NodeLaunch] | None:
        """`mpirun … trtllm-llmapi-launch trtllm-serve`, one MPI rank per GPU."""
        return multinode.trtllm(command, nodes, gpus_per_node)

    def batching(self, dep: Deployment, budget: int) -> dict[str, Any]:
        """The TensorRT engine runtime has no overlap scheduler (Calibration.cpu_overlap_from
        is the PyTorch backend's)."""
        if runtime_for(dep.engine_version, opts(dep).backend) == "engine":
            return {"cpu_overlap": False}
        return {}

    def command(self, ref: str, dep: Deployment, rec: Recommendations, workload: Workload,
                revision: str | None) -> str:
        """`trtllm-serve`, preceded by the --extra_llm_api_options file when a setting has no
        flag (KV dtype, a max_tokens cap, tokens per block)."""
        has_workload = workload.sizes_batch()
        seqs = rec.max_num_seqs.value if rec.max_num_seqs.value and (
            has_workload or dep.user_set("max_num_seqs")) else None
        sections = feature_sections(dep)
        if TP.attention_dp(dep):
            sections["enable_attention_dp"] = {}  # a top-level `enable_attention_dp: true`
        line, yaml_text = launch_command(
            ref, tp=TP.group_size(dep), pp=dep.pipeline_parallel_size,
            ep=TP.group_size(dep) if dep.enable_expert_parallel else None,
            max_batch_size=int(seqs) if seqs else None,
            max_num_tokens=batched_tokens_flag_value(rec, dep),
            max_seq_len=int(rec.max_model_len.value) if rec.max_model_len.value else None,
            free_gpu_memory_fraction=rec.gpu_memory_utilization.value,
            kv_cache_dtype=dep.kv_cache_dtype if dep.kv_cache_dtype.startswith("fp8")
            and dep.sources.get("kv_cache_dtype") != "model-config" else None,
            max_tokens=dep.max_total_tokens,
            tokens_per_block=dep.block_size if dep.user_set("block_size") else None,
            enable_block_reuse=False if dep.user_set("enable_prefix_caching")
            and not dep.enable_prefix_caching else None,
            backend_flag=dep.user_set("backend") and opts(dep).backend == "pytorch",
            host_cache_size=opts(dep).host_cache_size or None, sections=sections)
        # `--backend tensorrt` only where the release's default is PyTorch: before
        # PYTORCH_DEFAULT_FROM the TensorRT engine path is trtllm-serve's default and its
        # `--backend` is click.Choice(["pytorch"]), so the flag is refused there and needed
        # nowhere (the 0.18.2 release's trtllm-serve reference, nvidia.github.io/TensorRT-LLM/
        # 0.18.2/commands/trtllm-serve.html: "--backend … Options: pytorch", "Default is cpp
        # path"; docs/source/release-notes.md, Release 1.0: "Change default backend to PyTorch
        # in trtllm-serve")
        if (dep.user_set("backend") and opts(dep).backend == "tensorrt"
                and runtime_for(dep.engine_version) == "pytorch"):
            line += f" {FLAGS['backend']} tensorrt"
        if opts(dep).max_beam_width > 1:
            line += f" --max_beam_width {opts(dep).max_beam_width}"
        if revision:
            line += f" {LAUNCH_FLAGS['revision']} " + shlex.quote(revision)
        if yaml_text is not None:
            line = f"cat > extra_llm_api_options.yaml <<'EOF'\n{yaml_text}EOF\n{line}"
        return line

    def layout_problems(self, m: ModelSpec) -> list[Problem]:
        out = super().layout_problems(m)
        if m.layer_types and "sliding" in m.layer_types:
            out.append(Problem(code="engine-layout", severity="info",
                               message="TensorRT-LLM's pool estimate counts sliding-window "
                               "layers as "
                               "full layers (get_cache_size_per_token) — as modelled here"))
        return out


ENGINE = TrtllmEngine()
