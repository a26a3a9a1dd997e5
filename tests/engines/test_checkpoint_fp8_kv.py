"""ModelOpt checkpoints that declare an FP8 KV cache (issue #24, Why): each engine's
`--kv-cache-dtype auto` as its source decides it.

* vLLM ≥ 0.13: auto → fp8_e4m3 (vllm/utils/torch_utils.py resolve_kv_cache_dtype_string,
  PR #29980); 0.12 and earlier keep the model dtype.
* SGLang: auto → fp8_e4m3 (srt/model_executor/model_runner.py configure_kv_cache_dtype).
* TensorRT-LLM: the checkpoint's kv_cache_quant_algo is the cache's dtype.
* TGI: the KV dtype comes only from --kv-cache-dtype: bf16, with a note.

nvidia/Llama-3.1-70B-Instruct-FP8 (hf_quant_config.json: quant_algo FP8, kv_cache_quant_algo
FP8; 80 layers, 8 KV heads of 128): an fp8 cache holds 80 × 2 (K, V) × 8 × 128 × 1 B =
163,840 B a token at TP 1; bf16 twice that.
"""

import json

import pytest

from kvplan import plan
from kvplan.model.quant import kv_cache_algo, quantization

MODEL = "nvidia/Llama-3.1-70B-Instruct-FP8"
FP8_TOKEN = 80 * 2 * 8 * 128  # 163,840 B
BF16_TOKEN = 2 * FP8_TOKEN


@pytest.mark.parametrize(("engine", "version", "kv"), [
    ("vllm", None, "fp8_e4m3"), ("sglang", None, "fp8_e4m3"), ("trtllm", None, "fp8")])
def test_engines_that_read_the_checkpoint_allocate_fp8(engine, version, kv):
    p = plan(MODEL, "h200", engine=engine, engine_version=version)
    assert p.inputs["kv_cache_dtype"].value == kv
    assert p.inputs["kv_cache_dtype"].source == "model-config"
    assert p.kv_cache.bytes_per_token == FP8_TOKEN
    # the engine does it by itself: the launch line has no KV dtype flag or YAML field
    assert "kv-cache-dtype" not in p.command and "dtype: fp8" not in p.command


@pytest.mark.parametrize(("engine", "version"), [("tgi", None), ("vllm", "0.12.0")])
def test_engines_that_keep_bf16_say_so(engine, version):
    p = plan(MODEL, "h200", engine=engine, engine_version=version)
    assert p.inputs["kv_cache_dtype"].value == "bfloat16"
    assert p.kv_cache.bytes_per_token == BF16_TOKEN
    assert "checkpoint-kv-ignored" in [x.code for x in p.problems]


def test_explicit_kv_dtype_wins_over_the_checkpoint():
    p = plan(MODEL, "h200", engine="vllm", kv_cache_dtype="bfloat16")
    assert p.inputs["kv_cache_dtype"].value == "bfloat16"
    assert p.kv_cache.bytes_per_token == BF16_TOKEN


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_16_bit_request_against_the_checkpoints_fp8_says_the_line_would_start_fp8(engine):
    """The plan keeps the bf16 cache asked for, but its launch line (the model's own dtype is
    left out, as `auto`) would start the checkpoint's FP8 cache: a warning says so, what the
    engine does with an explicit request, and how to get a 16-bit cache."""
    p = plan(MODEL, "h200", engine=engine, kv_cache_dtype="bfloat16")
    assert p.kv_cache.bytes_per_token == BF16_TOKEN
    (w,) = [x for x in p.problems if x.code == "checkpoint-kv-overridden"]
    assert w.severity == "warning" and "--kv_cache_qformat none" in w.message
    assert "auto takes" in w.message and p.command.count("bfloat16") == 0
    assert "checkpoint-kv-overridden" not in [
        x.code for x in plan(MODEL, "h200", engine=engine).problems]


def test_fp8_kv_holds_twice_the_tokens_per_kv_byte():
    fp8 = plan(MODEL, "h200", engine="vllm")
    bf16 = plan(MODEL, "h200", engine="vllm", engine_version="0.12.0")
    assert fp8.kv_cache.bytes_per_token * 2 == bf16.kv_cache.bytes_per_token


@pytest.mark.parametrize(("q", "want"), [
    ({"kv_cache_quant_algo": "FP8"}, "FP8"),                       # hf_quant_config.json
    ({"kv_cache_scheme": {"type": "float", "num_bits": 8, "dynamic": False}}, "FP8"),  # config
    ({"kv_cache_scheme": {"type": "float", "num_bits": 4}}, "FLOAT4"),
    ({"kv_cache_quant_algo": None}, None), ({}, None)])
def test_kv_cache_algo_reads_both_modelopt_forms(q, want):
    assert kv_cache_algo(q) == want


def test_config_json_modelopt_form_carries_the_kv_algo():
    cfg = {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                   "kv_cache_scheme": {"type": "float", "num_bits": 8},
                                   "ignore": ["lm_head"]}}
    spec, why = quantization(cfg, None, "config.json")
    assert why is None and spec is not None
    assert (spec.method, spec.kv_cache_quant_algo) == ("nvfp4", "FP8")


def test_no_kv_algo_leaves_auto_at_the_model_dtype():
    extra = json.loads('{"quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}}')
    spec, _ = quantization({}, extra, "config.json")
    assert spec is not None and spec.kv_cache_quant_algo is None
