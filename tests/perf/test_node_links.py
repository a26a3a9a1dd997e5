"""Links across nodes in the step-time model (perf/step.py Links, planner/nodes.py node_links).

Hand-worked figures. Sources: DGX H100 user guide (8 single-port ConnectX-7 at 400 Gb/s, one
per GPU: 400e9 / 8 = 50e9 B/s per direction per GPU); NVLink 4 900 GB/s bidirectional per GPU
(450e9 B/s per direction); Llama-3.1-405B config.json: hidden_size 16384, 126 layers."""

from __future__ import annotations

import pytest

from kvplan.perf import step
from kvplan.planner.nodes import node_links
from kvplan.sources.catalog import resolve_gpu, resolve_model

H100 = resolve_gpu("h100-sxm-80gb")
LLAMA_405B = resolve_model("meta-llama/Llama-3.1-405B", offline=True)


def _ctx(tp: int, pp: int, links: step.Links | None) -> step.PerfContext:
    return step.context_for(LLAMA_405B, H100, "vllm", "0.11.0", tp=tp, pp=pp, links=links)


def test_tp16_on_hgx_uses_the_network():
    links = node_links(H100, 16, 1)
    assert links.tp_bytes_per_s == 50e9  # 400 Gb/s ÷ 8
    assert "400 Gb/s" in links.text
    out = step.step_terms(_ctx(16, 1, links), decode_seqs=1, context_tokens=0)
    nvl = step.step_terms(_ctx(16, 1, None), decode_seqs=1, context_tokens=0)
    # 2 all-reduces × 126 layers × 16384 × 2 B × 2 × 15/16 = 15,482,880 B per token:
    # 309.658 µs at 50 GB/s against 34.406 µs at 450 GB/s: 275.251 µs more
    assert out.comm_s - nvl.comm_s == pytest.approx(275.251e-6, rel=1e-4)


def test_tp8_inside_hgx_keeps_nvlink():
    links = node_links(H100, 8, 1)
    assert links.tp_bytes_per_s is None and links.pp_crossings == 0
    assert "NVLink at 450 GB/s" in links.text


def test_pipeline_across_two_hgx_nodes_adds_one_handoff():
    links = node_links(H100, 8, 2)
    assert (links.pp_crossings, links.pp_bytes_per_s) == (1, 50e9)
    ctx = _ctx(8, 2, links)
    # 64 decode tokens × 16384 × 2 B = 2,097,152 B over 50e9 B/s = 41.943 µs per step
    assert step.pipeline_handoff_s(ctx, 64) == pytest.approx(41.943e-6, rel=1e-4)
    with_handoff = step._step_s(ctx, 64, 1000)
    without = step._step_s(_ctx(8, 2, None), 64, 1000)
    assert with_handoff - without == pytest.approx(41.943e-6, rel=1e-4)


def test_nvl72_spans_trays_over_nvlink():
    links = node_links(resolve_gpu("gb200"), 8, 2)  # 16 GPUs on 4 trays, one NVLink domain
    assert links.tp_bytes_per_s is None and links.pp_crossings == 0


def test_unsourced_network_is_not_timed():
    links = node_links(resolve_gpu("h100-pcie-80gb"), 8, 2)  # no sourced scale-out figure
    assert links.pp_crossings == 1 and links.pp_bytes_per_s == 0.0
    assert "not timed" in links.text
    assert step.pipeline_handoff_s(_ctx(8, 2, links), 64) == 0.0
