"""kvplan.perf.simulate: closed-form limits (one request, a rate far below capacity,
saturation), agreement with perf.step.evaluate() where both model the same harness, the
benchmarks' definitions (arrivals, lengths, percentiles) and invariants of the scheduler."""

from __future__ import annotations

import dataclasses
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.perf import simulate as sim
from kvplan.perf import step as perf


def _const(n: int, i: int, o: int, arrivals: tuple[float, ...] | None = None) -> sim.Requests:
    return sim.Requests((i,) * n, (o,) * n, arrivals)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_single_request_is_the_step_model(llama70b: dict[str, perf.PerfContext],
                                          engine: str) -> None:
    """One request alone: TTFT = its prefill step + the request overhead; every later token
    one decode step at its context (the step time is linear in context, so the mean of the
    O − 1 steps is the step at the mean context I + (O − 2)/2)."""
    ctx = llama70b[engine]
    i, o = 2000, 300
    res = sim.simulate(ctx, _const(1, i, o), sim.Harness("closed", concurrency=1))
    overhead = ctx.coefficients.request_overhead_ms
    prefill = perf._step_s(ctx, 0, 0, i, i / 2, 1) * 1e3
    tpot = perf._step_s(ctx, 1, i + (o - 2) / 2) * 1e3
    assert res.ttft.mean == pytest.approx(prefill + overhead, rel=1e-9)
    assert res.tpot.mean == pytest.approx(tpot, rel=1e-6)
    assert res.e2e.mean == pytest.approx(prefill + overhead + (o - 1) * tpot, rel=1e-6)
    assert res.itl.p50 == pytest.approx(tpot, rel=0.02)  # ITLs spread ±1 % around it
    assert res.completed == 1 and res.preemptions == 0


def test_rate_far_below_capacity_every_request_alone(llama70b: dict[str, perf.PerfContext]
                                                     ) -> None:
    """At 0.01 req/s, nearly regular (burstiness 1,000: gaps 100 s ± 3 %), each request done
    in ~5 s: no two requests meet, every percentile is the lone request's figure."""
    ctx = llama70b["vllm"]
    n = 200
    arr = sim.gamma_arrivals(n, 0.01, 1000.0, seed=3)
    assert min(b - a for a, b in zip(arr, arr[1:], strict=False)) > 10.0
    alone = sim.simulate(ctx, _const(1, 1000, 200), sim.Harness("closed", concurrency=1))
    res = sim.simulate(ctx, _const(n, 1000, 200, arr), sim.Harness("open", request_rate=0.01))
    for got, want in ((res.ttft, alone.ttft), (res.tpot, alone.tpot), (res.e2e, alone.e2e)):
        assert got.p99 == pytest.approx(want.mean, rel=1e-6)
        assert got.p50 == pytest.approx(want.mean, rel=1e-6)
    assert res.max_running == 1


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_saturation_throughput_is_the_full_batch(llama70b: dict[str, perf.PerfContext],
                                                 engine: str) -> None:
    """Far above capacity the queue never empties: the replica runs max_num_seqs requests and
    serves what a closed loop of max_num_seqs serves; TTFT grows with the queue."""
    ctx = dataclasses.replace(llama70b[engine], max_num_seqs=32)
    n = 640
    arr = sim.gamma_arrivals(n, 1000.0, seed=1)  # all sent within ~1 s
    res = sim.simulate(ctx, _const(n, 512, 256, arr), sim.Harness("open", request_rate=1e3))
    full = perf.evaluate(ctx, concurrency=32, input_tokens=512, output_tokens=256)
    assert res.max_running == 32
    assert res.output_tokens_per_s == pytest.approx(full.output_tokens_per_s, rel=0.05)
    # the last request waits for (n − 32) / 32 batches ahead of it: p99 TTFT ≈ 0.98 n / rate
    assert res.ttft.p99 > 0.9 * (n - 32) / full.requests_per_s * 1e3


@pytest.mark.parametrize("c", [8, 32])
def test_prefill_first_burst_agrees_with_evaluate(llama70b: dict[str, perf.PerfContext],
                                                  c: int) -> None:
    """SGLang's evaluate() models the closed loop started together (waves): the simulation of
    that harness agrees within 5 %."""
    ctx = llama70b["sglang"]
    pt = perf.evaluate(ctx, concurrency=c, input_tokens=2000, output_tokens=300)
    res = sim.simulate(ctx, _const(20 * c, 2000, 300), sim.Harness("closed", concurrency=c))
    assert res.ttft.mean == pytest.approx(pt.ttft_ms, rel=0.05)
    assert res.tpot.mean == pytest.approx(pt.tpot_ms, rel=0.05)
    assert res.output_tokens_per_s == pytest.approx(pt.output_tokens_per_s, rel=0.05)


@pytest.mark.parametrize("engine", ["vllm", "sglang-mc"])
@pytest.mark.parametrize(("c", "i", "o"), [(8, 2000, 300), (32, 2000, 300), (128, 512, 1024),
                                           (400, 512, 1024)])
def test_mixed_steady_state_agrees_with_evaluate(llama70b: dict[str, perf.PerfContext],
                                                 engine: str, c: int, i: int, o: int) -> None:
    """evaluate() models the desynchronised steady state of mixed steps (vLLM; SGLang with
    --enable-mixed-chunk, its own admission in the simulation): TPOT and throughput of the
    simulated steady state agree within 5 % (TTFT: the tests below; SGLang measured when
    added: TPOT −2.3, −1.5, −0.2, −0.1 %, throughput +3.3, +4.4, +0.9, −0.4 %)."""
    ctx = llama70b[engine]
    pt = perf.evaluate(ctx, concurrency=c, input_tokens=i, output_tokens=o)
    h = sim.Harness("steady", concurrency=c, stagger_s=pt.e2e_ms / 1e3 / c)
    res = sim.simulate(ctx, _const(30 * c, i, o), h)
    assert res.tpot.mean == pytest.approx(pt.tpot_ms, rel=0.05)
    assert res.output_tokens_per_s == pytest.approx(pt.output_tokens_per_s, rel=0.05)


def test_constant_lengths_keep_their_stagger_exactly(llama70b: dict[str, perf.PerfContext]
                                                     ) -> None:
    """Hand-worked exact steady state of decode-first chunked prefill, 8 clients, 2,000-token
    prompts (one 8,192-token step each), 300-token answers, no request overhead, the clients'
    first requests spread over one cycle: every request lives 1 prefill + 299 decode steps,
    so the spacing never changes; a finished request's successor arrives at the end of a
    step and is prefilled in the next one, alone, beside the 7 others' decodes (their
    contexts are 2,000–2,300 tokens). Exact TTFT: one mixed step of 2,000 prefill tokens + 7
    decodes, for every request (p50 = p99). Both closed forms assume random phases and wait
    more: the MVA ~+21 %, the gated server ~+18 %. So a constant-length closed loop is not the
    desynchronised steady state evaluate() describes; the TTFT comparisons below spread the
    output lengths ±10 % to desynchronise it."""
    base = llama70b["vllm"]
    ctx = dataclasses.replace(base, coefficients=dataclasses.replace(
        base.coefficients, request_overhead_ms=0.0))
    pt = perf.evaluate(ctx, concurrency=8, input_tokens=2000, output_tokens=300)
    res = sim.simulate(ctx, _const(240, 2000, 300),
                       sim.Harness("steady", concurrency=8, stagger_s=pt.e2e_ms / 8e3))
    lo = perf._step_s(ctx, 7, 2000, 2000, 1000, 1)
    hi = perf._step_s(ctx, 7, 2300, 2000, 1000, 1)
    assert lo * (1 - 1e-9) <= min(res.ttft_s) <= max(res.ttft_s) <= hi * (1 + 1e-9)
    gated = perf.evaluate(ctx, concurrency=8, input_tokens=2000, output_tokens=300,
                          wait_model="gated")
    assert pt.ttft_ms > 1.1 * hi * 1e3 and gated.ttft_ms > 1.1 * hi * 1e3


def _measured_with(ctx: perf.PerfContext) -> perf.PerfContext:
    """The request overhead the closed-form ranges below were measured with (vLLM's fit before
    the burst share, 107.6345 ms). With the refitted 45.8 ms the desynchronised simulation's
    mean TTFT falls below the gated form's (8 clients, 2,000/300: 213.7 vs 233.6 ms; 64: 336.5
    vs 396.4 ms), so the ranges hold for that overhead only (docs/performance.md)."""
    return dataclasses.replace(ctx, coefficients=dataclasses.replace(
        ctx.coefficients, request_overhead_ms=107.6345))


def _desync(ctx: perf.PerfContext, c: int, i: int, o: int, e2e_ms: float) -> sim.SimResult:
    """The closed loop's steady state with output lengths ±10 % (random dataset, range ratio
    0.1): enough to desynchronise it; 5 %, 10 % and 30 % give the same TTFT within ~2 %
    where the closed forms apply."""
    n = 30 * c
    reqs = sim.Requests((i,) * n, sim.uniform_lengths(n, o, 0.1, seed=1))
    return sim.simulate(ctx, reqs, sim.Harness("steady", concurrency=c, stagger_s=e2e_ms / 1e3 / c))


@pytest.mark.parametrize(("c", "i", "o"), [(2, 2000, 300), (8, 2000, 300), (32, 2000, 300),
                                           (64, 2000, 300), (8, 512, 1024), (128, 512, 1024),
                                           (4, 1000, 100)])
def test_gated_wait_agrees_with_the_simulated_steady_state(
        llama70b: dict[str, perf.PerfContext], c: int, i: int, o: int) -> None:
    """Mean TTFT of the desynchronised simulation and evaluate(wait_model="gated") (the gated
    batch server, perf.gated_wait_s) within 5 %. Range where both apply (measured on this
    deployment, with the coefficients of 2026-12-02: simulated / closed form − 1 from −5.0 to
    +4.2 % on the points below): 2,000/300 tokens 1–64 clients, 512/1,024 1–128, 1,000/100
    1–4 (−5.7 % at 8; 1–8 with the fit before, which still fitted the InferenceMAX rows),
    4,000/200 1–2. Beyond it the closed form misses (measured with that earlier fit): +6–8 %
    at 128–256 clients (2,000/300); −10 to
    −18 % for 1,000/100 at 32–128 (short answers: requests prefilled together come back
    together, batches larger than Poisson); +14 to +46 % for 4,000/200 at 8–128 (two prompts
    fill the 8,192-token budget, which caps a batch; the closed form has no cap)."""
    ctx = _measured_with(llama70b["vllm"])
    pt = perf.evaluate(ctx, concurrency=c, input_tokens=i, output_tokens=o, wait_model="gated")
    res = _desync(ctx, c, i, o, pt.e2e_ms)
    assert res.ttft.mean == pytest.approx(pt.ttft_ms, rel=0.05)


@pytest.mark.parametrize(("c", "i", "o"), [(2, 2000, 300), (8, 2000, 300), (8, 512, 1024),
                                           (32, 1000, 100)])
def test_fitted_mva_agrees_at_light_prefill_load(llama70b: dict[str, perf.PerfContext],
                                                 c: int, i: int, o: int) -> None:
    """evaluate(wait_model="mva") (the MVA wait, the fitted form before the burst share) agrees
    with the simulation within 5 % only
    while prompts rarely meet: 2,000/300 tokens 1–8 clients, 512/1,024 1–8, 1,000/100 1–32,
    4,000/200 1–2. Beyond: 2,000/300 +13 % at 32, +57 % at 128, +184 % at 256 clients (it
    queues each prompt behind every earlier one for a whole step, where vLLM prefills them
    together in the next step)."""
    ctx = _measured_with(llama70b["vllm"])
    pt = perf.evaluate(ctx, concurrency=c, input_tokens=i, output_tokens=o, wait_model="mva")
    res = _desync(ctx, c, i, o, pt.e2e_ms)
    assert res.ttft.mean == pytest.approx(pt.ttft_ms, rel=0.05)
    if (c, i) == (8, 2000):
        far = perf.evaluate(ctx, concurrency=128, input_tokens=i, output_tokens=o,
                            wait_model="mva")
        assert far.ttft_ms > 1.3 * _desync(ctx, 128, i, o, far.e2e_ms).ttft.mean


def test_burst_is_slower_to_first_token_than_steady(llama70b: dict[str, perf.PerfContext]
                                                    ) -> None:
    """Issue #24: 32 requests sent together queue behind each other's prefill (4 prompts of
    2,000 tokens per 8,192-token step), where spread-out requests each find a step free."""
    ctx = llama70b["vllm"]
    pt = perf.evaluate(ctx, concurrency=32, input_tokens=2000, output_tokens=300)
    burst = sim.simulate(ctx, _const(320, 2000, 300), sim.Harness("closed", concurrency=32))
    steady = sim.simulate(ctx, _const(320, 2000, 300),
                          sim.Harness("steady", concurrency=32, stagger_s=pt.e2e_ms / 32e3))
    assert burst.ttft.mean > 3 * steady.ttft.mean


def test_vllm_admits_on_blocks_held_and_preempts(llama70b: dict[str, perf.PerfContext]) -> None:
    """KV for 20,000 tokens: 16 requests of 1,000 + 1,000 tokens are all admitted (their
    prompts hold 16 × 63 blocks = 16,128 tokens), then run out of blocks as they decode and
    the newest are preempted and recomputed; all finish."""
    ctx = llama70b["vllm"]
    res = sim.simulate(ctx, _const(16, 1000, 1000), sim.Harness("closed", concurrency=16),
                       kv_tokens=20_000)
    assert res.max_running == 16
    assert res.preemptions > 0
    assert res.completed == 16


def test_sglang_reserves_output_and_admits_fewer(llama70b: dict[str, perf.PerfContext]) -> None:
    """The same KV under SGLang: each admission reserves 0.7 × 1,000 output tokens on top of
    its 1,000-token prompt, so the first prefill batches (8,192 tokens each: 8 prompts and a
    chunk of the 9th, then the rest) take 20,000 // 1,700 = 11 (more join later, as the ratio
    decays and the running requests' remaining output shrinks)."""
    ctx = llama70b["sglang"]
    h = sim.Harness("closed", concurrency=16)
    s = sim._Sim(ctx, _const(16, 1000, 1000), h, 1, 20_000, 0)
    s.now = 1.0  # past the requests' arrival (after the request overhead)
    s._arrivals()
    s.step_separate()
    assert len(s.running) == 9
    s.step_separate()
    assert len(s.running) == 11
    res = sim.simulate(ctx, _const(16, 1000, 1000), h, kv_tokens=20_000, block_size=1)
    assert 11 <= res.max_running < 16
    assert res.completed == 16


def test_request_larger_than_the_kv_cache_fails(llama70b: dict[str, perf.PerfContext]) -> None:
    res = sim.simulate(llama70b["vllm"], sim.Requests((100, 19_995, 100), (10, 10, 10)),
                       sim.Harness("closed", concurrency=3), kv_tokens=20_000)
    assert (res.completed, res.failed) == (2, 1)


def test_gamma_arrivals_follow_vllm_bench_serve() -> None:
    """vllm/benchmarks/serve.py get_request: first request at 0, gaps Gamma(B, 1/(R·B)):
    mean 1/R, coefficient of variation 1/√B."""
    for b in (1.0, 0.25, 4.0):
        arr = sim.gamma_arrivals(20_000, 10.0, b, seed=7)
        gaps = [y - x for x, y in zip(arr, arr[1:], strict=False)]
        assert arr[0] == 0.0
        assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.03)
        cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
        assert cv == pytest.approx(1 / math.sqrt(b), rel=0.05)


def test_infinite_burstiness_is_an_evenly_spaced_rate() -> None:
    """The limit of Gamma(B, 1/(R·B)) as B grows (coefficient of variation 1/√B → 0): every gap
    1/R, as GuideLLM's constant-rate strategy sends. 4 req/s: 0, 0.25, 0.5, 0.75 s."""
    assert sim.gamma_arrivals(4, 4.0, math.inf) == (0.0, 0.25, 0.5, 0.75)


def test_uniform_lengths_match_the_random_dataset_bounds() -> None:
    """vllm/benchmarks/datasets.py RandomDataset: [floor(L(1 − r)), ceil(L(1 + r))]."""
    xs = sim.uniform_lengths(5000, 101, 0.5, seed=1)
    assert min(xs) == 50 and max(xs) == 152  # floor(50.5), ceil(151.5)
    assert sim.uniform_lengths(3, 7, 0.0) == (7, 7, 7)
    with pytest.raises(ValueError, match="range ratio"):
        sim.uniform_lengths(3, 7, 1.0)


def test_percentile_is_numpys_linear_interpolation() -> None:
    # numpy.percentile([1, 2, 3, 4], [50, 90, 99]) = 2.5, 3.7, 3.97 (linear, the default)
    assert [sim.percentile([1.0, 2.0, 3.0, 4.0], q) for q in (50, 90, 99)] == pytest.approx(
        [2.5, 3.7, 3.97])


@settings(max_examples=60, deadline=None)
@given(engine=st.sampled_from(["vllm", "sglang", "vllm+prefix", "vllm+reserve",
                               "sglang+mixed-split", "sglang+mixed-whole"]),
       lens=st.lists(st.tuples(st.integers(1, 6000), st.integers(1, 600)), min_size=1,
                     max_size=40),
       kv=st.integers(2_000, 60_000), seqs=st.integers(1, 64), budget=st.integers(256, 8192),
       rate=st.one_of(st.none(), st.floats(0.1, 500.0)))
def test_invariants(llama70b: dict[str, perf.PerfContext], engine: str,
                    lens: list[tuple[int, int]], kv: int, seqs: int, budget: int,
                    rate: float | None) -> None:
    """Every request completes or is refused (it exceeds the KV cache); the KV cache
    is empty at the end; TTFT ≤ e2e; percentiles ordered; no more running than max_num_seqs
    (vLLM also with prefix-cache re-hits after preemption and with TensorRT-LLM's admission;
    with the latter nothing is ever preempted; SGLang also with --enable-mixed-chunk, the
    overrunning prompt chunked or not: perf/simulate.py step_mixed_chunk)."""
    base, _, variant = engine.partition("+")
    ctx = dataclasses.replace(llama70b[base], max_num_seqs=seqs, max_num_batched_tokens=budget,
                              prefix_caching=variant == "prefix",
                              admission="reserve" if variant == "reserve" else "on_demand")
    if variant.startswith("mixed"):
        ctx = dataclasses.replace(ctx, style="mixed", whole_prompts=True,
                                  split_last_prompt=variant == "mixed-split")
    engine = base
    n = len(lens)
    arr = sim.gamma_arrivals(n, rate, seed=n) if rate else None
    reqs = sim.Requests(tuple(i for i, _ in lens), tuple(o for _, o in lens), arr)
    h = sim.Harness("open", request_rate=rate) if rate else sim.Harness("closed", concurrency=8)
    bs = 16 if engine == "vllm" else 1
    s = sim._Sim(ctx, reqs, h, bs, kv, 0)
    s.run()
    fits = [-(-(i + o) // bs) <= kv // bs for i, o in lens]
    assert s.failed == fits.count(False)
    assert all(s.end[r] >= 0 for r in range(n) if fits[r])
    assert s.used == 0 and s.n_dec == 0 and not s.running and not s.waiting
    assert s.max_running <= seqs
    if variant == "reserve":
        assert s.preemptions == 0 and s.reserved == 0
    res = sim.simulate(ctx, reqs, h, block_size=bs, kv_tokens=kv)
    assert all(t <= e + 1e-12 for t, e in zip(res.ttft_s, res.e2e_s, strict=True))
    for stat in (res.ttft, res.tpot, res.itl, res.e2e):
        assert stat.p50 <= stat.p90 <= stat.p99


def test_ten_thousand_requests_are_fast(llama70b: dict[str, perf.PerfContext]) -> None:
    """Issue #27: 10,000 requests in ≤ 2 s on one core (benchmarks/sim_speed.py measures it;
    the bound here is loose for a shared test machine)."""
    import time

    n = 10_000
    reqs = sim.Requests(sim.uniform_lengths(n, 2000, 0.5, 1), sim.uniform_lengths(n, 300, 0.5, 2),
                        sim.gamma_arrivals(n, 4.0, seed=3))
    t = time.perf_counter()
    res = sim.simulate(llama70b["vllm"], reqs, sim.Harness("open", request_rate=4.0))
    assert time.perf_counter() - t < 10.0
    assert res.completed == n


# ---------------------------------------------------------- named length histograms (--dataset)


def test_histogram_cell_of_one_value_gives_that_pair() -> None:
    """A cell [10, 11) × [5, 6) holds only the pair (10, 5)."""
    h = sim.LengthHistogram("one", "one cell", ((10, 11, 5, 6, 7),), 10.0, 5.0)
    ins, outs = sim.histogram_lengths(50, h, seed=3)
    assert set(ins) == {10} and set(outs) == {5}


def test_histogram_draws_cells_by_count_and_values_uniformly_within() -> None:
    """Cells with 3 and 1 requests: 3/4 of the draws from the first (±0.02 at 20,000 draws,
    five standard errors of a proportion: sqrt(0.75·0.25/20000) = 0.0031); within the first,
    inputs uniform on 100…103 (mean 101.5) and outputs on 20…29 (mean 24.5); a zero-count
    cell is never drawn."""
    h = sim.LengthHistogram("two", "two cells", ((100, 104, 20, 30, 3), (5000, 5001, 7, 8, 1),
                                                 (1, 2, 1, 2, 0)), 0.0, 0.0)
    ins, outs = sim.histogram_lengths(20_000, h, seed=1)
    first = [(i, o) for i, o in zip(ins, outs, strict=True) if i < 1000]
    assert abs(len(first) / 20_000 - 0.75) < 0.02
    assert {i for i, _ in first} == {100, 101, 102, 103}
    assert {o for _, o in first} == set(range(20, 30))
    assert abs(statistics.fmean(i for i, _ in first) - 101.5) < 0.05
    assert abs(statistics.fmean(o for _, o in first) - 24.5) < 0.1
    assert set(zip(ins, outs, strict=True)) - set(first) == {(5000, 7)}


def test_histogram_draws_are_reproducible() -> None:
    h = sim.LengthHistogram("two", "", ((1, 9, 1, 9, 1), (9, 99, 9, 99, 1)), 0.0, 0.0)
    assert sim.histogram_lengths(100, h, seed=5) == sim.histogram_lengths(100, h, seed=5)


@pytest.mark.parametrize("cells", [(), ((5, 5, 1, 2, 1),), ((0, 2, 1, 2, 1),),
                                   ((1, 2, 1, 2, 0),), ((1, 2, 1, 2, -1),)])
def test_histogram_refuses_empty_or_bad_cells(cells: tuple) -> None:
    with pytest.raises(ValueError):
        sim.LengthHistogram("bad", "", cells, 1.0, 1.0)


# ------------------------------------------- admission: TensorRT-LLM's GUARANTEED_NO_EVICT


@pytest.mark.parametrize(("kv_tokens", "running"), [(3000, 1), (4000, 2), (6000, 3)])
def test_reserve_admission_runs_only_whole_sequences_that_fit(
        llama70b: dict[str, perf.PerfContext], kv_tokens: int, running: int) -> None:
    """Requests of 1,000 + 1,000 tokens hold ceil(2000/16) = 125 blocks each at their end. A
    KV cache of 3,000 tokens (187 blocks) fits one whole sequence, 4,000 (250) two, 6,000
    (375) three: TensorRT-LLM's default policy (tensorrt_llm/llmapi/llm_args.py
    SchedulerConfig: GUARANTEED_NO_EVICT) runs that many at once and never evicts one."""
    ctx = dataclasses.replace(llama70b["vllm"], admission="reserve")
    res = sim.simulate(ctx, _const(24, 1000, 1000), sim.Harness("closed", concurrency=8),
                       kv_tokens=kv_tokens)
    assert res.completed == 24 and res.failed == 0
    assert res.preemptions == 0
    assert res.max_running == running


def test_on_demand_admission_overcommits_and_preempts(
        llama70b: dict[str, perf.PerfContext]) -> None:
    """The same requests under vLLM's rule (blocks of the first chunk only): more run at once
    than fit at their end, so some are preempted and recomputed."""
    res = sim.simulate(llama70b["vllm"], _const(24, 1000, 1000),
                       sim.Harness("closed", concurrency=8), kv_tokens=3000)
    assert res.completed == 24
    assert res.max_running >= 2 and res.preemptions > 0


def test_trtllm_declares_reserve_admission() -> None:
    from kvplan.engines import registry

    assert registry.get("trtllm").calibration.admission == "reserve"
    assert registry.get("vllm").calibration.admission == "on_demand"


# ------------------------------- vLLM prefix caching: a preempted request re-hits its blocks


def test_rehit_counts_the_kept_blocks_not_yet_reallocated(
        llama70b: dict[str, perf.PerfContext]) -> None:
    """A request preempted with 10 full blocks of 16 tokens computed, when 4 older free blocks
    stood ahead of its own in the eviction order and 7 blocks have been allocated since: the
    first 4 came from the older ones, 3 from its tail, so 7 blocks = 112 tokens re-hit
    (vllm/v1/core/kv_cache_manager.py free: tail blocks evicted first). With 20 allocated
    since, none survive. At most all but one token of what it must compute is a hit."""
    ctx = dataclasses.replace(llama70b["vllm"], prefix_caching=True)
    s = sim._Sim(ctx, _const(1, 500, 10), sim.Harness("closed", concurrency=1), 16, 10_000, 0)
    s.waiting.clear()
    s.need[0], s.done[0] = 500, 0
    s.kept[0], s.older[0], s.mark[0] = 10, 4, 0
    s.used, s.freed = 7, 0
    assert s._rehit(0) == 112 and s.done[0] == 112
    s.done[0], s.used = 0, 20
    assert s._rehit(0) == 0
    s.done[0], s.used, s.need[0] = 0, 0, 100
    assert s._rehit(0) == 99


def test_prefix_caching_makes_preemption_cheaper(llama70b: dict[str, perf.PerfContext]) -> None:
    """Requests of 4,000 + 500 tokens in a KV cache that holds two of them at their end: vLLM
    preempts; with prefix caching the returning requests recompute less, so the same work
    ends sooner. The engine alone: vLLM's front end (4.70 ms a request) spaces the 6 clients'
    first prompts, each then prefilled alone, and none is preempted."""
    base = dataclasses.replace(llama70b["vllm"], frontend_service_s=0.0)
    runs = {pc: sim.simulate(dataclasses.replace(base, prefix_caching=pc),
                             _const(24, 4000, 500), sim.Harness("closed", concurrency=6),
                             kv_tokens=10_000)
            for pc in (False, True)}
    assert all(r.completed == 24 and r.preemptions > 0 for r in runs.values())
    assert runs[True].duration_s < runs[False].duration_s
