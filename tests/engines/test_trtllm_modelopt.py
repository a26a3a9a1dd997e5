"""TensorRT-LLM's ModelOpt path (issue #21 item 20): --quantization names the qformat ModelOpt
applies to the named 16-bit model before serving; the plan is of the checkpoint it writes."""

import pytest

from kvplan import plan
from kvplan.errors import InvalidInputError

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
    build-time plan and the published checkpoint weigh the same."""
    built = plan("llama-3.1-70b-instruct", "h100", engine="trtllm", quantization="fp8",
                 tensor_parallel_size=4)
    published = plan("nvidia/Llama-3.1-70B-Instruct-FP8", "h100", engine="trtllm",
                     tensor_parallel_size=4)
    assert built.memory.weights_bytes == published.memory.weights_bytes


def test_the_serve_command_quantizes_first_and_serves_the_output():
    lines = _fp8(kv_cache_dtype="fp8").command.splitlines()
    assert lines[0] == ("python examples/llm_ptq/hf_ptq.py --pyt_ckpt_path "
                        "meta-llama/Llama-3.1-8B-Instruct --qformat fp8 --kv_cache_qformat fp8 "
                        "--export_path Llama-3.1-8B-Instruct-fp8")
    assert lines[-1].startswith("trtllm-serve Llama-3.1-8B-Instruct-fp8 ")
    # hf_ptq.py quantizes the KV cache unless told not to
    assert "--kv_cache_qformat none" in _fp8().command
    engine = _fp8(backend="tensorrt", kv_cache_dtype="fp8").command.splitlines()
    assert engine[0] == ("python examples/quantization/quantize.py --model_dir "
                         "meta-llama/Llama-3.1-8B-Instruct --qformat fp8 --kv_cache_dtype fp8 "
                         "--output_dir Llama-3.1-8B-Instruct-fp8")
    assert engine[-1].startswith("trtllm-serve Llama-3.1-8B-Instruct-fp8 ")
    assert any(q.code == "quantize-first" for q in _fp8().problems)


def test_nvfp4_on_blackwell():
    p = plan("llama-3.1-8b-instruct", "b200", engine="trtllm", quantization="nvfp4")
    # ½ byte a linear weight + an fp8 scale per 16 (+ two fp32 globals a linear)
    bulk = 2 * EMBED * 2 + LINEAR // 2 + LINEAR // 16 + NORMS * 2 + ROPE
    assert 0 < p.memory.weights_bytes - bulk <= 32 * 7 * 8
    assert "--qformat nvfp4" in p.command.splitlines()[0]


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
