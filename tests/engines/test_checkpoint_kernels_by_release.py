"""A kernel rule that changed between releases (Kernel.since / until) is applied for the release
planned: vLLM's ModelOptNvFp4Config.get_min_capability is 80 in v0.10.0-v0.13.0 and 75 from
v0.14.0 (vllm/model_executor/layers/quantization/modelopt.py in the PyPI wheels of v0.10.0,
v0.11.0, v0.12.0, v0.13.0, v0.14.0 ... v0.19.1; FP4 Marlin for Turing: vllm-project/vllm#29901).
A T4 (7.5) runs an NVFP4 checkpoint from 0.14.0, weight-only; a V100 (7.0) never does."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.engines import registry
from kvplan.errors import InvalidInputError
from kvplan.planner.sweep import PrunedKind, candidates
from kvplan.sources.catalog import resolve_gpu, resolve_model

NVFP4 = "nvidia/Qwen3-235B-A22B-NVFP4"
NVFP4_BASE = "Qwen/Qwen3-235B-A22B"
ON_T4 = dict(tensor_parallel_size=8, pipeline_parallel_size=2, max_model_len=8192)


def _errors(p):
    return {x.code: x.message for x in p.problems if x.severity == "error"}


@pytest.mark.parametrize(("version", "least", "refused"), [
    ("0.10.0", (8, 0), True), ("0.13.0", (8, 0), True), ("0.13.9", (8, 0), True),
    ("0.14.0", (7, 5), False), ("0.19.1", (7, 5), False), (None, (7, 5), False)])
def test_vllm_nvfp4_rule_on_a_t4_by_release(version, least, refused):
    got = registry.get("vllm").checkpoint_kernel("nvfp4", resolve_gpu("t4"), version)
    assert got is not None and (got[0].method, got[0].least, got[1]) == (
        "modelopt_fp4", least, refused)


def test_the_release_planned_decides_a_real_checkpoint():
    old = kvplan.plan(NVFP4, "t4", engine_version="0.13.0", **ON_T4)
    assert not old.fits
    why = _errors(old)["gpu-capability"]
    assert "vLLM 0.13.0's modelopt_fp4 kernels need compute capability ≥ 8.0" in why
    assert "--engine-version 0.14.0 or later" in why  # the release that runs it
    new = kvplan.plan(NVFP4, "t4", engine_version="0.14.0", **ON_T4)
    assert new.fits and "gpu-capability" not in _errors(new)
    assert "fp4-weight-only" in {x.code for x in new.problems}  # FP4 Marlin, 16-bit math
    assert kvplan.plan(NVFP4, "t4", **ON_T4).fits  # the newest release modelled


def test_a_gpu_below_every_release_names_no_release():
    p = kvplan.plan(NVFP4, "v100-sxm2-32gb", engine_version="0.13.0", **ON_T4)
    why = _errors(p)["gpu-capability"]
    assert "need compute capability ≥ 8.0" in why and "--engine-version" not in why
    why = _errors(kvplan.plan(NVFP4, "v100-sxm2-32gb", **ON_T4))["gpu-capability"]
    assert "need compute capability ≥ 7.5 and the Tesla V100" in why


def test_the_what_if_meets_the_release_rule_too():
    with pytest.raises(InvalidInputError) as e:
        kvplan.plan(NVFP4_BASE, "t4", quantization="nvfp4", engine_version="0.13.0", **ON_T4)
    assert e.value.code == "gpu-capability" and "vLLM 0.13.0's" in e.value.message
    assert "--engine-version 0.14.0 or later" in (e.value.hint or "")
    p = kvplan.plan(NVFP4_BASE, "t4", quantization="nvfp4", engine_version="0.14.0", **ON_T4)
    assert p.what_if is not None and p.what_if.engine_quantization == "modelopt_fp4"


def test_a_sweep_prunes_by_the_release_it_plans():
    m = resolve_model(NVFP4, offline=True)
    t4 = [resolve_gpu("t4")]

    def pruned(version):
        _, out = candidates(m, t4, engines=["vllm"], max_gpus=16, quantizations=[None],
                            kv_cache_dtypes=None, engine_version=version)
        return [p for p in out if p.kind is PrunedKind.UNSUPPORTED_FORMAT]

    assert pruned("0.13.0") and "vLLM 0.13.0's modelopt_fp4" in pruned("0.13.0")[0].reason
    assert not pruned("0.14.0") and not pruned(None)
