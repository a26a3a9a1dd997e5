"""A real quantized checkpoint meets the compute-capability rule its format's what-if meets
(Engine.checkpoint_kernels / checkpoint_kernel, one table per engine): below every kernel an
engine serves the format with, the plan is a gpu-capability error (exit 1) naming what runs it,
and no alternative proposes a layout on that GPU; a GPU that runs the weights only through a
dequantising kernel gets the what-if's fp4-weight-only warning.

Hand-worked from the engines' get_min_capability (the cited values in engines/vllm.py,
sglang.py, tgi.py) and the catalogue's compute capabilities: T4 7.5, V100 7.0, A100 8.0,
H100 9.0, B200 10.0. vLLM: modelopt_fp4 ≥ 8.0 to 0.13 (≥ 7.5 from 0.14: the NVFP4 T4 cases pin
0.13.0, test_checkpoint_kernels_by_release.py has the newer rule), mxfp4 ≥ 8.0, awq_marlin ≥ 8.0
else awq ≥ 7.5;
SGLang: modelopt_fp4 ≥ 10.0, mxfp4 ≥ 8.0, awq_marlin ≥ 8.0 else awq ≥ 7.5; TGI: awq ≥ 7.5."""

from __future__ import annotations

import json

import pytest
from clirun import run

import kvplan
from kvplan.engines import registry
from kvplan.errors import InvalidInputError
from kvplan.knobs import compute_capability
from kvplan.sources.catalog import resolve_gpu
from kvplan.specs import WhatIfPlan

NVFP4 = "nvidia/Qwen3-235B-A22B-NVFP4"  # ModelOpt NVFP4 (hf_quant_config.json quant_algo)
NVFP4_BASE = "Qwen/Qwen3-235B-A22B"  # the 16-bit model its what-if quantizes
OLD = "0.13.0"  # the last vLLM release whose NVFP4 kernels need compute capability 8.0
GPT_OSS = "openai/gpt-oss-20b"  # quant_method mxfp4 (gpt-oss's own layout)
AWQ = "Qwen/Qwen3-32B-AWQ"  # AutoAWQ, 4-bit, group 128
AWQ_BASE = "Qwen/Qwen3-32B"


def _errors(p):
    return {x.code: x.message for x in p.problems if x.severity == "error"}


def _codes(p):
    return {x.code for x in p.problems}


# ------------------------------------------------- the rule, as each engine declares it


@pytest.mark.parametrize(("engine", "fmt", "gpu", "method", "least", "refused"), [
    ("vllm", "nvfp4", "v100-sxm2-32gb", "modelopt_fp4", (7, 5), True),
    ("vllm", "nvfp4", "t4", "modelopt_fp4", (7, 5), False),
    ("vllm", "nvfp4", "a100-80gb", "modelopt_fp4", (7, 5), False),
    ("sglang", "nvfp4", "h100", "modelopt_fp4", (10, 0), True),
    ("sglang", "nvfp4", "b200", "modelopt_fp4", (10, 0), False),
    ("vllm", "mxfp4", "t4", "mxfp4", (8, 0), True),
    ("sglang", "mxfp4", "t4", "mxfp4", (8, 0), True),
    ("sglang", "mxfp4", "h100", "mxfp4", (8, 0), False),
    # AWQ: Marlin from 8.0, the AWQ GEMM kernel from 7.5 (Turing), nothing below
    ("vllm", "awq", "a100-80gb", "awq_marlin", (8, 0), False),
    ("vllm", "awq", "t4", "awq", (7, 5), False),
    ("vllm", "awq", "v100-sxm2-32gb", "awq", (7, 5), True),
    ("sglang", "awq", "t4", "awq", (7, 5), False),
    ("tgi", "awq", "v100-sxm2-32gb", "awq", (7, 5), True),
])
def test_checkpoint_kernel_picks_the_first_kernel_the_gpu_reaches(engine, fmt, gpu, method,
                                                                   least, refused):
    got = registry.get(engine).checkpoint_kernel(fmt, resolve_gpu(gpu))
    assert got is not None
    assert (got[0].method, got[0].least, got[1]) == (method, least, refused)


def test_what_ifs_served_follow_the_kernels():
    # vLLM has kernels for AMD Quark's MXFP4 (the mxfp4 what-if), SGLang only for gpt-oss's
    assert registry.get("vllm").what_if_formats == {"nvfp4", "mxfp4", "w8a8", "awq"}
    assert registry.get("sglang").what_if_formats == {"nvfp4", "w8a8", "awq"}
    assert registry.get("tgi").what_if_formats == {"w8a8", "awq"}
    assert registry.get("trtllm").what_if_formats == {"fp8", "nvfp4"}


# ------------------------------------- a real checkpoint below its kernels: does not fit


@pytest.mark.parametrize(("model", "gpu", "engine", "flags", "need", "has"), [
    (NVFP4, "t4", "vllm", dict(tensor_parallel_size=8, pipeline_parallel_size=2,
                               max_model_len=8192, engine_version=OLD), "8.0", "7.5"),
    (NVFP4, "h100", "sglang", dict(tensor_parallel_size=4), "10.0", "9.0"),
    (NVFP4, "a100-80gb", "sglang", dict(tensor_parallel_size=4), "10.0", "8.0"),
    (GPT_OSS, "t4", "vllm", dict(tensor_parallel_size=2, max_model_len=8192), "8.0", "7.5"),
    (GPT_OSS, "t4", "sglang", dict(tensor_parallel_size=2, max_model_len=8192), "8.0", "7.5"),
    (AWQ, "v100-sxm2-32gb", "vllm", dict(tensor_parallel_size=4), "7.5", "7.0"),
    (AWQ, "v100-sxm2-32gb", "sglang", dict(tensor_parallel_size=4), "7.5", "7.0"),
])
def test_a_checkpoint_its_kernels_cannot_run_does_not_fit(model, gpu, engine, flags, need, has):
    p = kvplan.plan(model, gpu, engine=engine, **flags)
    assert not p.fits
    why = _errors(p)["gpu-capability"]
    assert f"compute capability ≥ {need}" in why and f"has {has}" in why
    assert f"alternatives that run it: a GPU of compute capability ≥ {need}" in why


@pytest.mark.parametrize(("model", "base", "q", "gpu", "engine", "flags"), [
    (NVFP4, NVFP4_BASE, "nvfp4", "t4", "vllm",
     dict(tensor_parallel_size=8, pipeline_parallel_size=2, max_model_len=8192,
          engine_version=OLD)),
    (NVFP4, NVFP4_BASE, "nvfp4", "h100", "sglang", dict(tensor_parallel_size=4)),
    (AWQ, AWQ_BASE, "awq", "v100-sxm2-32gb", "vllm", dict(tensor_parallel_size=4)),
])
def test_the_checkpoint_and_its_what_if_meet_one_rule(model, base, q, gpu, engine, flags):
    """The same sentence refuses the what-if (exit 2, before planning) and the real checkpoint
    (a gpu-capability error in the plan): one rule, one set of numbers."""
    with pytest.raises(InvalidInputError) as e:
        kvplan.plan(base, gpu, engine=engine, quantization=q, **flags)
    assert e.value.code == "gpu-capability"
    reason = e.value.message.removeprefix(f"--quantization {q}: ")
    assert reason in _errors(kvplan.plan(model, gpu, engine=engine, **flags))["gpu-capability"]


def test_the_engine_that_runs_it_is_named():
    # SGLang needs Blackwell for NVFP4; vLLM runs it on Hopper and Ampere (FP4 Marlin)
    p = kvplan.plan(NVFP4, "h100", engine="sglang", tensor_parallel_size=4)
    assert _errors(p)["gpu-capability"].endswith("or --engine vllm")
    steps = _errors(p)["next-steps"]
    assert "--gpu b200" in steps and "--engine vllm" in steps
    assert kvplan.plan(NVFP4, "h100", tensor_parallel_size=4).fits  # what it proposes holds
    # gpt-oss on a T4: neither engine's MXFP4 kernels run there, so no engine is proposed
    p = kvplan.plan(GPT_OSS, "t4", engine="sglang", tensor_parallel_size=2, max_model_len=8192)
    assert "--engine" not in _errors(p)["gpu-capability"] + _errors(p)["next-steps"]


@pytest.mark.parametrize("flags", [dict(max_model_len=8192, engine_version=OLD),
                                   dict(tensor_parallel_size=8, pipeline_parallel_size=2,
                                        max_model_len=8192, engine_version=OLD)])
def test_next_steps_never_propose_a_layout_on_a_gpu_that_cannot_run_it(flags):
    """Before, a T4 without a layout was told to add -tp 8 -pp 2; now only a GPU that runs
    NVFP4 (compute capability ≥ 8.0) that holds the request is proposed."""
    p = kvplan.plan(NVFP4, "t4", **flags)
    steps = _errors(p)["next-steps"]
    assert "--tensor-parallel-size" not in steps and "--pipeline-parallel-size" not in steps
    proposed = steps.split("--gpu ")[1].split()[0].rstrip(";")
    g = resolve_gpu(proposed)
    cc = compute_capability(g)
    assert cc is not None and cc >= (8, 0)
    assert kvplan.plan(NVFP4, proposed, **flags).fits
    assert p.recommendations.tensor_parallel_size.value == flags.get("tensor_parallel_size", 1)


def test_cli_exits_1_with_the_error(capsys):
    code, out, err = run(capsys, "plan", NVFP4, "--gpu", "t4", "-tp", "8", "-pp", "2",
                         "--max-model-len", "8192", "--engine-version", OLD, "--json")
    assert code == 1, err
    data = json.loads(out)
    assert not data["fits"]
    assert {p["code"]: p["severity"] for p in data["problems"]}["gpu-capability"] == "error"


# ------------------------------------------------- where one of its kernels runs it


def test_awq_runs_on_a_t4_through_the_awq_kernel():
    """vLLM's AWQMarlinConfig needs 8.0, but below it vLLM keeps the AWQ GEMM kernel (7.5):
    the checkpoint plans on a T4, and so does its what-if, launched as awq, not awq_marlin."""
    assert kvplan.plan(AWQ, "t4", tensor_parallel_size=4).fits
    p = kvplan.plan(AWQ_BASE, "t4", tensor_parallel_size=4, quantization="awq")
    assert isinstance(p, WhatIfPlan) and p.what_if.engine_quantization == "awq"
    assert "--quantization awq " in p.command + " " and "awq_marlin" not in p.command
    b = kvplan.plan(AWQ_BASE, "b200", quantization="awq")
    assert isinstance(b, WhatIfPlan) and b.what_if.engine_quantization == "awq_marlin"


@pytest.mark.parametrize(("model", "gpu", "flags", "warned"), [
    (NVFP4, "a100-80gb", dict(tensor_parallel_size=4), True),   # FP4 Marlin, as the what-if
    (NVFP4, "h100", dict(tensor_parallel_size=4), True),
    (NVFP4, "b200", dict(tensor_parallel_size=4), False),       # FP4 tensor cores
    (GPT_OSS, "h100", {}, True),                                 # MXFP4 experts, bf16 math
    (GPT_OSS, "b200", {}, False),
])
def test_fp4_weight_only_is_a_warning_as_in_the_what_if(model, gpu, flags, warned):
    p = kvplan.plan(model, gpu, **flags)
    assert p.fits and "gpu-capability" not in _codes(p)
    assert ("fp4-weight-only" in _codes(p)) is warned


def test_what_if_fp4_weight_only_warning_unchanged():
    p = kvplan.plan(NVFP4_BASE, "a100-80gb", quantization="nvfp4", tensor_parallel_size=4)
    assert "fp4-weight-only" in _codes(p)


def test_a_refused_gpu_has_no_weight_only_warning():
    p = kvplan.plan(NVFP4, "t4", tensor_parallel_size=8, pipeline_parallel_size=2,
                    max_model_len=8192, engine_version=OLD)
    assert "fp4-weight-only" not in _codes(p)


# ----------------------------------------------------------------------------- sweep


def test_sweep_does_not_plan_a_gpu_the_checkpoints_kernels_cannot_run():
    """As a what-if's format is left out where its kernels do not run (planner/whatif.py
    unsupported), a checkpoint's own format is: the T4 is listed as not planned, with the
    rule's reason, never as an option or a near miss."""
    from kvplan.planner.sweep import PrunedKind
    r = kvplan.sweep(GPT_OSS, gpus=["t4", "h100"], max_gpus=1)
    assert r.options and {o.gpu for o in r.options} == {"h100-sxm-80gb"}
    t4 = [p for p in r.pruned if p.gpu == "t4"]
    assert t4 and all(p.kind is PrunedKind.UNSUPPORTED_FORMAT for p in t4)
    assert "vLLM's mxfp4 kernels need compute capability ≥ 8.0 and the Tesla T4 has 7.5" in (
        t4[0].reason)
