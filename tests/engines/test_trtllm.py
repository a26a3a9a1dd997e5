"""TensorRT-LLM memory accounting (kvplan/engines/trtllm.py): hand-worked values from public
logs (benchmarks/data/trtllm_logs.csv), eras, launch line, YAML options, invariants."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import plan
from kvplan.deploy.commands import load_yaml
from kvplan.engines import trtllm
from kvplan.engines.trtllm_options import parse_options_document
from kvplan.errors import InvalidConfigError, InvalidInputError
from kvplan.sources.catalog import resolve_model
from kvplan.units import GiB


def parse_extra_llm_api_options(text: str, path: str | None = None) -> dict:
    """The LLM API options a TensorRT-LLM options YAML sets, read as kvplan reads the file."""
    return parse_options_document(load_yaml(text, path=path), path=path)


LLAMA31_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA2_7B = "meta-llama/Llama-2-7b-hf"


@pytest.fixture(scope="module")
def llama31():
    return resolve_model(LLAMA31_8B)


@pytest.fixture(scope="module")
def llama2():
    return resolve_model(LLAMA2_7B)


# --------------------------------------------------------------------- bytes per token


def test_bytes_per_token_gqa_fp8_matches_trt6294(llama31):
    # TRT#6294: 52.51 GiB / 860320 tokens = 65536 B = 32 layers × 8 KV heads × 128 × 2 × 1 B.
    assert trtllm.bytes_per_token(llama31, kv_dtype="fp8") == 65536
    assert round(52.51 * GiB / 860320) == pytest.approx(65536, rel=1e-4)


def test_bytes_per_token_mha_fp16_matches_trt1400(llama2):
    # TRT#1400: "Allocate 69524783104 bytes for k/v cache" / "Using 132608 tokens" = 524288 B.
    assert 69524783104 // 132608 == 524288
    assert trtllm.bytes_per_token(llama2, kv_dtype="float16") == 524288


def test_bytes_per_token_splits_kv_heads_by_tp_and_layers_by_pp(llama31):
    assert trtllm.bytes_per_token(llama31, tp=2, kv_dtype="bfloat16") == 32 * 4 * 128 * 2 * 2
    # attention-DP keeps every KV head on each rank
    assert trtllm.bytes_per_token(llama31, tp=2, kv_dtype="bfloat16", attention_dp=True) == 131072
    assert trtllm.bytes_per_token(llama31, pp=2, kv_dtype="bfloat16") == 131072 // 2
    # replicated, not fewer than one head, once tp > kv heads
    assert trtllm.bytes_per_token(llama31, tp=16, kv_dtype="bfloat16") == 32 * 1 * 128 * 2 * 2


def test_bytes_per_token_mla_latent_replicated():
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    one = trtllm.bytes_per_token(m, tp=1, kv_dtype="bfloat16")
    assert one == 61 * (512 + 64) * 2  # kv_factor 1, head_dim = kv_lora_rank + rope dim
    assert trtllm.bytes_per_token(m, tp=8, kv_dtype="bfloat16") == one


def test_sliding_window_layers_count_fully():
    # get_cache_size_per_token multiplies by the number of attention layers
    m = resolve_model("google/gemma-2-9b-it")
    assert (
        trtllm.bytes_per_token(m, kv_dtype="bfloat16")
        == m.num_layers * m.num_kv_heads * m.head_dim * 4
    )


def test_unknown_kv_dtype_rejected(llama31):
    with pytest.raises(InvalidInputError):
        trtllm.bytes_per_token(llama31, kv_dtype="fp5")


# --------------------------------------------------------------------- pool arithmetic


def test_pool_rounds_max_tokens_up_to_blocks_trt6294():
    # TRT#6294: "max_tokens are set (to 0.8 and 860308)" → "Allocated 52.51 GiB … (860320)":
    # ceil(860308 / 32) = 26885 blocks = 860320 tokens; 860320 × 65536 B = 52.51 GiB.
    p = trtllm.pool(10**15, 65536, 32, max_tokens=860308)
    assert (p.blocks, p.tokens) == (26885, 860320)
    assert round(p.tokens * 65536 / GiB, 2) == 52.51


def test_engine_budget_memory_md_sample():
    # memory.md @7ff5302: available 70.48 GiB, default 0.9, 64-token blocks; logged 4060 blocks,
    # 259840 tokens, 63.44 GiB. 0.9 × 70.48 GiB / 262144 B = 0.9 × 70.48 × 4096 = 259817.5 →
    # 259817 tokens → ceil(/64) = 4060 blocks = 259840 tokens.
    budget = trtllm.engine_budget(free_bytes=int(70.48 * GiB), fraction=0.9)
    p = trtllm.pool(budget, 262144, 64)
    assert p.estimate_tokens == 259817
    assert (p.blocks, p.tokens) == (4060, 259840)
    assert round(p.tokens * 262144 / GiB, 2) == 63.44


def test_engine_budget_trt2268_blocks():
    # TRT#2268 (0.13): available 21.89 GiB; Qwen1.5-7B fp16 MHA 524288 B/token; default 0.9 and
    # the era's 64-token blocks: 0.9 × 21.89 × 2048 = 40348.6 tokens → ceil(/64) = 631 blocks,
    # as logged ("Number of blocks in KV cache primary pool: 631"); 32-token blocks would give 1261.
    era, _ = trtllm.select_era("0.13.0", "engine")
    budget = trtllm.engine_budget(free_bytes=int(21.89 * GiB), fraction=era.default_fraction)
    assert trtllm.pool(budget, 524288, era.tokens_per_block).blocks == 631
    assert trtllm.pool(budget, 524288, 32).blocks == 1261


def test_fraction_must_be_below_one(llama31):
    # both runtimes assert freeMemFraction < 1.0
    with pytest.raises(InvalidInputError):
        trtllm.engine_budget(free_bytes=GiB, fraction=1.0)
    era, _ = trtllm.select_era("1.0.0")
    with pytest.raises(InvalidInputError):
        trtllm.plan_pytorch(llama31, era, total_bytes=80 * GiB, weights_bytes=[16 * GiB],
                            activation_bytes=0, non_torch_bytes=0, kv_dtype="bfloat16",
                            fraction=1.0, max_seq_len=4096)


def test_block_rounding_by_era():
    # ≤ 1.1: math.ceil(max_tokens / tokens_per_block); later snapshots: int(max_tokens // tpb)
    assert trtllm.pool(10**15, 65536, 32, 860308, "ceil").tokens == 860320
    assert trtllm.pool(10**15, 65536, 32, 860308, "floor").tokens == 860288
    assert trtllm.select_era("1.0.0")[0].block_rounding == "ceil"
    assert trtllm.select_era("1.2.0")[0].block_rounding == "floor"


def test_nvfp4_kv_adds_scales(llama31):
    # 32 × 8 × 128 × 2 = 65536 values: 32768 B of FP4 + 4096 B of FP8 scales (1 per 16)
    assert trtllm.bytes_per_token(llama31, kv_dtype="nvfp4") == 32768 + 4096


def test_pytorch_temporary_pool_cancels():
    # peak includes the temporary KV pool; it is added back (_util.py `_cal_max_memory`)
    a = trtllm.pytorch_budget_from_peak(total_bytes=80 * GiB, peak_bytes=20 * GiB + 3 * GiB,
                                        temp_kv_bytes=3 * GiB, fraction=0.9)
    b = trtllm.pytorch_budget(
        total_bytes=80 * GiB,
        weights_bytes=15 * GiB,
        activation_bytes=4 * GiB,
        non_torch_bytes=GiB,
        fraction=0.9,
    )
    assert a == b == int(0.9 * 60 * GiB)


def test_plan_pytorch_hand_worked(llama31):
    # 0.9 × (80 − 16 − 2 − 2) GiB = 54 GiB; / 131072 B = 442368 tokens = 13824 × 32-token blocks.
    era, _ = trtllm.select_era("1.0.0")
    r = trtllm.plan_pytorch(llama31, era, total_bytes=80 * GiB, weights_bytes=[16 * GiB],
                            activation_bytes=2 * GiB, non_torch_bytes=2 * GiB, kv_dtype="bfloat16",
                            fraction=0.9, max_seq_len=131072)
    assert (r.tokens, r.num_blocks, r.block_size) == (442368, 13824, 32)
    assert r.kv_bytes == 54 * GiB and r.budget_bytes == 54 * GiB and r.fits
    assert r.bytes_per_block == 32 * 131072
    assert "0.9 ×" in r.explanation


def test_plan_max_tokens_cap_and_min_over_stages(llama31):
    era, _ = trtllm.select_era("1.0.0")
    capped = trtllm.plan_pytorch(llama31, era, total_bytes=80 * GiB, weights_bytes=[16 * GiB],
                                 activation_bytes=0, non_torch_bytes=0, kv_dtype="bfloat16",
                                 fraction=0.9, max_seq_len=4096, max_tokens=100000)
    assert capped.tokens == 100000 // 32 * 32 + 32 * (100000 % 32 > 0)
    # PP2: the stage with more weights decides for every rank
    staged = trtllm.plan_pytorch(
        llama31,
        era,
        total_bytes=80 * GiB,
        weights_bytes=[8 * GiB, 10 * GiB],
        activation_bytes=0,
        non_torch_bytes=0,
        kv_dtype="bfloat16",
        fraction=0.5,
        max_seq_len=4096,
    )
    assert staged.tokens == 35 * GiB // 65536


def test_plan_shortfall_is_negative_with_a_problem(llama31):
    era, _ = trtllm.select_era("1.0.0")
    r = trtllm.plan_pytorch(llama31, era, total_bytes=16 * GiB, weights_bytes=[15 * GiB],
                            activation_bytes=2 * GiB, non_torch_bytes=GiB, kv_dtype="bfloat16",
                            fraction=0.9, max_seq_len=4096)
    assert r.kv_bytes < 0 and r.tokens == 0 and not r.fits
    assert [p.code for p in r.problems if p.severity == "error"] == ["no-kv-memory"]


def test_plan_engine_too_short_for_max_seq_len(llama2):
    era, _ = trtllm.select_era("0.12.0", "engine")
    r = trtllm.plan_engine(
        llama2,
        era,
        total_bytes=16 * GiB,
        engine_bytes=[13 * GiB],
        exec_context_bytes=GiB,
        runtime_buffer_bytes=0,
        decoder_bytes=0,
        context_bytes=GiB // 2,
        kv_dtype="float16",
        fraction=0.9,
        max_seq_len=4096,
    )
    assert 0 < r.tokens < 4096 and not r.fits
    assert any(p.code == "max-model-len-too-long" for p in r.problems)


# --------------------------------------------------------------------- eras and defaults


def test_eras():
    assert trtllm.select_era("0.5.0", "engine")[0].default_fraction == 0.85
    e12 = trtllm.select_era("0.12.0.dev2024073000", "engine")[0]
    assert (e12.default_fraction, e12.tokens_per_block) == (0.9, 64)
    assert trtllm.select_era("0.19.0", "engine")[0].tokens_per_block == 32
    assert trtllm.select_era("0.18.0")[0].budget_unit == "tokens"
    assert trtllm.select_era("1.2.0")[0].budget_unit == "bytes"
    # a release past the newest read: the planner says so, for every engine (planner.py)
    newer = plan(
        "meta-llama/Llama-3.1-8B-Instruct", "h100", engine="trtllm", engine_version="9.0.0"
    )
    assert [p.code for p in newer.problems if p.code.startswith("engine-version")] == [
        "engine-version-newer"]
    with pytest.raises(InvalidInputError):
        trtllm.select_era("1.0.0", "onnx")


def test_defaults(llama31):
    d = trtllm.defaults("1.0.0", llama31)
    assert (d.max_batch_size, d.max_num_tokens, d.max_seq_len) == (2048, 8192, 131072)
    assert (d.free_gpu_memory_fraction, d.tokens_per_block, d.backend_flag_needed) == (
        0.9,
        32,
        False,
    )
    assert trtllm.defaults("0.19.0", llama31).backend_flag_needed


def test_dummy_requests():
    # _create_dummy_context_requests: prompts of min(max_num_tokens, input length)
    assert trtllm.dummy_requests(8192, 131072) == 1
    assert trtllm.dummy_requests(23552, 157) == 151


# --------------------------------------------------------------------- launch line and YAML


def test_launch_command_plain():
    line, yaml_text = trtllm.launch_command(
        LLAMA31_8B,
        tp=2,
        max_batch_size=256,
        max_num_tokens=8192,
        max_seq_len=32768,
        free_gpu_memory_fraction=0.85,
    )
    assert line == (
        "trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 2 --max_batch_size 256 "
        "--max_num_tokens 8192 --max_seq_len 32768 --kv_cache_free_gpu_memory_fraction 0.85"
    )
    assert yaml_text is None


def test_launch_command_with_yaml_round_trips():
    line, yaml_text = trtllm.launch_command(LLAMA31_8B, pp=2, ep=4, kv_cache_dtype="fp8_e4m3",
                                            free_gpu_memory_fraction=0.8, max_tokens=100000,
                                            backend_flag=True)
    assert "--backend pytorch" in line and "--pp_size 2" in line and "--ep_size 4" in line
    assert line.endswith("--extra_llm_api_options extra_llm_api_options.yaml")
    assert parse_extra_llm_api_options(yaml_text) == {
        "free_gpu_memory_fraction": 0.8, "max_tokens": 100000, "kv_cache_dtype": "fp8"}


def test_flag_table():
    assert trtllm.FLAGS["gpu_memory_utilization"] == "--kv_cache_free_gpu_memory_fraction"
    assert trtllm.FLAGS["max_num_seqs"] == "--max_batch_size"
    assert trtllm.FLAGS["block_size"] == "kv_cache_config.tokens_per_block"  # YAML only
    eng = trtllm.TrtllmEngine()
    assert "enforce_eager" in eng.unsupported
    assert not set(trtllm.FLAGS) & eng.unsupported


def test_parse_yaml_fields():
    text = """
kv_cache_config:
  free_gpu_memory_fraction: 0.75
  max_tokens: 4096
  dtype: fp8
  enable_block_reuse: false
max_batch_size: 64
max_num_tokens: 2048
max_seq_len: 8192
tensor_parallel_size: 4
moe_expert_parallel_size: 2
cuda_graph_config:
  max_batch_size: 64
"""
    assert parse_extra_llm_api_options(text) == {
        "free_gpu_memory_fraction": 0.75, "max_tokens": 4096, "kv_cache_dtype": "fp8",
        "enable_block_reuse": False, "max_batch_size": 64, "max_num_tokens": 2048,
        "max_seq_len": 8192, "tensor_parallel_size": 4, "expert_parallel_size": 2}
    assert parse_extra_llm_api_options("") == {}


@pytest.mark.parametrize(
    "text, field",
    [
        (
            "kv_cache_config:\n  free_gpu_memory_fraction: 1.5\n",
            "kv_cache_config.free_gpu_memory_fraction",
        ),
        (
            "kv_cache_config:\n  free_gpu_memory_fraction: high\n",
            "kv_cache_config.free_gpu_memory_fraction",
        ),
        ("kv_cache_config:\n  max_tokens: 10.5\n", "kv_cache_config.max_tokens"),
        ("kv_cache_config:\n  max_tokens: 0\n", "kv_cache_config.max_tokens"),
        ("kv_cache_config:\n  dtype: fp4\n", "kv_cache_config.dtype"),
        ("kv_cache_config:\n  enable_block_reuse: 1\n", "kv_cache_config.enable_block_reuse"),
        ("kv_cache_config: 0.9\n", "kv_cache_config"),
        ("max_batch_size: true\n", "max_batch_size"),
        ("tensor_parallel_size: -2\n", "tensor_parallel_size"),
        ("backend: onnx\n", "backend"),
    ],
)
def test_parse_yaml_errors_name_the_field(text, field):
    with pytest.raises(InvalidConfigError) as e:
        parse_extra_llm_api_options(text, path="extra.yaml")
    assert e.value.field == field and "extra.yaml" in str(e.value)


def test_parse_yaml_not_yaml_or_not_mapping():
    with pytest.raises(InvalidConfigError):
        parse_extra_llm_api_options("a: [1, 2\n")
    with pytest.raises(InvalidConfigError):
        parse_extra_llm_api_options("- 1\n- 2\n")


# --------------------------------------------------------------------- properties


def _plan(m, total_gib, fraction, max_tokens=None):
    era, _ = trtllm.select_era("1.0.0")
    return trtllm.plan_pytorch(m, era, total_bytes=int(total_gib * GiB), weights_bytes=[15 * GiB],
                               activation_bytes=2 * GiB, non_torch_bytes=GiB, kv_dtype="bfloat16",
                               fraction=fraction, max_seq_len=8192, max_tokens=max_tokens)


@settings(max_examples=60, deadline=None)
@given(st.floats(10, 300), st.floats(0, 50), st.floats(0.05, 0.99))
def test_more_memory_never_fewer_tokens(llama31, total, extra, fraction):
    assert _plan(llama31, total + extra, fraction).tokens >= _plan(llama31, total, fraction).tokens


@settings(max_examples=60, deadline=None)
@given(st.floats(10, 300), st.floats(0.05, 0.95), st.floats(0, 0.5))
def test_larger_fraction_never_fewer_tokens(llama31, total, fraction, more):
    hi = min(0.99, fraction + more)
    assert _plan(llama31, total, hi).tokens >= _plan(llama31, total, fraction).tokens


@settings(max_examples=60, deadline=None)
@given(st.floats(10, 300), st.integers(1, 2_000_000), st.sampled_from([16, 32, 64]))
def test_max_tokens_cap_respected(llama31, total, cap, tpb):
    era, _ = trtllm.select_era("1.0.0")
    r = trtllm.plan_pytorch(llama31, era, total_bytes=int(total * GiB), weights_bytes=[15 * GiB],
                            activation_bytes=2 * GiB, non_torch_bytes=GiB, kv_dtype="bfloat16",
                            fraction=0.9, max_seq_len=8192, max_tokens=cap, tokens_per_block=tpb)
    est = max(0, r.budget_bytes) // r.bytes_per_token
    # the cap wins when smaller, then whole blocks (rounded up)
    assert r.tokens == -(-min(est, cap) // tpb) * tpb
    assert r.tokens <= -(-cap // tpb) * tpb and r.tokens % tpb == 0


def test_the_launch_line_runs_the_fraction_the_plan_is_planned_at():
    """Llama-2-70B on one H200: the launch line carried --kv_cache_free_gpu_memory_fraction 0.83
    (kvplan's CUDA-graph estimate taken out of the (1 − fraction) remainder) while the plan's
    inputs and KV figures were at the default 0.9, so `kvplan check` of its own line planned
    another KV cache. The PyTorch runtime captures the graphs in its estimation pass, inside
    the profiled peak the fraction applies to (_torch/pyexecutor/_util.py, KvCacheCreator
    1.0-1.2: "Memory used outside torch (e.g., NCCL and CUDA graphs)"), so 0.9 stays."""
    from kvplan.api import plan

    p = plan("meta-llama/Llama-2-70b-hf", "h200", engine="trtllm")
    assert p.fits and p.inputs["gpu_memory_utilization"].value == 0.9
    assert "--kv_cache_free_gpu_memory_fraction 0.9" in p.command
