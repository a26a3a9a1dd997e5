"""kvplan.api.plan_with_context: the latency context it returns is the one the plan's own
figures were computed with, also where the SLOs choose max_num_seqs and the token budget and
where the plan recommends another --gpu-memory-utilization than the one given; a plan without
figures returns none. The expected figures are the plan's (its performance section)."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.api import plan_with_context
from kvplan.perf import step as perf
from kvplan.specs import Workload


def _at(ctx: perf.PerfContext, p: kvplan.Plan) -> perf.PerfPoint:
    s = p.performance
    assert s is not None
    return perf.evaluate(ctx, concurrency=s.concurrency, input_tokens=s.input_tokens,
                         output_tokens=s.output_tokens, cached_tokens=s.cached_tokens)


@pytest.mark.parametrize(("model", "gpu", "kw"), [
    # SLO-sized: the batch and the chunk size come from the latency targets
    ("meta-llama/Llama-3.1-8B-Instruct", "h100", dict(
        workload=Workload(avg_input_tokens=2048, avg_output_tokens=256, slo_tpot_ms=12,
                          slo_ttft_ms=400), max_model_len=8192)),
    # a format what-if on a 16-bit model
    ("meta-llama/Llama-3.1-8B-Instruct", "b200", dict(quantization="nvfp4",
                                                      max_model_len=8192)),
    # MoE experts split over 2 ranks
    ("Qwen/Qwen3-30B-A3B", "h100", dict(tensor_parallel_size=2, enable_expert_parallel=True,
                                        max_model_len=8192)),
])
def test_the_context_reproduces_the_plans_figures(model, gpu, kw):
    p, ctx = plan_with_context(model, gpu, **kw)
    assert ctx is not None and p.performance is not None
    assert p == kvplan.plan(model, gpu, **kw)  # the same plan as plan()
    got = _at(ctx, p)
    assert round(got.ttft_ms, 2) == p.performance.ttft_ms
    assert round(got.tpot_ms, 3) == p.performance.tpot_ms
    if "workload" in kw:  # the launch line's max_num_seqs: the one the SLOs chose
        assert ctx.max_num_seqs == p.recommendations.max_num_seqs.value


def test_a_plan_that_does_not_start_as_stated_is_replayed_at_the_recommended_budget():
    """Qwen3-32B on one H100 at its default 40,960 tokens does not start at 0.9
    (docs/traffic.md); the plan recommends 0.93 and its figures (and context) are at 0.93."""
    p, ctx = plan_with_context("Qwen/Qwen3-32B", "h100", engine_version="0.11.0")
    assert not p.fits and p.performance is not None and ctx is not None
    assert p.recommendations.gpu_memory_utilization.value == 0.93
    assert ctx.kv_capacity_tokens > p.kv_cache.pool_tokens  # more than at the stated 0.9
    got = _at(ctx, p)
    assert round(got.ttft_ms, 2) == p.performance.ttft_ms


def test_no_figures_no_context():
    p, ctx = plan_with_context("meta-llama/Llama-3.1-70B-Instruct", "l4",
                               tensor_parallel_size=1, max_model_len=8192)
    assert p.performance is None and ctx is None
