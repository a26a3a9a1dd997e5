"""Parameter counts and weight bytes per GPU, from one enumeration of the model's tensors.

Each tensor is listed once with its full shape and how vLLM shards it; the total parameter
count and the bytes on any (TP rank, PP stage) are two views of the same list.
Sharding rules are vLLM's (0.33.0): column/row-parallel linears split by TP; the vocabulary is
padded to a multiple of 64 and then split (vllm/model_executor/layers/vocab_parallel_embedding.py);
K/V projections keep max(1, kv_heads // tp) heads per rank, i.e. replicate when tp > kv_heads
(vllm/model_executor/layers/linear.py QKVParallelLinear); norms and MoE routers are replicated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import Literal, NamedTuple

from ..specs import ModelSpec, QuantSpec, SpeculativeConfig, VisionSpec, per_object
from ..units import DTYPE_BYTES, cdiv, fast_init
from .allocator import CachingAllocator, PoolMemo, malloc_chunks
from .tensor_names import (
    FLOAT_DTYPES,
    SAFETENSORS_DTYPE_BYTES,
    is_encoder,
    is_scale,
    layer_of,
    skipped_by_vllm,
)

VOCAB_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE

Kind = Literal["embedding", "lm_head", "linear", "expert", "bias", "norm", "router", "vision",
               "dense"]  # dense: an unquantized nn.Linear (EAGLE fc, MTP eh_proj)
# How a tensor is split over TP ranks: "out" = rows (column-parallel), "in" = cols
# (row-parallel), "kv" = rows by KV heads with replication, "vocab" = padded vocab rows.
Split = Literal["out", "in", "kv", "vocab", "none"]


class Tensor(NamedTuple):  # a NamedTuple: a 405B model lists a thousand of them, cold
    name: str
    kind: Kind
    rows: int
    cols: int
    split: Split
    layer: int | None  # None: embedding / final norm / lm_head / vision tower
    experts: int = 1  # "expert" tensors: rows = experts × rows of one expert
    dtype: str | None = None  # fixed storage dtype (e.g. fp32 buffers); None = model dtype


def _attention(m: ModelSpec, i: int, p: str) -> Iterator[Tensor]:
    """GQA/MQA attention (Llama family): q, k, v, o (+ biases, q/k norms, gpt-oss sinks,
    Qwen3-Next's output gate, which doubles q_proj's rows)."""
    h, hd = m.hidden_size, m.head_dim
    q_out, kv_out = m.num_attention_heads * hd, m.num_kv_heads * hd
    yield Tensor(p + "q_proj", "linear", q_out * (2 if m.gated_attention else 1), h, "out", i)
    yield Tensor(p + "k_proj", "linear", kv_out, h, "kv", i)
    yield Tensor(p + "v_proj", "linear", kv_out, h, "kv", i)
    yield Tensor(p + "o_proj", "linear", h, q_out, "in", i)
    if m.qkv_bias:
        yield Tensor(p + "q_proj.bias", "bias", q_out, 1, "out", i)
        yield Tensor(p + "k_proj.bias", "bias", kv_out, 1, "kv", i)
        yield Tensor(p + "v_proj.bias", "bias", kv_out, 1, "kv", i)
    if m.o_bias:
        yield Tensor(p + "o_proj.bias", "bias", h, 1, "none", i)
    if m.qk_norm and m.qk_norm_layout == "per_head":  # commandr.py LayerNorm((heads, hd))
        yield Tensor(p + "q_norm", "norm", q_out, 1, "out", i)
        yield Tensor(p + "k_norm", "norm", kv_out, 1, "kv", i)
    elif m.qk_norm and m.qk_norm_layout == "full_width":  # olmo2.py RMSNorm(heads × hd)
        yield Tensor(p + "q_norm", "norm", q_out, 1, "none", i)
        yield Tensor(p + "k_norm", "norm", kv_out, 1, "none", i)
    elif m.qk_norm and m.qk_norm_layout == "full_width_tp":
        # MiniMax-M2 (vllm/model_executor/models/minimax_m2.py, MiniMaxText01RMSNormTP): one
        # weight per q / k channel of all heads, each TP rank holding 1/tp of it.
        yield Tensor(p + "q_norm", "norm", q_out, 1, "out", i)
        yield Tensor(p + "k_norm", "norm", kv_out, 1, "out", i)
    elif m.qk_norm:
        yield Tensor(p + "q_norm", "norm", hd, 1, "none", i)
        yield Tensor(p + "k_norm", "norm", hd, 1, "none", i)
    if m.attention_sinks:
        yield Tensor(p + "sinks", "bias", m.num_attention_heads, 1, "out", i)


def _mla(m: ModelSpec, i: int, p: str) -> Iterator[Tensor]:
    """DeepSeek MLA (vllm/model_executor/models/deepseek_v2.py): the low-rank down-projections
    q_a / kv_a (with the shared rope key) are replicated on every TP rank; q_b (or q), kv_b and
    o are split by heads."""
    a = m.mla or m.mla_projections
    assert a is not None
    h, heads = m.hidden_size, m.num_attention_heads
    q_head = a.qk_nope_head_dim + a.qk_rope_head_dim
    if a.q_lora_rank:
        yield Tensor(p + "q_a_proj", "linear", a.q_lora_rank, h, "none", i)
        yield Tensor(p + "q_a_layernorm", "norm", a.q_lora_rank, 1, "none", i)
        yield Tensor(p + "q_b_proj", "linear", heads * q_head, a.q_lora_rank, "out", i)
    else:
        yield Tensor(p + "q_proj", "linear", heads * q_head, h, "out", i)
    yield Tensor(p + "kv_a_proj_with_mqa", "linear", a.kv_lora_rank + a.qk_rope_head_dim, h,
                 "none", i)
    yield Tensor(p + "kv_a_layernorm", "norm", a.kv_lora_rank, 1, "none", i)
    yield Tensor(p + "kv_b_proj", "linear", heads * (a.qk_nope_head_dim + a.v_head_dim),
                 a.kv_lora_rank, "out", i)
    yield Tensor(p + "o_proj", "linear", h, heads * a.v_head_dim, "in", i)


def _gated_deltanet(m: ModelSpec, i: int, p: str) -> Iterator[Tensor]:
    """Qwen3-Next Gated DeltaNet layer (vllm/model_executor/models/qwen3_next.py): fused
    in_proj_qkvz and in_proj_ba, a depthwise conv over q/k/v channels, per-head A_log and
    dt_bias, a gated RMSNorm over the value head dim, out_proj."""
    la = m.linear_attention
    assert la is not None
    h = m.hidden_size
    qk, v = la.num_key_heads * la.key_head_dim, la.num_value_heads * la.value_head_dim
    yield Tensor(p + "in_proj_qkvz", "linear", 2 * qk + 2 * v, h, "out", i)
    yield Tensor(p + "in_proj_ba", "linear", 2 * la.num_value_heads, h, "out", i)
    yield Tensor(p + "conv1d", "bias", 2 * qk + v, la.conv_kernel, "out", i)
    yield Tensor(p + "A_log", "bias", la.num_value_heads, 1, "out", i)
    yield Tensor(p + "dt_bias", "bias", la.num_value_heads, 1, "out", i)
    yield Tensor(p + "norm", "norm", la.value_head_dim, 1, "none", i)
    yield Tensor(p + "out_proj", "linear", h, v, "in", i)


def _mamba(m: ModelSpec, i: int, p: str) -> Iterator[Tensor]:
    """Mamba mixers (vllm/model_executor/layers/mamba/mamba_mixer.py, mamba_mixer2.py).
    Mamba1 (Jamba): in_proj [2·d_inner, H], depthwise conv [d_inner, kernel] (+ bias),
    x_proj [dt_rank + 2·d_state, d_inner] (row-parallel), dt_proj [d_inner, dt_rank] + bias,
    A [d_inner, d_state], D [d_inner], out_proj [H, d_inner]; Jamba adds RMSNorms over dt, B, C.
    Mamba2 (Bamba): in_proj [2·d_inner + 2·groups·d_state + heads, H], conv over
    d_inner + 2·groups·d_state channels (+ bias), A_log, D, dt_bias per head, a gated RMSNorm
    over d_inner, out_proj [H, d_inner]."""
    la = m.linear_attention
    assert la is not None
    h, inner, st = m.hidden_size, la.intermediate_size, la.state_size
    if la.kind == "mamba1":
        yield Tensor(p + "in_proj", "linear", 2 * inner, h, "out", i)
        yield Tensor(p + "conv1d", "bias", inner, la.conv_kernel + int(la.conv_bias), "out", i)
        yield Tensor(p + "x_proj", "linear", la.dt_rank + 2 * st, inner, "in", i)
        yield Tensor(p + "dt_proj", "linear", inner, la.dt_rank, "out", i)
        yield Tensor(p + "dt_proj.bias", "bias", inner, 1, "out", i)
        yield Tensor(p + "A", "bias", inner, st, "out", i)
        yield Tensor(p + "D", "bias", inner, 1, "out", i)
        yield Tensor(p + "out_proj", "linear", h, inner, "in", i)
        if m.model_type == "jamba":
            yield Tensor(p + "dt_bc_layernorms", "norm", la.dt_rank + 2 * st, 1, "none", i)
        return
    conv = inner + 2 * la.n_groups * st
    yield Tensor(p + "in_proj", "linear", inner + conv + la.num_heads, h, "out", i)
    if la.in_proj_bias:
        yield Tensor(p + "in_proj.bias", "bias", inner + conv + la.num_heads, 1, "out", i)
    yield Tensor(p + "conv1d", "bias", conv, la.conv_kernel + int(la.conv_bias), "out", i)
    yield Tensor(p + "A_log_D_dt_bias", "bias", 3 * la.num_heads, 1, "out", i)
    yield Tensor(p + "norm", "norm", inner, 1, "out", i)
    yield Tensor(p + "out_proj", "linear", h, inner, "in", i)


def _mlp(m: ModelSpec, i: int, p: str) -> Iterator[Tensor]:
    h, moe = m.hidden_size, m.moe
    if moe is not None and i in moe.moe_layers:
        e, inter = moe.num_experts, moe.expert_intermediate_size
        yield Tensor(p + "mlp.gate", "router", e, h, "none", i, dtype=moe.router_dtype)
        if moe.router_bias:
            yield Tensor(p + "mlp.gate.bias", "router", e, 1, "none", i)
        if moe.score_correction_bias:
            yield Tensor(p + "mlp.gate.e_score_correction_bias", "router", e, 1, "none", i,
                         dtype="float32")
        # Fused expert weights: w13 [E, 2I, H] split on I, w2 [E, H, I] split on I.
        yield Tensor(p + "mlp.experts.w13", "expert", e * 2 * inter, h, "out", i, experts=e)
        yield Tensor(p + "mlp.experts.w2", "expert", e * h, inter, "in", i, experts=e)
        if moe.expert_bias:
            yield Tensor(p + "mlp.experts.w13_bias", "bias", e * 2 * inter, 1, "out", i, experts=e)
            yield Tensor(p + "mlp.experts.w2_bias", "bias", e * h, 1, "none", i, experts=e)
        if moe.shared_expert_intermediate_size:
            s = moe.shared_expert_intermediate_size
            yield Tensor(p + "mlp.shared_expert.gate_up_proj", "linear", 2 * s, h, "out", i)
            yield Tensor(p + "mlp.shared_expert.down_proj", "linear", h, s, "in", i)
        if moe.shared_expert_gate:
            yield Tensor(p + "mlp.shared_expert_gate", "router", 1, h, "none", i)
    else:
        inter, n = m.intermediate_size, 2 if m.mlp_gated else 1  # gate_up, or up alone (relu²)
        yield Tensor(p + "mlp.gate_up_proj", "linear", n * inter, h, "out", i)
        yield Tensor(p + "mlp.down_proj", "linear", h, inter, "in", i)
        if m.mlp_bias:
            yield Tensor(p + "mlp.gate_up_proj.bias", "bias", n * inter, 1, "out", i)
            yield Tensor(p + "mlp.down_proj.bias", "bias", h, 1, "none", i)


def _layer_spec(m: ModelSpec, i: int) -> tuple[str, bool, bool]:
    """All that _layer_tensors reads of the layer index `i` besides naming it (the "layers.{i}."
    prefix and Tensor.layer): the layer's mixer kind, whether it has an MLP, whether that MLP is
    a MoE. Two layers with one spec list the same tensors under their own prefixes (_layers
    lists one of them per spec; tests/model/test_weights.py checks every catalogue model)."""
    return (m.layer_types[i] if m.layer_types else "full",
            m.mlp_layers is None or i in m.mlp_layers,
            m.moe is not None and i in m.moe.moe_layers)


def _layer_tensors(m: ModelSpec, i: int) -> Iterator[Tensor]:
    # what this reads of `i` beyond the prefix and Tensor.layer is in _layer_spec (and _mlp)
    p = f"layers.{i}."
    kind = m.layer_types[i] if m.layer_types else "full"
    if kind == "none":
        pass  # an MLP-only block (Nemotron-H '-')
    elif (kind == "linear" and m.linear_attention is not None
          and m.linear_attention.kind != "gated_deltanet"):
        yield from _mamba(m, i, p + "mamba.")
    elif kind == "linear":
        yield from _gated_deltanet(m, i, p + "linear_attn.")
    elif m.mla is not None or m.mla_projections is not None:  # MLA, or MiniCPM3's projections
        yield from _mla(m, i, p + "self_attn.")
    else:
        yield from _attention(m, i, p + "self_attn.")
    if m.cross_attention_tokens:  # encoder-decoder (Whisper): the decoder's cross-attention
        yield from _cross_attention(m, i, p + "encoder_attn.")
    for n in range(m.norms_per_layer if m.norm_weights else 0):
        yield Tensor(p + f"norm{n}", "norm", m.hidden_size, 1, "none", i)
        if m.norm_bias:
            yield Tensor(p + f"norm{n}.bias", "norm", m.hidden_size, 1, "none", i)
    if m.mlp_layers is None or i in m.mlp_layers:
        yield from _mlp(m, i, p)


def _vit_layers(name: str, v, *, gated: bool = False, rms: bool = False,
                bias: bool = True) -> Iterator[Tensor]:
    """Encoder layers as vLLM builds them: q/k/v (QKVParallelLinear) and fc1 / gate_up
    column-parallel, o and fc2 / down row-parallel, so each is split by TP; a column-parallel
    bias splits with its rows (one extra column), a row-parallel bias is replicated; two norms
    per layer (LayerNorm weight + bias, or RMSNorm weight)."""
    h, f = v.hidden_size, v.intermediate_size
    b = int(bias)
    for i in range(v.num_layers):
        p = f"{name}layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj"):
            yield Tensor(p + proj, "vision", h, h + b, "out", None)
        yield Tensor(p + "o_proj", "vision", h, h, "in", None)
        if bias:
            yield Tensor(p + "o_proj.bias", "norm", h, 1, "none", None)
        yield Tensor(p + ("gate_up_proj" if gated else "fc1"), "vision", f * (2 if gated else 1),
                     h + b, "out", None)
        yield Tensor(p + ("down_proj" if gated else "fc2"), "vision", h, f, "in", None)
        if bias:
            yield Tensor(p + "fc2.bias", "norm", h, 1, "none", None)
        yield Tensor(p + "layer_norms", "norm", (2 if rms else 4) * h, 1, "none", None)


def _vision_tensors(m: ModelSpec) -> Iterator[Tensor]:
    """Vision tower + projector, counted from vision_config as vLLM builds them (vLLM main,
    vllm/model_executor/models/*.py). Patch/position embeddings, norms and replicated linears
    stay whole on every TP rank; encoder linears and column/row-parallel projectors split.

    SigLIP (Gemma 3; siglip.py, gemma3_mm.py): conv patch embedding with bias, one position
    embedding per patch, biased q/k/v/o and fc1/fc2, two LayerNorms per layer, a
    post-LayerNorm; projector = soft-embedding RMSNorm + a vision→text matrix.
    Llama 4 (mllama4.py): unfold patch embedding without bias, class embedding, position
    embedding for patches + class, pre/post LayerNorms, per layer as SigLIP, a pixel-shuffle
    MLP adapter (projector_input_dim × hidden/ratio², projector_output_dim²) and a bias-free
    vision→text projector.
    CLIP (llava.py, llava_next.py, clip.py): class + bias-free conv patch + (patches + 1)
    position embeddings, pre-LayerNorm, only the layers up to vision_feature_layer
    (init_vision_tower_for_llava) and no post-LayerNorm (require_post_norm=False); projector
    linear_1 column- and linear_2 row-parallel with biases; LLaVA-NeXT adds image_newline.
    Pixtral (mistral3.py, pixtral.py PixtralHFVisionModel): bias-free conv patch, ln_pre
    RMSNorm, bias-free qkv/o and gated MLP with RMSNorms, 2-D RoPE (no weights); projector
    RMSNorm, patch merger nn.Linear(hidden·merge² → hidden) (replicated), linear_1/linear_2.
    Qwen2-VL / Qwen2.5-VL (qwen2_vl.py, qwen2_5_vl.py): bias-free Conv3d patch embedding
    (channels × temporal × patch²), biased qkv/proj, MLP fc1/fc2 (2-VL, LayerNorms) or gated
    gate_up/down with biases (2.5-VL, RMSNorms); merger = norm + column-parallel
    (hidden·merge²)² + row-parallel (hidden·merge² → LM hidden), both biased.
    Qwen3-VL (qwen3_vl.py): Conv3d patch embedding with bias, a learned position table
    (num_position_embeddings × hidden), blocks as Qwen2-VL (LayerNorms, fc1/fc2 with biases),
    the merger plus one deepstack merger per deepstack_visual_indexes entry (its LayerNorm over
    the merged hidden·merge² features).
    Phi-3-vision (phi3v.py): the CLIP tower as for LLaVA (layers up to img_processor.layer_idx,
    no post-LayerNorm); glb_GN / sub_GN separators of 4 · image_dim_out values and img_projection
    Linear(4 · image_dim_out → LM hidden) + Linear(hidden → hidden) with biases, nn.Linear
    (whole on every TP rank).
    Idefics3 (idefics3.py, idefics2_vision_model.py): the SigLIP tower (biased conv patch,
    position embedding per patch, post-LayerNorm) and a connector ReplicatedLinear
    (hidden·scale_factor² → LM hidden) without bias."""
    v = m.vision
    if v is None:
        return
    yield from _vision_encoder(v)
    yield from _vision_projector(v)


def _vision_encoder(v: VisionSpec) -> Iterator[Tensor]:
    """The tower's embeddings, norms and layers (_vision_tensors names the sources)."""
    h = v.hidden_size
    patches = (v.image_size // v.patch_size) ** 2
    patch_in = v.num_channels * v.patch_size ** 2
    name = "vision."
    if v.kind in {"siglip", "idefics3"}:
        yield Tensor(name + "patch_embedding", "vision", h, patch_in + 1, "none", None)
        yield Tensor(name + "position_embedding", "vision", patches, h, "none", None)
        yield Tensor(name + "post_layernorm", "norm", 2 * h, 1, "none", None)
        yield from _vit_layers(name, v)
    elif v.kind == "llama4":
        yield Tensor(name + "patch_embedding", "vision", h, patch_in, "none", None)
        yield Tensor(name + "class_embedding", "vision", h, 1, "none", None)
        yield Tensor(name + "positional_embedding", "vision", patches + 1, h, "none", None)
        yield Tensor(name + "layernorm_pre_post", "norm", 4 * h, 1, "none", None)
        yield from _vit_layers(name, v)
    elif v.kind in {"clip", "phi3v"}:
        yield Tensor(name + "patch_embedding", "vision", h, patch_in, "none", None)
        yield Tensor(name + "class_embedding", "vision", h, 1, "none", None)
        yield Tensor(name + "position_embedding", "vision", patches + 1, h, "none", None)
        yield Tensor(name + "pre_layrnorm", "norm", 2 * h, 1, "none", None)
        yield from _vit_layers(name, v)
    elif v.kind == "pixtral":
        yield Tensor(name + "patch_conv", "vision", h, patch_in, "none", None)
        yield Tensor(name + "ln_pre", "norm", h, 1, "none", None)
        yield from _vit_layers(name, v, gated=True, rms=True, bias=False)
    else:  # qwen2_vl, qwen2_5_vl, qwen3_vl
        qwen3 = v.kind == "qwen3_vl"
        yield Tensor(name + "patch_embed", "vision", h,
                     patch_in * v.temporal_patch_size + int(qwen3), "none", None)
        if qwen3:
            yield Tensor(name + "pos_embed", "vision", v.num_position_embeddings, h, "none", None)
        yield from _vit_layers(name, v, gated=v.kind == "qwen2_5_vl", rms=v.kind == "qwen2_5_vl")


def _vision_projector(v: VisionSpec) -> Iterator[Tensor]:
    """The projector into the language model (_vision_tensors names the sources)."""
    h, t = v.hidden_size, v.text_hidden_size
    name = "vision."
    if v.kind == "siglip":
        yield Tensor("multi_modal_projector.norm", "norm", h, 1, "none", None)
        yield Tensor("multi_modal_projector.proj", "vision", h, t, "none", None)
    elif v.kind == "llama4":
        ratio = v.pixel_shuffle_ratio or 0.5
        adapter_in = int(h / (ratio * ratio))
        pin, pout = v.projector_input_dim or adapter_in, v.projector_output_dim or h
        yield Tensor(name + "adapter.fc1", "vision", pin, adapter_in, "out", None)
        yield Tensor(name + "adapter.fc2", "vision", pout, pin, "in", None)
        yield Tensor("multi_modal_projector.linear_1", "vision", t, v.output_dim or pout, "out",
                     None)
    elif v.kind in {"clip", "pixtral"}:
        b = int(v.projector_bias)
        if v.kind == "pixtral":
            yield Tensor("multi_modal_projector.norm", "norm", h, 1, "none", None)
            yield Tensor("multi_modal_projector.patch_merger", "vision", h,
                         h * v.spatial_merge_size ** 2, "none", None)
        yield Tensor("multi_modal_projector.linear_1", "vision", t, h + b, "out", None)
        yield Tensor("multi_modal_projector.linear_2", "vision", t, t, "in", None)
        if b:
            yield Tensor("multi_modal_projector.linear_2.bias", "norm", t, 1, "none", None)
        if v.image_newline:
            yield Tensor("multi_modal_projector.image_newline", "norm", t, 1, "none", None)
    elif v.kind == "phi3v":  # HD transform separators + img_projection (nn.Linear, replicated)
        if v.config_num_layers is None:  # clip.py require_post_norm None: built with all layers
            yield Tensor(name + "post_layernorm", "norm", 2 * h, 1, "none", None)
        pin = v.projector_input_dim or 4 * h
        yield Tensor("multi_modal_projector.glb_GN_sub_GN", "norm", 2 * pin, 1, "none", None)
        yield Tensor("multi_modal_projector.img_projection.0", "vision", t, pin + 1, "none", None)
        yield Tensor("multi_modal_projector.img_projection.2", "vision", t, t + 1, "none", None)
    elif v.kind == "idefics3":
        yield Tensor("multi_modal_projector.proj", "vision", t, h * v.spatial_merge_size ** 2,
                     "none", None)
    else:  # Qwen-VL patch merger (+ Qwen3-VL's deepstack mergers, LayerNorm after the shuffle)
        merged = h * v.spatial_merge_size ** 2
        for j in range(1 + v.deepstack_mergers):
            p = "multi_modal_projector." + (f"deepstack.{j - 1}." if j else "")
            norm = merged if j else h  # deepstack mergers normalise the shuffled features
            ln = norm * (1 if v.kind == "qwen2_5_vl" else 2)  # RMSNorm, or LayerNorm + bias
            yield Tensor(p + "ln_q", "norm", ln, 1, "none", None)
            yield Tensor(p + "mlp0", "vision", merged, merged + 1, "out", None)
            yield Tensor(p + "mlp2", "vision", t, merged, "in", None)
            yield Tensor(p + "mlp2.bias", "norm", t, 1, "none", None)


def _embedding_extras(m: ModelSpec) -> Iterator[Tensor]:
    """Decoder families (fam-a), beside the token embedding, all replicated on every TP rank:
    learned positions (nn.Embedding in vllm gpt2.py / gpt_bigcode.py; opt.py's
    OPTLearnedPositionalEmbedding, +2 rows), Bloom's word_embeddings_layernorm (bloom.py),
    OPT's project_in (ReplicatedLinear word_embed_proj_dim → hidden, no bias; opt.py)."""
    if m.position_embedding_rows:
        yield Tensor("embed_positions", "dense", m.position_embedding_rows, m.hidden_size, "none",
                     None)
    if m.embedding_norm:
        yield Tensor("embed_norm", "norm", m.hidden_size, 1, "none", None)
        yield Tensor("embed_norm.bias", "norm", m.hidden_size, 1, "none", None)
    if m.word_embed_proj_dim:
        yield Tensor("project_in", "linear", m.hidden_size, m.word_embed_proj_dim, "none", None)


# fam-a: tensors outside the decoder layers that vLLM builds with the embedding (first PP stage)
_FIRST_STAGE_EXTRAS = ("embed_positions", "embed_norm", "project_in")


def tensors(m: ModelSpec) -> Iterator[Tensor]:
    """Every weight tensor of the model (unpadded, unsharded shapes)."""
    yield from _pre_tensors(m)
    for i in range(m.num_layers):
        yield from _layer_tensors(m, i)
    yield from _post_tensors(m)


def _pre_tensors(m: ModelSpec) -> Iterator[Tensor]:
    """The tensors `tensors` lists before the decoder layers: the embedding, then its extras."""
    embed_dim = m.word_embed_proj_dim or m.hidden_size  # OPT: the table is word_embed_proj_dim wide
    yield Tensor("embed_tokens", "embedding", m.vocab_size, embed_dim,
                 "none" if m.embedding_replicated else "vocab", None)
    yield from _embedding_extras(m)


def _post_tensors(m: ModelSpec) -> Iterator[Tensor]:
    """The tensors `tensors` lists after the decoder layers: final norm, LM head, encoders."""
    embed_dim = m.word_embed_proj_dim or m.hidden_size
    if m.final_norm and m.norm_weights:  # OLMo-1: LayerNorm(elementwise_affine=False), no tensors
        yield Tensor("norm", "norm", m.hidden_size, 1, "none", None)
        if m.norm_bias:
            yield Tensor("norm.bias", "norm", m.hidden_size, 1, "none", None)
    if m.word_embed_proj_dim:  # OPT project_out: ReplicatedLinear hidden → word_embed_proj_dim
        yield Tensor("project_out", "linear", m.word_embed_proj_dim, m.hidden_size, "none", None)
    if not m.tie_word_embeddings:
        yield Tensor("lm_head", "lm_head", m.vocab_size, embed_dim, "vocab", None)
    if m.lm_head_bias:  # ParallelLMHead(bias=True): one value per (padded) vocab row
        yield Tensor("lm_head.bias", "bias", m.vocab_size, 1, "vocab", None)
    yield from _vision_tensors(m)
    yield from _audio_tensors(m)


def _cross_attention(m: ModelSpec, i: int, p: str) -> Iterator[Tensor]:
    """Whisper's decoder cross-attention (whisper.py WhisperCrossAttention): q_proj
    (ColumnParallelLinear), kv_proj (MergedColumnParallelLinear [k; v], split by heads) and
    out_proj (RowParallelLinear), each d_model × d_model per projection, all with biases
    (the checkpoint's absent k bias is built and zero-filled)."""
    h = m.hidden_size
    yield Tensor(p + "q_proj", "linear", h, h, "out", i)
    yield Tensor(p + "q_proj.bias", "bias", h, 1, "out", i)
    yield Tensor(p + "kv_proj", "linear", 2 * h, h, "out", i)
    yield Tensor(p + "kv_proj.bias", "bias", 2 * h, 1, "out", i)
    yield Tensor(p + "out_proj", "linear", h, h, "in", i)
    yield Tensor(p + "out_proj.bias", "bias", h, 1, "none", i)


def _audio_tensors(m: ModelSpec) -> Iterator[Tensor]:
    """Whisper's encoder (whisper.py WhisperEncoder), built on the first PP stage: conv1
    Conv1d(num_mel_bins → d, kernel 3) and conv2 Conv1d(d → d, kernel 3, stride 2), both biased
    and replicated; embed_positions nn.Embedding(max_source_positions, d), replicated; layers as
    _vit_layers counts them (QKVParallelLinear with biases, out_proj and fc2 row-parallel with
    biases, fc1 column-parallel, two LayerNorms); a final LayerNorm (weight + bias)."""
    a = m.audio_encoder
    if a is None:
        return
    h, name = a.hidden_size, "audio_encoder."
    yield Tensor(name + "conv1", "vision", h, a.num_mel_bins * 3 + 1, "none", None)
    yield Tensor(name + "conv2", "vision", h, h * 3 + 1, "none", None)
    yield Tensor(name + "embed_positions", "vision", a.max_source_positions, h, "none", None)
    yield from _vit_layers(name, a)
    yield Tensor(name + "layer_norm", "norm", 2 * h, 1, "none", None)


@per_object(64)
def all_tensors(m: ModelSpec) -> tuple[Tensor, ...]:
    """`tensors(m)`, listed once per model object (every TP layout shards the same list)."""
    return tuple(tensors(m))


@per_object(256)
def parameter_count(m: ModelSpec, *, include_vision: bool = True) -> int:
    """Total parameters as published: unpadded vocabulary, tied head counted once. Memoised
    per model object (a ModelSpec is frozen): every plan of a sweep asks it. Counted by layer
    class (_layers: every layer of a class has its first layer's shapes), so a sweep never
    lists every layer's tensors; layer names ("layers.{i}.…") are never an encoder's."""
    lay = _layers(m)
    per_class = {c: sum(t.rows * t.cols for t in ts) for c, ts in lay.first.items()}
    return sum(map(per_class.__getitem__, lay.classes)) + sum(
        t.rows * t.cols for t, _, _ in lay.outside if include_vision or not t.name.startswith(
            ("vision.", "multi_modal_projector", "audio_encoder.")))


def pp_layer_ranges(num_layers: int, pp: int) -> list[range]:
    """Layers per PP stage as vLLM splits them (vllm/distributed/utils.py get_pp_indices):
    num_layers // pp each, the remainder added one by one to stages pp-2, pp-3, … so the
    last stage (which holds the LM head) stays light. A new list each call, of ranges worked
    out once per (num_layers, pp): every deployment planned asks it several times."""
    return list(_pp_layer_ranges(num_layers, pp))


@lru_cache(maxsize=1024)
def _pp_layer_ranges(num_layers: int, pp: int) -> tuple[range, ...]:
    sizes = [num_layers // pp] * pp
    for k in range(num_layers % pp):
        sizes[(pp - 2 - k) % pp] += 1
    out, start = [], 0
    for size in sizes:
        out.append(range(start, start + size))
        start += size
    return tuple(out)


def vocab_rows_per_rank(vocab_size: int, tp: int) -> int:
    """Rows of a vocab-parallel embedding / LM head on one TP rank: the vocabulary padded to a
    multiple of 64, then split (vocab_parallel_embedding.py)."""
    return cdiv(cdiv(vocab_size, VOCAB_PADDING) * VOCAB_PADDING, tp)


def _shard_rows(t: Tensor, m: ModelSpec, tp: int) -> tuple[int, int]:
    """(rows, cols) of tensor t on one TP rank."""
    if t.split == "out":
        return cdiv(t.rows, tp), t.cols
    if t.split == "in":
        return t.rows, cdiv(t.cols, tp)
    if t.split == "kv":
        heads_per_rank = max(1, m.num_kv_heads // tp)
        return heads_per_rank * (t.rows // m.num_kv_heads), t.cols
    if t.split == "vocab":
        return vocab_rows_per_rank(m.vocab_size, tp), t.cols
    return t.rows, t.cols


def _is_ignored(name: str, q: QuantSpec) -> bool:
    """Module patterns from modules_to_not_convert / ignore (plain names, `re:` regexes, or
    `*` globs such as 'model.layers.*.self_attn')."""
    short = name.replace(".weight", "")
    for pattern in q.ignore:
        if not pattern:
            continue
        pat = pattern.removeprefix("re:").split("model.")[-1].replace(".*.", ".").replace("*", "")
        if pat in short or short.endswith(pat) or (
                pat.startswith("layers.") and short.startswith(pat)):
            return True
        if ("self_attn" in pat and ".self_attn." in short
                or "router" in pat and ".mlp.gate" in short):
            return True
    return False


MXFP4_PAD_HIDDEN, MXFP4_PAD_INTERMEDIATE = 256, 128


def _quantized_parts(t: Tensor, rows: int, cols: int, q: QuantSpec) -> tuple[int, ...]:
    """Bytes of each tensor vLLM creates for one quantized shard [rows = out, cols = in],
    payload first (ENGINE_MEMORY §1.8, vLLM's quantization/*.py create_weights):
    fp8: 1 B/element + fp32 scales per 128×128 block, per output channel, or per tensor
    (+ a static input scale); int8 (w8a8): 1 B + fp32 per-channel scales;
    awq/gptq/w4a16: bits/8 B per element + 16-bit scales per group of `group_size` inputs
    (+ packed zero points when asymmetric, + an int32 g_idx per input with act-order);
    nvfp4: ½ B + one fp8 scale per 16 elements + two fp32 global scales;
    mxfp4 (experts only): ½ B + one e8m0 scale per 32, on expert matrices padded to a hidden
    size multiple of 256 and an intermediate multiple of 128 (fused_moe/oracle/mxfp4.py)."""
    n = rows * cols
    if q.method == "fp8":
        if q.block_size:
            br, bc = q.block_size
            scales = cdiv(rows, br) * cdiv(cols, bc)
        elif q.per_channel:
            # + fbgemm_fp8's fp32 input_scale_ub scalar, its own tensor, one per vLLM linear:
            # q/k/v share the fused qkv_proj's, so k_proj and v_proj add none (fbgemm_fp8.py).
            if q.static_input_scale and not t.name.endswith(("k_proj", "v_proj")):
                return n, 4 * rows, 4
            scales = rows
        else:
            scales = 1 + int(q.static_input_scale)
        return n, 4 * scales
    if q.method == "int8":
        return n, 4 * (rows if q.per_channel else 1)
    if q.method == "nvfp4":
        return n // 2, cdiv(n, 16), 8
    if q.method == "mxfp4" and t.kind != "expert":  # a dense Linear (what-if, OCP layout)
        return n // 2, cdiv(n, 32)
    if q.method == "mxfp4":
        per_expert_rows = rows // t.experts
        if "w13" in t.name:  # w13: rows = 2 × intermediate shard, cols = hidden
            per_expert_rows = 2 * _round_up(per_expert_rows // 2, MXFP4_PAD_INTERMEDIATE)
            cols = _round_up(cols, MXFP4_PAD_HIDDEN)
        else:  # w2: rows = hidden, cols = intermediate shard
            per_expert_rows = _round_up(per_expert_rows, MXFP4_PAD_HIDDEN)
            cols = _round_up(cols, MXFP4_PAD_INTERMEDIATE)
        padded = t.experts * per_expert_rows * cols
        return padded // 2, cdiv(padded, 32)
    # awq / gptq / w4a16: packed integers, 16-bit group scales, optional zeros and g_idx.
    groups = cdiv(cols, q.group_size) if q.group_size else 1
    packed = cdiv(n * q.weight_bits, 8)
    scales = 2 * rows * groups
    zeros = cdiv(rows * groups * q.weight_bits, 8) if q.zero_points else 0
    g_idx = 4 * cols if q.act_order else 0
    return packed, scales, zeros, g_idx


def _round_up(x: int, k: int) -> int:
    return cdiv(x, k) * k


def _tensor_parts(t: Tensor, rows: int, cols: int, dtype_bytes: int,
                  q: QuantSpec | None) -> tuple[int, ...]:
    """Bytes of one shard, one entry per tensor vLLM creates for it: a quantized linear/expert
    weight by its format (payload, scales, …); everything else (embeddings, norms, biases,
    routers, vision tower, ignored modules) one tensor in the model dtype or its fixed dtype."""
    if t.dtype is not None:
        return (rows * cols * DTYPE_BYTES[t.dtype],)
    quantizable = t.kind == "expert" or (t.kind == "linear" and not (q and q.experts_only))
    if q is None or not quantizable or _is_ignored(t.name, q):
        return (rows * cols * dtype_bytes,)
    return _quantized_parts(t, rows, cols, q)


def mla_dequantized_copy_bytes(m: ModelSpec, tp: int, quant: QuantSpec | None, dtype: str) -> int:
    """MLA with a quantized kv_b_proj: vLLM dequantizes it once into W_UK/W_UV in the model
    dtype and keeps them beside the quantized weight (mla_attention.py
    process_weights_after_loading): per layer heads/tp × (nope + v) × kv_lora_rank elements."""
    if m.mla is None or quant is None or _is_ignored("kv_b_proj", quant):
        return 0
    a = m.mla
    per_layer = (cdiv(m.num_attention_heads, tp) * (a.qk_nope_head_dim + a.v_head_dim)
                 * a.kv_lora_rank)
    return per_layer * DTYPE_BYTES[dtype]


def rope_cache_bytes(m: ModelSpec, dtype: str) -> int:
    """vLLM's shared RoPE cos/sin cache buffer, allocated while loading and so counted in
    "Model loading took": positions × rotary_dim elements in the model dtype
    (vllm/model_executor/layers/rotary_embedding, one instance shared by all layers).
    Llama-3.1-8B: 131072 × 128 × 2 B = 32 MiB, the gap between 8.03e9 × 2 B = 14.957 GiB
    and the logged 14.99 GiB (reference/vllm_calibration.csv)."""
    return m.rope_cache_positions * m.rotary_dim * DTYPE_BYTES[dtype]


def _expert_parallel(t: Tensor, ep: int) -> Tensor:
    """With --enable-expert-parallel each of the ep = TP × DP ranks holds cdiv(E, ep) whole
    experts instead of a TP slice of every expert
    (vllm/model_executor/layers/fused_moe/layer.py)."""
    if ep <= 1 or ".mlp.experts." not in t.name:
        return t
    local = cdiv(t.experts, ep)
    return Tensor(t.name, t.kind, t.rows // t.experts * local, t.cols, "none", t.layer, local,
                  t.dtype)


# vLLM loads these checkpoint/enumerated tensors into one fused parameter each:
# QKVParallelLinear (q/k/v), MergedColumnParallelLinear (gate/up; MLA's q_a and kv_a, as
# fused_qkv_a_proj in deepseek_v2.py), FusedMoE (every expert's w1/w3 → w13, w2 → w2).
_FUSED = [
    (re.compile(r"\.experts\.\d+\.(gate_proj|up_proj|w1|w3)\b"), ".experts.w13"),
    (re.compile(r"\.experts\.\d+\.(down_proj|w2)\b"), ".experts.w2"),
    (re.compile(r"\.[qkv]_proj\b"), ".qkv_proj"),
    (re.compile(r"\.(q_a_proj|kv_a_proj_with_mqa)\b"), ".fused_qkv_a_proj"),
    (re.compile(r"\.(gate|up)_proj\b"), ".gate_up_proj"),
]


@lru_cache(maxsize=1 << 16)
def fused_name(name: str) -> str:
    """The vLLM parameter that tensor `name` is loaded into (itself when not fused)."""
    for pattern, repl in _FUSED:
        name = pattern.sub(repl, name)
    return name


ROPE_BUILD = -1  # marker in an allocation sequence: the RoPE cache is built here


def _fuse(parts_by_name: list[tuple[str, tuple[int, ...]]]) -> dict[str, list[int]]:
    """Fused parameters in creation order (where the first of their tensors appears), each
    with its bytes per part (payload, scales, …) summed over the tensors fused into it."""
    fused: dict[str, list[int]] = {}
    for name, parts in parts_by_name:
        have = fused.setdefault(fused_name(name), [])
        have.extend([0] * (len(parts) - len(have)))
        for k, b in enumerate(parts):
            have[k] += b
    return fused


@dataclass(frozen=True)
class _Fused:
    """Tensors fused among themselves (one decoder layer, or tensors outside the layers):
    the allocation sizes of their fused parameters' parts in creation order, and where the
    RoPE cache is built when they hold an attention output projection (vLLM builds the rotary
    embedding in the first attention layer's __init__, after its projections)."""

    sizes: tuple[int, ...]
    rope_at: int | None  # index in sizes after the first o_proj; None: no o_proj
    names: frozenset[str]  # the fused parameters' names
    total: int  # sum(sizes)

    @classmethod
    def of(cls, parts_by_name: list[tuple[str, tuple[int, ...]]]) -> _Fused:
        sizes: list[int] = []
        rope_at = None
        fused = _fuse(parts_by_name)
        for name, parts in fused.items():
            sizes += [b for b in parts if b]
            if rope_at is None and name.removesuffix(".weight").endswith("o_proj"):
                rope_at = len(sizes)
        return cls(tuple(sizes), rope_at, frozenset(fused), sum(sizes))


def _chunks(groups: list[_Fused]) -> list[tuple[int, ...]]:
    """One stage's allocation sizes, one chunk per group that has any (a layer class's chunk is
    one object, shared): its fused parameters in order, with ROPE_BUILD after the first
    attention output projection, or in a last chunk of its own if none."""
    out = []
    rope = False
    for g in groups:
        if not rope and g.rope_at is not None:
            out.append((*g.sizes[:g.rope_at], ROPE_BUILD, *g.sizes[g.rope_at:]))
            rope = True
        elif g.sizes:
            out.append(g.sizes)
    return out if rope else [*out, (ROPE_BUILD,)]


def _build_order(groups: list[_Fused]) -> list[int]:
    """_chunks, as one list."""
    return [n for chunk in _chunks(groups) for n in chunk]


def _rope_build(a: CachingAllocator, positions: int, rotary_dim: int, dtype: str) -> None:
    """vLLM's RotaryEmbedding.__init__ on the device (rotary_embedding/base.py): t = arange(P)
    fp32, freqs = t ⊗ inv_freq [P, R/2] fp32, cos, sin, cache = cat(cos, sin) [P, R] fp32; the
    locals are freed on return, then cache.to(dtype) is allocated and the fp32 cache freed.
    (inv_freq and its temporaries are a few hundred bytes in the small pool.)"""
    p, r = positions, rotary_dim
    if not p or not r:
        return
    temps = [a.malloc(n) for n in (p * 4, p * r // 2 * 4, p * r // 2 * 4, p * r // 2 * 4)]
    cache = a.malloc(p * r * 4)
    for h in temps:
        a.free(h)
    if DTYPE_BYTES[dtype] != 4:
        a.malloc(p * r * DTYPE_BYTES[dtype])
        a.free(cache)


def replay_allocations(sizes: list[int], dtype: str, rope_positions: int, rotary_dim: int,
                       after_each: Callable[[CachingAllocator], None] | None = None,
                       allocator: CachingAllocator | None = None) -> CachingAllocator:
    """Allocate `sizes` in order on an empty caching allocator (or on `allocator`), building
    the RoPE cache (rope_positions × rotary_dim, kept in `dtype`) at ROPE_BUILD; the allocator
    then reports allocated and reserved bytes (`after_each` sees it after every entry). Checked
    byte for byte against PyTorch 2.11 on an H200 (benchmarks/allocator_check.py,
    benchmarks/data/allocator_h200.json)."""
    a = allocator if allocator is not None else CachingAllocator()
    for n in sizes:
        if n == ROPE_BUILD:
            _rope_build(a, rope_positions, rotary_dim, dtype)
        else:
            a.malloc(n)
        if after_each is not None:
            after_each(a)
    return a


def stage_allocations(m: ModelSpec, *, tp: int, pp: int, dtype: str,
                      quant: QuantSpec | None, ep: int = 1) -> list[list[int]]:
    """Per PP stage, the bytes of each tensor one TP rank allocates while vLLM builds the model,
    in creation order, with ROPE_BUILD after the stage's first attention layer's projections.

    The embedding sits on the first stage and the LM head on the last; with tied embeddings
    and pp > 1 the last stage builds its own copy (vllm/model_executor/models/llama.py).
    `ep` > 1: expert parallelism over that many ranks (TP × DP). MLA with a quantized kv_b_proj
    adds its dequantized copy per layer after loading."""
    return [[n for chunk in chunks for n in chunk]
            for chunks in _stage_chunks(m, tp=tp, pp=pp, dtype=dtype, quant=quant, ep=ep)]


def _stage_chunks(m: ModelSpec, *, tp: int, pp: int, dtype: str, quant: QuantSpec | None,
                  ep: int) -> list[list[tuple[int, ...]]]:
    """stage_allocations in chunks (_chunks; the dequantized MLA copies one more)."""
    if m.weights_from == "headers" and m.checkpoint is not None:
        return [[tuple(sizes)] for sizes in header_stage_allocations(m, tp=tp, pp=pp, dtype=dtype)]
    mla_copy = mla_dequantized_copy_bytes(m, tp, quant, dtype)
    ranges = pp_layer_ranges(m.num_layers, pp)
    return [_chunks(groups) + ([(mla_copy,) * len(ranges[s])] if mla_copy and ranges[s] else [])
            for s, groups in enumerate(_stage_groups(m, tp=tp, pp=pp, dtype=dtype, quant=quant,
                                                     ep=ep))]


def _stage_groups(m: ModelSpec, *, tp: int, pp: int, dtype: str, quant: QuantSpec | None,
                  ep: int) -> list[list[_Fused]]:
    """Per PP stage, its tensors fused as vLLM fuses them, in creation order: the stage's
    decoder layers, each fused once per TP layout (_RankLayout), between the tensors outside
    the layers that the stage builds."""
    lay = _rank_layout(m, tp=tp, dtype=dtype, quant=quant, ep=ep)
    if lay.layers is None:  # not separable by layer: fuse each stage's tensors whole
        ranked = rank_tensors(m, tp=tp, dtype=dtype, quant=quant, ep=ep)
        return [[_Fused.of(items)] for items in _stage_items(m, ranked, pp)]
    ranges = pp_layer_ranges(m.num_layers, pp)
    if pp == 1:
        return [[lay.pre, *lay.layers, lay.post]]
    return [([lay.pre_first] if s == 0 else [])
            + ([lay.tied, lay.pre_last] if s == pp - 1 else [])
            + lay.layers[r.start:r.stop]
            + ([lay.post_first] if s == 0 else []) + ([lay.post_last] if s == pp - 1 else [])
            for s, r in enumerate(ranges)]


_Item = tuple[str, tuple[int, ...]]  # a tensor's name and the bytes of each of its parts


def _stage_items(m: ModelSpec, ranked: list[tuple[Tensor, _Item]], pp: int) -> list[list[_Item]]:
    """Per PP stage, the tensors it builds in creation order: decoder layers by stage; the
    embedding first on the first stage (and, tied with pp > 1, a copy first on the last);
    encoders and embedding extras on the first stage; the rest (final norm, LM head) on the
    last."""
    stage_of = {layer: s for s, r in enumerate(pp_layer_ranges(m.num_layers, pp)) for layer in r}
    named: list[list[_Item]] = [[] for _ in range(pp)]
    for t, item in ranked:
        if t.layer is not None:
            named[stage_of[t.layer]].append(item)
        elif t.kind == "embedding":
            named[0].insert(0, item)
            if m.tie_word_embeddings and pp > 1:
                named[-1].append(("lm_head", item[1]))
        elif _first_stage(t):
            named[0].append(item)
        else:  # final norm, lm_head
            named[-1].append(item)
    return named


def _first_stage(t: Tensor) -> bool:
    """A tensor outside the decoder layers that the first PP stage builds: the encoders run
    there, and the embedding's extras sit beside it."""
    return (t.kind == "vision" or t.name.startswith(("vision.", "multi_modal_projector"))
            or t.name.startswith(_FIRST_STAGE_EXTRAS))


@dataclass(frozen=True)
class _Layers:
    """The model's decoder layers by class, listed once per model object. `classes`: each
    layer's class: layers whose tensors have equal shapes under equal names after their
    "layers.{i}." prefix share one (a TP layout then shards and fuses one of them for all);
    `first`: each class's first layer's tensors. `outside`: the other tensors, in `tensors`
    order, each with whether it comes before the layers and whether the first PP stage builds
    it. `ordered`: the embedding comes first and every layer's tensors are named under its
    prefix: each group can then be fused on its own."""

    first: dict[int, list[Tensor]]
    classes: list[int]
    outside: list[tuple[Tensor, bool, bool]]
    ordered: bool


@per_object(64)
def _layers(m: ModelSpec) -> _Layers:
    """_Layers, without listing every layer's tensors: a layer whose spec (_layer_spec) an
    earlier layer had lists that layer's tensors under its own prefix, so it takes that layer's
    class (a 405B model: 1 of 126 layers listed; listing and comparing them all was 7 % of a
    cold sweep's instructions)."""
    keys: dict[tuple, int] = {}  # (names after the prefix, shapes), or (i,): the class
    by_spec: dict[tuple[str, bool, bool], int] = {}
    first: dict[int, list[Tensor]] = {}
    classes: list[int] = []
    ordered = True
    for i in range(m.num_layers):
        spec = _layer_spec(m, i)
        c = by_spec.get(spec)
        if c is None:
            ts = list(_layer_tensors(m, i))
            prefix = f"layers.{i}."
            names = list(map(_NAME, ts))
            if all(map(str.startswith, names, repeat(prefix))):
                # each tensor's name after the prefix, then its kind, shape, split, experts, dtype
                cut = len(prefix)
                c = by_spec[spec] = keys.setdefault(
                    (tuple([n[cut:] for n in names]), tuple(map(_SHAPE, ts))), len(keys))
            else:  # not named under its prefix: a class of its own
                c, ordered = keys.setdefault((i,), len(keys)), False
            first.setdefault(c, ts)
        classes.append(c)
    # a tensor outside the layers listed after them comes "before" them when no layer has any
    after = any(first.values())
    outside = [(t, before, t.kind == "embedding" or _first_stage(t))
               for ts, before in ((_pre_tensors(m), True), (_post_tensors(m), not after))
               for t in ts]
    # the embedding, if any, is the first tensor of all (_pre_tensors lists it first)
    ordered &= [k for k, (t, _, _) in enumerate(outside) if t.kind == "embedding"] in ([], [0])
    return _Layers(first, classes, outside, ordered)


_NAME = itemgetter(0)  # Tensor.name
_SHAPE = itemgetter(1, 2, 3, 4, 6, 7)  # Tensor.kind, rows, cols, split, experts, dtype


# A dtype's weights depend on its width alone (every use reads DTYPE_BYTES), so the dtypes of
# one width share their memo entries: a sweep's fp16 GPUs (no bf16) reuse the bf16 layouts.
_SAME_WIDTH = {d: next(x for x, w in DTYPE_BYTES.items() if w == n)
               for d, n in DTYPE_BYTES.items()}


@dataclass(frozen=True)
class _RankLayers:
    """One TP rank's tensors with (name, bytes of each part): each decoder layer's (one list
    per layer class, shared by its layers, unless a quantization ignore list names layers) and
    those outside the layers (_Layers.outside, in order)."""

    layers: list[list[tuple[Tensor, _Item]]]
    outside: list[tuple[Tensor, _Item]]


def rank_layers(m: ModelSpec, *, tp: int, dtype: str, quant: QuantSpec | None,
                ep: int) -> _RankLayers:
    """The tensors of one TP rank by layer (_RankLayers), each class sharded once. Memoised per
    (model object, tp, dtype width, format, ep): every PP split of a sweep reuses it, and the
    latency model's bfloat16 asks read the weights' float16 entries (_SAME_WIDTH)."""
    return _rank_layers(m, tp=tp, dtype=_SAME_WIDTH.get(dtype, dtype), quant=quant, ep=ep)


@per_object(256)
def _rank_layers(m: ModelSpec, *, tp: int, dtype: str, quant: QuantSpec | None,
                 ep: int) -> _RankLayers:
    lay = _layers(m)
    by_layer = quant is not None and any(quant.ignore)  # _is_ignored reads the layer index
    done: dict[int, list[tuple[Tensor, _Item]]] = {}
    layers = []
    for i, c in enumerate(lay.classes):
        key = i if by_layer else c
        items = done.get(key)
        if items is None:
            ts = list(_layer_tensors(m, i)) if by_layer else lay.first[c]
            items = done[key] = [_rank_item(m, t, tp, dtype, quant, ep) for t in ts]
        layers.append(items)
    return _RankLayers(layers, [_rank_item(m, t, tp, dtype, quant, ep) for t, _, _ in lay.outside])


def _rank_item(m: ModelSpec, t: Tensor, tp: int, dtype: str, quant: QuantSpec | None,
               ep: int) -> tuple[Tensor, _Item]:
    """Tensor t on one TP rank, with its name and the bytes of each of its parts."""
    if m.moe is not None:
        t = _expert_parallel(t, ep)
    rows, cols = _shard_rows(t, m, tp)
    return t, (t.name, _tensor_parts(t, rows, cols, DTYPE_BYTES[dtype], quant))


@dataclass(frozen=True)
class _RankLayout:
    """One TP rank's tensors fused, when the tensors outside the decoder layers all come before
    or after them and no fused parameter spans two groups (always, for `tensors`): each layer
    class and each outside group fused once, so every PP split only concatenates them
    (_stage_groups); `layers` None otherwise (each stage is then fused whole). pre/post: the
    tensors before/after the layers (the embedding first), all of them (pp 1) and those the
    first/last stage builds."""

    layers: list[_Fused] | None
    pre: _Fused
    pre_first: _Fused
    pre_last: _Fused
    post: _Fused
    post_first: _Fused
    post_last: _Fused
    tied: _Fused  # the last stage's own copy of a tied embedding (pp > 1)


@per_object(256)
def _rank_layout(m: ModelSpec, *, tp: int, dtype: str, quant: QuantSpec | None,
                 ep: int) -> _RankLayout:
    lay = _layers(m)
    ranked = rank_layers(m, tp=tp, dtype=dtype, quant=quant, ep=ep)
    groups: list[list[_Item]] = [[] for _ in range(7)]  # pre, its first/last; post, …; tied
    for (t, before, first), (_, item) in zip(lay.outside, ranked.outside, strict=True):
        side = 0 if before else 3
        groups[side].append(item)
        groups[side + (1 if first else 2)].append(item)
        if t.kind == "embedding" and m.tie_word_embeddings:
            groups[6].append(("lm_head", item[1]))
    fused = [_Fused.of(g) for g in groups]
    # layers are named under their own prefixes, so only the outside groups can share a name
    names = [fused[0].names, fused[3].names, fused[6].names]
    separable = (lay.ordered and sum(map(len, names)) == len(frozenset().union(*names))
                 and not any(n.startswith("layers.") for ns in names for n in ns))
    if not separable:
        return _RankLayout(None, *fused)
    done: dict[int, _Fused] = {}
    per_layer = []
    for items in ranked.layers:
        f = done.get(id(items))
        if f is None:
            f = done[id(items)] = _Fused.of([item for _, item in items])
        per_layer.append(f)
    return _RankLayout(per_layer, *fused)


@per_object(256)
def rank_tensors(m: ModelSpec, *, tp: int, dtype: str, quant: QuantSpec | None,
                 ep: int) -> list[tuple[Tensor, _Item]]:
    """Every tensor with (name, bytes of each part) on one TP rank, in `tensors` order."""
    return [_rank_item(m, t, tp, dtype, quant, ep) for t in all_tensors(m)]


@fast_init
@dataclass(frozen=True)
class WeightMemory:
    """One TP rank of one PP stage after the model is built, bytes."""

    tensor_bytes: int  # the weight tensors and the RoPE cache themselves
    # blocks holding them: torch.cuda.memory_allocated, vLLM's "Model loading took"
    allocated_bytes: int
    # segments holding them after empty_cache: the free-memory drop SGLang and TGI see
    reserved_bytes: int


def weight_memory_per_stage(m: ModelSpec, *, tp: int, pp: int, dtype: str,
                            quant: QuantSpec | None, ep: int = 1) -> list[WeightMemory]:
    """Weights (RoPE cache included) of one TP rank of each PP stage, as tensor bytes and as
    PyTorch's caching allocator counts them after building the model (kvplan/model/allocator.py).
    Memoised per (model object, tp, pp, dtype width, format, ep): planning searches re-ask it."""
    return _weight_memory_per_stage(m, tp=tp, pp=pp, dtype=_SAME_WIDTH.get(dtype, dtype),
                                    quant=quant, ep=ep)


@per_object(512)
def _weight_memory_per_stage(m: ModelSpec, *, tp: int, pp: int, dtype: str,
                             quant: QuantSpec | None, ep: int) -> list[WeightMemory]:
    """weight_memory_per_stage. The stages are replayed last first: a middle stage's chunks
    begin the last stage's (the LM head follows the same layers), so _replayed reads them from
    that replay."""
    tensor = _stage_tensor_bytes(m, tp=tp, pp=pp, dtype=dtype, quant=quant, ep=ep)
    chunks = _stage_chunks(m, tp=tp, pp=pp, dtype=dtype, quant=quant, ep=ep)
    replayed = [_replayed(tuple(c), dtype, m.rope_cache_positions, m.rotary_dim)
                for c in reversed(chunks)][::-1]
    return [WeightMemory(t, allocated, reserved)
            for t, (allocated, reserved) in zip(tensor, replayed, strict=True)]


def stage_tensor_bytes(m: ModelSpec, *, tp: int, pp: int, dtype: str, quant: QuantSpec | None,
                       ep: int = 1) -> list[int]:
    """WeightMemory.tensor_bytes of each PP stage (the weight tensors and the RoPE cache on one
    TP rank) without replaying the allocator: what a search that only asks whether the weights
    can fit needs. Memoised like weight_memory_per_stage."""
    return _stage_tensor_bytes(m, tp=tp, pp=pp, dtype=_SAME_WIDTH.get(dtype, dtype), quant=quant,
                               ep=ep)


@per_object(512)
def _stage_tensor_bytes(m: ModelSpec, *, tp: int, pp: int, dtype: str, quant: QuantSpec | None,
                        ep: int) -> list[int]:
    rope = rope_cache_bytes(m, dtype)
    if m.weights_from == "headers" and m.checkpoint is not None:
        return [sum(n for n in sizes if n != ROPE_BUILD) + rope
                for sizes in header_stage_allocations(m, tp=tp, pp=pp, dtype=dtype)]
    mla_copy = mla_dequantized_copy_bytes(m, tp, quant, dtype)
    ranges = pp_layer_ranges(m.num_layers, pp)
    return [sum(g.total for g in groups) + mla_copy * len(ranges[s]) + rope
            for s, groups in enumerate(_stage_groups(m, tp=tp, pp=pp, dtype=dtype, quant=quant,
                                                     ep=ep))]


def heaviest_stage(m: ModelSpec, *, tp: int, pp: int, dtype: str,
                   quant: QuantSpec | None, ep: int = 1) -> WeightMemory:
    """The PP stage whose weights hold the most device memory (reserved segments: SGLang and
    TGI see weights as the drop in free memory)."""
    return max(weight_memory_per_stage(m, tp=tp, pp=pp, dtype=dtype, quant=quant, ep=ep),
               key=lambda w: w.reserved_bytes)


# Replays remembered with the allocator's counters after every chunk, most recent last:
# ((dtype, RoPE cache positions, rotary dims), chunks, allocated after each, held after each)
_Chunks = tuple[tuple[int, ...], ...]
_REPLAYS: list[tuple[tuple[str, int, int], _Chunks, list[int], list[int]]] = []
_REPLAYS_KEPT = 64
# each pool's replays after the RoPE cache (allocator.PoolMemo): the small pool's requests
# (norms, router gates) are the same at every TP size, so every layout reads them from one
_POOL_REPLAYS: PoolMemo = {}


def _replayed(chunks: _Chunks, dtype: str, rope_positions: int,
              rotary_dim: int) -> tuple[int, int]:
    """(allocated, reserved) bytes after replay_allocations of the chunks' sizes and
    empty_cache. Chunks that begin those of a replay before are read from that replay's
    counters (a PP split's first stage begins the unsplit model; shorter middle stages begin
    longer ones): the allocator's state after a prefix is the state of replaying the prefix
    alone, and empty_cache leaves exactly the segments that hold a live block (held_bytes).
    After the RoPE cache nothing is freed: malloc_chunks replays the rest, repeated layers
    added up rather than replayed."""
    if not chunks:
        return 0, 0
    allocated, held = _counters(chunks, (dtype, rope_positions, rotary_dim))
    return allocated[len(chunks) - 1], held[len(chunks) - 1]


def _counters(chunks: _Chunks, key: tuple[str, int, int]) -> tuple[list[int], list[int]]:
    """The allocator's allocated and held bytes after each of the (non-empty) `chunks`, from a
    replay before whose chunks they begin (the lists then run on past them), else replayed
    and remembered. A first chunk that leaves no free block in either pool (an embedding
    whose segment it fills: a 2 MiB multiple, or a remainder of 1 MiB or less, not split) is
    a state that serves every later request as an empty allocator does: the chunks after it
    are counted as a replay of their own (a first PP stage: the layers a middle or last stage
    replayed before), offset by its counters."""
    n = len(chunks)
    for k, seq, allocated, held in reversed(_REPLAYS):
        if k == key and len(seq) >= n and seq[n - 1] == chunks[-1] and seq[:n] == chunks:
            return allocated, held
    lead = _lone_chunk(chunks[0], key) if n > 1 else None
    if lead is not None:
        rest = _counters(chunks[1:], key)
        allocated = [lead[0], *(lead[0] + x for x in rest[0][:n - 1])]
        held = [lead[1], *(lead[1] + x for x in rest[1][:n - 1])]
    else:
        allocated, held = _replay_chunks(chunks, *key)
    if len(_REPLAYS) >= _REPLAYS_KEPT:
        del _REPLAYS[0]
    _REPLAYS.append((key, chunks, allocated, held))
    return allocated, held


def _lone_chunk(chunk: tuple[int, ...], key: tuple[str, int, int]) -> tuple[int, int] | None:
    """(allocated, held) bytes after allocating `chunk` alone, when that leaves no free block
    (and it does not build the RoPE cache, whose temporaries are freed); else None."""
    if ROPE_BUILD in chunk:
        return None
    a = CachingAllocator()
    a.fill(chunk)
    return None if any(a.free_blocks()) else (a.allocated_bytes, a.held_bytes)


def _replay_chunks(chunks: _Chunks, dtype: str, rope_positions: int,
                   rotary_dim: int) -> tuple[list[int], list[int]]:
    """The allocator's allocated and held bytes after each chunk, replayed from empty."""
    allocated, held = [], []
    a = CachingAllocator()
    rope = next((i for i, c in enumerate(chunks) if ROPE_BUILD in c), len(chunks) - 1)
    for chunk in chunks[:rope + 1]:
        replay_allocations(list(chunk), dtype, rope_positions, rotary_dim, allocator=a)
        allocated.append(a.allocated_bytes)
        held.append(a.held_bytes)
    rest = malloc_chunks(a, chunks[rope + 1:], _POOL_REPLAYS)
    allocated += rest[0]
    held += rest[1]
    return allocated, held


def _clear_replays() -> None:
    """Forget every replay (a cold start: benchmarks/sweep_speed.py)."""
    _REPLAYS.clear()
    _POOL_REPLAYS.clear()


_replayed.cache_clear = _clear_replays  # type: ignore[attr-defined]


_VOCAB_LEAVES = ("embed_tokens", "lm_head", "wte", "embed_out", "output_layer", "word_embeddings")
_REPLICATED = ("norm", "router", "mlp.gate.", "shared_expert_gate", "ln_",
               "wpe", "embed_positions")  # fam-a: learned positions (nn.Embedding, replicated)


def _header_rank_elements(name: str, shape: tuple[int, ...], m: ModelSpec, tp: int) -> int:
    """Elements of one checkpoint tensor on one TP rank, by vLLM's layer kinds read from the
    tensor name: vocab rows padded to 64 then split; k/v projections keep
    max(1, kv_heads // tp) of kv_heads; norms, routers and scalars replicated; every other
    tensor split evenly (column- or row-parallel alike)."""
    numel = 1
    for d in shape:
        numel *= d
    if numel <= 1 or any(key in name for key in _REPLICATED):
        return numel
    if any(leaf in name for leaf in _VOCAB_LEAVES) and shape:
        return vocab_rows_per_rank(shape[0], tp) * (numel // shape[0])
    if ("k_proj" in name or "v_proj" in name) and not is_encoder(name):
        return cdiv(numel * max(1, m.num_kv_heads // tp), m.num_kv_heads)
    return cdiv(numel, tp)


def header_stage_allocations(m: ModelSpec, *, tp: int, pp: int, dtype: str) -> list[list[int]]:
    """Per PP stage, the bytes one TP rank allocates for the safetensors tensor table, fused as
    vLLM fuses them, ordered by layer (the files list tensors alphabetically, vLLM builds them
    layer by layer), with ROPE_BUILD after the first attention output projection.

    Floating tensors are cast to the run dtype (vLLM's --dtype); quantized payloads (int,
    fp8, packed uint8) and quantization scales keep their stored dtype. Decoder layers go to
    their PP stage; embeddings and encoders to the first, the rest (final norm, head) to the
    last. Sharding by name is exact for the common layouts; fused or unusual names fall back
    to an even TP split."""
    assert m.checkpoint is not None
    stage_of = {layer: s for s, r in enumerate(pp_layer_ranges(m.num_layers, pp)) for layer in r}
    named: list[list[tuple[int, str, tuple[int, ...]]]] = [[] for _ in range(pp)]
    run_bytes = DTYPE_BYTES[dtype]
    for name, (st_dtype, shape) in m.checkpoint.tensors.items():
        if skipped_by_vllm(name, m):
            continue
        elem = (run_bytes if st_dtype in FLOAT_DTYPES and not is_scale(name)
                else SAFETENSORS_DTYPE_BYTES[st_dtype])
        item = (_header_rank_elements(name, shape, m, tp) * elem,)
        layer = layer_of(name)
        if layer is not None:
            named[stage_of[layer]].append((layer, name, item))
        elif is_encoder(name) or "embed" in name or "wte" in name:
            named[0].append((-1, name, item))
            if pp > 1 and m.tie_word_embeddings and not is_encoder(name):
                named[-1].append((m.num_layers, name, item))
        else:
            named[-1].append((m.num_layers, name, item))
    # sorted by layer; the sort is stable, so file order stays within a layer
    return [_build_order([_Fused.of([(n, p) for _, n, p in sorted(items, key=lambda x: x[0])])])
            for items in named]


# ------------------------------------------------------------ speculative decoding drafts

ALLOC_ROUND = 512  # PyTorch's caching allocator rounds every block to 512 bytes


def _rank_bytes(items: list[tuple[Tensor, ModelSpec, QuantSpec | None]], tp: int,
                dtype: str) -> tuple[int, int]:
    """(tensor bytes, allocated bytes) of tensors on one TP rank, each sharded by its own spec."""
    tensor = allocated = 0
    for t, spec, quant in items:
        rows, cols = _shard_rows(t, spec, tp)
        for part in _tensor_parts(t, rows, cols, DTYPE_BYTES[dtype], quant):
            tensor += part
            allocated += _round_up(part, ALLOC_ROUND)
    return tensor, allocated


def draft_layer_count(target: ModelSpec, sc: SpeculativeConfig) -> int:
    """Decoder layers the draft runs, each an attention layer with its own KV cache: the draft
    model's / EAGLE head's layers, the target's num_nextn_predict_layers for MTP, 0 for n-gram."""
    if sc.method == "ngram":
        return 0
    if sc.method == "mtp":
        return target.mtp_layers
    return sc.draft.num_layers if sc.draft is not None else 0


def draft_tensors(target: ModelSpec,
                  sc: SpeculativeConfig) -> list[tuple[Tensor, ModelSpec, QuantSpec | None]]:
    """The draft's weight tensors as vLLM builds them next to the target (V1; vLLM main-branch
    sources, see docs/features.md):

    * draft_model: the whole draft model (own embedding and LM head), sharded over the target's TP.
    * eagle (vllm/model_executor/models/llama_eagle.py): the head's decoder layers + fc
      (nn.Linear 2·hidden → hidden, no bias, replicated); the embedding is skipped at load
      when PP is 1 and shared with the target, and the head has no LM head of its own
      (vllm/v1/spec_decode/eagle.py load_model).
    * eagle3 (llama_eagle3.py): layer 0's q/k/v take 2·hidden inputs (embeddings ‖ hidden
      states), every layer an extra hidden_norm, fc ReplicatedLinear 3·target hidden → hidden,
      a final norm, its own LM head over draft_vocab_size rows and the draft_id_to_target_id
      int64 map; embedding shared.
    * mtp (deepseek_mtp.py): per predict layer one decoder layer shaped like the target's last
      (MoE for DeepSeek-V3), enorm + hnorm, eh_proj 2·hidden → hidden (plain nn.Linear, not
      quantized), and a shared_head norm + LM head; the embedding shared with the target.
      Whether vLLM also shares the MTP LM head is UNVERIFIED: it is counted.
    * ngram: none."""
    out: list[tuple[Tensor, ModelSpec, QuantSpec | None]] = []
    if sc.method == "ngram":
        return out
    if sc.method == "mtp":
        q, h, last = target.quantization, target.hidden_size, target.num_layers - 1
        for j in range(target.mtp_layers):
            p = f"mtp.{j}."
            for t in _layer_tensors(target, last):
                out.append((Tensor(p + t.name, t.kind, t.rows, t.cols, t.split, None, t.experts,
                                   t.dtype), target, q))
            out.append((Tensor(p + "enorm_hnorm", "norm", 2 * h, 1, "none", None), target, q))
            out.append((Tensor(p + "eh_proj", "dense", h, 2 * h, "none", None), target, q))
            out.append((Tensor(p + "shared_head.norm", "norm", h, 1, "none", None), target, q))
            out.append((Tensor(p + "shared_head.head", "lm_head", target.vocab_size, h, "vocab",
                               None), target, q))
        return out
    d = sc.draft
    if d is None:
        return out
    q = d.quantization
    if sc.method == "draft_model":
        return [(Tensor("draft." + t.name, t.kind, t.rows, t.cols, t.split, None, t.experts,
                        t.dtype), d, q) for t in tensors(d)]
    h = d.hidden_size
    eagle3 = sc.method == "eagle3"
    for i in range(d.num_layers):
        for t in _layer_tensors(d, i):
            cols = t.cols
            if eagle3 and i == 0 and t.name.endswith(("q_proj", "k_proj", "v_proj")):
                cols = 2 * h
            out.append((Tensor("draft." + t.name, t.kind, t.rows, cols, t.split, None, t.experts,
                               t.dtype), d, q))
        if eagle3:  # every EAGLE-3 decoder layer has a hidden_norm
            out.append((Tensor(f"draft.layers.{i}.hidden_norm", "norm", h, 1, "none", None), d, q))
    # fc: EAGLE-1 nn.Linear(2 × draft hidden → hidden); EAGLE-3 ReplicatedLinear(3 × target
    # hidden → hidden); both without bias
    fc_in = 3 * target.hidden_size if eagle3 else 2 * h
    out.append((Tensor("draft.fc", "dense", h, fc_in, "none", None), d, q))
    if eagle3:
        vocab = d.draft_vocab_size or d.vocab_size
        head_spec = d.model_copy(update={"vocab_size": vocab})
        out.append((Tensor("draft.norm", "norm", h, 1, "none", None), d, q))
        out.append((Tensor("draft.lm_head", "lm_head", vocab, h, "vocab", None), head_spec, q))
        if d.draft_vocab_size:  # d2t: int64 per draft token (two float32 slots = 8 bytes)
            out.append((Tensor("draft.d2t", "norm", d.draft_vocab_size, 2, "none", None,
                               dtype="float32"), d, q))
    return out


def draft_weight_bytes(target: ModelSpec, sc: SpeculativeConfig, *, tp: int,
                       dtype: str) -> tuple[int, int]:
    """(tensor bytes, allocated bytes) of the draft on one TP rank of the last PP stage."""
    return _rank_bytes(draft_tensors(target, sc), tp, dtype)


# ------------------------------------------------------------------------- LoRA slots


@dataclass(frozen=True)
class LoraSlots:
    """LoRA buffers vLLM preallocates for max_loras adapters at max_lora_rank."""

    gpu_bytes: int  # one TP rank, allocated (each buffer rounded to 512 bytes)
    adapter_bytes: int  # one adapter at max_lora_rank, unsharded (what the CPU cache holds)
    modules: tuple[str, ...]
    skipped: tuple[str, ...]  # layer kinds whose LoRA buffers are not modelled


def lora_slots(m: ModelSpec, layers: range, *, tp: int, max_loras: int, rank: int,
               dtype: str, ep: int = 1) -> LoraSlots:
    """Stacked LoRA A/B buffers on one TP rank for `layers` (vLLM main-branch sources;
    lora_dtype auto = the model dtype; vllm/lora/layers/base_linear.py,
    column_parallel_linear.py, row_parallel_linear.py):

    every wrapped linear allocates per output slice A = (max_loras, 1, rank, input_size) and
    B = (max_loras, 1, output_slice, rank), where a column-parallel layer keeps its full input
    and its output slice per rank (qkv_proj: 3 slices q/k/v, gate_up_proj: 2) and a row-parallel
    layer (o_proj, down_proj) its input per rank and full output. Fused-MoE experts
    (vllm/lora/layers/fused_moe.py FusedMoEWithLoRA), per local expert: w13 A (rank, hidden)
    and B (intermediate / tp, rank) for each of the 2 gated slices, w2 A (rank,
    intermediate / tp) and B (hidden, rank); a shared expert is an ordinary gate_up / down pair.
    Not modelled (listed in `skipped`): MLA and linear-attention projections; no LM-head /
    embedding LoRA (extra-vocabulary LoRA was removed after 0.11; fully_sharded_loras off)."""
    dt = DTYPE_BYTES[dtype]
    h, hd = m.hidden_size, m.head_dim
    q_full, kv_full = m.num_attention_heads * hd, m.num_kv_heads * hd
    q_rank, kv_rank = cdiv(m.num_attention_heads, tp) * hd, max(1, m.num_kv_heads // tp) * hd
    gpu = adapter = 0
    modules: set[str] = set()
    skipped: set[str] = set()

    def buffer(elements: int) -> int:
        return _round_up(max_loras * elements * dt, ALLOC_ROUND)

    for i in layers:
        kind = m.layer_types[i] if m.layer_types else "full"
        if kind == "linear":
            skipped.add("linear-attention projections")
        elif kind != "none" and (m.mla is not None or m.mla_projections is not None):
            skipped.add("MLA projections")
        elif kind != "none":
            modules.update(("qkv_proj", "o_proj"))
            gpu += sum(buffer(rank * h) for _ in range(3))  # A: q, k, v slices
            gpu += buffer(q_rank * rank) + 2 * buffer(kv_rank * rank)  # B
            gpu += buffer(rank * q_rank) + buffer(h * rank)  # o_proj A (input per rank), B
            adapter += rank * (3 * h + q_full + 2 * kv_full) + rank * (q_full + h)
        if m.mlp_layers is not None and i not in m.mlp_layers:
            continue
        if m.moe is not None and i in m.moe.moe_layers:
            moe = m.moe
            experts, inter = moe.num_experts // ep, moe.expert_intermediate_size
            n13 = 2 if m.mlp_gated else 1
            modules.add("experts")
            gpu += n13 * (buffer(experts * rank * h) + buffer(experts * cdiv(inter, tp) * rank))
            gpu += buffer(experts * rank * cdiv(inter, tp)) + buffer(experts * h * rank)
            adapter += moe.num_experts * (n13 * rank * (h + inter) + rank * (inter + h))
            if not moe.shared_expert_intermediate_size:
                continue
            inter, slices = moe.shared_expert_intermediate_size, 2  # shared expert: dense pair
            modules.update(("shared_expert.gate_up_proj", "shared_expert.down_proj"))
            gpu += slices * (buffer(rank * h) + buffer(cdiv(inter, tp) * rank))
            gpu += buffer(rank * cdiv(inter, tp)) + buffer(h * rank)
            adapter += slices * rank * (h + inter) + rank * (inter + h)
            continue
        inter, slices = m.intermediate_size, 2 if m.mlp_gated else 1
        modules.update(("gate_up_proj" if m.mlp_gated else "up_proj", "down_proj"))
        gpu += slices * (buffer(rank * h) + buffer(cdiv(inter, tp) * rank))
        gpu += buffer(rank * cdiv(inter, tp)) + buffer(h * rank)
        adapter += slices * rank * (h + inter) + rank * (inter + h)
    return LoraSlots(gpu, adapter * dt, tuple(sorted(modules)), tuple(sorted(skipped)))
