"""TensorRT-LLM speculative decoding, LoRA (PEFT) cache and host KV cache (docs/features.md,
kvplan/engines/trtllm_features.py), pinned to hand-worked numbers. Sources: NVIDIA/TensorRT-LLM
files read in the public code index (paths in the module docstring). No TensorRT-LLM start-up
log with these features exists in reference/trtllm_logs.csv, so nothing is replayed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from clirun import run

from kvplan import plan
from kvplan.deploy.commands import load_yaml
from kvplan.engines import trtllm_features as F
from kvplan.engines.trtllm_options import parse_options_document
from kvplan.errors import InvalidConfigError, InvalidInputError
from kvplan.model.weights import _layer_tensors, _rank_bytes
from kvplan.sources.catalog import resolve_model
from kvplan.units import GiB, cdiv


def parse_extra_llm_api_options(text: str, path: str | None = None) -> dict:
    """The LLM API options a TensorRT-LLM options YAML sets, read as kvplan reads the file."""
    return parse_options_document(load_yaml(text, path=path), path=path)


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
DSV3 = "deepseek-ai/DeepSeek-V3"

# the head's weights, hand-summed in tests/engines/test_vllm_features.py
# test_eagle3_head_weights_kv_and_profile_hand_worked: 424,689,664 bf16 parameters + d2t
EAGLE3_HEAD_BYTES = 424_689_664 * 2 + 32_000 * 8  # = 849,635,328



def spec(d: Path | str | None, method: str = "eagle3", k: int = 3, **kw: object) -> str:
    body: dict[str, object] = {"method": method, "num_speculative_tokens": k, **kw}
    if d is not None:
        body["model"] = str(d)
    return json.dumps(body)


def _budget(p) -> int:  # noqa: ANN001 - a Plan
    """_util.py _cal_max_memory: 0.9 × (total − weights − activation peak − non-torch)."""
    m = p.memory
    return math.floor(0.9 * (m.total_bytes - m.weights_bytes - m.activation_bytes
                             - m.non_torch_bytes))


# ------------------------------------------------------------------ speculative decoding


def test_eagle3_one_model_llama_h100_hand_worked(eagle3_dir):
    """Llama-3.1-8B-Instruct + EAGLE-3 head, H100, TP1, bf16, TensorRT-LLM 1.2 (PyTorch, byte
    budget, whole blocks down). EagleDecodingConfig.eagle3_one_model defaults to True.

    Weights: + the head, 849,635,328 B, loaded with the target before profiling.
    KV per token (resource_manager.py get_pp_layers: get_num_spec_layers = 1 layer appended,
    with the target's 8 KV heads × 128): (32 + 1) × 2 × 8 × 128 × 2 B = 135,168 B.
    Tokens = floor(budget / 135,168) rounded down to 32-token blocks.
    A request holds max_draft_len − 1 = 2 extra KV tokens (get_num_extra_kv_tokens) + 3 draft
    tokens: 131,072 + 5 = 131,077 tokens → ceil(131,077 / 32) = 4,097 blocks."""
    base = plan(LLAMA, "h100", engine="trtllm")
    p = plan(LLAMA, "h100", engine="trtllm", speculative_config=spec(eagle3_dir))
    assert p.memory.weights_bytes - base.memory.weights_bytes == EAGLE3_HEAD_BYTES == 849_635_328
    assert p.memory.draft_weights_bytes == 849_635_328
    assert p.kv_cache.bytes_per_token == 135_168
    assert p.speculative.draft_kv_bytes_per_token == 4_096
    assert p.speculative.draft_layers == 1 and p.speculative.draft_pool_tokens is None
    assert p.kv_cache.tokens == _budget(p) // 135_168 // 32 * 32
    assert p.kv_cache.max_concurrency == round(p.kv_cache.tokens / 131_077, 2)
    assert p.kv_cache.bytes_per_request == 4_097 * 32 * 135_168
    assert p.kv_cache.tokens < base.kv_cache.tokens
    # the launch file carries the speculative_config section (llm_args.py names)
    assert "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n" in p.command
    # a decode step runs 1 + 3 tokens per request: max_num_tokens 8,192 // 4 = 2,048 requests
    assert any(pr.code == "speculative-decoding-estimate"
               and "2,048 decoding requests" in pr.message for pr in p.problems)


def test_eagle3_two_model_shares_the_estimate(eagle3_dir):
    """eagle3_one_model false: a draft engine with its own KV manager (py_executor_creator.py
    ResourceManagerType.DRAFT_KV_CACHE_MANAGER). The estimate's bytes per token =
    target 131,072 + draft 1 × 2 × 8 × 128 × 2 = 4,096 → 135,168 B (_util.py
    _get_kv_size_per_token); both managers get the same token count; no extra KV tokens,
    so a request holds 131,072 + 3 tokens."""
    p = plan(LLAMA, "h100", engine="trtllm",
             speculative_config=spec(eagle3_dir, eagle3_one_model=False))
    assert p.kv_cache.bytes_per_token == 135_168
    assert p.kv_cache.tokens == _budget(p) // 135_168 // 32 * 32
    assert p.speculative.draft_pool_tokens == p.kv_cache.tokens
    assert p.kv_cache.max_concurrency == round(p.kv_cache.tokens / 131_075, 2)
    assert "eagle3_one_model: false" in p.command


def test_token_era_caps_the_one_model_pool_at_the_free_memory(eagle3_dir):
    """TensorRT-LLM 1.0 (estimate carried as tokens): the estimate divides by the target's
    131,072 B only (get_cache_size_per_token counts the config's 32 layers) and becomes
    max_tokens; the final manager takes min(max_tokens, 0.9 × free / 135,168) where free =
    total − weights − non-torch (the profiling activations are freed), then whole blocks UP."""
    p = plan(LLAMA, "h100", engine="trtllm", engine_version="1.0.0",
             speculative_config=spec(eagle3_dir))
    m = p.memory
    estimate = _budget(p) // 131_072
    final = math.floor(0.9 * (m.total_bytes - m.weights_bytes - m.non_torch_bytes)) // 135_168
    assert p.kv_cache.tokens == cdiv(min(estimate, final), 32) * 32
    assert p.kv_cache.bytes_per_token == 135_168


def test_deepseek_v3_mtp_tp8_h200_hand_worked():
    """DeepSeek-V3 (FP8) MTP, TP8 on H200, TensorRT-LLM 1.2. MTPDecodingConfig
    num_nextn_predict_layers 1 = max_draft_len (speculative/utils.py).

    KV (MLA, kv_factor 1, head_dim = 512 + 64, replicated per rank): (61 + 1 MTP layer) × 576
    × 2 B = 71,424 B per token (the plain plan: 61 × 1,152 = 70,272).
    Draft weights per GPU: the MTP decoder layer shaped like layer 60 (kvplan's weights module,
    sharded over TP8) + enorm and hnorm 2 × 7,168 × 2 B = 28,672 + eh_proj 7,168 × 14,336 × 2 B
    = 205,520,896 (replicated, unquantized) + shared_head.norm 7,168 × 2 B = 14,336
    → layer + 205,563,904 B; no LM head: DeepseekV3MTPHead is a norm and the target's LM head
    is passed in (modeling_deepseekv3.py). A request holds 1 draft token more."""
    m = resolve_model(DSV3)
    base = plan(DSV3, "h200", engine="trtllm", tensor_parallel_size=8)
    p = plan(DSV3, "h200", engine="trtllm", tensor_parallel_size=8,
             speculative_config=spec(None, method="mtp", k=1))
    assert base.kv_cache.bytes_per_token == 70_272
    assert p.kv_cache.bytes_per_token == 71_424
    layer = _rank_bytes([(t, m, m.quantization) for t in _layer_tensors(m, 60)], 8, "bfloat16")[0]
    assert p.memory.draft_weights_bytes == layer + 205_563_904
    assert p.memory.weights_bytes - base.memory.weights_bytes == layer + 205_563_904
    assert p.kv_cache.tokens == _budget(p) // 71_424 // 32 * 32
    assert p.kv_cache.max_concurrency == round(p.kv_cache.tokens / (163_840 + 1), 2)
    assert "decoding_type: MTP\n  num_nextn_predict_layers: 1\n" in p.command


def test_ngram_adds_no_memory_only_draft_tokens():
    base = plan(LLAMA, "h100", engine="trtllm", max_model_len=32768)
    p = plan(LLAMA, "h100", engine="trtllm", max_model_len=32768,
             speculative_config=spec(None, method="ngram", k=4))
    assert p.memory.weights_bytes == base.memory.weights_bytes
    assert p.kv_cache.tokens == base.kv_cache.tokens
    assert p.kv_cache.max_concurrency == round(p.kv_cache.tokens / (32_768 + 4), 2)


def test_speculative_refusals_name_the_setting(eagle3_dir):
    with pytest.raises(InvalidInputError, match="EAGLE-3 heads only"):
        plan(LLAMA, "h100", engine="trtllm", speculative_config=spec(eagle3_dir, method="eagle"))
    with pytest.raises(InvalidInputError, match="no multi-token-prediction layers"):
        plan(LLAMA, "h100", engine="trtllm", speculative_config=spec(None, method="mtp", k=1))


def test_built_engine_features_warn_not_modelled(eagle3_dir):
    p = plan(LLAMA, "h100", engine="trtllm", backend="tensorrt",
             speculative_config=spec(eagle3_dir))
    assert any(pr.code == "feature-not-modelled" for pr in p.problems)
    assert p.speculative is None


# ------------------------------------------------------------------------------ LoRA


def test_peft_cache_llama_attention_modules_hand_worked():
    """lora_config: max_lora_rank 64, max_loras 4, max_cpu_loras 4, modules attn_q, attn_k,
    attn_v, attn_dense; Llama-3.1-8B TP1 bf16 (peftCacheManager.cpp getPageManagerConfig,
    getMaxNumSlots; loraModule.cpp):
      d = in + out: attn_q 4096 + 4096 = 8,192; attn_k, attn_v 4096 + 1024 = 5,120;
          attn_dense 4096 + 4096 = 8,192 → page width P = 5,120, widest D = 8,192
      module-layers = 64 × (32 layers × 4 modules) × 4 adapters = 32,768
      slots = 32,768 × ceil(8,192 / 5,120) = 65,536
      slots per page = max(8 × (2 + 1 + 1 + 2) × 32 = 1,536, ceil(64 × 8,192 / 5,120) = 103)
                     = 1,536
      pages = ceil(65,536 / 1,536) = 43 → 43 × 1,536 × 5,120 × 2 B = 676,331,520 B
    Host (max_cpu_loras 4): the same. One adapter: 64 × (8,192 + 5,120 × 2 + 8,192) × 32 × 2 B
    = 109,051,904 B. The device pages are allocated before the KV estimate (the estimation
    executor is built with them), so they come out of the budget."""
    base = plan(LLAMA, "h100", engine="trtllm")
    p = plan(LLAMA, "h100", engine="trtllm", enable_lora=True,
             lora_target_modules=["attn_q", "attn_k", "attn_v", "attn_dense"])
    assert p.lora.gpu_bytes == 676_331_520
    assert p.lora.host_bytes_per_worker == 676_331_520
    assert p.lora.adapter_bytes == 109_051_904
    assert (p.lora.max_lora_rank, p.lora.max_loras, p.lora.max_cpu_loras) == (64, 4, 4)
    assert p.memory.lora_bytes == 676_331_520
    assert p.memory.weights_bytes - base.memory.weights_bytes == 676_331_520
    assert p.kv_cache.tokens == _budget(p) // 131_072 // 32 * 32
    assert "lora_config:\n  max_lora_rank: 64\n" in p.command


def test_peft_cache_adds_missing_qkv_modules():
    """get_missing_qkv_modules_from_lora_modules: attn_q alone brings attn_k and attn_v."""
    assert F.lora_modules(("attn_q", "mlp_gate")) == ["attn_q", "mlp_gate", "attn_k", "attn_v"]
    c = F.peft_cache(resolve_model(LLAMA), tp=1, local_layers=32, dtype="bfloat16",
                     max_lora_rank=64, max_loras=4, max_cpu_loras=4, target_modules=("attn_q",))
    assert c.modules == ("attn_q", "attn_k", "attn_v")


def test_lora_without_modules_warns_feature_not_modelled():
    p = plan(LLAMA, "h100", engine="trtllm", enable_lora=True)
    assert p.lora is None
    assert any(pr.code == "feature-not-modelled" and "lora_target_modules" in pr.message
               for pr in p.problems)


# ----------------------------------------------------------------------- host KV cache


def test_host_cache_blocks_hand_worked():
    """kv_cache_config.host_cache_size 8 GiB per GPU (resource_manager.py
    calculate_max_num_blocks): int(8,589,934,592 / 131,072 / 32) = 2,048 host blocks = 65,536
    tokens on TP1; TP2: 65,536 B per token → 4,096 blocks = 131,072 tokens per GPU, 2 × 8 GiB
    of host memory for the deployment."""
    p = plan(LLAMA, "h100", engine="trtllm", host_cache_size=8 * GiB)
    assert p.offload.backend == "trtllm-host-cache"
    assert (p.offload.cpu_blocks, p.offload.cpu_tokens) == (2_048, 65_536)
    assert p.offload.host_bytes_per_worker == p.offload.host_bytes == 8 * GiB
    assert p.offload.effective_cached_tokens == p.kv_cache.tokens + 65_536
    two = plan(LLAMA, "h100", engine="trtllm", host_cache_size=8 * GiB, tensor_parallel_size=2)
    assert (two.offload.cpu_blocks, two.offload.cpu_tokens) == (4_096, 131_072)
    assert two.offload.host_bytes == 16 * GiB
    assert "  host_cache_size: 8589934592\n" in p.command
    assert F.secondary_blocks(8 * GiB, 131_072, 32) == 2_048


def test_other_engines_refuse_the_trtllm_settings():
    with pytest.raises(InvalidInputError, match="not a setting vLLM has"):
        plan(LLAMA, "h100", host_cache_size=GiB)


# --------------------------------------------------------------------- options file, check


def test_options_file_sections_parse():
    opts = parse_extra_llm_api_options(
        "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n"
        "  speculative_model_dir: /models/eagle3\n  eagle3_one_model: false\n"
        "lora_config:\n  max_lora_rank: 32\n  max_loras: 2\n  lora_target_modules: [attn_q]\n"
        "kv_cache_config:\n  host_cache_size: 1073741824\n")
    assert opts["speculative_config"] == {"method": "eagle3", "num_speculative_tokens": 3,
                                          "model": "/models/eagle3", "eagle3_one_model": False}
    assert opts["enable_lora"] is True and opts["max_lora_rank"] == 32 and opts["max_loras"] == 2
    assert opts["lora_target_modules"] == ("attn_q",)
    assert opts["host_cache_size"] == GiB
    mtp = parse_extra_llm_api_options("speculative_config:\n  decoding_type: MTP\n"
                                      "  num_nextn_predict_layers: 2\n")
    assert mtp["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 2}


@pytest.mark.parametrize(("text", "field"), [
    ("speculative_config:\n  decoding_type: Medusa\n", "speculative_config.decoding_type"),
    (("speculative_config:\n  decoding_type: Eagle\n  max_draft_len: three\n"
      "  speculative_model_dir: x\n"), "speculative_config.max_draft_len"),
    ("speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n",
     "speculative_config.speculative_model_dir"),
    ("speculative_config:\n  decoding_type: NGram\n", "speculative_config.max_draft_len"),
    ("speculative_config: [1]\n", "speculative_config"),
    ("lora_config:\n  max_loras: 0\n", "lora_config.max_loras"),
    ("lora_config:\n  lora_target_modules: attn_q\n", "lora_config.lora_target_modules"),
    ("kv_cache_config:\n  host_cache_size: -1\n", "kv_cache_config.host_cache_size"),
])
def test_options_file_bad_values_name_the_field(text, field):
    with pytest.raises(InvalidConfigError) as e:
        parse_extra_llm_api_options(text, path="opts.yaml")
    assert field in str(e.value)


def test_cli_bad_options_file_exits_2_naming_the_field(capsys, tmp_path):
    f = tmp_path / "extra.yaml"
    f.write_text("speculative_config:\n  decoding_type: Eagle\n  max_draft_len: -1\n"
                 "  speculative_model_dir: x\n")
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "trtllm",
                       "--extra-llm-api-options", str(f))
    assert code == 2 and "speculative_config.max_draft_len" in err


def test_check_reads_a_trtllm_serve_command_with_the_features(capsys, tmp_path, eagle3_dir):
    (tmp_path / "opts.yaml").write_text(
        "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n"
        f"  speculative_model_dir: {eagle3_dir}\n"
        "lora_config:\n  max_lora_rank: 64\n  max_loras: 4\n"
        "  lora_target_modules: [attn_q, attn_k, attn_v, attn_dense]\n"
        "kv_cache_config:\n  host_cache_size: 8589934592\n")
    script = tmp_path / "serve.sh"
    script.write_text(f"trtllm-serve {LLAMA} --max_seq_len 32768 "
                      "--extra_llm_api_options opts.yaml\n")
    code, out, err = run(capsys, "check", str(script), "--gpu", "h100", "--json")
    assert code == 0, out + err
    [row] = json.loads(out)["deployments"]
    plan_ = row["plan"]
    assert plan_["speculative"]["method"] == "eagle3"
    assert plan_["speculative"]["draft_weights_bytes"] == EAGLE3_HEAD_BYTES
    assert plan_["lora"]["gpu_bytes"] == 676_331_520
    assert plan_["offload"]["backend"] == "trtllm-host-cache"
    assert plan_["kv_cache"]["bytes_per_token"] == 135_168


def test_cli_plan_takes_the_trtllm_feature_flags(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "trtllm", "--json",
                         "--enable-lora", "--lora-target-modules",
                         "attn_q,attn_k,attn_v,attn_dense",
                         "--host-cache-size", str(8 * GiB))
    assert code == 0, err
    data = json.loads(out)
    assert data["lora"]["gpu_bytes"] == 676_331_520
    assert data["offload"]["cpu_blocks"] == 2_048
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--host-cache-size", "1")
    assert code == 2 and "not a setting vLLM has" in err
