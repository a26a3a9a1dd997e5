"""TGI's (text-generation-inference) start-up memory accounting, release by release
(git tags of huggingface/text-generation-inference, read 2026-01-08; reference/ENGINE_MEMORY.md
§3). Pure functions.

After loading the weights TGI allocates the KV cache of one warm-up batch, runs its prefill,
measures free memory (torch.cuda.mem_get_info, so the allocator's peak still counts as used),
and turns what is left into KV blocks, adding the warm-up batch's blocks back:

  ≥ 3.0        blocks = ⌊(0.9 × f × total − used) / block⌋            (wiggle room on the budget)
  2.3 – 2.4    blocks = ⌊0.9 × (f × total − used − warm) / block⌋ + warm_blocks
  1.4.1 – 2.2  blocks = ⌊0.95 × (f × total − used − warm) / block⌋ + warm_blocks
  0.9.4 – 1.4.0 blocks = ⌊(f × total − used) / block⌋                  (no wiggle room)

(server/text_generation_server/models/flash_causal_lm.py `warmup` at v1.0.3, v2.0.4, v2.3.0,
v3.3.6; utils/import_utils.py `get_cuda_free_memory`; models/globals.py TGI_WIGGLE_ROOM).
`max_batch_total_tokens` = blocks × block size, the minimum over the shards.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from ..knobs import Knobs, Layout, valid_tp_sizes
from ..model import forward
from ..model.kv import kv_heads_per_gpu
from ..model.weights import heaviest_stage
from ..specs import (
    Deployment,
    EngineOptions,
    GpuSpec,
    ModelSpec,
    PlanSpeculative,
    Problem,
    Recommendations,
    Source,
    StageBreakdown,
    Workload,
)
from ..units import DTYPE_BYTES, GiB, cdiv
from ..versions import parse_version
from . import flags as known_flags
from . import interconnect
from .base import (
    Calibration,
    DeploySyntax,
    Engine,
    FlagReleases,
    Kernel,
    MemoryResult,
    batched_tokens_flag_value,
    knob_flags,
    memory_notes,
    memory_result,
)

# Memory in use before the weights at TP1 (CUDA context, cuBLAS): vLLM's measured H200 figure.
# TP > 1 adds one NCCL communicator's buffers (torch's ProcessGroupNCCL; TGI has no custom
# all-reduce) by interconnect: engines/interconnect.py. Estimates.
CONTEXT_BYTES_TP1 = int(0.70 * GiB)


@dataclass(frozen=True)
class TgiEra:
    """One stretch of TGI releases with the same warm-up accounting."""

    name: str
    first: tuple[int, int, int]
    wiggle_room: float
    wiggle_on_budget: bool  # True: 0.9 × f × total − used; False: wiggle × (f × total − used)
    prefill_logprobs: bool  # the warm-up prefill computes logits for every prompt token
    inplace_log_softmax: bool
    defaults: str  # "1.x": 1024 / 2048 / 4096; "2.x": 4095 / 4096 / +50; "3.x": from the model
    attention: str  # "paged": 16-token blocks; "flashinfer": by head_dim (see block_size)
    source: str


ERAS = [
    TgiEra("tgi 0.9.4–1.4.0", (0, 9, 4), 1.00, False, True, False, "1.x", "paged",
           "flash_causal_lm.py v1.0.3: free − (1 − f) × total, no wiggle room"),
    TgiEra("tgi 1.4.1–2.2", (1, 4, 1), 0.95, False, True, False, "1.x", "paged",
           "flash_causal_lm.py v1.4.1–v2.2.0: int(free × 0.95 // block) + warm-up blocks"),
    TgiEra("tgi 2.3", (2, 3, 0), 0.90, False, True, False, "2.x", "flashinfer",
           "v2.3.0 (commit e415b690): free × TGI_WIGGLE_ROOM 0.90; flashinfer by default"),
    TgiEra("tgi 2.4", (2, 4, 0), 0.90, False, True, True, "2.x", "flashinfer",
           "v2.4.0 (commit 5f32dea1): log_softmax in place"),
    TgiEra("tgi 3.0+", (3, 0, 0), 0.90, True, False, True, "3.x", "flashinfer",
           "v3.0.0 (commits a04356fb, 5df80590): get_free_memory(f × 0.9); prefill logprobs "
           "off unless --enable-prefill-logprobs"),
]
NEWEST_MODELLED = "3.3.7"
# 2.0 changed the launcher defaults (launcher/src/main.rs v2.0.0: max_input_tokens =
# min(max_position − 1, 4095), max_total_tokens = min(max_position, 4096), prefill = input + 50).
DEFAULTS_2X_FROM = (2, 0, 0)


def select_era(v: tuple[int, int, int]) -> TgiEra:
    """The newest era whose first release is ≤ v (the oldest for anything before 0.9.4)."""
    chosen = ERAS[0]
    for era in ERAS:
        if v >= era.first:
            chosen = era
    return chosen


def block_size(m: ModelSpec, era: TgiEra, compute_capability: float | None = None,
               rocm: bool = False) -> int:
    """Tokens per KV block. ≤ 2.2: paged attention, 16. From 2.3 flashinfer (1) when head_dim
    ∈ {64, 128, 256}, else flashdecoding (256); from 2.4 the fallback is paged (16) below
    compute capability 8.0 (launcher/src/main.rs `resolve_attention`, v2.3.0 and v3.3.6).
    MLA models (deepseek_v2) are forced to the fallback. `rocm`: TGI's ROCm image sets
    ATTENTION=paged, which the launcher keeps (`on_rocm_image`), so 16 for every model."""
    if era.attention == "paged" or rocm:
        return 16
    if m.head_dim in (64, 128, 256) and m.mla is None:
        return 1
    if era.first >= (2, 4, 0) and compute_capability is not None and compute_capability < 8.0:
        return 16
    return 256


# launcher/src/main.rs v3.3.6 `ComputeType::f16_flop`: the card is nvidia-smi's name lowercased
# with spaces as dashes; any other card is "Unkown compute" (no compute-optimal prefill).
CARD_F16_FLOPS = {
    "nvidia-4090": 82 * 10**12, "nvidia-t4": 65 * 10**12, "nvidia-l4": 121 * 10**12,
    "nvidia-l40": 181 * 10**12, "nvidia-l40s": 363 * 10**12, "nvidia-a10g": 125 * 10**12,
    "nvidia-a40": 149 * 10**12, "nvidia-h100-80gb-hbm3": 900 * 10**12,
    "nvidia-h100-nvl": 900 * 10**12,
    "nvidia-h100": 900 * 10**12, "nvidia-a100-sxm4-80gb": 312 * 10**12,
    "nvidia-a100-sxm4-40gb": 312 * 10**12, "nvidia-a100-80gb-pcie": 312 * 10**12,
    "nvidia-a100": 312 * 10**12, "nvidia-h200": 989 * 10**12,
}
LAUNCHER_WIGGLE_ROOM = 0.95  # `ComputeType::vram` (TGI_WIGGLE_ROOM unset)


# ------------------------------------------------------------------ TGI's ROCm image
# Dockerfile_amd sets ATTENTION=paged, PREFIX_CACHING=0 and PREFILL_CHUNKING=0 for the server
# (v2.3.1: ATTENTION=paged with USE_PREFIX_CACHING=0, commit f9e561ec; v3.0.0 – v3.3.7: all
# three; v2.3.0's image set none of them, not modelled). The launcher keeps an ATTENTION it is
# given (launcher/src/main.rs `resolve_attention`, v3.3.7), and paged attention means 16-token
# blocks (server/text_generation_server/models/globals.py BLOCK_SIZE, v3.3.7).
ROCM_PAGED_FROM = (2, 3, 1)


def on_rocm_image(gpu: GpuSpec, v: tuple[int, int, int]) -> bool:
    """Whether TGI runs from its ROCm image here (an AMD GPU, a release whose image pins paged
    attention without prefix caching)."""
    return gpu.vendor == "AMD" and v >= ROCM_PAGED_FROM


def prefill_chunking(era: TgiEra, rocm: bool, block: int, speculate: bool) -> bool:
    """Whether a 3.x server splits long prompts over several prefill batches. The model turns
    chunking off with PREFILL_CHUNKING=0 (the ROCm image), with speculation (--speculate), and
    with any attention but flashinfer / flashdecoding (paged: 16-token blocks)
    (server/text_generation_server/models/model.py `Model.__init__`, v3.0.0 – v3.3.7). Without
    it the router refuses max_input_tokens above max_batch_prefill_tokens
    (backends/v3/src/main.rs, v3.3.7), and the warm-up sets max_total_tokens to the tokens its
    batch prefilled (flash_causal_lm.py `warmup`: sum(batch.cache_lengths), v3.3.7). Before 3.0
    the launcher itself requires prefill ≥ input (`resolve`). Not modelled: the 3.3 models built
    with support_chunking=False (Gemma 3, Qwen2-VL, Qwen2.5-VL, Mllama: models/__init__.py)."""
    return era.defaults == "3.x" and not rocm and block != 16 and not speculate


# ------------------------------------------------------------------ one host
# TGI serves from one host: the launcher starts every shard itself (launcher/src/main.rs
# `spawn_shards`: `for rank in 0..num_shard`, v2.4.0 and v3.3.7; --master-addr is only the
# shards' rendezvous), and each shard asserts WORLD_SIZE <= torch.cuda.device_count() ("Each
# process is one gpu") and takes local GPU RANK % device_count
# (server/text_generation_server/utils/dist.py `initialize_torch_distributed`, v2.4.0 and
# v3.3.7). --num-shard above one node's GPUs does not start.


class TgiOptions(EngineOptions):
    """What TGI's resolved deployment carries besides the shared settings."""

    host_gpus: int | None = None  # GPUs one host holds (None: unknown system shape)
    host: str = ""  # where host_gpus comes from (a system's name, --gpus-per-node, --nodes)
    prefill_chunking: bool = True  # 3.x: the server splits long prompts (prefill_chunking)
    rocm: bool = False  # runs from TGI's ROCm image (on_rocm_image)


def tgi_options(dep: Deployment) -> TgiOptions:
    """The deployment's TgiOptions; the defaults for one built without `resolve` (tests)."""
    return dep.options if isinstance(dep.options, TgiOptions) else TgiOptions()


def host_gpus(gpu: GpuSpec, knobs: Knobs, tp: int) -> tuple[int | None, str]:
    """GPUs TGI's shards can use on one host: --gpus-per-node, else the node share --nodes
    gives, else the largest node of the GPU's bundled systems; None for an unknown shape."""
    if knobs.gpus_per_node is not None:
        return knobs.gpus_per_node, f"--gpus-per-node {knobs.gpus_per_node}"
    if knobs.nodes is not None:
        return max(1, tp // knobs.nodes), f"--nodes {knobs.nodes}"
    if not gpu.systems:
        return None, ""
    best = max(gpu.systems, key=lambda s: s.gpus_per_node)
    return best.gpus_per_node, best.name


def _multi_node_engines() -> list[str]:
    """The registered engines kvplan writes multi-node launch lines for (those that override
    Engine.node_launch: engines/multinode.py)."""
    from . import registry  # the registry imports this module

    return [e.name for e in registry.engines().values()
            if type(e).node_launch is not Engine.node_launch]


def host_problem(m: ModelSpec, gpu: GpuSpec, tp: int, opts: TgiOptions) -> Problem | None:
    """The error for more shards than one host holds, with what would start instead."""
    per = opts.host_gpus
    if per is None or tp <= per:
        return None
    fits = [t for t in valid_tp_sizes(m) if t <= per]
    within = (f"-tp {max(fits)} (--num-shard {max(fits)}), the largest valid on one node "
              f"(plan it to see whether the model fits {max(fits)} GPUs)" if fits
              else f"none: no valid --num-shard fits a {per}-GPU node")
    *rest, last = _multi_node_engines() or [""]
    others = f"{', '.join(rest)} or {last}" if rest else last
    return Problem(
        code="tgi-shards-exceed-node", severity="error",
        message=f"TGI runs every shard on one host, and {tp} shards exceed the {per} GPUs per "
        f"node of {opts.host}: its launcher starts all --num-shard processes on the local "
        "machine, each on a local GPU (launcher/src/main.rs `spawn_shards`; utils/dist.py "
        "asserts WORLD_SIZE <= the GPUs it sees), so it does not start across nodes. "
        f"Alternatives: 1) {within}; 2) an engine that launches across nodes"
        + (f" (--engine {others})" if others else "")
        + f"; 3) a GPU whose servers hold {tp} or more GPUs per node")


@dataclass(frozen=True)
class Launcher:
    """What TGI's launcher sees: the GPU (nvidia-smi name and total), shards, fraction."""

    smi_name: str | None
    smi_total_mib: int | None
    shards: int
    fraction: float


def _launcher_mlp(m: ModelSpec) -> tuple[int, int, int] | None:
    """(intermediate_size, experts per token + shared, experts) as the launcher's RawConfig
    reads them (num_experts_per_tok, n_shared_experts, num_local_experts); None for MoE
    families whose raw keys kvplan does not keep."""
    if m.moe is None:
        return m.intermediate_size, 1, 1
    if m.model_type == "mixtral":
        return m.moe.expert_intermediate_size, m.moe.top_k, m.moe.num_experts
    return None


def model_flop_per_token(m: ModelSpec) -> int | None:
    """`Config::flop`: per layer 2·h·hd·(3·heads + 2·kv_heads) + 2·3·h·I·(experts per token);
    None for vision-language models."""
    mlp = _launcher_mlp(m)
    if m.vision is not None or mlp is None:
        return None
    h, hd = m.hidden_size, m.head_dim
    attn = 2 * h * hd * (3 * m.num_attention_heads + 2 * m.num_kv_heads)
    return (attn + 2 * 3 * h * mlp[0] * mlp[1]) * m.num_layers


def vram_maximum_tokens(m: ModelSpec, launch: Launcher) -> int | None:
    """`vram_maximum`: (smi total × shards × fraction × 0.95 − model) / per-token bytes, with the
    launcher's own rough model size (layers × (3·I·E·h + (heads + 2·kv)·hd + heads·hd·h) +
    2·vocab·h, × 2 B) and per-token bytes (KV + 1.5·I·E·2·3); None when quantized."""
    mlp = _launcher_mlp(m)
    if mlp is None or launch.smi_total_mib is None or m.quantization or m.unmodelled_quantization:
        return None
    inter, _, experts = mlp
    hd, heads, kv = m.head_dim, m.num_attention_heads, m.num_kv_heads
    available = int(launch.smi_total_mib * 2**20 * launch.shards * launch.fraction
                    * LAUNCHER_WIGGLE_ROOM)
    layer = 3 * inter * experts * m.hidden_size + (heads + 2 * kv) * hd + heads * hd * m.hidden_size
    model = (layer * m.num_layers + 2 * m.vocab_size * m.hidden_size) * 2
    token = kv * 2 * hd * 2 * m.num_layers + (inter + inter // 2) * experts * 2 * 3
    return (available - model) // token if available >= model else None


def launcher_default_prefill(m: ModelSpec) -> int:
    """The launcher's fallback --max-batch-prefill-tokens: 10000 for Qwen2-VL / Qwen2.5-VL, 8000
    for Gemma 3, else 4096. The launcher matches config.json's top-level model_type (its
    RawConfig), not the language model's family: kvplan keeps the former as the vision tower's
    kind for Qwen-VL (ModelSpec.model_type is "qwen2" there), and only the multimodal Gemma 3
    ("gemma3", with a vision_config) is that type; text-only Gemma 3 is "gemma3_text"."""
    kind = m.vision.kind if m.vision is not None else None
    if kind in ("qwen2_vl", "qwen2_5_vl"):
        return 10000
    if m.model_type == "gemma3" and m.vision is not None:
        return 8000
    return 4096


def launcher_max_position(m: ModelSpec) -> int | None:
    """The launcher's max_position_embeddings: config.json's max_position_embeddings, else
    max_seq_len, else n_positions (launcher/src/main.rs v3.3.6, `impl From<RawConfig> for
    Config`). GPT-J and GPT-2 give only n_positions: without it the check of a plan's own
    --max-total-tokens compared it with the prefill size instead."""
    keys = m.max_len_keys
    return (keys.get("max_position_embeddings") or keys.get("max_seq_len")
            or keys.get("n_positions") or m.max_position_embeddings)


def default_prefill_3x(m: ModelSpec, launch: Launcher) -> tuple[int, str]:
    """--max-batch-prefill-tokens when not passed (3.x): the card's f16 FLOP/s × shards / the
    model's FLOPs per token when the card is known (and the result is > 100), else 10000 for
    Qwen2-VL, 8000 for Gemma 3, 4096; capped by max_position and by `vram_maximum`
    (launcher/src/main.rs v3.3.6, commits 5df80590 and a04356fb). Returns (tokens, how)."""
    card = launch.smi_name.lower().replace(" ", "-") if launch.smi_name else None
    flops, per_token = CARD_F16_FLOPS.get(card or ""), model_flop_per_token(m)
    optimal = flops * launch.shards // per_token if flops and per_token else None
    if optimal is not None and optimal > 100:
        value, how = optimal, f"compute-optimal for {card} × {launch.shards}"
    else:
        value = launcher_default_prefill(m)
        why = ("unknown card " + card if card and not flops else "no FLOP estimate" if card
               else "no nvidia-smi card name")  # (none on AMD: `compute_type` runs nvidia-smi)
        how = f"launcher default ({why})"
    if max_pos := launcher_max_position(m):
        value = min(value, max_pos)
    cap = vram_maximum_tokens(m, launch)
    if cap is not None and cap < value:
        value, how = cap, how + ", reduced to what fits in VRAM"
    return value, how


@dataclass(frozen=True)
class Lengths:
    """Launcher lengths before the warm-up; None = decided by the warm-up (3.x)."""

    max_input_tokens: int | None
    max_total_tokens: int | None
    prefill_tokens: int
    how: str  # how the default prefill was chosen
    assumed: bool = False  # the launcher reads config keys kvplan does not keep


def default_lengths(m: ModelSpec, era: TgiEra, v: tuple[int, int, int], launch: Launcher,
                    max_input_tokens: int | None = None) -> Lengths:
    """The launcher's defaults. < 2.0: 1024 / 2048 / 4096; 2.x: min(max_position − 1, 4095) /
    min(max_position, 4096) / max_input + 50 (the given max_input if any); 3.x: lengths left to
    the warm-up, prefill by `default_prefill_3x` (launcher/src/main.rs at v1.4.5, v2.0.0,
    v3.3.6)."""
    max_pos = launcher_max_position(m) or 4096
    if era.defaults == "3.x":
        prefill, how = default_prefill_3x(m, launch)
        assumed = _launcher_mlp(m) is None
        if assumed:
            how += "; assumed: the launcher reads raw MoE keys kvplan does not keep for this family"
        return Lengths(max_input_tokens, None, prefill, how, assumed)
    if v < DEFAULTS_2X_FROM:
        return Lengths(max_input_tokens or 1024, 2048, 4096, "1.x launcher default")
    inp = max_input_tokens or min(max_pos - 1, 4095)
    return Lengths(inp, min(max_pos, 4096), inp + 50, "2.x launcher default: max_input_tokens + 50")


def warmup_blocks(era: TgiEra, bs: int, prefill_tokens: int, max_input: int | None,
                  max_total: int | None) -> int:
    """KV blocks of the router's warm-up batch: requests of min(max_input, what is left)
    prompt tokens until max_batch_prefill_tokens are covered, each asking for max_total −
    prompt new tokens, so each needs ⌈max_total / block⌉ blocks
    (router/client/src/client.rs `warmup`, v2.0.4)."""
    if era.wiggle_on_budget or not max_input or not max_total:
        return 0  # ≥ 3.0 the warm-up blocks cancel out of the formula
    n_requests = cdiv(prefill_tokens, max_input)
    return n_requests * cdiv(max_total, bs)


def prefill_logits_bytes(m: ModelSpec, era: TgiEra, tp: int, prefill_tokens: int,
                         dtype: str) -> int:
    """Logits of every warm-up prompt token (the warm-up asks for prefill logprobs): N × vocab
    × dtype for the gathered logits, + the same again for log_softmax's output before 2.4,
    or + N × vocab / tp for the local shard while gathering at TP > 1
    (layers/tensor_parallel.py TensorParallelHead, flash_causal_lm.py `generate_token`)."""
    if not era.prefill_logprobs:
        return 0
    full = prefill_tokens * m.vocab_size * DTYPE_BYTES[dtype]
    if not era.inplace_log_softmax:
        return 2 * full
    return full + (full // tp if tp > 1 else 0)


# From 2.1 the router's warm-up puts one image into its first request ("1 request is enough to
# test vision heads": backends/v3/src/client/grpc_client.rs `warmup` and WARMUP_IMAGE_BASE64 in
# backends/client/src/lib.rs at v3.3.4; router/client/src/lib.rs from v2.1.0). The image
# processor resizes it to the tower's image size, so a SigLIP tower sees (image / patch)²
# patches, through TGI's eager attention (custom_modeling/siglip.py `SiglipAttention.forward`,
# v2.2.0 – v3.3.4): scores of heads/tp × N² in the model dtype, their fp32 softmax and its cast
# back are alive together, 2 × dtype + 4 bytes per score.
WARMUP_IMAGE_FROM = (2, 1, 0)
SIGLIP_HEAD_DIM = 72  # SigLIP-so400m (Gemma 3, PaliGemma 2): 1152 = 16 heads × 72


def vision_warmup_bytes(m: ModelSpec, v: tuple[int, int, int], tp: int, dtype: str) -> int:
    """Peak of the warm-up image's attention scores in a SigLIP tower (0 without one)."""
    if m.vision is None or m.vision.kind != "siglip" or v < WARMUP_IMAGE_FROM:
        return 0
    patches = (m.vision.image_size // m.vision.patch_size) ** 2
    heads = max(1, m.vision.hidden_size // SIGLIP_HEAD_DIM // tp)
    return heads * patches * patches * (2 * DTYPE_BYTES[dtype] + 4)


# AWQ checkpoints run through llm-awq's GEMM (utils/awq/quantize/qmodule.py `WQLinear.forward`
# at v1.1.0 – v2.1.0, layers/awq/quantize/ later) with split_k_iters = 8: the kernel writes 8
# partial products [8, tokens, out] in fp16 and returns their sum (awq_inference_engine
# `gemm_forward_cuda`). From 2.1.1 AWQ uses the GPTQ-Marlin kernels on compute capability
# ≥ 8.0 instead (utils/weights.py / layers/gptq `can_use_gptq_marlin`), which need no such
# buffer. The widest AWQ GEMM is TGI's fused gate_up (2 × intermediate) or qkv projection.
AWQ_SPLIT_K = 8
AWQ_MARLIN_FROM = (2, 1, 1)


def awq_workspace_bytes(m: ModelSpec, v: tuple[int, int, int], tp: int, tokens: int,
                        compute_capability: float | None) -> int:
    """The split-K partial sums of the widest AWQ GEMM in the warm-up prefill (0 otherwise)."""
    q = m.quantization
    if q is None or q.method != "awq" or m.moe is not None:
        return 0
    if v >= AWQ_MARLIN_FROM and (compute_capability is None or compute_capability >= 8.0):
        return 0
    widest = max(2 * m.intermediate_size,
                 (m.num_attention_heads + 2 * m.num_kv_heads) * m.head_dim) // tp
    return AWQ_SPLIT_K * tokens * widest * 2


# Gemma 3 prefills with image-aware attention masks (models/vlm_causal_lm.py `forward` and
# custom_modeling/flash_gemma3_modeling.py at v3.3.0 – v3.3.7): a bool [B, 1, L, L] mask
# (get_attention_mask), its additive copy from torch.where with Python scalars (float32), the
# sliding-window bool mask and the local additive mask (float32) stay alive through the layers:
# 1 + 4 + 1 + 4 bytes per element, L the longest warm-up request. 3.2.x built them differently
# (not read).
GEMMA3_MASKS_FROM = (3, 3, 0)
GEMMA3_MASK_BYTES_PER_ELEMENT = 1 + 4 + 1 + 4


def gemma3_mask_bytes(m: ModelSpec, v: tuple[int, int, int], tokens: int,
                      max_input_tokens: int | None) -> int:
    """Gemma 3's prefill masks for the warm-up batch: requests of min(max_input, tokens)."""
    if m.model_type != "gemma3" or m.vision is None or v < GEMMA3_MASKS_FROM or tokens <= 0:
        return 0
    length = min(tokens, max_input_tokens) if max_input_tokens else tokens
    requests = -(-tokens // length)
    return GEMMA3_MASK_BYTES_PER_ELEMENT * requests * length * length


def warmup_extra_bytes(m: ModelSpec, v: tuple[int, int, int], tp: int, tokens: int, dtype: str,
                       compute_capability: float | None,
                       max_input_tokens: int | None = None) -> int:
    """What TGI's warm-up holds beyond a plain prefill: the warm-up image through a SigLIP
    tower, AWQ's split-K buffer, Gemma 3's attention masks."""
    return (vision_warmup_bytes(m, v, tp, dtype)
            + awq_workspace_bytes(m, v, tp, tokens, compute_capability)
            + gemma3_mask_bytes(m, v, tokens, max_input_tokens))


def bytes_per_token(m: ModelSpec, tp: int, kv_dtype: str) -> int:
    """layers × kv_heads_per_gpu × head_dim × 2 × dt: TGI allocates every layer fully (no
    sliding-window savings)."""
    return m.num_layers * kv_heads_per_gpu(m, tp) * m.head_dim * 2 * DTYPE_BYTES[kv_dtype]


# FlashInfer's shared workspace, allocated when the model is built (before the warm-up
# measures free memory): server/text_generation_server/layers/attention/flashinfer.py
# `get_workspace`, v3.3.4.
FLASHINFER_WORKSPACE_BYTES = 128 * 1024 * 1024


def context_bytes(tp: int, block: int = 16, gpu: GpuSpec | None = None) -> int:
    """Memory in use at warm-up besides weights and activations: CUDA context, + one NCCL
    communicator's buffers at TP > 1 on this interconnect (a PCIe part when `gpu` is None), +
    FlashInfer's workspace when it is the attention backend (1-token blocks)."""
    return (CONTEXT_BYTES_TP1 + interconnect.tp_bytes(gpu, tp, "tgi")
            + (FLASHINFER_WORKSPACE_BYTES if block == 1 else 0))


@dataclass(frozen=True)
class TgiResult:
    kv_bytes: int
    bytes_per_token: int
    block_size: int
    tokens: int  # max_batch_total_tokens
    max_total_tokens: int
    prefill_tokens: int
    budget_bytes: int
    problems: list[Problem]

    @property
    def fits(self) -> bool:
        return self.kv_bytes > 0 and self.tokens > 0 and self.tokens >= self.max_total_tokens


def plan_memory(m: ModelSpec, era: TgiEra, *, total_bytes: int, tp: int, weights_bytes: int,
                warmup_peak_bytes: int, kv_dtype: str, fraction: float, prefill_tokens: int,
                max_input_tokens: int | None, max_total_tokens: int | None,
                block: int, gpu: GpuSpec | None = None, other_bytes: int = 0) -> TgiResult:
    """Blocks by the era's formula (module docstring); used = context + weights + warm-up
    peak (+ what other processes hold: TGI reads free memory); tokens = blocks × block size."""
    used = context_bytes(tp, block, gpu) + weights_bytes + warmup_peak_bytes + other_bytes
    per_token = bytes_per_token(m, tp, kv_dtype)
    per_block = per_token * block
    warm = 0
    if era.wiggle_on_budget:
        budget = math.floor(era.wiggle_room * fraction * total_bytes)
        kv = budget - used
        blocks = max(0, kv) // per_block
    else:
        budget = math.floor(fraction * total_bytes)
        warm = warmup_blocks(era, block, prefill_tokens, max_input_tokens, max_total_tokens)
        free = budget - used - warm * per_block
        blocks = max(0, math.floor(era.wiggle_room * free) // per_block + warm) if free > 0 else 0
        kv = blocks * per_block if free > 0 else free
    tokens = blocks * block
    model_max = launcher_max_position(m) or tokens
    total = max_total_tokens or min(tokens, model_max)
    problems = []
    if kv <= 0 or tokens == 0:  # nothing left, or less than one block
        problems.append(Problem(
            code="no-kv-memory", severity="error",
            message="weights and the warm-up prefill leave no memory for the KV cache inside "
            f"cuda_memory_fraction {fraction} of the GPU ({era.name}): TGI fails its warm-up "
            "('Not enough memory to handle …'); lower --max-batch-prefill-tokens or add shards"
            + (f". Its batch alone holds KV for {warm * block:,} tokens "
               f"({per_block * warm / GiB:.2f} GiB: every warm-up request reserves "
               "--max-total-tokens); a lower --max-total-tokens shrinks it" if warm else "")))
    elif tokens < total:
        problems.append(Problem(
            code="max-model-len-too-long", severity="error",
            message=f"the KV cache holds {tokens:,} tokens, fewer than --max-total-tokens "
            f"{total:,}: TGI refuses to start ('max_total_tokens … must be <= "
            "max_batch_total_tokens')"))
    return TgiResult(kv, per_token, block, tokens, total, prefill_tokens, budget, problems)


# ------------------------------------------------------------------ the engine

# launcher/src/main.rs flag → (knob, kind)
CLI_FLAGS: dict[str, tuple[str, str]] = {
    "--model-id": ("model", "str"), "--num-shard": ("tensor_parallel_size", "int"),
    "--max-total-tokens": ("max_model_len", "int"),
    "--max-input-tokens": ("max_input_tokens", "int"),
    "--max-input-length": ("max_input_tokens", "int"),
    "--max-batch-prefill-tokens": ("max_num_batched_tokens", "int"),
    "--max-concurrent-requests": ("max_num_seqs", "int"),
    "--cuda-memory-fraction": ("gpu_memory_utilization", "float"), "--dtype": ("dtype", "str"),
    "--quantize": ("quantization", "str"), "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--revision": ("revision", "str"), "--speculate": ("tgi_speculate", "int"),
}
# The launcher reads every flag from the environment too (clap `env`, launcher/src/main.rs);
# a flag on the command line wins over its variable.
# Launcher flags only some releases have (DeploySyntax.flag_releases), read in the Args struct
# of launcher/src/main.rs at the release tags (clap derives --flag-name from each field; an
# unknown argument stops the launcher): `max_input_tokens` first in v2.0.0 (v1.0.0–v1.4.5 have
# only `max_input_length`, which every later tag still has); `kv_cache_dtype` first in v2.4.0
# (not in v2.3.0 or v2.3.1); `speculate` first in v1.3.0 (not in v1.2.0).
FLAG_RELEASES = {
    "--max-input-tokens": FlagReleases(
        first="2.0.0", older="--max-input-length",
        source="launcher/src/main.rs, TGI v1.4.5 and v2.0.0"),
    "--kv-cache-dtype": FlagReleases(
        first="2.4.0", source="launcher/src/main.rs, TGI v2.3.1 and v2.4.0"),
    "--speculate": FlagReleases(
        first="1.3.0", source="launcher/src/main.rs, TGI v1.2.0 and v1.3.0"),
}
ENV_FLAGS = {"MODEL_ID": "--model-id", "NUM_SHARD": "--num-shard",
             "MAX_TOTAL_TOKENS": "--max-total-tokens",
             "MAX_INPUT_TOKENS": "--max-input-tokens", "MAX_INPUT_LENGTH": "--max-input-length",
             "MAX_BATCH_PREFILL_TOKENS": "--max-batch-prefill-tokens",
             "MAX_CONCURRENT_REQUESTS": "--max-concurrent-requests",
             "CUDA_MEMORY_FRACTION": "--cuda-memory-fraction", "DTYPE": "--dtype",
             "QUANTIZE": "--quantize",
             "KV_CACHE_DTYPE": "--kv-cache-dtype", "REVISION": "--revision",
             "SPECULATE": "--speculate"}
# ghcr.io/huggingface/text-generation-inference:2.2.0 and the Google Cloud TGI images
# (…/huggingface-text-generation-inference-cu124.2-3.ubuntu2204 = 2.3).
_IMAGES = (re.compile(r"text-generation-inference[^:\s\"']{0,200}:v?(\d+\.\d+(?:\.\d+)?)"),
           re.compile(r"text-generation-inference-cu\d{1,6}\.(\d{1,6})-(\d{1,6})(?:-(\d{1,6}))?\."))
# TGI's ROCm image: the release tag with `-rocm` (.github/workflows/build.yaml:
# label_extension "-rocm", semver pattern {{version}}${LABEL_EXTENSION}, pushed to
# ghcr.io/huggingface/text-generation-inference; docs/source/installation_amd.md, v3.3.5:
# 3.3.5-rocm), from v1.2.0, whose build.yaml first builds and pushes it; its Dockerfile_amd sets
# PORT=80 like the CUDA image (v3.3.7).
ROCM_IMAGE_FROM = (1, 2, 0)


def rocm_image(version: str, gfx: str) -> tuple[str, str | None] | None:
    if parse_version(version) < ROCM_IMAGE_FROM:
        return None
    return f"ghcr.io/huggingface/text-generation-inference:{version}-rocm", None


# ------------------------------------------------------------ speculation (docs/features.md)
# --speculate N (launcher/src/main.rs v3.3.7): the model's own Medusa / MLP-speculator heads when
# its config has them (server/.../models/__init__.py: medusa_num_heads, model_type
# mlp_speculator; N may not exceed their count), else n-gram speculation, which loads nothing.
# Every request then reserves N more KV slots: the router allocates input + max_new_tokens +
# speculate − 1 tokens (backends/v3/src/queue.rs) and the shard maps prompt + max_new − 1 +
# speculate tokens to blocks (flash_causal_lm.py FlashCausalLMBatch.from_pb). The warm-up
# batch's extra blocks are added back to the block count, so the KV pool itself is unchanged.


def combine_flags(knobs: dict[str, Any], model: str | None) -> dict[str, Any]:
    """What a launcher line's flags mean as knobs: --kv-cache-dtype fp8_e4m3fn (the launcher's
    name, launcher/src/main.rs `KVCacheDtype`, v3.3.7) is kvplan's fp8_e4m3 (the line kvplan
    writes was refused on read-back), and --speculate (`combine_speculate`)."""
    if str(knobs.get("kv_cache_dtype", "")).lower() == "fp8_e4m3fn":
        knobs = {**knobs, "kv_cache_dtype": "fp8_e4m3"}
    return combine_speculate(knobs, model)


def combine_speculate(knobs: dict[str, Any], model: str | None) -> dict[str, Any]:
    """--speculate N → speculative_config {"method": "ngram", "num_speculative_tokens": N}."""
    n = knobs.pop("tgi_speculate", None)
    if n is None:
        return knobs
    if n < 1:
        raise ValueError(f"--speculate {n}: TGI speculates on at least 1 token (leave the flag "
                         "out to turn speculation off)")
    return {**knobs, "speculative_config": {"method": "ngram", "num_speculative_tokens": n}}


def resolve_speculate(knobs: Any, sources: dict[str, Source]) -> Any:
    """The generic knob as TGI takes it: n-gram with a token count (Medusa heads ride in the
    model repository, not in a separate draft)."""
    sc = knobs.speculative_config
    if sc is None:
        return None
    if sc.method != "ngram":
        raise InvalidInputError(f"TGI has no {sc.method} speculation: --speculate N uses the "
                                "model's own Medusa / MLP-speculator heads, or n-gram",
                                hint="plan TGI with {\"method\": \"ngram\", "
                                "\"num_speculative_tokens\": N} (the launcher's --speculate N)",
                                code="speculative-invalid", knob="speculative_config")
    if not sc.num_speculative_tokens:
        raise InvalidInputError("TGI's --speculate needs a token count",
                                hint="e.g. --speculate 2", code="speculative-invalid",
                                knob="speculative_config")
    sources["speculative_config"] = "cli"
    return sc


# --max-concurrent-requests default (launcher/src/main.rs; the Args lines of TGI logs)
MAX_CONCURRENT_REQUESTS = 128

# --dtype values the launcher takes: launcher/src/main.rs `enum Dtype` (clap ValueEnum: Float16
# → "float16", BFloat16 named "bfloat16"), the same from v0.9.4 to v3.3.7; no float32, no auto
# (leaving the flag out is TGI's auto: the server picks the model's dtype, models/__init__.py
# get_model). Anything else: clap refuses the line before the server starts.
LAUNCHER_DTYPES = ("float16", "bfloat16")


def _capability(g: GpuSpec) -> float | None:
    try:
        return float(g.compute_capability) if g.compute_capability else None
    except ValueError:  # AMD gfx names
        return None


class TgiEngine(Engine):
    name = "tgi"
    label = "TGI"
    newest_version = NEWEST_MODELLED
    flags = knob_flags(CLI_FLAGS, (
        "tensor_parallel_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
        "gpu_memory_utilization", "kv_cache_dtype", "dtype", "quantization", "max_input_tokens"))
    settings = {"speculative_config": "--speculate N (n-gram or the model's own heads)"}
    # What TGI does instead of knobs it lacks: launcher/src/main.rs `cuda_graphs` ("Use \"0\" to
    # disable", v2.0.0–v3.3.7); prefix caching has no flag: `resolve_attention` reads the
    # PREFIX_CACHING environment variable (v2.4.0–v3.3.7; USE_PREFIX_CACHING in v2.3), which
    # server/text_generation_server/models/globals.py takes as on for "1" / "true"
    instead = {
        "enforce_eager": "--cuda-graphs 0 (kvplan does not model TGI's CUDA graphs)",
        "enable_prefix_caching": "the launcher's PREFIX_CACHING environment variable, not a flag "
                                 "(PREFIX_CACHING=0 turns it off, USE_PREFIX_CACHING=0 in 2.3), "
                                 "which kvplan does not model",
    }
    host_errors = frozenset({"tgi-shards-exceed-node"})  # host_problem
    syntax = DeploySyntax(cli_flags=CLI_FLAGS, executables=(("text-generation-launcher", None),),
                          image_versions=_IMAGES, env_flags=ENV_FLAGS,
                          image_entrypoints=(re.compile(r"text-generation-inference"),),
                          known_flags=known_flags.TGI, combine=combine_flags,
                          unmodelled_features={"--lora-adapters": "LoRA adapters"},
                          flag_releases=FLAG_RELEASES,  # --- flagrel ---
                          # --- schemas (#23) --- the published image (tag = the release)
                          image="ghcr.io/huggingface/text-generation-inference:{v}",
                          rocm_image=rocm_image,
                          # --- emitport --- the launcher's --port defaults to 3000 and is read
                          # from PORT (launcher/src/main.rs `#[clap(default_value = "3000", long,
                          # short, env)] port`), and the image sets PORT=80 (Dockerfile, base
                          # stage ENV; v3.3.7)
                          port=3000, image_port=80,
                          # --- emitshm --- README.md "A note on Shared Memory (shm)" (v3.3.7):
                          # NCCL falls back to host memory for tensor parallelism; in Kubernetes
                          # an emptyDir of medium Memory, sizeLimit 1Gi, mounted at /dev/shm
                          shm_size="1Gi")
    # Latency model (kvplan/perf/step.py): no calibration rows; TGI runs a prefill batch that pauses
    # decoding, SGLang's batching style, so it borrows SGLang's fit (never "calibrated").
    calibration = Calibration(style="separate", borrows="sglang")
    # --- whatif --- the kernels TGI serves each checkpoint format with, a real checkpoint's or
    # a what-if's (Engine.checkpoint_kernels): its --quantize values (launcher/src/main.rs
    # Quantization) for awq (llm-awq GEMM / Marlin kernels, compute capability ≥ 7.5) and
    # compressed-tensors (int8 W8A8, server/text_generation_server/layers/compressed_tensors/,
    # v2.4.1+). No NVFP4 or MXFP4 rule modelled.
    checkpoint_kernels = {"awq": (Kernel("awq", (7, 5)),),
                          "w8a8": (Kernel("compressed-tensors", (7, 5)),)}
    # --- fp8cap --- server/text_generation_server/layers/fp8.py (v3.3.7) `get_fp8_linear`
    # takes the Marlin FP8 (W8A16) layer on compute capability 8.x only; below it Fp8Linear's
    # GEMM is CUTLASS's (cutlass_scaled_mm_supports_fp8: no) or torch._scaled_mm, which needs
    # FP8 tensor cores (8.9+): the model loads and the warm-up's first forward fails
    fp8_refusal = ("TGI has no FP8 GEMM for them there (layers/fp8.py get_fp8_linear: its "
                   "Marlin FP8 fallback runs on capability 8.x only, torch._scaled_mm needs "
                   "8.9), so its warm-up fails")

    def era(self, version: str) -> tuple[str, list[Problem]]:
        v = parse_version(version)
        era = select_era(v)
        problems = []
        if v < ERAS[0].first:
            problems.append(Problem(
                code="engine-version-not-modelled", severity="warning",
                message=f"tgi {version}: releases before 0.9.4 do not size the KV cache at warm-up "
                "(max_batch_total_tokens defaults to 16000); modelled with the 0.9.4 accounting"))
        return f"{era.name} accounting", problems

    def eras(self) -> list[tuple[str, str]]:
        return [(f"{e.name} accounting", ".".join(map(str, e.first))) for e in ERAS]

    def _lengths(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment,
                 max_input: int | None) -> Lengths:
        v = parse_version(dep.engine_version)
        launch = Launcher(gpu.smi_names[0] if gpu.smi_names else None, gpu.smi_total_mib,
                          dep.tensor_parallel_size, dep.gpu_memory_utilization)
        return default_lengths(m, select_era(v), v, launch, max_input)

    def resolve(self, m: ModelSpec, gpu: GpuSpec, layout: Layout, knobs: Knobs,
                version: str) -> Deployment:
        v = parse_version(version)
        era = select_era(v)
        sources: dict[str, Source] = dict(layout.sources)
        if sources.get("dtype") == "cli" and layout.dtype not in LAUNCHER_DTYPES:
            raise InvalidInputError(f"--dtype {layout.dtype} is not a value TGI's launcher "
                                    f"takes: its --dtype is {' or '.join(LAUNCHER_DTYPES)}",
                                    hint=f"use --dtype {' or '.join(LAUNCHER_DTYPES)}, or leave "
                                    "it out for the model's own dtype",
                                    code="dtype-unsupported", knob="dtype")
        for key in ("max_model_len", "max_input_tokens", "max_num_batched_tokens",
                    "gpu_memory_utilization", "max_num_seqs"):
            sources[key] = "cli" if getattr(knobs, key) is not None else "engine-default"
        q = layout.quant
        rocm = on_rocm_image(gpu, v)
        block = block_size(m, era, _capability(gpu), rocm)
        speculative = resolve_speculate(knobs, sources)
        per, host = host_gpus(gpu, knobs, layout.tensor_parallel_size)
        chunking = prefill_chunking(era, rocm, block, speculative is not None)
        dep = Deployment(
            engine=self.name, engine_version=version, era=f"{era.name} accounting",
            tensor_parallel_size=layout.tensor_parallel_size, dtype=layout.dtype,
            # the launcher takes fp8_e4m3fn / fp8_e5m2 only: a generic fp8 runs as e4m3, and the
            # plan's inputs say so (the value `kvplan check` reads back from its launch line)
            kv_cache_dtype="fp8_e4m3" if layout.kv_cache_dtype == "fp8" else layout.kv_cache_dtype,
            quantization=q.method if q else None, quant=q,
            max_num_seqs=knobs.max_num_seqs or MAX_CONCURRENT_REQUESTS, max_num_batched_tokens=1,
            gpu_memory_utilization=knobs.gpu_memory_utilization or 1.0,
            block_size=block,
            gpu_total_bytes=layout.gpu_total_bytes,
            other_processes_bytes=layout.other_processes_bytes,
            # the ROCm image turns prefix caching off (PREFIX_CACHING=0, `on_rocm_image`)
            enable_prefix_caching=not rocm,
            speculative_config=speculative, sources=sources,
            options=TgiOptions(host_gpus=per, host=host, prefill_chunking=chunking, rocm=rocm))
        lengths = self._lengths(m, gpu, dep, knobs.max_input_tokens)
        prefill = knobs.max_num_batched_tokens or lengths.prefill_tokens
        # a config without any length key leaves the KV pool as the only bound (plan_memory):
        # refusing a --max-total-tokens above the prefill size there refused the plan's own line
        model_max = launcher_max_position(m)
        max_total = knobs.max_model_len
        if max_total and model_max and max_total > model_max:
            raise InvalidInputError(f"--max-model-len {max_total} (TGI's --max-total-tokens) "
                                    f"exceeds the model's {model_max}",
                                    hint=f"use --max-model-len {model_max} or less",
                                    code="max-model-len-above-model-maximum", knob="max_model_len")
        if max_total is not None and max_total < 2:
            raise InvalidInputError(f"--max-model-len {max_total} (TGI's --max-total-tokens) "
                                    "leaves no room for a prompt and a generated token (TGI's "
                                    "launcher refuses it)",
                                    hint="use --max-model-len 2 or more",
                                    code="max-model-len-too-short",
                                    knob="max_model_len")
        max_input = lengths.max_input_tokens or (max_total - 1 if max_total else None)
        max_total = max_total or lengths.max_total_tokens
        if max_input and max_total and max_input >= max_total:
            raise InvalidInputError(f"--max-input-tokens {max_input} must be below "
                                    f"--max-total-tokens {max_total} (TGI's launcher refuses "
                                    "to start)",
                                    hint="lower --max-input-tokens or raise --max-total-tokens")
        if era.defaults == "3.x" and not chunking:
            max_input, prefill = self._unchunked(knobs, sources, max_input, max_total, prefill)
        if max_input and prefill < max_input and (era.defaults != "3.x" or not chunking):
            raise InvalidInputError(f"--max-batch-prefill-tokens {prefill} must be at least "
                                    f"--max-input-tokens {max_input} (TGI refuses to start: "
                                    + ("its launcher" if era.defaults != "3.x" else
                                       "without prefill chunking, its router") + ")",
                                    hint="raise --max-batch-prefill-tokens")
        return dep.model_copy(update={"max_model_len": max_total, "max_input_tokens": max_input,
                                      "max_num_batched_tokens": prefill, "sources": sources})

    @staticmethod
    def _unchunked(knobs: Knobs, sources: dict[str, Source], max_input: int | None,
                   max_total: int | None, prefill: int) -> tuple[int | None, int]:
        """(max_input_tokens, max_batch_prefill_tokens) for a 3.x server without prefill
        chunking (`prefill_chunking`), where a prompt must fit one prefill batch. A given
        --max-input-tokens above the launcher's default prefill raises the prefill to it (the
        line writes it; the warm-up prefills that many tokens), to one more without a
        --max-total-tokens (the warm-up's batch then sets max_total_tokens, which must exceed
        the input); an input derived from --max-total-tokens is capped at the prefill."""
        given = knobs.max_input_tokens
        if given is not None and knobs.max_num_batched_tokens is None:
            need = given + (0 if max_total else 1)
            if need > prefill:
                sources["max_num_batched_tokens"] = "kvplan-default"
                return max_input, need
            return max_input, prefill
        if given is not None and max_total is None and given >= prefill:
            raise InvalidInputError(
                f"--max-input-tokens {given} needs --max-num-batched-tokens (TGI's "
                f"--max-batch-prefill-tokens) {prefill} above it without prefill chunking: "
                "with no --max-total-tokens the warm-up sets max_total_tokens to the "
                f"{prefill} tokens it prefilled, and TGI's router refuses an input that is "
                "not below it", code="tgi-input-above-prefill", knob="max_input_tokens",
                hint=f"pass --max-model-len above {given}, or --max-num-batched-tokens "
                f"{given + 1} or more")
        if given is None and max_input is not None and max_input > prefill:
            sources["max_input_tokens"] = "kvplan-default"
            return prefill, prefill
        return max_input, prefill

    def _warmup_peak(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment, era: TgiEra) -> int:
        """Eager PyTorch forward of one max_batch_prefill_tokens batch + its prompt logits +
        what the warm-up holds beyond a plain prefill (`warmup_extra_bytes`)."""
        warm = dep.model_copy(update={"max_num_seqs": 1})
        tp, prefill = dep.tensor_parallel_size, dep.max_num_batched_tokens
        max_input = dep.max_input_tokens
        if (max_input is None and dep.max_model_len is None and era.defaults == "3.x"
                and not tgi_options(dep).prefill_chunking):
            # without lengths and chunking, TGI settles on prefill − 1 input tokens (the
            # engine_defaults the launch line writes), and the warm-up of that line splits its
            # batch there: sized as the line runs, so `check` of the line reads the same
            max_input = prefill - 1
        return (forward.activation_bytes(m, warm, last_stage=True, eager_v0=True)
                + prefill_logits_bytes(m, era, tp, prefill, dep.dtype)
                + warmup_extra_bytes(m, parse_version(dep.engine_version), tp, prefill, dep.dtype,
                                     _capability(gpu), max_input))

    def memory(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment) -> MemoryResult:
        v = parse_version(dep.engine_version)
        era = select_era(v)
        tp = dep.tensor_parallel_size
        opts = tgi_options(dep)
        unchunked = era.defaults == "3.x" and not opts.prefill_chunking
        wm = heaviest_stage(m, tp=tp, pp=1, dtype=dep.dtype, quant=dep.quant)
        warmup = self._warmup_peak(m, gpu, dep, era)
        # without chunking the warm-up sets max_total_tokens to the tokens it prefilled
        # (`prefill_chunking`), when none is given
        total = dep.max_model_len or (dep.max_num_batched_tokens if unchunked else None)
        res = plan_memory(m, era, total_bytes=dep.gpu_total_bytes, tp=tp,
                          weights_bytes=wm.reserved_bytes,
                          warmup_peak_bytes=warmup, kv_dtype=dep.kv_cache_dtype,
                          fraction=dep.gpu_memory_utilization,
                          prefill_tokens=dep.max_num_batched_tokens,
                          max_input_tokens=dep.max_input_tokens, max_total_tokens=total,
                          block=dep.block_size, gpu=gpu, other_bytes=dep.other_processes_bytes)
        problems = list(res.problems)
        host = host_problem(m, gpu, tp, opts)
        if host is not None:
            problems.insert(0, host)
        if unchunked:
            default = self._lengths(m, gpu, dep, None).prefill_tokens
            problems.append(self._unchunked_note(dep, opts, default))
        if not dep.user_set("max_num_batched_tokens") and (
                dep.sources.get("max_num_batched_tokens") != "kvplan-default"):
            lengths = self._lengths(m, gpu, dep, dep.max_input_tokens
                                    if dep.user_set("max_input_tokens") else None)
            problems.append(Problem(
                code="tgi-default-prefill", severity="warning" if lengths.assumed else "info",
                message=f"TGI's launcher sets --max-batch-prefill-tokens to "
                f"{dep.max_num_batched_tokens:,} ({lengths.how}); the warm-up prefills that many "
                "tokens, so its activation peak is sized from it"
                + ("; pass --max-num-batched-tokens with the value the launcher logs"
                   if lengths.assumed else "")))
        problems.append(Problem(
            code="tgi-upper-bound", severity="warning",
            message="TGI capacity is an upper bound: the replayed TGI logs held more memory at "
            "warm-up than kvplan models and got fewer KV tokens (README accuracy table)"))
        model_max = launcher_max_position(m) or dep.max_num_batched_tokens
        # no KV cache: TGI stops at warm-up before deriving max_total_tokens from the pool, so
        # the request length shown is the model's, which it would have started from
        length = res.max_total_tokens or (dep.max_model_len or model_max)
        block = res.block_size
        sc = dep.speculative_config
        extra = (sc.num_speculative_tokens or 0) if sc is not None else 0  # slots per request
        spec = None
        if sc is not None:
            spec = PlanSpeculative(method="ngram", draft_model=None, num_speculative_tokens=extra,
                                   draft_layers=0, draft_weights_bytes=0,
                                   draft_kv_bytes_per_token=0, sampler_rows_factor=1)
            problems.append(Problem(
                code="tgi-speculate", severity="info",
                message=f"--speculate {extra}: every request reserves {extra} more KV slots; "
                "n-gram speculation loads nothing, but Medusa / MLP-speculator heads shipped in "
                "the model repository (config medusa_num_heads / mlp_speculator) load with the "
                "weights and are not counted by kvplan"))
        stage = StageBreakdown(
            layers=m.num_layers, weights_bytes=wm.reserved_bytes,
            weights_tensor_bytes=wm.tensor_bytes, activation_bytes=warmup,
            non_torch_bytes=context_bytes(tp, block, gpu), cudagraph_bytes=0,
            kv_cache_bytes=res.kv_bytes, num_blocks=res.tokens // block,
            bytes_per_block=res.bytes_per_token * block)
        if era.wiggle_on_budget:
            budget = (f"{era.wiggle_room:g} × cuda_memory_fraction "
                      f"{dep.gpu_memory_utilization:g} × total")
        elif era.wiggle_room == 1:
            budget = f"cuda_memory_fraction {dep.gpu_memory_utilization:g} × total (no wiggle room)"
        else:
            budget = (f"cuda_memory_fraction {dep.gpu_memory_utilization:g} × total; KV gets "
                      f"{era.wiggle_room:g} × what is left")
        return memory_result(
            gpu, dep, era=f"{era.name} accounting", budget_bytes=res.budget_bytes, stages=[stage],
            cudagraph_in_budget=False, estimated=["activation_bytes", "non_torch_bytes"],
            bytes_per_token=res.bytes_per_token, block_size=block, num_blocks=res.tokens // block,
            reserved_blocks=0, tokens=res.tokens, max_model_len=length,
            max_concurrency=res.tokens / (length + extra) if length else 0.0,
            max_model_len_fit=min(res.tokens, model_max), fits=res.fits and host is None,
            problems=problems,
            notes=memory_notes(budget=budget, activation="estimate: warm-up prefill",
                               non_torch="estimate: CUDA context, NCCL",
                               kv="KV blocks after warm-up",
                               kv_tokens_label="max_batch_total_tokens"),
            request_blocks=lambda n: cdiv(n + extra, block), speculative=spec,
            # the warm-up's max_input_tokens is max_total_tokens − 1 (flash_causal_lm.py
            # `warmup`, v3.3.7): the value the launch line writes
            engine_defaults={"max_model_len": length,
                             "max_input_tokens": dep.max_input_tokens or length - 1}
            if dep.max_model_len is None else {})

    @staticmethod
    def _unchunked_note(dep: Deployment, opts: TgiOptions, default: int) -> Problem:
        """Why prompts are bounded by the prefill batch here, and what the line does about it
        (`default`: the launcher's own --max-batch-prefill-tokens)."""
        why = ("TGI's ROCm image sets PREFILL_CHUNKING=0 (Dockerfile_amd)" if opts.rocm else
               "--speculate turns TGI's prefill chunking off" if dep.speculative_config else
               "paged attention has no prefill chunking in TGI")
        prefill = dep.max_num_batched_tokens
        src = dep.sources
        if src.get("max_num_batched_tokens") == "kvplan-default":
            what = (f"kvplan's launch line sets --max-batch-prefill-tokens {prefill} for the "
                    f"given --max-input-tokens {dep.max_input_tokens} (a line without it gets "
                    f"the launcher's {default:,}, which the router refuses), and the warm-up "
                    "prefills that many tokens (its activation peak is sized from it)")
        elif src.get("max_input_tokens") == "kvplan-default":
            what = (f"prompts are capped at --max-input-tokens {dep.max_input_tokens} below "
                    f"--max-total-tokens {dep.max_model_len}; pass --max-input-tokens (kvplan "
                    "raises --max-batch-prefill-tokens to it, and sizes the warm-up from it) or "
                    "--max-num-batched-tokens for longer prompts")
        elif dep.max_model_len is None and dep.max_input_tokens is None:
            what = (f"without lengths TGI starts with max_total_tokens {prefill} (the tokens "
                    "its warm-up batch prefilled) and max_input_tokens one less; pass "
                    "--max-model-len / --max-input-tokens for longer requests")
        else:
            what = "the lengths given fit it"
        return Problem(code="tgi-no-prefill-chunking",
                       severity="warning" if "kvplan-default" in (
                           src.get("max_input_tokens"), src.get("max_num_batched_tokens"))
                       else "info",
                       message=f"{why}: a prompt must fit one prefill batch, so TGI's router "
                       f"refuses --max-input-tokens above --max-batch-prefill-tokens {prefill} "
                       f"(backends/v3/src/main.rs); {what}")

    def fraction_needed(self, m: ModelSpec, gpu: GpuSpec, dep: Deployment, res: MemoryResult,
                        blocks: int) -> float | None:
        """Smallest --cuda-memory-fraction (hundredths) whose KV cache holds `blocks` blocks, by
        bisection over the era's formula; None when even 1.0 is not enough."""
        def blocks_at(f: float) -> int:
            return self.memory(m, gpu,
                               dep.model_copy(update={"gpu_memory_utilization": f})).num_blocks

        if blocks_at(1.0) < blocks:
            return None
        lo, hi = 0, 100  # hundredths
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if blocks_at(mid / 100) >= blocks:
                hi = mid
            else:
                lo = mid
        return hi / 100

    def fraction_ceiling(self, dep: Deployment, res: MemoryResult) -> float:
        return 1.0  # the launcher's own wiggle room already keeps headroom

    def max_seqs_cap(self, gpu: GpuSpec, dep: Deployment) -> int | None:
        return dep.max_num_seqs if dep.user_set("max_num_seqs") else MAX_CONCURRENT_REQUESTS

    def command(self, ref: str, dep: Deployment, rec: Recommendations, workload: Workload,
                revision: str | None) -> str:
        args = ["text-generation-launcher", "--model-id", ref]
        if dep.tensor_parallel_size != 1:
            args += [self.flags["tensor_parallel_size"], str(dep.tensor_parallel_size)]
        batched = batched_tokens_flag_value(rec, dep)
        if batched is None and dep.sources.get("max_num_batched_tokens") == "kvplan-default":
            batched = dep.max_num_batched_tokens  # raised for a given input (`_unchunked`)
        if rec.max_model_len.value:
            total = int(rec.max_model_len.value)
            asked = dep.max_input_tokens if dep.user_set("max_input_tokens") else None
            inp = asked if asked and asked < total else total - 1
            if select_era(parse_version(dep.engine_version)).defaults == "3.x" and not (
                    tgi_options(dep).prefill_chunking):
                # no prefill chunking: the router refuses an input above the prefill batch
                inp = min(inp, batched or dep.max_num_batched_tokens)
            args += [self.flags["max_input_tokens"], str(inp),
                     self.flags["max_model_len"], str(total)]
        if batched is not None:
            args += [self.flags["max_num_batched_tokens"], str(batched)]
        if rec.gpu_memory_utilization.value and rec.gpu_memory_utilization.value != 1.0:
            args += [self.flags["gpu_memory_utilization"], f"{rec.gpu_memory_utilization.value:g}"]
        has_workload = workload.sizes_batch()
        if rec.max_num_seqs.value and (has_workload or dep.user_set("max_num_seqs")):
            args += [self.flags["max_num_seqs"], str(rec.max_num_seqs.value)]
        if dep.user_set("dtype"):
            args += [self.flags["dtype"], dep.dtype]
        if dep.kv_cache_dtype.startswith("fp8"):
            args += [self.flags["kv_cache_dtype"], self.kv_cache_dtype_arg(dep.kv_cache_dtype)]
        if dep.user_set("quantization") and dep.quantization:
            args += [self.flags["quantization"], dep.quantization]
        if revision:
            args += ["--revision", revision]
        if dep.speculative_config is not None:
            args += ["--speculate", str(dep.speculative_config.num_speculative_tokens)]
        return shlex.join(args)

    def kv_cache_dtype_arg(self, kv_dtype: str, version: str | None = None) -> str:
        """The launcher's --kv-cache-dtype takes fp8_e4m3fn or fp8_e5m2 (launcher/src/main.rs
        `KVCacheDtype`, v3.3.7): a generic fp8 runs as E4M3."""
        if not kv_dtype.startswith("fp8"):
            return kv_dtype
        return "fp8_e5m2" if kv_dtype == "fp8_e5m2" else "fp8_e4m3fn"

    def layout_problems(self, m: ModelSpec) -> list[Problem]:
        if m.linear_attention is not None or m.cross_attention_tokens:
            return super().layout_problems(m)
        if m.mla is not None or m.layer_types:
            return [Problem(code="engine-layout", severity="info",
                            message="TGI allocates every layer's K and V for every token (no MLA "
                            "latent cache, no sliding-window savings) — as modelled here")]
        return []


ENGINE = TgiEngine()
