"""MoE and MLA layers' kernel floors (kvplan/perf/layer_floors.py): the interpolation and
scaling worked by hand, where they apply (MoE / MLA layers, engines with tables; measured on
Hopper, assumed elsewhere and said) and that the step time adds exactly them."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.perf import layer_floors as lf
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model

VLLM = "vllm-triton-fused-moe"
H200 = resolve_gpu("h200")


def test_interpolates_in_log_tokens_and_holds_its_ends() -> None:
    mla, moe = lf.FLOORS_US[VLLM]
    # t = 3 lies log2(3) − 1 = 0.585 of the way from t = 2 (46.5 µs) to t = 4 (47.6 µs)
    assert lf._at(mla, 3) == 46.5 + 1.1 * (math.log2(3) - 1)
    assert lf._at(mla, 4) == 47.6
    assert lf._at(mla, 0.25) == mla[0] and lf._at(mla, 5000) == mla[-1]
    assert lf._at(moe, 64) == moe[-1]


def test_deepseek_shaped_step_hand_worked() -> None:
    # 61 MLA layers × 47.6 µs + 58 MoE layers × 15.3 µs (vLLM at 4 tokens, DeepSeek-V3's own
    # expert bytes: scale 1) = 2,903.6 + 887.4 = 3,791.0 µs
    got = lf.extra_s(VLLM, mla_layers=61, moe_layers=58, expert_bytes=lf.REF_EXPERT_BYTES,
                     tokens=4, moe_tokens=4)
    assert abs(got - 3791.0e-6) < 1e-9
    # the MoE part scales with the routed-expert bytes per layer: half the bytes, half of it
    half = lf.extra_s(VLLM, mla_layers=0, moe_layers=58, expert_bytes=lf.REF_EXPERT_BYTES / 2,
                      tokens=4, moe_tokens=4)
    assert abs(half - 887.4e-6 / 2) < 1e-9
    assert lf.extra_s("no-such-family", mla_layers=61, moe_layers=58, expert_bytes=1.0,
                      tokens=4, moe_tokens=4) == 0.0


@given(family=st.sampled_from(sorted(lf.FLOORS_US)), tokens=st.floats(0.0, 1e5),
       mla=st.integers(0, 128), moe=st.integers(0, 128))
def test_within_the_measured_range_and_linear_in_layers(family: str, tokens: float, mla: int,
                                                        moe: int) -> None:
    one_mla = lf.extra_s(family, mla_layers=1, moe_layers=0, expert_bytes=0.0, tokens=tokens,
                         moe_tokens=tokens)
    assert min(lf.FLOORS_US[family][0]) * 1e-6 <= one_mla <= max(lf.FLOORS_US[family][0]) * 1e-6
    both = lf.extra_s(family, mla_layers=mla, moe_layers=moe,
                      expert_bytes=lf.REF_EXPERT_BYTES, tokens=tokens, moe_tokens=tokens)
    one_moe = lf.extra_s(family, mla_layers=0, moe_layers=1,
                         expert_bytes=lf.REF_EXPERT_BYTES, tokens=tokens, moe_tokens=tokens)
    assert math.isclose(both, mla * one_mla + moe * one_moe, rel_tol=1e-9, abs_tol=1e-15)


def _ctx(model: str, gpu: str, engine: str = "vllm") -> perf.PerfContext:
    m = resolve_model(model)
    return perf.context_for(m, resolve_gpu(gpu), engine, "0.14.0" if engine == "vllm" else
                            "0.5.9", tp=8)


def test_the_step_adds_exactly_the_floors_on_hopper() -> None:
    ctx = _ctx("deepseek-r1", "h200")
    assert ctx.floor_family == VLLM and ctx.floor_mla_layers == 61
    assert ctx.floor_moe_layers == 58  # DeepSeek-R1's first three layers are dense
    without = dataclasses.replace(ctx, floor_family="", cpu_overlap=False)
    with_ = dataclasses.replace(ctx, cpu_overlap=False)
    for seqs in (1, 8, 64):
        added = (perf.step_terms(with_, decode_seqs=seqs, context_tokens=1000).total_s
                 - perf.step_terms(without, decode_seqs=seqs, context_tokens=1000).total_s)
        expect = lf.extra_s(VLLM, mla_layers=61, moe_layers=58,
                            expert_bytes=ctx.expert_bytes / 58, tokens=seqs, moe_tokens=seqs)
        assert math.isclose(added, expect, rel_tol=1e-9)
    assert "+3." in ctx.floor_note and "H200 kernel tables" in ctx.floor_note


def test_assumed_off_hopper_and_the_plan_says_so() -> None:
    ctx = _ctx("deepseek-r1", "b200")
    assert ctx.floor_family == VLLM
    assert "not measured on Blackwell GPUs, the H200 figures assumed" in ctx.floor_note
    assert "not measured" not in _ctx("deepseek-r1", "h100").floor_note


def test_dense_and_coarse_moe_models_have_no_floors() -> None:
    ctx = _ctx("llama-3.1-70b-instruct", "h200")
    assert ctx.floor_family == "" and ctx.floor_note == ""
    # Mixtral's 8 large experts are outside the tables' fine-grained shapes (moe_gemm's 128)
    ctx = _ctx("mixtral-8x7b-instruct-v0.1", "h200")
    assert ctx.floor_family == "" and ctx.floor_moe_layers == 0


def test_sglang_reads_its_own_tables() -> None:
    ctx = _ctx("qwen3-235b-a22b", "h100", engine="sglang")
    assert ctx.floor_family == "sglang-triton-fused-moe"
    assert ctx.floor_mla_layers == 0 and ctx.floor_moe_layers == 94


def test_plan_json_text_and_report_say_it(capsys: pytest.CaptureFixture[str]) -> None:
    from clirun import run

    from kvplan.api import plan
    from kvplan.render import report as rep

    code, out, _ = run(capsys, "plan", "Qwen/Qwen3-30B-A3B", "--gpu", "h100", "--json")
    floors = json.loads(out)["performance"]["routed_experts"]["layer_floors"]
    assert code == 0
    assert floors.startswith("MoE/MLA layers' kernel floors beyond a dense layer's: +")
    code, out, _ = run(capsys, "plan", "Qwen/Qwen3-30B-A3B", "--gpu", "mi300x")
    assert code == 0 and "not measured on CDNA3 GPUs" in " ".join(out.split())
    moe = plan("Qwen/Qwen3-30B-A3B", "h100")
    assert moe.performance is not None and moe.performance.routed_experts is not None
    assert f"{moe.performance.routed_experts.layer_floors}." in rep._assumptions(moe)
