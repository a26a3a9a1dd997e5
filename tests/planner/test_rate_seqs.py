"""max_num_seqs under a request rate: replicas are sized at the percentile in the open-loop
simulation, where a max_num_seqs sized on the closed-loop mean (the latency targets' value)
makes a burst of arrivals wait for a slot. The plan tries larger values and keeps the one that
needs the fewest replicas; given as --max-num-seqs, each value's replica count is the same
simulation, so the chosen one is checked against them."""

from __future__ import annotations

import json
import re

from clirun import call

ARGS = ["meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100", "-tp", "4", "--request-rate", "20",
        "--avg-input-tokens", "2000", "--avg-output-tokens", "300", "--slo-ttft-ms", "1000",
        "--slo-percentile", "99"]


def plan(*extra: str) -> dict:
    code, out, err = call("plan", *ARGS, *extra, "--offline", "--json")
    assert code == 0, err
    return json.loads(out)


def test_the_rate_sizes_max_num_seqs_for_the_fewest_replicas():
    p = plan()
    rec = p["recommendations"]["max_num_seqs"]
    tried = dict(re.findall(r"(\d+): (\d+|none|no fewer)", rec["reason"]))
    first = min(tried, key=int)  # the closed-loop value of the targets
    chosen = str(rec["value"])
    assert chosen != first and chosen in tried
    assert int(tried[chosen]) < int(tried[first])
    assert p["performance"]["replicas"] == int(tried[chosen])
    assert f"--max-num-seqs {chosen} " in p["command"]
    # the same deployment with that value given: the same replicas; with the closed-loop value
    # given: the count the reason states, more than the chosen one's
    assert plan("--max-num-seqs", chosen)["performance"]["replicas"] == int(tried[chosen])
    assert plan("--max-num-seqs", first)["performance"]["replicas"] == int(tried[first])


def test_a_closed_loop_target_keeps_the_latency_targets_value():
    code, out, err = call("plan", *ARGS[:5], "--avg-input-tokens", "2000",
                          "--avg-output-tokens", "300", "--slo-ttft-ms", "1000",
                          "--offline", "--json")
    assert code == 0, err
    rec = json.loads(out)["recommendations"]["max_num_seqs"]
    assert rec["reason"].startswith("the latency target binds")
