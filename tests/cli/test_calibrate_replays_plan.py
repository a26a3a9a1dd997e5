"""`kvplan calibrate --check` replays a measured run on the same latency context `kvplan plan`
computes its figures with (kvplan.api.plan_with_context; issues #24, #26): a format what-if
on a 16-bit model (--quantization nvfp4 on B200: the NVFP4 checkpoint ModelOpt would write),
online fp8 on H100, and a MoE model with its experts split over the TP ranks
(--enable-expert-parallel). The expected figures are read from `kvplan plan --json` (its
by_concurrency table at the run's concurrency and the plan's default lengths); before the
shared context, calibrate rebuilt the context by hand and replayed nvfp4 as the 16-bit model
and the EP layout as a dense one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import run

# (model, GPU, the deployment's flags as both commands take them)
CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", "b200", ("--quantization", "nvfp4")),
    ("meta-llama/Llama-3.1-8B-Instruct", "h100", ("--quantization", "fp8")),
    ("Qwen/Qwen3-30B-A3B", "h100", ("-tp", "2")),
    ("Qwen/Qwen3-30B-A3B", "h100", ("-tp", "2", "--enable-expert-parallel")),
]
CONCURRENCY = (1, 8, 64)
# the plan's default workload (planner/performance.py DEFAULT_INPUT/OUTPUT_TOKENS), stated
# here so the runs are written at the lengths the plan's table describes
INPUT, OUTPUT = 1024, 256


def _vllm_line(model: str, gpu: str, version: str, c: int) -> str:
    """One `vllm bench serve --save-result` object (vllm/benchmarks/serve.py field names) at
    max concurrency c; the measured latencies are placeholders (--check only predicts)."""
    n = 10 * c
    return json.dumps({
        "date": "20261202-120000", "backend": "vllm", "model_id": model, "tokenizer_id": model,
        "num_prompts": n, "gpu": gpu, "version": version, "request_rate": "inf",
        "burstiness": 1.0, "max_concurrency": c, "completed": n,
        "total_input_tokens": n * INPUT, "total_output_tokens": n * OUTPUT,
        "mean_ttft_ms": 100.0, "mean_tpot_ms": 10.0})


@pytest.mark.parametrize(("model", "gpu", "flags"), CASES, ids=["nvfp4-b200", "fp8-h100",
                                                                "moe-tp2-h100", "moe-ep2-h100"])
def test_check_predicts_what_plan_predicts(capsys, tmp_path: Path, model: str, gpu: str,
                                           flags: tuple[str, ...]):
    common = ("--max-model-len", "8192", *flags)
    code, out, err = run(capsys, "plan", model, "--gpu", gpu, *common, "--json")
    assert code == 0, err
    planned = json.loads(out)
    assert planned["fits"] is True
    want = {p["concurrency"]: p for p in planned["performance"]["by_concurrency"]}
    assert planned["performance"]["input_tokens"] == INPUT
    assert planned["performance"]["output_tokens"] == OUTPUT
    version = planned["engine"]["version"]
    bench = tmp_path / "runs.json"
    bench.write_text("\n".join(_vllm_line(model, gpu, version, c) for c in CONCURRENCY) + "\n")

    code, out, err = run(capsys, "calibrate", str(bench), *common, "--check", "--json")
    assert code == 0, err
    runs = json.loads(out)["runs"]
    assert [r["concurrency"] for r in runs] == list(CONCURRENCY)
    for r in runs:
        c = r["concurrency"]
        assert r["engine_version"] == version
        # plan rounds TTFT to 0.01 ms and TPOT to 0.001 ms; calibrate to 0.001 / 0.0001
        assert r["predicted"]["ttft_ms"] == pytest.approx(want[c]["ttft_ms"], abs=0.006), c
        assert r["predicted"]["tpot_ms"] == pytest.approx(want[c]["tpot_ms"], abs=0.0006), c
        assert r["predicted"]["output_tokens_per_s"] == pytest.approx(
            want[c]["output_tokens_per_s"], abs=0.06), c


def test_match_replays_an_expert_parallel_run_as_planned(capsys):
    """The library path (kvplan.calibrate.match with the knobs as Given): a MoE run with its
    experts split over 2 ranks replays on the plan's context: the EP 2 kernel table
    (`routed_experts.table` of the plan) and the plan's figures."""
    from kvplan import calibrate as cal
    from kvplan.sources import benchfiles

    model, gpu = "Qwen/Qwen3-30B-A3B", "h100"
    code, out, err = run(capsys, "plan", model, "--gpu", gpu, "-tp", "2",
                         "--enable-expert-parallel", "--max-model-len", "8192", "--json")
    assert code == 0, err
    planned = json.loads(out)["performance"]
    assert planned["routed_experts"]["table"].endswith("EP 2")
    want = {p["concurrency"]: p for p in planned["by_concurrency"]}
    version = json.loads(out)["engine"]["version"]
    text = "\n".join(_vllm_line(model, gpu, version, c) for c in CONCURRENCY)
    runs = cal.match(benchfiles.parse(text, "runs.json"), cal.Given(
        tensor_parallel_size=2, knobs={"max_model_len": 8192, "enable_expert_parallel": True}))
    for r, p in zip(runs, cal.check(runs).preds, strict=True):
        assert r.row is not None
        c = r.row.concurrency
        assert r.row.context.expert_gemm_table == planned["routed_experts"]["table"]
        assert p.ttft_ms == pytest.approx(want[c]["ttft_ms"], abs=0.006), c
        assert p.tpot_ms == pytest.approx(want[c]["tpot_ms"], abs=0.0006), c


def test_a_deployment_without_latency_figures_is_refused_naming_why(capsys, tmp_path: Path):
    """A plan that fits but has no figures (a GPU whose gpu_specs entry lacks what the latency
    model needs) cannot be replayed: exit 2 naming the missing fields, not a traceback."""
    from kvplan.perf import step as perf
    from kvplan.sources.catalog import gpu_specs

    bare = [g for g in gpu_specs() if perf.missing_gpu_fields(g)]
    if not bare:
        pytest.skip("every catalogue GPU has the latency model's fields")
    g = bare[0]
    model = "Qwen/Qwen3-0.6B"
    bench = tmp_path / "runs.json"
    bench.write_text(_vllm_line(model, g.id, "0.12.0", 1) + "\n")
    code, out, err = run(capsys, "calibrate", str(bench), "--max-model-len", "4096",
                         "--check", "--json")
    assert code == 2
    assert "no latency figures" in out + err and "Traceback" not in out + err


def test_a_run_kvplan_plans_as_not_starting_is_replayed_on_the_recommended_line(capsys,
                                                                               tmp_path: Path):
    """A run proves its server started; when kvplan's plan of the stated flags says it would
    not (Qwen3-32B on one H100 at --gpu-memory-utilization 0.9: one 40,960-token request does
    not fit, max-model-len-too-long) but has figures for the launch line it recommends (0.95),
    the run is replayed there, with the predictions `kvplan plan` prints, and the output says
    so. It used to be refused (exit 2, "does not fit as kvplan plans it")."""
    model, gpu = "Qwen/Qwen3-32B", "h100"
    flags = ("--gpu-memory-utilization", "0.9")
    code, out, err = run(capsys, "plan", model, "--gpu", gpu, *flags, "--json")
    planned = json.loads(out)
    assert code == 1 and planned["fits"] is False
    util = planned["recommendations"]["gpu_memory_utilization"]["value"]
    want = {p["concurrency"]: p for p in planned["performance"]["by_concurrency"]}
    levels = [c for c in CONCURRENCY if c in want]  # its KV cache holds few 40,960-token runs
    assert levels
    bench = tmp_path / "runs.json"
    bench.write_text("\n".join(_vllm_line(model, gpu, planned["engine"]["version"], c)
                               for c in levels) + "\n")
    code, out, err = run(capsys, "calibrate", str(bench), *flags, "--check", "--json")
    assert code in (0, 1), err  # a result (within --max-error or not), not a refusal
    for r in json.loads(out)["runs"]:
        assert "max-model-len-too-long" in r["replayed_as"]
        assert f"gpu_memory_utilization {util:g}" in r["replayed_as"]
        assert r["predicted"]["ttft_ms"] == pytest.approx(want[r["concurrency"]]["ttft_ms"],
                                                          abs=0.006)
    code, out, err = run(capsys, "calibrate", str(bench), *flags, "--check")
    assert "note: kvplan plans Qwen/Qwen3-32B" in out + err
