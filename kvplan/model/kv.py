"""KV-cache layout: per-layer specs, layer groups, bytes per block, per-request need (vLLM V1).

Sources (vLLM 0.33.0 unless noted; reference/ENGINE_MEMORY.md §1.3–1.4):
* vllm/v1/kv_cache_interface.py — page per layer per block:
  full / sliding / chunked attention: block_size × 2 × kv_heads_per_gpu × head_dim × dtype bytes,
  kv_heads_per_gpu = max(1, kv_heads // tp) (vllm/config/model.py get_num_kv_heads);
  MLA: block_size × (kv_lora_rank + qk_rope_head_dim) × dtype bytes, one head, replicated on
  every TP rank (vllm/model_executor/layers/attention/mla_attention.py);
  Mamba / Gated DeltaNet: the per-request state (conv + ssm, TP-sharded), padded up to the
  attention page (vllm/platforms/interface.py _align_hybrid_block_size).
* vllm/v1/core/kv_cache_planning.py — one group when every layer has the same spec; otherwise
  layers are bucketed by spec and cut into groups of equal size (padding with virtual layers);
  a block id spans one page in every layer slot of a group, so
  bytes_per_block = group_size × page.
* Per-request pages at length L: full/MLA cdiv(L, bs); sliding window W
  cdiv(min(W − 1 + in_flight, L), bs) + 1; Mamba 1 page (3 in prefix-caching "align" mode).
* Encoder-decoder models (Whisper; vllm/v1/kv_cache_interface.py CrossAttentionSpec, main @
  00a23257): every decoder layer adds a cross-attention layer of the same page size in its own
  group ("cross"), holding the encoder's frames: cdiv(encoder tokens, bs) pages per request,
  whatever the decoder length (max_memory_usage_bytes reads
  scheduler_config.max_num_encoder_input_tokens, 1500 for Whisper).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..specs import ModelSpec, per_object
from ..units import DTYPE_BYTES, cdiv

LayerKind = Literal["full", "sliding", "mla", "mamba", "cross"]
ALIGN_TOKENS = 16  # attention kernels' block-size multiple (FlashAttention MultipleOf(16))


def kv_heads_per_gpu(m: ModelSpec, tp: int) -> int:
    """KV heads each TP rank stores; replicated once tp ≥ kv_heads."""
    return max(1, m.num_kv_heads // tp)


def kv_bytes_per_token_per_layer(m: ModelSpec, *, tp: int, kv_dtype: str) -> int:
    """One token in one attention layer on one GPU: MLA (kv_lora_rank + qk_rope_head_dim) × dt,
    else 2 × kv_heads_per_gpu × head_dim × dt."""
    dt = DTYPE_BYTES[kv_dtype]
    if m.mla is not None:
        return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * dt
    return 2 * kv_heads_per_gpu(m, tp) * m.head_dim * dt


def mamba_state_bytes(m: ModelSpec, *, tp: int, state_dtype: str) -> int:
    """Per-request recurrent state of one linear-attention layer on one GPU
    (vllm/model_executor/layers/mamba/mamba_utils.py; ENGINE_MEMORY §1.3), model dtype:
    Gated DeltaNet: conv ((2·k_heads·dk + v_heads·dv) / tp) × (kernel − 1)
                    + ssm (v_heads / tp) × dv × dk;
    Mamba1: conv (d_inner / tp) × (kernel − 1) + ssm (d_inner / tp) × d_state;
    Mamba2: conv ((d_inner + 2·n_groups·d_state) / tp) × (kernel − 1)
            + ssm (heads / tp) × head_dim × d_state, n_groups padded up to a multiple of tp;
    the SSM part in its own dtype where the model sets one (Nemotron-H: float32)."""
    la = m.linear_attention
    assert la is not None
    dt = DTYPE_BYTES[state_dtype]
    ssm_dt = DTYPE_BYTES[la.ssm_dtype] if la.ssm_dtype else dt
    if la.kind == "mamba1":
        inner = cdiv(la.intermediate_size, tp)
        return inner * (la.conv_kernel - 1) * dt + inner * la.state_size * ssm_dt
    if la.kind == "mamba2":
        groups = la.n_groups if la.n_groups % tp == 0 else cdiv(la.n_groups, tp) * tp
        conv = cdiv(la.intermediate_size + 2 * groups * la.state_size, tp)
        ssm = cdiv(la.num_heads, tp) * la.head_dim * la.state_size
        return conv * (la.conv_kernel - 1) * dt + ssm * ssm_dt
    conv = cdiv(2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim, tp)
    ssm = cdiv(la.num_value_heads, tp) * la.value_head_dim * la.key_head_dim
    return (conv * (la.conv_kernel - 1) + ssm) * dt


@dataclass(frozen=True)
class LayerKv:
    """One layer's cache on one GPU."""

    kind: LayerKind
    bytes_per_token: int  # attention layers; 0 for Mamba
    window: int | None = None  # sliding layers; cross layers: encoder tokens per request
    state_bytes: int = 0  # Mamba layers


def layer_specs(m: ModelSpec, layers: range, *, tp: int, kv_dtype: str, state_dtype: str,
                hybrid_manager: bool) -> list[LayerKv]:
    """Specs of the given layers. Without the hybrid manager (disabled, or auto-disabled for
    chunked local attention) sliding and chunked layers are allocated as full attention."""
    per_token = kv_bytes_per_token_per_layer(m, tp=tp, kv_dtype=kv_dtype)
    made: dict[str, list[LayerKv]] = {}  # each kind's specs, made once (they are frozen)
    out = []
    for i in layers:
        kind = m.layer_types[i] if m.layer_types else "full"
        specs = made.get(kind)
        if specs is None:
            specs = made[kind] = _layer_kv(m, kind, tp=tp, per_token=per_token,
                                           state_dtype=state_dtype, hybrid_manager=hybrid_manager)
        out += specs
    return out


def _layer_kv(m: ModelSpec, kind: str, *, tp: int, per_token: int, state_dtype: str,
              hybrid_manager: bool) -> list[LayerKv]:
    """layer_specs of one layer of this kind."""
    if kind == "none":
        return []  # an MLP-only block holds no cache
    if kind == "linear":
        out = [LayerKv("mamba", 0, state_bytes=mamba_state_bytes(m, tp=tp,
                                                                 state_dtype=state_dtype))]
    elif m.mla is not None:
        out = [LayerKv("mla", per_token)]
    elif kind == "sliding" and hybrid_manager and m.sliding_window:
        out = [LayerKv("sliding", per_token, window=m.sliding_window)]
    else:  # full, or sliding/chunked promoted to full
        out = [LayerKv("full", per_token)]
    if m.cross_attention_tokens:  # Whisper: the layer's cross-attention
        out.append(LayerKv("cross", per_token, window=m.cross_attention_tokens))
    return out


@dataclass(frozen=True)
class KvGroup:
    kind: LayerKind
    window: int | None
    layers: int  # real layers in this group
    slots: int  # group size (real + virtual padding layers)


@dataclass(frozen=True)
class KvLayout:
    """How one worker's KV memory is cut into blocks."""

    block_size: int
    page_bytes: int  # one layer, one block (all groups share it after unification)
    groups: tuple[KvGroup, ...]
    bytes_per_block: int
    padding_layers: int
    mamba_page_padding_bytes: int  # per Mamba page, added to reach the attention page

    @property
    def hybrid(self) -> bool:
        return len(self.groups) > 1

    def blocks_per_request(self, length: int, *, in_flight: int, mamba_pages: int) -> int:
        """Σ over groups of the pages one request of `length` tokens holds."""
        bs, total = self.block_size, 0
        for g in self.groups:
            if g.kind == "sliding" and g.window:
                total += cdiv(min(g.window - 1 + in_flight, length), bs) + 1
            elif g.kind == "mamba":
                total += mamba_pages
            elif g.kind == "cross" and g.window:  # encoder frames, fixed per request
                total += cdiv(g.window, bs)
            else:
                total += cdiv(length, bs)
        return total


def _kv_groups(specs: list[LayerKv], group_rule: Literal["min", "max_if_close"],
               times: int = 1) -> tuple[KvGroup, ...]:
    """Layers bucketed by (kind, window), each bucket cut into groups of one size; `specs`
    stand for `times` copies of themselves (kv_layout)."""
    buckets: dict[tuple[LayerKind, int | None], int] = {}
    for s in specs:
        key = (s.kind, s.window)
        buckets[key] = buckets.get(key, 0) + times
    if len(buckets) == 1:
        (kind, window), n = next(iter(buckets.items()))
        return (KvGroup(kind, window, n, n),)
    lo, hi = min(buckets.values()), max(buckets.values())
    size = hi if group_rule == "max_if_close" and hi < 1.5 * lo else lo
    out = []
    for (kind, window), n in buckets.items():
        for start in range(0, n, size):
            out.append(KvGroup(kind, window, min(size, n - start), size))
    return tuple(out)


def kv_layout(specs: list[LayerKv], *, block_size: int, block_size_fixed: bool,
              group_rule: Literal["min", "max_if_close"], times: int = 1) -> KvLayout:
    """Groups, page and bytes per block for one worker's layers: `specs`, `times` over (a
    stage of identical layers is one layer's specs, times its layers; never 0).

    Mamba layers raise the attention block size (unless the user fixed it) to the smallest
    multiple of 16 whose attention page holds the state, and pad the state to that page.
    Group size: the smallest bucket (0.11–0.19); from 0.20 the largest when it is under
    1.5 × the smallest (kv_cache_planning.py)."""
    attn = [s for s in specs if s.kind != "mamba"]
    mamba = [s for s in specs if s.kind == "mamba"]
    per_token = max((s.bytes_per_token for s in attn), default=0)
    bs = block_size
    state = max((s.state_bytes for s in mamba), default=0)
    if mamba and per_token and not block_size_fixed:
        bs = ALIGN_TOKENS * cdiv(state, ALIGN_TOKENS * per_token)
        bs = max(bs, block_size)
    page = bs * per_token if per_token else state
    pad = (page - state) if mamba else 0
    groups = _kv_groups(specs, group_rule, times)
    slots = max(g.slots for g in groups)
    padding = sum(g.slots - g.layers for g in groups)
    per_block = slots * page
    if len(groups) == 1 and groups[0].kind in ("full", "mla"):
        # One attention type with per-layer sizes that differ (a draft model's layers beside the
        # target's): one UniformTypeKVCacheSpecs group whose page is the sum of the layers'
        # pages (vllm/v1/core/kv_cache_utils.py, 0.33). Equal sizes: slots × page as before.
        per_block = bs * times * sum(s.bytes_per_token for s in specs)
    return KvLayout(block_size=bs, page_bytes=page, groups=groups, bytes_per_block=per_block,
                    padding_layers=padding, mamba_page_padding_bytes=pad)


def stage_kv(m: ModelSpec, layers: range, *, tp: int, kv_dtype: str, state_dtype: str,
             hybrid_manager: bool, block_size: int, block_size_fixed: bool,
             group_rule: Literal["min", "max_if_close"]) -> tuple[KvLayout, int]:
    """kv_layout(layer_specs(…)) of one worker's layers and their summed KV bytes per token,
    memoised per model object and arguments (a ModelSpec is frozen; planning searches and
    sweeps re-ask the same stage; where every layer is alike, any stage as long)."""
    return _stage_kv(m, range(len(layers)) if not m.layer_types else layers, tp=tp,
                     kv_dtype=kv_dtype, state_dtype=state_dtype, hybrid_manager=hybrid_manager,
                     block_size=block_size, block_size_fixed=block_size_fixed,
                     group_rule=group_rule)


@per_object(1024)
def _stage_kv(m: ModelSpec, layers: range, *, tp: int, kv_dtype: str, state_dtype: str,
              hybrid_manager: bool, block_size: int, block_size_fixed: bool,
              group_rule: Literal["min", "max_if_close"]) -> tuple[KvLayout, int]:
    times = 1
    if not m.layer_types and len(layers) > 1:  # every layer alike: one, times the stage's
        layers, times = range(1), len(layers)
    specs = layer_specs(m, layers, tp=tp, kv_dtype=kv_dtype, state_dtype=state_dtype,
                        hybrid_manager=hybrid_manager)
    layout = kv_layout(specs, block_size=block_size, block_size_fixed=block_size_fixed,
                       group_rule=group_rule, times=times)
    return layout, times * sum(x.bytes_per_token for x in specs)
