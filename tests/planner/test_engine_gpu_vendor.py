"""An engine that does not run on a GPU's vendor at all (Engine.gpu_vendors): TensorRT-LLM builds
CUDA kernels only. plan refuses it (exit 2, naming the engines that do run there), sweep prunes
its candidates on those GPUs, and every other engine is planned there as before."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.engines import registry
from kvplan.errors import InvalidInputError
from kvplan.sources.catalog import gpu_specs

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_only_tensorrt_llm_is_tied_to_one_vendor():
    tied = {e.name: e.gpu_vendors for e in registry.ENGINES.values() if e.gpu_vendors}
    assert tied == {"trtllm": frozenset({"NVIDIA"})}


@pytest.mark.parametrize("gpu", [g.id for g in gpu_specs() if g.vendor != "NVIDIA"])
def test_plan_refuses_tensorrt_llm_off_nvidia(gpu):
    with pytest.raises(InvalidInputError) as e:
        kvplan.plan(LLAMA, gpu, engine="trtllm", max_model_len=8192)
    assert e.value.code == "engine-gpu-vendor" and "NVIDIA GPUs only" in e.value.message
    assert e.value.hint is not None and "--engine vllm / sglang / tgi" in e.value.hint


def test_other_engines_still_plan_on_amd():
    for engine in ("vllm", "sglang", "tgi"):
        p = kvplan.plan(LLAMA, "mi300x", engine=engine, max_model_len=8192)
        assert p.fits and "non-cuda-platform" in {x.code for x in p.problems}


def test_sweep_prunes_tensorrt_llm_on_amd_with_the_reason():
    r = kvplan.sweep(LLAMA, gpus=["mi300x", "h100"],
                     engine=["vllm", "trtllm"], max_gpus=1, max_model_len=8192)
    planned = {(o.plan.engine.name, o.plan.gpu.id) for o in r.options}
    assert ("trtllm", "mi300x") not in planned
    assert {("trtllm", "h100-sxm-80gb"), ("vllm", "mi300x")} <= planned
    gone = [x for x in r.pruned if x.engine == "trtllm" and x.gpu == "mi300x"]
    assert gone and all(x.reason.startswith("unsupported: TensorRT-LLM runs on NVIDIA GPUs")
                        for x in gone)
