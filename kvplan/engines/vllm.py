"""vLLM's start-up memory accounting, by version era. Pure functions of model, GPU, deployment.

Sources: reference/ENGINE_MEMORY.md §1 (vLLM wheels 0.11.0 … 0.33.0 read file by file) and
the start-up logs in benchmarks/data/vllm_calibration.csv. File paths are vLLM repo paths.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidInputError
from ..kv import KvLayout, kv_layout, layer_specs
from ..specs import Deployment, GpuSpec, ModelSpec, Problem, QuantSpec, Source
from ..units import DTYPE_ALIASES, DTYPE_BYTES, GiB, MiB, cdiv
from ..weights import pp_layer_ranges, weight_memory_per_stage

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


ERAS: tuple[Era, ...] = (
    # V0 (read in 0.6.6; vllm/worker/worker.py determine_num_available_blocks, vllm/config.py):
    # util 0.90; max_num_seqs 256; max_num_batched_tokens = max(max_model_len, 2048) unless
    # chunked prefill (auto-on above 32K tokens; then 2048), so the profile prefills a whole
    # max_model_len prompt; "# GPU blocks: B" = (total × util − peak) // block bytes; every
    # layer allocated as full attention; CUDA graphs captured outside the budget.
    Era("v0 ≤0.7", (0, 0, 0), 0.90, False, False, False, "blocks", False, "min", False, False, True),
    # Read in 0.11.0, 0.12.0, 0.15.1; the 0.19.0 logs in the calibration file print the graph
    # estimate "not subtracted from KV in this version". Hybrid groups use the smallest bucket.
    Era("v1 0.11–0.19", (0, 8, 0), 0.90, False, False, False, "blocks", False, "min", False, False),
    # 0.20.0: graph estimate subtracted by default; util default 0.92 (changed in 0.16–0.20);
    # group size = largest bucket when it is < 1.5 × the smallest.
    Era("v1 0.20–0.21", (0, 20, 0), 0.92, True, False, False, "blocks", False, "max_if_close",
        False, False),
    # 0.22.0: "GPU KV cache size" = int(concurrency × max_model_len).
    Era("v1 0.22–0.25", (0, 22, 0), 0.92, True, False, False, "concurrency", False, "max_if_close",
        False, False),
    # 0.26.0: async scheduling on by default → sliding windows keep 2 × max_num_batched_tokens
    # in flight (max_concurrent_batches, vllm/config/vllm.py).
    Era("v1 0.26–0.29", (0, 26, 0), 0.92, True, False, False, "concurrency", False, "max_if_close",
        True, False),
    # 0.30.0, 0.33.0: total-consumed profiling, ≥160 GiB batch row, null block in the fit
    # check, yarn models keep max_position_embeddings; Mamba "align" mode under prefix caching
    # (read in 0.33.0; its first release is UNVERIFIED, assumed 0.30).
    Era("v1 0.30+", (0, 30, 0), 0.92, True, True, True, "concurrency", True, "max_if_close",
        True, True),
)
NEWEST_MODELLED = "0.33.0"
# Releases whose files (or logs) were read; a version between them has uncertain boundaries.
READ_VERSIONS = {(0, 6, 6), (0, 11, 0), (0, 12, 0), (0, 15, 1), (0, 19, 0), (0, 20, 0), (0, 22, 0),
                 (0, 26, 0), (0, 30, 0), (0, 33, 0)}
UNREAD_RANGES = (((0, 7, 0), (0, 10, 99)), ((0, 16, 0), (0, 19, 99)), ((0, 21, 0), (0, 21, 99)), ((0, 23, 0), (0, 25, 99)),
                 ((0, 27, 0), (0, 29, 99)))


VERSION = re.compile(r"v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?[\w.+-]*")  # linear: no nested repeats


def parse_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of '0.19.0', 'v0.8.5.post1', '0.11.0rc2+cu128'. Linear-time and
    bounded: at most 64 characters, at most 6 digits per number."""
    m = VERSION.fullmatch(text.strip()) if len(text) <= 64 else None
    if not m:
        shown = text if len(text) <= 64 else text[:64] + "…"
        raise InvalidInputError(f"cannot read --engine-version {shown!r}",
                                hint="use a release number such as 0.33.0")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def select_era(version: str) -> tuple[Era, list[Problem]]:
    """The modelled era for a version, plus a warning when the version is outside what was read."""
    v = parse_version(version)
    problems = []
    if v < (0, 5, 0):
        problems.append(Problem(
            code="engine-version-not-modelled", severity="warning",
            message=f"vLLM {version} predates the V0 releases kvplan read (0.6.x); using the "
            f"{ERAS[0].name} accounting, which may differ."))
    elif v > parse_version(NEWEST_MODELLED):
        problems.append(Problem(
            code="engine-version-newer", severity="warning",
            message=f"vLLM {version} is newer than the newest release kvplan models "
            f"({NEWEST_MODELLED}); using the {ERAS[-1].name} accounting."))
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
    return era, problems


# --------------------------------------------------------------- calibrated constants
# Fitted by benchmarks/calibrate.py on the vLLM 0.19.0 H100 rows of
# benchmarks/data/vllm_calibration.csv (DEBUG profile lines: "torch peak increase",
# "non-torch forward increase", "estimated CUDA graph memory"). Rerun it when rows are added.

# Activation peak, forward part: the profile run pushes max_num_batched_tokens tokens through
# one layer at a time; live tensors per token ≈ the gated MLP (gate_up 2I + act I per rank)
# plus a few hidden-sized buffers (residual, normed input, qkv, attention output, …).
FORWARD_HIDDEN_BUFFERS = 7.1  # hidden-sized tensors live at the MLP peak, per token
# V0's profile prefills max(max_model_len, 2048) tokens without torch.compile; fitted on the
# two forward-bound V0 rows (issue 10517, L = 20000 and 29000; the issue-15815 row's peak is
# the V0 sampler below).
FORWARD_HIDDEN_BUFFERS_V0 = 3.04
# Activation peak, sampler part: logits for min(max_num_seqs, tokens) requests × vocab, then
# the sampler's fp32 copy, sort values and int64 sort indices (top-k/top-p path).
SAMPLER_BYTES_PER_LOGIT = 14.94
# V0's profile run samples with top_p=0.99, top_k=vocab − 1 (vllm/worker/model_runner.py
# `profile_run`, v0.6.6), so its sampler takes the sort path (model_executor/layers/sampler.py
# `_apply_top_k_top_p`, v0.6–0.7). At the final scatter these are alive per logit: the
# model-dtype logits, their fp32 copy (4 B), sorted values (4) and int64 indices (8), the top-k
# mask (1), softmax (4), cumsum (4), top-p mask (1) and the re-scattered logits (4): dtype + 30 B.
# Derived from the code, not fitted.
SAMPLER_V0_BYTES_PER_LOGIT_BEYOND_DTYPE = 30
# Non-torch growth between the init snapshot and the end of profiling.
NON_TORCH_BYTES_TP1 = int(0.25 * GiB)  # cuBLAS workspaces, backend buffers (TP1 PP1 rows)
NON_TORCH_BYTES_PP_ONLY = int(0.07 * GiB)  # multi-process PP stages (TP1 PP2/PP4 rows)
# TP > 1 on NVSwitch (SXM) Hopper/Blackwell: 2.06–2.13 GiB in the TP2/TP4 rows, i.e. ≈1.82 GiB
# above TP1 — NCCL (NVLS) and custom all-reduce buffers (mechanism UNVERIFIED).
NON_TORCH_BYTES_TP_NVSWITCH = int(1.82 * GiB)
# CUDA graphs: one piecewise graph per layer per capture size plus a shared pool. Refitted on
# all 22 replayable rows once the gemma-2, gpt-oss and DeepSeek-V2-Lite rows became plannable
# (was 0.23 GiB + 0.38 MiB on the 18 dense/Mixtral rows).
CUDAGRAPH_POOL_BYTES = int(0.5585 * GiB)
CUDAGRAPH_BYTES_PER_LAYER_GRAPH = int(0.1983 * MiB)
# Memory in use before vLLM's init snapshot (CUDA context 0.51 GiB + cuBLAS 0.19 GiB), measured
# on one H200 with torch 2.11 / CUDA 13 (reference/ENGINE_MEMORY.md §1.9a, GPUS.md).
STARTUP_OVERHEAD_BYTES = int(0.70 * GiB)

DEFAULT_BLOCK_SIZE = 16  # vllm/config/cache.py; FlashAttention/FlashInfer accept 16


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


def resolve_dtype(requested: str | None, m: ModelSpec, gpu: GpuSpec) -> tuple[str, Source]:
    """--dtype auto → the config dtype; float32 checkpoints downcast to the first 16-bit dtype the
    platform supports (vllm/config/model.py _resolve_auto_dtype)."""
    if requested and requested != "auto":
        dtype = DTYPE_ALIASES.get(requested.lower())
        if dtype is None:
            raise InvalidInputError(f"unknown --dtype {requested!r}",
                                    hint="use auto, bfloat16, float16 or float32")
        return dtype, "cli"
    if m.dtype == "float32":
        return ("bfloat16" if gpu.bf16_native else "float16"), "engine-default"
    return m.dtype, "model-config"


# --quantization values (vllm/model_executor/layers/quantization/__init__.py) → the checkpoint
# format kvplan sizes them as.
QUANT_FLAG_METHODS = {
    "fp8": "fp8", "fbgemm_fp8": "fp8", "modelopt": "fp8", "mxfp4": "mxfp4", "awq": "awq",
    "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq", "modelopt_fp4": "nvfp4",
    "compressed-tensors": None,
}


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


def valid_tp_sizes(m: ModelSpec, limit: int = 64) -> list[int]:
    """TP sizes vLLM accepts: divide the attention heads, and divide or be a multiple of the KV
    heads (vllm/model_executor/layers/linear.py QKVParallelLinear)."""
    heads, kv = m.num_attention_heads, m.num_kv_heads
    # Only divisors of the heads can qualify: enumerate them in O(sqrt(heads)), never up to
    # `limit` (a hostile -tp 1000000000 would otherwise loop for minutes).
    divisors = {d for i in range(1, math.isqrt(max(heads, 1)) + 1) if heads % i == 0
                for d in (i, heads // i)}
    return sorted(tp for tp in divisors if tp <= limit and (kv % tp == 0 or tp % kv == 0))


def resolve_deployment(m: ModelSpec, gpu: GpuSpec, opts: dict[str, Any], era: Era,
                       version: str, version_source: Source) -> tuple[Deployment, QuantSpec | None]:
    """Fill every knob the user did not give from the engine's defaults, recording sources."""
    sources: dict[str, Source] = {"engine_version": version_source}

    def pick(key: str, default: Any, default_source: Source) -> Any:
        if opts.get(key) is not None:
            sources[key] = "cli"
            return opts[key]
        sources[key] = default_source
        return default

    tp = pick("tensor_parallel_size", 1, "engine-default")
    pp = pick("pipeline_parallel_size", 1, "engine-default")
    dp = pick("data_parallel_size", 1, "engine-default")
    if tp < 1 or pp < 1 or dp < 1:
        raise InvalidInputError("parallel sizes must be ≥ 1")
    if tp not in valid_tp_sizes(m, limit=max(tp, 1)):
        valid = ", ".join(map(str, valid_tp_sizes(m)))
        raise InvalidInputError(
            f"--tensor-parallel-size {tp} does not divide the model's {m.num_attention_heads} "
            f"attention heads / {m.num_kv_heads} KV heads", hint=f"valid sizes: {valid}")
    if pp > m.num_layers:
        raise InvalidInputError(f"--pipeline-parallel-size {pp} exceeds the {m.num_layers} layers")

    if opts.get("gpu_memory_gib") is not None:
        total = int(opts["gpu_memory_gib"] * GiB)
        sources["gpu_total_bytes"] = "cli"
    elif gpu.cuda_total_bytes is not None:
        total = gpu.cuda_total_bytes
        sources["gpu_total_bytes"] = "gpu-spec"
    else:
        raise InvalidInputError(f"the device total of {gpu.id} is unknown",
                                hint="pass --gpu-memory-gib with the total your vLLM log prints")
    if total <= 0:
        raise InvalidInputError("--gpu-memory-gib must be positive")

    dtype, dtype_source = resolve_dtype(opts.get("dtype"), m, gpu)
    sources["dtype"] = "cli" if opts.get("dtype") not in (None, "auto") else dtype_source

    kv_req = (opts.get("kv_cache_dtype") or "auto").lower()
    if kv_req == "auto":
        kv_dtype = dtype
        sources["kv_cache_dtype"] = "cli" if opts.get("kv_cache_dtype") else "engine-default"
    elif kv_req in {"fp8", "fp8_e4m3", "fp8_e5m2"}:
        kv_dtype = kv_req
        sources["kv_cache_dtype"] = "cli"
    else:
        raise InvalidInputError(f"unsupported --kv-cache-dtype {kv_req!r}",
                                hint="use auto, fp8, fp8_e4m3 or fp8_e5m2")

    quant = m.quantization
    qname = opts.get("quantization")
    if qname:
        sources["quantization"] = "cli"
        named = QUANT_FLAG_METHODS.get(qname.lower())
        if quant is not None and named == quant.method:
            pass  # the flag names the checkpoint's own format (vLLM accepts and uses it)
        elif qname.lower() != "fp8":
            have = f"the checkpoint is {quant.method}" if quant else "the checkpoint is unquantized"
            raise InvalidInputError(f"--quantization {qname!r} does not match the model ({have})",
                                    hint="kvplan models online --quantization fp8, or the "
                                    "checkpoint's own format (drop the flag)")
        elif quant is None:  # online FP8: per-tensor weight scales after loading
            quant = QuantSpec(method="fp8", source="cli")
    elif quant is not None:
        sources["quantization"] = "model-config"

    derived_len, _ = derived_max_model_len(m, era)
    max_len = pick("max_model_len", derived_len, "model-config")
    if max_len < 1:
        raise InvalidInputError("--max-model-len must be ≥ 1")
    if max_len > derived_len:
        raise InvalidInputError(
            f"--max-model-len {max_len} exceeds the model's maximum of {derived_len} tokens; "
            "vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
            hint=f"use --max-model-len {derived_len} or less")

    usage = opts.get("usage_context") or "serve"
    if usage not in ("serve", "llm"):
        raise InvalidInputError(f"unknown --usage-context {usage!r}",
                                hint="use serve (vllm serve, the default) or llm (the offline LLM class)")
    tokens_default, seqs_default, _ = batch_defaults(total, gpu.device_name, era, usage)
    seqs = pick("max_num_seqs", seqs_default, "engine-default")
    tokens = pick("max_num_batched_tokens", tokens_default, "engine-default")
    if sources["max_num_batched_tokens"] == "engine-default" and era.v0 and max_len <= 32768:
        tokens = max(max_len, 2048)  # V0 without chunked prefill: a whole prompt per step
    elif sources["max_num_batched_tokens"] == "engine-default":
        tokens = min(tokens, seqs * max_len)  # arg_utils: never more than seqs × length
    if sources["max_num_seqs"] == "engine-default":
        seqs = min(seqs, tokens)
    if seqs < 1 or tokens < 1:
        raise InvalidInputError("--max-num-seqs and --max-num-batched-tokens must be ≥ 1")

    util = pick("gpu_memory_utilization", era.default_utilization, "engine-default")
    if not 0 < util <= 1:
        raise InvalidInputError(f"--gpu-memory-utilization must be in (0, 1], got {util}",
                                hint="it is a fraction of the device, e.g. 0.9")
    block = pick("block_size", default_block_size(m, gpu, version), "engine-default")
    if block < 1:
        raise InvalidInputError("--block-size must be ≥ 1")
    prefix_caching = bool(pick("enable_prefix_caching", True, "engine-default"))
    expert_parallel = bool(pick("enable_expert_parallel", False, "engine-default"))
    if expert_parallel and m.moe is None:
        raise InvalidInputError("--enable-expert-parallel needs a mixture-of-experts model",
                                hint=f"{m.id} has no experts; drop the flag")
    hybrid = not opts.get("disable_hybrid_kv_cache_manager") and not era.v0
    if opts.get("disable_hybrid_kv_cache_manager") is not None:
        sources["hybrid_kv_cache_manager"] = "cli"
    elif m.attention_chunk_size:
        hybrid = False  # auto-disabled for chunked local attention (vllm/config/vllm.py)
        sources["hybrid_kv_cache_manager"] = "engine-default"
    else:
        sources["hybrid_kv_cache_manager"] = "engine-default"
    if not hybrid and m.linear_attention is not None:
        raise InvalidInputError("this model has linear-attention (Mamba-style) layers, which need "
                                "the hybrid KV cache manager",
                                hint="drop --disable-hybrid-kv-cache-manager")
    kv_bytes = opts.get("kv_cache_memory_bytes")
    if kv_bytes is not None:
        sources["kv_cache_memory_bytes"] = "cli"
        if kv_bytes < 1:
            raise InvalidInputError("--kv-cache-memory-bytes must be ≥ 1")
    eager = bool(pick("enforce_eager", False, "engine-default"))

    dep = Deployment(
        engine_version=version, tensor_parallel_size=tp, pipeline_parallel_size=pp,
        data_parallel_size=dp, dtype=dtype, kv_cache_dtype=kv_dtype,
        quantization=quant.method if quant else None, max_model_len=max_len, max_num_seqs=seqs,
        max_num_batched_tokens=tokens, gpu_memory_utilization=util, block_size=block,
        enforce_eager=eager, kv_cache_memory_bytes=kv_bytes, gpu_total_bytes=total,
        enable_prefix_caching=prefix_caching, hybrid_kv_cache_manager=hybrid,
        enable_expert_parallel=expert_parallel, sources=sources,
    )
    return dep, quant


# ------------------------------------------------------------------ memory model


def activation_bytes(m: ModelSpec, d: Deployment, *, last_stage: bool) -> int:
    """Profile-run torch peak (estimate): max of the forward peak and, on the last PP stage,
    the sampler peak (vllm/v1/worker/gpu_model_runner.py profile_run / _dummy_sampler_run).

    forward = tokens × dtype × (7.1 × hidden + 3 × widest MLP per rank; 2 × for a non-gated MLP)
    sampler = tokens × hidden × dtype + min(seqs, tokens) × vocab × 14.94 B (V0: dtype + 30 B)
              (+ 2 × tokens × hidden × dtype of received hidden/residual tensors when PP > 1:
              the TP1 PP2/PP4 logs show 2.01 GiB on the last stage vs 1.89 GiB at PP1)."""
    tp, tokens = d.tensor_parallel_size, d.max_num_batched_tokens
    dt = DTYPE_BYTES[d.dtype]
    widths = []
    if m.intermediate_size and (m.moe is None or len(m.moe.moe_layers) < m.num_layers):
        widths.append(cdiv(m.intermediate_size, tp))
    if m.moe is not None:
        widths.append(m.moe.top_k * cdiv(m.moe.expert_intermediate_size, tp)
                      + cdiv(m.moe.shared_expert_intermediate_size, tp))
    buffers = FORWARD_HIDDEN_BUFFERS_V0 if d.engine_version and _is_v0(d.engine_version) else FORWARD_HIDDEN_BUFFERS
    mlp_buffers = 3 if m.mlp_gated else 2  # gate_up (2I) + act (I); up (I) + relu² (I)
    forward = int(tokens * dt * (buffers * m.hidden_size + mlp_buffers * max(widths or [0])))
    if not last_stage:
        return forward
    num_reqs = min(d.max_num_seqs, tokens)
    received = 2 * tokens * m.hidden_size * dt if d.pipeline_parallel_size > 1 else 0
    per_logit = (dt + SAMPLER_V0_BYTES_PER_LOGIT_BEYOND_DTYPE
                 if d.engine_version and _is_v0(d.engine_version) else SAMPLER_BYTES_PER_LOGIT)
    sampler = int(tokens * m.hidden_size * dt + received + num_reqs * m.vocab_size * per_logit)
    return max(forward, sampler + moe_workspace_bytes(m, d))


def moe_workspace_bytes(m: ModelSpec, d: Deployment) -> int:
    """Fused-MoE workspaces, allocated during the profile run and still held at the sampler
    peak: M × top_k × (max(2N, H) + N) elements, M = min(max_num_batched_tokens, 32768)
    (VLLM_FUSED_MOE_CHUNK_SIZE), N = expert intermediate / tp
    (vllm/model_executor/layers/fused_moe, modular kernel workspace13 + workspace2). MXFP4
    experts (gpt-oss) run other kernels without them. Checked against the DeepSeek-V2-Lite,
    Qwen3-30B-A3B and Mixtral logs (calibration CSVs), none of which fitted a constant."""
    q = m.quantization
    if m.moe is None or (q is not None and q.method == "mxfp4"):
        return 0
    rows = min(d.max_num_batched_tokens, 32768) * m.moe.top_k
    n = cdiv(m.moe.expert_intermediate_size, d.tensor_parallel_size)
    return rows * (max(2 * n, m.hidden_size) + n) * DTYPE_BYTES[d.dtype]


def _is_v0(version: str) -> bool:
    try:
        return parse_version(version) < (0, 8, 0)
    except InvalidInputError:
        return False


def has_nvswitch(gpu: GpuSpec) -> bool:
    """SXM-class Hopper/Blackwell parts (NVLink ≥ 900 GB/s through NVSwitch)."""
    return (gpu.nvlink_gbps_per_gpu or 0) >= 900 and gpu.arch.startswith(("Hopper", "Blackwell"))


def non_torch_bytes(d: Deployment, gpu: GpuSpec) -> int:
    """Non-torch memory growth during start-up (estimate, from the calibration rows)."""
    base = NON_TORCH_BYTES_PP_ONLY if d.pipeline_parallel_size > 1 else NON_TORCH_BYTES_TP1
    if d.tensor_parallel_size > 1 and has_nvswitch(gpu):
        base += NON_TORCH_BYTES_TP_NVSWITCH
    return base


def cudagraph_capture_sizes(d: Deployment) -> int:
    """Number of decode batch sizes captured: [1, 2, 4] + every 8 to 248 + every 16 from 256, up to
    min(2 × max_num_seqs, 512), capped at max_num_batched_tokens (vllm/config/vllm.py, 0.33)."""
    top = min(2 * d.max_num_seqs, 512, d.max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += list(range(8, min(top, 248) + 1, 8)) + list(range(256, top + 1, 16))
    return len(sizes)


def cudagraph_bytes(d: Deployment, layers: int) -> int:
    """CUDA-graph memory (estimate): pool + per-layer piecewise graphs × capture sizes.
    0 with --enforce-eager."""
    if d.enforce_eager:
        return 0
    return CUDAGRAPH_POOL_BYTES + CUDAGRAPH_BYTES_PER_LAYER_GRAPH * layers * cudagraph_capture_sizes(d)


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


@dataclass(frozen=True)
class VllmResult:
    era: Era
    requested_bytes: int
    stages: list[StageMemory]
    worst: StageMemory  # the stage that limits num_blocks
    num_blocks: int
    blocks_per_request: int
    bytes_per_token: int  # on the worst stage
    tokens: int
    max_concurrency: float
    fits: bool
    max_model_len_fit: int
    problems: list[Problem]
    in_flight_tokens: int
    mamba_pages: int

    def request_blocks(self, length: int) -> int:
        """Blocks one request of `length` tokens holds on the limiting stage."""
        return self.worst.layout.blocks_per_request(length, in_flight=self.in_flight_tokens,
                                                    mamba_pages=self.mamba_pages)


def budget_bytes(total_bytes: int, utilization: float) -> int:
    """requested_memory = ceil(total × gpu_memory_utilization) (vllm/v1/worker/utils.py)."""
    return math.ceil(total_bytes * utilization)


def in_flight_tokens(d: Deployment, era: Era) -> int:
    """Tokens a sliding window must keep beyond W − 1 for requests in flight: max_num_batched_tokens,
    × max_concurrent_batches from 0.26 (2 with async scheduling at PP 1, else the PP size;
    vllm/config/vllm.py)."""
    if not era.async_in_flight:
        return d.max_num_batched_tokens
    batches = 2 if d.pipeline_parallel_size == 1 else d.pipeline_parallel_size
    return batches * d.max_num_batched_tokens


def mamba_pages_per_request(d: Deployment, era: Era) -> int:
    """Pages a Mamba/GDN layer holds per request: 1 (mode none), or 3 in "align" mode, which
    prefix caching selects from 0.30 (2 + one prefill checkpoint; MambaModelConfig, 0.33)."""
    return 3 if era.mamba_align_pages and d.enable_prefix_caching else 1


def largest_fitting_len(fits: Callable[[int], bool], cap: int) -> int:
    """vLLM's binary search over 1…cap for the largest length whose request fits (0 if none)."""
    lo, hi = 0, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan_memory(m: ModelSpec, gpu: GpuSpec, d: Deployment, quant: QuantSpec | None,
                era: Era, model_max_len: int) -> VllmResult:
    """Per-worker budget → KV bytes → layer groups and blocks (minimum over PP stages) →
    capacity and fit."""
    tp, pp = d.tensor_parallel_size, d.pipeline_parallel_size
    requested = budget_bytes(d.gpu_total_bytes, d.gpu_memory_utilization)
    ep = tp * d.data_parallel_size if d.enable_expert_parallel and m.moe is not None else 1
    weights = weight_memory_per_stage(m, tp=tp, pp=pp, dtype=d.dtype, quant=quant, ep=ep)
    stages = []
    for s, layer_range in enumerate(pp_layer_ranges(m.num_layers, pp)):
        layers = len(layer_range)
        act = activation_bytes(m, d, last_stage=s == pp - 1)
        nt = non_torch_bytes(d, gpu)
        graphs = cudagraph_bytes(d, layers)
        if d.kv_cache_memory_bytes is not None:
            kv = d.kv_cache_memory_bytes  # the override replaces the whole budget computation
        else:
            kv = requested - weights[s].allocated_bytes - act - nt - (graphs if era.cudagraph_in_budget else 0)
        specs = layer_specs(m, layer_range, tp=tp, kv_dtype=d.kv_cache_dtype, state_dtype=d.dtype,
                            hybrid_manager=d.hybrid_kv_cache_manager)
        layout = kv_layout(specs, block_size=d.block_size,
                           block_size_fixed=d.sources.get("block_size") == "cli",
                           group_rule=era.group_rule)
        stages.append(StageMemory(layers, weights[s].allocated_bytes, act, nt, graphs, kv, layout,
                                  sum(x.bytes_per_token for x in specs),
                                  max(0, kv) // layout.bytes_per_block, weights[s].tensor_bytes))
    worst = min(stages, key=lambda st: (st.num_blocks, -st.bytes_per_block))
    num_blocks = worst.num_blocks
    flight, mamba_pages = in_flight_tokens(d, era), mamba_pages_per_request(d, era)

    def need(length: int) -> int:
        return max(st.layout.blocks_per_request(length, in_flight=flight, mamba_pages=mamba_pages)
                   for st in stages)

    bpr = need(d.max_model_len)
    null = 1 if era.null_block_in_fit_check else 0
    concurrency = num_blocks / bpr
    if era.printed_tokens == "concurrency":
        tokens = int(concurrency * d.max_model_len)
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
        est = largest_fitting_len(lambda n: need(n) + null <= num_blocks, d.max_model_len)
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
    if d.kv_cache_memory_bytes is None and requested > d.gpu_total_bytes - STARTUP_OVERHEAD_BYTES:
        fits = False
        problems.append(Problem(
            code="startup-free-memory", severity="error",
            message=f"gpu_memory_utilization {d.gpu_memory_utilization} asks for "
            f"{requested / GiB:.2f} GiB but only ≈{(d.gpu_total_bytes - STARTUP_OVERHEAD_BYTES) / GiB:.2f}"
            " GiB is free once the CUDA context exists; vLLM refuses to start ('Free memory on "
            "device … is less than desired GPU memory utilization')."))
    elif not era.cudagraph_in_budget and not d.enforce_eager:
        outside = d.gpu_total_bytes - requested - STARTUP_OVERHEAD_BYTES
        if outside < worst.cudagraph_bytes:
            problems.append(Problem(
                code="cudagraph-headroom", severity="warning",
                message=f"This vLLM version captures CUDA graphs (≈{worst.cudagraph_bytes / GiB:.2f} GiB)"
                f" outside the utilization budget, but only ≈{max(0, outside) / GiB:.2f} GiB is left"
                " there: graph capture may run out of memory. Lower --gpu-memory-utilization."))
    return VllmResult(
        era=era, requested_bytes=requested, stages=stages, worst=worst, num_blocks=num_blocks,
        blocks_per_request=bpr, bytes_per_token=worst.bytes_per_token,
        tokens=tokens, max_concurrency=concurrency, fits=fits,
        max_model_len_fit=largest_fitting_len(lambda n: need(n) + null <= num_blocks, model_max_len),
        problems=problems, in_flight_tokens=flight, mamba_pages=mamba_pages,
    )
