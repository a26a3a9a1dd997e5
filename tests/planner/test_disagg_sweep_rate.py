"""sweep --disagg with --request-rate: a disaggregated service gets copies and a cost per day for
the rate (estimated from its closed-loop requests/s, never simulated) and is ranked with the
aggregated options (docs/traffic.md, "Sweep by rate"); its `calibrated` is the service's; and
too few prefill replicas given is a `disagg-prefill-bound` warning (docs/disagg.md, xPyD)."""

from __future__ import annotations

import math

import pytest

from kvplan.api import plan_disagg, sweep
from kvplan.planner.disagg import TARGET_PREFILL_UTILIZATION
from kvplan.planner.traffic import MAX_UTILIZATION
from kvplan.specs import Workload

CHAT = Workload(avg_input_tokens=3000, avg_output_tokens=300, target_concurrency=64)


@pytest.fixture(scope="module")
def by_rate():
    return sweep("llama-3.3-70b-instruct", gpus=["b200"], engine="sglang", max_model_len=8192,
                 workload=CHAT.model_copy(update={"request_rate": 10}), disagg=True,
                 slo_tpot_ms=40)


def test_a_disaggregated_service_is_priced_for_the_rate_and_ranked_with_the_others(by_rate):
    meeting = [o for o in by_rate.options if o.meets_target]
    dis = [o for o in meeting if o.disaggregated]
    assert dis and any(not o.disaggregated for o in meeting)
    for o in dis:
        pf = o.service.performance
        low = pf.output_tokens_per_s_low / pf.output_tokens_per_s  # pessimistic, the default
        assert o.replicas_for_rate == max(1, math.ceil(
            10 / (MAX_UTILIZATION * pf.requests_per_s * low)))
        assert o.replicas_simulated is False
        assert o.cost_per_day_for_rate == pytest.approx(
            o.replicas_for_rate * o.price_per_hour * 24, abs=0.01)
    # ranked by that cost among the estimated options, before every miss
    estimated = [o for o in meeting if o.replicas_simulated is False]
    costs = [o.cost_per_day_for_rate for o in estimated]
    assert costs == sorted(costs)
    last_meeting = max(o.rank for o in meeting)
    assert all(o.rank <= last_meeting for o in dis)
    assert "closed-loop" in by_rate.ranking and "not simulated" in by_rate.notes[-1]


def test_a_disaggregated_option_carries_the_services_calibration(by_rate):
    dis = [o for o in by_rate.options if o.disaggregated]
    assert dis
    for o in dis:
        assert o.service.performance.calibrated is False
        assert o.calibrated is False  # the table's "~": extrapolated (docs/sweep.md)


def test_too_few_given_prefill_replicas_warn_before_the_pool_saturates():
    r = plan_disagg("meta-llama/Llama-3.3-70B-Instruct", "h100", engine="sglang",
                    workload=CHAT, max_model_len=8192, prefill_replicas=1, decode_replicas=3)
    d = r.disaggregated
    assert d.prefill_utilization > TARGET_PREFILL_UTILIZATION
    assert not r.performance.saturated  # the closed loop slows down instead
    bound = [p for p in r.problems if p.code == "disagg-prefill-bound"]
    assert bound and bound[0].severity == "warning"
    assert f"{d.prefill_utilization:.0%} busy" in bound[0].message
    assert f"{d.ttft.queue_ms:,.0f} ms" in bound[0].message
    # kvplan's own choice stays at or under the threshold: no warning
    chosen = plan_disagg("meta-llama/Llama-3.3-70B-Instruct", "h100", engine="sglang",
                         workload=CHAT, max_model_len=8192)
    assert chosen.disaggregated.prefill_utilization <= TARGET_PREFILL_UTILIZATION
    assert not any(p.code == "disagg-prefill-bound" for p in chosen.problems)
