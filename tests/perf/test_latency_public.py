"""benchmarks/data/perf_latency_public.csv: public TTFT/TPOT rows outside Hopper, checked by
hand against their sources, and every row plannable with its provenance."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvplan.api import plan
from kvplan.perf import arch
from kvplan.sources.catalog import resolve_gpu

ROOT = Path(__file__).resolve().parents[2]
with (ROOT / "benchmarks" / "data" / "perf_latency_public.csv").open(newline="") as _f:
    ROWS = list(csv.DictReader(line for line in _f if not line.startswith("#")))


def _row(source: str, gpu: str, model: str, **match: str) -> dict[str, str]:
    hits = [r for r in ROWS if r["source"] == source and r["gpu"] == gpu and r["model"] == model
            and all(r[k] == v for k, v in match.items())]
    assert len(hits) == 1, hits
    return hits[0]


def test_trtllm_low_latency_a100_llama70b_row() -> None:
    """TensorRT-LLM docs/source/performance.md (commit 138f96d), 'Low Latency', A100 GPUs
    (FP16): LLaMA 70B, batch 1, TP 4, input 2048 → 1st token latency 377 ms."""
    r = _row("trtllm-perf-low-latency-v0.5", "a100-sxm-80gb", "meta-llama/Llama-2-70b-hf",
             isl="2048")
    assert r["tp"] == "4" and float(r["ttft_ms"]) == 377 and r["precision"] == "fp16"
    assert r["harness"] == "in-process-batch1" and r["tpot_ms"] == ""


def test_trtllm_low_latency_l40s_gptj_row() -> None:
    """Same page, L40S GPUs (FP8): GPT-J 6B, batch 1, TP 1, input 128 → 12 ms."""
    r = _row("trtllm-perf-low-latency-v0.5", "l40s", "EleutherAI/gpt-j-6b", isl="128")
    assert float(r["ttft_ms"]) == 12 and r["precision"] == "fp8+kv_fp8"


def test_rtx4090_tpot_is_littles_law() -> None:
    """mushfiqrahman.dev Part 1, concurrency 4: 2.09 req/s, 210 output tok/s, mean TTFT 63 ms.
    The answers end at EOS: 210 / 2.09 = 100.48 output tokens a request, not the 128 asked.
    e2e = 4 / 2.09 s = 1913.9 ms; TPOT = (1913.9 − 63) / (100.48 − 1) = 18.61 ms (with 128:
    (1913.9 − 63) / 127 = 14.57 ms, the derivation the CSV carried before)."""
    r = _row("mushfiqrahman-4090-mistral", "rtx-4090", "mistralai/Mistral-7B-Instruct-v0.3",
             concurrency="4")
    assert float(r["tpot_ms"]) == pytest.approx(18.61, abs=0.01)
    assert r["osl"] == "100"  # evaluated at the published mean output
    assert float(r["ttft_ms"]) == 63 and "derived" in r["tpot_stat"]


def test_a100_qwen3_30b_row() -> None:
    """tt-inference-server issue #340, 'Qwen3-30B-A3B on A100', ISL 8192 / OSL 128,
    concurrency 1, 2 requests: TTFT 227.0 ms, TPOT 10.6 ms."""
    r = _row("tt-inference-server-gpu-reference", "a100-sxm-80gb", "Qwen/Qwen3-30B-A3B",
             isl="8192")
    assert (float(r["ttft_ms"]), float(r["tpot_ms"]), r["num_prompts"]) == (227.0, 10.6, "2")
    assert "TP not stated" in r["assumed"]


def test_mi300x_static_batch_row() -> None:
    """ROCm/vllm docs/dev-docker/README.md (commit 040de12), 'Latency Measurements': Llama 3.1
    405B (amd/Llama-3.1-405B-Instruct-FP8-KV), FP8, TP 8, batch 128, input 128, output 2048:
    117.027 s → e2e / OSL = 117027 / 2048 = 57.142 ms."""
    r = _row("rocm-vllm-dev-docker-mi300x", "mi300x", "meta-llama/Llama-3.1-405B",
             concurrency="128", isl="128")
    assert float(r["tpot_ms"]) == pytest.approx(57.142, abs=0.001)
    assert r["harness"] == "offline-static-batch" and r["tp"] == "8" and r["ttft_ms"] == ""


def test_every_row_has_provenance_and_is_plannable() -> None:
    outside = 0
    for r in ROWS:
        assert r["source_url"].startswith("https://") and r["source_date"], r
        assert r["ttft_ms"] or r["tpot_ms"], r
        assert (r["ttft_ms"] == "" or r["ttft_stat"]) and (r["tpot_ms"] == "" or r["tpot_stat"]), r
        assert r["role"] in ("measured", "hopper-reference"), r
        klass = arch.arch_class(resolve_gpu(r["gpu"]).arch)
        assert (klass == "Hopper") == (r["role"] == "hopper-reference"), r
        outside += klass != "Hopper"
        quant = ({"quantization": "fp8"} if r["precision"].startswith("fp8")
                 and "(checkpoint)" not in r["precision"] else {})
        p = plan(r["model"], r["gpu"], engine=r["engine"], **quant,
                 tensor_parallel_size=int(r["tp"]), max_model_len=int(r["isl"]) + int(r["osl"]))
        assert p.fits, r
    assert outside >= 60
    assert "semianalysis" not in " ".join(r["source_url"].lower() for r in ROWS)


def test_burst_rule_and_the_4090_lock_step_floor() -> None:
    """benchmarks/perf_latency.py, "Closed loops started together": the rule selects the
    closed-loop rows with N > 1 outside Hopper (RTX 4090 c = 4…48, L4 c = 2…32), and the
    lock-step floor it quotes for the RTX 4090 at c = 4 is hand-worked from Mistral-7B's
    config (32 layers, hidden 4096, 8 KV heads of 128, MLP 14336): per layer
    4096 · (4096 + 1024 + 1024 + 4096) + 3 · 4096 · 14336 = 218,103,808 weights, × 32 × 2 =
    13.9586 GFLOP a prompt token; 4 × 256 tokens = 14.294 TFLOP at the RTX 4090's 165.2 TFLOP/s
    (dense bf16) = 86.5 ms, above the measured mean TTFT of 63 ms."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import perf_latency as pl

    raw = [{**r, "nearest": "Ampere", "loao": None} for r in pl.load_raw()]
    picked = pl.burst_rows(raw)
    assert sorted((r["source"], r["concurrency"]) for r in picked) == sorted(
        [("mushfiqrahman-4090-mistral", c) for c in (4, 8, 16, 32, 48)]
        + [("wmx-l4-qwen2.5-0.5b", c) for c in (2, 4, 8, 16, 32)])
    r = next(r for r in picked if r["concurrency"] == 4 and r["gpu"] == "rtx-4090")
    ctx = pl.context(r)
    assert ctx.dense_flops_per_token == pytest.approx(2 * 32 * 218_103_808, rel=1e-6)
    floor_ms = 4 * 256 * ctx.dense_flops_per_token / ctx.peak_flops_per_s * 1e3
    assert floor_ms == pytest.approx(86.5, abs=0.1) and floor_ms > r["ttft_ms"] == 63
    # the lock-step median in full 2,048-token steps: 32 prompts of 256 fill steps 1-4 with 8
    # each, so the median request (between the 16th and 17th) waits (2 + 3) / 2; 16 prompts:
    # (1 + 2) / 2; 2 prompts: one step of 512 tokens, a quarter of a full one
    assert pl.lock_step_median(32, 256, 2048) == 2.5
    assert pl.lock_step_median(16, 256, 2048) == 1.5
    assert pl.lock_step_median(2, 256, 2048) == 0.25


def test_tt_inference_server_prefix_cache_hits_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """tt-inference-server's GPU runs (one server per model; runs in ascending ISL; N prompts
    each, seeds 0 … N − 1; the client re-sends measured prompt 0 as its warm-up; prompts are
    ISL − 1 tokens; vLLM caches whole 16-token blocks). Qwen3-30B-A3B on A100, worked by hand:
    128/128 (8 prompts): prompt 0 = 127 tokens → 7 blocks = 112 cached, the 7 others new;
    128/1024 (4): the same 127-token prompts as the run before → 112 each;
    1024 (4): 1,023 → 63 blocks = 1,008 for prompt 0; prompts 1-3 begin with their 127-token
    prompts of the 128 runs → 112; 2048 (4): 2,032; then the 1,023-token prompts → 1,008;
    3072 (4): 3,056, then 2,032; 4096 (2): 4,080, then 3,056; 8192 (2): 8,176, then 4,080."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from perf_latency import cached_tokens, load_raw

    rows = load_raw()
    hits = cached_tokens(rows)
    got = {(r["isl"], r["osl"]): hits[id(r)] for r in rows
           if r["source"] == "tt-inference-server-gpu-reference"
           and r["model"] == "Qwen/Qwen3-30B-A3B"}
    assert got == {(128, 128): [112] + [0] * 7, (128, 1024): [112] * 4,
                   (1024, 128): [1008, 112, 112, 112], (2048, 128): [2032, 1008, 1008, 1008],
                   (3072, 128): [3056, 2032, 2032, 2032], (4096, 128): [4080, 3056],
                   (8192, 128): [8176, 4080]}
    assert all(id(r) not in hits for r in rows  # no other source reuses its prompts
               if r["source"] != "tt-inference-server-gpu-reference")


def test_row_bands_follow_the_figures_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """The band a row is checked against (perf_latency.in_band) is the one its plan prints,
    moved with the figure compared: a row whose requests hit the prefix cache is the mean of
    its requests, and so is its band (each request's band is its point × the class's ratios);
    a static batch's TPOT is e2e / OSL, with the TPOT band's ratios. Before 2026-12-03 the
    cached rows kept the band of an uncached request (Qwen3-30B-A3B, ISL 8192: point 232 ms,
    band 398–2,173 ms)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import perf_latency as pl

    from kvplan.perf import step

    raw = pl.load_raw()
    hits = pl.cached_tokens(raw)
    r = next(r for r in raw if r["source"] == "tt-inference-server-gpu-reference"
             and r["model"] == "Qwen/Qwen3-30B-A3B" and r["isl"] == 8192)
    ctx = pl.context(r)
    lone = step.evaluate(ctx, concurrency=1, input_tokens=8192, output_tokens=128)
    p = pl.predict(ctx, r, hits[id(r)])
    assert p.ttft_ms < lone.ttft_ms  # 8,176 then 4,080 of the 8,192 tokens cached
    for m in ("ttft_ms", "tpot_ms"):
        lo_f = getattr(lone, f"{m}_low") / getattr(lone, m)
        hi_f = getattr(lone, f"{m}_high") / getattr(lone, m)
        assert getattr(p, f"{m}_low") == pytest.approx(getattr(p, m) * lo_f, rel=1e-9)
        assert getattr(p, f"{m}_high") == pytest.approx(getattr(p, m) * hi_f, rel=1e-9)
    s = next(r for r in raw if r["harness"] == "offline-static-batch")
    ctx = pl.context(s)
    q = pl.predict(ctx, s)
    plain = step.evaluate(ctx, concurrency=s["concurrency"], input_tokens=s["isl"],
                          output_tokens=s["osl"])
    assert q.tpot_ms == plain.e2e_ms / s["osl"] != plain.tpot_ms
    assert q.tpot_ms_low / q.tpot_ms == pytest.approx(plain.tpot_ms_low / plain.tpot_ms)
    # in_band counts the rows with a measurement whose value lies inside [low, high]
    rows = [{"ttft_ms": v, "tpot_ms": None, "shipped": p} for v in
            (p.ttft_ms_low, p.ttft_ms, p.ttft_ms_high, p.ttft_ms_low * 0.99, None)]
    assert pl.in_band(rows, "ttft") == (3, 4)
    assert pl.in_band(rows, "tpot") == (0, 0)
