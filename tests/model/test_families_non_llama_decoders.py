"""Decoder families planned by their own layout, not Llama-style (issue 14, "Families"): GPT-2,
GPTBigCode, GPT-J, GPT-NeoX, Falcon, StarCoder2, OPT, Bloom, MPT.

Every expected number is a hand sum over the tensor shapes vLLM v0.11 builds
(vllm/model_executor/models/<family>.py), written out in the docstring; where a config is not
in the catalogue the test carries the published geometry (model card / config.json keys) inline.
"""

from __future__ import annotations

import pytest

from kvplan import plan
from kvplan.errors import InvalidConfigError
from kvplan.model.config import spec_from_config
from kvplan.model.families import FAM_A_FAMILIES
from kvplan.model.kv import kv_bytes_per_token_per_layer
from kvplan.model.weights import parameter_count, tensors, weight_memory_per_stage
from kvplan.sources.catalog import model_entries, resolve_model


def _spec(cfg: dict):
    return spec_from_config(cfg, model_id=cfg.get("_name_or_path", "test"), source="test")


# ----------------------------------------------------------------------------- GPT-2


def test_gpt2_hand_sum_learned_positions_tied_head():
    """openai-community/gpt2 (catalogue; vllm gpt2.py): n_embd 768, 12 layers, 12 heads,
    vocab 50257, n_positions 1024, n_inner null → 4 × 768 = 3072.
      wte          50257 × 768                         = 38,597,376
      wpe           1024 × 768 (replicated)            =    786,432
      per layer: c_attn 768 × 2304 + 2304              =  1,771,776
                 c_proj 768 × 768 + 768                =    590,592
                 c_fc   768 × 3072 + 3072              =  2,362,368
                 c_proj 3072 × 768 + 768               =  2,360,064
                 ln_1, ln_2 2 × (768 + 768)            =      3,072
                 = 7,087,872 × 12                      = 85,054,464
      ln_f 768 + 768 = 1,536; head tied
      total 124,439,808 (the well-known GPT-2 small count)."""
    m = resolve_model("openai-community/gpt2")
    assert parameter_count(m) == 124_439_808
    assert m.unsupported == [] and not m.mlp_gated and m.norm_bias
    assert m.rotary_dim == 0 and m.rope_cache_positions == 0  # learned positions, no RoPE
    assert m.position_embedding_rows == 1024 and m.tie_word_embeddings
    bare = _spec({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                  "vocab_size": 50257})
    assert bare.position_embedding_rows == 1024  # GPT2Config's default n_positions


# ------------------------------------------------------------------- GPTBigCode (MQA)


def test_santacoder_mqa_hand_sum_and_kv_bytes_per_token():
    """bigcode/gpt_bigcode-santacoder (catalogue; vllm gpt_bigcode.py): n_embd 2048, 24 layers,
    16 heads of 128, multi_query → 1 KV head, n_inner 8192, vocab 49280, n_positions 2048.
      wte 49280 × 2048 = 100,925,440; wpe 2048 × 2048 = 4,194,304
      per layer: c_attn (2048 + 2 × 128) × 2048 + 2304 = 4,720,896
                 c_proj 2048 × 2048 + 2048              = 4,196,352
                 c_fc   2048 × 8192 + 8192              = 16,785,408
                 c_proj 8192 × 2048 + 2048              = 16,779,264
                 two LayerNorms 4 × 2048                =      8,192
                 = 42,490,112 × 24                      = 1,019,762,688
      ln_f 4,096 → total 1,124,886,528 (card: 1.1B).
    KV per token, fp16: 24 layers × (K + V) × 1 head × 128 × 2 B = 12,288 B (MHA would be 16×)."""
    m = resolve_model("bigcode/gpt_bigcode-santacoder")
    assert m.num_kv_heads == 1 and m.head_dim == 128
    assert parameter_count(m) == 1_124_886_528
    assert 24 * kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="float16") == 12_288


# --------------------------------------------------------------------------- Falcon


def test_falcon_7b_hand_sum_mqa_parallel_block():
    """tiiuae/falcon-7b (catalogue, RefinedWebModel config; vllm falcon.py): hidden 4544,
    32 layers, 71 heads of 64, multi_query → 1 KV head, bias false, parallel_attn → one
    LayerNorm, MLP 4 × 4544 = 18176 (hard-coded in falcon.py), tied head, vocab 65024.
      word_embeddings 65024 × 4544                         =   295,469,056
      per layer: query_key_value (4544 + 2 × 64) × 4544    =    21,229,568
                 dense 4544 × 4544                         =    20,647,936
                 dense_h_to_4h + dense_4h_to_h 2 × 18176 × 4544 = 165,183,488
                 input_layernorm 2 × 4544                  =         9,088
                 = 207,070,080 × 32                        = 6,626,242,560
      ln_f 9,088 → total 6,921,720,704. The HF page's "7.22B" adds the tied lm_head again:
      6,921,720,704 + 295,469,056 = 7,217,189,760.
    KV per token, bf16: 32 × 2 × 1 × 64 × 2 B = 8,192 B."""
    m = resolve_model("tiiuae/falcon-7b")
    assert (m.model_type, m.num_kv_heads, m.norms_per_layer) == ("falcon", 1, 1)
    assert m.intermediate_size == 18176
    assert not (m.qkv_bias or m.o_bias or m.mlp_bias) and m.norm_bias
    assert parameter_count(m) == 6_921_720_704
    assert m.rotary_dim == 64 and m.rope_cache_positions == 8192  # RWConfig: getattr default
    assert plan("tiiuae/falcon-7b", "h100").kv_cache.bytes_per_token == 8_192


def test_falcon_7b_tp2_replicates_the_kv_head_and_norms():
    """TP = 2, bf16, one rank (vLLM QKVParallelLinear keeps max(1, 1 // 2) = 1 KV head per rank;
    LayerNorms replicated; vocab 65024 is already a multiple of 64):
      word_embeddings 65024 / 2 × 4544                       = 147,734,528
      per layer: qkv (4544 / 2 + 64 + 64) × 4544 = 2400 × 4544 = 10,905,600
                 dense 4544 × 2272                            = 10,323,968
                 h_to_4h 9088 × 4544 + 4h_to_h 4544 × 9088    = 82,591,744
                 input_layernorm 9,088 (replicated)
                 = 103,830,400 × 32                           = 3,322,572,800
      ln_f 9,088 → 3,470,316,416 elements × 2 B               = 6,940,632,832 B
      + RoPE cos/sin cache 8192 × 64 × 2 B                    =     1,048,576 B
      = 6,941,681,408 B (an even split would give 6,921,720,704 + 1,048,576).
    KV per token per rank stays 8,192 B: the single KV head is replicated, not split."""
    m = resolve_model("tiiuae/falcon-7b")
    rank = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)[0]
    assert rank.tensor_bytes == 6_941_681_408
    assert 32 * kv_bytes_per_token_per_layer(m, tp=2, kv_dtype="bfloat16") == 8_192


FALCON_40B = {  # tiiuae/falcon-40b geometry (transformers FalconConfig form of its config.json)
    "model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 8192,
    "num_hidden_layers": 60, "num_attention_heads": 128, "num_kv_heads": 8,
    "new_decoder_architecture": True, "parallel_attn": True, "bias": False, "alibi": False,
    "multi_query": True, "vocab_size": 65024, "torch_dtype": "bfloat16"}


def test_falcon_40b_new_decoder_architecture_gqa_two_layernorms():
    """falcon-40b: new_decoder_architecture → num_kv_heads (8) KV heads, ln_attn + ln_mlp.
      word_embeddings 65024 × 8192                       =    532,676,608
      per layer: qkv (8192 + 2 × 8 × 64) × 8192          =     75,497,472
                 dense 8192 × 8192                       =     67,108,864
                 MLP 2 × 32768 × 8192                    =    536,870,912
                 ln_attn + ln_mlp 4 × 8192               =         32,768
                 = 679,510,016 × 60                      = 40,770,600,960
      ln_f 16,384 → total 41,303,293,952 (HF page 41.8B = + the tied lm_head 532,676,608)."""
    m = _spec(FALCON_40B)
    assert (m.num_kv_heads, m.norms_per_layer) == (8, 2)
    assert parameter_count(m) == 41_303_293_952
    # the pre-transformers RefinedWeb config: n_head_kv, and RWConfig forces the new
    # architecture at hidden 8192 (vllm/transformers_utils/configs/falcon.py)
    rw = {"model_type": "RefinedWeb", "hidden_size": 8192, "n_layer": 60, "n_head": 128,
          "n_head_kv": 8, "parallel_attn": True, "bias": False, "alibi": False, "vocab_size": 65024}
    assert parameter_count(_spec(rw)) == 41_303_293_952 and _spec(rw).num_kv_heads == 8


def test_falcon_multi_query_beats_num_kv_heads_without_the_new_architecture():
    """A falcon-7b-instruct config re-saved by transformers 4.28 carries num_kv_heads 71 next to
    multi_query true; vLLM's falcon.py (and ModelConfig.get_total_num_kv_heads) take 1 KV head
    whenever multi_query is set without new_decoder_architecture."""
    cfg = {"model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32,
           "num_attention_heads": 71, "num_kv_heads": 71, "multi_query": True,
           "new_decoder_architecture": False, "parallel_attn": True, "bias": False,
           "alibi": False, "vocab_size": 65024}
    m = _spec(cfg)
    assert m.num_kv_heads == 1 and parameter_count(m) == 6_921_720_704
    alibi = _spec({**cfg, "alibi": True})
    assert alibi.alibi and alibi.rotary_dim == 0 and alibi.rope_cache_positions == 0


# ---------------------------------------------------------------------------- GPT-J


def test_gptj_6b_parallel_block_partial_rotary_biased_head():
    """EleutherAI/gpt-j-6b (catalogue: n_embd 4096, n_layer 28, n_head 16, rotary_dim 64,
    no n_inner → 4 × 4096, vocab 50400, n_positions 2048; vllm gpt_j.py):
      wte 50400 × 4096                                  =   206,438,400
      per layer: q, k, v 3 × 4096 × 4096 (no bias)      =    50,331,648
                 out_proj 4096 × 4096 (no bias)         =    16,777,216
                 fc_in 16384 × 4096 + 16384             =    67,125,248
                 fc_out 4096 × 16384 + 4096             =    67,112,960
                 ln_1 2 × 4096                          =         8,192
                 = 201,355,264 × 28                     = 5,637,947,392
      ln_f 8,192; lm_head 50400 × 4096 + 50400 (bias)   =   206,488,800
      total 6,050,882,784; the card states 6,053,381,344 (0.04 % apart)."""
    m = resolve_model("EleutherAI/gpt-j-6b")
    assert parameter_count(m) == 6_050_882_784
    assert abs(parameter_count(m) - 6_053_381_344) < 0.005 * 6_053_381_344
    assert (m.norms_per_layer, m.rotary_dim, m.rope_cache_positions) == (1, 64, 2048)
    assert m.lm_head_bias and not m.tie_word_embeddings and not m.qkv_bias


# ------------------------------------------------------------------------- GPT-NeoX


def test_gpt_neox_20b_hand_sum_rotary_pct():
    """EleutherAI/gpt-neox-20b geometry (config.json: hidden 6144, 44 layers, 64 heads,
    intermediate 24576, vocab 50432, rotary_pct 0.25, tie_word_embeddings false; gpt_neox.py):
      embed_in 50432 × 6144                               =    309,854,208
      per layer: query_key_value 3 × 6144 × 6144 + 3 × 6144 = 113,264,640
                 dense 6144 × 6144 + 6144                 =     37,754,880
                 dense_h_to_4h 24576 × 6144 + 24576       =    151,019,520
                 dense_4h_to_h 6144 × 24576 + 6144        =    151,001,088
                 two LayerNorms 4 × 6144                  =         24,576
                 = 453,064,704 × 44                       = 19,934,846,976
      final_layer_norm 12,288; embed_out 50432 × 6144 = 309,854,208
      total 20,554,567,680 (the published GPT-NeoX-20B count). RoPE: 96 × 0.25 = 24 dims."""
    m = _spec({"model_type": "gpt_neox", "hidden_size": 6144, "num_hidden_layers": 44,
               "num_attention_heads": 64, "intermediate_size": 24576, "vocab_size": 50432,
               "rotary_pct": 0.25, "max_position_embeddings": 2048, "tie_word_embeddings": False,
               "use_parallel_residual": True})
    assert parameter_count(m) == 20_554_567_680
    assert (m.rotary_dim, m.rope_cache_positions, m.norms_per_layer) == (24, 2048, 2)


def test_redpajama_3b_sequential_neox_full_rotary():
    """togethercomputer/RedPajama-INCITE-Base-3B-v1 (catalogue; gpt_neox.py): hidden 2560,
    32 layers, 32 heads of 80, intermediate 10240, vocab 50432, rotary_pct 1.0,
    use_parallel_residual false (same weights), untied embed_out.
      embed_in 50432 × 2560                               =   129,105,920
      per layer: query_key_value 3 × 2560 × 2560 + 7680   =    19,668,480
                 dense 2560 × 2560 + 2560                 =     6,556,160
                 dense_h_to_4h 10240 × 2560 + 10240       =    26,224,640
                 dense_4h_to_h 2560 × 10240 + 2560        =    26,216,960
                 two LayerNorms 4 × 2560                  =        10,240
                 = 78,676,480 × 32                        = 2,517,647,360
      final_layer_norm 5,120; embed_out 129,105,920 → total 2,775,864,320 (card: 2.8B)."""
    m = resolve_model("togethercomputer/RedPajama-INCITE-Base-3B-v1")
    assert parameter_count(m) == 2_775_864_320
    assert (m.rotary_dim, m.norms_per_layer, m.tie_word_embeddings) == (80, 2, False)


# ---------------------------------------------------------------------------- Bloom


def test_bloom_7b1_alibi_embedding_layernorm_hand_sum():
    """bigscience/bloom-7b1 geometry (config.json: hidden_size 4096, n_layer 30, n_head 32,
    vocab 250880; vllm bloom.py): ALiBi (no RoPE), word_embeddings_layernorm, biased fused qkv.
      word_embeddings 250880 × 4096                        = 1,027,604,480
      word_embeddings_layernorm 2 × 4096                   =         8,192
      per layer: query_key_value 3 × (4096 × 4096 + 4096)  =    50,343,936
                 dense 4096 × 4096 + 4096                  =    16,781,312
                 dense_h_to_4h 16384 × 4096 + 16384        =    67,125,248
                 dense_4h_to_h 4096 × 16384 + 4096         =    67,112,960
                 two LayerNorms 4 × 4096                   =        16,384
                 = 201,379,840 × 30                        = 6,041,395,200
      ln_f 8,192; head tied → total 7,069,016,064 (the model card's count)."""
    m = _spec({"model_type": "bloom", "hidden_size": 4096, "n_layer": 30, "n_head": 32,
               "vocab_size": 250880, "torch_dtype": "float16"})
    assert parameter_count(m) == 7_069_016_064
    assert m.alibi and m.rotary_dim == 0 and m.embedding_norm
    p = plan(m, "h100")
    assert p.memory.weights_tensor_bytes == 2 * 7_069_016_064  # no RoPE cos/sin cache
    assert p.kv_cache.bytes_per_token == 30 * 2 * 32 * 128 * 2


# ------------------------------------------------------------------------------ MPT


MPT_7B = {  # mosaicml/mpt-7b geometry (config.json keys)
    "model_type": "mpt", "architectures": ["MPTForCausalLM"], "d_model": 4096, "n_heads": 32,
    "n_layers": 32, "expansion_ratio": 4, "max_seq_len": 2048, "vocab_size": 50432,
    "no_bias": True, "attn_config": {"alibi": True, "attn_impl": "torch"},
    "torch_dtype": "bfloat16"}


def test_mpt_7b_no_bias_alibi_hand_sum():
    """mosaicml/mpt-7b (vllm mpt.py): no_bias drops every linear and LayerNorm bias.
      wte 50432 × 4096                                   =   206,569,472
      per layer: Wqkv 3 × 4096 × 4096                    =    50,331,648
                 out_proj 4096 × 4096                    =    16,777,216
                 up_proj + down_proj 2 × 16384 × 4096    =   134,217,728
                 norm_1, norm_2 (weight only) 2 × 4096   =         8,192
                 = 201,334,784 × 32                      = 6,442,713,088
      norm_f 4,096; head tied → total 6,649,286,656 (card: 6.7B)."""
    m = _spec(MPT_7B)
    assert parameter_count(m) == 6_649_286_656
    assert m.alibi and m.rotary_dim == 0 and not m.norm_bias
    assert m.max_len_keys == {"max_seq_len": 2048}
    gqa = _spec({**MPT_7B, "attn_config": {"alibi": True, "kv_n_heads": 8}})
    assert gqa.num_kv_heads == 8  # attn_config.kv_n_heads


def test_mpt_attn_config_must_be_an_object():
    with pytest.raises(InvalidConfigError) as e:
        _spec({**MPT_7B, "attn_config": [1, 2]})
    assert e.value.field == "attn_config"


# ------------------------------------------------------------------------------ OPT


OPT = {"model_type": "opt", "num_attention_heads": 32, "max_position_embeddings": 2048,
       "vocab_size": 50272, "do_layer_norm_before": True, "enable_bias": True}


def test_opt_6_7b_learned_positions_with_offset():
    """facebook/opt-6.7b geometry (config.json: hidden 4096, 32 layers, ffn_dim 16384,
    word_embed_proj_dim 4096; vllm opt.py OPTLearnedPositionalEmbedding adds 2 rows):
      embed_tokens 50272 × 4096                           =   205,914,112
      embed_positions (2048 + 2) × 4096                   =     8,396,800
      per layer: qkv 3 × (4096 × 4096 + 4096)             =    50,343,936
                 out_proj 4096 × 4096 + 4096              =    16,781,312
                 fc1 16384 × 4096 + 16384                 =    67,125,248
                 fc2 4096 × 16384 + 4096                  =    67,112,960
                 two LayerNorms 4 × 4096                  =        16,384
                 = 201,379,840 × 32                       = 6,444,154,880
      final_layer_norm 8,192; head tied → total 6,658,473,984 (HF: 6.66B)."""
    m = _spec({**OPT, "hidden_size": 4096, "num_hidden_layers": 32, "ffn_dim": 16384,
               "word_embed_proj_dim": 4096})
    assert parameter_count(m) == 6_658_473_984
    assert m.position_embedding_rows == 2050 and m.word_embed_proj_dim is None


def test_opt_350m_project_in_out_and_no_final_norm():
    """facebook/opt-350m geometry (hidden 1024, word_embed_proj_dim 512, 24 layers, 16 heads,
    ffn_dim 4096, do_layer_norm_before false → no final LayerNorm):
      embed_tokens 50272 × 512 = 25,739,264; embed_positions 2050 × 1024 = 2,099,200
      project_in 1024 × 512 + project_out 512 × 1024 (no bias) = 1,048,576
      per layer: qkv 3 × (1024² + 1024) = 3,148,800; out_proj 1,049,600;
                 fc1 4096 × 1024 + 4096 = 4,198,400; fc2 1024 × 4096 + 1024 = 4,195,328;
                 two LayerNorms 4,096 → 12,596,224 × 24 = 302,309,376
      total 331,196,416 (OPT-350m's published count)."""
    m = _spec({**OPT, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
               "ffn_dim": 4096, "word_embed_proj_dim": 512, "do_layer_norm_before": False})
    assert parameter_count(m) == 331_196_416
    assert not m.final_norm and m.word_embed_proj_dim == 512
    names = {t.name for t in tensors(m)}
    assert {"project_in", "project_out", "embed_positions"} <= names and "norm" not in names


def test_extra_embedding_tensors_live_on_the_first_pp_stage():
    """Learned positions and OPT's project_in are built with the embedding: at PP = 2 the first
    stage holds them; the last holds project_out, the final LayerNorm and, the head being tied,
    its own copy of the table (vocab 50272 padded to 50304 rows, fp16):
      sum of stages − one stage = 50304 × 512 × 2 B
      first − last = (positions 2050 × 1024 + project_in 512 × 1024
                      − project_out 512 × 1024 − final LayerNorm 2 × 1024) × 2 B (layers 12 / 12)"""
    m = _spec({**OPT, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
               "ffn_dim": 4096, "word_embed_proj_dim": 512})
    one = weight_memory_per_stage(m, tp=1, pp=1, dtype="float16", quant=None)[0].tensor_bytes
    first, last = weight_memory_per_stage(m, tp=1, pp=2, dtype="float16", quant=None)
    assert first.tensor_bytes + last.tensor_bytes == one + 50304 * 512 * 2
    assert first.tensor_bytes - last.tensor_bytes == (2050 * 1024 - 2 * 1024) * 2


# ------------------------------------------------------------------------ StarCoder2


def test_starcoder2_7b_hand_sum_gqa_sliding_window():
    """bigcode/starcoder2-7b (catalogue; vllm starcoder2.py): hidden 4608, 32 layers, 36 heads
    of 128, 4 KV heads, intermediate 18432, use_bias, vocab 49152, tied (Starcoder2Config
    default), sliding_window 4096 on every layer.
      embed_tokens 49152 × 4608                          =   226,492,416
      per layer: q_proj 4608 × 4608 + 4608               =    21,238,272
                 k_proj, v_proj 2 × (512 × 4608 + 512)   =     4,719,616
                 o_proj 4608 × 4608 + 4608               =    21,238,272
                 c_fc 18432 × 4608 + 18432               =    84,953,088
                 c_proj 4608 × 18432 + 4608              =    84,939,264
                 two LayerNorms 4 × 4608                 =        18,432
                 = 217,106,944 × 32                      = 6,947,422,208
      norm 9,216 → total 7,173,923,840 (HF page: 7.17B)."""
    m = resolve_model("bigcode/starcoder2-7b")
    assert parameter_count(m) == 7_173_923_840
    assert m.num_kv_heads == 4 and m.sliding_window == 4096 and set(m.layer_types) == {"sliding"}


# ------------------------------------------------------------------- every family


@pytest.mark.parametrize("entry", [e for e in model_entries()
                                   if resolve_model(e.id).model_type in FAM_A_FAMILIES],
                         ids=lambda e: e.id)
def test_catalogue_non_gated_families_count_fewer_mlp_params_than_a_gated_mlp(entry):
    """Guard against silently assuming a gated MLP: the MLP tensors of every catalogue model of
    these families hold 2·h·I (+ biases) per layer, less than the gated 3·h·I."""
    m = resolve_model(entry.id)
    mlp = sum(t.rows * t.cols for t in tensors(m) if ".mlp." in t.name)
    assert mlp < 3 * m.hidden_size * m.intermediate_size * m.num_layers
    assert not m.mlp_gated and m.unsupported == []
    assert plan(m, "h200").fits  # falcon-40b's 83 GB of bf16 weights need more than one H100


def test_gpt2_checkpoint_mask_buffers_are_not_parameters():
    """GPT-2-era checkpoints store the causal mask h.N.attn.bias [1, 1, 1024, 1024] (GPT-J also
    attn.masked_bias); vLLM's gpt2.py / gpt_j.py load_weights skip them, so the header count
    must too — else 12 × 1,048,576 extra "parameters" (+10 %) would make kvplan distrust the
    config. The real c_attn.bias is kept. Table: GPT-2 small, F32, lm_head stored but tied:
      wte 38,597,376 + wpe 786,432 + 12 × 7,087,872 + ln_f 1,536 = 124,439,808."""
    from kvplan.sources.checkpoint import header_parameter_count
    from kvplan.specs import CheckpointTensors

    table = {"wte.weight": ("F32", (50257, 768)), "wpe.weight": ("F32", (1024, 768)),
             "ln_f.weight": ("F32", (768,)), "ln_f.bias": ("F32", (768,)),
             "lm_head.weight": ("F32", (50257, 768))}
    for i in range(12):
        p = f"h.{i}."
        table.update({
            p + "attn.bias": ("F32", (1, 1, 1024, 1024)), p + "attn.masked_bias": ("F32", ()),
            p + "attn.c_attn.weight": ("F32", (768, 2304)),
            p + "attn.c_attn.bias": ("F32", (2304,)),
            p + "attn.c_proj.weight": ("F32", (768, 768)), p + "attn.c_proj.bias": ("F32", (768,)),
            p + "mlp.c_fc.weight": ("F32", (768, 3072)), p + "mlp.c_fc.bias": ("F32", (3072,)),
            p + "mlp.c_proj.weight": ("F32", (3072, 768)), p + "mlp.c_proj.bias": ("F32", (768,)),
            p + "ln_1.weight": ("F32", (768,)), p + "ln_1.bias": ("F32", (768,)),
            p + "ln_2.weight": ("F32", (768,)), p + "ln_2.bias": ("F32", (768,))})
    ckpt = CheckpointTensors(source="test", files=1, tensors=table)
    assert header_parameter_count(resolve_model("openai-community/gpt2"), ckpt) == 124_439_808
