"""FP8 weights below compute capability 8.0: the error names the engine planned and its own
reason (Engine.fp8_refusal), not vLLM's on every engine."""

from __future__ import annotations

import pytest

from kvplan import plan
from kvplan.knobs import capability_problems
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import QuantSpec

FP8_MOE = "Qwen/Qwen3-30B-A3B-FP8"
HEAD = "FP8 weights need compute capability ≥ 8.0 and the Tesla T4 has 7.5; "


def _refusal(engine: str) -> str:
    # vLLM refuses FP8 weights below 8.0 up to 0.13.0 (Fp8Config.get_min_capability 80)
    version = {"engine_version": "0.13.0"} if engine == "vllm" else {}
    p = plan(FP8_MOE, "t4", engine=engine, tensor_parallel_size=4, **version)
    assert not p.fits
    (msg,) = [x.message for x in p.problems if x.code == "gpu-capability"]
    assert msg.startswith(HEAD)
    return msg[len(HEAD):]


def test_sglang_says_its_own_loader_refuses_them():
    assert _refusal("sglang") == (
        "SGLang refuses them when it loads the model ('The quantization method fp8 is not "
        "supported for the current GPU. Minimum capability: 80')")


def test_tgi_says_it_has_no_fp8_gemm_there():
    why = _refusal("tgi")
    assert why.startswith("TGI has no FP8 GEMM for them there") and "vLLM" not in why
    assert "get_fp8_linear" in why and why.endswith("so its warm-up fails")


def test_vllm_keeps_its_message():
    assert _refusal("vllm") == "vLLM refuses them ('Minimum capability: 80')"


@pytest.mark.parametrize(("version", "refused"), [("0.13.0", True), ("0.14.0", False),
                                                  ("0.19.1", False)])
def test_vllm_runs_fp8_weights_on_turing_from_0_14(version, refused):
    """Fp8Config.get_min_capability is 80 in vLLM 0.13.0's wheel and 75 from 0.14.0's (FP8
    Marlin on sm75, vllm-project/vllm PR #29901): a T4 runs the checkpoint weight-only there."""
    p = plan(FP8_MOE, "t4", tensor_parallel_size=4, engine_version=version)
    codes = {x.code for x in p.problems}
    assert ("gpu-capability" in codes) is refused
    assert ("fp8-weight-only" in codes) is not refused


@pytest.mark.parametrize("engine", ["sglang", "tgi"])
def test_no_other_engine_is_blamed_on_vllm(engine):
    assert "vLLM" not in _refusal(engine)


def test_an_engine_that_declares_none_says_vllms_rule_is_applied():
    """A plugin engine without a declaration: the rule applied is vLLM's, and said to be."""
    m, gpu = resolve_model("meta-llama/Llama-3.1-8B-Instruct"), resolve_gpu("t4")
    (p,) = [x for x in capability_problems(m, gpu, "float16", None, "float16",
                                           QuantSpec(method="fp8", source="cli"),
                                           engine_label="Other")
            if x.code == "gpu-capability"]
    assert p.message == (HEAD + "Other is planned with vLLM's rule, as kvplan has not read "
                         "Other's own: vLLM refuses them ('Minimum capability: 80')")
