"""Expert and data parallelism in the step-time model (docs/expert-parallel.md).

One replica of the step model (perf/step.py) is one data-parallel rank: its batch is its share
of the requests. What changes with MoE layers shared by D data-parallel ranks over N = T × D
GPUs (DP attention) or with expert parallelism:

* Expert weights on one GPU: its own experts, ceil(E / EP) of them whole under EP, else a 1/N
  slice of every expert (kvplan.model.expert). A step reads the share of them that the tokens
  of all D ranks (which run their MoE layers together) route to: 1 − (1 − k/E)^(D × tokens).
  The expert FLOPs per own token do not change (k experts split N ways, D ranks' tokens).
* Communication per step (step.step_terms's comm_s): each attention group all-reduces its
  attention output (and its dense MLP) over T GPUs as before; each MoE layer instead
  exchanges the tokens among the N GPUs:
    - all-to-all (vLLM with EP, -dp > 1 and a DeepEP all2all backend:
      FusedMoEParallelConfig.use_all2all_kernels = dp_size > 1 and use_ep; SGLang
      --moe-a2a-backend deepep; TensorRT-LLM attention DP with EP): dispatch and combine each
      move a token's hidden state to the GPUs of its k experts, (N − 1)/N of them off the GPU:
      2 × (α + tokens/S × k × hidden × 2 B × (N − 1)/N ÷ link), S below;
    - otherwise (SGLang DP attention without DeepEP; vLLM -dp > 1 without EP, or with EP
      through its allgather_reducescatter (default) or naive backend, which gather every
      rank's tokens and reduce-scatter the outputs: AgRsAll2AllManager,
      vllm/distributed/device_communicators/all2all.py 0.11.0; NaiveAll2AllManager gathers
      by broadcasts and combines by an all-reduce, twice the reduce-scatter's bytes, not
      modelled: a testing backend, mapped to allgather_reducescatter from 0.19): over a
      buffer of the D ranks' D × tokens tokens (the T GPUs of an attention group hold their
      rank's tokens alike, after its all-reduce):
      2 × (α + D × tokens × hidden × 2 B × (N − 1)/N ÷ link)
      = 2 × (α + tokens × hidden × 2 B × (N − 1)/T ÷ link).
  Volumes as the DeepEP README states them (dispatch/combine of top-k routed tokens) and the
  ring all-gather/reduce-scatter bound (each GPU receives (N − 1)/N of the buffer); α is
  the engine's fitted all-reduce latency, the link perf.step.link_bytes_per_s (NVLink one
  direction), or the scale-out network when the MoE group spans nodes (planner/nodes.py).
* Attention TP T > 1 before the dispatch (S, Engine.moe_token_split, the PerfContext's
  moe_dispatch_split / moe_split_gather). After its all-reduce every GPU of an attention group
  holds the group's tokens; the engines split them among the T GPUs before the dispatch, so
  a GPU dispatches tokens/T (S = T), not a copy each:
    - SGLang (0.4.9, 0.5.6.post2 python/sglang/srt/layers/communicator.py): with an a2a
      backend (0.4.9: enable_deepep_moe) LayerScatterModes._compute_mlp_mode runs a sparse
      layer's MLP on ScatterMode.SCATTERED tokens ("[a, b, c, d]", one share per GPU);
      CommunicateWithAllReduceAndLayerNormFn._scatter_hidden_states_and_residual
      reduce-scatters the attention output over the attention TP group in place of its
      all-reduce, and the next layer's prepare_attn all-gathers it
      (CommunicateSimpleFn._scattered_to_tp_attn_full); models/deepseek_v2.py forward_deepep
      dispatches the rows it is handed. 0.5.23 keeps it (layer_boundary/factories.py
      _ffn_on_rank_rows: the sparse FFN runs on the rank's own rows when
      moe/utils.py is_moe_input_scattered_across_dp_ranks, i.e. any a2a backend). The modes
      are fixed at start-up, so DeepEP's low-latency (decode) kernels see the same 1/T.
      "scatter": the reduce-scatter + all-gather move the all-reduce's bytes, one α more per
      MoE layer. Not modelled: --disable-attn-tp-gather without DP attention (0.5.23's
      UNPADDED variant dispatches from every rank).
    - vLLM 0.11.0+ (vllm/config/parallel.py ParallelConfig.use_sequence_parallel_moe: EP,
      TP > 1, DP > 1 and the all2all backend allgather_reducescatter, naive,
      deepep_high_throughput or deepep_low_latency; 0.19+ maps naive to
      allgather_reducescatter). 0.11 – 0.24 ("chunk", read at 0.11.0 – 0.24.0): the attention
      all-reduce stays whole, DeepseekV2MoE.forward slices the rank's 1/T
      (sequence_parallel_chunk) and all-gathers the MoE output over the group, one more
      (T − 1)/T × tokens × hidden × 2 B per MoE layer; 0.25.0+ ("scatter", read at 0.25.0 –
      0.33.0): DeepseekV2DecoderLayer.forward reduce-scatters instead
      (reduce_results=not use_sequence_parallel_moe) and the next layer all-gathers. 0.10.2
      has no sequence-parallel MoE: every TP rank dispatches its copy (S = 1). Read in
      models/deepseek_v2.py; other model files below.
    - vLLM's split is each model file's own (FusedMoE's is_sequence_parallel defaults to
      False, fused_moe/layer.py 0.33.0): engines/vllm.py SEQUENCE_PARALLEL_MOE lists the
      architectures whose file passes use_sequence_parallel_moe (deepseek_v2, qwen3_moe,
      qwen3_next, gpt_oss, llama4, granitemoe, ... read at 0.11.0 - 0.33.0); qwen3_moe,
      gpt_oss and llama4 "chunk" in every release read, qwen3_next reduce-scatters from 0.26.0.
      Others (mixtral, glm4_moe, qwen2_moe's sparse block) run the MoE on every TP rank's copy.
    - TensorRT-LLM: attention DP runs attention at TP 1 (tensorrt_llm/mapping.py), so T = 1.
  The gather/scatter form: SGLang's (Engine.moe_token_split "gathered") holds each token
  once, its buffer the D ranks' tokens, 1/T of them on each of the N GPUs; vLLM's all-gather
  backends with EP but without the split gather within each TP rank's DP group
  (AgRsAll2AllManager.dispatch: get_dp_group() unless is_sequence_parallel, then
  get_ep_group(); vllm/distributed/device_communicators/all2all.py 0.11.0 - 0.33.0; naive's
  multicast likewise over the DP group): D GPUs with their rank's whole tokens,
  2 × (α + tokens × hidden × 2 B × (D − 1) ÷ link), and the MoE output's partial sums over
  the TP ranks' experts are all-reduced over T (FusedMoE reduce_results /
  maybe_all_reduce_tensor_model_parallel): + α + tokens × hidden × 2 B × 2(T − 1)/T ÷ link
  (moe_gather_dp_group). Each GPU's TP peers hold the same tokens but other experts, so no
  token is computed twice.
  SGLang decode batches of even size (dp_attention.py DpPaddingMode MAX_LEN, 0.4.9.post4+)
  move it as charged: a reduce-scatter in the attention group and an all-gather over the N
  GPUs (_dp_gather_via_all_gather), then dp_reduce_scatter_tensor and the group's
  all-gather. SUM_LEN batches (Engine.dp_gather_all_reduce: any batch with an extend from
  0.5.3, every batch before 0.4.9.post4) gather by an all-reduce of the buffer over the N
  GPUs (_dp_gather_via_all_reduce, partial: it also sums the attention's TP shares, so no
  all-reduce over T is left for that layer) and all-reduce the layer's output (no
  reduce-scatter outside MAX_LEN: LayerCommunicator.should_use_reduce_scatter): per layer
  2 × (α + 2 × tokens × hidden × 2 B × (N − 1)/T ÷ link). Steps that carry prefill take that
  per-token cost, decode-only steps MAX_LEN's (moe_comm_decode_per_token_s); the fixed α is
  MAX_LEN's for both (one α a layer more than SUM_LEN's at T > 1). Not modelled: 0.5.23's
  SUM_LEN for decode batches without an a2a backend whose buffer fits the custom
  all-reduce (_decode_sum_len_fits_custom_all_reduce). vLLM without EP: an all-gather and a
  reduce-scatter over the D GPUs of a DP group, (D − 1) × tokens each
  (FusedMoE.forward_impl do_naive_dispatch_combine, fused_moe/layer.py 0.11.0), and the MoE
  output's all-reduce over T: in all the 2 × (N − 1)/T charged. The router logits that
  vLLM's all-gather carries with the hidden states (E values a token) are not counted.
* SGLang's dense layers under DP attention (Engine.dense_mlp_mode; DeepSeek's first 3,
  Llama-4's interleaved ones): their MLP runs in ScatterMode.FULL, over all N GPUs on the D
  ranks' gathered tokens (communicator.py LayerScatterModes._compute_mlp_mode 0.4.9 -
  0.5.6.post2; layer_boundary/factories.py _ffn_on_rank_rows 0.5.23), with or without
  DeepEP: the gather/scatter of a MoE layer (above, SUM_LEN included) in place of the dense
  MLP's all-reduce over T. --moe-dense-tp-size 1 ("local") holds the MLP whole on every GPU
  (DeepseekV2MLP tp_size 1) on its own 1/T of the rows: no collective of its own, the
  attention's all-reduce split into a reduce-scatter and an all-gather (one α more).
  The LM head's gather under DP attention (logits_processor.py dp_gather_replicate, one per
  step on the sampled rows; none with --enable-dp-lm-head) is not counted.
* DeepEP across nodes (SGLang --moe-a2a-backend deepep, vLLM's deepep all2all backends): its
  internode kernels send a token once to each remote node that holds one of its k experts
  (RDMA to the same-index GPU there), which forwards it over NVLink to the experts' GPUs
  (deepseek-ai/DeepEP README, "internode" normal kernels: NVLink and RDMA forwarding; the
  DeepSeek-V3 technical report, arXiv 2412.19437 §3.2.2, dispatches so). With the group on
  M nodes of g GPUs and experts placed uniformly, a token's k experts land on
  M × (1 − (1 − 1/M)^k) distinct nodes, (M − 1)/M of them remote: per phase
  max(α + tokens × hidden × 2 B × remote nodes ÷ network,
      α + tokens × k × hidden × 2 B × (g − 1)/g ÷ NVLink) — the forward is pipelined with the
  RDMA sends. Group-limited routing (DeepSeek-V3's topk_group) is not read: it can only lower
  the node count.
* DeepEP's low-latency kernels (decode steps: SGLang's deepep_mode auto picks them for decode
  batches; vLLM deepep_low_latency) do not forward over NVLink: each token goes by RDMA to
  each of its k experts' GPUs, dispatched in FP8 with one fp32 scale per 128 values
  (`low_latency_dispatch(..., use_fp8=True)`, SGLang layers/moe/ep_moe/token_dispatcher.py
  0.4.x) and combined in BF16: per step, across nodes,
  2α + tokens × k × (N − 1)/N × hidden × ((1 + 4/128) + 2) B ÷ network.
"""

from __future__ import annotations

from dataclasses import replace

from ..engines.base import DenseMlpMode, GatherAllReduce, TokenSplit
from ..model import expert as model_expert
from ..specs import ModelSpec, QuantSpec
from . import moe_gemm as _moe_gemm
from . import step


def apply(ctx: step.PerfContext, m: ModelSpec, *, dtype: str, quant: QuantSpec | None,
          dp: int, ep: int, moe_dp: bool, all_to_all: bool,
          node_dedup: bool = False, decode_low_latency: bool = False,
          token_split: TokenSplit = "", dense_mode: DenseMlpMode = "",
          gather_all_reduce: GatherAllReduce = "") -> step.PerfContext:
    """`ctx` (one attention group of T = ctx.tp GPUs) with its MoE layers shared by `dp` DP
    ranks when `moe_dp`, experts split over `ep` ranks (1: a TP slice over the group);
    `node_dedup`: the all-to-all is DeepEP's, one copy per remote node; `decode_low_latency`:
    decode steps use DeepEP's low-latency kernels; `token_split`: how the engine splits an
    attention group's tokens before the all-to-all (Engine.moe_token_split: "" none,
    "scatter", "chunk"; module docstring); `dense_mode`: how the dense layers' MLP runs
    under DP attention (Engine.dense_mlp_mode: "" over T, "full" on the DP ranks' tokens
    gathered over the group, "local" whole on the GPU's own rows);
    `gather_all_reduce`: which steps gather by an all-reduce of the token buffer
    (Engine.dp_gather_all_reduce: "", "prefill", "always")."""
    if m.moe is None or (ep <= 1 and not moe_dp):
        return ctx
    group = ctx.tp * (dp if moe_dp else 1)
    full = step._enumerate_stage(m, ctx.tp, ctx.pp, _dtype(dtype), quant)
    if ep > 1:
        local = model_expert.expert_bytes(m, ep=ep, dtype=_dtype(dtype), quant=quant,
                                          pp=ctx.pp).rank_bytes
    else:  # a TP slice of every expert over the group
        local = full.expert_bytes * ctx.tp // group
    dense_read = max(0, ctx.weight_bytes_per_gpu - local - full.unread_bytes)
    out = replace(ctx, expert_bytes=local, dense_read_bytes=dense_read,
                  moe_dp=dp if moe_dp else 1, moe_group=group,
                  moe_layers=step._stage_moe_layers(m, ctx.pp), all_to_all=all_to_all,
                  moe_node_gpus=ctx.moe_node_gpus if node_dedup and all_to_all else 0,
                  moe_dispatch_split=ctx.tp if token_split in ("scatter", "chunk") else 1,
                  moe_split_gather=ctx.tp > 1 and token_split == "chunk",
                  moe_gather_dp_group=ep > 1 and not all_to_all and not token_split)
    out = _expert_gemm(out, ep=ep, deepep=node_dedup and all_to_all,
                       low_latency=decode_low_latency and all_to_all)
    if not (moe_dp and dp > 1) and not all_to_all:
        return out  # one replica's MoE layers: the TP all-reduce as step.step_terms has it
    dense = dense_mode if moe_dp and dp > 1 else ""
    always = gather_all_reduce == "always"
    fixed = comm_s(out, 0.0, dense_mode=dense, all_reduce=always)
    per = comm_s(out, 1.0, dense_mode=dense, all_reduce=always) - fixed
    out = replace(out, moe_comm_fixed_s=fixed, moe_comm_per_token_s=per)
    if gather_all_reduce == "prefill" and moe_dp and dp > 1:
        # steps that carry prefill gather by all-reduces; decode-only steps keep the
        # all-gather form (and the fixed α of that form: module docstring)
        pre = comm_s(out, 1.0, dense_mode=dense, all_reduce=True) \
            - comm_s(out, 0.0, dense_mode=dense, all_reduce=True)
        out = replace(out, moe_comm_per_token_s=pre, moe_comm_decode_per_token_s=per)
    if decode_low_latency and all_to_all and out.moe_link_bytes_per_s and out.moe_group > 1 \
            and 0 < ctx.moe_node_gpus < out.moe_group:
        n = out.moe_group
        per = (out.moe_layers * out.top_k * (n - 1) / n * out.hidden_size
               * (LL_DISPATCH_BYTES + step.ACTIVATION_BYTES) / out.moe_link_bytes_per_s
               / out.moe_dispatch_split)
        group_s = (_group_and_dense_s(out, 1.0, dense, always)
                   - _group_and_dense_s(out, 0.0, dense, always))
        out = replace(out, moe_comm_decode_per_token_s=per + group_s)
    return out


def _expert_gemm(ctx: step.PerfContext, *, ep: int, deepep: bool,
                 low_latency: bool = False) -> step.PerfContext:
    """`ctx` with the routed experts' measured curve of its layout (perf/moe_gemm.py
    curve_for_layout): EP ranks' local experts at full width, or a TP slice over the
    ctx.moe_group GPUs, read for the kernel family the engine release runs in that layout
    (moe_gemm.layout_family). DeepEP's all-to-all feeds DeepGEMM's grouped GEMMs: FP8
    block-scaled experts on Hopper read SGLang's DeepEP MoE table (DEEPEP_ROUTES), except vLLM
    0.15+ behind DeepEP high-throughput, which runs FlashInfer's CUTLASS MoE and reads its table
    (moe_gemm.VLLM_DEEPEP_HT_FI_CUTLASS); other DeepEP experts keep the dense rate, and say
    so. `low_latency`: decode steps (vLLM deepep_low_latency: every step) go through DeepEP's
    low-latency kernels, whose masked grouped GEMM has its own measured curve at large EP
    (moe_gemm.decode_curve_for_layout)."""
    if not ctx.expert_gemm_key:
        return ctx
    base, gpu_id, kernel = ctx.expert_gemm_key
    fam = _moe_gemm.layout_family(base, gpu_id, kernel, ctx.expert_gemm_release or None,
                                  moe_tp=max(ctx.tp, ctx.moe_group) if ep <= 1 else 1, ep=ep,
                                  deepep=deepep, low_latency=low_latency)
    if deepep and fam == base:
        return replace(ctx, expert_gemm_curve=(), expert_gemm_table="",
                       expert_gemm_source=_moe_gemm.DEEPEP_DENSE_RATE, expert_padding=())
    curve = _moe_gemm.curve_for_layout(fam, gpu_id, kernel, ctx.num_experts,
                                       ctx.expert_intermediate, tp=ctx.tp, group=ctx.moe_group,
                                       ep=ep)
    table, source = step.moe_gemm_provenance((fam, gpu_id, kernel), curve, ep=ep, tp=ctx.tp,
                                             group=ctx.moe_group)
    decode = (_moe_gemm.decode_curve_for_layout(fam, gpu_id, kernel, ctx.num_experts, ep)
              if deepep and low_latency else ())
    # --- dgpad --- DeepGEMM's worst-case row padding (moe_gemm.VLLM_DEEPGEMM_ROWS): vLLM
    # without DeepEP and without DP (TP-split, or EP over the TP ranks: no all-to-all, the
    # same sizing over the rank's experts); a DP layout's all-to-all hands the experts other
    # counts: not read, not padded
    padding = (step.expert_padding_for(fam, ctx.expert_gemm_release or None,
                                       ctx.num_experts // max(1, ep))
               if not deepep and ctx.moe_dp <= 1 and ctx.moe_group <= ctx.tp else ())
    return replace(ctx, expert_gemm_curve=curve, expert_gemm_table=table,
                   expert_gemm_source=source, expert_gemm_decode_curve=decode,
                   expert_padding=padding)


# FP8 value + one fp32 scale per 128 values, per hidden element (DeepEP low-latency dispatch)
LL_DISPATCH_BYTES = 1 + 4 / 128


def _dtype(dtype: str) -> str:
    return dtype if dtype in ("bfloat16", "float16", "float32") else "bfloat16"


def comm_s(ctx: step.PerfContext, tokens: float, *, dense_mode: DenseMlpMode = "",
           all_reduce: bool = False) -> float:
    """Communication of one step of `tokens` own tokens on a GPU whose MoE layers span
    ctx.moe_group GPUs shared by ctx.moe_dp DP ranks (module docstring); `dense_mode`: how
    the dense layers' MLP runs ("" over T, "full" on the gathered tokens too, "local" whole
    on the GPU's own rows); `all_reduce`: the gather is an
    all-reduce of the token buffer (SGLang SUM_LEN)."""
    out = _group_and_dense_s(ctx, tokens, dense_mode, all_reduce)
    c = ctx.coefficients
    alpha = (c.allreduce_latency_us if ctx.link_latency_us is None else ctx.link_latency_us) * 1e-6
    link = ctx.link_bytes_per_s
    act = tokens * ctx.hidden_size * step.ACTIVATION_BYTES
    n = ctx.moe_group
    if ctx.all_to_all:  # the tokens each GPU dispatches: its 1/T when the engine splits them
        act /= ctx.moe_dispatch_split
    g = ctx.moe_node_gpus
    if n > 1 and ctx.all_to_all and ctx.moe_link_bytes_per_s and 0 < g < n:
        nodes = -(-n // g)
        remote = nodes * (1 - (1 - 1 / nodes) ** ctx.top_k) * (nodes - 1) / nodes
        rdma = alpha + act * remote / ctx.moe_link_bytes_per_s
        nvlink = alpha + act * ctx.top_k * (g - 1) / g / link
        out += ctx.moe_layers * 2 * max(rdma, nvlink)
    elif n > 1:
        if ctx.all_to_all:
            moved = act * ctx.top_k * (n - 1) / n
        elif ctx.moe_gather_dp_group:  # within the TP rank's DP group: D GPUs, whole tokens
            moved = act * (n // ctx.tp - 1)
        else:  # the D ranks' tokens (each attention group's T GPUs hold its rank's alike) over
            # the N GPUs, 1/T each; an all-reduce of the buffer moves twice a ring all-gather's
            moved = act * (n - 1) / ctx.tp * (2 if all_reduce else 1)
        out += ctx.moe_layers * 2 * (alpha + moved / (ctx.moe_link_bytes_per_s or link))
        if ctx.moe_gather_dp_group and ctx.tp > 1:  # the MoE output's TP all-reduce
            out += ctx.moe_layers * (alpha + act * 2 * (ctx.tp - 1) / ctx.tp / link)
    return out


def _group_and_dense_s(ctx: step.PerfContext, tokens: float, dense_mode: DenseMlpMode,
                       all_reduce: bool) -> float:
    """The attention group's all-reduces (one per layer, one more per dense layer's MLP when
    it runs over T), the all-gather after a split MoE layer, and the dense layers' gather and
    scatter over the MoE group when `dense_mode` is "full"; "local" drops the dense MLP's
    all-reduce (its attention's reduce-scatter + all-gather: one α more at T > 1) (module
    docstring). With `all_reduce` the
    buffer's all-reduce over the group also reduces the attention output of every layer that
    gathers (SGLang _dp_gather_via_all_reduce, partial): no all-reduce over T for those."""
    c = ctx.coefficients
    alpha = (c.allreduce_latency_us if ctx.link_latency_us is None else ctx.link_latency_us) * 1e-6
    link = ctx.link_bytes_per_s
    act = tokens * ctx.hidden_size * step.ACTIVATION_BYTES
    n = ctx.moe_group
    dense_layers = ctx.layers - ctx.moe_layers
    gathered_dense = dense_layers if dense_mode == "full" and n > 1 else 0
    reduced_dense = 0 if dense_mode else dense_layers  # dense MLPs all-reduced over T
    gathered = gathered_dense + (ctx.moe_layers if n > 1 and not ctx.all_to_all else 0)
    out = 0.0
    if ctx.tp > 1:  # attention (and dense MLP) all-reduces inside the attention group
        ar = act * 2 * (ctx.tp - 1) / ctx.tp
        attention = ctx.layers - (gathered if all_reduce else 0)
        out += (attention + reduced_dense) * (alpha + ar / link)
        if dense_mode == "local":  # reduce-scatter + all-gather in place of the all-reduce
            out += dense_layers * alpha
        if ctx.moe_dispatch_split > 1:  # per MoE layer one more collective: the all-gather
            # after the MoE (bytes of its own when the all-reduce stayed whole; else the
            # reduce-scatter + all-gather move the all-reduce's bytes between them)
            split = act * (ctx.tp - 1) / ctx.tp if ctx.moe_split_gather else 0.0
            out += ctx.moe_layers * (alpha + split / link)
    if gathered_dense:  # gather before and scatter after each dense MLP, as a MoE layer's
        moved = act * (n - 1) / ctx.tp * (2 if all_reduce else 1)
        out += gathered_dense * 2 * (alpha + moved / (ctx.moe_link_bytes_per_s or link))
    return out
