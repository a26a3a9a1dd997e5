"""simulate.open_loop_unless_missed: a run stopped once it misses its limits for certain (None)
is one whose whole run misses them (traffic.meets on open_loop's result); a run not stopped
gives open_loop's very result; a run far over its limits stops early."""

from __future__ import annotations

import pytest

from kvplan.perf import simulate as sim
from kvplan.perf import step as perf
from kvplan.planner import traffic
from kvplan.specs import Workload

N = 400


def _lengths() -> tuple[tuple[int, ...], tuple[int, ...]]:
    return sim.uniform_lengths(N, 2000, 0.5, seed=1), sim.uniform_lengths(N, 300, 0.5, seed=2)


@pytest.mark.parametrize("q", [50, 90, 99])
@pytest.mark.parametrize("rate", [0.5, 2.0, 4.0, 8.0])
def test_the_stopped_run_gives_the_whole_runs_verdict(llama70b: dict[str, perf.PerfContext],
                                                      q: int, rate: float) -> None:
    ctx = llama70b["vllm"]
    ins, outs = _lengths()
    whole = sim.open_loop(ctx, ins, outs, rate, seed=7, block_size=16)
    # limits just above and below the whole run's own percentiles: the verdict flips there
    for ttft in (whole.ttft.at(q), whole.ttft.at(q) * 0.999, None):
        for tpot in (whole.tpot.at(q), whole.tpot.at(q) * 0.999, None):
            w = Workload(slo_ttft_ms=ttft, slo_tpot_ms=tpot, slo_percentile=q)
            got = sim.open_loop_unless_missed(ctx, ins, outs, rate, sim.Limits(q, ttft, tpot),
                                              seed=7, block_size=16)
            # None: a certain miss; else the whole run (a percentile interpolated over the
            # limit from a value under it is a miss found at the end)
            assert got is None or got == whole
            assert (got is not None and traffic.meets(got, w)) == traffic.meets(whole, w)


def test_a_failed_request_is_a_miss(llama70b: dict[str, perf.PerfContext]) -> None:
    """A prompt longer than the whole KV cache fails: the SLOs are not met (traffic.meets)."""
    ctx = llama70b["vllm"]
    ins, outs = (2000,) * 9 + (700_000,), (300,) * 10
    whole = sim.open_loop(ctx, ins, outs, 1.0, block_size=16)
    assert whole.failed == 1
    assert sim.open_loop_unless_missed(ctx, ins, outs, 1.0, sim.Limits(99), block_size=16) is None


def test_a_run_far_over_its_limit_stops_early(llama70b: dict[str, perf.PerfContext],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = llama70b["vllm"]
    ins, outs = _lengths()
    calls = [0]
    step_s = sim._step_s

    def counted(*a: float) -> float:
        calls[0] += 1
        return step_s(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(sim, "_step_s", counted)
    sim.open_loop(ctx, ins, outs, 20.0, seed=7, block_size=16)  # far over the capacity
    whole, calls[0] = calls[0], 0
    assert sim.open_loop_unless_missed(ctx, ins, outs, 20.0, sim.Limits(99, 500.0), seed=7,
                                       block_size=16) is None
    assert calls[0] < whole / 4
