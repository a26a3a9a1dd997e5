"""Parameter counts and weight bytes per GPU, from one enumeration of the model's tensors.

Each tensor is listed once with its full shape and how vLLM shards it; the total parameter
count and the bytes on any (TP rank, PP stage) are two views of the same list.
Sharding rules are vLLM's (0.33.0): column/row-parallel linears split by TP; the vocabulary is
padded to a multiple of 64 and then split (vllm/model_executor/layers/vocab_parallel_embedding.py);
K/V projections keep max(1, kv_heads // tp) heads per rank, i.e. replicate when tp > kv_heads
(vllm/model_executor/layers/linear.py QKVParallelLinear); norms and MoE routers are replicated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from .checkpoint import FLOAT_DTYPES, SAFETENSORS_DTYPE_BYTES, is_encoder, is_scale, layer_of, skipped_by_vllm
from .specs import ModelSpec, QuantSpec
from .units import DTYPE_BYTES, cdiv

VOCAB_PADDING = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE

Kind = Literal["embedding", "lm_head", "linear", "bias", "norm", "router"]
# How a tensor is split over TP ranks: "out" = rows (column-parallel), "in" = cols
# (row-parallel), "kv" = rows by KV heads with replication, "vocab" = padded vocab rows.
Split = Literal["out", "in", "kv", "vocab", "none"]


@dataclass(frozen=True)
class Tensor:
    name: str
    kind: Kind
    rows: int
    cols: int
    split: Split
    layer: int | None  # None: embedding / final norm / lm_head


def _layer_tensors(m: ModelSpec, i: int) -> Iterator[Tensor]:
    h, hd = m.hidden_size, m.head_dim
    q_out, kv_out = m.num_attention_heads * hd, m.num_kv_heads * hd
    p = f"layers.{i}."
    yield Tensor(p + "q_proj", "linear", q_out, h, "out", i)
    yield Tensor(p + "k_proj", "linear", kv_out, h, "kv", i)
    yield Tensor(p + "v_proj", "linear", kv_out, h, "kv", i)
    yield Tensor(p + "o_proj", "linear", h, q_out, "in", i)
    if m.qkv_bias:
        yield Tensor(p + "q_proj.bias", "bias", q_out, 1, "out", i)
        yield Tensor(p + "k_proj.bias", "bias", kv_out, 1, "kv", i)
        yield Tensor(p + "v_proj.bias", "bias", kv_out, 1, "kv", i)
    if m.o_bias:
        yield Tensor(p + "o_proj.bias", "bias", h, 1, "none", i)
    if m.qk_norm:
        yield Tensor(p + "q_norm", "norm", hd, 1, "none", i)
        yield Tensor(p + "k_norm", "norm", hd, 1, "none", i)
    for n in range(m.norms_per_layer):
        yield Tensor(p + f"norm{n}", "norm", h, 1, "none", i)
    moe = m.moe
    if moe is not None and i in moe.moe_layers:
        e, inter = moe.num_experts, moe.expert_intermediate_size
        yield Tensor(p + "mlp.gate", "router", e, h, "none", i)
        # Fused expert weights: w13 [E, 2I, H] split on I, w2 [E, H, I] split on I.
        yield Tensor(p + "mlp.experts.w13", "linear", e * 2 * inter, h, "out", i)
        yield Tensor(p + "mlp.experts.w2", "linear", e * h, inter, "in", i)
        if moe.shared_expert_intermediate_size:
            s = moe.shared_expert_intermediate_size
            yield Tensor(p + "mlp.shared_expert.gate_up_proj", "linear", 2 * s, h, "out", i)
            yield Tensor(p + "mlp.shared_expert.down_proj", "linear", h, s, "in", i)
        if moe.shared_expert_gate:
            yield Tensor(p + "mlp.shared_expert_gate", "router", 1, h, "none", i)
    else:
        inter = m.intermediate_size
        yield Tensor(p + "mlp.gate_up_proj", "linear", 2 * inter, h, "out", i)
        yield Tensor(p + "mlp.down_proj", "linear", h, inter, "in", i)
        if m.mlp_bias:
            yield Tensor(p + "mlp.gate_up_proj.bias", "bias", 2 * inter, 1, "out", i)
            yield Tensor(p + "mlp.down_proj.bias", "bias", h, 1, "none", i)


def tensors(m: ModelSpec) -> Iterator[Tensor]:
    """Every weight tensor of the language model (unpadded, unsharded shapes)."""
    yield Tensor("embed_tokens", "embedding", m.vocab_size, m.hidden_size, "vocab", None)
    for i in range(m.num_layers):
        yield from _layer_tensors(m, i)
    yield Tensor("norm", "norm", m.hidden_size, 1, "none", None)
    if not m.tie_word_embeddings:
        yield Tensor("lm_head", "lm_head", m.vocab_size, m.hidden_size, "vocab", None)


def parameter_count(m: ModelSpec) -> int:
    """Total parameters as published: unpadded vocabulary, tied head counted once."""
    return sum(t.rows * t.cols for t in tensors(m))


def pp_layer_ranges(num_layers: int, pp: int) -> list[range]:
    """Layers per PP stage as vLLM splits them (vllm/distributed/utils.py get_pp_indices):
    num_layers // pp each, the remainder added one by one to stages pp-2, pp-3, … so the
    last stage (which holds the LM head) stays light."""
    sizes = [num_layers // pp] * pp
    for k in range(num_layers % pp):
        sizes[(pp - 2 - k) % pp] += 1
    out, start = [], 0
    for size in sizes:
        out.append(range(start, start + size))
        start += size
    return out


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
        padded = cdiv(m.vocab_size, VOCAB_PADDING) * VOCAB_PADDING
        return cdiv(padded, tp), t.cols
    return t.rows, t.cols


def _is_ignored(name: str, q: QuantSpec) -> bool:
    short = name.replace(".weight", "")
    return any(pattern.split("model.")[-1] in short or short.endswith(pattern) for pattern in q.ignore
               if pattern)


def _tensor_bytes(t: Tensor, rows: int, cols: int, dtype_bytes: int, q: QuantSpec | None) -> int:
    """Bytes of one shard. FP8 linear weights: 1 B per element plus fp32 scales —
    per 128×128 block (`weight_scale_inv`), per output channel, or one per tensor
    (+ one static input scale) (vLLM fp8.py / compressed_tensors; ENGINE_MEMORY §1.8)."""
    if q is None or t.kind != "linear" or _is_ignored(t.name, q):
        return rows * cols * dtype_bytes
    weight = rows * cols  # 1 byte per fp8 element
    if q.block_size:
        br, bc = q.block_size
        scales = cdiv(rows, br) * cdiv(cols, bc)
    elif q.per_channel:
        scales = rows
    else:
        scales = 1 + int(q.static_input_scale)
    return weight + 4 * scales


def rope_cache_bytes(m: ModelSpec, dtype: str) -> int:
    """vLLM's shared RoPE cos/sin cache buffer, allocated while loading and so counted in
    "Model loading took": positions × rotary_dim elements in the model dtype
    (vllm/model_executor/layers/rotary_embedding, one instance shared by all layers).
    Llama-3.1-8B: 131072 × 128 × 2 B = 32 MiB, the gap between 8.03e9 × 2 B = 14.957 GiB
    and the logged 14.99 GiB (reference/vllm_calibration.csv)."""
    return m.rope_cache_positions * m.rotary_dim * DTYPE_BYTES[dtype]


def weights_bytes_per_stage(m: ModelSpec, *, tp: int, pp: int, dtype: str,
                            quant: QuantSpec | None) -> list[int]:
    """Weight bytes on one TP rank of each PP stage, including the RoPE cache buffer.

    The embedding sits on the first stage and the LM head on the last; with tied embeddings
    and pp > 1 the last stage builds its own copy (vllm/model_executor/models/llama.py)."""
    if m.weights_from == "headers" and m.checkpoint is not None:
        return header_weights_bytes_per_stage(m, tp=tp, pp=pp, dtype=dtype)
    ranges = pp_layer_ranges(m.num_layers, pp)
    stage_of = {layer: s for s, r in enumerate(ranges) for layer in r}
    per_stage = [0] * pp
    dtype_bytes = DTYPE_BYTES[dtype]
    for t in tensors(m):
        rows, cols = _shard_rows(t, m, tp)
        b = _tensor_bytes(t, rows, cols, dtype_bytes, quant)
        if t.layer is not None:
            per_stage[stage_of[t.layer]] += b
        elif t.kind == "embedding":
            per_stage[0] += b
            if m.tie_word_embeddings and pp > 1:
                per_stage[-1] += b
        else:  # final norm, lm_head
            per_stage[-1] += b
    rope = rope_cache_bytes(m, dtype)
    return [w + rope for w in per_stage]


_VOCAB_LEAVES = ("embed_tokens", "lm_head", "wte", "embed_out", "output_layer", "word_embeddings")
_REPLICATED = ("norm", "router", "mlp.gate.", "shared_expert_gate", "ln_")


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
        padded = cdiv(shape[0], VOCAB_PADDING) * VOCAB_PADDING
        return cdiv(padded, tp) * (numel // shape[0])
    if ("k_proj" in name or "v_proj" in name) and not is_encoder(name):
        return cdiv(numel * max(1, m.num_kv_heads // tp), m.num_kv_heads)
    return cdiv(numel, tp)


def header_weights_bytes_per_stage(m: ModelSpec, *, tp: int, pp: int, dtype: str) -> list[int]:
    """Weight bytes per PP stage from the safetensors tensor table (one TP rank), plus RoPE cache.

    Floating tensors are cast to the run dtype (vLLM's --dtype); quantized payloads (int,
    fp8, packed uint8) and quantization scales keep their stored dtype. Decoder layers go to
    their PP stage; embeddings and encoders to the first, the rest (final norm, head) to the
    last. Sharding by name is exact for the common layouts; fused or unusual names fall back
    to an even TP split."""
    assert m.checkpoint is not None
    stage_of = {layer: s for s, r in enumerate(pp_layer_ranges(m.num_layers, pp)) for layer in r}
    per_stage = [0] * pp
    run_bytes = DTYPE_BYTES[dtype]
    for name, (st_dtype, shape) in m.checkpoint.tensors.items():
        if skipped_by_vllm(name, m):
            continue
        elem = (run_bytes if st_dtype in FLOAT_DTYPES and not is_scale(name)
                else SAFETENSORS_DTYPE_BYTES[st_dtype])
        b = _header_rank_elements(name, shape, m, tp) * elem
        layer = layer_of(name)
        if layer is not None:
            per_stage[stage_of[layer]] += b
        elif is_encoder(name) or "embed" in name or "wte" in name:
            per_stage[0] += b
            if pp > 1 and m.tie_word_embeddings and not is_encoder(name):
                per_stage[-1] += b
        else:
            per_stage[-1] += b
    rope = rope_cache_bytes(m, dtype)
    return [w + rope for w in per_stage]
