"""A real checkpoint whose format the engine's kernels cannot run on the GPU is a plan that
does not fit — exit 1, "a result, with the reasons in problems" (README, Exit codes) — on every
engine; TensorRT-LLM used to refuse it as bad input (exit 2). A --quantization the GPU cannot
run is a refused value (exit 2) on every engine."""

from __future__ import annotations

import json

import pytest
from clirun import run

NVFP4 = "nvidia/Qwen3-235B-A22B-NVFP4"
FP8 = "Qwen/Qwen3-32B-FP8"


def _plan(capsys, *args):
    code, out, err = run(capsys, "plan", *args, "--json")
    return code, json.loads(out), err


@pytest.mark.parametrize("args", [
    # below every kernel of the engine for the checkpoint's format
    (FP8, "--gpu", "a100-sxm-80gb", "--engine", "trtllm"),                # FP8 ≥ 8.9
    (NVFP4, "--gpu", "h100", "-tp", "8", "--engine", "trtllm"),           # NVFP4 ≥ 10.0
    (NVFP4, "--gpu", "h100", "-tp", "4", "--engine", "sglang"),           # NVFP4 ≥ 10.0
    (NVFP4, "--gpu", "t4", "-tp", "8", "-pp", "2", "--max-model-len", "8192",
     "--engine-version", "0.13.0"),                                       # vLLM 0.13: ≥ 8.0
])
def test_a_checkpoint_the_gpu_cannot_run_exits_1_on_every_engine(capsys, args):
    code, data, err = _plan(capsys, *args)
    assert code == 1, err
    assert data["fits"] is False
    problems = {p["code"]: p for p in data["problems"]}
    assert problems["gpu-capability"]["severity"] == "error"
    assert "does not start" in problems["gpu-capability"]["message"]


@pytest.mark.parametrize("args", [
    ("llama-3.1-8b-instruct", "--gpu", "a100-sxm-80gb", "--engine", "trtllm", "-q", "fp8"),
    ("Qwen/Qwen3-235B-A22B", "--gpu", "h100", "-tp", "8", "--engine", "sglang", "-q", "nvfp4"),
])
def test_a_quantization_the_gpu_cannot_run_exits_2(capsys, args):
    code, data, err = _plan(capsys, *args)
    assert code == 2, err
    assert data["error"]["exit_code"] == 2
    assert "compute capability" in data["error"]["message"]
