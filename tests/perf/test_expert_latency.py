"""The step model with MoE layers shared by DP ranks / split over EP ranks (perf/expert.py).

Hand-worked from the formula in kvplan/perf/expert.py's docstring (dispatch + combine of each
token's hidden state to its k experts' GPUs, (N − 1)/N of them remote, as DeepEP's README
describes the two all-to-all phases), with DeepSeek-V3's config (hidden 7168, top-8 of 256
experts, 58 MoE layers) and the H200's 900 GB/s NVLink (gpu_specs/h200-sxm-141gb.json, one
direction 450 GB/s)."""

from __future__ import annotations

import pytest

from kvplan import plan
from kvplan.perf import expert, step
from kvplan.sources.catalog import resolve_gpu, resolve_model
from kvplan.specs import Workload

DSV3 = "deepseek-ai/DeepSeek-V3"


def _ctx(tp: int, **kw):
    m, gpu = resolve_model(DSV3), resolve_gpu("h200")
    ctx = step.context_for(m, gpu, "vllm", "0.11.0", tp=tp, dtype="bfloat16")
    return m, expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, **kw)


def test_dp8_ep8_all_to_all_per_step_by_hand():
    """-tp 1 -dp 8 with EP (vLLM with a DeepEP backend: all-to-all kernels). 64 own tokens:
    each MoE layer moves 64 × 7168 × 2 B × 8 experts × 7/8 = 6,422,528 B each way; per layer
    2 × (α + bytes / 450 GB/s); no attention all-reduce at TP 1. α = the engine's fitted
    all-reduce latency."""
    _, ctx = _ctx(1, dp=8, ep=8, moe_dp=True, all_to_all=True)
    assert ctx.link_bytes_per_s == 450e9 and ctx.moe_layers == 58 and ctx.moe_group == 8
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    want = 58 * 2 * (alpha + 6_422_528 / 450e9)
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(want, rel=1e-12)
    terms = step.step_terms(ctx, decode_seqs=64, context_tokens=1000)
    assert terms.comm_s == pytest.approx(want, rel=1e-12)


def test_dp_attention_without_all_to_all_gathers_every_rank():
    """Gather/scatter (SGLang DP attention without DeepEP): 64 × 7168 × 2 B × (8 − 1) =
    6,422,528 B each way per MoE layer — here the same volume as top-8 all-to-all over 8."""
    _, ctx = _ctx(1, dp=8, ep=8, moe_dp=True, all_to_all=False)
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(58 * 2 * (alpha + 64 * 7168 * 2 * 7 / 450e9), rel=1e-12)


def test_dp_attention_with_attention_tp_gathers_the_ranks_tokens_once():
    """-tp 2 -dp 4 (N = 8 GPUs, attention groups of T = 2) without all-to-all: the buffer is
    the 4 ranks' 64 tokens each (the 2 GPUs of a group hold their rank's 64 alike after its
    all-reduce), 4 × 64 × 7168 × 2 B = 3,670,016 B, of which a GPU receives 7/8 each way:
    3,211,264 B = 64 × 7168 × 2 × 7 / 2 per MoE layer; the attention and the dense MLP (3 of
    DeepSeek-V3's 61 layers) all-reduce over T = 2 as at -tp 2. Counting every GPU's copy,
    as before, moved 64 × 7168 × 2 × 7 B: twice the buffer."""
    _, ctx = _ctx(2, dp=4, ep=1, moe_dp=True, all_to_all=False)
    assert ctx.moe_group == 8 and ctx.moe_layers == 58
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    act = 64 * 7168 * 2
    allreduce = (61 + 3) * (alpha + act * 2 * 1 / 2 / 450e9)
    moe = 58 * 2 * (alpha + 3_211_264 / 450e9)
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(allreduce + moe, rel=1e-12)


def test_ep_reads_one_ranks_experts_touched_by_every_dp_ranks_tokens():
    """EP8: 32 whole experts per GPU (76.14 GiB, tests/engines/test_expert_parallel.py); one
    decode step of 1 own token on each of 8 DP ranks touches 1 − (1 − 8/256)^8 of them."""
    _, ctx = _ctx(1, dp=8, ep=8, moe_dp=True, all_to_all=True)
    assert ctx.expert_bytes == 81_758_552_064
    assert ctx.moe_dp == 8
    frac = 1 - (1 - 8 / 256) ** 8
    terms = step.step_terms(ctx, decode_seqs=1, context_tokens=0)
    assert terms.weight_bytes == pytest.approx(ctx.dense_read_bytes
                                               + 81_758_552_064 * frac, rel=1e-12)


def test_tp8_ep8_keeps_the_all_reduce():
    """TP8 with EP and one DP rank: vLLM and SGLang (without DeepEP) all-reduce as before; the
    step reads one GPU's 32 experts, the same bytes as a 1/8 slice of all 256."""
    m, ctx = _ctx(8, dp=1, ep=8, moe_dp=False, all_to_all=False)
    plain = step.context_for(m, resolve_gpu("h200"), "vllm", "0.11.0", tp=8, dtype="bfloat16")
    assert ctx.moe_comm_per_token_s == 0.0
    assert ctx.expert_bytes == plain.expert_bytes
    t = step.step_terms(ctx, decode_seqs=16, context_tokens=100)
    assert t.comm_s == step.step_terms(plain, decode_seqs=16, context_tokens=100).comm_s


def test_dp_attention_plan_has_per_gpu_throughput_of_its_ranks():
    """A -tp 1 -dp 8 plan's replica is one GPU: tokens/s per GPU is the replica's."""
    p = plan(DSV3, "h200", tensor_parallel_size=1, data_parallel_size=8,
             enable_expert_parallel=True,
             workload=Workload(avg_input_tokens=1000, avg_output_tokens=1000,
                               target_concurrency=32))
    perf = p.performance
    assert perf is not None
    assert perf.output_tokens_per_s_per_gpu == pytest.approx(perf.output_tokens_per_s, rel=1e-3)


def test_ep16_over_two_hgx_nodes_uses_the_scale_out_network_by_hand():
    """-tp 8 -dp 2 with EP on H200: the MoE group spans 16 GPUs, two HGX H200 nodes (scale-up
    domain 8; 8 × 400 Gb/s ConnectX-7 = 50 GB/s per GPU one direction, gpu_specs/
    h200-sxm-141gb.json). 64 own tokens, top-8 over 16: 64 × 7168 × 2 B × 8 × 15/16 =
    6,881,280 B each way per MoE layer at 50 GB/s; the attention all-reduce stays on NVLink."""
    from kvplan.planner.nodes import node_links

    m, gpu = resolve_model(DSV3), resolve_gpu("h200")
    links = node_links(gpu, 8, 1, 2)
    assert links.moe_bytes_per_s == 50e9 and links.tp_bytes_per_s is None
    ctx = step.context_for(m, gpu, "vllm", "0.11.0", tp=8, dtype="bfloat16", links=links)
    ctx = expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, dp=2, ep=16,
                       moe_dp=True, all_to_all=True)
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    moe = 58 * 2 * (alpha + 6_881_280 / 50e9)
    attn = (61 + 3) * (alpha + 64 * 7168 * 2 * 2 * 7 / 8 / 450e9)
    assert ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64 == pytest.approx(moe + attn,
                                                                                 rel=1e-9)


def test_deepep_across_four_hgx_nodes_sends_one_copy_per_remote_node_by_hand():
    """-tp 1 -dp 32 with EP and DeepEP on H100: the MoE group spans 4 HGX nodes of 8
    (gpu_specs/h100-sxm-80gb.json: 400 Gb/s per GPU = 50 GB/s one direction; NVLink 900 GB/s,
    450 one direction). DeepEP's internode dispatch sends a token once per remote node holding
    one of its experts: top-8 over 4 nodes lands on 4 × (1 − 0.75^8) = 3.5995 nodes, 3/4 of
    them remote = 2.699661 copies. 64 own tokens: 64 × 7168 × 2 B = 917,504 B; over the
    network 917,504 × 2.699661 = 2,476,950 B at 50 GB/s = 49.5 µs, against the NVLink forward
    917,504 × 8 × 7/8 = 6,422,528 B at 450 GB/s = 14.3 µs: the network binds. 58 MoE layers ×
    2 phases; TP 1 has no attention all-reduce."""
    from kvplan.planner.nodes import node_links

    m, gpu = resolve_model(DSV3), resolve_gpu("h100")
    links = node_links(gpu, 1, 1, 32)
    assert links.moe_bytes_per_s == 50e9 and links.moe_node_gpus == 8
    ctx = step.context_for(m, gpu, "vllm", "0.11.0", tp=1, dtype="bfloat16", links=links)
    dedup = expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, dp=32, ep=32,
                         moe_dp=True, all_to_all=True, node_dedup=True)
    alpha = dedup.coefficients.allreduce_latency_us * 1e-6
    remote = 3 * (1 - 0.1001129150390625)
    want = 58 * 2 * (alpha + 917_504 * remote / 50e9)
    assert dedup.moe_comm_fixed_s + dedup.moe_comm_per_token_s * 64 == pytest.approx(want,
                                                                                   rel=1e-9)
    # without DeepEP's node deduplication every one of the 8 copies (31/32 remote) crosses
    plain = expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, dp=32, ep=32,
                         moe_dp=True, all_to_all=True)
    assert plain.moe_comm_fixed_s + plain.moe_comm_per_token_s * 64 == pytest.approx(
        58 * 2 * (alpha + 917_504 * 8 * 31 / 32 / 50e9), rel=1e-9)


def test_deepep_low_latency_decode_steps_send_fp8_to_every_expert_by_hand():
    """Decode steps with SGLang's DeepEP (deepep_mode auto: low-latency kernels for decode) over
    4 HGX H100 nodes: no NVLink forwarding, each token goes by RDMA to each of its 8 experts'
    GPUs, 31/32 of them off the GPU, dispatched as FP8 + one fp32 scale per 128 values
    (7168 × 1.03125 = 7,392 B) and combined in BF16 (14,336 B): 8 × 31/32 × (7,392 + 14,336)
    = 168,392 B per token per MoE layer, × 58 layers at 50 GB/s = 195.3 µs per token. A step
    with prompt tokens keeps the node-deduplicated normal kernels."""
    from kvplan.planner.nodes import node_links

    m, gpu = resolve_model(DSV3), resolve_gpu("h100")
    ctx = step.context_for(m, gpu, "sglang", "0.5.3", tp=1, dtype="bfloat16",
                           links=node_links(gpu, 1, 1, 32))
    ll = expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, dp=32, ep=32,
                      moe_dp=True, all_to_all=True, node_dedup=True, decode_low_latency=True)
    assert ll.moe_comm_decode_per_token_s == pytest.approx(58 * 168_392 / 50e9, rel=1e-9)
    decode = step.step_terms(ll, decode_seqs=64, context_tokens=1000).comm_s
    assert decode == pytest.approx(ll.moe_comm_fixed_s + 64 * 58 * 168_392 / 50e9, rel=1e-9)
    prefill = step.step_terms(ll, decode_seqs=0, context_tokens=0, prefill_tokens=64,
                              prefill_context_tokens=32, prefill_seqs=1).comm_s
    assert prefill == pytest.approx(ll.moe_comm_fixed_s + 64 * ll.moe_comm_per_token_s,
                                    rel=1e-9)


def _split(tp: int, dp: int, token_split: str, engine: str = "sglang", version: str = "0.5.6"):
    m, gpu = resolve_model(DSV3), resolve_gpu("h200")
    ctx = step.context_for(m, gpu, engine, version, tp=tp, dtype="bfloat16")
    return expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, dp=dp, ep=tp * dp,
                        moe_dp=True, all_to_all=True, token_split=token_split)


def test_split_attention_group_dispatches_each_token_once_by_hand():
    """SGLang DeepEP at -tp 2 -dp 4 (N = 8 GPUs on one HGX H200, attention groups of T = 2).
    With an a2a backend SGLang runs the MoE on SCATTERED tokens: the attention output is
    reduce-scattered over the group (each GPU keeps 1/T of the rows) and all-gathered before
    the next attention (python/sglang/srt/layers/communicator.py LayerScatterModes.
    _compute_mlp_mode, _scatter_hidden_states_and_residual, 0.4.9 and 0.5.6.post2). A group
    of 64 own tokens: each GPU dispatches its 32, 32 × 7168 × 2 B = 458,752 B, to 8 experts,
    7/8 of them off the GPU: 3,211,264 B per phase per MoE layer (each of the 2 copies used to
    go: 6,422,528 B). The reduce-scatter + all-gather move the all-reduce's bytes, 917,504 ×
    2 × 1/2 B, in two collectives: α more per MoE layer; the 3 dense layers' MLP all-reduce
    stays. α: the engine's fitted all-reduce latency; NVLink 450 GB/s one direction."""
    ctx = _split(2, 4, "scatter")
    assert ctx.moe_dispatch_split == 2 and not ctx.moe_split_gather
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    attn = (61 + 3) * (alpha + 917_504 / 450e9) + 58 * alpha
    moe = 58 * 2 * (alpha + 3_211_264 / 450e9)
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(attn + moe, rel=1e-12)
    dup = _split(2, 4, "")  # an engine that dispatches every GPU's copy
    assert dup.moe_comm_fixed_s + dup.moe_comm_per_token_s * 64 == pytest.approx(
        (61 + 3) * (alpha + 917_504 / 450e9) + 58 * 2 * (alpha + 6_422_528 / 450e9), rel=1e-12)


def test_chunked_split_keeps_the_all_reduce_and_gathers_after_the_moe_by_hand():
    """vLLM 0.11 - 0.24 sequence-parallel MoE (ParallelConfig.use_sequence_parallel_moe, EP
    with TP > 1 and DP > 1): the attention all-reduce stays, each TP rank slices its 1/T of
    the tokens (sequence_parallel_chunk) and all-gathers the MoE output over the group
    (DeepseekV2MoE.forward, vllm/model_executor/models/deepseek_v2.py 0.11.0). -tp 2 -dp 4,
    64 own tokens: the all-gather brings each GPU the other's 32 rows, 458,752 B per MoE
    layer, on top of the all-reduce; dispatch as above, 3,211,264 B per phase."""
    ctx = _split(2, 4, "chunk", "vllm", "0.11.0")
    assert ctx.moe_dispatch_split == 2 and ctx.moe_split_gather
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    attn = (61 + 3) * (alpha + 917_504 / 450e9) + 58 * (alpha + 458_752 / 450e9)
    moe = 58 * 2 * (alpha + 3_211_264 / 450e9)
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(attn + moe, rel=1e-12)


def test_split_low_latency_decode_sends_each_tokens_fp8_copy_once_by_hand():
    """SGLang DeepEP over 4 HGX H100 nodes at -tp 2 -dp 16: decode steps' low-latency kernels
    send a token to each of its 8 experts' GPUs (31/32 remote) as FP8 + scales (7,392 B) and
    combine BF16 (14,336 B); the SCATTERED layout holds for decode batches too (the layer
    modes are fixed at start-up, communicator.py), so each of a group's 2 GPUs sends half its
    tokens: 8 × 31/32 × 21,728 / 2 = 84,196 B per own token per MoE layer at 50 GB/s, plus
    the attention all-reduce inside the group over NVLink: (61 + 3) × 14,336 × 2 × 1/2 B at
    450 GB/s."""
    from kvplan.planner.nodes import node_links

    m, gpu = resolve_model(DSV3), resolve_gpu("h100")
    links = node_links(gpu, 2, 1, 16)
    assert links.moe_bytes_per_s == 50e9 and links.moe_node_gpus == 8
    assert links.tp_bytes_per_s is None  # the attention group stays on one node's NVLink
    ctx = step.context_for(m, gpu, "sglang", "0.5.6", tp=2, dtype="bfloat16", links=links)
    ll = expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, dp=16, ep=32,
                      moe_dp=True, all_to_all=True, node_dedup=True, decode_low_latency=True,
                      token_split="scatter")
    want = 58 * 84_196 / 50e9 + 64 * 14_336 / 450e9
    assert ll.moe_comm_decode_per_token_s == pytest.approx(want, rel=1e-9)


def _dep(engine: str, version: str, backend: str | None, tp: int = 8, dp: int = 2):
    from kvplan.specs import Deployment

    return Deployment(engine=engine, engine_version=version, dtype="bfloat16",
                      kv_cache_dtype="bfloat16", tensor_parallel_size=tp, data_parallel_size=dp,
                      enable_expert_parallel=True, moe_a2a_backend=backend,
                      max_model_len=4096, max_num_seqs=256, max_num_batched_tokens=8192,
                      gpu_memory_utilization=0.9, block_size=16, gpu_total_bytes=1, sources={})


@pytest.mark.parametrize(("engine", "version", "backend", "want"), [
    # SGLang: SCATTERED MoE tokens with any a2a backend (communicator.py 0.4.9 - 0.5.23)
    ("sglang", "0.4.9", "deepep", "scatter"),
    ("sglang", "0.5.23", "deepep", "scatter"),
    # vLLM: no sequence-parallel MoE in 0.10.2 (vllm/config/parallel.py has none)
    ("vllm", "0.10.2", "deepep_low_latency", ""),
    # 0.11.0 - 0.24: sequence_parallel_chunk after the whole all-reduce; the default backend
    # (allgather_reducescatter, vllm/envs.py 0.11.0) is one of use_sequence_parallel_moe's
    ("vllm", "0.11.0", None, "chunk"),
    ("vllm", "0.24.0", "deepep_high_throughput", "chunk"),
    # 0.25.0+: tensor_model_parallel_reduce_scatter in DeepseekV2DecoderLayer.forward
    ("vllm", "0.25.0", "deepep_low_latency", "scatter"),
    ("vllm", "0.33.0", "naive", "scatter"),
])
def test_engines_declare_how_they_split_tokens_before_dispatch(engine, version, backend, want):
    from kvplan.engines import registry

    assert registry.get(engine).moe_token_split(_dep(engine, version, backend)) == want


def test_planner_applies_the_engines_split():
    """planner/performance.py hands the engine's declaration to perf/expert.py: SGLang DeepEP
    at -tp 8 -dp 2 splits the 8 GPUs' tokens; vLLM 0.10.2 dispatches every copy."""
    from kvplan.planner.performance import _expert_parallel

    m, gpu = resolve_model(DSV3), resolve_gpu("h200")
    for engine, version, backend, split in (("sglang", "0.5.6", "deepep", 8),
                                             ("vllm", "0.10.2", "deepep_low_latency", 1)):
        dep = _dep(engine, version, backend).model_copy(update={"enable_dp_attention": True})
        ctx = step.context_for(m, gpu, engine, version, tp=8, dtype="bfloat16")
        assert _expert_parallel(ctx, m, dep).moe_dispatch_split == split


def test_vllm_allgather_reducescatter_gathers_every_ranks_share_by_hand():
    """vLLM's default all2all backend, allgather_reducescatter (vllm/envs.py 0.11.0), is no
    top-k all-to-all: AgRsAll2AllManager.dispatch all-gathers every EP rank's tokens and
    combine reduce-scatters them (vllm/distributed/device_communicators/all2all.py 0.11.0),
    over the EP group of N GPUs once sequence-parallel MoE has left each GPU its 1/T share.
    -tp 2 -dp 8 (N = 16, T = 2), 64 own tokens per group: each GPU holds 32, and receives the
    other 15 GPUs' 32 each: 15 × 32 × 7168 × 2 B = 6,881,280 B per phase per MoE layer (top-8
    all-to-all would move 3,440,640 B). 0.11 keeps the whole attention all-reduce and
    all-gathers the MoE output over the group (32 rows, 458,752 B)."""
    from kvplan.planner.performance import _expert_parallel

    m, gpu = resolve_model(DSV3), resolve_gpu("h200")
    dep = _dep("vllm", "0.11.0", None, tp=2, dp=8)
    ctx = _expert_parallel(step.context_for(m, gpu, "vllm", "0.11.0", tp=2, dtype="bfloat16"),
                           m, dep)
    assert not ctx.all_to_all and ctx.moe_group == 16 and ctx.moe_split_gather
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    attn = (61 + 3) * (alpha + 917_504 / 450e9) + 58 * (alpha + 458_752 / 450e9)
    moe = 58 * 2 * (alpha + 6_881_280 / 450e9)
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(attn + moe, rel=1e-12)


# --- sgdense --- SGLang DP attention's dense layers and DP gather; vLLM's per-model split


def _sg(tp: int, dp: int, *, a2a: bool, dense: str, gather: str = "", version: str = "0.5.6"):
    m, gpu = resolve_model(DSV3), resolve_gpu("h200")
    ctx = step.context_for(m, gpu, "sglang", version, tp=tp, dtype="bfloat16")
    return expert.apply(ctx, m, dtype="bfloat16", quant=m.quantization, dp=dp, ep=tp * dp,
                        moe_dp=True, all_to_all=a2a,
                        token_split="scatter" if a2a else "gathered",  # SGLang's declaration
                        dense_mode=dense, gather_all_reduce=gather)


def test_sglang_dense_layers_gather_over_every_gpu_by_hand():
    """SGLang DeepEP at -tp 2 -dp 4 (G = 8 GPUs on one HGX H200). DeepSeek-V3's 3 dense layers
    run their MLP in ScatterMode.FULL (communicator.py LayerScatterModes._compute_mlp_mode:
    dense -> FULL unless --moe-dense-tp-size 1, 0.4.9 - 0.5.6.post2), over tp_size = 8 GPUs
    on the 4 ranks' tokens: dp_gather_partial before (reduce-scatter in the group + all-gather
    over 8 in a balanced decode batch) and dp_reduce_scatter_tensor after. 64 own tokens a
    group: the buffer is 4 × 64 × 7168 × 2 B = 3,670,016 B, 7/8 of it received each way:
    3,211,264 B per phase per dense layer, where the dense MLP's all-reduce over T = 2 was
    charged (917,504 × 2 × 1/2 B). Attention all-reduce of all 61 layers stays (its bytes move
    as the reduce-scatter + all-gather pair); MoE layers as in
    test_split_attention_group_dispatches_each_token_once_by_hand."""
    ctx = _sg(2, 4, a2a=True, dense="full")
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    attn = 61 * (alpha + 917_504 / 450e9) + 58 * alpha
    moe = 58 * 2 * (alpha + 3_211_264 / 450e9)
    dense = 3 * 2 * (alpha + 3_211_264 / 450e9)
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(attn + moe + dense, rel=1e-12)
    # --moe-dense-tp-size 1: the MLP whole on each GPU's own 32 rows; its attention output is
    # reduce-scattered and all-gathered (the all-reduce's bytes, one more collective)
    local = _sg(2, 4, a2a=True, dense="local")
    got = local.moe_comm_fixed_s + local.moe_comm_per_token_s * 64
    assert got == pytest.approx(attn + moe + 3 * alpha, rel=1e-12)


def test_sglang_prefill_steps_gather_by_all_reduce_by_hand():
    """SGLang 0.5.3+ DP attention without DeepEP at -tp 1 -dp 8: every layer's MLP (58 MoE,
    3 dense) runs on the 8 ranks' gathered tokens. A decode step (DpPaddingMode.MAX_LEN,
    dp_attention.py) all-gathers and reduce-scatters: 64 own tokens x 14,336 B x 7 =
    6,422,528 B per phase per layer. A step with an extend is SUM_LEN
    (get_dp_padding_mode(is_extend_in_batch=True)): _dp_gather_via_all_reduce all-reduces the
    8 x 64-token buffer over the 8 GPUs (a ring all-reduce moves 2 x 7/8 of 7,340,032 B =
    12,845,056 B) and the MLP output is all-reduced too (no reduce-scatter outside MAX_LEN:
    LayerCommunicator.should_use_reduce_scatter). Both: two collectives per layer (alpha)."""
    ctx = _sg(1, 8, a2a=False, dense="full", gather="prefill")
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    assert ctx.moe_comm_fixed_s == pytest.approx(61 * 2 * alpha, rel=1e-12)
    assert ctx.moe_comm_decode_per_token_s * 64 == pytest.approx(
        61 * 2 * 6_422_528 / 450e9, rel=1e-12)
    assert ctx.moe_comm_per_token_s * 64 == pytest.approx(61 * 2 * 12_845_056 / 450e9,
                                                          rel=1e-12)
    decode = step.step_terms(ctx, decode_seqs=64, context_tokens=1000).comm_s
    assert decode == pytest.approx(61 * 2 * (alpha + 6_422_528 / 450e9), rel=1e-12)
    prefill = step.step_terms(ctx, decode_seqs=0, context_tokens=0, prefill_tokens=64,
                              prefill_context_tokens=32, prefill_seqs=1).comm_s
    assert prefill == pytest.approx(61 * 2 * (alpha + 12_845_056 / 450e9), rel=1e-12)


def test_sglang_all_reduce_gather_absorbs_the_attention_all_reduce_by_hand():
    """SGLang 0.4.9 (_dp_gather_via_all_reduce on every step) at -tp 2 -dp 4 without DeepEP:
    dp_gather_partial copies each GPU's partial attention output into the 4 ranks' buffer and
    the all-reduce over the 8 GPUs sums it, so no all-reduce over T = 2 is left. 64 own tokens
    a group: buffer 4 x 64 x 14,336 B = 3,670,016 B, a ring all-reduce moves 2 x 7/8 of it =
    6,422,528 B; twice per layer (gather, MLP output), 61 layers. Decode steps the same."""
    ctx = _sg(2, 4, a2a=False, dense="full", gather="always", version="0.4.9")
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(61 * 2 * (alpha + 6_422_528 / 450e9), rel=1e-12)
    assert not ctx.moe_comm_decode_per_token_s


def test_vllm_without_sequence_parallel_moe_gathers_within_the_dp_group_by_hand():
    """vLLM 0.10.2 (no sequence-parallel MoE) at -tp 2 -dp 8 with EP through the default
    gather backend: AgRsAll2AllManager.dispatch all-gathers over get_dp_group() when not
    is_sequence_parallel (vllm/distributed/device_communicators/all2all.py 0.11.0; naive's
    multicast over the same group in 0.10.x): the 8 GPUs of the same TP rank, each with its
    rank's whole 64 tokens. A GPU receives the other 7 ranks' 64 x 14,336 B = 6,422,528 B per
    phase per MoE layer (less than the 6,881,280 B of 0.11's split over all 16 GPUs,
    test_vllm_allgather_reducescatter_gathers_every_ranks_share_by_hand), and the MoE
    output's partial sums over the two TP ranks' experts are all-reduced over T = 2:
    2 x 1/2 x 917,504 B per MoE layer. Attention (61 layers) and the 3 dense MLPs all-reduce
    917,504 B each, as without DP."""
    from kvplan.planner.performance import _expert_parallel

    m, gpu = resolve_model(DSV3), resolve_gpu("h200")
    dep = _dep("vllm", "0.10.2", None, tp=2, dp=8)
    ctx = _expert_parallel(step.context_for(m, gpu, "vllm", "0.10.2", tp=2, dtype="bfloat16"),
                           m, dep)
    assert ctx.moe_gather_dp_group and ctx.moe_dispatch_split == 1
    alpha = ctx.coefficients.allreduce_latency_us * 1e-6
    attn = (61 + 3) * (alpha + 917_504 / 450e9)
    moe = 58 * 2 * (alpha + 6_422_528 / 450e9) + 58 * (alpha + 917_504 / 450e9)
    got = ctx.moe_comm_fixed_s + ctx.moe_comm_per_token_s * 64
    assert got == pytest.approx(attn + moe, rel=1e-12)


@pytest.mark.parametrize(("arch", "version", "want"), [
    # models/deepseek_v2.py: chunk 0.11.0 - 0.24.0, reduce-scatter from 0.25.0
    ("DeepseekV3ForCausalLM", "0.24.0", "chunk"), ("DeepseekV3ForCausalLM", "0.25.0", "scatter"),
    # qwen3_moe.py Qwen3MoeSparseMoeBlock: sequence_parallel_chunk at 0.11.0 and at 0.33.0
    ("Qwen3MoeForCausalLM", "0.33.0", "chunk"),
    # qwen3_next.py: chunk at 0.25.0; use_attn_reduce_scatter_for_moe at 0.26.0
    ("Qwen3NextForCausalLM", "0.25.0", "chunk"), ("Qwen3NextForCausalLM", "0.26.0", "scatter"),
    ("GptOssForCausalLM", "0.11.0", "chunk"),  # gpt_oss.py MLPBlock
    ("Llama4ForConditionalGeneration", "0.33.0", "chunk"),  # mllama4.py -> llama4.py
    # mixtral.py, glm4_moe.py, qwen2_moe.py's sparse block: no use_sequence_parallel_moe
    ("MixtralForCausalLM", "0.33.0", ""), ("Glm4MoeForCausalLM", "0.33.0", ""),
    ("Qwen2MoeForCausalLM", "0.33.0", ""),
    ("Qwen3MoeForCausalLM", "0.10.2", ""),  # no sequence-parallel MoE at all
])
def test_vllm_splits_tokens_only_in_model_files_that_do(arch, version, want):
    from kvplan.engines import registry

    m = resolve_model(DSV3).model_copy(update={"architectures": [arch]})
    assert registry.get("vllm").moe_token_split(_dep("vllm", version, None), m) == want


@pytest.mark.parametrize(("version", "want"), [
    # dp_attention.py: all-reduce only up to 0.4.9.post3; DpPaddingMode from 0.4.9.post4
    # (cost-based for every batch: balanced ranks take MAX_LEN); extend -> SUM_LEN from 0.5.3
    ("0.4.9", "always"), ("0.4.9.post3", "always"), ("0.4.9.post4", ""), ("0.5.2", ""),
    ("0.5.3", "prefill"), ("0.5.23", "prefill"),
])
def test_sglang_declares_when_the_dp_gather_all_reduces(version, want):
    from kvplan.engines import registry

    eng = registry.get("sglang")
    dep = _dep("sglang", version, None).model_copy(update={"enable_dp_attention": True})
    assert eng.dp_gather_all_reduce(dep) == want
    assert eng.dense_mlp_mode(dep) == "full"
    assert eng.moe_token_split(dep) == "gathered"  # FULL: each token once, no copy
    solo = dep.model_copy(update={"data_parallel_size": 1, "enable_expert_parallel": False,
                                  "enable_dp_attention": False})
    assert eng.dp_gather_all_reduce(solo) == "" and eng.dense_mlp_mode(solo) == ""
