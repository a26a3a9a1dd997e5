"""Catalogue entries added from public verbatim config.json copies (issue #14, "Catalogue"):
parameter counts against the published checkpoint sizes, and the KV geometry each config
implies. Expected values are written out from the configs' shapes and the checkpoints'
published totals; none is produced by calling kvplan first.
"""

from __future__ import annotations

import pytest

from kvplan.model.kv import kv_bytes_per_token_per_layer
from kvplan.model.weights import parameter_count
from kvplan.sources.catalog import find_model_entry, load_catalog_model


def _model(ref):
    return load_catalog_model(find_model_entry(ref))


def test_qwen3_next_instruct_is_the_hf_total_without_the_mtp_module():
    """Qwen/Qwen3-Next-80B-A3B-Instruct: the HF API record (safetensors total, revision
    9c7f2fbe) says 81,324,862,720 BF16 parameters. That total includes the multi-token-
    prediction module `mtp.*` (vllm/model_executor/models/qwen3_next_mtp.py), which plain
    decoding does not load. Its shapes, from the config (hidden 2048, 16 q heads / 2 KV heads
    of 256 with an output gate, 512 experts of 512, shared expert 512):
      fc [2048, 2·2048]                                        8,388,608
      pre_fc_norm_hidden, pre_fc_norm_embedding, norm   3 × 2048 = 6,144
      one full-attention decoder layer:
        q_proj [16·256·2, 2048] 16,777,216; k_proj, v_proj [2·256, 2048] 2 × 1,048,576;
        o_proj [2048, 16·256] 8,388,608; q_norm, k_norm 2 × 256          = 27,263,488
        router [512, 2048] 1,048,576; experts 512 × 3 × 2048 × 512 1,610,612,736;
        shared expert 3 × 2048 × 512 3,145,728; shared_expert_gate [1, 2048] 2,048
                                                                         = 1,614,809,088
        input / post-attention norms 2 × 2048                            = 4,096
    MTP = 8,388,608 + 6,144 + 27,263,488 + 1,614,809,088 + 4,096 = 1,650,471,424."""
    mtp = 8_388_608 + 6_144 + 27_263_488 + 1_614_809_088 + 4_096
    assert mtp == 1_650_471_424
    assert parameter_count(_model("Qwen/Qwen3-Next-80B-A3B-Instruct")) == 81_324_862_720 - mtp


def test_qwen3_next_instruct_and_thinking_share_one_geometry():
    """The Instruct config.json read for this entry equals the Thinking sibling's file key
    for key, so both count the same parameters and the same KV bytes."""
    inst, think = (
        _model("Qwen/Qwen3-Next-80B-A3B-Instruct"),
        _model("Qwen/Qwen3-Next-80B-A3B-Thinking"),
    )
    assert parameter_count(inst) == parameter_count(think)
    assert inst.id == "Qwen/Qwen3-Next-80B-A3B-Instruct"


def test_falcon_40b_is_the_index_total_less_the_tied_head_listed_twice():
    """tiiuae/falcon-40b pytorch_model.bin.index.json (Decentralised-AI/falcon-40b mirror,
    56dde4bf): metadata.total_size 83,671,941,120 B of bfloat16 = 41,835,970,560 elements.
    The index lists lm_head.weight beside transformer.word_embeddings.weight although the
    two are tied (RWConfig has no tie_word_embeddings=false; vllm falcon.py ties them), so
    the size counts the [65024, 8192] matrix twice: 41,835,970,560 − 532,676,608."""
    assert 83_671_941_120 // 2 == 41_835_970_560
    assert parameter_count(_model("tiiuae/falcon-40b")) == 41_835_970_560 - 65024 * 8192


@pytest.mark.parametrize("ref,layers,kv_heads,head_dim", [
    # config.json values: num_hidden_layers / n_layer, KV heads, head size (hidden / heads).
    ("tiiuae/falcon-40b", 60, 8, 8192 // 128),           # n_head_kv 8, n_head 128
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 64, 8, 5120 // 40),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 32, 8, 4096 // 32),
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 22, 4, 2048 // 32),
    ("mistralai/Magistral-Small-2509", 40, 8, 128),       # explicit head_dim 128 (5120 / 32 = 160)
    ("bigscience/bloomz-560m", 24, 16, 1024 // 16),       # MHA
    ("facebook/opt-125m", 12, 12, 768 // 12),             # MHA
])
def test_kv_bytes_per_token_follow_the_config(ref, layers, kv_heads, head_dim):
    """bf16/fp16 KV at TP1: 2 (K and V) × KV heads × head_dim × 2 B per layer; e.g.
    Falcon-40B 2 × 8 × 64 × 2 = 2,048 B × 60 layers = 122,880 B per token."""
    m = _model(ref)
    assert m.num_layers == layers
    assert kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="bfloat16") == 2 * kv_heads * head_dim * 2


def test_falcon_40b_kv_per_token_worked_example():
    m = _model("tiiuae/falcon-40b")
    assert m.num_layers * kv_bytes_per_token_per_layer(m, tp=1, kv_dtype="bfloat16") == 122_880


def test_tinyllama_kv_per_token_matches_the_dynamo_trtllm_readme_log():
    """benchmarks/data/trtllm_logs.csv, the ai-dynamo TensorRT-LLM README row (TinyLlama/
    TinyLlama-1.1B-Chat-v1.0, tp_size 2): the log reserves 18.88 GiB for 1,800,032 tokens per
    rank. 22 layers × (4 KV heads / TP 2 = 2) × head_dim 64 × 2 (K, V) × 2 B = 11,264 B per
    token, and 1,800,032 × 11,264 B = 20,275,560,448 B = 18.883 GiB."""
    m = _model("TinyLlama/TinyLlama-1.1B-Chat-v1.0")
    per_token = m.num_layers * kv_bytes_per_token_per_layer(m, tp=2, kv_dtype="bfloat16")
    assert per_token == 22 * 2 * 64 * 2 * 2 == 11_264
    assert abs(1_800_032 * per_token / 2**30 - 18.88) < 0.005
