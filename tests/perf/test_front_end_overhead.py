"""benchmarks/front_end_overhead.py: the calibration rows' collection pipeline, read from their
provenance notes (docs/front-end-overhead.md gives the evidence for each)."""

from __future__ import annotations

import csv
from collections import Counter
from types import ModuleType

import benchmod
import pytest


@pytest.fixture(scope="module")
def feo() -> ModuleType:
    return benchmod.load("front_end_overhead")


def test_gap_analysis_rows_are_the_dynamo_pipeline(feo: ModuleType) -> None:
    # perf_calibration.csv's first row's note (Qwen3-32B, H100, SGLang 0.5.1.post1), path shortened
    note = ("row id=qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_1024x128_c16_tp2_epnone_1; "
            "provenance=source_file=(path)/aic-auto-gap-analysis/data/h100_sxm/"
            "sglang/0.5.1.post1/Qwen_Qwen3-32B.csv; silicon_concurrency=16")
    assert feo.pipeline(note, "0.5.1.post1") == feo.DYNAMO


def test_inferencemax_file_rows_are_a_plain_engine_server(feo: ModuleType) -> None:
    note = ("row id=2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_1024x1024_c16_tp4_ep1_260; "
            "provenance=source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=16; "
            "measured=2025-10-29T00:00:00.000Z; wip=False")
    assert feo.pipeline(note, "not given") == feo.ENGINE


def test_unknown_provenance_is_an_error_naming_the_note(feo: ModuleType) -> None:
    with pytest.raises(ValueError, match="unknown provenance.*somewhere.csv"):
        feo.pipeline("provenance=source_file=somewhere.csv", "0.12.0")


def test_every_calibration_row_has_a_pipeline(feo: ModuleType) -> None:
    """InferenceMAX's Llama-70B FP8 vLLM grid at its removal (SemiAnalysisAI/InferenceX
    c198b20e: H100 TP 2/4/8 + H200 TP 1/2/4/8, 3 ISL/OSL pairs, concurrency 4-64 = 7 × 3 × 5 =
    105 rows, held out in perf_inferencemax.csv); the fitted rows (328 − 105 = 223,
    perf_calibration.csv) all come from the gap-analysis directory, as do the 21 vLLM 0.12
    Llama-3.1-8B FP8 rows of the same file kept out of the fit (perf_silicon_unfitted.csv)."""
    got = {}
    for name in ("perf_calibration.csv", "perf_inferencemax.csv", "perf_silicon_unfitted.csv"):
        with (benchmod.BENCH / "data" / name).open(newline="") as f:
            rows = list(csv.DictReader(f))
        got[name] = Counter(feo.pipeline(r["notes"], r["engine_version"]) for r in rows)
    assert got == {"perf_calibration.csv": {feo.DYNAMO: 223},
                   "perf_inferencemax.csv": {feo.ENGINE: 105},
                   "perf_silicon_unfitted.csv": {feo.DYNAMO: 21}}


def test_plain_server_rows_are_the_sources_figures(feo: ModuleType) -> None:
    """benchmarks/data/plain_server_ttft.csv against yobitelcomm/bench @ 1b05bdb,
    validation-runs/2026-05-18-multi-vendor-marathon/marathon/all/*.json, metrics.ttft_p50_ms
    (read by hand): 8d32c41ae6ca 14.079780085, fe5e3b276d77 14.120946056, 7f9d9b60b1f6
    11.700316449, 9d3ae7a8bf8e 11.210122495; each planned at one client, TP 1, and the implied
    constant is the measured TTFT less kvplan's TTFT without it."""
    rows = {r["file"]: r for r in feo.one_client()}
    assert {f: float(r["ttft_ms"]) for f, r in rows.items()} == {
        "8d32c41ae6ca.json": 14.0798, "fe5e3b276d77.json": 14.1209,
        "7f9d9b60b1f6.json": 11.7003, "9d3ae7a8bf8e.json": 11.2101}
    for r in rows.values():
        assert (r["tp"], r["concurrency"], r["engine_version"]) == ("1", "1", "0.21.0")
        assert "engine_version" in r["assumed"] and "tp" in r["assumed"]
        assert r["implied_ms"] == pytest.approx(float(r["ttft_ms"]) - r["bare_ms"])
        assert 0 < r["bare_ms"] < float(r["ttft_ms"])


def test_the_copied_kvcached_file_is_the_run_perf_fit_cites(feo: ModuleType) -> None:
    """The kvcached result file kept beside the data is the run benchmarks/perf_fit.py KVCACHED
    quotes (mean TTFT, lengths, model, rate)."""
    import json

    doc = json.loads(feo.KVCACHED_FILE.read_text())
    k = feo.KVCACHED
    assert doc["mean_ttft_ms"] == pytest.approx(k["ttft_ms"], abs=0.005)
    assert doc["model_id"] == k["model"] and doc["request_rate"] == 16.0
    assert doc["total_input_tokens"] / doc["completed"] == k["isl"]
    assert doc["total_output_tokens"] / doc["completed"] == k["osl"]
