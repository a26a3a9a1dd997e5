"""Parameter counts and weight bytes, pinned to published counts and real vLLM logs."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.knobs import valid_tp_sizes
from kvplan.model.weights import (
    fused_name,
    parameter_count,
    pp_layer_ranges,
    stage_allocations,
    weight_memory_per_stage,
)
from kvplan.sources.catalog import find_model_entry, load_catalog_model, model_entries
from kvplan.units import GiB

ENTRIES = model_entries()


def _model(ref):
    return load_catalog_model(find_model_entry(ref))


WITH_REFERENCE = [e for e in ENTRIES if e.params_reference is not None]


@pytest.mark.parametrize("entry", WITH_REFERENCE, ids=[e.id for e in WITH_REFERENCE])
def test_parameter_count_matches_reference(entry):
    """Exact element counts computed independently in reference hf_configs/INDEX.md (language
    model only where INDEX says 'text')."""
    m = load_catalog_model(entry)
    assert (
        parameter_count(m, include_vision=not entry.params_reference_text_only)
        == entry.params_reference
    )


def test_every_catalogue_model_has_a_published_size_to_check():
    assert all(e.params_reference or e.params_stated for e in ENTRIES)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.params_stated],
                         ids=[e.id for e in ENTRIES if e.params_stated])
def test_parameter_count_within_half_percent_of_model_card(entry):
    """Model-card sizes (INDEX.md 'stated' column, e.g. Qwen2.5-7B 7.61B, phi-4 14.7B). A card
    figure is only as precise as its last digit ('0.49B' means 0.485–0.5B), so the tolerance is
    0.5% or one unit of that digit, whichever is larger."""
    n = parameter_count(load_catalog_model(entry))
    billions = entry.params_stated / 1e9
    decimals = 0 if billions == int(billions) else len(repr(billions).split(".")[1])
    tolerance = max(0.005 * entry.params_stated, 10 ** -decimals * 1e9)
    assert abs(n - entry.params_stated) <= tolerance


def test_llama_8b_weights_match_vllm_log():
    """'Model loading took 14.99 GiB' (vLLM 0.19.0, H100, bf16; calibration CSV, llm-d-planner
    logs): 8,030,261,248 × 2 B + 32 MiB RoPE cache = 14.988 GiB."""
    m = _model("meta-llama/Llama-3.1-8B-Instruct")
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=None)
    assert w.tensor_bytes == 8_030_261_248 * 2 + 131072 * 128 * 2
    # Every matrix is a whole number of 2 MiB (qkv 48, o 32, gate_up 224, down 112, vocab
    # 1002 MiB) and every norm a whole number of 512 B: the allocator adds nothing.
    assert w.allocated_bytes == w.tensor_bytes
    assert abs(w.allocated_bytes / GiB - 14.99) / 14.99 < 0.001


def test_llama_8b_online_fp8_matches_vllm_log():
    """`--quantization fp8`: 'Model loading took 8.49 GiB' (same sweep, -qfp8 log):
    linear weights 1 B/param, embeddings and lm_head stay bf16."""
    from kvplan.specs import QuantSpec

    m = _model("meta-llama/Llama-3.1-8B-Instruct")
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16",
                                   quant=QuantSpec(method="fp8", source="cli"))
    assert abs(w.allocated_bytes / GiB - 8.49) / 8.49 < 0.001


def test_tp_splits_vocab_after_padding_and_replicates_kv():
    """Qwen2.5-7B has 4 KV heads: at TP=8 each rank keeps 1 head (replicated twice)."""
    m = _model("Qwen/Qwen2.5-7B-Instruct")
    w8 = weight_memory_per_stage(m, tp=8, pp=1, dtype="bfloat16", quant=None)[0].tensor_bytes
    w4 = weight_memory_per_stage(m, tp=4, pp=1, dtype="bfloat16", quant=None)[0].tensor_bytes
    kv_rows = m.head_dim  # one head per rank at both TP=4 and TP=8
    kv_bytes_per_layer = 2 * kv_rows * (m.hidden_size + 1) * 2  # k and v weight + bias
    # Going from TP4 to TP8 halves everything except the replicated K/V heads, norms, RoPE.
    assert w8 > w4 / 2
    assert w8 - w4 / 2 < m.num_layers * kv_bytes_per_layer + 64 * 1024 * 1024


@pytest.mark.parametrize(
    "layers,pp,sizes",
    [
        (32, 1, [32]),
        (32, 2, [16, 16]),
        (32, 3, [11, 11, 10]),
        (10, 4, [2, 3, 3, 2]),
        (61, 4, [15, 15, 16, 15]),
    ],
)
def test_pp_split_follows_vllm(layers, pp, sizes):
    """vllm/distributed/utils.py get_pp_indices: remainder to stages pp-2, pp-3, …"""
    assert [len(r) for r in pp_layer_ranges(layers, pp)] == sizes


@settings(max_examples=40, deadline=None)
@given(entry=st.sampled_from(ENTRIES), data=st.data())
def test_more_tp_never_increases_weights_per_gpu(entry, data):
    m = load_catalog_model(entry)
    sizes = valid_tp_sizes(m, limit=16)
    i = data.draw(st.integers(0, len(sizes) - 2)) if len(sizes) > 1 else 0
    a, b = sizes[i], sizes[min(i + 1, len(sizes) - 1)]
    wa = weight_memory_per_stage(m, tp=a, pp=1, dtype="bfloat16", quant=None)[0]
    wb = weight_memory_per_stage(m, tp=b, pp=1, dtype="bfloat16", quant=None)[0]
    assert wb.tensor_bytes <= wa.tensor_bytes and wb.allocated_bytes <= wa.allocated_bytes


@settings(max_examples=30, deadline=None)
@given(entry=st.sampled_from(ENTRIES), pp=st.integers(1, 8))
def test_pp_stages_cover_every_layer_once(entry, pp):
    m = load_catalog_model(entry)
    ranges = pp_layer_ranges(m.num_layers, min(pp, m.num_layers))
    assert [i for r in ranges for i in r] == list(range(m.num_layers))


def test_qwen25_7b_allocator_rounding_explains_the_vllm_log():
    """Qwen2.5-7B, TP 1, bf16, worked by hand (kvplan/model/allocator.py rules): per layer qkv
    31.5 MiB (segment 32, 0.5 MiB not split), o 24.5 (segment 26, 1.5 MiB split off), gate_up
    259 (260, 1 MiB not split), down 129.5 (130, 0.5 not split) → 2 MiB × 28 layers, + 0.5 MiB
    each for the 1039.5 MiB embedding and LM head = 57 MiB allocated beyond the tensors. vLLM 0.19.0
    logged 'Model loading took 14.25 GiB' (calibration CSV, H100). Reserved adds the 28 split
    o_proj remainders (1.5 MiB), the 12 MiB left beside the RoPE cache in its 20 MiB segment
    and the unused part of the one small-pool segment (2 MiB − 28 × (9216 + 2 × 7168) − 7168 B)."""
    m = _model("Qwen/Qwen2.5-7B-Instruct")
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=None)
    assert w.allocated_bytes - w.tensor_bytes == 57 * 2**20
    assert round(w.allocated_bytes / GiB, 2) == 14.25
    assert round(w.tensor_bytes / GiB, 2) == 14.19  # parameter bytes alone miss the log
    small_pool_left = 2 * 2**20 - (28 * (9216 + 2 * 7168) + 7168)
    assert w.reserved_bytes - w.allocated_bytes == (28 * 1.5 + 12) * 2**20 + small_pool_left


def test_qwen25_72b_tp2_down_proj_rounding_matches_the_vllm_log():
    """Per rank: down_proj 14784 × 8192 × 2 B = 231 MiB → a 232 MiB segment, 1 MiB not split,
    × 80 layers; every other matrix is a whole number of 2 MiB. vLLM 0.19.0 TP2 log
    (llm-d-planner sweep): 'Model loading took 67.80 GiB'."""
    m = _model("Qwen/Qwen2.5-72B-Instruct")
    (w,) = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)
    assert w.allocated_bytes - w.tensor_bytes == 80 * 2**20
    assert round(w.allocated_bytes / GiB, 2) == 67.80


@pytest.mark.parametrize(
    "name,fused",
    [
        ("model.layers.3.self_attn.k_proj.weight", "model.layers.3.self_attn.qkv_proj.weight"),
        ("layers.3.self_attn.v_proj.bias", "layers.3.self_attn.qkv_proj.bias"),
        ("model.layers.0.mlp.up_proj.qweight", "model.layers.0.mlp.gate_up_proj.qweight"),
        (
            "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
            "model.layers.0.self_attn.fused_qkv_a_proj.weight",
        ),
        ("model.layers.1.mlp.experts.17.down_proj.weight", "model.layers.1.mlp.experts.w2.weight"),
        (
            "model.layers.1.block_sparse_moe.experts.2.w3.weight",
            "model.layers.1.block_sparse_moe.experts.w13.weight",
        ),
        (
            "model.layers.1.mlp.shared_expert.gate_proj.weight",
            "model.layers.1.mlp.shared_expert.gate_up_proj.weight",
        ),
        ("model.layers.1.self_attn.o_proj.weight", "model.layers.1.self_attn.o_proj.weight"),
        ("model.layers.1.mlp.gate.weight", "model.layers.1.mlp.gate.weight"),
    ],
)
def test_tensors_fuse_into_vllm_parameters(name, fused):
    assert fused_name(name) == fused


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_stages_from_layers_fused_once_equal_each_stage_fused_whole(entry):
    """Each decoder layer is fused once per TP layout and PP splits concatenate the layers;
    that is the allocation sequence of fusing each stage's tensors whole, for every split."""
    from kvplan.model.weights import (
        _build_order,
        _Fused,
        _rank_layout,
        _stage_items,
        mla_dequantized_copy_bytes,
        rank_tensors,
    )
    m = load_catalog_model(entry)
    for tp in (1, 4):
        lay = _rank_layout(m, tp=tp, dtype="bfloat16", quant=m.quantization, ep=1)
        ranked = rank_tensors(m, tp=tp, dtype="bfloat16", quant=m.quantization, ep=1)
        assert lay.layers is not None  # every catalogue model's tensors separate by layer
        mla = mla_dequantized_copy_bytes(m, tp, m.quantization, "bfloat16")
        for pp in {1, 2, 3, min(7, m.num_layers)}:
            whole = [_build_order([_Fused.of(items)]) + [mla] * len(r) * bool(mla)
                     for items, r in zip(_stage_items(m, ranked, pp),
                                         pp_layer_ranges(m.num_layers, pp), strict=True)]
            got = stage_allocations(m, tp=tp, pp=pp, dtype="bfloat16", quant=m.quantization)
            assert got == whole, (tp, pp)


def test_a_layer_not_named_under_its_prefix_falls_back_to_whole_stages(monkeypatch):
    """A layer whose tensors the per-layer fusion cannot place (one not named under the layer's
    "layers.{i}." prefix) is fused stage by stage: the same allocations. The layer reads its
    index beyond naming it, so its _layer_spec says so (the contract _layers relies on)."""
    from kvplan.model import weights
    m = _model("meta-llama/Llama-3.2-1B-Instruct")
    (before,) = stage_allocations(m, tp=1, pp=1, dtype="bfloat16", quant=None)
    listed, spec = weights._layer_tensors, weights._layer_spec

    def renamed(model, i):  # layer 8's second norm loses its prefix
        return (t._replace(name="norm1_of_layer_8") if t.name == "layers.8.norm1" else t
                for t in listed(model, i))

    monkeypatch.setattr(weights, "_layer_tensors", renamed)
    monkeypatch.setattr(weights, "_layer_spec", lambda model, i: (*spec(model, i), i == 8))
    memos = (weights.all_tensors, weights._layers, weights._rank_layers, weights.rank_tensors,
             weights._rank_layout)
    for memo in memos:
        memo.cache_clear()
    try:
        assert not weights._layers(m).ordered
        assert weights._rank_layout(m, tp=1, dtype="bfloat16", quant=None, ep=1).layers is None
        (after,) = stage_allocations(m, tp=1, pp=1, dtype="bfloat16", quant=None)
    finally:
        for memo in memos:
            memo.cache_clear()
    assert after == before


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_layers_of_one_class_list_the_first_ones_tensors_under_their_prefix(entry):
    """_layers lists the tensors of one layer per _layer_spec: every layer of every catalogue
    model lists (tensors) its class's first layer's tensors under its own prefix and index, and
    the parameter count by class is the count over every tensor."""
    from kvplan.model import weights
    m = load_catalog_model(entry)
    lay = weights._layers(m)
    first_of: dict[int, int] = {}
    for i, c in enumerate(lay.classes):
        j = first_of.setdefault(c, i)
        expected = [t._replace(name=t.name.replace(f"layers.{j}.", f"layers.{i}.", 1), layer=i)
                    for t in lay.first[c]]
        assert list(weights._layer_tensors(m, i)) == expected, (entry.id, i)
    assert parameter_count(m) == sum(t.rows * t.cols for t in weights.tensors(m))


def test_per_object_memo_is_per_object_and_keys_on_every_argument():
    """per_object answers again only for the same model object and the same arguments: an
    equal new object, another argument or an equal but distinct QuantSpec (keyed by value)."""
    from kvplan.specs import QuantSpec, per_object
    calls = []

    @per_object(8)
    def f(m, tp, *, quant=None):
        calls.append((tp, quant))
        return len(calls)

    m = _model("meta-llama/Llama-3.2-1B-Instruct")
    q = QuantSpec(method="fp8", source="cli", ignore=["lm_head"])
    assert f(m, 1) == f(m, 1) == 1
    assert f(m.model_copy(), 1) == 2  # equal, but another object
    assert f(m, 2) == 3
    assert f(m, 1, quant=q) == f(m, 1, quant=q.model_copy()) == 4
    assert f(m, 1, quant=q.model_copy(update={"ignore": []})) == 5
    f.cache_clear()
    assert f(m, 1) == 6


def test_chunks_read_from_a_longer_replay_equal_replaying_them_alone():
    """A stage's chunks that begin those of a replay before are read from that replay: the same
    (allocated, reserved) as replaying their sizes alone, without another replay."""
    from kvplan.model import weights
    m = _model("Qwen/Qwen2.5-7B-Instruct")
    args = ("bfloat16", m.rope_cache_positions, m.rotary_dim)
    (chunks,) = weights._stage_chunks(m, tp=2, pp=1, dtype="bfloat16", quant=None, ep=1)
    weights._replayed.cache_clear()
    weights._replayed(tuple(chunks), *args)
    for n in (1, 2, 5, len(chunks) // 3, len(chunks) - 1):
        alone = weights.replay_allocations([size for c in chunks[:n] for size in c], *args)
        allocated = alone.allocated_bytes
        alone.empty_cache()
        assert weights._replayed(tuple(chunks[:n]), *args) == (allocated, alone.reserved_bytes)
    # the replay, and the layers after the embedding (519.75 MiB at TP 2: its 520 MiB segment's
    # 0.25 MiB remainder is not split off, so it leaves no free block): no third
    assert len(weights._REPLAYS) == 2


def test_chunks_after_one_that_leaves_no_free_block_are_counted_as_their_own_replay():
    """A first chunk that fills its segments (no free block left) leaves a state that serves
    later requests as an empty allocator does: the chunks after it, replayed on their own,
    offset by its counters, give what replaying everything does. One that leaves a free block
    (a 3 MiB tensor in a 20 MiB segment, CUDACachingAllocator kLargeBuffer) is not split off."""
    from kvplan.model import weights
    from kvplan.model.allocator import CachingAllocator
    mib = 1 << 20
    args = ("bfloat16", 0, 0)  # no RoPE cache
    whole = (12 * mib,)  # 10 MiB or more, a 2 MiB multiple: its segment exactly
    layers = ((64 * mib, 8192), (64 * mib, 8192), (64 * mib, 8192))
    assert weights._lone_chunk(whole, args) == (12 * mib, 12 * mib)
    assert weights._lone_chunk((3 * mib,), args) is None
    weights._replayed.cache_clear()
    assert weights._replayed(layers[:2], *args)  # the layers first, as a last PP stage
    for first in (whole, (3 * mib,)):
        alone = CachingAllocator()
        alone.fill([n for c in (first, *layers[:2]) for n in c])
        assert weights._replayed((first, *layers[:2]), *args) == (alone.allocated_bytes,
                                                                   alone.held_bytes)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_weight_memory_equals_replaying_every_allocation(entry):
    """The replay's shortcuts (identical layers carved or added up, prefixes read from earlier
    replays) give what allocating every tensor one by one on a fresh allocator gives."""
    from kvplan.model import weights
    m = load_catalog_model(entry)
    for tp in (1, 8):
        for pp in sorted({1, min(3, m.num_layers)}):
            got = weights.weight_memory_per_stage(m, tp=tp, pp=pp, dtype="bfloat16",
                                                  quant=m.quantization)
            for sizes, w in zip(stage_allocations(m, tp=tp, pp=pp, dtype="bfloat16",
                                                  quant=m.quantization), got, strict=True):
                a = weights.replay_allocations(sizes, "bfloat16", m.rope_cache_positions,
                                               m.rotary_dim)
                allocated = a.allocated_bytes
                a.empty_cache()
                assert (w.allocated_bytes, w.reserved_bytes) == (allocated, a.reserved_bytes), \
                    (tp, pp)


@pytest.mark.parametrize("ref", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"])
def test_float16_and_bfloat16_share_one_answer_that_is_each_ones_own_replay(ref):
    """Weights depend on a dtype's width alone: asked in float16 first, bfloat16 (same width)
    reads that entry, and it is what allocating every bfloat16 tensor one by one gives."""
    from kvplan.model import weights
    m = _model(ref)
    first = weights.weight_memory_per_stage(m, tp=2, pp=2, dtype="float16", quant=None)
    shared = weights.weight_memory_per_stage(m, tp=2, pp=2, dtype="bfloat16", quant=None)
    assert shared is first
    assert weights.stage_tensor_bytes(m, tp=2, pp=2, dtype="bfloat16", quant=None) == [
        w.tensor_bytes for w in first]
    for sizes, w in zip(stage_allocations(m, tp=2, pp=2, dtype="bfloat16", quant=None), shared,
                        strict=True):
        a = weights.replay_allocations(sizes, "bfloat16", m.rope_cache_positions, m.rotary_dim)
        allocated = a.allocated_bytes
        a.empty_cache()
        assert (w.allocated_bytes, w.reserved_bytes) == (allocated, a.reserved_bytes)
