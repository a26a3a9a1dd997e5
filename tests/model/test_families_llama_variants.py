"""Llama-variant families (issue #14 "Families", fam-b): hand-worked parameter counts, one TP=2
per-rank byte check, and KV bytes for Command-R7B's sliding-window layers.

Every expected number is arithmetic written out here from the tensor shapes vLLM builds
(vllm/model_executor/models/<family>.py, v0.11+ main branch) and the config values quoted; the
model-card sizes named are the independent check. Nothing is derived by calling the code under
test.
"""

from __future__ import annotations

import json

import pytest

from kvplan.model.config import spec_from_config
from kvplan.model.kv import kv_bytes_per_token_per_layer, kv_layout, layer_specs
from kvplan.model.weights import parameter_count, tensors, weight_memory_per_stage
from kvplan.sources.catalog import data_dir, find_model_entry, load_catalog_model


def _model(ref):
    return load_catalog_model(find_model_entry(ref))


def _spec(cfg):
    return spec_from_config(cfg, model_id="test", source="test")


def _catalog_cfg(ref, **extra):
    entry = find_model_entry(ref)
    return {**json.loads((data_dir("model_specs") / entry.config).read_text()), **extra}


# ------------------------------------------------------------------------ Gemma 1


def test_gemma_7b_is_8_54b_and_its_non_embedding_part_matches_the_gemma_report():
    """google/gemma-7b (config: hidden 3072, 28 layers, 16 heads, 16 KV heads, head_dim 256,
    intermediate 24576, vocab 256000), vLLM gemma.py:
      embed_tokens 256000 × 3072                         =   786,432,000 (also the LM head: tied)
      per layer: q 4096×3072 + k 4096×3072 + v 4096×3072 = 37,748,736
                 o 3072×4096                             = 12,582,912
                 gate_up 2×24576×3072 + down 3072×24576  = 226,492,416
                 input + post-attention RMSNorm 2×3072   =      6,144
                 = 276,830,208 × 28                      = 7,751,245,824
      final norm                                         =      3,072
      total                                              = 8,537,680,896  (HF page: 8.54B)
    The Gemma technical report's table lists 7,751,248,896 non-embedding parameters for 7B:
    exactly the layers plus the final norm."""
    m = _model("google/gemma-7b")
    assert m.tie_word_embeddings and m.head_dim == 256 and m.num_kv_heads == 16
    assert parameter_count(m) == 8_537_680_896
    assert parameter_count(m) - 256000 * 3072 == 7_751_248_896


def test_gemma_2b_non_embedding_matches_the_gemma_report():
    """google/gemma-2b (hidden 2048, 18 layers, 8 heads, 1 KV head of 256, intermediate 16384):
    per layer q 2048×2048 + k,v 2×256×2048 + o 2048×2048 = 9,437,184; MLP 3×2048×16384 =
    100,663,296; norms 4,096 → 110,104,576 × 18 = 1,981,882,368 + final norm 2,048 =
    1,981,884,416, the report's non-embedding count for 2B."""
    m = _model("google/gemma-2b")
    assert parameter_count(m) - 256000 * 2048 == 1_981_884_416


def test_gemma_is_tied_even_when_the_config_says_otherwise():
    """vLLM gemma.py has no lm_head: logits always come from embed_tokens."""
    m = _spec(_catalog_cfg("google/gemma-2b", tie_word_embeddings=False))
    assert m.tie_word_embeddings
    assert not any(t.kind == "lm_head" for t in tensors(m))


# --------------------------------------------------------------- Cohere / Command-R

# transformers CohereConfig defaults, which its docstring says reproduce
# CohereForAI/c4ai-command-r-v01 (configuration_cohere.py).
COMMAND_R_V01 = {
    "model_type": "cohere", "architectures": ["CohereForCausalLM"], "hidden_size": 8192,
    "intermediate_size": 22528, "num_hidden_layers": 40, "num_attention_heads": 64,
    "num_key_value_heads": 64, "vocab_size": 256000, "max_position_embeddings": 8192,
    "layer_norm_eps": 1e-5, "logit_scale": 0.0625, "use_qk_norm": False,
    "tie_word_embeddings": True, "torch_dtype": "float16",
}


def test_command_r_v01_is_35b():
    """vLLM commandr.py: one LayerNorm (weight only) per layer feeding attention and MLP in
    parallel, no biases, logits from embed_tokens (tied):
      embed 256000 × 8192                                  =  2,097,152,000
      per layer: q,k,v,o 4 × 8192 × 8192                   =    268,435,456
                 gate_up 2×22528×8192 + down 8192×22528     =    553,648,128
                 input_layernorm 8192                       =          8,192
                 = 822,091,776 × 40                         = 32,883,671,040
      final LayerNorm                                       =          8,192
      total                                                 = 34,980,831,232  (card: 35B)"""
    m = _spec(COMMAND_R_V01)
    assert m.norms_per_layer == 1 and not m.norm_bias and m.tie_word_embeddings
    assert parameter_count(m) == 34_980_831_232
    assert not m.unsupported


def test_cohere_rope_cache_uses_model_max_length():
    """commandr.py: max_position = model_max_length or max_position_embeddings (else 8192);
    the cos/sin cache has that many rows × head_dim 128."""
    m = _spec({**COMMAND_R_V01, "model_max_length": 131072})
    assert m.rope_cache_positions == 131072 and m.rotary_dim == 128
    assert _spec(COMMAND_R_V01).rope_cache_positions == 8192


def test_cohere_qk_norm_is_per_head_and_split_over_tp():
    """use_qk_norm (Command-R+): q_norm LayerNorm weight [heads/tp, head_dim], k_norm
    [kv_heads/tp, head_dim] (commandr.py builds them from the per-rank head counts).
    Small config: hidden 1024, 16 heads of 64, 4 KV heads, 2 layers.
      per layer q_norm 16×64 = 1,024 and k_norm 4×64 = 256 parameters;
      at TP=2 one rank holds 8×64 = 512 and 2×64 = 128 of them: 640 × 2 layers × 2 B = 2,560 B
      fewer than the unsharded 1,280 × 2 × 2 B = 5,120 B."""
    cfg = {
        **COMMAND_R_V01,
        "hidden_size": 1024,
        "intermediate_size": 2048,
        "num_hidden_layers": 2,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "vocab_size": 1024,
        "use_qk_norm": True,
    }
    plain = _spec({**cfg, "use_qk_norm": False})
    qk = _spec(cfg)
    assert parameter_count(qk) - parameter_count(plain) == 2 * (16 * 64 + 4 * 64)
    one = weight_memory_per_stage(qk, tp=2, pp=1, dtype="bfloat16", quant=None)[0].tensor_bytes
    one_plain = weight_memory_per_stage(plain, tp=2, pp=1, dtype="bfloat16", quant=None)[
        0
    ].tensor_bytes
    assert one - one_plain == 2 * (8 * 64 + 2 * 64) * 2


# Command-R7B (CohereForAI/c4ai-command-r7b-12-2024) geometry: hidden 4096, 32 layers, 32 heads,
# 8 KV heads, sliding_window 4096, sliding_window_pattern 4 (3 sliding : 1 global).
COMMAND_R7B = {
    "model_type": "cohere2", "architectures": ["Cohere2ForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 256000, "max_position_embeddings": 8192,
    "sliding_window": 4096, "sliding_window_pattern": 4, "layer_norm_eps": 1e-5,
    "logit_scale": 0.25, "torch_dtype": "bfloat16",
}


def test_command_r7b_sliding_layers_follow_the_pattern():
    """commandr.py (Cohere2): a layer slides unless (i + 1) % sliding_window_pattern == 0,
    so layers 3, 7, …, 31 are global: 24 sliding, 8 full. An explicit layer_types wins."""
    m = _spec(COMMAND_R7B)
    assert [i for i, k in enumerate(m.layer_types) if k == "full"] == list(range(3, 32, 4))
    assert m.layer_types.count("sliding") == 24 and m.sliding_window == 4096
    explicit = ["sliding_attention", "full_attention"] * 16
    assert _spec({**COMMAND_R7B, "layer_types": explicit}).layer_types == ["sliding", "full"] * 16


def test_command_r7b_kv_bytes_per_token_and_per_request():
    """KV per token per layer, bf16, TP=1: 2 (K,V) × 8 KV heads × 128 × 2 B = 4,096 B; all
    32 layers: 131,072 B/token when every layer held the whole context.
    vLLM's hybrid manager (kv_cache_planning.py, group size = the smaller bucket, 8): 3 sliding
    groups + 1 full group of 8 layers each; page = 16 tokens × 4,096 B = 65,536 B, one block id
    spans 8 pages = 524,288 B.
    One request of 32,768 tokens (1 token in flight): full group cdiv(32768, 16) = 2,048
    blocks; each sliding group cdiv(min(4095 + 1, 32768), 16) + 1 = 257 blocks:
    2,048 + 3 × 257 = 2,819 blocks = 1,477,967,872 B (vs 4,294,967,296 B without windows)."""
    m = _spec(COMMAND_R7B)
    assert kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="bfloat16") == 4096
    specs = layer_specs(m, range(32), tp=1, kv_dtype="bfloat16", state_dtype="bfloat16",
                        hybrid_manager=True)
    assert sum(s.bytes_per_token for s in specs) == 131_072
    layout = kv_layout(specs, block_size=16, block_size_fixed=False, group_rule="min")
    assert sorted((g.kind, g.layers) for g in layout.groups) == [("full", 8)] + [("sliding", 8)] * 3
    assert layout.bytes_per_block == 524_288
    blocks = layout.blocks_per_request(32768, in_flight=1, mamba_pages=0)
    assert blocks == 2_819
    assert blocks * layout.bytes_per_block == 1_477_967_872


def test_aya_23_8b_is_8_03b():
    """CohereForAI/aya-23-8B (Cohere layout, GQA 32q/8kv of 128, intermediate 14336):
      embed 256000 × 4096 = 1,048,576,000 (tied)
      per layer q 4096² + k,v 2×1024×4096 + o 4096² = 41,943,040; MLP 3×4096×14336 =
      176,160,768; one LayerNorm 4,096 → 218,107,904 × 32 = 6,979,452,928
      + final norm 4,096 → 8,028,033,024 (HF page 8.03B)."""
    assert parameter_count(_model("CohereForAI/aya-23-8B")) == 8_028_033_024


# -------------------------------------------------------------------------- OLMo


def test_olmo2_7b_counts_full_width_qk_norms():
    """allenai/OLMo-2-1124-7B (hidden 4096, 32 layers, MHA 32×128, intermediate 11008, vocab
    100352, untied), vLLM olmo2.py:
      embed + lm_head 2 × 100352 × 4096                  =   822,083,584
      per layer: q,k,v,o 4 × 4096²                       =    67,108,864
                 gate_up + down 3 × 4096 × 11008          =   135,266,304
                 q_norm 4096 (32×128) + k_norm 4096        =         8,192
                 post-attention + post-feedforward norms  =         8,192
                 = 202,391,552 × 32                       = 6,476,529,664
      final norm                                          =         4,096
      total                                               = 7,298,617,344  (HF page 7.3B)"""
    m = _model("allenai/OLMo-2-1124-7B")
    assert m.qk_norm and m.qk_norm_layout == "full_width"
    assert parameter_count(m) == 7_298_617_344


def test_olmo2_7b_tp2_bytes_per_rank():
    """TP=2, bf16, one rank (vLLM: column/row-parallel halves, vocab padded to 64 then split,
    q_norm/k_norm replicated because olmo2.py all-gathers q and k before normalising):
      embed 100352/2 × 4096 × 2 B = 411,041,792; lm_head the same      =   822,083,584
      per layer: q,k,v 3 × 2048 × 4096 + o 4096 × 2048 = 33,554,432 el
                 gate_up 11008 × 4096 + down 4096 × 5504 = 67,633,152 el
                 q_norm 4096 + k_norm 4096 + 2 norms 8192 = 16,384 el (whole)
                 = 101,203,968 el × 2 B = 202,407,936 B × 32            = 6,477,053,952
      final norm 4096 × 2 B                                             =         8,192
      RoPE cache 4096 positions × 128 × 2 B                            =     1,048,576
      total                                                             = 7,300,194,304"""
    m = _model("allenai/OLMo-2-1124-7B")
    w = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)[0]
    assert w.tensor_bytes == 7_300_194_304


OLMO_7B_SHAPED = {  # the layout of allenai/OLMo-7B-hf: hidden 4096, 32 layers, MHA, vocab 50304
    "model_type": "olmo",
    "architectures": ["OlmoForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 50304,
    "max_position_embeddings": 2048,
    "clip_qkv": None,
    "attention_bias": False,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}


def test_olmo1_layernorms_hold_no_weights():
    """vLLM olmo.py: nn.LayerNorm(elementwise_affine=False) before attention, before the MLP and
    at the end: no norm tensors at all.
      embed + lm_head 2 × 50304 × 4096 = 412,090,368
      per layer 4 × 4096² + 3 × 4096 × 11008 = 202,375,168 × 32 = 6,476,005,376
      total 6,888,095,744 (no norm term)."""
    m = _spec(OLMO_7B_SHAPED)
    assert not any(t.kind == "norm" for t in tensors(m))
    assert parameter_count(m) == 6_888_095_744


# --------------------------------------------------------------- MoE variants


PHI35_MOE = {  # microsoft/Phi-3.5-MoE-instruct geometry (its config.json)
    "model_type": "phimoe", "architectures": ["PhiMoEForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 6400, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_local_experts": 16, "num_experts_per_tok": 2,
    "vocab_size": 32064, "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_phi35_moe_is_41_9b():
    """vLLM phimoe.py: biased qkv_proj and o_proj, LayerNorms with weight and bias, 16 experts
    (w1, w3, w2) of 6400 and a bias-free router per layer, an untied LM head with a bias:
      embed 32064 × 4096 = 131,334,144; lm_head 131,334,144 + bias 32,064
      per layer: q 4096² + k,v 2×1024×4096 + o 4096²       =    41,943,040
                 biases q 4096 + k,v 2×1024 + o 4096         =        10,240
                 experts 16 × 3 × 4096 × 6400                = 1,258,291,200
                 router 16 × 4096                            =        65,536
                 2 LayerNorms × (4096 + 4096)               =        16,384
                 = 1,300,326,400 × 32                        = 41,610,444,800
      final LayerNorm 8,192
      total                                                  = 41,873,153,344 (card: 41.9B)"""
    m = _spec(PHI35_MOE)
    assert m.moe is not None and m.moe.num_experts == 16 and m.moe.top_k == 2
    assert m.norm_bias and m.qkv_bias and m.o_bias and m.lm_head_bias
    assert parameter_count(m) == 41_873_153_344


def test_granitemoe_experts_from_num_local_experts():
    """vLLM granitemoe.py: every layer a FusedMoE of num_local_experts experts of
    intermediate_size (checkpoint input_linear = w1‖w3, output_linear = w2) and a bias-free
    router; tied head. ibm-granite/granite-3.1-3b-a800m-instruct geometry (the config fields a
    public planner's fixture copies): hidden 1536, 32 layers, 24 heads of 64, 8 KV heads, 40
    experts of 512, top-8, vocab 49155, tied:
      embed 49155 × 1536                                  =    75,502,080
      per layer: q,o 2 × 1536² + k,v 2 × 512 × 1536         =     6,291,456
                 experts 40 × 3 × 1536 × 512                 =    94,371,840
                 router 40 × 1536 + 2 norms 3,072            =        64,512
                 = 100,727,808 × 32                          = 3,223,289,856
      final norm 1,536 → 3,298,793,472 (card: 3.3B total, 800M active)"""
    m = _spec({"model_type": "granitemoe", "architectures": ["GraniteMoeForCausalLM"],
               "hidden_size": 1536, "intermediate_size": 512, "num_hidden_layers": 32,
               "num_attention_heads": 24, "num_key_value_heads": 8, "num_local_experts": 40,
               "num_experts_per_tok": 8, "vocab_size": 49155, "max_position_embeddings": 131072,
               "tie_word_embeddings": True, "torch_dtype": "bfloat16"})
    assert (
        m.intermediate_size == 0
        and m.moe is not None
        and m.moe.shared_expert_intermediate_size == 0
    )
    assert parameter_count(m) == 3_298_793_472


def test_granitemoeshared_adds_a_gated_shared_mlp():
    """granitemoeshared.py: shared_mlp input_linear [2 × shared, hidden] and output_linear
    [hidden, shared]: 3 × 1536 × 1024 = 4,718,592 more parameters per layer."""
    base = {"model_type": "granitemoe", "hidden_size": 1536, "intermediate_size": 512,
            "num_hidden_layers": 2, "num_attention_heads": 24, "num_key_value_heads": 8,
            "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 1000,
            "tie_word_embeddings": True}
    plain = _spec(base)
    shared = _spec({**base, "model_type": "granitemoeshared", "shared_intermediate_size": 1024})
    assert parameter_count(shared) - parameter_count(plain) == 2 * 3 * 1536 * 1024


# ------------------------------------------------ InternLM, Baichuan, Phi-3, others


def test_internlm2_5_7b_is_7_74b():
    """internlm2_5-7b-chat (hidden 4096, 32 layers, GQA 32q/8kv of 128, intermediate 14336,
    vocab 92544, untied, bias false), vLLM internlm2.py fused wqkv rows (32 + 2×8) × 128:
      tok_embeddings + output 2 × 92544 × 4096 = 758,120,448
      per layer wqkv 6144 × 4096 + wo 4096² = 41,943,040; w1,w3,w2 3 × 4096 × 14336 =
      176,160,768; 2 norms 8,192 → 218,112,000 × 32 = 6,979,584,000
      + final norm 4,096 → 7,737,708,544 (HF page 7.74B). Dynamic RoPE ×2: 65,536 cache rows."""
    m = _model("internlm/internlm2_5-7b-chat")
    assert not m.qkv_bias and not m.o_bias
    assert parameter_count(m) == 7_737_708_544
    assert m.rope_cache_positions == 65536


@pytest.mark.parametrize("family,extra,qkv,o", [
    ("internlm2", {"bias": True}, True, True),     # internlm2.py: wqkv and wo take config.bias
    ("internlm", {"bias": True}, True, True),      # llama.py: attention_bias or bias
    ("internlm3", {"bias": False, "qkv_bias": True}, True, False),  # llama.py: qkv_bias overrides
])
def test_internlm_bias_keys(family, extra, qkv, o):
    m = _spec({"model_type": family, "hidden_size": 256, "intermediate_size": 512,
               "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000, **extra})
    assert (m.qkv_bias, m.o_bias) == (qkv, o)


def test_baichuan2_7b_is_rope_and_13b_is_alibi():
    """baichuan.py BaichuanForCausalLM: hidden_size 4096 → RoPE, any other → ALiBi (no rotary
    cache). Baichuan2-7B: W_pack 3 × 4096 × 4096 + o_proj 4096² = 67,108,864; MLP
    3 × 4096 × 11008 = 135,266,304; norms 8,192 → 202,383,360 × 32 = 6,476,267,520;
    embed + untied NormHead 2 × 125696 × 4096 = 1,029,701,632; final norm 4,096 →
    7,505,973,248. RoPE cache 4096 rows × 128."""
    m7 = _model("baichuan-inc/Baichuan2-7B-Chat")
    assert parameter_count(m7) == 7_505_973_248
    assert (m7.rope_cache_positions, m7.rotary_dim) == (4096, 128)
    m13 = _spec({**_catalog_cfg("baichuan-inc/Baichuan2-7B-Chat"), "hidden_size": 5120,
                 "num_attention_heads": 40, "num_hidden_layers": 40, "intermediate_size": 13696})
    assert (m13.rope_cache_positions, m13.rotary_dim) == (0, 0)
    w13 = weight_memory_per_stage(m13, tp=1, pp=1, dtype="bfloat16", quant=None)[0]
    assert w13.tensor_bytes == parameter_count(m13) * 2  # no RoPE buffer beside the weights


def test_phi35_mini_counts_like_phi3_and_keeps_both_longrope_tables():
    """Phi-3.5-mini: fused qkv_proj (3 × 3072 rows) and gate_up_proj (2 × 8192) hold the same
    elements as q/k/v and gate/up: per layer 4 × 3072² + 3 × 3072 × 8192 + 2 × 3072 =
    113,252,352 × 32 = 3,624,075,264; embed + lm_head 2 × 32064 × 3072 = 197,001,216; final
    norm 3,072 → 3,821,079,552 (card 3.8B). Phi3LongRoPEScaledRotaryEmbedding caches the short
    table (original 4096 rows) and the long one (131072): 135,168 rows × 96 — SGLang's traced
    buffer is bf16[135168, 96]."""
    m = _model("microsoft/Phi-3.5-mini-instruct")
    assert parameter_count(m) == 3_821_079_552
    assert m.rope_cache_positions == 135_168


def test_minicpm_2b_is_llama_shaped_and_tied():
    """MiniCPM-2B-sft-bf16 (hidden 2304, 40 layers, 36 heads of 64, intermediate 5760, vocab
    122753, tied): per layer 4 × 2304² + 3 × 2304 × 5760 + 2 × 2304 = 61,051,392 × 40 =
    2,442,055,680; final norm 2,304 → 2,442,057,984 non-embedding (card: 2.4B non-embedding);
    + embed 122753 × 2304 = 282,822,912 → 2,724,880,896."""
    m = _model("openbmb/MiniCPM-2B-sft-bf16")
    assert m.tie_word_embeddings
    assert parameter_count(m) == 2_724_880_896


def test_covered_families_are_no_longer_assumed_llama_style():
    for family in ("gemma", "cohere", "cohere2", "olmo", "olmo2", "granite", "granitemoe",
                   "granitemoeshared", "internlm3", "baichuan", "exaone", "minicpm", "phimoe"):
        m = _spec({"model_type": family, "hidden_size": 256, "intermediate_size": 512,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
                   "num_local_experts": 4, "num_experts_per_tok": 2})
        assert not m.unsupported and m.layout_assumed is None, family


def test_exaone_reads_num_layers():
    """EXAONE-3.x configs name the layer count num_layers (exaone.py reads the same)."""
    m = _spec({"model_type": "exaone", "hidden_size": 4096, "intermediate_size": 14336,
               "num_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
               "vocab_size": 102400, "tie_word_embeddings": False})
    # EXAONE-3.5-7.8B shape: 2 × 102400 × 4096 + 32 × (2 × 4096² + 2 × 1024 × 4096
    # + 3 × 4096 × 14336 + 2 × 4096) + 4096 = 7,818,448,896 (card: 7.82B)
    assert m.num_layers == 32 and parameter_count(m) == 7_818_448_896


def test_minicpm3_is_modelled_not_flagged():
    """minicpm3.py projects like MLA but caches full per-head K and V: modelled since fam-c
    (tests/model/test_families_phi3v_minicpm3_whisper.py holds its hand-worked counts)."""
    m = _spec({"model_type": "minicpm3", "hidden_size": 2560, "intermediate_size": 6400,
               "num_hidden_layers": 2, "num_attention_heads": 40, "vocab_size": 1000,
               "q_lora_rank": 768, "kv_lora_rank": 256, "qk_nope_head_dim": 64,
               "qk_rope_head_dim": 32, "v_head_dim": 64})
    assert not m.unsupported and m.layout_assumed is None and m.mla is None
    assert m.mla_projections is not None and (m.head_dim, m.num_kv_heads) == (96, 40)


def test_exaone_3_0_7_8b_from_the_catalogue():
    """LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct: the same shape as above (num_layers 32, GQA 32q/8kv,
    intermediate 14336, vocab 102400, untied): 7,818,448,896; RoPE cache 4096 rows × 128."""
    m = _model("LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct")
    assert parameter_count(m) == 7_818_448_896
    assert (m.rope_cache_positions, m.rotary_dim) == (4096, 128)


def test_granite_3_3_8b_matches_its_parameter_shape_listing():
    """ibm-granite/granite-3.3-8b-instruct, shapes as a public model report lists them:
      embed_tokens (49159, 4096) = 201,355,264 (lm_head tied)
      per layer q (4096,4096) + k (1024,4096) + v (1024,4096) + o (4096,4096) = 41,943,040;
      gate/up (12800,4096) ×2 + down (4096,12800) = 157,286,400; 2 norms 8,192
      → 199,237,632 × 40 = 7,969,505,280; final norm 4,096 → 8,170,864,640."""
    m = _model("ibm-granite/granite-3.3-8b-instruct")
    assert m.tie_word_embeddings and not m.unsupported
    assert parameter_count(m) == 8_170_864_640


def test_olmo2_7b_instruct_shapes_confirm_full_width_qk_norms():
    """A public model report lists allenai/OLMo-2-1124-7B-Instruct's parameters: per layer
    self_attn.q_norm (4096,) and self_attn.k_norm (4096,) — the projection width, not one
    head_dim (128) — plus post_attention_layernorm and post_feedforward_layernorm, no input
    norm. Same sum as the base model: 7,298,617,344."""
    m = _model("allenai/OLMo-2-1124-7B-Instruct")
    norms = [t for t in tensors(m) if t.layer == 0 and t.kind == "norm"]
    assert sorted(t.rows for t in norms) == [4096, 4096, 4096, 4096]  # q_norm, k_norm, 2 norms
    assert parameter_count(m) == 7_298_617_344


def test_missing_expert_count_names_the_field():
    """A PhiMoE / Granite-MoE config without num_local_experts is refused with the field named."""
    from kvplan.errors import InvalidConfigError

    cfg = {k: v for k, v in PHI35_MOE.items() if k != "num_local_experts"}
    with pytest.raises(InvalidConfigError) as e:
        spec_from_config(cfg, model_id="x", source="test", path="phimoe/config.json")
    assert e.value.field == "num_local_experts" and "phimoe/config.json" in str(e.value.path)
