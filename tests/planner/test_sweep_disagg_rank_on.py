"""sweep --disagg ranks every option, aggregated and disaggregated, on the figures --rank-on
names (pessimistic by default: each band's pessimistic end), as the sweep without --disagg does,
and its verdict note quotes those same figures. The disaggregated options carry the service's
bands (planner/disagg.py: the pools' coefficient ranges); their pessimistic $ per million is
the service's $/hour over its pessimistic tokens/s."""

from __future__ import annotations

import json

import pytest
from clirun import call

ARGS = ["llama-3.1-8b-instruct", "--gpus", "h100,h200,mi300x,rtx-4090", "--max-model-len", "8192",
        "--target-concurrency", "32", "--avg-input-tokens", "2048", "--avg-output-tokens", "256"]


def sweep(*extra: str) -> dict:
    code, out, err = call("sweep", *ARGS, *extra, "--offline", "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(("rank_on", "cost"), [
    ("pessimistic", "cost_per_million_output_tokens_high"),
    ("point", "cost_per_million_output_tokens")])
def test_disaggregated_sweep_ranks_on_the_named_figures(rank_on: str, cost: str):
    r = sweep("--disagg", "--rank-on", rank_on)
    meeting = [o for o in r["options"] if o["meets_target"] and o[cost] is not None]
    assert any(o.get("disaggregated") for o in meeting)
    costs = [o[cost] for o in meeting]
    assert costs == sorted(costs)
    # the aggregated options keep the order the sweep without --disagg gives them
    alone = [o for o in sweep("--rank-on", rank_on)["options"] if o["meets_target"]]
    key = ["gpu", "tensor_parallel_size", "quantization", "kv_cache_dtype"]
    agg = [[o.get(k) for k in key] for o in meeting if not o.get("disaggregated")]
    assert agg == [[o.get(k) for k in key] for o in alone if o[cost] is not None][:len(agg)]


def test_disaggregated_options_carry_their_bands():
    r = sweep("--disagg")
    dis = [o for o in r["options"] if o.get("disaggregated") and o["output_tokens_per_s"]]
    assert dis
    for o in dis:
        assert o["tpot_ms_high"] >= o["tpot_ms"] and o["ttft_ms_high"] >= o["ttft_ms"]
        low = o["output_tokens_per_s_low"]
        assert low <= o["output_tokens_per_s"]
        # $/hour ÷ (tokens/s × 3600 s) × 1e6, at the pessimistic tokens/s
        want = o["price_per_hour"] / (low * 3600) * 1e6
        assert o["cost_per_million_output_tokens_high"] == pytest.approx(want, abs=1e-4)
