"""Speculative decoding, LoRA, KV offloading and prefix sharing (docs/features.md), each pinned
to hand-worked numbers. Sources are vLLM repo paths read from main-branch snapshots (file and
commit in docs/features.md), planned as vLLM 0.33 (kvplan's newest modelled release); no vLLM
start-up log with these features was available to replay."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from clirun import run
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import plan
from kvplan.errors import InvalidInputError
from kvplan.knobs import Knobs
from kvplan.model.weights import _layer_tensors, _rank_bytes
from kvplan.sources.catalog import resolve_model
from kvplan.specs import Workload
from kvplan.units import GiB, cdiv

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
DSV3 = "deepseek-ai/DeepSeek-V3"




def spec(d: Path | str, method: str = "eagle3", k: int = 3) -> str:
    return json.dumps({"method": method, "model": str(d), "num_speculative_tokens": k})


# ------------------------------------------------------------------ speculative decoding


def test_eagle3_head_weights_kv_and_profile_hand_worked(eagle3_dir):
    """EAGLE-3 on Llama-3.1-8B, H100, TP1, bf16, planned as vLLM 0.33.

    Draft weights (vllm/model_executor/models/llama_eagle3.py; embedding shared with the target,
    vllm/v1/spec_decode/eagle.py load_model), parameters:
      layer 0: q 4096 × 8192 (its input is embeds ‖ hidden = 2 × 4096) = 33,554,432
               k, v 1024 × 8192 each = 16,777,216;  o 4096 × 4096 = 16,777,216
               gate_up 28672 × 4096 = 117,440,512;  down 4096 × 14336 = 58,720,256
               2 layer norms 8,192                         → 243,277,824
      fc 4096 × 12288 (3 hidden states in)                 →  50,331,648
      hidden_norm + final norm                             →       8,192
      lm_head 32,000 (a multiple of 64) × 4096             → 131,072,000
      = 424,689,664 × 2 B = 849,379,328 B, + d2t 32,000 × 8 B = 256,000 → 849,635,328 B
      (every tensor a multiple of 512 B, so allocated = tensor bytes).
    KV (vllm/v1/worker/gpu_model_runner.py get_kv_cache_spec: the head's attention layer joins
    the target's pool): (32 + 1) layers × 2 × 8 heads × 128 × 2 B = 135,168 B per token,
    × 16 = 2,162,688 B per block.
    Profile run (gpu_model_runner.py _dummy_sampler_run): the rejection sampler's dummy run has
    one draft token per request → 2 × num_reqs logit rows: the sampler term grows by
    1024 × 128,256 × 14.94 B (activation = sampler peak here)."""
    base = plan(LLAMA, "h100")
    p = plan(LLAMA, "h100", speculative_config=spec(eagle3_dir))
    assert p.speculative is not None
    assert p.speculative.method == "eagle3"
    assert p.speculative.draft_layers == 1
    assert p.speculative.draft_weights_bytes == 849_635_328
    assert p.memory.draft_weights_bytes == 849_635_328
    assert p.memory.weights_bytes - base.memory.weights_bytes == 849_635_328
    assert p.speculative.draft_kv_bytes_per_token == 4096
    assert p.kv_cache.bytes_per_token == 135_168
    assert p.kv_cache.bytes_per_block == 2_162_688
    extra_sampler = 1024 * 128_256 * 14.94
    assert abs((p.memory.activation_bytes - base.memory.activation_bytes) - extra_sampler) <= 2
    assert p.speculative.sampler_rows_factor == 2
    # blocks and concurrency follow from the budget left
    assert p.kv_cache.num_blocks == p.memory.kv_cache_bytes // 2_162_688
    assert p.kv_cache.max_concurrency == round(p.kv_cache.num_blocks / cdiv(131072, 16), 2)
    assert p.kv_cache.max_concurrency < base.kv_cache.max_concurrency
    # the user's JSON stays in the serve line
    assert "--speculative-config" in p.command and '"num_speculative_tokens":3' in p.command


def test_eagle3_capture_sizes_use_the_decode_query_length(eagle3_dir):
    """vllm/config/vllm.py (0.33): max capture size = min(2 × max_num_seqs × (1 + k), 512);
    with max_num_seqs 8 and k 3: 64 → sizes 1, 2, 4, 8, …, 64 = 11 (vs 16 → 5 without)."""
    base = plan(LLAMA, "h100", max_num_seqs=8)
    p = plan(LLAMA, "h100", max_num_seqs=8, speculative_config=spec(eagle3_dir))
    from kvplan.model.forward import CUDAGRAPH_BYTES_PER_LAYER_GRAPH as PER
    assert base.memory.cudagraph_bytes - int(0.5585 * GiB) == PER * 32 * 5
    assert p.memory.cudagraph_bytes - int(0.5585 * GiB) == PER * 33 * 11


def test_mtp_deepseek_v3_hand_worked():
    """DeepSeek-V3 (num_nextn_predict_layers 1), H200 × 8, TP8, planned as vLLM 0.33, MTP
    (vllm/model_executor/models/deepseek_mtp.py): one decoder layer shaped like layer 60
    (MLA + 256 FP8 experts), enorm + hnorm 2 × 7168 bf16 = 28,672 B, eh_proj (plain nn.Linear,
    bf16, replicated) 7168 × 14336 × 2 = 205,520,896 B, shared_head norm 14,336 B and head
    129,280 rows (a multiple of 64) / 8 = 16,160 × 7168 × 2 = 231,669,760 B per rank; the
    embedding is shared. num_speculative_tokens defaults to num_nextn_predict_layers = 1.
    KV: MLA latent (512 + 64) × 2 B = 1,152 B per layer, replicated on every rank, × (61 + 1)
    layers = 71,424 B per token."""
    m = resolve_model(DSV3)
    layer = _rank_bytes([(t, m, m.quantization) for t in _layer_tensors(m, 60)], 8, "bfloat16")[1]
    p = plan(DSV3, "h200", tensor_parallel_size=8, speculative_config='{"method": "deepseek_mtp"}')
    assert p.speculative.num_speculative_tokens == 1
    assert p.speculative.draft_layers == 1
    assert p.speculative.draft_weights_bytes == layer + 28_672 + 205_520_896 + 14_336 + 231_669_760
    assert p.kv_cache.bytes_per_token == 71_424
    assert '{"method":"deepseek_mtp"}' in p.command
    assert any(pr.code == "mtp-head-counted" for pr in p.problems)


def test_mtp_needs_mtp_layers():
    with pytest.raises(InvalidInputError, match="no multi-token-prediction layers"):
        plan(LLAMA, "h100", speculative_config='{"method": "mtp", "num_speculative_tokens": 1}')


def test_draft_model_with_other_heads_sums_pages():
    """Llama-3.1-70B + Llama-3.2-1B draft at TP4 on H100: one UniformTypeKVCacheSpecs group whose
    page is the sum of its layers' pages (vllm/v1/core/kv_cache_utils.py): target 80 layers ×
    2 × (8/4) × 128 × 2 B = 1,024 B; draft 16 layers × 2 × (8/4) × 64 × 2 B = 512 B →
    16 × (80 × 1,024 + 16 × 512) = 1,441,792 B per block; the draft keeps its own embedding and
    (tied) head."""
    p = plan("meta-llama/Llama-3.1-70B-Instruct", "h100", tensor_parallel_size=4,
             speculative_config=spec("meta-llama/Llama-3.2-1B-Instruct", "draft_model", 4))
    assert p.speculative.draft_layers == 16
    assert p.kv_cache.bytes_per_token == 80 * 1024 + 16 * 512
    assert p.kv_cache.bytes_per_block == 1_441_792
    assert p.speculative.draft_model == "meta-llama/Llama-3.2-1B-Instruct"


def test_ngram_has_no_draft_weights_but_a_larger_sampler_run():
    base = plan(LLAMA, "h100")
    p = plan(LLAMA, "h100", speculative_config='{"method": "ngram", "num_speculative_tokens": 4,'
             ' "prompt_lookup_max": 4}')
    assert p.speculative.draft_weights_bytes == 0 and p.speculative.draft_layers == 0
    assert p.kv_cache.bytes_per_token == base.kv_cache.bytes_per_token
    assert p.memory.activation_bytes > base.memory.activation_bytes
    assert '"prompt_lookup_max":4' in p.command  # keys kvplan ignores stay in the serve line


def test_speculative_config_errors():
    with pytest.raises(InvalidInputError, match="needs num_speculative_tokens"):
        plan(LLAMA, "h100", speculative_config='{"method": "ngram"}')
    with pytest.raises(InvalidInputError, match="method"):
        Knobs.parse({"speculative_config": '{"method": "medusa"}'})
    with pytest.raises(InvalidInputError, match="V1 engine"):
        plan(LLAMA, "h100", engine_version="0.6.6",
             speculative_config='{"method": "ngram", "num_speculative_tokens": 2}')


# ---------------------------------------------------------------------------------- LoRA


def test_lora_slots_hand_worked():
    """Llama-3.1-8B, TP2, --enable-lora --max-loras 4 --max-lora-rank 16 --max-cpu-loras 8
    (vllm/lora/layers/base_linear.py, column_parallel_linear.py, row_parallel_linear.py;
    lora_dtype auto = bf16). Per layer per rank, elements per adapter slot:
      qkv_proj (3 slices) A 3 × 16 × 4096 = 196,608; B 16 × (2048 + 512 + 512) = 49,152
      o_proj (row-parallel) A 16 × 2048 = 32,768; B 4096 × 16 = 65,536
      gate_up_proj (2 slices) A 2 × 16 × 4096 = 131,072; B 2 × 7168 × 16 = 229,376
      down_proj (row-parallel) A 16 × 7168 = 114,688; B 4096 × 16 = 65,536
      = 884,736 × 4 slots × 2 B = 7,077,888 B per layer × 32 = 226,492,416 B per GPU.
    One adapter unsharded: per layer 16 × (3·4096 + 4096 + 2·1024) + 16 × (4096 + 4096)
    + 2 × 16 × (4096 + 14336) + 16 × (14336 + 4096) = 1,310,720 × 2 B × 32 = 83,886,080 B;
    host cache max_cpu_loras 8 × that = 671,088,640 B per worker."""
    base = plan(LLAMA, "h100", tensor_parallel_size=2)
    p = plan(LLAMA, "h100", tensor_parallel_size=2, enable_lora=True, max_loras=4,
             max_lora_rank=16, max_cpu_loras=8)
    assert p.lora is not None
    assert p.lora.gpu_bytes == 226_492_416 == p.memory.lora_bytes
    assert p.memory.weights_bytes - base.memory.weights_bytes == 226_492_416
    assert p.lora.adapter_bytes == 83_886_080
    assert p.lora.host_bytes_per_worker == 671_088_640
    assert base.memory.kv_cache_bytes - p.memory.kv_cache_bytes == 226_492_416
    assert "--enable-lora --max-loras 4 --max-lora-rank 16 --max-cpu-loras 8" in p.command


def test_lora_defaults_and_errors():
    p = plan(LLAMA, "h100", enable_lora=True)
    assert (p.lora.max_loras, p.lora.max_lora_rank, p.lora.max_cpu_loras) == (1, 16, 1)
    assert p.command.endswith("--enable-lora")
    assert plan(LLAMA, "h100", max_loras=4).lora is None  # ignored without --enable-lora, as vLLM
    with pytest.raises(InvalidInputError, match="max-cpu-loras 2 is below"):
        plan(LLAMA, "h100", enable_lora=True, max_loras=4, max_cpu_loras=2)
    with pytest.raises(InvalidInputError, match="MaxLoRARanks"):
        plan(LLAMA, "h100", enable_lora=True, max_lora_rank=24)


def test_lora_on_moe_experts_hand_worked():
    """Qwen3-30B-A3B (48 layers, hidden 2048, 32 × 128 q / 4 × 128 kv heads, 128 experts of
    768, no shared expert), TP2, one rank-16 slot (vllm/lora/layers/fused_moe.py): per layer
    per rank
      attention: qkv A 3 × 16 × 2048 = 98,304; B 16 × (2048 + 256 + 256) = 40,960;
                 o A 16 × 2048 = 32,768; B 2048 × 16 = 32,768
      experts:   w13 2 × 128 × (16 × 2048 + 384 × 16) = 9,961,472;
                 w2 128 × (16 × 384 + 2048 × 16) = 4,980,736
      = 15,147,008 × 2 B × 48 layers = 1,454,112,768 B."""
    p = plan("Qwen/Qwen3-30B-A3B", "h100", tensor_parallel_size=2, enable_lora=True)
    assert p.lora.gpu_bytes == 1_454_112_768
    assert "experts" in p.lora.modules
    assert not any(pr.code == "lora-partly-modelled" for pr in p.problems)
    mla = plan("deepseek-ai/DeepSeek-V2-Lite", "h100", enable_lora=True)
    assert any(pr.code == "lora-partly-modelled" and "MLA" in pr.message for pr in mla.problems)


# ------------------------------------------------------------------------- KV offloading


def test_native_offload_hand_worked():
    """Llama-3.1-8B on H100 × 2 (TP2), --kv-offloading-size 100: vLLM pins 100 GiB for the
    engine, split over its TP × PP = 2 workers (vllm/config/vllm.py cpu_bytes_to_use;
    vllm/v1/kv_offload/cpu/spec.py): 50 GiB = 53,687,091,200 B per worker; a GPU block holds
    32 layers × 16 tokens × 2 × 4 heads × 128 × 2 B = 1,048,576 B → 51,200 CPU blocks =
    819,200 tokens per worker. Running requests still need GPU blocks: concurrency unchanged."""
    base = plan(LLAMA, "h100", tensor_parallel_size=2)
    p = plan(LLAMA, "h100", tensor_parallel_size=2, kv_offloading_size=100)
    o = p.offload
    assert o is not None and o.backend == "native"
    assert o.host_bytes == 100 * GiB
    assert o.host_bytes_per_worker == 53_687_091_200
    assert o.cpu_blocks == 51_200 and o.cpu_tokens == 819_200
    assert o.effective_cached_tokens == p.kv_cache.tokens + 819_200
    assert p.kv_cache.max_concurrency == base.kv_cache.max_concurrency
    assert "--kv-offloading-size 100" in p.command
    lm = plan(LLAMA, "h100", kv_offloading_size=8, kv_offloading_backend="lmcache")
    assert lm.offload.backend == "lmcache" and "--kv-offloading-backend lmcache" in lm.command
    assert any(pr.code == "lmcache-capacity" for pr in lm.problems)


# ------------------------------------------------------------------------ prefix caching


def test_shared_prefix_concurrency_hand_worked():
    """vLLM shares full blocks only (vllm/v1/core/block_pool.py, kv_cache_utils.py): a
    1,000-token system prompt fills 1000 // 16 = 62 blocks stored once. At max_model_len 8192
    a request holds 512 blocks, so C = (num_blocks − 62) / (512 − 62)."""
    p = plan(LLAMA, "h100", max_model_len=8192, workload=Workload(shared_prefix_tokens=1000))
    n = p.kv_cache.num_blocks
    assert p.kv_cache.effective_max_concurrency_with_prefix == round((n - 62) / (512 - 62), 2)
    assert p.kv_cache.effective_max_concurrency_with_prefix > p.kv_cache.max_concurrency
    off = plan(LLAMA, "h100", max_model_len=8192, enable_prefix_caching=False,
               workload=Workload(shared_prefix_tokens=1000))
    assert off.kv_cache.effective_max_concurrency_with_prefix is None
    assert any(pr.code == "prefix-caching-off" for pr in off.problems)


# ------------------------------------------------------------- engines, CLI, check, JSON


NGRAM = {"speculative_config": '{"method": "ngram", "num_speculative_tokens": 2}'}
LORA, OFFLOAD = {"enable_lora": True}, {"kv_offloading_size": 4}


@pytest.mark.parametrize(("engine", "knob"), [  # modelled: SGLang's speculative decoding and
    # LoRA, TGI's --speculate, TensorRT-LLM's speculative decoding and LoRA
    ("sglang", OFFLOAD), ("tgi", LORA), ("tgi", OFFLOAD), ("trtllm", OFFLOAD)])
def test_other_engines_refuse_the_features(engine, knob):
    with pytest.raises(InvalidInputError, match="not a setting"):
        plan(LLAMA, "h100", engine=engine, **knob)


def test_cli_plan_json_has_the_sections(capsys, eagle3_dir):
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--json", "--enable-lora",
                       "--max-loras", "2", "--kv-offloading-size", "16", "--speculative-config",
                       spec(eagle3_dir), "--shared-prefix-tokens", "512")
    data = json.loads(out)
    assert code == 0
    assert data["schema_version"] == "1.16"
    assert data["speculative"]["method"] == "eagle3"
    assert data["lora"]["max_loras"] == 2
    assert data["offload"]["host_bytes"] == 16 * GiB
    assert data["workload"]["shared_prefix_tokens"] == 512
    assert data["kv_cache"]["effective_max_concurrency_with_prefix"] is not None
    assert "draft" not in data["speculative"]  # the resolved ModelSpec is never serialised


def test_check_reads_the_feature_flags(capsys, tmp_path, eagle3_dir):
    f = tmp_path / "serve.sh"
    f.write_text(textwrap.dedent(f"""\
        vllm serve {LLAMA} --max-model-len 32768 --enable-lora --max-loras 2 \\
          --max-lora-rank 32 --kv-offloading-size 32 --kv-offloading-backend native \\
          --speculative-config '{spec(eagle3_dir)}'
    """))
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "fits", row["problems"]
    p = row["plan"]
    assert p["lora"]["max_loras"] == 2 and p["lora"]["max_lora_rank"] == 32
    assert p["offload"]["backend"] == "native"
    assert p["speculative"]["draft_layers"] == 1
    assert not any(pr["code"] == "flags-not-modelled" for pr in row["problems"])


def test_check_reads_a_vllm_config_yaml_mapping(capsys, tmp_path):
    """vLLM's --config YAML may give speculative_config as a mapping: read as its JSON."""
    f = tmp_path / "vllm.yaml"
    f.write_text(textwrap.dedent(f"""\
        model: {LLAMA}
        max_model_len: 8192
        enable_lora: true
        max_loras: 2
        speculative_config:
          method: ngram
          num_speculative_tokens: 3
          prompt_lookup_max: 4
    """))
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    p = json.loads(out)["deployments"][0]["plan"]
    assert p["speculative"]["num_speculative_tokens"] == 3
    assert p["lora"]["max_loras"] == 2
    assert '"prompt_lookup_max":4' in p["command"]


def test_check_models_sglang_speculative_decoding(capsys, tmp_path, eagle3_dir):
    """SGLang's --speculative-* flags are read into the plan (no longer a not-modelled warning)."""
    f = tmp_path / "sglang.sh"
    f.write_text(f"python -m sglang.launch_server --model-path {LLAMA} --speculative-algorithm "
                 f"EAGLE3 --speculative-draft-model-path {eagle3_dir} --speculative-num-steps 3 "
                 "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert not any(p["code"] == "feature-not-modelled" for p in row["problems"])
    assert row["plan"]["speculative"]["draft_layers"] == 1


# ------------------------------------------------------------------------- invariants


@settings(max_examples=15, deadline=None)
@given(loras=st.integers(1, 64), rank=st.sampled_from([8, 16, 64, 256]),
       tp=st.sampled_from([1, 2, 4, 8]))
def test_more_lora_slots_never_add_kv(loras, rank, tp):
    small = plan(LLAMA, "h100", tensor_parallel_size=tp, enable_lora=True, max_loras=loras,
                 max_lora_rank=rank)
    big = plan(LLAMA, "h100", tensor_parallel_size=tp, enable_lora=True, max_loras=loras + 1,
               max_lora_rank=rank)
    assert big.memory.lora_bytes > small.memory.lora_bytes
    assert big.memory.kv_cache_bytes <= small.memory.kv_cache_bytes


@settings(max_examples=15, deadline=None)
@given(k=st.integers(1, 8), method=st.sampled_from(["ngram", "mtp"]))
def test_speculation_never_raises_concurrency(k, method):
    model = DSV3 if method == "mtp" else LLAMA
    tp = 8 if method == "mtp" else 1
    base = plan(model, "h200", tensor_parallel_size=tp, max_model_len=8192)
    p = plan(model, "h200", tensor_parallel_size=tp, max_model_len=8192,
             speculative_config=json.dumps({"method": method, "num_speculative_tokens": k}))
    assert p.kv_cache.max_concurrency <= base.kv_cache.max_concurrency


@settings(max_examples=15, deadline=None)
@given(a=st.integers(1, 8191), b=st.integers(1, 8191))
def test_longer_shared_prefix_never_lowers_concurrency(a, b):
    lo, hi = sorted((a, b))
    c = [plan(LLAMA, "h100", max_model_len=8192, workload=Workload(shared_prefix_tokens=n))
         .kv_cache for n in (lo, hi)]
    values = [x.effective_max_concurrency_with_prefix or x.max_concurrency for x in c]
    assert values[0] <= values[1]
    assert values[0] >= c[0].max_concurrency


@pytest.mark.parametrize(("cfg", "method"), [
    ({"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B"}, "eagle"),
    ({"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}, "eagle3"),
    ({"model": "AngelSlim/Qwen3-8B_eagle3"}, "eagle3"),
    ({"model": "[ngram]"}, "ngram"),
    ({"model": "meta-llama/Llama-3.2-1B-Instruct"}, "draft_model"),
    ({"num_speculative_tokens": 1}, "mtp"),
    ({"method": "deepseek_mtp"}, "mtp"),
])
def test_method_detection_as_vllm(cfg, method):
    """vllm/config/speculative.py: "eagle-" → eagle, "eagle3" → eagle3, else draft_model."""
    assert Knobs.parse({"speculative_config": json.dumps(cfg)}).speculative_config.method == method


def test_the_target_as_its_own_draft_is_mtp():
    p = plan(DSV3, "h200", tensor_parallel_size=8,
             speculative_config=json.dumps({"model": DSV3, "num_speculative_tokens": 2}))
    assert p.speculative.method == "mtp" and p.speculative.num_speculative_tokens == 2


def test_lora_sizes_without_enable_lora_are_said_to_do_nothing():
    for engine in ("vllm", "sglang"):
        p = plan(LLAMA, "h100", engine=engine, max_loras=4)
        assert p.lora is None
        warn = next(pr for pr in p.problems if pr.code == "lora-off")
        assert "--max-loras" in warn.message and "--enable-lora" in warn.message
