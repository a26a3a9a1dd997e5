"""The harness a figure describes: a served deployment (front end: HTTP server, tokenizer) adds
request_overhead_ms to TTFT; an in-process engine benchmark does not (PerfContext.front_end).
Plans are always served; the data files say which harness each measured row comes from."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

from kvplan.api import plan_with_context
from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"


def _rows(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


@pytest.fixture(scope="module")
def llama8b() -> perf.PerfContext:
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    return perf.context_for(m, resolve_gpu("h100-sxm-80gb"), "vllm", "0.12.0", tp=1)


def test_plans_are_served(llama8b: perf.PerfContext) -> None:
    assert llama8b.front_end is True
    assert llama8b.request_overhead_s == llama8b.coefficients.request_overhead_ms / 1000


@pytest.mark.parametrize("style", ["mixed", "separate"])
def test_in_process_drops_exactly_the_request_overhead_at_one_client(
        llama8b: perf.PerfContext, style: str) -> None:
    """One client: no other prompt to wait behind, so the served TTFT is the in-process one
    plus the 40 ms request overhead set here; TPOT does not depend on the front end."""
    c = dataclasses.replace(llama8b.coefficients, request_overhead_ms=40.0)
    served = dataclasses.replace(llama8b, coefficients=c, style=style)
    bare = dataclasses.replace(served, front_end=False)
    assert bare.request_overhead_s == 0.0
    s = perf.evaluate(served, concurrency=1, input_tokens=1024, output_tokens=128)
    b = perf.evaluate(bare, concurrency=1, input_tokens=1024, output_tokens=128)
    assert s.ttft_ms - b.ttft_ms == pytest.approx(40.0)
    assert s.tpot_ms == pytest.approx(b.tpot_ms)


def test_prefill_first_waves_add_the_overhead_once(llama8b: perf.PerfContext) -> None:
    """SGLang-style waves at 8 clients: TTFT = (first batch + wave) / 2 + overhead, with no
    wait term built on the overhead, so the difference is the overhead itself."""
    c = dataclasses.replace(llama8b.coefficients, request_overhead_ms=40.0)
    served = dataclasses.replace(llama8b, coefficients=c, style="separate")
    s = perf.evaluate(served, concurrency=8, input_tokens=1024, output_tokens=128)
    b = perf.evaluate(dataclasses.replace(served, front_end=False), concurrency=8,
                      input_tokens=1024, output_tokens=128)
    assert s.ttft_ms - b.ttft_ms == pytest.approx(40.0)


def test_dynamo_front_end_adds_its_own_term_to_ttft_only(llama8b: perf.PerfContext) -> None:
    """A row served through Dynamo's front end carries request_overhead_ms +
    dynamo_front_end_ms (40 + 30 ms set here) in TTFT; the same deployment behind the engine's
    own server only the 40 ms; in-process neither. TPOT is the same in all three."""
    c = dataclasses.replace(llama8b.coefficients, request_overhead_ms=40.0,
                            dynamo_front_end_ms=30.0)
    own = dataclasses.replace(llama8b, coefficients=c, style="separate")
    via = dataclasses.replace(own, via_dynamo=True)
    bare = dataclasses.replace(via, front_end=False)
    assert (own.request_overhead_s, via.request_overhead_s, bare.request_overhead_s) == \
        pytest.approx((0.040, 0.070, 0.0))
    pts = [perf.evaluate(x, concurrency=8, input_tokens=1024, output_tokens=128)
           for x in (own, via, bare)]
    assert pts[1].ttft_ms - pts[2].ttft_ms == pytest.approx(70.0)
    assert pts[0].ttft_ms - pts[2].ttft_ms == pytest.approx(40.0)
    assert pts[0].tpot_ms == pytest.approx(pts[1].tpot_ms) == pytest.approx(pts[2].tpot_ms)


def test_plans_never_carry_the_dynamo_term() -> None:
    """kvplan's plans launch the engines' own servers: a default plan's TTFT has the bundled
    request_overhead_ms only, however large the fitted Dynamo surplus."""
    from kvplan.api import plan
    from kvplan.sources.catalog import resolve_gpu, resolve_model

    p = plan(resolve_model("meta-llama/Llama-3.1-8B-Instruct"), resolve_gpu("h100-sxm-80gb"))
    ctx = perf.context_for(resolve_model("meta-llama/Llama-3.1-8B-Instruct"),
                           resolve_gpu("h100-sxm-80gb"), "vllm", p.engine.version, tp=1)
    assert ctx.coefficients.dynamo_front_end_ms > 0 and not ctx.via_dynamo
    assert ctx.request_overhead_s == ctx.coefficients.request_overhead_ms * 1e-3


def test_every_measured_row_names_its_front_end() -> None:
    for name in ("perf_calibration.csv", "perf_inferencemax.csv", "perf_throughput.csv",
                 "perf_latency_public.csv", "perf_silicon_unfitted.csv"):
        rows = _rows(name)
        assert rows and {r["front_end"] for r in rows} <= {"server", "dynamo", "in-process"}, name


def test_front_end_follows_the_sources_harness() -> None:
    """perf_latency_public.csv: gptSessionBenchmark (TensorRT-LLM performance.md) and vLLM's
    benchmark_latency.py run in-process; `vllm bench serve`, LLMPerf against trtllm-serve and
    tt-inference-server's benchmark_serving client go through a server. Offline throughput
    tables (trtllm-bench, benchmark_throughput.py, MLPerf Offline) are in-process; the
    fitted calibration rows were served through Dynamo's front end (aiconfigurator's Dynamo
    deployment, docs/front-end-overhead.md), InferenceMAX's by a plain `vllm serve`."""
    for r in _rows("perf_latency_public.csv"):
        want = "server" if r["harness"] == "closed-loop" else "in-process"
        assert r["front_end"] == want, (r["source"], r["model"])
    assert {r["front_end"] for r in _rows("perf_throughput.csv")} == {"in-process"}
    assert {r["front_end"] for r in _rows("perf_calibration.csv")} == {"dynamo"}
    assert {r["front_end"] for r in _rows("perf_silicon_unfitted.csv")} == {"dynamo"}
    assert {r["front_end"] for r in _rows("perf_inferencemax.csv")} == {"server"}


# ---------------------------------------------------------------- async scheduling (overheads)


def test_which_releases_overlap_cpu_work() -> None:
    """vLLM's async scheduling is opt-in up to 0.12 (the calibration rows' release) and on by
    default from 0.14.0; TensorRT-LLM's PyTorch backend from 0.20.0 (its overlap scheduler's
    default; kvplan/engines/vllm.py and trtllm.py cite the sources). SGLang is modelled
    without it."""
    assert not perf.overlaps_cpu("vllm", "0.12.0")
    assert perf.overlaps_cpu("vllm", "0.14.0") and perf.overlaps_cpu("vllm", "0.33.0")
    assert not perf.overlaps_cpu("sglang", "0.5.6")
    assert not perf.overlaps_cpu("trtllm", "0.19.0") and perf.overlaps_cpu("trtllm", "0.20.0")


def test_tensorrt_llm_overlaps_on_its_pytorch_backend_only() -> None:
    """The TensorRT engine runtime (trtllm-serve's default before 1.0.0, or --backend
    tensorrt) has no overlap scheduler: a plan on it charges the step's CPU work in full."""
    def overlap(version: str, **knobs: object) -> bool:
        _, ctx = plan_with_context(resolve_model("meta-llama/Llama-3.1-8B-Instruct"),
                                   resolve_gpu("h100-sxm-80gb"), engine="trtllm",
                                   engine_version=version, **knobs)
        assert ctx is not None
        return ctx.cpu_overlap

    assert overlap("1.0.0") and overlap("0.21.0", backend="pytorch")
    assert not overlap("0.21.0") and not overlap("1.0.0", backend="tensorrt")


def test_overlapped_step_is_the_longer_of_gpu_and_cpu(llama8b: perf.PerfContext) -> None:
    """Llama-3.1-8B bf16 on H100 SXM, one decoding sequence at context 0, all efficiencies 1:
    the GPU streams 15,043,403,776 B of weights (tests/perf/test_step_time.py) at 3.35 TB/s =
    4.4906 ms. With a 5 ms step overhead the serial step is 9.4906 ms; overlapped it is
    max(4.4906, 5) = 5 ms; a 2 ms overhead hides entirely (4.4906 ms)."""
    for step_ms, want_ms in ((5.0, 5.0), (2.0, 4.4906)):
        c = perf.Coefficients(gemm_efficiency=1.0, bandwidth_efficiency=1.0,
                              step_overhead_ms=step_ms, layer_overhead_us=0.0,
                              seq_overhead_us=0.0, allreduce_latency_us=0.0,
                              request_overhead_ms=0.0)
        serial = dataclasses.replace(llama8b, coefficients=c, cpu_overlap=False)
        t = perf.step_terms(serial, decode_seqs=1, context_tokens=0)
        assert t.total_s * 1e3 == pytest.approx(4.4906 + step_ms, abs=0.02)
        o = perf.step_terms(dataclasses.replace(serial, cpu_overlap=True), decode_seqs=1,
                            context_tokens=0)
        assert o.total_s * 1e3 == pytest.approx(want_ms, abs=0.02)


def test_plan_says_when_the_overlap_is_modelled_beyond_the_fit() -> None:
    """The fitted vLLM rows (0.12) ran without async scheduling: a plan on a release that has it
    says so in performance.calibration; one on 0.12 does not."""
    from kvplan.api import plan

    new = plan("llama-3.1-8b-instruct", "h100", engine_version="0.33.0").performance
    old = plan("llama-3.1-8b-instruct", "h100", engine_version="0.12.0").performance
    assert new is not None and new.calibration is not None
    assert "async scheduling (default from 0.14.0)" in new.calibration
    assert old is not None and "async scheduling" not in (old.calibration or "")


def test_no_overlap_with_pipeline_parallelism(llama8b: perf.PerfContext) -> None:
    """vllm PR #31998: async scheduling stays off by default at pipeline_parallel_size > 1."""
    on = dataclasses.replace(llama8b, cpu_overlap=True)
    base = perf.step_terms(llama8b, decode_seqs=1, context_tokens=0).total_s
    assert perf.step_terms(on, decode_seqs=1, context_tokens=0).total_s < base
    pp = dataclasses.replace(on, pp=2)
    assert perf.step_terms(pp, decode_seqs=1, context_tokens=0).total_s == perf.step_terms(
        dataclasses.replace(pp, cpu_overlap=False), decode_seqs=1, context_tokens=0).total_s

