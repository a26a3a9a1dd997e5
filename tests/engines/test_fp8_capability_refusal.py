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
    p = plan(FP8_MOE, "t4", engine=engine, tensor_parallel_size=4)
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
