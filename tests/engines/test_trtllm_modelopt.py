"""TensorRT-LLM's ModelOpt path (issue #21 item 20): --quantization names the qformat ModelOpt
applies to the named 16-bit model before serving; the plan is of the checkpoint it writes, a
what-if planned by the same rule as vLLM's and SGLang's (model/whatif.py, docs/what-if.md)."""

import json

import pytest
from clirun import run

from kvplan import plan
from kvplan.errors import InvalidInputError
from kvplan.specs import WhatIfPlan

# Llama-3.1-8B (config.json: hidden 4096, intermediate 14336, 32 layers, 32 query / 8 KV heads
# of 128, vocab 128256, untied LM head), counted by hand:
EMBED = 128256 * 4096                       # embed_tokens, and as many in lm_head
LINEAR = 32 * (4096 * 4096 * 2               # q_proj, o_proj
               + 1024 * 4096 * 2             # k_proj, v_proj (8 KV heads × 128)
               + 14336 * 4096 * 3)           # gate_proj, up_proj, down_proj
NORMS = 32 * 2 * 4096 + 4096                 # two RMSNorms a layer + the final one
ROPE = 131072 * 128 * 2                      # the cos/sin cache kvplan counts in every plan
# ModelOpt FP8: 1 byte per linear weight; LM head and embeddings stay bf16 (ModelOpt's default
# config disables "*lm_head*"; embeddings are not Linear); fp32 per-tensor weight and input
# scales — at most two a linear, 7 linears a layer.
SCALES_AT_MOST = 32 * 7 * 2 * 4


def _fp8(**kw):
    return plan("llama-3.1-8b-instruct", "h100", engine="trtllm", quantization="fp8", **kw)


@pytest.mark.parametrize("tp", [1, 2])
def test_fp8_weights_per_gpu_are_the_modelopt_checkpoint_by_hand(tp):
    p = _fp8(kv_cache_dtype="fp8", tensor_parallel_size=tp)
    bulk = (2 * EMBED * 2 + LINEAR * 1) // tp + NORMS * 2 + ROPE  # vocab and linears split
    assert 0 < p.memory.weights_bytes - bulk <= SCALES_AT_MOST
    # fp8 KV: 32 layers × (K + V) × 8 KV heads / TP × 128 × 1 byte
    assert p.kv_cache.bytes_per_token == 32 * 2 * (8 // tp) * 128
    assert p.inputs["kv_cache_dtype"].value == "fp8"
    assert p.inputs["quantization"].value == "fp8" and p.inputs["quantization"].source == "cli"


def test_fp8_saves_one_byte_a_linear_weight_against_bf16():
    bf16 = plan("llama-3.1-8b-instruct", "h100", engine="trtllm")
    fp8 = _fp8()
    assert 0 < LINEAR - (bf16.memory.weights_bytes - fp8.memory.weights_bytes) <= SCALES_AT_MOST


def test_planned_like_the_checkpoint_modelopt_publishes():
    """nvidia/Llama-3.1-70B-Instruct-FP8 is ModelOpt's own FP8 export of the same model: the
    build-time plan and the published checkpoint weigh the same, and both declare the FP8 KV
    cache hf_ptq.py writes by default (80 layers × (K + V) × 8 KV heads / TP 4 × 128 × 1 B)."""
    built = plan("llama-3.1-70b-instruct", "h100", engine="trtllm", quantization="fp8",
                 tensor_parallel_size=4)
    published = plan("nvidia/Llama-3.1-70B-Instruct-FP8", "h100", engine="trtllm",
                     tensor_parallel_size=4)
    assert built.memory.weights_bytes == published.memory.weights_bytes
    assert built.kv_cache.bytes_per_token == published.kv_cache.bytes_per_token == 40_960


HF_PTQ = ("python examples/llm_ptq/hf_ptq.py --pyt_ckpt_path meta-llama/Llama-3.1-8B-Instruct "
          "--qformat fp8 --kv_cache_qformat {kv} --export_path ./Llama-3.1-8B-Instruct-FP8")
QUANTIZE_PY = ("python examples/quantization/quantize.py --model_dir "
               "meta-llama/Llama-3.1-8B-Instruct --qformat fp8{kv} "
               "--output_dir ./Llama-3.1-8B-Instruct-FP8")


def test_by_default_the_fp8_kv_cache_hf_ptq_declares_is_planned():
    """ModelOpt hf_ptq.py --kv_cache_qformat defaults to fp8 (Model-Optimizer 0.27-0.42 "fp8",
    0.43+ "fp8_cast"): the checkpoint declares kv_cache_quant_algo FP8, which TensorRT-LLM's
    KV cache takes. Llama-3.1-8B: 32 layers × (K + V) × 8 KV heads × 128 × 1 B = 65,536."""
    p = _fp8()
    assert p.kv_cache.bytes_per_token == 65_536
    kv = p.inputs["kv_cache_dtype"]
    assert (kv.value, kv.source) == ("fp8", "model-config")
    step, serve = p.command.split("\n")
    assert step == HF_PTQ.format(kv="fp8")
    assert serve.startswith("trtllm-serve ./Llama-3.1-8B-Instruct-FP8 ")
    assert "dtype" not in serve  # the engine takes the checkpoint's own KV cache
    assert isinstance(p, WhatIfPlan)
    assert (p.what_if.quantization, p.what_if.engine_quantization) == ("fp8", "FP8")
    assert p.what_if.checkpoint == "./Llama-3.1-8B-Instruct-FP8"
    assert "--kv_cache_qformat fp8" in p.what_if.assumptions[-1]
    assert p.problems[0].code == "what-if" and "does not exist yet" in p.problems[0].message


def test_a_16_bit_kv_request_turns_the_recipes_kv_quantization_off():
    """--kv-cache-dtype bfloat16: hf_ptq.py --kv_cache_qformat none, no KV scheme declared,
    the 16-bit cache planned (65,536 × 2 B), no checkpoint-kv-overridden warning."""
    p = _fp8(kv_cache_dtype="bfloat16")
    assert p.kv_cache.bytes_per_token == 131_072
    assert p.command.split("\n")[0] == HF_PTQ.format(kv="none")
    assert "--kv_cache_qformat none" in p.what_if.assumptions[-1]
    assert "checkpoint-kv-overridden" not in [x.code for x in p.problems]


def test_an_fp8_kv_request_stays_in_the_launch_line():
    p = _fp8(kv_cache_dtype="fp8")
    assert p.command.split("\n")[0] == HF_PTQ.format(kv="fp8")
    assert "  dtype: fp8" in p.command  # kv_cache_config.dtype, the user's flag
    assert p.inputs["kv_cache_dtype"].source == "cli"


def test_the_tensorrt_runtime_follows_quantize_pys_default():
    """TensorRT-LLM examples/quantization/quantize.py --kv_cache_dtype defaults to None (no
    KV cache quantizer): the TensorRT engine runtime's recipe plans a 16-bit KV cache unless
    an fp8 one is asked for, which adds --kv_cache_dtype fp8."""
    default = _fp8(backend="tensorrt")
    assert default.command.split("\n")[0] == QUANTIZE_PY.format(kv="")
    assert default.kv_cache.bytes_per_token == 131_072
    assert "quantize.py's default" in default.what_if.assumptions[-1]
    asked = _fp8(backend="tensorrt", kv_cache_dtype="fp8")
    assert asked.command.split("\n")[0] == QUANTIZE_PY.format(kv=" --kv_cache_dtype fp8")
    assert asked.kv_cache.bytes_per_token == 65_536
    assert asked.command.splitlines()[-1].startswith("trtllm-serve ./Llama-3.1-8B-Instruct-FP8 ")


@pytest.mark.parametrize("kv", [None, "bfloat16", "fp8"])
def test_nvfp4_is_planned_alike_on_every_engine_that_serves_it(kv):
    """One rule for the same ModelOpt recipe: TensorRT-LLM's quantize-first nvfp4 and the
    vLLM/SGLang what-if write the same quantizer step and assume the same KV cache."""
    extra = {"kv_cache_dtype": kv} if kv else {}
    plans = [plan("llama-3.1-8b-instruct", "b200", engine=e, quantization="nvfp4", **extra)
             for e in ("trtllm", "vllm", "sglang")]
    assert len({p.command.split("\n")[0] for p in plans}) == 1
    assert len({tuple(p.what_if.assumptions) for p in plans}) == 1
    assert {p.kv_cache.bytes_per_token for p in plans} == {131_072 if kv == "bfloat16"
                                                           else 65_536}


def test_cli_json_has_the_what_if_record(capsys):
    code, out, err = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                         "h100-sxm-80gb", "--engine", "trtllm", "--quantization", "fp8", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["what_if"]["quantization"] == "fp8"
    assert d["what_if"]["assumptions"][-1].startswith("ModelOpt's default --kv_cache_qformat fp8")
    assert d["inputs"]["kv_cache_dtype"] == {"value": "fp8", "source": "model-config"}
    assert d["kv_cache"]["bytes_per_token"] == 65_536
    assert [x["code"] for x in d["problems"]][0] == "what-if"


def test_nvfp4_on_blackwell():
    p = plan("llama-3.1-8b-instruct", "b200", engine="trtllm", quantization="nvfp4")
    # ½ byte a linear weight + an fp8 scale per 16 (+ two fp32 globals a linear)
    bulk = 2 * EMBED * 2 + LINEAR // 2 + LINEAR // 16 + NORMS * 2 + ROPE
    assert 0 < p.memory.weights_bytes - bulk <= 32 * 7 * 8
    assert "--qformat nvfp4 --kv_cache_qformat fp8" in p.command.splitlines()[0]


@pytest.mark.parametrize("gpu,qformat,names", [
    ("a100-sxm-80gb", "fp8", "Ada or Hopper"),     # cc 8.0
    ("h100", "nvfp4", "Blackwell"),                # cc 9.0
    ("l40s", "nvfp4", "Blackwell"),                # cc 8.9: fp8 runs there
])
def test_a_format_the_gpu_cannot_run_is_refused_naming_what_can(gpu, qformat, names):
    with pytest.raises(InvalidInputError) as e:
        plan("llama-3.1-8b-instruct", gpu, engine="trtllm", quantization=qformat)
    assert e.value.code == "gpu-capability" and names in str(e.value)
    hint = e.value.hint or ""
    assert "drop --quantization" in hint
    assert ("--quantization fp8" in hint) == (gpu != "a100-sxm-80gb")


def test_an_unsized_format_or_a_quantized_model_is_refused():
    with pytest.raises(InvalidInputError) as e:
        _fp8_other("int4_awq")
    assert "--quantization fp8" in (e.value.hint or "")
    with pytest.raises(InvalidInputError) as e:
        plan("nvidia/Llama-3.1-70B-Instruct-FP8", "h100", engine="trtllm", quantization="fp8",
             tensor_parallel_size=4)
    assert "already" in str(e.value)


def _fp8_other(qformat):
    return plan("llama-3.1-8b-instruct", "h100", engine="trtllm", quantization=qformat)
