"""The KV cache rule of a what-if checkpoint (kvplan/model/whatif.py, docs/what-if.md), declared
once for every engine: a --kv-cache-dtype the user gave switches the recipe's KV cache
quantization (fp8 on, 16-bit off); without one the recipe's documented default holds (ModelOpt
examples/llm_ptq/hf_ptq.py --kv_cache_qformat: "fp8" in Model-Optimizer 0.27.0-0.42.0,
"fp8_cast" from 0.43.0, both an e4m3 KV cache exported as kv_cache_quant_algo "FP8")."""

import pytest

from kvplan.model.whatif import FORMATS, MODELOPT

HF_PTQ = ("python examples/llm_ptq/hf_ptq.py --pyt_ckpt_path m --qformat {q} "
          "--kv_cache_qformat {kv} --export_path ./o")


@pytest.mark.parametrize("q", ["fp8", "nvfp4"])
@pytest.mark.parametrize(("asked", "kv"), [
    (None, "fp8"), ("auto", "fp8"),                       # the recipe's default
    ("fp8", "fp8"), ("fp8_e4m3", "fp8"), ("fp8_e5m2", "fp8"),
    ("bfloat16", "none"), ("bf16", "none"), ("float16", "none"), ("fp16", "none"),
])
def test_modelopt_recipes_follow_the_request_else_hf_ptqs_default(q, asked, kv):
    fmt = MODELOPT[q].for_kv_request(asked)
    assert fmt.step("m", "./o") == HF_PTQ.format(q=q, kv=kv)
    assert fmt.spec.kv_cache_quant_algo == ("FP8" if kv == "fp8" else None)
    assert fmt.spec.what_if == q and fmt.spec.source == "what-if"
    assert f"--kv_cache_qformat {kv}" in fmt.assumptions_planned()[-1]


def test_the_nvfp4_record_is_the_one_every_engine_plans():
    assert MODELOPT["nvfp4"] is FORMATS["nvfp4"]
    # FP8 is not a what-if of the engines that quantize online at load
    assert "fp8" not in FORMATS


def test_modelopt_fp8_is_the_checkpoint_hf_quant_config_describes():
    """FP8_DEFAULT_CFG: e4m3 weights with static per-tensor input scales; the LM head kept
    (_default_disabled_quantizer_cfg "*lm_head*")."""
    spec = MODELOPT["fp8"].spec
    assert (spec.method, spec.static_input_scale, spec.ignore) == ("fp8", True, ["lm_head"])


@pytest.mark.parametrize("q", ["mxfp4", "w8a8", "awq"])
@pytest.mark.parametrize("asked", [None, "fp8", "bfloat16"])
def test_a_recipe_without_kv_quantization_is_left_as_it_is(q, asked):
    fmt = FORMATS[q]
    assert fmt.for_kv_request(asked) is fmt
    assert fmt.spec.kv_cache_quant_algo is None
    assert fmt.assumptions_planned()[-1].endswith("the KV cache stays 16-bit")
