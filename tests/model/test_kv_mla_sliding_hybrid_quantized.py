"""Hand-worked numbers for MLA, sliding-window, hybrid and quantized models, each with its source.

Worked examples come from reference/ENGINE_MEMORY.md §1.9 (b)–(e) and §1.8; the arithmetic is
written out here, independently of kvplan's code.
"""

from __future__ import annotations

import json

import pytest

from kvplan import plan
from kvplan.model.config import spec_from_config
from kvplan.model.kv import kv_layout, layer_specs
from kvplan.model.weights import parameter_count, weight_memory_per_stage
from kvplan.sources.catalog import data_dir, find_model_entry, load_catalog_model, resolve_model
from kvplan.units import GiB, MiB

KiB = 1024


def _model(ref):
    return load_catalog_model(find_model_entry(ref))


def _llama8b_cfg(**extra):
    entry = find_model_entry("meta-llama/Llama-3.1-8B-Instruct")
    cfg = json.loads((data_dir("model_specs") / entry.config).read_text())
    return spec_from_config({**cfg, **extra}, model_id="llama-variant", source="test")


LLAMA8B_LINEAR_PARAMS = 32 * (4096 * 4096 * 2 + 1024 * 4096 * 2 + 14336 * 4096 * 3)  # 6,979,321,856
LLAMA8B_LINEAR_ROWS = 32 * (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096)  # output channels
LLAMA8B_BF16_REST = (
    2 * 128256 * 4096 * 2 + 65 * 4096 * 2 + 131072 * 128 * 2
)  # embed+head, norms, RoPE


# ------------------------------------------------------------------------------ MLA


def test_deepseek_v3_kv_is_70272_bytes_per_token_on_every_tp_rank():
    """§1.9e: (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B × 61 layers = 70,272 B per token,
    replicated on each TP rank (MLA caches one latent head); fp8 KV halves it."""
    p = plan("deepseek-ai/DeepSeek-V3", "h200", tensor_parallel_size=8, max_model_len=32768)
    assert p.kv_cache.bytes_per_token == 70_272
    p8 = plan("deepseek-ai/DeepSeek-V3", "h200", tensor_parallel_size=8, max_model_len=32768,
              kv_cache_dtype="fp8")
    assert p8.kv_cache.bytes_per_token == 35_136


def test_mla_block_size_follows_the_backend():
    """0.19.0 H100 logs: 16-token blocks (FLASH_ATTN_MLA); 0.11.0 forced FlashMLA (64) on Hopper
    and CUTLASS MLA (128) on Blackwell (ENGINE_MEMORY §1.3, vllm/platforms/cuda.py)."""
    assert plan("deepseek-v2-lite", "h100", engine_version="0.19.0").kv_cache.block_size == 16
    assert plan("deepseek-v2-lite", "h100", engine_version="0.11.0").kv_cache.block_size == 64
    assert plan("deepseek-v2-lite", "b200", engine_version="0.11.0").kv_cache.block_size == 128
    assert plan("deepseek-v2-lite", "a100-sxm-80gb").kv_cache.block_size == 16


# -------------------------------------------------------------------- sliding window


def test_gpt_oss_120b_request_at_128k_needs_5_07_gib():
    """§1.9b, vLLM 0.33 server defaults on a ≥70 GiB GPU: max_num_batched_tokens 8192, async
    scheduling → in_flight 16,384. 18 sliding (window 128) + 18 full layers, 8 KV heads × 64,
    bf16: page = 16 × 2 × 8 × 64 × 2 = 32 KiB; block = 18 × 32 KiB = 576 KiB.
    Per request at 131,072: full 8,192 + sliding cdiv(127 + 16,384, 16) + 1 = 1,033 blocks."""
    p = plan("openai/gpt-oss-120b", "h200", max_model_len=131072)
    assert p.kv_cache.bytes_per_block == 576 * KiB
    assert p.kv_cache.bytes_per_request == (8192 + 1033) * 576 * KiB
    assert round(p.kv_cache.bytes_per_request / GiB, 2) == 5.07


def test_gpt_oss_before_async_scheduling_keeps_fewer_tokens_in_flight():
    """§1.9b: with in_flight = 8,192 (≤0.22) the sliding group needs 521 blocks → 4.79 GiB."""
    p = plan("openai/gpt-oss-120b", "h200", max_model_len=131072, engine_version="0.22.0")
    assert p.kv_cache.bytes_per_request == (8192 + 521) * 576 * KiB
    assert round(p.kv_cache.bytes_per_request / GiB, 2) == 4.79


def test_gemma_3_27b_request_at_128k_needs_17_98_gib():
    """§1.9c: 52 sliding (window 1024) + 10 global layers, 16 KV heads × 128: group size 10 →
    1 full + 6 sliding groups (8 padding layers); page 128 KiB; block 1.25 MiB. Per request:
    8,192 + 6 × (cdiv(1,023 + 16,384, 16) + 1) = 14,726 blocks."""
    p = plan("google/gemma-3-27b-it", "h100", max_model_len=131072)
    assert p.kv_cache.bytes_per_block == 10 * 128 * KiB
    assert p.kv_cache.bytes_per_request == 14_726 * 10 * 128 * KiB
    assert round(p.kv_cache.bytes_per_request / GiB, 2) == 17.98
    assert any(x.code == "kv-padding-layers" and "8 virtual" in x.message for x in p.problems)


def test_gemma_2_printed_tokens_use_the_old_formula_in_0_19():
    """vLLM ≤0.20 prints (num_blocks // groups) × block size; the gemma-2-9b H100 log
    (calibration CSV) shows 168,880 tokens for 21,111 blocks over 2 groups."""
    m = _model("google/gemma-2-9b-it")
    specs = layer_specs(m, range(42), tp=1, kv_dtype="bfloat16", state_dtype="bfloat16",
                        hybrid_manager=True)
    layout = kv_layout(specs, block_size=16, block_size_fixed=False, group_rule="min")
    assert [g.kind for g in layout.groups] == ["sliding", "full"]
    assert layout.bytes_per_block == 21 * 16 * 2 * 8 * 256 * 2
    assert 21_111 // len(layout.groups) * 16 == 168_880


def test_disabling_the_hybrid_manager_allocates_every_layer_fully():
    p = plan(
        "google/gemma-3-27b-it", "h100", max_model_len=131072, disable_hybrid_kv_cache_manager=True
    )
    assert p.kv_cache.bytes_per_request == 62 * 131072 * 2 * 16 * 128 * 2


def test_llama_4_chunked_attention_falls_back_to_full():
    """vllm/config/vllm.py auto-disables the hybrid manager for attention_chunk_size models."""
    p = plan("meta-llama/Llama-4-Scout-17B-16E-Instruct", "h200", tensor_parallel_size=4,
             max_model_len=32768)
    assert p.inputs["block_size"].value == 16
    assert p.kv_cache.bytes_per_request == 48 * 32768 * 2 * 2 * 128 * 2  # 8 KV heads / TP4 = 2


# ---------------------------------------------------------------- linear attention


def test_qwen3_next_state_page_and_block_size():
    """§1.9d: Gated DeltaNet state = conv 3 × (2·16·128 + 32·128) × 2 B + ssm 32 × 128 × 128 × 2 B
    = 1,097,728 B; attention 2 × 2 KV heads × 256 × 2 B = 2,048 B/token → block size
    16 × cdiv(1,097,728, 32,768) = 544; state padded to 544 × 2,048 = 1,114,112 B; 1 attention +
    3 GDN groups of 12 → 12.75 MiB per block; at 262,144 tokens 482 + 3 × 3 (align) = 491 blocks."""
    m = _model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    specs = layer_specs(m, range(48), tp=1, kv_dtype="bfloat16", state_dtype="bfloat16",
                        hybrid_manager=True)
    assert {s.state_bytes for s in specs if s.kind == "mamba"} == {1_097_728}
    layout = kv_layout(specs, block_size=16, block_size_fixed=False, group_rule="max_if_close")
    assert layout.block_size == 544 and layout.page_bytes == 1_114_112
    assert layout.bytes_per_block == 12 * 1_114_112 == int(12.75 * MiB)
    assert layout.blocks_per_request(262_144, in_flight=16384, mamba_pages=3) == 491
    p = plan(m, "h200", tensor_parallel_size=2, max_model_len=262144)
    # TP2 halves both the state (548,864 B) and the attention bytes per token (1 KV head):
    # the block size stays 544 and the block halves.
    assert p.kv_cache.block_size == 544 and p.kv_cache.bytes_per_block == 12 * 1_114_112 // 2


# ----------------------------------------------------------------------- weights


def test_mixtral_8x7b_weights_at_tp2():
    """Per rank: vocab 32000 (a multiple of 64) split in 2 for embedding and head; per layer
    q/o 4096² / 2, k/v 1024 × 4096 / 2, 8 experts × 3 × 14336 × 4096 / 2, router 8 × 4096 and
    two norms replicated; final norm; RoPE cache 32768 × 128; all bf16. vLLM 0.19.0 log
    (calibration CSV, TP2): 43.51 GiB per GPU."""
    m = _model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    per_layer = (
        (2 * 4096 * 4096 + 2 * 1024 * 4096) // 2 + 8 * 3 * 14336 * 4096 // 2 + 8 * 4096 + 2 * 4096
    )
    expected = 2 * (2 * 32000 * 4096 // 2 + 32 * per_layer + 4096 + 32768 * 128)
    (w,) = weight_memory_per_stage(m, tp=2, pp=1, dtype="bfloat16", quant=None)
    assert w.tensor_bytes == expected
    assert abs(w.allocated_bytes / GiB - 43.51) / 43.51 < 0.001


def test_llama_8b_fp8_checkpoint_is_8_49_gib():
    """compressed-tensors FP8 (per-channel weights, lm_head ignored): 1 B per linear weight +
    4 B per output channel, bf16 embeddings/head/norms, RoPE cache → 8.49 GiB."""
    m = _llama8b_cfg(quantization_config={
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}}}})
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=m.quantization)
    assert w.tensor_bytes == LLAMA8B_LINEAR_PARAMS + 4 * LLAMA8B_LINEAR_ROWS + LLAMA8B_BF16_REST
    assert round(w.allocated_bytes / GiB, 2) == 8.49


def test_llama_8b_w4a16_is_about_5_4_gib():
    """compressed-tensors W4A16 (pack-quantized, group 128, symmetric): N/2 B packed + 2 B per
    128 inputs per output → 5.34 GiB (the issue's ≈5.38 includes kernel workspaces)."""
    m = _llama8b_cfg(
        quantization_config={
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "ignore": ["lm_head"],
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 4,
                        "type": "int",
                        "strategy": "group",
                        "group_size": 128,
                        "symmetric": True,
                    },
                }
            },
        }
    )
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=m.quantization)
    assert (
        w.tensor_bytes
        == LLAMA8B_LINEAR_PARAMS // 2 + LLAMA8B_LINEAR_PARAMS // 64 + LLAMA8B_BF16_REST
    )
    assert abs(w.allocated_bytes / GiB - 5.38) / 5.38 < 0.01


@pytest.mark.parametrize(
    "qc,per_weight",
    [
        (
            {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
            0.5 + 2.5 / 128,
        ),
        (
            {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False},
            0.5 + 2 / 128,
        ),
        (
            {"quant_method": "gptq", "bits": 8, "group_size": 128, "sym": True, "desc_act": False},
            1 + 2 / 128,
        ),
    ],
)
def test_integer_formats_bytes_per_weight(qc, per_weight):
    """ENGINE_MEMORY §1.8 table: AWQ 0.5 + 2.5/g, GPTQ 4-bit symmetric 0.5 + 2/g, 8-bit 1 + 2/g."""
    m = _llama8b_cfg(quantization_config=qc, torch_dtype="float16")
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="float16", quant=m.quantization)
    assert w.tensor_bytes - LLAMA8B_BF16_REST == LLAMA8B_LINEAR_PARAMS * per_weight


def test_gpt_oss_20b_mxfp4_weights_match_the_h100_log():
    """MXFP4 experts (½ B + 1/32 B e8m0 scale per weight) on matrices padded to 2944 × 3072,
    everything else bf16: vLLM 0.19.0 H100 log 13.64 GiB (calibration CSV)."""
    m = _model("openai/gpt-oss-20b")
    (w,) = weight_memory_per_stage(m, tp=1, pp=1, dtype="bfloat16", quant=m.quantization)
    assert abs(w.allocated_bytes / GiB - 13.64) / 13.64 < 0.01


def test_expert_parallel_holds_whole_experts_on_fewer_ranks():
    """--enable-expert-parallel with TP2 × DP2: each of the 4 ranks holds 128 / 4 = 32 whole
    experts of Qwen3-30B-A3B (3 × 768 × 2048 each, 48 layers, bf16) instead of half of all 128
    at TP2 alone. Without EP, vLLM still shares the MoE layers over TP × DP (a quarter slice of
    every expert: FusedMoEParallelConfig.make, flatten_tp_across_dp), the same bytes."""
    base = dict(tensor_parallel_size=2, max_model_len=8192)
    tp2 = plan("Qwen/Qwen3-30B-A3B", "h100", **base)
    no_ep = plan("Qwen/Qwen3-30B-A3B", "h100", data_parallel_size=2, **base)
    ep = plan("Qwen/Qwen3-30B-A3B", "h100", data_parallel_size=2, enable_expert_parallel=True,
              **base)
    expert = 3 * 768 * 2048 * 2
    assert (tp2.memory.weights_tensor_bytes - ep.memory.weights_tensor_bytes
            == 48 * expert * (128 // 2 - 128 // 4))
    assert no_ep.memory.weights_tensor_bytes == ep.memory.weights_tensor_bytes
    assert "--enable-expert-parallel" in ep.command


def test_expert_parallel_needs_experts():
    from kvplan.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="mixture-of-experts"):
        plan("llama-3.1-8b", "h100", enable_expert_parallel=True)


# Jamba-v0.1 from the partial values in reference hf_configs/INDEX.md ("consistent across 4
# fixtures"); tie_word_embeddings is transformers' JambaConfig default (False).
JAMBA = {"model_type": "jamba", "architectures": ["JambaForCausalLM"], "num_hidden_layers": 32,
         "attn_layer_period": 8, "attn_layer_offset": 4, "num_attention_heads": 32,
         "num_key_value_heads": 8, "hidden_size": 4096, "intermediate_size": 14336,
         "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 16,
         "num_experts_per_tok": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
         "mamba_dt_rank": 256, "vocab_size": 65536, "max_position_embeddings": 262144,
         "torch_dtype": "bfloat16"}


def test_jamba_parameters_and_mamba1_state():
    """Card: 52B total. Mamba1 state per layer (d_inner 8192): conv 8192 × 3 + ssm 8192 × 16
    elements × 2 B = 311,296 B; attention 2 × 8 × 128 × 2 B = 4,096 B/token → block size
    16 × cdiv(311,296, 65,536) = 80; 4 attention layers (4, 12, 20, 28) → 1 + 7 groups of 4."""
    from kvplan.model.weights import parameter_count

    m = spec_from_config(JAMBA, model_id="ai21labs/Jamba-v0.1", source="test")
    assert m.unsupported == [] and abs(parameter_count(m) - 52e9) <= 1e9
    specs = layer_specs(m, range(32), tp=1, kv_dtype="bfloat16", state_dtype="bfloat16",
                        hybrid_manager=True)
    assert [i for i, s in enumerate(specs) if s.kind == "full"] == [4, 12, 20, 28]
    assert {s.state_bytes for s in specs if s.kind == "mamba"} == {311_296}
    layout = kv_layout(specs, block_size=16, block_size_fixed=False, group_rule="max_if_close")
    assert layout.block_size == 80 and layout.page_bytes == 80 * 4096
    assert len(layout.groups) == 8 and layout.bytes_per_block == 4 * 80 * 4096


def test_mamba2_state_with_group_padding():
    """Mamba2 (ENGINE_MEMORY §1.3), a synthetic Bamba-style config: d_inner 8192, 128 heads × 64,
    1 group, d_state 128, kernel 4. TP1: (8192 + 2·128) × 3 + 128 × 64 × 128 = 1,073,920
    elements; TP2 pads the single group to 2: (8192 + 4·128)/2 × 3 + 64 × 64 × 128 = 537,344."""
    from kvplan.model.kv import mamba_state_bytes

    cfg = {"model_type": "bamba", "num_hidden_layers": 4, "attn_layer_indices": [3],
           "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 4096,
           "mamba_n_heads": 128, "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_d_state": 128,
           "mamba_d_conv": 4, "mamba_expand": 2, "torch_dtype": "bfloat16"}
    m = spec_from_config(cfg, model_id="synthetic-mamba2", source="test")
    assert m.layer_types == ["linear", "linear", "linear", "full"]
    assert mamba_state_bytes(m, tp=1, state_dtype="bfloat16") == 1_073_920 * 2
    assert mamba_state_bytes(m, tp=2, state_dtype="bfloat16") == 537_344 * 2


def test_unrecognised_mamba_families_warn():
    cfg = {k: v for k, v in JAMBA.items() if "expert" not in k}
    cfg.update(model_type="falcon_h1")
    m = spec_from_config(cfg, model_id="falcon-h1-like", source="test")
    assert any("Falcon-H1" in u for u in m.unsupported)


# nvidia/Nemotron-H-8B-Base-8K config.json values as copied into a public test fixture
# (NVIDIA Megatron-Bridge tests).
NEMOTRON_H_8B = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "attention_bias": False,
    "attention_head_dim": 128,
    "chunk_size": 128,
    "conv_kernel": 4,
    "expand": 2,
    "hidden_size": 4096,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "intermediate_size": 21504,
    "mamba_head_dim": 64,
    "mamba_num_heads": 128,
    "max_position_embeddings": 8192,
    "mlp_bias": False,
    "mlp_hidden_act": "relu2",
    "n_groups": 8,
    "num_attention_heads": 32,
    "num_hidden_layers": 52,
    "num_key_value_heads": 8,
    "ssm_state_size": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_bias": False,
    "vocab_size": 131072,
}


def test_nemotron_h_blocks_parameters_and_state():
    """One block per pattern character (vllm nemotron_h.py): 24 Mamba2 ('M'), 4 attention
    ('*') and 24 relu² MLP ('-') blocks, one RMSNorm each. By hand:
    embeddings + untied head 2 × 131,072 × 4,096 = 1,073,741,824; final norm 4,096;
    Mamba2 block: in_proj (8192 + 10240 + 128) × 4096 + conv 10240 × (4 + 1) + 3 × 128
    + gated norm 8192 + out_proj 4096 × 8192 + norm 4096 = 109,640,064 (× 24);
    attention block: 2 × 4096² + 2 × 1024 × 4096 + norm = 41,947,136 (× 4);
    MLP block: up + down 2 × 21504 × 4096 + norm = 176,164,864 (× 24)
    → 8,100,852,736 ("8B"). State per Mamba layer: conv 10,240 × 3 × 2 B = 61,440 B + SSM
    128 × 64 × 128 × 4 B (float32, vLLM's NemotronH default) = 4,194,304 B."""
    from kvplan.model.weights import parameter_count

    m = spec_from_config(NEMOTRON_H_8B, model_id="nvidia/Nemotron-H-8B-Base-8K", source="test")
    assert m.unsupported == [] and m.head_dim == 128 and m.rotary_dim == 0
    assert [m.layer_types.count(k) for k in ("linear", "full", "none")] == [24, 4, 24]
    assert parameter_count(m) == 8_100_852_736
    specs = layer_specs(m, range(52), tp=1, kv_dtype="bfloat16", state_dtype="bfloat16",
                        hybrid_manager=True)
    assert len(specs) == 28  # the MLP blocks hold no cache
    assert {s.state_bytes for s in specs if s.kind == "mamba"} == {61_440 + 4_194_304}
    # Block size: 16 × cdiv(4,255,744, 16 × 4,096) = 1,040; 24 Mamba + 4 attention layers →
    # 6 + 1 groups of 4.
    layout = kv_layout(specs, block_size=16, block_size_fixed=False, group_rule="max_if_close")
    assert layout.block_size == 1040 and len(layout.groups) == 7
    assert layout.bytes_per_block == 4 * 1040 * 4096


def test_nemotron_h_ssm_dtype_from_the_config_and_bad_patterns():
    from kvplan.errors import InvalidConfigError
    from kvplan.model.kv import mamba_state_bytes

    m = spec_from_config({**NEMOTRON_H_8B, "mamba_ssm_cache_dtype": "bfloat16"}, model_id="x",
                         source="test")
    assert mamba_state_bytes(m, tp=1, state_dtype="bfloat16") == 61_440 + 2_097_152
    with pytest.raises(InvalidConfigError, match="hybrid_override_pattern"):
        spec_from_config(
            {**NEMOTRON_H_8B, "hybrid_override_pattern": "M-M*"}, model_id="x", source="test"
        )
    moe = spec_from_config({**NEMOTRON_H_8B, "hybrid_override_pattern": "ME" * 26}, model_id="x",
                           source="test")
    assert any("MoE ('E')" in u for u in moe.unsupported)


def test_nemotron_h_plans_on_vllm():
    m = spec_from_config(NEMOTRON_H_8B, model_id="nvidia/Nemotron-H-8B-Base-8K", source="test")
    p = plan(m, "h100")
    assert p.fits and p.kv_cache.block_size == 1040
    assert p.memory.weights_tensor_bytes == 8_100_852_736 * 2  # no RoPE: no cos/sin cache


def test_phi2_non_gated_mlp_parallel_block_and_biases_hand_worked():
    """microsoft/phi-2 (config in model_specs; vllm/model_executor/models/phi.py): hidden 2560,
    32 layers, 32 heads of 80, fc1/fc2 10240 (not gated), vocab 51200, untied.
      embed              51200 × 2560                        = 131,072,000
      per layer: q,k,v   3 × (2560 × 2560 + 2560)            =  19,668,480
                 dense   2560 × 2560 + 2560                  =   6,556,160
                 fc1     2560 × 10240 + 10240                =  26,224,640
                 fc2     10240 × 2560 + 2560                 =  26,216,960
                 one LayerNorm, weight + bias 2 × 2560       =       5,120
                 = 78,671,360 × 32 layers                    = 2,517,483,520
      final LayerNorm 2 × 2560 = 5,120; LM head 51200 × 2560 + 51200 = 131,123,200
      total 2,779,683,840 (HF's 2.78B); fp16 = 5,559,367,680 B = 5.18 GiB, which vLLM's
      "Model loading took" rounds to 5.19 GiB (issue 14 quotes it); Llama-style assumptions
      gave 6.75 GiB (+30 %: a gated MLP)."""
    m = resolve_model("microsoft/phi-2")
    assert m.unsupported == [] and not m.mlp_gated and m.norms_per_layer == 1
    assert parameter_count(m) == 2_779_683_840
    assert m.rotary_dim == 32  # partial_rotary_factor 0.4 × head_dim 80
    p = plan("microsoft/phi-2", "h100")
    assert p.memory.weights_tensor_bytes - 2 * 2_779_683_840 < 2**20  # + the fp16 RoPE cache
    assert round(p.memory.weights_bytes / 2**30, 2) == 5.19
    assert p.kv_cache.bytes_per_token == 32 * 2 * 32 * 80 * 2  # MHA, fp16
