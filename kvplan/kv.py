"""KV-cache sizes: bytes per token, pages, blocks and per-request need (vLLM V1 paging).

Full attention with GQA/MQA (vllm/v1/kv_cache_interface.py FullAttentionSpec, 0.33.0):
page per layer = block_size × 2 (K and V) × kv_heads_per_gpu × head_dim × dtype bytes, with
kv_heads_per_gpu = max(1, kv_heads // tp) (vllm/config/model.py get_num_kv_heads).
"""

from __future__ import annotations

from .specs import ModelSpec
from .units import DTYPE_BYTES, cdiv


def kv_heads_per_gpu(m: ModelSpec, tp: int) -> int:
    """KV heads each TP rank stores; replicated once tp ≥ kv_heads."""
    return max(1, m.num_kv_heads // tp)


def kv_bytes_per_token_per_layer(m: ModelSpec, *, tp: int, kv_dtype: str) -> int:
    """2 × kv_heads_per_gpu × head_dim × dtype bytes (K and V of one token in one layer)."""
    return 2 * kv_heads_per_gpu(m, tp) * m.head_dim * DTYPE_BYTES[kv_dtype]


def bytes_per_block(m: ModelSpec, *, layers: int, tp: int, kv_dtype: str, block_size: int) -> int:
    """One block id spans one page in every layer: layers × block_size × per-token-per-layer bytes."""
    return layers * block_size * kv_bytes_per_token_per_layer(m, tp=tp, kv_dtype=kv_dtype)


def blocks_per_request(max_model_len: int, block_size: int) -> int:
    """Blocks one request of max_model_len tokens needs: cdiv(L, block_size)."""
    return cdiv(max_model_len, block_size)
