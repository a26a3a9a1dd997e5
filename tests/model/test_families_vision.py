"""Vision-language families: towers, projectors and language models counted as vLLM builds
them (vllm/model_executor/models/{llava,llava_next,clip,mistral3,pixtral,qwen2_vl,qwen2_5_vl,
idefics3,idefics2_vision_model}.py, vLLM main), and the LM tokens one image occupies
(each ProcessingInfo.get_max_image_tokens). Every expected number is summed by hand below."""

import copy

import pytest

from kvplan.errors import InvalidConfigError
from kvplan.model.config import spec_from_config
from kvplan.model.tensor_names import skipped_by_vllm
from kvplan.model.weights import parameter_count, weight_memory_per_stage
from kvplan.sources.catalog import find_model_entry, load_catalog_model
from kvplan.specs import ModelSpec


def _model(ref: str) -> ModelSpec:
    entry = find_model_entry(ref)
    assert entry is not None
    return load_catalog_model(entry)


def _tower(m: ModelSpec) -> int:
    return parameter_count(m) - parameter_count(m, include_vision=False)


def _raw(ref: str) -> dict:
    import json

    from kvplan.sources.catalog import data_dir
    entry = find_model_entry(ref)
    assert entry is not None
    return json.loads((data_dir("model_specs") / entry.config).read_text())


# ------------------------------------------------------------------------- CLIP (LLaVA)

CLIP_LAYER = 12_596_224
"""One CLIP ViT-L/14 encoder layer (width 1024, MLP 4096): q, k, v, out_proj each
1024·1024 + 1024 = 1,049,600 (× 4 = 4,198,400); fc1 1024·4096 + 4096 = 4,198,400;
fc2 4096·1024 + 1024 = 4,195,328; layer_norm1/2 weight + bias 4·1024 = 4,096."""
CLIP_EMBEDDINGS = 1_193_984
"""class_embedding 1024 + patch_embedding (conv, no bias) 1024·3·14·14 = 602,112 +
position_embedding (24² + 1 = 577 positions) 577·1024 = 590,848."""
LLAVA_PROJECTOR = 20_979_712
"""linear_1 1024 → 4096 with bias: 4,194,304 + 4,096; linear_2 4096 → 4096 with bias:
16,777,216 + 4,096."""


def test_clip_vit_l14_336_is_303_5m_and_vllm_builds_23_layers_for_llava():
    """openai/clip-vit-large-patch14-336 CLIPVisionModel: embeddings 1,193,984 + pre_layrnorm
    2,048 + 24 layers · 12,596,224 = 302,309,376 + post_layernorm 2,048 = 303,507,456 (303.5M).
    llava-1.5 sets vision_feature_layer -2: vLLM builds 24 − 2 + 1 = 23 layers and, with
    require_post_norm=False, no post_layernorm: 1,193,984 + 2,048 + 23 · 12,596,224 =
    290,909,184; + projector 20,979,712 = 311,888,896 counted for the tower."""
    assert CLIP_EMBEDDINGS + 2 * 1024 + 24 * CLIP_LAYER + 2 * 1024 == 303_507_456
    m = _model("llava-hf/llava-1.5-7b-hf")
    assert m.vision is not None and m.vision.kind == "clip"
    assert (m.vision.num_layers, m.vision.config_num_layers) == (23, 24)
    assert _tower(m) == 290_909_184 + LLAVA_PROJECTOR
    # every layer kept (vision_feature_layer -1): the whole CLIP tower less its post-LayerNorm
    raw = _raw("llava-hf/llava-1.5-7b-hf") | {"vision_feature_layer": -1}
    full = spec_from_config(raw, model_id="llava-all-layers", source="test")
    assert _tower(full) == 303_507_456 - 2 * 1024 + LLAVA_PROJECTOR


def test_llava_15_7b_language_model_from_llama_defaults():
    """The published text_config lists only vocab 32064 and 4096 positions; LlamaConfig
    defaults give hidden 4096, 32 layers, 32 heads (MHA), intermediate 11008.
    Llama-2-7B with vocab 32064: embed + lm_head 2 · 32064 · 4096 = 262,668,288; per layer
    4 · 4096² + 3 · 4096 · 11008 + 2 · 4096 = 202,383,360 (× 32 = 6,476,267,520); final norm
    4096 → 6,738,939,904. With the tower: 6,738,939,904 + 311,888,896 = 7,050,828,800
    (the checkpoint adds the unbuilt 24th layer and the post-LayerNorm: 7,063,427,072 = 7.06B)."""
    m = _model("llava-hf/llava-1.5-7b-hf")
    assert (m.model_type, m.num_layers, m.num_kv_heads, m.intermediate_size) == (
        "llama",
        32,
        32,
        11008,
    )
    assert parameter_count(m, include_vision=False) == 6_738_939_904
    assert parameter_count(m) == 7_050_828_800
    assert 7_050_828_800 + CLIP_LAYER + 2 * 1024 == 7_063_427_072
    assert not any("multimodal encoder" in u for u in m.unsupported)


def test_llava_next_mistral_image_newline_and_mistral_defaults():
    """llava-v1.6-mistral-7b-hf: MistralConfig defaults (hidden 4096, 32 layers, 32q/8kv,
    intermediate 14336) with vocab 32064 and no sliding window (null). LM: 2 · 32064 · 4096
    = 262,668,288 + 32 · (2 · 4096² + 2 · 4096 · 1024 + 3 · 4096 · 14336 + 2 · 4096 =
    218,112,000) = 6,979,584,000 + 4096 → 7,242,256,384. Tower as llava-1.5 (23 layers)
    290,909,184 + projector 20,979,712 + image_newline 4096 = 311,892,992 → 7,554,149,376."""
    m = _model("llava-hf/llava-v1.6-mistral-7b-hf")
    assert (m.model_type, m.num_kv_heads, m.layer_types, m.sliding_window) == (
        "mistral",
        8,
        [],
        None,
    )
    assert parameter_count(m, include_vision=False) == 7_242_256_384
    assert _tower(m) == 290_909_184 + LLAVA_PROJECTOR + 4096
    assert parameter_count(m) == 7_554_149_376


# ------------------------------------------------------------------------ Qwen-VL


def test_qwen25_vl_7b_vit_is_676_5m():
    """Qwen2.5-VL ViT (qwen2_5_vl.py), width 1280, MLP 3420, 32 blocks, patch 14, Conv3d over
    2 frames: patch_embed 1280 · 3·2·14·14 = 1,505,280 (no bias). Per block: qkv 3840·1280 +
    3840 = 4,919,040; proj 1280² + 1280 = 1,639,680; gate_up 6840·1280 + 6840 = 8,762,040;
    down 1280·3420 + 1280 = 4,378,880; two RMSNorms 2,560 → 19,702,200 (× 32 = 630,470,400).
    Merger: ln_q 1280; mlp.0 5120·5120 + 5120 = 26,219,520; mlp.2 3584·5120 + 3584 =
    18,353,664 → 44,574,464. Tower 676,550,144; with Qwen2.5-7B's 7,615,616,512:
    8,292,166,656 (model card 8.29B)."""
    m = _model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert m.model_type == "qwen2" and m.qkv_bias and m.vision is not None
    assert _tower(m) == 1_505_280 + 32 * 19_702_200 + 44_574_464 == 676_550_144
    assert parameter_count(m, include_vision=False) == 7_615_616_512
    assert parameter_count(m) == 8_292_166_656
    assert m.rope_type == "mrope" and m.rope_cache_positions == 128000
    assert m.unsupported == []


def test_qwen25_vl_tower_bytes_per_rank_at_tp2():
    """vLLM splits the ViT's qkv / gate_up / merger mlp.0 (column-parallel) and proj / down /
    mlp.2 (row-parallel) over TP; patch_embed, norms and row-parallel biases stay whole.
    Replicated: 1,505,280 + 32 · (2,560 norms + 1,280 + 1,280 biases) + 1,280 ln_q + 3,584
    = 1,673,984. Split: 676,550,144 − 1,673,984 = 674,876,160, half per rank. One rank:
    1,673,984 + 337,438,080 = 339,112,064 elements · 2 B (bf16) = 678,224,128 bytes."""
    m = _model("Qwen/Qwen2.5-VL-7B-Instruct")
    text = m.model_copy(update={"vision": None})
    (w,) = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)
    (t,) = weight_memory_per_stage(text, tp=2, pp=1, dtype="bfloat16", quant=None)
    assert w.tensor_bytes - t.tensor_bytes == 678_224_128


def test_qwen2_vl_7b_vit_layernorms_and_plain_mlp():
    """Qwen2-VL-7B-Instruct's vision_config (published: depth 32, embed_dim 1280, mlp_ratio 4,
    num_heads 16, hidden_size 3584, patch 14, merge 2, temporal 2; qwen2_vl.py): blocks use
    LayerNorms (weight + bias) and fc1/fc2. Per block: qkv 4,919,040 + proj 1,639,680 + fc1
    1280·5120 + 5120 = 6,558,720 + fc2 5120·1280 + 1280 = 6,554,880 + norms 4·1280 = 5,120
    → 19,677,440 (× 32 = 629,678,080); patch_embed 1,505,280; merger ln_q 2,560 + 26,219,520
    + 18,353,664 = 44,575,744 → 675,759,104. Its LM is the same Qwen2-7B shape (8.29B card)."""
    raw = _raw("Qwen/Qwen2.5-VL-7B-Instruct")
    raw.update(model_type="qwen2_vl", architectures=["Qwen2VLForConditionalGeneration"],
               vision_config={"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16,
                              "in_chans": 3, "hidden_size": 3584, "patch_size": 14,
                              "spatial_merge_size": 2, "temporal_patch_size": 2})
    m = spec_from_config(raw, model_id="qwen2-vl-7b", source="test")
    assert m.vision is not None and m.vision.kind == "qwen2_vl"
    assert _tower(m) == 675_759_104
    assert parameter_count(m) == 7_615_616_512 + 675_759_104


# ---------------------------------------------------------------------- Pixtral (Mistral 3)


def test_mistral_small_31_pixtral_tower_and_projector():
    """Pixtral (pixtral.py PixtralHFVisionModel), width 1024, MLP 4096, 24 layers, no biases:
    patch_conv 1024·3·14·14 = 602,112; ln_pre 1024; per layer qkv 3·1024² = 3,145,728 + o
    1,048,576 + gate_up 2·4096·1024 = 8,388,608 + down 4,194,304 + two RMSNorms 2,048 =
    16,779,264 (× 24 = 402,702,336) → 403,305,472. Projector (mistral3.py, bias false): norm
    1024 + patch merger 4096·1024 = 4,194,304 + linear_1 1024·5120 = 5,242,880 + linear_2
    5120² = 26,214,400 → 35,652,608. LM: 2 · 131072 · 5120 = 1,342,177,280 + 40 · (5120·4096
    + 2·5120·1024 + 4096·5120 + 3·5120·32768 + 2·5120 = 555,755,520) + 5120 = 23,572,403,200."""
    m = _model("mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    assert m.model_type == "mistral" and m.head_dim == 128 and m.vision is not None
    assert m.vision.kind == "pixtral" and m.vision.num_layers == 24  # vision_feature_layer -1
    assert _tower(m) == 403_305_472 + 35_652_608
    assert parameter_count(m, include_vision=False) == 23_572_403_200
    assert parameter_count(m) == 24_011_361_280


# ------------------------------------------------------------------------------ Idefics3

IDEFICS3 = {
    # Idefics3-8B-Llama3's vision_config values as public re-implementations quote them
    # (hidden 1152, MLP 4304, 27 layers, 16 heads, patch 14, image 364) and its Llama-3-8B
    # text_config (hidden 4096, MLP 14336, 32 layers, 32q/8kv) with the 128259-token vocab
    "architectures": ["Idefics3ForConditionalGeneration"],
    "model_type": "idefics3",
    "scale_factor": 2,
    "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128259,
    },
    "vision_config": {
        "model_type": "idefics3_vision",
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "patch_size": 14,
        "image_size": 364,
        "num_channels": 3,
    },
}


def test_idefics3_siglip_tower_and_connector():
    """idefics2_vision_model.py: patch_embedding conv with bias 1152·588 + 1152 = 678,528;
    position_embedding (364/14)² = 676 · 1152 = 778,752; per layer q/k/v/out 4 · (1152² +
    1152) = 5,313,024 + fc1 1152·4304 + 4304 = 4,962,512 + fc2 4304·1152 + 1152 = 4,959,360 +
    two LayerNorms 4·1152 = 4,608 → 15,239,504 (× 27 = 411,466,608); post_layernorm 2,304
    → 412,926,192. Connector (idefics3.py Idefics3SimpleMLP): ReplicatedLinear
    1152·2² = 4608 → 4096 without bias = 18,874,368. LM: Llama-3-8B's 8,030,261,248 + 2 · 3
    extra vocab rows · 4096 = 8,030,285,824; total 8,462,086,384 (model card 8.46B)."""
    m = spec_from_config(copy.deepcopy(IDEFICS3), model_id="idefics3", source="test")
    assert m.model_type == "llama" and m.vision is not None and m.vision.kind == "idefics3"
    assert _tower(m) == 412_926_192 + 18_874_368
    assert parameter_count(m) == 8_462_086_384
    # the connector is replicated: at TP=2 each rank keeps all 4608 · 4096 elements
    text = m.model_copy(update={"vision": None})
    (w,) = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)
    (t,) = weight_memory_per_stage(text, tp=2, pp=1, dtype="bfloat16", quant=None)
    replicated = 678_528 + 778_752 + 27 * (1152 + 1152 + 4608) + 2_304 + 18_874_368
    split = 412_926_192 + 18_874_368 - replicated
    assert w.tensor_bytes - t.tensor_bytes == 2 * (replicated + split // 2)


# -------------------------------------------------------------------- tokens per image


@pytest.mark.parametrize(("ref", "tokens"), [
    # llava.py: CLIP (336/14)² = 576 patch features, CLS dropped ("default" strategy)
    ("llava-hf/llava-1.5-7b-hf", 576),
    # llava_next.py: best pinpoint 672×672 → base 576 + (2·24)·(2·24) = 2304 + 48 newlines
    ("llava-hf/llava-v1.6-mistral-7b-hf", 2928),
    # mistral3.py: 1540 / (14·2) = 55 rows of 55 image tokens + one [IMG_BREAK]/[IMG_END] each
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", 3080),
    # qwen2_vl.py: smart_resize to max_pixels 12845056 → 3584×3584 → (3584/14)² / 2² = 16384
    ("Qwen/Qwen2.5-VL-7B-Instruct", 16384),
])
def test_max_tokens_per_image(ref, tokens):
    m = _model(ref)
    assert m.vision is not None and m.vision.max_tokens_per_image == tokens


def test_idefics3_tokens_per_image():
    """idefics3.py get_num_image_tokens = (grid_w·grid_h + 1) · image_seq_len: the largest
    image (longest edge 4·364) is a 4×4 grid plus the global tile, 17 tiles · (364/14)² / 2² =
    17 · 169 = 2873."""
    m = spec_from_config(copy.deepcopy(IDEFICS3), model_id="idefics3", source="test")
    assert m.vision is not None and m.vision.max_tokens_per_image == 2873


# ------------------------------------------------------------------ checkpoints and errors


def test_header_path_skips_the_clip_layers_vllm_does_not_build():
    """Planning from safetensors headers: llava's 24th CLIP layer (index 23) and the
    post_layernorm are in the checkpoint but not built by vLLM."""
    m = _model("llava-hf/llava-1.5-7b-hf")
    tower = "vision_tower.vision_model."
    assert skipped_by_vllm(tower + "encoder.layers.23.mlp.fc1.weight", m)
    assert skipped_by_vllm(tower + "post_layernorm.weight", m)
    assert not skipped_by_vllm(tower + "encoder.layers.22.mlp.fc1.weight", m)
    assert not skipped_by_vllm("language_model.model.layers.23.mlp.up_proj.weight", m)


def test_bad_vision_feature_layer_names_the_field():
    raw = _raw("llava-hf/llava-1.5-7b-hf") | {"vision_feature_layer": 99}
    with pytest.raises(InvalidConfigError) as e:
        spec_from_config(raw, model_id="x", source="test", path="config.json")
    assert e.value.field == "vision_feature_layer"


def test_llava_with_an_unmodelled_tower_still_warns():
    """A llava wrapper around a SigLIP tower (e.g. llava-onevision-style) is not modelled:
    its tower is reported as not counted, never silently counted as CLIP."""
    raw = _raw("llava-hf/llava-1.5-7b-hf")
    raw["vision_config"] = {**raw["vision_config"], "model_type": "siglip_vision_model"}
    m = spec_from_config(raw, model_id="x", source="test")
    assert m.vision is None
    assert any("siglip_vision_model" in u for u in m.unsupported)


def test_mistral_small_31_weights_match_a_real_vllm_log():
    """llm-d-planner accuracy sweep, vLLM 0.19.0, H100, bf16, TP=1
    (benchmarks/data/vllm_llmd_extra.csv, mistralai-mistral-small---h100-80gb--tp1pp1dp1--8192.log):
    weights 44.76 GiB. 24,011,361,280 params · 2 B = 44.725 GiB + the RoPE cos/sin cache
    131072 · 128 · 2 B = 32 MiB → 44.756 GiB. The language model alone (23,572,403,200 · 2 B
    + 32 MiB = 43.94 GiB) would be 1.8 % low: the Pixtral tower and projector are the gap."""
    from kvplan.units import GiB

    m = _model("mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=None)
    assert w.tensor_bytes == 24_011_361_280 * 2 + 131072 * 128 * 2
    assert abs(w.allocated_bytes / GiB - 44.76) / 44.76 < 0.001


# ------------------------------------------------------------------------------ Qwen3-VL

QWEN3_VL_BLOCK_8B = 15_239_504
"""One Qwen3-VL-8B ViT block (width 1152, MLP 4304; qwen3_vl.py): qkv 3456·1152 + 3456 =
3,984,768; proj 1152² + 1152 = 1,328,256; linear_fc1 4304·1152 + 4304 = 4,962,512;
linear_fc2 1152·4304 + 1152 = 4,959,360; norm1/norm2 LayerNorms 4·1152 = 4,608."""


def test_qwen3_vl_8b_tower_with_deepstack_mergers():
    """patch_embed Conv3d with bias 1152 · 3·2·16·16 + 1152 = 1,770,624; pos_embed 2304 · 1152 =
    2,654,208; 27 blocks · 15,239,504 = 411,466,608. Merger (merged width 1152·4 = 4608):
    LayerNorm(1152) 2,304 + linear_fc1 4608² + 4608 = 21,238,272 + linear_fc2 4096·4608 + 4096 =
    18,878,464 → 40,119,040. Each deepstack merger normalises the 4608-wide features:
    9,216 + 21,238,272 + 18,878,464 = 40,125,952, × 3 = 120,377,856. Tower 576,388,336.
    LM (Qwen3-8B shape, untied): 2 · 151936 · 4096 = 1,244,659,712 + 36 · (2 · 4096² + 2 ·
    4096·1024 + 256 q/k norms + 3 · 4096 · 12288 + 2 · 4096 = 192,946,432) + 4096 =
    8,190,735,360. Total 8,767,123,696 (model card 8.77B)."""
    m = _model("Qwen/Qwen3-VL-8B-Instruct")
    assert m.model_type == "qwen3" and m.qk_norm and m.vision is not None
    assert m.vision.kind == "qwen3_vl" and m.vision.deepstack_mergers == 3
    assert _tower(m) == 1_770_624 + 2_654_208 + 27 * QWEN3_VL_BLOCK_8B + 40_119_040 + 120_377_856
    assert parameter_count(m, include_vision=False) == 8_190_735_360
    assert parameter_count(m) == 8_767_123_696
    # processor size.longest_edge 16777216 = 4096²: (4096/16)² / 2² = 16384 tokens
    assert m.vision.max_tokens_per_image == 16384


def test_qwen3_vl_4b_shape_matches_its_card():
    """Qwen3-VL-4B-Instruct's published dims (text hidden 2560, MLP 9728, 36 layers, tied
    embeddings; ViT depth 24, width 1024, MLP 4096, out 2560, deepstack [5, 11, 17]).
    ViT: patch 1024·1536 + 1024 = 1,573,888; pos 2304·1024 = 2,359,296; 24 blocks ·
    12,596,224 = 302,309,376; merger 2,048 + 16,781,312 + 10,488,320 = 27,271,680; deepstack
    3 · (8,192 + 16,781,312 + 10,488,320) = 81,833,472 → 415,347,712. LM: 151936 · 2560
    (tied) = 388,956,160 + 36 · 100,930,816 + 2,560 = 4,022,468,096. Total 4,437,815,808
    (model card 4.44B)."""
    raw = _raw("Qwen/Qwen3-VL-8B-Instruct")
    raw["tie_word_embeddings"] = True
    raw["text_config"].update(hidden_size=2560, intermediate_size=9728, tie_word_embeddings=True)
    raw["vision_config"].update(depth=24, hidden_size=1024, intermediate_size=4096,
                                out_hidden_size=2560, deepstack_visual_indexes=[5, 11, 17])
    m = spec_from_config(raw, model_id="qwen3-vl-4b", source="test")
    assert _tower(m) == 415_347_712
    assert parameter_count(m) == 4_437_815_808


def test_qwen3_vl_moe_reads_its_language_model_as_qwen3_moe():
    """qwen3_vl_moe wraps a Qwen3-MoE text model (qwen3_vl_moe_text: experts, top-k,
    moe_intermediate_size in text_config). With Qwen3-30B-A3B's text geometry (48 layers,
    hidden 2048, 32q/4kv, 128 experts top-8 of width 768; 30,532,122,624 parameters,
    reference INDEX) and the Qwen3-VL tower at out_hidden_size 2048: merger 2,304 + 21,238,272
    + (2048·4608 + 2048 = 9,439,232) = 30,679,808; deepstack 3 · (9,216 + 21,238,272 +
    9,439,232) = 92,060,160; with patch 1,770,624 + pos 2,654,208 + 27 blocks 411,466,608 the
    tower is 538,631,408."""
    raw = _raw("Qwen/Qwen3-VL-8B-Instruct")
    raw["model_type"] = "qwen3_vl_moe"
    raw["vision_config"]["out_hidden_size"] = 2048
    raw["text_config"].update(
        model_type="qwen3_vl_moe_text", hidden_size=2048, intermediate_size=6144,
        num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, num_experts=128,
        num_experts_per_tok=8, moe_intermediate_size=768, decoder_sparse_step=1, mlp_only_layers=[])
    m = spec_from_config(raw, model_id="qwen3-vl-30b-a3b", source="test")
    assert m.model_type == "qwen3_moe" and m.moe is not None and m.moe.num_experts == 128
    assert m.vision is not None and m.vision.kind == "qwen3_vl"
    assert parameter_count(m, include_vision=False) == 30_532_122_624
    assert _tower(m) == 538_631_408
