"""Shared fixtures of the latency-model tests."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.perf import step as perf
from kvplan.sources.catalog import resolve_gpu, resolve_model


@pytest.fixture(scope="module")
def llama70b() -> dict[str, perf.PerfContext]:
    """Llama-3.1-70B at TP4 on H100 SXM, 8,192-token steps, 256 sequences, 600,000 KV tokens:
    vLLM, SGLang and SGLang with --enable-mixed-chunk — what Engine.batching gives it: chunked
    prefill 8,192 < the default --max-prefill-tokens 16,384, so the prompt that overruns a
    step is chunked."""
    m = resolve_model("meta-llama/Llama-3.1-70B-Instruct")
    out = {e: perf.context_for(m, resolve_gpu("h100-sxm-80gb"), e, "0.12.0", tp=4,
                               max_num_batched_tokens=8192, max_num_seqs=256,
                               kv_capacity_tokens=600_000)
           for e in ("vllm", "sglang")}
    out["sglang-mc"] = dataclasses.replace(out["sglang"], style="mixed", whole_prompts=True,
                                           split_last_prompt=True)
    return out
