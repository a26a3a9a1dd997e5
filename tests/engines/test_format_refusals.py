"""Formats an engine refuses at start-up are refused by the plan (exit 2), not planned as if
they worked: online fp8 on an already-quantized checkpoint (vLLM ModelConfig.
_verify_quantization: the config's method and --quantization must agree), a ModelOpt FP8/NVFP4
checkpoint on a GPU below TensorRT-LLM's kernels' compute capability (no weight-only fallback),
and an E5M2 KV cache on TensorRT-LLM (its FP8 KV cache is E4M3)."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.errors import InvalidInputError


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_online_fp8_on_an_awq_checkpoint_is_a_mismatch(engine):
    with pytest.raises(InvalidInputError) as e:
        kvplan.plan("Qwen/Qwen3-32B-AWQ", "h100", engine=engine, quantization="fp8")
    assert e.value.code == "quantization-mismatch" and "the checkpoint is awq" in e.value.message
    assert "drop the flag" in (e.value.hint or "")


def test_fp8_on_an_fp8_checkpoint_names_its_own_format():
    assert kvplan.plan("Qwen/Qwen3-32B-FP8", "h100", quantization="fp8").fits


@pytest.mark.parametrize("model, gpu", [("Qwen/Qwen3-32B-FP8", "a100-sxm-80gb"),
                                        ("nvidia/Qwen3-235B-A22B-NVFP4", "h100")])
def test_trtllm_refuses_a_checkpoint_its_kernels_cannot_run(model, gpu):
    with pytest.raises(InvalidInputError) as e:
        kvplan.plan(model, gpu, engine="trtllm", tensor_parallel_size=8)
    assert e.value.code == "gpu-capability" and "TensorRT-LLM's" in e.value.message
    # vLLM runs them (FP8 weight-only through Marlin on Ampere; FP4 through Marlin on Hopper)
    kvplan.plan(model, gpu, tensor_parallel_size=8)


def test_trtllm_fp8_checkpoint_on_hopper_still_plans():
    assert kvplan.plan("Qwen/Qwen3-32B-FP8", "h100", engine="trtllm").fits


def test_trtllm_has_no_e5m2_kv_cache():
    with pytest.raises(InvalidInputError) as e:
        kvplan.plan("meta-llama/Llama-3.1-8B-Instruct", "h100", engine="trtllm",
                    kv_cache_dtype="fp8_e5m2")
    assert e.value.code == "kv-cache-dtype-unsupported" and e.value.hint == (
        "use --kv-cache-dtype fp8 (E4M3)")
    p = kvplan.plan("meta-llama/Llama-3.1-8B-Instruct", "h100", engine="trtllm",
                    kv_cache_dtype="fp8")
    assert "dtype: fp8" in p.command
