"""A ModelOpt FP8 checkpoint is not an fp8 checkpoint to vLLM: it detects it as "modelopt"
(ModelOptFp8Config.override_quantization_method, quant_method set from producer.name), whose
get_min_capability is 89 in every release read (vllm/model_executor/layers/quantization/
modelopt.py, PyPI wheels v0.10.0-v0.19.1), and VllmConfig._get_quantization_config refuses a
GPU below it before any kernel is chosen ("Minimum capability: 89"). So on an A100 (8.0) there
is no FP8 Marlin fallback as for an fp8 checkpoint: the plan is a gpu-capability error (exit 1)
naming what runs it, not a plan with the fp8-weight-only warning."""

from __future__ import annotations

import json

import pytest
from clirun import run

import kvplan
from kvplan.knobs import compute_capability
from kvplan.model.whatif import MODELOPT, checkpoint_format
from kvplan.sources.catalog import resolve_gpu
from kvplan.specs import QuantSpec

MODELOPT_FP8 = "nvidia/Llama-3.1-70B-Instruct-FP8"  # hf_quant_config.json: quant_algo FP8
PLAIN_FP8 = "Qwen/Qwen3-32B-FP8"  # quantization_config quant_method fp8 (Fp8Config)


def _errors(p):
    return {x.code: x.message for x in p.problems if x.severity == "error"}


def _codes(p):
    return {x.code for x in p.problems}


def test_a_modelopt_fp8_checkpoint_has_its_own_format():
    q = QuantSpec.from_modelopt("FP8", [], source="checkpoint")
    assert q is not None and checkpoint_format(q) == "modelopt-fp8"
    assert checkpoint_format(QuantSpec(method="fp8", source="checkpoint")) == "fp8"
    assert checkpoint_format(MODELOPT["fp8"].spec) == "fp8"  # the what-if keeps its rule


def test_vllm_refuses_it_on_an_a100_naming_what_runs_it():
    p = kvplan.plan(MODELOPT_FP8, "a100-80gb", tensor_parallel_size=4)
    assert not p.fits
    why = _errors(p)["gpu-capability"]
    assert "vLLM's modelopt kernels need compute capability ≥ 8.9" in why
    assert "has 8.0" in why
    assert "alternatives that run it: a GPU of compute capability ≥ 8.9" in why
    assert "fp8-weight-only" not in _codes(p)  # no Marlin fallback is taken
    proposed = _errors(p)["next-steps"].split("--gpu ")[1].split()[0].rstrip(";")
    cc = compute_capability(resolve_gpu(proposed))
    assert cc is not None and cc >= (8, 9)
    assert kvplan.plan(MODELOPT_FP8, proposed, tensor_parallel_size=4).fits


@pytest.mark.parametrize("gpu", ["l40s", "h100"])
def test_it_plans_from_ada(gpu):
    p = kvplan.plan(MODELOPT_FP8, gpu, tensor_parallel_size=4, max_model_len=8192)
    assert "gpu-capability" not in _codes(p) and "fp8-weight-only" not in _codes(p)


def test_an_fp8_checkpoint_still_runs_weight_only_on_an_a100():
    p = kvplan.plan(PLAIN_FP8, "a100-80gb")
    assert p.fits and "fp8-weight-only" in _codes(p) and "gpu-capability" not in _codes(p)


def test_below_8_0_one_error_says_it():
    p = kvplan.plan(MODELOPT_FP8, "t4", tensor_parallel_size=8, pipeline_parallel_size=2,
                    max_model_len=4096)
    errors = [x for x in p.problems if x.code == "gpu-capability"]
    assert len(errors) == 1 and "≥ 8.9" in errors[0].message


def test_the_config_json_form_is_the_same_checkpoint(capsys, tmp_path):
    """Newer ModelOpt exports write quant_method modelopt into config.json (read by
    model/quant.py _modelopt_in_config): the same rule, through the command line (exit 1)."""
    from kvplan.sources.catalog import data_dir

    cfg = json.loads((data_dir("model_specs") / "configs"
                      / "meta-llama--Llama-3.1-8B-Instruct.json").read_text())
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "FP8",
                                  "ignore": ["lm_head"]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, out, err = run(capsys, "plan", str(tmp_path), "--gpu", "a100-80gb", "--json")
    assert code == 1, err
    problems = {p["code"]: p for p in json.loads(out)["problems"]}
    assert problems["gpu-capability"]["severity"] == "error"
    assert "modelopt kernels need compute capability ≥ 8.9" in (
        problems["gpu-capability"]["message"])
    code, _, err = run(capsys, "plan", str(tmp_path), "--gpu", "h100", "--json")
    assert code == 0, err


def test_trtllm_keeps_its_fp8_rule_for_it():
    p = kvplan.plan(MODELOPT_FP8, "a100-80gb", engine="trtllm", tensor_parallel_size=4)
    assert not p.fits and "TensorRT-LLM's FP8 kernels need compute capability ≥ 8.9" in (
        _errors(p)["gpu-capability"])
    assert kvplan.plan(MODELOPT_FP8, "h100", engine="trtllm", tensor_parallel_size=4,
                       max_model_len=8192).fits


def test_a_sweep_does_not_plan_it_on_an_a100():
    from kvplan.planner.sweep import PrunedKind, candidates
    from kvplan.sources.catalog import resolve_model

    m = resolve_model(MODELOPT_FP8, offline=True)
    cands, pruned = candidates(m, [resolve_gpu("a100-80gb"), resolve_gpu("h100")],
                               engines=["vllm"], max_gpus=8, quantizations=[None],
                               kv_cache_dtypes=None)
    assert {c.gpu.id for c in cands} == {resolve_gpu("h100").id}
    assert pruned and all(p.kind is PrunedKind.UNSUPPORTED_FORMAT for p in pruned)
    assert "vLLM's modelopt kernels need compute capability ≥ 8.9" in pruned[0].reason
