"""Measured dense groups kept out of the fit (benchmarks/perf_fit.py UNFITTED,
kvplan/engines/dense_checks.py) and what they do to a plan like them (perf/step.py
_measured_band): the band spans them, the plan says so, and nothing else changes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from clirun import run

from kvplan.api import plan
from kvplan.engines import dense_checks

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"


def _ids(name: str) -> set[str]:
    with (DATA / name).open(newline="") as f:
        return {r["notes"].split(";")[0] for r in csv.DictReader(f)}


def test_the_unfitted_rows_are_not_in_the_fitted_file() -> None:
    """The 21 vLLM 0.12 Llama-3.1-8B FP8 runs of aiconfigurator's silicon sample (commit
    095f58a5, row ids nvidia_llama_3_1_8b_instruct_fp8_…_vllm_agg_…) are scored, never fitted."""
    unfitted = _ids("perf_silicon_unfitted.csv")
    assert len(unfitted) == 21
    assert all("nvidia_llama_3_1_8b_instruct_fp8" in i for i in unfitted)
    assert not unfitted & _ids("perf_calibration.csv")


def test_each_check_is_a_band_around_its_median() -> None:
    assert dense_checks.DENSE_CHECKS
    for c in dense_checks.DENSE_CHECKS:
        assert c.rows > 0
        for k, (lo, hi) in c.ranges.items():
            assert 0 < lo <= c.median_ratio[k] <= hi, (c.label, k)


def test_a_plan_like_the_group_spans_it_and_says_so() -> None:
    """Llama-3.1-8B-Instruct with fp8 weights, vLLM, on a Hopper GPU: the TPOT band reaches
    down to the group's p10 of measured / predicted (its runs were about twice as fast as
    predicted), and performance.measured_check names the group."""
    # Llama-3.1-8B's config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads of 128,
    # intermediate 14336, vocabulary 128256
    check = dense_checks.check_for("vllm", "Hopper", "fp8",
                                   (32, 4096, 32, 8, 128, 14336, 128256))
    assert check is not None
    for gpu in ("h200", "h100"):
        pf = plan(LLAMA8B, gpu, quantization="fp8").performance
        assert pf is not None and pf.measured_check is not None
        assert f"{check.rows} runs like this deployment" in pf.measured_check
        lo, hi = check.ranges["tpot"]
        # the band's factors are applied to unrounded figures; the plan rounds to 0.001 ms
        assert pf.tpot_ms_low <= pf.tpot_ms * lo + 0.002
        t_lo, t_hi = check.ranges["throughput"]
        assert pf.output_tokens_per_s_high >= pf.output_tokens_per_s * t_hi - 0.2


@pytest.mark.parametrize(("model", "gpu", "knobs"), [
    (LLAMA8B, "h200", {}),  # bf16 GEMMs
    (LLAMA8B, "h200", {"quantization": "fp8", "engine": "sglang"}),  # another engine
    (LLAMA8B, "l40s", {"quantization": "fp8"}),  # another class (Ada)
    ("meta-llama/Llama-3.1-70B-Instruct", "h200", {"quantization": "fp8",
                                                   "tensor_parallel_size": 2}),
])
def test_other_deployments_are_untouched(model: str, gpu: str, knobs: dict) -> None:
    pf = plan(model, gpu, **knobs).performance
    assert pf is not None and pf.measured_check is None


def test_json_text_and_report_carry_it(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    code, out, _ = run(capsys, "plan", LLAMA8B, "--gpu", "h200", "--quantization", "fp8",
                       "--json")
    assert code == 0
    assert "runs like this deployment" in json.loads(out)["performance"]["measured_check"]
    code, out, _ = run(capsys, "plan", LLAMA8B, "--gpu", "h200", "--quantization", "fp8")
    assert code == 0 and "Measured: 21 runs like this deployment" in out
    code, _, _ = run(capsys, "report", LLAMA8B, "--gpu", "h200", "--quantization", "fp8",
                     "-o", str(tmp_path / "r.md"))
    assert code == 0 and "Speed: 21 runs like this deployment" in (tmp_path / "r.md").read_text()
