"""The serving front end as a queue (kvplan/perf/simulate.py, planner/traffic.py): hand-worked
queue values. The engine is Llama-3.1-70B on 4 H100s; a request of 100 in / 2 out tokens
alone takes well under a second, so with a 1 s front-end service every request meets an
empty engine and its TTFT is the lone request's TTFT plus its wait at the front end."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from kvplan.engines import registry
from kvplan.perf import simulate as sim
from kvplan.perf import step as perf
from kvplan.planner import traffic
from kvplan.sources.catalog import resolve_gpu, resolve_model


@pytest.fixture(scope="module")
def ctx() -> perf.PerfContext:
    m = resolve_model("meta-llama/Llama-3.1-70B-Instruct")
    return perf.context_for(m, resolve_gpu("h100-sxm-80gb"), "vllm", "0.12.0", tp=4,
                            max_num_batched_tokens=8192, max_num_seqs=256,
                            kv_capacity_tokens=600_000)


def _lone_ttft(ctx: perf.PerfContext) -> float:
    one = sim.simulate(dataclasses.replace(ctx, frontend_service_s=0.0),
                       sim.Requests((100,), (2,)), sim.Harness("closed", concurrency=1))
    assert one.e2e.mean < 500.0  # ms: far below the 1 s service used below
    return one.ttft_s[0]


def _burst(ctx: perf.PerfContext, n: int, service_s: float, servers: int) -> sim.SimResult:
    c = dataclasses.replace(ctx, frontend_service_s=service_s, frontend_servers=servers)
    return sim.simulate(c, sim.Requests((100,) * n, (2,) * n, (0.0,) * n),
                        sim.Harness("open", request_rate=1.0))


def test_a_burst_through_one_server_waits_k_minus_one_services(ctx: perf.PerfContext) -> None:
    """N requests sent at once, one server of 1 s: the k-th (1-based) starts its service at
    (k − 1) s, so its TTFT is (k − 1) s + the lone request's TTFT (the first waits nothing:
    an idle front end adds no latency beyond the request overhead)."""
    lone = _lone_ttft(ctx)
    res = _burst(ctx, 8, 1.0, 1)
    assert [round(t - lone, 9) for t in res.ttft_s] == [float(k) for k in range(8)]


def test_two_servers_halve_the_wait(ctx: perf.PerfContext) -> None:
    """Two servers (--api-server-count 2): requests 1–2 start at 0, 3–4 at 1 s, 5–6 at 2 s;
    each pair meets the engine together (one prefill step for both), as two requests sent at
    once without a front end do."""
    pair = sim.simulate(dataclasses.replace(ctx, frontend_service_s=0.0),
                        sim.Requests((100,) * 2, (2,) * 2, (0.0, 0.0)),
                        sim.Harness("open", request_rate=1.0)).ttft_s
    assert pair[0] == pair[1]
    res = _burst(ctx, 6, 1.0, 2)
    assert [round(t - pair[0], 9) for t in res.ttft_s] == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]


def test_poisson_arrivals_wait_as_m_d_1(ctx: perf.PerfContext) -> None:
    """Poisson arrivals at 0.3 req/s into one server of 1 s (load ρ = 0.3): the mean wait of
    an M/D/1 queue is ρ·s / (2(1 − ρ)) = 0.3 / 1.4 = 0.2143 s (Pollaczek–Khinchine with zero
    service variance). The server's departures are ≥ 1 s apart, so each request meets an
    empty engine. 20,000 requests: the sample mean within 5 % (seeds 11–15 give 0.212–0.219)."""
    lone = _lone_ttft(ctx)
    n = 20_000
    arr = sim.gamma_arrivals(n, 0.3, 1.0, seed=12)
    c = dataclasses.replace(ctx, frontend_service_s=1.0)
    res = sim.simulate(c, sim.Requests((100,) * n, (2,) * n, arr),
                       sim.Harness("open", request_rate=0.3))
    wait = statistics.fmean(t - lone for t in res.ttft_s)
    assert wait == pytest.approx(0.3 / 1.4, rel=0.05)


def test_spread_sends_never_queue(ctx: perf.PerfContext) -> None:
    """A closed loop in steady state with its 4 clients' first sends spread over one cycle
    (seconds apart, scheduled ahead of time): every send finds the 4.7 ms server idle, so the
    front end changes nothing (the front end serves sends in time order, not in the order
    the simulation schedules them)."""
    pt = perf.evaluate(ctx, concurrency=4, input_tokens=2000, output_tokens=300)
    h = sim.Harness("steady", concurrency=4, stagger_s=pt.e2e_ms / 4e3)
    reqs = sim.Requests((2000,) * 60, (300,) * 60)
    off = sim.simulate(dataclasses.replace(ctx, frontend_service_s=0.0), reqs, h)
    on = sim.simulate(dataclasses.replace(ctx, frontend_service_s=0.0047), reqs, h)
    assert on.ttft_s == pytest.approx(off.ttft_s, rel=1e-12)


def test_vllm_declares_one_api_server_of_4_70_ms() -> None:
    """vLLM's declaration (kvplan/engines/vllm.py): 1 / 212.76 req/s, the fastest GPUStack
    burst (gpt-oss-20b, H100, vLLM 0.11.0), one API server (--api-server-count default 1)."""
    cal = registry.get("vllm").calibration
    assert cal.frontend_service_ms == pytest.approx(1e3 / 212.76, abs=0.005)
    assert cal.frontend_servers == 1


def test_capacity_is_capped_by_the_front_end() -> None:
    """planner/traffic.capacity_rps: min(the engine's closed-loop capacity, servers /
    service). Qwen2.5-0.5B on one H100: 1 / 4.7 ms = 212.77 req/s for 100-token prompts with
    2-token answers (the engine alone serves more); 2,000 / 300-token requests stay
    engine-bound (under 50 req/s)."""
    m = resolve_model("Qwen/Qwen2.5-0.5B-Instruct")
    small = perf.context_for(m, resolve_gpu("h100-sxm-80gb"), "vllm", "0.12.0",
                             max_num_batched_tokens=8192, max_num_seqs=256,
                             kv_capacity_tokens=600_000)
    c = dataclasses.replace(small, frontend_service_s=0.0047)
    short = traffic.Mix(100, 2, 0)
    assert traffic.capacity_rps(dataclasses.replace(c, frontend_service_s=0.0), short, 256) > 213
    assert traffic.capacity_rps(c, short, 256) == pytest.approx(1 / 0.0047, rel=1e-12)
    c2 = dataclasses.replace(c, frontend_servers=2)
    assert traffic.capacity_rps(c2, short, 256) == pytest.approx(2 / 0.0047, rel=1e-12)
    long = traffic.Mix(2000, 300, 0)
    engine = traffic.capacity_rps(dataclasses.replace(c, frontend_service_s=0.0), long, 256)
    assert engine < 50 and traffic.capacity_rps(c, long, 256) == engine
    assert traffic.frontend_rps(dataclasses.replace(c, front_end=False)) == float("inf")
