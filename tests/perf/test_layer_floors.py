"""MoE and MLA layers' kernel floors (kvplan/perf/layer_floors.py): the interpolation and
scaling worked by hand, where they apply (fine-grained MoE and MLA layers, engines with tables,
expert dtypes timed; the whole grid on Hopper, the fixed costs elsewhere, said) and that the
step time adds exactly them."""

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
    mla, moe = lf.FLOORS_US[VLLM].mla, lf.FLOORS_US[VLLM].routed["fp8_block"]
    # t = 3 lies log2(3) − 1 = 0.585 of the way from t = 2 (46.5 µs) to t = 4 (47.6 µs)
    assert lf._at(mla, 3) == 46.5 + 1.1 * (math.log2(3) - 1)
    assert lf._at(mla, 4) == 47.6
    assert lf._at(mla, 0.25) == mla[0] and lf._at(mla, 5000) == mla[-1] == 168.0
    # held above 64 tokens (a GPU class the tables did not measure): the t = 64 value, 38.9 µs
    assert lf._at(moe, 1024, held=64) == lf._at(moe, 64) == 38.9
    assert lf.held_tokens("Hopper") == 1024 and lf.held_tokens("CDNA3") == 64


def test_deepseek_shaped_step_hand_worked() -> None:
    # 61 MLA layers × 47.6 µs + 58 MoE layers × 15.3 µs (vLLM at 4 tokens, DeepSeek-V3's own
    # expert bytes: scale 1) = 2,903.6 + 887.4 = 3,791.0 µs
    # (block-scaled FP8: one byte per element, DeepSeek-V3's own experts: scale 1)
    ref = float(lf.REF_EXPERT_ELEMENTS)
    got = lf.extra_s(VLLM, "fp8_block", mla_layers=61, moe_layers=58, expert_bytes=ref,
                     tokens=4, moe_tokens=4)
    assert abs(got - 3791.0e-6) < 1e-9
    # the MoE part scales with the routed-expert elements per layer: half of them, half of it
    half = lf.extra_s(VLLM, "fp8_block", mla_layers=0, moe_layers=58, expert_bytes=ref / 2,
                      tokens=4, moe_tokens=4)
    assert abs(half - 887.4e-6 / 2) < 1e-9
    # a shared expert adds its own row per MoE layer, whatever its size (two GEMM calls:
    # vLLM block-FP8 at 4 tokens, 58.7 µs)
    shared = lf.extra_s(VLLM, "fp8_block", mla_layers=0, moe_layers=58, expert_bytes=0.0,
                        tokens=4, moe_tokens=4, shared=True)
    assert abs(shared - 58 * 58.7e-6) < 1e-9
    # bf16 experts: 2 bytes per element, their own row (28.0 µs at 4 tokens)
    bf16 = lf.extra_s(VLLM, "bfloat16", mla_layers=0, moe_layers=58, expert_bytes=2 * ref,
                      tokens=4, moe_tokens=4)
    assert abs(bf16 - 58 * 28.0e-6) < 1e-9
    # a kernel dtype the tables do not time adds no MoE part; an unknown family nothing
    assert lf.extra_s(VLLM, "mxfp4", mla_layers=0, moe_layers=58, expert_bytes=ref,
                      tokens=4, moe_tokens=4) == 0.0
    assert lf.extra_s("no-such-family", "fp8_block", mla_layers=61, moe_layers=58,
                      expert_bytes=1.0, tokens=4, moe_tokens=4) == 0.0


@given(family=st.sampled_from(sorted(lf.FLOORS_US)), tokens=st.floats(0.0, 1e5),
       mla=st.integers(0, 128), moe=st.integers(0, 128), held=st.sampled_from([64, 1024]),
       data=st.data())
def test_within_the_measured_range_and_linear_in_layers(family: str, tokens: float, mla: int,
                                                        moe: int, held: int,
                                                        data: st.DataObject) -> None:
    floors = lf.FLOORS_US[family]
    kernel = data.draw(st.sampled_from(sorted(floors.routed)))
    ref = lf.REF_EXPERT_ELEMENTS * lf.BYTES_PER_ELEMENT[kernel]

    def extra(n_mla: int, n_moe: int, shared: bool = False) -> float:
        return lf.extra_s(family, kernel, mla_layers=n_mla, moe_layers=n_moe, expert_bytes=ref,
                          tokens=tokens, moe_tokens=tokens, shared=shared, held=held)

    shared_only = extra(0, 1, True) - extra(0, 1)
    for row, one in ((floors.mla, extra(1, 0)), (floors.routed[kernel], extra(0, 1)),
                     (floors.shared[kernel], shared_only)):
        assert min(row) * 1e-6 - 1e-15 <= one <= max(row) * 1e-6 + 1e-15
    assert math.isclose(extra(mla, moe), mla * extra(1, 0) + moe * extra(0, 1), rel_tol=1e-9,
                        abs_tol=1e-15)


def _ctx(model: str, gpu: str, engine: str = "vllm") -> perf.PerfContext:
    m = resolve_model(model)
    return perf.context_for(m, resolve_gpu(gpu), engine, "0.14.0" if engine == "vllm" else
                            "0.5.9", tp=8)


def test_the_step_adds_exactly_the_floors_on_hopper() -> None:
    ctx = _ctx("deepseek-r1", "h200")
    assert ctx.floor_family == VLLM and ctx.floor_mla_layers == 61
    assert ctx.floor_kernel == "fp8_block" and ctx.floor_held_tokens == 1024
    assert ctx.floor_shared  # n_shared_experts 1
    assert not _ctx("qwen3-235b-a22b", "h200").floor_shared  # Qwen3's MoE has none
    assert ctx.floor_moe_layers == 58  # DeepSeek-R1's first three layers are dense
    without = dataclasses.replace(ctx, floor_family="", cpu_overlap=False)
    with_ = dataclasses.replace(ctx, cpu_overlap=False)
    for seqs in (1, 8, 64, 300):
        added = (perf.step_terms(with_, decode_seqs=seqs, context_tokens=1000).total_s
                 - perf.step_terms(without, decode_seqs=seqs, context_tokens=1000).total_s)
        expect = lf.extra_s(VLLM, "fp8_block", mla_layers=61, moe_layers=58,
                            expert_bytes=ctx.expert_bytes / 58, tokens=seqs, moe_tokens=seqs,
                            shared=True)
        assert math.isclose(added, expect, rel_tol=1e-9)
    # at 1 token: 61 × 44.1 (MLA) + 58 × 18.8 (routed) + 58 × 61.8 (shared) = 7,364.9 µs
    assert "+7.4 ms per step at 1 token" in ctx.floor_note
    assert "H200 kernel tables" in ctx.floor_note


def test_assumed_off_hopper_and_the_plan_says_so() -> None:
    ctx = _ctx("deepseek-r1", "b200")
    assert ctx.floor_family == VLLM and ctx.floor_held_tokens == 64
    assert ("not measured on Blackwell GPUs: the H200 fixed costs assumed, held above 64 "
            "tokens") in ctx.floor_note
    assert "not measured" not in _ctx("deepseek-r1", "h100").floor_note
    # experts in a kernel dtype the tables do not time (gpt-oss's MXFP4): nothing added
    oss = _ctx("openai/gpt-oss-120b", "h200")
    assert oss.floor_family == VLLM and oss.floor_moe_layers == 36
    assert "not timed for" in oss.floor_note and "none added" in oss.floor_note
    base = dataclasses.replace(oss, floor_family="")
    assert (perf.step_terms(oss, decode_seqs=8, context_tokens=1000)
            == perf.step_terms(base, decode_seqs=8, context_tokens=1000))


def test_dense_and_coarse_moe_models_have_no_floors() -> None:
    ctx = _ctx("llama-3.1-70b-instruct", "h200")
    assert ctx.floor_family == "" and ctx.floor_note == ""
    # Mixtral's 8 large experts are outside the tables' fine-grained shapes (moe_gemm's 128)
    ctx = _ctx("mixtral-8x7b-instruct-v0.1", "h200")
    assert ctx.floor_family == "" and ctx.floor_moe_layers == 0


def test_sglang_reads_its_own_tables() -> None:
    ctx = _ctx("qwen3-235b-a22b", "h100", engine="sglang")
    assert ctx.floor_family == "sglang-triton-fused-moe" and ctx.floor_kernel == "bfloat16"
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
