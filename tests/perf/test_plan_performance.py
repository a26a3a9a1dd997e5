"""The performance section of a plan: the latency model on the recommended deployment,
SLO-aware recommendations, cost, and bad input (issue 11)."""

from __future__ import annotations

import json
import math

import pytest
from clirun import run
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import Workload, plan
from kvplan.engines import registry
from kvplan.knobs import Knobs
from kvplan.perf import step as perf
from kvplan.planner import performance
from kvplan.planner.plan import evaluate
from kvplan.sources.catalog import resolve_gpu, resolve_model

QWEN = "Qwen/Qwen3-32B"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_performance_json_contract(capsys):
    code, out, err = run(
        capsys,
        "plan",
        QWEN,
        "--gpu",
        "h200",
        "-tp",
        "2",
        "--avg-input-tokens",
        "1000",
        "--avg-output-tokens",
        "1000",
        "--gpu-hour-price",
        "3.50",
        "--json",
    )
    assert code == 0, err
    pf = json.loads(out)["performance"]
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s", "requests_per_s",
                "concurrency", "calibrated", "cost_per_million_output_tokens"):
        assert key in pf
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
        assert pf[f"{key}_low"] <= pf[key] <= pf[f"{key}_high"]
    # $/M output tokens = price × GPUs / (tokens/s × 3600) × 10⁶ (2 GPUs at $3.50)
    assert pf["cost_per_hour"] == 7.0
    assert math.isclose(pf["cost_per_million_output_tokens"],
                        7.0 / (pf["output_tokens_per_s"] * 3600) * 1e6, rel_tol=1e-3)
    # TPOT as serving benchmarks define it: (e2e − TTFT) / (output − 1)
    assert math.isclose(pf["tpot_ms"], (pf["e2e_ms"] - pf["ttft_ms"]) / 999, rel_tol=2e-3)
    assert "performance" in json.dumps(run(capsys, "schema")[1])


def test_default_workload_is_said():
    p = plan(LLAMA, "h100")
    assert p.performance is not None
    assert p.performance.workload_source == "kvplan-default"
    assert (p.performance.input_tokens, p.performance.output_tokens) == (1024, 256)


def test_slo_sets_max_num_seqs_to_the_largest_concurrency_that_meets_it():
    w = Workload(avg_input_tokens=1000, avg_output_tokens=1000, slo_ttft_ms=500, slo_tpot_ms=30)
    p = plan(QWEN, "h200", tensor_parallel_size=2, workload=w)
    seqs = p.recommendations.max_num_seqs.value
    assert seqs and p.performance.meets_slo
    by = {x.concurrency: x for x in p.performance.by_concurrency}
    assert p.performance.tpot_ms <= 30 and p.performance.ttft_ms <= 500
    assert f"--max-num-seqs {seqs}" in p.command
    assert p.recommendations.max_num_batched_tokens is not None
    assert f"--max-num-batched-tokens {p.recommendations.max_num_batched_tokens.value}" in p.command
    # one more request breaks a target, unless the KV cache binds first (the reason says which)
    reason = p.recommendations.max_num_seqs.reason
    assert ("latency target binds" in reason) != ("binds before the latency targets" in reason)
    assert by  # the table is there


def test_unmeetable_slo_is_an_error_and_exit_1(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--slo-tpot-ms", "0.5", "--json")
    assert code == 1
    p = json.loads(out)
    assert p["fits"] is True
    assert any(x["code"] == "slo-unmet" and "TPOT" in x["message"] for x in p["problems"])


def test_target_above_what_the_slo_allows_is_an_error():
    w = Workload(target_concurrency=4000, avg_input_tokens=1000, avg_output_tokens=200,
                 slo_tpot_ms=20)
    p = plan(LLAMA, "h100", workload=w)
    assert any(x.code == "slo-target-concurrency" for x in p.problems)


@pytest.mark.parametrize("flag,value", [("--slo-ttft-ms", "-5"), ("--slo-tpot-ms", "0"),
                                        ("--slo-tpot-ms", "nan"), ("--gpu-hour-price", "-1"),
                                        ("--gpu-hour-price", "inf"), ("--avg-input-tokens", "0")])
def test_bad_slo_and_price_exit_2_naming_the_flag(capsys, flag, value):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", flag, value)
    assert code == 2 and flag in err and "Traceback" not in err


def test_gpu_without_bandwidth_omits_performance_with_a_warning():
    g = resolve_gpu("h100").model_copy(update={"bandwidth_tbps": None})
    p = plan(LLAMA, g)
    assert p.performance is None and p.fits
    assert any(
        x.code == "no-performance-figures" and "bandwidth_tbps" in x.message for x in p.problems
    )


def test_every_engine_predicts():
    for engine in ("vllm", "sglang", "tgi", "trtllm"):
        p = plan(
            LLAMA,
            "h100",
            engine=engine,
            workload=Workload(avg_input_tokens=512, avg_output_tokens=128),
        )
        assert p.performance is not None and p.performance.tpot_ms > 0, engine


@settings(max_examples=15, deadline=None, derandomize=True)
@given(c1=st.integers(1, 200), c2=st.integers(1, 200))
def test_tpot_does_not_fall_with_more_concurrency(c1, c2):
    """More requests in flight never make a token faster (same deployment)."""
    m, g = resolve_model(LLAMA), resolve_gpu("h100")
    dep, res = evaluate(registry.get("vllm"), m, g, Knobs(), "0.33.0")
    ctx = performance.context(m, g, dep, res, max_num_seqs=1024)
    lo, hi = sorted((c1, c2))
    a = perf.evaluate(ctx, concurrency=lo, input_tokens=1024, output_tokens=256)
    b = perf.evaluate(ctx, concurrency=hi, input_tokens=1024, output_tokens=256)
    assert b.tpot_ms >= a.tpot_ms - 1e-9


def test_a_given_max_num_seqs_stays_under_slos():
    """A flag the user gave stays in the serve line; a latency target it breaks is a warning
    that says how many requests would meet it."""
    w = Workload(avg_input_tokens=1000, avg_output_tokens=1000, slo_tpot_ms=20)
    p = plan(QWEN, "h200", tensor_parallel_size=2, max_num_seqs=256, workload=w)
    assert p.recommendations.max_num_seqs.value == 256 and "--max-num-seqs 256" in p.command
    assert any(x.code == "slo-max-num-seqs" for x in p.problems)


def test_the_concurrency_table_is_computed_only_when_read(monkeypatch):
    """A sweep reads no plan's by_concurrency, so it computes none; reading one (or its JSON)
    computes that one, in the field's place."""
    import json

    import kvplan
    from kvplan.perf import step as perf

    calls = []
    real = perf.concurrency_table
    monkeypatch.setattr(perf, "concurrency_table", lambda *a, **k: calls.append(a) or real(*a, **k))
    result = kvplan.sweep("llama-3.1-8b", gpus=["h100"], max_gpus=2)
    assert calls == []
    p = result.options[0].plan
    text = p.model_dump_json()
    assert len(calls) == 1
    table = json.loads(text)["performance"]["by_concurrency"]
    assert [x["concurrency"] for x in table][:3] == [1, 2, 4]
    assert list(json.loads(text)["performance"])[-1] == "by_concurrency"
    assert [x.concurrency for x in p.performance.by_concurrency] == [x["concurrency"]
                                                                    for x in table]
    assert len(calls) == 1


def test_a_plan_with_its_table_not_yet_computed_pickles_with_the_table():
    import pickle

    import kvplan

    p = kvplan.sweep("llama-3.1-8b", gpus=["h100"], max_gpus=1).options[0].plan
    again = pickle.loads(pickle.dumps(p))
    assert again.model_dump_json() == p.model_dump_json()
    assert again.performance.by_concurrency[0].concurrency == 1


def test_a_plan_equals_its_twin_whether_or_not_its_table_was_read():
    import kvplan

    a, b = (kvplan.sweep("llama-3.1-8b", gpus=["h100"], max_gpus=1).options[0].plan
            for _ in range(2))
    assert b.performance.by_concurrency  # computed in b only
    assert a == b


def test_calibrated_means_architecture_times_engine(capsys):
    """Issue #24 item 4: `calibrated` means "this GPU architecture × engine has measurements",
    whatever the minor version, with the distance stated. The default H100 + vLLM plan (vLLM
    0.33, fitted on 0.12) says calibrated; the version distance is in performance.calibration;
    an Ampere vLLM plan is not calibrated (Ampere's rows are TensorRT-LLM's) and says why."""
    code, out, _ = run(capsys, "plan", "llama-3.1-8b-instruct", "--gpu", "h100")
    assert code == 0
    head = " ".join(out.split("Performance per replica", 1)[1].split("figure")[0].split())
    assert head.endswith("; calibrated)")
    pf = plan("llama-3.1-8b-instruct", "h100").performance
    version = plan("llama-3.1-8b-instruct", "h100").engine.version
    assert version.split(".")[:2] != ["0", "12"]  # the default is not the fitted release
    assert pf is not None and pf.calibrated and pf.not_calibrated_because is None
    assert pf.calibration is not None and pf.calibration.startswith("bundled: Hopper × vLLM; ")
    assert f"vLLM {version}: fitted on 0.12 (" in pf.calibration

    ampere = plan("llama-3.1-8b-instruct", "a100-sxm-80gb", engine_version="0.12.0").performance
    assert ampere is not None and not ampere.calibrated
    assert ampere.not_calibrated_because == (
        "no vllm measurements on Ampere GPUs (Ampere factors from trtllm rows)")
    assert ampere.calibration == ("extrapolated: vLLM coefficients (fitted on Hopper) with "
                                  "Ampere GPU factors")
    trt = plan("llama-3.1-8b-instruct", "a100-sxm-80gb", engine="trtllm").performance
    assert trt is not None and trt.calibrated
    cdna4 = plan("llama-3.1-8b-instruct", "mi355x").performance
    assert cdna4 is not None and not cdna4.calibrated
    assert cdna4.calibration is not None and "CDNA3 GPU factors (nearest measured class to " \
        "CDNA4)" in cdna4.calibration
    tgi = plan("llama-3.1-8b-instruct", "h100", engine="tgi").performance
    assert tgi is not None and tgi.not_calibrated_because == (
        "TGI has no calibration rows (it borrows SGLang's fit)")
