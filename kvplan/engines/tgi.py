"""TGI's (text-generation-inference) start-up memory accounting (snapshot 2026-01-08;
reference/ENGINE_MEMORY.md §3). Pure functions.

After loading the weights TGI runs one warm-up prefill of max_batch_prefill_tokens and
measures free memory; it keeps a 10 % wiggle room and gives the rest to KV blocks:
tokens = (0.9 × cuda_memory_fraction × total − in use after warm-up) / bytes per token
(server/text_generation_server/models/flash_causal_lm.py `warmup`, models/globals.py
TGI_WIGGLE_ROOM = 0.90). `max_batch_total_tokens` is then inferred from the block count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..kv import kv_heads_per_gpu
from ..specs import ModelSpec, Problem
from ..units import DTYPE_BYTES, GiB

NEWEST_MODELLED = "3.3.6"
WIGGLE_ROOM = 0.90
DEFAULT_PREFILL_TOKENS = 4096  # launcher default when no compute-optimal estimate applies
# Memory in use before the weights (CUDA context, cuBLAS; + NCCL at TP > 1): vLLM's measured
# H200 figure, and the SGLang TP8 log's increment for NCCL. Estimates.
CONTEXT_BYTES_TP1 = int(0.70 * GiB)
CONTEXT_BYTES_TP_EXTRA = int(1.92 * GiB)


def block_size(m: ModelSpec) -> int:
    """flashinfer (BLOCK_SIZE 1) when head_dim ∈ {64, 128, 256}, else paged attention (16)
    (server/text_generation_server/models/globals.py)."""
    return 1 if m.head_dim in (64, 128, 256) and m.mla is None else 16


def prefill_tokens_default(m: ModelSpec) -> int:
    """max_batch_prefill_tokens: 4096 (8000 for Gemma 3), capped by max_position_embeddings
    (launcher/src/main.rs)."""
    default = 8000 if m.model_type == "gemma3" else DEFAULT_PREFILL_TOKENS
    return min(default, m.max_position_embeddings or default)


def bytes_per_token(m: ModelSpec, tp: int, kv_dtype: str) -> int:
    """layers × kv_heads_per_gpu × head_dim × 2 × dt: TGI allocates every layer fully (no
    sliding-window savings)."""
    return m.num_layers * kv_heads_per_gpu(m, tp) * m.head_dim * 2 * DTYPE_BYTES[kv_dtype]


@dataclass(frozen=True)
class TgiResult:
    kv_bytes: int
    bytes_per_token: int
    block_size: int
    tokens: int  # max_batch_total_tokens
    max_total_tokens: int
    prefill_tokens: int
    problems: list[Problem]

    @property
    def fits(self) -> bool:
        return self.kv_bytes > 0 and self.tokens >= self.max_total_tokens


def plan_memory(m: ModelSpec, *, total_bytes: int, tp: int, weights_bytes: int,
                warmup_peak_bytes: int, kv_dtype: str, fraction: float, prefill_tokens: int,
                max_total_tokens: int | None) -> TgiResult:
    """kv = 0.9 × fraction × total − (context + weights + warm-up peak);
    tokens = kv // bytes_per_token, rounded down to the block size."""
    used = (CONTEXT_BYTES_TP1 + (CONTEXT_BYTES_TP_EXTRA if tp > 1 else 0) + weights_bytes
            + warmup_peak_bytes)
    kv = math.floor(WIGGLE_ROOM * fraction * total_bytes) - used
    per_token = bytes_per_token(m, tp, kv_dtype)
    bs = block_size(m)
    tokens = max(0, kv) // per_token // bs * bs
    model_max = m.max_position_embeddings or tokens
    total = max_total_tokens or min(tokens, model_max)
    problems = []
    if kv <= 0:
        problems.append(Problem(
            code="no-kv-memory", severity="error",
            message="weights and the warm-up prefill leave no memory for the KV cache inside "
            f"{WIGGLE_ROOM} × cuda_memory_fraction {fraction} of the GPU: TGI fails its warm-up "
            "('Not enough memory to handle …'); lower --max-batch-prefill-tokens or add shards"))
    elif tokens < total:
        problems.append(Problem(
            code="max-model-len-too-long", severity="error",
            message=f"the KV cache holds {tokens:,} tokens, fewer than --max-total-tokens "
            f"{total:,}: TGI refuses to start ('max_total_tokens … must be <= "
            "max_batch_total_tokens')"))
    return TgiResult(kv, per_token, bs, tokens, total, prefill_tokens, problems)
