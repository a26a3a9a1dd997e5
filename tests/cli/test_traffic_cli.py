"""`kvplan plan --request-rate … --slo-percentile …` (issue #27): replicas, percentiles, the
harness and cost per day in the JSON and the text; bad values exit 2 naming the flag; no
simulation when none is asked."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_traffic_curve_gives_replicas_per_hour_and_cost_per_day(capsys, tmp_path):
    """An hourly curve over 24 h: GPU-hours per day = Σ GPUs per interval × 1 h."""
    curve = tmp_path / "day.csv"
    rates = [2, 2, 2, 2, 2, 2, 6, 10, 14, 18, 20, 20, 20, 20, 18, 14, 10, 6, 4, 4, 2, 2, 2, 2]
    curve.write_text("time,requests_per_s\n" + "".join(f"{h},{r}\n" for h, r in
                                                         enumerate(rates)))
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "2000",
                         "--avg-output-tokens", "300", "--slo-ttft-ms", "1000",
                         "--slo-percentile", "99", "--traffic", str(curve), "--json")
    assert code == 0, err
    d = json.loads(out)
    t = d["traffic"]
    gpus = [i["gpus"] for i in t["intervals"]]
    assert len(gpus) == 24 and t["peak_gpus"] == max(gpus)
    assert t["gpu_hours_per_day"] == pytest.approx(sum(gpus))
    assert t["mean_gpus"] == pytest.approx(sum(gpus) / 24, abs=0.01)
    assert t["cost_per_day"] == pytest.approx(sum(gpus) * d["performance"]["gpu_hour_price"],
                                              abs=0.02)
    reps = [i["replicas"] for i in t["intervals"]]
    assert reps[10] >= reps[6] >= reps[0] >= 1  # more traffic, no fewer replicas
    a = t["autoscaler"]
    assert (a["min_replicas"], a["max_replicas"]) == (min(reps), max(reps))
    assert {m["name"] for m in a["metrics"]} == {"vllm:num_requests_waiting",
                                                 "vllm:kv_cache_usage_perc"}
    assert a["keda"]["triggers"][0]["metadata"]["query"] == "sum(vllm:num_requests_waiting)"


def test_trace_replay(capsys, tmp_path):
    trace = tmp_path / "azure.csv"
    rows = [f"2023-11-16 18:{15 + s // 60:02d}:{s % 60:02d}.5000000,{500 + 7 * s},{50 + s}"
            for s in range(0, 120, 2)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--trace", str(trace),
                         "--json")
    assert code == 0, err
    pf = json.loads(out)["performance"]
    assert pf["harness"].startswith("trace replay") and "60 requests" in pf["harness"]
    assert pf["lengths"] == "the trace's lengths"
    assert pf["request_rate"] == pytest.approx(59 / 118, rel=1e-3)
    assert pf["percentiles"]["ttft_ms"]["p50"] > 0


def test_bad_traffic_file_exits_2_naming_the_line(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time,requests_per_s\n0,abc\n")
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--traffic", str(bad))
    assert code == 2 and "line 2" in err and "Traceback" not in err


def test_a_bad_workload_file_is_named_by_its_flag(capsys, tmp_path, monkeypatch):
    """Given a curve and a lengths file, an error says which: the flag, the file as named and
    the line (`--traffic day.csv line 4: …`), in the text and the JSON error, for plan and
    report alike; still exit 2. It named `day.csv line 4` only. The file as named is its path
    as given (docs/traffic.md), folder and all: it was the basename."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    day, lens = Path("in/day.csv"), Path("in/lens.csv")
    good_day, good_lens = ("time,requests_per_s\n0,4\n8,20\n16,8\n",
                           "input_tokens,output_tokens\n812,240\n95,1000\n")
    cases = [("time,requests_per_s\n0,4\n8,20\n16,x\n", good_lens,
              "--traffic in/day.csv line 4: requests_per_s must be a number"),
             (good_day, "input_tokens,output_tokens\n812,240\n95,none\n",
              "--lengths-file in/lens.csv line 3: token counts must be whole numbers")]
    for curve, lengths, want in cases:
        day.write_text(curve)
        lens.write_text(lengths)
        files = ("--traffic", str(day), "--lengths-file", str(lens))
        code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", *files)
        assert code == 2 and want in err and "Traceback" not in err, err
        assert str(tmp_path) not in err  # the path as given, not where it resolves
        code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", *files, "--json")
        error = json.loads(out)["error"]
        assert code == 2 and error["exit_code"] == 2 and error["message"].startswith(want)
        code, _, err = run(capsys, "report", LLAMA, "--gpu", "h100", *files)
        assert code == 2 and want in err
    # a missing file: its path as given, after the flag
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--trace", "gone.csv")
    assert code == 2 and "--trace 'gone.csv': cannot read the trace" in err


@pytest.mark.parametrize(("time", "want"), [
    ("25:00", "the hour must be 00 to 23"), ("12:75", "the minutes must be 00 to 59"),
    ("26", "hours must be from 0 to below 24")])
def test_a_curve_time_outside_a_day_exits_2_naming_the_line(capsys, tmp_path, time, want):
    curve = tmp_path / "day.csv"
    curve.write_text(f"time,requests_per_s\n0,4\n8,20\n{time},8\n")
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--traffic", str(curve))
    assert code == 2 and f"line 4: time {time} " in err and want in err
    assert "Traceback" not in err and out == ""


def test_sweep_ranks_by_the_cost_of_the_replicas_a_rate_needs(capsys):
    code, out, err = run(capsys, "sweep", LLAMA, "--gpus", "h100,l40s", "--max-gpus", "2",
                         "--avg-input-tokens", "2000", "--avg-output-tokens", "300",
                         "--slo-ttft-ms", "1000", "--slo-percentile", "99",
                         "--request-rate", "20", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert "cost per day of the replicas 20 req/s needs" in d["ranking"]
    sized = [o for o in d["options"] if o["replicas_for_rate"] is not None]
    simulated = [o for o in sized if o["replicas_simulated"]]
    assert simulated and simulated == sized[:len(simulated)]  # simulated first
    costs = [o["cost_per_day_for_rate"] for o in simulated]
    assert costs == sorted(costs)
    for o in sized:  # replicas × the option's $/hour × 24 h
        assert o["cost_per_day_for_rate"] == pytest.approx(
            o["replicas_for_rate"] * o["price_per_hour"] * 24, abs=0.01)
    assert [o["rank"] for o in d["options"]] == list(range(1, len(d["options"]) + 1))


def test_sweep_without_a_rate_sizes_no_replicas(capsys):
    code, out, err = run(capsys, "sweep", LLAMA, "--gpus", "h100", "--max-gpus", "1", "--json")
    assert code == 0, err
    assert all(o["replicas_for_rate"] is None for o in json.loads(out)["options"])


def test_lengths_file_sets_the_simulated_mix(capsys, tmp_path):
    """Half the requests 100 + 50 tokens, half 4,000 + 500: the p99 TTFT is a long prompt's,
    above the p50's."""
    lens = tmp_path / "lens.csv"
    lens.write_text("input_tokens,output_tokens\n" + "100,50\n4000,500\n" * 50)
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--lengths-file", str(lens),
                         "--request-rate", "2", "--json")
    assert code == 0, err
    pf = json.loads(out)["performance"]
    assert pf["lengths"] == "100 (input, output) lengths from a file, sampled"
    t = pf["percentiles"]["ttft_ms"]
    assert t["p99"] > t["p50"]


def test_dataset_sets_the_simulated_mix_and_the_mean_lengths(capsys):
    """--dataset azure-conv-2023: the figures say which lengths they assume; the plan's mean
    lengths default to the dataset's (1,154.7 in / 211.1 out: the trace's means, rounded)."""
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--dataset", "azure-conv",
                         "--request-rate", "2", "--json")
    assert code == 0, err
    d = json.loads(out)
    pf = d["performance"]
    assert pf["lengths"].startswith("the azure-conv-2023 dataset's lengths (19,366 requests")
    assert pf["replicas"] >= 1
    t = pf["percentiles"]["ttft_ms"]
    assert t["p99"] > t["p50"] > 0
    assert (d["workload"]["avg_input_tokens"], d["workload"]["avg_output_tokens"]) == (1155, 211)
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--dataset", "azure-conv",
                         "--avg-input-tokens", "500", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert "19,366 requests" in d["performance"]["lengths"]
    assert (d["workload"]["avg_input_tokens"], d["workload"]["avg_output_tokens"]) == (500, 211)


def test_dataset_text_names_the_distribution(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--dataset", "sharegpt-8k",
                         "--slo-percentile", "99")
    assert code == 0, err
    assert "sharegpt-8k dataset's lengths" in " ".join(out.split())


@pytest.mark.parametrize("extra", [["--random-range-ratio", "0.5"],
                                   ["--lengths-file", "LENS"]])
def test_dataset_excludes_the_other_length_flags(capsys, tmp_path, extra):
    lens = tmp_path / "lens.csv"
    lens.write_text("input_tokens,output_tokens\n100,50\n")
    extra = [str(lens) if x == "LENS" else x for x in extra]
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--dataset", "sharegpt-8k",
                         *extra)
    assert code == 2
    assert "--dataset and " in err and "give one" in err


@pytest.mark.parametrize(("name", "expect"), [("sharegpt", "first turn"),
                                              ("azure", "did you mean")])
def test_bad_dataset_exits_2_with_the_reason(capsys, name, expect):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--dataset", name)
    assert code == 2
    assert expect in err and "Traceback" not in err


def test_a_rate_no_replica_count_serves_is_an_error_not_the_search_cap(capsys, tmp_path):
    """Prompts up to 4,000 tokens and p99 TTFT ≤ 100 ms: one H100's own tail misses it however
    little load each replica gets, so more replicas never help. Before 2026-12-03 the plan exited
    0 with the search's cap (4,096 replicas) and its cost per day."""
    lengths = tmp_path / "len.csv"
    lengths.write_text("input_tokens,output_tokens\n" + "".join(
        f"{100 + (i * 397) % 3900},{10 + (i * 131) % 790}\n" for i in range(500)))
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--request-rate", "5",
                       "--slo-ttft-ms", "100", "--slo-percentile", "99", "--lengths-file",
                       str(lengths), "--json")
    d = json.loads(out)
    p = d["performance"]
    assert code == 1 and p["meets_slo_at_percentile"] is False
    assert p["replicas"] is None and p["cost_per_day"] is None and p["gpus_for_rate"] is None
    (err,) = [x for x in d["problems"] if x["code"] == "slo-unmet-at-percentile"]
    assert err["severity"] == "error" and "with any number of replicas" in err["message"]


def test_a_curve_no_fleet_serves_within_the_slos_has_no_size_or_cost(capsys, tmp_path):
    """Llama-3.1-8B on one H100 decodes one 2,000+300 request at 5.1 ms per token, so a 5 ms
    TPOT target at p99 holds at no replica count: each interval used to show the search's cap
    (4,096 replicas, $383,385.60 per day). Now: no size, no fleet figures, exit 1."""
    import jsonschema

    curve = tmp_path / "day.csv"
    curve.write_text("time,requests_per_s\n0,4\n8,20\n16,8\n")
    args = ("plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "2000",
            "--avg-output-tokens", "300", "--slo-tpot-ms", "5", "--slo-percentile", "99",
            "--traffic", str(curve))
    code, out, _ = run(capsys, *args, "--json")
    d = json.loads(out)
    _, schema, _ = run(capsys, "schema", "plan")
    jsonschema.validate(d, json.loads(schema))
    t = d["traffic"]
    assert code == 1 and t["unmet_intervals"] == 3
    assert all(i["replicas"] is None and i["gpus"] is None for i in t["intervals"])
    assert t["peak_gpus"] is t["gpu_hours_per_day"] is t["cost_per_day"] is None
    assert t["autoscaler"] == {}
    unmet = [p for p in d["problems"] if p["code"] == "slo-unmet-at-percentile"]
    assert unmet and "3 of the traffic curve's 3 intervals" in unmet[0]["message"]
    code, out, _ = run(capsys, *args)
    words = " ".join(out.split())
    assert code == 1 and "4096" not in out and "no fleet size or cost" in words
    assert "✗ = no replica count meets the SLOs at this rate" in words
    code, out, err = run(capsys, "report", LLAMA, "--gpu", "h100", "--avg-input-tokens", "2000",
                         "--avg-output-tokens", "300", "--slo-tpot-ms", "5",
                         "--slo-percentile", "99", "--traffic", str(curve))
    assert "no fleet size or cost" in " ".join(out.split()) and "4096" not in out, err


def test_replicas_for_a_rate_are_whole_copies_of_a_data_parallel_serve_line(capsys, tmp_path):
    """One replica of the step model is one DP rank, but one launch line starts all four of
    an expert-parallel -dp 4 deployment: 25 req/s needed 5 ranks, reported as "5, 5 GPUs",
    which no number of copies of the serve line gives. Now a multiple of 4: 8 ranks (2 copies),
    8 GPUs, each rank at 25 / 8 req/s; the autoscaler counts copies."""
    args = ("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "h100", "-tp", "1", "-dp", "4",
            "--enable-expert-parallel", "--avg-input-tokens", "2000",
            "--avg-output-tokens", "500")
    code, out, err = run(capsys, *args, "--request-rate", "25", "--json")
    assert code == 0, err
    d = json.loads(out)
    pf = d["performance"]
    assert d["gpu"]["count"] == 4 and pf["replicas"] % 4 == 0
    # 25 req/s at ≤ 95 % of a rank's capacity needs this many ranks, rounded up to copies
    ranks = -(-25 // (0.95 * pf["capacity_rps_per_replica"]))
    assert pf["replicas"] == 4 * -(-ranks // 4)
    assert pf["gpus_for_rate"] == pf["replicas"]  # one GPU per rank (TP 1)
    assert pf["load_per_replica_rps"] == pytest.approx(25 / pf["replicas"], abs=1e-4)
    assert pf["cost_per_day"] == pytest.approx(pf["gpus_for_rate"] * pf["gpu_hour_price"] * 24,
                                               abs=0.01)
    assert f"{pf['replicas'] // 4} copies of the serve line's 4 DP ranks" in pf["harness"]
    curve = tmp_path / "day.csv"
    curve.write_text("time,requests_per_s\n0,5\n12,25\n")
    code, out, err = run(capsys, *args, "--traffic", str(curve), "--json")
    t = json.loads(out)["traffic"]
    assert code == 0, err
    assert all(i["replicas"] % 4 == 0 for i in t["intervals"])
    assert t["autoscaler"]["max_replicas"] == max(i["replicas"] for i in t["intervals"]) // 4


def test_a_trace_or_lengths_file_sets_the_plans_lengths_and_its_limits(capsys, tmp_path):
    """The plan's figures, its max_num_seqs and its simulation describe the same requests: a
    --lengths-file's (or --trace's) means stand in for --avg-input/output-tokens (they used
    to stay at the default 1,024 / 256 beside a simulation of 4,000 / 800); a request longer
    than the serve line's context is an error (vLLM rejects it), and so is a rate or a curve
    beside a trace, which replays its own arrival times."""
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("input_tokens,output_tokens\n" + "4000,800\n" * 3 + "2000,400\n")
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--lengths-file", str(lengths),
                         "--request-rate", "5", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert (d["workload"]["avg_input_tokens"], d["workload"]["avg_output_tokens"]) == (3500, 700)
    assert (d["performance"]["input_tokens"], d["performance"]["output_tokens"]) == (3500, 700)
    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,1000,100\n1,3000,300\n")
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--trace", str(trace), "--json")
    assert json.loads(out)["workload"]["avg_input_tokens"] == 2000
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--trace", str(trace),
                       "--avg-input-tokens", "500", "--json")  # a given mean is kept
    assert json.loads(out)["workload"]["avg_input_tokens"] == 500
    long = tmp_path / "long.csv"
    long.write_text("input_tokens,output_tokens\n200000,10\n1000,100\n")
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--max-model-len", "32768",
                       "--request-rate", "2", "--lengths-file", str(long), "--json")
    longer = [p for p in json.loads(out)["problems"]
              if p["code"] == "workload-longer-than-context"]
    assert code == 1 and len(longer) == 1
    assert f"1 of the 2 requests of --lengths-file {long} need" in longer[0]["message"]
    assert "200,010" in longer[0]["message"]
    for extra in (["--request-rate", "5"], ["--traffic", str(lengths)]):
        code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--trace", str(trace), *extra)
        assert code == 2 and "--trace replays its own arrival times" in err


def test_a_trace_that_misses_the_slo_on_one_replica_is_an_error(capsys, tmp_path):
    """Replayed on one replica, a 20 req/s trace of 2,000 / 300-token requests misses a p99
    TTFT of 1 s on one H100 (one replica serves about 10 req/s of them): the plan said so only
    in its table (✗, "SLOs not met") and exited 0 with no problem."""
    trace = tmp_path / "hot.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     + "".join(f"{k / 20:.3f},2000,300\n" for k in range(400)))
    args = ("plan", LLAMA, "--gpu", "h100", "--trace", str(trace), "--slo-ttft-ms", "1000",
            "--slo-percentile", "99")
    code, out, _ = run(capsys, *args, "--json")
    d = json.loads(out)
    assert d["performance"]["meets_slo_at_percentile"] is False and code == 1
    assert any(p["code"] == "slo-unmet-at-percentile" and "replayed on one replica" in
               p["message"] for p in d["problems"])
    code, out, _ = run(capsys, "report", *args[1:])
    assert code == 1 and "None GPUs" not in out and "replayed on 1 replica" in out


def test_sweep_by_rate_ranks_on_the_pessimistic_end_by_default(capsys):
    """`sweep --request-rate` sized replicas from each option's point throughput whatever
    --rank-on said, so an extrapolated option with a wide band (A100 PCIe) won at 94 % of its
    point capacity, 131 % of its band's low end. Pessimistic (the default), an option's
    replicas are at least what its band's low throughput needs: rate ÷ (0.95 × requests/s ×
    low / point tokens/s); point keeps the estimate."""
    base = ("sweep", LLAMA, "--request-rate", "20", "--avg-input-tokens", "2000",
            "--avg-output-tokens", "300", "--gpus", "h100,a100-pcie-80gb", "-q", "auto",
            "--kv-cache-dtype", "auto", "--max-gpus", "2", "--json")
    code, out, err = run(capsys, *base)
    assert code == 0, err
    pess = json.loads(out)
    code, out, _ = run(capsys, *base, "--rank-on", "point")
    point = {(o["gpu"], o["tensor_parallel_size"], o["pipeline_parallel_size"]): o
             for o in json.loads(out)["options"]}
    sized = [o for o in pess["options"] if o["replicas_for_rate"] is not None]
    assert sized and pess["rank_on"] == "pessimistic"
    for o in sized:
        pf = o["plan"]["performance"]
        low = pf["output_tokens_per_s_low"] / pf["output_tokens_per_s"]
        need = -(-20 // (0.95 * pf["requests_per_s"] * low))
        assert o["replicas_for_rate"] >= need, (o["gpu"], o["knobs"])
        same = point[(o["gpu"], o["tensor_parallel_size"], o["pipeline_parallel_size"])]
        assert o["replicas_for_rate"] >= same["replicas_for_rate"]
    costs = [o["cost_per_day_for_rate"] for o in sized if o["replicas_simulated"]]
    assert costs == sorted(costs)  # simulated first, cheapest first


def test_sweep_by_rate_shows_the_cost_per_day_its_order_reads(capsys):
    """Ranked by the cost per day of the rate's replicas, the table showed only $/hour and $/M,
    so its order looked wrong (#1 at $/M 0.36 above #4 at 0.35). A $/day column now shows it,
    the estimated ones marked; a sweep without a rate has none."""
    base = ("sweep", LLAMA, "--avg-input-tokens", "2000", "--avg-output-tokens", "300",
            "--gpus", "h100,a100-pcie-80gb,l40s,mi300x", "--max-gpus", "2")
    code, out, _ = run(capsys, *base, "--request-rate", "20")
    assert code == 0
    header = next(line for line in out.splitlines() if line.lstrip().startswith("#  GPU"))
    assert "$/day" in header and "$/day: the replicas --request-rate needs" in " ".join(
        out.split())
    rows = [r for r in out.split(header, 1)[1].split("\n\n", 1)[0].splitlines() if r.strip()]
    at = header.index("$/day") + len("$/day")
    days = [r[:at].split()[-1] for r in rows]
    simulated = [float(d.replace(",", "")) for d in days if not d.endswith("e")]
    estimated = [float(d[:-1].replace(",", "")) for d in days if d.endswith("e")]
    assert simulated == sorted(simulated) and estimated == sorted(estimated) and estimated
    code, out, _ = run(capsys, *base)
    assert "$/day" not in out


def test_the_hint_beside_a_trace_and_a_rate_names_what_lengths_file_reads(capsys, tmp_path):
    """--trace with --request-rate hinted `--request-rate R --lengths-file TRACE`, which a JSON
    Lines trace is not (--lengths-file reads CSV, or a benchmark's input_lens/output_lens):
    the hint says a CSV trace works as it is, and it does."""
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"TIMESTAMP": 0, "ContextTokens": 500, "GeneratedTokens": 50}\n'
                     '{"TIMESTAMP": 2, "ContextTokens": 700, "GeneratedTokens": 70}\n')
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--trace", str(jsonl),
                       "--request-rate", "2", "--json")
    hint = json.loads(out)["error"]["hint"]
    assert code == 2 and "--lengths-file TRACE" not in hint
    assert "a CSV trace as it is" in hint and "JSON Lines trace's lengths as a CSV" in hint
    csv_trace = tmp_path / "t.csv"
    csv_trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,500,50\n2,700,70\n")
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--request-rate", "2",
                         "--lengths-file", str(csv_trace), "--json")
    assert code == 0, err
    assert json.loads(out)["workload"]["avg_input_tokens"] == 600


def test_a_trace_at_one_instant_and_a_curve_row_too_long_exit_2(capsys, tmp_path):
    """A one-request trace printed "1 requests, 0 req/s on average"; `0,5,extra` in a curve
    was read as 0,5. Both are refused naming the file as given (exit 2)."""
    one = tmp_path / "one.csv"
    one.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,500,50\n")
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--trace", str(one))
    assert code == 2 and f"--trace {one}: one request;" in err and "0 req/s" not in err
    day = tmp_path / "day.csv"
    day.write_text("time,requests_per_s\n0,5,extra\n")
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--traffic", str(day))
    assert code == 2 and f"--traffic {day} line 2: 3 fields, the header names 2" in err


@pytest.mark.parametrize("rates", [[0, 0, 0, 0], [0, 2, 5, 0]])
def test_idle_intervals_keep_the_autoscalers_floor_in_the_table_and_the_cost(capsys, tmp_path,
                                                                            rates):
    """At 0 req/s the autoscaler keeps one copy (its trigger reads the engine's own queue gauge:
    a fleet at zero never wakes), so the interval's replicas, the GPU-hours and the cost count
    that copy, and the autoscaler says why its minimum is 1."""
    curve = tmp_path / "day.csv"
    curve.write_text("time,requests_per_s\n" + "".join(f"{6 * i},{r}\n"
                                                         for i, r in enumerate(rates)))
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "1000",
                         "--avg-output-tokens", "200", "--traffic", str(curve), "--json")
    assert code == 0, err
    d = json.loads(out)
    t = d["traffic"]
    reps = [i["replicas"] for i in t["intervals"]]
    a = t["autoscaler"]
    assert min(reps) == a["min_replicas"] == 1 and max(reps) == a["max_replicas"]
    assert "queue gauge" in a["min_replicas_why"]
    assert t["gpu_hours_per_day"] == pytest.approx(6 * sum(i["gpus"] for i in t["intervals"]))
    assert t["cost_per_day"] == pytest.approx(
        t["gpu_hours_per_day"] * d["performance"]["gpu_hour_price"], abs=0.02)
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--avg-input-tokens", "1000",
                       "--avg-output-tokens", "200", "--traffic", str(curve))
    assert "autoscaler: 1–" in out and "$0.00 per day" not in out
