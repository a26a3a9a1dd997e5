"""kvplan.sources.benchfiles: each supported benchmark format reads from a public output file
(tests/sources/fixtures/bench/README.md cites each), the values pinned from the files' own
text; unknown and broken files end in a clear error naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import InvalidConfigError
from kvplan.sources import benchfiles

BENCH = Path(__file__).parent / "fixtures" / "bench"


def test_vllm_save_result_json_lines_with_metadata() -> None:
    runs = benchfiles.read(BENCH / "vllm_llama-3.2-3b_l40s_results.json")
    assert len(runs) == 9 and {r.format for r in runs} == {"vllm-bench-serve"}
    r = runs[0]  # line 1: rate 10, 300 prompts
    assert r.model == "meta-llama/Llama-3.2-3B-Instruct"
    assert r.request_rate == 10.0 and r.concurrency is None
    assert r.ttft_ms.mean == pytest.approx(54.59561144333596)
    assert r.tpot_ms.p99 == pytest.approx(15.793261194984588)
    # total_input_tokens / completed = 299700 / 300; total_output_tokens 80945 / 300
    assert r.input_tokens == pytest.approx(999.0)
    assert r.output_tokens == pytest.approx(80945 / 300)
    assert r.deployment["gpu"] == "4xNVIDIA_L40S" and r.deployment["replicas"] == "4"
    assert r.fields["input_tokens"] == "total_input_tokens / completed"
    assert runs[2].request_rate is None  # "request_rate": "inf": everything at once
    assert r.burstiness == 1.0  # "burstiness": 1.0 (vllm bench serve's Poisson default)
    # Little's law for an open loop: 8.369432347779671 req/s × (54.6 + 268.8 × 13.71) ms
    n, how = r.in_flight()
    e2e_ms = 54.59561144333596 + (80945 / 300 - 1) * 13.710971568239172
    assert n == pytest.approx(8.369432347779671 * e2e_ms / 1e3) and "Little" in how


def test_sglang_jsonl_of_an_older_release_gives_medians() -> None:
    runs = benchfiles.read(BENCH / "sglang_llama-3.3-70b_h200_tp4.jsonl")
    assert len(runs) == 7 and runs[0].format == "sglang-bench-serving"
    r = runs[3]  # request rate 8
    assert r.request_rate == 8.0
    assert r.ttft_ms.mean is None and r.ttft_ms.median == pytest.approx(191.41179136931896)
    assert r.itl_ms.median == pytest.approx(70.76324708759785)
    assert r.output_tokens == pytest.approx(1218922 / 2400)
    assert r.e2e_ms.mean == pytest.approx(52064.764045071985)
    assert r.deployment == {"engine": "sglang"}  # "backend": "sglang"
    assert r.burstiness is None  # this release does not write it
    assert r.model is None  # this release does not write the model


def test_aiperf_profile_export() -> None:
    (r,) = benchfiles.read(BENCH / "aiperf_qwen3.6-nvfp4_rtx5090_chatbot_c16.json")
    assert r.format == "aiperf" and r.model == "qwen3.6-nvfp4"
    assert r.concurrency == 16.0  # the profiling phase (the warmup is excluded)
    assert r.ttft_ms.mean == pytest.approx(119.13046247916667)
    assert r.tpot_ms.mean == pytest.approx(13.05021344397687)
    assert r.input_tokens == pytest.approx(367.28125)
    assert r.output_throughput == pytest.approx(1040.1442436393677)


def test_genai_perf_profile_export() -> None:
    (r,) = benchfiles.read(BENCH / "genai-perf_ensemble_trtllm_c100_streaming.json")
    assert r.format == "genai-perf" and r.model == "ensemble"
    assert r.concurrency == 100.0 and r.request_rate is None
    assert r.ttft_ms.median == pytest.approx(172.8093975)
    assert r.output_tokens == pytest.approx(2565.855)


def test_guidellm_report() -> None:
    runs = benchfiles.read(BENCH / "guidellm_llama-3.1-8b_built.json")
    assert [r.format for r in runs] == ["guidellm", "guidellm"]
    assert runs[0].model == "meta-llama/Llama-3.1-8B-Instruct"
    assert runs[0].concurrency == 16.0 and runs[1].request_rate == 4.0
    # strategy "constant" (rate 4.0): evenly spaced sends
    assert runs[1].burstiness == float("inf")
    assert runs[0].ttft_ms.p99 == pytest.approx(140.2)
    assert runs[0].e2e_ms.mean == pytest.approx(2020.0)  # request_latency is in seconds


def test_inference_perf_lifecycle_report_in_seconds() -> None:
    (r,) = benchfiles.read(BENCH / "inference-perf_llama-3-8b_h100_stage_0_lifecycle_metrics.json")
    assert r.format == "inference-perf" and r.model is None
    assert r.request_rate == 1.0
    # successes.latency.time_to_first_token.mean = 0.03112733216257766 s
    assert r.ttft_ms.mean == pytest.approx(31.12733216257766)
    assert r.fields["ttft.mean"] == "successes.latency.time_to_first_token.mean × 1000"


def test_every_reader_records_its_fields() -> None:
    for p in sorted(BENCH.glob("*.json*")):
        for r in benchfiles.read(p):
            assert "ttft.median" in r.fields or "ttft.mean" in r.fields, p.name


def test_unknown_json_names_the_file_and_what_was_expected() -> None:
    with pytest.raises(InvalidConfigError) as e:
        benchfiles.parse('{"hello": 1}', "mystery.json")
    assert "mystery.json" in str(e.value) and "no benchmark format" in str(e.value)
    assert "vllm bench serve" in (e.value.hint or "")


def test_broken_json_names_the_file() -> None:
    with pytest.raises(InvalidConfigError, match="broken.json: not a benchmark result"):
        benchfiles.parse('{"mean_ttft_ms": 1', "broken.json")
    with pytest.raises(InvalidConfigError, match="lines.jsonl.*line 2"):
        benchfiles.parse('{"mean_ttft_ms": 1}\n{oops\n', "lines.jsonl")


def test_empty_guidellm_report_has_no_runs() -> None:
    with pytest.raises(InvalidConfigError, match="no benchmark runs"):
        benchfiles.parse('{"benchmarks": []}', "empty.json")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="not a regular file"):
        benchfiles.read(tmp_path)


def _genai_perf_in(unit: str, per_ms: float, *, drop_unit: str = "") -> str:
    """The genai-perf fixture with its time metrics rewritten in `unit` (`per_ms` of them to
    the ms), and the unit of `drop_unit` removed."""
    import json

    doc = json.loads((BENCH / "genai-perf_ensemble_trtllm_c100_streaming.json").read_text())
    for key in ("time_to_first_token", "inter_token_latency", "request_latency"):
        doc[key] = {k: v * per_ms if isinstance(v, (int, float)) else v
                    for k, v in doc[key].items()} | {"unit": unit}
    if drop_unit:
        del doc[drop_unit]["unit"]
    return json.dumps(doc)


@pytest.mark.parametrize("unit,per_ms", [("us", 1e3), ("µs", 1e3), ("ns", 1e6), ("sec", 1e-3),
                                         ("s", 1e-3), ("ms", 1.0)])
def test_perf_time_units_are_read_as_written(unit: str, per_ms: float) -> None:
    """The fixture's TTFT avg is 184.63779366666665 ms (its "unit": "ms"); the same times
    written in µs (184,637.79…), ns or seconds read back as that many ms. A µs file was read
    as ms before (TTFT 184,637.8 ms)."""
    (r,) = benchfiles.parse(_genai_perf_in(unit, per_ms), "gp.json")
    assert r.ttft_ms.mean == pytest.approx(184.63779366666665, rel=1e-12)
    assert r.tpot_ms.mean == pytest.approx(2.1767344516666665, rel=1e-12)


def test_a_time_unit_no_tool_writes_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidConfigError) as e:
        benchfiles.parse(_genai_perf_in("furlongs", 1.0), "gp.json")
    assert str(e.value).startswith("gp.json: time_to_first_token.unit 'furlongs' is not a "
                                   "time unit genai-perf writes (ns, us, ms, sec; or s, µs)")
    with pytest.raises(InvalidConfigError, match="gp.json: inter_token_latency has no unit"):
        benchfiles.parse(_genai_perf_in("ms", 1.0, drop_unit="inter_token_latency"), "gp.json")


def _closed_loop(**changed: object) -> str:
    """A `vllm bench serve` result of a closed loop: 8 clients, 80 requests of 500 output
    tokens in 100 s (request_throughput 0.8/s), each 10 s end to end: TTFT 119.8 ms + 499 ×
    TPOT 19.8 ms = 10,000 ms, so N = 0.8/s × 10 s = 8 requests in flight, its 8 clients."""
    import json

    return json.dumps({
        "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": 80,
        "request_rate": "inf", "max_concurrency": 8, "duration": 100.0, "completed": 80,
        "total_input_tokens": 80 * 1000, "total_output_tokens": 80 * 500,
        "request_throughput": 0.8, "output_throughput": 400.0, "mean_ttft_ms": 119.8,
        "mean_tpot_ms": 19.8, "mean_e2el_ms": 10_000.0, **changed})


def test_a_closed_loop_whose_latencies_agree_with_its_throughput_is_read() -> None:
    (r,) = benchfiles.parse(_closed_loop(), "c8.json")
    assert benchfiles.inconsistency(r) is None


def test_seconds_in_ms_fields_are_refused_naming_the_figures() -> None:
    """The same run with its _ms fields holding seconds: 0.8/s × 10 ms = 0.008 in flight,
    1000× fewer than the 8 clients a closed loop keeps busy."""
    seconds = _closed_loop(mean_ttft_ms=0.1198, mean_tpot_ms=0.0198, mean_e2el_ms=10.0)
    with pytest.raises(InvalidConfigError) as e:
        benchfiles.parse(seconds, "c8.json")
    assert e.value.message == (
        "c8.json: run #1: completed/s (request_throughput) 0.8 × mean end-to-end latency "
        "(measured e2e) 10 ms = 0.008 requests in flight, 1000× fewer than the 8 its closed "
        "loop kept outstanding: its latencies are that much too short for its own throughput")
    assert "unit" in (e.value.hint or "")


def test_microseconds_in_ms_fields_are_refused() -> None:
    """µs read as ms: 0.8/s × 10,000 s = 8,000 in flight, 1000× more than 8 clients."""
    us = _closed_loop(mean_ttft_ms=119_800.0, mean_tpot_ms=19_800.0, mean_e2el_ms=1e7)
    with pytest.raises(InvalidConfigError, match=r"= 8e\+03 requests in flight, 1000× more "
                       r"than its 8 clients \(max concurrency\) could keep outstanding"):
        benchfiles.parse(us, "c8.json")


def test_latency_fields_in_two_units_are_refused() -> None:
    """e2e in ms, TTFT and TPOT in seconds: 10,000 ms against 0.1198 + 499 × 0.0198 = 10 ms."""
    with pytest.raises(InvalidConfigError, match="differ 1000×: its latency fields are not in "
                       "one unit"):
        benchfiles.parse(_closed_loop(mean_ttft_ms=0.1198, mean_tpot_ms=0.0198), "c8.json")


def test_an_open_loop_is_held_to_its_stated_concurrency() -> None:
    """SGLang states its own concurrency (summed request time / wall time). The H200 file's
    first run (1 req/s, no such field in that release) with concurrency 7.9 — what its
    completed/s × mean e2e gives: output_throughput 537.41 / (160,347 / 300 output tokens)
    = 1.0055/s × 7,840.6 ms = 7.88 — is read; with its latencies in seconds (÷ 1000: 0.00788
    in flight) it is refused, 7.9 / 0.00788 = 1002× off."""
    import json

    lines = (BENCH / "sglang_llama-3.3-70b_h200_tp4.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    (r,) = benchfiles.parse(json.dumps({**first, "concurrency": 7.9}), "sg.jsonl")
    assert r.stated_in_flight == 7.9 and benchfiles.inconsistency(r) is None
    seconds = {k: v / 1000 if k.endswith("_ms") and isinstance(v, float) else v
               for k, v in first.items()}
    with pytest.raises(InvalidConfigError, match=r"= 0.00788 requests in flight, where the "
                       r"file's own concurrency \(measured on the wall clock\) is 7.9: its "
                       "latencies are 1002× too short"):
        benchfiles.parse(json.dumps({**seconds, "concurrency": 7.9}), "sg.jsonl")


def test_failed_requests_are_read_from_every_format_that_counts_them() -> None:
    """GuideLLM's request_totals.errored, AIPerf's error_request_count, inference-perf's
    failures.count (vLLM / SGLang: tests/cli/test_calibrate_inputs.py); the fixtures' own
    counts are 0, and more failed than completed is "most"."""
    import json

    guide = json.loads((BENCH / "guidellm_llama-3.1-8b_built.json").read_text())
    guide["benchmarks"][0]["metrics"]["request_totals"]["errored"] = 481  # of 480 successful
    g = benchfiles.parse(json.dumps(guide), "g.json")[0]
    assert (g.failed, g.completed) == (481, 480)
    assert g.failures() == (
        "481 of 961 requests failed (metrics.request_totals.errored 481, completed 480): the "
        "latencies of the few that completed describe an overloaded or failing server, not the "
        "steady state kvplan's latency model describes; re-run it at a load the server "
        "sustains", 481, True)
    aiperf = json.loads((BENCH / "aiperf_qwen3.6-nvfp4_rtx5090_chatbot_c16.json").read_text())
    assert benchfiles.parse(json.dumps(aiperf), "a.json")[0].failures() is None
    aiperf["error_request_count"] = {"unit": "requests", "avg": 4.0}  # request_count.avg 96
    a = benchfiles.parse(json.dumps(aiperf), "a.json")[0]
    assert a.failures() is not None and a.failures()[1:] == (4.0, False)
    assert a.notes == ["4 of 100 requests failed (error_request_count.avg 4, completed 96): "
                       "its latencies are those of the requests that completed"]
    ip = json.loads((BENCH / "inference-perf_llama-3-8b_h100_stage_0_lifecycle_metrics.json")
                    .read_text())
    (r,) = benchfiles.parse(json.dumps(ip), "ip.json")
    assert (r.failed, r.completed, r.failures()) == (0, 60, None)  # failures.count 0
    ip["failures"]["count"] = 61
    assert benchfiles.parse(json.dumps(ip), "ip.json")[0].failures()[1:] == (61, True)


# ----------------------------------------------------- concurrency 0 / negative (audit #6)


def test_a_vllm_max_concurrency_of_0_is_no_limit_and_noted() -> None:
    """vllm bench serve caps the requests in flight only for a truthy --max-concurrency
    (vllm/benchmarks/serve.py, v0.12.0): a 0 with a request rate is the open loop of that
    rate, not a closed loop of 1 client (it was read as concurrency 0 and replayed as 1)."""
    (r,) = benchfiles.parse(_closed_loop(max_concurrency=0, request_rate=0.8), "c0.json")
    assert r.concurrency is None and r.request_rate == 0.8
    assert r.unbounded == "max_concurrency" and "concurrency" not in r.fields
    assert r.notes == ["max_concurrency 0 is no limit (the benchmark caps the requests in "
                       "flight only for a positive --max-concurrency): read as no max "
                       "concurrency, an open loop at its request rate 0.8 req/s"]
    (burst,) = benchfiles.parse(_closed_loop(max_concurrency=0), "c0.json")
    assert burst.concurrency is None and burst.request_rate is None
    assert burst.notes[0].endswith("read as no max concurrency, all requests at once")


def test_a_negative_concurrency_is_refused_naming_the_line_and_the_field() -> None:
    """max_concurrency -8 was replayed and then refused with a garbled figure ("8 requests in
    flight, -1× more than its -8 clients")."""
    import json

    lines = _closed_loop() + "\n" + _closed_loop(max_concurrency=-8) + "\n"
    with pytest.raises(InvalidConfigError) as e:
        benchfiles.parse(lines, "neg.jsonl")
    assert e.value.message == ("neg.jsonl: line 2: max_concurrency -8 is not a number of "
                               "clients (negative)")
    guide = json.loads((BENCH / "guidellm_llama-3.1-8b_built.json").read_text())
    guide["benchmarks"][0]["config"]["strategy"]["streams"] = -2
    with pytest.raises(InvalidConfigError, match=r"g.json: benchmarks\[0\]: config.strategy"
                       r".streams -2 is not a number of clients \(negative\)"):
        benchfiles.parse(json.dumps(guide), "g.json")


def test_guidellm_and_aiperf_concurrency_0_is_no_client_count() -> None:
    """GuideLLM's concurrent streams are a PositiveInt (src/guidellm/scheduler/strategies.py,
    v0.7.3) and AIPerf's --concurrency is ge=1 (aiperf/common/config/loadgen_config.py,
    v0.1.1): neither writes a 0, so it tells no load (it was replayed as 1 client)."""
    import json

    guide = json.loads((BENCH / "guidellm_llama-3.1-8b_built.json").read_text())
    guide["benchmarks"][0]["config"]["strategy"]["streams"] = 0
    g = benchfiles.parse(json.dumps(guide), "g.json")[0]
    assert g.concurrency is None and g.invalid["concurrency"] == \
        "config.strategy.streams 0 is not a number of clients"
    aiperf = json.loads((BENCH / "aiperf_qwen3.6-nvfp4_rtx5090_chatbot_c16.json").read_text())
    aiperf["input_config"]["phases"][1]["concurrency"] = 0
    (a,) = benchfiles.parse(json.dumps(aiperf), "a.json")
    assert a.concurrency is None and a.invalid["concurrency"] == \
        "input_config.phases[].concurrency 0 is not a number of clients"


# ------------------------------------------- one missing metric is not a format (audit #7)


def test_a_guidellm_benchmark_without_ttft_is_still_guidellm() -> None:
    """The first benchmark without time_to_first_token_ms: the file was refused as in no
    format; its TPOT is there, and the run is read (the TTFT named absent)."""
    import json

    guide = json.loads((BENCH / "guidellm_llama-3.1-8b_built.json").read_text())
    del guide["benchmarks"][0]["metrics"]["time_to_first_token_ms"]
    g = benchfiles.parse(json.dumps(guide), "g.json")
    assert len(g) == 2 and g[0].ttft_ms.central is None and g[0].tpot_ms.central is not None
    assert g[0].absent["ttft.mean"] == "metrics.time_to_first_token_ms.successful.mean absent"


def test_an_aiperf_ttft_without_a_unit_is_refused_naming_the_field() -> None:
    """docs/calibration.md: a missing unit is refused naming the file, the field and the unit
    (it was "its content is in no benchmark format kvplan reads")."""
    import json

    aiperf = json.loads((BENCH / "aiperf_qwen3.6-nvfp4_rtx5090_chatbot_c16.json").read_text())
    del aiperf["time_to_first_token"]["unit"]
    with pytest.raises(InvalidConfigError, match="a.json: time_to_first_token has no unit "
                       "aiperf writes"):
        benchfiles.parse(json.dumps(aiperf), "a.json")
    del aiperf["time_to_first_token"]
    (a,) = benchfiles.parse(json.dumps(aiperf), "a.json")
    assert a.ttft_ms.central is None and a.tpot_ms.central is not None


# ------------------------------------------------ NaN / Infinity, text, zero rates (#10, #12)


def test_nan_and_infinity_are_read_and_noted_where_kvplan_reads_them() -> None:
    """Python's json.dump writes NaN and Infinity; a file holding one was refused as a whole
    ("NaN is not a JSON number"), even in a field kvplan never reads (std_ttft_ms)."""
    unread = _closed_loop().replace('"mean_ttft_ms"', '"std_ttft_ms": NaN, "mean_ttft_ms"')
    (r,) = benchfiles.parse(unread, "n.json")
    assert r.ttft_ms.mean == 119.8 and r.notes == []
    read = _closed_loop(median_ttft_ms=118.0).replace('"mean_ttft_ms": 119.8',
                                                      '"mean_ttft_ms": NaN')
    (r,) = benchfiles.parse(read.replace('"mean_tpot_ms": 19.8', '"mean_tpot_ms": -Infinity'),
                            "n.json")
    assert r.ttft_ms.central == 118.0 and r.tpot_ms.central is None
    assert r.notes == [
        "mean_ttft_ms nan is not a finite number: the median (median_ttft_ms) is used instead",
        "mean_tpot_ms -inf is not a finite number: ignored"]


def test_text_numbers_and_zero_rates_are_left_out_and_noted() -> None:
    """docs/calibration.md, "Noted": text where a number belongs is left out (the median for
    a mean); a zero request_throughput where requests completed is no measurement. Both were
    used or dropped without a word."""
    (r,) = benchfiles.parse(_closed_loop(mean_ttft_ms="145.3", median_ttft_ms=119.0,
                                         request_throughput=0), "t.json")
    assert r.ttft_ms.central == 119.0 and r.achieved_rate is None
    assert r.completed_rate() == 400.0 / 500  # output_throughput / output tokens instead
    assert r.notes == [
        "request_throughput 0 is not a measured rate (zero): ignored",
        "mean_ttft_ms '145.3' is text, not a number: the median (median_ttft_ms) is used "
        "instead"]
    # with no request completed a zero rate is what the run measured: no note
    (none_done,) = benchfiles.parse(_closed_loop(completed=0, request_throughput=0,
                                                 output_throughput=0), "z.json")
    assert not any("measured rate" in n for n in none_done.notes)
