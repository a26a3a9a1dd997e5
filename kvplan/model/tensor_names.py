"""What a checkpoint tensor's name and dtype say (pure; no file reading): safetensors dtypes,
scales, layer index, vision/audio encoders, tensors vLLM does not load. Shared by the header
reader (checkpoint.py) and the weight math (weights.py)."""

from __future__ import annotations

import re

from ..specs import ModelSpec

SAFETENSORS_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}


_ENCODER = re.compile(r"vision|visual|image|mm_projector|multi_modal_projector|audio")
_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")
_TOWER_LAYER = re.compile(r"vision_tower\..*?layers\.(\d+)\.")


def is_scale(name: str) -> bool:
    """Quantization side tensors (scales, zero points, act-order indices): not parameters."""
    leaf = name.rsplit(".", 1)[-1]
    return "scale" in leaf or leaf in {"qzeros", "g_idx", "zeros", "weight_zero_point"}


def layer_of(name: str) -> int | None:
    """Decoder layer index of a language-model tensor; None for embeddings, heads, encoders."""
    if _ENCODER.search(name):
        return None
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def is_encoder(name: str) -> bool:
    return bool(_ENCODER.search(name))


# decoder families (fam-a): GPT-2-era checkpoints store the causal mask as h.N.attn.bias (and GPT-J
# a masked_bias scalar); vLLM skips them at load (vllm/model_executor/models/gpt2.py,
# gpt_bigcode.py, gpt_j.py load_weights). c_attn.bias is a real weight and does not match.
ATTN_MASK_BUFFER_FAMILIES = {"gpt2", "gpt_bigcode", "gptj"}


def skipped_by_vllm(name: str, m: ModelSpec) -> bool:
    """Tensors in the checkpoint that vLLM does not keep: rotary inv_freq buffers, llava CLIP
    tower layers past vision_feature_layer (and its post-LayerNorm), layers past
    num_hidden_layers (DeepSeek-V3's MTP layer, loaded only for speculative decoding), and a
    stored lm_head when the embeddings are tied."""
    if name.endswith("rotary_emb.inv_freq"):
        return True
    v = m.vision
    if v is not None and v.kind == "clip" and "vision_tower" in name:
        # llava-style CLIP towers: vLLM builds only the layers up to vision_feature_layer and
        # no post_layernorm (vllm/model_executor/models/llava.py init_vision_tower_for_llava)
        tower_layer = _TOWER_LAYER.search(name)
        if "post_layernorm" in name or (tower_layer and int(tower_layer.group(1)) >= v.num_layers):
            return True
    if m.model_type in ATTN_MASK_BUFFER_FAMILIES and name.endswith(
            (".attn.bias", ".attn.masked_bias")):
        return True
    layer = layer_of(name)
    if layer is not None and layer >= m.num_layers:
        return True
    return m.tie_word_embeddings and name.split(".")[-2:-1] == ["lm_head"]
