"""kvplan.perf.step: hand-worked step terms, invariants and the committed fit (its imports:
tests/project/test_import_layers.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvplan.engines import arch_fits
from kvplan.engines.registry import fitted_coefficients
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model

ROOT = Path(__file__).resolve().parents[2]
H100 = resolve_gpu("h100-sxm-80gb")
# Round numbers so the hand arithmetic below stays readable.
UNIT = perf.Coefficients(gemm_efficiency=1.0, bandwidth_efficiency=1.0, step_overhead_ms=0.0,
                         layer_overhead_us=0.0, seq_overhead_us=0.0, allreduce_latency_us=0.0,
                         request_overhead_ms=0.0)


@pytest.fixture(scope="module")
def llama8b() -> perf.PerfContext:
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    return perf.context_for(m, H100, "vllm", "0.12.0", tp=1)


@pytest.fixture(scope="module")
def qwen_moe() -> perf.PerfContext:
    m = resolve_model("Qwen/Qwen3-30B-A3B")
    return perf.context_for(m, H100, "vllm", "0.12.0", tp=1)


def test_dense_step_terms_by_hand(llama8b: perf.PerfContext) -> None:
    """Llama-3.1-8B bf16, H100 SXM, TP1 (config: hidden 4096, 32 layers, 32 heads, 8 KV heads,
    head_dim 128, MLP 14336, vocab 128256 (a multiple of 64, so unpadded), untied head).

    Matmul elements per layer: q 4096·4096 + k,v 2·1024·4096 + o 4096·4096
    + gate_up 2·14336·4096 + down 4096·14336 = 218,103,808; × 32 layers = 6,979,321,856;
    2 FLOPs each → 13,958,643,712 FLOPs per token. LM head 128256·4096 = 525,336,576 → ×2.
    Attention per context token: QKᵀ and PV, 2·128 FLOPs each per head: 4·32·128·32 layers.
    KV: 2 (K,V) · 8 heads · 128 · 2 B · 32 layers = 131,072 B per token.
    Weights read: 8,030,261,248 params · 2 B + RoPE cache 131072·128·2 B = 16,094,076,928 B
    (weights.weight_memory_per_stage), minus the embedding table (a lookup, not a stream):
    525,336,576 · 2 B → 15,043,403,776 B."""
    ctx = llama8b
    assert ctx.dense_flops_per_token == 2 * 32 * (4096 * 4096 + 2 * 1024 * 4096 + 4096 * 4096
                                                  + 2 * 14336 * 4096 + 4096 * 14336)
    assert ctx.dense_flops_per_token == 13_958_643_712
    assert ctx.lm_head_flops_per_token == 2 * 128256 * 4096
    assert ctx.attention_flops_per_context_token == 4 * 32 * 128 * 32
    assert ctx.kv_bytes_per_token == 2 * 8 * 128 * 2 * 32 == 131_072
    assert ctx.weight_bytes_per_gpu == 8_030_261_248 * 2 + 131072 * 128 * 2
    assert ctx.dense_read_bytes == 16_094_076_928 - 128256 * 4096 * 2 == 15_043_403_776
    assert ctx.peak_flops_per_s == 989.4e12 and ctx.bandwidth_bytes_per_s == 3.35e12

    # One decode step, one sequence at context 1024, unit efficiencies and no overheads.
    ctx = dataclasses.replace(ctx, coefficients=UNIT)
    t = perf.step_terms(ctx, decode_seqs=1, context_tokens=1024)
    assert t.gemm_flops == 13_958_643_712 + 1_050_673_152
    assert t.weight_bytes == 15_043_403_776
    assert t.attention_flops == 524_288 * 1024
    assert t.kv_bytes == 131_072 * 1024
    # Both rooflines are byte-bound at batch 1: (15,043,403,776 + 134,217,728) B / 3.35e12 B/s
    assert t.bandwidth_s == pytest.approx((15_043_403_776 + 134_217_728) / 3.35e12)
    assert t.compute_s == 0.0 and t.comm_s == 0.0 and t.overhead_s == 0.0
    assert t.bound == "bandwidth"
    # 8192 prefill tokens are FLOP-bound: 8192 · 13,958,643,712 + one LM-head row.
    p = perf.step_terms(ctx, decode_seqs=0, context_tokens=0, prefill_tokens=8192,
                        prefill_context_tokens=4096, prefill_seqs=1)
    assert p.gemm_flops == 8192 * 13_958_643_712 + 1_050_673_152
    assert p.attention_flops == 524_288 * 8192 * 4096
    assert p.compute_s == pytest.approx((p.gemm_flops + p.attention_flops) / 989.4e12)
    assert p.bound == "compute"


def test_moe_step_terms_by_hand(qwen_moe: perf.PerfContext) -> None:
    """Qwen3-30B-A3B bf16, H100 SXM, TP1 (hidden 2048, 48 layers, 32 heads × 128, 4 KV heads,
    128 experts of width 768, top-8, vocab 151936, untied).

    Dense matmul elements per layer: q 4096·2048 + k,v 2·512·2048 + o 2048·4096 + router
    128·2048 = 19,136,512 → ×48 ×2 = 1,837,105,152 FLOPs per token. One expert: w13
    2·768·2048 + w2 2048·768 = 4,718,592 elements; top-8 → ×8 ×48 ×2 = 3,623,878,656.
    Expert bytes: 128 · 4,718,592 · 48 · 2 B = 57,982,058,496; one token touches 8/128 of them.
    KV: 2 · 4 · 128 · 2 B · 48 = 98,304 B per token."""
    ctx = qwen_moe
    assert ctx.dense_flops_per_token == 2 * 48 * (4096 * 2048 + 2 * 512 * 2048 + 2048 * 4096
                                                  + 128 * 2048) == 1_837_105_152
    assert ctx.expert_flops_per_token == 2 * 48 * 8 * (2 * 768 * 2048 + 2048 * 768)
    assert ctx.expert_bytes == 128 * 4_718_592 * 48 * 2 == 57_982_058_496
    assert ctx.kv_bytes_per_token == 2 * 4 * 128 * 2 * 48 == 98_304
    assert ctx.attention_flops_per_context_token == 4 * 32 * 128 * 48
    # total weights minus all experts minus the embedding table (151936 · 2048 · 2 B)
    assert ctx.dense_read_bytes == ctx.weight_bytes_per_gpu - 57_982_058_496 - 151936 * 2048 * 2
    # one token reads the non-expert weights and 8 of 128 experts: 57,982,058,496 / 16
    assert perf.active_weight_bytes(ctx) == ctx.dense_read_bytes + 3_623_878_656
    ctx = dataclasses.replace(ctx, coefficients=UNIT)
    t = perf.step_terms(ctx, decode_seqs=1, context_tokens=2048)
    assert t.weight_bytes == pytest.approx(ctx.dense_read_bytes + 57_982_058_496 * 8 / 128)
    assert t.gemm_flops == 1_837_105_152 + 3_623_878_656 + 2 * 151936 * 2048
    assert t.kv_bytes == 98_304 * 2048
    # A large batch touches (almost) every expert: 1 − (1 − 8/128)^512 ≈ 1.
    big = perf.step_terms(ctx, decode_seqs=512, context_tokens=2048)
    assert big.weight_bytes == pytest.approx(ctx.dense_read_bytes + 57_982_058_496, rel=1e-9)


def test_tp_adds_allreduce_and_nvlink_vs_pcie() -> None:
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    nv = perf.context_for(m, H100, "vllm", "0.12.0", tp=2)
    pcie = perf.context_for(m, resolve_gpu("l40s"), "vllm", "0.12.0", tp=2)
    assert nv.link_bytes_per_s == 450e9  # 900 GB/s bidirectional NVLink / 2
    # PCIe: x16 of the card's generation × the fitted PCIe link efficiency (engines/arch_fits.py)
    link = arch_fits.PCIE
    assert pcie.link_bytes_per_s == pytest.approx(
        perf.PCIE_X16_BYTES_PER_S[resolve_gpu("l40s").pcie_gen] * link.bandwidth_efficiency)
    assert pcie.link_latency_us == link.allreduce_latency_us and nv.link_latency_us is None
    t = perf.step_terms(nv, decode_seqs=64, context_tokens=1024)
    assert t.comm_s > 0


# -------------------------------------------------------------------- invariants

MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-70B"]
_CTX: dict[tuple, perf.PerfContext] = {}


def _ctx(model: str, engine: str, tp: int, kv: str | None = None) -> perf.PerfContext:
    key = (model, engine, tp, kv)
    if key not in _CTX:
        _CTX[key] = perf.context_for(resolve_model(model), resolve_gpu("h200"), engine, "0.12.0"
                                     if engine == "vllm" else "0.5.6", tp=tp, kv_cache_dtype=kv)
    return _CTX[key]


ctx_args = st.tuples(st.sampled_from(MODELS), st.sampled_from(["vllm", "sglang", "tgi", "trtllm"]),
                     st.sampled_from([1, 2, 4, 8]))
lengths = st.integers(min_value=16, max_value=16384)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ctx_args, lengths, lengths, st.integers(1, 512))
def test_tpot_non_decreasing_in_concurrency(args, i: int, o: int, b: int) -> None:
    ctx = _ctx(*args)
    lo = perf.evaluate(ctx, concurrency=b, input_tokens=i, output_tokens=o)
    hi = perf.evaluate(ctx, concurrency=b + 1, input_tokens=i, output_tokens=o)
    assert hi.tpot_ms >= lo.tpot_ms * (1 - 1e-9)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ctx_args, lengths, lengths, st.integers(1, 256))
def test_throughput_non_decreasing_below_saturation(args, i: int, o: int, b: int) -> None:
    """Per-replica throughput does not fall while every request runs (no KV or seq cap) and
    the token budget does not bound prefill (saturation)."""
    ctx = dataclasses.replace(_ctx(*args), kv_capacity_tokens=None, max_num_seqs=10_000)
    lo = perf.evaluate(ctx, concurrency=b, input_tokens=i, output_tokens=o)
    hi = perf.evaluate(ctx, concurrency=2 * b, input_tokens=i, output_tokens=o)
    assume(not hi.saturated)
    assert hi.output_tokens_per_s >= lo.output_tokens_per_s * (1 - 1e-9)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4]))
def test_more_tp_never_reads_more_weight_bytes_per_gpu(model: str, tp: int) -> None:
    a, b = _ctx(model, "vllm", tp), _ctx(model, "vllm", 2 * tp)
    assert b.dense_read_bytes + b.expert_bytes <= a.dense_read_bytes + a.expert_bytes
    assert b.weight_bytes_per_gpu <= a.weight_bytes_per_gpu


@settings(max_examples=40, deadline=None, derandomize=True)
@given(ctx_args, lengths, lengths, st.integers(1, 256))
def test_fp8_kv_never_slower(args, i: int, o: int, b: int) -> None:
    model, engine, tp = args
    bf16 = dataclasses.replace(_ctx(model, engine, tp), kv_capacity_tokens=None)
    fp8 = dataclasses.replace(_ctx(model, engine, tp, "fp8"), kv_capacity_tokens=None)
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    x = perf.evaluate(bf16, concurrency=b, input_tokens=i, output_tokens=o)
    y = perf.evaluate(fp8, concurrency=b, input_tokens=i, output_tokens=o)
    # TPOT and e2e, not TTFT: in the closed loop faster decoding brings requests back to the
    # prefill queue sooner, so the wait there (perf._prefill_wait_s) may grow a little.
    assert y.tpot_ms <= x.tpot_ms * (1 + 1e-9) and y.e2e_ms <= x.e2e_ms * (1 + 1e-9)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ctx_args, st.integers(16, 8192), lengths, st.integers(1, 256))
def test_ttft_increasing_in_input_length(args, i: int, o: int, b: int) -> None:
    ctx = _ctx(*args)
    short = perf.evaluate(ctx, concurrency=b, input_tokens=i, output_tokens=o)
    long = perf.evaluate(ctx, concurrency=b, input_tokens=2 * i, output_tokens=o)
    assert long.ttft_ms >= short.ttft_ms * (1 - 1e-9)


# ---------------------------------------------------------------------- API

def test_evaluate_fields_and_table() -> None:
    ctx = _ctx("meta-llama/Llama-3.1-8B-Instruct", "vllm", 1)
    table = perf.concurrency_table(ctx, 1024, 256, 100)
    assert [p.concurrency for p in table] == [1, 2, 4, 8, 16, 32, 64, 100]
    p = table[-1]
    assert p.ttft_ms_low <= p.ttft_ms <= p.ttft_ms_high
    assert p.tpot_ms_low <= p.tpot_ms <= p.tpot_ms_high
    assert p.output_tokens_per_s_low <= p.output_tokens_per_s <= p.output_tokens_per_s_high
    assert p.e2e_ms == pytest.approx(p.ttft_ms + 255 * p.tpot_ms)
    assert p.output_tokens_per_s == pytest.approx(100 * 256 / (p.e2e_ms / 1e3))
    assert p.decode_bound in ("compute", "bandwidth", "overhead")
    assert p.calibrated
    assert perf.concurrency_levels(1) == [1] and perf.concurrency_levels(8) == [1, 2, 4, 8]


def test_calibration_flags() -> None:
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    assert perf.context_for(m, H100, "vllm", "0.12.0").calibrated
    # another minor version of a calibrated class × engine is calibrated; the distance is stated
    old = perf.context_for(m, H100, "vllm", "0.5.4")
    assert old.calibrated and "vLLM 0.5.4: fitted on 0.12 (7 minor releases older)" in (
        old.calibration)
    assert not perf.context_for(m, H100, "tgi", "3.3.7").calibrated  # borrowed coefficients
    assert not perf.context_for(m, resolve_gpu("a100-sxm-80gb"), "vllm", "0.12.0").calibrated
    a100_trt = perf.context_for(m, resolve_gpu("a100-sxm-80gb"), "trtllm", "1.0")
    assert a100_trt.calibrated  # Ampere × TensorRT-LLM: perf-overview v0.14 rows
    assert perf.context_for(m, resolve_gpu("mi300x"), "vllm", "0.12.0").calibrated  # MLPerf
    assert not perf.context_for(m, resolve_gpu("mi355x"), "vllm", "0.12.0").calibrated
    # TensorRT-LLM has its own fit now (no longer vLLM's)
    trt = perf.context_for(m, H100, "trtllm", "1.0").coefficients
    assert trt == fitted_coefficients()["trtllm"] and trt != fitted_coefficients()["vllm"]


def test_kv_capacity_queues_requests() -> None:
    ctx = dataclasses.replace(_ctx("meta-llama/Llama-3.1-8B-Instruct", "vllm", 1),
                              kv_capacity_tokens=10 * 1536)
    p = perf.evaluate(ctx, concurrency=40, input_tokens=1024, output_tokens=1024)
    assert p.running == 10
    assert p.ttft_ms > 1000 * 0.5 * p.e2e_ms / 1000  # most of the time is spent waiting


def test_reserving_scheduler_runs_whole_sequences() -> None:
    """TensorRT-LLM's GUARANTEED_NO_EVICT admits a request only when its prompt + max new
    tokens fit (kvplan/engines/trtllm.py Calibration.admission "reserve"); vLLM allocates as
    the sequence grows. Hand-worked: 120,000 KV tokens, 1,000 in + 2,000 out per request:
    reserve 120000 // 3000 = 40 running; on demand 120000 // (1000 + 1000) = 60."""
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    trt = dataclasses.replace(perf.context_for(m, H100, "trtllm", "1.0"),
                              kv_capacity_tokens=120_000, max_num_seqs=1024)
    vll = dataclasses.replace(perf.context_for(m, H100, "vllm", "0.12.0"),
                              kv_capacity_tokens=120_000, max_num_seqs=1024)
    assert trt.admission == "reserve" and vll.admission == "on_demand"
    assert perf.kv_footprint_tokens(trt, 1000, 2000) == 3000
    assert perf.kv_footprint_tokens(vll, 1000, 2000) == 2000
    assert perf.evaluate(trt, concurrency=500, input_tokens=1000, output_tokens=2000).running == 40
    assert perf.evaluate(vll, concurrency=500, input_tokens=1000, output_tokens=2000).running == 60
    # the cap by max_num_seqs and by the concurrency is the same for both
    assert perf.evaluate(trt, concurrency=30, input_tokens=1000, output_tokens=2000).running == 30


def test_missing_gpu_fields() -> None:
    bare = H100.model_copy(update={"bandwidth_tbps": None})
    assert perf.missing_gpu_fields(bare) == ["bandwidth_tbps"]
    assert perf.missing_gpu_fields(H100) == []
    with pytest.raises(ValueError):
        perf.context_for(resolve_model("meta-llama/Llama-3.1-8B-Instruct"), bare, "vllm", "0.12.0")


def test_constants_match_committed_fit() -> None:
    fit = json.loads((ROOT / "benchmarks" / "data" / "perf_fit.json").read_text())
    for engine, values in fit["coefficients"].items():
        got = {k: round(v, 4) for k, v in dataclasses.asdict(fitted_coefficients()[engine]).items()}
        assert got == values
    assert {k: list(v) for k, v in perf.RANGES.items()} == fit["ranges"]


def test_perf_fit_check_has_no_drift() -> None:
    script = ROOT / "benchmarks" / "perf_fit.py"
    r = subprocess.run([sys.executable, str(script), "--check"], check=False,
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_calibration_gpus_use_dense_tflops() -> None:
    """NVIDIA's H100/H200 SXM datasheets print sparse tensor figures (bf16 1,979, fp8 3,958
    TFLOP/s); gpu_specs/ must hold the dense halves (reference/GPUS.md), or every compute term
    of the fit would be 2× optimistic."""
    for gid in ("h100-sxm-80gb", "h200-sxm-141gb"):
        t = resolve_gpu(gid).tflops
        assert t.bf16 == 989.4 and t.fp8 == 1978.9


def test_closed_loop_prefill_wait_by_hand() -> None:
    """Exact MVA of one FCFS queue + a delay (Reiser & Lavenberg 1980), demand D = 1 s, own
    prefill 1 s, delay Z = 3 s: W(k) = D·Q(k−1), Q(k) = k·(W(k) + D)/(W(k) + own + Z).
    k = 1: W = 0, Q(1) = 1·1/4 = 0.25. k = 2: W = 0.25, Q(2) = 2·1.25/4.25 = 10/17.
    k = 3: W = 10/17 s."""
    wait = perf._prefill_wait_s
    assert wait(1, own_s=1.0, demand_s=1.0, delay_s=3.0) == 0.0
    assert wait(2, own_s=1.0, demand_s=1.0, delay_s=3.0) == pytest.approx(0.25)
    assert wait(3, own_s=1.0, demand_s=1.0, delay_s=3.0) == pytest.approx(10 / 17)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.floats(1e-4, 10.0), st.floats(1.0, 5.0), st.floats(0.0, 100.0), st.integers(1, 300))
def test_closed_loop_throughput_never_falls(d: float, own: float, z: float, n: int) -> None:
    """X(n) = n / (W(n) + own + Z) is non-decreasing in n, and W(n) < D·n."""
    wait = perf._prefill_wait_s
    w0, w1 = (wait(k, own_s=d * own, demand_s=d, delay_s=z) for k in (n, n + 1))
    assert (n + 1) / (w1 + d * own + z) >= n / (w0 + d * own + z) * (1 - 1e-12)
    assert w1 < d * (n + 1)


def test_known_throughput_dip_in_the_mixed_steady_state() -> None:
    ctx = dataclasses.replace(_ctx("meta-llama/Llama-3.1-70B", "vllm", 1), kv_capacity_tokens=None,
                              max_num_seqs=10_000)
    lo = perf.evaluate(ctx, concurrency=17, input_tokens=102, output_tokens=19)
    hi = perf.evaluate(ctx, concurrency=25, input_tokens=102, output_tokens=19)
    assert hi.output_tokens_per_s >= lo.output_tokens_per_s


def test_gated_wait_by_hand() -> None:
    """Gated batch server, step 20 ms, prompt 100 ms, 5 prompts/s: ρ = 0.5, E[C] = 40 ms,
    E[C²] = (400 + (40 + 100)·0.5·40) / 0.75 = 3,200 / 0.75 ms², length-biased step
    E[C²]/E[C] = 106.67 ms; wait = 53.33 (residual) + 100 · 0.005 · 106.67 = 106.67 ms.
    No prompts (λ = 0): half a step."""
    wait = perf.gated_wait_open_s
    assert wait(5.0, step_s=0.020, prompt_s=0.100) == pytest.approx(0.32 / 3, rel=1e-9)
    assert wait(0.0, step_s=0.020, prompt_s=0.100) == pytest.approx(0.010)
    assert wait(10.0, step_s=0.020, prompt_s=0.100) == math.inf
    with pytest.raises(ValueError, match="step_s"):
        wait(1.0, step_s=0.0, prompt_s=0.1)


def test_gated_wait_matches_a_monte_carlo_of_the_steps() -> None:
    """Independent check of the derivation: steps back to back, each step_s + prompt_s × the
    Poisson arrivals of the step before; arrivals uniform in time wait until their step ends
    plus the prompts of the others in their own step. Mean wait within 3 %."""
    rng = random.Random(7)
    lam, t0, sp = 5.0, 0.020, 0.100
    c, total, acc = t0, 0.0, 0.0
    for _ in range(200_000):
        # arrivals in this step at uniform times; each waits the rest of the step, and the
        # next step carries all of them
        k, t = 0, rng.expovariate(lam)
        offsets = []
        while t < c:
            offsets.append(t)
            k += 1
            t += rng.expovariate(lam)
        for x in offsets:
            acc += (c - x) + sp * (k - 1)
        total += k
        c = t0 + sp * k
    assert acc / total == pytest.approx(perf.gated_wait_open_s(lam, step_s=t0, prompt_s=sp),
                                        rel=0.03)


def test_gated_wait_closed_loop_is_the_fixed_point() -> None:
    """A lone request waits for nothing; with n clients W = gated(λ(W)), λ = (n − 1)/(cycle + W)."""
    wait = perf.gated_wait_s
    assert wait(1, step_s=0.02, prompt_s=0.1, cycle_s=5.0) == 0.0
    w = wait(40, step_s=0.02, prompt_s=0.1, cycle_s=5.0)
    lam = 39 / (5.0 + w)
    assert perf.gated_wait_open_s(lam, step_s=0.02, prompt_s=0.1) == pytest.approx(w, rel=1e-6)
    assert w < 39 * 0.1 + 0.02


def _toy_ctx() -> perf.PerfContext:
    """A one-GPU context whose step costs only its GEMM FLOPs: 1 GFLOP per token at 1 TFLOP/s
    (1 ms per token), no attention, weights, KV, all-reduce or overhead; 1,000-token budget."""
    base = _ctx("meta-llama/Llama-3.1-8B-Instruct", "vllm", 1)
    c = dataclasses.replace(base.coefficients, gemm_efficiency=1.0, step_overhead_ms=0.0,
                            layer_overhead_us=0.0, seq_overhead_us=0.0)
    return dataclasses.replace(
        base, coefficients=c, dense_flops_per_token=10**9, expert_flops_per_token=0,
        lm_head_flops_per_token=0, attention_flops_per_context_token=0,
        sliding_attention_flops_per_context_token=0, dense_read_bytes=0, expert_bytes=0,
        kv_bytes_per_token=0, sliding_kv_bytes_per_token=0, state_bytes_per_seq=0,
        peak_flops_per_s=1e12, attention_peak_flops_per_s=1e12, max_num_batched_tokens=1000)


def test_burst_wait_by_hand() -> None:
    """5 prompts of 250 tokens arrive together, prefilled first come, first served: the prompts
    ahead of one are 0, 1, 2, 3, 4 (mean 2), each 250 tokens × 1 ms = 0.25 s: 0.5 s. One
    prompt: no wait. 3 prompts of 2,000 tokens (two budgets each): mean 1 ahead × 2 s = 2 s."""
    ctx = _toy_ctx()
    assert perf.burst_wait_s(ctx, 5, 250, 125) == pytest.approx(0.5)
    assert perf.burst_wait_s(ctx, 1, 250, 125) == 0.0
    assert perf.burst_wait_s(ctx, 3, 2000, 1000) == pytest.approx(2.0)


def test_whole_prompt_burst_wait_by_hand() -> None:
    """Whole-prompt admission (SGLang --enable-mixed-chunk): a step's prefill room is the
    1,000-token budget less one token per decoding sequence, filled with whole prompts, at
    least one; the step also decodes. 100 decoding, 300-token prompts: room 900, 3 prompts a
    step of 100 + 900 tokens = 1 s; 7 prompts: 3 ahead on average, 1/3 step each: 1 s. 750
    decoding: room 250, still one prompt, a step of 750 + 300 tokens: 3 prompts, 1 ahead:
    1.05 s. Without whole_prompts the decodes are not in the burst (the vLLM form: 0.9 s)."""
    ctx = dataclasses.replace(_toy_ctx(), whole_prompts=True)
    assert perf.burst_wait_s(ctx, 7, 300, 150, 100, 0) == pytest.approx(1.0)
    assert perf.burst_wait_s(ctx, 3, 300, 150, 750, 0) == pytest.approx(1.05)
    assert perf.burst_wait_s(ctx, 1, 300, 150, 100, 0) == 0.0
    assert perf.burst_wait_s(_toy_ctx(), 7, 300, 150, 100, 0) == pytest.approx(0.9)


def test_burst_share_scales_the_mixed_wait() -> None:
    """The fitted wait ("burst") is burst_share × the burst queue when that exceeds the
    steady-state queue: with share 0 it is the MVA's TTFT, and it grows with the share (32
    clients, 2,000-token prompts, Llama-3.1-70B TP4, shipped coefficients otherwise)."""
    ctx = _ctx("meta-llama/Llama-3.1-70B", "vllm", 4)
    kw = {"concurrency": 32, "input_tokens": 2000, "output_tokens": 300}
    mva = perf.evaluate(ctx, wait_model="mva", **kw).ttft_ms
    zero = dataclasses.replace(ctx, coefficients=dataclasses.replace(ctx.coefficients,
                                                                      burst_share=0.0))
    assert perf.evaluate(zero, **kw).ttft_ms == pytest.approx(mva)
    shares = [0.1, 0.3, 1.0]
    ttfts = [perf.evaluate(dataclasses.replace(zero, coefficients=dataclasses.replace(
        ctx.coefficients, burst_share=s)), **kw).ttft_ms for s in shares]
    assert ttfts == sorted(ttfts) and ttfts[-1] > mva


@pytest.mark.parametrize("output_tokens", [128, 1024])
def test_a_requests_own_prefill_is_in_its_ttft_not_its_tpot(qwen_moe: perf.PerfContext,
                                                            output_tokens: int) -> None:
    """TPOT = (e2e − TTFT) / (output − 1), as serving benchmarks define it: a request's own
    prefill ends with its first token. Alone (concurrency 1) its 8,192-token prompt takes 4
    chunked-prefill steps of 2,048 and then it decodes alone, so its TPOT is that of a
    request over the same context whose prompt is all but one block cached (one short step):
    equal within 1 % (the steady state's decode batch is the life-average one, 127/131 and
    127/128 of a sequence here). The step model used to average its own chunks into its TPOT
    (Qwen3-30B-A3B, H100, vLLM 0.12: +32 % at 128 output tokens) and count them twice in e2e."""
    ctx = dataclasses.replace(qwen_moe, max_num_batched_tokens=2048)

    def one(cached: int) -> perf.PerfPoint:
        return perf.evaluate(ctx, concurrency=1, input_tokens=8192, output_tokens=output_tokens,
                             cached_tokens=cached)
    cold, warm = one(0), one(8176)
    assert cold.tpot_ms == pytest.approx(warm.tpot_ms, rel=0.01)
    assert cold.ttft_ms > warm.ttft_ms  # the chunks' steps are in TTFT
    assert cold.e2e_ms == pytest.approx(cold.ttft_ms + (output_tokens - 1) * cold.tpot_ms)
