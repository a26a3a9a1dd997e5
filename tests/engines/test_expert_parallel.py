"""Expert parallelism and DP attention on vLLM, SGLang and TensorRT-LLM (docs/expert-parallel.md).

Hand-worked values from the models' config.json (catalogue copies) and the engines' sources
cited in kvplan/model/expert.py, kvplan/engines/sglang_parallel.py and trtllm_parallel.py."""

from __future__ import annotations

import json
import textwrap

import pytest
from clirun import run

from kvplan import plan
from kvplan.deploy.commands import Templates, parse_args
from kvplan.engines import registry, sglang, trtllm_parallel
from kvplan.errors import InvalidInputError
from kvplan.model import expert
from kvplan.sources.catalog import resolve_model

DSV3 = "deepseek-ai/DeepSeek-V3"
DSR1 = "deepseek-ai/DeepSeek-R1"
QWEN235 = "Qwen/Qwen3-235B-A22B"


# ------------------------------------------------------------------ expert bytes per rank

def test_deepseek_v3_tp8_ep8_expert_bytes_per_rank():
    """DeepSeek-V3 config.json: 256 routed experts of moe_intermediate_size 2048, hidden 7168,
    61 layers of which first_k_dense_replace = 3 are dense (58 MoE); FP8 weights with fp32
    scales per 128 × 128 block. One expert per layer: gate, up, down = 3 × 7168 × 2048 B
    = 44,040,192 B + 3 × (2048/128 × 7168/128 = 896) × 4 B = 10,752 B → 44,050,944 B.
    EP8: 256 / 8 = 32 experts per rank × 58 layers → 81,758,552,064 B (76.14 GiB)."""
    m = resolve_model(DSV3)
    e = expert.expert_bytes(m, ep=8, dtype="bfloat16", quant=m.quantization)
    assert e.local_experts == 32 and e.moe_layers == 58
    assert e.per_expert_bytes == 44_050_944 * 58
    assert e.rank_bytes == 81_758_552_064


def test_eplb_redundant_experts_add_whole_experts():
    """32 redundant experts over EP8: ceil(288 / 8) = 36 physical experts per rank, 4 more than
    without them: 4 × 44,050,944 B × 58 layers."""
    m = resolve_model(DSV3)
    assert expert.local_experts(256, 8, 32) == 36
    assert expert.redundant_expert_bytes(m, ep=8, redundant=32, dtype="bfloat16",
                                         quant=m.quantization) == 4 * 44_050_944 * 58


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_ep_plans_hold_the_experts_of_one_rank(engine):
    """TP8 with and without EP: the same expert bytes per GPU (256 experts divide by 8, the
    expert intermediate 2048 / 8 = 256 is a whole number of 128-blocks), so the same weights
    within the allocator's rounding; the EP launch line names each engine's flag."""
    tp = plan(DSV3, "h200", engine=engine, tensor_parallel_size=8)
    ep = plan(DSV3, "h200", engine=engine, tensor_parallel_size=8, enable_expert_parallel=True)
    assert abs(ep.memory.weights_tensor_bytes - tp.memory.weights_tensor_bytes) < 2**20
    flag = {"vllm": "--enable-expert-parallel", "sglang": "--ep-size 8",
            "trtllm": "--ep_size 8"}[engine]
    assert flag in ep.command and flag not in tp.command


# ---------------------------------------------------------------- KV per token per rank

@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_mla_kv_per_token_is_replicated_under_tp_and_the_same_under_dp_attention(engine):
    """MLA caches the latent: (kv_lora_rank 512 + qk_rope_head_dim 64) × 61 layers × 2 B =
    70,272 B per token on every TP rank (not split by TP) — and on every DP-attention rank,
    which holds only its own requests: the pool of -tp 1 -dp 8 is per DP rank."""
    tp8 = plan(DSV3, "h200", engine=engine, tensor_parallel_size=8)
    dp8 = plan(DSV3, "h200", engine=engine, tensor_parallel_size=1, data_parallel_size=8,
               enable_expert_parallel=True)
    assert tp8.kv_cache.bytes_per_token == dp8.kv_cache.bytes_per_token == 70_272


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_gqa_kv_per_token_splits_by_attention_tp(engine):
    """Qwen3-235B-A22B: 4 KV heads × head_dim 128, 94 layers, bf16. TP8: max(1, 4 // 8) = 1
    head per rank (replicated) → 1 × 128 × 2 × 94 × 2 B = 48,128 B; DP attention (attention
    TP 1): all 4 heads → 192,512 B per token on each rank."""
    tp8 = plan(QWEN235, "h200", engine=engine, tensor_parallel_size=8)
    dp8 = plan(QWEN235, "h200", engine=engine, tensor_parallel_size=1, data_parallel_size=8,
               enable_expert_parallel=True)
    assert tp8.kv_cache.bytes_per_token == 48_128
    assert dp8.kv_cache.bytes_per_token == 192_512


# ------------------------------------------------------------------ SGLang specifics

def test_sglang_dp_attention_mem_fraction_default_on_h200():
    """memory_hook.py (sgl-project/sglang @031ed82d) on H200 (143,771 MiB), --tp-size 8,
    chunked 8192, decode max_bs 512, MLA: reserved = 512 + 1.5 × 8192 + 8/8 × 1024 + 2 × 512
    + 1536 + DP attention (512 × 8 × 3 + 512 × 8 × 1.5 = 18,432) = 34,816 MiB →
    round((143,771 − 34,816) / 143,771, 3) = 0.758; DeepEP adds 2,048 → 0.744."""
    assert sglang.default_mem_fraction(143_771, 8, 1, 8192, 512, True, 18_432.0) == 0.758
    assert sglang.default_mem_fraction(143_771, 8, 1, 8192, 512, True, 18_432.0,
                                       2048.0) == 0.744


def test_deepep_buffer_sizes_by_hand():
    """DeepEP legacy config.hpp for DeepSeek-V3 (hidden 7168, 256 experts) over 8 ranks.
    Low-latency, 128 tokens: dispatch message 16 + max(14,336, 7,168 + 56 × 4) = 14,352 B,
    combine message 56 × 4 + 14,336 = 14,560 B; send = recv = 256 × 128 × 14,560 =
    477,102,080 B; signalling 1,024 B; 2 × (send + recv + signal) = 1,908,410,368 →
    rounded past the next 128 B: 1,908,410,496 B. Normal mode NVLink buffer (20 SMs = 10
    channels, 8 ranks, 256 receive tokens, bf16): 80 × 5 × 4 + 80 × 256 × (14,336 + 8 + 128
    × 8 + 128 × 4 + 128 × 4) = 335,709,760 → 335,709,824 B (a multiple of 128)."""
    assert expert.deepep_low_latency_bytes(128, 7168, 256) == 1_908_410_496
    assert expert.deepep_nvl_bytes(7168 * 2, 8, 256) == 335_709_824
    assert expert.deepep_rdma_bytes(7168 * 2, 8, 128) == 0  # within one NVLink domain
    assert expert.deepep_buffer_bytes(hidden=7168, experts=256, ranks=8,
                                      param_bytes=2) == 1_908_410_496 + 335_709_824


def test_sglang_deepep_buffer_sits_in_the_reserve():
    p = plan(DSR1, "h200", engine="sglang", tensor_parallel_size=1, data_parallel_size=8,
             enable_expert_parallel=True, moe_a2a_backend="deepep")
    q = plan(DSR1, "h200", engine="sglang", tensor_parallel_size=1, data_parallel_size=8,
             enable_expert_parallel=True)
    fp8_buffer = expert.deepep_buffer_bytes(hidden=7168, experts=256, ranks=8, param_bytes=1)
    assert p.memory.cudagraph_bytes - q.memory.cudagraph_bytes == fp8_buffer
    assert ("--tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8 --moe-a2a-backend "
            "deepep") in p.command


def _sglang_args(text: str) -> dict:
    f = parse_args(text.split(), "sglang", file="x", line=1, templates=Templates({}), text=text)
    return f.knobs


def test_check_reads_sglang_dp_attention_layout():
    """--tp 8 --dp 8 --enable-dp-attention is eight attention groups of one GPU."""
    k = _sglang_args(f"--model-path {DSR1} --tp 8 --dp-size 8 --enable-dp-attention --ep-size 8 "
                     "--moe-a2a-backend deepep --ep-num-redundant-experts 32")
    assert k["tensor_parallel_size"] == 1 and k["data_parallel_size"] == 8
    assert k["enable_expert_parallel"] is True and k["enable_dp_attention"] is True
    assert k["moe_a2a_backend"] == "deepep" and k["num_redundant_experts"] == 32
    k = _sglang_args(f"--model-path {DSR1} --tp 8 --enable-ep-moe")  # 0.4.x spelling
    assert k["tensor_parallel_size"] == 8 and k["enable_expert_parallel"] is True


@pytest.mark.parametrize(("flags", "needle"), [
    ("--tp 8 --dp-size 3 --enable-dp-attention", "divisible"),
    ("--tp 8 --ep-size 4", "every GPU"),
])
def test_check_refuses_sglang_layouts_it_cannot_read(flags, needle):
    from kvplan.deploy.commands import DeployParseError

    with pytest.raises(DeployParseError, match=needle):
        _sglang_args(f"--model-path {DSR1} {flags}")


def test_check_plans_a_public_sglang_ep_command(capsys, tmp_path):
    """The SGLang DeepSeek docs' single-node DP-attention line (docs/basic_usage/deepseek.md)."""
    f = tmp_path / "serve.sh"
    f.write_text(textwrap.dedent(f"""\
        python3 -m sglang.launch_server --model-path {DSR1} --tp 8 --dp 8 \\
          --enable-dp-attention --trust-remote-code
        python3 -m sglang.launch_server --model-path {DSR1} --tp 8 --ep-size 8 \\
          --trust-remote-code
    """))
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h200", "--json")
    rows = json.loads(out)["deployments"]
    assert code in (0, 1) and len(rows) == 2
    assert all(r["plan"] is not None for r in rows)
    assert "--enable-dp-attention" in rows[0]["plan"]["command"]
    assert rows[0]["plan"]["gpu"]["count"] == rows[1]["plan"]["gpu"]["count"] == 8


# --------------------------------------------------------------- TensorRT-LLM specifics

def test_trtllm_attention_dp_reads_and_writes_its_layout():
    k = trtllm_parallel.after_options({"tensor_parallel_size": 8, "enable_dp_attention": True,
                                       "expert_parallel_size": 8})
    assert k == {"tensor_parallel_size": 1, "data_parallel_size": 8,
                 "enable_dp_attention": True, "enable_expert_parallel": True}
    yaml = registry.get("trtllm").options_from_document(
        {"enable_attention_dp": True, "moe_expert_parallel_size": 8}, None)
    assert yaml == {"enable_dp_attention": True, "enable_expert_parallel": True}
    p = plan(DSR1, "b200", engine="trtllm", tensor_parallel_size=1, data_parallel_size=8,
             enable_expert_parallel=True)
    assert "--tp_size 8 --ep_size 8" in p.command and "enable_attention_dp: true" in p.command
    with pytest.raises(InvalidInputError, match="TP 1"):
        plan(DSR1, "b200", engine="trtllm", tensor_parallel_size=2, data_parallel_size=4,
             enable_dp_attention=True)


def test_trtllm_attention_dp_holds_whole_non_expert_weights():
    """Attention DP: attention, dense MLP, shared experts and embeddings whole on each GPU, the
    experts split 8 ways: more weight bytes per GPU than TP8 EP8."""
    adp = plan(DSR1, "b200", engine="trtllm", tensor_parallel_size=1, data_parallel_size=8,
               enable_expert_parallel=True)
    tp = plan(DSR1, "b200", engine="trtllm", tensor_parallel_size=8, enable_expert_parallel=True)
    assert adp.memory.weights_tensor_bytes > tp.memory.weights_tensor_bytes


# ------------------------------------------------------------------- refusals

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_redundant_experts_need_expert_parallelism(engine):
    with pytest.raises(InvalidInputError, match="--enable-expert-parallel"):
        plan(DSV3, "h200", engine=engine, tensor_parallel_size=8, num_redundant_experts=32)


def test_vllm_deepep_low_latency_buffer_is_non_torch_memory():
    """vLLM --all2all-backend deepep_low_latency with EP over DP8 (all2all.py @00143004):
    VLLM_DEEPEP_BUFFER_SIZE_MB 1024 MiB of NVLink buffer + DeepEP's low-latency RDMA size for
    VLLM_MOE_DP_CHUNK_SIZE 256 tokens, hidden 7168, 256 experts: send = recv = 256 × 256 ×
    14,560 B = 954,204,160 B; 2 × (send + recv) + 2 × 1,024 = 3,816,818,688 → 3,816,818,816 B
    rounded past the next 128. Total 1,073,741,824 + 3,816,818,816 = 4,890,560,640 B."""
    base = dict(tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True)
    plain = plan(DSR1, "h200", **base)
    ll = plan(DSR1, "h200", moe_a2a_backend="deepep_low_latency", **base)
    assert ll.memory.non_torch_bytes - plain.memory.non_torch_bytes == 4_890_560_640
    assert "--all2all-backend deepep_low_latency" in ll.command
    with pytest.raises(InvalidInputError, match="not one vLLM has"):
        plan(DSR1, "h200", moe_a2a_backend="deepep", **base)


@pytest.mark.parametrize("gpu", ["b200", "b300"])
def test_sglang_tp8_ep8_on_blackwell_plans(gpu):
    """The public DeepSeek-R1 benchmark layout (SGLang, TP8 EP8 on B200/B300) that could not be
    planned before: experts split 8 ways, the launch line says --ep-size 8."""
    p = plan(DSR1, gpu, engine="sglang", tensor_parallel_size=8, enable_expert_parallel=True)
    assert p.fits and "--tp-size 8 --ep-size 8" in p.command


def test_vllm_refuses_the_sglang_spelling_of_dp_attention():
    """vLLM has no --enable-dp-attention: -dp on a MoE model is its DP attention."""
    assert "enable_dp_attention" in registry.get("vllm").unsupported


# ------------------------------------------------- the engines' own documented layouts

# Single-node DeepSeek / Qwen3-235B layouts from the engines' deployment docs
# (docs/expert-parallel.md lists each source): SGLang docs/basic_usage/deepseek.md and
# qwen3.md, vLLM docs/serving/expert_parallel_deployment.md, TensorRT-LLM
# docs/source/deployment-guide (DeepSeek-R1 and Qwen3 quick-start recipes).
DOC_LAYOUTS = [
    (f"python3 -m sglang.launch_server --model-path {DSV3} --tp 8 --trust-remote-code",
     "--tp-size 8", 8),
    (f"python3 -m sglang.launch_server --model-path {DSV3} --tp 8 --dp 8 --enable-dp-attention "
     "--trust-remote-code", "--tp-size 8 --dp-size 8 --enable-dp-attention", 8),
    (f"python3 -m sglang.launch_server --model-path {DSV3} --tp 8 --dp 8 --enable-dp-attention "
     "--moe-a2a-backend deepep --trust-remote-code",
     "--enable-dp-attention --ep-size 8 --moe-a2a-backend deepep", 8),
    (f"python3 -m sglang.launch_server --model-path {QWEN235} --tp 8 --ep 8", "--ep-size 8", 8),
    (f"python3 -m sglang.launch_server --model-path {QWEN235} --tp 8 --dp 8 "
     "--enable-dp-attention", "--dp-size 8 --enable-dp-attention", 8),
    (f"vllm serve {DSR1} --tensor-parallel-size 1 --data-parallel-size 8 "
     "--enable-expert-parallel", "--data-parallel-size 8", 8),
    (f"vllm serve {DSR1} --tensor-parallel-size 8 --enable-expert-parallel",
     "--enable-expert-parallel", 8),
    (f"vllm serve {QWEN235} --tensor-parallel-size 8 --enable-expert-parallel",
     "--enable-expert-parallel", 8),
    (f"trtllm-serve {DSR1} --tp_size 8 --ep_size 8 --extra_llm_api_options adp.yaml",
     "enable_attention_dp: true", 8),
    (f"trtllm-serve {QWEN235} --tp_size 8 --ep_size 8", "--tp_size 8 --ep_size 8", 8),
]


def test_every_documented_single_node_layout_plans_with_its_launch_line(capsys, tmp_path):
    (tmp_path / "adp.yaml").write_text("enable_attention_dp: true\n")
    f = tmp_path / "serve.sh"
    f.write_text("\n".join(line for line, _, _ in DOC_LAYOUTS) + "\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h200", "--json")
    rows = json.loads(out)["deployments"]
    assert len(rows) == len(DOC_LAYOUTS)
    for row, (_line, needle, gpus) in zip(rows, DOC_LAYOUTS, strict=True):
        assert row["plan"] is not None, row
        assert needle in row["plan"]["command"], (needle, row["plan"]["command"])
        assert row["plan"]["gpu"]["count"] == gpus


# --- sgdense --- SGLang --moe-dense-tp-size 1


def test_moe_dense_tp_size_one_holds_the_dense_mlp_whole_by_hand():
    """--moe-dense-tp-size 1 builds DeepseekV2MLP with tp_size 1 (models/deepseek_v2.py
    0.5.6.post2: mlp_tp_rank, mlp_tp_size = 0, 1 when enable_moe_dense_fully_dp()) where the
    default splits it over --tp-size. DeepSeek-R1's 3 dense layers: gate_up 2 x 18432 x 7168 +
    down 7168 x 18432 FP8 bytes = 396,361,728 B, + fp32 scales per 128 x 128 block
    (288 x 56 + 56 x 144 = 24,192 blocks x 4 B = 96,768 B): 396,458,496 B a layer, 1,189,375,488
    B for 3; split over 8 GPUs 148,671,936 B: 1,040,703,552 B more per GPU at --tp-size 8."""
    from kvplan.engines.sglang_parallel import whole_dense_mlp_delta

    m = resolve_model(DSR1)
    assert whole_dense_mlp_delta(m, moe_tp=8, ep=8, dtype="bfloat16",
                                 quant=m.quantization) == 1_040_703_552
    kw = dict(engine="sglang", tensor_parallel_size=1, data_parallel_size=8,
              enable_expert_parallel=True, moe_a2a_backend="deepep")
    full = plan(DSR1, "h200", **kw)
    local = plan(DSR1, "h200", **kw, moe_dense_tp_size=1)
    assert local.memory.weights_bytes - full.memory.weights_bytes == 1_040_703_552
    assert local.command.endswith("--moe-dense-tp-size 1")
    # the dense layers no longer gather over the 8 GPUs: less communication a step
    assert local.performance.tpot_ms < full.performance.tpot_ms


def test_moe_dense_tp_size_cli_range_and_engine(capsys):
    code, out, _ = run(capsys, "plan", DSR1, "--gpu", "h200", "--engine", "sglang", "-tp", "1",
                       "-dp", "8", "--enable-dp-attention", "--moe-dense-tp-size", "1", "--json")
    assert code == 0 and "--moe-dense-tp-size 1" in json.loads(out)["command"]
    code, _, err = run(capsys, "plan", DSR1, "--gpu", "h200", "--engine", "sglang", "-tp", "1",
                       "-dp", "8", "--enable-dp-attention", "--moe-dense-tp-size", "2")
    assert code == 2 and "--moe-dense-tp-size" in err
    assert "the only value is 1" in err  # server_args.py: 1 or unset
    code, _, err = run(capsys, "plan", DSR1, "--gpu", "h200", "--engine", "vllm", "-tp", "1",
                       "-dp", "8", "--moe-dense-tp-size", "1")
    assert code == 2 and "--moe-dense-tp-size" in err


def test_check_reads_moe_dense_tp_size():
    k = _sglang_args(f"--model-path {DSR1} --tp 8 --dp-size 8 --enable-dp-attention "
                     "--moe-dense-tp-size 1")
    assert k["moe_dense_tp_size"] == 1
