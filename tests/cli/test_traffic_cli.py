"""`kvplan plan --request-rate … --slo-percentile …` (issue #27): replicas, percentiles, the
harness and cost per day in the JSON and the text; bad values exit 2 naming the flag; no
simulation when none is asked."""

from __future__ import annotations

import json

import pytest
from clirun import run

LLAMA = "llama-3.1-8b-instruct"
RATE = ["--request-rate", "20", "--avg-input-tokens", "2000", "--avg-output-tokens", "300",
        "--slo-ttft-ms", "1000", "--slo-percentile", "99"]


def test_plan_for_a_rate_gives_replicas_percentiles_and_cost(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", *RATE, "--json")
    assert code == 0, err
    pf = json.loads(out)["performance"]
    assert pf["request_rate"] == 20 and pf["slo_percentile"] == 99
    assert pf["harness"].startswith("open loop") and "Poisson" in pf["harness"]
    r = pf["replicas"]
    assert isinstance(r, int) and r >= 1
    assert pf["load_per_replica_rps"] * r == pytest.approx(20, rel=1e-3)
    # each replica below its capacity, the SLO met at p99
    assert pf["load_per_replica_rps"] < pf["capacity_rps_per_replica"]
    assert 0 < pf["headroom"] < 1
    assert pf["meets_slo_at_percentile"] is True
    assert pf["percentiles"]["ttft_ms"]["p99"] <= 1000
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        s = pf["percentiles"][metric]
        assert s["p50"] <= s["p90"] <= s["p99"]
    # one GPU per replica (8B on an H100): GPUs × price × 24 h
    assert pf["gpus_for_rate"] == r
    assert pf["cost_per_day"] == pytest.approx(r * pf["gpu_hour_price"] * 24,
                                                             abs=0.01)


def test_plan_for_a_rate_text_shows_the_harness_and_replicas(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", *RATE)
    assert code == 0, err
    assert "Simulated (open loop" in out
    assert "replicas for 20 req/s" in out and "per day" in out
    assert "target 1000 at p99" in out


def test_no_simulation_unless_asked(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "2000",
                         "--json")
    assert code == 0, err
    pf = json.loads(out)["performance"]
    assert pf["percentiles"] is None and pf["replicas"] is None
    assert pf["harness"].startswith("closed loop")


def test_percentile_alone_simulates_the_closed_loop(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--target-concurrency", "16",
                         "--slo-percentile", "90", "--random-range-ratio", "0.5", "--json")
    assert code == 0, err
    pf = json.loads(out)["performance"]
    assert pf["harness"].startswith("closed loop: 16 clients started together")
    assert pf["lengths"].startswith("uniform lengths ±50%")
    assert pf["replicas"] is None


def test_bad_traffic_values_exit_2_naming_the_flag(capsys):
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--slo-percentile", "95")
    assert code == 2 and "--slo-percentile" in err
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--burstiness", "2")
    assert code == 2 and "--request-rate" in err
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--request-rate", "0")
    assert code == 2 and "--request-rate" in err
