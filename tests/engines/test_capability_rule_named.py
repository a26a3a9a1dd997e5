"""The bfloat16 and FP8-weight-only capability messages are vLLM's rule (vllm/config/model.py,
vllm/platforms/interface.py, vllm/model_executor/layers/quantization/fp8.py); another engine is
planned with it, and the message says so rather than read as that engine's own behaviour."""

from __future__ import annotations

import json

import pytest
from clirun import call


def problems(*args: str) -> dict[str, str]:
    code, out, err = call("plan", *args, "--offline", "--json")
    assert code in (0, 1), err
    return {p["code"]: p["message"] for p in json.loads(out)["problems"]}


@pytest.mark.parametrize(("engine", "label"), [("sglang", "SGLang"), ("tgi", "TGI")])
def test_another_engine_is_told_it_is_planned_with_vllms_rule(engine: str, label: str):
    msg = problems("Qwen/Qwen3-8B", "--gpu", "t4", "--engine", engine)["dtype-fallback"]
    assert f"({label} planned with vLLM's rule)" in msg


def test_vllm_plans_say_nothing_more():
    msg = problems("Qwen/Qwen3-8B", "--gpu", "t4")["dtype-fallback"]
    assert "planned with vLLM's rule" not in msg


def test_fp8_weight_only_names_the_rule_for_sglang():
    msg = problems("Qwen/Qwen3-8B", "--gpu", "a100-sxm-80gb", "--engine", "sglang",
                   "--quantization", "fp8")["fp8-weight-only"]
    assert msg.endswith("(SGLang planned with vLLM's rule)")
