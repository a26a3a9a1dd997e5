"""The vision tower of a vision-language wrapper (Gemma 3, Llama 4, Qwen-VL, LLaVA, Mistral 3,
Idefics3, Phi-3-vision) → VisionSpec, as vLLM builds each (vllm/model_executor/models/<file>.py).
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InvalidConfigError
from ..sources.limits import short
from ..specs import VisionSpec
from .families import VISION_MODEL_TYPES
from .fields import Reader
from .multimodal import PHI3V_PROFILE_IMAGE, max_tokens_per_image, phi3v_tokens

# CLIPVisionConfig defaults (transformers models/clip/configuration_clip.py).
CLIP_VISION_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                        "image_size": 224, "patch_size": 32, "num_channels": 3}
# Qwen2-VL / Qwen2.5-VL image processor: the published preprocessor_config.json of
# Qwen/Qwen2-VL-7B-Instruct and Qwen/Qwen2.5-VL-*-Instruct sets max_pixels 12845056
# (= 3584²); vLLM's get_image_size_with_most_features resizes a huge image to that area.
# Qwen3-VL's sets size.longest_edge 16777216 (= 4096², read by vLLM as the pixel budget).
QWEN_VL_MAX_PIXELS = {"qwen2_vl": 12_845_056, "qwen2_5_vl": 12_845_056, "qwen3_vl": 16_777_216,
                      "qwen3_vl_moe": 16_777_216}
# Idefics3ImageProcessor defaults (transformers): tiles of max_image_size 364 up to a longest
# edge of 4 × 364, plus one global tile (vLLM idefics3.py get_num_patches: grid_w·grid_h + 1).
IDEFICS3_MAX_TILES_PER_SIDE = 4


def _layer_index(feature_layer: int, num_layers: int) -> int:
    """vLLM llava.py get_layer_index: a negative vision_feature_layer counts from the end."""
    return num_layers + feature_layer + 1 if feature_layer < 0 else feature_layer


def _llava_next_max_tokens(pinpoints: Any, image_size: int, patch_size: int, path: str) -> int:
    """Tokens of the largest LLaVA-NeXT image (vLLM llava_next.py get_num_image_tokens over
    image_grid_pinpoints): base (image_size/patch)² features ("default" strategy drops CLS)
    + the grid's (rows·side) × (cols·side) features + one newline per feature row. Images
    matching a pinpoint's aspect ratio lose no padding."""
    if not (isinstance(pinpoints, list) and pinpoints and all(
            isinstance(p, list) and len(p) == 2
            and all(isinstance(v, int) and 0 < v <= 2**16 for v in p) for p in pinpoints)):
        raise InvalidConfigError(
            f"expected a list of [height, width] pairs, got {short(pinpoints)}",
            path=path, field="image_grid_pinpoints")
    side = image_size // patch_size
    best = 0
    for height, width in pinpoints:
        rows, cols = side * (height // image_size), side * (width // image_size)
        best = max(best, side * side + rows * cols + rows)
    return best


def _phi3v_vision(raw: dict[str, Any], text_hidden: int, path: str) -> VisionSpec:
    """Phi-3-vision / Phi-3.5-vision (vllm/model_executor/models/phi3v.py, main @ 3bc38489):
    `img_processor` and `embd_layer` replace vision_config. The tower is vLLM's hard-coded
    CLIP ViT-L/14-336 (CLIP_VIT_LARGE_PATCH14_336_CONFIG: width 1024, MLP 4096, 24 layers,
    patch 14, image 336) built up to img_processor.layer_idx (default −2: 23 layers, no
    post-LayerNorm); the HD projector is glb_GN and sub_GN (4 · image_dim_out each) and
    img_projection = Linear(4 · image_dim_out → hidden) + GELU + Linear(hidden → hidden), both
    plain nn.Linear with biases (replicated on every TP rank). Crops per image: the config's
    num_crops when it has one, else 16 — the HD transform's default maximum (vLLM ≤ 0.5
    getattr(hf_config, "num_crops", 16)); vLLM ≥ 0.6 asks the HF processor, whose num_crops
    comes from preprocessor_config.json, which kvplan does not read."""
    ip, el = raw.get("img_processor"), raw.get("embd_layer")
    for field, value in (("img_processor", ip), ("embd_layer", el)):
        if not isinstance(value, dict):
            raise InvalidConfigError(f"expected an object, got {short(value)}", path=path,
                                     field=field)
    assert isinstance(ip, dict) and isinstance(el, dict)
    r = Reader(ip, path)
    dim_out = r.int("image_dim_out")
    r.int("num_img_tokens")  # required by vLLM's Phi3HDImageEmbedding
    layer_idx = ip.get("layer_idx", -2)
    if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or not -24 <= layer_idx < 24:
        raise InvalidConfigError(f"expected a CLIP layer index within ±24, got {short(layer_idx)}",
                                 path=path, field="img_processor.layer_idx")
    if not (el.get("use_hd_transform") and el.get("with_learnable_separator")):
        raise InvalidConfigError("vLLM's phi3v.py asserts use_hd_transform and "
                                 "with_learnable_separator", path=path, field="embd_layer")
    crops = Reader(raw, path).int("num_crops", default=16)
    assert dim_out and crops
    kept = 24 + layer_idx + 1 if layer_idx < 0 else layer_idx + 1  # _init_img_processor
    return VisionSpec(
        kind="phi3v", hidden_size=1024, intermediate_size=4096, num_layers=kept,
        config_num_layers=24 if kept < 24 else None, patch_size=14, image_size=336,
        text_hidden_size=text_hidden, projector_input_dim=4 * dim_out, num_crops=crops,
        max_tokens_per_image=phi3v_tokens(*PHI3V_PROFILE_IMAGE, crops))


def _siglip_llama4(raw: dict[str, Any], vc: dict[str, Any], model_type: str, text_hidden: int,
                   path: str) -> VisionSpec | None:
    """Gemma 3 (SigLIP) and Llama 4 towers: sizes from vision_config."""
    kind = "siglip" if model_type == "gemma3" else "llama4"
    return VisionSpec(
        kind=kind,
        hidden_size=vc["hidden_size"], intermediate_size=vc["intermediate_size"],
        num_layers=vc["num_hidden_layers"], patch_size=vc["patch_size"],
        image_size=vc["image_size"], num_channels=vc.get("num_channels", 3),
        text_hidden_size=text_hidden,
        projector_input_dim=vc.get("projector_input_dim"),
        projector_output_dim=vc.get("projector_output_dim"),
        output_dim=vc.get("vision_output_dim"),
        pixel_shuffle_ratio=vc.get("pixel_shuffle_ratio"),
        max_tokens_per_image=max_tokens_per_image(kind, vc, raw))


def _qwen_vl(raw: dict[str, Any], vc: dict[str, Any], model_type: str, text_hidden: int,
             path: str) -> VisionSpec | None:
    """Qwen2-VL, Qwen2.5-VL, Qwen3-VL: a ViT over merged patches at the processor's pixel
    budget."""
    # Qwen2VLVisionConfig: embed_dim is the ViT width, hidden_size the LM's; Qwen2.5-VL
    # and Qwen3-VL: hidden_size is the ViT width, out_hidden_size the LM's.
    vr = Reader(vc, path)
    qwen3 = model_type.startswith("qwen3")
    merge, patch = vc.get("spatial_merge_size", 2), vc.get("patch_size", 16 if qwen3 else 14)
    unit = patch * merge
    side = math.isqrt(QWEN_VL_MAX_PIXELS[model_type]) // unit * unit  # smart_resize
    if model_type == "qwen2_vl":
        width = vc.get("embed_dim", 1280)
        ratio = vr.float("mlp_ratio", lo=0.0, hi=64.0) or 4.0
        inter = int(width * ratio)
    else:
        width, inter = vc.get("hidden_size", 1280), vc["intermediate_size"]
    deepstack = vr.int_list("deepstack_visual_indexes") if qwen3 else []
    return VisionSpec(
        kind="qwen3_vl" if qwen3 else model_type, hidden_size=width, intermediate_size=inter,
        num_layers=vc.get("depth", 32), patch_size=patch, image_size=side,
        num_channels=vc.get("in_channels") or vc.get("in_chans") or 3,
        text_hidden_size=text_hidden, spatial_merge_size=merge,
        temporal_patch_size=vc.get("temporal_patch_size", 2),
        num_position_embeddings=vc.get("num_position_embeddings", 2304) if qwen3 else 0,
        deepstack_mergers=len(deepstack),
        max_tokens_per_image=(side // patch) ** 2 // merge ** 2)


def _llava(raw: dict[str, Any], vc: dict[str, Any], model_type: str, text_hidden: int,
           path: str) -> VisionSpec | None:
    """LLaVA, LLaVA-NeXT, Mistral 3: a CLIP (or Pixtral) tower up to vision_feature_layer."""
    pixtral = vc.get("model_type") == "pixtral"
    if not pixtral and vc.get("model_type", "clip_vision_model") != "clip_vision_model":
        return None  # other towers (SigLIP llava variants) are not modelled
    vr, top = Reader(vc, path), Reader(raw, path)
    vc = {**CLIP_VISION_DEFAULTS, **vc}
    layers = vr.check_int("num_hidden_layers", vc["num_hidden_layers"],
                          where="vision_config.num_hidden_layers")
    feature = raw.get("vision_feature_layer", -1 if model_type == "mistral3" else -2)
    features = feature if isinstance(feature, list) else [feature]
    if not features or not all(isinstance(f, int) and not isinstance(f, bool)
                               and -layers <= f <= layers for f in features):
        raise InvalidConfigError(
            f"expected a layer index within ±{layers}, got {short(feature)}",
            path=path, field="vision_feature_layer")
    kept = max(_layer_index(f, layers) for f in features)
    if kept < 1:
        raise InvalidConfigError("selects no encoder layer", path=path,
                                 field="vision_feature_layer")
    image, patch = vc["image_size"], vc["patch_size"]
    merge = top.int("spatial_merge_size", default=2) if model_type == "mistral3" else 1
    if pixtral:  # rows of merged patches, each ended by [IMG_BREAK] (vLLM mistral3.py)
        rows = -(-image // (patch * merge))
        tokens = rows * (rows + 1)
    elif model_type == "llava_next":
        tokens = _llava_next_max_tokens(raw.get("image_grid_pinpoints"), image, patch, path)
    else:  # CLIP features without the CLS token ("default" select strategy)
        full = raw.get("vision_feature_select_strategy") == "full"
        tokens = (image // patch) ** 2 + int(full)
    return VisionSpec(
        kind="pixtral" if pixtral else "clip", hidden_size=vc["hidden_size"],
        intermediate_size=vc["intermediate_size"], num_layers=kept,
        config_num_layers=layers if kept < layers else None, patch_size=patch,
        image_size=image, num_channels=vc.get("num_channels", 3),
        text_hidden_size=text_hidden, spatial_merge_size=merge,
        projector_bias=top.bool("multimodal_projector_bias", True),
        image_newline=model_type == "llava_next", max_tokens_per_image=tokens)


def _idefics3(raw: dict[str, Any], vc: dict[str, Any], model_type: str, text_hidden: int,
              path: str) -> VisionSpec | None:
    """Idefics3: SigLIP-style tower, pixel-shuffle connector by scale_factor."""
    scale = Reader(raw, path).int("scale_factor", default=2)
    image, patch = vc.get("image_size", 224), vc.get("patch_size", 32)
    per_tile = (image // patch) ** 2 // scale ** 2
    return VisionSpec(
        kind="idefics3", hidden_size=vc.get("hidden_size", 768),
        intermediate_size=vc.get("intermediate_size", 3072),
        num_layers=vc.get("num_hidden_layers", 12), patch_size=patch, image_size=image,
        num_channels=vc.get("num_channels", 3), text_hidden_size=text_hidden,
        spatial_merge_size=scale, projector_bias=False,
        max_tokens_per_image=(IDEFICS3_MAX_TILES_PER_SIDE ** 2 + 1) * per_tile)


TOWERS = {"gemma3": _siglip_llama4, "llama4": _siglip_llama4,
          **{t: _qwen_vl for t in QWEN_VL_MAX_PIXELS},
          "llava": _llava, "llava_next": _llava, "mistral3": _llava, "idefics3": _idefics3}


def vision(raw: dict[str, Any], model_type: str, text_hidden: int,
           path: str = "config.json") -> VisionSpec | None:
    """The wrapper's vision tower (None: not a vision-language wrapper kvplan counts). Every
    integer in vision_config is bounded first; a missing size names its field."""
    if model_type == "phi3_v":
        return _phi3v_vision(raw, text_hidden, path)
    vc = raw.get("vision_config")
    if not isinstance(vc, dict) or model_type not in VISION_MODEL_TYPES:
        return None
    vr = Reader(vc, path)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size",
                "num_channels", "projector_input_dim", "projector_output_dim", "vision_output_dim",
                "depth", "embed_dim", "num_heads", "mlp_ratio", "in_chans", "in_channels",
                "out_hidden_size", "spatial_merge_size", "temporal_patch_size",
                "num_position_embeddings"):
        if vc.get(key) is not None:
            vr.check_int(key, vc[key], where=f"vision_config.{key}")
    vr.float("pixel_shuffle_ratio", lo=0.0, hi=1.0)
    tower = TOWERS.get(model_type, _idefics3)
    try:
        return tower(raw, vc, model_type, text_hidden, path)
    except KeyError as e:
        raise InvalidConfigError("missing (needed to count the vision tower)", path=path,
                                 field=f"vision_config.{e.args[0]}") from None
