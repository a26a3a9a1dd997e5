"""Format what-ifs (issue #24 item 6, docs/what-if.md): --quantization nvfp4|mxfp4|w8a8|awq on
an unquantized model plans the checkpoint a standard quantizer would write from it.

Llama-3.1-8B (config.json: hidden 4096, intermediate 14336, 32 layers, 32 query / 8 KV heads
of 128, vocab 128256, untied LM head), counted by hand. Only the decoder Linears are
quantized; the embeddings, the LM head and the norms stay bf16 in every recipe."""

import json

import pytest
from clirun import run

from kvplan import plan
from kvplan.errors import InvalidInputError
from kvplan.perf.step import _peak_tflops, compute_dtype_for
from kvplan.sources.catalog import resolve_gpu
from kvplan.specs import WhatIfPlan

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
EMBED = 128256 * 4096                      # embed_tokens, and as many in lm_head
LINEAR = 32 * (4096 * 4096 * 2             # q_proj, o_proj
               + 1024 * 4096 * 2           # k_proj, v_proj
               + 14336 * 4096 * 3)         # gate_proj, up_proj, down_proj
ROWS = 32 * (4096 + 1024 * 2 + 4096 + 14336 * 2 + 4096)  # output channels of those Linears
NORMS = 32 * 2 * 4096 + 4096
ROPE = 131072 * 128 * 2                    # the cos/sin cache every kvplan plan counts
KEPT = 2 * EMBED * 2 + NORMS * 2 + ROPE    # bf16 in every recipe


@pytest.mark.parametrize(("q", "quantized"), [
    # OCP MXFP4: ½ B per weight + one e8m0 byte per 32
    ("mxfp4", LINEAR // 2 + LINEAR // 32),
    # AutoAWQ: ½ B per weight + per group of 128 inputs a 16-bit scale and a 4-bit zero
    ("awq", LINEAR // 2 + 2 * LINEAR // 128 + LINEAR // 256),
    # llm-compressor W8A8: 1 B per weight + an fp32 scale per output channel
    ("w8a8", LINEAR + 4 * ROWS),
])
def test_weights_are_the_quantizers_checkpoint_by_hand(q, quantized):
    p = plan(MODEL, "b200", quantization=q)
    assert p.memory.weights_tensor_bytes == KEPT + quantized
    assert p.inputs["quantization"].value == q and p.inputs["quantization"].source == "cli"


def test_nvfp4_weights_and_fp8_kv_by_hand():
    p = plan(MODEL, "b200", quantization="nvfp4")
    # ½ B per weight + one fp8 scale per 16, + at most two fp32 global scales per Linear
    bulk = KEPT + LINEAR // 2 + LINEAR // 16
    assert 0 <= p.memory.weights_tensor_bytes - bulk <= 32 * 7 * 2 * 4
    # ModelOpt's default recipe declares an FP8 KV cache; vLLM's auto takes it:
    # 32 layers × (K + V) × 8 KV heads × 128 × 1 B
    assert p.kv_cache.bytes_per_token == 32 * 2 * 8 * 128
    assert p.inputs["kv_cache_dtype"].value == "fp8_e4m3"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_16_bit_kv_request_quantizes_without_the_kv_cache(engine):
    """--kv-cache-dtype bfloat16 with the NVFP4 what-if: ModelOpt's hf_ptq.py
    --kv_cache_qformat none writes no kv_cache_quant_algo, so the engine's auto keeps the
    16-bit cache that is planned (32 layers × (K + V) × 8 KV heads × 128 × 2 B); with the
    recipe's default fp8 the checkpoint would declare an FP8 cache the engine takes instead."""
    p = plan(MODEL, "b200", engine=engine, quantization="nvfp4", kv_cache_dtype="bfloat16")
    assert p.kv_cache.bytes_per_token == 32 * 2 * 8 * 128 * 2
    quantize, serve = p.command.split("\n")
    assert "--kv_cache_qformat none" in quantize and "fp8" not in quantize
    assert "kv-cache-dtype" not in serve  # auto: the checkpoint declares no KV scheme
    assert "--kv_cache_qformat none" in p.what_if.assumptions[-1]
    assert "checkpoint-kv-overridden" not in [x.code for x in p.problems]
    default = plan(MODEL, "b200", engine=engine, quantization="nvfp4")
    assert "--kv_cache_qformat fp8" in default.command
    assert default.kv_cache.bytes_per_token * 2 == p.kv_cache.bytes_per_token


@pytest.mark.parametrize(("engine", "q", "spelled"), [
    ("vllm", "nvfp4", "--quantization modelopt_fp4"),
    ("vllm", "awq", "--quantization awq_marlin"),
    ("vllm", "w8a8", "--quantization compressed-tensors"),
    ("vllm", "mxfp4", "--quantization quark"),
    ("sglang", "nvfp4", "--quantization modelopt_fp4"), ("tgi", "awq", "--quantize awq"),
    ("tgi", "w8a8", "--quantize compressed-tensors")])
def test_launch_line_serves_the_hypothetical_checkpoint_named_as_the_engine_does(engine, q,
                                                                                 spelled):
    p = plan(MODEL, "b200", engine=engine, quantization=q)
    step, serve = p.command.rsplit("\n", 1)
    path = f"./Llama-3.1-8B-Instruct-{q.upper()}"
    assert path in serve and MODEL not in serve and spelled in serve
    assert MODEL in step and path in step  # the quantizer step that writes it comes first
    assert isinstance(p, WhatIfPlan) and p.what_if.checkpoint == path
    assert p.problems[0].code == "what-if" and "does not exist yet" in p.problems[0].message


@pytest.mark.parametrize(("engine", "gpu", "q", "code"), [
    ("sglang", "h100", "nvfp4", "gpu-capability"),      # ModelOptFp4Config: capability 100
    ("tgi", "b200", "nvfp4", "quantization-unsupported"),
    ("tgi", "b200", "mxfp4", "quantization-unsupported"),
    ("sglang", "b200", "mxfp4", "quantization-unsupported"),
    ("vllm", "mi300x", "nvfp4", "gpu-capability")])          # NVFP4 kernels are CUDA-only
def test_engines_that_cannot_serve_the_format_say_which_can(engine, gpu, q, code):
    with pytest.raises(InvalidInputError) as e:
        plan(MODEL, gpu, engine=engine, quantization=q)
    assert e.value.code == code and e.value.knob == "quantization"
    assert e.value.hint


def test_online_fp8_is_unchanged():
    p = plan(MODEL, "h100", quantization="fp8")
    assert not isinstance(p, WhatIfPlan) and "--quantization fp8" in p.command
    assert MODEL in p.command


def test_a_real_checkpoint_has_no_what_if_key_in_json():
    out = json.loads(plan(MODEL, "h100").model_dump_json())
    assert "what_if" not in out


def test_cli_json_marks_the_what_if(capsys):
    code, out, err = run(capsys, "plan", MODEL, "--gpu", "b200", "-q", "awq", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["what_if"]["quantization"] == "awq"
    assert d["what_if"]["engine_quantization"] == "awq_marlin"
    assert d["what_if"]["assumptions"]


def test_cli_unsupported_format_is_a_clear_error(capsys):
    code, out, err = run(capsys, "plan", MODEL, "--gpu", "b200", "-q", "mxfp4", "--engine", "tgi")
    assert code == 2 and "Traceback" not in err
    assert "does not serve mxfp4" in err and "vLLM" in err


# ---- latency: the format's GEMM rate where the GPU runs it, 16-bit where it does not ----
# Dense datasheet peaks (gpu_specs/*.json): B200 fp4 9000, bf16 2250; H100 SXM bf16 989,
# int8 1979 TFLOP/s.

def _quant(q):
    from kvplan.model.whatif import FORMATS
    return FORMATS[q].spec


@pytest.mark.parametrize(("gpu", "q", "dtype", "tflops"), [
    ("b200", "nvfp4", "fp4", 9000.0),         # Blackwell: native FP4 tensor cores
    ("h100", "nvfp4", "bfloat16", 989.0),     # Hopper: FP4 Marlin, weight-only, 16-bit math
    ("mi355x", "mxfp4", "fp4", 10066.3),     # CDNA4: vLLM's Quark MXFP4 runs natively
    ("b200", "mxfp4", "bfloat16", 2250.0),    # elsewhere Quark emulates (supports_mx false)
    ("h100", "w8a8", "int8", 1979.0),         # int8 tensor cores
    ("b200", "awq", "bfloat16", 2250.0),      # AWQ is weight-only everywhere
])
def test_gemm_rate_follows_the_format_and_the_gpu(gpu, q, dtype, tflops):
    g = resolve_gpu(gpu)
    assert compute_dtype_for("bfloat16", _quant(q), g) == dtype
    assert _peak_tflops(g, dtype) == pytest.approx(tflops, rel=0.01)


def test_fp4_without_fp4_compute_warns():
    p = plan(MODEL, "h100", quantization="nvfp4")
    assert "fp4-weight-only" in [x.code for x in p.problems]


def test_fp4_prefill_is_faster_on_blackwell_than_bf16():
    fp4 = plan(MODEL, "b200", quantization="nvfp4").performance
    bf16 = plan(MODEL, "b200").performance
    assert fp4 is not None and bf16 is not None
    assert fp4.ttft_ms < bf16.ttft_ms


def test_moe_routers_stay_16_bit():
    # Qwen3-30B-A3B: 48 layers, each a router of 128 experts × hidden 2048 in bf16
    bf16 = plan("Qwen/Qwen3-30B-A3B", "b200", quantization="nvfp4")
    assert isinstance(bf16, WhatIfPlan)
    from kvplan.model.weights import all_tensors
    from kvplan.sources.catalog import resolve_model
    routers = [t for t in all_tensors(resolve_model("Qwen/Qwen3-30B-A3B"))
               if t.kind == "router"]
    assert len(routers) == 48 and all(t.rows * t.cols == 128 * 2048 for t in routers)


# ---- sweep: tries the what-ifs it is told, FP4 only where the GPU runs it natively ----

def test_sweep_tries_fp4_only_on_fp4_native_gpus():
    from kvplan import sweep
    r = sweep(MODEL, gpus=["b200", "h100"], quantization="auto,nvfp4", max_gpus=1)
    fp4 = [o for o in r.options if o.quantization == "nvfp4"]
    assert fp4 and {o.gpu for o in fp4} == {"b200"}
    assert any("FP4-native" in p.reason and p.gpu == "h100-sxm-80gb" for p in r.pruned)
    assert any("what-if formats (nvfp4)" in n for n in r.notes)
    assert all(isinstance(o.plan, WhatIfPlan) for o in fp4)


def test_sweep_notes_tensorrt_llm_quantize_first_options_as_what_ifs():
    """TensorRT-LLM's --quantization fp8 plans the ModelOpt checkpoint hf_ptq.py writes (a
    WhatIfPlan): the sweep's note says those options need that step first, as it does for
    vLLM's nvfp4 what-if."""
    from kvplan import sweep
    r = sweep(MODEL, gpus=["h100"], engine="trtllm", quantization="fp8", max_gpus=1)
    assert r.options and all(isinstance(o.plan, WhatIfPlan) for o in r.options)
    assert any("what-if formats (fp8)" in n for n in r.notes)


def test_sweep_without_formats_has_no_what_ifs():
    from kvplan import sweep
    r = sweep(MODEL, gpus=["b200"], max_gpus=1)
    assert all(o.quantization in (None, "fp8") for o in r.options)
    assert not any("what-if" in n for n in r.notes)


@pytest.mark.parametrize(("alias", "name"), [("modelopt_fp4", "nvfp4"), ("awq_marlin", "awq")])
def test_engine_spellings_name_the_same_what_if(alias, name):
    p = plan(MODEL, "b200", quantization=alias)
    assert isinstance(p, WhatIfPlan) and p.what_if.quantization == name
    assert p.inputs["quantization"].value == name  # valid input again


def test_a_checkpoints_own_format_is_passed_on_as_the_user_spelled_it():
    # vLLM names ModelOpt's NVFP4 method modelopt_fp4 (quantization/__init__.py); it has no
    # "nvfp4" method, so the launch line must not print the format's name.
    p = plan("nvidia/Qwen3-235B-A22B-NVFP4", "b200", tensor_parallel_size=4,
             quantization="modelopt_fp4")
    assert "--quantization modelopt_fp4" in p.command and "--quantization nvfp4" not in p.command
    assert "--quantization fp8" in plan(MODEL, "h100", quantization="FP8").command
