"""SGLang --enable-mixed-chunk changes the plan's latency figures the way the mechanism says
(kvplan/engines/sglang_mixed_chunk.py; docs/sglang-mixed-chunk.md).

Without the flag SGLang prefills first: a closed loop of equal requests runs in lock-step
waves — all b prompts prefilled in batches of the --chunked-prefill-size budget, then decoded
together — so a request's first token comes at the end of its batch, on average half-way
through the wave's prefill. With it, new prompts ride in the running requests' decode steps
(scheduler.py mix_with_running), the loop does not stay in waves, and a prompt waits only
behind the prompts that arrive with it. A lone request finds no running decodes to mix with:
its prefill step is the same either way."""

from __future__ import annotations

import pytest

from kvplan import Workload, plan
from kvplan.engines import registry
from kvplan.specs import Plan

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
WORK = Workload(avg_input_tokens=1024, avg_output_tokens=256, target_concurrency=64)


@pytest.fixture(scope="module")
def plans() -> tuple[Plan, Plan]:
    """(prefill-first, mixed) on one H100, SGLang's default 8,192-token prefill budget."""
    off = plan(LLAMA, "h100", engine="sglang", offline=True, workload=WORK)
    on = plan(LLAMA, "h100", engine="sglang", offline=True, workload=WORK,
              enable_mixed_chunk=True)
    for p in (off, on):
        assert p.inputs["max_num_batched_tokens"].value == 8192 and p.performance is not None
    return off, on


def _ttft(p: Plan) -> dict[int, float]:
    assert p.performance is not None
    return {r.concurrency: r.ttft_ms for r in p.performance.by_concurrency}


def test_a_lone_request_is_unchanged(plans: tuple[Plan, Plan]) -> None:
    """Concurrency 1: one prefill step of the prompt either way. The mixed steady state counts
    the request's own mean decoding share (< 1 sequence) in that step, at most one sequence's
    decode cost (Llama-3.1-8B: 26.7 µs per sequence + ~1,150 context tokens × 128 KiB of KV
    at 3.35 TB/s ≈ 45 µs), so within 0.2 ms."""
    off, on = (_ttft(p)[1] for p in plans)
    assert on == pytest.approx(off, abs=0.2)


def test_prefill_first_is_waves_by_hand(plans: tuple[Plan, Plan]) -> None:
    """The prefill-first figures are the waves above. At concurrency 8 the wave is 8 × 1,024 =
    8,192 tokens, one full budget: every request's first token comes after that one step, t.
    At 64 the wave is 8 full steps of the same prompts (same attention context): batch j ends
    at j·t, mean TTFT (first batch + whole wave) / 2 = (1 + 8) / 2 · t = 4.5 t. Both add the
    per-request front-end overhead (SGLang's request_overhead_ms)."""
    overhead = registry.get("sglang").calibration.coefficients.request_overhead_ms
    ttft = _ttft(plans[0])
    t = ttft[8] - overhead
    assert ttft[64] - overhead == pytest.approx(4.5 * t, abs=0.05)


def test_at_concurrency_mixed_chunks_lower_ttft(plans: tuple[Plan, Plan]) -> None:
    """From two requests up, a prompt no longer waits for a wave: TTFT is lower at every
    concurrency of the table, and it still grows with concurrency (more prompts arrive with
    it, and the steps it waits for also decode more requests)."""
    off, on = (_ttft(p) for p in plans)
    assert off.keys() == on.keys()
    levels = sorted(c for c in on if c >= 2)
    assert levels and all(on[c] < off[c] for c in levels)
    assert [on[c] for c in sorted(on)] == sorted(on.values())
    assert plans[1].performance is not None and plans[0].performance is not None
    assert plans[1].performance.ttft_ms < plans[0].performance.ttft_ms  # at the target, 64
