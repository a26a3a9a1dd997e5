"""`kvplan calibrate` on result files that are not what they should be: each refusal, skip or
note names the file, the run and where it is in the file (line / document), and the field; a
run the file states but kvplan cannot use is skipped naming what it lacks, and the others are
fitted (docs/calibration.md, "What is refused, skipped or noted"). The public L40S file
(tests/sources/fixtures/bench/README.md) is mutated field by field; the expected values are
its own figures."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import run

BENCH = Path(__file__).parents[1] / "sources" / "fixtures" / "bench"
L40S = BENCH / "vllm_llama-3.2-3b_l40s_results.json"
RUNS = [json.loads(line) for line in L40S.read_text().splitlines()]


def _write(tmp_path: Path, runs: list[dict], name: str = "runs.json") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    return path


def _without(run_: dict, *metrics: str) -> dict:
    """The run with every field of these latency metrics removed (mean_ttft_ms, …)."""
    return {k: v for k, v in run_.items() if not any(f"_{m}_ms" in k for m in metrics)}


def _check(capsys, path: Path, *extra: str, context: int = 4096) -> tuple[int, dict]:
    code, out, err = run(capsys, "calibrate", str(path), "--max-model-len", str(context),
                         "--check", "--json", *extra)
    assert "Traceback" not in err
    return code, json.loads(out)


def test_a_run_without_ttft_is_skipped_naming_it_and_the_others_are_used(capsys, tmp_path):
    """Line 2 (an open loop at 30 req/s, no e2e latency in this file) without its TTFT fields:
    its requests in flight (Little's law needs a mean e2e, here TTFT + (O − 1)·TPOT) cannot be
    told, so it is skipped naming the fields; the 5 other open loops are checked (the 3 bursts
    are skipped as before). It was refused as a whole ("document 2 is in no benchmark format")."""
    runs = [RUNS[0], _without(RUNS[1], "ttft"), *RUNS[2:]]
    code, data = _check(capsys, _write(tmp_path, runs))
    assert code == 0, data
    assert len(data["runs"]) == 5
    why = data["skipped"]["runs.json#2"]
    assert "mean_ttft_ms, median_ttft_ms absent" in why and "mean_e2el_ms" in why
    assert "no concurrency, request rate or latency" not in why


def test_runs_without_tpot_name_the_fields_and_the_lines(capsys, tmp_path):
    runs = [_without(r, "tpot", "itl") for r in RUNS]
    code, data = _check(capsys, _write(tmp_path, runs))
    assert code == 2
    message = data["error"]["message"]
    # the open loops, every one named with its line, grouped under their common reason
    assert ("runs.json#1 (line 1), runs.json#2 (line 2), runs.json#4 (line 4), runs.json#5 "
            "(line 5), runs.json#7 (line 7), runs.json#8 (line 8): an open loop") in message
    assert "mean_tpot_ms, median_tpot_ms, mean_itl_ms, median_itl_ms absent" in message
    assert "runs.json#3 (line 3), runs.json#6 (line 6), runs.json#9 (line 9): all requests " \
        "sent at once" in message
    assert "no concurrency, request rate or latency" not in message


def test_a_null_ttft_is_named_null(capsys, tmp_path):
    runs = [{**RUNS[0], "mean_ttft_ms": None, "median_ttft_ms": None}, RUNS[1]]
    code, data = _check(capsys, _write(tmp_path, runs))
    assert code == 0 and len(data["runs"]) == 1
    assert "mean_ttft_ms null; median_ttft_ms null" in data["skipped"]["runs.json#1"]


def test_an_invalid_mean_falls_back_to_the_median_and_says_so(capsys, tmp_path):
    """docs/calibration.md step 4: the mean, else the median. A negative mean is no latency
    (nor is "NaN", as text or as the NaN Python's json.dump writes: tests/sources/
    test_benchfiles.py): the file's median is used (line 1: median_ttft_ms 52.868896000063614,
    median_tpot_ms 13.686303201518745), and a note names the field."""
    bad = {**RUNS[0], "mean_ttft_ms": -5, "mean_tpot_ms": "NaN"}
    code, data = _check(capsys, _write(tmp_path, [bad, RUNS[1]]))
    assert code == 0, data
    measured = data["runs"][0]["measured"]
    assert measured["ttft_ms"] == 52.868896000063614
    assert measured["tpot_ms"] == 13.686303201518745
    assert data["notes"]["runs.json#1"] == [
        "mean_ttft_ms -5 is not a latency (negative): the median (median_ttft_ms) is used "
        "instead",
        "mean_tpot_ms 'NaN' is not a finite number: the median (median_tpot_ms) is used instead"]
    code, out, _ = run(capsys, "calibrate", str(tmp_path / "runs.json"), "--max-model-len",
                       "4096", "--check")
    assert "note: runs.json#1 (line 1): mean_ttft_ms -5 is not a latency" in " ".join(out.split())


def test_a_line_in_no_format_is_named_by_its_line(capsys, tmp_path):
    """Blank lines count: the line number is the one an editor shows."""
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(RUNS[0]) + "\n\n" + json.dumps({"hello": 1}) + "\n")
    code, data = _check(capsys, path)
    assert code == 2 and data["error"]["message"] == \
        "runs.json: line 3 is in no benchmark format kvplan reads"


def test_runs_longer_than_the_context_are_refused_naming_the_lengths(capsys):
    """Every open loop of the L40S file sends 999-token prompts (total_input_tokens 299,700 /
    completed 300) and gets 264–275 tokens back (line 1: 80,945 / 300 = 269.8 → 270): 1,269
    tokens of context, which a server at --max-model-len 512 refuses (`kvplan plan` says
    workload-longer-than-context). The runs did not run on that context: refused, the
    longest (line 4, 82,608 / 300 = 275.4 → 275: 1,274 tokens) in the hint. They were fitted
    as if they had, their predictions those of --max-model-len 4096."""
    code, out, err = run(capsys, "calibrate", str(L40S), "--max-model-len", "512", "--json")
    assert code == 2 and "Traceback" not in err
    error = json.loads(out)["error"]
    assert ("vllm_llama-3.2-3b_l40s_results.json#1 (line 1): its mean request of 999 prompt "
            "+ 270 output tokens needs 1,269 tokens of context, above --max-model-len 512"
            ) in error["message"]
    assert error["hint"] == ("pass the --max-model-len the benchmark server ran with (these "
                             "runs need 1,274 tokens or more)")


def test_only_the_runs_longer_than_the_context_are_left_out(capsys):
    """At --max-model-len 1266 the runs of lines 2, 5 and 8 fit (999 + 264, 267, 264 = 1,263,
    1,266, 1,263 tokens); lines 1, 4 and 7 (1,269, 1,274, 1,270) are skipped, named."""
    code, data = _check(capsys, L40S, context=1266)
    assert code == 0, data
    assert [r["run"].split("#")[1] for r in data["runs"]] == ["2", "5", "8"]
    why = data["skipped"]["vllm_llama-3.2-3b_l40s_results.json#7"]
    assert why.startswith("its mean request of 999 prompt + 271 output tokens needs 1,270 "
                          "tokens of context, above --max-model-len 1,266")
    assert "pass the --max-model-len the benchmark server ran with" in why


def test_an_unknown_time_unit_exits_2_naming_file_field_and_unit(capsys, tmp_path):
    doc = json.loads((BENCH / "genai-perf_ensemble_trtllm_c100_streaming.json").read_text())
    doc["request_latency"]["unit"] = "furlongs"
    path = tmp_path / "gp.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(capsys, "calibrate", str(path), "--model", "llama-3.1-8b-instruct",
                         "--gpu", "h100", "--max-model-len", "8192", "--check", "--json")
    assert code == 2 and "Traceback" not in err
    assert json.loads(out)["error"]["message"].startswith(
        "gp.json: request_latency.unit 'furlongs' is not a time unit genai-perf writes")


def test_a_file_whose_ms_fields_hold_seconds_is_refused(capsys, tmp_path):
    """The L40S file with every _ms field ÷ 1000 was fitted with +70,000 % errors (exit 0).
    Its open loops cannot tell (a faster server would write the same file), but its bursts
    can: line 3 completed 31.183 requests/s (request_throughput) of mean e2e 4.3867 ms +
    (266.85 − 1) × 0.061815 ms = 20.82 ms, i.e. 0.649 in flight, where all 900 requests were
    sent at once (649 read as ms). One tool writes one unit: the file is refused."""
    runs = [{k: v / 1000 if k.endswith("_ms") and isinstance(v, float) else v
             for k, v in r.items()} for r in RUNS]
    code, data = _check(capsys, _write(tmp_path, runs))
    assert code == 2
    assert data["error"]["message"].startswith(
        "runs.json: run #3 (line 3): completed/s (request_throughput) 31.18 × mean end-to-end "
        "latency (TTFT + (O − 1)·TPOT) 20.82 ms = 0.649 requests in flight, 1386× fewer than "
        "the 900 its burst (all requests at once) kept outstanding")


def _failing(completed: int, failed: int, **fields: object) -> dict:
    """Line 1 of the L40S file (300 prompts at 10 req/s) with only `completed` of them
    answered: the totals and rates of those, as vllm bench serve counts them."""
    first = RUNS[0]
    per = completed / first["completed"]
    return {**first, "completed": completed, "failed": failed,
            "total_input_tokens": 999 * completed,
            "total_output_tokens": round(first["total_output_tokens"] * per),
            "request_throughput": first["request_throughput"] * per,
            "output_throughput": first["output_throughput"] * per, **fields}


def test_a_run_where_most_requests_failed_is_skipped_naming_the_counts(capsys, tmp_path):
    """completed 30 of num_prompts 300, failed 270, an `errors` entry per request: the
    latencies of 30 requests a failing server answered are no steady state. It was fitted as
    a normal run."""
    bad = _failing(30, 270, errors=[""] * 30 + ["Server disconnected"] * 270)
    code, data = _check(capsys, _write(tmp_path, [bad, RUNS[1]]))
    assert code == 0, data
    assert [r["run"] for r in data["runs"]] == ["runs.json#2"]
    assert data["skipped"]["runs.json#1"].startswith(
        "270 of 300 requests failed (failed 270, completed 30): the latencies of the few that "
        "completed describe an overloaded or failing server")
    # the older result files: no `failed`, the errors list, else num_prompts − completed
    for older, field in [(dict(bad, failed=None), "errors (non-empty entries) 270"),
                         ({k: v for k, v in bad.items() if k not in ("failed", "errors")},
                          "num_prompts − completed 270")]:
        code, data = _check(capsys, _write(tmp_path, [older, RUNS[1]]))
        assert code == 0 and f"({field}, completed 30)" in data["skipped"]["runs.json#1"]


def test_a_run_with_a_few_failed_requests_is_fitted_with_a_note(capsys, tmp_path):
    code, data = _check(capsys, _write(tmp_path, [_failing(288, 12), RUNS[1]]))
    assert code == 0 and len(data["runs"]) == 2, data
    assert data["notes"]["runs.json#1"] == [
        "12 of 300 requests failed (failed 12, completed 288): its latencies are those of the "
        "requests that completed"]


def test_one_run_is_one_run(capsys, tmp_path):
    path = _write(tmp_path, [RUNS[0], RUNS[2]])  # the burst on line 3 is skipped
    code, out, err = run(capsys, "calibrate", str(path), "--max-model-len", "4096")
    assert code == 0, err
    assert out.startswith("vllm on Ada Lovelace: 1 run from runs.json;")


def test_the_docs_count_the_coefficients_a_calibration_file_holds():
    """docs/calibration.md said "all seven" after burst_share and dynamo_front_end_ms made
    them nine: the numbers it states are held to kvplan's."""
    import dataclasses
    import re

    from kvplan import calibrate as cal
    from kvplan.engines.base import Coefficients

    words = {"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11}
    text = " ".join((Path(__file__).parents[2] / "docs" / "calibration.md").read_text().split())
    stated = re.search(r"`coefficients` \(all (\w+) of kvplan/engines/base\.py `Coefficients`: "
                       r"the (\w+) the fit can move", text)
    assert stated is not None
    assert words[stated.group(1)] == len(dataclasses.fields(Coefficients))
    assert words[stated.group(2)] == len(cal.PRIORITY)


def test_a_vllm_max_concurrency_of_0_is_replayed_as_no_limit(capsys, tmp_path):
    """vllm bench serve's falsy --max-concurrency is no limit (vllm/benchmarks/serve.py,
    v0.12.0). Line 1 (10 req/s) with max_concurrency 0 is the open loop it was, not a closed
    loop of 1 client; line 3 (request rate inf) with it is a burst, skipped naming the field.
    Both were replayed as closed loops of 1 client, without a word."""
    runs = [{**RUNS[0], "max_concurrency": 0}, RUNS[1], {**RUNS[2], "max_concurrency": 0}]
    code, data = _check(capsys, _write(tmp_path, runs))
    assert code == 0, data
    first = data["runs"][0]
    assert first["run"] == "runs.json#1" and first["harness"].startswith("open loop at 10 req/s")
    assert "max_concurrency 0: no limit" in data["skipped"]["runs.json#3"]
    assert data["notes"]["runs.json#1"][0].startswith("max_concurrency 0 is no limit")


def test_a_negative_max_concurrency_is_refused_naming_the_line(capsys, tmp_path):
    code, data = _check(capsys, _write(tmp_path, [RUNS[0], {**RUNS[1], "max_concurrency": -8}]))
    assert code == 2
    assert data["error"]["message"] == ("runs.json: line 2: max_concurrency -8 is not a number "
                                        "of clients (negative)")


def test_the_files_version_and_tp_are_named_as_the_files_not_as_flags(capsys, tmp_path):
    """A bad release or TP in the file's --metadata was reported as a bad --engine-version /
    --tensor-parallel-size flag, without the file or the line."""
    code, data = _check(capsys, _write(tmp_path, [RUNS[0], {**RUNS[1], "version": "banana"}]))
    assert code == 2
    assert data["error"]["message"].startswith(
        "runs.json#2 (line 2): the file's version must be an engine release such as")
    assert data["error"]["message"].endswith("got 'banana'")
    code, data = _check(capsys, _write(tmp_path, [RUNS[0], {**RUNS[1], "tp": "3"}]))
    assert code == 2
    assert data["error"]["message"] == (
        "runs.json#2 (line 2): the file's tp='3': tensor_parallel_size 3 does not divide the "
        "model's 24 attention heads / 8 KV heads")
