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
