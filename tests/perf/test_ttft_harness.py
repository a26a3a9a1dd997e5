"""benchmarks/ttft_harness.py: the lock-step floor that rules the burst harness out for the
vLLM calibration rows (docs/performance.md, Known gaps), worked by hand, and checked to be a
floor of the simulated burst."""

from __future__ import annotations

import dataclasses
import statistics
from types import ModuleType

import benchmod
import pytest

from kvplan.perf import simulate as sim
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model


@pytest.fixture(scope="module")
def harness() -> ModuleType:
    return benchmod.load("ttft_harness")


def test_floor_one_step(harness: ModuleType) -> None:
    # The docs' example: Qwen3-32B bf16 at TP2 on H100, 8 prompts × 1024 tokens, budget 8192:
    # one step of 8192 tokens × 31,205,621,760 FLOP per token per GPU at 989.4 TFLOP/s
    # = 2.556e14 / 9.894e14 s = 258.4 ms, and every prompt's first token ends that step.
    got = harness.lockstep_floor_ms(8, 1024, 8192, 31_205_621_760, 989.4e12)
    assert got == pytest.approx(258.375, abs=0.01)


def test_floor_chunked(harness: ModuleType) -> None:
    # 8 prompts × 4096 tokens, budget 8192 → two prompts finish per step: steps 1,1,2,2,3,3,4,4,
    # mean 2.5 steps of 8192 tokens × 1 GFLOP at 1 TFLOP/s (8.192 s each) = 20.48 s.
    assert harness.lockstep_floor_ms(8, 4096, 8192, 1e9, 1e12) == pytest.approx(20_480.0)
    # 3 prompts × 3000 tokens, budget 4096: last tokens at 3000, 6000, 9000 → steps 1, 2, 3,
    # mean 2 steps of 4.096 s = 8.192 s.
    assert harness.lockstep_floor_ms(3, 3000, 4096, 1e9, 1e12) == pytest.approx(8_192.0)
    # fewer tokens than the budget: one step of n × isl tokens (4 × 1000 × 1 GFLOP → 4 s).
    assert harness.lockstep_floor_ms(4, 1000, 8192, 1e9, 1e12) == pytest.approx(4_000.0)


def test_floor_is_below_the_simulated_burst(harness: ModuleType) -> None:
    """The first round of a simulated burst (no request overhead) can only be slower than the
    floor: the simulation's steps add attention, overheads and efficiencies below 1."""
    m = resolve_model("meta-llama/Llama-3.1-70B-Instruct")
    ctx = perf.context_for(m, resolve_gpu("h100-sxm-80gb"), "vllm", "0.12.0", tp=4,
                           max_num_batched_tokens=8192, max_num_seqs=256,
                           kv_capacity_tokens=600_000)
    ctx = dataclasses.replace(ctx, coefficients=dataclasses.replace(
        ctx.coefficients, request_overhead_ms=0.0))
    n, isl = 16, 2048
    res = sim.simulate(ctx, sim.Requests((isl,) * n, (64,) * n),
                       sim.Harness("closed", concurrency=n))
    floor = harness.lockstep_floor_ms(n, isl, 8192, ctx.dense_flops_per_token, ctx.peak_flops_per_s)
    assert 1e3 * statistics.fmean(res.ttft_s) >= floor
