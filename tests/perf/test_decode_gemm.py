"""Measured decode-GEMM streaming rates (kvplan/perf/decode_gemm.py): the MI300X FP8 figure
worked by hand from its source, and what it changes in the step model (and what it does not)."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.perf import decode_gemm
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import QuantSpec

# huggingface/blog mi300kernels.md, 'Skinny GEMM kernel' results, 'Torch time (μs)' column:
# Llama-3.1-405B TP8 projections QKV 2304×16384, gate/up 13312×16384, down 16384×6656 (FP8,
# 1 B per weight), at M = 1, 8, 16, 32.
TORCH_US = (14.938 + 77.636 + 31.066) + (16.300 + 80.031 + 31.559) \
    + (16.693 + 75.236 + 31.671) + (16.817 + 82.198 + 35.561)  # 509.706 µs
BYTES = 4 * (2304 * 16384 + 13312 * 16384 + 16384 * 6656)  # 4 × 364,904,448 = 1,459,617,792


def test_mi300x_fp8_rate_hand_worked() -> None:
    assert TORCH_US == pytest.approx(509.706)
    assert BYTES == 1_459_617_792
    # 1,459,617,792 B / 509.706 µs = 2.8636 TB/s: 0.540 of the 5.3 TB/s datasheet
    rate = decode_gemm.weight_stream_bytes_per_s("mi300x", "fp8")
    assert rate == pytest.approx(2.8636e12, rel=1e-4)
    assert rate / 5.3e12 == pytest.approx(0.540, abs=1e-3)


def test_only_measured_gpu_and_dtype_have_a_rate() -> None:
    assert decode_gemm.weight_stream_bytes_per_s("mi300x", "bfloat16") == 0.0
    assert decode_gemm.weight_stream_bytes_per_s("h100-sxm-80gb", "fp8") == 0.0
    assert decode_gemm.weight_stream_bytes_per_s("mi325x", "fp8") == 0.0  # not measured


def _ctx(gpu: str, quant: str | None) -> perf.PerfContext:
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    q = QuantSpec(method="fp8", per_channel=True, source="cli") if quant == "fp8" else None
    return perf.context_for(m, resolve_gpu(gpu), "vllm", "0.12.0", tp=1, quant=q)


def test_context_carries_the_rate_for_mi300x_fp8_only() -> None:
    fp8 = _ctx("mi300x", "fp8")
    assert fp8.compute_dtype == "fp8"
    assert fp8.weight_stream_bytes_per_s == pytest.approx(2.8636e12, rel=1e-4)
    assert _ctx("mi300x", None).weight_stream_bytes_per_s == 0.0  # bf16 GEMMs: not measured
    assert _ctx("h100-sxm-80gb", "fp8").weight_stream_bytes_per_s == 0.0


def test_step_streams_dense_weights_at_the_measured_rate() -> None:
    base = _ctx("h100-sxm-80gb", None)
    # a synthetic deployment: 2.8636 GB of dense weights, no experts, no KV (context 0), one
    # sequence; at the measured 2.8636 TB/s the weights take exactly 1 ms
    ctx = dataclasses.replace(base, dense_read_bytes=2_863_646_479, expert_bytes=0,
                              weight_stream_bytes_per_s=2.863646479e12)
    t = perf.step_terms(ctx, decode_seqs=1, context_tokens=0)
    assert t.bandwidth_s == pytest.approx(1e-3, rel=1e-6)
    assert ctx.coefficients.bandwidth_efficiency == 1.0  # the bundled fit's
    # a user calibration's bandwidth_efficiency scales the measured rate: 0.8 → 1 ms / 0.8
    half = dataclasses.replace(ctx, coefficients=dataclasses.replace(
        ctx.coefficients, bandwidth_efficiency=0.8))
    assert perf.step_terms(half, decode_seqs=1, context_tokens=0).bandwidth_s == pytest.approx(
        1.25e-3, rel=1e-6)
    # without the datum the same bytes stream at datasheet × efficiency × class factor
    c = base.coefficients
    rate = base.bandwidth_bytes_per_s * c.bandwidth_efficiency * base.bandwidth_scale
    t0 = perf.step_terms(dataclasses.replace(ctx, weight_stream_bytes_per_s=0.0),
                         decode_seqs=1, context_tokens=0)
    assert t0.bandwidth_s == pytest.approx(2_863_646_479 / rate, rel=1e-9)


def test_routed_experts_stream_at_the_measured_rate_of_their_dtype() -> None:
    """A fused MoE streams its experts no faster than the GPU's dense GEMMs stream theirs:
    DeepSeek-R1's FP8 experts on MI300X take the measured FP8 rate, on H200 (not measured)
    the class-scaled HBM rate."""
    m = resolve_model("deepseek-r1")
    mi = perf.context_for(m, resolve_gpu("mi300x"), "vllm", "0.14.0", tp=8)
    assert mi.expert_stream_bytes_per_s == pytest.approx(2.8636e12, rel=1e-4)
    h200 = perf.context_for(m, resolve_gpu("h200"), "vllm", "0.14.0", tp=8)
    assert h200.expert_stream_bytes_per_s == 0.0
    # a synthetic step: 1 GB of dense weights at 2 TB/s, 2.8636 GB of experts all touched
    # (10,000 tokens of top-8 of 256), no KV, no FLOPs: 0.5 ms + 1 ms
    ctx = dataclasses.replace(mi, dense_read_bytes=1_000_000_000, expert_bytes=2_863_646_479,
                              weight_stream_bytes_per_s=2e12,
                              expert_stream_bytes_per_s=2.863646479e12,
                              expert_gemm_curve=(), expert_compute_dtype="",
                              floor_family="", kv_bytes_per_token=0,
                              sliding_kv_bytes_per_token=0, dense_flops_per_token=0,
                              expert_flops_per_token=0, lm_head_flops_per_token=0)
    t = perf.step_terms(ctx, decode_seqs=10_000, context_tokens=0)
    assert perf.expert_fraction(ctx, 10_000) == pytest.approx(1.0)
    assert t.bandwidth_s == pytest.approx(1.5e-3, rel=1e-6)
