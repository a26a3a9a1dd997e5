"""`plan --disagg` with expert parallelism and DP attention in each pool, across nodes
(docs/disagg.md "Expert-parallel pools"). Hand-worked from DeepSeek-R1's config.json (MLA
kv_lora_rank 512 + qk_rope_head_dim 64 = 576 latent values, 61 layers, 256 routed experts) and
the HGX H100 8-GPU system shape (gpu_specs/h100-sxm-80gb.json)."""

from __future__ import annotations

import pytest

from kvplan.api import plan_disagg
from kvplan.engines import sglang_parallel
from kvplan.errors import InvalidInputError
from kvplan.specs import Workload

R1 = "deepseek-ai/DeepSeek-R1"
W = Workload(avg_input_tokens=2000, avg_output_tokens=100)


@pytest.fixture(scope="module")
def wide_ep():
    """SGLang's large-scale EP layout (lmsys.org/blog/2025-05-05-large-scale-ep): prefill EP32,
    decode EP72, DP attention, DeepEP; 256 requests a decode rank."""
    return plan_disagg(R1, "h100", engine="sglang", workload=W, prefill_ep=32, prefill_dp=32,
                       decode_ep=72, decode_dp=72, prefill_replicas=1, decode_replicas=1,
                       moe_a2a_backend="deepep", gpu_memory_utilization=0.835,
                       decode_options={"max_num_seqs": 256})


def test_pools_span_the_nodes_their_gpus_need(wide_ep):
    d = wide_ep.disaggregated
    assert wide_ep.fits
    # 32 GPUs = 4 HGX nodes of 8; 72 = 9; TP 1 stays inside a node
    assert (d.prefill.nodes.nodes, d.prefill.nodes.gpus_per_node) == (4, 8)
    assert (d.decode.nodes.nodes, d.decode.nodes.gpus_per_node) == (9, 8)
    assert d.gpus == 32 + 72


def test_each_node_line_carries_the_layout_and_the_pd_settings(wide_ep):
    d = wide_ep.disaggregated
    head, rest = d.prefill.nodes.launch
    for line in (head.command, rest.command):
        assert "--tp-size 32 --dp-size 32 --enable-dp-attention --ep-size 32" in line
        assert "--disaggregation-mode prefill" in line and "--nnodes 4" in line
        assert "--disaggregation-bootstrap-port 8998" in line
    assert "--node-rank 0" in head.command and "--node-rank $NODE_RANK" in rest.command
    dec = d.decode.nodes.launch[0].command
    assert "--disaggregation-mode decode" in dec and "--nnodes 9" in dec
    # SGLang gives each DP rank max_running_requests // dp_size: 256 a rank is 256 × 72
    assert "--max-running-requests 18432" in dec
    assert "--moe-a2a-backend deepep" in dec


def test_dp_attention_rank_holds_and_receives_the_whole_latent(wide_ep):
    d = wide_ep.disaggregated
    # 576 latent values × 61 layers × 2 B = 70,272 B per token on the one rank that runs the
    # request (DP attention: no TP split of MLA's latent)
    assert d.decode.kv_cache.bytes_per_token == 70_272
    kv = d.kv_transfer
    assert kv.recv_bytes_per_gpu == kv.send_bytes_per_gpu == 2000 * 70_272


def test_ep_must_span_tp_times_dp():
    with pytest.raises(InvalidInputError, match="prefill-ep 16 must equal"):
        plan_disagg(R1, "h100", engine="sglang", workload=W, prefill_ep=16, prefill_dp=32,
                    decode_replicas=1, prefill_replicas=1)


def test_pool_options_are_checked_like_shared_knobs():
    with pytest.raises(InvalidInputError):
        plan_disagg(R1, "h100", engine="sglang", workload=W, prefill_ep=32, prefill_dp=32,
                    prefill_options={"no_such_knob": 1})


def test_sglang_max_running_requests_read_back_per_rank():
    """A deployment file's --max-running-requests under DP attention is the group's: each of
    the 72 ranks runs 18432 // 72 = 256 (model_runner.py max_running_requests // dp_size)."""
    knobs = sglang_parallel.combine_parallel_flags(
        {"tensor_parallel_size": 72, "data_parallel_size": 72, "enable_dp_attention": True,
         "expert_parallel_size": 72, "max_num_seqs": 18432})
    assert knobs["tensor_parallel_size"] == 1 and knobs["max_num_seqs"] == 256


@pytest.fixture(scope="module")
def chosen():
    """DeepSeek-R1 on H200 with SGLang, no layout given: kvplan chooses each pool's."""
    return plan_disagg(R1, "h200", engine="sglang",
                       workload=Workload(avg_input_tokens=2000, avg_output_tokens=500,
                                         target_concurrency=2048))


def test_moe_pool_layout_is_chosen_among_tp_and_ep_dp_attention(chosen):
    import re

    d = chosen.disaggregated
    notes = [n for n in d.notes if " layout " in n and "tokens/s per GPU of" in n]
    assert len(notes) == 2  # one per pool, each naming every candidate and its figure
    for note, pool in zip(notes, (d.prefill, d.decode), strict=True):
        figures = {name: float(v.replace(",", "")) for name, v in
                   re.findall(r"((?:TP \d+)|(?:EP \d+ with DP attention)) \(([\d,]+)\)", note)}
        assert "TP 8" in figures and any(k.startswith("EP") for k in figures)
        best = max(figures, key=figures.__getitem__)
        assert note.split(": ")[0].endswith(best)
        tp = int(pool.inputs["tensor_parallel_size"].value)
        dp = int(pool.inputs["data_parallel_size"].value or 1)
        assert tp <= 8  # never beyond the HGX scale-up domain
        if best.startswith("EP"):
            assert (tp, dp) == (1, int(best.split()[1]))
            assert "--enable-dp-attention" in pool.command and "--ep-size" in pool.command


def test_a_given_layout_is_kept_and_dense_models_are_not_offered_ep():
    r = plan_disagg(R1, "h200", engine="sglang", workload=W, prefill_tp=8, decode_tp=8,
                    prefill_replicas=1, decode_replicas=1)
    d = r.disaggregated
    assert int(d.decode.inputs["tensor_parallel_size"].value) == 8
    assert not any("tokens/s per GPU of" in n for n in d.notes)
    dense = plan_disagg("meta-llama/Llama-3.3-70B-Instruct", "h100", engine="vllm", workload=W,
                        prefill_replicas=1, decode_replicas=1)
    # a dense decode pool's candidates are TP sizes only (planner/disagg._choose_decode_tp)
    chosen = [n for n in dense.disaggregated.notes if "tokens/s per GPU of" in n]
    assert chosen and all("EP" not in n and "DP attention" not in n for n in chosen)
    assert int(dense.disaggregated.decode.inputs["data_parallel_size"].value or 1) == 1
