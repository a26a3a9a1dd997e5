"""Formats an engine refuses at start-up are not planned as if they worked: online fp8 on an
already-quantized checkpoint (vLLM ModelConfig._verify_quantization: the config's method and
--quantization must agree) and an E5M2 KV cache on TensorRT-LLM (its FP8 KV cache is E4M3) are
refused inputs (exit 2); an FP8/NVFP4 checkpoint on a GPU below TensorRT-LLM's kernels' compute
capability (no weight-only fallback) does not fit (exit 1), as on every engine."""

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
    p = kvplan.plan(model, gpu, engine="trtllm", tensor_parallel_size=8)
    assert not p.fits
    (why,) = [x.message for x in p.problems if x.code == "gpu-capability"]
    assert "TensorRT-LLM's" in why and "does not start" in why
    # vLLM runs them (FP8 weight-only through Marlin on Ampere; FP4 through Marlin on Hopper),
    # and the refusal says so
    assert "--engine vllm" in why
    assert "fp8-weight-only" not in {x.code for x in p.problems}
    assert kvplan.plan(model, gpu, tensor_parallel_size=8).fits


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
