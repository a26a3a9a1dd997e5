"""KV transfer between the pools and the connectors' buffers, against hand-worked values."""

from __future__ import annotations

import pytest

from kvplan.engines import pd
from kvplan.perf.kv_transfer import transfer

# Llama-3.3-70B (config.json: 80 layers, 8 KV heads, head_dim 128, bf16) at TP 4: 2 KV heads per
# GPU → 2 (K and V) × 2 heads × 128 × 2 bytes × 80 layers = 81,920 bytes per token per GPU.
LLAMA70_TP4_BYTES = 2 * 2 * 128 * 2 * 80


def test_whole_transfer_after_the_prefill():
    t = transfer(tokens=3000, prefill_bytes_per_token_per_gpu=LLAMA70_TP4_BYTES,
                 decode_bytes_per_token_per_gpu=LLAMA70_TP4_BYTES, decode_gpus=4,
                 link_gbps=400, per_chunk=False, chunk_tokens=8192, prefill_s=0.3)
    assert t.recv_bytes_per_gpu == 245_760_000  # 3000 × 81,920
    assert t.bytes_per_request == 983_040_000  # × 4 decode GPUs
    # 245.76 MB over 400 Gb/s = 50 GB/s → 4.9152 ms, all of it after the prefill
    assert t.time_ms == pytest.approx(4.9152)
    assert t.exposed_ms == t.time_ms


def test_per_chunk_transfer_exposes_only_the_last_chunk_when_the_link_keeps_up():
    t = transfer(tokens=3000, prefill_bytes_per_token_per_gpu=LLAMA70_TP4_BYTES,
                 decode_bytes_per_token_per_gpu=LLAMA70_TP4_BYTES, decode_gpus=4,
                 link_gbps=400, per_chunk=True, chunk_tokens=1024, prefill_s=0.3)
    # the last chunk: 1024 of 3000 tokens → 4.9152 × 1024 / 3000 = 1.67772 ms
    assert t.exposed_ms == pytest.approx(4.9152 * 1024 / 3000)


def test_per_chunk_transfer_on_a_slow_link_exposes_what_the_link_has_not_caught_up_with():
    # 1 Gb/s: 245.76 MB take 1.96608 s; the prefill of the earlier chunks hides
    # 0.3 s × (1 − 1024/3000)
    t = transfer(tokens=3000, prefill_bytes_per_token_per_gpu=LLAMA70_TP4_BYTES,
                 decode_bytes_per_token_per_gpu=LLAMA70_TP4_BYTES, decode_gpus=4,
                 link_gbps=1, per_chunk=True, chunk_tokens=1024, prefill_s=0.3)
    assert t.exposed_ms == pytest.approx(1966.08 - 300 * (1 - 1024 / 3000))


def test_the_slower_side_sets_the_time():
    # a TP 2 prefill GPU sends twice what a TP 4 decode GPU receives
    t = transfer(tokens=1000, prefill_bytes_per_token_per_gpu=2 * LLAMA70_TP4_BYTES,
                 decode_bytes_per_token_per_gpu=LLAMA70_TP4_BYTES, decode_gpus=4,
                 link_gbps=400, per_chunk=False, chunk_tokens=8192, prefill_s=0.1)
    assert t.time_ms == pytest.approx(2 * 81_920_000 / 50e9 * 1e3)


def test_trtllm_cache_transceiver_buffer():
    """cacheTransBuffer.cpp: (max_tokens_in_buffer + tokens_per_block) × bytes per token, for 1
    receive + 2 send buffers (envUtils.cpp defaults)."""
    assert pd.transceiver_tokens(3000, 32) == 3008  # whole blocks of 32
    assert pd.buffer_bytes("trtllm", kv_bytes_per_token=LLAMA70_TP4_BYTES, block_size=32,
                           max_tokens_in_buffer=3008) == (3008 + 32) * 81_920 * 3
    assert pd.buffer_bytes("trtllm", kv_bytes_per_token=LLAMA70_TP4_BYTES, block_size=32,
                           max_tokens_in_buffer=None) == 512 * 2**20 * 3
    # NIXL and mooncake register the KV cache itself
    assert pd.buffer_bytes("vllm", kv_bytes_per_token=1, block_size=16,
                           max_tokens_in_buffer=3008) == 0
    assert pd.buffer_bytes("sglang", kv_bytes_per_token=1, block_size=1,
                           max_tokens_in_buffer=None) == 0


def test_bad_transfer_inputs_raise():
    with pytest.raises(ValueError):
        transfer(tokens=0, prefill_bytes_per_token_per_gpu=1, decode_bytes_per_token_per_gpu=1,
                 decode_gpus=1, link_gbps=400, per_chunk=False, chunk_tokens=1, prefill_s=0)
