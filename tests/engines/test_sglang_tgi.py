"""SGLang and TGI accounting (reference/ENGINE_MEMORY.md §2–3) and `kvplan compare`."""

from __future__ import annotations

import json
import math
import re

import pytest
from clirun import run

from kvplan import Workload, plan
from kvplan.engines import sglang, tgi
from kvplan.errors import InvalidInputError
from kvplan.sources.catalog import resolve_model

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
GiB = 2**30
H100_CUDA_TOTAL = 81008 * 2**20  # GPUS.md: nvidia-smi 81559 MiB − 551 MiB
LLAMA_WEIGHTS = 8_030_261_248 * 2 + 131072 * 128 * 2  # bf16 + RoPE cache
# SGLang and TGI see weights as reserved segments (kvplan/allocator.py). Worked by hand: the
# RoPE build frees a 64 MiB fp32 segment; layer 1's 48 MiB qkv_proj is carved from it and the
# other 16 MiB stay reserved; the 65 norms (8 KiB each) share one 2 MiB small-pool segment.
LLAMA_RESERVED = LLAMA_WEIGHTS + 16 * 2**20 + (2 * 2**20 - 65 * 8192)


@pytest.mark.parametrize("smi_mib,fraction", [(81559, 0.830), (143771, 0.903)])
def test_sglang_default_mem_fraction(smi_mib, fraction):
    """§2 worked example: reserved = 512 + 1.5 × 8192 + 1/8 × 1024 + 2 × 256 + 8 × 58 prefill
    graph sizes = 13,904 MiB → H100 (81,559 MiB) 0.830, H200 (143,771 MiB) 0.903."""
    assert sglang.prefill_graph_sizes(8192) == 58
    assert sglang.default_mem_fraction(smi_mib, 1, 1, 8192, 256, mla=False) == fraction


@pytest.mark.parametrize("smi_mib,tp,fraction", [
    (16303, 1, 0.818),   # RTX 5080: reserved (2.8 + 0.1) GiB = 2969.6 MiB
    (81559, 1, 0.874),   # H100: (9.5 + 0.5) GiB = 10,240 MiB
    (143771, 8, 0.886),  # H200 TP8: (12 + 4) GiB = 16,384 MiB
    (183359, 1, 0.821),  # B200: 32 GiB
])
def test_sglang_0_4_10_to_0_5_2_reserves_memory_by_gpu_tier(smi_mib, tp, fraction):
    """server_args.py `__post_init__` at 0.5.0rc0: round((mem − reserved) / mem, 3)."""
    m = resolve_model(LLAMA)
    assert sglang.tier_mem_fraction(smi_mib, tp, 1, None) == fraction
    d = sglang.defaults((0, 5, 0), m, smi_mib, tp, 1)
    assert d.mem_fraction == fraction and not d.swa_pool
    assert d.era == "sglang 0.4.10–0.5.2 accounting"


def test_sglang_tier_rule_scales_vlms_by_their_vision_tower():
    """`adjust_mem_fraction_for_vlm`: × 0.95 × clamp(1 − 0.1 × (27 × 1152² / (24 × 1024²) − 1))
    for Gemma 3's SigLIP (27 layers, hidden 1152) = × 0.9097."""
    gemma = resolve_model("google/gemma-3-27b-it")
    ratio = 27 * 1152**2 / (24 * 1024**2)
    assert sglang.tier_mem_fraction(81559, 1, 1, gemma.vision) == pytest.approx(
        0.874 * 0.95 * (1 - 0.1 * (ratio - 1)))


def test_sglang_version_picks_the_rule():
    m = resolve_model(LLAMA)
    assert sglang.defaults((0, 4, 9), m, 81559, 1, 1).mem_fraction == 0.88     # TP table
    assert sglang.defaults((0, 4, 10), m, 81559, 1, 1).mem_fraction == 0.874  # GPU tiers
    assert sglang.defaults((0, 5, 3), m, 81559, 1, 1).mem_fraction == 0.830   # reserved formula
    p = plan(LLAMA, "h100", engine="sglang", engine_version="0.5.2")
    assert p.engine.era == "sglang 0.4.10–0.5.2 accounting"
    assert p.inputs["gpu_memory_utilization"].value == 0.874


def test_sglang_cuda_graph_max_bs_sets_the_graph_reserve():
    """--cuda-graph-max-bs (sglang/srt/arg_groups/memory_hook.py, 0.5.23: a given decode max_bs
    is kept, and reserve_for_graph_mb reserves max_bs × 2 MiB). By hand, H100 TP1 (81,559 MiB):
    the default 256 reserves 13,904 MiB (§2) → 0.830; 32 reserves 13,904 − 2 × (256 − 32) =
    13,456 MiB → round(68,103 / 81,559, 3) = 0.835."""
    p = plan(LLAMA, "h100", engine="sglang", cuda_graph_max_bs=32)
    assert p.inputs["gpu_memory_utilization"].value == 0.835
    assert p.command.endswith("--mem-fraction-static 0.835 --cuda-graph-max-bs 32")
    default = plan(LLAMA, "h100", engine="sglang")
    assert default.inputs["gpu_memory_utilization"].value == 0.830
    assert p.memory.cudagraph_bytes < default.memory.cudagraph_bytes  # fewer decode graphs
    with pytest.raises(InvalidInputError, match="--cuda-graph-max-bs is not a setting vLLM has"):
        plan(LLAMA, "h100", cuda_graph_max_bs=32)


def test_sglang_llama_8b_h100_pool_is_about_411k_tokens():
    """§2 example: KV = f × free_before_load − weights; free_before = total − 0.59 GiB context;
    131,072 B per token → ≈411K tokens."""
    p = plan(LLAMA, "h100", engine="sglang")
    free_before = H100_CUDA_TOTAL - int(0.59 * GiB)
    expected = (math.floor(0.830 * free_before) - LLAMA_RESERVED) // 131072
    assert p.kv_cache.tokens == expected
    assert round(expected, -3) == 411_000
    assert p.inputs["gpu_memory_utilization"].value == 0.83
    assert "--mem-fraction-static 0.83" in p.command and p.command.startswith(
        "python -m sglang.launch_server"
    )


def test_sglang_cells_for_mla_and_sliding_window():
    """MLA: (512 + 64) × 2 B × 61 layers, replicated; hybrid SWA: full layers + 0.8 × sliding
    layers (swa_full_tokens_ratio) — gemma-2-9b: 2·8·256·2 B × (21 + 0.8 × 21)."""
    assert plan("deepseek-ai/DeepSeek-V3", "h200", engine="sglang", tensor_parallel_size=8
                ).kv_cache.bytes_per_token == 70_272
    assert sglang.cell_bytes(resolve_model("google/gemma-2-9b-it"), 1, "bfloat16")[0] == int(
        8192 * 37.8
    )


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
    token, block size 1 (flashinfer, head_dim 128); the context includes FlashInfer's 128 MiB
    workspace (layers/attention/flashinfer.py `get_workspace`)."""
    p = plan(LLAMA, "h100", engine="tgi")
    used = int(0.70 * GiB) + 128 * 2**20 + LLAMA_RESERVED + p.memory.activation_bytes
    assert p.kv_cache.tokens == (math.floor(0.9 * H100_CUDA_TOTAL) - used) // 131072
    assert p.kv_cache.block_size == 1
    assert p.command.startswith(
        "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct"
    )
    assert "--max-total-tokens 131072" in p.command and "--max-input-tokens 131071" in p.command
    half = plan(LLAMA, "h100", engine="tgi", gpu_memory_utilization=0.5)
    assert half.kv_cache.tokens < p.kv_cache.tokens


def test_tgi_allocates_full_heads_for_every_layer():
    """No sliding-window savings in TGI: gemma-2-9b = 42 × 8 × 256 × 2 × 2 B per token."""
    m = resolve_model("google/gemma-2-9b-it")
    assert tgi.bytes_per_token(m, 1, "bfloat16") == 42 * 8 * 256 * 2 * 2


@pytest.mark.parametrize("version,wiggle,on_budget", [
    ("1.4.0", 1.00, False),  # flash_causal_lm.py v1.4.0: free − (1 − f) × total, no wiggle room
    ("1.4.1", 0.95, False),  # v1.4.1: int(free × 0.95 // block) + warm-up blocks
    ("2.2.0", 0.95, False),
    ("2.3.0", 0.90, False),  # v2.3.0: free × TGI_WIGGLE_ROOM
    ("3.0.0", 0.90, True),   # v3.0.0: get_free_memory(device, MEMORY_FRACTION × TGI_WIGGLE_ROOM)
    ("3.3.7", 0.90, True),
])
def test_tgi_eras_follow_the_warmup_code_of_each_release(version, wiggle, on_budget):
    era = tgi.select_era(tuple(int(x) for x in version.split(".")))
    assert (era.wiggle_room, era.wiggle_on_budget) == (wiggle, on_budget)


def test_tgi_2x_warmup_batch_and_its_blocks():
    """TGI 2.2 defaults for Llama 3.1 (launcher v2.0.0): max_input 4095, max_total 4096,
    prefill 4095 + 50 = 4145. The router's warm-up (client.rs v2.0.4) sends ⌈4145 / 4095⌉ = 2
    requests, each for 4096 total tokens → 2 × ⌈4096 / 16⌉ = 512 paged blocks."""
    m = resolve_model(LLAMA)
    era = tgi.select_era((2, 2, 0))
    launch = tgi.Launcher("NVIDIA A10G", 23028, 1, 1.0)
    two = tgi.default_lengths(m, era, (2, 2, 0), launch)
    assert (two.max_input_tokens, two.max_total_tokens, two.prefill_tokens) == (4095, 4096, 4145)
    one = tgi.default_lengths(m, tgi.select_era((1, 4, 5)), (1, 4, 5), launch)
    assert (one.max_input_tokens, one.max_total_tokens, one.prefill_tokens) == (1024, 2048, 4096)
    assert (
        tgi.default_lengths(m, era, (2, 2, 0), launch, max_input_tokens=2048).prefill_tokens == 2098
    )
    assert tgi.block_size(m, era) == 16
    assert tgi.warmup_blocks(era, 16, 4145, 4095, 4096) == 512
    assert tgi.warmup_blocks(tgi.select_era((3, 3, 6)), 1, 4145, 4095, 4096) == 0


def test_tgi_2x_blocks_by_hand():
    """v2.2.0 warmup: blocks = ⌊0.95 × (f × total − used − 512 blocks) / block⌋ + 512, with a
    16 × 131,072 B = 2 MiB block for Llama-3.1-8B; `used` = context + weights + warm-up peak."""
    total = 22 * GiB
    p = plan(LLAMA, "a10g", engine="tgi", engine_version="2.2.0", gpu_memory_gib=22)
    used = p.memory.non_torch_bytes + p.memory.weights_bytes + p.memory.activation_bytes
    block = 16 * 131072
    expected = math.floor(0.95 * (total - used - 512 * block)) // block + 512
    assert p.kv_cache.tokens == expected * 16
    assert p.engine.era == "tgi 1.4.1–2.2 accounting"
    assert (
        p.inputs["max_model_len"].value == 4096 and p.inputs["max_num_batched_tokens"].value == 4145
    )


def test_tgi_prefill_logits_by_release():
    """The warm-up asks for prefill logprobs, so before 3.0 TGI computes logits for every
    prompt token: 4145 × 128,256 × 2 B, twice while log_softmax copies (< 2.4), + the local
    shard during the TP gather (≥ 2.4, in place); 3.0 ignores prefill logprobs unless
    REQUEST_LOGPROBS is set (flash_causal_lm.py v3.0.0)."""
    m = resolve_model(LLAMA)
    full = 4145 * 128256 * 2
    assert tgi.prefill_logits_bytes(m, tgi.select_era((2, 2, 0)), 1, 4145, "bfloat16") == 2 * full
    assert (
        tgi.prefill_logits_bytes(m, tgi.select_era((2, 4, 1)), 2, 4145, "bfloat16")
        == full + full // 2
    )
    assert tgi.prefill_logits_bytes(m, tgi.select_era((2, 4, 1)), 1, 4145, "bfloat16") == full
    assert tgi.prefill_logits_bytes(m, tgi.select_era((3, 0, 0)), 1, 4145, "bfloat16") == 0


def test_tgi_block_size_by_attention_backend():
    """launcher resolve_attention: ≤ 2.2 paged (16); from 2.3 flashinfer (1) for head_dim 64/
    128/256, else flashdecoding (256); from 2.4 paged below compute capability 8.0."""
    phi3 = resolve_model("microsoft/Phi-3-mini-4k-instruct")  # head_dim 96
    assert phi3.head_dim == 96
    assert tgi.block_size(phi3, tgi.select_era((2, 3, 0)), 7.5) == 256
    assert tgi.block_size(phi3, tgi.select_era((3, 3, 6)), 7.5) == 16
    assert tgi.block_size(phi3, tgi.select_era((3, 3, 6)), 8.9) == 256
    assert (
        tgi.block_size(
            resolve_model("deepseek-ai/DeepSeek-V2-Lite"), tgi.select_era((3, 3, 6)), 9.0
        )
        == 256
    )
    assert plan(phi3, "t4", engine="tgi").kv_cache.block_size == 16


@pytest.mark.parametrize("version,code", [("0.9.3", "engine-version-not-modelled"),
                                          ("9.0.0", "engine-version-newer"), ("3.3.4", None)])
def test_tgi_versions_outside_the_read_releases_warn(version, code):
    p = plan(LLAMA, "h100", engine="tgi", engine_version=version)
    codes = {x.code for x in p.problems}
    if code:
        assert code in codes
    else:
        assert not codes & {"engine-version-not-modelled", "engine-version-newer"}


@pytest.mark.parametrize("version", ["2.2.0", "3.3.6"])
def test_tgi_needed_fraction_is_the_smallest_that_holds_the_workload(version):
    """The recommendation names the smallest --cuda-memory-fraction (hundredths) whose KV cache
    holds 3 × 4096 tokens under that release's formula."""
    p = plan(LLAMA, "a10g", engine="tgi", engine_version=version, max_model_len=4096,
             workload=Workload(target_concurrency=3))
    needed = float(
        re.search(r"tokens need ([0-9.]+)", p.recommendations.gpu_memory_utilization.reason)[1]
    )
    at = plan(LLAMA, "a10g", engine="tgi", engine_version=version, max_model_len=4096,
              gpu_memory_utilization=needed)
    below = plan(LLAMA, "a10g", engine="tgi", engine_version=version, max_model_len=4096,
                 gpu_memory_utilization=round(needed - 0.01, 2))
    assert at.kv_cache.tokens >= 3 * 4096 > below.kv_cache.tokens


def test_tgi_3x_default_prefill_is_compute_optimal_on_known_cards():
    """launcher/src/main.rs v3.3.6: prefill = card f16 FLOP/s × shards / `Config::flop`.
    Llama-3.1-8B: (2·4096·128·(3·32 + 2·8) + 2·3·4096·14336) × 32 = 15,032,385,536 FLOP per
    token; H100 SXM ("nvidia-h100-80gb-hbm3", 900 TFLOP/s) → 59,870 tokens, A10G (125) → 8,315.
    The RTX A6000 is an "Unkown compute for card nvidia-rtx-a6000" (as the Gemma 3 log prints)
    → 4096, 8000 for Gemma 3 (a VLM has no FLOP estimate)."""
    m = resolve_model(LLAMA)
    assert tgi.model_flop_per_token(m) == 15_032_385_536
    h100 = tgi.Launcher("NVIDIA H100 80GB HBM3", 81559, 1, 1.0)
    assert tgi.default_prefill_3x(m, h100)[0] == 900 * 10**12 // 15_032_385_536 == 59_870
    assert tgi.default_prefill_3x(m, tgi.Launcher("NVIDIA A10G", 23028, 1, 1.0))[0] == 8_315
    assert tgi.default_prefill_3x(m, tgi.Launcher("NVIDIA RTX A6000", 49140, 1, 1.0))[0] == 4096
    gemma = resolve_model("google/gemma-3-27b-it")
    assert (
        tgi.default_prefill_3x(gemma, tgi.Launcher("NVIDIA H100 80GB HBM3", 81559, 2, 1.0))[0]
        == 8000
    )
    p = plan(LLAMA, "h100", engine="tgi")
    assert p.inputs["max_num_batched_tokens"].value == 59_870
    assert any(x.code == "tgi-default-prefill" for x in p.problems)


def test_tgi_3x_default_prefill_reads_the_configs_own_model_type():
    """Regression: the launcher's fallback prefill is 10000 for config.json model_type
    "qwen2_vl" / "qwen2_5_vl" (launcher/src/main.rs v3.3.6; reference ENGINE_MEMORY.md §3
    "10000 for qwen2-vl/qwen2.5-vl"); it matches the top-level model_type (its RawConfig), but
    kvplan's ModelSpec.model_type is the language model's family, "qwen2", so the 10000 never
    applied and Qwen2.5-VL got 4096. A VLM has no FLOP estimate, so the fallback is taken."""
    qwen_vl = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert qwen_vl.model_type == "qwen2"
    h100 = tgi.Launcher("NVIDIA H100 80GB HBM3", 81559, 1, 1.0)
    assert tgi.default_prefill_3x(qwen_vl, h100)[0] == 10000
    # a text-only Qwen2 keeps the compute-optimal value, not the VLM fallback
    assert tgi.default_prefill_3x(resolve_model("Qwen/Qwen2.5-7B-Instruct"), h100)[0] != 10000
    p = plan("Qwen/Qwen2.5-VL-7B-Instruct", "h100", engine="tgi")
    assert any(x.code == "tgi-default-prefill" and "10,000" in x.message for x in p.problems)
    # text-only Gemma 3 is config model_type "gemma3_text" (Gemma3ForCausalLM), not the launcher's
    # "gemma3": on a card the launcher does not know it gets 4096, the multimodal 27B 8000
    a6000 = tgi.Launcher("NVIDIA RTX A6000", 49140, 1, 1.0)
    assert tgi.default_prefill_3x(resolve_model("google/gemma-3-1b-it"), a6000)[0] == 4096
    assert tgi.default_prefill_3x(resolve_model("google/gemma-3-27b-it"), a6000)[0] == 8000


def test_tgi_3x_default_prefill_is_capped_by_the_launchers_vram_estimate():
    """`vram_maximum` on a T4 ("Tesla T4" is not in the launcher's card table → 4096): available
    = 15,360 MiB × 0.95 = 15,300,820,992 B; the launcher's model size for Llama-3.1-8B =
    (32 × (3·14336·4096 + 48·128 + 32·128·4096) + 2·128256·4096) × 2 = 14,449,770,496 B; per
    token 131,072 + 21,504 × 6 = 260,096 B → (15,300,820,992 − 14,449,770,496) // 260,096 =
    3,272 tokens."""
    m = resolve_model(LLAMA)
    t4 = tgi.Launcher("Tesla T4", 15360, 1, 1.0)
    assert tgi.vram_maximum_tokens(m, t4) == 3_272
    assert tgi.default_prefill_3x(m, t4)[0] == 3_272
    assert (
        tgi.vram_maximum_tokens(m, tgi.Launcher("NVIDIA L4", 23034, 1, 0.5)) is None
    )  # model > VRAM


def test_vllm_only_flags_are_rejected_for_other_engines():
    with pytest.raises(InvalidInputError, match="not a setting TGI has"):
        plan(LLAMA, "h100", engine="tgi", pipeline_parallel_size=2)
    with pytest.raises(InvalidInputError, match="not a setting vLLM has(.|\n)*--engine tgi"):
        plan(LLAMA, "h100", max_input_tokens=4095)
    with pytest.raises(InvalidInputError, match="unknown --engine"):
        plan(LLAMA, "h100", engine="trt")


@pytest.mark.parametrize("model", [LLAMA, "deepseek-ai/DeepSeek-V2-Lite", "google/gemma-3-27b-it"])
def test_compare_dense_mla_and_hybrid(capsys, model):
    code, out, err = run(capsys, "compare", model, "--gpu", "h200", "--json")
    assert code == 0, err
    plans = json.loads(out)["plans"]
    assert [p["engine"]["name"] for p in plans] == ["vllm", "sglang", "tgi", "trtllm"]
    assert all(p["kv_cache"]["tokens"] > 0 for p in plans)
    assert plans[1]["engine"]["knobs"]["gpu_memory_utilization"] == "--mem-fraction-static"


def test_compare_table_names_each_engines_knobs(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "compare", LLAMA, "--gpu", "h100")
    assert code == 0
    assert (
        "--mem-fraction-static" in out
        and "--cuda-memory-fraction" in out
        and "--gpu-memory-utilization" in out
    )


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
    assert int((0.836 * 139.21 - 8.13) * GiB) // (34 * 4 * 256 * 2 * 2) == pytest.approx(
        834_615, rel=0.002
    )


def test_tgi_warmup_batch_kv_is_named_when_it_leaves_no_memory():
    """TGI 2.x warm-up: ⌈10049 / 9999⌉ = 2 requests, each reserving --max-total-tokens 32000 of
    KV (block 1 under flashinfer) = 64,000 tokens × 163,840 B (Llama-3.1-70B at TP2) before the
    free memory is measured (router/client warmup, v2.0.4)."""
    p = plan(
        "meta-llama/Llama-3.1-70B-Instruct",
        "a100-sxm-80gb",
        engine="tgi",
        engine_version="2.4.0",
        tensor_parallel_size=2,
        max_num_batched_tokens=10049,
        max_model_len=32000,
        max_input_tokens=9999,
    )
    msg = next(x.message for x in p.problems if x.code == "no-kv-memory")
    assert "64,000 tokens" in msg and f"{64000 * 163840 / GiB:.2f} GiB" in msg
    assert not p.fits


def test_tgi_refuses_a_total_too_short_for_a_prompt():
    """Issue 15 class 3: --max-total-tokens 1 would print --max-input-tokens 0."""
    with pytest.raises(InvalidInputError, match="no room for a prompt"):
        plan(LLAMA, "h100", engine="tgi", max_model_len=1)


def test_tgi_with_less_than_one_kv_block_does_not_fit():
    # DeepSeek-V3 (FP8 weights, 671 B parameters) on 4 B200s under TGI, which keeps every layer's
    # full K and V: the weights leave about 122 MiB per GPU, under one block (16 tokens at
    # ~1.2 MiB a token per shard). It planned "fits" with 0 KV tokens (max_total_tokens fell to
    # 0 with them) while `kvplan check` of its own serve line said the KV cache holds 0 tokens.
    p = plan("deepseek-ai/DeepSeek-V3", "b200", engine="tgi", tensor_parallel_size=4)
    assert p.kv_cache.tokens == 0
    assert not p.fits
    assert "no-kv-memory" in [x.code for x in p.problems]
