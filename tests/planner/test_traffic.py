"""kvplan.planner.traffic: the replica count for a rate is the smallest that holds it."""

from __future__ import annotations

from kvplan.perf import step as perf
from kvplan.planner import traffic
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import Workload


def test_replicas_are_the_fewest_that_hold_the_rate() -> None:
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    ctx = perf.context_for(m, resolve_gpu("h100-sxm-80gb"), "vllm", "0.12.0",
                           max_num_batched_tokens=8192, max_num_seqs=256,
                           kv_capacity_tokens=400_000)
    w = Workload(request_rate=40, slo_ttft_ms=400, slo_percentile=99)
    mix = traffic.Mix(2000, 300, 0)
    got = traffic.replicas_for(ctx, w, mix, 40.0, 16, 256)
    assert got.meets and traffic.meets(got.result, w)
    assert got.rate_per_replica <= traffic.MAX_UTILIZATION * got.capacity_rps
    r = got.replicas
    assert r >= 2
    fewer = 40.0 / (r - 1)
    over = fewer > traffic.MAX_UTILIZATION * got.capacity_rps
    assert over or not traffic.meets(traffic._run(ctx, mix, fewer, 1.0, 16), w)


def test_a_daily_curve_simulates_each_rate_once() -> None:
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    ctx = perf.context_for(m, resolve_gpu("h100-sxm-80gb"), "vllm", "0.12.0",
                           max_num_batched_tokens=8192, max_num_seqs=256,
                           kv_capacity_tokens=400_000)
    w = Workload(slo_ttft_ms=1000, slo_percentile=99)
    curve = [(0, 0.0), (1, 5.0), (2, 30.0), (3, 5.0)]
    got = traffic.replicas_for_curve(ctx, w, traffic.Mix(1000, 200, 0), curve, block_size=16,
                                     running=256)
    assert [i.replicas for i in got][0] == 0
    assert got[1].replicas == got[3].replicas <= got[2].replicas
