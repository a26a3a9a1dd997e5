"""kvplan.perf.simulate with SGLang's --enable-mixed-chunk (PerfContext.whole_prompts): the
prefill batch of SGLang's PrefillAdder (reserve admission, new_token_ratio) with its room less
one token per running request, run in the same step as those requests' decodes (SGLang
0.5.6.post2 python/sglang/srt/managers/scheduler.py get_new_batch_prefill, mix_with_running;
schedule_policy.py PrefillAdder.add_one_req). Hand-worked schedules, and agreement with the
closed-form mean model (perf.step.evaluate) where both apply."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.perf import simulate as sim
from kvplan.perf import step as perf


def _bare(ctx: perf.PerfContext, budget: int, split: bool) -> perf.PerfContext:
    """No request path (no overhead, no front-end queue): the scheduler's own times."""
    return dataclasses.replace(ctx, front_end=False, max_num_batched_tokens=budget,
                               split_last_prompt=split)


def _const(n: int, i: int, o: int) -> sim.Requests:
    return sim.Requests((i,) * n, (o,) * n)


def test_whole_prompt_admission_by_hand(llama70b: dict[str, perf.PerfContext]) -> None:
    """3 requests of 600 + 2 tokens sent together, a 1,000-token step, --chunked-prefill-size
    ≥ --max-prefill-tokens (whole prompts). add_one_req stops the batch at a prompt of ≥ the
    room left (600 ≥ 400) unless the batch is empty:
    step 1: r0 alone (600 tokens, mean context 300) → r0's first token at t1;
    step 2: r0's decode (context 600) + r1 whole (room 1,000 − 1; r2: 600 ≥ 399 stops) → r1 at
    t1 + t2, r0 done;
    step 3: r1's decode + r2 → r2 at t1 + t2 + t3 (t3 = t2: the same step), r1 done;
    step 4: r2's decode alone, r2 done."""
    ctx = _bare(llama70b["sglang-mc"], 1000, split=False)
    res = sim.simulate(ctx, _const(3, 600, 2), sim.Harness("closed", concurrency=3))
    t1 = perf._step_s(ctx, 0, 0, 600, 300, 1)
    t2 = perf._step_s(ctx, 1, 600, 600, 300, 1)
    assert res.ttft_s == pytest.approx((t1, t1 + t2, t1 + 2 * t2), rel=1e-9)
    t4 = perf._step_s(ctx, 1, 600)  # step 4: r2's decode alone
    assert res.e2e_s == pytest.approx((t1 + t2, t1 + 2 * t2, t1 + 2 * t2 + t4), rel=1e-9)


def test_split_prompt_admission_by_hand(llama70b: dict[str, perf.PerfContext]) -> None:
    """The same 3 requests with --chunked-prefill-size 1,000 below --max-prefill-tokens: the
    prompt that overruns the room is chunked (add_one_req truncates it to rem_chunk_tokens):
    step 1: r0 600 + r1's first 400 (mean contexts 300 and 200: 260) → r0 at t1;
    step 2: r1's last 200 first (the chunked request, context 400 + 100), r0's decode, r2 whole
    (room 999 − 200 = 799 ≥ 600): 800 prefill tokens, mean context (200·500 + 600·300)/800 =
    350 → r1 and r2 at t1 + t2. So r2's first token comes a step earlier than with whole
    prompts, and the schedule is vLLM's for these requests (nothing limits the KV)."""
    ctx = _bare(llama70b["sglang-mc"], 1000, split=True)
    res = sim.simulate(ctx, _const(3, 600, 2), sim.Harness("closed", concurrency=3))
    t1 = perf._step_s(ctx, 0, 0, 1000, 260, 2)
    t2 = perf._step_s(ctx, 1, 600, 800, 350, 2)
    assert res.ttft_s == pytest.approx((t1, t1 + t2, t1 + t2), rel=1e-9)
    vllm = sim.simulate(_bare(llama70b["vllm"], 1000, split=True), _const(3, 600, 2),
                        sim.Harness("closed", concurrency=3))
    assert vllm.steps == res.steps == 3


def test_admits_by_sglangs_reserve_not_vllms_blocks(llama70b: dict[str, perf.PerfContext]
                                                    ) -> None:
    """KV for 3,000 tokens (1-token pages), 3 requests of 600 + 1,000 tokens, a 1,000-token
    step. SGLang: step 1 admits r0 (600 + 0.7 × 1,000 = 1,300 ≤ 3,000) and r1 (1,300 ≤ 1,700;
    chunked: 400); step 2 reserves 0.7 × 999 for r0's remaining output, r1's last 200 tokens
    + 0.7 × 1,000 and 1 token for r0's decode: (3,000 − 1,000) − 699.3 − 900 − 1 = 399.7 free
    < 1,300, so r2 waits. vLLM allocates on demand: r2's 600 tokens of blocks fit, it runs."""
    h = sim.Harness("closed", concurrency=3)
    running: dict[str, int] = {}
    for name in ("sglang-mc", "vllm"):
        s = sim._Sim(_bare(llama70b[name], 1000, split=True), _const(3, 600, 1000), h, 1,
                     3000, 0)
        s._arrivals()
        step = s.step_mixed_chunk if name == "sglang-mc" else s.step_mixed
        step()
        step()
        running[name] = len(s.running)
    assert running == {"sglang-mc": 2, "vllm": 3}
    res = sim.simulate(_bare(llama70b["sglang-mc"], 1000, split=True), _const(3, 600, 1000), h,
                       block_size=1, kv_tokens=3000)
    assert res.completed == 3


@pytest.mark.parametrize(("c", "i", "o"), [(8, 2000, 300), (32, 2000, 300), (128, 512, 1024),
                                           (400, 512, 1024)])
def test_steady_state_agrees_with_evaluate(llama70b: dict[str, perf.PerfContext],
                                           c: int, i: int, o: int) -> None:
    """TPOT and throughput of the simulated steady state and evaluate() within 5 % (measured:
    TPOT −2.3, −1.5, −0.2, −0.1 %; throughput +3.3, +4.4, +0.9, −0.4 %)."""
    ctx = llama70b["sglang-mc"]
    pt = perf.evaluate(ctx, concurrency=c, input_tokens=i, output_tokens=o)
    h = sim.Harness("steady", concurrency=c, stagger_s=pt.e2e_ms / 1e3 / c)
    res = sim.simulate(ctx, _const(30 * c, i, o), h)
    assert res.tpot.mean == pytest.approx(pt.tpot_ms, rel=0.05)
    assert res.output_tokens_per_s == pytest.approx(pt.output_tokens_per_s, rel=0.05)


@pytest.mark.parametrize(("c", "i", "o"), [(2, 2000, 300), (8, 2000, 300), (32, 2000, 300),
                                           (64, 2000, 300), (8, 512, 1024), (128, 512, 1024),
                                           (4, 1000, 100)])
def test_gated_wait_agrees_with_the_simulated_steady_state(
        llama70b: dict[str, perf.PerfContext], c: int, i: int, o: int) -> None:
    """Mean TTFT of the desynchronised steady state (output lengths ±10 %) and
    evaluate(wait_model="gated") within 5 %, on the range and request overhead
    tests/perf/test_simulate.py uses for vLLM (measured with the coefficients of 2026-12-02:
    −4.8 to +4.2 %; at 8 clients of 1,000/100, −5.0 %, outside the range)."""
    base = llama70b["sglang-mc"]
    ctx = dataclasses.replace(base, coefficients=dataclasses.replace(
        base.coefficients, request_overhead_ms=107.6345))
    pt = perf.evaluate(ctx, concurrency=c, input_tokens=i, output_tokens=o, wait_model="gated")
    n = 30 * c
    reqs = sim.Requests((i,) * n, sim.uniform_lengths(n, o, 0.1, seed=1))
    res = sim.simulate(ctx, reqs, sim.Harness("steady", concurrency=c,
                                              stagger_s=pt.e2e_ms / 1e3 / c))
    assert res.ttft.mean == pytest.approx(pt.ttft_ms, rel=0.05)
