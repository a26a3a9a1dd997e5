"""Workload-side effects of the optional features that every engine shares (docs/features.md).

Prefix caching: requests that start with the same `shared_prefix_tokens` (a system prompt)
share the KV blocks that prefix fills completely; a partly filled block is private to each
request (vLLM hashes and shares full blocks only: vllm/v1/core/kv_cache_utils.py
hash_block_tokens / vllm/v1/core/block_pool.py). With a block size of 1 (SGLang's radix
cache) every prefix token is shared. Pure arithmetic over the engine's MemoryResult.
"""

from __future__ import annotations

from .engines.base import MemoryResult
from .specs import Deployment, ModelSpec, Problem


def prefix_shared(m: ModelSpec, dep: Deployment) -> bool:
    """Prefix caching is on and kvplan models its sharing (not for sliding-window, chunked or
    linear-attention layers, which keep only recent pages)."""
    return dep.enable_prefix_caching and not any(
        kind in ("sliding", "chunked", "linear") for kind in m.layer_types)


def prefix_concurrency(m: ModelSpec, dep: Deployment, res: MemoryResult,
                       shared_tokens: int | None) -> tuple[float | None, list[Problem]]:
    """max_concurrency when every request shares its first `shared_tokens` tokens:

        s = min(shared_tokens, L) // block_size          shared blocks, stored once
        C = (num_blocks − s) / (blocks_per_request(L) − s)

    (the engine's own concurrency is num_blocks / blocks_per_request(L)). None when no prefix
    is given, when prefix caching is off, or for hybrid layouts (sliding-window / Mamba layers
    keep only recent pages, so their sharing is not modelled)."""
    if not shared_tokens or not res.max_model_len:
        return None, []
    if not dep.enable_prefix_caching:
        return None, [Problem(code="prefix-caching-off", severity="info",
                              message="--shared-prefix-tokens has no effect: prefix caching is "
                              "off (--no-enable-prefix-caching)")]
    if any(kind in ("sliding", "chunked", "linear") for kind in m.layer_types):
        return None, [Problem(code="prefix-sharing-not-modelled", severity="info",
                              message="prefix sharing is not modelled for sliding-window or "
                              "linear-attention layers; effective concurrency with the shared "
                              "prefix is not given")]
    length = res.max_model_len
    shared = min(shared_tokens, length) // res.block_size
    per_request = res.request_blocks(length)
    if shared >= per_request or res.num_blocks <= shared:
        return None, []
    return round((res.num_blocks - shared) / (per_request - shared), 2), []
