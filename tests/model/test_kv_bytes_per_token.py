"""KV bytes per token, hand-worked (reference ENGINE_MEMORY.md §1.3, §1.9)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.model.kv import (
    KvGroup,
    LayerKv,
    kv_bytes_per_token_per_layer,
    kv_layout,
    layer_specs,
    stage_kv,
)
from kvplan.sources.catalog import find_model_entry, load_catalog_model, model_entries


def _layout(m, *, tp=1, kv_dtype="bfloat16", block_size=16, hybrid=True, rule="max_if_close"):
    specs = layer_specs(m, range(m.num_layers), tp=tp, kv_dtype=kv_dtype, state_dtype="bfloat16",
                        hybrid_manager=hybrid)
    return kv_layout(specs, block_size=block_size, block_size_fixed=False, group_rule=rule)


def _model(ref):
    return load_catalog_model(find_model_entry(ref))


def test_llama_3_1_8b_is_128_kib_per_token():
    """2 (K,V) × 8 KV heads × 128 × 2 B × 32 layers = 131,072 B (ENGINE_MEMORY §1.9a)."""
    m = _model("meta-llama/Llama-3.1-8B-Instruct")
    assert m.num_layers * kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="bfloat16") == 131_072
    layout = _layout(m)
    assert layout.bytes_per_block == 2 * 1024 * 1024 and len(layout.groups) == 1


def test_qwen2_5_7b_fp8_kv_halves_bytes():
    """28 layers × 2 × 4 KV heads × 128 × 1 B = 28,672 B/token with --kv-cache-dtype fp8."""
    m = _model("Qwen/Qwen2.5-7B-Instruct")
    assert m.num_layers * kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="fp8") == 28_672
    assert m.num_layers * kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="bfloat16") == 57_344


def test_qwen3_head_dim_from_config_not_hidden_over_heads():
    """Qwen3-0.6B: head_dim 128 although hidden/heads = 1024/16 = 64."""
    m = _model("Qwen/Qwen3-0.6B")
    assert m.head_dim == 128
    assert kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="bfloat16") == 2 * 8 * 128 * 2


@pytest.mark.parametrize("length,blocks", [(1, 1), (16, 1), (17, 2), (131072, 8192)])
def test_blocks_per_request_rounds_up(length, blocks):
    layout = _layout(_model("meta-llama/Llama-3.1-8B-Instruct"))
    assert layout.blocks_per_request(length, in_flight=8192, mamba_pages=1) == blocks


@given(entry=st.sampled_from(model_entries()), tp=st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
def test_kv_stops_shrinking_once_tp_reaches_kv_heads(entry, tp):
    m = load_catalog_model(entry)
    if m.mla is not None:
        return  # MLA: one latent head, replicated (tested separately)
    per = kv_bytes_per_token_per_layer(m, tp=tp, kv_dtype="bfloat16")
    assert per >= 2 * m.head_dim * 2  # never below one head
    if tp >= m.num_kv_heads:
        assert per == 2 * m.head_dim * 2
    assert kv_bytes_per_token_per_layer(m, tp=tp, kv_dtype="fp8") * 2 == per


@pytest.mark.parametrize("rule", ["min", "max_if_close"])
@pytest.mark.parametrize("one", [
    [LayerKv("full", 4096)],
    [LayerKv("full", 4096), LayerKv("cross", 4096, window=1500)],
    [LayerKv("sliding", 2048, window=4096), LayerKv("full", 2048), LayerKv("full", 2048)],
])
def test_a_stage_of_identical_layers_is_one_layer_times_its_layers(one, rule):
    """kv_layout(specs, times=n) lays out n copies of specs, as the list repeated n times."""
    for n in (1, 2, 7, 126):
        assert kv_layout(one, block_size=16, block_size_fixed=False, group_rule=rule,
                         times=n) == kv_layout(one * n, block_size=16, block_size_fixed=False,
                                               group_rule=rule)


def test_stage_kv_with_an_empty_layer_types_list_is_keyed_by_length():
    """A model whose config lists no layer types has every layer full attention: any stage of
    k layers has the layout of layers 0…k-1 (Llama-3.1-405B: 126 layers, 8 KV heads × 128 ×
    2 (K and V) × 2 B = 4 KiB per layer and token at TP 1)."""
    m = load_catalog_model(find_model_entry("meta-llama/Llama-3.1-405B"))
    assert not m.layer_types
    args = dict(tp=1, kv_dtype="bfloat16", state_dtype="bfloat16", hybrid_manager=True,
                block_size=16, block_size_fixed=False, group_rule="min")
    middle, per_token = stage_kv(m, range(63, 126), **args)
    assert (middle, per_token) == stage_kv(m, range(63), **args)
    assert per_token == 63 * 4096
    assert middle.groups == (KvGroup("full", None, 63, 63),)
    assert middle.bytes_per_block == 16 * 63 * 4096
