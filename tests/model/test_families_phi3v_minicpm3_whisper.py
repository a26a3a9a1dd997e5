"""More families (issue #14, fam-c): Phi-3.5-vision (phi3_v), MiniCPM3 and Whisper, counted
as vLLM builds them. Every expected number is summed by hand in the docstrings, with the
shapes and the source file named; none is derived by calling the code under test."""

import copy
import json

import pytest

from kvplan.errors import InvalidConfigError
from kvplan.model.config import spec_from_config
from kvplan.model.multimodal import phi3v_tokens, pixels_per_image
from kvplan.model.weights import parameter_count, weight_memory_per_stage
from kvplan.sources.catalog import data_dir, find_model_entry, load_catalog_model
from kvplan.specs import ModelSpec


def _model(ref: str) -> ModelSpec:
    entry = find_model_entry(ref)
    assert entry is not None
    return load_catalog_model(entry)


def _raw(ref: str) -> dict:
    entry = find_model_entry(ref)
    assert entry is not None
    return json.loads((data_dir("model_specs") / entry.config).read_text())


# --------------------------------------------------------------- Phi-3.5-vision (phi3_v)

PHI35_LM = 3_821_079_552
"""The Phi-3.5-mini language model (hidden 3072, 32 layers, 32 heads of 96, MHA,
intermediate 8192, vocab 32064, untied): per layer q/k/v/o 4 · 3072² = 37,748,736 +
gate/up/down 3 · 3072 · 8192 = 75,497,472 + 2 RMSNorms 6,144 = 113,252,352; × 32 =
3,624,075,264; embed + lm_head 2 · 32064 · 3072 = 197,001,216; final norm 3,072."""
CLIP_LAYER = 12_596_224
"""One CLIP ViT-L/14 layer: q/k/v/out 4 · (1024² + 1024) = 4,198,400; fc1 1024 · 4096 + 4096 =
4,198,400; fc2 4096 · 1024 + 1024 = 4,195,328; two LayerNorms 4 · 1024 = 4,096."""
CLIP_EMBEDDINGS = 1_193_984
"""class 1024 + conv patch 1024 · 3 · 14 · 14 = 602,112 + positions (24² + 1) · 1024 = 590,848."""
PHI3V_PROJECTOR = 22_034_432
"""phi3v.py Phi3HDImageEmbedding: glb_GN 4096 + sub_GN 4096; img_projection[0]
Linear(4096 → 3072) 4096 · 3072 + 3072 = 12,585,984; img_projection[2] Linear(3072 → 3072)
3072² + 3072 = 9,440,256."""


def test_phi35_vision_counts_clip_to_layer_idx_and_the_hd_projector():
    """vLLM (phi3v.py _init_img_processor) builds CLIP ViT-L/14-336 up to layer_idx −2:
    24 − 2 + 1 = 23 layers, and no post-LayerNorm (clip.py: only when every layer is built).
    Tower: 1,193,984 + pre-LayerNorm 2,048 + 23 · 12,596,224 = 290,909,184; + projector
    22,034,432 = 312,943,616; + LM 3,821,079,552 = 4,134,023,168. The checkpoint adds the
    24th CLIP layer and the post-LayerNorm: 4,134,023,168 + 12,596,224 + 2,048 =
    4,146,621,440 = the card's 4.15B."""
    m = _model("microsoft/Phi-3.5-vision-instruct")
    assert m.model_type == "phi3" and m.vision is not None and m.vision.kind == "phi3v"
    assert (m.vision.num_layers, m.vision.config_num_layers) == (23, 24)
    assert parameter_count(m, include_vision=False) == PHI35_LM
    assert CLIP_EMBEDDINGS + 2048 + 23 * CLIP_LAYER == 290_909_184
    assert parameter_count(m) == PHI35_LM + 290_909_184 + PHI3V_PROJECTOR == 4_134_023_168
    assert 4_134_023_168 + CLIP_LAYER + 2048 == 4_146_621_440
    assert not m.unsupported


def test_phi35_vision_tp2_bytes():
    """TP=2, bf16, one rank. LM: embed and lm_head 32064 rows (a multiple of 64) / 2 = 16,032
    × 3072 = 49,250,304 each; per layer q/k/v/o 4 · 3072 · 1536 = 18,874,368, gate_up
    8192 · 3072 = 25,165,824, down 3072 · 4096 = 12,582,912, norms 6,144 → 56,629,248 × 32 =
    1,812,135,936; final norm 3,072 → 1,910,639,616. CLIP (clip.py: QKVParallelLinear,
    fc1 column-, out_proj/fc2 row-parallel): q/k/v 3 · 512 · 1025 = 1,574,400, out 1024 · 512
    = 524,288 + its bias 1,024, fc1 2048 · 1025 = 2,099,200, fc2 1024 · 2048 = 2,097,152 + bias
    1,024, LayerNorms 4,096 → 6,301,184 × 23 = 144,927,232; embeddings 1,193,984 and
    pre-LayerNorm 2,048 replicated; projector (nn.Linear, replicated) 22,034,432 →
    168,157,696. (1,910,639,616 + 168,157,696) · 2 B = 4,157,594,624, + the longrope cos/sin
    cache (4096 + 131072) · 96 · 2 B = 25,952,256 → 4,183,546,880."""
    m = _model("microsoft/Phi-3.5-vision-instruct")
    (w,) = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)
    assert w.tensor_bytes == 4_157_594_624 + 25_952_256 == 4_183_546_880


def test_phi3v_tokens_per_image_follow_the_hd_transform():
    """vLLM profiles with an 8000 (h) × 50 (w) image. 16 crops: ratio 160, scale 16
    (16 · ceil(16/160) = 16 ≤ 16), long side 16 · 336 = 5376, short int(5376/160) = 33 padded
    to 336 → 1 × 16 crops: (16 + 1) · 144 + 1 + (16 + 1) · 12 = 2,448 + 1 + 204 = 2,653.
    4 crops: 4 · 336 = 1344 × 336 → (4 + 1) · 144 + 1 + 5 · 12 = 781. A square 672² image at
    16 crops: ratio 1, scale 4 → 1344² → (16 + 1) · 144 + 1 + 5 · 12 = 2,509."""
    assert phi3v_tokens(50, 8000, 16) == 2653
    assert phi3v_tokens(50, 8000, 4) == 781
    assert phi3v_tokens(672, 672, 16) == 2509
    m = _model("microsoft/Phi-3.5-vision-instruct")
    assert m.vision is not None and m.vision.max_tokens_per_image == 2653
    assert pixels_per_image(m.vision) == 17 * 3 * 336 * 336  # 16 crops + the global one
    raw = _raw("microsoft/Phi-3.5-vision-instruct") | {"num_crops": 4}
    four = spec_from_config(raw, model_id="phi3v-4-crops", source="test")
    assert four.vision is not None and four.vision.max_tokens_per_image == 781


def test_phi3v_su_rope_is_longrope_with_both_tables():
    """The config's rope_scaling type "su" is vLLM's legacy name for longrope
    (vllm/transformers_utils/config.py patch_rope_scaling_dict): both tables, original 4096 +
    131072 = 135,168 rows."""
    m = _model("microsoft/Phi-3.5-vision-instruct")
    assert m.rope_type == "longrope" and m.rope_cache_positions == 135_168


def test_phi3v_layer_idx_and_bad_blocks():
    """layer_idx −1 builds all 24 layers (24 − 1 + 1) and then, unlike LLaVA (which passes
    require_post_norm=False), also the post-LayerNorm: phi3v.py leaves require_post_norm None
    and clip.py builds it when every layer is built: + 12,596,224 + 2,048. A positive layer_idx
    k builds k + 1 layers. Bad blocks are config errors naming the field."""
    raw = _raw("microsoft/Phi-3.5-vision-instruct")
    base = parameter_count(spec_from_config(raw, model_id="a", source="test"))
    last = copy.deepcopy(raw)
    last["img_processor"]["layer_idx"] = -1
    m = spec_from_config(last, model_id="b", source="test")
    assert m.vision is not None and m.vision.num_layers == 24
    assert parameter_count(m) == base + CLIP_LAYER + 2048
    first = copy.deepcopy(raw)
    first["img_processor"]["layer_idx"] = 0
    m = spec_from_config(first, model_id="c", source="test")
    assert m.vision is not None and m.vision.num_layers == 1
    with pytest.raises(InvalidConfigError, match="img_processor"):
        spec_from_config(raw | {"img_processor": "clip"}, model_id="d", source="test")
    broken = copy.deepcopy(raw)
    del broken["img_processor"]["image_dim_out"]
    with pytest.raises(InvalidConfigError, match="image_dim_out"):
        spec_from_config(broken, model_id="e", source="test")
    with pytest.raises(InvalidConfigError, match="embd_layer"):
        spec_from_config(raw | {"embd_layer": {"use_hd_transform": False}}, model_id="f",
                         source="test")
    with pytest.raises(InvalidConfigError, match="num_crops"):
        spec_from_config(raw | {"num_crops": 10**6}, model_id="g", source="test")


# ------------------------------------------------------------------------------- MiniCPM3

MINICPM3_LAYER = 62_674_944
"""One MiniCPM3-4B layer (hidden 2560, 40 heads, q_lora_rank 768, kv_lora_rank 256, qk_nope 64,
qk_rope 32, v_head_dim 64, intermediate 6400; vllm minicpm3.py MiniCPM3Attention):
q_a_proj 768 · 2560 = 1,966,080; q_a_layernorm 768; q_b_proj 40 · 96 · 768 = 2,949,120;
kv_a_proj_with_mqa (256 + 32) · 2560 = 737,280; kv_a_layernorm 256; kv_b_proj
40 · (64 + 64) · 256 = 1,310,720; o_proj 2560 · 40 · 64 = 6,553,600 → attention 13,517,824;
gate/up/down 3 · 2560 · 6400 = 49,152,000; two RMSNorms 5,120."""


def test_minicpm3_4b_counts_mla_projections_and_ties_embeddings():
    """62 · 62,674,944 = 3,885,846,528; embed 73448 · 2560 = 188,026,880 (tied: the config
    omits tie_word_embeddings, MiniCPM3Config defaults it to True); final norm 2,560 →
    4,073,875,968 = the 4.07B of the model page (untied would be 4.26B)."""
    m = _model("openbmb/MiniCPM3-4B")
    assert m.tie_word_embeddings and m.mla is None and m.mla_projections is not None
    assert m.mla_projections.v_head_dim == 64  # = qk_nope_head_dim, the config class default
    assert 1_966_080 + 768 + 2_949_120 + 737_280 + 256 + 1_310_720 + 6_553_600 == 13_517_824
    assert 13_517_824 + 49_152_000 + 5_120 == MINICPM3_LAYER
    assert parameter_count(m) == 62 * MINICPM3_LAYER + 188_026_880 + 2_560 == 4_073_875_968
    assert not m.unsupported and m.layout_assumed is None


def test_minicpm3_kv_is_per_head_k_and_padded_v():
    """minicpm3.py: Attention(num_local_heads, qk_head_dim = 64 + 32, num_kv_heads =
    num_local_heads), V zero-padded from 64 to 96, so vLLM's FullAttentionSpec page holds
    2 · heads/tp · 96 values per token per layer: bf16 2 · 40 · 96 · 2 B = 15,360 (TP=2: 7,680),
    × 62 layers = 952,320 bytes per token (not the 288-value MLA latent)."""
    from kvplan.engines.vllm import default_block_size
    from kvplan.model.kv import kv_bytes_per_token_per_layer, stage_kv
    from kvplan.specs import GpuSpec

    m = _model("openbmb/MiniCPM3-4B")
    assert (m.head_dim, m.num_kv_heads, m.rotary_dim) == (96, 40, 32)
    assert kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="bfloat16") == 15_360
    assert kv_bytes_per_token_per_layer(m, tp=2, kv_dtype="bfloat16") == 7_680
    layout, per_token = stage_kv(m, range(62), tp=1, kv_dtype="bfloat16", state_dtype="bfloat16",
                                 hybrid_manager=True, block_size=16, block_size_fixed=False,
                                 group_rule="min")
    assert per_token == 62 * 15_360 == 952_320
    assert [g.kind for g in layout.groups] == ["full"]
    hopper = GpuSpec(id="h", vendor="nvidia", name="H", arch="hopper", compute_capability="9.0",
                     cuda_total_source="test", cuda_total_estimated=False, cuda_total_bytes=1)
    assert default_block_size(m, hopper, "0.11.0") == 16  # plain attention, not an MLA backend


def test_minicpm3_tp2_bytes():
    """TP=2, bf16, one rank. Embedding: 73448 rows padded to 73472 (1148 · 64), / 2 = 36,736 ×
    2560 = 94,044,160 (tied, no lm_head). Per layer: q_a 1,966,080 and kv_a 737,280
    (ReplicatedLinear) + the two latent norms 768 + 256; q_b 3840/2 · 768 = 1,474,560; kv_b
    5120/2 · 256 = 655,360; o 2560 · 1280 = 3,276,800; gate_up 12800/2 · 2560 = 16,384,000;
    down 2560 · 3200 = 8,192,000; norms 5,120 → 32,692,224 × 62 = 2,026,917,888; final norm
    2,560. (94,044,160 + 2,026,917,888 + 2,560) · 2 B = 4,241,929,216; + the longrope cos/sin
    cache (32768 + 32768) rows · 32 · 2 B = 4,194,304 → 4,246,123,520."""
    m = _model("openbmb/MiniCPM3-4B")
    assert m.rope_cache_positions == 65_536
    (w,) = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)
    assert w.tensor_bytes == 4_241_929_216 + 4_194_304 == 4_246_123_520


def test_minicpm3_missing_lora_rank_is_a_config_error():
    raw = _raw("openbmb/MiniCPM3-4B")
    del raw["kv_lora_rank"]
    with pytest.raises(InvalidConfigError, match="kv_lora_rank"):
        spec_from_config(raw, model_id="x", source="test")


def test_minicpm3_sglang_pools_the_latent():
    """SGLang's configs/model_config.py sets attention_arch MLA for MiniCPM3ForCausalLM with
    kv_lora_rank and qk_rope_head_dim, so its token cell is the latent: (256 + 32) · 2 B =
    576 per layer × 62 = 35,712 bytes (vLLM: 952,320)."""
    from kvplan.engines.sglang import cell_bytes

    m = _model("openbmb/MiniCPM3-4B")
    assert cell_bytes(m, 1, "bfloat16")[0] == 62 * 576 == 35_712
    assert cell_bytes(m, 2, "bfloat16")[0] == 35_712  # the latent is replicated over TP


# -------------------------------------------------------------------------------- Whisper

WHISPER_ENCODER_LAYER = 19_676_160
"""One whisper-large-v3 encoder layer in the checkpoint (d 1280, MLP 5120): q/v/out
3 · (1280² + 1280) + k 1280² (no bias) = 6,557,440; fc1 1280 · 5120 + 5120 = 6,558,720; fc2
5120 · 1280 + 1280 = 6,554,880; two LayerNorms 2 · 2 · 1280 = 5,120."""
WHISPER_DECODER_LAYER = 26_236_160
"""One decoder layer in the checkpoint: self-attention 6,557,440 + cross-attention (the same
shapes) 6,557,440 + fc1 6,558,720 + fc2 6,554,880 + three LayerNorms 7,680."""


def test_whisper_large_v3_checkpoint_and_vllm_counts():
    """Encoder: conv1 1280 · 128 · 3 + 1280 = 492,800; conv2 1280 · 1280 · 3 + 1280 = 4,916,480;
    positions 1500 · 1280 = 1,920,000; 32 · 19,676,160 = 629,637,120; LayerNorm 2,560 →
    636,968,960. Decoder: embed_tokens 51866 · 1280 = 66,388,480 (proj_out tied); positions
    448 · 1280 = 573,440; 32 · 26,236,160 = 839,557,120; LayerNorm 2,560 → 906,521,600.
    Checkpoint: 1,543,490,560 (1.54B; 1.55B as issue #14 and the paper's "1550M" round it).
    vLLM (whisper.py) builds q/k/v with QKVParallelLinear(bias=True) and kv_proj with a bias,
    zero-filling the k biases the checkpoint lacks: + 3 · 32 · 1280 = 122,880 →
    1,543,613,440."""
    enc = 492_800 + 4_916_480 + 1_920_000 + 32 * WHISPER_ENCODER_LAYER + 2_560
    dec = 66_388_480 + 573_440 + 32 * WHISPER_DECODER_LAYER + 2_560
    assert (enc, dec) == (636_968_960, 906_521_600)
    m = _model("openai/whisper-large-v3")
    assert m.model_type == "whisper" and m.audio_encoder is not None
    assert (m.num_layers, m.head_dim, m.num_kv_heads) == (32, 64, 20)
    assert m.cross_attention_tokens == 1500
    assert m.tie_word_embeddings and m.embedding_replicated and m.rotary_dim == 0
    assert parameter_count(m) == enc + dec + 3 * 32 * 1280 == 1_543_613_440
    assert parameter_count(m, include_vision=False) == dec + 2 * 32 * 1280  # decoder only
    assert m.max_len_keys == {"max_target_positions": 448}
    assert not m.unsupported and m.layout_assumed is None


def test_whisper_tp2_bytes():
    """TP=2, fp16, one rank. Decoder: embed_tokens (nn.Embedding, whole) 66,388,480 and
    positions 573,440 replicated; per layer self q/k/v 3 · 640 · 1280 = 2,457,600 + biases
    1,920, out 1280 · 640 = 819,200 + bias 1,280; cross q 640 · 1280 = 819,200 + 640, kv
    1280 · 1280 = 1,638,400 + 1,280, out 819,200 + 1,280; LayerNorms 7,680; fc1 2560 · 1280 =
    3,276,800 + 2,560; fc2 1280 · 2560 = 3,276,800 + 1,280 → 13,125,120 × 32 = 420,003,840;
    final LayerNorm 2,560 → 486,968,320. Encoder: conv1 492,800, conv2 4,916,480, positions
    1,920,000 (replicated); per layer q/k/v 3 · 640 · 1281 = 2,459,520, out 819,200 + 1,280,
    fc1 2560 · 1281 = 3,279,360, fc2 3,276,800 + 1,280, LayerNorms 5,120 → 9,842,560 × 32 =
    314,961,920; LayerNorm 2,560 → 322,293,760. (486,968,320 + 322,293,760) · 2 B =
    1,618,524,160 (no RoPE cache)."""
    m = _model("openai/whisper-large-v3")
    (w,) = weight_memory_per_stage(m, tp=2, pp=1, dtype="float16", quant=None)
    assert w.tensor_bytes == 1_618_524_160


def test_whisper_kv_self_and_cross_attention_groups():
    """vLLM V1: each decoder layer's self-attention is a FullAttentionSpec and its
    cross-attention a CrossAttentionSpec (vllm/v1/kv_cache_interface.py), same page: fp16
    16 tokens · 2 · 20 heads · 64 · 2 B = 81,920. Two groups of 32 layers: a block id spans
    32 pages = 2,621,440 B. A request of 448 decoder tokens holds cdiv(448, 16) = 28 self pages
    + cdiv(1500, 16) = 94 cross pages = 122 blocks; a 1-token request 1 + 94 = 95."""
    from kvplan.model.kv import stage_kv

    m = _model("openai/whisper-large-v3")
    layout, per_token = stage_kv(m, range(32), tp=1, kv_dtype="float16", state_dtype="float16",
                                 hybrid_manager=True, block_size=16, block_size_fixed=False,
                                 group_rule="min")
    assert layout.page_bytes == 81_920 and layout.bytes_per_block == 32 * 81_920 == 2_621_440
    assert sorted((g.kind, g.layers) for g in layout.groups) == [("cross", 32), ("full", 32)]
    assert layout.blocks_per_request(448, in_flight=0, mamba_pages=1) == 28 + 94 == 122
    assert layout.blocks_per_request(1, in_flight=0, mamba_pages=1) == 95
    assert per_token == 64 * 5_120  # self + cross, 2 · 20 · 64 · 2 B each


def test_whisper_vllm_plan_and_other_engines_warn():
    """The vLLM plan sizes requests at 122 blocks (above); the other engines' encoder-decoder
    serving is not modelled and says so."""
    from kvplan.api import plan

    p = plan("openai/whisper-large-v3", "l4")
    assert p.kv_cache.bytes_per_block == 2_621_440
    assert p.kv_cache.bytes_per_request == 122 * 2_621_440  # max_model_len 448 (config)
    assert p.kv_cache.max_concurrency == pytest.approx(p.kv_cache.num_blocks / 122, abs=0.01)
    for engine in ("sglang", "tgi", "trtllm"):
        q = plan("openai/whisper-large-v3", "l4", engine=engine)
        assert any("encoder-decoder" in x.message for x in q.problems), engine


def test_whisper_bad_heads_is_a_config_error():
    raw = _raw("openai/whisper-large-v3") | {"decoder_attention_heads": 7}
    with pytest.raises(InvalidConfigError, match="decoder_attention_heads"):
        spec_from_config(raw, model_id="x", source="test")
    raw = _raw("openai/whisper-large-v3")
    del raw["encoder_layers"]
    with pytest.raises(InvalidConfigError, match="encoder_layers"):
        spec_from_config(raw, model_id="x", source="test")
