"""benchmarks/traffic_validation.py: every published run is replayed with the deployment it
states (dtype as the engine serves it), and the script prints its tables."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import benchmod
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tv() -> ModuleType:
    return benchmod.load("traffic_validation")


def test_every_run_states_its_source_and_points(tv: ModuleType) -> None:
    assert len(tv.ALL_RUNS) >= 16
    assert len({r.group for r in tv.ALL_RUNS}) >= 3
    for run in tv.ALL_RUNS:
        assert run.source.startswith("https://")
        assert run.points and all(p.measured for p in run.points)


def test_gpustack_points_are_the_printed_totals_per_request(tv: ModuleType) -> None:
    """Qwen3-14B on one H100 (gpustack docs/performance-lab/qwen3-14b/h100.md), "random 4K
    input": 500 requests, 1,997,942 input and 99,803 generated tokens → 3,996 in / 200 out
    per request, all 500 sent at once; P99 TTFT 219,749.74 ms as printed."""
    run = next(r for r in tv.GPUSTACK if r.source.endswith("qwen3-14b/h100.md")
               and r.engine == "vllm")
    pt = run.points[1]
    assert (pt.clients, pt.prompts, pt.input_tokens, pt.output_tokens) == (500, 500, 3996, 200)
    assert pt.measured["ttft_p99"] == 219749.74


def test_float32_checkpoint_is_replayed_in_bf16(tv: ModuleType) -> None:
    """Qwen2.5-0.5B-Instruct's config says float32; vLLM's --dtype auto serves it in bf16
    (the run says BF16): 494 M parameters ≈ 0.99 GB of weights read per step, not 1.98 GB."""
    run = next(r for r in tv.RUNS if r.model == "Qwen/Qwen2.5-0.5B-Instruct")
    ctx, _, head = tv._context(run)
    assert "0.23.0" in head
    assert ctx.dense_read_bytes + ctx.expert_bytes < 1.1e9


def test_script_prints_a_table_per_run(tv: ModuleType,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    tv.main()
    out = capsys.readouterr().out
    assert out.count("| clients |") == len(tv.ALL_RUNS)
    assert "ttft_p99: median |error|" in out
    assert "**All sources pooled**" in out


def test_hybrid_model_is_replayed_with_the_block_pool(tv: ModuleType) -> None:
    """gpt-oss-120b on one H100, vLLM 0.10.2, --max-model-len 32768 (gpustack
    docs/performance-lab/gpt-oss-120b/h100.md). Its 36 layers alternate sliding-window and
    full attention: two KV groups of 18 layers sharing one block pool. vLLM ≤0.20 prints
    (num_blocks // 2) × 16 as "GPU KV cache size" (vllm/v1/core/kv_cache_utils.py
    _report_kv_cache_config, 0.11.0), but a request's full-attention layers draw on the whole
    pool: the server ran 32,000 + 99-token requests, so the replay's capacity is num_blocks × 16
    (twice the printed figure) and the 32K point is simulated."""
    run = next(r for r in tv.GPUSTACK if r.source.endswith("gpt-oss-120b/h100.md"))
    ctx, block_size, head = tv._context(run)
    assert block_size == 16
    printed = int(head.split("KV ")[1].split(" tokens")[0].replace(",", ""))
    assert ctx.kv_capacity_tokens == 2 * printed
    assert ctx.kv_capacity_tokens >= 32_099 > printed
    assert "in the pool" in head
