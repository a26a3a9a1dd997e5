"""KvCache.pool_tokens: the block pool a hybrid model's requests share, against the
"GPU KV cache size" vLLM ≤0.20 prints (one layer group's share)."""

from __future__ import annotations

from kvplan.api import plan


def test_gpt_oss_prints_one_group_but_pools_both() -> None:
    """gpt-oss-120b (config: 36 layers alternating sliding_attention / full_attention, 8 KV
    heads of 64, sliding_window 128) on one H100, vLLM 0.11.0, --max-model-len 32768. Two
    KV groups of 18 layers; a page is 16 tokens × 2 (K, V) × 8 × 64 × 2 B = 32,768 B per layer,
    a block 18 × 32,768 = 589,824 B (vllm/v1/core/kv_cache_utils.py, 0.11.0: one tensor per
    group slot, shared by one layer of each group). Printed: (num_blocks // 2) × 16; the pool
    num_blocks × 16."""
    p = plan("openai/gpt-oss-120b", "h100-sxm-80gb", engine="vllm", engine_version="0.11.0",
             max_model_len=32768)
    kv = p.kv_cache
    assert kv.bytes_per_block == 589_824
    assert kv.tokens == kv.num_blocks // 2 * 16
    assert kv.pool_tokens == kv.num_blocks * 16
    assert "pool_tokens" not in p.model_dump()["kv_cache"]  # not part of the JSON schema


def test_single_group_model_pool_is_the_printed_size() -> None:
    """Qwen3-14B (40 full-attention layers, one group): printed size = num_blocks × 16."""
    p = plan("Qwen/Qwen3-14B", "h100-sxm-80gb", engine="vllm", engine_version="0.11.0")
    assert p.kv_cache.pool_tokens == p.kv_cache.tokens == p.kv_cache.num_blocks * 16
