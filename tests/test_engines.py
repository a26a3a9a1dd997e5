"""SGLang and TGI accounting (reference/ENGINE_MEMORY.md §2–3) and `kvplan compare`."""

from __future__ import annotations

import json
import math

import pytest
from clirun import run

from kvplan import plan
from kvplan.catalog import resolve_model
from kvplan.engines import sglang, tgi
from kvplan.errors import InvalidInputError

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
GiB = 2**30
H100_CUDA_TOTAL = 81008 * 2**20  # GPUS.md: nvidia-smi 81559 MiB − 551 MiB
LLAMA_WEIGHTS = 8_030_261_248 * 2 + 131072 * 128 * 2  # bf16 + RoPE cache


@pytest.mark.parametrize("smi_mib,fraction", [(81559, 0.830), (143771, 0.903)])
def test_sglang_default_mem_fraction(smi_mib, fraction):
    """§2 worked example: reserved = 512 + 1.5 × 8192 + 1/8 × 1024 + 2 × 256 + 8 × 58 prefill
    graph sizes = 13,904 MiB → H100 (81,559 MiB) 0.830, H200 (143,771 MiB) 0.903."""
    assert sglang.prefill_graph_sizes(8192) == 58
    assert sglang.default_mem_fraction(smi_mib, 1, 1, 8192, 256, mla=False) == fraction


def test_sglang_llama_8b_h100_pool_is_about_411k_tokens():
    """§2 example: KV = f × free_before_load − weights; free_before = total − 0.59 GiB context;
    131,072 B per token → ≈411K tokens."""
    p = plan(LLAMA, "h100", engine="sglang")
    free_before = H100_CUDA_TOTAL - int(0.59 * GiB)
    expected = (math.floor(0.830 * free_before) - LLAMA_WEIGHTS) // 131072
    assert p.kv_cache.tokens == expected
    assert round(expected, -3) == 411_000
    assert p.inputs["gpu_memory_utilization"].value == 0.83
    assert "--mem-fraction-static 0.83" in p.command and p.command.startswith("python -m sglang.launch_server")


def test_sglang_cells_for_mla_and_sliding_window():
    """MLA: (512 + 64) × 2 B × 61 layers, replicated; hybrid SWA: full layers + 0.8 × sliding
    layers (swa_full_tokens_ratio) — gemma-2-9b: 2·8·256·2 B × (21 + 0.8 × 21)."""
    assert plan("deepseek-ai/DeepSeek-V3", "h200", engine="sglang", tensor_parallel_size=8
                ).kv_cache.bytes_per_token == 70_272
    assert sglang.cell_bytes(resolve_model("google/gemma-2-9b-it"), 1, "bfloat16")[0] == int(8192 * 37.8)


def test_sglang_context_length_takes_the_first_key():
    """SGLang reads seq_length before max_position_embeddings (GLM-4: both 131072 → same);
    Llama 3.1's llama3 RoPE is not multiplied (131072)."""
    assert sglang.context_length(resolve_model(LLAMA)) == 131072
    assert sglang.context_length(resolve_model("Qwen/Qwen2.5-7B-Instruct")) == 32768


def test_sglang_weights_that_do_not_fit_say_so():
    """Llama-3.1-70B: 131 GiB of weights. TP2 leaves 65.7 GiB per GPU against 0.828 × 78.5 GiB
    = 65.0 GiB of fraction → still no pool; TP4 is the smallest that serves 131,072 tokens."""
    p = plan("meta-llama/Llama-3.1-70B-Instruct", "h100", engine="sglang")
    assert not p.fits and any(x.code == "no-kv-memory" for x in p.problems)
    assert p.recommendations.tensor_parallel_size.value == 4


def test_tgi_keeps_ten_percent_and_infers_max_batch_total_tokens():
    """§3: tokens = (0.9 × fraction × total − context − weights − warm-up peak) / bytes per
    token, block size 1 (flashinfer, head_dim 128)."""
    p = plan(LLAMA, "h100", engine="tgi")
    used = int(0.70 * GiB) + LLAMA_WEIGHTS + p.memory.activation_bytes
    assert p.kv_cache.tokens == (math.floor(0.9 * H100_CUDA_TOTAL) - used) // 131072
    assert p.kv_cache.block_size == 1
    assert p.command.startswith("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct")
    assert "--max-total-tokens 131072" in p.command and "--max-input-tokens 131071" in p.command
    half = plan(LLAMA, "h100", engine="tgi", gpu_memory_utilization=0.5)
    assert half.kv_cache.tokens < p.kv_cache.tokens


def test_tgi_allocates_full_heads_for_every_layer():
    """No sliding-window savings in TGI: gemma-2-9b = 42 × 8 × 256 × 2 × 2 B per token."""
    m = resolve_model("google/gemma-2-9b-it")
    assert tgi.bytes_per_token(m, 1, "bfloat16") == 42 * 8 * 256 * 2 * 2


def test_vllm_only_flags_are_rejected_for_other_engines():
    with pytest.raises(InvalidInputError, match="does not have"):
        plan(LLAMA, "h100", engine="tgi", pipeline_parallel_size=2)
    with pytest.raises(InvalidInputError, match="unknown --engine"):
        plan(LLAMA, "h100", engine="trt")


@pytest.mark.parametrize("model", [LLAMA, "deepseek-ai/DeepSeek-V2-Lite", "google/gemma-3-27b-it"])
def test_compare_dense_mla_and_hybrid(capsys, model):
    code, out, err = run(capsys, "compare", model, "--gpu", "h200", "--json")
    assert code == 0, err
    plans = json.loads(out)["plans"]
    assert [p["engine"]["name"] for p in plans] == ["vllm", "sglang", "tgi"]
    assert all(p["kv_cache"]["tokens"] > 0 for p in plans)
    assert plans[1]["engine"]["knobs"]["gpu_memory_utilization"] == "--mem-fraction-static"


def test_compare_table_names_each_engines_knobs(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "compare", LLAMA, "--gpu", "h100")
    assert code == 0
    assert "--mem-fraction-static" in out and "--cuda-memory-fraction" in out and "--gpu-memory-utilization" in out


def test_plan_engine_flag_on_the_cli(capsys):
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "sglang", "--json")
    assert code == 0 and json.loads(out)["engine"]["name"] == "sglang"
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "trt")
    assert code == 2 and "unknown --engine" in err


@pytest.mark.parametrize("tp,fraction", [(1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)])
def test_sglang_0_4_fraction_by_tp(tp, fraction):
    """Before 0.5.3: mem_fraction_static by TP size (older server_args.py; 0.4.x logs in
    benchmarks/data/sglang_logs.csv show 0.88 at TP1 and 0.85 at TP4)."""
    assert sglang.legacy_mem_fraction(tp, multimodal=False) == fraction


def test_sglang_0_4_multimodal_fraction_and_no_swa_pool():
    """sgl-project/sglang PR 4826 log (0.4.4, gemma-3-4b-it): 139.21 GB free before loading,
    8.13 GB weights, 834,615 tokens = 0.88 × 0.95 = 0.836 of the free memory minus the weights
    over 34 layers × 4 KV heads × 256 × 2 × 2 B (every layer full: no SWA pool then)."""
    m = resolve_model("google/gemma-3-4b-it")
    assert sglang.legacy_mem_fraction(1, multimodal=True) == 0.836
    assert sglang.cell_bytes(m, 1, "bfloat16", swa_pool=False)[0] == 34 * 4 * 256 * 2 * 2
    assert int((0.836 * 139.21 - 8.13) * GiB) // (34 * 4 * 256 * 2 * 2) == pytest.approx(834_615, rel=0.002)
