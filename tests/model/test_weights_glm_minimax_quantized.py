"""Hand-worked parameter counts and weight bytes for the catalogue's deployed models: the
GLM-4.5 (glm4_moe) and MiniMax-M2 (minimax_m2) families, fbgemm_fp8 and the quantized
checkpoints. Every expected value is written out from the config's shapes, independently of
kvplan's enumeration (kvplan/model/weights.py); the sources are named per test.
"""

from __future__ import annotations

import json

import pytest

from kvplan import plan
from kvplan.model.config import spec_from_config
from kvplan.model.weights import parameter_count, rope_cache_bytes, weight_memory_per_stage
from kvplan.sources.catalog import data_dir, find_model_entry, load_catalog_model


def _model(ref):
    return load_catalog_model(find_model_entry(ref))


def _config(ref):
    return json.loads((data_dir("model_specs") / find_model_entry(ref).config).read_text())


# ------------------------------------------------------------------ parameter counts
# Per layer: attention (q, k, v, o; biases), norms, MLP or MoE (router, experts, shared);
# then embedding (+ untied LM head) and the final norm. Shapes from each config.json.

def _glm45_air() -> int:
    """zai-org/GLM-4.5-Air (vllm/model_executor/models/glm4_moe.py): hidden 4096, 96 q heads
    and 8 KV heads of 128, q/k/v biased (attention_bias), o unbiased, no qk-norm; layer 0 a
    dense 10944 MLP, layers 1–45 MoE: fp32 router [128, 4096] + e_score_correction_bias [128],
    128 experts × (gate, up, down) of 1408, one shared expert of 1408; vocab 151552 untied.
    The MTP layer (checkpoint layer 46) is not part of vLLM's main model."""
    attn = 12288 * 4096 + 2 * 1024 * 4096 + 4096 * 12288 + (12288 + 2 * 1024)  # 109,066,240
    norms = 2 * 4096
    dense = 3 * 4096 * 10944  # 134,479,872
    moe = 128 * 4096 + 128 + 128 * 3 * 4096 * 1408 + 3 * 4096 * 1408  # 2,232,418,432
    return 46 * (attn + norms) + dense + 45 * moe + 2 * 151552 * 4096 + 4096


def _minimax_m2() -> int:
    """MiniMax-M2 / M2.5 (vllm/model_executor/models/minimax_m2.py): hidden 3072, 48 q heads
    and 8 KV heads of 128, q_norm over 48 × 128 = 6144 and k_norm over 8 × 128 = 1024
    channels, every one of the 62 layers MoE: fp32 router [256, 3072] + bias [256], 256 experts
    × 3 × 3072 × 1536 (intermediate_size), no shared expert; vocab 200064 untied."""
    attn = 6144 * 3072 + 2 * 1024 * 3072 + 3072 * 6144 + 6144 + 1024  # 44,047,360
    moe = 256 * 3072 + 256 + 256 * 3 * 3072 * 1536  # 3,624,665,344
    return 62 * (attn + 2 * 3072 + moe) + 2 * 200064 * 3072 + 3072


def _kimi_k2() -> int:
    """moonshotai/Kimi-K2-Instruct (DeepSeek-V3 layout, vllm deepseek_v2.py): hidden 7168,
    64 heads; MLA q_a [1536, 7168] + norm 1536, q_b [64 × 192, 1536], kv_a [512 + 64, 7168]
    + norm 512, kv_b [64 × 256, 512], o [7168, 64 × 128]; layer 0 dense 18432; layers 1–60:
    router [384, 7168] + bias 384, 384 experts × 3 × 7168 × 2048, 1 shared 2048; vocab 163840."""
    attn = (1536 * 7168 + 1536 + 64 * 192 * 1536 + 576 * 7168 + 512 + 64 * 256 * 512
            + 7168 * 64 * 128)  # 101,124,096
    moe = 384 * 7168 + 384 + 384 * 3 * 7168 * 2048 + 3 * 7168 * 2048  # 16,958,226,816
    return 61 * (attn + 2 * 7168) + 3 * 7168 * 18432 + 60 * moe + 2 * 163840 * 7168 + 7168


def _qwen3_coder_480b() -> int:
    """Qwen/Qwen3-Coder-480B-A35B-Instruct: hidden 6144, 96 q / 8 KV heads of 128, per-head
    q/k norms, 62 MoE layers of router [160, 6144] + 160 experts × 3 × 6144 × 2560."""
    layer = (12288 * 6144 * 2 + 1024 * 6144 * 2 + 2 * 128 + 2 * 6144
             + 160 * 6144 + 160 * 3 * 6144 * 2560)  # 7,714,320,640
    return 62 * layer + 2 * 151936 * 6144 + 6144


def _qwen15_moe() -> int:
    """Qwen1.5-MoE-A2.7B (vllm qwen2_moe.py): hidden 2048, MHA 16 × 128 with q/k/v biases;
    24 MoE layers of router [60, 2048], 60 experts × 3 × 2048 × 1408, a shared expert
    3 × 2048 × 5632 and its sigmoid gate [1, 2048]; vocab 151936 untied."""
    layer = (4 * 2048 * 2048 + 3 * 2048 + 2 * 2048 + 60 * 2048 + 60 * 3 * 2048 * 1408
             + 3 * 2048 * 5632 + 2048)  # 570,560,512
    return 24 * layer + 2 * 151936 * 2048 + 2048


def _dense(layers, hidden, q, kv, inter, vocab, *, tied, norms=2, qk_norm=0, qkv_bias=False):
    """One dense decoder: q/k/v/o, gated MLP (3 matrices), `norms` RMSNorms per layer,
    per-head q/k norms of `qk_norm`; embedding, LM head unless tied, final norm."""
    attn = q * hidden * 2 + kv * hidden * 2 + (q + 2 * kv if qkv_bias else 0)
    layer = attn + 3 * hidden * inter + norms * hidden + 2 * qk_norm
    return layers * layer + vocab * hidden * (1 if tied else 2) + hidden


HAND_COUNTS = {
    "zai-org/GLM-4.5-Air": _glm45_air(),
    "MiniMaxAI/MiniMax-M2.5": _minimax_m2(),
    "nvidia/MiniMax-M2.5-NVFP4": _minimax_m2(),
    "MiniMaxAI/MiniMax-M2.7": _minimax_m2(),
    "moonshotai/Kimi-K2-Instruct": _kimi_k2(),
    "Qwen/Qwen3-Coder-480B-A35B-Instruct": _qwen3_coder_480b(),
    # Qwen3-1.7B: 28 layers, hidden 2048, 16 × 128 q, 8 × 128 kv, MLP 6144, tied, qk-norm 128
    "Qwen/Qwen3-1.7B": _dense(28, 2048, 2048, 1024, 6144, 151936, tied=True, qk_norm=128),
    # Qwen3-14B: 40 layers, hidden 5120, 40 × 128 q, 8 × 128 kv, MLP 17408, untied
    "Qwen/Qwen3-14B": _dense(40, 5120, 5120, 1024, 17408, 151936, tied=False, qk_norm=128),
    # gemma-3-1b: 26 layers, hidden 1152, 4 × 256 q, 1 × 256 kv, MLP 6912, 4 norms, tied
    "google/gemma-3-1b-it": _dense(
        26, 1152, 1024, 256, 6912, 262144, tied=True, norms=4, qk_norm=256
    ),
    # gemma-3-12b text: 48 layers, hidden 3840, 16 × 256 q, 8 × 256 kv, MLP 15360, 4 norms
    "google/gemma-3-12b-it": _dense(
        48, 3840, 4096, 2048, 15360, 262208, tied=True, norms=4, qk_norm=256
    ),
    # Mistral-Nemo: 40 layers, hidden 5120, 32 × 128 q, 8 × 128 kv, MLP 14336, vocab 131072
    "mistralai/Mistral-Nemo-Instruct-2407": _dense(40, 5120, 4096, 1024, 14336, 131072, tied=False),
    # Qwen2.5-1.5B / 3B: q/k/v biases, tied embeddings
    "Qwen/Qwen2.5-1.5B-Instruct": _dense(
        28, 1536, 1536, 256, 8960, 151936, tied=True, qkv_bias=True
    ),
    "Qwen/Qwen2.5-3B-Instruct": _dense(
        36, 2048, 2048, 256, 11008, 151936, tied=True, qkv_bias=True
    ),
    # CodeLlama-34b: 48 layers, hidden 8192, 64 × 128 q, 8 × 128 kv, MLP 22016, vocab 32000
    "codellama/CodeLlama-34b-Instruct-hf": _dense(48, 8192, 8192, 1024, 22016, 32000, tied=False),
    # CodeLlama-7b: 32 layers, hidden 4096, MHA 32 × 128, MLP 11008, vocab 32016
    "codellama/CodeLlama-7b-hf": _dense(32, 4096, 4096, 4096, 11008, 32016, tied=False),
    # gemma-2-2b: 26 layers, hidden 2304, 8 × 256 q, 4 × 256 kv, MLP 9216, 4 norms, tied
    "google/gemma-2-2b-it": _dense(26, 2304, 2048, 1024, 9216, 256000, tied=True, norms=4),
    "Qwen/Qwen1.5-MoE-A2.7B-Chat": _qwen15_moe(),
}


@pytest.mark.parametrize("ref,expected", HAND_COUNTS.items(), ids=list(HAND_COUNTS))
def test_catalogue_reference_counts_are_the_hand_sums(ref, expected):
    """The index's params_reference for these entries is the hand sum above (no exact count is
    published); kvplan's enumeration must reach the same number (text model for Gemma 3 12B)."""
    entry = find_model_entry(ref)
    assert entry.params_reference == expected
    m = load_catalog_model(entry)
    assert parameter_count(m, include_vision=not entry.params_reference_text_only) == expected


def test_hand_sums_are_the_published_sizes():
    """Spot values: GLM-4.5-Air '106B total' (README), MiniMax-M2 '230 billion total'
    (transformers docs; 228.7B here), Qwen3-1.7B card 1.7B, Qwen3-14B card 14.8B."""
    assert HAND_COUNTS["zai-org/GLM-4.5-Air"] == 106_852_251_264
    assert HAND_COUNTS["MiniMaxAI/MiniMax-M2.5"] == 228_689_764_864
    assert HAND_COUNTS["moonshotai/Kimi-K2-Instruct"] == 1_026_408_232_448
    assert HAND_COUNTS["Qwen/Qwen3-1.7B"] == 1_720_574_976
    assert HAND_COUNTS["Qwen/Qwen3-14B"] == 14_768_307_200


# ------------------------------------------------------------------------- glm4_moe


def test_glm45_air_layout_as_vllm_builds_it():
    """glm4_moe.py: partial_rotary_factor 0.5 → 64 of 128 dims rotated; attention_bias biases
    q/k/v only; layer 0 dense (first_k_dense_replace 1); one shared expert of 1408; the fp32
    e_score_correction_bias is always created; the MTP layer is counted only for MTP drafts."""
    m = _model("zai-org/GLM-4.5-Air")
    assert m.model_type == "glm4_moe" and not m.unsupported
    assert m.rotary_dim == 64 and m.qkv_bias and not m.o_bias and not m.qk_norm
    assert m.moe.moe_layers == list(range(1, 46)) and m.intermediate_size == 10944
    assert m.moe.shared_expert_intermediate_size == 1408 and not m.moe.shared_expert_gate
    assert m.moe.score_correction_bias and m.moe.router_dtype == "float32"
    assert m.mtp_layers == 1


def test_glm45_air_router_is_float32_and_replicated():
    """The router is nn.Linear(4096, 128, dtype=float32), replicated on every TP rank:
    45 × 128 × 4096 × 4 B = 94,371,840 B per rank instead of 47,185,920 in bf16. At TP 2 the
    bf16 tensors halve, except the replicated routers, biases and norms."""
    m = _model("zai-org/GLM-4.5-Air")
    (w1,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=None)
    bf16 = 2 * _glm45_air()
    fp32_extra = 45 * (128 * 4096 * 2 + 128 * 2)  # router + bias: 4 B instead of 2 B
    assert w1.tensor_bytes - rope_cache_bytes(m, "bfloat16") == bf16 + fp32_extra


def test_glm45_air_kv_bytes_per_token():
    """8 KV heads × 128 × (K + V) × 2 B × 46 layers = 188,416 B per token at TP 1; TP 8 keeps
    one KV head per rank: 23,552 B."""
    assert plan("zai-org/GLM-4.5-Air", "h200", tensor_parallel_size=2,
                max_model_len=8192).kv_cache.bytes_per_token == 2 * 4 * 128 * 2 * 46
    assert plan("zai-org/GLM-4.5-Air", "h200", tensor_parallel_size=8,
                max_model_len=8192).kv_cache.bytes_per_token == 23_552


def test_glm4_moe_qk_norm_follows_use_qk_norm():
    """GLM-4.5 (355B) sets use_qk_norm: per-head RMSNorm of head_dim on q and k."""
    cfg = {**_config("zai-org/GLM-4.5-Air"), "use_qk_norm": True}
    m = spec_from_config(cfg, model_id="glm-qk", source="test")
    assert m.qk_norm and m.qk_norm_layout != "full_width_tp"
    assert parameter_count(m) == _glm45_air() + 46 * 2 * 128


# ----------------------------------------------------------------------- minimax_m2


def test_minimax_m2_layout_as_vllm_builds_it():
    """minimax_m2.py: rotary_dim 64 of head_dim 128; every layer MoE with 256 experts of
    intermediate_size 1536 and no dense MLP; use_routing_bias → fp32 score-correction bias;
    block FP8 checkpoint with the routers and lm_head unconverted."""
    m = _model("MiniMaxAI/MiniMax-M2.5")
    assert m.model_type == "minimax_m2" and not m.unsupported
    assert m.rotary_dim == 64 and m.qk_norm and m.qk_norm_layout == "full_width_tp"
    assert m.intermediate_size == 0 and m.moe.moe_layers == list(range(62))
    assert (m.moe.num_experts, m.moe.top_k, m.moe.expert_intermediate_size) == (256, 8, 1536)
    assert m.moe.score_correction_bias and m.moe.router_dtype == "float32"
    assert m.quantization.method == "fp8" and m.quantization.block_size == (128, 128)


def test_minimax_m2_qk_norm_is_sharded_over_tp():
    """MiniMaxText01RMSNormTP holds 6144 / tp q-norm and 1024 / tp k-norm weights per rank:
    from TP 1 to TP 8 the norms shrink by 62 × (6144 + 1024) × 7/8 × 2 B, so with everything
    else held fixed the per-rank difference includes that term (checked on a 1-layer config)."""
    cfg = {**_config("MiniMaxAI/MiniMax-M2.5"), "num_hidden_layers": 1}
    cfg.pop("quantization_config")
    m = spec_from_config(cfg, model_id="mm-1layer", source="test")
    (w1,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=None)
    (w8,) = weight_memory_per_stage(m, tp=8, pp=1, dtype="bfloat16", quant=None)
    rope = rope_cache_bytes(m, "bfloat16")
    # TP 8 per rank: q/o 6144/8 rows, k/v one head (1024/8 = 128 rows), q_norm 768, k_norm 128,
    # experts 1536/8 wide, replicated norms 2 × 3072 and fp32 router [256, 3072] + bias.
    vocab_rows = 200064 // 8
    tp8 = (768 * 3072 * 2 + 128 * 3072 * 2 + 768 + 128 + 2 * 3072 + 256 * 3 * 3072 * 192) * 2 \
        + (256 * 3072 + 256) * 4 + 2 * vocab_rows * 3072 * 2 + 3072 * 2
    assert w8.tensor_bytes - rope == tp8
    tp1 = (_minimax_m2_layer_bf16_params() + 2 * 200064 * 3072 + 3072) * 2 + (256 * 3072 + 256) * 4
    assert w1.tensor_bytes - rope == tp1


def _minimax_m2_layer_bf16_params() -> int:
    """One MiniMax-M2 layer without its fp32 router and bias: q/k/v/o, the two full-width q/k
    norms, two RMSNorms, the 256 experts."""
    return 6144 * 3072 * 2 + 1024 * 3072 * 2 + 6144 + 1024 + 2 * 3072 + 256 * 3 * 3072 * 1536


def test_minimax_m2_kv_bytes_per_token():
    """Full attention on all 62 layers: 8 × 128 × 2 × 2 B × 62 = 253,952 B per token at TP ≤ 8."""
    p = plan("MiniMaxAI/MiniMax-M2.5", "h200", tensor_parallel_size=4, max_model_len=8192)
    assert p.kv_cache.bytes_per_token == 2 * 128 * 2 * 2 * 62


def test_modelopt_quantization_inside_config_json_is_read():
    """nvidia/MiniMax-M2.5-NVFP4 writes `quant_method: modelopt`, `quant_algo: NVFP4` into
    config.json: experts NVFP4, attention and routers excluded (16-bit)."""
    m = _model("nvidia/MiniMax-M2.5-NVFP4")
    assert m.quantization.method == "nvfp4" and m.unmodelled_quantization is None
    assert "model.layers.0.self_attn*" in m.quantization.ignore


# --------------------------------------------------------------------------- fbgemm


def test_fbgemm_fp8_bytes_as_vllm_allocates_them():
    """vllm/model_executor/layers/quantization/fbgemm_fp8.py (the format of
    meta-llama/Llama-3.1-405B-Instruct-FP8), on the Llama-3.1-8B geometry: each of the 4 linear
    layers per decoder layer (qkv, o, gate_up, down) gets an fp8 weight (1 B/element), an fp32
    scale per output row and an fp32 input_scale_ub scalar; modules_to_not_convert (here
    lm_head) and the embedding stay bf16.
    Linear elements 32 × (4096·4096·2 + 1024·4096·2 + 14336·4096·3) = 6,979,321,856;
    output rows 32 × (4096 + 1024 + 1024 + 4096 + 14336·2 + 4096) = 1,441,792;
    input_scale_ub 32 × 4 scalars; bf16 rest: embedding + LM head 2 × 128256 × 4096, 65 norms
    of 4096, the RoPE cache 131072 × 128."""
    entry = find_model_entry("meta-llama/Llama-3.1-8B-Instruct")
    cfg = json.loads((data_dir("model_specs") / entry.config).read_text())
    cfg["quantization_config"] = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                  "modules_to_not_convert": ["lm_head"]}
    m = spec_from_config(cfg, model_id="llama-fbgemm", source="test")
    q = m.quantization
    assert (q.method, q.per_channel, q.static_input_scale) == ("fp8", True, True)
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=q)
    linear = 32 * (4096 * 4096 * 2 + 1024 * 4096 * 2 + 14336 * 4096 * 3)
    rows = 32 * (4096 + 1024 + 1024 + 4096 + 14336 * 2 + 4096)
    rest = (2 * 128256 * 4096 + 65 * 4096 + 131072 * 128) * 2
    assert w.tensor_bytes == linear + 4 * rows + 4 * 4 * 32 + rest


def test_fbgemm_modules_to_not_convert_stay_16_bit():
    """The 405B FP8 checkpoint lists modules left in bf16 (e.g. a layer's MLP): those
    elements cost 2 B instead of 1 B + scales. Here layer 0's down_proj [4096, 14336]."""
    entry = find_model_entry("meta-llama/Llama-3.1-8B-Instruct")
    cfg = json.loads((data_dir("model_specs") / entry.config).read_text())
    qc = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}
    a = spec_from_config(
        {**cfg, "quantization_config": {**qc, "modules_to_not_convert": ["lm_head"]}},
        model_id="a",
        source="test",
    )
    b = spec_from_config({**cfg, "quantization_config": {
        **qc, "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.down_proj"]}},
        model_id="b", source="test")
    (wa,) = weight_memory_per_stage(a, tp=1, pp=1, dtype="bfloat16", quant=a.quantization)
    (wb,) = weight_memory_per_stage(b, tp=1, pp=1, dtype="bfloat16", quant=b.quantization)
    n = 4096 * 14336
    assert wb.tensor_bytes - wa.tensor_bytes == 2 * n - (n + 4 * 4096 + 4)


# ------------------------------------------------------------- quantized checkpoints


def test_qwen3_32b_awq_bytes_equal_the_published_tensor_list():
    """The public report on Qwen3-32B-AWQ (index entry's source) lists every tensor; per layer
    (× 64): q qweight [5120, 1024] i32, qzeros [40, 1024] i32, scales [40, 8192] 16-bit;
    k and v [5120, 128] / [40, 128] / [40, 1024]; o [8192, 640] / [64, 640] / [64, 5120];
    gate and up [5120, 3200] / [40, 3200] / [40, 25600]; down [25600, 640] / [200, 640] /
    [200, 5120]; norms 2 × 5120 + 2 × 128 16-bit; plus embedding and LM head [151936, 5120]
    16-bit and the final norm: 19,325,298,688 B ('18.00 GB' on disk). vLLM allocates the same
    tensors (awq.py create_weights), so kvplan's config-derived bytes must match exactly."""
    m = _model("Qwen/Qwen3-32B-AWQ")
    q = m.quantization
    assert (q.method, q.weight_bits, q.group_size, q.zero_points) == ("awq", 4, 128, True)
    per_layer = (5120 * 1024 * 4 + 40 * 1024 * 4 + 40 * 8192 * 2
                 + 2 * (5120 * 128 * 4 + 40 * 128 * 4 + 40 * 1024 * 2)
                 + 8192 * 640 * 4 + 64 * 640 * 4 + 64 * 5120 * 2
                 + 2 * (5120 * 3200 * 4 + 40 * 3200 * 4 + 40 * 25600 * 2)
                 + 25600 * 640 * 4 + 200 * 640 * 4 + 200 * 5120 * 2
                 + (2 * 5120 + 2 * 128) * 2)
    listed = 64 * per_layer + 2 * 151936 * 5120 * 2 + 5120 * 2
    assert listed == 19_325_298_688
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype=m.dtype, quant=q)
    assert w.tensor_bytes - rope_cache_bytes(m, m.dtype) == listed


def test_official_quantized_checkpoints_are_read_from_their_configs():
    """Each official quantized entry plans in its own format, never as unmodelled."""
    expect = {
        "Qwen/Qwen3-235B-A22B-FP8": ("fp8", (128, 128)),
        "nvidia/Qwen3-235B-A22B-NVFP4": ("nvfp4", None),
        "nvidia/DeepSeek-V3.1-NVFP4": ("nvfp4", None),
        "moonshotai/Kimi-K2-Instruct": ("fp8", (128, 128)),
        "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4": ("gptq", None),
    }
    for ref, (method, block) in expect.items():
        m = _model(ref)
        assert m.unmodelled_quantization is None, ref
        assert (m.quantization.method, m.quantization.block_size) == (method, block), ref


def test_qwen3_8b_fp8_bytes_follow_the_published_tensor_list():
    """The public report on Qwen3-8B-FP8 (the entry's source) lists per layer (× 36) fp8
    weights q [4096, 4096], k and v [1024, 4096], o [4096, 4096], gate and up [12288, 4096],
    down [4096, 12288] with 16-bit weight_scale_inv blocks [32, 32], [8, 32] × 2, [32, 32],
    [96, 32] × 2, [32, 96]; 16-bit norms 2 × 4096 + 2 × 128; embedding and LM head
    [151936, 4096] 16-bit; final norm: 9,436,551,168 B ('8.79 GB'). vLLM's Fp8LinearMethod
    allocates the block scales in float32 (fp8.py create_weights), so it holds 2 B more per
    scale element: 36 × 11,776 × 2 = 847,872 B, and nothing else differs."""
    m = _model("Qwen/Qwen3-8B-FP8")
    assert m.quantization.method == "fp8" and m.quantization.block_size == (128, 128)
    fp8 = 4096 * 4096 * 2 + 1024 * 4096 * 2 + 12288 * 4096 * 3
    scales = 32 * 32 * 2 + 8 * 32 * 2 + 96 * 32 * 3  # 11,776 per layer
    listed = 36 * (fp8 + 2 * scales + (2 * 4096 + 2 * 128) * 2) + 2 * 151936 * 4096 * 2 + 4096 * 2
    assert listed == 9_436_551_168
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=m.quantization)
    assert w.tensor_bytes - rope_cache_bytes(m, "bfloat16") == listed + 36 * scales * 2


def test_minimax_m27_fp8_bytes_equal_the_published_tensor_list():
    """The public report on MiniMax-M2.7 (the entry's source) lists per layer (× 62):
    e_score_correction_bias [256] fp32; experts w1, w3 [1536, 3072] and w2 [3072, 1536] fp8
    × 256 with fp32 block scales [12, 24] / [24, 12]; router `gate` [256, 3072] fp32;
    RMSNorms 2 × [3072] and k_norm [1024], q_norm [6144] 16-bit; q [6144, 3072], k and v
    [1024, 3072], o [3072, 6144] fp8 with fp32 scales [48, 24], [8, 24] × 2, [24, 48]; plus
    embedding and LM head [200064, 3072] and the final norm 16-bit: 230,121,630,720 B
    ('214.32 GB'), no MTP tensors. vLLM allocates exactly these (fp8.py block scales in fp32,
    minimax_m2.py fp32 router and bias), so kvplan must match to the byte."""
    m = _model("MiniMaxAI/MiniMax-M2.7")
    per_layer = (256 * 4
                 + 256 * 3 * 1536 * 3072 + 256 * (12 * 24 * 2 + 24 * 12) * 4
                 + 256 * 3072 * 4
                 + (2 * 3072 + 1024 + 6144) * 2
                 + 6144 * 3072 * 2 + 1024 * 3072 * 2 + (48 * 24 * 2 + 8 * 24 * 2) * 4)
    listed = 62 * per_layer + 2 * 200064 * 3072 * 2 + 3072 * 2
    assert listed == 230_121_630_720
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=m.quantization)
    assert w.tensor_bytes - rope_cache_bytes(m, "bfloat16") == listed
