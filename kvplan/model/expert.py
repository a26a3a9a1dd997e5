"""Expert and data parallelism: what one GPU holds when a MoE model's experts are split over
expert-parallel (EP) ranks and its attention runs data-parallel (docs/expert-parallel.md).
Pure functions over the model; each engine module says which of them it applies.

kvplan's layout convention (vLLM's): -tp T is the attention tensor-parallel size of one
data-parallel rank, -dp D the number of such ranks; with expert parallelism the routed
experts are split over all T × D GPUs (vllm/model_executor/layers/fused_moe/config.py
FusedMoEParallelConfig.make, v0.10-0.11: ep_size = dp_size × tp_size).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import ModelSpec, QuantSpec
from ..units import cdiv
from .weights import mla_dequantized_copy_bytes, pp_layer_ranges, rank_tensors

_EXPERTS = ".mlp.experts."
_ATTENTION = ".self_attn."
_SHARED = ".mlp.shared_expert."


def moe_group_size(tp: int, dp: int, *, dp_attention: bool) -> int:
    """GPUs one MoE layer spans: T × D with DP attention (the experts are shared by the data-
    parallel ranks), else the T GPUs of one replica."""
    return tp * dp if dp_attention else tp


def local_experts(num_experts: int, ep: int, redundant: int = 0) -> int:
    """Physical experts on one EP rank: ceil((E + R) / ep). EPLB's redundant experts are
    extra physical slots (vLLM fused_moe/layer.py: global_num_experts = logical +
    num_redundant_experts, local = global // ep_size; SGLang eplb/expert_location.py:
    num_physical_experts = n_routed_experts + ep_num_redundant_experts)."""
    return cdiv(num_experts + redundant, ep)


@dataclass(frozen=True)
class ExpertBytes:
    """Routed-expert weights (all MoE layers of the heaviest PP stage) on one EP rank."""

    local_experts: int
    per_expert_bytes: int  # one whole expert, summed over the stage's MoE layers
    moe_layers: int

    @property
    def rank_bytes(self) -> int:
        return self.local_experts * self.per_expert_bytes


def expert_bytes(m: ModelSpec, *, ep: int, dtype: str, quant: QuantSpec | None,
                 pp: int = 1, redundant: int = 0) -> ExpertBytes:
    """One EP rank's routed experts: local_experts × the bytes of one whole expert (payload and
    quantization scales, as kvplan's weights module sizes them) over the MoE layers of the PP
    stage with the most of them."""
    assert m.moe is not None, "expert_bytes needs a MoE model"
    moe_layers = set(m.moe.moe_layers)
    most = max(sum(1 for i in r if i in moe_layers) for r in pp_layer_ranges(m.num_layers, pp))
    total = sum(sum(parts) for t, (_name, parts) in
                rank_tensors(m, tp=1, dtype=dtype, quant=quant, ep=1) if _EXPERTS in t.name)
    per_layer = total // (m.moe.num_experts * max(1, len(moe_layers)))
    return ExpertBytes(local_experts(m.moe.num_experts, ep, redundant), per_layer * most, most)


def redundant_expert_bytes(m: ModelSpec, *, ep: int, redundant: int, dtype: str,
                           quant: QuantSpec | None, pp: int = 1) -> int:
    """What EPLB's redundant experts add to one EP rank: (ceil((E+R)/ep) − ceil(E/ep)) whole
    experts per MoE layer."""
    if m.moe is None or redundant <= 0 or ep <= 1:
        return 0
    e = expert_bytes(m, ep=ep, dtype=dtype, quant=quant, pp=pp)
    extra = local_experts(m.moe.num_experts, ep, redundant) - e.local_experts
    return extra * e.per_expert_bytes


def _bytes_of(m: ModelSpec, *, tp: int, ep: int, dtype: str, quant: QuantSpec | None,
              pick: str) -> int:
    """Bytes on one TP rank of the tensors of one kind: "attention" (every .self_attn.
    tensor), "embedding" (the input embedding) or "shared" (the shared experts)."""
    total = 0
    for t, (_name, parts) in rank_tensors(m, tp=tp, dtype=dtype, quant=quant, ep=ep):
        if (pick == "attention" and _ATTENTION in t.name) or (
                pick == "embedding" and t.kind == "embedding") or (
                pick == "shared" and _SHARED in t.name):
            total += sum(parts)
    return total


def replicated_shared_expert_delta(m: ModelSpec, *, moe_tp: int, ep: int, dtype: str,
                                   quant: QuantSpec | None) -> int:
    """Bytes to add when the shared experts are whole on every GPU instead of split over
    `moe_tp` (SGLang with an all-to-all backend: DeepseekV2MoE builds shared_experts with
    tp_rank=0, tp_size=1 when get_moe_a2a_backend().is_deepep(), models/deepseek_v2.py)."""
    return (_bytes_of(m, tp=1, ep=ep, dtype=dtype, quant=quant, pick="shared")
            - _bytes_of(m, tp=moe_tp, ep=ep, dtype=dtype, quant=quant, pick="shared"))


def dp_attention_weight_delta(m: ModelSpec, *, attn_tp: int, moe_tp: int, ep: int, dtype: str,
                              quant: QuantSpec | None, replicate_embedding: bool) -> int:
    """Bytes to add to a model sized at TP `moe_tp` so that its attention is split over
    `attn_tp` ranks only (DP attention: each DP rank's attention group) and, where the engine
    does so, its input embedding is whole on every GPU (SGLang: VocabParallelEmbedding(...,
    enable_tp=not is_dp_attention_enabled()) in models/deepseek_v2.py, qwen3_moe.py,
    llama4.py, 0.4.6-0.5.x)."""
    if attn_tp == moe_tp and not replicate_embedding:
        return 0
    delta = (_bytes_of(m, tp=attn_tp, ep=ep, dtype=dtype, quant=quant, pick="attention")
             - _bytes_of(m, tp=moe_tp, ep=ep, dtype=dtype, quant=quant, pick="attention"))
    # MLA with a quantized kv_b_proj: its dequantized per-head copies follow the attention TP
    delta += (mla_dequantized_copy_bytes(m, attn_tp, quant, dtype)
              - mla_dequantized_copy_bytes(m, moe_tp, quant, dtype)) * m.num_layers
    if replicate_embedding:
        delta += (_bytes_of(m, tp=1, ep=ep, dtype=dtype, quant=quant, pick="embedding")
                  - _bytes_of(m, tp=moe_tp, ep=ep, dtype=dtype, quant=quant, pick="embedding"))
    return delta


# ------------------------------------------------------------------------ DeepEP buffers
# DeepEP (deepseek-ai/DeepEP @dd758caf, csrc/legacy/config.hpp and deep_ep/buffers/legacy.py),
# as SGLang sizes one Buffer per GPU (python/sglang/srt/layers/moe/token_dispatcher/deepep.py
# @003a81bf DeepEPBuffer.get_deepep_buffer): the normal-mode NVLink buffer is the larger of the
# dispatch and combine configs' get_nvl_buffer_size_hint(hidden × param_bytes, ranks); the RDMA
# buffer the larger of the normal-mode get_rdma_buffer_size_hint (0 up to 8 ranks) and the
# low-latency get_low_latency_rdma_size_hint(128 tokens per rank, hidden, ranks, experts).
DEEPEP_NUM_SMS = 20  # Buffer.num_sms
DEEPEP_LL_TOKENS = 128  # SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK default
NVL_PEERS = 8  # LEGACY_NUM_MAX_NVL_PEERS
_TOPK_IDX_BYTES = 8  # EP_NUM_TOPK_IDX_BITS 64 (deep_ep/include/deep_ep/common/compiled.cuh)
_SOURCE_META_BYTES = 8  # struct SourceMeta {int src_rdma_rank, is_token_in_nvl_rank_bits;}
_MAX_TOPK = _MAX_SCALES = 128
# (num_max_nvl_chunked_recv_tokens, num_max_rdma_chunked_send_tokens,
# num_max_rdma_chunked_recv_tokens) of Buffer.get_dispatch_config / get_combine_config by EP
# ranks; Config() rounds the RDMA receive tokens up to a multiple of the send tokens.
_DISPATCH = {2: (256, 6, 128), 4: (256, 6, 128), 8: (256, 6, 128), 16: (288, 20, 128),
             24: (288, 8, 128), 32: (288, 8, 128), 48: (288, 8, 128), 64: (288, 8, 128),
             96: (480, 12, 128), 128: (560, 12, 128), 144: (720, 12, 128), 160: (720, 12, 128)}
_COMBINE = {2: (256, 6, 128), 4: (256, 6, 128), 8: (256, 6, 128), 16: (288, 12, 128),
            24: (288, 8, 128), 32: (288, 8, 128), 48: (288, 8, 128), 64: (288, 8, 128),
            96: (480, 8, 128), 128: (560, 8, 128), 144: (720, 8, 128), 160: (720, 8, 128)}


def _align(n: int, to: int) -> int:
    return cdiv(n, to) * to


def deepep_nvl_bytes(hidden_bytes: int, ranks: int, recv_tokens: int,
                     num_sms: int = DEEPEP_NUM_SMS) -> int:
    """Config::get_nvl_buffer_size_hint."""
    rdma_ranks, nvl_ranks = max(ranks // NVL_PEERS, 1), min(ranks, NVL_PEERS)
    channels = num_sms // 2
    per = channels * nvl_ranks
    n = per * (2 * rdma_ranks + 3) * 4
    n += per * recv_tokens * (hidden_bytes + _SOURCE_META_BYTES + _MAX_TOPK * _TOPK_IDX_BYTES
                              + _MAX_TOPK * 4 + _MAX_SCALES * 4)
    return _align(n, 128)


def deepep_rdma_bytes(hidden_bytes: int, ranks: int, recv_tokens: int,
                      num_sms: int = DEEPEP_NUM_SMS) -> int:
    """Config::get_rdma_buffer_size_hint: 0 within one NVLink domain of 8."""
    if ranks <= NVL_PEERS:
        return 0
    rdma_ranks, channels = ranks // NVL_PEERS, num_sms // 2
    per = channels * rdma_ranks
    n = per * (NVL_PEERS * 2 + 2) * 2 * 4
    n += per * recv_tokens * 2 * (hidden_bytes + _SOURCE_META_BYTES + _MAX_TOPK * _TOPK_IDX_BYTES
                                  + _MAX_TOPK * 4 + _MAX_SCALES * 4 + 16)
    return _align(n, 128)


def deepep_low_latency_bytes(tokens: int, hidden: int, experts: int) -> int:
    """get_low_latency_rdma_size_hint: LowLatencyLayout's two send, two receive and two
    signalling buffers, rounded up past the next 128 bytes."""
    scales = hidden // 128
    dispatch_msg = 16 + max(hidden * 2, hidden + scales * 4)
    combine_msg = scales * 4 + hidden * 2
    send = max(tokens * dispatch_msg, experts * tokens * combine_msg)
    recv = max(experts * tokens * dispatch_msg, experts * tokens * combine_msg)
    signal = _align(experts * 4, 128)
    total = 2 * send + 2 * recv + 2 * signal
    return (total + 128) // 128 * 128


def deepep_buffer_bytes(*, hidden: int, experts: int, ranks: int, param_bytes: int,
                        tokens: int = DEEPEP_LL_TOKENS) -> int:
    """One GPU's DeepEP Buffer in SGLang's default deepep_mode "auto" (normal and low-latency
    both enabled): NVLink bytes + RDMA bytes. `experts`: physical experts (E + redundant)."""
    key = min((k for k in _DISPATCH if k >= ranks), default=max(_DISPATCH))
    hidden_bytes = hidden * param_bytes
    nvl = rdma = 0
    for nvl_recv, rdma_send, rdma_recv in (_DISPATCH[key], _COMBINE[key]):
        nvl = max(nvl, deepep_nvl_bytes(hidden_bytes, ranks, nvl_recv))
        rdma = max(rdma, deepep_rdma_bytes(hidden_bytes, ranks, _align(rdma_recv, rdma_send)))
    return nvl + max(rdma, deepep_low_latency_bytes(tokens, hidden, experts))
