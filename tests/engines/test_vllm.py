"""vLLM accounting by era: budget, defaults, printed numbers, fit rules (ENGINE_MEMORY §1)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import plan
from kvplan.engines import vllm
from kvplan.model.config import spec_from_config
from kvplan.sources.catalog import find_model_entry, load_catalog_model
from kvplan.units import GiB

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_budget_is_ceil_of_total_times_utilization():
    """vllm/v1/worker/utils.py request_memory: ceil(total × util)."""
    assert vllm.budget_bytes(1000, 0.9) == 900
    assert vllm.budget_bytes(1001, 0.9) == 901  # 900.9 rounds up


def test_replays_llama_8b_h100_log_0_19():
    """llm-d-planner v0.19.0 log (H100, util 0.95, L 8192): 'GPU KV cache size: 476,016 tokens',
    'Maximum concurrency for 8,192 tokens per request: 58.11x', KV 58.11 GiB."""
    p = plan(LLAMA, "h100", engine_version="0.19.0", gpu_memory_gib=79.19,
             gpu_memory_utilization=0.95, max_model_len=8192)
    assert abs(p.kv_cache.tokens - 476_016) / 476_016 < 0.002
    assert abs(p.kv_cache.max_concurrency - 58.11) < 0.15
    assert abs(p.memory.kv_cache_bytes / GiB - 58.11) < 0.12
    assert not p.memory.cudagraph_in_budget  # "not subtracted from KV in this version"


def test_newer_eras_subtract_cuda_graph_estimate():
    old = plan(LLAMA, "h100", engine_version="0.19.0", gpu_memory_utilization=0.9)
    new = plan(LLAMA, "h100", engine_version="0.20.0", gpu_memory_utilization=0.9)
    assert new.memory.cudagraph_in_budget
    assert old.memory.kv_cache_bytes - new.memory.kv_cache_bytes == new.memory.cudagraph_bytes


def test_default_utilization_by_era():
    assert (
        plan(LLAMA, "h100", engine_version="0.15.1").inputs["gpu_memory_utilization"].value == 0.90
    )
    assert (
        plan(LLAMA, "h100", engine_version="0.33.0").inputs["gpu_memory_utilization"].value == 0.92
    )


@pytest.mark.parametrize("gpu,version,tokens,seqs", [
    ("h100-sxm-80gb", "0.33.0", 8192, 1024),   # ≥70 GiB, not A100
    ("a100-sxm-80gb", "0.33.0", 2048, 256),    # name contains a100
    ("l40s", "0.33.0", 2048, 256),             # < 70 GiB
    ("b200", "0.33.0", 16384, 1024),           # ≥160 GiB row (0.30+)
    ("b200", "0.26.0", 8192, 1024),            # no ≥160 GiB row before 0.30
])
def test_batch_defaults_by_gpu_class(gpu, version, tokens, seqs):
    """vllm/engine/arg_utils.py get_batch_defaults, `vllm serve` context."""
    p = plan(LLAMA, gpu, engine_version=version, max_model_len=8192)
    assert p.inputs["max_num_batched_tokens"].value == tokens
    assert p.inputs["max_num_seqs"].value == seqs
    assert p.inputs["max_num_seqs"].source == "engine-default"


def test_printed_tokens_formula_changes_at_0_22():
    """≤0.20: num_blocks × bs; ≥0.22: int(num_blocks / cdiv(L, bs) × L) (fewer when L % bs)."""
    kw = dict(gpu_memory_gib=79.19, max_model_len=8200, kv_cache_memory_bytes=10 * GiB)
    old = plan(LLAMA, "h100", engine_version="0.20.0", **kw)
    new = plan(LLAMA, "h100", engine_version="0.33.0", **kw)
    blocks = (10 * GiB) // (2 * 1024 * 1024)
    assert old.kv_cache.num_blocks == new.kv_cache.num_blocks == blocks
    assert old.kv_cache.tokens == blocks * 16
    assert new.kv_cache.tokens == int(blocks / 513 * 8200)


def test_does_not_fit_gives_vllm_estimated_max_length():
    """0.30+: estimated max length = (num_blocks − 1) × bs; before: num_blocks × bs."""
    kw = dict(kv_cache_memory_bytes=4 * GiB)  # 2048 blocks of 2 MiB
    new = plan(LLAMA, "h100", engine_version="0.33.0", **kw)
    old = plan(LLAMA, "h100", engine_version="0.26.0", **kw)
    assert not new.fits and not old.fits
    assert new.kv_cache.max_model_len_fit == 2047 * 16
    assert old.kv_cache.max_model_len_fit == 2048 * 16
    assert new.recommendations.max_model_len.value == 2047 * 16
    assert any(p.code == "max-model-len-too-long" for p in new.problems)


def test_null_block_decides_fit_at_the_edge():
    """Exactly cdiv(L, bs) blocks: fits before 0.30, not from 0.30 (null block held back)."""
    kw = dict(kv_cache_memory_bytes=512 * 2 * 1024 * 1024, max_model_len=8192)
    assert plan(LLAMA, "h100", engine_version="0.26.0", **kw).fits
    assert not plan(LLAMA, "h100", engine_version="0.33.0", **kw).fits


def test_weights_larger_than_gpu_do_not_fit_and_suggest_tp():
    p = plan("meta-llama/Llama-3.1-70B-Instruct", "h100", max_model_len=8192)
    assert not p.fits
    assert any(x.code == "no-kv-memory" for x in p.problems)
    assert p.recommendations.tensor_parallel_size.value == 2
    assert "--tensor-parallel-size 2" in p.command


def test_utilization_above_free_memory_refuses_to_start():
    p = plan(LLAMA, "h100", gpu_memory_utilization=1.0, max_model_len=8192)
    assert not p.fits
    assert any(x.code == "startup-free-memory" for x in p.problems)


def _config(**rope):
    cfg = {"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 128,
           "intermediate_size": 128, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}
    if rope:
        cfg["rope_scaling"] = rope
    return spec_from_config(cfg, model_id="t", source="test")


def test_default_max_model_len_rules():
    """vllm/config/model.py _get_and_verify_max_len: llama3 not scaled; yarn → original × factor
    up to 0.26, max_position_embeddings kept from 0.30; linear scaled by factor."""
    llama = load_catalog_model(find_model_entry(LLAMA))
    assert vllm.derived_max_model_len(llama, vllm.ERAS[-1])[0] == 131072
    yarn = _config(type="yarn", factor=4.0, original_max_position_embeddings=32768)
    assert vllm.derived_max_model_len(yarn, vllm.select_era("0.26.0")[0])[0] == 131072
    assert vllm.derived_max_model_len(yarn, vllm.select_era("0.33.0")[0])[0] == 32768
    linear = _config(type="linear", factor=2.0)
    assert vllm.derived_max_model_len(linear, vllm.ERAS[-1])[0] == 65536


@pytest.mark.parametrize("version,code", [("0.4.0", "engine-version-not-modelled"),
                                          ("0.40.0", "engine-version-newer"),
                                          ("0.17.1", "engine-version-boundary-uncertain")])
def test_unmodelled_versions_warn_and_use_nearest_era(version, code):
    p = plan(LLAMA, "h100", engine_version=version, max_model_len=8192)
    assert any(x.code == code and x.severity == "warning" for x in p.problems)


@pytest.mark.parametrize("version", ["0.19.0", "0.20.0", "0.33.0"])
def test_read_versions_do_not_warn(version):
    """0.19.0 sits in the unread 0.16–0.19 range but its start-up logs were read (calibration)."""
    assert vllm.select_era(version)[1] == []


@settings(max_examples=40, deadline=None)
@given(a=st.floats(20, 200), b=st.floats(20, 200))
def test_more_memory_never_fewer_kv_tokens(a, b):
    lo, hi = sorted((a, b))
    p_lo = plan(LLAMA, "h100", gpu_memory_gib=lo, max_model_len=4096)
    p_hi = plan(LLAMA, "h100", gpu_memory_gib=hi, max_model_len=4096)
    assert p_hi.kv_cache.tokens >= p_lo.kv_cache.tokens
    assert p_hi.kv_cache.num_blocks >= p_lo.kv_cache.num_blocks


@settings(max_examples=30, deadline=None)
@given(util=st.floats(0.5, 0.98), length=st.integers(256, 131072))
def test_fit_agrees_with_capacity(util, length):
    p = plan(LLAMA, "h100", gpu_memory_utilization=round(util, 2), max_model_len=length)
    need = -(-length // 16) + 1  # blocks + null block (0.33)
    assert p.fits == (p.kv_cache.num_blocks >= need and p.memory.kv_cache_bytes > 0)
    assert p.kv_cache.max_model_len_fit <= 131072


def test_target_concurrency_recommendation():
    """With N requests and no length given, the recommended length is the largest with
    N × cdiv(L, 16) ≤ blocks − 1; a length the user gave is kept (issue 16: explicit flags stay
    in the serve line) when its N requests fit."""
    workload = __import__("kvplan").Workload(target_concurrency=10)
    p = plan(LLAMA, "h100", workload=workload)
    usable = p.kv_cache.num_blocks - 1
    assert p.recommendations.max_model_len.value == min(131072, (usable // 10) * 16)
    assert "--max-num-seqs" in p.command
    given = plan(LLAMA, "h100", max_model_len=32768, workload=workload)
    assert given.recommendations.max_model_len.value == 32768
    assert "--max-model-len 32768" in given.command


def test_v0_defaults_and_whole_prompt_profile():
    """V0 (vllm/config.py SchedulerConfig, 0.6.6): 256 sequences, max_num_batched_tokens =
    max(max_model_len, 2048) without chunked prefill, which turns on above 32K (then 2048);
    utilization 0.90; printed capacity = # GPU blocks × 16."""
    p = plan(LLAMA, "rtx-3090", engine_version="0.6.4", max_model_len=20000)
    assert p.inputs["max_num_seqs"].value == 256
    assert p.inputs["max_num_batched_tokens"].value == 20000
    assert p.inputs["gpu_memory_utilization"].value == 0.90
    assert p.kv_cache.tokens == p.kv_cache.num_blocks * 16
    long = plan(LLAMA, "h100", engine_version="0.6.4", max_model_len=65536)
    assert long.inputs["max_num_batched_tokens"].value == 2048


def test_v0_profile_peak_is_the_sort_path_sampler_for_a_large_vocab():
    """V0 profiles with top_p=0.99, top_k=vocab − 1 (worker/model_runner.py `profile_run`,
    v0.6.6), so `_apply_top_k_top_p` holds bf16 logits (2 B), an fp32 copy (4), sorted values
    (4) and int64 indices (8), two bool masks (1 + 1), softmax (4), cumsum (4) and the scatter
    (4) = 32 B per logit. Qwen2.5-32B at TP2, 10,000 tokens: 256 × 152,064 × 32 B plus the
    10,000 × 5,120 × 2 B hidden states exceeds the forward pass (issue 15815 logs 1.26 GiB)."""
    p = plan("Qwen/Qwen2.5-32B-Instruct", "l40s", engine_version="0.7.3",
             tensor_parallel_size=2, max_model_len=10000)
    assert p.memory.activation_bytes == 10000 * 5120 * 2 + 256 * 152064 * 32


def test_v0_allocates_sliding_layers_fully():
    """V0 has no hybrid KV manager: Gemma 2's sliding layers hold the whole length."""
    v0 = plan("google/gemma-2-9b-it", "h100", engine_version="0.6.4", max_model_len=8192)
    v1 = plan("google/gemma-2-9b-it", "h100", engine_version="0.19.0", max_model_len=8192,
              max_num_batched_tokens=2048)
    assert v0.kv_cache.bytes_per_request == 42 * 8192 * 2 * 8 * 256 * 2
    # V1: the 21 sliding layers hold cdiv(4095 + 2048, 16) + 1 = 385 of 512 blocks.
    assert v1.kv_cache.bytes_per_request == (512 + 385) * 21 * 16 * 2 * 8 * 256 * 2


def test_v1_before_0_11_warns_and_uses_the_first_v1_era():
    p = plan(LLAMA, "h100", engine_version="0.9.2", max_model_len=8192)
    assert p.engine.era == "v1 0.11–0.19"
    assert any(x.code == "engine-version-boundary-uncertain" for x in p.problems)


@pytest.mark.parametrize("gpu,usage,tokens,seqs", [
    ("h100", "serve", 8192, 1024), ("h100", "llm", 16384, 1024),
    ("l40s", "serve", 2048, 256), ("l40s", "llm", 8192, 256), ("b200", "llm", 16384, 1024)])
def test_batch_defaults_by_usage_context(gpu, usage, tokens, seqs):
    """vllm/engine/arg_utils.py get_batch_defaults (0.33.0): the offline LLM class batches
    more tokens per step than `vllm serve` on the same GPU."""
    p = plan(LLAMA, gpu, max_model_len=8192, usage_context=usage)
    assert (p.inputs["max_num_batched_tokens"].value, p.inputs["max_num_seqs"].value) == (
        tokens,
        seqs,
    )
