"""Images in a vision-language model's requests: the tokens one image occupies in the LM
sequence, and what vLLM's multimodal profile run holds in GPU memory (docs/features.md).

Pure arithmetic over VisionSpec; no I/O. vLLM file paths are repo paths, read in the 0.11.0
release unless stated otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..specs import VisionSpec

# vLLM's default --limit-mm-per-prompt count per modality: 999 in V1, 1 in V0
# (vllm/config/multimodal.py get_limit_per_prompt, 0.11.0; main keeps 999).
DEFAULT_LIMIT_V1 = 999

# Gemma 3: the processor replaces each <start_of_image> with full_image_sequence =
# "\n\n" <boi> mm_tokens_per_image × <image_soft_token> <eoi> "\n\n" (transformers
# processing_gemma3.py Gemma3Processor; "\n\n" is one token, id 108, in the Gemma tokenizer), so
# one image is mm_tokens_per_image + 4 tokens; vLLM counts the whole placeholder
# (vllm/model_executor/models/gemma3_mm.py get_image_repl; vllm/multimodal/profiling.py
# get_mm_max_contiguous_tokens). Pan-and-scan crops are off by default (do_pan_and_scan False).
GEMMA3_EXTRA_TOKENS = 4
GEMMA3_DEFAULT_TOKENS = 256  # transformers Gemma3Config mm_tokens_per_image default
# Llama 4: the image processor's max_patches (tiles) default; vLLM's largest dummy image is
# max_patches × 1 tiles (vllm/model_executor/models/mllama4.py get_image_size_with_most_features,
# get_max_num_tiles; transformers Llama4ImageProcessor max_patches=16).
LLAMA4_MAX_TILES = 16


def _llama4_tokens_per_tile(image_size: int, patch_size: int, pixel_shuffle_ratio: float) -> int:
    """(image_size / patch_size)² / round(1 / ratio²) (mllama4.py get_patch_per_chunk): 144 for
    336-pixel tiles, 14-pixel patches and ratio 0.5."""
    return (image_size // patch_size) ** 2 // int(round(1.0 / pixel_shuffle_ratio ** 2))


# Phi-3-vision / Phi-3.5-vision (vllm/model_executor/models/phi3v.py, main @ 3bc38489): vLLM
# profiles with an 8000 × 50 image (get_image_size_with_most_features, "h:w = 16:1") and counts
# its tokens with the HF processor's calc_num_image_tokens_from_image_size (the model repo's
# processing_phi3_v.py / image_processing_phi3_v.py; the same formula as vLLM ≤ 0.5's
# get_phi3v_image_feature_size). PHI3V_CROP_PIXELS is the CLIP-336 crop side; each crop gives
# 24 × 24 patches merged 2 × 2 into 12 × 12 = 144 features.
PHI3V_CROP_PIXELS = 336
PHI3V_FEATURES_PER_CROP = 144
PHI3V_FEATURE_ROWS_PER_CROP = 12
PHI3V_PROFILE_IMAGE = (50, 8000)  # (width, height)


def phi3v_hd_size(width: int, height: int, num_crops: int) -> tuple[int, int]:
    """The HD transform's padded (width, height) (image_processing_phi3_v.py HD_transform):
    the longer side scaled to the largest `scale` crops with scale · ceil(scale / ratio) ≤
    num_crops, the shorter side int(longer / ratio), then padded up to a multiple of 336."""
    transposed = width < height
    if transposed:
        width, height = height, width
    ratio = width / height
    scale = 1
    while scale * math.ceil(scale / ratio) <= num_crops:
        scale += 1
    scale -= 1
    new_w = scale * PHI3V_CROP_PIXELS
    new_h = int(new_w / ratio)
    new_h = math.ceil(new_h / PHI3V_CROP_PIXELS) * PHI3V_CROP_PIXELS
    return (new_h, new_w) if transposed else (new_w, new_h)


def phi3v_tokens(width: int, height: int, num_crops: int) -> int:
    """LM tokens of one image (calc_num_image_tokens_from_image_size): the h × w crops and the
    global crop at 144 features each, one separator (glb_GN), one newline (sub_GN) per feature
    row of the crops and of the global crop: (h·w + 1)·144 + 1 + (h + 1)·12, h and w in crops."""
    w, h = phi3v_hd_size(width, height, num_crops)
    rows, cols = h // PHI3V_CROP_PIXELS, w // PHI3V_CROP_PIXELS
    return ((rows * cols + 1) * PHI3V_FEATURES_PER_CROP + 1
            + (rows + 1) * PHI3V_FEATURE_ROWS_PER_CROP)


def max_tokens_per_image(kind: str, vision_config: dict[str, Any],
                         config: dict[str, Any]) -> int | None:
    """Tokens one image of the largest default size occupies in the LM sequence.

    gemma3 (siglip): mm_tokens_per_image + 4 (see GEMMA3_EXTRA_TOKENS) = 260.
    llama4: a T×1 tiling (T = 16) + the global tile, as transformers Llama4Processor
    _prompt_split_image writes it: <|image_start|> + T × (P patches + <|tile_y_separator|>)
    + <|image|> + P patches + <|image_end|> = 1 + T(P + 1) + 1 + P + 1 = 2467 for P = 144.
    None for a kind not known here."""
    if kind == "siglip":
        n = config.get("mm_tokens_per_image", GEMMA3_DEFAULT_TOKENS)
        return int(n) + GEMMA3_EXTRA_TOKENS if isinstance(n, int) and n > 0 else None
    if kind == "llama4":
        ratio = vision_config.get("pixel_shuffle_ratio")
        size, patch = vision_config.get("image_size"), vision_config.get("patch_size")
        if not ratio or not isinstance(size, int) or not isinstance(patch, int) or patch <= 0:
            return None
        p = _llama4_tokens_per_tile(size, patch, ratio)
        return 1 + LLAMA4_MAX_TILES * (p + 1) + 1 + p + 1
    return None


def embeds_per_image(v: VisionSpec) -> int:
    """Encoder output rows of one largest image (the placeholder minus its separator tokens):
    gemma3 mm_tokens_per_image; llama4 (T + 1) tiles × P. Other kinds: max_tokens_per_image
    (an upper bound)."""
    tokens = v.max_tokens_per_image or 0
    if v.kind == "siglip":
        return max(0, tokens - GEMMA3_EXTRA_TOKENS)
    if v.kind == "llama4" and v.pixel_shuffle_ratio:
        return (LLAMA4_MAX_TILES + 1) * _llama4_tokens_per_tile(v.image_size, v.patch_size,
                                                               v.pixel_shuffle_ratio)
    return tokens


def pixels_per_image(v: VisionSpec) -> int:
    """Pixel values of one largest image after the processor: channels × image_size² per tile;
    llama4 has T + 1 tiles, gemma3 one 896² image (no pan-and-scan), phi3v num_crops + 1 crops
    of 336² (the processor pads every image to num_crops + 1)."""
    tiles = (LLAMA4_MAX_TILES + 1 if v.kind == "llama4"
             else v.num_crops + 1 if v.kind == "phi3v" else 1)  # phi3v: crops + the global one
    return tiles * v.num_channels * v.image_size ** 2


@dataclass(frozen=True)
class EncoderProfile:
    """What vLLM's profile run does for a multimodal model (V1)."""

    limit_per_prompt: int
    max_tokens_per_item: int
    embeds_per_item: int
    encoder_budget_tokens: int
    items: int
    held_bytes: int


def encoder_profile(v: VisionSpec, *, limit: int, max_num_batched_tokens: int, max_num_seqs: int,
                    max_model_len: int, text_hidden_size: int, dtype_bytes: int,
                    expand_to_budget: bool) -> EncoderProfile:
    """The encoder part of vLLM V1's profile run (vllm/v1/worker/gpu_model_runner.py profile_run;
    vllm/v1/worker/utils.py MultiModalBudget; vllm/v1/core/encoder_cache_manager.py
    compute_mm_encoder_budget; the same formulas in vllm/multimodal/encoder_budget.py on main):

        budget  = max(max_num_batched_tokens, M)       (compute budget = cache size, M = max tokens
                                                         per item; 0 when the limit is 0)
        per_prompt = max(1, min(limit, max_model_len // M))
        items   = max(1, min(budget // M, max_num_seqs × per_prompt))     (chunked prefill on)
        held    = items × (E × hidden + pixels) × dtype bytes

    The dummy items' encoder outputs (E rows of the LM's hidden size each) stay in the encoder
    cache, and the batched pixel inputs (cast to the model dtype: vllm/multimodal/processing.py)
    stay referenced, through the LM's dummy forward and sampler run, so they add to the profiled
    peak and lower the KV budget. In 0.11.0 each output shorter than the budget is first copied
    into a zero tensor of `budget` rows (held = items × budget × hidden, `expand_to_budget`);
    the 0.19.0 start-up logs fit the unexpanded outputs (benchmarks/data/vllm_llmd_extra.csv)."""
    m = v.max_tokens_per_image or 0
    if limit <= 0 or m <= 0:
        return EncoderProfile(max(0, limit), m, 0, 0, 0, 0)
    e = embeds_per_image(v)
    budget = max(max_num_batched_tokens, m)
    per_prompt = max(1, min(limit, max_model_len // m))
    items = max(1, min(budget // m, max_num_seqs * per_prompt))
    rows = budget if expand_to_budget and e < budget else e
    held = items * (rows * text_hidden_size + pixels_per_image(v)) * dtype_bytes
    return EncoderProfile(limit, m, e, budget, items, held)
